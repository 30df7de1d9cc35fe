"""`candle_py.metal.is_available()` and `device_count()`."""
from __future__ import annotations

from ._core import metal_is_available


def is_available() -> bool:
    """True when this build has the `metal` feature and a Metal device answers."""
    return metal_is_available()


def device_count() -> int:
    return 1 if metal_is_available() else 0
