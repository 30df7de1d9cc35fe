"""The autograd engine against PyTorch: every case of tests/autograd_cases.py (first
and second derivatives through each op family, a gradient penalty through a conv net,
an MLP's Hessian-vector product, hooks, module backward hooks, a custom Function)
compared with the results torch wrote (tools/make_autograd_fixtures.py); then the
engine's rules and errors."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import candle_py as cp
from autograd_cases import CASES
from candle_py import nn

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "autograd")


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_torch(name: str) -> None:
    data = np.load(os.path.join(FIX, f"{name}.npz"))
    t = {k[3:]: cp.tensor(data[k], dtype=cp.float64, requires_grad=k[3:].startswith(("x", "w"))) for k in data.files if k.startswith("in.")}
    res = CASES[name][1](cp, t)
    want = {k[4:]: data[k] for k in data.files if k.startswith("out.")}
    assert sorted(res) == sorted(want)
    for k, v in res.items():
        np.testing.assert_allclose(v.numpy(), want[k], rtol=1e-7, atol=1e-9, err_msg=f"{name}: {k}")


# -- grad_fn ----------------------------------------------------------------------------


def test_grad_fn_names_and_next_functions_follow_torch() -> None:
    x = cp.randn(2, 3, requires_grad=True)
    w = cp.randn(3, 4, requires_grad=True)
    y = (x @ w).relu().sum()
    assert y.grad_fn.name() == "SumBackward0"
    relu = y.grad_fn.next_functions[0][0]
    assert relu.name() == "ReluBackward0"
    mm = relu.next_functions[0][0]
    assert mm.name() == "MmBackward0"
    leaves = [n for n, _ in mm.next_functions]
    assert [n.name() for n in leaves] == ["AccumulateGrad", "AccumulateGrad"]
    assert x.grad_fn is None and x.is_leaf and not y.is_leaf
    assert "grad_fn=<SumBackward0>" in repr(y)
    assert (x + 1).grad_fn.name() == "AddBackward0"
    assert (x * x).grad_fn.name() == "MulBackward0"
    assert x.t().grad_fn.name() == "TransposeBackward0"
    assert nn.functional.linear(x, w.t()).grad_fn.name() == "MmBackward0"
    assert x.detach().grad_fn is None
    with cp.no_grad():
        assert (x * 2).grad_fn is None


def test_grad_fn_prehook_can_replace_the_gradient() -> None:
    x = cp.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.grad_fn.register_prehook(lambda gs: (gs[0] * 10,))
    y.sum().backward()
    assert x.grad.tolist() == [30.0, 30.0]


# -- backward rules --------------------------------------------------------------------------


def test_second_backward_needs_retain_graph() -> None:
    x = cp.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()
    # A graph with nothing saved can be run again (as in PyTorch).
    z = (x + 1).sum()
    z.backward()
    z.backward()


def test_backward_inputs_accumulates_only_there() -> None:
    a = cp.tensor([1.0, 2.0], requires_grad=True)
    b = cp.tensor([3.0], requires_grad=True)
    h = a * b
    (h * h).sum().backward(inputs=[b, h])
    assert a.grad is None
    np.testing.assert_allclose(b.grad.numpy(), [2 * (9 * 1 + 9 * 4) / 3])
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())


def test_autograd_grad_does_not_touch_dot_grad_and_checks_unused() -> None:
    a = cp.tensor([1.0, 2.0], requires_grad=True)
    c = cp.tensor([5.0], requires_grad=True)
    (g,) = cp.autograd.grad((a * a).sum(), a)
    assert g.tolist() == [2.0, 4.0] and a.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        cp.autograd.grad((a * 2).sum(), [a, c])
    ga, gc = cp.autograd.grad((a * 2).sum(), [a, c], allow_unused=True)
    assert gc is None
    h = a * 3
    (gh,) = cp.autograd.grad((h * h).sum(), h)  # a non-leaf input
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy())


def test_inplace_change_of_a_saved_tensor_raises() -> None:
    a = cp.tensor([0.5, 1.0], requires_grad=True)
    y = a.exp()
    z = y * 2
    y.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    assert y._version == 1


def test_inplace_on_nonleaf_views_is_recorded() -> None:
    a = cp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    h = a * 1.0
    h[:, 1] *= 3
    h.sum().backward()
    assert a.grad.tolist() == [[1.0, 3.0, 1.0], [1.0, 3.0, 1.0]]
    # An in-place op on a (strided) view changes its base, in the graph too.
    a.grad = None
    h = a * 2.0
    col = h[:, 1]
    col.mul_(3)
    h[1:, ::2].add_(1)
    assert h.tolist() == [[2.0, 12.0, 6.0], [9.0, 30.0, 13.0]]
    (h * h).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * 2 * h.detach().numpy() * np.array([[1.0, 3.0, 1.0]]))
    leaf = cp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.add_(1)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        leaf[0].add_(1)


def test_retain_grad_and_hook_removal() -> None:
    x = cp.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    assert h.retains_grad
    handle = h.register_hook(lambda g: g * 100)
    handle.remove()
    (h * h).sum().backward()
    assert h.grad.tolist() == [4.0, 8.0]
    assert x.grad.tolist() == [8.0, 16.0]


def test_post_accumulate_grad_hook_sees_the_leaf() -> None:
    p = cp.tensor([1.0, -1.0], requires_grad=True)
    seen = []
    p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (p * 3).sum().backward()
    assert seen == [[3.0, 3.0]]
    with pytest.raises(RuntimeError):
        (p * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_hook_exceptions_reach_the_caller_unchanged() -> None:
    x = cp.tensor([1.0], requires_grad=True)

    def bad(g: cp.Tensor) -> None:
        raise KeyError("from the hook")

    (x * 2).register_hook(bad)
    y = x * 2
    y.register_hook(bad)
    with pytest.raises(KeyError, match="from the hook"):
        y.sum().backward()


def test_create_graph_raises_for_ops_without_second_derivative_form() -> None:
    x = cp.randn(1, 2, 6, 6, requires_grad=True)
    y = nn.functional.adaptive_avg_pool2d(x, 3)
    with pytest.raises(RuntimeError, match="double-backward"):
        cp.autograd.grad(y.sum(), x, create_graph=True)


# -- grad modes ------------------------------------------------------------------------------


def test_no_grad_bare_decorator_and_inference_mode() -> None:
    x = cp.ones(2, requires_grad=True)

    @cp.no_grad
    def f(t: cp.Tensor) -> cp.Tensor:
        return t * 2

    @cp.inference_mode()
    def g(t: cp.Tensor) -> cp.Tensor:
        assert cp.is_inference_mode_enabled()
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    assert not cp.is_inference_mode_enabled() and cp.is_grad_enabled()
    with cp.inference_mode():
        assert not (x * 2).requires_grad
    with cp.inference_mode(False):
        assert (x * 2).requires_grad

    @cp.enable_grad
    def h(t: cp.Tensor) -> cp.Tensor:
        return t * 2

    with cp.no_grad():
        assert h(x).requires_grad


def test_backward_in_threads_on_separate_graphs() -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for _ in range(20):
                x = cp.full((64,), float(seed), requires_grad=True)
                (x * x).sum().backward()
                assert x.grad.tolist() == [2.0 * seed] * 64
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# -- custom Functions and functional helpers -----------------------------------------------


def test_function_ctx_features() -> None:
    class Split(cp.autograd.Function):
        @staticmethod
        def forward(ctx, a):  # type: ignore[no-untyped-def]
            ctx.set_materialize_grads(False)
            idx = a.argmax()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(a)
            return a * 2, idx

        @staticmethod
        def backward(ctx, g, gidx):  # type: ignore[no-untyped-def]
            assert gidx is None
            assert ctx.needs_input_grad == (True,)
            return g * 2

    a = cp.tensor([1.0, 3.0], requires_grad=True)
    y, idx = Split.apply(a)
    assert not idx.requires_grad and y.grad_fn.name() == "SplitBackward"
    y.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]


def test_functional_jacobian_hessian_vjp_jvp() -> None:
    from candle_py.autograd import functional as AF

    x = cp.tensor([1.0, 2.0], dtype=cp.float64)
    j = AF.jacobian(lambda t: t**3, x)
    np.testing.assert_allclose(j.numpy(), np.diag([3.0, 12.0]))
    h = AF.hessian(lambda t: (t**3).sum(), x)
    np.testing.assert_allclose(h.numpy(), np.diag([6.0, 12.0]))
    _, v = AF.vjp(lambda t: t**2, x, cp.tensor([1.0, 1.0], dtype=cp.float64))
    assert v.tolist() == [2.0, 4.0]
    _, jv = AF.jvp(lambda t: t**2, x, cp.tensor([1.0, 0.0], dtype=cp.float64))
    assert jv.tolist() == [2.0, 0.0]
    _, hv = AF.hvp(lambda t: (t**3).sum(), x, cp.tensor([1.0, 1.0], dtype=cp.float64))
    assert hv.tolist() == [6.0, 12.0]


def test_new_formulas_name_their_nodes_as_torch() -> None:
    x = cp.randn(3, 4, requires_grad=True)
    i = cp.tensor([[0, 1], [2, 3], [1, 1]])
    assert x.gather(1, i).grad_fn.name() == "GatherBackward0"
    assert x.flip(0).grad_fn.name() == "FlipBackward0"
    assert x.repeat(2, 1).grad_fn.name() == "RepeatBackward0"
    assert x.cumsum(1).grad_fn.name() == "CumsumBackward0"
    assert x.max(dim=1).values.grad_fn.name() == "MaxBackward0"
    assert x.amax(dim=1).grad_fn.name() == "AmaxBackward0"
    assert x.abs().grad_fn.name() == "AbsBackward0"
    assert x.floor().grad_fn.name() == "FloorBackward0"
    assert cp.maximum(x, x * 2).grad_fn.name() == "MaximumBackward0"
    assert (x.abs() ** x).grad_fn.name() == "PowBackward1"


def test_pooling_results_are_the_pooling_nodes_as_in_torch() -> None:
    """The pooled tensor's grad_fn is the pooling node with torch's name (not a reshape
    of a per-plane result); 1-D poolings end in SqueezeBackward1 over the 2-D node, as
    torch runs them (names read off torch 2.15)."""
    F = cp.nn.functional
    x1, x2, x3 = (cp.randn(*s, requires_grad=True) for s in ((2, 3, 8), (2, 3, 8, 8), (2, 3, 4, 8, 8)))
    chain = {
        "SqueezeBackward1": [
            F.avg_pool1d(x1, 2),
            F.max_pool1d(x1, 2),
            F.max_pool1d(x1, 2, return_indices=True)[0],
            F.adaptive_avg_pool1d(x1, 3),
            F.adaptive_max_pool1d(x1, 3),
        ],
        "AvgPool2DBackward0": [F.avg_pool2d(x2, 2), F.avg_pool2d(x2[0], 2)],
        "AvgPool3DBackward0": [F.avg_pool3d(x3, 2)],
        "MaxPool2DWithIndicesBackward0": [F.max_pool2d(x2, 2), F.max_pool2d(x2, 2, return_indices=True)[0]],
        "MaxPool3DWithIndicesBackward0": [F.max_pool3d(x3, 2)],
        "AdaptiveAvgPool2DBackward0": [F.adaptive_avg_pool2d(x2, 1), cp.nn.AdaptiveAvgPool2d((3, 5))(x2)],
        "AdaptiveAvgPool3DBackward0": [F.adaptive_avg_pool3d(x3, 2)],
        "AdaptiveMaxPool2DBackward0": [F.adaptive_max_pool2d(x2, 3)],
        "AdaptiveMaxPool3DBackward0": [F.adaptive_max_pool3d(x3, 2)],
    }
    for name, ys in chain.items():
        for y in ys:
            assert y.grad_fn.name() == name, (name, y.grad_fn.name(), tuple(y.shape))
    inner = F.avg_pool1d(x1, 2).grad_fn.next_functions[0][0]
    assert inner.name() == "AvgPool2DBackward0"
    assert F.adaptive_max_pool1d(x1, 3).grad_fn.next_functions[0][0].name() == "AdaptiveMaxPool2DBackward0"
    # The gradient still flows through: mean pooling to 1 spreads 1/64 to each input.
    F.adaptive_avg_pool2d(x2, 1).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), np.full((2, 3, 8, 8), 1 / 64), rtol=1e-6)


def test_floor_divide_has_no_derivative_as_in_torch() -> None:
    x = cp.randn(3, requires_grad=True)
    y = cp.floor_divide(x, cp.tensor([2.0, 2.0, 2.0]))
    with pytest.raises(RuntimeError, match="derivative for floor_divide is not implemented"):
        y.sum().backward()


def test_half_precision_losses_record_through_float32() -> None:
    x = cp.randn(4, 5).to(cp.bfloat16).requires_grad_()
    t = cp.randn(4, 5).to(cp.bfloat16)
    loss = nn.functional.mse_loss(x, t)
    loss.backward()
    assert loss.dtype == cp.bfloat16 and x.grad.dtype == cp.bfloat16
    want = (2.0 * (x.detach().float() - t.float()) / 20.0).numpy()
    np.testing.assert_allclose(x.grad.float().numpy(), want, rtol=1e-2, atol=1e-3)


def test_split_pieces_share_one_node_and_its_gradient() -> None:
    x = cp.arange(18.0).reshape(3, 6).requires_grad_(True)
    y = x * 2
    a, b, c = y.chunk(3, dim=1)
    assert a.grad_fn.name() == b.grad_fn.name() == "SplitBackward0"
    assert [a.output_nr, b.output_nr, c.output_nr] == [0, 1, 2]
    (a.sum() * 3 + c.pow(2).sum()).backward()
    want = np.zeros((3, 6))
    want[:, :2] = 6.0
    want[:, 4:] = 8.0 * x.detach().numpy()[:, 4:]
    np.testing.assert_allclose(x.grad.numpy(), want)


def _identity_keeping(kept: list) -> type:
    """An autograd.Function whose backward returns its incoming gradient as is,
    after appending it to `kept` (the caller then holds it too)."""

    class Ident(cp.autograd.Function):
        @staticmethod
        def forward(ctx, t):  # noqa: ANN001, ANN205
            return t * 1.0

        @staticmethod
        def backward(ctx, go):  # noqa: ANN001, ANN205
            kept.append(go)
            return go

    return Ident


def test_leaf_gradients_never_alias_other_tensors() -> None:
    """A leaf takes its first gradient without a copy only when nothing else can see
    it; every way a gradient is shared must still give each `.grad` its own storage
    (an in-place change of one shows nowhere else)."""

    def bump(t: cp.Tensor) -> None:
        t.add_(100.0)

    # add's backward hands one tensor to both inputs.
    a, b = cp.ones(3, 4, requires_grad=True), cp.ones(3, 4, requires_grad=True)
    ((a + b) * 2.0).sum().backward()
    bump(a.grad)
    np.testing.assert_array_equal(b.grad.numpy(), np.full((3, 4), 2.0))
    # The caller's gradient reaches a leaf through a view.
    x = cp.ones(2, 6, requires_grad=True)
    g = cp.full((3, 4), 2.0)
    x.reshape(3, 4).backward(g)
    bump(x.grad)
    np.testing.assert_array_equal(g.numpy(), np.full((3, 4), 2.0))
    # A retained gradient and the leaf's.
    x = cp.ones(2, 6, requires_grad=True)
    y = x * 3.0
    z = y.view(3, 4)
    z.retain_grad()
    (z * 2.0).sum().backward()
    bump(x.grad)
    np.testing.assert_array_equal(z.grad.numpy(), np.full((3, 4), 2.0))
    # A hook that keeps what it sees.
    seen: list = []
    x = cp.ones(4, requires_grad=True)
    x.register_hook(lambda t: seen.append(t))
    (x * 5.0).sum().backward()
    bump(x.grad)
    np.testing.assert_array_equal(seen[0].numpy(), np.full(4, 5.0))
    # autograd.Function returning its incoming gradient (held by the caller too).
    kept: list = []
    Ident = _identity_keeping(kept)
    x = cp.ones(4, requires_grad=True)
    (Ident.apply(x) * 7.0).sum().backward()
    bump(x.grad)
    np.testing.assert_array_equal(kept[0].numpy(), np.full(4, 7.0))
    # A gradient that is a fresh buffer is taken as is, and stays correct.
    w = cp.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)).requires_grad_(True)
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), 4 * np.arange(6, dtype=np.float32).reshape(2, 3))
    # cat's backward: two leaves get views of one gradient (disjoint parts).
    p, q = cp.ones(3, requires_grad=True), cp.ones(2, requires_grad=True)
    (cp.cat([p, q]) * cp.arange(5.0)).sum().backward()
    bump(p.grad)
    np.testing.assert_array_equal(q.grad.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(p.grad.numpy(), [100.0, 101.0, 102.0])


def test_summed_gradients_never_write_into_a_tensor_seen_elsewhere() -> None:
    """A tensor used several times gets its gradients summed in place into one the
    engine alone holds; every gradient someone else can see (the caller's, a hook's,
    an autograd.Function's incoming one, a retained one) must stay as it was."""
    # The caller's gradient reaches x twice (add hands it to both sides).
    x = cp.ones(3, requires_grad=True)
    g = cp.tensor([1.0, 2.0, 3.0])
    (x + x).backward(g)
    np.testing.assert_array_equal(g.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    # A Function's backward returns the gradient it keeps; x is also used directly.
    kept: list = []
    Ident = _identity_keeping(kept)
    x = cp.ones(4, requires_grad=True)
    (Ident.apply(x) * 7.0 + x * 3.0 + x.exp()).sum().backward()
    np.testing.assert_array_equal(kept[0].numpy(), np.full(4, 7.0))
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 10.0 + np.e), rtol=1e-6)
    # An intermediate used three times, with a hook that keeps what it sees and a
    # retained gradient; then its own gradient flows on to a leaf used twice.
    seen: list = []
    x = cp.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)).requires_grad_(True)
    y = x * 2.0
    y.retain_grad()
    y.register_hook(lambda t: seen.append(t))
    (y * 3.0 + y * 4.0 + y.sum(0, keepdim=True) + x).sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), np.full((2, 3), 9.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((2, 3), 9.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 19.0))
    x.grad.add_(100.0)
    np.testing.assert_array_equal(seen[0].numpy(), np.full((2, 3), 9.0))
    np.testing.assert_array_equal(y.grad.numpy(), np.full((2, 3), 9.0))
    # Residual stream: each block's input gets the skip's and the branch's gradient.
    rng = np.random.default_rng(0)
    w = [cp.from_numpy(rng.standard_normal((8, 8)).astype(np.float32)).requires_grad_(True) for _ in range(3)]
    xn = rng.standard_normal((5, 8)).astype(np.float32)
    h = cp.from_numpy(xn).requires_grad_(True)
    z = h
    for wi in w:
        z = z + (z @ wi).tanh()
    z.pow(2).sum().backward()
    # The same in float64 numpy, by hand.
    ws = [wi.detach().numpy().astype(np.float64) for wi in w]
    zs = [xn.astype(np.float64)]
    for wi in ws:
        zs.append(zs[-1] + np.tanh(zs[-1] @ wi))
    gz = 2 * zs[-1]
    gws = []
    for i in reversed(range(3)):
        t = np.tanh(zs[i] @ ws[i])
        gb = gz * (1 - t * t)
        gws.insert(0, zs[i].T @ gb)
        gz = gz + gb @ ws[i].T
    np.testing.assert_allclose(h.grad.numpy(), gz, rtol=1e-4, atol=1e-5)
    for wi, gw in zip(w, gws):
        np.testing.assert_allclose(wi.grad.numpy(), gw, rtol=1e-4, atol=1e-5)


