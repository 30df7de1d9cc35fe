"""Property-based tests of tensor ops against NumPy (PyTorch semantics).

torch is never imported: NumPy computes the reference, and PyTorch's rules
(type promotion, floor division, half-to-even rounding, ...) are written out
here where NumPy differs.
"""

from __future__ import annotations

import math
import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import candle_py as cp

# name -> (candle dtype, NumPy dtype used to build and check values)
DTYPES = {
    "float32": (cp.float32, np.float32),
    "float64": (cp.float64, np.float64),
    "float16": (cp.float16, np.float32),
    "bfloat16": (cp.bfloat16, np.float32),
    "int64": (cp.int64, np.int64),
    "int32": (cp.int32, np.int32),
    "int16": (cp.int16, np.int16),
    "uint8": (cp.uint8, np.uint8),
    "uint32": (cp.uint32, np.uint32),
    "bool": (cp.bool, np.bool_),
}
FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["int64", "int32", "int16", "uint8", "uint32"]
SIGNED_INTS = ["int64", "int32", "int16"]
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ["bool"]
HALF = ("float16", "bfloat16")

# ---------------------------------------------------------------------------
# PyTorch's type promotion, written out (uint32 is only promoted with itself
# and with floats in PyTorch, so mixed integer pairs leave it out).
_INT_ORDER = ["uint8", "int16", "int32", "int64"]
_FLOAT_ORDER = ["float16", "bfloat16", "float32", "float64"]


def category(d: str) -> int:
    return 0 if d == "bool" else (2 if d in FLOATS else 1)


def promote(a: str, b: str) -> str:
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return max(a, b, key=_FLOAT_ORDER.index)
    return max(a, b, key=_INT_ORDER.index)


def result_type(a: str, a_kind: str, b: str, b_kind: str) -> str:
    """kinds: 'dim' (a tensor with >= 1 dims), 'zero' (0-d tensor), 'scalar' (Python number)."""
    groups = {"dim": [], "zero": [], "scalar": []}
    for d, k in ((a, a_kind), (b, b_kind)):
        if k == "scalar" and d in FLOATS:
            d = "float32"
        groups[k].append(d)

    def res(g):
        if not g:
            return None
        r = g[0]
        for d in g[1:]:
            r = promote(r, d)
        return r

    def combine(higher, lower):
        if higher is None:
            return lower
        if lower is None:
            return higher
        if category(higher) == 2:
            return higher
        if higher == "bool" or category(lower) == 2:
            return promote(higher, lower)
        return higher

    return combine(res(groups["dim"]), combine(res(groups["zero"]), res(groups["scalar"])))


# ---------------------------------------------------------------------------
# helpers


def name_of(t: cp.Tensor) -> str:
    return str(t.dtype).split(".")[-1]


def make(arr, name: str) -> cp.Tensor:
    cdt, ndt = DTYPES[name]
    a = np.asarray(arr).astype(ndt)
    t = cp.tensor(a, dtype=cdt)
    assert tuple(t.shape) == a.shape
    return t


def held(t: cp.Tensor) -> np.ndarray:
    """The values a tensor holds, as NumPy (half types widened to float32)."""
    if name_of(t) in HALF:
        return np.asarray(t.float().numpy())
    return np.asarray(t.numpy())


def tol(name: str) -> dict:
    if name in HALF:
        return dict(rtol=1e-2, atol=1e-2)
    if name == "float64":
        return dict(rtol=1e-7, atol=1e-8)
    return dict(rtol=1e-4, atol=1e-5)


def check(t: cp.Tensor, expected, dtype: str, **kw) -> None:
    """Assert dtype, shape and values (exact for ints and bools)."""
    assert isinstance(t, cp.Tensor), type(t)
    assert name_of(t) == dtype, (name_of(t), dtype)
    expected = np.asarray(expected)
    got = held(t)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if dtype in FLOATS:
        t_ = tol(dtype)
        t_.update(kw)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), equal_nan=True, **t_)
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def values(name: str, lo: float = -10, hi: float = 10):
    """An element strategy for a dtype (small, NaN-free, exact in half types where we need it)."""
    if name == "bool":
        return st.booleans()
    if name in FLOATS:
        if name in HALF:
            # quarters are exact in float16 and bfloat16 (within this range)
            return st.integers(int(lo * 4), int(hi * 4)).map(lambda k: k / 4)
        return st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=32)
    if name.startswith("uint"):
        return st.integers(0, int(hi))
    return st.integers(int(lo), int(hi))


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
NONEMPTY = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


@st.composite
def tensor_of(draw, name: str, shape=None, lo=-10, hi=10):
    shape = draw(SHAPES) if shape is None else shape
    arr = draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name, lo, hi)))
    return arr


def silence():
    return np.errstate(all="ignore")


# ---------------------------------------------------------------------------
# binary operators

ARITH = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
CMP = ["eq", "ne", "lt", "le", "gt", "ge"]


def rounded(x: np.ndarray, name: str) -> np.ndarray:
    """`x` as dtype `name` holds it (half types rounded for real), floats widened to float64."""
    if name == "float16":
        return x.astype(np.float16).astype(np.float64)
    if name == "bfloat16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16).astype(np.float64)
    x = x.astype(DTYPES[name][1])
    return x.astype(np.float64) if name in FLOATS else x


def np_binary(op: str, a: np.ndarray, b: np.ndarray, out: str) -> np.ndarray:
    """Reference in NumPy for `a (op) b` with PyTorch's semantics and result dtype `out`."""
    with silence(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op in CMP:
            # Both sides are cast to the common dtype first, as PyTorch does: a 0-d
            # float32 2.00001 rounds to 2.0 against a float16 tensor and compares equal.
            aa, bb = rounded(a, out), rounded(b, out)
            return getattr(
                np, {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}[op]
            )(aa, bb)
        if out in FLOATS:
            aa, bb = a.astype(np.float64), b.astype(np.float64)
        else:
            aa, bb = a.astype(DTYPES[out][1]), b.astype(DTYPES[out][1])
        if op == "add":
            return np.logical_or(aa, bb) if out == "bool" else aa + bb
        if op == "sub":
            return aa - bb
        if op == "mul":
            return np.logical_and(aa, bb) if out == "bool" else aa * bb
        if op == "truediv":
            q = a.astype(np.float64) / b.astype(np.float64)
            return q.astype(np.float64 if out == "float64" else np.float32)  # overflow as the result dtype does
        if op == "floordiv":
            return np.floor_divide(aa, bb)
        if op == "mod":
            return np.remainder(aa, bb)
        if op == "pow":
            return np.power(aa, bb)
    raise AssertionError(op)


PYOP = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "truediv": lambda x, y: x / y,
    "floordiv": lambda x, y: x // y,
    "mod": lambda x, y: x % y,
    "pow": lambda x, y: x**y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
}


def op_dtypes(op: str):
    if op in ("sub", "floordiv", "mod", "pow", "truediv"):
        return [d for d in ALL if d != "bool"] if op != "truediv" else ALL
    return ALL


def op_values(op: str, name: str, rhs: bool):
    if op == "pow":
        if name in FLOATS:
            # exact grid, bases of both signs, integral and fractional exponents
            return st.integers(-12, 12).map(lambda k: k / 4) if not rhs else st.integers(-6, 6).map(lambda k: k / 2)
        if name.startswith("uint"):
            return st.integers(0, 3) if not rhs else st.integers(0, 4)
        return st.integers(-4, 4) if not rhs else st.integers(0, 4)
    if op in ("floordiv", "mod") and name in FLOATS:
        return st.integers(-40, 40).map(lambda k: k / 4)  # dyadic: quotients are far from rounding cliffs
    if op in ("floordiv", "mod") and rhs and name in INTS:
        lo = 1 if name.startswith("uint") else -10
        return st.integers(lo, 10).filter(lambda v: v != 0)
    if name == "uint8" and op in ("add", "mul"):
        return st.integers(0, 15)
    if name == "uint8" and op == "sub":
        return st.integers(0, 255)
    if name == "uint32" and op == "sub":
        return st.integers(0, 50)  # wrap-around differences
    return values(name)


def mixed_pair(draw, op):
    a = draw(st.sampled_from(op_dtypes(op)))
    same = draw(st.booleans())
    if same or a == "uint32":
        return a, a
    choices = [d for d in op_dtypes(op) if d != "uint32"]
    return a, draw(st.sampled_from(choices))


@pytest.mark.parametrize("op", ARITH + CMP)
@given(data=st.data())
def test_binary_tensor_tensor(op, data):
    da, db = mixed_pair(data.draw, op)
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0, max_side=4)).input_shapes
    a = data.draw(hnp.arrays(DTYPES[da][1], sa, elements=op_values(op, da, False)))
    b = data.draw(hnp.arrays(DTYPES[db][1], sb, elements=op_values(op, db, True)))
    out = promote(da, db) if (len(sa) > 0) == (len(sb) > 0) else result_type(da, "dim" if sa else "zero", db, "dim" if sb else "zero")
    if out == "bool" and op in ("sub", "floordiv", "mod", "pow"):
        return
    if op == "pow" and out in INTS and not (da in INTS and db in INTS):
        return
    ta, tb = make(a, da), make(b, db)
    got = PYOP[op](ta, tb)
    ha, hb = held(ta), held(tb)
    want_dt = "bool" if op in CMP else ("float32" if op == "truediv" and out not in FLOATS else out)
    expected = np_binary(op, ha, hb, out)
    if op == "pow" and out in HALF:
        # a half-precision result of a large power: compare relative
        check(got, expected, want_dt, rtol=2e-2, atol=2e-2)
    else:
        check(got, expected, want_dt)
    # The method form agrees with the operator.
    meth = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder"}.get(op, op)
    check(getattr(ta, meth)(tb), expected, want_dt, **({"rtol": 2e-2, "atol": 2e-2} if op == "pow" and out in HALF else {}))


