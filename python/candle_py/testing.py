"""`candle_py.testing`: PyTorch's `torch.testing` (`assert_close`, `assert_allclose`,
`make_tensor`), which test suites of ported programs call.

`assert_close` compares tensors (or NumPy arrays), Python numbers, `None`, and
sequences and mappings of those, recursively, with PyTorch's rules: shape, device,
dtype (unless `check_dtype=False`) and strides (with `check_stride=True`) first, then the
values within `rtol`/`atol` (defaults by dtype: float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5,
float32 1.3e-6/1e-5, float64 1e-7/1e-7, complex alike, exact for integers and bools).
Its `AssertionError` messages are PyTorch's: the mismatch count, and the greatest
absolute and relative differences among the mismatched elements with their index.
The comparison reads the values through NumPy (a test utility, not an op).
"""

from __future__ import annotations

import collections.abc
import math
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._complex import ComplexDType, ComplexTensor
from ._core import Tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]

Msg = Optional[Union[str, Callable[[str], str]]]

# (rtol, atol) by dtype name; integer and bool dtypes compare exactly
_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


class _Mismatch(AssertionError):
    """A failed comparison: its message, and where in the inputs it happened."""

    def __init__(self, text: str, path: Tuple[Any, ...] = ()) -> None:
        super().__init__(text)
        self.text, self.path = text, path


def _tensor_like(x: Any) -> bool:
    return isinstance(x, (Tensor, ComplexTensor, np.ndarray))


