"""Attention: scaled_dot_product_attention (a fused Rust kernel) and multi_head_attention_forward."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from ... import _autocast, _core
from ..._core import ShapeError, Tensor
from .common import _check_tensor
from .linear import dropout, linear
from .vision import pad


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """`softmax(Q K^T * scale + mask) V` over (..., L, D) x (..., S, D) x (..., S, Dv), as PyTorch.

    One Rust op: a fused CPU kernel (online softmax over key blocks, never the
    L x S matrix), PyTorch's math backend from device ops elsewhere; differentiable
    in query, key and value. `attn_mask` is boolean (True takes
    part) or additive float, broadcast to (..., L, S); `is_causal` is the top-left
    aligned lower-triangular mask; `enable_gqa` lets Hq be a multiple of the kv heads.
    Rows with every key masked give zeros (as torch's CPU kernel).
    """
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, f"{op} ({name})")
    if attn_mask is not None:
        _check_tensor(attn_mask, f"{op} (attn_mask)")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"{op}: dropout_p must be a float, got {type(dropout_p).__name__}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")
    # On PyTorch's autocast lower-precision list (a float mask is cast along; bool masks are not eligible).
    query, key, value, attn_mask = _autocast.lower(query, key, value, attn_mask)
    return _core._sdpa(
        query, key, value, attn_mask, float(dropout_p), bool(is_causal), None if scale is None else float(scale), bool(enable_gqa)
    )


def _as_additive(mask: Tensor, dtype: Any) -> Tensor:
    """Bool masks (True = not allowed) become -inf/0; float masks are added as they are."""
    if mask.dtype == _core.bool:
        return _core.where(mask, float("-inf"), 0.0).to(dtype)
    return mask.to(dtype)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Optional[Tensor],
    in_proj_bias: Optional[Tensor],
    bias_k: Optional[Tensor],
    bias_v: Optional[Tensor],
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Optional[Tensor],
    training: bool = True,
    key_padding_mask: Optional[Tensor] = None,
    need_weights: bool = True,
    attn_mask: Optional[Tensor] = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Optional[Tensor] = None,
    k_proj_weight: Optional[Tensor] = None,
    v_proj_weight: Optional[Tensor] = None,
    static_k: Optional[Tensor] = None,
    static_v: Optional[Tensor] = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> Tuple[Tensor, Optional[Tensor]]:
    """PyTorch's `F.multi_head_attention_forward`: inputs (L, N, E) (or unbatched
    (L, E)); returns the output and the (head-averaged) attention weights."""
    name = "[multi_head_attention_forward]"
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, e = query.shape
    if e != embed_dim_to_check:
        raise ShapeError(f"{name} expected query with embed_dim {embed_dim_to_check}, got {list(query.shape)}")
    if e % num_heads != 0:
        raise ValueError(f"{name} embed_dim {e} not divisible by num_heads {num_heads}")
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:e], in_proj_bias[e : 2 * e], in_proj_bias[2 * e :]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{name} use_separate_proj_weight needs q_proj_weight, k_proj_weight and v_proj_weight")
        q, k, v = linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk), linear(value, v_proj_weight, bv)
    else:
        if in_proj_weight is None:
            raise ValueError(f"{name} in_proj_weight is required unless use_separate_proj_weight=True")
        w = in_proj_weight
        q, k, v = linear(query, w[:e], bq), linear(key, w[e : 2 * e], bk), linear(value, w[2 * e :], bv)
    if bias_k is not None and bias_v is not None:
        k = _core.cat([k, bias_k.expand(1, bsz, e)], 0)
        v = _core.cat([v, bias_v.expand(1, bsz, e)], 0)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    h = num_heads
    hd = e // h
    q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
    k = static_k if static_k is not None else k.reshape(k.shape[0], bsz * h, hd).transpose(0, 1)
    v = static_v if static_v is not None else v.reshape(v.shape[0], bsz * h, hd).transpose(0, 1)
    if add_zero_attn:
        k = _core.cat([k, _core.zeros(bsz * h, 1, hd, dtype=k.dtype, device=k.device)], 1)
        v = _core.cat([v, _core.zeros(bsz * h, 1, hd, dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    scores = (q * (1.0 / math.sqrt(hd))) @ k.transpose(1, 2)  # (B*H, L, S)
    if is_causal and attn_mask is None:
        attn_mask = _core.ones(tgt_len, src_len, dtype=_core.bool, device=scores.device).triu(1)
    if attn_mask is not None:
        m = _as_additive(attn_mask, scores.dtype)
        if m.ndim == 2:
            m = m.unsqueeze(0)
        scores = scores + m
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(f"{name} expected key_padding_mask of shape {[bsz, src_len]}, got {list(key_padding_mask.shape)}")
        kpm = _as_additive(key_padding_mask, scores.dtype).reshape(bsz, 1, 1, src_len)
        scores = (scores.reshape(bsz, h, tgt_len, src_len) + kpm).reshape(bsz * h, tgt_len, src_len)
    weights = scores.softmax(-1)
    if dropout_p > 0 and training:
        weights = dropout(weights, dropout_p, True)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len, bsz, e)
    out = linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    wts = weights.reshape(bsz, h, tgt_len, src_len)
    if average_attn_weights:
        wts = wts.mean(1)
    if unbatched:
        wts = wts.squeeze(0)
    return out, wts


def rotary_embedding(input: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False) -> Tensor:
    """Rotary position embedding (RoPE) of `input` (B, H, T, D), D even: pair `i` of
    position `t` is rotated by the angle whose cosine and sine are `cos[t, i]` and
    `sin[t, i]` (tables of shape (T, D/2)), `(a, b) -> (a cos - b sin, a sin + b cos)`.

    The pairs are the two halves of each head (`(i, i + D/2)`, Hugging Face's
    `rotate_half` layout) or, when `interleaved`, adjacent elements (`(2i, 2i + 1)`,
    the layout of GGUF Llama checkpoints, whose Q/K rows llama.cpp permutes). One Rust
    op (Candle's kernels); differentiable in all three inputs; the result has
    `input`'s dtype. (Not in PyTorch; MLX's `fast.rope`.)
    """
    op = "rotary_embedding"
    for name, t in (("input", input), ("cos", cos), ("sin", sin)):
        _check_tensor(t, f"{op} ({name})")
    if not isinstance(interleaved, bool):
        raise TypeError(f"{op}: interleaved must be a bool, got {type(interleaved).__name__}")
    return _core._rope(input, cos, sin, interleaved)
