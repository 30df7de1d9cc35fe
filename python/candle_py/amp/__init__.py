"""`candle_py.amp`: automatic mixed precision, as `torch.amp`.

`autocast(device_type, dtype=None, enabled=True, cache_enabled=None)` casts the
inputs of matmul-like ops (linear, matmul, conv, SDPA, ...) to a lower-precision
dtype inside its block and runs the losses in float32 (`candle_py._autocast`
lists the ops); `GradScaler` scales the loss so that float16 gradients do not
underflow, and skips steps whose gradients overflowed.
"""

from __future__ import annotations

from . import autocast_mode, grad_scaler
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler", "autocast_mode", "grad_scaler"]
