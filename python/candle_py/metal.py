"""`candle_py.metal`: `is_available()`, `device_count()` and `synchronize()` for
builds with the `metal` feature (macOS; untested on our machines)."""

from __future__ import annotations

from ._core import metal_is_available, metal_is_built
from ._core import synchronize as _synchronize

__all__ = ["is_available", "is_built", "device_count", "synchronize"]


def is_available() -> bool:
    """True when this build has the `metal` feature and a Metal device answers."""
    return metal_is_available()


def is_built() -> bool:
    """True when this build has the `metal` feature."""
    return metal_is_built()


def device_count() -> int:
    """1 when a Metal device is available, else 0."""
    return 1 if metal_is_available() else 0


def synchronize() -> None:
    """Wait until the queued work on the Metal device is done."""
    _synchronize("metal")
