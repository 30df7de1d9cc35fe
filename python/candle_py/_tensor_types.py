"""PyTorch's legacy tensor types: `candle_py.FloatTensor`, `LongTensor`, ...

Each is a constructor with a fixed dtype on the CPU — `FloatTensor([1, 2])` makes a
float32 tensor from data, `FloatTensor(2, 3)` one of that size (zero-filled: Candle
has no uninitialised allocation) — and a type for `isinstance`: a CPU tensor of the
type's dtype is an instance, as in PyTorch. They are not subclasses of `Tensor`
(neither are PyTorch's).
"""

from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Tuple

from . import _core
from ._core import Tensor
from ._size import Size

__all__ = [
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
    "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
]  # fmt: skip


class _TensorType(type):
    """The metaclass of the legacy types: calling one constructs a tensor, and
    `isinstance(x, FloatTensor)` asks whether `x` is a float32 CPU tensor."""

    # Set by each class body: the dtype name, or None for a dtype candle_py lacks.
    _dtype_name: Optional[str]

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and cls._dtype_name is not None and obj.dtype.name == cls._dtype_name and obj.device.type == "cpu"

    @property
    def dtype(cls) -> _core.dtype:
        """The dtype of the tensors this type makes."""
        return cls._dtype()

    @property
    def is_cuda(cls) -> bool:
        """False: the legacy types are CPU types (`torch.cuda.FloatTensor` is not provided)."""
        return False

    @property
    def is_sparse(cls) -> bool:
        """False: candle_py has no sparse layout."""
        return False

    def _dtype(cls) -> _core.dtype:
        if cls._dtype_name is None:
            raise TypeError(f"candle_py.{cls.__name__}: candle_py has no {_MISSING[cls.__name__]} dtype (Candle has none)")
        return getattr(_core, cls._dtype_name)  # type: ignore[no-any-return]

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        dt = cls._dtype()
        if device is not None and _core.device(device).type != "cpu":
            raise RuntimeError(
                f"{cls.__name__}: legacy constructor expects device type: cpu but device type: {_core.device(device).type} was passed"
            )
        if not args:
            return _core.empty(0, dtype=dt)
        if len(args) == 1:
            (a,) = args
            if isinstance(a, Tensor):
                # PyTorch returns the same data for a tensor of the right type and refuses others.
                if a.dtype != dt:
                    raise TypeError(f"{cls.__name__}: expected a tensor of dtype {dt.name}, got {a.dtype.name}")
                return a
            if isinstance(a, Size):
                return _core.zeros(*a, dtype=dt)
            if isinstance(a, str):
                raise TypeError(f"{cls.__name__}(): invalid data type 'str'")
            if not _is_int(a):
                return _core.tensor(a, dtype=dt)
        sizes = tuple(_size_arg(cls.__name__, a) for a in args)
        for s in sizes:
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(sizes)}")
        return _core.zeros(*sizes, dtype=dt)

    def __repr__(cls) -> str:
        return f"<class 'candle_py.{cls.__name__}'>"


# Legacy names whose dtype candle_py does not have.
_MISSING: Dict[str, str] = {"CharTensor": "int8"}


def _is_int(a: Any) -> bool:
    if isinstance(a, bool):
        return False
    try:
        operator.index(a)
    except TypeError:
        return False
    return not isinstance(a, Tensor) or a.ndim == 0


def _size_arg(name: str, a: Any) -> int:
    if isinstance(a, bool) or not _is_int(a):
        raise TypeError(f"{name}(): sizes must be ints, got {type(a).__name__}")
    return operator.index(a)


def _make(name: str, dtype_name: Optional[str], doc: str) -> Any:
    ns: Dict[str, Any] = {"_dtype_name": dtype_name, "__doc__": doc, "__module__": "candle_py"}
    bases: Tuple[type, ...] = ()
    return _TensorType(name, bases, ns)


FloatTensor = _make("FloatTensor", "float32", "Legacy constructor/type of float32 CPU tensors (`torch.FloatTensor`).")
DoubleTensor = _make("DoubleTensor", "float64", "Legacy constructor/type of float64 CPU tensors (`torch.DoubleTensor`).")
HalfTensor = _make("HalfTensor", "float16", "Legacy constructor/type of float16 CPU tensors (`torch.HalfTensor`).")
BFloat16Tensor = _make("BFloat16Tensor", "bfloat16", "Legacy constructor/type of bfloat16 CPU tensors (`torch.BFloat16Tensor`).")
LongTensor = _make("LongTensor", "int64", "Legacy constructor/type of int64 CPU tensors (`torch.LongTensor`).")
IntTensor = _make("IntTensor", "int32", "Legacy constructor/type of int32 CPU tensors (`torch.IntTensor`).")
ShortTensor = _make("ShortTensor", "int16", "Legacy constructor/type of int16 CPU tensors (`torch.ShortTensor`).")
CharTensor = _make(
    "CharTensor", None, "`torch.CharTensor` (int8): present for imports; candle_py has no int8 dtype, so calling it raises TypeError."
)
ByteTensor = _make("ByteTensor", "uint8", "Legacy constructor/type of uint8 CPU tensors (`torch.ByteTensor`).")
BoolTensor = _make("BoolTensor", "bool", "Legacy constructor/type of bool CPU tensors (`torch.BoolTensor`).")
