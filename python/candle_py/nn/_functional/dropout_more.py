"""Channel-wise dropout (dropout1d/2d/3d) and the self-normalizing alpha dropouts.

Random masks drawn with `rand_like`; the masking is a product with the input, so
the gradient is the mask's (as in PyTorch)."""

from __future__ import annotations

from ... import _core
from ..._core import Tensor
from .activation import _result

# SELU's `scale * alpha`: the value alpha dropout drops to (PyTorch's constant).
_ALPHA = 1.7580993408473766


def _check_p(p: float, op: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input: Tensor, p: float) -> Tensor:
    """A keep-mask (1 - p chance of 1) with one value per (sample, channel): shape
    (N, C, 1, ...), broadcast over the feature dims."""
    shape = list(input.shape[:2]) + [1] * (input.ndim - 2)
    return (_core.rand(*shape, dtype=input.dtype, device=input.device) >= p).to(input.dtype)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, nd: int, op: str) -> Tensor:
    _check_p(p, op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: Expected {nd + 1}D or {nd + 2}D input, but received a {input.ndim}D input of shape {list(input.shape)}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    if p == 1.0:
        return _result(input, lambda input: input * 0.0, inplace)
    keep = _feature_noise(x, p) * (1.0 / (1.0 - p))
    if not batched:
        keep = keep.squeeze(0)
    return _result(input, lambda input: input * keep, inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) with probability `p` in training,
    scaling the kept ones by `1 / (1 - p)`."""
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability `p` in
    training, scaling the kept ones by `1 / (1 - p)`."""
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability `p`
    in training, scaling the kept ones by `1 / (1 - p)`."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


def _alpha(input: Tensor, p: float, training: bool, inplace: bool, feature: bool, op: str) -> Tensor:
    _check_p(p, op)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return _result(input, lambda input: input * 0.0, inplace)
    if feature and input.ndim < 2:
        raise RuntimeError(f"{op}: Feature dropout requires at least 2 dimensions in the input, got shape {list(input.shape)}")
    keep = _feature_noise(input, p) if feature else (_core.rand_like(input) >= p).to(input.dtype)
    # Dropped values become -alpha, then an affine map `a * x + b` restores zero
    # mean and unit variance (PyTorch's formula).
    a = 1.0 / ((_ALPHA * _ALPHA * p + 1) * (1 - p)) ** 0.5
    b = (keep - 1) * (_ALPHA * a) + _ALPHA * a * p
    return _result(input, lambda input: input * (keep * a) + b, inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: in training each element is set with probability
    `p` to SELU's negative saturation value, then rescaled and shifted so the mean
    and variance stay those of the input."""
    return _alpha(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """`alpha_dropout` with one random choice per (sample, channel) instead of per element."""
    return _alpha(input, p, training, inplace, True, "feature_alpha_dropout")


__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]
