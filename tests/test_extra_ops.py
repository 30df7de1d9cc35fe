"""Extra ops Candle users re-write by hand: linspace, prod, slice_assign."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import candle_py as cp


def test_linspace_matches_examples() -> None:
    assert cp.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert cp.linspace(3, 7, 1).tolist() == [3.0]
    assert cp.linspace(3, 7, 0).shape == (0,)
    assert cp.linspace(-1, 1, 4, dtype=cp.float64).dtype == cp.float64
    with pytest.raises(ValueError, match="linspace"):
        cp.linspace(0, 1, -1)


@given(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.integers(0, 50))
def test_linspace_matches_numpy(a: float, b: float, n: int) -> None:
    got = cp.linspace(a, b, n, dtype=cp.float64).numpy()
    np.testing.assert_allclose(got, np.linspace(a, b, n), rtol=1e-12, atol=1e-9)
    if n >= 1:
        assert got[0] == a
    if n >= 2:
        assert got[-1] == b


def test_prod_examples() -> None:
    assert cp.prod(cp.tensor([1, 2, 3, 4])).item() == 24
    assert cp.tensor([1, 2, 3, 4]).prod().dtype == cp.int64
    assert cp.tensor([True, False]).prod().item() == 0
    x = cp.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert x.prod(0).tolist() == [3.0, 8.0]
    assert x.prod(1, keepdim=True).shape == (2, 1)
    assert cp.tensor(5.0).prod(0).item() == 5.0
    assert cp.zeros(0).prod().item() == 1.0


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=st.floats(-2, 2)), st.data())
def test_prod_matches_numpy(a: np.ndarray, data: st.DataObject) -> None:
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    keep = data.draw(st.booleans())
    np.testing.assert_allclose(cp.tensor(a).prod(dim, keepdim=keep).numpy(), np.prod(a, axis=dim, keepdims=keep), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cp.tensor(a).prod().numpy(), np.prod(a), rtol=1e-12, atol=1e-12)


@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=st.integers(-5, 5)))
def test_prod_integers_match_numpy(a: np.ndarray) -> None:
    assert cp.tensor(a).prod().item() == int(np.prod(a))
    np.testing.assert_array_equal(cp.tensor(a).prod(-1).numpy(), np.prod(a, axis=-1))


@pytest.mark.parametrize(
    "values",
    [[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 0.0, 4.0], [-1.5, 2.0, 0.5]],
)
def test_prod_gradient_with_zeros(values: list[float]) -> None:
    """d prod / d x_i is the product of the others, exactly, even where x has zeros."""
    x = cp.tensor(values, dtype=cp.float64, requires_grad=True)
    x.prod().backward()
    expected = [float(np.prod([v for j, v in enumerate(values) if j != i])) for i in range(len(values))]
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_prod_gradient_over_dim_matches_finite_differences() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4, 2))
    w = rng.normal(size=(3, 1, 2))
    x = cp.tensor(a, requires_grad=True)
    (x.prod(1, keepdim=True) * cp.tensor(w)).sum().backward()
    num = np.zeros_like(a)
    eps = 1e-6
    for idx in np.ndindex(a.shape):
        p, m = a.copy(), a.copy()
        p[idx] += eps
        m[idx] -= eps
        num[idx] = ((np.prod(p, 1, keepdims=True) * w).sum() - (np.prod(m, 1, keepdims=True) * w).sum()) / (2 * eps)
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), num, atol=1e-6)


def test_slice_assign_returns_new_tensor_like_candle() -> None:
    x = cp.zeros(4, 5)
    src = cp.arange(6).float().reshape(2, 3)
    y = x.slice_assign([slice(1, 3), slice(1, 4)], src)
    assert x.sum().item() == 0.0  # unchanged
    expected = np.zeros((4, 5), np.float32)
    expected[1:3, 1:4] = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(y.numpy(), expected)
    y2 = x.slice_assign([range(0, 2)], cp.ones(2, 5))
    assert y2[:2].sum().item() == 10.0 and y2[2:].sum().item() == 0.0
    with pytest.raises(ValueError, match=r"[(\[]3, 3[)\]].*[(\[]2, 3[)\]]"):
        x.slice_assign([slice(1, 3), slice(1, 4)], cp.ones(3, 3))


def test_slice_assign_gradients_flow_to_both() -> None:
    x = cp.ones(4, 5, dtype=cp.float64, requires_grad=True)
    src = cp.full((2, 3), 2.0, dtype=cp.float64, requires_grad=True)
    w = cp.arange(20, dtype=cp.float64).reshape(4, 5)
    (x.slice_assign([slice(1, 3), slice(1, 4)], src) * w).sum().backward()
    gx = w.numpy().copy()
    gx[1:3, 1:4] = 0
    assert x.grad is not None and src.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    np.testing.assert_array_equal(src.grad.numpy(), w.numpy()[1:3, 1:4])


# -- against PyTorch-made fixtures (tools/make_fixtures.py) -------------------------
import candle_py.nn as nn  # noqa: E402
from nn_fixtures import assert_close, cases, group, load  # noqa: E402


@pytest.mark.parametrize("name", cases("prod"))
def test_prod_matches_torch(name: str) -> None:
    t, meta = load(name)
    x = t["input"].clone().requires_grad_(True)
    dim, keep = meta["kwargs"]["dim"], meta["kwargs"]["keepdim"]
    y = x.prod() if dim is None else x.prod(dim, keepdim=keep)
    assert_close(y, t["output"], 1e-12, 1e-10, f"{name}: output")
    (y * t["loss_weight"]).sum().backward()
    assert_close(x.grad, t["grad.input"], 1e-12, 1e-10, f"{name}: grad")


@pytest.mark.parametrize("name", cases("snake"))
def test_snake_matches_torch(name: str) -> None:
    t, meta = load(name)
    m = nn.Snake1d(*meta["args"])
    m.load_state_dict(group(t, "state."))
    x = t["input"].clone().requires_grad_(True)
    y = m(x)
    assert_close(y, t["output"], 1e-5, 1e-4, f"{name}: output")
    (y * t["loss_weight"]).sum().backward()
    assert_close(x.grad, t["grad.input"], 1e-5, 1e-4, f"{name}: grad of x")
    assert_close(m.alpha.grad, t["grad.alpha"], 1e-4, 1e-4, f"{name}: grad of alpha")
    assert_close(nn.functional.snake(t["input"], t["state.alpha"]), t["output"], 1e-5, 1e-4, f"{name}: F.snake")


def _weight_normed(meta: dict, style: str) -> nn.Module:
    layer = getattr(nn, meta["layer"])(*meta["args"], **meta["kwargs"].get("layer_kwargs", {}))
    dim = meta["kwargs"]["dim"]
    if style == "old":
        return nn.utils.weight_norm(layer, dim=dim)
    return nn.utils.parametrizations.weight_norm(layer, dim=dim)


@pytest.mark.parametrize("name", cases("weight_norm"))
def test_weight_norm_matches_torch(name: str) -> None:
    t, meta = load(name)
    style = meta["kwargs"]["style"]
    m = _weight_normed(meta, style)
    state = group(t, "state.")
    assert set(m.state_dict()) == set(state)
    m.load_state_dict(state)
    x = t["input"].clone().requires_grad_(True)
    y = m(x)
    assert_close(y, t["output"], 1e-5, 1e-4, f"{name}: output")
    (y * t["loss_weight"]).sum().backward()
    assert_close(x.grad, t["grad.input"], 1e-4, 1e-4, f"{name}: grad of input")
    grads = group(t, "grad.")
    for k, p in m.named_parameters():
        assert_close(p.grad, grads[k], 1e-4, 1e-4, f"{name}: grad of {k}")


@pytest.mark.parametrize("name", cases("weight_norm"))
def test_weight_norm_loads_other_layouts(name: str) -> None:
    """A weight-normed layer loads the other key layout, or a plain weight."""
    t, meta = load(name)
    style = meta["kwargs"]["style"]
    state = group(t, "state.")
    other = _weight_normed(meta, "param" if style == "old" else "old")
    other.load_state_dict(state)
    assert_close(other(t["input"]), t["output"], 1e-5, 1e-4, f"{name}: other layout")
    plain = {"weight": t["plain_weight"], "bias": state["bias"]}
    same = _weight_normed(meta, style)
    same.load_state_dict(plain)
    assert_close(same(t["input"]), t["output"], 1e-5, 1e-4, f"{name}: from plain weight")


def test_remove_weight_norm_folds_back() -> None:
    m = nn.utils.weight_norm(nn.Linear(4, 2))
    x = cp.randn(3, 4)
    before = m(x)
    nn.utils.remove_weight_norm(m)
    assert sorted(m.state_dict()) == ["bias", "weight"]
    assert cp.allclose(m(x), before, atol=1e-6)
    with pytest.raises(ValueError, match="weight_norm"):
        nn.utils.remove_weight_norm(m)


def test_clip_grad_norm_scales_like_torch() -> None:
    a = nn.Parameter(cp.tensor([3.0, 4.0]))
    b = nn.Parameter(cp.tensor([12.0]))
    (a.sum() * 1 + b.sum() * 1).backward()
    a.grad = cp.tensor([3.0, 4.0])
    b.grad = cp.tensor([12.0])
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.3)
    assert abs(float(total) - 13.0) < 1e-5
    coef = 1.3 / (13.0 + 1e-6)
    assert cp.allclose(a.grad, cp.tensor([3.0, 4.0]) * coef)
    assert cp.allclose(b.grad, cp.tensor([12.0]) * coef)


def test_clip_grad_norm_factor_is_torchs_float32_arithmetic() -> None:
    """The factor is `max_norm / (total + 1e-6)` in the total's dtype, clamped to 1, and
    every gradient (large ones scaled in parallel chunks) is `g * factor` bit for bit."""
    rng = np.random.default_rng(5)
    gs = [rng.standard_normal(s).astype(np.float32) for s in [(400, 250), (160_000,), (33,), (1,)]]
    ps = [nn.Parameter(cp.zeros(*g.shape)) for g in gs]
    for p, g in zip(ps, gs):
        p.grad = cp.tensor(g)
    total = nn.utils.clip_grad_norm_(ps, 0.7)
    assert total.dtype == cp.float32
    t32 = np.float32(total.item())
    coef = min(np.float32(0.7) / (t32 + np.float32(1e-6)), np.float32(1.0))
    assert coef.dtype == np.float32
    for p, g in zip(ps, gs):
        np.testing.assert_array_equal(p.grad.numpy(), g * coef)


def test_clip_grad_norm_float64_gradients_give_a_float64_total() -> None:
    g = np.random.default_rng(6).standard_normal(50_000)
    p = nn.Parameter(cp.zeros(50_000, dtype=cp.float64))
    p.grad = cp.tensor(g)
    total = nn.utils.clip_grad_norm_([p], 0.5)
    assert total.dtype == cp.float64
    np.testing.assert_allclose(total.item(), np.linalg.norm(g), rtol=1e-12)
    np.testing.assert_array_equal(p.grad.numpy(), g * min(0.5 / (total.item() + 1e-6), 1.0))


def test_clip_grad_norm_scales_strided_and_shared_gradients_like_mul_() -> None:
    """Gradients the parallel scaling cannot take (a transposed view, one storage held by
    two parameters) are scaled one `mul_` at a time, as torch does: a shared gradient
    twice, a view through to its base."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal((300, 200)).astype(np.float32)
    shared = rng.standard_normal(40_000).astype(np.float32)
    big = cp.tensor(base)
    a, b, c = nn.Parameter(cp.zeros(200, 300)), nn.Parameter(cp.zeros(40_000)), nn.Parameter(cp.zeros(40_000))
    a.grad = big.t()
    b.grad = c.grad = cp.tensor(shared)
    total = nn.utils.clip_grad_norm_([a, b, c], 1.0)
    want = np.sqrt((base.astype(np.float64) ** 2).sum() + 2 * (shared.astype(np.float64) ** 2).sum())
    np.testing.assert_allclose(total.item(), want, rtol=1e-5)
    coef = np.float32(1.0) / (np.float32(total.item()) + np.float32(1e-6))
    np.testing.assert_array_equal(big.numpy(), base * coef)
    np.testing.assert_array_equal(a.grad.numpy(), (base * coef).T)
    np.testing.assert_array_equal(b.grad.numpy(), shared * coef * coef)


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_clip_grad_norm_total_norm_and_in_place_scaling(norm_type: float) -> None:
    rng = np.random.default_rng(3)
    gs = [rng.standard_normal(s).astype(np.float32) for s in [(300, 200), (7,), (1000,)]]
    ps = [nn.Parameter(cp.zeros(*g.shape)) for g in gs]
    for p, g in zip(ps, gs):
        p.grad = cp.tensor(g)
    held = ps[0].grad  # PyTorch scales `.grad` in place: a reference sees it
    flat = np.concatenate([g.ravel() for g in gs]).astype(np.float64)
    want = np.abs(flat).max() if norm_type == float("inf") else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = nn.utils.clip_grad_norm_(ps, 0.5, norm_type)
    assert abs(float(total) - want) <= 1e-5 * want
    coef = 0.5 / (float(total) + 1e-6)
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(held.numpy(), gs[0] * coef, rtol=1e-5, atol=1e-7)
    # Under the limit nothing changes (and nothing is rewritten).
    before = [p.grad.numpy().copy() for p in ps]
    nn.utils.clip_grad_norm_(ps, 1e9, norm_type)
    for p, b in zip(ps, before):
        np.testing.assert_array_equal(p.grad.numpy(), b)
