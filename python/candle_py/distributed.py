"""`candle_py.distributed`: importable so that scripts written for `torch.distributed`
can check for it, as on a PyTorch build without distributed support.

candle_py has no process groups or collective communication: `is_available()` and
`is_initialized()` are False, and every other function raises RuntimeError (see
README.md, "Distributed and multi-GPU"). Scripts that guard their distributed code
with `dist.is_available() and dist.is_initialized()` run single-process unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, List, NoReturn

__all__ = [
    "is_available", "is_initialized", "init_process_group", "destroy_process_group", "get_rank",
    "get_world_size", "barrier", "all_reduce", "all_gather", "broadcast", "reduce", "gather",
    "scatter", "new_group", "get_backend", "is_nccl_available", "is_gloo_available",
    "is_mpi_available", "is_torchelastic_launched",
]  # fmt: skip

_MESSAGE = (
    "candle_py.distributed: candle_py has no distributed backend (no process groups or collectives); "
    "run single-process, or see README.md, 'Distributed and multi-GPU'"
)


def is_available() -> bool:
    """False: this build has no distributed package (as a PyTorch build without it)."""
    return False


def is_initialized() -> bool:
    """False: no process group can be initialized."""
    return False


def is_nccl_available() -> bool:
    """False: no NCCL backend."""
    return False


def is_gloo_available() -> bool:
    """False: no Gloo backend."""
    return False


def is_mpi_available() -> bool:
    """False: no MPI backend."""
    return False


def is_torchelastic_launched() -> bool:
    """False: candle_py processes are never launched as an elastic group."""
    return False


def _unsupported(name: str) -> Callable[..., NoReturn]:
    def fn(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(f"{name}(): {_MESSAGE}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"`torch.distributed.{name}`: raises RuntimeError (candle_py has no distributed backend)."
    return fn


_RAISING: List[str] = [
    "init_process_group", "destroy_process_group", "get_rank", "get_world_size", "barrier",
    "all_reduce", "all_gather", "broadcast", "reduce", "gather", "scatter", "new_group", "get_backend",
]  # fmt: skip
init_process_group = _unsupported("init_process_group")
destroy_process_group = _unsupported("destroy_process_group")
get_rank = _unsupported("get_rank")
get_world_size = _unsupported("get_world_size")
barrier = _unsupported("barrier")
all_reduce = _unsupported("all_reduce")
all_gather = _unsupported("all_gather")
broadcast = _unsupported("broadcast")
reduce = _unsupported("reduce")
gather = _unsupported("gather")
scatter = _unsupported("scatter")
new_group = _unsupported("new_group")
get_backend = _unsupported("get_backend")
