"""`candle_py.Size`: the class of `Tensor.shape` and `Tensor.size()` (`torch.Size`).

A `tuple` of ints, so everything that takes a tuple takes it; slicing, `+` and `*`
keep the class, and `numel()` gives the product. The core makes shapes through
`tuple.__new__(Size, dims)` (registered at import with `_core._set_size_type`),
so reading a shape never runs `Size.__new__`'s checks.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Iterable, SupportsIndex, Tuple, Union, overload

__all__ = ["Size"]


class Size(Tuple[int, ...]):
    """A tensor's shape: a tuple of ints (`torch.Size`)."""

    __slots__ = ()
    __module__ = "candle_py"

    def __new__(cls, sizes: Iterable[Any] = ()) -> Size:
        items = []
        for i, v in enumerate(sizes):
            # Accept what `operator.index` accepts (ints, NumPy ints, 0-d integer
            # tensors), as torch does; floats are refused with torch's message.
            try:
                items.append(operator.index(v))
            except TypeError:
                raise TypeError(f"candle_py.Size() takes an iterable of 'int' (item {i} is '{type(v).__name__}')") from None
        return tuple.__new__(cls, items)

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds (1 for `Size([])`)."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"candle_py.Size({list(self)})"

    __str__ = __repr__

    @overload
    def __getitem__(self, key: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, key: slice) -> Size: ...
    def __getitem__(self, key: Union[SupportsIndex, slice]) -> Union[int, Size]:
        if isinstance(key, slice):
            return tuple.__new__(Size, tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    def __add__(self, other: Tuple[Any, ...]) -> Size:  # type: ignore[override]
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other: Tuple[Any, ...]) -> Size:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n: SupportsIndex) -> Size:
        return tuple.__new__(Size, tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Size, (tuple(self),))
