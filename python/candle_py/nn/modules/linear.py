"""`candle_py.nn.modules.linear`: the import path of `torch.nn.modules.linear`.

Its names resolve lazily to the classes of `candle_py.nn` (so a class added to
`candle_py.nn` later appears here too); a name PyTorch has here that candle_py
lacks raises AttributeError, and `__all__` lists the ones present.
"""

from __future__ import annotations

from typing import Any, List

from ._lazy import lookup, present

_NAMES = (
    "Bilinear",
    "Identity",
    "LazyLinear",
    "Linear",
)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return present(_NAMES) + ["NonDynamicallyQuantizableLinear"]
    if name == "NonDynamicallyQuantizableLinear":  # torch has it here only, not in torch.nn
        from ..linear import NonDynamicallyQuantizableLinear

        return NonDynamicallyQuantizableLinear
    return lookup(__name__, _NAMES, name)


def __dir__() -> List[str]:
    return present(_NAMES) + ["NonDynamicallyQuantizableLinear"]
