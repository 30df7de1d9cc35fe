"""Normalization layers: LayerNorm, RMSNorm, GroupNorm, BatchNorm1d/2d/3d,
InstanceNorm1d/2d/3d, LocalResponseNorm."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from .. import _core
from .._core import ShapeError, Tensor
from . import functional as F
from .module import Module
from .parameter import Parameter

__all__ = [
    "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm",
]  # fmt: skip

_Shape = Union[int, Sequence[int]]


def _shape(s: _Shape, layer: str) -> Tuple[int, ...]:
    shape = (s,) if isinstance(s, int) else tuple(s)
    if not shape or any((not isinstance(d, int)) or d <= 0 for d in shape):
        shown = f"a tensor of shape {list(s.shape)}" if hasattr(s, "shape") else repr(s)[:80]  # one line
        raise ValueError(f"[{layer}] normalized_shape must be positive integers, got {shown}")
    return shape


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims (`F.layer_norm`), with a
    learned elementwise `weight` (ones) and `bias` (zeros) when `elementwise_affine`."""

    def __init__(
        self,
        normalized_shape: _Shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape, "LayerNorm")
        self.eps, self.elementwise_affine = eps, elementwise_affine
        dt = dtype or _core.get_default_dtype()
        if elementwise_affine:
            self.weight: Optional[Parameter] = Parameter(_core.ones(self.normalized_shape, dtype=dt, device=device))
            if bias:
                self.bias: Optional[Parameter] = Parameter(_core.zeros(self.normalized_shape, dtype=dt, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        k = len(self.normalized_shape)
        if tuple(input.shape[input.ndim - k :]) != self.normalized_shape:
            raise ShapeError(
                f"[LayerNorm] expected input of shape [*, {', '.join(map(str, self.normalized_shape))}], got {list(input.shape)}"
            )
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"


class RMSNorm(Module):
    """Divide by the root mean square over the trailing `normalized_shape` dims
    (`F.rms_norm`), with a learned `weight` (ones) when `elementwise_affine`."""

    def __init__(
        self, normalized_shape: _Shape, eps: Optional[float] = None, elementwise_affine: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape, "RMSNorm")
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight: Optional[Parameter] = Parameter(
                _core.ones(self.normalized_shape, dtype=dtype or _core.get_default_dtype(), device=device)
            )
        else:
            self.register_parameter("weight", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"


class GroupNorm(Module):
    """Normalize each of `num_groups` channel groups per sample (`F.group_norm`), with
    per-channel `weight` and `bias` when `affine`."""

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"[GroupNorm] num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        dt = dtype or _core.get_default_dtype()
        if affine:
            self.weight: Optional[Parameter] = Parameter(_core.ones(num_channels, dtype=dt, device=device))
            self.bias: Optional[Parameter] = Parameter(_core.zeros(num_channels, dtype=dt, device=device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ShapeError(f"[GroupNorm] expected input with {self.num_channels} channels (N, C, ...), got {list(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _BatchNorm(Module):
    _ranks: Tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(num_features, int) or num_features <= 0:
            raise ValueError(f"[{type(self).__name__}] num_features must be a positive integer, got {num_features!r}")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = dtype or _core.get_default_dtype()
        if affine:
            self.weight: Optional[Parameter] = Parameter(_core.ones(num_features, dtype=dt, device=device))
            if bias:
                self.bias: Optional[Parameter] = Parameter(_core.zeros(num_features, dtype=dt, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _core.zeros(num_features, dtype=dt, device=device))
            self.register_buffer("running_var", _core.ones(num_features, dtype=dt, device=device))
            self.register_buffer("num_batches_tracked", _core.tensor(0, dtype=_core.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.num_batches_tracked.zero_()

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if input.ndim not in self._ranks:
            raise ShapeError(f"[{name}] expected {' or '.join(f'{r}D' for r in self._ranks)} input, got shape {list(input.shape)}")
        if input.shape[1] != self.num_features:
            raise ShapeError(f"[{name}] expected {self.num_features} channels in dim 1, got shape {list(input.shape)}")
        use_batch = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return F.batch_norm(
            input,
            self.running_mean if (not use_batch or self.training) else None,
            self.running_var if (not use_batch or self.training) else None,
            self.weight,
            self.bias,
            use_batch,
            0.0 if momentum is None else momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input over all dims but the channel
    dim: batch statistics in training (updating running mean and variance by
    `momentum`, or their cumulative average when momentum is None), the running
    ones in evaluation; per-channel `weight` and `bias` when `affine`."""

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input, with the arguments of BatchNorm1d."""

    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) input, with the arguments of BatchNorm1d."""

    _ranks = (5,)


class _InstanceNorm(_BatchNorm):
    """Shares BatchNorm's parameters and buffers (PyTorch's `_NormBase`), with
    instance norm's defaults: no affine, no running statistics."""

    _nd = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        nd = self._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"[{type(self).__name__}] expected {nd + 1}D or {nd + 2}D input (got {input.ndim}D input)")
        feature_dim = input.ndim - nd - 1
        if input.shape[feature_dim] != self.num_features and self.affine:
            raise ValueError(
                f"[{type(self).__name__}] expected input's size at dim={feature_dim} to match num_features "
                f"({self.num_features}), but got: {input.shape[feature_dim]}."
            )
        unbatched = input.ndim == nd + 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Normalize each channel of each sample of (N, C, L) or (C, L) input over L;
    optional per-channel `affine` weight and bias, and running statistics
    (`track_running_stats`, used in evaluation)."""


class InstanceNorm2d(_InstanceNorm):
    """InstanceNorm1d for (N, C, H, W) or (C, H, W) input."""

    _nd = 2


class InstanceNorm3d(_InstanceNorm):
    """InstanceNorm1d for (N, C, D, H, W) or (C, D, H, W) input."""

    _nd = 3


class LocalResponseNorm(Module):
    """`F.local_response_norm` as a layer: divide by a power of the sum of squares
    over `size` neighbouring channels."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
