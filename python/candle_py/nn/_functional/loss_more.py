"""More of PyTorch's losses, each composed from differentiable Tensor ops as
torch.nn.functional composes them (so gradients come from the ops' own backward):
huber, soft margin, margin ranking, hinge/cosine embedding, triplet margin,
Poisson and Gaussian NLL, multi-label soft margin, multi margin, multi-label margin."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Union

from ... import _core
from ..._core import ShapeError, Tensor
from .distance import pairwise_distance
from .loss import _legacy


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction")


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{op}: target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})")


def _zeros(x: Tensor) -> Tensor:
    return _core.zeros_like(x)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0, weight: Optional[Tensor] = None) -> Tensor:
    """`0.5 * d**2` where `|d| < delta`, `delta * (|d| - 0.5 * delta)` elsewhere
    (`d = input - target`), optionally weighted, reduced by `reduction`."""
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta, got {delta}")
    _same_shape(input, target, "huber_loss")
    d = input - target
    a = d.abs()
    loss = _core.where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "huber_loss")


def soft_margin_loss(
    input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None, reduction: str = "mean"
) -> Tensor:
    """Two-class logistic loss `log(1 + exp(-target * input))` with targets in {1, -1}."""
    _same_shape(input, target, "soft_margin_loss")
    # PyTorch's formula as written: exp overflows to inf for large margins
    # violations (|x| > 88 in float32), and so does PyTorch's loss.
    loss = (-target * input).exp().log1p()
    return _reduce(loss, _legacy(size_average, reduce, reduction), "soft_margin_loss")


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`max(0, -target * (input1 - input2) + margin)` with targets in {1, -1}."""
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)} "
        )
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "margin_ranking_loss")


