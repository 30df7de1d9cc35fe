"""`candle_py.multiprocessing`: Python's `multiprocessing`, re-exported, plus PyTorch's
sharing-strategy functions (`torch.multiprocessing`).

PyTorch moves tensors between processes through shared memory, by a strategy
("file_descriptor" or "file_system"). candle_py tensors are pickled by value when
they cross a process boundary, except DataLoader batches, whose big CPU tensors
always travel through named shared-memory files (`utils/data/_shared_memory.py`,
the "file_system" mechanism). So the strategy is stored and reported (PyTorch's
default for the platform: "file_descriptor" on Linux, "file_system" elsewhere)
but selects nothing.
"""

from __future__ import annotations

import multiprocessing as _mp
import sys
from multiprocessing import *  # noqa: F403 - torch.multiprocessing re-exports the standard module
from typing import List, Set

__all__: List[str] = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies"]
__all__ += _mp.__all__

_STRATEGIES: Set[str] = {"file_descriptor", "file_system"} if sys.platform != "darwin" else {"file_system"}
_strategy = {"name": "file_descriptor" if sys.platform != "darwin" else "file_system"}


def set_sharing_strategy(new_strategy: str) -> None:
    """Store the sharing strategy (one of `get_all_sharing_strategies()`); candle_py
    pickles tensors by value, so it changes nothing (see the module docstring)."""
    if new_strategy not in _STRATEGIES:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}, expected one of {_STRATEGIES}")
    _strategy["name"] = new_strategy


def get_sharing_strategy() -> str:
    """The sharing strategy last set (the platform's PyTorch default at first)."""
    return _strategy["name"]


def get_all_sharing_strategies() -> Set[str]:
    """The strategies `set_sharing_strategy` accepts on this platform."""
    return set(_STRATEGIES)
