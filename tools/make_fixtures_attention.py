"""Make the PyTorch reference fixtures for `F.scaled_dot_product_attention`.

Needs torch; tests/test_attention.py never imports it. Each case writes
tests/fixtures/attention/<case>.safetensors with:
  query, key, value, [attn_mask], output, loss_weight, grad.query, grad.key, grad.value
where loss = (output.float() * loss_weight).sum(), and metadata
{"kind": "attention", "kwargs": JSON of the keyword arguments (is_causal, scale,
enable_gqa), "dtype": the input dtype}.

Run from the repository root:  python tools/make_fixtures_attention.py [case ...]
(only the named cases are written when some are given).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "attention")


def bool_mask(shape: tuple, p: float, g: torch.Generator, dead_row: bool = False) -> torch.Tensor:
    m = torch.rand(shape, generator=g) > p
    if dead_row:
        m[..., 1, :] = False  # a query row that sees no key: torch's CPU kernel gives zeros
    return m


def float_mask(shape: tuple, g: torch.Generator, neg_inf: bool = True) -> torch.Tensor:
    m = torch.randn(shape, generator=g)
    if neg_inf:
        m[torch.rand(shape, generator=g) < 0.25] = float("-inf")
    return m


# (name, q shape, k shape, v shape, mask maker or None, kwargs, dtype)
def cases(g: torch.Generator) -> list[tuple[str, tuple, tuple, tuple, Optional[torch.Tensor], dict[str, Any], torch.dtype]]:
    f32 = torch.float32
    return [
        ("basic_4d", (2, 3, 10, 8), (2, 3, 12, 8), (2, 3, 12, 8), None, {}, f32),
        ("three_d_dv", (3, 10, 8), (3, 7, 8), (3, 7, 6), None, {}, f32),
        ("two_d", (9, 16), (13, 16), (13, 16), None, {}, f32),
        ("multi_block", (1, 2, 150, 32), (1, 2, 300, 32), (1, 2, 300, 24), None, {}, f32),
        ("causal_l_lt_s", (2, 2, 5, 8), (2, 2, 9, 8), (2, 2, 9, 8), None, {"is_causal": True}, f32),
        ("causal_l_gt_s", (2, 2, 9, 8), (2, 2, 5, 8), (2, 2, 5, 8), None, {"is_causal": True}, f32),
        ("causal_multi_block", (1, 2, 200, 16), (1, 2, 300, 16), (1, 2, 300, 16), None, {"is_causal": True}, f32),
        ("bool_mask_ls", (2, 2, 6, 8), (2, 2, 11, 8), (2, 2, 11, 8), bool_mask((6, 11), 0.4, g, dead_row=True), {}, f32),
        ("float_mask_ls", (2, 2, 6, 8), (2, 2, 11, 8), (2, 2, 11, 8), float_mask((6, 11), g), {}, f32),
        ("padding_mask_b11s", (3, 2, 7, 8), (3, 2, 10, 8), (3, 2, 10, 8), bool_mask((3, 1, 1, 10), 0.3, g), {}, f32),
        ("float_mask_1hls", (2, 3, 7, 8), (2, 3, 270, 8), (2, 3, 270, 8), float_mask((1, 3, 7, 270), g), {}, f32),
        ("float_mask_col_bcast", (2, 2, 7, 8), (2, 2, 9, 8), (2, 2, 9, 8), float_mask((2, 1, 7, 1), g, neg_inf=False), {}, f32),
        ("custom_scale", (2, 2, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8), None, {"scale": 0.3}, f32),
        ("gqa", (2, 8, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8), None, {"enable_gqa": True}, f32),
        ("gqa_causal_scale", (1, 6, 9, 8), (1, 3, 9, 8), (1, 3, 9, 8), None, {"enable_gqa": True, "is_causal": True, "scale": 0.5}, f32),
        ("five_d", (2, 2, 3, 5, 8), (2, 2, 3, 7, 8), (2, 2, 3, 7, 8), None, {}, f32),
        ("broadcast_kv_batch", (2, 3, 5, 8), (1, 3, 7, 8), (1, 3, 7, 8), None, {}, f32),
        ("float64", (2, 2, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8), float_mask((6, 9), g), {}, torch.float64),
        ("float16", (2, 2, 6, 16), (2, 2, 9, 16), (2, 2, 9, 16), None, {"is_causal": True}, torch.float16),
        ("bfloat16", (2, 2, 6, 16), (2, 2, 9, 16), (2, 2, 9, 16), bool_mask((2, 1, 6, 9), 0.3, g), {}, torch.bfloat16),
    ]


def decode_cases(g: torch.Generator) -> list[tuple[str, tuple, tuple, tuple, Optional[torch.Tensor], dict[str, Any], torch.dtype]]:
    """A few query rows against many keys: the kernel's dot-product path (up to 4 rows
    per task, as in a decode step) instead of its GEMM tiles. Own generator, so the
    cases above keep their values."""
    f32 = torch.float32
    return [
        ("decode_gqa", (1, 9, 1, 64), (1, 3, 300, 64), (1, 3, 300, 64), None, {"enable_gqa": True}, f32),
        ("decode_rows3_mask", (2, 2, 3, 13), (2, 2, 270, 13), (2, 2, 270, 10), float_mask((2, 1, 3, 270), g), {}, f32),
        ("decode_rows4_bool_causal_f64", (1, 2, 4, 9), (1, 2, 4, 9), (1, 2, 4, 9), None, {"is_causal": True}, torch.float64),
        ("decode_rows2_bool", (2, 4, 2, 16), (2, 2, 40, 16), (2, 2, 40, 16), bool_mask((2, 1, 2, 40), 0.3, g), {"enable_gqa": True}, f32),
        ("decode_rows5_gemm", (1, 2, 5, 16), (1, 2, 33, 16), (1, 2, 33, 16), None, {}, f32),
    ]


def tiled_cases(g: torch.Generator) -> list[tuple[str, tuple, tuple, tuple, Optional[torch.Tensor], dict[str, Any], torch.dtype]]:
    """Float32 with head dims that are multiples of 16: the register-tiled products
    (`Tiles`) of the forward and backward, over key counts that are not multiples of
    8 (the panel transposes' tails), a short panel, masks fused into the score store
    and a fully masked row. Own generator, so the cases above keep their values."""
    f32 = torch.float32
    dead = bool_mask((2, 1, 21, 90), 0.5, g, dead_row=True)
    return [
        ("tiled_causal", (2, 3, 100, 64), (2, 3, 100, 64), (2, 3, 100, 64), None, {"is_causal": True}, f32),
        ("tiled_float_mask_dv48", (2, 2, 70, 32), (2, 2, 133, 32), (2, 2, 133, 48), float_mask((70, 133), g), {}, f32),
        ("tiled_gqa_short_dv80", (1, 4, 37, 16), (1, 2, 37, 16), (1, 2, 37, 80), None, {"enable_gqa": True, "scale": 0.4}, f32),
        ("tiled_bool_mask_dead_row", (2, 2, 21, 16), (2, 2, 90, 16), (2, 2, 90, 16), dead, {}, f32),
    ]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(1234)
    g2 = torch.Generator().manual_seed(99)
    # The decode cases come last and draw their masks from their own generator, so
    # the earlier cases' tensors are what they were.
    g3 = torch.Generator().manual_seed(2026)
    only = set(sys.argv[1:])
    for name, qs, ks, vs, mask, kwargs, dt in cases(g) + decode_cases(g2) + tiled_cases(g3):
        q = torch.randn(qs, generator=g).to(dt).requires_grad_(True)
        k = torch.randn(ks, generator=g).to(dt).requires_grad_(True)
        v = torch.randn(vs, generator=g).to(dt).requires_grad_(True)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(dt)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)
        w = torch.randn(out.shape, generator=g)
        (out.float() * w).sum().backward()
        tensors = {
            "query": q.detach(),
            "key": k.detach(),
            "value": v.detach(),
            "output": out.detach(),
            "loss_weight": w,
            "grad.query": q.grad,
            "grad.key": k.grad,
            "grad.value": v.grad,
        }
        if mask is not None:
            tensors["attn_mask"] = mask
        meta = {"kind": "attention", "kwargs": json.dumps(kwargs), "dtype": str(dt).replace("torch.", "")}
        if only and name not in only:
            continue
        save_file({k2: t.contiguous() for k2, t in tensors.items()}, os.path.join(OUT, f"{name}.safetensors"), metadata=meta)
        print("wrote", name)


if __name__ == "__main__":
    main()
