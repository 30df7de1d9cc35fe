"""`candle_py.mps`: `torch.mps` basics over candle_py's Metal device (`"metal"`,
also spelled `"mps"`; builds with the `metal` feature, macOS)."""

from __future__ import annotations

from . import _core

__all__ = ["is_available", "device_count", "synchronize", "empty_cache"]


def is_available() -> bool:
    """True when this build has the `metal` feature and a Metal device answers."""
    return _core.metal_is_available()


def device_count() -> int:
    """1 when a Metal device is available, else 0."""
    return 1 if _core.metal_is_available() else 0


def synchronize() -> None:
    """Wait until the queued work on the Metal device is done; RuntimeError without one."""
    if not _core.metal_is_available():
        raise RuntimeError("mps.synchronize(): no Metal device (this build lacks the `metal` feature or no device answers)")
    _core.synchronize("metal")


def empty_cache() -> None:
    """Returns at once: candle_py keeps no cache of freed device memory of its own
    to hand back (PyTorch's caching allocator has one; ours frees with the tensor)."""
    return None
