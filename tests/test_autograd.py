"""Autograd: every differentiable op's gradient against central finite
differences in float64, and PyTorch's autograd surface (`.grad`, `no_grad`,
`autograd.grad`, ...). torch is never imported.
"""

from __future__ import annotations

import threading

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import candle_py as cp


def _numeric_grad(f, arrays, i, eps):
    a = arrays[i]
    g = np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        old = a[idx]
        a[idx] = old + eps
        up = f(arrays)
        a[idx] = old - eps
        down = f(arrays)
        a[idx] = old
        g[idx] = (up - down) / (2 * eps)
    return g


def check_grad(fn, *inputs, atol=1e-6, rtol=1e-5, eps=1e-6, seed=0, wrt=None):
    """Gradients of a random-weighted sum of `fn(*leaves)` against central differences.

    `inputs` are array-likes (made float64 leaves requiring grad) or, to pass a
    constant, a `cp.Tensor`. `wrt` limits which positions are checked.
    """
    rng = np.random.default_rng(seed)
    arrays = [None if isinstance(x, cp.Tensor) else np.array(x, dtype=np.float64) for x in inputs]
    leaves = [x if isinstance(x, cp.Tensor) else cp.tensor(a, dtype=cp.float64, requires_grad=True) for x, a in zip(inputs, arrays)]
    out = fn(*leaves)
    assert out.requires_grad
    w = rng.standard_normal(tuple(out.shape))
    (out * cp.tensor(w)).sum().backward()

    def f(arrs):
        with cp.no_grad():
            args = [x if a is None else cp.tensor(a, dtype=cp.float64) for x, a in zip(inputs, arrs)]
            return float((np.asarray(fn(*args).numpy(), dtype=np.float64) * w).sum())

    positions = [i for i, a in enumerate(arrays) if a is not None] if wrt is None else wrt
    for i in positions:
        num = _numeric_grad(f, arrays, i, eps)
        g = leaves[i].grad
        assert g is not None, f"input {i} got no gradient"
        assert tuple(g.shape) == arrays[i].shape
        assert g.dtype == cp.float64
        np.testing.assert_allclose(g.numpy(), num, atol=atol, rtol=rtol, err_msg=f"gradient of input {i}")


RNG = np.random.default_rng(1234)


def rnd(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape)


