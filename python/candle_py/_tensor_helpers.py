"""Unpickling support for tensors pickled by earlier versions (tensors now pickle
through `Tensor._rebuild`)."""

from __future__ import annotations

from ._core import Tensor

_rebuild = Tensor._rebuild
