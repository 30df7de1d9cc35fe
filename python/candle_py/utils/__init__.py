"""`candle_py.utils`: data loading (`candle_py.utils.data`) and `checkpoint`."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
