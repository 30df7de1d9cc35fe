"""`candle_py.safetensors`: the same calls as `safetensors.torch`.

`load_file` memory-maps the file and validates its header (lengths, offsets,
dtype/shape byte counts, duplicate names, overflowing shapes) before building
any tensor, so a corrupt or hostile file raises a one-line ValueError naming
the problem and costs no allocation beyond its header. `save_file` is atomic:
a temporary file in the same folder, fsynced, then renamed over the target, so
a writer killed mid-save leaves the previous file intact.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

from ._core import Tensor
from ._core import safetensors as _st

__all__ = ["load_file", "load", "save_file", "save", "load_metadata"]

PathLike = Union[str, "os.PathLike[str]"]


def load_file(filename: PathLike, device: Union[str, int, None] = "cpu") -> Dict[str, Tensor]:
    """Read every tensor of a `.safetensors` file into a dict (names sorted).

    The file is memory-mapped and validated first; a broken file raises ValueError."""
    return _st.load_file(os.fspath(filename), device)  # type: ignore[no-any-return]


def load(data: bytes) -> Dict[str, Tensor]:
    """Read tensors from the bytes of a safetensors file."""
    return _st.load(data)  # type: ignore[no-any-return]


def load_metadata(filename: PathLike) -> Optional[Dict[str, str]]:
    """The file's `__metadata__` string map, or None."""
    return _st.load_metadata(os.fspath(filename))  # type: ignore[no-any-return]


def save(tensors: Dict[str, Tensor], metadata: Optional[Dict[str, str]] = None) -> bytes:
    """Serialize tensors to safetensors bytes."""
    return _st.save(tensors, metadata)  # type: ignore[no-any-return]


def save_file(tensors: Dict[str, Tensor], filename: PathLike, metadata: Optional[Dict[str, str]] = None) -> None:
    """Write tensors to a `.safetensors` file, atomically."""
    _st.save_file(tensors, os.fspath(filename), metadata)
