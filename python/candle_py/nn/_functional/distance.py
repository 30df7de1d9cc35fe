"""Distances between vectors: cosine_similarity, pairwise_distance (compositions of
differentiable Tensor ops, as in PyTorch)."""

from __future__ import annotations

from ..._core import ShapeError, Tensor


def _broadcast_pair(x1: Tensor, x2: Tensor, op: str) -> tuple[Tensor, Tensor]:
    try:
        a, b = x1.ndim, x2.ndim
        shape = []
        for i in range(max(a, b)):
            d1 = x1.shape[a - 1 - i] if i < a else 1
            d2 = x2.shape[b - 1 - i] if i < b else 1
            if d1 != d2 and 1 not in (d1, d2):
                raise ValueError
            shape.append(max(d1, d2) if 0 not in (d1, d2) else 0)
    except ValueError:
        raise ShapeError(f"{op}: shapes {list(x1.shape)} and {list(x2.shape)} are not broadcastable") from None
    shape.reverse()
    return x1.broadcast_to(tuple(shape)), x2.broadcast_to(tuple(shape))


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between `x1` and `x2` along `dim` (after broadcasting):
    each is divided by its 2-norm clamped below by `eps`, then the products are summed."""
    a, b = _broadcast_pair(x1, x2, "cosine_similarity")
    if not -max(a.ndim, 1) <= dim < max(a.ndim, 1):
        raise IndexError(f"cosine_similarity: dimension out of range (expected to be in range of [{-a.ndim}, {a.ndim - 1}], but got {dim})")
    # Normalise first, then dot (PyTorch's order: it keeps the products in range).
    na = a.norm(2.0, dim, keepdim=True).clamp(min=eps)
    nb = b.norm(2.0, dim, keepdim=True).clamp(min=eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """`p`-norm of `x1 - x2 + eps` over the last dim (after broadcasting)."""
    if p < 0:
        raise RuntimeError(f"pairwise_distance: p must be non-negative, got {p}")
    a, b = _broadcast_pair(x1, x2, "pairwise_distance")
    if a.ndim == 0:
        return (a - b + eps).abs()
    d = a - b + eps
    return d.norm(float(p), -1, keepdim=keepdim)


__all__ = ["cosine_similarity", "pairwise_distance"]
