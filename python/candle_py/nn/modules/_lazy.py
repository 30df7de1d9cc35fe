"""Lazy re-exports from `candle_py.nn` for the `nn.modules.*` import paths.

The path modules look names up in `candle_py.nn` when asked (not at import), so
they never import `candle_py.nn` themselves (no import cycle: `nn` imports them)
and classes added to `candle_py.nn` later are found."""

from __future__ import annotations

import sys
from typing import Any, List, Sequence


def _nn() -> Any:
    return sys.modules["candle_py.nn"]


def present(names: Sequence[str]) -> List[str]:
    """The names of `names` that `candle_py.nn` has now."""
    nn = _nn()
    return [n for n in names if hasattr(nn, n)]


def lookup(module: str, names: Sequence[str], name: str) -> Any:
    """`candle_py.nn.<name>` when `name` is one of this path module's names."""
    if name in names:
        obj = getattr(_nn(), name, None)
        if obj is not None:
            return obj
        raise AttributeError(f"module {module!r} has no attribute {name!r} (PyTorch has it; candle_py does not provide it yet)")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