@pytest.mark.parametrize("op", ARITH + CMP)
@given(data=st.data())
def test_binary_scalar_and_reflected(op, data):
    da = data.draw(st.sampled_from([d for d in op_dtypes(op)]))
    kind = data.draw(st.sampled_from(["int", "float", "bool"]))
    if op in ("floordiv", "mod") and kind == "bool":
        kind = "int"
    shape = data.draw(SHAPES)
    a = data.draw(hnp.arrays(DTYPES[da][1], shape, elements=op_values(op, da, False)))
    if kind == "bool":
        s = data.draw(st.booleans())
    elif kind == "int":
        s = data.draw(op_values(op, "int64", True) if da != "uint8" or op != "pow" else st.integers(0, 4))
        if da.startswith("uint"):
            s = abs(s)
            if op in ("floordiv", "mod") and s == 0:
                s = 1
    else:
        s = data.draw(op_values(op, "float32", True) if op in ("pow", "floordiv", "mod") else st.integers(-40, 40).map(lambda k: k / 4))
    sdt = {"int": "int64", "float": "float32", "bool": "bool"}[kind]
    out = result_type(da, "dim" if shape else "zero", sdt, "scalar")
    ta = make(a, da)
    ha = held(ta)
    sarr = np.asarray(s)

    def want_dt(o: str) -> str:
        return "bool" if op in CMP else ("float32" if op == "truediv" and o not in FLOATS else o)

    extra = {"rtol": 2e-2, "atol": 2e-2} if op == "pow" and out in HALF else {}

    # tensor (op) scalar
    if not (out == "bool" and op in ("sub", "floordiv", "mod", "pow")) and not (
        op == "pow" and out in INTS and (da not in INTS and da != "bool")
    ):
        if op == "pow" and out in INTS and isinstance(s, int) and s < 0:
            with pytest.raises(RuntimeError):
                _ = ta**s
        else:
            check(PYOP[op](ta, s), np_binary(op, ha, sarr, out), want_dt(out), **extra)

    # scalar (op) tensor: the reflected form
    if out == "bool" and op in ("sub", "floordiv", "mod", "pow"):
        return
    if op in ("floordiv", "mod") and (ha == 0).any() and out in INTS:
        with pytest.raises(ZeroDivisionError):
            PYOP[op](s, ta)
        return
    if op == "pow":
        if out in INTS and (ha < 0).any():
            return
        if out in INTS and da not in INTS:
            return
    if op in CMP:
        expected = np_binary(op, sarr, ha, out)
    else:
        expected = np_binary(op, sarr, ha, out)
    check(PYOP[op](s, ta), expected, want_dt(out), **extra)


@given(data=st.data())
def test_binary_zero_dim_tensor_promotion(data):
    """0-d tensors only raise the category, never the width within one."""
    da = data.draw(st.sampled_from([d for d in ALL if d != "uint32"]))
    db = data.draw(st.sampled_from([d for d in ALL if d != "uint32"]))
    op = data.draw(st.sampled_from(["add", "mul", "eq", "lt"]))
    shape = data.draw(NONEMPTY)
    a = data.draw(hnp.arrays(DTYPES[da][1], shape, elements=values(da, 0, 5)))
    b = np.asarray(data.draw(values(db, 0, 5)), dtype=DTYPES[db][1])
    ta, tb = make(a, da), make(b, db)
    out = result_type(da, "dim", db, "zero")
    want = "bool" if op in CMP else out
    check(PYOP[op](ta, tb), np_binary(op, held(ta), held(tb), out), want)
    check(PYOP[op](tb, ta), np_binary(op, held(tb), held(ta), out), want)


@pytest.mark.parametrize(
    "a, b, op, want",
    [
        (lambda: cp.tensor([1, 2]), lambda: 2.5, "add", "float32"),
        (lambda: cp.tensor([1, 2], dtype=cp.int32), lambda: cp.tensor([3, 4], dtype=cp.int32), "truediv", "float32"),
        (lambda: cp.tensor([1, 2]), lambda: 2, "truediv", "float32"),
        (lambda: cp.tensor([1.0, 2.0]), lambda: cp.tensor(2.0, dtype=cp.float64), "add", "float32"),
        (lambda: cp.tensor([1, 2], dtype=cp.uint8), lambda: cp.tensor([3, 4]), "add", "int64"),
        (lambda: cp.tensor([1, 2], dtype=cp.int16), lambda: cp.tensor(2.0, dtype=cp.float64), "add", "float64"),
        (lambda: cp.tensor([1, 2], dtype=cp.uint8), lambda: 3, "mul", "uint8"),
        (lambda: cp.tensor([True, False]), lambda: 2, "add", "int64"),
        (lambda: cp.tensor([True, False]), lambda: 2.0, "mul", "float32"),
        (lambda: cp.tensor([1.0], dtype=cp.float16), lambda: cp.tensor([1.0], dtype=cp.bfloat16), "add", "float32"),
        (lambda: cp.tensor(1, dtype=cp.int32), lambda: 2.5, "sub", "float32"),
        (lambda: cp.tensor(1.0, dtype=cp.float64), lambda: 2, "add", "float64"),
        (lambda: cp.tensor([1], dtype=cp.int32), lambda: cp.tensor(2), "add", "int32"),
        (lambda: cp.tensor([1], dtype=cp.int32), lambda: cp.tensor([2]), "add", "int64"),
        (lambda: cp.tensor([1.5], dtype=cp.float16), lambda: 2.5, "mul", "float16"),
    ],
)
def test_promotion_table(a, b, op, want):
    x, y = a(), b()
    assert name_of(PYOP[op](x, y)) == want
    assert name_of(PYOP[op](y, x) if op != "truediv" else PYOP[op](x, y)) == want
    assert (x == y).dtype == cp.bool
    assert (x < y).dtype == cp.bool


def test_true_division_of_ints():
    r = cp.tensor([7, -7, 1]) / cp.tensor([2, 2, 0])
    assert r.dtype == cp.float32
    np.testing.assert_array_equal(r.numpy(), np.array([3.5, -3.5, np.inf], np.float32))


def test_integer_floor_div_and_mod_follow_python():
    for a in range(-7, 8):
        for b in [-3, -2, -1, 1, 2, 3]:
            ta, tb = cp.tensor([a]), cp.tensor([b])
            assert (ta // tb).item() == a // b, (a, b)
            assert (ta % tb).item() == a % b, (a, b)
            assert (ta // b).item() == a // b
            assert (a // tb).item() == a // b
            assert (a % tb).item() == a % b


@pytest.mark.parametrize("name", SIGNED_INTS + ["uint8"])
def test_integer_division_by_zero_raises(name):
    a = make([1, 2, 3], name)
    z = make([1, 0, 1], name)
    with pytest.raises(ZeroDivisionError):
        a // z
    with pytest.raises(ZeroDivisionError):
        a % z
    with pytest.raises(ZeroDivisionError):
        a // 0
    with pytest.raises(ZeroDivisionError):
        a.remainder(0)


def test_float_division_by_zero_is_ieee():
    r = cp.tensor([1.0, -1.0, 0.0]) / 0.0
    np.testing.assert_array_equal(r.numpy(), np.array([np.inf, -np.inf, np.nan], np.float32))
    assert np.isnan((cp.tensor([1.0]) % 0.0).item())


@given(data=st.data())
def test_bool_logical_operators(data):
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0, max_side=4)).input_shapes
    a = data.draw(hnp.arrays(np.bool_, sa))
    b = data.draw(hnp.arrays(np.bool_, sb))
    ta, tb = cp.tensor(a), cp.tensor(b)
    check(ta & tb, a & b, "bool")
    check(ta | tb, a | b, "bool")
    check(ta ^ tb, a ^ b, "bool")
    check(~ta, ~a, "bool")
    check(ta & True, a & True, "bool")
    check(False | ta, False | a, "bool")


INPLACE = [
    ("add_", lambda x, y: x.__iadd__(y), np.add),
    ("sub_", lambda x, y: x.__isub__(y), np.subtract),
    ("mul_", lambda x, y: x.__imul__(y), np.multiply),
    ("div_", lambda x, y: x.__itruediv__(y), np.true_divide),
]


@pytest.mark.parametrize("meth, iop, nref", INPLACE)
@given(data=st.data())
def test_inplace_forms(meth, iop, nref, data):
    name = data.draw(st.sampled_from(["float32", "float64", "float16", "int64", "int32"]))
    if meth == "div_" and name in INTS:
        name = "float32"
    sa, sb = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=1, max_side=4)).input_shapes
    shape = np.broadcast_shapes(sa, sb)
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name, 1, 8)))
    b = data.draw(hnp.arrays(DTYPES[name][1], sb, elements=values(name, 1, 8)))
    expected = nref(make(a, name).float().numpy().astype(np.float64) if name in HALF else a, held(make(b, name)))
    x = make(a, name)
    ident = id(x)
    x2 = iop(x, make(b, name))
    x2 = x if x2 is None else x2
    assert x2 is x or id(x2) == ident
    check(x, expected, name)
    y = make(a, name)
    r = getattr(y, meth)(make(b, name))
    assert r is y
    check(y, expected, name)


def test_inplace_keeps_dtype_and_rejects_promotion():
    x = cp.tensor([1, 2, 3])
    x += 2
    assert x.dtype == cp.int64 and x.tolist() == [3, 4, 5]
    with pytest.raises((TypeError, RuntimeError)):
        x += 1.5
    f = cp.tensor([1.0, 2.0])
    f *= cp.tensor([2, 3])
    assert f.dtype == cp.float32 and f.tolist() == [2.0, 6.0]
    with pytest.raises(ValueError):
        cp.tensor([1.0, 2.0]).add_(cp.ones(2, 2))  # cannot broadcast the output


def test_inplace_is_seen_by_other_references():
    x = cp.tensor([1.0, 2.0])
    alias = x
    x.mul_(3)
    assert alias.tolist() == [3.0, 6.0]
    x.clamp_(max=4.0)
    assert alias.tolist() == [3.0, 4.0]
    x.masked_fill_(cp.tensor([True, False]), -1.0)
    assert alias.tolist() == [-1.0, 4.0]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_same_shape_dispatch_path_edge_cases(dt):
    """Small same-shape float ops take a lock-only fast path: an operand used twice,
    strided views, empty tensors, fresh results and autograd must all still hold."""
    x = cp.tensor([1.5, -2.0, 4.0, 0.25], dtype=getattr(cp, dt))
    for op, want in [("add", [3.0, -4.0, 8.0, 0.5]), ("sub", [0.0] * 4), ("mul", [2.25, 4.0, 16.0, 0.0625]), ("truediv", [1.0] * 4)]:
        got = PYOP[op](x, x)
        assert got.dtype == x.dtype and got.tolist() == want
    # The result is a new tensor: writing to it leaves the operands alone.
    y = x + x
    y.add_(1.0)
    assert x.tolist() == [1.5, -2.0, 4.0, 0.25]
    # Strided views and broadcasting fall back to the general path with the same values.
    m = cp.tensor(np.arange(12, dtype=dt).reshape(3, 4))
    np.testing.assert_array_equal((m.t() + m.t()).numpy(), 2 * np.arange(12, dtype=dt).reshape(3, 4).T)
    np.testing.assert_array_equal(
        (m[:, ::2] * m[:, 1::2]).numpy(), np.arange(0, 12, 2, dtype=dt).reshape(3, 2) * np.arange(1, 12, 2, dtype=dt).reshape(3, 2)
    )
    e = cp.zeros(0, 3, dtype=getattr(cp, dt))
    assert (e - e).shape == (0, 3)
    # Operands in the graph are not taken by the fast path: gradients flow.
    w = cp.tensor([1.0, 2.0, 3.0], dtype=getattr(cp, dt), requires_grad=True)
    (w * w + w / w).sum().backward()
    assert w.grad.tolist() == [2.0, 4.0, 6.0]
    with cp.no_grad():
        assert not (w * w).requires_grad


