"""`candle_py.backends.openmp`: candle_py parallelises CPU work with rayon, not OpenMP."""

from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """False: candle_py's CPU threads are rayon's; no OpenMP runtime is used."""
    return False
