"""Normalization: layer, RMS, group and batch norm, and `normalize` (unit p-norm)."""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ... import _core
from ..._core import ShapeError, Tensor
from ...autograd import no_grad as _no_grad


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing `normalized_shape` dims to zero mean and unit
    variance (biased, plus `eps`), then scale by `weight` and shift by `bias`."""
    shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
    k = len(shape)
    if tuple(input.shape[input.ndim - k :]) != shape:
        raise ShapeError(f"layer_norm: expected input with shape [*, {', '.join(map(str, shape))}], got {list(input.shape)}")
    # One op (Rust) with its own backward: the fused kernels on CPU float32/float64,
    # the same math from Candle's ops elsewhere (half types computed in float32).
    d = math.prod(shape)
    w = weight if weight is not None else _core.ones(d, dtype=input.dtype, device=input.device)
    b = bias if bias is not None else _core.zeros(d, dtype=input.dtype, device=input.device)
    return _core._layer_norm(input, w, b, d, eps)


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None, eps: Optional[float] = None) -> Tensor:
    """Divide by the root mean square over the trailing `normalized_shape` dims
    (plus `eps`; default the dtype's machine epsilon), then scale by `weight`."""
    shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise ShapeError(f"rms_norm: expected input with shape [*, {', '.join(map(str, shape))}], got {list(input.shape)}")
    return _core._rms_norm(input, math.prod(shape), weight, None if eps is None else float(eps))


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Split the channels (dim 1) into `num_groups` groups, normalize each group of
    each sample to zero mean and unit variance, then apply the per-channel
    `weight` and `bias` (the layer-norm kernel on each group)."""
    return _core._group_norm(input, int(num_groups), weight, bias, float(eps))


def batch_norm(
    input: Tensor,
    running_mean: Optional[Tensor],
    running_var: Optional[Tensor],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch norm over dim 1; in training, normalizes with batch statistics and
    updates the running ones in place (unbiased variance, as PyTorch)."""
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected at least 2-D input (N, C, ...), got {list(input.shape)}")
    c = input.shape[1]
    dims = (0,) + tuple(range(2, input.ndim))
    shape = [1, c] + [1] * (input.ndim - 2)
    n = input.numel() // c if c else 0
    if training:
        if n <= 1:
            raise ShapeError(f"batch_norm: expected more than 1 value per channel when training, got input size {list(input.shape)}")
        with _no_grad():
            stats = _core._batch_norm_stats(input)
            if stats is not None:
                mean, var = stats
            else:
                mean = input.mean(dims)
                var = ((input - mean.reshape(shape)) ** 2).mean(dims)
            if running_mean is not None and running_var is not None:
                running_mean.mul_(1 - momentum).add_(mean * momentum)
                running_var.mul_(1 - momentum).add_(var * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required in evaluation mode")
        mean, var = running_mean, running_var
    w = weight if weight is not None else _core.ones(c, dtype=input.dtype, device=input.device)
    b = bias if bias is not None else _core.zeros(c, dtype=input.dtype, device=input.device)
    return _core._batch_norm(input, w, b, mean, var, training, eps)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """Divide `input` by its `p`-norm along `dim` (clamped below by `eps`), giving unit-norm vectors."""
    norm = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / norm


def instance_norm(
    input: Tensor,
    running_mean: Optional[Tensor] = None,
    running_var: Optional[Tensor] = None,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel of each sample (N, C, ...) over its spatial dims, then
    apply the per-channel `weight` and `bias`. With `use_input_stats` the running
    statistics, if given, are updated in place with the batch average of the
    per-instance mean and unbiased variance; without it they are used instead."""
    if input.ndim < 3:
        raise ShapeError(f"instance_norm: expected at least 3-D input (N, C, ...), got {list(input.shape)}")
    c = input.shape[1]
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    spatial = input.numel() // max(input.shape[0] * c, 1)
    if spatial <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input size {list(input.shape)}")
    if running_mean is not None and running_var is not None:
        dims = tuple(range(2, input.ndim))
        with _no_grad():
            mean = input.mean(dims)
            var = ((input - mean.reshape(*mean.shape, *([1] * len(dims)))) ** 2).sum(dims) / (spatial - 1)
            running_mean.mul_(1 - momentum).add_(mean.mean(0) * momentum)
            running_var.mul_(1 - momentum).add_(var.mean(0) * momentum)
    # One group per channel: group norm's kernel is instance norm.
    return _core._group_norm(input, c, weight, bias, float(eps))


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Divide each value by `(k + alpha / size * sum of squares over the `size`
    neighbouring channels) ** beta` (the window is zero-padded at the edges)."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = input * input
    lo, hi = size // 2, (size - 1) // 2
    zshape = list(input.shape)
    parts = []
    if lo:
        zshape[1] = lo
        parts.append(_core.zeros(*zshape, dtype=input.dtype, device=input.device))
    parts.append(sq)
    if hi:
        zshape[1] = hi
        parts.append(_core.zeros(*zshape, dtype=input.dtype, device=input.device))
    padded = _core.cat(parts, 1) if len(parts) > 1 else sq
    # The window sum as `size` shifted slices (a loop over the window, not the elements).
    acc = padded.narrow(1, 0, c)
    for j in range(1, size):
        acc = acc + padded.narrow(1, j, c)
    div = (acc * (alpha / size) + k) ** beta
    return input / div
