"""In-place arithmetic (`add_`, `sub_`, `mul_`, `div_`, `+=` ..., `fill_`, `zero_`), the
unary twins (`exp_`, `relu_`, `clamp_`, ...), `addcmul_`, `addcdiv_` and `lerp_` on
the direct path that writes into the tensor's own storage (`ops::assign`): the values
are the out-of-place op's bit for bit, and everything an in-place op owes its
surroundings still holds (views and dtype aliases see the write, the version counter
moves so a backward that saved the old value refuses, leaves that require grad are
refused). The torch-checked values of these ops are in the usage sweep's fixtures."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp

# 5 elements stay on the calling thread; 70,001 split over the threads with a tail.
SIZES = [5, 70_001]


def _pair(n: int, dtype: cp.dtype) -> tuple[cp.Tensor, cp.Tensor]:
    g = cp.Generator().manual_seed(n)
    x = cp.randn(n, generator=g, dtype=dtype)
    y = cp.randn(n, generator=g, dtype=dtype) + 0.5
    # Special values ride along: NaN, infinities, signed zeros, a zero divisor.
    x[:4] = cp.tensor([float("nan"), float("inf"), -0.0, 1.0], dtype=dtype)
    y[:4] = cp.tensor([2.0, float("-inf"), 3.0, 0.0], dtype=dtype)
    return x, y


def _same(a: cp.Tensor, b: cp.Tensor) -> None:
    an, bn = a.numpy(), b.numpy()
    assert an.dtype == bn.dtype
    np.testing.assert_array_equal(an.view(np.uint8), bn.view(np.uint8))  # bit for bit, NaN and -0.0 too


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_values_are_the_out_of_place_ops(n: int, dtype: cp.dtype) -> None:
    x, y = _pair(n, dtype)
    cases = [
        (lambda a: a.add_(y), lambda a: a + y),
        (lambda a: a.sub_(y), lambda a: a - y),
        (lambda a: a.mul_(y), lambda a: a * y),
        (lambda a: a.div_(y), lambda a: a / y),
        (lambda a: a.add_(y, alpha=-0.3), lambda a: a.add(y, alpha=-0.3)),
        (lambda a: a.sub_(y, alpha=2), lambda a: a.sub(y, alpha=2)),
        (lambda a: a.add_(0.1), lambda a: a + 0.1),
        (lambda a: a.sub_(3), lambda a: a - 3),
        (lambda a: a.mul_(-0.7), lambda a: a * -0.7),
        (lambda a: a.div_(3.0), lambda a: a / 3.0),
        (lambda a: a.div_(0), lambda a: a / 0),
        (lambda a: a.add_(np.float64(0.25)), lambda a: a + 0.25),
        (lambda a: a.add_(a), lambda a: a + a),
        (lambda a: a.mul_(a), lambda a: a * a),
        (lambda a: a.sub_(a, alpha=0.5), lambda a: a - a * 0.5),
    ]
    for i, (inplace, outplace) in enumerate(cases):
        a = x.clone()
        want = outplace(x.clone())
        assert inplace(a) is a, i
        _same(a, want)
    dunders = [("__iadd__", lambda a: a + y), ("__isub__", lambda a: a - y)]
    dunders += [("__imul__", lambda a: a * 2), ("__itruediv__", lambda a: a / y)]
    for op, f in dunders:
        a = x.clone()
        b = a
        b = getattr(b, op)(2 if op == "__imul__" else y)
        _same(a, f(x.clone()))


def test_views_and_dtype_aliases_see_the_write() -> None:
    base = cp.arange(12.0).reshape(3, 4)
    col = base[:, 1]  # a strided view of the base
    row = base[1]  # a contiguous view with a start offset
    row.mul_(10)
    assert base.tolist() == [[0, 1, 2, 3], [40, 50, 60, 70], [8, 9, 10, 11]]
    assert col.tolist() == [1, 50, 9]
    base.add_(1)
    assert row.tolist() == [41, 51, 61, 71] and col.tolist() == [2, 51, 10]
    # The transposed view takes the general path and still writes through.
    base.t().sub_(1)
    assert base[0].tolist() == [0, 1, 2, 3]
    bits = base.view(cp.int32)
    base.fill_(1.0)
    assert bits.unique().tolist() == [1065353216]
    base.zero_()
    assert bits.unique().tolist() == [0]


def test_version_counter_moves_so_saved_values_refuse() -> None:
    w = cp.ones(3, requires_grad=True)
    x = cp.full((3,), 2.0)
    y = (w * x).sum()  # saves x for w's gradient
    v = x._version
    x.mul_(3.0)
    assert x._version > v
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    for write in (lambda t: t.add_(1), lambda t: t.fill_(0.5), lambda t: t.zero_(), lambda t: t.div_(t)):
        x = cp.full((3,), 2.0)
        y = (w * x).sum()
        write(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_autograd_rules_are_kept() -> None:
    p = cp.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.zero_()
    with cp.no_grad():  # an optimizer's update: written in place, the leaf stays a leaf
        p.add_(cp.full((4,), 0.5), alpha=-2)
        p.mul_(3)
    assert p.tolist() == [0.0] * 4 and p.is_leaf and p.requires_grad
    # A tracked operand takes the graph path: the result carries its gradient.
    q = cp.ones(4, requires_grad=True)
    h = cp.zeros(4) * 1
    h.add_(q, alpha=3)
    h.sum().backward()
    assert q.grad.tolist() == [3.0] * 4


def test_dtypes_and_shapes_outside_the_direct_path() -> None:
    i = cp.arange(5)
    i.add_(2)
    assert i.dtype == cp.int64 and i.tolist() == [2, 3, 4, 5, 6]
    with pytest.raises(cp.DTypeError, match="can.t be cast"):
        i.add_(0.5)
    i.zero_()
    assert i.tolist() == [0] * 5
    i.fill_(7)
    assert i.tolist() == [7] * 5
    f = cp.zeros(2, 3)
    f.add_(cp.tensor([1.0, 2.0, 3.0], dtype=cp.float64))  # broadcast, another dtype
    assert f.dtype == cp.float32 and f.tolist() == [[1, 2, 3], [1, 2, 3]]
    with pytest.raises(cp.ShapeError, match=r"add.*\[2, 3\] and \[3, 3\]"):
        f.add_(cp.ones(3, 3))
    b = cp.tensor([True, False])
    b.fill_(True)
    assert b.tolist() == [True, True]
    b.zero_()
    assert b.tolist() == [False, False]
    h = cp.ones(3, dtype=cp.float16)
    h.mul_(3)
    h.fill_(0.5)
    assert h.tolist() == [0.5] * 3
    e = cp.ones(0)
    e.add_(1)
    e.fill_(2)
    assert e.shape == (0,)


UNARY = ["abs_", "absolute_", "neg_", "negative_", "square_", "exp_", "log_", "sqrt_", "reciprocal_"]
UNARY += ["sin_", "cos_", "tanh_", "sigmoid_", "relu_"]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_unary_twins_are_the_out_of_place_ops(n: int, dtype: cp.dtype) -> None:
    x, _ = _pair(n, dtype)
    x = cp.cat([x, cp.tensor([-1.5, float("-inf"), 1e-30, -88.5, 89.0, 710.0], dtype=dtype)])  # log of negatives, exp's edges
    for name in UNARY:
        a = x.clone()
        assert getattr(a, name)() is a, name
        _same(a, getattr(x, name[:-1])())
    clamps = [
        (lambda a: a.clamp_(-0.5, 0.7), lambda a: a.clamp(-0.5, 0.7)),
        (lambda a: a.clamp_(min=0), lambda a: a.clamp(min=0)),
        (lambda a: a.clamp_(max=-0.25), lambda a: a.clamp(max=-0.25)),
        (lambda a: a.clamp_(1.0, -1.0), lambda a: a.clamp(1.0, -1.0)),  # min > max: max everywhere
        (lambda a: a.clamp_(float("nan"), 1), lambda a: a.clamp(float("nan"), 1)),
        (lambda a: a.clip_(-0.1, 0.1), lambda a: a.clip(-0.1, 0.1)),
        (lambda a: a.clamp_min_(0.3), lambda a: a.clamp_min(0.3)),
        (lambda a: a.clamp_max_(0.3), lambda a: a.clamp_max(0.3)),
    ]
    for i, (inplace, outplace) in enumerate(clamps):
        a = x.clone()
        assert inplace(a) is a, i
        _same(a, outplace(x))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_addc_and_lerp_are_the_out_of_place_ops(n: int, dtype: cp.dtype) -> None:
    x, y = _pair(n, dtype)
    z = y.flip(0).contiguous()
    cases = [
        (lambda a: a.addcmul_(y, z), lambda a: cp.addcmul(a, y, z)),
        (lambda a: a.addcmul_(y, y, value=-0.001), lambda a: cp.addcmul(a, y, y, value=-0.001)),
        (lambda a: a.addcdiv_(y, z, value=3), lambda a: cp.addcdiv(a, y, z, value=3)),
        (lambda a: a.addcdiv_(y, z), lambda a: cp.addcdiv(a, y, z)),
    ]
    for w in (0.0, 0.001, -0.3, 0.5, 0.9, 1.0, 1.7):
        cases.append((lambda a, w=w: a.lerp_(y, w), lambda a, w=w: a.lerp(y, w)))
    for i, (inplace, outplace) in enumerate(cases):
        a = x.clone()
        assert inplace(a) is a, i
        _same(a, outplace(x))


def test_direct_twins_keep_views_versions_and_autograd() -> None:
    base = cp.arange(-6.0, 6.0).reshape(3, 4)
    row, col = base[1], base[:, 1]
    row.relu_()  # a contiguous view with a start offset: direct
    assert base.tolist() == [[-6, -5, -4, -3], [0, 0, 0, 1], [2, 3, 4, 5]]
    col.clamp_(-1, 1)  # a strided view: the general path, written through
    assert base[:, 1].tolist() == [-1, 0, 1]
    base.t().neg_()
    assert base[2].tolist() == [-2, -1, -4, -5]
    # The version counter moves: a backward that saved the old value refuses.
    w = cp.ones(3, requires_grad=True)
    for write in (lambda t: t.exp_(), lambda t: t.clamp_(0, 1), lambda t: t.lerp_(cp.zeros(3), 0.5)):
        x = cp.full((3,), 2.0)
        y = (w * x).sum()
        write(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
    x = cp.full((3,), 2.0)
    y = (w * x).sum()
    x.addcmul_(x.clone(), x.clone())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    # Leaves that require grad are refused; under no_grad they are written and stay leaves.
    p = cp.full((4,), 4.0, requires_grad=True)
    for write in (lambda t: t.sqrt_(), lambda t: t.clamp_(0, 1), lambda t: t.addcdiv_(t.detach(), t.detach())):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            write(p)
    with cp.no_grad():
        p.sqrt_().clamp_(max=1.5).addcmul_(cp.ones(4), cp.ones(4), value=0.25).lerp_(cp.zeros(4), 0.5)
    assert p.tolist() == [0.875] * 4 and p.is_leaf and p.requires_grad
    # A tracked operand takes the graph path: its gradient flows.
    q = cp.full((4,), 2.0, requires_grad=True)
    h = cp.ones(4) * 1
    h.addcmul_(q, q, value=0.5)
    h.lerp_(q, 0.25)
    h.sum().backward()
    assert q.grad.tolist() == pytest.approx([0.75 * 2 + 0.25] * 4)
    # In the graph, a non-leaf takes the op's node: relu_'s gradient is relu's.
    r = cp.tensor([-1.0, 2.0], requires_grad=True)
    s = r * 1
    s.relu_()
    s.sum().backward()
    assert r.grad.tolist() == [0.0, 1.0]


def test_twins_outside_the_direct_path() -> None:
    i = cp.tensor([-3, 4, -5])
    i.neg_()
    assert i.tolist() == [3, -4, 5] and i.dtype == cp.int64
    i.clamp_(-4, 4)
    assert i.tolist() == [3, -4, 4]
    i.abs_().relu_()
    assert i.tolist() == [3, 4, 4]
    with pytest.raises(cp.DTypeError, match="can.t be cast"):
        i.exp_()
    f = cp.tensor([0.25, 4.0])
    f.clamp_(cp.tensor([0.5, 0.5]), cp.tensor(2.0))  # tensor bounds
    assert f.tolist() == [0.5, 2.0]
    f.lerp_(cp.tensor([1.0, 1.0]), cp.tensor([0.5, 0.0]))  # a tensor weight
    assert f.tolist() == [0.75, 2.0]
    f.lerp_(cp.tensor(0.0), 0.5)  # a broadcast end
    assert f.tolist() == [0.375, 1.0]
    f.addcmul_(cp.tensor(2.0), cp.tensor([1.0, -1.0]))  # broadcast operands
    assert f.tolist() == [2.375, -1.0]
    f.addcdiv_(cp.tensor([1.0, 1.0], dtype=cp.float64), cp.tensor([4.0, 4.0]))  # another dtype
    assert f.dtype == cp.float32 and f.tolist() == [2.625, -0.75]
    with pytest.raises(cp.ShapeError):
        f.addcmul_(cp.ones(3), cp.ones(3))
    with pytest.raises(cp.DTypeError, match="expected dtype"):
        f.lerp_(cp.ones(2, dtype=cp.float64), 0.5)
    with pytest.raises(ValueError, match="At least one of 'min' or 'max'"):
        f.clamp_()
    h = cp.tensor([-1.0, 3.0], dtype=cp.float16)
    h.relu_().clamp_(max=2)
    assert h.tolist() == [0.0, 2.0]
    e = cp.ones(0)
    e.exp_().clamp_(0, 1).addcmul_(cp.ones(0), cp.ones(0)).lerp_(cp.ones(0), 0.5)
    assert e.shape == (0,)
    # F.relu(inplace=True) is relu_: the same tensor, written in place.
    t = cp.tensor([-2.0, 3.0])
    assert cp.nn.functional.relu(t, inplace=True) is t and t.tolist() == [0.0, 3.0]
