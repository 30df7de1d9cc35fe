"""Sparse COO cases, written once against the PyTorch API (`lib` is `torch` or
`candle_py`): `tools/make_fixtures_sparse.py` runs them on torch into
tests/fixtures/sparse/, `tests/test_sparse.py` on candle_py and compares.

A sparse result is returned through `_sp`: whether it is sparse, its size, nnz,
coalesced flag, indices, values and dense form. Gradients are those of a weighted sum.
Inputs come from usage_cases' seeded NumPy arrays, so both libraries see the same numbers.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from fixture_cases import Cases
from usage_cases import TOL_MM, _err, _np, _r, _w

CASES = Cases()
case = CASES.case
run_case = CASES.run


def _sp(s: Any) -> Dict[str, Any]:
    return {
        "is_sparse": s.is_sparse,
        "size": list(s.shape),
        "nnz": s._nnz(),
        "coalesced": s.is_coalesced(),
        "indices": s._indices(),
        "values": s._values().detach(),
        "dense": s.detach().to_dense(),
    }


def _idx(lib: Any) -> Any:
    # (2, 3) with a repeated entry (0, 2) and entries out of order
    return lib.tensor([[0, 1, 1, 0], [2, 0, 2, 2]])


def _coo(lib: Any, grad: bool = False) -> Any:
    return lib.sparse_coo_tensor(_idx(lib), lib.tensor([3.0, 4.0, 5.0, 1.0]), (2, 3), requires_grad=grad)


def _graph(lib: Any, n: int = 7) -> Any:
    """A small random adjacency (n x n) as index pairs, with repeats."""
    rng = np.random.default_rng(7)
    e = rng.integers(0, n, (2, 18)).astype(np.int32)
    return e


# -- construction and conversion ------------------------------------------------------------


@case()
def construct(lib: Any) -> Dict[str, Any]:
    s = _coo(lib)
    c = s.coalesce()
    return {
        "s": _sp(s),
        "c": _sp(c),
        "layout": str(s.layout).split(".")[-1],
        "dense_layout": str(lib.ones(1).layout).split(".")[-1],
        "dense_is_sparse": lib.ones(1).is_sparse,
        "sparse_dim": s.sparse_dim(),
        "dense_dim": s.dense_dim(),
        "dtype": s.dtype,
        "dim": s.dim(),
        "len": len(s),
        "numel": s.numel(),
        "c_indices": c.indices(),
        "c_values": c.values(),
        "indices_uncoalesced": _err(lambda: s.indices()),
        "values_uncoalesced": _err(lambda: s.values()),
    }


@case()
def construct_forms(lib: Any) -> Dict[str, Any]:
    e = _graph(lib)
    return {
        "np_int32_int64": _sp(lib.sparse_coo_tensor(e, lib.ones(e.shape[1]), (7, 7), dtype=lib.int64)),
        "inferred": _sp(lib.sparse_coo_tensor([[0, 4], [1, 0]], [1.0, 2.0])),
        "hybrid": _sp(lib.sparse_coo_tensor([[0, 2, 0]], _r(lib, 3, 2, seed="hy"), (3, 2))),
        "f64": _sp(lib.sparse_coo_tensor([[1, 0]], [1.0, 2.0], (2,), dtype=lib.float64)),
        "empty": _sp(lib.sparse_coo_tensor(lib.zeros((2, 0), dtype=lib.int64), lib.zeros(0), (3, 4))),
        "empty_coalesce": _sp(lib.sparse_coo_tensor(lib.zeros((2, 0), dtype=lib.int64), lib.zeros(0), (3, 4)).coalesce()),
        "coalesced_flag": lib.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2,), is_coalesced=True).is_coalesced(),
        "out_of_range": _err(lambda: lib.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,), check_invariants=True)),
        "negative": _err(lambda: lib.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,), check_invariants=True)),
        "nnz_mismatch": _err(lambda: lib.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (3,))),
        "float_indices": _err(lambda: lib.sparse_coo_tensor(lib.tensor([[0.0, 1.0]]), [1.0, 2.0], (3,))),
        "ndim_mismatch": _err(lambda: lib.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3, 3))),
    }


@case()
def to_sparse(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 4, 5, seed="ts")
    x = x * (x > 0.3)
    nanx = lib.tensor([[0.0, float("nan")], [float("inf"), 0.0]])
    return {
        "full": _sp(x.to_sparse()),
        "hybrid": _sp(x.to_sparse(1)),
        "zero_d": _sp(lib.tensor(2.5).to_sparse()),
        "nan_inf": _sp(nanx.to_sparse()),
        "int": _sp(lib.tensor([[0, 3], [0, 0], [-2, 0]]).to_sparse()),
        "all_zero": _sp(lib.zeros(2, 3).to_sparse()),
        "three_d": _sp((_r(lib, 2, 3, 4, seed="t3") > 0.5).float().to_sparse(2)),
        "round_trip": x.to_sparse().to_dense(),
        "again": _sp(x.to_sparse().to_sparse()),
    }


@case()
def conversions(lib: Any) -> Dict[str, Any]:
    s = _coo(lib)
    return {
        "f64": _sp(s.double()),
        "to_f64": _sp(s.to(lib.float64)),
        "long": _sp(s.long()),
        "t": _sp(s.t()),
        "T": _sp(s.T),
        "transpose": _sp(s.transpose(0, 1)),
        "hybrid_t": _err(lambda: lib.sparse_coo_tensor([[0, 1]], _r(lib, 2, 3, 2, seed="ht"), (2, 3, 2)).transpose(1, 2)),
        "clone": _sp(s.clone()),
        "detach": _sp(s.detach()),
        "numpy": _err(lambda: s.numpy()),
    }


# -- arithmetic -------------------------------------------------------------------------------


@case()
def arithmetic(lib: Any) -> Dict[str, Any]:
    s = _coo(lib)
    d = _r(lib, 2, 3, seed="ar")
    s2 = lib.sparse_coo_tensor([[1, 0], [1, 2]], lib.tensor([2.0, -1.0]), (2, 3))
    m = _coo(lib)
    m.mul_(3)
    return {
        "mul_scalar": _sp(s * 2),
        "rmul_scalar": _sp(2 * s),
        "neg": _sp(-s),
        "div": _sp(s / 2),
        # the entries' order before coalescing is PyTorch's implementation detail
        "add_sparse": _sp((s + s2).coalesce()),
        "add_sparse_nnz": (s + s2)._nnz(),
        "sub_sparse": _sp((s - s2).coalesce()),
        "dense_add": d + s,
        "dense_sub": d - s,
        "mul_dense": _sp(s * d),
        "dense_mul": _sp(d * s),
        "mul_": _sp(m),
        "add_dense": _err(lambda: s + d),
        "add_scalar": _err(lambda: s + 1),
        "eye_plus_int": lib.eye(3) + lib.sparse_coo_tensor([[0, 2], [1, 0]], lib.ones(2), (3, 3), dtype=lib.int64),
    }


@case()
def sums(lib: Any) -> Dict[str, Any]:
    s = _coo(lib)
    h = lib.sparse_coo_tensor([[0, 2, 0]], _r(lib, 3, 2, seed="su"), (3, 2))
    return {
        "all": s.sum(),
        "all_f64": s.sum(dtype=lib.float64),
        "dim0": _sp(s.sum(0)),
        "dim1": _sp(lib.sum(s, 1)),
        "both": lib.sparse.sum(s, (0, 1)),
        "sparse_sum": lib.sparse.sum(s),
        "sparse_sum_dim": _sp(lib.sparse.sum(s, dim=1)),
        "hybrid_dense_dim": _sp(lib.sparse.sum(h, 1)),
        "hybrid_sparse_dim": lib.sparse.sum(h, 0),
    }


# -- products and softmax, with gradients -------------------------------------------------------


@case(TOL_MM)
def matmul(lib: Any) -> Dict[str, Any]:
    # torch.mm/@ give a sparse leaf a dense (unmasked) gradient, torch.sparse.mm a
    # gradient at its entries, which is the only kind candle_py gives: `sm` is the leaf.
    s = _coo(lib)
    sm = _coo(lib, grad=True)
    d = _r(lib, 3, 4, seed="mm", grad=True)
    left = _r(lib, 5, 2, seed="ml", grad=True)
    v = _r(lib, 3, seed="mv")
    outs = {
        "at": s @ d,
        "mm": lib.mm(s, d),
        "sparse_mm": lib.sparse.mm(sm, d),
        "spmm": lib.spmm(s, d),
        "matmul": lib.matmul(s, d),
        "left": left @ s,
        "vec": s @ v,
        "addmm": lib.sparse.addmm(_r(lib, 2, 4, seed="am"), s, d, beta=0.5, alpha=2.0),
    }
    loss = sum((y * _w(lib, y)).sum() for y in outs.values())
    loss.backward()
    res: Dict[str, Any] = dict(outs)
    res.update(
        {
            "grad_d": d.grad,
            "grad_left": left.grad,
            "grad_sm": _sp(sm.grad.coalesce()),
            "is_leaf": sm.is_leaf,
            "requires_grad": sm.requires_grad,
        }
    )
    res["dtype_mismatch"] = _err(lambda: lib.mm(s, d.detach().double()))
    res["shape_mismatch"] = _err(lambda: lib.mm(s, lib.ones(4, 2)))
    res["sparse_sparse"] = _sp(lib.sparse.mm(s, lib.sparse_coo_tensor([[0, 2], [1, 0]], [1.0, 2.0], (3, 2))))
    return res


@case(TOL_MM)
def values_grad(lib: Any) -> Dict[str, Any]:
    """Gradients reach values that come from other ops, through the dense value too."""
    v = _r(lib, 4, seed="vg", grad=True)
    s = lib.sparse_coo_tensor(_idx(lib), v * 2, (2, 3))
    d = _r(lib, 3, 2, seed="vd")
    y = lib.mm(s, d)
    z = s.to_dense().exp()
    t = lib.sparse.sum(s)
    loss = (y * _w(lib, y)).sum() + (z * _w(lib, z)).sum() + t
    loss.backward()
    return {"y": y, "z": z, "t": t, "grad_v": v.grad, "requires_grad": s.requires_grad, "is_leaf": s.is_leaf}


@case()
def softmax(lib: Any) -> Dict[str, Any]:
    s = lib.sparse_coo_tensor(_idx(lib), _r(lib, 4, seed="sm"), (2, 3), requires_grad=True)
    h = lib.sparse_coo_tensor([[0, 2, 0, 1]], _r(lib, 4, 3, seed="hs"), (3, 3), requires_grad=True)
    outs = {
        "d0": lib.sparse.softmax(s, 0),
        "d1": lib.sparse.softmax(s, 1),
        # dim=1, not -1: torch 2.x's log_softmax backward is wrong for a negative dim
        # (it drops the sum over the slice); its forward is right (log_neg below)
        "log_d1": lib.sparse.log_softmax(s, 1),
        "hyb_sparse": lib.sparse.softmax(h, 0),
        "hyb_dense": lib.sparse.log_softmax(h, 1),
        "f64": lib.sparse.softmax(s, 1, dtype=lib.float64),
    }
    vals = [o.coalesce().values() for o in outs.values()]
    loss = sum((v * _w(lib, v)).sum() for v in vals)
    loss.backward()
    res: Dict[str, Any] = {k: _sp(o) for k, o in outs.items()}
    res.update({"grad_s": _sp(s.grad.coalesce()), "grad_h": _sp(h.grad.coalesce())})
    res["log_neg"] = _sp(lib.sparse.log_softmax(s.detach(), -1))
    res["int"] = _err(lambda: lib.sparse.softmax(lib.sparse_coo_tensor([[0, 1]], [1, 2], (2,)), 0))
    return res


@case(TOL_MM)
def gcn(lib: Any) -> Dict[str, Any]:
    """pytorch/examples' GCN data path and two graph-convolution layers."""
    n, f = 7, 5
    e = _graph(lib, n)
    feats = lib.tensor(np.abs(_np(n, f, seed="gf")) * (_np(n, f, seed="gm") > 0))
    scale = 1 / lib.sum(feats, dim=1)
    scale[scale == float("inf")] = 0
    feats = lib.diag(scale).to_sparse() @ feats
    adj = lib.sparse_coo_tensor(e, lib.ones(e.shape[1]), (n, n), dtype=lib.int64)
    adj = lib.eye(n) + adj
    deg = lib.sqrt(1 / lib.sum(adj, dim=1))
    deg[deg == float("inf")] = 0
    deg = lib.diag(deg).to_sparse()
    adj = (deg @ adj @ deg).to_sparse()
    feats = feats.to_sparse()
    k1 = _r(lib, f, 4, seed="k1", grad=True)
    k2 = _r(lib, 4, 3, seed="k2", grad=True)
    h = lib.relu(lib.spmm(adj, lib.mm(feats, k1)))
    out = lib.log_softmax(lib.spmm(adj, lib.mm(h, k2)), dim=1)
    loss = lib.nn.functional.nll_loss(out, lib.tensor([0, 1, 2, 0, 1, 2, 0]))
    loss.backward()
    return {"adj": _sp(adj), "feats": _sp(feats), "out": out, "loss": loss, "grad_k1": k1.grad, "grad_k2": k2.grad}
