"""`candle_py.backends.mkldnn`: `torch.backends.mkldnn`'s switch.

candle_py links no oneDNN (MKL-DNN): its CPU kernels are its own and Candle's
(gemm crate GEMM). `is_available()` is False, and `enabled` (True), kept settable
for scripts that turn it off, selects nothing.
"""

from __future__ import annotations

from ._flags import install

__all__ = ["enabled", "is_available"]

enabled: bool = True


def is_available() -> bool:
    """False: no oneDNN in candle_py."""
    return False


install(__name__, frozenset({"enabled"}))