def test_pow_of_negative_bases():
    x = cp.tensor([-3.0, -2.0, 0.0, 2.0])
    check(x ** cp.tensor([3.0, 2.0, 0.0, 0.5]), [-27.0, 4.0, 1.0, math.sqrt(2)], "float32")
    assert math.isnan((cp.tensor([-2.0]) ** cp.tensor([0.5])).item())
    check(cp.tensor([-3, 2]) ** cp.tensor([3, 2]), [-27, 4], "int64")
    check(cp.tensor([-3.0]) ** 3, [-27.0], "float32")
    check(2 ** cp.tensor([-1.0, 2.0]), [0.5, 4.0], "float32")
    check((-2.0) ** cp.tensor([2.0, 3.0]), [4.0, -8.0], "float32")
    with pytest.raises(RuntimeError):
        cp.tensor([2]) ** -1


# ---------------------------------------------------------------------------
# unary functions

UNARY_FLOAT = {
    # name: (numpy reference, domain lo, hi)
    "exp": (np.exp, -5, 5),
    "log": (np.log, 0.05, 10),
    "log2": (np.log2, 0.05, 10),
    "log10": (np.log10, 0.05, 10),
    "log1p": (np.log1p, -0.9, 10),
    "expm1": (np.expm1, -5, 5),
    "sqrt": (np.sqrt, 0, 10),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.05, 10),
    "sin": (np.sin, -6, 6),
    "cos": (np.cos, -6, 6),
    "tan": (np.tan, -1.4, 1.4),
    "tanh": (np.tanh, -5, 5),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -8, 8),
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), -3, 3),
    "reciprocal": (lambda x: 1 / x, 0.25, 10),
}


@pytest.mark.parametrize("fn", sorted(UNARY_FLOAT))
@given(data=st.data())
def test_unary_float_functions(fn, data):
    ref, lo, hi = UNARY_FLOAT[fn]
    name = data.draw(st.sampled_from(FLOATS + ["int64", "int32", "uint8"]))
    if name in INTS:
        lo2, hi2 = max(math.ceil(lo), 0 if name == "uint8" else math.ceil(lo)), math.floor(hi)
        if fn in ("log", "log2", "log10", "rsqrt", "reciprocal"):
            lo2 = max(lo2, 1)
        elems = st.integers(lo2, hi2)
    elif name in HALF:
        elems = st.integers(math.ceil(lo * 4), math.floor(hi * 4)).map(lambda k: k / 4).filter(lambda v: lo <= v <= hi)
    else:
        elems = st.floats(float(np.float32(lo)), float(np.float32(hi)), width=32).filter(lambda v: lo <= v <= hi)
    a = data.draw(hnp.arrays(DTYPES[name][1], data.draw(SHAPES), elements=elems))
    t = make(a, name)
    out = name if name in FLOATS else "float32"
    with silence():
        expected = ref(held(t).astype(np.float64))
    kw = {}
    if fn == "tan" and name in HALF:
        kw = dict(rtol=3e-2, atol=3e-2)
    check(getattr(t, fn)(), expected, out, **kw)
    check(getattr(cp, fn)(t), expected, out, **kw)


@given(a=hnp.arrays(np.float32, SHAPES, elements=st.integers(-20, 20).map(lambda k: k / 4)), name=st.sampled_from(FLOATS))
def test_rounding_functions(a, name):
    t = make(a, name)
    h = held(t).astype(np.float64)
    check(t.floor(), np.floor(h), name)
    check(t.ceil(), np.ceil(h), name)
    check(t.round(), np.round(h), name)  # NumPy rounds half to even, as PyTorch
    check(t.trunc(), np.trunc(h), name)
    check(t.frac(), h - np.trunc(h), name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rounding_and_erf_edges_over_parallel_sizes(dtype):
    """The vectorized roundings and erf (one pass split over threads) on their edge
    values, in a tensor long enough to split: floor/ceil/trunc/round equal NumPy's bit
    for bit (the sign of zeros, halves to even, values past 2^23 already whole, NaN,
    infinities), erf is within 2e-6 of the exact value relative to max(|erf|, 1e-30)
    (float32; float64 keeps Candle's series), odd at 0 and +-1 at the infinities."""
    edges = [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        0.49999997,
        -1.0000001,
        2.0**23 + 1,
        -(2.0**23) - 3,
        1e30,
        -1e30,
        3.9,
        4.1,
        -4.1,
        1e-30,
        np.inf,
        -np.inf,
        np.nan,
    ]
    rng = np.random.default_rng(3)
    a = np.concatenate([np.array(edges), rng.uniform(-50, 50, 300_000), rng.standard_normal(1000) * 1e-3]).astype(dtype)
    t = cp.from_numpy(a)
    for fn, want in (("floor", np.floor(a)), ("ceil", np.ceil(a)), ("trunc", np.trunc(a)), ("round", np.round(a))):
        got = getattr(t, fn)().numpy()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, want, err_msg=fn)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{fn}: sign of zeros")
    got = t.erf().numpy().astype(np.float64)
    exact = np.array([math.erf(v) for v in a.astype(np.float64)])
    finite = ~np.isnan(exact)
    assert np.isnan(got[~finite]).all()
    rel = np.abs(got[finite] - exact[finite]) / np.maximum(np.abs(exact[finite]), 1e-30)
    assert rel.max() < 2e-6, (rel.max(), a[finite][rel.argmax()])
    assert got[0] == 0.0 and np.signbit(got[1]) and got[edges.index(np.inf)] == 1.0 and got[edges.index(-np.inf)] == -1.0


def test_flip_of_large_tensors_and_repeated_dims():
    """`flip` over one and several dims of a tensor large enough to split over threads,
    several dtypes, equals NumPy's; a dim given twice raises as in PyTorch (it was
    flipped twice, a no-op)."""
    a = np.arange(6 * 70 * 1001).reshape(6, 70, 1001)
    for dt in (np.float32, np.int64, np.uint8, np.float64):
        t = cp.from_numpy(a.astype(dt))
        for dims in ((-1,), (0,), (1,), (0, 2), (2, 1, 0)):
            np.testing.assert_array_equal(t.flip(dims).numpy(), np.flip(a.astype(dt), axis=dims), err_msg=f"{dt} {dims}")
    t = cp.from_numpy(a.astype(np.float32))
    np.testing.assert_array_equal(
        t.transpose(0, 2)[:, ::3].flip(0, 1).numpy(), np.flip(a.astype(np.float32).transpose(2, 1, 0)[:, ::3], axis=(0, 1))
    )
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        t.flip(0, 0)
    with pytest.raises(RuntimeError, match="dim 2 appears multiple times"):
        t.flip(2, -1)


@pytest.mark.parametrize("fn", ["floor", "ceil", "round", "trunc"])
def test_rounding_integers_keeps_dtype(fn):
    t = cp.tensor([-3, 0, 5], dtype=cp.int32)
    r = getattr(t, fn)()
    assert r.dtype == cp.int32 and r.tolist() == [-3, 0, 5]


@given(data=st.data())
def test_sign_preserving_functions(data):
    name = data.draw(st.sampled_from(NUMERIC))
    a = data.draw(tensor_of(name, lo=-10, hi=10))
    t = make(a, name)
    h = held(t)
    with silence(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(t.abs(), np.abs(h), name)
        check(abs(t), np.abs(h), name)
        check(-t, np.negative(h), name)
        check(t.neg(), np.negative(h), name)
        check(t.sign(), np.sign(h), name)
        check(t.square(), np.square(h.astype(np.float64)) if name in FLOATS else np.square(h), name)
        check(t.relu(), np.maximum(h, 0), name)


def test_neg_of_bool_raises():
    with pytest.raises((TypeError, RuntimeError)):
        -cp.tensor([True])


# ---------------------------------------------------------------------------
# reductions


@st.composite
def reduce_case(draw, names=NUMERIC, lo=-10, hi=10, min_side=0):
    name = draw(st.sampled_from(names))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=min_side, max_side=4))
    a = draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name, lo, hi)))
    nd = len(shape)
    form = draw(st.sampled_from(["none", "int", "neg", "tuple"]))
    if nd == 0 or form == "none":
        dim = None
    elif form == "int":
        dim = draw(st.integers(0, nd - 1))
    elif form == "neg":
        dim = draw(st.integers(-nd, -1))
    else:
        dim = tuple(draw(st.lists(st.integers(0, nd - 1), unique=True, min_size=1, max_size=nd)))
    keepdim = draw(st.booleans())
    return name, a, dim, keepdim


def np_axis(dim, nd):
    if dim is None:
        return None
    if isinstance(dim, tuple):
        return tuple(d % nd for d in dim)
    return dim % nd


def call_reduce(t, fn, dim, keepdim, **kw):
    if dim is None:
        return getattr(t, fn)(**kw) if not keepdim else getattr(t, fn)(dim=None, keepdim=False, **kw)
    return getattr(t, fn)(dim, keepdim=keepdim, **kw)


@given(case=reduce_case(ALL))
def test_sum(case):
    name, a, dim, keepdim = case
    t = make(a, name)
    h = held(t)
    out = name if name in FLOATS else "int64"
    kd = keepdim and dim is not None
    expected = np.sum(h.astype(np.float64 if name in FLOATS else np.int64), axis=np_axis(dim, a.ndim), keepdims=kd)
    check(call_reduce(t, "sum", dim, keepdim), expected, out)
    check(cp.sum(t), np.sum(h.astype(np.float64 if name in FLOATS else np.int64)), out)


@given(case=reduce_case(FLOATS, min_side=1))
def test_mean(case):
    name, a, dim, keepdim = case
    t = make(a, name)
    kd = keepdim and dim is not None
    check(call_reduce(t, "mean", dim, keepdim), np.mean(held(t).astype(np.float64), axis=np_axis(dim, a.ndim), keepdims=kd), name)


def test_mean_of_int_raises_and_empty_is_nan():
    with pytest.raises((TypeError, RuntimeError)):
        cp.tensor([1, 2]).mean()
    assert math.isnan(cp.zeros(0).mean().item())


