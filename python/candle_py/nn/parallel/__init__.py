"""`candle_py.nn.parallel`: `DataParallel` (single-device: it wraps and forwards, as
PyTorch's does without GPUs) and `DistributedDataParallel` (importable; constructing
it raises, candle_py having no distributed backend)."""

from __future__ import annotations

from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
