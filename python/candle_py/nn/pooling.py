"""Pooling layers: `MaxPool1d/2d/3d`, `AvgPool1d/2d/3d`, `AdaptiveAvgPool1d/2d/3d`,
`AdaptiveMaxPool1d/2d/3d`, `LPPool1d/2d/3d` — PyTorch's signatures, attributes and `extra_repr`;
the windows are computed in Rust (`_core._max_pool` / `_avg_pool` / `_adaptive_pool`)."""

from __future__ import annotations

from typing import Any, Optional

from .._core import ShapeError, Tensor
from . import functional as F
from .module import Module

__all__ = [
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "LPPool1d", "LPPool2d", "LPPool3d",
]  # fmt: skip

_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _check_sizes(layer: str, n: int, **values: Any) -> None:
    for name, (v, lo) in values.items():
        vals = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        if isinstance(v, (list, tuple)) and len(vals) not in (1, n):
            raise ValueError(f"[{layer}] '{name}' must be an int or a tuple of {n} ints, got {v!r}")
        for x in vals:
            if isinstance(x, bool) or not isinstance(x, int):
                raise TypeError(f"[{layer}] '{name}' must be an int or a tuple of {n} ints, got {v!r}")
            if x < lo:
                raise ValueError(f"[{layer}] '{name}' must be {'positive' if lo else 'non-negative'}, got {v!r}")


def _check_input(layer: str, n: int, input: Any) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"[{layer}] expected a Tensor input, got {type(input).__name__}")
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(
            f"[{layer}] expected a {n + 1}-d (C, {_SPATIAL[n]}) or {n + 2}-d (N, C, {_SPATIAL[n]}) input, got {list(input.shape)}"
        )


class _MaxPoolNd(Module):
    _nd = 0

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        _check_sizes(name, self._nd, kernel_size=(kernel_size, 1), padding=(padding, 0), dilation=(dilation, 1))
        if stride is not None:
            _check_sizes(name, self._nd, stride=(stride, 1))
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        name = type(self).__name__
        _check_input(name, self._nd, input)
        return F._max_pool_nd(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices, self._nd, f"[{name}]"
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    """`F.max_pool1d` as a layer: the maximum of each `kernel_size` window, with
    `stride` (default: the kernel size), `padding`, `dilation`, `return_indices`, `ceil_mode`."""

    _nd = 1


class MaxPool2d(_MaxPoolNd):
    """`F.max_pool2d` as a layer, with the arguments of MaxPool1d per spatial dim."""

    _nd = 2


class MaxPool3d(_MaxPoolNd):
    """`F.max_pool3d` as a layer, with the arguments of MaxPool1d per spatial dim."""

    _nd = 3


class _AvgPoolNd(Module):
    _nd = 0

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: Optional[int] = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        _check_sizes(name, self._nd, kernel_size=(kernel_size, 1), padding=(padding, 0))
        if stride is not None:
            _check_sizes(name, self._nd, stride=(stride, 1))
        if divisor_override is not None and (
            isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override == 0
        ):
            raise ValueError(f"[{name}] divisor_override must be a non-zero integer, got {divisor_override!r}")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        _check_input(name, self._nd, input)
        return F._avg_pool_nd(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
            self._nd,
            f"[{name}]",
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """`F.avg_pool1d` as a layer: the mean of each `kernel_size` window, with
    `stride` (default: the kernel size), `padding`, `ceil_mode`, `count_include_pad`."""

    _nd = 1

    def __init__(
        self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        # PyTorch stores AvgPool1d's sizes as 1-tuples.
        one = lambda v: tuple(v) if isinstance(v, (list, tuple)) else (v,)  # noqa: E731
        self.kernel_size, self.stride, self.padding = one(self.kernel_size), one(self.stride), one(self.padding)


class AvgPool2d(_AvgPoolNd):
    """`F.avg_pool2d` as a layer; also takes `divisor_override`."""

    _nd = 2


class AvgPool3d(_AvgPoolNd):
    """`F.avg_pool3d` as a layer; also takes `divisor_override`."""

    _nd = 3


class _AdaptivePoolNd(Module):
    _nd = 0
    _max = False

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        name = type(self).__name__
        sizes = tuple(output_size) if isinstance(output_size, (list, tuple)) else (output_size,)
        if len(sizes) not in (1, self._nd):
            raise ValueError(f"[{name}] output_size must be an int or a tuple of {self._nd} values, got {output_size!r}")
        for v in sizes:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                shown = f"a tensor of shape {list(output_size.shape)}" if hasattr(output_size, "shape") else repr(output_size)
                raise ValueError(f"[{name}] output_size must contain positive integers (or None), got {shown}")
        self.output_size = output_size
        if self._max:
            self.return_indices = return_indices

    def forward(self, input: Tensor) -> Any:
        name, n = type(self).__name__, self._nd
        _check_input(name, n, input)
        sizes = F._adaptive_size(input, self.output_size, n, f"[{name}]")
        return F._core._adaptive_pool(input, sizes, self._max, self._max and self.return_indices, f"[{name}]")

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """`F.adaptive_avg_pool1d` as a layer: mean pooling to a fixed `output_size`."""

    _nd = 1

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool2d(_AdaptivePoolNd):
    """`F.adaptive_avg_pool2d` as a layer: mean pooling to a fixed `output_size` (None keeps a dim)."""

    _nd = 2

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool3d(_AdaptivePoolNd):
    """`F.adaptive_avg_pool3d` as a layer: mean pooling to a fixed `output_size` (None keeps a dim)."""

    _nd = 3

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptivePoolNd):
    """`F.adaptive_max_pool1d` as a layer: max pooling to a fixed `output_size`, optionally with indices."""

    _nd = 1
    _max = True


class AdaptiveMaxPool2d(_AdaptivePoolNd):
    """`F.adaptive_max_pool2d` as a layer: max pooling to a fixed `output_size`, optionally with indices."""

    _nd = 2
    _max = True


class AdaptiveMaxPool3d(_AdaptivePoolNd):
    """`F.adaptive_max_pool3d` as a layer: max pooling to a fixed `output_size`, optionally with indices."""

    _nd = 3
    _max = True


class _LPPoolNd(Module):
    _nd = 0

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> None:
        super().__init__()
        if norm_type == 0:
            raise ValueError(f"norm_type must be a non-zero value, but got {norm_type}")
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        _check_input(name, self._nd, input)
        return F._lp_pool_nd(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode, self._nd, f"[{name}]")

    def extra_repr(self) -> str:
        return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, ceil_mode={self.ceil_mode}"


class LPPool1d(_LPPoolNd):
    """`F.lp_pool1d` as a layer: power-average pooling with `norm_type` p over
    `kernel_size` windows (`stride` defaults to the kernel size)."""

    _nd = 1


class LPPool2d(_LPPoolNd):
    """`F.lp_pool2d` as a layer (see `LPPool1d`)."""

    _nd = 2


class LPPool3d(_LPPoolNd):
    """`F.lp_pool3d` as a layer (see `LPPool1d`)."""

    _nd = 3