@given(case=reduce_case(NUMERIC + ["bool"], min_side=1))
def test_amax_amin(case):
    name, a, dim, keepdim = case
    t = make(a, name)
    h = held(t)
    kd = keepdim and dim is not None
    ax = np_axis(dim, a.ndim)
    check(call_reduce(t, "amax", dim, keepdim), np.max(h, axis=ax, keepdims=kd), name)
    check(call_reduce(t, "amin", dim, keepdim), np.min(h, axis=ax, keepdims=kd), name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_amax_amin_over_every_dim_of_large_tensors(dtype):
    """amax/amin (one values-only pass, split over threads) over each dim of a tensor
    with rows longer than the kernel's 64 lanes and slices wider than a task: NumPy's
    values exactly, NaN wherever the reduced slice holds one, -inf/inf kept; the
    gradient path (requires_grad) gives the same values."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 333, 101)).astype(dtype)
    a[2, 17, 40] = np.nan
    a[4, :, 3] = -np.inf
    a[1, 5, :] = np.inf
    t = cp.from_numpy(a)
    for dim in (0, 1, 2, -1, (0, 2)):
        for fn, ref in (("amax", np.max), ("amin", np.min)):
            want = ref(a, axis=dim)
            np.testing.assert_array_equal(getattr(t, fn)(dim).numpy(), want, err_msg=f"{fn} {dim}")
            np.testing.assert_array_equal(
                getattr(t.detach().requires_grad_(True), fn)(dim).detach().numpy(), want, err_msg=f"{fn} {dim} grad path"
            )


def test_prod_of_long_rows_matches_numpy():
    """`prod(-1)` over rows longer than the kernel's 64 lanes (products reassociated):
    floats within rounding of NumPy's, zeros, NaN and infinities as NumPy's, integers
    exact (wrapping as NumPy's int64)."""
    rng = np.random.default_rng(6)
    a = rng.uniform(0.9, 1.1, (300, 1000))
    a[3, 500] = 0.0
    a[4, 10] = np.nan
    a[5, 999] = np.inf
    a[6, :2] = [np.inf, 0.0]
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(cp.from_numpy(a).prod(-1).numpy(), np.prod(a, axis=-1), rtol=1e-12)
        np.testing.assert_allclose(cp.from_numpy(a.astype(np.float32)).prod(-1).numpy(), np.prod(a.astype(np.float32), axis=-1), rtol=2e-5)
    i = rng.integers(-3, 4, (50, 777))
    np.testing.assert_array_equal(cp.from_numpy(i).prod(-1).numpy(), np.prod(i, axis=-1))


def test_amax_of_empty_keeps_empty_dims():
    r = cp.zeros(0, 3).amax(1)
    assert tuple(r.shape) == (0,)
    with pytest.raises((ValueError, IndexError, RuntimeError)):
        cp.zeros(0, 3).amax(0)


@given(data=st.data())
def test_max_min_with_dim(data):
    name = data.draw(st.sampled_from(NUMERIC))
    shape = data.draw(NONEMPTY)
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name)))
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1))
    keepdim = data.draw(st.booleans())
    t = make(a, name)
    h = held(t)
    for fn, nfn in (("max", np.max), ("min", np.min)):
        r = getattr(t, fn)(dim, keepdim=keepdim)
        assert type(r).__name__ == fn
        values_, indices = r
        assert r.values is values_ and r.indices is indices
        check(values_, nfn(h, axis=dim, keepdims=keepdim), name)
        assert indices.dtype == cp.int64
        idx = indices.numpy() if keepdim else np.expand_dims(indices.numpy(), dim)
        # the index points at an extreme element (ties may pick any of them)
        np.testing.assert_array_equal(np.take_along_axis(h, idx, axis=dim), nfn(h, axis=dim, keepdims=True))
        # without dim: the global extreme, a 0-d tensor
        check(getattr(t, fn)(), nfn(h), name)


@given(data=st.data())
def test_argmax_argmin(data):
    name = data.draw(st.sampled_from(NUMERIC))
    shape = data.draw(NONEMPTY)
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name)))
    t = make(a, name)
    h = held(t)
    nd = len(shape)
    for fn, nfn in (("argmax", np.max), ("argmin", np.min)):
        i = getattr(t, fn)()
        assert i.dtype == cp.int64 and i.ndim == 0
        assert h.reshape(-1)[i.item()] == nfn(h)
        dim = data.draw(st.integers(-nd, nd - 1))
        keepdim = data.draw(st.booleans())
        i = getattr(t, fn)(dim=dim, keepdim=keepdim)
        assert i.dtype == cp.int64
        idx = i.numpy() if keepdim else np.expand_dims(i.numpy(), dim)
        assert idx.shape == nfn(h, axis=dim, keepdims=True).shape
        np.testing.assert_array_equal(np.take_along_axis(h, idx, axis=dim), nfn(h, axis=dim, keepdims=True))


@given(case=reduce_case(["float32", "float64"], min_side=1), correction=st.sampled_from([None, 0, 1, 2]), use_unbiased=st.booleans())
def test_var_std(case, correction, use_unbiased):
    name, a, dim, keepdim = case
    t = make(a, name)
    h = held(t).astype(np.float64)
    kd = keepdim and dim is not None
    ax = np_axis(dim, a.ndim)
    n = h.size if ax is None else int(np.prod([h.shape[d] for d in (ax if isinstance(ax, tuple) else (ax,))]))
    if use_unbiased and correction in (0, 1):
        kw = {"unbiased": bool(correction)}
    else:
        kw = {} if correction is None else {"correction": correction}
    ddof = 1 if correction is None else correction
    with silence(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = np.var(h, axis=ax, keepdims=kd, ddof=ddof) if n - ddof > 0 else np.full(np.sum(h, axis=ax, keepdims=kd).shape, np.nan)
    if dim is None:
        v, s = t.var(**kw), t.std(**kw)
    else:
        v, s = t.var(dim, keepdim=keepdim, **kw), t.std(dim, keepdim=keepdim, **kw)
    check(v, ev, name, atol=1e-4)
    check(s, np.sqrt(ev), name, atol=1e-4)


@given(data=st.data())
def test_cumsum(data):
    name = data.draw(st.sampled_from(ALL))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name)))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    t = make(a, name)
    out = name if name in FLOATS else "int64"
    h = held(t).astype(np.float64 if name in FLOATS else np.int64)
    check(t.cumsum(dim), np.cumsum(h, axis=dim), out)
    check(cp.cumsum(t, dim=dim), np.cumsum(h, axis=dim), out)


def np_softmax(x, axis, log=False):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return (x - m - np.log(s)) if log else e / s


@given(data=st.data())
def test_softmax_log_softmax(data):
    name = data.draw(st.sampled_from(FLOATS + ["int64"]))
    shape = data.draw(NONEMPTY)
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name, -20, 20)))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    t = make(a, name)
    out = name if name in FLOATS else "float32"
    # Integers need a float dtype to compute in, as in PyTorch.
    kw = {} if name in FLOATS else {"dtype": cp.float32}
    if kw:
        with pytest.raises(TypeError, match="softmax"):
            t.softmax(dim)
    h = held(t).astype(np.float64)
    check(t.softmax(dim, **kw), np_softmax(h, dim), out)
    check(t.log_softmax(dim, **kw), np_softmax(h, dim, log=True), out, atol=1e-4 if out in ("float32",) else None or tol(out)["atol"])
    check(cp.softmax(t, dim=dim, **kw), np_softmax(h, dim), out)
    check(t.softmax(dim, dtype=cp.float64), np_softmax(h, dim), "float64", rtol=1e-6 if name == "float64" else 1e-6)


@given(data=st.data())
def test_softmax_large_inputs_are_stable(data):
    shape = data.draw(NONEMPTY)
    a = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-1000, 1000, width=32)))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    t = cp.tensor(a)
    s = t.softmax(dim).numpy()
    assert np.isfinite(s).all()
    np.testing.assert_allclose(s.sum(axis=dim), 1.0, rtol=1e-5)
    np.testing.assert_allclose(t.log_softmax(dim).numpy(), np_softmax(a.astype(np.float64), dim, log=True), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n", [3, 70, 1024])
@pytest.mark.parametrize("last", [True, False])
def test_softmax_masked_entries_are_exact_zeros_and_nan_propagates(n, last):
    # Masked scores (-inf, -1e30, or anything past exp's range) weigh exactly 0, as in
    # PyTorch; a subnormal there (it was 1.2e-38) also made a following matmul 27x slower.
    row = np.zeros(n, np.float32)
    row[1:] = np.resize(np.float32([-np.inf, -1e30, -104.0, -88.0]), n - 1)
    rows = np.stack([row, row[::-1].copy()])
    t = cp.tensor(rows) if last else cp.tensor(rows.T.copy()).t()  # a non-contiguous last dim
    s = t.softmax(-1).numpy()
    expect = (rows == rows.max(axis=1, keepdims=True)).astype(np.float32)
    expect /= expect.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(s, expect)
    assert not ((s != 0) & (np.abs(s) < np.finfo(np.float32).tiny)).any()
    logs = t.log_softmax(-1).numpy()
    assert np.isneginf(logs[rows == -np.inf]).all()
    # NaN anywhere in a row makes the whole row NaN (PyTorch's result).
    rows[0, n // 2] = np.nan
    t = cp.tensor(rows) if last else cp.tensor(rows.T.copy()).t()
    s = t.softmax(-1).numpy()
    assert np.isnan(s[0]).all() and not np.isnan(s[1]).any()


@given(data=st.data())
def test_all_any(data):
    name = data.draw(st.sampled_from(ALL))
    shape = data.draw(SHAPES)
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name, -1, 1) if name != "bool" else st.booleans()))
    t = make(a, name)
    h = held(t)
    check(t.all(), np.all(h), "bool")
    check(t.any(), np.any(h), "bool")
    if a.ndim:
        dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
        kd = data.draw(st.booleans())
        check(t.all(dim, keepdim=kd), np.all(h, axis=dim, keepdims=kd), "bool")
        check(t.any(dim=dim, keepdim=kd), np.any(h, axis=dim, keepdims=kd), "bool")


