"""`Snake1d`: the periodic activation of BigVGAN/DAC audio models,
`x + 1/(alpha + 1e-9) * sin(alpha * x)^2` with a learnable per-channel alpha."""

from __future__ import annotations

from typing import Any

from .. import _core
from .._core import ShapeError, Tensor
from . import functional as F
from .module import Module
from .parameter import Parameter

__all__ = ["Snake1d"]


class Snake1d(Module):
    """Snake activation with a learned per-channel `alpha` (1, channels, 1), for
    (N, channels, L) input: `x + sin(alpha * x)**2 / alpha` (`F.snake`)."""

    def __init__(self, channels: int, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if not isinstance(channels, int) or channels <= 0:
            raise ValueError(f"[Snake1d] channels must be a positive integer, got {channels!r}")
        self.channels = channels
        self.alpha = Parameter(_core.ones(1, channels, 1, dtype=dtype or _core.get_default_dtype(), device=device))

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 3 or x.shape[1] != self.channels:
            raise ShapeError(f"[Snake1d] expected input (N, {self.channels}, L), got {list(x.shape)}")
        return F.snake(x, self.alpha)

    def extra_repr(self) -> str:
        return f"{self.channels}"
