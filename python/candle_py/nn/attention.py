"""`MultiheadAttention` with PyTorch's parameters (`in_proj_weight`,
`in_proj_bias`, `out_proj.*`, or separate `q/k/v_proj_weight` when kdim/vdim
differ), masks and averaged attention weights."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import ShapeError, Tensor
from . import functional as F
from . import init
from .functional import multi_head_attention_forward
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .parameter import Parameter

__all__ = ["MultiheadAttention", "multi_head_attention_forward"]


class MultiheadAttention(Module):
    """Multi-head attention as `torch.nn.MultiheadAttention`: `embed_dim` split over
    `num_heads`, attention-weight `dropout`, projection `bias`, `add_bias_kv`,
    `add_zero_attn`, key/value sizes `kdim`/`vdim`, and `batch_first` for
    (N, L, E) instead of (L, N, E) inputs. `forward(query, key, value, ...)`
    returns the output and, with `need_weights`, the attention weights (averaged
    over heads unless `average_attn_weights=False`)."""

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
        dt = dtype or _core.get_default_dtype()
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
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
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
        """Attend from `query` to `key`/`value` (L, N, E) (or batch first, or unbatched):
        `key_padding_mask` (N, S) and `attn_mask` (L, S) or (N * heads, L, S) are
        boolean (True = masked) or additive; `is_causal` masks future keys. Returns
        `(output, weights or None)`."""
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(
                "[MultiheadAttention] query, key and value must all be 2-D or 3-D, "
                f"got {list(query.shape)}, {list(key.shape)}, {list(value.shape)}"
            )
        batched_first = self.batch_first and query.ndim == 3
        if batched_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        out, w = F.multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if batched_first:
            out = out.transpose(0, 1)
        return out, w