def away_from_zero(*shape, lo=0.3, hi=2.0):
    """Values with |x| in [lo, hi] and random signs: no kinks of abs/relu/sign."""
    return RNG.uniform(lo, hi, size=shape) * RNG.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    """Values far apart, so max/min/sort have unique winners."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.5 - n / 4).reshape(shape).astype(np.float64)


# ---------------------------------------------------------------------------
# elementwise

UNARY = {
    "abs": (lambda x: x.abs(), away_from_zero),
    "neg": (lambda x: -x, rnd),
    "exp": (lambda x: x.exp(), rnd),
    "log": (lambda x: x.log(), lambda *s: rnd(*s, lo=0.2, hi=3)),
    "log2": (lambda x: x.log2(), lambda *s: rnd(*s, lo=0.2, hi=3)),
    "log10": (lambda x: x.log10(), lambda *s: rnd(*s, lo=0.2, hi=3)),
    "log1p": (lambda x: x.log1p(), lambda *s: rnd(*s, lo=-0.5, hi=3)),
    "expm1": (lambda x: x.expm1(), rnd),
    "sqrt": (lambda x: x.sqrt(), lambda *s: rnd(*s, lo=0.2, hi=3)),
    "rsqrt": (lambda x: x.rsqrt(), lambda *s: rnd(*s, lo=0.2, hi=3)),
    "sin": (lambda x: x.sin(), rnd),
    "cos": (lambda x: x.cos(), rnd),
    "tan": (lambda x: x.tan(), lambda *s: rnd(*s, lo=-1.2, hi=1.2)),
    "tanh": (lambda x: x.tanh(), rnd),
    "sigmoid": (lambda x: x.sigmoid(), rnd),
    "relu": (lambda x: x.relu(), away_from_zero),
    "square": (lambda x: x.square(), rnd),
    "reciprocal": (lambda x: x.reciprocal(), away_from_zero),
    "erf": (lambda x: x.erf(), rnd),
    "floor": (lambda x: x.floor() * x, lambda *s: rnd(*s) + 0.01),
    "ceil": (lambda x: x.ceil() * x, lambda *s: rnd(*s) + 0.01),
    "round": (lambda x: x.round() * x, lambda *s: np.floor(rnd(*s)) + 0.3),
    "trunc": (lambda x: x.trunc() * x, lambda *s: rnd(*s) + 0.01),
    "frac": (lambda x: x.frac(), lambda *s: np.floor(rnd(*s)) + 0.4),
    "sign": (lambda x: x.sign() * x, away_from_zero),
    "pow_scalar_int": (lambda x: x**3, rnd),
    "pow_scalar_neg": (lambda x: x**-2, away_from_zero),
    "pow_scalar_half": (lambda x: x**0.5, lambda *s: rnd(*s, lo=0.2, hi=3)),
    "pow_scalar_frac": (lambda x: x**1.7, lambda *s: rnd(*s, lo=0.2, hi=3)),
    "rpow": (lambda x: 2.0**x, rnd),
    "rsub": (lambda x: 2 - x, rnd),
    "rdiv": (lambda x: 2.0 / x, away_from_zero),
    "scalar_ops": (lambda x: (x * 3 + 1.5) / 2 - 0.5, rnd),
    "clamp_scalars": (lambda x: x.clamp(-0.5, 0.7), lambda *s: rnd(*s) * 1.0 + 0.013),
    "clamp_min": (lambda x: x.clamp(min=0.1), lambda *s: rnd(*s) + 0.013),
    "clip_max": (lambda x: x.clip(max=0.1), lambda *s: rnd(*s) + 0.013),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_unary_gradients(name, shape):
    fn, gen = UNARY[name]
    check_grad(fn, gen(*shape))


BINARY = {
    "add": (lambda a, b: a + b, rnd, rnd),
    "sub": (lambda a, b: a - b, rnd, rnd),
    "mul": (lambda a, b: a * b, rnd, rnd),
    "div": (lambda a, b: a / b, rnd, away_from_zero),
    "pow": (lambda a, b: a**b, lambda *s: rnd(*s, lo=0.3, hi=2), rnd),
    "maximum": (lambda a, b: a.maximum(b), distinct, lambda *s: distinct(*s) + 0.25),
    "minimum": (lambda a, b: a.minimum(b), distinct, lambda *s: distinct(*s) + 0.25),
    "add_method": (lambda a, b: a.add(b), rnd, rnd),
    "sub_fn_alpha": (lambda a, b: cp.sub(a, b, alpha=2), rnd, rnd),
    "mul_fn": (lambda a, b: cp.mul(a, b), rnd, rnd),
    "clamp_tensors": (lambda a, b: a.clamp(min=b, max=b + 1.0), distinct, lambda *s: distinct(*s) + 0.25),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2)), ((4, 1, 3), (2, 1))])
def test_binary_gradients_with_broadcasting(name, shapes):
    fn, ga, gb = BINARY[name]
    sa, sb = shapes
    check_grad(fn, ga(*sa), gb(*sb))


def test_pow_gradient_negative_base_integral_exponent():
    # d/dx x**y = y * x**(y-1) also for negative bases with integral exponents
    x = cp.tensor([-2.0, -1.5, 3.0], dtype=cp.float64, requires_grad=True)
    y = cp.tensor([3.0, 2.0, 2.0], dtype=cp.float64)
    (x**y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [12.0, -3.0, 6.0], rtol=1e-12)


def test_where_and_masked_fill_gradients():
    m = cp.tensor([[True, False, True], [False, False, True]])
    check_grad(lambda a, b: cp.where(m, a, b), rnd(2, 3), rnd(2, 3))
    check_grad(lambda a, b: cp.where(m, a, b), rnd(3), rnd(2, 1))
    check_grad(lambda a: a.masked_fill(m, 2.0), rnd(2, 3))
    check_grad(lambda a: a.masked_fill(m, 2.0) * a, rnd(2, 3))


# ---------------------------------------------------------------------------
# reductions

REDUCE = {
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "sum_neg_keep": lambda x: x.sum(-1, keepdim=True),
    "sum_tuple": lambda x: x.sum((0, 2)),
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(dim=(1, 2), keepdim=True),
    "max_all": lambda x: x.max(),
    "min_all": lambda x: x.min(),
    "max_dim": lambda x: x.max(1).values,
    "min_dim_keep": lambda x: x.min(-1, keepdim=True)[0],
    "amax": lambda x: x.amax(dim=(0, 1)),
    "amin": lambda x: x.amin(2),
    "var": lambda x: x.var(),
    "var_dim": lambda x: x.var(1),
    "var_corr0": lambda x: x.var(dim=(0, 2), correction=0, keepdim=True),
    "std": lambda x: x.std(),
    "std_dim": lambda x: x.std(-1, unbiased=False),
    "cumsum0": lambda x: x.cumsum(0),
    "cumsum2": lambda x: x.cumsum(-1),
    "norm": lambda x: x.norm(),
    "norm_dim": lambda x: x.norm(dim=1),
    "norm_p1": lambda x: x.norm(p=1, dim=2),
    "norm_p3": lambda x: x.norm(p=3),
    "norm_last_keep": lambda x: x.norm(dim=-1, keepdim=True),
    "norm_split_dims": lambda x: x.norm(dim=(0, 2)),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduction_gradients(name):
    x = distinct(2, 3, 4) / 3 + 0.1  # no ties, no zeros
    check_grad(REDUCE[name], x)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0)])
def test_softmax_gradients(log, shape, dim):
    """Our fused kernels (src/kernels.rs) have their own backward."""
    f = (lambda x: x.log_softmax(dim)) if log else (lambda x: x.softmax(dim))
    check_grad(f, rnd(*shape, lo=-3, hi=3), seed=len(shape) + dim)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradients_float32_and_noncontiguous(log):
    x = rnd(3, 4)
    t = cp.tensor(x, dtype=cp.float32, requires_grad=True)
    w = RNG.standard_normal((4, 3))
    y = t.t().log_softmax(0) if log else t.t().softmax(0)
    (y * cp.tensor(w, dtype=cp.float32)).sum().backward()
    # analytic gradient
    xt = x.T
    e = np.exp(xt - xt.max(0, keepdims=True))
    s = e / e.sum(0, keepdims=True)
    g = (w - s * w.sum(0, keepdims=True)) if log else s * (w - (w * s).sum(0, keepdims=True))
    np.testing.assert_allclose(t.grad.numpy(), g.T, rtol=1e-4, atol=1e-5)
    assert t.grad.dtype == cp.float32


# ---------------------------------------------------------------------------
# matmul


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((3,), (3,)),
        ((3,), (3, 2)),
        ((2, 3), (3,)),
        ((2, 3), (3, 4)),
        ((2, 2, 3), (2, 3, 4)),
        ((2, 1, 2, 3), (3, 3, 2)),
        ((3,), (2, 3, 2)),
        ((2, 2, 3), (3,)),
    ],
)
def test_matmul_gradients(sa, sb):
    check_grad(lambda a, b: a @ b, rnd(*sa), rnd(*sb))


def test_mm_bmm_dot_gradients():
    check_grad(lambda a, b: a.mm(b), rnd(2, 3), rnd(3, 2))
    check_grad(lambda a, b: cp.bmm(a, b), rnd(2, 2, 3), rnd(2, 3, 2))
    check_grad(lambda a, b: a.dot(b), rnd(4), rnd(4))


# ---------------------------------------------------------------------------
# shape ops

SHAPE_OPS = {
    "reshape": lambda x: x.reshape(4, -1),
    "view": lambda x: x.view(-1),
    "t": lambda x: x[0].t(),
    "T": lambda x: x.T,
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "squeeze_none": lambda x: x[:1, :, :1].squeeze(),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "flatten": lambda x: x.flatten(1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "expand": lambda x: x[:, :1].expand(2, 3, 4) * x,
    "broadcast_to": lambda x: x[0].broadcast_to((3, 3, 4)),
    "narrow": lambda x: x.narrow(2, 1, 2),
    "chunk": lambda x: x.chunk(2, dim=2)[1] * 2 + x.chunk(2, dim=2)[0],
    "split_int": lambda x: x.split(2, dim=1)[1],
    "split_list": lambda x: x.split([1, 3], dim=2)[1].sum(2) * x.split([1, 3], dim=2)[0].sum(2),
    "unbind": lambda x: x.unbind(1)[2] * x.unbind(1)[0],
    "index_select": lambda x: x.index_select(1, cp.tensor([2, 0, 2])),
    "gather": lambda x: x.gather(2, cp.tensor([[[0, 3], [1, 1], [2, 0]], [[3, 3], [0, 1], [2, 2]]])),
    "gather_smaller": lambda x: x.gather(1, cp.tensor([[[0, 2]], [[1, 1]]])),
    "scatter_self": lambda x: x.scatter(2, cp.tensor([[[0], [1], [2]], [[3], [0], [1]]]), 0.0),
    "scatter_add_self": lambda x: x.scatter_add(1, cp.tensor([[[0, 0, 1, 1]], [[2, 2, 0, 0]]]), cp.ones(2, 1, 4, dtype=cp.float64)),
    "flip": lambda x: x.flip(0, 2),
    "repeat": lambda x: x.repeat(2, 1, 1) * 1.5,
    "repeat_newdim": lambda x: x.repeat(2, 1, 1, 2),
    "tril": lambda x: x.tril(),
    "triu": lambda x: x.triu(1),
    "cat_self": lambda x: cp.cat([x, x * 2], dim=1),
    "stack_self": lambda x: cp.stack([x, x.exp()], dim=-1),
    "contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "clone": lambda x: x.clone() * x,
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_op_gradients(name):
    check_grad(SHAPE_OPS[name], rnd(2, 3, 4))


def test_scatter_gradient_wrt_src():
    idx = cp.tensor([[0, 1, 2], [2, 0, 1]])
    check_grad(lambda x, s: x.scatter(0, idx, s), rnd(3, 3), rnd(2, 3))
    check_grad(lambda x, s: x.scatter(1, idx, s), rnd(2, 4), rnd(2, 3))
    check_grad(lambda x, s: x.scatter_add(0, cp.tensor([[0, 0, 0], [0, 0, 0]]), s), rnd(3, 3), rnd(2, 3))
    check_grad(lambda x, s: x.scatter(0, idx, s, reduce="add"), rnd(3, 3), rnd(2, 3))


def test_cat_stack_gradients_of_several_inputs():
    check_grad(lambda a, b, c: cp.cat([a, b, c], dim=0), rnd(1, 3), rnd(2, 3), rnd(0, 3))
    check_grad(lambda a, b: cp.cat((a, b), -1), rnd(2, 2), rnd(2, 3))
    check_grad(lambda a, b: cp.stack([a, b], 1), rnd(2, 3), rnd(2, 3))


# ---------------------------------------------------------------------------
# indexing


INDEX = {
    "int": lambda x: x[1],
    "neg_int": lambda x: x[-1, 0],
    "slice": lambda x: x[:, 1:3],
    "step": lambda x: x[::2, :, 1::2],
    "none_ellipsis": lambda x: x[None, ..., 0],
    "int_tensor": lambda x: x[cp.tensor([1, 1, 0])],
    "int_list": lambda x: x[:, [2, 0, 2]],
    "two_arrays": lambda x: x[cp.tensor([0, 1, 1]), cp.tensor([2, 0, 2])],
    "bool_mask": lambda x: x[x > 0],
    "bool_rows": lambda x: x[cp.tensor([True, False])],
    "mixed": lambda x: x[1:, cp.tensor([0, 2])],
}


@pytest.mark.parametrize("name", sorted(INDEX))
def test_getitem_gradients(name):
    check_grad(INDEX[name], away_from_zero(2, 3, 4))


def test_setitem_on_nonleaf_keeps_gradients():
    def f(a, b):
        h = a * 2
        h[0, 1] = 5.0  # constant: no gradient there
        h[1] = b[0] * 3  # from another leaf
        h[:, 2] = h[:, 2].clone() * a[:, 0]  # (a view of h itself would be saved, then overwritten)
        return h * h

    check_grad(f, rnd(3, 4), rnd(2, 4))


def test_write_into_a_tensor_saved_for_backward_raises_as_torch():
    """PyTorch's version counters: mul saved a view of h, which the write then changed."""
    a = leaf([1.0, 2.0, 3.0])
    h = a * 2
    h[1:] = h[1:] * a[1:]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()
    y = a.exp()
    y.add_(1.0)  # exp saved its output
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    z = a.sin()
    z.mul_(2.0)  # sin saved its input, not its output: fine
    z.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.cos([1.0, 2.0, 3.0]), rtol=1e-6)