# -- slices' gradients joined by the engine -------------------------------------------------------
def _slice_case(x: cp.Tensor) -> cp.Tensor:
    """A ViT-style unpacking (all three parts), a gap, an overlap, another dim, and a
    direct use of `x`: every way the pieces of one gradient can meet."""
    w = cp.arange(1, 5 * 4 + 1, dtype=cp.float32).reshape(5, 4) / 7
    a, b, c = x[0], x[1], x[2]  # select along dim 0, covering it
    y = (a * w).sum() + (b * w * w).sum() - (c * 3).sum()
    y = y + x[:, 1].sum() * 2 + x.narrow(2, 1, 2).pow(2).sum()  # other dims, overlapping
    y = y + x[0].sum() + (x * x).sum() * 0.5  # the same slice twice; x itself
    return y + x[3:, :, :2].exp().sum()  # a gap before (rows 0-2 get nothing from it)


def _slice_case_np(x: np.ndarray) -> np.ndarray:
    w = np.arange(1, 21, dtype=np.float64).reshape(5, 4) / 7
    g = np.zeros_like(x)
    g[0] += w
    g[1] += w * w
    g[2] += -3
    g[:, 1] += 2
    g[:, :, 1:3] += 2 * x[:, :, 1:3]
    g[0] += 1
    g += x
    g[3:, :, :2] += np.exp(x[3:, :, :2])
    return g


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_slice_gradients_joined_from_pieces_equal_the_padded_sum(dtype: cp.dtype) -> None:
    x0 = np.random.default_rng(9).standard_normal((4, 5, 4))
    x = cp.tensor(x0).to(dtype).requires_grad_()
    _slice_case(x).backward()
    assert x.grad is not None and x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.numpy(), _slice_case_np(x0), rtol=1e-5, atol=1e-5)
    # A hook and retain_grad on the sliced (non-leaf) tensor see the joined gradient.
    x1 = cp.tensor(x0).to(dtype).requires_grad_()
    seen = []
    h = x1 * 1
    h.retain_grad()
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    _slice_case(h).backward()
    for got in (seen[0], h.grad.numpy(), x1.grad.numpy()):
        np.testing.assert_allclose(got, _slice_case_np(x0), rtol=1e-5, atol=1e-5)
    # autograd.grad with create_graph records the padded slice gradients: a double
    # backward runs through them.
    x2 = cp.tensor(x0).to(dtype).requires_grad_()
    (gx,) = cp.autograd.grad(_slice_case(x2), [x2], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), _slice_case_np(x0), rtol=1e-5, atol=1e-5)
    (gx.sum()).backward()  # d/dx of sum(grad): 1 from x*x/2, 2 on the narrowed, exp on the tail
    want = np.ones_like(x0)
    want[:, :, 1:3] += 2
    want[3:, :, :2] += np.exp(x0[3:, :, :2])
    np.testing.assert_allclose(x2.grad.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("used", [(0, 1, 2), (0, 2), (1,), (2, 0)])
def test_select_pieces_of_a_permuted_projection_match_the_unfused_gradient(used: tuple[int, ...]) -> None:
    """The ViT attention's `qkv.reshape(...).permute(2, 0, 3, 1, 4)` then `qkv[0..2]`
    (some of them: the joined gradient has zero gaps), also through `narrow`. The
    pieces join in the projection's memory order, which the permute backward turns
    back into a contiguous gradient."""
    rng = np.random.default_rng(10)
    x0 = rng.standard_normal((2, 7, 3 * 2 * 4)).astype(np.float32)
    g0 = [rng.standard_normal((2, 2, 7, 4)).astype(np.float32) for _ in range(3)]
    want = np.zeros((3, 2, 2, 7, 4), np.float32)
    for i in used:
        want[i] = g0[i]
    want = want.transpose(1, 3, 0, 2, 4).reshape(2, 7, 24)
    for pick in (lambda t, i: t[i], lambda t, i: t.narrow(0, i, 1).squeeze(0)):
        x = cp.tensor(x0).requires_grad_()
        qkv = x.reshape(2, 7, 3, 2, 4).permute(2, 0, 3, 1, 4)
        sum(((pick(qkv, i) * cp.tensor(g0[i])).sum() for i in used), cp.tensor(0.0)).backward()
        assert x.grad is not None
        np.testing.assert_array_equal(x.grad.numpy(), want)


def test_full_extent_slice_gradient_is_not_the_callers_tensor() -> None:
    """A slice of the whole extent passes its gradient on unpadded (not as a piece):
    `.grad` is still the engine's own tensor, not the caller's `gradient` (an in-place
    change of either must not reach the other)."""
    x = cp.zeros(4, 3, requires_grad=True)
    g = cp.ones(4, 3)
    x.narrow(0, 0, 4).backward(g)
    x[:].backward(g)  # select-free full slice, accumulating into .grad in place
    g.add_(5)
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 3), 2.0, np.float32))


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.BatchNorm2d(4),
        lambda: nn.LayerNorm(5),
        lambda: nn.GroupNorm(2, 4),
        lambda: nn.Conv2d(4, 4, 3, padding=1),
        lambda: nn.Linear(5, 5),
    ],
)
def test_fused_nodes_do_not_save_their_output(make) -> None:
    """`layer -> ReLU(inplace=True)` / `LeakyReLU(inplace=True)` (torchvision's ResNets,
    DCGAN) trains: a fused node whose backward does not read its result does not save it,
    so an in-place write to the result is not refused, and the gradient is that of the
    out-of-place activation."""
    m = make()
    x0 = np.random.default_rng(11).standard_normal((2, 4, 5, 5)).astype(np.float32)
    grads = []
    for act in (lambda y: y.relu_(), lambda y: nn.LeakyReLU(0.2, inplace=True)(y), lambda y: y.relu()):
        x = cp.tensor(x0).requires_grad_()
        y = act(m(x))
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[2])
    assert np.abs(grads[1] - grads[2]).max() > 0  # LeakyReLU passes the negatives' gradient


def test_attention_saves_its_output_and_refuses_an_inplace_write() -> None:
    """SDPA's backward reads its output (D = rowsum(dO * O)): writing it in place before
    the backward is refused, as PyTorch refuses it."""
    q = cp.randn(1, 2, 4, 8, requires_grad=True)
    o = cp.nn.functional.scaled_dot_product_attention(q, q, q)
    o.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.sum().backward()