def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`input` where `target == 1`, `max(0, margin - input)` where `target == -1`
    (other target values get both terms, as in PyTorch)."""
    margin_term = _core.where(target != 1, (margin - input).clamp(min=0), _zeros(input))
    self_term = _core.where(target != -1, input, _zeros(input))
    return _reduce(margin_term + self_term, _legacy(size_average, reduce, reduction), "hinge_embedding_loss")


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`1 - cos(input1, input2)` where `target == 1`, `max(0, cos - margin)` where
    `target == -1`; inputs (N, D) with targets (N,), or (D,) with a 0-d target."""
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise ShapeError(
            f"cosine_embedding_loss: expected 1-D or 2-D inputs of the same shape, got {list(input1.shape)} and {list(input2.shape)}"
        )
    if target.ndim != input1.ndim - 1:
        raise ShapeError(f"cosine_embedding_loss: {input1.ndim}D target tensor expects {input1.ndim - 1}D target, got {list(target.shape)}")
    eps = 1e-12  # PyTorch's EPSILON, added to both squared magnitudes
    prod = (input1 * input2).sum(-1)
    m1 = (input1 * input1).sum(-1) + eps
    m2 = (input2 * input2).sum(-1) + eps
    cos = prod / (m1 * m2).sqrt()
    zeros = _zeros(cos)
    loss = _core.where(target == 1, 1 - cos, zeros) + _core.where(target == -1, (cos - margin).clamp(min=0), zeros)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "cosine_embedding_loss")


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`max(d(a, p) - d(a, n) + margin, 0)` with `d` the `p`-norm pairwise distance;
    with `swap`, `d(a, n)` is replaced by `min(d(a, n), d(p, n))`."""
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: "
            f"anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs"
        )
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    loss = (d_pos - d_neg + margin).clamp(min=0)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "triplet_margin_loss")


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: Optional[bool] = None,
    eps: float = 1e-8,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Poisson negative log-likelihood: `exp(input) - target * input` with
    `log_input`, else `input - target * log(input + eps)`; `full` adds Stirling's
    approximation `target * log(target) - target + 0.5 * log(2 pi target)` where `target > 1`."""
    red = _legacy(size_average, reduce, reduction)
    if red not in ("none", "mean", "sum"):
        raise ValueError(f"poisson_nll_loss: {red!r} is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        safe = _core.where(target > 1, target, _core.ones_like(target))
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _core.where(target > 1, stirling, _zeros(stirling))
    return _reduce(loss, red, "poisson_nll_loss")


def gaussian_nll_loss(
    input: Tensor, target: Tensor, var: Union[Tensor, float], full: bool = False, eps: float = 1e-6, reduction: str = "mean"
) -> Tensor:
    """Gaussian negative log-likelihood `0.5 * (log(var) + (input - target)**2 / var)`
    (plus `0.5 * log(2 pi)` with `full`); `var` is clamped below by `eps` for the
    value only (its gradient passes unchanged, as in PyTorch). `var` may have the
    input's shape, lack its last dim, or have size 1 there (one variance per sample)."""
    if not isinstance(var, Tensor):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = _core.full_like(input, float(var))
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass
        else:
            raise ValueError(f"gaussian_nll_loss: var is of incorrect size {list(var.shape)} for input {list(input.shape)}")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # The clamp changes the value only: PyTorch clamps a detached clone in place.
    v = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (v.log() + (input - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Per-class logistic loss `-(y log sigmoid(x) + (1 - y) log sigmoid(-x))`,
    optionally weighted per class, averaged over the classes (last dim), then reduced."""
    red = _legacy(size_average, reduce, reduction)
    loss = -(target * _core.logsigmoid(input) + (1 - target) * _core.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    c = input.shape[-1] if input.ndim else 1
    loss = loss.sum(input.ndim - 1) / c if input.ndim else loss
    return _reduce(loss, red, "multilabel_soft_margin_loss")


def _class_targets(input: Tensor, target: Tensor, op: str) -> tuple[Tensor, Tensor, bool]:
    """(N, C) input and (N,) integer target; a 1-D input is one sample."""
    if input.ndim not in (1, 2) or input.numel() == 0 and input.ndim == 2 and input.shape[1] == 0:
        raise ShapeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: {list(input.shape)}")
    single = input.ndim == 1
    x = input.unsqueeze(0) if single else input
    return x, target, single


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss: for each sample, the sum over classes `i != y` of
    `max(0, margin - x[y] + x[i]) ** p` (`p` 1 or 2), times `weight[y]`, divided by C."""
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    red = _legacy(size_average, reduce, reduction)
    x, t, single = _class_targets(input, target, "multi_margin_loss")
    n, c = x.shape
    t = t.reshape(-1)
    if t.shape[0] != n:
        raise ShapeError(f"multi_margin_loss: inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    if n and (bool((t < 0).any()) or bool((t >= c).any())):
        raise IndexError(f"multi_margin_loss: target out of range for {c} classes")
    t = t.to(_core.int64)
    xy = x.gather(1, t.unsqueeze(1))
    z = (x - xy + margin).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1)
    is_y = _core.arange(c, device=x.device).unsqueeze(0) == t.unsqueeze(1)
    loss = _core.where(is_y, _zeros(z), z).sum(1) / c
    if single:
        loss = loss.squeeze(0)
    return _reduce(loss, red, "multi_margin_loss")


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None, reduction: str = "mean"
) -> Tensor:
    """Multi-label hinge loss: `target` holds each sample's class indices, ended by
    the first -1; the loss sums `max(0, 1 - (x[j] - x[i]))` over target classes `j`
    and non-target classes `i`, divided by C."""
    red = _legacy(size_average, reduce, reduction)
    x, _, single = _class_targets(input, target, "multilabel_margin_loss")
    t = target.unsqueeze(0) if single else target
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"multilabel_margin_loss: inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    n, c = x.shape
    if n and (bool((t < -1).any()) or bool((t >= c).any())):
        raise IndexError(f"multilabel_margin_loss: target out of range for {c} classes")
    t = t.to(_core.int64)
    # The targets before the first -1 count; the rest is padding.
    valid = (t == -1).to(_core.int64).cumsum(1) == 0
    idx = _core.where(valid, t, _core.zeros_like(t))
    validf = valid.to(x.dtype)
    is_target = _core.zeros_like(x).scatter_add(1, idx, validf) > 0
    xj = x.gather(1, idx)  # (N, C): the target classes' scores, padding masked below
    hinge = (1 - xj.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # (N, j, i)
    keep = validf.unsqueeze(2) * (~is_target).to(x.dtype).unsqueeze(1)
    loss = (hinge * keep).sum((1, 2)) / c
    if single:
        loss = loss.squeeze(0)
    return _reduce(loss, red, "multilabel_margin_loss")


__all__ = [
    "huber_loss", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "multilabel_margin_loss", "ctc_loss",
]  # fmt: skip


def _lengths(v: Union[Tensor, Sequence[int], int], what: str) -> List[int]:
    if isinstance(v, Tensor):
        if v.dtype.is_floating_point:
            raise TypeError(f"ctc_loss: {what} must be integers, got {v.dtype}")
        return [int(x) for x in v.reshape(-1).tolist()]
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v]


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Union[Tensor, Sequence[int]],
    target_lengths: Union[Tensor, Sequence[int]],
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """Connectionist temporal classification loss from log-probabilities (T, N, C)
    (or unbatched (T, C)): minus the log of the total probability of every alignment
    of each target (class indices, padded (N, S) or concatenated 1-D) to the
    `input_lengths` frames, blanks between. "mean" divides each loss by its target
    length, then averages; `zero_infinity` turns impossible alignments' infinite
    losses (and their gradients) into 0. The alpha-beta recursion is one Rust kernel
    (`_core._ctc_loss`) with its backward."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.ndim != 3:
        raise ShapeError(f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), got {list(log_probs.shape)}")
    n = lp.shape[1]
    in_lens = _lengths(input_lengths, "input_lengths")
    tg_lens = _lengths(target_lengths, "target_lengths")
    if len(in_lens) != n or len(tg_lens) != n:
        raise RuntimeError(
            f"ctc_loss: expected input_lengths and target_lengths of size {n} (the batch), got {len(in_lens)} and {len(tg_lens)}"
        )
    if any(v < 0 for v in tg_lens):
        raise RuntimeError(f"ctc_loss: target_lengths must be non-negative, got {tg_lens}")
    if targets.dtype.is_floating_point:
        raise TypeError(f"ctc_loss: targets must be integer class indices, got {targets.dtype}")
    tg = targets.unsqueeze(0) if unbatched and targets.ndim == 1 else targets
    flat = [int(x) for x in tg.reshape(-1).tolist()]
    rows: List[List[int]] = []
    if tg.ndim == 2:
        s = tg.shape[1]
        for i, length in enumerate(tg_lens):
            if length > s:
                raise RuntimeError(
                    f"Expected tensor to have size at least {length} at dimension 1, but got size {s} for argument #2 'targets'"
                )
            rows.append(flat[i * s : i * s + length])
    elif tg.ndim == 1:
        if sum(tg_lens) > len(flat):
            raise RuntimeError(f"ctc_loss: targets has {len(flat)} labels, fewer than the sum of target_lengths ({sum(tg_lens)})")
        pos = 0
        for length in tg_lens:
            rows.append(flat[pos : pos + length])
            pos += length
    else:
        raise ShapeError(f"ctc_loss: expected targets of shape (N, S) or (sum(target_lengths),), got {list(targets.shape)}")
    loss = _core._ctc_loss(lp, rows, in_lens, int(blank), bool(zero_infinity))
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    denom = _core.tensor([max(v, 1) for v in tg_lens], dtype=loss.dtype, device=loss.device)
    return (loss / denom).mean()