def test_setitem_advanced_on_nonleaf_keeps_gradients():
    def f(a, b):
        h = a * 3.0  # saves nothing: writing into h afterwards is fine (as in PyTorch)
        h[cp.tensor([0, 2])] = b
        h[h > 100.0] = 0.0
        return h

    check_grad(f, rnd(3, 2), rnd(2, 2))


# ---------------------------------------------------------------------------
# property: gradients reduce over broadcast dims to the input's shape


@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3),
    op=st.sampled_from(["add", "mul", "sub", "div"]),
)
def test_broadcast_gradient_shapes_property(shapes, op):
    sa, sb = shapes.input_shapes
    a = cp.tensor(away_from_zero(*sa), dtype=cp.float64, requires_grad=True)
    b = cp.tensor(away_from_zero(*sb), dtype=cp.float64, requires_grad=True)
    out = {"add": a + b, "mul": a * b, "sub": a - b, "div": a / b}[op]
    out.sum().backward()
    assert tuple(a.grad.shape) == sa and tuple(b.grad.shape) == sb
    an, bn = a.detach().numpy(), b.detach().numpy()
    ones = np.ones(shapes.result_shape)

    def red(g, s):
        g = g.sum(axis=tuple(range(g.ndim - len(s)))) if g.ndim > len(s) else g
        return g.sum(axis=tuple(i for i, n in enumerate(s) if n == 1), keepdims=True).reshape(s)

    ga = {"add": ones, "sub": ones, "mul": ones * bn, "div": ones / bn}[op]
    gb = {"add": ones, "sub": -ones, "mul": ones * an, "div": -an / bn**2 * ones}[op]
    np.testing.assert_allclose(a.grad.numpy(), red(np.broadcast_to(ga, shapes.result_shape), sa), rtol=1e-10)
    np.testing.assert_allclose(b.grad.numpy(), red(np.broadcast_to(gb, shapes.result_shape), sb), rtol=1e-10)


