"""`candle_py.cuda`: PyTorch's `torch.cuda` basics for builds with the `cuda` feature.

A CPU-only build answers `is_available() == False` and `device_count() == 0`;
asking it for a CUDA tensor raises `DeviceError` naming the missing feature.
"""

from __future__ import annotations

from typing import Optional, Union

from ._core import cuda_device_count, cuda_is_available, cuda_is_built, device
from ._core import synchronize as _synchronize

__all__ = ["is_available", "is_built", "device_count", "current_device", "synchronize"]


def is_available() -> bool:
    """True when this build has the `cuda` feature and CUDA device 0 opens."""
    return cuda_is_available()


def is_built() -> bool:
    """True when this build has the `cuda` feature (`torch.backends.cuda.is_built()`);
    such a build needs the NVIDIA driver even to import."""
    return cuda_is_built()


def device_count() -> int:
    """How many CUDA devices the driver reports (0 without the `cuda` feature)."""
    return cuda_device_count()


def current_device() -> int:
    """candle_py has no per-thread current device: `"cuda"` always means device 0."""
    return 0


def synchronize(device: Optional[Union[device, str, int]] = None) -> None:
    """Wait until the queued work on a CUDA device (default `"cuda:0"`) is done."""
    _synchronize("cuda" if device is None else device)
