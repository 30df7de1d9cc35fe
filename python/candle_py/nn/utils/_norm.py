"""The norm weight normalization divides by, and the reparametrization itself."""

from __future__ import annotations

from typing import Optional

from ..._core import Tensor


def norm_except_dim(v: Tensor, dim: Optional[int]) -> Tensor:
    """2-norm over every dim but `dim`, kept broadcastable (dim None or -1: one norm)."""
    if dim is None or dim == -1:
        return v.norm()
    d = dim % v.ndim
    dims = tuple(i for i in range(v.ndim) if i != d)
    if not dims:
        return v.abs()
    return v.norm(2.0, dims, keepdim=True)


def compose(g: Tensor, v: Tensor, dim: Optional[int]) -> Tensor:
    """`w = g * v / ||v||`, differentiable in g and v."""
    return v * (g / norm_except_dim(v, dim))