# ---------------------------------------------------------------------------
# the autograd surface


def leaf(values, dtype=cp.float32):
    return cp.tensor(values, dtype=dtype, requires_grad=True)


def test_grad_accumulates_and_resets():
    x = leaf([1.0, 2.0, 3.0])
    assert x.grad is None and x.is_leaf and x.requires_grad
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4, 8, 12])
    (3 * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [7, 11, 15])
    assert not x.grad.requires_grad
    x.grad = None
    assert x.grad is None
    x.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])


def test_backward_twice_through_the_same_graph():
    """As PyTorch: a second backward needs retain_graph=True on the first; then the
    gradients accumulate. Without it the saved tensors are gone and it raises."""
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_grad_setter_checks_shape():
    x = leaf([1.0, 2.0])
    x.grad = cp.tensor([5.0, 6.0])
    assert x.grad.tolist() == [5.0, 6.0]
    x.sum().backward()
    assert x.grad.tolist() == [6.0, 7.0]
    with pytest.raises((ValueError, RuntimeError)):
        x.grad = cp.ones(3)


def test_no_grad_context_and_decorator():
    x = leaf([1.0, 2.0])
    with cp.no_grad():
        y = x * 2
        assert not cp.is_grad_enabled()
    assert cp.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    assert y.tolist() == [2.0, 4.0]

    @cp.no_grad()
    def f(a):
        return a.exp() + 1

    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_no_grad_restores_mode_after_exception():
    with pytest.raises(KeyError):
        with cp.no_grad():
            raise KeyError("x")
    assert cp.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = leaf([1.0])
    with cp.no_grad():
        with cp.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and not z.requires_grad
    y.sum().backward()
    assert x.grad.tolist() == [2.0]

    @cp.enable_grad()
    def g(a):
        return a * 3

    with cp.no_grad():
        assert g(x).requires_grad


