"""Loss functions, with PyTorch's reductions and legacy `size_average` / `reduce`."""

from __future__ import annotations

from typing import Optional

from ... import _core
from ..._core import ShapeError, Tensor


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _legacy(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{op}: target size {list(target.shape)} must be the same as input size {list(input.shape)}")


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    weight: Optional[Tensor] = None,
) -> Tensor:
    """Squared error `(input - target) ** 2`, optionally weighted, reduced by
    `reduction` ("mean", "sum" or "none"; `size_average`/`reduce` are the legacy forms)."""
    _same_shape(input, target, "mse_loss")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "mse_loss")


def l1_loss(
    input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None, reduction: str = "mean"
) -> Tensor:
    """Absolute error `|input - target|`, reduced by `reduction` ("mean", "sum" or "none")."""
    _same_shape(input, target, "l1_loss")
    return _reduce((input - target).abs(), _legacy(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """Huber-like loss: `0.5 * d**2 / beta` where `|d| < beta`, `|d| - 0.5 * beta`
    elsewhere (`d = input - target`), reduced by `reduction`."""
    _same_shape(input, target, "smooth_l1_loss")
    d = (input - target).abs()
    if beta == 0.0:
        loss = d
    else:
        loss = _core.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "smooth_l1_loss")


def _class_dim_last(x: Tensor) -> Tensor:
    """(N, C, d1, ...) -> (N * d1 * ..., C); (C,) -> (1, C); (N, C) unchanged."""
    if x.ndim == 1:
        return x.unsqueeze(0)
    if x.ndim == 2:
        return x
    c = x.shape[1]
    return x.permute(0, *range(2, x.ndim), 1).reshape(-1, c)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood from log-probabilities `input` (N, C, ...) and class
    indices `target` (N, ...): `-input[n, target[n]]`, optionally weighted per
    class; targets equal to `ignore_index` count for nothing. "mean" divides by
    the total weight of the counted targets."""
    reduction = _legacy(size_average, reduce, reduction)
    if target.dtype.is_floating_point:
        raise TypeError(f"nll_loss: expected target of an integer dtype (class indices), got {target.dtype}")
    logp = _class_dim_last(input)
    n, c = logp.shape
    t = target.reshape(-1)
    if t.shape[0] != n:
        raise ShapeError(f"nll_loss: expected target of {n} elements for input {list(input.shape)}, got {list(target.shape)}")
    valid = t != ignore_index
    safe_t = _core.where(valid, t, 0)
    if safe_t.numel() and (int(safe_t.max().item()) >= c or int(safe_t.min().item()) < 0):
        raise IndexError(f"nll_loss: target {int(safe_t.max().item())} is out of bounds for {c} classes")
    picked = logp.gather(1, safe_t.unsqueeze(1)).squeeze(1)
    w = valid.to(logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe_t)
    loss = -picked * w
    out_shape = tuple(target.shape)
    if reduction == "none":
        return loss.reshape(out_shape)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / w.sum()
    raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy from logits, with class indices or class probabilities as
    target, class `weight`, `ignore_index` and `label_smoothing` (PyTorch's formulas)."""
    reduction = _legacy(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if isinstance(input, Tensor) and isinstance(target, Tensor) and not target.dtype.is_floating_point:
        # (N, C) logits with class indices: one fused op (None where it does not apply).
        fused = _core._cross_entropy(input, target, weight, int(ignore_index), reduction, float(label_smoothing))
        if fused is not None:
            return fused
    class_dim = 0 if input.ndim == 1 else 1
    logp = input.log_softmax(class_dim)
    c = input.shape[class_dim]
    if target.dtype.is_floating_point:
        # Probabilities over classes, same shape as input.
        _same_shape(input, target, "cross_entropy")
        tgt = target
        if label_smoothing > 0:
            tgt = tgt * (1 - label_smoothing) + label_smoothing / c
        wshape = [1] * input.ndim
        wshape[class_dim] = c
        per = logp * tgt
        if weight is not None:
            per = per * weight.reshape(wshape)
        loss = -per.sum(class_dim)
        if reduction == "mean":
            return loss.sum() / (loss.numel() if input.ndim > 1 else 1)
        return _reduce(loss, reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    flat = _class_dim_last(logp)
    t = target.reshape(-1)
    valid = (t != ignore_index).to(flat.dtype)
    if weight is not None:
        smooth = -(flat * weight.reshape(1, c)).sum(1) * valid
    else:
        smooth = -flat.sum(1) * valid
    if reduction == "none":
        smooth_r = smooth.reshape(tuple(target.shape))
    elif reduction == "sum":
        smooth_r = smooth.sum()
    else:
        if weight is not None:
            denom = (weight.index_select(0, _core.where(t != ignore_index, t, 0)) * valid).sum()
        else:
            denom = valid.sum()
        smooth_r = smooth.sum() / denom
    return nll * (1 - label_smoothing) + smooth_r * (label_smoothing / c)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`-(target * log(input) + (1 - target) * log(1 - input))` for probabilities
    `input`, with the logs clamped at -100; optional `weight`, reduced by `reduction`."""
    _same_shape(input, target, "binary_cross_entropy")
    log_p = input.log().clamp(min=-100.0)
    log_1p = (1 - input).log().clamp(min=-100.0)
    loss = -(target * log_p + (1 - target) * log_1p)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    pos_weight: Optional[Tensor] = None,
) -> Tensor:
    """Sigmoid + binary cross-entropy in one numerically stable expression:
    `(1 - y) * x + (1 + (pw - 1) * y) * (log(1 + exp(-|x|)) + max(-x, 0))`."""
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    x, y = input, target.to(input.dtype)
    log_term = (-x.abs()).exp().log1p() + (-x).relu()
    if pos_weight is not None:
        loss = (1 - y) * x + (1 + (pos_weight - 1) * y) * log_term
    else:
        loss = (1 - y) * x + log_term
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Kullback-Leibler divergence `target * (log(target) - input)` for log-probabilities
    `input` (with `log_target`, `target` is given as log-probabilities too);
    "batchmean" divides the sum by the batch size."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = _core.where(target > 0, target, 1.0)
        loss = _core.where(target > 0, target * (safe.log() - input), 0.0)
    reduction = _legacy(size_average, reduce, reduction)
    if reduction == "batchmean":
        return loss.sum() / input.shape[0]
    return _reduce(loss, reduction, "kl_div")
