"""The more composed ops (python/candle_py/_composed_more.py) against PyTorch: the cases
of tests/more_cases.py compared with tests/fixtures/more (made by
tools/make_fixtures_more.py), then their error messages, guards against huge sizes and
properties the fixture cannot show (large inputs, the random side of dropout)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from more_cases import CASES

META, ARRAYS = load_fixture("more")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_every_name_is_public_with_its_methods() -> None:
    for name in cp._composed_more.__all__:
        assert name in cp.__all__ and callable(getattr(cp, name)) and getattr(cp, name).__doc__, name
    for name in ("tile", "fmax", "fmin", "frexp", "ldexp", "ldexp_", "nextafter", "nextafter_", "gcd", "gcd_", "lcm_", "cross",
                 "cummax", "cummin", "histc", "quantile", "nanquantile", "nanmedian", "isposinf", "isreal", "diagflat",
                 "hardshrink", "is_signed", "is_nonzero", "is_same_size", "is_inference", "get_device", "short",
                 "split_with_sizes", "sum_to_size", "fill_diagonal_", "index_put", "index_put_", "put", "put_",
                 "select_scatter", "slice_scatter", "diagonal_scatter", "apply_", "map_"):  # fmt: skip
        assert callable(getattr(cp.Tensor, name)) and getattr(cp.Tensor, name).__doc__, name
    x = cp.ones(2, 3)
    assert x.is_cpu is True and x.nbytes == 24 and x.itemsize == 4
    assert not hasattr(cp.Tensor, "bucketize") and not hasattr(cp.Tensor, "fmax_") and not hasattr(cp, "pdist")


def test_messages_name_the_op_and_shapes_or_dtypes() -> None:
    with pytest.raises(cp.ShapeError, match=r"cross: inputs dimension 1 must have length 3. Got 3 and 2"):
        cp.cross(cp.ones(1, 3), cp.ones(1, 2), dim=1)
    with pytest.raises(
        cp.DTypeError, match=r"cross: expected both inputs to have the same dtype, got candle_py.float32 and candle_py.int64"
    ):
        cp.cross(cp.ones(3), cp.ones(3, dtype=cp.int64))
    with pytest.raises(
        cp.ShapeError, match=r"select_scatter: expected src to have a size equal to the slice of self. src size = \[4\], slice size = \[3\]"
    ):
        cp.select_scatter(cp.zeros(4, 3), cp.ones(4), 0, 0)
    with pytest.raises(cp.DTypeError, match="quantile\\(\\) input tensor must be either float or double dtype, got candle_py.int64"):
        cp.quantile(cp.tensor([1, 2]), 0.5)
    with pytest.raises(ValueError, match=r"quantile\(\) q must be in the range \[0, 1\] but got 1.5"):
        cp.quantile(cp.ones(3), 1.5)
    with pytest.raises(cp.ShapeError, match=r"searchsorted\(\): boundaries tensor should be 1 dimension or the first N-1"):
        cp.searchsorted(cp.ones(1, 3), cp.ones(3))
    with pytest.raises(cp.DTypeError, match="gcd: not implemented for candle_py.float32"):
        cp.gcd(cp.ones(2), cp.ones(2))
    with pytest.raises(cp.DTypeError, match="index_put: Index put requires the source and destination dtypes match"):
        cp.index_put(cp.zeros(3), (cp.tensor([0]),), cp.tensor([1]))
    with pytest.raises(IndexError, match="put: out of range: tried to access index 6 on a tensor of 6 elements"):
        cp.put(cp.zeros(2, 3), cp.tensor([6]), cp.tensor([1.0]))
    with pytest.raises(ValueError, match=r"split_with_sizes expects split_sizes to sum exactly to 3"):
        cp.ones(3).split_with_sizes([1, 1])
    with pytest.raises(cp.ShapeError, match=r"sum_to_size: size \[3\] is not expandable to size \[2, 2\]"):
        cp.ones(2, 2).sum_to_size(3)
    with pytest.raises(ValueError, match="hann_window requires non-negative window_length, got window_length=-1"):
        cp.hann_window(-1)
    with pytest.raises(cp.DTypeError, match="kaiser_window expects floating point dtypes, got: candle_py.int64"):
        cp.kaiser_window(3, dtype=cp.int64)
    with pytest.raises(ValueError, match=r"histc: range of \[0.0, inf\] is not finite"):
        cp.histc(cp.ones(2), 4, 0, math.inf)
    with pytest.raises(ValueError, match="rrelu: a generator argument is not supported"):
        cp.rrelu(cp.ones(2), generator=cp.Generator())
    with pytest.raises(TypeError, match=r"kl_div\(\): argument 'reduction' must be int"):
        cp.kl_div(cp.ones(2), cp.ones(2), "mean")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"Can't call apply_\(\) on Variable that requires grad"):
        cp.ones(2, requires_grad=True).apply_(lambda v: v)


@pytest.mark.filterwarnings("ignore:torch.range is deprecated")
@pytest.mark.parametrize(
    "call",
    [
        lambda: cp.range(0, 2**62),
        lambda: cp.range(-(2**62), 2**62, dtype=cp.int64),
        lambda: cp.logspace(0, 1, 2**62),
        lambda: cp.hann_window(2**62),
        lambda: cp.kaiser_window(2**40),
        lambda: cp.histc(cp.ones(2), 2**62),
        lambda: cp.tile(cp.ones(2), (2**62,)),
        lambda: cp.ones(2).tile(2**31, 2**31),
        lambda: cp.diagflat(cp.ones(2), 2**62),
        lambda: cp.adaptive_avg_pool1d(cp.ones(1, 2, 5), 2**62),
        lambda: cp.conv1d(cp.ones(1, 2, 5), cp.ones(3, 2, 3), None, 1, 2**40),
        lambda: cp.conv_transpose2d(cp.ones(1, 2, 5, 5), cp.ones(2, 3, 3, 3), None, 2**20),
    ],
)
def test_huge_sizes_raise_instead_of_allocating(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=r"more than (4294967296|1073741824)"):
        call()


def test_range_warns_that_it_is_deprecated() -> None:
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        cp.range(0, 3)
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg is deprecated"):
        cp.cross(cp.ones(3), cp.ones(3))


def _np_cummax(a: np.ndarray) -> tuple:
    vals, idx = np.empty_like(a), np.empty(a.shape, dtype=np.int64)
    best, at = a[0], 0
    for i, x in enumerate(a):
        if np.isnan(x) or (not np.isnan(best) and x >= best):
            best, at = x, i
        vals[i], idx[i] = best, at
    return vals, idx


def test_cummax_matches_the_sequential_rule_on_long_inputs() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 50, 5000).astype(np.float32)
    a[rng.integers(0, 5000, 20)] = np.nan
    r = cp.cummax(cp.tensor(a), 0)
    v, i = _np_cummax(a)
    np.testing.assert_array_equal(r.values.numpy(), v)
    np.testing.assert_array_equal(r.indices.numpy(), i)
    v, i = _np_cummax(-a)
    r = cp.cummin(cp.tensor(a), 0)
    np.testing.assert_array_equal(-r.values.numpy(), v)
    np.testing.assert_array_equal(r.indices.numpy(), i)


def test_searchsorted_matches_numpy_on_large_inputs() -> None:
    rng = np.random.default_rng(7)
    seq = np.sort(rng.integers(0, 10000, 200000)).astype(np.int64)
    vals = rng.integers(-10, 10010, 50000).astype(np.int64)
    for side in ("left", "right"):
        got = cp.searchsorted(cp.tensor(seq), cp.tensor(vals), side=side).numpy()
        np.testing.assert_array_equal(got, np.searchsorted(seq, vals, side=side))


def test_quantile_matches_numpy_methods() -> None:
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 101))
    q = np.array([0.0, 0.013, 0.5, 0.77, 1.0])
    for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
        got = cp.quantile(cp.tensor(a), cp.tensor(q), dim=1, interpolation=mode).numpy()
        np.testing.assert_allclose(got, np.quantile(a, q, axis=1, method=mode), rtol=1e-12, atol=1e-12)


def test_gcd_lcm_match_numpy() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.integers(-(10**6), 10**6, 3000), rng.integers(-(10**6), 10**6, 3000)
    np.testing.assert_array_equal(cp.gcd(cp.tensor(a), cp.tensor(b)).numpy(), np.gcd(a, b))
    np.testing.assert_array_equal(cp.lcm(cp.tensor(a), cp.tensor(b)).numpy(), np.lcm(a, b))


def test_frexp_and_nextafter_match_numpy_bit_for_bit() -> None:
    rng = np.random.default_rng(13)
    for dt, cdt, span in ((np.float32, cp.float32, 8), (np.float64, cp.float64, 8), (np.float16, cp.float16, 4)):
        a = (rng.standard_normal(2000) * 10.0 ** rng.integers(-span, span, 2000)).astype(dt)
        a[:4] = [0, np.finfo(dt).tiny / 4, -np.finfo(dt).max, np.finfo(dt).smallest_subnormal]
        m, e = cp.frexp(cp.tensor(a, dtype=cdt))
        nm, ne = np.frexp(a)
        np.testing.assert_array_equal(m.numpy() if cdt != cp.float16 else m.float().numpy().astype(np.float16), nm)
        np.testing.assert_array_equal(e.numpy(), ne)
        b = np.roll(a, 1)
        got = cp.nextafter(cp.tensor(a, dtype=cdt), cp.tensor(b, dtype=cdt))
        got_np = got.numpy() if cdt != cp.float16 else got.float().numpy().astype(np.float16)
        np.testing.assert_array_equal(got_np, np.nextafter(a, b))


def test_dropout_alias_trains_at_the_given_rate() -> None:
    cp.manual_seed(0)
    y = cp.dropout(cp.ones(20000), 0.3, True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.02
    np.testing.assert_allclose(np.unique(y.numpy()), [0.0, 1 / 0.7], rtol=1e-6)


def test_second_derivatives_flow_through_quantile_and_fmax() -> None:
    x = cp.tensor([0.5, 2.0, -1.0, 3.0], requires_grad=True)
    y = cp.quantile(x * x, 0.4) + cp.fmax(x, cp.zeros(4)).pow(3).sum()
    (g,) = cp.autograd.grad(y, x, create_graph=True)
    (h,) = cp.autograd.grad(g.sum(), x)
    # x^2 sorted is [0.25, 1, 4, 9]: rank 1.2 weighs 1 (x=-1) by 0.8 and 4 (x=2) by 0.2, so d2/dx2 is 1.6 and 0.4 there;
    # fmax(x, 0)^3 adds 6x for x > 0
    np.testing.assert_allclose(h.numpy(), [6 * 0.5, 0.4 + 6 * 2.0, 1.6, 6 * 3.0], rtol=1e-5)
