"""The ops of src/bindings/misc_ops.rs and python/candle_py/_composed.py against PyTorch
fixtures (made by tools/make_fixtures_ops_new.py; torch is never imported here): each
case is one expression over named inputs, evaluated with `T = candle_py`, whose outputs
and gradients must equal PyTorch's. Then the bad inputs, views and in-place semantics,
and the entry points we do not have (sparse, complex, pinned memory)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import candle_py as cp

PATH = Path(__file__).parent / "fixtures" / "ops_new" / "cases.safetensors"
_T = cp.safetensors.load_file(str(PATH))
_META: Dict[str, Any] = {k: json.loads(v) for k, v in cp.safetensors.load_metadata(str(PATH)).items()}


def _np(t: cp.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _close(got: cp.Tensor, want: cp.Tensor, what: str, tol: float) -> None:
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    g, w = _np(got), _np(want)
    if g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w, err_msg=what)
    else:
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def test_fixtures_present() -> None:
    assert len(_META) > 100


@pytest.mark.parametrize("name", sorted(_META))
def test_matches_torch(name: str) -> None:
    meta = _META[name]
    expr: str = meta["expr"]
    grads: List[str] = meta["grad"]
    prefix = f"{name}.in."
    ins = {k[len(prefix) :]: v for k, v in _T.items() if k.startswith(prefix)}
    for k in grads:
        ins[k] = ins[k].clone().requires_grad_()
    res = eval(expr, {"T": cp}, dict(ins))
    outs = list(res) if isinstance(res, (tuple, list)) else [res]
    n_out = len([k for k in _T if k.startswith(f"{name}.out.")])
    assert len(outs) == n_out
    # Matrix products (einsum, cdist) round as matmul does.
    tol = 1e-4 if any(s in expr for s in ("einsum", "cdist")) else 1e-5
    for k, o in enumerate(outs):
        _close(o, _T[f"{name}.out.{k}"], f"{name} output {k}", tol)
    if not grads:
        return
    loss = None
    for k, o in enumerate(outs):
        term = (o * _T[f"{name}.w.{k}"]).sum()
        loss = term if loss is None else loss + term
    assert loss is not None
    got = cp.autograd.grad(loss, [ins[k] for k in grads], allow_unused=True)
    for k, gv in zip(grads, got):
        want = _T[f"{name}.grad.{k}"]
        _close(cp.zeros_like(want) if gv is None else gv, want, f"{name} grad {k}", tol)


# ----------------------------------------------------------------------------- bad inputs

x34 = cp.arange(12.0).reshape(3, 4)
ERRORS = [
    # (call, exception, text in the message)
    (lambda: cp.tensor(1.0).select(0, 0), IndexError, "select"),
    (lambda: x34.select(0, 3), IndexError, "out of range"),
    (lambda: x34.select(2, 0), IndexError, "Dimension out of range"),
    (lambda: x34.unfold(1, 5, 1), cp.ShapeError, "unfold"),
    (lambda: x34.unfold(1, 2, 0), ValueError, "step"),
    (lambda: x34.unfold(1, -1, 1), ValueError, "size"),
    (lambda: cp.ones(3).diagonal(), cp.ShapeError, "diagonal"),
    (lambda: x34.diagonal(0, 1, -1), ValueError, "identical"),
    (lambda: cp.ones(2, 2, 2).diag(), cp.ShapeError, "diag"),
    (lambda: cp.ones(3).trace(), cp.ShapeError, "trace"),
    (lambda: cp.tensor(1.0).diag_embed(), cp.ShapeError, "diag_embed"),
    (lambda: x34.repeat_interleave(-1), ValueError, "negative"),
    (lambda: x34.repeat_interleave(cp.tensor([1, 2]), dim=0), cp.ShapeError, "repeat_interleave"),
    (lambda: x34.repeat_interleave(cp.tensor([1.0])), TypeError, "integer"),
    (lambda: x34.repeat_interleave(2, dim=0, output_size=5), ValueError, "output_size"),
    (lambda: cp.repeat_interleave(cp.tensor([1.5])), TypeError, "integer"),
    (lambda: x34.masked_select(x34), TypeError, "masked_select"),
    (lambda: x34.masked_select(cp.ones(2, dtype=cp.bool)), cp.ShapeError, "masked_select"),
    (lambda: x34.masked_scatter(x34, x34), TypeError, "masked_scatter"),
    (lambda: x34.masked_scatter(x34 > 0, x34.double()), TypeError, "same dtypes"),
    (lambda: x34.masked_scatter(x34 > 0, cp.ones(3)), cp.ShapeError, "source"),
    (lambda: x34.masked_scatter(cp.ones(3, dtype=cp.bool), x34), cp.ShapeError, "broadcast"),
    (lambda: x34.index_add(0, cp.tensor([3]), cp.ones(1, 4)), IndexError, "out of bounds"),
    (lambda: x34.index_add(0, cp.tensor([-1]), cp.ones(1, 4)), IndexError, "index_add"),
    (lambda: x34.index_add(0, cp.tensor([0.0]), cp.ones(1, 4)), TypeError, "integer"),
    (lambda: x34.index_add(0, cp.tensor([0]), cp.ones(1, 4, dtype=cp.float64)), TypeError, "same scalar type"),
    (lambda: x34.index_add(0, cp.tensor([0]), cp.ones(1, 3)), cp.ShapeError, "index_add"),
    (lambda: x34.index_add(0, cp.tensor([0, 1]), cp.ones(1, 4)), cp.ShapeError, "Number of indices"),
    (lambda: x34.index_add(0, cp.tensor([[0]]), cp.ones(1, 4)), cp.ShapeError, "vector"),
    (lambda: cp.tensor([1, 2]).index_add(0, cp.tensor([0]), cp.tensor([1]), alpha=0.5), TypeError, "alpha"),
    (lambda: x34.index_copy(1, cp.tensor([4]), cp.ones(3, 1)), IndexError, "index_copy"),
    (lambda: x34.index_fill(0, cp.tensor([3]), 1.0), IndexError, "index_fill"),
    (lambda: x34.index_fill(0, cp.tensor([0]), cp.ones(2)), ValueError, "0-dimensional"),
    (lambda: x34.scatter_reduce(0, cp.tensor([[0]]), cp.ones(1, 1), "max"), ValueError, "reduce"),
    (lambda: x34.scatter_reduce(0, cp.tensor([[-1]]), cp.ones(1, 1), "sum"), IndexError, "scatter_reduce"),
    (lambda: x34.scatter_reduce(0, cp.tensor([[0]]), cp.ones(1, 1, dtype=cp.float64), "sum"), TypeError, "dtype"),
    (lambda: x34.scatter_reduce(0, cp.tensor([0]), cp.ones(1, 1), "sum"), cp.ShapeError, "dimensions"),
    (lambda: x34.scatter_reduce(0, cp.tensor([[0, 0, 0, 0, 0]]), cp.ones(1, 4), "sum"), cp.ShapeError, "Size does not match"),
    (lambda: x34.lerp(cp.ones(3, 4, dtype=cp.float64), 0.5), TypeError, "lerp"),
    (lambda: x34.lerp(cp.ones(2), 0.5), cp.ShapeError, "lerp"),
    (lambda: cp.tensor([1, 2]).lerp(cp.tensor([1, 2]), 0.5), TypeError, "floating point"),
    (lambda: x34.roll((1, 2), 0), ValueError, "align"),
    (lambda: x34.roll((1, 2)), ValueError, "align"),
    (lambda: x34.rot90(1, [0]), ValueError, "rotation dims"),
    (lambda: x34.rot90(1, [1, 1]), ValueError, "different"),
    (lambda: cp.ones(3).rot90(), cp.ShapeError, "rot90"),
    (lambda: cp.ones(3).fliplr(), cp.ShapeError, "fliplr"),
    (lambda: cp.tensor(1.0).flipud(), cp.ShapeError, "flipud"),
    (lambda: "a" in x34, TypeError, "__contains__"),
    (lambda: cp.einsum("ij,jk->ik", x34), ValueError, "fewer operands"),
    (lambda: cp.einsum("ij->ij", x34, x34), ValueError, "more operands"),
    (lambda: cp.einsum("i1", x34), ValueError, "invalid subscript"),
    (lambda: cp.einsum("ijk", x34), cp.ShapeError, "number of subscripts"),
    (lambda: cp.einsum("ij,jk->ik", x34, x34), cp.ShapeError, "does not broadcast"),
    (lambda: cp.einsum("ij->ik", x34), ValueError, "does not appear"),
    (lambda: cp.einsum("ij->ii", x34), ValueError, "more than once"),
    (lambda: cp.einsum("ii->i", x34), cp.ShapeError, "repeated"),
    (lambda: cp.einsum("ij", [x34, 1]), TypeError, "operand 1"),
    (lambda: cp.meshgrid(cp.ones(2, 2)), cp.ShapeError, "meshgrid"),
    (lambda: cp.meshgrid(cp.ones(2), indexing="ji"), ValueError, "indexing"),
    (lambda: cp.meshgrid(cp.ones(2), cp.ones(2, dtype=cp.int64)), TypeError, "dtype"),
    (lambda: cp.meshgrid(), ValueError, "non-empty"),
    (lambda: cp.cdist(cp.ones(3), cp.ones(3)), cp.ShapeError, "cdist"),
    (lambda: cp.cdist(cp.ones(2, 3), cp.ones(2, 4)), cp.ShapeError, "columns"),
    (lambda: cp.cdist(cp.ones(2, 3), cp.ones(2, 3), p=-1.0), ValueError, "non-negative"),
    (lambda: cp.cdist(cp.ones(2, 3, dtype=cp.int64), cp.ones(2, 3, dtype=cp.int64)), TypeError, "floating"),
    (lambda: cp.cdist(cp.ones(2, 3), cp.ones(2, 3), compute_mode="fast"), ValueError, "compute_mode"),
    (lambda: cp.trapezoid(cp.ones(3), cp.ones(3), dx=1.0), ValueError, "both"),
    (lambda: cp.trapezoid(cp.ones(3), cp.ones(2)), cp.ShapeError, "trapezoid"),
    (lambda: cp.trapezoid(cp.ones(3), dim=1), IndexError, "trapezoid"),
    (lambda: cp.trapezoid(cp.tensor(1.0)), IndexError, "trapezoid"),
    (lambda: x34.new_zeros(2, layout="sparse"), RuntimeError, "layout"),
    (lambda: x34.new_ones(2, pin_memory=True), RuntimeError, "pin"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_bad_input(k: int) -> None:
    call, exc, text = ERRORS[k]
    with pytest.raises(exc, match=text):
        call()


def test_pin_memory_not_available() -> None:
    x = cp.ones(2, 2)
    # As PyTorch on a machine without an accelerator: pinning fails, nothing is pinned.
    with pytest.raises(RuntimeError, match="pin_memory"):
        x.pin_memory()
    assert x.is_pinned() is False


# ----------------------------------------------------------------------------- semantics


def test_select_is_a_view() -> None:
    x = cp.zeros(3, 4)
    row = x.select(0, -1)
    row.add_(1.0)
    assert _np(x).sum() == 4 and _np(x)[2].tolist() == [1.0] * 4
    x[0, 1] = 5.0
    assert x.select(1, 1).tolist() == [5.0, 0.0, 1.0]
    # in the graph: a write into the view reaches its base
    base = cp.zeros(2, 3, requires_grad=True).clone()
    base.select(1, 2).mul_(0.0).add_(7.0)
    assert _np(base)[:, 2].tolist() == [7.0, 7.0]


def test_data_ptr_follows_offsets() -> None:
    x = cp.arange(12.0).reshape(3, 4)
    assert x.data_ptr() != 0
    assert x[1].data_ptr() - x.data_ptr() == 16
    assert x.select(1, 2).data_ptr() - x.data_ptr() == 8
    assert x.narrow(0, 2, 1).data_ptr() - x.data_ptr() == 32
    assert x.view(4, 3).data_ptr() == x.data_ptr()
    assert x.clone().data_ptr() != x.data_ptr()
    y = cp.tensor([1, 2, 3], dtype=cp.int64)
    assert y[1:].data_ptr() - y.data_ptr() == 8
    assert cp.zeros(0).data_ptr() == 0


def test_new_constructors_inherit() -> None:
    x = cp.ones(2, dtype=cp.float64)
    for t in (x.new_zeros(2, 3), x.new_zeros((2, 3)), x.new_ones([2, 3]), x.new_empty(2, 3)):
        assert t.dtype == cp.float64 and t.shape == (2, 3) and t.device == x.device and not t.requires_grad
    assert _np(x.new_ones(2, 3)).tolist() == [[1.0] * 3] * 2
    f = x.new_full((2,), 3)
    assert f.dtype == cp.float64 and f.tolist() == [3.0, 3.0]
    n = x.new_tensor([1, 2])
    assert n.dtype == cp.float64 and n.tolist() == [1.0, 2.0]
    src = cp.tensor([1.0, 2.0])
    copy = x.new_tensor(src)
    copy.add_(1.0)
    assert src.tolist() == [1.0, 2.0]  # a copy, as PyTorch's
    i = x.new_zeros(3, dtype=cp.int64, requires_grad=False)
    assert i.dtype == cp.int64
    g = x.new_zeros(2, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    assert cp.tensor([1, 2]).new_full((1,), 2.5).dtype == cp.int64  # self's dtype wins, as PyTorch


def test_type_as() -> None:
    x = cp.tensor([1.7, -2.2])
    assert x.type_as(cp.tensor([1])).tolist() == [1, -2]
    assert x.type_as(cp.tensor([1.0], dtype=cp.float64)).dtype == cp.float64
    same = x.type_as(cp.tensor([0.0]))
    assert same is x  # no conversion needed: the tensor itself, as `to`


def test_contains_and_reversed() -> None:
    x = cp.arange(6.0).reshape(2, 3)
    assert 4.0 in x and 4 in x and 6 not in x
    assert cp.tensor([3.0, 4.0, 5.0]) in x
    assert cp.tensor(float("nan")) not in cp.tensor([float("nan")])
    with pytest.raises(cp.ShapeError):
        cp.tensor([1.0, 2.0]) in x  # noqa: B015 - shapes [2] and [2, 3] do not broadcast
    r = list(reversed(x))
    assert [t.tolist() for t in r] == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    s = cp.tensor(3.0)
    assert s.__reversed__() is s


def test_inplace_forms_write_the_tensor() -> None:
    x = cp.zeros(3, 2)
    assert x.index_add_(0, cp.tensor([0, 0]), cp.ones(2, 2), alpha=2) is x
    assert x.tolist() == [[4.0, 4.0], [0.0, 0.0], [0.0, 0.0]]
    x.index_copy_(0, cp.tensor([1]), cp.full((1, 2), 5.0))
    x.index_fill_(1, cp.tensor([1]), -1.0)
    assert x.tolist() == [[4.0, -1.0], [5.0, -1.0], [0.0, -1.0]]
    x.scatter_(0, cp.tensor([[2]]), 9.0)
    x.scatter_add_(0, cp.tensor([[2]]), cp.ones(1, 1))
    assert x[2, 0].item() == 10.0
    x.scatter_reduce_(0, cp.tensor([[0, 0]]), cp.tensor([[2.0, 3.0]]), "prod")
    assert x[0].tolist() == [8.0, -3.0]
    x.lerp_(cp.zeros(3, 2), 0.5)
    assert x[0].tolist() == [4.0, -1.5]
    leaf = cp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.index_fill_(0, cp.tensor([0]), 0.0)


def test_index_copy_last_write_wins_and_gradient() -> None:
    # Duplicate indices: the last source slice stays (a sequential loop's result); as
    # PyTorch's formula (`grad.index_select(dim, index)`) every source slice gets the
    # gradient of its target place, and the overwritten places of self get none.
    x = cp.zeros(3, requires_grad=True)
    s = cp.tensor([1.0, 2.0], requires_grad=True)
    y = x.index_copy(0, cp.tensor([1, 1]), s)
    assert y.tolist() == [0.0, 2.0, 0.0]
    y.sum().backward()
    assert x.grad is not None and s.grad is not None
    assert x.grad.tolist() == [1.0, 0.0, 1.0]
    assert s.grad.tolist() == [1.0, 1.0]


def test_unfold_diagonal_are_differentiable_copies() -> None:
    # Candle cannot express their strides as a view: the results are copies (documented).
    x = cp.arange(6.0).reshape(2, 3)
    d = x.diagonal()
    d.add_(100.0)
    assert x[0, 0].item() == 0.0
    assert x.unfold(1, 2, 1).tolist() == [[[0.0, 1.0], [1.0, 2.0]], [[3.0, 4.0], [4.0, 5.0]]]


def test_einsum_create_graph() -> None:
    # The lowering is made of differentiable ops: second derivatives flow too.
    a = cp.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = cp.einsum("ij,ij->", a, a)  # sum(a^2)
    (g,) = cp.autograd.grad(y, [a], create_graph=True)
    np.testing.assert_allclose(_np(g), 2 * _np(a))
    (h,) = cp.autograd.grad(g.sum(), [a])
    np.testing.assert_allclose(_np(h), np.full((2, 2), 2.0))


def test_scatter_reduce_amax_ties_share_gradient() -> None:
    x = cp.tensor([1.0, 0.0], requires_grad=True)
    s = cp.tensor([1.0, 1.0, -5.0], requires_grad=True)
    y = x.scatter_reduce(0, cp.tensor([0, 0, 1]), s, "amax")
    assert y.tolist() == [1.0, 0.0]
    y.sum().backward()
    assert x.grad is not None and s.grad is not None
    np.testing.assert_allclose(_np(x.grad), [1 / 3, 1.0])
    np.testing.assert_allclose(_np(s.grad), [1 / 3, 1 / 3, 0.0])


def test_cdist_large_and_no_nan_gradient() -> None:
    a = cp.randn(30, 8, requires_grad=True, generator=cp.Generator().manual_seed(0))
    ref = np.sqrt(((_np(a)[:, None, :] - _np(a)[None, :, :]) ** 2).sum(-1))
    d = cp.cdist(a, a, compute_mode="donot_use_mm_for_euclid_dist")
    np.testing.assert_allclose(_np(d), ref, rtol=1e-5, atol=1e-5)
    d.sum().backward()
    assert a.grad is not None and np.isfinite(_np(a.grad)).all()
    # By default 30 rows take PyTorch's matrix-product form: a zero distance comes out
    # as the rounding of |x|^2 - 2 x.x + |x|^2 (torch: up to 1.4e-3 here too).
    mm = _np(cp.cdist(a, a))
    np.testing.assert_allclose(mm, ref, atol=5e-3)
    assert np.abs(np.diag(mm)).max() > 0
    for p in (0.5, 1.0, 3.0, math.inf):
        b = cp.zeros(2, 3, requires_grad=True)
        cp.cdist(b, b, p=p).sum().backward()
        assert b.grad is not None and np.isfinite(_np(b.grad)).all(), p


def test_meshgrid_views() -> None:
    a, b = cp.arange(3), cp.arange(2)
    gx, gy = cp.meshgrid(a, b, indexing="xy")
    assert gx.shape == (2, 3) and gy.shape == (2, 3)
    assert gx.tolist() == [[0, 1, 2], [0, 1, 2]] and gy.tolist() == [[0, 0, 0], [1, 1, 1]]
    gi, gj = cp.meshgrid(a, b)  # indexing defaults to "ij"
    assert gi.shape == (3, 2) and gj.tolist() == [[0, 1], [0, 1], [0, 1]]


def test_grad_fn_names() -> None:
    x = cp.ones(3, 4, requires_grad=True)
    names = {
        "SelectBackward0": x.select(0, 1),
        "UnfoldBackward0": x.unfold(1, 2, 1),
        "DiagonalBackward0": x.diagonal(),
        "MaskedSelectBackward0": x.masked_select(x > 0),
        "IndexAddBackward0": x.index_add(0, cp.tensor([0]), cp.ones(1, 4)),
        "ScatterReduceBackward0": x.scatter_reduce(0, cp.tensor([[0]]), cp.ones(1, 1), "sum"),
    }
    for name, t in names.items():
        assert t.grad_fn is not None and t.grad_fn.name() == name
    assert x[1].grad_fn is not None and x[1].grad_fn.name() == "SelectBackward0"
