"""`candle_py.cuda.amp`: PyTorch's deprecated `torch.cuda.amp.autocast` /
`GradScaler` spellings of `candle_py.amp`'s, on the "cuda" device (without a CUDA
device they warn and are disabled, as in PyTorch)."""

from __future__ import annotations

import warnings

from .. import _core
from ..amp import autocast_mode, grad_scaler

__all__ = ["autocast", "GradScaler"]


class autocast(autocast_mode.autocast):
    """`candle_py.amp.autocast("cuda", ...)` under its deprecated name."""

    def __init__(self, enabled: bool = True, dtype: _core.dtype = _core.float16, cache_enabled: bool = True) -> None:
        warnings.warn(
            "`candle_py.cuda.amp.autocast(args...)` is deprecated. Please use `candle_py.amp.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """`candle_py.amp.GradScaler("cuda", ...)` under its deprecated name."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        warnings.warn(
            "`candle_py.cuda.amp.GradScaler(args...)` is deprecated. Please use `candle_py.amp.GradScaler('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
