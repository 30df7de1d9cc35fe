"""PyTorch-style `repr` for tensors, and `set_printoptions` / `get_printoptions` /
`printoptions` to change it.

Follows the layout rules of PyTorch's printer (by default precision 4, threshold
1000, edgeitems 3, linewidth 80): integer-valued floats print as `1.`, others with
`precision` decimals, scientific notation when the nonzero finite magnitudes span
more than 1000x, exceed 1e8 or go below 1e-4 (unless `sci_mode` forces it on or
off); every element is right-aligned to the widest one; tensors of more than
`threshold` elements show `edgeitems` rows/columns at each edge; `dtype=` is shown
for all but the default float dtype, int64 and bool.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Union

import numpy as np

if TYPE_CHECKING:
    from ._core import Tensor

from . import _core

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr", "complex_repr"]

# The print options (module globals, read at each repr; `set_printoptions` sets them).
PRECISION = 4
THRESHOLD: Union[int, float] = 1000
EDGEITEMS = 3
LINEWIDTH = 80
SCI_MODE: Optional[bool] = None

_PROFILES: Dict[str, Dict[str, Any]] = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision: Optional[int] = None,
    threshold: Optional[Union[int, float]] = None,
    edgeitems: Optional[int] = None,
    linewidth: Optional[int] = None,
    profile: Optional[str] = None,
    sci_mode: Optional[bool] = None,
) -> None:
    """Set how tensors print (`torch.set_printoptions`): `precision` (decimals of
    floats), `threshold` (above this many elements the repr is summarized),
    `edgeitems` (items kept at each edge when summarized), `linewidth` (characters
    per line), `profile` ("default", "short" or "full": a preset applied first), and
    `sci_mode` (True/False force scientific notation on/off; None, the value every
    call sets unless given, chooses automatically). Other None arguments keep
    their current value."""
    global PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH, SCI_MODE
    for name, v, lo in (("precision", precision, 0), ("edgeitems", edgeitems, 0), ("linewidth", linewidth, 1)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise TypeError(f"set_printoptions: {name} must be an int, got {type(v).__name__}")
        if v is not None and not lo <= v <= 1 << 20:
            raise ValueError(f"set_printoptions: {name} must be between {lo} and {1 << 20}, got {v}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold != threshold):
        raise TypeError(f"set_printoptions: threshold must be a number, got {threshold!r}")
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions: sci_mode must be a bool or None, got {type(sci_mode).__name__}")
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
        p = _PROFILES[profile]
        PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = p["precision"], p["threshold"], p["edgeitems"], p["linewidth"]
    if precision is not None:
        PRECISION = precision
    if threshold is not None:
        THRESHOLD = threshold
    if edgeitems is not None:
        EDGEITEMS = edgeitems
    if linewidth is not None:
        LINEWIDTH = linewidth
    SCI_MODE = sci_mode


def get_printoptions() -> Dict[str, Any]:
    """The current print options, as keyword arguments for `set_printoptions`."""
    return {"precision": PRECISION, "threshold": THRESHOLD, "edgeitems": EDGEITEMS, "linewidth": LINEWIDTH, "sci_mode": SCI_MODE}


@contextlib.contextmanager
def printoptions(**kwargs: Any) -> Iterator[None]:
    """Change the print options for a `with` block (`set_printoptions`' arguments)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


def _implicit(name: str) -> bool:
    """dtypes PyTorch leaves out of the repr: the default float dtype, int64, bool."""
    return name in ("int64", "bool") or name == _core.get_default_dtype().name


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements PyTorch looks at to size columns when it summarizes."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


class _Formatter:
    def __init__(self, a: np.ndarray) -> None:
        self.floating = a.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        vals = a.reshape(-1)
        if not self.floating:
            for v in vals.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        v = vals.astype(np.float64)
        nz = v[np.isfinite(v) & (v != 0)]
        if nz.size == 0:
            return
        absv = np.abs(nz)
        lo, hi = float(absv.min()), float(absv.max())
        self.int_mode = bool(np.all(nz == np.ceil(nz)))
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                width = max(len(f"{x:.{PRECISION}e}") for x in nz.tolist())
            else:
                width = max(len(f"{x:.0f}") + 1 for x in nz.tolist())
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                width = max(len(f"{x:.{PRECISION}e}") for x in nz.tolist())
            else:
                width = max(len(f"{x:.{PRECISION}f}") for x in nz.tolist())
        self.max_width = max(self.max_width, width)
        # A forced sci_mode keeps the widths measured above, as PyTorch's printer does.
        if SCI_MODE is not None:
            self.sci_mode = SCI_MODE

    def format(self, value: Any) -> str:
        if self.floating:
            value = float(value)
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRECISION}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


# Above this many bytes the repr reads only the corner elements it prints
# (through views), instead of copying the whole tensor out.
_MATERIALIZE_LIMIT = 1 << 26


