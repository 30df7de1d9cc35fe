"""The data side of fit / evaluate / predict: inputs as tensors, (x, y) batches, the epoch meter."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from .. import _core
from .._core import ShapeError, Tensor
from ..utils.data import DataLoader, Dataset

ArrayLike = Any


def _as_tensor(a: ArrayLike, float_dtype: Optional[Any], device: Optional[Any] = None) -> Tensor:
    if isinstance(a, Tensor):
        t = a
    else:
        arr = np.asarray(a)
        if arr.dtype == np.float64 or arr.dtype == np.float16:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.bool_:
            arr = arr.astype(np.float32)
        t = _core.from_numpy(np.ascontiguousarray(arr))
    if float_dtype is not None and t.dtype.is_floating_point and t.dtype != float_dtype:
        t = t.to(float_dtype)
    if device is not None and t.device != device:
        t = t.to(device)  # batches go to the model's device (a DataLoader yields CPU tensors)
    return t.detach()


def _split_batch(batch: Any) -> Tuple[Any, Any]:
    if isinstance(batch, (tuple, list)):
        if len(batch) == 1:
            return batch[0], None
        if len(batch) >= 2:
            return batch[0], batch[1]
    if isinstance(batch, dict):
        for kx, ky in (("x", "y"), ("input", "target"), ("inputs", "targets"), ("features", "labels")):
            if kx in batch:
                return batch[kx], batch.get(ky)
        raise ValueError(f"dict batches need keys 'x'/'y' (or input/target, features/labels), got {list(batch)}")
    return batch, None


class _Batches:
    """Batches of (x, y) from arrays/tensors (sliced with `index_select`) or from a
    DataLoader / Dataset; `len()` is the number of steps."""

    def __init__(
        self, x: Any, y: Any, batch_size: Optional[int], shuffle: bool, float_dtype: Optional[Any], device: Optional[Any] = None
    ) -> None:
        self.float_dtype = float_dtype
        self.device = device
        self.loader: Optional[Iterable[Any]] = None
        self.x: Optional[Tensor] = None
        self.y: Optional[Tensor] = None
        if isinstance(x, Dataset) and not isinstance(x, DataLoader):
            x = DataLoader(x, batch_size=batch_size or 32, shuffle=shuffle)
        if isinstance(x, DataLoader) or (not isinstance(x, (Tensor, np.ndarray, list, tuple)) and hasattr(x, "__iter__")):
            if y is not None:
                raise ValueError("when x is a DataLoader, y must be None (the loader yields (x, y) batches)")
            self.loader = x
            return
        self.x = _as_tensor(x, float_dtype, device)
        self.y = None if y is None else _as_tensor(y, float_dtype, device)
        n = self.x.shape[0]
        if self.y is not None and self.y.shape[0] != n:
            raise ShapeError(f"x and y have different numbers of samples: {n} and {self.y.shape[0]}")
        self.n = n
        self.batch_size = batch_size or 32
        self.shuffle = shuffle

    def __len__(self) -> int:
        if self.loader is not None:
            try:
                return len(self.loader)  # type: ignore[arg-type]
            except TypeError:
                return 0
        return math.ceil(self.n / self.batch_size)

    def __iter__(self) -> Iterator[Tuple[Tensor, Optional[Tensor]]]:
        if self.loader is not None:
            for batch in self.loader:
                bx, by = _split_batch(batch)
                yield (_as_tensor(bx, self.float_dtype, self.device), None if by is None else _as_tensor(by, None, self.device))
            return
        assert self.x is not None
        if not self.shuffle and self.batch_size >= self.n:
            yield self.x, self.y
            return
        order = _core.randperm(self.n, device=self.x.device) if self.shuffle else None
        for start in range(0, self.n, self.batch_size):
            stop = min(start + self.batch_size, self.n)
            if order is None:
                yield self.x[start:stop], (None if self.y is None else self.y[start:stop])
            else:
                idx = order[start:stop]
                yield self.x.index_select(0, idx), (None if self.y is None else self.y.index_select(0, idx))


class _Meter:
    """Running, sample-weighted means of the loss and metrics over an epoch."""

    def __init__(self, names: List[str], roots: List[bool]) -> None:
        self.names, self.roots = names, roots
        self.sums = [0.0] * len(names)
        self.count = 0

    def add(self, values: List[float], n: int) -> None:
        for i, v in enumerate(values):
            self.sums[i] += v * n
        self.count += n

    def result(self, prefix: str = "") -> Dict[str, float]:
        out: Dict[str, float] = OrderedDict()
        for name, s, root in zip(self.names, self.sums, self.roots):
            v = s / max(self.count, 1)
            out[prefix + name] = math.sqrt(v) if root else v
        return out


def _scalar(v: Any) -> float:
    if isinstance(v, Tensor):
        return float(v.detach().item())
    return float(v)


def _count(t: Tensor) -> int:
    return t.shape[0] if t.ndim else 1
