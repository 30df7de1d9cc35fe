"""`candle_py.nn.modules.pooling`: the import path of `torch.nn.modules.pooling`.

Its names resolve lazily to the classes of `candle_py.nn` (so a class added to
`candle_py.nn` later appears here too); a name PyTorch has here that candle_py
lacks raises AttributeError, and `__all__` lists the ones present.
"""

from __future__ import annotations

from typing import Any, List

from ._lazy import lookup, present

_NAMES = (
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return present(_NAMES)
    return lookup(__name__, _NAMES, name)


def __dir__() -> List[str]:
    return present(_NAMES)
