"""`Upsample`, the module form of `F.interpolate` (nearest, linear, bilinear,
trilinear); the resizing itself is in `functional`."""

from __future__ import annotations

from typing import Optional

from .._core import Tensor
from .functional import _Scale, _Size, interpolate
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "interpolate"]


class Upsample(Module):
    """`F.interpolate` as a layer: resize (N, C, ...) input to `size` or by
    `scale_factor`, with `mode` "nearest", "linear", "bilinear" or "trilinear"
    and `align_corners` for the linear modes."""

    def __init__(
        self,
        size: _Size = None,
        scale_factor: _Scale = None,
        mode: str = "nearest",
        align_corners: Optional[bool] = None,
        recompute_scale_factor: Optional[bool] = None,
    ) -> None:
        super().__init__()
        self.size, self.mode, self.align_corners, self.recompute_scale_factor = size, mode, align_corners, recompute_scale_factor
        self.scale_factor = (
            float(scale_factor)
            if isinstance(scale_factor, (int, float))
            else (tuple(float(s) for s in scale_factor) if scale_factor else None)
        )

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """`Upsample` of (N, C, H, W) input with `mode="nearest"`."""

    def __init__(self, size: _Size = None, scale_factor: _Scale = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """`Upsample` of (N, C, H, W) input with `mode="bilinear"` and `align_corners=True`."""

    def __init__(self, size: _Size = None, scale_factor: _Scale = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
