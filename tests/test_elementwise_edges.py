"""Elementwise nn.functional ops on the values where formulas break down (overflow,
the cut-offs of fast approximations, signed zeros, +-inf, NaN), in float32 and
float64, against PyTorch (`tools/make_fixtures.py`, kind "edges"); and their
behaviour on 0-d, empty and integer inputs."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import cases, load

EDGE_CASES = cases("edges")


def test_edge_fixtures_exist() -> None:
    for op in ["logsigmoid", "silu", "mish", "hardsigmoid", "hardswish", "elu", "selu", "celu", "softplus", "leaky_relu", "gelu_tanh"]:
        assert f"{op}_edges" in EDGE_CASES


@pytest.mark.parametrize("name", EDGE_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_edges_match_torch(name: str, dtype: str) -> None:
    t, meta = load(name)
    fn = getattr(F, meta["layer"])
    x = t[f"input.{dtype}"].clone().requires_grad_(True)
    y = fn(x, **meta["kwargs"])
    assert y.dtype == x.dtype
    y.sum().backward()
    for got, want, what in ((y, t[f"output.{dtype}"], "output"), (x.grad, t[f"grad.input.{dtype}"], "grad")):
        g, w = np.asarray(got.detach()), np.asarray(want)
        # Same NaNs, same infinities (with their signs), the rest within f32/f64 tolerance.
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{name} {dtype} {what}: NaN positions")
        np.testing.assert_array_equal(np.isinf(g) & (g > 0), np.isinf(w) & (w > 0), err_msg=f"{name} {dtype} {what}: +inf")
        np.testing.assert_array_equal(np.isinf(g) & (g < 0), np.isinf(w) & (w < 0), err_msg=f"{name} {dtype} {what}: -inf")
        finite = np.isfinite(w)
        tol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(g[finite], w[finite], atol=tol, rtol=tol, err_msg=f"{name} {dtype} {what}")


def test_logsigmoid_values_and_layer() -> None:
    x = cp.tensor([-2.0, 0.0, 3.0])
    want = np.log(1.0 / (1.0 + np.exp(-np.array([-2.0, 0.0, 3.0]))))
    np.testing.assert_allclose(np.asarray(F.logsigmoid(x)), want, atol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.LogSigmoid()(x)), want, atol=1e-6)
    assert repr(nn.LogSigmoid()) == "LogSigmoid()"


def test_logsigmoid_zero_dim_and_empty() -> None:
    y = F.logsigmoid(cp.tensor(0.0))
    assert y.shape == () and abs(y.item() - float(np.log(0.5))) < 1e-7
    e = F.logsigmoid(cp.zeros(0, 3))
    assert e.shape == (0, 3) and e.dtype == cp.float32


def test_logsigmoid_large_input_is_multithreaded_and_exact() -> None:
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(300_000) * 20).astype(np.float64)
    x = cp.from_numpy(a).requires_grad_(True)
    y = F.logsigmoid(x)
    want = np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a)))
    np.testing.assert_allclose(np.asarray(y.detach()), want, rtol=1e-13, atol=1e-13)
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 1.0 / (1.0 + np.exp(a)), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [cp.int64, cp.int32, cp.uint8, cp.bool])
def test_logsigmoid_refuses_non_float_as_torch(dtype: cp.dtype) -> None:
    # PyTorch: "log_sigmoid_forward" not implemented for 'Long' (a RuntimeError there;
    # a DTypeError, which is a TypeError, here), and the message names op and dtype.
    with pytest.raises(cp.DTypeError, match=rf"logsigmoid: expected a floating point input, got {dtype.name}"):
        F.logsigmoid(cp.tensor([1, 0, 1], dtype=dtype))


def test_logsigmoid_refuses_non_tensor() -> None:
    with pytest.raises(TypeError):
        F.logsigmoid([1.0, 2.0])  # type: ignore[arg-type]


def _sig(v: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * v))


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_vector_forms_follow_the_float64_formulas_on_long_inputs(dtype) -> None:
    # The float32 kernels run vector polynomials (exp, expm1, log1p, tanh) over many
    # elements; float64 runs libm. Both against PyTorch's formulas evaluated in float64
    # NumPy, values and input gradients, over |x| up to 100.
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.standard_normal(4000) * 3, rng.uniform(-100, 100, 2000), rng.standard_normal(1000) * 1e-4])
    a = cp.tensor(a, dtype=dtype).numpy().astype(np.float64)  # the values the kernels see
    sp1 = np.logaddexp(0.0, a)
    cases = {
        "softplus": (lambda x: F.softplus(x), np.where(a > 20, a, sp1), np.where(a > 20, 1.0, _sig(a))),
        "softplus_beta": (
            lambda x: F.softplus(x, beta=2.0, threshold=5.0),
            np.where(2 * a > 5, a, np.logaddexp(0.0, 2 * a) / 2),
            np.where(2 * a > 5, 1.0, _sig(2 * a)),
        ),
        "mish": (F.mish, a * np.tanh(sp1), np.tanh(sp1) + a * _sig(a) * (1 - np.tanh(sp1) ** 2)),
        "elu": (F.elu, np.where(a > 0, a, np.expm1(a)), np.where(a > 0, 1.0, np.exp(a))),
        "celu": (lambda x: F.celu(x, alpha=0.5), np.where(a > 0, a, 0.5 * np.expm1(a / 0.5)), np.where(a > 0, 1.0, np.exp(a / 0.5))),
        "logsigmoid": (F.logsigmoid, np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a))), _sig(-a)),
    }
    tol = 1e-5 if dtype == cp.float32 else 1e-12  # the f32 elementwise tolerance
    for name, (fn, want, dwant) in cases.items():
        x = cp.tensor(a, dtype=dtype, requires_grad=True)
        y = fn(x)
        y.sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=tol, atol=tol, err_msg=name)
        np.testing.assert_allclose(x.grad.numpy(), dwant, rtol=tol, atol=tol, err_msg=f"{name} grad")
