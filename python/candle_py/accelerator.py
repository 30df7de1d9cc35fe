"""`candle_py.accelerator`: PyTorch's device-agnostic accelerator queries, over the
GPU backends this build has (`cuda`, else `metal`, which PyTorch calls "mps").

A CPU-only build has no accelerator: `current_accelerator()` is None,
`is_available()` False and `device_count()` 0.
"""

from __future__ import annotations

from typing import Optional

from . import _core

__all__ = ["current_accelerator", "is_available", "device_count", "current_device_index", "synchronize"]


def current_accelerator(check_available: bool = False) -> Optional[_core.device]:
    """The accelerator this build targets (`device("cuda")` or `device("metal")`), or
    None without one; with `check_available=True`, None also when its device is missing."""
    if _core.cuda_is_built():
        if check_available and not _core.cuda_is_available():
            return None
        return _core.device("cuda")
    if _core.metal_is_built():
        if check_available and not _core.metal_is_available():
            return None
        return _core.device("metal")
    return None


def is_available() -> bool:
    """True when the build's accelerator has a usable device."""
    return current_accelerator(check_available=True) is not None


def device_count() -> int:
    """How many devices the build's accelerator has (0 without one)."""
    acc = current_accelerator(check_available=True)
    if acc is None:
        return 0
    if acc.type == "cuda":
        return _core.cuda_device_count()
    return 1


def current_device_index() -> int:
    """candle_py has no per-thread current device: the accelerator's device 0.
    Raises RuntimeError without an available accelerator."""
    if not is_available():
        raise RuntimeError("accelerator.current_device_index(): no accelerator is available in this candle_py build")
    return 0


def synchronize(device: Optional[_core.device] = None) -> None:
    """Wait for the work queued on the accelerator (device 0 unless named)."""
    acc = current_accelerator(check_available=True)
    if acc is None:
        raise RuntimeError("accelerator.synchronize(): no accelerator is available in this candle_py build")
    _core.synchronize(acc if device is None else device)
