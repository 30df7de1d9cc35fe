"""`candle_py.backends.opt_einsum`: `torch.backends.opt_einsum`'s switches.

candle_py does not use the `opt_einsum` package to order contractions, so
`is_available()` is False; `enabled` (False, as PyTorch without the package) and
`strategy` (None, as PyTorch while unavailable) are kept settable and select nothing.
"""

from __future__ import annotations

from typing import Optional

from ._flags import install

__all__ = ["enabled", "strategy", "is_available", "get_opt_einsum"]

enabled: bool = False
strategy: Optional[str] = None


def is_available() -> bool:
    """False: the opt_einsum package is not used by candle_py."""
    return False


def get_opt_einsum() -> None:
    """None: the opt_einsum package is not used (PyTorch returns None without it)."""
    return None


install(__name__, frozenset({"enabled"}))