def _dtype_name(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return {"float16": "float16", "float32": "float32", "float64": "float64"}.get(x.dtype.name, x.dtype.name)
    return str(x.dtype).rsplit(".", 1)[-1]


def _values(x: Any) -> np.ndarray:
    """The values of a tensor-like as a NumPy array (bfloat16 as float32)."""
    if isinstance(x, np.ndarray):
        return x
    t = x.detach()
    if not isinstance(t, ComplexTensor) and t.dtype == _core.bfloat16:
        t = t.float()
    return np.asarray(t.cpu().numpy())


def _tolerances(names: Sequence[str], rtol: Optional[float], atol: Optional[float]) -> Tuple[float, float]:
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None and atol is not None:
        return float(rtol), float(atol)
    pairs = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _header(what: str, equality: bool) -> str:
    return f"{what} are not {'equal' if equality else 'close'}!\n\n"


def _diff_line(kind: str, diff: Any, idx: Optional[Tuple[int, ...]], tol: float, equality: bool) -> str:
    line = f"{kind.title()} difference: {diff}" if idx is None else f"Greatest {kind} difference: {diff} at index {idx}"
    return line + ("" if equality else f" (up to {tol} allowed)") + "\n"


def _close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """PyTorch's `isclose`: equal, or finite and within `atol + rtol * |e|`."""
    with np.errstate(invalid="ignore", over="ignore"):
        same = a == e
        if a.dtype.kind in "fc":
            near = np.abs(a - e) <= atol + rtol * np.abs(e)
            same = same | (near & np.isfinite(a) & np.isfinite(e))
            if equal_nan:
                same = same | (np.isnan(a) & np.isnan(e))
    return np.asarray(same)


def _compare_tensors(actual: Any, expected: Any, rtol: Optional[float], atol: Optional[float], equal_nan: bool, checks: dict) -> None:
    if tuple(actual.shape) != tuple(expected.shape):
        raise _Mismatch(f"The values for attribute 'shape' do not match: {_size(actual)} != {_size(expected)}.")
    if checks["device"] and not isinstance(actual, np.ndarray) and str(actual.device) != str(expected.device):
        raise _Mismatch(f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.")
    da, de = _dtype_name(actual), _dtype_name(expected)
    if checks["dtype"] and da != de:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.")
    if checks["stride"] and not isinstance(actual, np.ndarray) and tuple(actual.stride()) != tuple(expected.stride()):
        raise _Mismatch(f"The values for attribute 'stride()' do not match: {tuple(actual.stride())} != {tuple(expected.stride())}.")
    rtol_, atol_ = _tolerances([da, de], rtol, atol)
    a, e = _values(actual), _values(expected)
    if a.ndim == 0 and a.dtype.kind in "fc" and not _close(a, e, rtol_, atol_, equal_nan).all():
        # 0-d tensors are reported as PyTorch reports them: as the scalars they hold
        _scalar_message(a.item(), e.item(), rtol_, atol_)
    if da != de:  # check_dtype=False: compared in the common dtype
        common = np.result_type(a, e)
        a, e = a.astype(common), e.astype(common)
    matches = _close(a, e, rtol_, atol_, equal_nan)
    if bool(matches.all()):
        return
    equality = rtol_ == 0 and atol_ == 0
    total, bad = matches.size, int(matches.size - matches.sum())
    text = _header("Tensor-likes", equality) + f"Mismatched elements: {bad} / {total} ({bad / total:.1%})\n"
    if a.dtype.kind not in "fc":  # integers and bools: differences in int64, ratios in float32
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_diff = np.abs(a - e).reshape(-1)
        abs_diff[matches.reshape(-1)] = 0
        # ratios in the floats' own precision (complex: their real type), float32 for integers
        ratio: Any = {"f": a.dtype, "c": np.float32 if a.dtype == np.complex64 else np.float64}.get(a.dtype.kind, np.float32)
        rel_diff = (abs_diff / np.abs(e).reshape(-1)).astype(ratio)
        rel_diff[matches.reshape(-1)] = 0
    if da == "bfloat16" and de == "bfloat16":  # PyTorch takes the differences in bfloat16 too
        abs_diff, rel_diff = (_core.tensor(d).to(_core.bfloat16).float().numpy() for d in (abs_diff, rel_diff))
    for kind, diff, tol in (("absolute", abs_diff, atol_), ("relative", rel_diff, rtol_)):
        i = int(np.argmax(diff))  # the first NaN, else the first greatest
        idx = tuple(int(v) for v in np.unravel_index(i, matches.shape)) if matches.shape else ()
        text += _diff_line(kind, diff[i].item(), idx, tol, equality)
    raise _Mismatch(text.strip())


def _size(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return str(x.shape)
    return f"candle_py.Size({list(x.shape)})"


def _compare_numbers(actual: Any, expected: Any, rtol: Optional[float], atol: Optional[float], equal_nan: bool, checks: dict) -> None:
    if isinstance(actual, bool) or isinstance(expected, bool):
        if type(actual) is not type(expected):
            raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        if actual is not expected:
            raise _Mismatch(f"Booleans mismatch: {actual} is not {expected}")
        return
    if checks["dtype"] and type(actual) is not type(expected):
        raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    floating = isinstance(actual, (float, complex)) or isinstance(expected, (float, complex))
    names = ["complex128" if isinstance(actual, complex) or isinstance(expected, complex) else "float64"] if floating else ["int64"]
    rtol_, atol_ = _tolerances(names, rtol, atol)
    if actual == expected:
        return
    if floating:
        a, e = complex(actual), complex(expected)
        both_nan = (math.isnan(a.real) or math.isnan(a.imag)) and (math.isnan(e.real) or math.isnan(e.imag))
        if equal_nan and both_nan:
            return
        finite = all(math.isfinite(v) for v in (a.real, a.imag, e.real, e.imag))
        if finite and abs(a - e) <= atol_ + rtol_ * abs(e):
            return
    _scalar_message(actual, expected, rtol_, atol_)


def _scalar_message(actual: Any, expected: Any, rtol: float, atol: float) -> None:
    """Raise PyTorch's mismatch message for two scalars."""
    equality = rtol == 0 and atol == 0
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    text = _header("Scalars", equality) + f"Expected {expected} but got {actual}.\n"
    text += _diff_line("absolute", abs_diff, None, atol, equality)
    text += _diff_line("relative", rel_diff, None, rtol, equality)
    raise _Mismatch(text.strip())


def _compare(
    actual: Any, expected: Any, rtol: Optional[float], atol: Optional[float], equal_nan: bool, checks: dict, path: Tuple[Any, ...]
) -> None:
    try:
        if actual is None or expected is None:
            if actual is not expected:
                raise _Mismatch(f"None mismatch: {actual} is not {expected}")
        elif _tensor_like(actual) and _tensor_like(expected) and isinstance(actual, np.ndarray) == isinstance(expected, np.ndarray):
            _compare_tensors(actual, expected, rtol, atol, equal_nan, checks)
        elif isinstance(actual, (int, float, complex)) and isinstance(expected, (int, float, complex)):
            _compare_numbers(actual, expected, rtol, atol, equal_nan, checks)
        elif isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
            ka, ke = list(actual.keys()), list(expected.keys())
            if sorted(map(repr, ka)) != sorted(map(repr, ke)):
                missing = [k for k in ke if k not in actual]
                extra = [k for k in ka if k not in expected]
                raise _Mismatch(
                    "The keys of the mappings do not match:\n"
                    + (f"Missing keys in the actual mapping: {sorted(missing, key=repr)}\n" if missing else "")
                    + (f"Additional keys in the actual mapping: {sorted(extra, key=repr)}" if extra else "")
                )
            for k in ke:
                _compare(actual[k], expected[k], rtol, atol, equal_nan, checks, path + (k,))
        elif _sequence(actual) and _sequence(expected):
            if len(actual) != len(expected):
                raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
            for i, (a, e) in enumerate(zip(actual, expected)):
                _compare(a, e, rtol, atol, equal_nan, checks, path + (i,))
        else:
            raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")
    except _Mismatch as m:
        if not m.path:
            m.path = path
        raise


def _sequence(x: Any) -> bool:
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes))


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: Msg = None,
) -> None:
    """Raise `AssertionError` unless `actual` and `expected` are close (see the module
    docstring); `msg` replaces the message (a callable receives the default one)."""
    checks = {"device": check_device, "dtype": check_dtype, "stride": check_stride, "layout": check_layout}
    try:
        _compare(actual, expected, rtol, atol, equal_nan, checks, ())
    except _Mismatch as m:
        text = m.text
        if m.path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in m.path)
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise AssertionError(text) from None


