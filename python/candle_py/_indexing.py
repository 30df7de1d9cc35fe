"""Advanced indexing (integer and boolean index tensors, lists, arrays).

PyTorch follows NumPy's rules for advanced indexing, so NumPy computes which
elements a key selects, as row-major offsets into the tensor; the core then
gathers them (differentiably) or writes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core import Tensor, from_numpy


def _np_key(key: Any) -> Any:
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    if isinstance(key, Tensor):
        a = np.asarray(key)
        if a.dtype.kind == "f":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    if isinstance(key, list):
        a = np.asarray(key)
        if a.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return a
    return key


def _selected(t: Tensor, key: Any) -> np.ndarray:
    shape = tuple(t.shape)
    base = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    try:
        return np.asarray(base[_np_key(key)])
    except IndexError as e:
        raise IndexError(f"index: {e}") from None


def getitem_advanced(t: Tensor, key: Any) -> Tensor:
    """`t[key]` for a key with index tensors, lists or arrays: a differentiable gather of the selected elements."""
    sel = _selected(t, key)
    offsets = from_numpy(np.ascontiguousarray(sel.reshape(-1)))
    return t.reshape(-1).index_select(0, offsets).reshape(sel.shape)


def logical_offsets(t: Tensor, key: Any) -> tuple[list[int], list[int]]:
    """The row-major offsets of the elements `key` selects in `t`, and the shape of the selection."""
    sel = _selected(t, key)
    return sel.reshape(-1).tolist(), list(sel.shape)
