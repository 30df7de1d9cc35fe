"""Padding layers (`ZeroPad*`, `ConstantPad*`, `ReflectionPad*`, `ReplicationPad*`,
`CircularPad*`, 1-3 spatial dims) over `F.pad`. An int pads every side by it; a
tuple is `(left, right[, top, bottom[, front, back]])`, last dim first."""

from __future__ import annotations

from typing import Sequence, Tuple, Union

from .._core import ShapeError, Tensor
from . import functional as F
from .module import Module

__all__ = [
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
]  # fmt: skip

_Padding = Union[int, Sequence[int]]


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding: _Padding) -> None:
        super().__init__()
        n = 2 * self._nd
        pad: Tuple[int, ...] = (int(padding),) * n if isinstance(padding, int) else tuple(padding)
        if len(pad) != n:
            raise ValueError(f"[{type(self).__name__}] padding must be an int or a tuple of {n} ints, got {padding!r}")
        self.padding = pad

    def forward(self, input: Tensor) -> Tensor:
        # The non-constant modes are defined on (N, C, spatial) or (C, spatial) input only.
        if self._mode != "constant" and input.ndim not in (self._nd + 1, self._nd + 2):
            raise ShapeError(f"{type(self).__name__}: expected {self._nd + 1}D or {self._nd + 2}D input, got shape {list(input.shape)}")
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: _Padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with the constant `value`."""


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with the constant `value`."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with the constant `value`."""

    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: _Padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last dim with zeros."""


class ZeroPad2d(_ZeroPadNd):
    """Pad the last 2 dims with zeros."""

    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last 3 dims with zeros."""

    _nd = 3


class ReflectionPad1d(_PadNd):
    """Pad the last dim with the reflection of the input (edge not repeated)."""

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Pad the last 2 dims with the reflection of the input."""

    _nd = 2


class ReflectionPad3d(ReflectionPad1d):
    """Pad the last 3 dims with the reflection of the input."""

    _nd = 3


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating the edge value."""

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Pad the last 2 dims by repeating the edge values."""

    _nd = 2


class ReplicationPad3d(ReplicationPad1d):
    """Pad the last 3 dims by repeating the edge values."""

    _nd = 3


class CircularPad1d(_PadNd):
    """Pad the last dim by wrapping around (periodic boundary)."""

    _mode = "circular"


class CircularPad2d(CircularPad1d):
    """Pad the last 2 dims by wrapping around."""

    _nd = 2


class CircularPad3d(CircularPad1d):
    """Pad the last 3 dims by wrapping around."""

    _nd = 3