def assert_allclose(
    actual: Any, expected: Any, rtol: Optional[float] = None, atol: Optional[float] = None, equal_nan: bool = True, msg: str = ""
) -> None:
    """The deprecated `torch.testing.assert_allclose`: `assert_close` without the dtype
    check, NaNs equal by default; a non-tensor `actual` or `expected` becomes a tensor."""
    a = actual if _tensor_like(actual) else _core.tensor(actual)
    e = expected if _tensor_like(expected) else _core.tensor(expected, dtype=getattr(a, "dtype", None))
    if rtol is None and atol is None:  # its own older table: looser than assert_close's
        old = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-5, 1e-8)}
        pairs = [old.get(_dtype_name(x), (0.0, 0.0)) for x in (a, e)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False, check_stride=False, msg=msg or None)


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any,
    low: Optional[float] = None,
    high: Optional[float] = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Any:
    """A tensor of `shape` with values drawn uniformly from `[low, high)` (PyTorch's
    defaults by dtype: floats in [-9, 9), integers in [-9, 10), bools either), as
    `torch.testing.make_tensor`; `noncontiguous` gives a strided view of the same values,
    `exclude_zero` replaces zeros by the smallest positive value (1 for integers)."""
    dims: List[int] = list(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else [int(s) for s in shape]
    if memory_format is not None:
        raise ValueError("make_tensor: memory_format is not supported by candle_py (tensors are row-major)")
    is_complex = isinstance(dtype, ComplexDType)
    real = dtype.to_real() if is_complex else dtype
    if not is_complex and not isinstance(real, _core.dtype):
        raise TypeError(f"make_tensor: dtype must be a candle_py dtype, got {dtype!r}")
    if real == _core.bool:
        if requires_grad:
            raise ValueError("make_tensor: only floating point tensors can require grad, got bool")
        t: Any = _core.randint(0, 2, dims).bool()
    elif not real.is_floating_point:
        ilo = math.ceil(-9 if low is None else low)
        ihi = math.ceil(10 if high is None else high)
        if requires_grad:
            raise ValueError(f"make_tensor: only floating point tensors can require grad, got {real}")
        if ilo >= ihi:
            raise ValueError(f"make_tensor: low ({ilo}) must be less than high ({ihi})")
        t = _core.randint(ilo, ihi, dims, dtype=real)
        if exclude_zero:
            t = _core.where(t == 0, _core.ones_like(t), t)
    else:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        if not lo < hi:
            raise ValueError(f"make_tensor: low ({lo}) must be less than high ({hi})")
        full = dims + [2] if is_complex else dims
        t = _core.rand(*full, dtype=_core.float64) * (hi - lo) + lo
        t = t.to(real)
        if exclude_zero:
            # the smallest positive normal value of the dtype
            tiny = {"float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38, "float32": 1.1754943508222875e-38}.get(
                _dtype_name(t), 2.2250738585072014e-308
            )
            t = _core.where(t == 0, tiny, t)
        if is_complex:
            t = ComplexTensor(t)
    if noncontiguous and not is_complex and t.numel() > 1:
        t = _core.stack([t, t], -1)[..., 0]
    if requires_grad:
        t.requires_grad_(True)
    return t
