"""`candle_py.utils.data.distributed`: PyTorch's `DistributedSampler`. candle_py has
no process group, so `num_replicas` and `rank` must be given explicitly."""

from __future__ import annotations

import math
from typing import Iterator, List, Optional, Sized, TypeVar

from ... import _core
from ..._core import Generator
from .sampler import Sampler

__all__ = ["DistributedSampler"]

T_co = TypeVar("T_co", covariant=True)


class DistributedSampler(Sampler[T_co]):
    """The share of `dataset`'s indices that replica `rank` of `num_replicas` reads:
    every `num_replicas`-th index from `rank` on, of an order that is the same on
    every replica (shuffled with seed `seed + epoch` when `shuffle`), padded by
    repetition to a multiple of `num_replicas`, or cut to one with `drop_last`."""

    def __init__(
        self,
        dataset: Sized,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            # PyTorch reads these from the default process group; candle_py has none.
            raise RuntimeError("Requires distributed package to be available (pass num_replicas and rank explicitly)")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[T_co]:
        n = len(self.dataset)
        if self.shuffle:
            indices: List[int] = _core._randperm_list(n, Generator().manual_seed(self.seed + self.epoch))
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch: with `shuffle`, each epoch sees another order (the same on
        every replica)."""
        self.epoch = epoch
