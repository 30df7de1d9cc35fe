"""`candle_py.finfo` / `candle_py.iinfo`: the numerical limits of a dtype (`torch.finfo`,
`torch.iinfo`), for every float and integer dtype candle_py has.

The float limits follow from each format's significand width and exponent range
(IEEE 754 binary16/32/64 and bfloat16), exactly as PyTorch reports them.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

from . import _core

__all__ = ["finfo", "iinfo"]

# name -> (bits, significand bits including the implicit one, largest exponent, smallest normal exponent)
_FLOAT_FORMATS: Dict[str, Tuple[int, int, int, int]] = {
    "float16": (16, 11, 15, -14),
    "bfloat16": (16, 8, 127, -126),
    "float32": (32, 24, 127, -126),
    "float64": (64, 53, 1023, -1022),
}

# name -> (bits, signed)
_INT_FORMATS: Dict[str, Tuple[int, bool]] = {
    "uint8": (8, False),
    "int16": (16, True),
    "int32": (32, True),
    "int64": (64, True),
    "uint32": (32, False),
}


def _g(v: float) -> str:
    """PyTorch's short number format in the finfo/iinfo repr (`%g`, six digits)."""
    return f"{v:.6g}"


class finfo:
    """Machine limits of a floating point dtype (`torch.finfo`): `bits`, `eps`
    (the gap between 1 and the next float), `max`, `min` (`-max`), `tiny` and
    `smallest_normal` (the smallest positive normal number), `resolution`
    (`10 ** -precision`, the decimal precision) and `dtype` (its name).
    `finfo()` describes the default dtype (`get_default_dtype()`)."""

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str

    def __init__(self, type: Optional[_core.dtype] = None) -> None:
        dt = _core.get_default_dtype() if type is None else type
        if not isinstance(dt, _core.dtype):
            raise TypeError(f"finfo(): argument 'type' must be candle_py.dtype, not {dt.__class__.__name__}")
        fmt = _FLOAT_FORMATS.get(dt.name)
        if fmt is None:
            raise TypeError(f"candle_py.finfo() requires a floating point input type. Use candle_py.iinfo to handle '{dt}'")
        bits, digits, emax, emin = fmt
        self.bits = bits
        self.eps = math.ldexp(1.0, 1 - digits)
        self.max = math.ldexp(2.0 - self.eps, emax)
        self.min = -self.max
        self.tiny = self.smallest_normal = math.ldexp(1.0, emin)
        # Decimal digits the significand holds for sure (6 for float32, 15 for float64).
        self.resolution = 10.0 ** -math.floor((digits - 1) * math.log10(2))
        self.dtype = dt.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, max={_g(self.max)}, eps={_g(self.eps)}, "
            f"smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, dtype={self.dtype})"
        )


class iinfo:
    """Machine limits of an integer dtype (`torch.iinfo`): `bits`, `max`, `min` and
    `dtype` (its name). `bool` is not an integer type here, as in PyTorch."""

    bits: int
    max: int
    min: int
    dtype: str

    def __init__(self, type: _core.dtype) -> None:
        if not isinstance(type, _core.dtype):
            raise TypeError(f"iinfo(): argument 'type' must be candle_py.dtype, not {type.__class__.__name__}")
        if type.name == "bool":
            raise TypeError("candle_py.bool is not supported by candle_py.iinfo")
        fmt = _INT_FORMATS.get(type.name)
        if fmt is None:
            raise TypeError(f"candle_py.iinfo() requires an integer input type. Use candle_py.finfo to handle '{type}'")
        bits, signed = fmt
        self.bits = bits
        self.min = -(1 << (bits - 1)) if signed else 0
        self.max = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        self.dtype = type.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={_g(float(self.min))}, max={_g(float(self.max))}, dtype={self.dtype})"