def test_set_grad_enabled():
    x = leaf([1.0])
    try:
        cp.set_grad_enabled(False)
        assert not cp.is_grad_enabled()
        assert not (x * 2).requires_grad
    finally:
        cp.set_grad_enabled(True)
    assert (x * 2).requires_grad
    with cp.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert cp.is_grad_enabled()
    with cp.set_grad_enabled(True):
        assert (x * 2).requires_grad


def test_detach_and_requires_grad_():
    x = leaf([1.0, 2.0])
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d.tolist() == [3.0, 6.0]
    (d * x).sum().backward()
    assert x.grad.tolist() == [3.0, 6.0]  # no gradient flows through the detached branch
    z = cp.tensor([1.0, 2.0])
    assert not z.requires_grad
    r = z.requires_grad_()
    assert r is z and z.requires_grad and z.is_leaf
    (z * z).sum().backward()
    assert z.grad.tolist() == [2.0, 4.0]
    z.requires_grad_(False)
    assert not z.requires_grad
    with pytest.raises(RuntimeError):
        y.requires_grad_(False)  # a non-leaf


@pytest.mark.parametrize("dtype", [cp.int64, cp.int32, cp.uint8, cp.bool])
def test_int_tensors_cannot_require_grad(dtype):
    with pytest.raises(RuntimeError):
        cp.tensor([1, 0], dtype=dtype, requires_grad=True)
    t = cp.tensor([1, 0], dtype=dtype)
    with pytest.raises(RuntimeError):
        t.requires_grad_()
    with pytest.raises(RuntimeError):
        t.requires_grad = True


