"""The parallel CPU passes behind everyday ops (dense copies of strided views, unary
maps, broadcast arithmetic, powers, sums, max/min along a dim), checked against
NumPy computing the same thing independently. Sizes straddle the thread split
(2^18 elements) and the kernels' inner widths (16 lanes, 16x16 transpose tiles)."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp

RNG = np.random.default_rng(7)
BIG = (3, 300, 301)  # > 2^18 elements, odd sizes: tiles and lanes have remainders


def _a(shape: tuple, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", [(4, 5, 6), BIG])
@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.transpose(1, 2),
        lambda t: t.transpose(0, 2),
        lambda t: t.permute(2, 0, 1),
        lambda t: t[:, 1:-1, 2:],
        lambda t: t[:, ::2],
        lambda t: t[..., ::3].transpose(0, 1),
        lambda t: t[:, :1].expand(-1, 7, -1),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_contiguous_of_views_equals_numpy(shape: tuple, view, dtype: type) -> None:
    a = (RNG.standard_normal(shape) * 50).astype(dtype)
    v = view(cp.from_numpy(a))
    want = np.ascontiguousarray(view(_NumpyT(a)).a)
    got = v.contiguous()
    assert got.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(v.clone().numpy(), want)


class _NumpyT:
    """The same view methods over a NumPy array (the reference)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def transpose(self, i: int, j: int) -> _NumpyT:
        return _NumpyT(np.swapaxes(self.a, i, j))

    def permute(self, *p: int) -> _NumpyT:
        return _NumpyT(np.transpose(self.a, p))

    def expand(self, *s: int) -> _NumpyT:
        return _NumpyT(np.broadcast_to(self.a, tuple(d if n == -1 else n for d, n in zip(self.a.shape, s))))

    def __getitem__(self, k: object) -> _NumpyT:
        return _NumpyT(self.a[k])


def test_transpose_contiguous_keeps_the_graph() -> None:
    x = cp.from_numpy(_a((2, 40, 33))).requires_grad_(True)
    g = _a((2, 33, 40))
    x.transpose(1, 2).contiguous().mul(cp.from_numpy(g)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), g.transpose(0, 2, 1))


@pytest.mark.parametrize("shape", [(5, 7), BIG])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_maps_equal_numpy(shape: tuple, dtype: type) -> None:
    a = _a(shape, dtype)
    a.flat[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]
    x = cp.from_numpy(a)
    pos = np.abs(a)
    # libm and NumPy may round log/sin/cos one ulp apart.
    tol = dict(rtol=5e-7 if dtype == np.float32 else 1e-15, atol=0)
    with np.errstate(all="ignore"):
        for got, want in [
            (-x, -a),
            (x.abs(), np.abs(a)),
            (x.square(), a * a),
            (cp.from_numpy(pos).sqrt(), np.sqrt(pos)),
            (x.reciprocal(), 1 / a),
            (cp.from_numpy(pos).log(), np.log(pos)),
            (x.sin(), np.sin(a)),
            (x.cos(), np.cos(a)),
            (x * 2.5, a * dtype(2.5)),
            (x + 1.5, a + dtype(1.5)),
            (x / 3.0, a / dtype(3.0)),
        ]:
            np.testing.assert_allclose(got.numpy(), want, **tol)
            np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want))


def test_scaling_keeps_negative_zero() -> None:
    x = cp.tensor([-0.0, 0.0, -1.0])
    assert np.signbit((x * 2.0).numpy()).tolist() == [True, False, True]
    assert np.signbit((x - 0.0).numpy()).tolist() == [True, False, True]
    assert np.signbit((x + 0.0).numpy()).tolist() == [False, False, True]


