"""`candle_py.utils.data`: PyTorch's `Dataset`, `TensorDataset`, `Subset`,
`random_split`, `DataLoader` and `default_collate`.

Shuffling draws from the generator `candle_py.manual_seed` seeds, so a seeded
run sees the same batches every time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Generic, Iterator, List, Optional, TypeVar

import numpy as np

from ... import _core
from ..._core import ShapeError, Tensor

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate"]

T = TypeVar("T")


class Dataset(Generic[T]):
    """A map-style dataset: subclasses define `__getitem__` and `__len__`."""

    def __getitem__(self, index: int) -> T:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")


class TensorDataset(Dataset[tuple]):
    """Samples are the i-th rows of each tensor (all must share dim 0)."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        ts = [t if isinstance(t, Tensor) else _core.tensor(t) for t in tensors]
        n = ts[0].shape[0] if ts[0].ndim else 0
        if any(t.ndim == 0 or t.shape[0] != n for t in ts):
            raise ShapeError(f"TensorDataset: size mismatch between tensors, dim 0 sizes {[list(t.shape)[:1] for t in ts]}")
        self.tensors = tuple(ts)

    def __getitem__(self, index: int) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T]):
    """The items of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset[T], indices: Sequence[int]) -> None:
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, idx: int) -> T:
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset[T], lengths: Sequence[float], generator: Any = None) -> List[Subset[T]]:
    """Split into non-overlapping random subsets of the given lengths (or fractions)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
    else:
        sizes = [int(x) for x in lengths]
    if sum(sizes) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _core._randperm_list(n)
    out, start = [], 0
    for size in sizes:
        out.append(Subset(dataset, perm[start : start + size]))
        start += size
    return out


def default_collate(batch: List[Any]) -> Any:
    """Stack samples into a batch: tensors and arrays are stacked into one tensor,
    numbers become a tensor, tuples/lists/dicts are collated field by field."""
    first = batch[0]
    if isinstance(first, Tensor):
        return _core.stack(batch, 0)
    if isinstance(first, np.ndarray):
        return _core.from_numpy(np.stack(batch))
    if isinstance(first, bool):
        return _core.tensor([bool(b) for b in batch])
    if isinstance(first, int):
        return _core.tensor([int(b) for b in batch])
    if isinstance(first, np.generic):  # NumPy scalars keep their dtype
        return _core.from_numpy(np.array(batch))
    if isinstance(first, float):
        return _core.tensor([float(b) for b in batch], dtype=_core.float64)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(first, Sequence):
        if any(len(b) != len(first) for b in batch):
            raise ValueError("default_collate: each element in the batch should be of equal size")
        collated = [default_collate(list(s)) for s in zip(*batch)]
        return tuple(collated) if isinstance(first, tuple) else collated
    raise TypeError(f"default_collate: batch must contain tensors, arrays, numbers, dicts or lists; found {type(first).__name__}")


class DataLoader(Generic[T]):
    """Batches of a dataset: `batch_size`, `shuffle`, `drop_last`, `collate_fn`.

    Iterating a `TensorDataset` without a custom `collate_fn` gathers each
    batch with one `index_select` per tensor instead of stacking rows."""

    def __init__(
        self,
        dataset: Dataset[T],
        batch_size: Optional[int] = 1,
        shuffle: Optional[bool] = None,
        sampler: Optional[Sequence[int]] = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Optional[Callable[[List[T]], Any]] = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Any = None,
        generator: Any = None,
        **kwargs: Any,
    ) -> None:
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size <= 0):
            raise ValueError(f"DataLoader: batch_size should be a positive integer, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        self.dataset, self.batch_size, self.shuffle = dataset, batch_size, bool(shuffle)
        self.sampler, self.drop_last, self.num_workers = sampler, drop_last, num_workers
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn or default_collate
        self._fast = collate_fn is None and isinstance(dataset, TensorDataset)

    def _order(self) -> List[int]:
        if self.sampler is not None:
            return list(self.sampler)
        n = len(self.dataset)
        return _core._randperm_list(n) if self.shuffle else list(range(n))

    def _batch(self, idx: List[int]) -> Any:
        if self._fast:
            ds: TensorDataset = self.dataset  # type: ignore[assignment]
            index = _core.tensor(idx, device=ds.tensors[0].device if ds.tensors else None)
            return tuple(t.index_select(0, index) for t in ds.tensors)
        return self.collate_fn([self.dataset[i] for i in idx])

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is not None:
            for idx in self.batch_sampler:
                yield self._batch(list(idx))
            return
        order = self._order()
        if self.batch_size is None:
            for i in order:
                yield self.dataset[i]
            return
        bs = self.batch_size
        for start in range(0, len(order), bs):
            idx = order[start : start + bs]
            if len(idx) < bs and self.drop_last:
                return
            yield self._batch(idx)

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
