"""`MultiheadAttention` with PyTorch's parameters (`in_proj_weight`,
`in_proj_bias`, `out_proj.*`, or separate `q/k/v_proj_weight` when kdim/vdim
differ), masks and averaged attention weights."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from . import functional as F
from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter

__all__ = ["MultiheadAttention", "multi_head_attention_forward"]


def _as_additive(mask: Tensor, dtype: Any) -> Tensor:
    """Bool masks (True = not allowed) become -inf/0; float masks are added as they are."""
    if mask.dtype == _core.bool:
        return _core.where(mask, float("-inf"), 0.0).to(dtype)
    return mask.to(dtype)


class MultiheadAttention(Module):
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"[MultiheadAttention] embed_dim and num_heads must be positive, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads != 0:
            raise ValueError(f"[MultiheadAttention] embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        dt = dtype or _core.float32
        self.in_proj_weight: Optional[Parameter]
        self.q_proj_weight: Optional[Parameter]
        self.k_proj_weight: Optional[Parameter]
        self.v_proj_weight: Optional[Parameter]
        self.in_proj_bias: Optional[Parameter]
        self.bias_k: Optional[Parameter]
        self.bias_v: Optional[Parameter]
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(_core.empty(3 * embed_dim, embed_dim, dtype=dt, device=device))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(_core.empty(embed_dim, embed_dim, dtype=dt, device=device))
            self.k_proj_weight = Parameter(_core.empty(embed_dim, self.kdim, dtype=dt, device=device))
            self.v_proj_weight = Parameter(_core.empty(embed_dim, self.vdim, dtype=dt, device=device))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(_core.empty(3 * embed_dim, dtype=dt, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(_core.empty(1, 1, embed_dim, dtype=dt, device=device))
            self.bias_v = Parameter(_core.empty(1, 1, embed_dim, dtype=dt, device=device))
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
        if self.out_proj.bias is not None:
            init.constant_(self.out_proj.bias, 0.0)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(
                f"[MultiheadAttention] query, key and value must all be 2-D or 3-D, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        batched_first = self.batch_first and query.ndim == 3
        if batched_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        out, w = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal,
        )
        if batched_first:
            out = out.transpose(0, 1)
        return out, w


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
        raise ValueError(f"{name} expected query with embed_dim {embed_dim_to_check}, got {tuple(query.shape)}")
    if e % num_heads != 0:
        raise ValueError(f"{name} embed_dim {e} not divisible by num_heads {num_heads}")
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:e], in_proj_bias[e:2 * e], in_proj_bias[2 * e:]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{name} use_separate_proj_weight needs q_proj_weight, k_proj_weight and v_proj_weight")
        q, k, v = F.linear(query, q_proj_weight, bq), F.linear(key, k_proj_weight, bk), F.linear(value, v_proj_weight, bv)
    else:
        if in_proj_weight is None:
            raise ValueError(f"{name} in_proj_weight is required unless use_separate_proj_weight=True")
        w = in_proj_weight
        q, k, v = F.linear(query, w[:e], bq), F.linear(key, w[e:2 * e], bk), F.linear(value, w[2 * e:], bv)
    if bias_k is not None and bias_v is not None:
        k = _core.cat([k, bias_k.expand(1, bsz, e)], 0)
        v = _core.cat([v, bias_v.expand(1, bsz, e)], 0)
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))
    h = num_heads
    hd = e // h
    q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
    k = static_k if static_k is not None else k.reshape(k.shape[0], bsz * h, hd).transpose(0, 1)
    v = static_v if static_v is not None else v.reshape(v.shape[0], bsz * h, hd).transpose(0, 1)
    if add_zero_attn:
        k = _core.cat([k, _core.zeros(bsz * h, 1, hd, dtype=k.dtype, device=k.device)], 1)
        v = _core.cat([v, _core.zeros(bsz * h, 1, hd, dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = F.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = F.pad(key_padding_mask, (0, 1))
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
            raise ValueError(f"{name} expected key_padding_mask of shape {(bsz, src_len)}, got {tuple(key_padding_mask.shape)}")
        kpm = _as_additive(key_padding_mask, scores.dtype).reshape(bsz, 1, 1, src_len)
        scores = (scores.reshape(bsz, h, tgt_len, src_len) + kpm).reshape(bsz * h, tgt_len, src_len)
    weights = scores.softmax(-1)
    if dropout_p > 0 and training:
        weights = F.dropout(weights, dropout_p, True)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len, bsz, e)
    out = F.linear(out, out_proj_weight, out_proj_bias)
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
