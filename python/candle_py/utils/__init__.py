"""`candle_py.utils`: data loading (`candle_py.utils.data`)."""

from . import data

__all__ = ["data"]