@pytest.mark.parametrize("dtype", [cp.float16, cp.bfloat16, cp.float64])
def test_other_float_dtypes_get_gradients(dtype):
    x = cp.tensor([1.0, 2.0], dtype=dtype, requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.float().numpy(), [2.0, 4.0])


def test_autograd_grad_returns_without_touching_grad():
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    ga, gb = cp.autograd.grad((a * b).sum(), [a, b])
    assert ga.tolist() == [3.0, 4.0] and gb.tolist() == [1.0, 2.0]
    assert not ga.requires_grad and not gb.requires_grad
    assert a.grad is None and b.grad is None
    (g,) = cp.autograd.grad((a * a).sum(), a)
    assert g.tolist() == [2.0, 4.0]
    (g,) = cp.autograd.grad(a * b, a, grad_outputs=cp.tensor([1.0, 10.0]))
    assert g.tolist() == [3.0, 40.0]


def test_autograd_grad_allow_unused():
    a = leaf([1.0, 2.0])
    c = leaf([5.0])
    with pytest.raises(RuntimeError):
        cp.autograd.grad((a * 2).sum(), [a, c])
    ga, gc = cp.autograd.grad((a * 2).sum(), [a, c], allow_unused=True)
    assert ga.tolist() == [2.0, 2.0] and gc is None
    ga, gc = cp.autograd.grad((a * 2).sum(), [a, c], materialize_grads=True)
    assert gc.tolist() == [0.0]


def test_backward_on_non_scalar_needs_gradient():
    x = leaf([1.0, 2.0])
    y = x * x
    with pytest.raises(RuntimeError):
        y.backward()
    y.backward(gradient=cp.tensor([1.0, 0.5]), retain_graph=True)
    assert x.grad.tolist() == [2.0, 2.0]
    x.grad = None
    y.backward(cp.tensor([2.0, 1.0]))
    assert x.grad.tolist() == [4.0, 4.0]
    with pytest.raises((ValueError, RuntimeError)):
        y.backward(gradient=cp.ones(3))


def test_backward_on_tensor_without_graph_raises():
    with pytest.raises(RuntimeError):
        cp.tensor(1.0).backward()
    x = leaf([1.0])
    with cp.no_grad():
        y = (x * 2).sum()
    with pytest.raises(RuntimeError):
        y.backward()


def test_backward_of_one_element_non_0d():
    x = leaf([[3.0]])
    (x * x).backward()
    assert x.grad.tolist() == [[6.0]]


def test_inplace_on_leaf_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    for f in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.__iadd__(1.0), lambda: x.clamp_(0, 1), lambda: x.__setitem__(0, 3.0)):
        with pytest.raises(RuntimeError):
            f()
    assert x.tolist() == [1.0, 2.0]
    with cp.no_grad():
        x.add_(1)  # allowed under no_grad, as in PyTorch (optimizer steps)
    assert x.tolist() == [2.0, 3.0]
    assert x.requires_grad and x.is_leaf
    (x * x).sum().backward()
    assert x.grad.tolist() == [4.0, 6.0]


