"""`candle_py.cuda.is_available()` and `device_count()`."""
from __future__ import annotations

from ._core import cuda_device_count, cuda_is_available


def is_available() -> bool:
    """True when this build has the `cuda` feature and a CUDA device answers."""
    return cuda_is_available()


def device_count() -> int:
    return cuda_device_count()