@given(case=reduce_case(["float32", "float64"]), p=st.sampled_from([None, 1, 2, 3]))
def test_norm(case, p):
    name, a, dim, keepdim = case
    t = make(a, name)
    h = held(t).astype(np.float64)
    kd = keepdim and not (p is None and dim is None)  # norm keeps dims even when reducing all
    ax = np_axis(dim, a.ndim)
    pp = 2 if p is None else p
    expected = np.sum(np.abs(h) ** pp, axis=ax, keepdims=kd) ** (1 / pp)
    r = t.norm() if p is None and dim is None else t.norm(p=pp, dim=dim, keepdim=keepdim)
    check(r, expected, name, atol=1e-4)


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_two_norm_one_pass(dtype):
    # The 2-norm's sum of squares in one pass: rows long and short, split and middle
    # dims, a transposed input, against float64 NumPy; NaN and infinity reach their own
    # row only; an empty input's norm is 0.
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 37, 385))
    x = cp.tensor(a, dtype=dtype)
    tol = 1e-6 if dtype == cp.float32 else 1e-12
    for dim in [-1, 1, 0, (1, 2), (0, 2), None]:
        ax = dim if dim is not None else (0, 1, 2)
        want = np.sqrt(np.sum(a * a, axis=ax))
        np.testing.assert_allclose(x.norm(dim=dim).numpy(), want, rtol=tol)
    np.testing.assert_allclose(x.transpose(1, 2).norm(dim=-1).numpy(), np.sqrt(np.sum(a * a, axis=1)), rtol=tol)
    b = a[0].copy()
    b[1, 7], b[2, 384], b[3, 0] = np.nan, np.inf, -np.inf
    got = cp.tensor(b, dtype=dtype).norm(dim=-1).numpy()
    assert np.isnan(got[1]) and got[2] == np.inf and got[3] == np.inf
    np.testing.assert_allclose(np.delete(got, [1, 2, 3]), np.delete(np.sqrt(np.sum(b * b, axis=1)), [1, 2, 3]), rtol=tol)
    e = cp.zeros((4, 0), dtype=dtype).norm(dim=-1)
    assert e.shape == (4,) and (e.numpy() == 0).all()


def test_two_norm_gradient_matches_pytorch_at_zero_rows():
    # PyTorch's LinalgVectorNormBackward0: x * g / norm, and 0 where the norm is 0
    # (a zero row has no direction); the node carries PyTorch's name.
    a = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    x = cp.tensor(a, requires_grad=True)
    n = x.norm(dim=1)
    assert n.grad_fn.name() == "LinalgVectorNormBackward0"
    (n * cp.tensor([2.0, 5.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1.2, 1.6, 0.0], [0.0, 0.0, 0.0]], rtol=1e-6)
    assert np.isfinite(x.grad.numpy()).all()


# ---------------------------------------------------------------------------
# matmul


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["1x1", "1x2", "2x1", "2x2", "batched", "bcast", "1xN", "Nx1"]))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    if kind == "1x1":
        return (k,), (k,)
    if kind == "1x2":
        return (k,), (k, m)
    if kind == "2x1":
        return (n, k), (k,)
    if kind == "2x2":
        return (n, k), (k, m)
    if kind == "batched":
        return batch + (n, k), batch + (k, m)
    if kind == "1xN":
        return (k,), batch + (k, m)
    if kind == "Nx1":
        return batch + (n, k), (k,)
    b2 = tuple(1 if draw(st.booleans()) else d for d in batch)
    if draw(st.booleans()):
        b2 = b2[1:]
    return batch + (n, k), b2 + (k, m)


@given(shapes=matmul_shapes(), name=st.sampled_from(["float32", "float64", "float16", "bfloat16", "int64", "int32"]), data=st.data())
def test_matmul(shapes, name, data):
    sa, sb = shapes
    a = data.draw(hnp.arrays(DTYPES[name][1], sa, elements=values(name, -3, 3)))
    b = data.draw(hnp.arrays(DTYPES[name][1], sb, elements=values(name, -3, 3)))
    ta, tb = make(a, name), make(b, name)
    ha, hb = held(ta), held(tb)
    expected = np.matmul(ha.astype(np.float64), hb.astype(np.float64))
    check(ta @ tb, expected, name, **({"rtol": 2e-2, "atol": 5e-2} if name in HALF else {}))
    check(cp.matmul(ta, tb), expected, name, **({"rtol": 2e-2, "atol": 5e-2} if name in HALF else {}))


@given(data=st.data())
def test_mm_bmm_dot(data):
    n, k, m, b = (data.draw(st.integers(1, 4)) for _ in range(4))
    A = data.draw(hnp.arrays(np.float32, (n, k), elements=values("float32", -3, 3)))
    B = data.draw(hnp.arrays(np.float32, (k, m), elements=values("float32", -3, 3)))
    check(cp.tensor(A).mm(cp.tensor(B)), A.astype(np.float64) @ B, "float32")
    A3 = data.draw(hnp.arrays(np.float64, (b, n, k), elements=values("float64", -3, 3)))
    B3 = data.draw(hnp.arrays(np.float64, (b, k, m), elements=values("float64", -3, 3)))
    check(cp.bmm(cp.tensor(A3), cp.tensor(B3)), A3 @ B3, "float64")
    v = data.draw(hnp.arrays(np.float32, (k,), elements=values("float32", -3, 3)))
    w = data.draw(hnp.arrays(np.float32, (k,), elements=values("float32", -3, 3)))
    check(cp.tensor(v).dot(cp.tensor(w)), np.dot(v.astype(np.float64), w), "float32")


def test_matmul_shape_errors():
    with pytest.raises(ValueError):
        cp.ones(2, 3) @ cp.ones(2, 3)
    with pytest.raises(ValueError):
        cp.ones(2, 3).mm(cp.ones(3))
    with pytest.raises(ValueError):
        cp.ones(2, 2, 3).bmm(cp.ones(3, 3))
    with pytest.raises(ValueError):
        cp.ones(3).dot(cp.ones(4))
    with pytest.raises(ValueError):
        cp.ones(2, 2, 3) @ cp.ones(3, 3, 4)


# ---------------------------------------------------------------------------
# shape ops


def arr_of(draw, shape, name="float32"):
    return draw(hnp.arrays(DTYPES[name][1], shape, elements=values(name)))


@given(data=st.data())
def test_reshape_view_flatten(data):
    name = data.draw(st.sampled_from(ALL))
    shape = data.draw(SHAPES)
    a = arr_of(data.draw, shape, name)
    t = make(a, name)
    n = a.size
    # a random factorisation of n with one -1
    if n > 0:
        f = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        req = (f, -1) if data.draw(st.booleans()) else (-1, f)
        check(t.reshape(*req), a.reshape(req), name)
        check(t.view(req), a.reshape(req), name)
        check(t.reshape(list(req)), a.reshape(req), name)
    check(t.reshape(-1), a.reshape(-1), name)
    check(t.flatten(), a.reshape(-1), name)
    if a.ndim >= 1:
        s = data.draw(st.integers(-a.ndim, a.ndim - 1))
        e = data.draw(st.integers(s % a.ndim, a.ndim - 1))
        s_ = s % a.ndim
        want = a.shape[:s_] + (int(np.prod(a.shape[s_ : e + 1])),) + a.shape[e + 1 :]
        check(t.flatten(s, e), a.reshape(want), name)
        d = data.draw(st.integers(0, a.ndim - 1))
        if a.shape[d] > 0:
            k = data.draw(st.sampled_from([x for x in range(1, a.shape[d] + 1) if a.shape[d] % x == 0]))
            want = a.shape[:d] + (k, a.shape[d] // k) + a.shape[d + 1 :]
            check(t.unflatten(d, (k, -1)), a.reshape(want), name)
    with pytest.raises(ValueError):
        t.reshape(n + 1, 7)


@given(data=st.data())
def test_transpose_permute_t(data):
    name = data.draw(st.sampled_from(["float32", "int64", "bool"]))
    shape = data.draw(SHAPES)
    a = arr_of(data.draw, shape, name)
    t = make(a, name)
    nd = a.ndim
    check(t.T, a.T, name)
    if nd <= 2:
        check(t.t(), a.T, name)
        check(cp.t(t), a.T, name)
    else:
        with pytest.raises(ValueError):
            t.t()
    if nd >= 1:
        d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
        check(t.transpose(d0, d1), np.swapaxes(a, d0, d1), name)
        perm = data.draw(st.permutations(range(nd)))
        check(t.permute(*perm), np.transpose(a, perm), name)
        check(t.permute(perm), np.transpose(a, perm), name)
        # a permuted view still computes right (non-contiguous input)
        if name == "float32":
            check(t.permute(*perm) * 2, np.transpose(a, perm) * 2, name)


@given(data=st.data())
def test_squeeze_unsqueeze(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=3))
    a = arr_of(data.draw, shape)
    t = cp.tensor(a)
    check(t.squeeze(), np.squeeze(a), "float32")
    nd = a.ndim
    if nd:
        d = data.draw(st.integers(-nd, nd - 1))
        want = np.squeeze(a, axis=d) if a.shape[d] == 1 else a
        check(t.squeeze(d), want, "float32")
        dims = tuple(data.draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd)))
        ones = tuple(x for x in dims if a.shape[x] == 1)
        check(t.squeeze(dims), np.squeeze(a, axis=ones) if ones else a, "float32")
    u = data.draw(st.integers(-nd - 1, nd))
    check(t.unsqueeze(u), np.expand_dims(a, u), "float32")


@given(data=st.data())
def test_expand_broadcast_to(data):
    base = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    # a shape that `base` broadcasts to
    extra = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    target = extra + tuple(data.draw(st.integers(0, 3)) if d == 1 else d for d in base)
    a = arr_of(data.draw, base)
    t = cp.tensor(a)
    want = np.broadcast_to(a, target)
    check(t.expand(*target), want, "float32")
    check(t.broadcast_to(target), want, "float32")
    check(cp.broadcast_to(t, target), want, "float32")
    req = extra + tuple(-1 if (d != 1 and data.draw(st.booleans())) else s for d, s in zip(base, target[len(extra) :]))
    check(t.expand(req), want, "float32")


