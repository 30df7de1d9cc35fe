"""Losses and metrics by name (`get_loss`, `get_metric`), with Keras-style target coercion."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Union

from .. import _core, nn
from .._core import Tensor
from ..nn import functional as F

LossFn = Callable[[Tensor, Tensor], Tensor]
MetricFn = Callable[[Tensor, Tensor], Any]


def _match_regression(pred: Tensor, target: Tensor) -> Tensor:
    """Keras-style targets for element-wise losses: same dtype as the prediction,
    `(N,)` targets for `(N, 1)` predictions reshaped."""
    if target.dtype != pred.dtype:
        target = target.to(pred.dtype)
    if tuple(target.shape) != tuple(pred.shape) and target.numel() == pred.numel():
        target = target.reshape(tuple(pred.shape))
    return target


def _class_targets(pred: Tensor, target: Tensor) -> Tensor:
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(pred.shape):
        return target.to(pred.dtype)  # class probabilities / one-hot
    if target.dtype.is_floating_point or target.dtype != _core.int64:
        target = target.to(_core.int64)
    if target.ndim == pred.ndim and target.ndim >= 2 and target.shape[1] == 1:
        target = target.squeeze(1)
    return target


def _mse(pred: Tensor, target: Tensor) -> Tensor:
    return F.mse_loss(pred, _match_regression(pred, target))


def _mae(pred: Tensor, target: Tensor) -> Tensor:
    return F.l1_loss(pred, _match_regression(pred, target))


def _huber(pred: Tensor, target: Tensor) -> Tensor:
    return F.smooth_l1_loss(pred, _match_regression(pred, target))


def _cross_entropy(pred: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(pred, _class_targets(pred, target))


def _nll(pred: Tensor, target: Tensor) -> Tensor:
    return F.nll_loss(pred, _class_targets(pred, target))


def _bce(pred: Tensor, target: Tensor) -> Tensor:
    return F.binary_cross_entropy(pred, _match_regression(pred, target))


def _bce_logits(pred: Tensor, target: Tensor) -> Tensor:
    return F.binary_cross_entropy_with_logits(pred, _match_regression(pred, target))


# Class losses take logits (PyTorch's convention); "binary_crossentropy" takes
# probabilities (a sigmoid output, as Keras's default and nn.BCELoss).
_LOSSES: Dict[str, LossFn] = {
    "mse": _mse,
    "mean_squared_error": _mse,
    "mae": _mae,
    "l1": _mae,
    "mean_absolute_error": _mae,
    "huber": _huber,
    "smooth_l1": _huber,
    "cross_entropy": _cross_entropy,
    "categorical_crossentropy": _cross_entropy,
    "sparse_categorical_crossentropy": _cross_entropy,
    "nll": _nll,
    "binary_crossentropy": _bce,
    "bce": _bce,
    "binary_crossentropy_with_logits": _bce_logits,
    "bce_with_logits": _bce_logits,
}


def get_loss(loss: Union[str, LossFn, nn.Module]) -> LossFn:
    """A loss name (`"mse"`, `"mae"`, `"huber"`, `"cross_entropy"` (logits),
    `"nll"`, `"binary_crossentropy"` (probabilities), `"bce_with_logits"`), an
    `nn` loss module or any `fn(y_pred, y_true) -> Tensor`."""
    if isinstance(loss, str):
        key = loss.lower()
        if key not in _LOSSES:
            raise ValueError(f"unknown loss {loss!r}; known: {', '.join(sorted(_LOSSES))}")
        return _LOSSES[key]
    if isinstance(loss, (nn.CrossEntropyLoss, nn.NLLLoss)):
        mod = loss
        return lambda p, t: mod(p, _class_targets(p, t))
    if isinstance(loss, nn.Module):
        mod2 = loss
        return lambda p, t: mod2(p, _match_regression(p, t) if t.dtype.is_floating_point or p.shape != t.shape else t)
    if callable(loss):
        return loss
    raise TypeError(f"loss must be a name, an nn loss module or a callable, got {type(loss).__name__}")


# -- metrics ------------------------------------------------------------------------------
def _accuracy_for(threshold: float) -> MetricFn:
    def accuracy(pred: Tensor, target: Tensor) -> Tensor:
        if pred.ndim >= 2 and pred.shape[-1] > 1 and not (target.dtype.is_floating_point and target.shape == pred.shape):
            t = _class_targets(pred, target)
            return (pred.argmax(-1) == t.reshape(tuple(pred.shape[:-1]))).float().mean()
        if pred.ndim >= 2 and pred.shape[-1] > 1:  # one-hot / probability targets
            return (pred.argmax(-1) == target.argmax(-1)).float().mean()
        t = _match_regression(pred, target)
        return ((pred > threshold).float() == (t > 0.5).float()).float().mean()

    return accuracy


def _mae_metric(pred: Tensor, target: Tensor) -> Tensor:
    return (pred - _match_regression(pred, target)).abs().mean()


def _mse_metric(pred: Tensor, target: Tensor) -> Tensor:
    d = pred - _match_regression(pred, target)
    return (d * d).mean()


_METRIC_ALIASES = {
    "acc": "accuracy",
    "accuracy": "accuracy",
    "sparse_categorical_accuracy": "accuracy",
    "categorical_accuracy": "accuracy",
    "binary_accuracy": "accuracy",
    "mae": "mae",
    "mean_absolute_error": "mae",
    "mse": "mse",
    "mean_squared_error": "mse",
    "rmse": "rmse",
    "root_mean_squared_error": "rmse",
}


def get_metric(metric: Union[str, MetricFn], loss_name: Optional[str] = None) -> Tuple[str, MetricFn, bool]:
    """(log name, `fn(y_pred, y_true)`, whether the epoch value is the root of the
    mean). Accuracy on logits uses threshold 0 for `bce_with_logits`, 0.5 otherwise."""
    if isinstance(metric, str):
        kind = _METRIC_ALIASES.get(metric.lower())
        if kind is None:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(_METRIC_ALIASES))}")
        if kind == "accuracy":
            logits = loss_name in ("bce_with_logits", "binary_crossentropy_with_logits")
            return metric, _accuracy_for(0.0 if logits else 0.5), False
        if kind == "mae":
            return metric, _mae_metric, False
        if kind == "mse":
            return metric, _mse_metric, False
        return metric, _mse_metric, True
    if callable(metric):
        return getattr(metric, "__name__", type(metric).__name__), metric, False
    raise TypeError(f"metric must be a name or a callable, got {type(metric).__name__}")
