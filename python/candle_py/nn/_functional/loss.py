"""Loss functions, with PyTorch's reductions and legacy `size_average` / `reduce`;
each one core op (`_core._cross_entropy`, `_nll_loss`, `_point_loss`)."""

from __future__ import annotations

from typing import Optional

from ... import _autocast, _core
from ..._core import Tensor


def _legacy(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


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
    input, target, weight = _autocast.fp32(input, target, weight)
    return _weighted("mse_loss", input, target, _legacy(size_average, reduce, reduction), weight)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    weight: Optional[Tensor] = None,
) -> Tensor:
    """Absolute error `|input - target|`, optionally weighted (a weighted "mean" is
    `sum(weight * error) / sum(weight)`, as PyTorch), reduced by `reduction`
    ("mean", "sum" or "none")."""
    input, target, weight = _autocast.fp32(input, target, weight)
    return _weighted("l1_loss", input, target, _legacy(size_average, reduce, reduction), weight)


def _weighted(op: str, input: Tensor, target: Tensor, reduction: str, weight: Optional[Tensor]) -> Tensor:
    """`mse_loss` / `l1_loss` with PyTorch's weighting: `weight` has the input's shape,
    and a weighted "mean" is `sum(weight * error) / sum(weight)` (not over the count)."""
    if weight is None:
        return _core._point_loss(op, input, target, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{op}: Weights and input must have the same size (weight {list(weight.shape)}, input {list(input.shape)})")
    if reduction == "mean":
        return _core._point_loss(op, input, target, "sum", weight) / weight.sum()
    return _core._point_loss(op, input, target, reduction, weight)


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
    input, target = _autocast.fp32(input, target)
    return _core._point_loss("smooth_l1_loss", input, target, _legacy(size_average, reduce, reduction), beta=float(beta))


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
    input, weight = _autocast.fp32(input, weight)
    return _core._nll_loss(input, target, weight, int(ignore_index), _legacy(size_average, reduce, reduction))


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
    """Cross-entropy from logits (N, C, ...) or (C,), with class indices or class
    probabilities (the input's shape) as target, class `weight`, `ignore_index` and
    `label_smoothing` (PyTorch's formulas); one Rust op, fused on the CPU."""
    input, target, weight = _autocast.fp32(input, target, weight)
    return _core._cross_entropy(input, target, weight, int(ignore_index), _legacy(size_average, reduce, reduction), float(label_smoothing))


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
    input, target, weight = _autocast.fp32(input, target, weight)
    if not bool(((input >= 0) & (input <= 1)).all()):
        # PyTorch refuses probabilities outside [0, 1] (NaN included) rather than
        # returning a loss computed from clamped logs.
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 and 1")
    return _core._point_loss("binary_cross_entropy", input, target, _legacy(size_average, reduce, reduction), weight)


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
    input, target, weight, pos_weight = _autocast.fp32(input, target, weight, pos_weight)
    return _core._point_loss(
        "binary_cross_entropy_with_logits", input, target, _legacy(size_average, reduce, reduction), weight, pos_weight
    )


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
    input, target = _autocast.fp32(input, target)
    return _core._point_loss("kl_div", input, target, _legacy(size_average, reduce, reduction), log_target=bool(log_target))
