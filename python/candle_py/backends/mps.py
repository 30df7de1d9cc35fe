"""`candle_py.backends.mps`: whether Apple's Metal backend is built and usable
(candle_py's `"metal"` device, also spelled `"mps"`)."""

from __future__ import annotations

from .. import _core

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """True when this build has the `metal` feature and a Metal device answers."""
    return _core.metal_is_available()


def is_built() -> bool:
    """True when this build has the `metal` feature."""
    return _core.metal_is_built()