@given(data=st.data())
def test_narrow_chunk_split_unbind(data):
    name = data.draw(st.sampled_from(["float32", "int64", "bool"]))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    a = arr_of(data.draw, shape, name)
    t = make(a, name)
    nd = a.ndim
    d = data.draw(st.integers(-nd, nd - 1))
    size = a.shape[d]
    start = data.draw(st.integers(0, size))
    length = data.draw(st.integers(0, size - start))
    check(t.narrow(d, start, length), np.take(a, range(start, start + length), axis=d), name)
    # chunk: ceil-sized pieces
    c = data.draw(st.integers(1, 6))
    step = -(-size // c) if size else 0
    pieces = t.chunk(c, d)
    assert isinstance(pieces, tuple)
    if size:
        want = [np.take(a, range(s, min(s + step, size)), axis=d) for s in range(0, size, step)]
        assert len(pieces) == len(want)
        for p_, w in zip(pieces, want):
            check(p_, w, name)
    # split by size
    k = data.draw(st.integers(1, 6))
    pieces = t.split(k, dim=d)
    if size:
        want = [np.take(a, range(s, min(s + k, size)), axis=d) for s in range(0, size, k)]
        assert len(pieces) == len(want)
        for p_, w in zip(pieces, want):
            check(p_, w, name)
    # split by sections
    cuts = sorted(data.draw(st.lists(st.integers(0, size), max_size=3)))
    secs = [b - a_ for a_, b in zip([0] + cuts, cuts + [size])]
    pieces = t.split(secs, d)
    want = np.split(a, cuts, axis=d)
    assert len(pieces) == len(want)
    for p_, w in zip(pieces, want):
        check(p_, w, name)
    with pytest.raises(ValueError):
        t.split([size + 1], d)
    # unbind
    parts = t.unbind(d)
    assert len(parts) == size
    for i, p_ in enumerate(parts):
        check(p_, np.take(a, i, axis=d), name)


@given(data=st.data())
def test_index_select_gather(data):
    name = data.draw(st.sampled_from(["float32", "float64", "int64", "int32", "uint8"]))
    shape = data.draw(NONEMPTY)
    a = arr_of(data.draw, shape, name)
    t = make(a, name)
    nd = a.ndim
    d = data.draw(st.integers(-nd, nd - 1))
    n = a.shape[d]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=5)), dtype=np.int64)
    idt = data.draw(st.sampled_from([cp.int64, cp.int32]))
    check(t.index_select(d, cp.tensor(idx, dtype=idt)), np.take(a, idx, axis=d), name)
    # gather: index of the same rank, no larger than the input in other dims
    ishape = tuple(data.draw(st.integers(0, 4)) if i == d % nd else data.draw(st.integers(0, s)) for i, s in enumerate(a.shape))
    gi = data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, n - 1)))
    sub = a[tuple(slice(0, s) if i != d % nd else slice(None) for i, s in enumerate(ishape))]
    check(t.gather(d, cp.tensor(gi)), np.take_along_axis(sub, gi, axis=d), name)
    check(cp.gather(t, d, cp.tensor(gi)), np.take_along_axis(sub, gi, axis=d), name)
    with pytest.raises(IndexError):
        t.index_select(d, cp.tensor([n]))


def test_index_select_row_copy_path_matches_graph_path():
    """Untracked contiguous CPU sources take a one-pass row copy; tracked ones keep
    Candle's op (with its backward). Both must give NumPy's answer, in parallel
    sizes too, for bools, and with negative indices."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((600, 7, 80)).astype(np.float32)  # 336k elements: split over threads
    idx = rng.integers(-600, 600, size=900)
    want = np.take(a, idx, axis=0)
    t = cp.from_numpy(a)
    np.testing.assert_array_equal(np.asarray(t.index_select(0, cp.from_numpy(idx))), want)
    with cp.no_grad():
        tracked = cp.from_numpy(a).requires_grad_(True)
        np.testing.assert_array_equal(np.asarray(tracked.index_select(0, cp.from_numpy(idx))), want)
    mid = rng.integers(0, 7, size=5)
    np.testing.assert_array_equal(np.asarray(t.index_select(1, cp.from_numpy(mid))), np.take(a, mid, axis=1))
    # a non-contiguous source (Candle's path) and a bool one (the row copy)
    np.testing.assert_array_equal(
        np.asarray(t.transpose(0, 2).index_select(0, cp.tensor([3, -1]))), np.take(a.transpose(2, 1, 0), [3, -1], axis=0)
    )
    b = a > 0
    got = cp.from_numpy(b).index_select(2, cp.tensor([0, 79, 5]))
    assert got.dtype == cp.bool
    np.testing.assert_array_equal(np.asarray(got), np.take(b, [0, 79, 5], axis=2))
    # the graph path still differentiates: each selected row gets its count
    x = cp.from_numpy(a[:4, 0, :3].copy()).requires_grad_(True)
    x.index_select(0, cp.tensor([1, 1, -1])).sum().backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.array([[0] * 3, [2] * 3, [0] * 3, [1] * 3], np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        t.index_select(0, cp.tensor([600]))
    with pytest.raises(IndexError, match="out of bounds"):
        t.index_select(0, cp.tensor([-601]))


def test_index_select_rejects_float_index():
    with pytest.raises(TypeError):
        cp.ones(3).index_select(0, cp.tensor([0.0]))


@given(data=st.data())
def test_scatter(data):
    name = data.draw(st.sampled_from(["float32", "float64", "int64"]))
    shape = data.draw(NONEMPTY)
    a = arr_of(data.draw, shape, name)
    nd = a.ndim
    d = data.draw(st.integers(0, nd - 1))
    n = a.shape[d]
    ishape = tuple(data.draw(st.integers(0, s)) for s in a.shape)
    # scatter without reduce: unique targets along d so the result is defined
    if ishape[d] > n:
        ishape = ishape[:d] + (n,) + ishape[d + 1 :]
    perm_idx = np.zeros(ishape, dtype=np.int64)
    for pos in np.ndindex(*(ishape[:d] + ishape[d + 1 :])):
        perm = data.draw(st.permutations(range(n)))[: ishape[d]]
        for j, p_ in enumerate(perm):
            perm_idx[pos[:d] + (j,) + pos[d:]] = p_
    src = arr_of(data.draw, tuple(s + data.draw(st.integers(0, 1)) for s in ishape), name)
    want = a.copy()
    want_add = a.copy()
    for pos in np.ndindex(*ishape):
        tgt = pos[:d] + (perm_idx[pos],) + pos[d + 1 :]
        want[tgt] = src[pos]
        want_add[tgt] = want_add[tgt] + src[pos]
    t = make(a, name)
    check(t.scatter(d, cp.tensor(perm_idx), make(src, name)), want, name)
    check(t.scatter(d, cp.tensor(perm_idx), make(src, name), reduce="add"), want_add, name)
    check(t, a, name)  # out of place
    # scatter_add accumulates duplicates
    dup = data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, n - 1)))
    acc = a.astype(np.float64).copy()
    for pos in np.ndindex(*ishape):
        acc[pos[:d] + (dup[pos],) + pos[d + 1 :]] += src[pos]
    check(t.scatter_add(d, cp.tensor(dup), make(src, name)), acc, name)
    # scalar value
    want_v = a.copy()
    for pos in np.ndindex(*ishape):
        want_v[pos[:d] + (perm_idx[pos],) + pos[d + 1 :]] = 7
    check(t.scatter(d, cp.tensor(perm_idx), value=7), want_v, name)


@given(data=st.data())
def test_masked_fill_where_clamp(data):
    name = data.draw(st.sampled_from(["float32", "float64", "int64", "int32", "float16"]))
    sa, sm = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, min_side=0, max_side=4)).input_shapes
    sa = np.broadcast_shapes(sa, sm)
    a = arr_of(data.draw, sa, name)
    m = data.draw(hnp.arrays(np.bool_, sm))
    t = make(a, name)
    h = held(t)
    check(t.masked_fill(cp.tensor(m), 3), np.where(m, 3, h), name)
    check(t.masked_fill(cp.tensor(m), cp.tensor(-2)), np.where(m, -2, h), name)
    # where with tensors (broadcast, promoted) and scalars
    other = arr_of(data.draw, sm, "float64")
    out = result_type(name, "dim" if sa else "zero", "float64", "dim" if sm else "zero")
    check(cp.where(cp.tensor(m), t, cp.tensor(other)), np.where(m, h, other), out)
    check(cp.where(cp.tensor(m), t, 0.5), np.where(m, h, 0.5), result_type(name, "dim" if sa else "zero", "float32", "scalar"))
    # clamp with scalars and tensors
    lo, hi = sorted([data.draw(st.integers(-5, 5)), data.draw(st.integers(-5, 5))])
    check(t.clamp(lo, hi), np.clip(h, lo, hi), name)
    check(t.clamp(min=lo), np.maximum(h, lo), name)
    check(t.clamp(max=hi), np.minimum(h, hi), name)
    check(cp.clamp(t, lo, hi), np.clip(h, lo, hi), name)
    lot = arr_of(data.draw, sm, name)
    check(t.clamp(min=make(lot, name)), np.maximum(h, held(make(lot, name))), name)
    check(t.clamp(max=make(lot, name)), np.minimum(h, held(make(lot, name))), name)


@given(data=st.data())
def test_cat_stack(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    nd = len(shape)
    d = data.draw(st.integers(-nd, nd - 1))
    names = data.draw(st.lists(st.sampled_from(["float32", "float64", "int64", "int32", "uint8", "bool"]), min_size=1, max_size=3))
    arrs = []
    for nm in names:
        s = list(shape)
        s[d] = data.draw(st.integers(0, 3))
        arrs.append(arr_of(data.draw, tuple(s), nm))
    ts = [make(x, nm) for x, nm in zip(arrs, names)]
    out = names[0]
    for nm in names[1:]:
        out = promote(out, nm)
    ref_t = DTYPES[out][1]
    check(cp.cat(ts, dim=d), np.concatenate([x.astype(ref_t) for x in arrs], axis=d), out)
    check(cp.cat(tuple(ts), d), np.concatenate([x.astype(ref_t) for x in arrs], axis=d), out)
    same = [arr_of(data.draw, shape, "float32") for _ in range(len(names))]
    sd = data.draw(st.integers(-nd - 1, nd))
    check(cp.stack([cp.tensor(x) for x in same], dim=sd), np.stack(same, axis=sd), "float32")
    with pytest.raises(ValueError):
        cp.stack([cp.ones(2), cp.ones(3)])


@given(data=st.data())
def test_flip_repeat_tril_triu(data):
    name = data.draw(st.sampled_from(["float32", "int64", "bool"]))
    shape = data.draw(SHAPES)
    a = arr_of(data.draw, shape, name)
    t = make(a, name)
    nd = a.ndim
    if nd:
        dims = data.draw(st.lists(st.integers(-nd, nd - 1), unique_by=lambda x: x % nd, max_size=nd))
        check(t.flip(dims), np.flip(a, axis=tuple(dims)) if dims else a, name)
        check(t.flip(*dims) if dims else t.flip(dims), np.flip(a, axis=tuple(dims)) if dims else a, name)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), min_size=nd, max_size=nd + 2)))
    if reps:
        check(t.repeat(*reps), np.tile(a, reps), name)
    if nd >= 2:
        k = data.draw(st.integers(-4, 4))
        check(t.tril(k), np.tril(a, k), name)
        check(t.triu(diagonal=k), np.triu(a, k), name)
        check(cp.tril(t), np.tril(a), name)
    else:
        with pytest.raises(ValueError):
            t.tril()


def test_matmul_on_non_contiguous_batched_views() -> None:
    """Attention-style head splits (transpose(1, 2)) multiply like PyTorch's."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 4, 3, 5)).astype(np.float32)
    b = rng.normal(size=(2, 3, 5, 6)).astype(np.float32)
    x = cp.tensor(a).transpose(1, 2)
    got = (x @ cp.tensor(b)).numpy()
    np.testing.assert_allclose(got, np.swapaxes(a, 1, 2) @ b, rtol=1e-5, atol=1e-5)
    xt = cp.tensor(a, requires_grad=True)
    (xt.transpose(1, 2) @ cp.tensor(b)).sum().backward()
    assert xt.grad is not None and xt.grad.shape == a.shape


