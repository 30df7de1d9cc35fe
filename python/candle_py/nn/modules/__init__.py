"""`candle_py.nn.modules`: the import paths of `torch.nn.modules`
(`from candle_py.nn.modules.linear import Linear`, `nn.modules.conv.Conv2d`, ...).

Each submodule is named as PyTorch's and resolves its names lazily to the classes
of `candle_py.nn`; this package resolves the union of them the same way.
"""

from __future__ import annotations

from typing import Any, List

from . import (
    activation,
    adaptive,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    module,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
)
from ._lazy import lookup, present

_SUBMODULES = (
    "activation",
    "adaptive",
    "batchnorm",
    "channelshuffle",
    "container",
    "conv",
    "distance",
    "dropout",
    "flatten",
    "fold",
    "instancenorm",
    "linear",
    "loss",
    "module",
    "normalization",
    "padding",
    "pixelshuffle",
    "pooling",
    "rnn",
    "sparse",
    "transformer",
    "upsampling",
)
_NAMES = tuple(
    n
    for m in (
        activation,
        adaptive,
        batchnorm,
        channelshuffle,
        container,
        conv,
        distance,
        dropout,
        flatten,
        fold,
        instancenorm,
        linear,
        loss,
        module,
        normalization,
        padding,
        pixelshuffle,
        pooling,
        rnn,
        sparse,
        transformer,
        upsampling,
    )
    for n in m._NAMES
)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return [*_SUBMODULES, *present(_NAMES)]
    return lookup(__name__, _NAMES, name)


def __dir__() -> List[str]:
    return [*_SUBMODULES, *present(_NAMES)]
