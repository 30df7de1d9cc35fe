"""`DistributedDataParallel`: importable; candle_py has no distributed backend."""

from __future__ import annotations

from typing import Any

from ..module import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """`torch.nn.parallel.DistributedDataParallel`'s name, for imports. Constructing
    it raises RuntimeError: candle_py has no process groups to synchronise gradients
    over (README.md, "Distributed and multi-GPU")."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "DistributedDataParallel: candle_py has no distributed backend (no process groups or collectives); "
            "run single-process, or see README.md, 'Distributed and multi-GPU'"
        )