@pytest.mark.parametrize("n", [2, 3, 5, 7, -1, -2, -3, 63, 64, 70, -70])
def test_integer_powers_equal_numpy(n: int) -> None:
    a = _a(BIG) * 1.5
    a.flat[:5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), n)
    got = (cp.from_numpy(a) ** n).numpy().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want) & (np.abs(want) < 1e37) & (np.abs(want) > 1e-37)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-6 * max(1, abs(n) // 8))


@pytest.mark.parametrize(
    "shapes",
    [((3, 300, 301), (301,)), ((3, 300, 301), (300, 1)), ((3, 300, 301), ()), ((1, 300, 301), (3, 1, 1)), ((300, 301), (301, 1, 1))],
)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv"])
def test_broadcast_arithmetic_equals_numpy(shapes: tuple, op: str) -> None:
    import operator

    a, b = _a(shapes[0]), _a(shapes[1]) + 3.0
    f = getattr(operator, op)
    np.testing.assert_array_equal(f(cp.from_numpy(a), cp.from_numpy(np.asarray(b))).numpy(), f(a, b))
    # The expanded operand as a stride-0 view (one long merged row).
    e = cp.from_numpy(np.asarray(b)).expand(*np.broadcast_shapes(a.shape, b.shape))
    np.testing.assert_array_equal(f(e, cp.from_numpy(a)).numpy(), f(np.broadcast_to(b, e.shape), a))


@pytest.mark.parametrize("shape", [(7, 9, 5), (4, 512, 768), (2, 3, 200000), (8, 70000)])
@pytest.mark.parametrize("dims", [0, 1, -1, (0, 1)])
def test_sums_equal_numpy(shape: tuple, dims) -> None:
    if isinstance(dims, tuple) and len(shape) < 3:
        dims = (0,)
    a = _a(shape)
    got = cp.from_numpy(a).sum(dims).numpy()
    want = a.astype(np.float64).sum(axis=dims)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [1, 5, 16, 17, 33, 768])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_min_along_a_dim_equal_numpy(n: int, dtype: type) -> None:
    a = np.round(_a((600, n), dtype) * 2)  # rounded: many ties
    a[1, :] = 0.0
    a[1, n // 2 :] = -0.0
    a[2, n - 1] = np.nan
    a[3, :] = np.inf
    a[4, 0] = np.nan
    if n > 3:
        a[5, 2] = np.nan
        a[5, 3] = np.nan
    x = cp.from_numpy(a)
    for name, ref, arg in [("max", np.max, np.argmax), ("min", np.min, np.argmin)]:
        for d in (0, 1):
            vals, idx = getattr(x, name)(d)
            np.testing.assert_array_equal(idx.numpy(), arg(a, axis=d))  # first extreme, or first NaN
            np.testing.assert_array_equal(vals.numpy(), ref(a, axis=d))
            first = np.take_along_axis(a, np.expand_dims(arg(a, axis=d), d), d).squeeze(d)
            np.testing.assert_array_equal(np.signbit(vals.numpy()), np.signbit(first))


@pytest.mark.parametrize("shapes", [((5, 7), (5, 7)), ((3, 300, 301), (301,)), ((300, 1), (1, 301)), ((4, 5), ())])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_comparisons_and_extremes_equal_numpy(shapes: tuple, dtype: type) -> None:
    import operator

    a, b = np.round(_a(shapes[0], dtype)), np.round(_a(shapes[1], dtype))
    a.flat[:3] = [np.nan, 0.0, -0.0]
    if b.size > 3:
        b.flat[:4] = [1.0, -0.0, 0.0, np.nan]
    ca, cb = cp.from_numpy(a), cp.from_numpy(np.asarray(b))
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        got = getattr(operator, op)(ca, cb)
        assert got.dtype == cp.bool
        np.testing.assert_array_equal(got.numpy(), getattr(operator, op)(a, b))
    np.testing.assert_array_equal(cp.maximum(ca, cb).numpy(), np.maximum(a, b))  # NaN propagates
    np.testing.assert_array_equal(cp.minimum(ca, cb).numpy(), np.minimum(a, b))
    np.testing.assert_array_equal(ca.clamp(min=-0.5, max=0.5).numpy(), np.clip(a, -0.5, 0.5))


def test_any_all_count_past_float32_precision() -> None:
    m = cp.ones(17_000_001, dtype=cp.bool)
    assert bool(m.all()) and bool(m.any())
    assert bool(m.all(0))  # counted in float64: float32 stops at 2^24
    m[5] = False
    assert not bool(m.all()) and not bool(m.all(0)) and bool(m.any())
    assert not bool(cp.zeros(3, dtype=cp.bool).any())


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_fused_bce_equals_the_composed_form(reduction: str) -> None:
    p = RNG.random((64, 300)).astype(np.float32)
    p[0, :3] = [0.0, 1.0, 1e-30]
    y = RNG.random((64, 300)).astype(np.float32)
    g = RNG.standard_normal((64, 300)).astype(np.float32) if reduction == "none" else None
    grads = []
    for target_grad in (False, True):  # a target that needs its gradient takes the composed form
        x = cp.from_numpy(p).requires_grad_(True)
        t = cp.from_numpy(y).requires_grad_(target_grad)
        loss = cp.nn.functional.binary_cross_entropy(x, t, reduction=reduction)
        assert (loss.grad_fn.name() == "BinaryCrossEntropyBackward0") == (not target_grad)
        (loss * cp.from_numpy(g)).sum().backward() if g is not None else loss.backward()
        grads.append((loss.detach().numpy(), x.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-5)
    # Away from the clamped ends the two agree; at them the fused op has PyTorch's
    # gradient g (x - y) / max(x (1 - x), 1e-12) (the composed form differentiates the logs).
    np.testing.assert_allclose(grads[0][1][1:], grads[1][1][1:], rtol=1e-4, atol=1e-6)
    scale = 1.0 if reduction == "sum" else (1 / p.size if reduction == "mean" else g[0, :3])
    want = scale * (p[0, :3] - y[0, :3]) / np.maximum(p[0, :3] * (1 - p[0, :3]), 1e-12)
    np.testing.assert_allclose(grads[0][1][0, :3], want, rtol=1e-5)
