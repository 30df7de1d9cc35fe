"""The activation family behind `_core._activation` (src/layers/pointwise.rs): the
in-place forms, half precision, non-float inputs and bad arguments. Values and
gradients against PyTorch are in the layer fixtures (tests/test_nn_layers.py) and
the edge-value fixtures (tests/test_elementwise_edges.py)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F

INPLACE: list[tuple[str, Callable[..., cp.Tensor]]] = [
    ("relu", F.relu),
    ("relu6", F.relu6),
    ("hardtanh", F.hardtanh),
    ("leaky_relu", F.leaky_relu),
    ("elu", F.elu),
    ("selu", F.selu),
    ("celu", F.celu),
    ("silu", F.silu),
    ("mish", F.mish),
    ("hardsigmoid", F.hardsigmoid),
    ("hardswish", F.hardswish),
    ("rrelu", F.rrelu),
]


@pytest.mark.parametrize("name,fn", INPLACE)
def test_inplace_writes_into_the_input_and_returns_it(name: str, fn: Callable[..., cp.Tensor]) -> None:
    x = cp.tensor([-2.0, -0.5, 0.25, 4.0])
    want = np.asarray(fn(x.clone()))
    out = fn(x, inplace=True)
    assert out is x
    np.testing.assert_array_equal(np.asarray(x), want)


@pytest.mark.parametrize("name,fn", INPLACE)
def test_inplace_in_the_graph_keeps_gradients(name: str, fn: Callable[..., cp.Tensor]) -> None:
    """On a non-leaf the write is recorded: the gradient is the out-of-place one."""
    grads = []
    for inplace in (False, True):
        a = cp.tensor([-2.0, -0.5, 0.25, 4.0], requires_grad=True)
        h = a * 1.5
        y = fn(h, inplace=inplace)
        (y * cp.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
        grads.append(np.asarray(a.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


def test_inplace_on_a_leaf_that_requires_grad_raises() -> None:
    x = cp.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        F.silu(x, inplace=True)


def test_layers_pass_their_inplace_flag() -> None:
    x = cp.tensor([-1.0, 2.0])
    assert nn.ReLU(inplace=True)(x) is x and x.tolist() == [0.0, 2.0]
    y = cp.tensor([-1.0, 2.0])
    out = nn.LeakyReLU(0.5, inplace=True)(y)
    assert out is y and y.tolist() == [-0.5, 2.0]
    z = cp.tensor([-1.0, 2.0])
    assert nn.SiLU()(z) is not z and z.tolist() == [-1.0, 2.0]


ACTS: list[tuple[str, Callable[[cp.Tensor], cp.Tensor]]] = [
    ("silu", F.silu),
    ("mish", F.mish),
    ("hardsigmoid", F.hardsigmoid),
    ("hardswish", F.hardswish),
    ("elu", lambda x: F.elu(x, 0.5)),
    ("selu", F.selu),
    ("celu", lambda x: F.celu(x, 2.0)),
    ("softplus", lambda x: F.softplus(x, 2.0, 3.0)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.3)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
]


@pytest.mark.parametrize("dtype", [cp.float16, cp.bfloat16])
@pytest.mark.parametrize("name,fn", ACTS)
def test_half_precision_computes_in_float32(name: str, fn: Callable[[cp.Tensor], cp.Tensor], dtype: Any) -> None:
    xs = np.linspace(-5, 5, 41).astype(np.float32)
    x = cp.from_numpy(xs).to(dtype)
    y = fn(x)
    assert y.dtype == dtype
    ref = np.asarray(fn(x.float()))
    np.testing.assert_allclose(np.asarray(y.float()), ref, rtol=2e-2, atol=2e-2)
    xg = x.clone().requires_grad_(True)
    fn(xg).float().sum().backward()
    assert xg.grad is not None and xg.grad.dtype == dtype and np.isfinite(np.asarray(xg.grad.float())).all()


@pytest.mark.parametrize("name,fn", ACTS)
def test_zero_dim_empty_and_large(name: str, fn: Callable[[cp.Tensor], cp.Tensor]) -> None:
    """0-d and empty inputs keep their shape; a large input (split over threads)
    gives what its small slices give."""
    assert fn(cp.tensor(0.5)).shape == ()
    assert fn(cp.zeros(0, 3)).shape == (0, 3)
    rng = np.random.default_rng(1)
    a = cp.from_numpy((rng.standard_normal(300_000) * 4).astype(np.float32))
    big = np.asarray(fn(a))
    np.testing.assert_array_equal(big[:1000], np.asarray(fn(a[:1000])))


@pytest.mark.parametrize("name,fn", ACTS)
@pytest.mark.parametrize("dtype", [cp.int64, cp.bool])
def test_non_float_input_raises(name: str, fn: Callable[[cp.Tensor], cp.Tensor], dtype: Any) -> None:
    with pytest.raises(cp.DTypeError, match=f"expected a floating point input, got {dtype.name}"):
        fn(cp.tensor([1, 0], dtype=dtype))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="celu.*alpha"):
        F.celu(cp.ones(2), alpha=0.0)
    with pytest.raises(ValueError, match="unknown activation"):
        cp._core._activation(cp.ones(2), "swish")
    with pytest.raises(TypeError):
        F.silu([1.0, 2.0])  # type: ignore[arg-type]
