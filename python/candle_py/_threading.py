"""Intra-op thread count, as `torch.set_num_threads` / `torch.get_num_threads`.

Kernels split large ops over a pool of threads. By default that is rayon's global
pool: as many threads as cores this process may use, or `RAYON_NUM_THREADS`, or
`OMP_NUM_THREADS` (which torch reads too) when that is set. `set_num_threads(n)`
moves every later op to a pool of `n` threads; `n=1` keeps all work on the calling
thread's pool of one. After `os.fork()` the child gets a fresh pool of the same size
on first use (the parent's threads do not exist in the child), so forked workers
(`multiprocessing`, Gunicorn, Celery) run parallel ops instead of hanging.

candle_py runs no inter-op pool (there is no `torch.jit.fork`): the inter-op
setters keep the value so that it reads back, and follow torch's rules for when
they may be called.
"""

from __future__ import annotations

import operator

from . import _core

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads"]

_interop_set = False


def _positive(name: str, n: object) -> int:
    try:
        v = operator.index(n)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name}(): argument 'int' must be int, not {type(n).__name__}") from None
    if v <= 0:
        raise RuntimeError(f"{name}: expects a positive integer, got {v}")
    return v


def set_num_threads(int: int) -> None:  # noqa: A002 - torch's parameter name
    """Use `int` threads for intra-op parallelism from now on (torch.set_num_threads)."""
    _core._set_num_threads(_positive("set_num_threads", int))


def get_num_threads() -> int:
    """The number of threads used for intra-op parallelism (torch.get_num_threads)."""
    return _core._get_num_threads()  # type: ignore[no-any-return]


def set_num_interop_threads(int: int) -> None:  # noqa: A002 - torch's parameter name
    """Record the inter-op thread count (torch.set_num_interop_threads); candle_py has
    no inter-op pool, so nothing else changes. As in torch, it may be set only once."""
    global _interop_set
    v = _positive("set_num_interop_threads", int)
    if _interop_set:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or set_num_interop_threads called")
    _core._set_num_interop_threads(v)
    _interop_set = True


def get_num_interop_threads() -> int:
    """The inter-op thread count (torch.get_num_interop_threads)."""
    return _core._get_num_interop_threads()  # type: ignore[no-any-return]
