"""Argument checks shared by the functional families."""

from __future__ import annotations

from typing import Any

from ..._core import Tensor


def _check_tensor(x: Any, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x