def test_true_division_of_integers_converts_each_operand_to_float():
    """Found by hypothesis: uint8 / 0-d int64 -1 cast -1 to uint8 (255) before dividing."""
    a = cp.tensor(np.array([1, 4], np.uint8))
    for b in (cp.tensor(-1), cp.tensor([-1, -1]), -1):
        got = a / b
        assert got.dtype == cp.float32
        np.testing.assert_array_equal(np.asarray(got), np.array([-1.0, -4.0], np.float32))
    np.testing.assert_array_equal(np.asarray(cp.tensor([7]) / cp.tensor(2)), np.array([3.5], np.float32))
    np.testing.assert_array_equal(np.asarray(cp.tensor([True, False]) / cp.tensor([True, True])), np.array([1.0, 0.0], np.float32))


def test_scatter_value_as_0d_tensor_and_src_rank_mismatch():
    """Found by the property tests: a 0-d tensor `value` panicked; it is a number, as in
    PyTorch, and a src of another rank than the index is a ShapeError."""
    np.testing.assert_array_equal(np.asarray(cp.tensor([0.0, 1.0]).scatter(0, cp.tensor([1]), None, cp.tensor(5))), [0.0, 5.0])
    assert cp.tensor(0.0).scatter(0, cp.tensor(0), None, cp.tensor(5)).item() == 5.0
    assert cp.tensor(0.0).scatter(0, cp.tensor(0), cp.tensor(7.0)).item() == 7.0
    with pytest.raises(cp.ShapeError, match="same number of dimensions"):
        cp.tensor([0.0, 1.0]).scatter(0, cp.tensor([1]), cp.tensor(5.0))


