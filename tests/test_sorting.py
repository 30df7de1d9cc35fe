"""Sorting, selection, scans and the NaN rules of the reductions against PyTorch
fixtures (made by tools/make_fixtures_sorting.py; torch is never imported here), plus
errors, method forms, result types, large multi-threaded inputs and properties."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import candle_py as cp

FIXTURES = Path(__file__).parent / "fixtures" / "sorting"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors"))
nan, inf = float("nan"), float("inf")


def _np(t: cp.Tensor) -> np.ndarray:
    t = t.detach()
    return np.asarray(t.float() if t.dtype in (cp.float16, cp.bfloat16) else t)


def _tol(dt: Any) -> dict[str, float]:
    if dt in (cp.float16, cp.bfloat16):
        return dict(atol=1e-2, rtol=1e-2)
    if dt == cp.float64:
        return dict(atol=1e-12, rtol=1e-12)
    return dict(atol=1e-5, rtol=1e-5)


def _same(got: cp.Tensor, want: cp.Tensor, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if want.is_floating_point():
        np.testing.assert_allclose(_np(got), _np(want), equal_nan=True, err_msg=what, **_tol(want.dtype))
    else:
        np.testing.assert_array_equal(_np(got), _np(want), err_msg=what)


def test_fixtures_present() -> None:
    assert len(CASES) >= 100, CASES


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name: str) -> None:
    path = FIXTURES / f"{name}.safetensors"
    t = cp.safetensors.load_file(path)
    meta = cp.safetensors.load_metadata(path)
    args, kwargs = json.loads(meta["args"]), json.loads(meta["kwargs"])
    args = [tuple(a) if isinstance(a, list) else a for a in args]
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    targs = [t[n] for n in json.loads(meta["tensor_args"])]
    tkw = {n: t[n] for n in json.loads(meta["tensor_kwargs"])}
    grad = "grad.input" in t
    x = t["input"].detach().requires_grad_(True) if grad else t["input"]
    r = getattr(cp, meta["op"])(x, *targs, *args, **tkw, **kwargs)
    if json.loads(meta["tuple"]):
        assert isinstance(r, tuple), f"{name}: expected a tuple, got {type(r).__name__}"
        outs = list(r)
        want = [t[f"out.{i}"] for i in range(len(outs))]
        assert f"out.{len(outs)}" not in t, f"{name}: too few outputs"
    else:
        assert isinstance(r, cp.Tensor), f"{name}: expected a tensor, got {type(r).__name__}"
        outs, want = [r], [t["out"]]
    checked = meta["indices"] == "check"
    for i, (o, w) in enumerate(zip(outs, want)):
        if checked and i == 1:
            # Ties whose order torch leaves open: the indices must pick the values.
            picked = np.take_along_axis(_np(t["input"]), _np(o).astype(np.int64), axis=int(args[1]) if len(args) > 1 else -1)
            np.testing.assert_array_equal(picked, _np(outs[0]), err_msg=f"{name}: indices")
            continue
        _same(o, w, f"{name}: output {i}")
    if grad:
        (outs[0] * t["loss_weight"]).sum().backward()
        assert x.grad is not None, f"{name}: no gradient"
        _same(x.grad, t["grad.input"], f"{name}: grad.input")


# ---------------------------------------------------------------- result types and method forms


def test_result_types_are_named_tuples() -> None:
    x = cp.tensor([[3.0, 1.0, 2.0]])
    for r, kind in (
        (x.sort(), "sort"),
        (x.topk(2), "topk"),
        (x.kthvalue(1), "kthvalue"),
        (x.median(1), "median"),
        (x.mode(), "mode"),
        (x.max(1), "max"),
    ):
        assert type(r).__name__ == kind
        values, indices = r
        assert values is r.values and indices is r.indices
        assert r.indices.dtype == cp.int64
    assert x.sort(descending=True).values.tolist() == [[3.0, 2.0, 1.0]]
    assert cp.sort(x, 1, True).indices.tolist() == [[0, 2, 1]]
    assert cp.topk(x, 1, largest=False).values.tolist() == [[1.0]]


def test_function_and_method_forms_agree() -> None:
    x = cp.tensor([[3.0, -1.0, 2.0, 2.0], [0.0, 5.0, -2.0, 1.0]])
    for name, args in (
        ("argsort", (1,)),
        ("msort", ()),
        ("cumprod", (1,)),
        ("logsumexp", (1,)),
        ("logcumsumexp", (0,)),
        ("argwhere", ()),
        ("unique", ()),
    ):
        a, b = getattr(cp, name)(x, *args), getattr(x, name)(*args)
        np.testing.assert_array_equal(_np(a), _np(b), err_msg=name)
    assert cp.nonzero(x).tolist() == x.nonzero().tolist()
    assert cp.bincount(cp.tensor([1, 1, 0])).tolist() == [1, 2]


def test_where_one_argument_is_nonzero_as_tuple() -> None:
    c = cp.tensor([[True, False], [False, True]])
    rows, cols = cp.where(c)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]
    assert [a.tolist() for a in cp.where(cp.tensor([0, 3, 0, 4]))] == [[1, 3]]
    with pytest.raises(TypeError, match="where"):
        cp.where(c, cp.ones(2, 2))
    # The three-argument form is unchanged.
    assert cp.where(c, 1.0, 0.0).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_norm_p_zero_gives_no_gradient_as_torch() -> None:
    x = cp.tensor([1.0, 0.0, 2.0], requires_grad=True)
    y = x.norm(0)
    assert y.item() == 2.0 and y.requires_grad
    y.backward()
    assert x.grad is None


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: cp.zeros(3, 4).topk(5), RuntimeError, "topk: selected index k out of range"),
        (lambda: cp.zeros(3, 4).topk(-1), RuntimeError, "topk: selected index k out of range"),
        (lambda: cp.tensor(3.0).topk(2), RuntimeError, "topk"),
        (lambda: cp.zeros(3, 4).topk(1, dim=2), IndexError, "Dimension out of range"),
        (lambda: cp.zeros(3, 4).sort(dim=-3), IndexError, "sort: Dimension out of range"),
        (lambda: cp.zeros(3, 4).kthvalue(0), RuntimeError, "kthvalue: selected number k out of range for dimension 1"),
        (lambda: cp.zeros(3, 4).kthvalue(5, 1), RuntimeError, "kthvalue: selected number k out of range for dimension 1"),
        (lambda: cp.zeros(0, 3).median(0), IndexError, "median: Expected reduction dim 0 to have non-zero size"),
        (lambda: cp.zeros(0).mode(), IndexError, "mode"),
        (lambda: cp.tensor([-1, 2]).bincount(), RuntimeError, "bincount only supports 1-d non-negative integral inputs"),
        (lambda: cp.tensor([[1, 2]]).bincount(), RuntimeError, "bincount"),
        (lambda: cp.tensor([1.0]).bincount(), TypeError, "bincount"),
        (lambda: cp.tensor([1, 2]).bincount(minlength=-1), RuntimeError, "minlength should be >= 0"),
        (lambda: cp.tensor([1, 2]).bincount(weights=cp.ones(3)), RuntimeError, "weights should be 1-d and have the same length"),
        (lambda: cp.tensor([1, 2]).logcumsumexp(0), TypeError, "logcumsumexp"),
        (lambda: cp.tensor(1).unique(dim=0), IndexError, "unique"),
        (lambda: cp.zeros(2, 3).unique(dim=2), IndexError, "unique: Dimension out of range"),
        (lambda: cp.zeros(2).cumprod(1), IndexError, "cumprod: Dimension out of range"),
        (lambda: cp.zeros(2).logsumexp(1), IndexError, "logsumexp"),
        (lambda: cp.zeros(2).logsumexp((0, 0)), ValueError, "logsumexp"),
    ],
)
def test_bad_input_raises(call: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


def test_cumprod_double_backward_with_zeros_is_refused() -> None:
    x = cp.tensor([2.0, 0.0, 3.0], requires_grad=True)
    y = x.cumprod(0).sum()
    with pytest.raises(RuntimeError, match="create_graph=True: the double backward of cumprod"):
        cp.autograd.grad(y, x, create_graph=True)


def test_cumprod_double_backward_without_zeros() -> None:
    # d/dx sum(cumprod([a, b])) = [1 + b, a]; its gradient sums to [1, 1] along the other.
    x = cp.tensor([2.0, 3.0], requires_grad=True)
    (g,) = cp.autograd.grad(x.cumprod(0).sum(), x, create_graph=True)
    assert g.tolist() == [4.0, 2.0]
    (h,) = cp.autograd.grad(g.sum(), x)
    assert h.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- dtypes and shapes


@pytest.mark.parametrize("dt", [cp.float32, cp.float64, cp.float16, cp.bfloat16, cp.int64, cp.int32, cp.int16, cp.uint8])
def test_sort_dtypes_match_numpy_stable(dt: Any) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 20, size=(5, 40))
    x = cp.tensor(a.tolist()).to(dt)
    r = x.sort(1, stable=True)
    assert r.values.dtype == dt
    np.testing.assert_array_equal(_np(r.indices), np.argsort(a, axis=1, kind="stable"))
    np.testing.assert_array_equal(_np(r.values), np.sort(a, axis=1))
    d = x.sort(0, descending=True, stable=True)
    np.testing.assert_array_equal(_np(d.indices), np.argsort(-a, axis=0, kind="stable"))


def test_large_inputs_match_numpy() -> None:
    # Enough rows and elements that the kernels split over threads.
    rng = np.random.default_rng(7)
    a = rng.standard_normal((600, 1000)).astype(np.float32)
    a[rng.random(a.shape) < 0.01] = np.nan
    x = cp.from_numpy(a)
    s = x.sort(1)
    np.testing.assert_array_equal(_np(s.indices), np.argsort(a, axis=1, kind="stable"))
    s0 = x.sort(0, descending=True)
    ref = np.argsort(np.where(np.isnan(a), -np.inf, -a), axis=0, kind="stable")  # NaN first
    np.testing.assert_array_equal(_np(s0.indices), ref)
    t = x.topk(5, dim=1, largest=False)
    np.testing.assert_array_equal(_np(t.values), np.sort(a, axis=1)[:, :5])
    np.testing.assert_array_equal(_np(x.argmax(1)), np.where(np.isnan(a).any(1), np.isnan(a).argmax(1), np.nanargmax(a, 1)))
    np.testing.assert_allclose(_np(x.cumsum(1)), np.cumsum(a.astype(np.float64), 1), rtol=1e-5, atol=1e-4, equal_nan=True)
    m = x.median(1)
    clean = ~np.isnan(a).any(1)
    np.testing.assert_array_equal(_np(m.values)[clean], np.sort(a[clean], 1)[:, (a.shape[1] - 1) // 2])
    assert np.isnan(_np(m.values)[~clean]).all()
    nz = (cp.from_numpy(np.where(np.isnan(a), 0, a) > 1.5)).nonzero()
    np.testing.assert_array_equal(_np(nz), np.argwhere(np.where(np.isnan(a), 0, a) > 1.5))
    u, inv, cnt = cp.from_numpy((a[:50] * 3).round().astype(np.float32)).unique(return_inverse=True, return_counts=True)
    uu, ui, uc = np.unique((a[:50] * 3).round().astype(np.float32), return_inverse=True, return_counts=True)
    finite = ~np.isnan(uu)
    np.testing.assert_array_equal(_np(u)[: finite.sum()], uu[finite])
    assert _np(cnt)[: finite.sum()].tolist() == uc[finite].tolist()


def test_empty_and_zero_d() -> None:
    assert cp.zeros(0).sort().values.shape == (0,)
    assert cp.zeros(2, 0).topk(0).values.shape == (2, 0)
    assert cp.zeros(0, 2).argsort(0).shape == (0, 2)
    assert math.isnan(cp.zeros(0).median().item())
    assert cp.zeros(0, 3).cumprod(0).shape == (0, 3)
    assert cp.tensor(3.0).argsort().item() == 0
    assert cp.tensor(3.0).msort().item() == 3.0
    assert cp.tensor(3.0).logcumsumexp(0).item() == 3.0
    assert cp.tensor(-2).cumprod(0).dtype == cp.int64


def test_nan_rules_of_reductions() -> None:
    x = cp.tensor([[1.0, nan, 5.0, nan], [2.0, 9.0, 9.0, -1.0]])
    assert x.argmax(1).tolist() == [1, 1] and x.argmin(1).tolist() == [1, 3]
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    assert x.argmax().item() == 1
    assert math.isnan(x.amax(1)[0].item()) and x.amax(1)[1].item() == 9.0
    assert [math.isnan(v) for v in cp.maximum(cp.tensor([1.0, nan, 2.0]), cp.tensor([nan, 0.0, 1.0])).tolist()] == [True, True, False]
    assert [math.isnan(v) for v in cp.tensor([1.0, nan, 3.0]).cumsum(0).tolist()] == [False, True, True]
    # Integer reductions are untouched by the NaN handling.
    assert cp.tensor([[3, 7, 7]]).max(1).indices.tolist() == [1]
