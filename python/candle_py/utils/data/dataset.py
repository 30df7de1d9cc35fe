"""`candle_py.utils.data.dataset`: PyTorch's dataset classes (`Dataset`,
`IterableDataset`, `TensorDataset`, `StackDataset`, `ConcatDataset`,
`ChainDataset`, `Subset`) and `random_split`."""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Any, Dict, Generic, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from ... import _core
from ..._core import Generator, ShapeError, Tensor

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset", "random_split",
]  # fmt: skip

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define `__getitem__` and usually `__len__`.
    `a + b` is `ConcatDataset([a, b])`."""

    # No `__len__` here, as in PyTorch: a dataset without one has no length (and
    # `list()` of a stream must not trip over an inherited one that raises).

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset[T_co]") -> "ConcatDataset[T_co]":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream: subclasses define `__iter__`. A DataLoader reads
    it in order (no sampler, no shuffle). `a + b` is `ChainDataset([a, b])`."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: Dataset[T_co]) -> "ChainDataset":  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[Tuple[Tensor, ...]]):
    """Samples are the i-th rows of each tensor (all must share dim 0)."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        ts = [t if isinstance(t, Tensor) else _core.tensor(t) for t in tensors]
        n = ts[0].shape[0] if ts[0].ndim else 0
        if any(t.ndim == 0 or t.shape[0] != n for t in ts):
            raise ShapeError(f"TensorDataset: size mismatch between tensors, dim 0 sizes {[list(t.shape)[:1] for t in ts]}")
        self.tensors = tuple(ts)

    def __getitem__(self, index: Any) -> Tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class StackDataset(Dataset[Any]):
    """Datasets of one length read side by side: `StackDataset(a, b)[i]` is
    `(a[i], b[i])`, `StackDataset(x=a, y=b)[i]` is `{"x": a[i], "y": b[i]}`."""

    _length: int

    def __init__(self, *args: Dataset[Any], **kwargs: Dataset[Any]) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output, but both types are given."
            )
        parts: Sequence[Any] = args if args else list(kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(self._length != len(d) for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets: Union[Tuple[Dataset[Any], ...], Dict[str, Dataset[Any]]] = args if args else dict(kwargs)

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after another; index `i` finds its dataset by the
    running lengths (`cumulative_sizes`). Negative indices count from the end."""

    datasets: List[Dataset[T_co]]
    cumulative_sizes: List[int]

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        sizes, total = [], 0
        for d in self.datasets:
            total += len(d)  # type: ignore[arg-type]
            sizes.append(total)
        self.cumulative_sizes = sizes

    @property
    def cummulative_sizes(self) -> List[int]:
        """PyTorch's deprecated misspelling of `cumulative_sizes`."""
        warnings.warn("cummulative_sizes attribute is renamed to cumulative_sizes", DeprecationWarning, stacklevel=2)
        return self.cumulative_sizes

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        offset = idx - (self.cumulative_sizes[which - 1] if which > 0 else 0)
        if which >= len(self.datasets):
            raise IndexError(f"ConcatDataset index {idx} is out of range for length {len(self)}")
        return self.datasets[which][offset]


class ChainDataset(IterableDataset[Any]):
    """Iterable datasets read one after another."""

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)  # type: ignore[arg-type]
        return total


class Subset(Dataset[T_co]):
    """The items of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]  # type: ignore[index]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset[T], lengths: Sequence[Union[int, float]], generator: Optional[Generator] = None) -> List[Subset[T]]:
    """Split into non-overlapping random subsets of the given lengths, or of the
    given fractions of `len(dataset)` (floored, the remainder handed out one by one
    from the first subset on), drawing the permutation from `generator` (the
    default generator when None)."""
    n = len(dataset)  # type: ignore[arg-type]
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes: List[int] = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * frac)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=2)
    else:
        sizes = [int(x) for x in lengths]
    if sum(sizes) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _core._randperm_list(n, generator)
    out, start = [], 0
    for size in sizes:
        out.append(Subset(dataset, perm[start : start + size]))
        start += size
    return out