def _corners(t: "Tensor") -> "tuple[np.ndarray, tuple[bool, ...]]":
    """PyTorch's summarized data, read through views; `cut[k]` says axis k was cut to 2*EDGEITEMS."""
    if t.ndim == 0:
        return np.asarray(t), ()
    n = t.shape[0]
    cut = n > 2 * EDGEITEMS
    if t.ndim == 1:
        parts = [t[:EDGEITEMS], t[n - EDGEITEMS :]] if cut else [t]
        return np.concatenate([np.asarray(p) for p in parts]), (cut,)
    idx = list(range(EDGEITEMS)) + list(range(n - EDGEITEMS, n)) if cut else list(range(n))
    subs = [_corners(t[i]) for i in idx]
    return np.stack([x[0] for x in subs]), (cut,) + subs[0][1]


def _vector(a: np.ndarray, indent: int, summarize: bool, fmt: Callable[[Any], str], width: int, cut: bool = False) -> str:
    element_length = width + 2
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    if cut or (summarize and a.shape[0] > 2 * EDGEITEMS):
        data = [fmt(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] + [fmt(v) for v in a[-EDGEITEMS:].tolist()]
    else:
        data = [fmt(v) for v in a.tolist()]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a: np.ndarray, indent: int, summarize: bool, f: _Formatter, cut: "tuple[bool, ...]" = ()) -> str:
    if a.ndim == 0:
        return f.format(a.item())
    here = bool(cut and cut[0])
    if a.ndim == 1:
        return _vector(a, indent, summarize, f.format, f.max_width, here)
    n = a.shape[0]
    rest = cut[1:]
    if here or (summarize and n > 2 * EDGEITEMS):
        slices: List[str] = (
            [_tensor_str(a[i], indent + 1, summarize, f, rest) for i in range(EDGEITEMS)]
            + ["..."]
            + [_tensor_str(a[i], indent + 1, summarize, f, rest) for i in range(n - EDGEITEMS, n)]
        )
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, f, rest) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(body: str, suffixes: List[str], indent: int) -> str:
    parts = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: "Tensor") -> str:
    """`repr(t)` in PyTorch's layout: `tensor([...], dtype=..., requires_grad=True)`."""
    name = t.dtype.name
    src = t.detach().cpu()
    cut: "tuple[bool, ...]" = ()
    if t.numel() * t.element_size() > _MATERIALIZE_LIMIT:
        a, cut = _corners(src)
        if name in ("float16", "bfloat16"):
            a = a.astype(np.float32)
    else:
        if name in ("float16", "bfloat16"):
            src = src.float()
        a = np.asarray(src)
    prefix = "tensor("
    indent = len(prefix)
    suffixes: List[str] = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    if t.numel() == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if name != _core.get_default_dtype().name:
            suffixes.append(f"dtype=candle_py.{name}")
        body = "[]"
    else:
        summarize = t.numel() > THRESHOLD
        f = _Formatter(_summarized(a) if summarize else a)
        body = _tensor_str(a, indent, summarize, f, cut)
        if not _implicit(name):
            suffixes.append(f"dtype=candle_py.{name}")
    if t.requires_grad:
        node = t.grad_fn
        suffixes.append(f"grad_fn=<{node.name()}>" if node is not None else "requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)


class _ComplexFormatter:
    """PyTorch's complex layout: the real and imaginary parts each sized by a formatter of
    their own, printed as `re+imj` (`re-imj` for a negative imaginary part)."""

    def __init__(self, a: np.ndarray) -> None:
        self.re = _Formatter(np.ascontiguousarray(a.real))
        self.im = _Formatter(np.ascontiguousarray(a.imag))
        self.max_width = self.re.max_width + self.im.max_width + 1

    def format(self, value: Any) -> str:
        re = self.re.format(value.real)
        im = (self.im.format(value.imag) + "j").lstrip()
        return re + im if im[0] in "+-" else re + "+" + im


def complex_repr(t: Any) -> str:
    """`repr` of a complex tensor (`candle_py.ComplexTensor`) in PyTorch's layout."""
    a = t.numpy(force=True)
    name = t.dtype._name
    prefix = "tensor("
    indent = len(prefix)
    suffixes: List[str] = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    # the default complex dtype (complex64 beside float32) is left out, as in PyTorch
    default = "complex128" if _core.get_default_dtype().name == "float64" else "complex64"
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        suffixes.append(f"dtype=candle_py.{name}")  # an empty tensor names every dtype but the default float one
        body = "[]"
    else:
        summarize = a.size > THRESHOLD
        f = _ComplexFormatter(_summarized(a) if summarize else a)
        body = _tensor_str(a, indent, summarize, f)  # type: ignore[arg-type]
        if name != default:
            suffixes.append(f"dtype=candle_py.{name}")
    if t.requires_grad:
        node = t.grad_fn
        suffixes.append(f"grad_fn=<{node.name()}>" if node is not None else "requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
