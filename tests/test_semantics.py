"""PyTorch's semantics where candle_py used to differ: in-place twins, integer
bitwise operators, float floor division / remainder special values, `view`'s
stride rule, and argument forms (`alpha`, `rounding_mode`, `size=`, the legacy
`Tensor(...)` constructor, `type()`, `format`). Values against fixtures made by
tools/make_fixtures_semantics.py (torch is never imported here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn.functional as F

FIXTURES = Path(__file__).parent / "fixtures" / "semantics"


def load(name: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    path = FIXTURES / f"{name}.safetensors"
    meta = cp.safetensors.load_metadata(path) or {}
    return {k: v.numpy() for k, v in cp.load_file(path).items()}, meta


def close(got: cp.Tensor, want: np.ndarray, tol: float = 1e-5) -> None:
    g = got.detach().numpy()
    assert g.shape == want.shape, (g.shape, want.shape)
    np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)


def exact(got: cp.Tensor, want: np.ndarray) -> None:
    g = got.numpy()
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    np.testing.assert_array_equal(g, want)


# ---------------------------------------------------------------- in-place twins

INPLACE, INPLACE_META = load("inplace")
INPLACE_CASES: dict[str, list[Any]] = json.loads(INPLACE_META["cases"])


@pytest.mark.parametrize("case", sorted(INPLACE_CASES))
def test_inplace_twin_value_and_grad(case: str) -> None:
    method, src, args, kwargs, has_grad = INPLACE_CASES[case]
    real = [cp.tensor(INPLACE[a]) if isinstance(a, str) else a for a in args]
    leaf = cp.tensor(INPLACE[src], requires_grad=has_grad)
    t = leaf * 1.0 if has_grad else leaf.clone()
    version = t._version
    r = getattr(t, method)(*real, **kwargs)
    assert r is t, f"{method} must return the tensor itself"
    assert t._version > version, f"{method} must bump the version counter"
    close(t, INPLACE[f"{case}.out"])
    if has_grad:
        (t * cp.tensor(INPLACE["w"])).sum().backward()
        assert leaf.grad is not None
        close(leaf.grad, INPLACE[f"{case}.grad"])


@pytest.mark.parametrize("method", ["sqrt_", "sigmoid_", "tanh_", "exp_", "log_", "triu_", "tril_", "abs_", "relu_"])
def test_inplace_on_leaf_requiring_grad_raises(method: str) -> None:
    x = cp.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(x, method)()


def test_inplace_writes_through_views() -> None:
    base = cp.tensor([[4.0, 9.0], [16.0, 25.0]])
    row = base[1]
    row.sqrt_()
    exact(base, np.array([[4.0, 9.0], [4.0, 5.0]], dtype=np.float32))
    base.tril_()
    exact(base, np.array([[4.0, 0.0], [4.0, 5.0]], dtype=np.float32))


def test_inplace_saved_tensor_version_error() -> None:
    x = cp.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.sigmoid()  # saves its output
    z.exp_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_inplace_float_result_into_integer_tensor_raises() -> None:
    x = cp.tensor([4, 9])
    with pytest.raises(TypeError, match="sqrt_.*can't be cast"):
        x.sqrt_()
    exact(x, np.array([4, 9]))  # untouched
    # Results the dtype can hold are written: comparisons give 0/1, rounding is a no-op.
    y = cp.tensor([1, 5, 3])
    y.gt_(2)
    exact(y, np.array([0, 1, 1]))


# ---------------------------------------------------------------- bitwise operators

BITS, _ = load("bitwise")
BIT_OPS = {"and": "__and__", "or": "__or__", "xor": "__xor__", "lshift": "__lshift__", "rshift": "__rshift__"}
FUNCS = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift"}


@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "uint8"])
@pytest.mark.parametrize("op", sorted(BIT_OPS))
def test_bitwise_operator(dt: str, op: str) -> None:
    a, b = cp.tensor(BITS[f"{dt}.a"]), cp.tensor(BITS[f"{dt}.b"])
    want = BITS[f"{dt}.{op}"]
    exact(getattr(a, BIT_OPS[op])(b), want)
    exact(getattr(a, FUNCS[op])(b), want)
    exact(getattr(cp, FUNCS[op])(a, b), want)
    c = a.clone()
    assert getattr(c, FUNCS[op] + "_")(b) is c
    exact(c, want)
    if op in ("and", "or", "xor"):
        c, d = cp.tensor(BITS[f"{dt}.c"]), cp.tensor(BITS[f"{dt}.d"])
        exact(getattr(c, BIT_OPS[op])(d), BITS[f"{dt}.cd_{op}"])


@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "uint8", "bool"])
def test_bitwise_not(dt: str) -> None:
    src = BITS[f"{dt}.c"] if dt != "bool" else BITS["bool.a"]
    want = BITS[f"{dt}.not"]
    a = cp.tensor(src)
    exact(~a, want)
    exact(a.bitwise_not(), want)
    exact(cp.bitwise_not(a), want)
    assert a.bitwise_not_() is a
    exact(a, want)


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise_bool(op: str) -> None:
    a, b = cp.tensor(BITS["bool.a"]), cp.tensor(BITS["bool.b"])
    exact(getattr(a, BIT_OPS[op])(b), BITS[f"bool.{op}"])


def test_bitwise_mixed_and_reflected() -> None:
    exact(cp.tensor(BITS["bool.a"]) & cp.tensor([3, 2, 1, 0]), BITS["mixed.bool_and_int"])
    exact(cp.tensor(np.array([3, 200], dtype=np.uint8)) ^ -1, BITS["mixed.uint8_xor_neg1"])
    exact(2 << cp.tensor([0, 1, 5]), BITS["mixed.rlshift"])
    exact(6 & cp.tensor([3, 4]), np.array([2, 4]))
    exact(1 | cp.tensor([2, 4]), np.array([3, 5]))
    exact(64 >> cp.tensor([1, 3]), np.array([32, 8]))
    x = cp.tensor([1, 2])
    x <<= 3
    exact(x, np.array([8, 16]))
    x >>= 1
    exact(x, np.array([4, 8]))
    x |= 1
    x ^= 2
    x &= 7
    exact(x, np.array([7, 3]))


def test_bitwise_float_raises() -> None:
    f = cp.tensor([1.0, 2.0])
    for call in (lambda: f & 1, lambda: f | f, lambda: f ^ 1, lambda: f << 1, lambda: 1 >> f, lambda: f.bitwise_and(f)):
        with pytest.raises(TypeError, match="bitwise.*float32"):
            call()
    with pytest.raises(TypeError, match="bitwise_not.*float32"):
        f.__invert__()
    with pytest.raises(TypeError, match="bool"):
        cp.tensor([True]) << cp.tensor([True])


def test_logical_ops_read_truth_values() -> None:
    a, b = cp.tensor([0, 2, 3]), cp.tensor([5, 0, 1])
    exact(a.logical_and(b), np.array([False, False, True]))
    exact(cp.logical_or(a, b), np.array([True, True, True]))
    exact(cp.logical_xor(a, b), np.array([True, True, False]))


# ---------------------------------------------------------------- floor division and remainder

FLOOR, _ = load("floordiv")


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_floor_divide_and_remainder_special_values(dt: str) -> None:
    a, b = cp.tensor(FLOOR[f"{dt}.a"]), cp.tensor(FLOOR[f"{dt}.b"])

    def same(got: cp.Tensor, key: str) -> None:
        g, w = got.numpy(), FLOOR[f"{dt}.{key}"]
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w, err_msg=key)
        # Signed zeros too.
        np.testing.assert_array_equal(np.signbit(g[g == 0]), np.signbit(w[w == 0]), err_msg=key)

    same(a // b, "floor_divide")
    same(a % b, "remainder")
    same(cp.floor_divide(a, b), "floor_divide")
    same(cp.remainder(a, b), "remainder")
    same(a.div(b, rounding_mode="floor"), "div_floor")
    same(cp.div(a, b, rounding_mode="trunc"), "div_trunc")
    same(a // 2, "scalar_floordiv")
    same(2 // a, "scalar_rfloordiv")
    same(a % 2, "scalar_rem")
    same(2 % a, "scalar_rrem")
    c = a.clone()
    assert c.div_(b, rounding_mode="floor") is c
    same(c, "div_floor")


def test_remainder_grad() -> None:
    a = cp.tensor(FLOOR["grad.a"], requires_grad=True)
    b = cp.tensor(FLOOR["grad.b"], requires_grad=True)
    (a % b).sum().backward()
    assert a.grad is not None and b.grad is not None
    close(a.grad, FLOOR["grad.remainder_a"])
    close(b.grad, FLOOR["grad.remainder_b"])


def test_div_rounding_mode_bad_value() -> None:
    with pytest.raises(ValueError, match="rounding_mode"):
        cp.tensor([1.0]).div(2, rounding_mode="ceil")


# ---------------------------------------------------------------- view's stride rule

_, VIEW_META = load("view")
VIEW_CASES = json.loads(VIEW_META["cases"])


@pytest.mark.parametrize("case", VIEW_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}->{c[3]}" for c in VIEW_CASES])
def test_view_follows_torch_stride_rule(case: list[Any]) -> None:
    shape, perm, narrow, new, ok = case
    n = int(np.prod(shape)) if shape else 1
    t = cp.arange(n, dtype=cp.float32).reshape(*shape) if shape else cp.tensor(0.0)
    if perm:
        t = t.permute(*perm)
    if narrow is not None:
        t = t.narrow(-1, 0, narrow)
    if ok:
        v = t.view(*new) if new else t.view(())
        want = t.reshape(*new) if new else t.reshape(())
        exact(v, want.numpy())
    else:
        with pytest.raises(RuntimeError, match=r"view size is not compatible.*Use \.reshape\(\.\.\.\) instead"):
            t.view(*new)
        exact(t.reshape(*new), t.contiguous().view(*new).numpy())  # reshape still works


def test_view_of_a_strided_tensor_shares_its_storage() -> None:
    """Splitting dims of a strided tensor (a column slice, one part of a fused
    projection) is a view, as in PyTorch: same storage, PyTorch's strides, and in-place
    writes through it reach the base. It was a copy, so the writes were lost."""
    x = cp.arange(24.0).reshape(4, 6)
    v = x[:, :4].view(4, 2, 2)
    assert v.stride() == (6, 2, 1) and v.data_ptr() == x.data_ptr()
    v.mul_(0)
    exact(x, np.where(np.arange(6) < 4, 0.0, np.arange(24.0).reshape(4, 6)).astype(np.float32))

    qkv = cp.arange(120.0).reshape(2, 5, 12)
    k = qkv.split(4, dim=2)[1]
    heads = k.view(2, 5, 2, 2)
    assert heads.stride() == (60, 12, 2, 1)
    exact(heads, np.arange(120.0, dtype=np.float32).reshape(2, 5, 12)[:, :, 4:8].reshape(2, 5, 2, 2))
    heads.transpose(1, 2).add_(1000)
    want = np.arange(120.0, dtype=np.float32).reshape(2, 5, 12)
    want[:, :, 4:8] += 1000
    exact(qkv, want)
    r = k.reshape(2, 5, 1, 2, 2)  # reshape too, where it splits dims
    assert r.stride()[:2] == (60, 12) and r.stride()[3:] == (2, 1) and r.data_ptr() == k.data_ptr()


def test_view_of_a_strided_tensor_in_the_graph() -> None:
    """An in-place op through the split view of a non-leaf writes into it, and the
    gradient flows through the write (d/dleaf of sum(y) after y[..., 4:8] *= 3)."""
    leaf = cp.ones(2, 5, 12, requires_grad=True)
    y = leaf * 1
    y[:, :, 4:8].view(2, 5, 2, 2).mul_(3)
    assert float(y.sum()) == 2 * 5 * (8 + 4 * 3)
    y.sum().backward()
    want = np.ones((2, 5, 12), np.float32)
    want[:, :, 4:8] = 3
    exact(leaf.grad, want)


def test_stepped_slice_is_a_view() -> None:
    """`x[:, ::2]` is a view as in PyTorch: its strides are the base's times the step,
    it shares the storage, and in-place writes through it reach the base (they were
    lost: the slice was a copy)."""
    x = cp.arange(12.0).reshape(3, 4)
    v = x[:, ::2]
    assert v.shape == (3, 2) and v.stride() == (4, 2) and v.data_ptr() == x.data_ptr()
    v.mul_(0)
    exact(x, np.where(np.arange(4) % 2 == 0, 0.0, np.arange(12.0).reshape(3, 4)).astype(np.float32))

    y = cp.arange(35.0).reshape(5, 7)
    w = y[1::2, 1::3]
    want = np.arange(35.0, dtype=np.float32).reshape(5, 7)
    assert w.shape == (2, 2) and w.stride() == (14, 3) and w.storage_offset() == 8
    exact(w, want[1::2, 1::3])
    w.fill_(-1)
    want[1::2, 1::3] = -1
    exact(y, want)
    one = y[::10]  # one index whatever the step: still a view
    assert one.shape == (1, 7) and one.data_ptr() == y.data_ptr()
    one.zero_()
    want[0] = 0
    exact(y, want)
    # A dim too long for the view's arithmetic (2^24 elements spanned) reads a copy.
    big = cp.arange(2**24 + 3, dtype=cp.int32)
    exact(big[1::2][-2:], np.array([2**24 - 1, 2**24 + 1], np.int32))


def test_stepped_slice_in_the_graph() -> None:
    """Reading through a stepped view gives SliceBackward0 (PyTorch's node) and the
    gradient lands at the stepped positions; a write through it into a non-leaf flows
    back too."""
    leaf = cp.arange(6.0, requires_grad=True)
    z = leaf[1::2]
    assert z.grad_fn.name() == "SliceBackward0"
    (z * z).sum().backward()
    exact(leaf.grad, np.array([0, 2, 0, 6, 0, 10], np.float32))

    leaf2 = cp.ones(6, requires_grad=True)
    y = leaf2 * 1
    y[::2].mul_(3)
    exact(y.detach(), np.array([3, 1, 3, 1, 3, 1], np.float32))
    y.sum().backward()
    exact(leaf2.grad, np.array([3, 1, 3, 1, 3, 1], np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", ["step2", "step2_odd", "step3", "step4", "step7", "transposed", "narrowed", "tiles"])
def test_arithmetic_reads_strided_views_in_place(dtype: type, view: str) -> None:
    """Scalar and tensor arithmetic, copies and reductions of stepped, transposed and
    narrowed views (read where they lie, a block at a time) equal NumPy's on the same
    views exactly: runs long enough to span several blocks and to end part-way through
    one, signed zeros, infinities and NaN included."""
    rng = np.random.default_rng(7)
    # "tiles": a transpose copied tile by tile first (odd sizes: partial tiles too).
    base = rng.standard_normal((2, 37, 203) if view == "tiles" else (3, 5, 1203)).astype(dtype)
    base.flat[::97] = -0.0
    base.flat[5::211] = np.inf
    base.flat[9::307] = -np.inf
    base.flat[13::401] = np.nan
    pick = {
        "step2": lambda a: a[..., ::2],
        "step2_odd": lambda a: a[..., 1::2],
        "step3": lambda a: a[..., 2::3],
        "step4": lambda a: a[:, 1:, ::4],
        "step7": lambda a: a[..., 3::7],
        "transposed": lambda a: a.permute(2, 0, 1) if isinstance(a, cp.Tensor) else a.transpose(2, 0, 1),
        "narrowed": lambda a: a[:, :, 5:1000],
        "tiles": lambda a: a.permute(0, 2, 1) if isinstance(a, cp.Tensor) else a.transpose(0, 2, 1),
    }[view]
    x, want = pick(cp.from_numpy(base)), pick(base)
    other = rng.standard_normal(want.shape[-1]).astype(dtype)
    other_stepped = base[..., ::-1].copy()
    o2 = pick(cp.from_numpy(other_stepped))
    w2 = pick(other_stepped)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        exact(x.contiguous(), np.ascontiguousarray(want))
        exact(x * 0.5, want * dtype(0.5))
        exact(x * -2.0, want * dtype(-2.0))
        exact(x + 1.25, want + dtype(1.25))
        exact(x - 3.0, want - dtype(3.0))
        exact(3.0 - x, dtype(3.0) - want)
        exact(x * cp.from_numpy(other), want * other)
        exact(cp.from_numpy(other) - x, other - want)
        exact(x / o2, want / w2)
        exact(x - o2, want - w2)
        exact(-x, -want)
        exact(x + x, want + want)
        exact(x.relu(), np.where(want < 0, dtype(0), want))
        exact(x.floor(), np.floor(want))
        exact(x.amax(-1), want.max(-1))
    leaf = x.detach().requires_grad_(True)
    (leaf.relu() * 3.0).sum().backward()
    exact(leaf.grad, np.where(want <= 0, dtype(0), dtype(3)))  # NaN passes its gradient, as torch's
    ints = pick(cp.from_numpy(np.arange(base.size, dtype=np.int32).reshape(base.shape)))
    exact(ints.contiguous(), np.ascontiguousarray(pick(np.arange(base.size, dtype=np.int32).reshape(base.shape))))


def test_reshape_that_merges_strided_dims_copies() -> None:
    """A transposed matrix flattened cannot be a view (PyTorch copies too): writes to
    the result leave the source alone."""
    t = cp.arange(6.0).reshape(2, 3).t()
    r = t.reshape(6)
    r[0] = 100.0
    exact(t, np.arange(6.0, dtype=np.float32).reshape(2, 3).T)
    exact(r, np.array([100.0, 3, 1, 4, 2, 5], np.float32))


def test_view_as_follows_the_rule() -> None:
    t = cp.ones(2, 3).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view_as(cp.ones(6))


# ---------------------------------------------------------------- fixes of wrong behaviour


def test_bmm_does_not_broadcast_batch() -> None:
    with pytest.raises(ValueError, match=r"bmm: Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: \[1, 4\]"):
        cp.ones(2, 3, 4).bmm(cp.ones(1, 4, 5))
    with pytest.raises(ValueError, match="bmm"):
        cp.bmm(cp.ones(2, 3, 4), cp.ones(2, 3, 5))
    assert cp.bmm(cp.ones(2, 3, 4), cp.ones(2, 4, 5)).shape == (2, 3, 5)
    assert cp.matmul(cp.ones(2, 3, 4), cp.ones(1, 4, 5)).shape == (2, 3, 5)  # matmul broadcasts


@pytest.mark.parametrize(
    "fn", [lambda x: x.softmax(0), lambda x: x.log_softmax(0), lambda x: F.softmax(x, 0), lambda x: F.log_softmax(x, 0)]
)
def test_softmax_of_integers_raises(fn: Any) -> None:
    with pytest.raises(TypeError, match="softmax.*int64"):
        fn(cp.tensor([1, 2]))


def test_softmax_of_integers_with_float_dtype() -> None:
    close(cp.tensor([1, 2]).softmax(0, dtype=cp.float32), np.array([0.26894142, 0.73105858]))


def test_numpy_of_tensor_requiring_grad_raises() -> None:
    x = cp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        x.numpy()
    np.testing.assert_array_equal(x.detach().numpy(), np.ones(2, dtype=np.float32))
    np.testing.assert_array_equal(x.numpy(force=True), np.ones(2, dtype=np.float32))
    y = x * 2
    with pytest.raises(RuntimeError, match="requires grad"):
        y.numpy()
    with cp.no_grad():
        z = x * 2
    exact(z, np.full(2, 2.0, dtype=np.float32))


def test_legacy_tensor_constructor() -> None:
    t = cp.Tensor([1, 2])
    assert t.dtype == cp.float32
    exact(t, np.array([1.0, 2.0], dtype=np.float32))
    assert cp.Tensor(np.array([1, 2])).dtype == cp.float32
    s = cp.Tensor(2, 3)
    assert s.shape == (2, 3) and s.dtype == cp.float32
    e = cp.Tensor()
    assert e.shape == (0,) and e.dtype == cp.float32
    assert cp.Tensor(cp.tensor([1, 2])).dtype == cp.int64  # a Tensor keeps its dtype
    with pytest.raises(ValueError):
        cp.Tensor(2, -1)
    with pytest.raises(TypeError, match="data must be a sequence"):
        cp.Tensor(3.5)


def test_type_names() -> None:
    names = {
        cp.float32: "torch.FloatTensor", cp.float64: "torch.DoubleTensor", cp.float16: "torch.HalfTensor",
        cp.bfloat16: "torch.BFloat16Tensor", cp.uint8: "torch.ByteTensor", cp.int16: "torch.ShortTensor",
        cp.int32: "torch.IntTensor", cp.int64: "torch.LongTensor", cp.bool: "torch.BoolTensor",
        cp.uint32: "torch.UInt32Tensor",
    }  # fmt: skip
    for dt, name in names.items():
        assert cp.zeros(1, dtype=dt).type() == name
    x = cp.tensor([1.5, -2.5])
    exact(x.type(cp.int64), np.array([1, -2]))
    assert x.type("torch.LongTensor").dtype == cp.int64
    assert x.type(cp.float64).type() == "torch.DoubleTensor"
    with pytest.raises((TypeError, ValueError)):
        x.type("torch.cuda.FloatTensor")  # would also move it: not taken silently


def test_format_of_zero_d_tensors() -> None:
    assert f"{cp.tensor(7.0)}" == "7.0"
    assert f"{cp.tensor(7.0):.3f}" == "7.000"
    assert f"{cp.tensor(7)}" == "7"
    assert f"{cp.tensor(7):>4}" == "   7"
    assert format(cp.tensor(True)) == "True"
    assert f"{cp.tensor([7.0])}" == "tensor([7.])"
    with pytest.raises(TypeError, match="format"):
        f"{cp.tensor([7.0]):.3f}"


def test_gelu_special_values() -> None:
    x = cp.tensor([float("inf"), float("-inf"), float("nan")])
    for approx in ("none", "tanh"):
        got = F.gelu(x, approximate=approx).numpy()
        assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])


# ---------------------------------------------------------------- argument forms


@pytest.mark.parametrize("fn", [cp.zeros, cp.ones, cp.empty, cp.rand, cp.randn])
def test_size_keyword(fn: Any) -> None:
    assert fn(size=(2, 3)).shape == (2, 3)
    assert fn(size=[4]).shape == (4,)
    assert fn(size=(2, 3), dtype=cp.float64).dtype == cp.float64
    with pytest.raises(TypeError, match="multiple values for argument 'size'"):
        fn((2, 3), size=(2, 3))


def test_add_sub_alpha() -> None:
    x, y = cp.tensor([1.0, 2.0]), cp.tensor([10.0, 20.0])
    exact(x.add(y, alpha=2), np.array([21.0, 42.0], dtype=np.float32))
    exact(cp.add(x, y, alpha=0.5), np.array([6.0, 12.0], dtype=np.float32))
    exact(x.sub(y, alpha=2), np.array([-19.0, -38.0], dtype=np.float32))
    exact(cp.sub(x, 1, alpha=3), np.array([-2.0, -1.0], dtype=np.float32))
    exact(x.subtract(y, alpha=-1), np.array([11.0, 22.0], dtype=np.float32))
    z = x.clone()
    assert z.add_(y, alpha=-1) is z
    exact(z, np.array([-9.0, -18.0], dtype=np.float32))
    z.sub_(y, alpha=0.5)
    exact(z, np.array([-14.0, -28.0], dtype=np.float32))
    exact(cp.tensor([1, 2]).add(cp.tensor([3, 4]), alpha=2), np.array([7, 10]))
    exact(x.add([1.0, 2.0], alpha=2), np.array([3.0, 6.0], dtype=np.float32))  # a list is data, not repeated
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        cp.tensor([1, 2]).add(cp.tensor([3, 4]), alpha=0.5)
    # alpha takes part in the gradient
    a = cp.tensor([1.0, 2.0], requires_grad=True)
    b = cp.tensor([3.0, 4.0], requires_grad=True)
    a.add(b, alpha=3).sum().backward()
    assert a.grad is not None and b.grad is not None
    exact(a.grad, np.ones(2, dtype=np.float32))
    exact(b.grad, np.full(2, 3.0, dtype=np.float32))


def test_clamp_min_max() -> None:
    x = cp.tensor([-2.0, 0.5, 3.0])
    exact(x.clamp_min(0), np.array([0.0, 0.5, 3.0], dtype=np.float32))
    exact(x.clamp_max(cp.tensor([1.0, 0.0, 5.0])), np.array([-2.0, 0.0, 3.0], dtype=np.float32))


LOSSES, _ = load("losses")


@pytest.mark.parametrize("name", ["l1_loss", "mse_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_pointwise_losses(name: str, reduction: str) -> None:
    x = cp.tensor(LOSSES["input"], requires_grad=True)
    r = getattr(F, name)(x, cp.tensor(LOSSES["target"]), reduction=reduction, weight=cp.tensor(LOSSES["weight"]))
    close(r, LOSSES[f"{name}.{reduction}.out"])
    r.sum().backward()
    assert x.grad is not None
    close(x.grad, LOSSES[f"{name}.{reduction}.grad"])


def test_weighted_loss_weight_shape_must_match() -> None:
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.l1_loss(cp.ones(2, 3), cp.zeros(2, 3), weight=cp.ones(3))


def test_embedding_padding_row_gets_no_gradient() -> None:
    # torch: the gradient rows of idx 2 and 3 are the summed output weights, padding row 1 zero.
    e = cp.nn.Embedding(4, 2, padding_idx=1)
    np.testing.assert_array_equal(e.weight.detach().numpy()[1], np.zeros(2, dtype=np.float32))
    (e(cp.tensor([[1, 2], [1, 3]])) * cp.arange(8.0).reshape(2, 2, 2)).sum().backward()
    assert e.weight.grad is not None
    exact(e.weight.grad, np.array([[0, 0], [0, 0], [2, 3], [6, 7]], dtype=np.float32))
    assert cp.nn.Embedding(4, 2, padding_idx=-1).padding_idx == 3


def test_flip_of_a_non_contiguous_view() -> None:
    x = cp.arange(12.0).reshape(3, 4).t()[1:]
    exact(x.flip(0), np.array([[3, 7, 11], [2, 6, 10], [1, 5, 9]], dtype=np.float32))
    exact(x.flip(1), np.array([[9, 5, 1], [10, 6, 2], [11, 7, 3]], dtype=np.float32))
    exact(x.flip(0, 1), np.array([[11, 7, 3], [10, 6, 2], [9, 5, 1]], dtype=np.float32))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, ip: F.relu(x, inplace=ip),
        lambda x, ip: F.relu6(x, inplace=ip),
        lambda x, ip: F.leaky_relu(x, 0.1, inplace=ip),
        lambda x, ip: F.elu(x, inplace=ip),
        lambda x, ip: F.hardtanh(x, inplace=ip),
        lambda x, ip: F.silu(x, inplace=ip),
        lambda x, ip: F.dropout(x, 0.5, training=False, inplace=ip),
        lambda x, ip: cp.nn.ReLU(inplace=ip)(x),
        lambda x, ip: cp.nn.LeakyReLU(inplace=ip)(x),
        lambda x, ip: cp.nn.Hardswish(inplace=ip)(x),
    ],
)
def test_inplace_flags_modify_and_return_the_input(call: Any) -> None:
    src = np.array([-1.0, 2.0, -3.0, 0.5], dtype=np.float32)
    y = cp.tensor(src)
    want = call(y, False)
    exact(y, src)  # the out-of-place call left its input alone
    x = cp.tensor(src)
    r = call(x, True)
    assert r is x
    exact(x, want.numpy())
