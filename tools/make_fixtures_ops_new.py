"""Make the PyTorch reference fixtures for the ops of src/bindings/misc_ops.rs and
python/candle_py/_composed.py (select, unfold, diagonal/diag/diag_embed/trace,
repeat_interleave, masked_select, index_add/copy/fill, scatter_/scatter_reduce, lerp,
roll/rot90/flips, einsum, meshgrid, cdist, trapezoid, ...).

Needs torch; tests/test_ops_new.py never imports it. Every case is one expression
over named inputs, written against a module `T` (torch here, candle_py in the test),
so both sides run the same call. tests/fixtures/ops_new/cases.safetensors holds, per
case `<name>`:
  <name>.in.<arg>   the inputs
  <name>.out.<k>    the outputs (k = 0.. for a tuple, or 0 for one tensor)
  <name>.w.<k>      the loss weights: loss = sum_k (out_k * w_k).sum()
  <name>.grad.<arg> the gradient of the loss for each input named in `grad`
and the metadata maps `<name>` to JSON {"expr": ..., "grad": [args]}.

Run from the repository root:  python tools/make_fixtures_ops_new.py
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Tuple

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "ops_new")

g = torch.Generator().manual_seed(0)


def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def ri(lo: int, hi: int, *shape: int) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=g)


nan, inf = float("nan"), float("inf")
edge = torch.tensor([1.0, nan, -inf, inf, 0.0, -0.0, 2.5])

# (name, expr, inputs, args that get a gradient)
CASES: List[Tuple[str, str, Dict[str, torch.Tensor], List[str]]] = [
    # select
    ("select_mid", "x.select(1, 2)", {"x": r(3, 4, 2)}, ["x"]),
    ("select_neg", "x.select(-1, -1)", {"x": r(3, 4)}, ["x"]),
    ("select_fn", "T.select(x, 0, 1)", {"x": r(2, 3)}, ["x"]),
    ("select_1d", "x.select(0, -2)", {"x": r(5)}, ["x"]),
    ("select_int", "x.select(1, 0)", {"x": ri(-5, 5, 2, 3)}, []),
    # unfold
    ("unfold_basic", "x.unfold(1, 3, 2)", {"x": r(2, 7, 3)}, ["x"]),
    ("unfold_overlap", "x.unfold(-1, 2, 1)", {"x": r(3, 5)}, ["x"]),
    ("unfold_full", "x.unfold(0, 4, 1)", {"x": r(4)}, ["x"]),
    ("unfold_size0", "x.unfold(0, 0, 2)", {"x": r(3, 2)}, ["x"]),
    ("unfold_0d", "x.unfold(0, 1, 1)", {"x": torch.tensor(3.5)}, ["x"]),
    ("unfold_int", "x.unfold(0, 2, 2)", {"x": ri(0, 9, 5)}, []),
    # diagonal / diag / diag_embed / trace
    ("diagonal_main", "x.diagonal()", {"x": r(3, 4)}, ["x"]),
    ("diagonal_off", "x.diagonal(1)", {"x": r(3, 4)}, ["x"]),
    ("diagonal_neg", "x.diagonal(-2)", {"x": r(4, 3)}, ["x"]),
    ("diagonal_dims", "T.diagonal(x, offset=1, dim1=2, dim2=0)", {"x": r(3, 2, 4)}, ["x"]),
    ("diagonal_empty", "x.diagonal(5)", {"x": r(3, 4)}, ["x"]),
    ("diag_vec", "T.diag(x)", {"x": r(3)}, ["x"]),
    ("diag_vec_off", "x.diag(-2)", {"x": r(3)}, ["x"]),
    ("diag_mat", "T.diag(x, 1)", {"x": r(3, 4)}, ["x"]),
    ("diag_int", "x.diag()", {"x": ri(-3, 3, 3)}, []),
    ("diag_embed_basic", "T.diag_embed(x)", {"x": r(2, 3)}, ["x"]),
    ("diag_embed_off", "x.diag_embed(1, 0, 2)", {"x": r(2, 3)}, ["x"]),
    ("trace_f", "x.trace()", {"x": r(3, 4)}, ["x"]),
    ("trace_int", "T.trace(x)", {"x": ri(-9, 9, 3, 3)}, []),
    # repeat_interleave
    ("ri_scalar_flat", "x.repeat_interleave(2)", {"x": r(2, 3)}, ["x"]),
    ("ri_scalar_dim", "T.repeat_interleave(x, 3, dim=1)", {"x": r(2, 2)}, ["x"]),
    ("ri_tensor", "x.repeat_interleave(reps, dim=0)", {"x": r(3, 2), "reps": torch.tensor([1, 0, 3])}, ["x"]),
    ("ri_tensor1", "x.repeat_interleave(reps, dim=-1)", {"x": r(2, 3), "reps": torch.tensor([2])}, ["x"]),
    ("ri_output_size", "x.repeat_interleave(reps, dim=0, output_size=4)", {"x": r(2), "reps": torch.tensor([3, 1])}, ["x"]),
    ("ri_one_arg", "T.repeat_interleave(reps)", {"reps": torch.tensor([2, 0, 1])}, []),
    ("ri_zero", "x.repeat_interleave(0, dim=0)", {"x": r(3, 2)}, ["x"]),
    ("ri_int", "x.repeat_interleave(2)", {"x": ri(0, 9, 3)}, []),
    # masked_select
    ("masked_select", "x.masked_select(m)", {"x": r(3, 4), "m": torch.rand(3, 4, generator=g) > 0.5}, ["x"]),
    ("masked_select_bcast", "T.masked_select(x, m)", {"x": r(3, 4), "m": torch.tensor([True, False, True, True])}, ["x"]),
    ("masked_select_bcast_x", "x.masked_select(m)", {"x": r(4), "m": torch.rand(2, 4, generator=g) > 0.5}, ["x"]),
    ("masked_select_none", "x.masked_select(m)", {"x": r(2, 2), "m": torch.zeros(2, 2, dtype=torch.bool)}, ["x"]),
    ("masked_scatter", "x.masked_scatter(m, s)", {"x": r(3, 4), "m": torch.rand(3, 4, generator=g) > 0.5, "s": r(4, 4)}, ["x", "s"]),
    ("masked_scatter_bcast", "T.masked_scatter(x, m, s)", {"x": r(2, 3), "m": torch.tensor([True, False, True]), "s": r(5)}, ["x", "s"]),
    ("masked_scatter_none", "x.masked_scatter(m, s)", {"x": r(2), "m": torch.zeros(2, dtype=torch.bool), "s": r(1)}, ["x", "s"]),
    (
        "masked_scatter_inplace",
        "x.clone().masked_scatter_(m, s)",
        {"x": ri(0, 9, 4), "m": torch.tensor([True, True, False, True]), "s": ri(0, 9, 3)},
        [],
    ),
    # index_add / index_copy / index_fill
    ("index_add", "x.index_add(0, i, s)", {"x": r(4, 3), "i": torch.tensor([0, 2, 0]), "s": r(3, 3)}, ["x", "s"]),
    ("index_add_alpha", "T.index_add(x, 1, i, s, alpha=-2.5)", {"x": r(2, 4), "i": torch.tensor([3, 1]), "s": r(2, 2)}, ["x", "s"]),
    ("index_add_int", "x.index_add(0, i, s, alpha=3)", {"x": ri(0, 5, 3), "i": torch.tensor([1, 1]), "s": ri(0, 5, 2)}, []),
    ("index_add_inplace", "x.clone().index_add_(0, i, s)", {"x": r(3, 2), "i": torch.tensor([2, 0]), "s": r(2, 2)}, ["x", "s"]),
    ("index_copy", "x.index_copy(1, i, s)", {"x": r(2, 4), "i": torch.tensor([3, 0]), "s": r(2, 2)}, ["x", "s"]),
    ("index_copy_inplace", "x.clone().index_copy_(0, i, s)", {"x": r(3, 2), "i": torch.tensor([1]), "s": r(1, 2)}, ["x", "s"]),
    ("index_fill", "x.index_fill(1, i, -1.5)", {"x": r(3, 4), "i": torch.tensor([0, -2])}, ["x"]),
    ("index_fill_tensor", "T.index_fill(x, 0, i, v)", {"x": r(3, 2), "i": torch.tensor([2]), "v": torch.tensor(7.0)}, ["x", "v"]),
    ("index_fill_inplace", "x.clone().index_fill_(0, i, 2)", {"x": ri(0, 9, 3, 2), "i": torch.tensor([0, 2])}, []),
    # scatter_ / scatter_add_ / scatter_reduce
    ("scatter_inplace", "x.clone().scatter_(1, i, s)", {"x": r(2, 4), "i": torch.tensor([[3, 0], [1, 1]]), "s": r(2, 2)}, ["x", "s"]),
    ("scatter_value_inplace", "x.clone().scatter_(0, i, 9.0)", {"x": r(3, 2), "i": torch.tensor([[2, 0]])}, ["x"]),
    (
        "scatter_add_inplace",
        "x.clone().scatter_add_(0, i, s)",
        {"x": r(3, 2), "i": torch.tensor([[2, 0], [2, 2]]), "s": r(2, 2)},
        ["x", "s"],
    ),
]

_I = torch.tensor([[0, 1, 0, 2], [2, 2, 0, 0]])
for how in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        src = r(2, 4)
        if how in ("amax", "amin"):
            src[1, 1] = src[0, 1]  # a tie at place (2, 1)
        if how == "prod":
            src[0, 0] = 0.0  # a zero among the values reduced into place (0, 0)
        CASES.append(
            (
                f"scatter_reduce_{how}_{'self' if inc else 'noself'}",
                f"x.scatter_reduce(0, i, s, {how!r}, include_self={inc})",
                {"x": r(3, 4), "i": _I, "s": src},
                ["x", "s"],
            )
        )
CASES += [
    (
        "scatter_reduce_mean_int",
        "T.scatter_reduce(x, 0, i, s, 'mean')",
        {"x": torch.tensor([-7, 8, 9]), "i": torch.tensor([0, 0, 1]), "s": torch.tensor([2, 3, 4])},
        [],
    ),
    (
        "scatter_reduce_amax_nan",
        "x.scatter_reduce(0, i, s, 'amax')",
        {"x": torch.tensor([1.0, 2.0]), "i": torch.tensor([0, 0, 1]), "s": torch.tensor([nan, 3.0, 0.5])},
        [],
    ),
    (
        "scatter_reduce_inplace",
        "x.clone().scatter_reduce_(1, i, s, 'sum', include_self=False)",
        {"x": r(2, 3), "i": torch.tensor([[2, 2], [0, 1]]), "s": r(2, 2)},
        ["x", "s"],
    ),
    # lerp
    ("lerp_scalar", "x.lerp(e, 0.3)", {"x": r(3, 4), "e": r(3, 4)}, ["x", "e"]),
    ("lerp_scalar_hi", "T.lerp(x, e, 0.75)", {"x": r(3, 4), "e": r(4)}, ["x", "e"]),
    ("lerp_tensor", "x.lerp(e, w)", {"x": r(2, 3), "e": r(2, 3), "w": torch.tensor([[0.1, 0.5, 0.9], [-0.5, 1.0, 1.5]])}, ["x", "e", "w"]),
    ("lerp_bcast_w", "T.lerp(x, e, w)", {"x": r(2, 3), "e": r(1, 3), "w": torch.rand(2, 1, generator=g)}, ["x", "e", "w"]),
    ("lerp_edges", "x.lerp(e, 0.5)", {"x": edge, "e": edge.flip(0)}, []),
    ("lerp_inplace", "x.clone().lerp_(e, 0.25)", {"x": r(3), "e": r(3)}, ["x", "e"]),
    # Tensor.where, comparison aliases
    ("where_method", "x.where(x > 0, y)", {"x": r(3, 4), "y": r(4)}, ["x", "y"]),
    ("where_method_scalar", "x.where(x > 0, 0.5)", {"x": r(3, 4)}, ["x"]),
    ("less_equal", "x.less_equal(y)", {"x": ri(0, 3, 4), "y": ri(0, 3, 4)}, []),
    ("greater_equal_fn", "T.greater_equal(x, 0.0)", {"x": edge}, []),
    ("not_equal_fn", "T.not_equal(x, y)", {"x": edge, "y": edge.flip(0)}, []),
    ("less_method", "x.less(y)", {"x": r(3), "y": r(3)}, []),
    ("greater_method", "x.greater(0)", {"x": edge}, []),
    # flips, roll, rot90, reversed
    ("fliplr", "x.fliplr()", {"x": r(2, 3, 2)}, ["x"]),
    ("flipud_fn", "T.flipud(x)", {"x": r(3, 2)}, ["x"]),
    ("roll_flat", "x.roll(2)", {"x": r(2, 3)}, ["x"]),
    ("roll_dim", "T.roll(x, -1, 1)", {"x": r(2, 3)}, ["x"]),
    ("roll_multi", "x.roll((1, 5), (0, 1))", {"x": r(3, 4)}, ["x"]),
    ("roll_empty", "x.roll(1, 0)", {"x": r(0, 3)}, []),
    ("rot90_1", "x.rot90()", {"x": r(2, 3)}, ["x"]),
    ("rot90_2", "T.rot90(x, 2, [1, 2])", {"x": r(2, 3, 4)}, ["x"]),
    ("rot90_neg", "x.rot90(-1, [0, 1])", {"x": r(2, 3)}, ["x"]),
    ("rot90_0", "x.rot90(4)", {"x": r(2, 3)}, ["x"]),
    ("reversed", "x.__reversed__()", {"x": r(3, 2)}, ["x"]),
    # einsum
    ("einsum_mm", "T.einsum('ij,jk->ik', a, b)", {"a": r(3, 4), "b": r(4, 5)}, ["a", "b"]),
    ("einsum_bmm", "T.einsum('bij,bjk->bik', a, b)", {"a": r(2, 3, 4), "b": r(2, 4, 2)}, ["a", "b"]),
    ("einsum_implicit", "T.einsum('ij,jk', a, b)", {"a": r(2, 3), "b": r(3, 2)}, ["a", "b"]),
    ("einsum_implicit_order", "T.einsum('ba', a)", {"a": r(2, 3)}, ["a"]),
    ("einsum_list", "T.einsum('i,j->ij', [a, b])", {"a": r(3), "b": r(2)}, ["a", "b"]),
    ("einsum_trace", "T.einsum('ii', a)", {"a": r(3, 3)}, ["a"]),
    ("einsum_diag", "T.einsum('ii->i', a)", {"a": r(3, 3)}, ["a"]),
    ("einsum_diag3", "T.einsum('iji->ij', a)", {"a": r(3, 2, 3)}, ["a"]),
    ("einsum_sum", "T.einsum('ijk->', a)", {"a": r(2, 3, 2)}, ["a"]),
    ("einsum_dot", "T.einsum('i,i->', a, b)", {"a": r(5), "b": r(5)}, ["a", "b"]),
    ("einsum_ellipsis", "T.einsum('...ij,...jk->...ik', a, b)", {"a": r(2, 1, 3, 4), "b": r(3, 4, 2)}, ["a", "b"]),
    ("einsum_ellipsis_sum", "T.einsum('...ij->ij', a)", {"a": r(2, 3, 4)}, ["a"]),
    ("einsum_ellipsis_mid", "T.einsum('i...j->j...i', a)", {"a": r(2, 3, 4, 5)}, ["a"]),
    ("einsum_three", "T.einsum('ij,jk,kl->il', a, b, c)", {"a": r(2, 3), "b": r(3, 4), "c": r(4, 2)}, ["a", "b", "c"]),
    ("einsum_bilinear", "T.einsum('bn,anm,bm->ba', a, b, c)", {"a": r(2, 3), "b": r(4, 3, 5), "c": r(2, 5)}, ["a", "b", "c"]),
    ("einsum_bcast1", "T.einsum('ij,ij->i', a, b)", {"a": r(3, 1), "b": r(3, 4)}, ["a", "b"]),
    ("einsum_outer_batch", "T.einsum('bi,bj->bij', a, b)", {"a": r(2, 3), "b": r(2, 4)}, ["a", "b"]),
    ("einsum_spaces", "T.einsum(' ij , jk -> ki ', a, b)", {"a": r(2, 3), "b": r(3, 2)}, ["a", "b"]),
    ("einsum_sublist", "T.einsum(a, [0, 1], b, [1, 2], [0, 2])", {"a": r(2, 3), "b": r(3, 2)}, ["a", "b"]),
    ("einsum_int", "T.einsum('ij,j->i', a, b)", {"a": ri(-3, 3, 2, 3), "b": ri(-3, 3, 3)}, []),
    ("einsum_empty", "T.einsum('i,i->', a, b)", {"a": r(0), "b": r(0)}, []),
    # meshgrid
    ("meshgrid_ij", "T.meshgrid(a, b, indexing='ij')", {"a": r(3), "b": r(2)}, ["a", "b"]),
    ("meshgrid_xy", "T.meshgrid(a, b, c, indexing='xy')", {"a": r(3), "b": r(2), "c": r(4)}, ["a", "b", "c"]),
    ("meshgrid_list_0d", "T.meshgrid([a, b], indexing='ij')", {"a": torch.tensor(2.0), "b": r(3)}, ["a", "b"]),
    ("meshgrid_one", "T.meshgrid(a, indexing='xy')", {"a": r(3)}, ["a"]),
    # cdist
    ("cdist_p2", "T.cdist(a, b)", {"a": r(4, 3), "b": r(5, 3)}, ["a", "b"]),
    ("cdist_p1", "T.cdist(a, b, p=1.0)", {"a": r(4, 3), "b": r(2, 3)}, ["a", "b"]),
    ("cdist_p3", "T.cdist(a, b, p=3.0)", {"a": r(2, 4, 3), "b": r(2, 2, 3)}, ["a", "b"]),
    ("cdist_p05", "T.cdist(a, b, p=0.5)", {"a": r(3, 2), "b": r(2, 2)}, ["a", "b"]),
    ("cdist_inf", "T.cdist(a, b, p=float('inf'))", {"a": r(3, 4), "b": r(2, 4)}, ["a", "b"]),
    ("cdist_p0", "T.cdist(a, b, p=0.0)", {"a": torch.tensor([[1.0, 2.0], [0.0, 2.0]]), "b": torch.tensor([[1.0, 2.0]])}, []),
    ("cdist_zero_dist", "T.cdist(a, a.detach())", {"a": r(3, 2)}, ["a"]),
    ("cdist_bcast_batch", "T.cdist(a, b)", {"a": r(1, 3, 2), "b": r(2, 4, 2)}, ["a", "b"]),
    ("cdist_f64", "T.cdist(a, b)", {"a": r(3, 2, dtype=torch.float64), "b": r(2, 2, dtype=torch.float64)}, ["a", "b"]),
    # trapezoid
    ("trapz_default", "T.trapezoid(y)", {"y": r(3, 5)}, ["y"]),
    ("trapz_dx", "T.trapezoid(y, dx=0.5, dim=0)", {"y": r(4, 2)}, ["y"]),
    ("trapz_x1d", "T.trapezoid(y, x)", {"y": r(2, 4), "x": torch.tensor([0.0, 0.5, 2.0, 2.5])}, ["y", "x"]),
    ("trapz_xfull", "T.trapezoid(y, x, dim=0)", {"y": r(3, 2), "x": r(3, 2)}, ["y", "x"]),
    ("trapz_int", "T.trapezoid(y)", {"y": torch.tensor([1, 2, 4])}, []),
    ("trapz_one", "T.trapezoid(y)", {"y": r(2, 1)}, ["y"]),
    ("trapz_empty", "T.trapezoid(y)", {"y": r(2, 0)}, []),
    ("trapz_alias", "T.trapz(y, dx=2.0)", {"y": r(4)}, ["y"]),
    # cdist's matrix-product form of p=2: asked for, or by default past 25 rows on a side
    ("cdist_mm_default", "T.cdist(a, b)", {"a": r(30, 8), "b": r(7, 8)}, ["a", "b"]),
    ("cdist_mm_forced", "T.cdist(a, b, compute_mode='use_mm_for_euclid_dist')", {"a": r(2, 4, 3), "b": r(1, 5, 3)}, ["a", "b"]),
    ("cdist_mm_refused", "T.cdist(a, b, compute_mode='donot_use_mm_for_euclid_dist')", {"a": r(30, 3), "b": r(26, 3)}, ["a", "b"]),
]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    tensors: Dict[str, torch.Tensor] = {}
    meta: Dict[str, str] = {}
    for name, expr, inputs, grads in CASES:
        ins = {k: v.clone().requires_grad_(k in grads) for k, v in inputs.items()}
        try:
            res: Any = eval(expr, {"T": torch}, dict(ins))
        except Exception as e:
            raise RuntimeError(f"case {name}: {expr}") from e
        outs = list(res) if isinstance(res, (tuple, list)) else [res]
        loss = None
        for k, o in enumerate(outs):
            tensors[f"{name}.out.{k}"] = o.detach().clone().contiguous()
            if grads:
                w = torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype)
                tensors[f"{name}.w.{k}"] = w
                term = (o * w).sum()
                loss = term if loss is None else loss + term
        if grads:
            assert loss is not None
            try:
                gs = torch.autograd.grad(loss, [ins[k] for k in grads], allow_unused=True)
            except Exception as e:
                raise RuntimeError(f"case {name} (backward): {expr}") from e
            for k, gv in zip(grads, gs):
                tensors[f"{name}.grad.{k}"] = torch.zeros_like(ins[k]) if gv is None else gv.clone().contiguous()
        for k, v in inputs.items():
            tensors[f"{name}.in.{k}"] = v.clone().contiguous()
        meta[name] = json.dumps({"expr": expr, "grad": grads})
    save_file(tensors, os.path.join(OUT, "cases.safetensors"), metadata=meta)
    print(f"wrote {len(CASES)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