def test_inplace_on_nonleaf_keeps_gradients():
    x = leaf([1.0, 2.0, 3.0], dtype=cp.float64)
    y = x * 2
    y.mul_(x)  # y = 2x^2
    y += 1
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, 2.0, 3.0]))


def test_leaf_used_twice_and_shared_subgraphs():
    x = leaf([1.0, 2.0], dtype=cp.float64)
    h = x.exp()
    out = (h * h + h.sin() * x).sum()
    out.backward()
    xn = np.array([1.0, 2.0])
    e = np.exp(xn)
    np.testing.assert_allclose(x.grad.numpy(), 2 * e * e + np.cos(e) * e * xn + np.sin(e), rtol=1e-10)


def test_grad_mode_is_per_thread():
    seen = {}
    ready = threading.Event()
    go = threading.Event()

    def worker():
        seen["start"] = cp.is_grad_enabled()
        with cp.no_grad():
            ready.set()
            go.wait(5)
            seen["inside"] = cp.is_grad_enabled()
        seen["after"] = cp.is_grad_enabled()

    with cp.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        ready.wait(5)
        # the worker's no_grad does not change this thread, nor the other way round
        with cp.enable_grad():
            assert cp.is_grad_enabled()
            go.set()
            t.join(5)
        assert not cp.is_grad_enabled()
    assert seen == {"start": True, "inside": False, "after": True}
    assert cp.is_grad_enabled()


def test_requires_grad_propagation():
    x = leaf([1.0, 2.0])
    c = cp.tensor([3.0, 4.0])
    assert (x + c).requires_grad
    assert not (c + c).requires_grad
    assert not (x > 1).requires_grad
    assert not x.argmax().requires_grad
    y = x * 2
    assert not y.is_leaf
    assert (x.detach() + 1).is_leaf


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("tracked", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [7, 300_000])  # one thread, threaded forward
def test_binary_with_one_tracked_side(op, tracked, dtype, n) -> None:
    """Same-shape arithmetic where only one operand is in the graph (a mask, a loss
    weight) takes a kernel that differentiates that side alone: values and the
    tracked side's gradient against NumPy, through a non-leaf too; the constant
    side gets no gradient. Also through `backward(gradient=...)`."""
    rng = np.random.default_rng(n)
    a = rng.uniform(0.5, 2.0, n).astype(dtype)
    b = rng.uniform(0.5, 2.0, n).astype(dtype)
    w = rng.standard_normal(n).astype(dtype)
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    # d(a op b)/da, d(a op b)/db
    da = {"add": 1.0, "sub": 1.0, "mul": b, "div": 1 / b}[op]
    db = {"add": 1.0, "sub": -1.0, "mul": a, "div": -a / b**2}[op]
    leaf = cp.from_numpy((a if tracked == "left" else b) * 2).requires_grad_(True)
    x = leaf * 0.5  # a non-leaf in the graph holding a (or b)
    c = cp.from_numpy(b if tracked == "left" else a)
    l_, r_ = (x, c) if tracked == "left" else (c, x)
    y = {"add": lambda: l_ + r_, "sub": lambda: l_ - r_, "mul": lambda: l_ * r_, "div": lambda: l_ / r_}[op]()
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.detach().numpy(), f(a, b), rtol=rtol)
    (y * cp.from_numpy(w)).sum().backward()
    want = w * (da if tracked == "left" else db) * 0.5
    np.testing.assert_allclose(leaf.grad.numpy(), want * np.ones(n), rtol=1e-4 if dtype == np.float32 else 1e-10)
    assert c.grad is None and not c.requires_grad
    leaf.grad = None
    y2 = {"add": lambda: l_ + r_, "sub": lambda: l_ - r_, "mul": lambda: l_ * r_, "div": lambda: l_ / r_}[op]()
    y2.backward(gradient=cp.from_numpy(w))
    np.testing.assert_allclose(leaf.grad.numpy(), want * np.ones(n), rtol=1e-4 if dtype == np.float32 else 1e-10)
