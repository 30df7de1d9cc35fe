"""Small Python-side pieces the core calls back into: result tuples, pickling."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core


class _max_result(NamedTuple):
    values: _core.Tensor
    indices: _core.Tensor


class _min_result(NamedTuple):
    values: _core.Tensor
    indices: _core.Tensor


_max_result.__name__ = "max"
_min_result.__name__ = "min"


def _rebuild(array: np.ndarray, dtype_name: str, requires_grad: bool) -> _core.Tensor:
    if dtype_name == "bool":
        array = array.astype(np.bool_)
    t = _core.tensor(array, dtype=getattr(_core, dtype_name))
    if requires_grad:
        t.requires_grad_(True)
    return t
