"""`candle_py.utils.data.dataloader`: PyTorch's `DataLoader`, `default_collate` and
`default_convert`. Batches are read in this process (`num_workers` is accepted
and the reading stays in-process)."""

from __future__ import annotations

import collections.abc
import itertools
import multiprocessing
import warnings
from typing import Any, Callable, Generic, Iterable, Iterator, List, Optional, Sequence, TypeVar, Union

import numpy as np

from ... import _core
from ..._core import Generator, Tensor
from ._workers import _MultiProcessIter
from .dataset import Dataset, IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert"]

T_co = TypeVar("T_co", covariant=True)

_COLLATE_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_string_array(a: Any) -> bool:
    """NumPy arrays of strings or objects have no tensor form."""
    return isinstance(a, np.ndarray) and a.dtype.char in "SaUO"


def default_convert(data: Any) -> Any:
    """What a DataLoader without batching does to each sample: NumPy arrays and
    scalars become tensors, containers are converted element by element, anything
    else is passed through."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) and not _is_string_array(data):
        return _core.from_numpy(data)
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return _core.from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})  # type: ignore[call-arg]
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])  # type: ignore[call-arg]
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge samples into a batch as PyTorch does: tensors and NumPy arrays are
    stacked along a new dim 0, Python floats become a float64 tensor, ints an int64
    one (bools a bool one), NumPy scalars keep their dtype, strings stay a list;
    dicts, namedtuples and sequences are collated field by field (a tuple sample
    gives a list of fields, as in PyTorch)."""
    elem = batch[0]  # an empty batch raises IndexError, as in PyTorch
    if isinstance(elem, Tensor):
        return _core.stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if _is_string_array(elem):
            raise TypeError(_COLLATE_ERR.format(elem.dtype))
        return _core.from_numpy(np.stack(batch))
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        return _core.from_numpy(np.array(batch))
    if isinstance(elem, bool):
        return _core.tensor([bool(b) for b in batch])
    if isinstance(elem, int):
        return _core.tensor([int(b) for b in batch], dtype=_core.int64)
    if isinstance(elem, float):
        return _core.tensor([float(b) for b in batch], dtype=_core.float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        fields = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(fields)  # type: ignore[call-arg]
        except TypeError:
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields_l = [default_collate(s) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields_l
        try:
            return type(elem)(fields_l)  # type: ignore[call-arg]
        except TypeError:
            return fields_l
    raise TypeError(_COLLATE_ERR.format(type(elem)))


class DataLoader(Generic[T_co]):
    """Batches of a dataset, as PyTorch's DataLoader: a map-style dataset is read
    through `sampler` (default sequential, or random with `shuffle=True`, drawing
    from `generator`), grouped by a `BatchSampler(sampler, batch_size, drop_last)`
    or the `batch_sampler` given, and merged by `collate_fn`; an `IterableDataset`
    is read in its own order. Indices are consumed lazily, batch by batch.

    Iterating a `TensorDataset` with the default `collate_fn` gathers each batch
    with one `index_select` per tensor instead of stacking rows."""

    def __init__(
        self,
        dataset: Dataset[T_co],
        batch_size: Optional[int] = 1,
        shuffle: Optional[bool] = None,
        sampler: Union[Sampler[Any], Iterable[Any], None] = None,
        batch_sampler: Union[Sampler[List[Any]], Iterable[List[Any]], None] = None,
        num_workers: int = 0,
        collate_fn: Optional[Callable[[List[Any]], Any]] = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Optional[Callable[[int], None]] = None,
        multiprocessing_context: Any = None,
        generator: Optional[Generator] = None,
        *,
        prefetch_factor: Optional[int] = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but got batch_sampler={batch_sampler}"
                )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)  # type: ignore[arg-type]
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        if isinstance(multiprocessing_context, str) and multiprocessing_context not in multiprocessing.get_all_start_methods():
            raise ValueError(
                f"multiprocessing_context option should specify a valid start method in {multiprocessing.get_all_start_methods()!r}, "
                f"but got multiprocessing_context={multiprocessing_context!r}"
            )
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError(
                f"multiprocessing_context can only be used with multi-process loading (num_workers > 0), but got num_workers={num_workers}"
            )
        if pin_memory:
            # As torch without an accelerator: page-locked memory only helps host-to-GPU copies.
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used.",
                stacklevel=2,
            )
        self.multiprocessing_context, self.in_order = multiprocessing_context, in_order
        self._workers: Optional[_MultiProcessIter] = None
        self.worker_init_fn, self.prefetch_factor, self.persistent_workers = worker_init_fn, prefetch_factor, persistent_workers
        auto = self._auto_collation
        self.collate_fn: Callable[[Any], Any] = collate_fn if collate_fn is not None else (default_collate if auto else default_convert)
        self._fast = collate_fn is None and isinstance(dataset, TensorDataset)

    @property
    def _auto_collation(self) -> bool:
        """Batches are built (and collated) here, rather than yielded sample by sample."""
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def _fetch(self, idx: List[Any]) -> Any:
        if self._fast:
            ds: TensorDataset = self.dataset  # type: ignore[assignment]
            index = _core.tensor(list(idx), dtype=_core.int64, device=ds.tensors[0].device)
            return [t.index_select(0, index) for t in ds.tensors]
        getitems = getattr(self.dataset, "__getitems__", None)
        items = getitems(list(idx)) if getitems is not None else [self.dataset[i] for i in idx]
        return self.collate_fn(items)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers > 0:
            # Worker processes (_workers.py); with persistent_workers they serve every epoch.
            if self._workers is None or self._workers.shut:
                self._workers = _MultiProcessIter(self)
            workers = self._workers
            if not self.persistent_workers:
                self._workers = None
            return workers.epoch_iter()
        return self._in_process()

    def _in_process(self) -> Iterator[Any]:
        # As torch, every epoch draws a base seed from the loader's generator first (it
        # seeds worker processes when there are some), so a seeded shuffle gives the
        # same order with and without workers.
        _core.empty((), dtype=_core.int64).random_(generator=self.generator)
        if self._iterable:
            it = iter(self.dataset)  # type: ignore[call-overload]
            if self.batch_size is None:
                for item in it:
                    yield self.collate_fn(item)
                return
            while True:
                batch = list(itertools.islice(it, self.batch_size))
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                yield self.collate_fn(batch)
        elif self.batch_sampler is not None:
            for idx in self.batch_sampler:
                yield self._fetch(idx)
        else:
            for i in self.sampler:  # type: ignore[union-attr]
                yield self.collate_fn(self.dataset[i])

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # type: ignore[arg-type]
        return len(self.sampler)  # type: ignore[arg-type]
