"""The composed math ops (python/candle_py/_composed_math.py) against PyTorch: the cases
of tests/math_cases.py compared with tests/fixtures/math (made by
tools/make_fixtures_math.py), then the messages of their errors."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from math_cases import CASES

META, ARRAYS = load_fixture("math")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_every_name_is_public_with_its_methods() -> None:
    for name in cp._composed_math.__all__:
        assert name in cp.__all__ and callable(getattr(cp, name)) and getattr(cp, name).__doc__, name
    for name in ("hypot", "xlogy", "logit", "sinc", "renorm", "addcmul", "nan_to_num", "float_power", "fix", "sgn"):
        assert callable(getattr(cp.Tensor, name)) and callable(getattr(cp.Tensor, name + "_")), name
    assert not hasattr(cp.Tensor, "isin") and not hasattr(cp.Tensor, "var_mean") and not hasattr(cp.Tensor, "positive_")


def test_shape_errors_name_the_op_and_shapes() -> None:
    with pytest.raises(cp.ShapeError, match=r"addcmul: shapes \[2\], \[3\], \[2\] cannot be broadcast together"):
        cp.addcmul(cp.ones(2), cp.ones(3), cp.ones(2))
    with pytest.raises(cp.ShapeError, match=r"hypot: shapes \[2, 3\], \[4\] cannot be broadcast together"):
        cp.hypot(cp.ones(2, 3), cp.ones(4))
    with pytest.raises(cp.ShapeError, match=r"hypot_: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        cp.ones(3).hypot_(cp.ones(2, 3))
    with pytest.raises(cp.ShapeError, match=r"renorm: input needs at least 2 dimensions, got 1 dimensions \(shape \[3\]\)"):
        cp.renorm(cp.ones(3), 2, 0, 1.0)
    with pytest.raises(cp.ShapeError, match="diff: expects input to be at least one-dimensional"):
        cp.diff(cp.tensor(1.0))
    with pytest.raises(cp.ShapeError, match=r"aminmax\(\): cannot compute aminmax of an empty tensor of shape \[0\]"):
        cp.aminmax(cp.zeros(0))
    with pytest.raises(IndexError, match=r"aminmax: expected reduction dim 0 to have non-zero size \(input of shape \[0, 3\]\)"):
        cp.aminmax(cp.zeros(0, 3), dim=0)


def test_dtype_errors_name_the_op_and_dtypes() -> None:
    with pytest.raises(
        cp.DTypeError, match=r"addcdiv: integer division is not supported \(tensor1 candle_py.int64, tensor2 candle_py.int64\)"
    ):
        cp.addcdiv(cp.ones(2), cp.tensor([1, 2]), cp.tensor([2, 2]))
    with pytest.raises(cp.DTypeError, match=r"logaddexp: not implemented for candle_py.int64"):
        cp.logaddexp(cp.tensor([1]), cp.tensor([2]))
    with pytest.raises(
        cp.DTypeError, match=r"heaviside: input \(candle_py.float32\) and values \(candle_py.float64\) must have the same dtype"
    ):
        cp.heaviside(cp.ones(2), cp.ones(2, dtype=cp.float64))
    with pytest.raises(cp.DTypeError, match="nanmean\\(\\): expected input to have floating point dtype but got candle_py.int64"):
        cp.nanmean(cp.tensor([1, 2]))
    with pytest.raises(
        cp.DTypeError, match="xlogy_: result type candle_py.float32 can't be cast to the desired output type candle_py.int64"
    ):
        cp.tensor([1, 2]).xlogy_(2)
    with pytest.raises(cp.DTypeError, match="float_power_: the base given to float_power_ has dtype candle_py.float32"):
        cp.ones(2).float_power_(2)
    with pytest.raises(TypeError, match=r"logaddexp\(\): argument 'other' must be Tensor, not float"):
        cp.logaddexp(cp.ones(2), 1.0)


def test_value_errors_name_the_op() -> None:
    with pytest.raises(ValueError, match=r"renorm: non-positive-norm not supported \(p=0\)"):
        cp.renorm(cp.ones(2, 2), 0, 0, 1.0)
    with pytest.raises(ValueError, match="renorm: expected maxnorm to be >= 0 but got -1.0"):
        cp.renorm(cp.ones(2, 2), 2, 0, -1.0)
    with pytest.raises(ValueError, match="diff: order must be non-negative but got -2"):
        cp.diff(cp.ones(3), n=-2)


def test_second_derivatives_flow() -> None:
    # composed of differentiable ops, so create_graph records the backward (d2/dx2 logit = (2x - 1) / (x(1-x))^2)
    x = cp.tensor([0.2, 0.6], requires_grad=True)
    (g,) = cp.autograd.grad(cp.logit(x).sum(), x, create_graph=True)
    (h,) = cp.autograd.grad(g.sum(), x)
    xs = np.array([0.2, 0.6])
    np.testing.assert_allclose(h.numpy(), (2 * xs - 1) / (xs * (1 - xs)) ** 2, rtol=1e-4)


def test_isin_matches_numpy_on_large_inputs() -> None:
    rng = np.random.default_rng(3)
    e, t = rng.integers(0, 5000, 20000), rng.integers(0, 5000, 3000)
    got = cp.isin(cp.tensor(e), cp.tensor(t)).numpy()
    np.testing.assert_array_equal(got, np.isin(e, t))