def _edge_values(dtype, n=300_000, seed=5):
    """`n` random values (long enough to split over threads) with NaN, both
    infinities, both zeros and values at the clamp bounds used below."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n)
    a[::97] = np.nan
    a[1::101] = np.inf
    a[2::103] = -np.inf
    a[3::107] = -0.0
    a[4::109] = 0.5
    return a.astype(dtype)


def _same_bits(got, want, what):
    """Equal values, NaN where NaN, and the same sign of every zero."""
    np.testing.assert_array_equal(got, want, err_msg=what)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]), err_msg=f"{what}: sign of zeros")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_pass_elementwise_ops_equal_their_compositions(dtype):
    """addcmul, addcdiv, lerp (number and tensor weights) and nan_to_num run as one pass
    outside autograd; in the graph they are compositions of several ops. Both give the
    same bits, NaN, infinities and signed zeros included. clamp (one pass either way),
    sign and the isnan/isinf/isfinite masks are checked against NumPy."""
    a, b, c = (_edge_values(dtype, seed=s) for s in (5, 6, 7))
    w = np.random.default_rng(8).uniform(-0.5, 1.5, a.shape).astype(dtype)
    w[::89] = np.nan

    def both(fn, *arrays):
        plain = fn(*(cp.tensor(x) for x in arrays)).numpy()
        tracked = [cp.tensor(x, requires_grad=True) for x in arrays]
        composed = fn(*tracked).detach().numpy()
        assert plain.dtype == a.dtype
        return plain, composed

    cases = {
        "addcmul": (lambda x, y, z: cp.addcmul(x, y, z, value=0.5), a, b, c),
        "addcmul value 1": (lambda x, y, z: x.addcmul(y, z), a, b, c),
        "addcdiv": (lambda x, y, z: cp.addcdiv(x, y, z, value=-2), a, b, c),
        "lerp 0.3": (lambda x, y: x.lerp(y, 0.3), a, b),
        "lerp 0.7": (lambda x, y: cp.lerp(x, y, 0.7), a, b),
        "lerp 1.0": (lambda x, y: x.lerp(y, 1.0), a, b),
        "lerp tensor": (lambda x, y, z: x.lerp(y, z), a, b, w),
        "nan_to_num": (lambda x: x.nan_to_num(), a),
        "nan_to_num values": (lambda x: cp.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0), a),
    }
    for name, (fn, *arrays) in cases.items():
        plain, composed = both(fn, *arrays)
        _same_bits(plain, composed, name)
    fi = np.finfo(dtype)
    _same_bits(cp.tensor(a).nan_to_num().numpy(), np.nan_to_num(a, nan=0.0, posinf=fi.max, neginf=fi.min), "nan_to_num vs NumPy")
    t = cp.tensor(a)
    lo, hi = dtype(-0.5), dtype(0.25)
    np.testing.assert_array_equal(t.clamp(-0.5, 0.25).numpy(), np.minimum(np.maximum(a, lo), hi))
    np.testing.assert_array_equal(t.clamp(min=0.0).numpy(), np.maximum(a, dtype(0)))
    np.testing.assert_array_equal(t.clamp(max=-1.0).numpy(), np.minimum(a, dtype(-1)))
    assert np.isnan(t.clamp(min=float("nan")).numpy()).all()
    np.testing.assert_array_equal(t.clamp(2.0, 1.0).numpy()[~np.isnan(a)], 1.0)
    for name, want in (("isnan", np.isnan(a)), ("isinf", np.isinf(a)), ("isfinite", np.isfinite(a))):
        got = getattr(t, name)()
        assert got.dtype == cp.bool
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    # sign: PyTorch's (x > 0) - (x < 0), so 0.0 for NaN and for both zeros.
    _same_bits(t.sign().numpy(), np.where(np.isnan(a), 0, np.sign(a)).astype(dtype) + dtype(0), "sign")
    # Views take the same passes (copied densely first).
    v = cp.tensor(a.reshape(600, 500)).t()
    np.testing.assert_array_equal(v.isnan().numpy(), np.isnan(a.reshape(600, 500).T))
    np.testing.assert_array_equal(v.clamp(-1, 1).numpy(), np.clip(a.reshape(600, 500).T, -1, 1))


def test_sin_and_cos_float32_match_float64_within_two_ulp():
    """float32 sin/cos are vector polynomials after a three-part reduction up to
    |x| = 1e5 and libm's past it: within 2.4e-7 of the float64 value relative to
    max(|value|, 1e-7) (about 2 ulp; 1 ulp of absolute error near the zeros), NaN for NaN
    and the infinities, -0.0 kept by sin; `sin_` gives the same bits as `sin`, and a
    slice the same as the whole."""
    rng = np.random.default_rng(9)
    edges = [0.0, -0.0, 1e-30, -1e-38, np.pi, np.pi / 2, -np.pi / 4, 99_999.99, -1e5, 1e5 + 1, 2e5, -3e7, 1e30, 3.4e38]
    a = np.concatenate([rng.uniform(-2000, 2000, 200_000), rng.uniform(-8, 8, 50_000), edges]).astype(np.float32)
    a = np.concatenate([a, np.array([np.nan, np.inf, -np.inf], np.float32)])
    t = cp.tensor(a)
    for name, f64 in (("sin", np.sin), ("cos", np.cos)):
        got = getattr(t, name)().numpy()
        assert got.dtype == np.float32
        with np.errstate(invalid="ignore"):  # NaN for the infinities, as wanted
            want = f64(a.astype(np.float64))
        fin = np.isfinite(a)
        assert np.isnan(got[~fin]).all(), name
        err = np.abs(got[fin].astype(np.float64) - want[fin])
        bound = 2.4e-7 * np.maximum(np.abs(want[fin]), 1e-7)
        assert (err <= bound).all(), (name, a[fin][err > bound][:5], got[fin][err > bound][:5])
        inplace = cp.tensor(a)
        getattr(inplace, name + "_")()
        np.testing.assert_array_equal(inplace.numpy().view(np.uint32), got.view(np.uint32), err_msg=f"{name}_")
        part = getattr(cp.tensor(a[12345:54321]), name)().numpy()
        np.testing.assert_array_equal(part.view(np.uint32), got[12345:54321].view(np.uint32), err_msg=f"{name} of a slice")
    assert np.signbit(t.sin().numpy()[250_001]), "sin(-0.0) is -0.0"


def test_float_conversions_round_as_numpy():
    """float32 to float16 / bfloat16 / float64 and back (parallel vector passes):
    NumPy's and ml_dtypes' values (round to nearest even, overflow to inf, NaN NaN)."""
    import ml_dtypes

    rng = np.random.default_rng(10)
    a = np.concatenate(
        [
            rng.standard_normal(200_000) * 1e3,
            [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-8, 3.4e38, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8],
        ]
    ).astype(np.float32)
    t = cp.tensor(a)
    for dt, np_dt in ((cp.float16, np.float16), (cp.bfloat16, ml_dtypes.bfloat16), (cp.float64, np.float64)):
        got = t.to(dt)
        assert got.dtype == dt
        with np.errstate(over="ignore"):  # 3.4e38 and 65520 overflow float16 to inf, as wanted
            narrowed = a.astype(np_dt)
        np.testing.assert_array_equal(got.to(cp.float64).numpy(), narrowed.astype(np.float64), err_msg=str(dt))
        back = got.to(cp.float32).numpy()
        np.testing.assert_array_equal(back, narrowed.astype(np.float32), err_msg=f"{dt} back to float32")
    np.testing.assert_array_equal(cp.tensor(a.astype(np.float64)).float().numpy(), a)
    # A view converts its own elements.
    v = cp.tensor(a[:200_000].reshape(400, 500))[:, ::3]
    np.testing.assert_array_equal(v.half().float().numpy(), a[:200_000].reshape(400, 500)[:, ::3].astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 5, 16, 17, 64, 65, 80])
def test_topk_orders_ties_and_nan_as_a_full_sort(k, largest, dtype):
    """topk of k <= 64 scans each row once (rows of 16 k or more: 1100 here); larger k,
    and k = 80 on these rows, select and sort. Either way the result is a stable sort's
    first k: by value (NaN largest), ties by position; float32 rows test blocks of 16
    at once and visit only their candidates (lists up to k = 16 in fixed arrays, longer
    ones in a vector), other dtypes compare element by element."""
    rng = np.random.default_rng(11)
    a = rng.integers(-20, 20, (100, 1100)).astype(dtype)
    if dtype != np.int32:
        a[rng.random(a.shape) < 0.02] = np.nan
        a[3, -40:] = np.nan  # NaN arriving late
    a[7] = 3  # a row of ties only
    v, i = cp.tensor(a).topk(k, dim=-1, largest=largest)
    key = np.where(np.isnan(a), np.inf, a)
    order = np.argsort(-key if largest else key, axis=-1, kind="stable")[:, :k]
    np.testing.assert_array_equal(i.numpy(), order)
    np.testing.assert_array_equal(v.numpy(), np.take_along_axis(a, order, -1))
    one = cp.tensor(a[0]).topk(k, largest=largest)[1].numpy()
    np.testing.assert_array_equal(one, order[0])


def _quotient_operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """float32 dividend/divisor pairs for floor division and remainder: magnitudes over
    the whole range, exact multiples and their neighbours (quotients one ulp off an
    integer), huge quotients, denormals, signed zeros, infinities and NaN."""
    n = 60_000
    a = (rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(-30, 30, n))).astype(np.float32)
    b = (rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(-12, 12, n))).astype(np.float32)
    mult = (b[:20_000] * rng.integers(-(2**20), 2**20, 20_000)).astype(np.float32)
    a[:20_000] = mult
    a[20_000:30_000] = np.nextafter(mult[:10_000], np.float32(np.inf))
    a[30_000:40_000] = np.nextafter(mult[10_000:20_000], np.float32(-np.inf))
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3e38, -3e38, 7.0, -7.0, 2.0**27, 1e9], np.float32)
    ea, eb = np.meshgrid(edges, edges)
    return np.concatenate([a, ea.ravel()]), np.concatenate([b, eb.ravel()])


def test_float32_floor_divide_and_remainder_match_numpy_bit_for_bit():
    """float32 `//` and `%` (and floor_divide / remainder) run fmod through float64 in
    vector lanes where the quotient is below 2^27 and libm's exact fmodf elsewhere:
    PyTorch's values bit for bit (its formulas, in NumPy: np.floor_divide's is the
    same, its remainder keeps fmod's zero sign), tensor by tensor, tensor by
    number, number by tensor, and on a slice as on the whole."""
    a, b = _quotient_operands(np.random.default_rng(21))
    ta, tb = cp.tensor(a), cp.tensor(b)

    def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
        assert got.dtype == np.float32, what
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
        bad = got[~nan].view(np.uint32) != want[~nan].view(np.uint32)
        assert not bad.any(), (what, a[~nan][bad][:4], b[~nan][bad][:4], got[~nan][bad][:4], want[~nan][bad][:4])

    def remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        # PyTorch's formula (NumPy's np.remainder gives a zero the divisor's sign).
        m = np.fmod(x, y)
        return np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m).astype(np.float32)

    with np.errstate(all="ignore"):
        same((ta // tb).numpy(), np.floor_divide(a, b), "a // b")
        same((ta % tb).numpy(), remainder(a, b), "a % b")
        same(cp.floor_divide(ta, tb).numpy(), np.floor_divide(a, b), "floor_divide")
        same(ta.remainder(tb).numpy(), remainder(a, b), "remainder")
        for num in (0.3, -2.5, 1e-3, float("inf"), 0.0):
            f = np.float32(num)
            same((ta // num).numpy(), np.floor_divide(a, f), f"a // {num}")
            same((ta % num).numpy(), remainder(a, np.full_like(a, f)), f"a % {num}")
            same((num % tb).numpy(), remainder(np.full_like(b, f), b), f"{num} % b")
        same((ta[1000:50_001] // tb[1000:50_001]).numpy(), np.floor_divide(a, b)[1000:50_001], "a slice")
        same((ta[::3] % 0.7).numpy(), remainder(a[::3], np.full_like(a[::3], np.float32(0.7))), "a strided view")


def test_float32_atan2_within_two_ulp_of_float64():
    """float32 atan2 is a vector polynomial after Cephes' reduction where both operands
    are finite and not both zero, libm's (through float64) elsewhere: within 2.4e-7 of
    float64's angle relative to its size, the special angles of signed zeros and
    infinities exactly, NaN for NaN; the same bits for a slice."""
    rng = np.random.default_rng(22)
    n = 200_000
    y = (rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    x = (rng.choice([-1.0, 1.0], n) * np.exp(rng.uniform(-20, 20, n))).astype(np.float32)
    y[:50_000] = rng.uniform(-1, 1, 50_000).astype(np.float32)
    x[:50_000] = rng.uniform(-1, 1, 50_000).astype(np.float32)
    x[50_000:60_000] = y[50_000:60_000] * np.float32(rng.choice([-1.0, 1.0]))
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.0, -1.0, 3e38, -3e38], np.float32)
    ey, ex = np.meshgrid(edges, edges)
    y, x = np.concatenate([y, ey.ravel()]), np.concatenate([x, ex.ravel()])
    got = cp.atan2(cp.tensor(y), cp.tensor(x)).numpy()
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    assert got.dtype == np.float32
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    err = np.abs(got[~nan].astype(np.float64) - want[~nan])
    bound = 2.4e-7 * np.maximum(np.abs(want[~nan]), 1e-44)
    assert (err <= bound).all(), (y[~nan][err > bound][:4], x[~nan][err > bound][:4], got[~nan][err > bound][:4])
    special = ~np.isfinite(y) | ~np.isfinite(x) | ((y == 0) & (x == 0))
    special &= ~nan
    np.testing.assert_array_equal(got[special].view(np.uint32), want[special].astype(np.float32).view(np.uint32))
    assert np.signbit(got[(y == 0) & np.signbit(y) & (x > 0)]).all(), "atan2(-0.0, x > 0) is -0.0"
    part = cp.atan2(cp.tensor(y[777:150_001]), cp.tensor(x[777:150_001])).numpy()
    np.testing.assert_array_equal(part.view(np.uint32), got[777:150_001].view(np.uint32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cumsum_and_cumprod_accumulate_in_double_along_every_dim(dtype):
    """cumsum / cumprod of float32 and float64 accumulate in double from the start of
    each chain, element after element, as PyTorch's CPU kernels do (rows of the last
    dim eight at a time, other dims as vector lanes over the trailing dims): NumPy's
    sequential float64 cumsum / cumprod rounded to the dtype, bit for bit, on every dim,
    row counts that are not multiples of eight, strided views, NaN and infinities."""
    rng = np.random.default_rng(23)
    np_dt = np.dtype(dtype)
    a = rng.standard_normal((5, 13, 37)).astype(np_dt)
    a[1, 2, 3], a[3, 0, 5], a[4, 12, 0] = np.nan, np.inf, -np.inf
    p = (1.0 + 0.05 * rng.standard_normal((5, 13, 37))).astype(np_dt)
    t, tp = cp.tensor(a, dtype=getattr(cp, dtype)), cp.tensor(p, dtype=getattr(cp, dtype))

    def same(got: np.ndarray, want: np.ndarray, what: str) -> None:
        assert got.dtype == np_dt, what
        np.testing.assert_array_equal(got, want.astype(np_dt), err_msg=what)

    with np.errstate(invalid="ignore"):
        for d in (0, 1, 2, -1):
            same(t.cumsum(d).numpy(), np.cumsum(a.astype(np.float64), axis=d), f"cumsum dim {d}")
            same(tp.cumprod(d).numpy(), np.cumprod(p.astype(np.float64), axis=d), f"cumprod dim {d}")
        same(t.transpose(0, 2).cumsum(1).numpy(), np.cumsum(a.transpose(2, 1, 0).astype(np.float64), axis=1), "a transposed view")
        same(cp.cumsum(t[:, ::2], dim=2).numpy(), np.cumsum(a[:, ::2].astype(np.float64), axis=2), "a strided view")
        big = rng.standard_normal((3, 70_001)).astype(np_dt)
        same(cp.tensor(big).cumsum(1).numpy(), np.cumsum(big.astype(np.float64), axis=1), "long rows")
        same(cp.tensor(big).cumsum(0).numpy(), np.cumsum(big.astype(np.float64), axis=0), "wide columns")
    assert cp.zeros(0, 4, dtype=getattr(cp, dtype)).cumsum(1).shape == (0, 4)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_tril_and_triu_copy_rows_and_fill_zeros(dtype):
    """tril / triu of a tensor outside the graph copy each row's kept run and fill the
    rest with zeros: NumPy's np.tril / np.triu for every diagonal offset (past both
    ends too), batched matrices, wide and tall ones, strided views, NaN above the
    diagonal becoming 0; inside the graph the gradient is the same triangle of the
    incoming gradient."""
    rng = np.random.default_rng(24)
    a = rng.standard_normal((3, 5, 7)) * 10
    a = a.astype(dtype) if dtype != "bool" else a > 0
    if dtype in ("float32", "float16"):
        a[0, 0, 6] = np.nan
    t = cp.tensor(a)
    for k in (-9, -2, -1, 0, 1, 3, 9):
        np.testing.assert_array_equal(t.tril(k).numpy(), np.tril(a, k), err_msg=f"tril {k}")
        np.testing.assert_array_equal(t.triu(k).numpy(), np.triu(a, k), err_msg=f"triu {k}")
        np.testing.assert_array_equal(
            cp.tril(t.transpose(1, 2), k).numpy(), np.tril(a.transpose(0, 2, 1), k), err_msg=f"tril {k} of a view"
        )
    assert t.tril().dtype == t.dtype
    assert cp.tril(cp.zeros(0, 3)).shape == (0, 3) and cp.triu(cp.zeros(2, 0)).shape == (2, 0)
    if dtype == "float32":
        x = cp.tensor(a[0], requires_grad=True)
        x.triu(1).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.triu(np.ones((5, 7), np.float32), 1))


def test_stack_cat_and_pad_of_a_few_long_rows_match_numpy():
    """stack / cat along the first dim (one output row holding every input whole) copy
    each dense piece over all threads, views and zero pads piece by piece: NumPy's
    values for dense inputs, stepped views, 1-D pads and three rows of pieces."""
    rng = np.random.default_rng(25)
    a = rng.standard_normal((8, 64, 384)).astype(np.float32)
    b = rng.standard_normal((16, 64, 384)).astype(np.float32)
    ta, tb = cp.tensor(a), cp.tensor(b)
    np.testing.assert_array_equal(cp.stack([ta, tb[:8]]).numpy(), np.stack([a, b[:8]]))
    np.testing.assert_array_equal(cp.stack([ta, tb[::2]], dim=0).numpy(), np.stack([a, b[::2]]))
    np.testing.assert_array_equal(cp.cat([ta, tb, tb[1::2]], 0).numpy(), np.concatenate([a, b, b[1::2]], 0))
    three = rng.standard_normal((3, 2, 70_000)).astype(np.float32)
    np.testing.assert_array_equal(cp.cat([cp.tensor(three), cp.tensor(three)[:, :1]], 1).numpy(), np.concatenate([three, three[:, :1]], 1))
    line = rng.standard_normal(300_000).astype(np.float32)
    np.testing.assert_array_equal(cp.nn.functional.pad(cp.tensor(line), (3, 5)).numpy(), np.pad(line, (3, 5)))
    np.testing.assert_array_equal(cp.stack([cp.tensor(line)] * 3, 0).numpy(), np.stack([line] * 3))
