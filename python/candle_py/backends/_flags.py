"""The settable-flags module type shared by the `backends` submodules."""

from __future__ import annotations

import sys
import types
from typing import Any, FrozenSet


class FlagModule(types.ModuleType):
    """A module whose flag attributes are type-checked on assignment, so a typo such
    as `cudnn.benchmrk = True` raises instead of passing silently (as PyTorch's
    `CudnnModule` does for its known flags)."""

    _bool_flags: FrozenSet[str] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._bool_flags and not isinstance(value, bool):
            raise TypeError(f"{self.__name__}.{name} must be a bool, got {type(value).__name__}")
        super().__setattr__(name, value)


def install(module_name: str, bool_flags: FrozenSet[str]) -> None:
    """Give the module `module_name` the FlagModule behaviour for `bool_flags`."""
    mod = sys.modules[module_name]
    mod.__class__ = type(f"{module_name.rsplit('.', 1)[-1]}_module", (FlagModule,), {"_bool_flags": bool_flags})
