"""`candle_py.utils.data.sampler`: PyTorch's samplers. Each yields dataset indices
lazily (a `RandomSampler` of 10^10 samples gives its first index at once)."""

from __future__ import annotations

from typing import Any, Generic, Iterable, Iterator, List, Optional, Sequence, Sized, TypeVar, Union

from ... import _core
from ..._core import Generator, Tensor

__all__ = [
    "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
]  # fmt: skip

T_co = TypeVar("T_co", covariant=True)

# Draws per call when sampling with replacement: small enough to start at once,
# large enough that the per-call cost is amortized (PyTorch draws 32 too).
_CHUNK = 32


class Sampler(Generic[T_co]):
    """Base class: subclasses define `__iter__` over indices (and `__len__` when known)."""

    def __init__(self, data_source: Optional[Sized] = None) -> None:
        """PyTorch accepts `data_source` here for subclasses' `super().__init__` calls
        and keeps nothing of it; subclasses store what they iterate."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


def _check_positive(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


def _fresh_generator() -> Generator:
    """A generator seeded from the default one: each pass of a sampler built without
    `generator=` sees a new order, and the whole run follows `manual_seed`."""
    seed = int(_core.empty((), dtype=_core.int64).random_().item())
    return Generator().manual_seed(seed)


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices of `data_source`: permutations (without replacement; more
    than `len` samples continue with a new permutation) or independent uniform
    draws (with replacement), `num_samples` of them (default `len(data_source)`)."""

    def __init__(
        self, data_source: Sized, replacement: bool = False, num_samples: Optional[int] = None, generator: Optional[Generator] = None
    ) -> None:
        self.data_source, self.replacement, self._num_samples, self.generator = data_source, replacement, num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        _check_positive("num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        g = self.generator if self.generator is not None else _fresh_generator()
        if self.replacement:
            for _ in range(self.num_samples // _CHUNK):
                yield from _core.randint(0, n, (_CHUNK,), generator=g).tolist()
            yield from _core.randint(0, n, (self.num_samples % _CHUNK,), generator=g).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from _core._randperm_list(n, g)
            yield from _core._randperm_list(n, g)[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: Optional[Generator] = None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        for i in _core._randperm_list(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """`num_samples` indices in [0, len(weights)) drawn with probabilities
    proportional to `weights` (`multinomial`), with or without replacement."""

    def __init__(
        self,
        weights: Union[Sequence[float], Tensor],
        num_samples: int,
        replacement: bool = True,
        generator: Optional[Generator] = None,
    ) -> None:
        _check_positive("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = weights.to(_core.float64) if isinstance(weights, Tensor) else _core.tensor(weights, dtype=_core.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights, self.num_samples, self.replacement, self.generator = w, num_samples, replacement, generator

    def __iter__(self) -> Iterator[int]:
        drawn = _core.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[List[int]]):
    """Lists of `batch_size` consecutive indices of `sampler`; the last shorter one
    is dropped when `drop_last`."""

    def __init__(self, sampler: Union[Sampler[int], Iterable[int]], batch_size: int, drop_last: bool) -> None:
        _check_positive("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[List[int]]:
        batch: List[int] = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
