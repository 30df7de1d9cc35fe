"""`Unfold` (im2col) and `Fold` (col2im) layers over `F.unfold` / `F.fold`."""

from __future__ import annotations

from typing import Sequence, Union

from .._core import Tensor
from . import functional as F
from .module import Module

__all__ = ["Unfold", "Fold"]

_Pair = Union[int, Sequence[int]]


class Unfold(Module):
    """`F.unfold` as a layer: sliding blocks of (N, C, H, W) as columns (N, C kh kw, L)."""

    def __init__(self, kernel_size: _Pair, dilation: _Pair = 1, padding: _Pair = 0, stride: _Pair = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Fold(Module):
    """`F.fold` as a layer: columns (N, C kh kw, L) summed back into (N, C, *output_size)."""

    def __init__(self, output_size: _Pair, kernel_size: _Pair, dilation: _Pair = 1, padding: _Pair = 0, stride: _Pair = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size, self.dilation, self.padding, self.stride = output_size, kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )
