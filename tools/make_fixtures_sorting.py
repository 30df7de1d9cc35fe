"""Make the PyTorch reference fixtures for sorting, selection, scans and the NaN rules
of the reductions (`sort`, `argsort`, `msort`, `topk`, `kthvalue`, `median`, `mode`,
`nonzero`, `argwhere`, `where(cond)`, `unique`, `unique_consecutive`, `bincount`,
`cumsum`, `cumprod`, `logsumexp`, `logcumsumexp`, `max`/`min`/`amax`/`amin`/`argmax`/
`argmin`/`maximum`/`minimum` with NaN, `norm` for every `p`).

Needs torch; tests/test_sorting.py never imports it. Each case writes
tests/fixtures/sorting/<case>.safetensors with:
  input, [tensor arguments by name], out (one tensor result) or out.0, out.1, ... (a
  tuple result), and for differentiable cases loss_weight and grad.input, where
  loss = (first output * loss_weight).sum();
metadata {"op": the torch function name, "args": JSON of the positional arguments after
the tensors, "kwargs": JSON of the keyword arguments, "tensor_args": JSON list of the
extra positional tensors, "tensor_kwargs": JSON list of keyword tensors, "indices":
"exact" or "check" (ties whose order torch leaves open: the test checks that the
indices select the values instead)}.

Run from the repository root:  python tools/make_fixtures_sorting.py
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "sorting")
nan, inf = float("nan"), float("inf")

g = torch.Generator().manual_seed(1234)


def rn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(dtype)


def ri(lo: int, hi: int, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def with_nan(t: torch.Tensor) -> torch.Tensor:
    t = t.clone()
    flat = t.view(-1)
    flat[1] = nan
    flat[flat.numel() // 2] = nan
    flat[-2] = inf
    flat[3] = -inf
    return t


def cases() -> list[dict[str, Any]]:
    f16, bf16, f64, i32, u8 = torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.uint8
    c: list[dict[str, Any]] = []

    def add(
        name: str,
        op: str,
        x: torch.Tensor,
        *args: Any,
        grad: bool = False,
        indices: str = "exact",
        tensors: Any = None,
        tkw: Any = None,
        **kw: Any,
    ) -> None:
        c.append(
            dict(name=name, op=op, input=x, args=list(args), kwargs=kw, grad=grad, indices=indices, tensors=tensors or {}, tkw=tkw or {})
        )

    # sort / argsort / msort
    add("sort_f32", "sort", rn(4, 7), grad=True)
    add("sort_dim0_desc", "sort", rn(5, 3), 0, True, grad=True)
    add("sort_nan_inf", "sort", with_nan(rn(3, 8)), grad=True)
    add("sort_nan_desc", "sort", with_nan(rn(3, 8)), descending=True, grad=True)
    add("sort_neg_dim_3d", "sort", rn(2, 5, 3), -2, grad=True)
    add("sort_stable_ties_int", "sort", ri(0, 3, 3, 10), stable=True)
    add("sort_stable_ties_desc", "sort", ri(0, 3, 3, 10).float(), stable=True, descending=True, grad=True)
    add("sort_f64", "sort", rn(3, 6, dtype=f64), grad=True)
    add("sort_f16", "sort", rn(3, 6, dtype=f16), 1)
    add("sort_bf16", "sort", rn(3, 6, dtype=bf16))
    add("sort_int32", "sort", ri(-50, 50, 4, 6, dtype=i32), descending=True)
    add("sort_uint8", "sort", ri(0, 255, 20, dtype=u8), stable=True)
    add("sort_bool", "sort", ri(0, 2, 9).bool(), stable=True)
    add("sort_empty", "sort", torch.zeros(0, 3), 0)
    add("sort_0d", "sort", torch.tensor(2.5), grad=True)
    add("argsort_nan", "argsort", with_nan(rn(3, 6)))
    add("argsort_stable_desc", "argsort", ri(0, 4, 2, 12), dim=1, descending=True, stable=True)
    add("msort_f32", "msort", rn(5, 3), grad=True)
    # topk
    add("topk_f32", "topk", rn(4, 9), 3, grad=True)
    add("topk_smallest_dim0", "topk", rn(6, 4), 2, 0, False, grad=True)
    add("topk_nan", "topk", with_nan(rn(3, 8)), 3, grad=True)
    add("topk_nan_smallest", "topk", with_nan(rn(3, 8)), 3, largest=False, grad=True)
    add("topk_k0", "topk", rn(3, 5), 0)
    add("topk_full", "topk", rn(3, 5), 5, grad=True)
    add("topk_int", "topk", ri(-9, 9, 3, 7), 2, indices="check")
    add("topk_f16", "topk", rn(2, 6, dtype=f16), 2)
    add("topk_0d", "topk", torch.tensor(3.0), 1, grad=True)
    add("topk_3d_neg_dim", "topk", rn(2, 6, 3), 4, -2, grad=True)
    # kthvalue / median / mode
    add("kthvalue_f32", "kthvalue", rn(4, 7), 3, grad=True)
    add("kthvalue_keepdim_dim0", "kthvalue", rn(5, 3), 2, 0, True, grad=True)
    add("kthvalue_nan", "kthvalue", torch.tensor([[1.0, nan, 2.0, nan], [4.0, 3.0, 2.0, 1.0]]), 3, grad=True)
    add("kthvalue_int", "kthvalue", torch.tensor([[5, 1, 9, 3], [2, 8, 6, 4]]), 2)
    add("kthvalue_0d", "kthvalue", torch.tensor(1.5), 1, grad=True)
    add("median_all_even", "median", rn(4, 5), grad=True)
    add("median_all_nan", "median", torch.tensor([[1.0, nan], [3.0, 2.0]]), grad=True)
    add("median_all_int", "median", torch.tensor([4, 1, 3, 2]))
    add("median_empty", "median", torch.zeros(0))
    add("median_dim", "median", rn(4, 6), 1, grad=True)
    add("median_dim_keepdim_odd", "median", rn(5, 3), 0, True, grad=True)
    add("median_dim_nan", "median", torch.tensor([[1.0, nan, 2.0, nan], [3.0, 1.0, 2.0, 0.0]]), 1, grad=True)
    add("median_dim_int", "median", torch.tensor([[5, 1, 9, 3], [2, 8, 6, 4]]), -1)
    add("median_dim_empty_rows", "median", torch.zeros(0, 3), 1)
    add("median_0d", "median", torch.tensor(4.0), 0, grad=True)
    add("mode_int", "mode", torch.tensor([[1, 2, 2, 3, 1, 5], [4, 4, 3, 3, 9, 0]]))
    add("mode_float_nan", "mode", torch.tensor([[1.0, nan, nan, 2.0], [2.0, 2.0, 1.0, 7.0]]), grad=True)
    add("mode_dim0_keepdim", "mode", ri(0, 3, 7, 3), 0, True)
    # nonzero / argwhere / where(cond)
    add("nonzero_f32", "nonzero", torch.tensor([[0.0, 1.5, nan], [0.0, -0.0, 2.0]]))
    add("nonzero_bool_3d", "nonzero", ri(0, 2, 2, 3, 4).bool())
    add("nonzero_tuple", "nonzero", ri(0, 3, 3, 4), as_tuple=True)
    add("nonzero_0d", "nonzero", torch.tensor(5))
    add("nonzero_0d_zero", "nonzero", torch.tensor(0.0))
    add("nonzero_0d_tuple", "nonzero", torch.tensor(5), as_tuple=True)
    add("nonzero_empty", "nonzero", torch.zeros(0, 4))
    add("argwhere_int", "argwhere", ri(0, 2, 3, 5))
    add("where_cond", "where", ri(0, 2, 3, 4).bool())
    # unique / unique_consecutive / bincount
    add("unique_int", "unique", ri(0, 6, 20), return_inverse=True, return_counts=True)
    add("unique_nan", "unique", torch.tensor([3.0, nan, 1.0, nan, 3.0]), return_counts=True)
    add("unique_2d_inverse", "unique", ri(0, 4, 3, 4), return_inverse=True)
    add("unique_bool", "unique", torch.tensor([True, False, True]))
    add("unique_dim0", "unique", torch.tensor([[1, 2], [0, 5], [1, 2], [0, 1]]), dim=0, return_inverse=True, return_counts=True)
    add("unique_dim1", "unique", torch.tensor([[1.0, 0.0, 1.0], [2.0, 5.0, 2.0]]), dim=1, return_inverse=True, return_counts=True)
    add("unique_0d", "unique", torch.tensor(7), return_inverse=True)
    add("unique_empty", "unique", torch.zeros(0), return_counts=True)
    add("unique_consec", "unique_consecutive", torch.tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True, return_counts=True)
    add("unique_consec_dim", "unique_consecutive", torch.tensor([[1, 1, 2], [0, 0, 3]]), dim=1, return_counts=True)
    add("bincount_plain", "bincount", ri(0, 7, 30))
    add("bincount_w32", "bincount", torch.tensor([0, 2, 2, 5]), tkw={"weights": torch.tensor([0.5, 1.0, 2.0, -1.0])})
    add("bincount_w64", "bincount", torch.tensor([1, 1, 3]), tkw={"weights": torch.tensor([0.5, 1.0, 2.0], dtype=f64)})
    add("bincount_wint", "bincount", torch.tensor([1, 1, 3]), tkw={"weights": torch.tensor([2, 3, 4])})
    add("bincount_minlength", "bincount", torch.tensor([1, 2], dtype=u8), minlength=6)
    add("bincount_empty", "bincount", torch.zeros(0, dtype=torch.int64), minlength=3)
    # scans
    add("cumsum_nan", "cumsum", torch.tensor([1.0, nan, 3.0, 4.0]), 0, grad=True)
    add("cumsum_f32_dim0", "cumsum", rn(5, 4), 0, grad=True)
    add("cumsum_int", "cumsum", ri(-100, 100, 3, 6), 1)
    add("cumsum_uint8", "cumsum", ri(0, 255, 10, dtype=u8), 0)
    add("cumsum_f16", "cumsum", rn(3, 8, dtype=f16), -1)
    add("cumprod_f32", "cumprod", rn(3, 6), 1, grad=True)
    add("cumprod_zeros", "cumprod", torch.tensor([[2.0, 0.0, 3.0, 4.0], [0.0, 1.5, 0.0, 2.0], [1.0, 2.0, 3.0, 0.0]]), 1, grad=True)
    add("cumprod_dim0", "cumprod", rn(4, 3, dtype=f64), 0, grad=True)
    add("cumprod_int32", "cumprod", ri(-3, 4, 2, 6, dtype=i32), 1)
    add("cumprod_nan", "cumprod", torch.tensor([2.0, nan, 3.0]), 0)
    add("cumprod_0d", "cumprod", torch.tensor(3.0), 0, grad=True)
    add("logsumexp_f32", "logsumexp", rn(4, 6), 1, grad=True)
    add("logsumexp_dims_keepdim", "logsumexp", rn(2, 3, 4) * 30, (0, 2), True, grad=True)
    add("logsumexp_inf", "logsumexp", torch.tensor([[inf, 1.0], [-inf, -inf], [inf, -inf], [nan, 1.0], [1e30, 1e30]]), 1)
    add("logsumexp_int", "logsumexp", torch.tensor([[1, 2], [3, 4]]), 0)
    add("logsumexp_0d", "logsumexp", torch.tensor(2.0), 0, grad=True)
    add("logsumexp_empty_dim", "logsumexp", torch.zeros(2, 0), 1)
    add("logcumsumexp_f32", "logcumsumexp", rn(3, 7) * 10, 1, grad=True)
    add("logcumsumexp_neg_inf", "logcumsumexp", torch.tensor([-inf, 0.0, -inf, 2.0]), 0)
    # NaN rules of the reductions
    xn = torch.tensor([[3.0, nan, 1.0, nan], [2.0, 5.0, 5.0, 0.0], [-1.0, -1.0, -2.0, -0.5]])
    add("max_dim_nan", "max", xn, 1, grad=True)
    add("min_dim_nan", "min", xn, 1, True, grad=True)
    add("max_all_nan", "max", xn, grad=True)
    add("min_all_nan_free", "min", xn[1:], grad=True)
    add("argmax_nan", "argmax", xn, 1)
    add("argmin_nan_all", "argmin", xn)
    add("argmax_ties", "argmax", torch.tensor([[1, 3, 3], [2, 2, 0]]), 1)
    add("amax_nan", "amax", xn, 1)
    add("amin_nan_dims", "amin", with_nan(rn(2, 3, 4)), (0, 2))
    add("amax_no_nan_grad", "amax", xn[1:], 1, grad=True)
    add("max_dim_f16_nan", "max", xn.half(), 1)
    add(
        "maximum_nan",
        "maximum",
        torch.tensor([[1.0, nan, 3.0], [nan, nan, -1.0]]),
        tensors={"other": torch.tensor([nan, 2.0, 0.0])},
        grad=True,
    )
    add(
        "minimum_nan",
        "minimum",
        torch.tensor([[1.0, nan, 3.0], [nan, nan, -1.0]]),
        tensors={"other": torch.tensor([nan, 2.0, 0.0])},
        grad=True,
    )
    # norm for every p
    xv = torch.tensor([[3.0, -4.0, 0.0, 4.0], [1.0, 0.5, -2.0, 0.0]])
    for p, tag in [
        (inf, "inf"),
        (-inf, "neg_inf"),
        (0.0, "zero"),
        (1.0, "one"),
        (2.0, "two"),
        (0.5, "half"),
        (3.0, "three"),
        (-1.5, "neg"),
    ]:
        # |x|^p with p < 0 at x == 0 has no finite gradient; p = 0 has none at all (x.grad stays None)
        grad = tag not in ("neg", "zero")
        add(f"norm_p_{tag}", "norm", xv, p, grad=grad)
        add(f"norm_p_{tag}_dim0", "norm", xv, p, 0, grad=grad and tag != "half")
        add(f"norm_p_{tag}_dim1_keepdim", "norm", xv, p, 1, True, grad=grad and tag != "half")
    return c


def as_list(r: Any) -> list[torch.Tensor]:
    return [r] if isinstance(r, torch.Tensor) else list(r)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for case in cases():
        x = case["input"]
        if case["grad"]:
            x = x.detach().clone().requires_grad_(True)
        tensors = case["tensors"]
        targs = [t.detach().clone() for t in tensors.values()]
        tkw = dict(case["tkw"])
        fn = getattr(torch, case["op"])
        r = fn(x, *targs, *case["args"], **tkw, **case["kwargs"])
        outs = as_list(r)
        data: dict[str, torch.Tensor] = {"input": case["input"].contiguous()}
        for k, v in {**tensors, **tkw}.items():
            data[k] = v.contiguous()
        if isinstance(r, torch.Tensor):
            data["out"] = r.detach().contiguous()
        else:
            for i, o in enumerate(outs):
                data[f"out.{i}"] = o.detach().contiguous()
        if case["grad"]:
            w = torch.randn(outs[0].shape, generator=g).to(outs[0].dtype)
            (outs[0] * w).sum().backward()
            data["loss_weight"] = w
            assert x.grad is not None, case["name"]
            data["grad.input"] = x.grad
        meta = {
            "op": case["op"],
            "args": json.dumps(case["args"]),
            "kwargs": json.dumps(case["kwargs"]),
            "tensor_args": json.dumps(list(tensors)),
            "tensor_kwargs": json.dumps(list(tkw)),
            "indices": case["indices"],
            "tuple": json.dumps(not isinstance(r, torch.Tensor)),
        }
        save_file(data, os.path.join(OUT, case["name"] + ".safetensors"), metadata=meta)
    print(f"wrote {len(cases())} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
