"""`candle_py.random`: PyTorch's `torch.random` — seeding and the state of the
default generator (`candle_py.default_generator`), and `fork_rng`.

Every draw made without `generator=` (factories, samplers, dropout, parameter
init, DataLoader shuffling) comes from the default generator, so seeding it makes
a run reproducible. Generator states are candle_py's own (a ChaCha12 stream, 64
bytes), not PyTorch's Mersenne Twister: states and values do not carry over
between the two libraries.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, Optional

from ._core import Generator, Tensor, default_generator

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng", "Generator", "default_generator"]


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (any int in [-2^63, 2^64 - 1]; negative seeds are
    taken as their two's complement) and return it."""
    try:
        s = int(seed)
    except OverflowError as e:  # int(inf): a bad value, like int(nan)'s ValueError
        raise ValueError(f"manual_seed: {e}") from None
    return default_generator.manual_seed(s)


def seed() -> int:
    """Seed the default generator from the operating system's entropy; return that seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state, as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from `get_rng_state()`'s tensor."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(
    devices: Optional[Iterable[Any]] = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str = "cuda",
) -> Iterator[None]:
    """Run the block with the default generator's state saved, and restore it on exit
    (draws inside the block do not advance the generator outside it). CUDA draws come
    from the same generator here, so `devices` and `device_type` select nothing more."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
