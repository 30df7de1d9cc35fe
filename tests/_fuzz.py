"""Hypothesis strategies and properties over the whole public API.

Shared by tests/test_properties.py (CI-sized runs) and tools/fuzz_campaign.py
(100,000+ cases, outside CI). A property draws an API entry (a `cp.*`
function, a Tensor method, an `F.*` function, a layer constructor or forward,
an optimizer, a data or safetensors helper), then arguments that mix valid
tensors of every dtype and shape (0-d, empty, non-contiguous, NaN/inf) with
junk (None, strings, ragged lists, negative and huge sizes, wrong devices and
dtypes). The only allowed outcomes are a result or one of the documented
exceptions with a short message (see `_junk_sweep.ALLOWED` / `check_message`).

`report(name, what, problem)` is how a property reports a bad outcome: it
raises AssertionError by default (so Hypothesis shrinks it); the campaign
replaces it to log and carry on.
"""

from __future__ import annotations

import inspect
import math
import os
import signal
import sys
import tempfile
import threading
import warnings
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

import candle_py as cp
import candle_py.nn.functional as F
from candle_py import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _junk_sweep  # noqa: E402

ALLOWED = _junk_sweep.ALLOWED

# ------------------------------------------------------------------ reporting


def _raise(name: str, what: str, problem: str) -> None:
    raise AssertionError(f"{name}: {what} -> {problem}")


report: Callable[[str, str, str], None] = _raise


def short(a: Any) -> str:
    if isinstance(a, cp.Tensor):
        extra = ", grad" if a.requires_grad else ""
        return f"tensor(shape={tuple(a.shape)}, {a.dtype.name}{extra})"
    if isinstance(a, np.ndarray):
        return f"ndarray(shape={a.shape}, {a.dtype})"
    r = repr(a)
    return r if len(r) <= 60 else r[:57] + "..."


def describe(head: str, args: tuple, kwargs: dict) -> str:
    parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
    return f"{head}({', '.join(parts)})"


_WORKDIR = tempfile.mkdtemp(prefix="candle_py_fuzz_")
HANG_SECONDS = 20.0  # a call that takes longer is reported as a hang


class Hang(BaseException):
    """Raised by the alarm when a call runs past HANG_SECONDS."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


_DEFAULT_DEVICE = cp.get_default_device()


def run(name: str, what: str, thunk: Callable[[], Any]) -> Any:
    """Call `thunk`; report anything but a usable result or an allowed
    exception with a good message. Global state the API can change (grad
    mode, default device, working folder for file APIs) is restored."""
    cwd = os.getcwd()
    os.chdir(_WORKDIR)  # save_file("abc") and friends write here, never into the repo
    # A Python-level endless loop is interrupted and reported (the main thread
    # only; a hang inside Rust is caught by the campaign's per-chunk timeout).
    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if timed:
        old_handler = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                r = thunk()
                _touch(r)
                return r
    except NotImplementedError as e:
        report(name, what, f"NotImplementedError: {str(e)[:160]}")
    except OverflowError as e:
        # Python's own error for an int too large for a C integer (2**63 as a
        # dim, ...), as NumPy and the builtins raise; anything else is a finding.
        if "too large to convert" not in str(e) and "too big to convert" not in str(e):
            report(name, what, f"OverflowError: {str(e)[:160]}")
    except ALLOWED as e:
        bad = _junk_sweep.check_message(e)
        if bad and _echoes_a_tensor(str(e)):
            bad = None
        if isinstance(e, cp.BackendError) and "internal error in the backend" in str(e):
            bad = "is a caught Rust panic (a bug, though not a crash)"
        if bad:
            report(name, what, f"{type(e).__name__} {bad}: {str(e).splitlines()[0][:160] if str(e) else ''}")
    except Hang:
        report(name, what, f"HANG: still running after {HANG_SECONDS:.0f} s")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - PanicException, AttributeError, AssertionError, ...
        # (report's own AssertionError, raised in a handler above, is not caught here.)
        report(name, what, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        os.chdir(cwd)
        if not cp.is_grad_enabled():
            cp.set_grad_enabled(True)
        if cp.get_default_device() != _DEFAULT_DEVICE:
            cp.set_default_device(_DEFAULT_DEVICE)
    return None


def _echoes_a_tensor(msg: str) -> bool:
    """A message may run past 3 lines only by echoing a tensor argument's repr
    (`batch_size should be a positive integer, got tensor([[...]])`), as
    PyTorch's do; the first line must still say what is wrong, and nothing
    from Rust may show (check_message's other rules still apply)."""
    first, *rest = msg.splitlines()
    low = msg.lower()
    if any(m in low for m in ("backtrace", "panicked", ".rs:", "src/")):
        return False
    return ("tensor(" in first or "array(" in first) and all(
        not ln.strip() or ln.startswith(" ") or ln.rstrip().endswith(")") for ln in rest
    )


def _touch(r: Any, depth: int = 0) -> None:
    """Results must be usable: repr tensors, walk tuples/lists/dicts."""
    if depth > 2:
        return
    if isinstance(r, cp.Tensor):
        repr(r)
        if r.numel() <= 4096:
            r.tolist()
    elif isinstance(r, (tuple, list)):
        for x in list(r)[:8]:
            _touch(x, depth + 1)
    elif isinstance(r, dict):
        for x in list(r.values())[:8]:
            _touch(x, depth + 1)


# ------------------------------------------------------------------ strategies

DTYPES = [cp.float32, cp.float64, cp.float16, cp.bfloat16, cp.int64, cp.int32, cp.int16, cp.uint8, cp.uint32, cp.bool]
FLOAT_DTYPES = DTYPES[:4]
_NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float32,
    "bfloat16": np.float32,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "uint8": np.uint8,
    "uint32": np.uint32,
    "bool": np.bool_,
}
_INT_RANGE = {
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint8": (0, 255),
    "uint32": (0, 2**32 - 1),
}

# Sizes stay tiny or absurd: a "medium" size such as 2**31 would really allocate gigabytes.
HUGE = [2**62, -(2**62), 2**63, 2**64, 2**100, -(2**100)]
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4)
floats = st.one_of(
    st.floats(-1e3, 1e3, width=32), st.sampled_from([0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e30, -1e-30])
)


@st.composite
def tensors(draw: Any, dtypes: list = DTYPES, shape: Any = None, grad: bool = True) -> cp.Tensor:
    dt = draw(st.sampled_from(dtypes))
    shp = draw(shapes) if shape is None else shape
    n = math.prod(shp)
    name = dt.name
    if dt.is_floating_point:
        vals = draw(st.lists(floats, min_size=n, max_size=n))
    elif name == "bool":
        vals = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    else:
        lo, hi = _INT_RANGE[name]
        vals = draw(st.lists(st.one_of(st.integers(-3, 7).filter(lambda v: lo <= v <= hi), st.integers(lo, hi)), min_size=n, max_size=n))
    arr = np.array(vals, dtype=_NP[name]).reshape(shp)
    t = cp.tensor(arr).to(dt)
    layout = draw(st.sampled_from(["plain", "plain", "transposed", "strided"]))
    if layout == "transposed" and t.ndim >= 2:
        t = t.transpose(0, t.ndim - 1).contiguous().transpose(0, t.ndim - 1)
    elif layout == "strided" and t.ndim >= 1:
        t = cp.stack([t, t], dim=-1)[..., 1]  # a view with stride 2 and an offset
    if grad and dt.is_floating_point and draw(st.booleans()):
        t = t.detach().requires_grad_(True)
    return t


ragged = st.sampled_from([[[1, 2], [3]], [[1.0], 2.0], [[], [1]], [[[1]], [2]], [None, 1], ["a", 1]])
nested = st.recursive(st.one_of(st.integers(-5, 5), floats, st.booleans()), lambda c: st.lists(c, max_size=3), max_leaves=8)
devices = st.sampled_from(["cpu", "cuda", "cuda:1", "cuda:-1", "metal", "mps", "tpu", "cpu:0", "", -1, cp.device("cpu")])
dtype_args = st.sampled_from(DTYPES + ["float32", "int64", "complex64", "float8", np.float32, np.complex128, int, float, bool, "junk"])
junk_scalars = st.one_of(
    st.none(),
    st.text(max_size=4),
    st.booleans(),
    st.integers(-8, 8),
    st.sampled_from(HUGE),
    floats,
    st.just(complex(1, 2)),
    st.just(b"\x00\x01"),
    st.just(object()),
    st.just(Ellipsis),
    st.builds(slice, st.sampled_from([None, -1, 0, 2, 2**62]), st.sampled_from([None, -1, 3]), st.sampled_from([None, 1, 2, -1, 0])),
)
int_tuples = st.lists(st.one_of(st.integers(-3, 5), st.sampled_from(HUGE)), max_size=4).map(tuple)
np_arrays = st.sampled_from(
    [
        np.zeros((2, 3), np.float32),
        np.arange(4),
        np.array(["a", "b"]),
        np.array([1 + 2j]),
        np.zeros((0, 2)),
        np.float64(2.5),
        np.ones(3, np.float16)[::2],
    ]
)


def values() -> st.SearchStrategy:
    """Any argument: tensors (often), junk (often), lists, tuples, devices, dtypes."""
    return st.one_of(
        tensors(),
        tensors(),
        junk_scalars,
        ragged,
        nested,
        int_tuples,
        devices,
        dtype_args,
        np_arrays,
        st.lists(tensors(shape=[2]), max_size=3),
    )


KWARGS = [
    "dim",
    "keepdim",
    "dtype",
    "device",
    "requires_grad",
    "out",
    "p",
    "eps",
    "weight",
    "bias",
    "reduction",
    "size",
    "value",
    "index",
    "padding",
    "stride",
    "inplace",
    "diagonal",
    "correction",
    "num_classes",
]
kwargs = st.dictionaries(st.sampled_from(KWARGS), values(), max_size=2)
args = st.lists(values(), max_size=3).map(tuple)

# ------------------------------------------------------------------ the API table


def _layers() -> dict[str, Callable[[], nn.Module]]:
    """A valid instance of every layer class (forward then gets junk)."""
    L = nn
    return {
        "Linear": lambda: L.Linear(3, 2),
        "Bilinear": lambda: L.Bilinear(3, 2, 2),
        "Conv1d": lambda: L.Conv1d(2, 3, 2),
        "Conv2d": lambda: L.Conv2d(2, 3, 2, padding=1),
        "Conv3d": lambda: L.Conv3d(2, 2, 2),
        "ConvTranspose1d": lambda: L.ConvTranspose1d(2, 3, 2),
        "ConvTranspose2d": lambda: L.ConvTranspose2d(2, 3, 2, stride=2),
        "ConvTranspose3d": lambda: L.ConvTranspose3d(2, 2, 2),
        "MaxPool1d": lambda: L.MaxPool1d(2),
        "MaxPool2d": lambda: L.MaxPool2d(2, return_indices=True),
        "MaxPool3d": lambda: L.MaxPool3d(2),
        "AvgPool1d": lambda: L.AvgPool1d(2),
        "AvgPool2d": lambda: L.AvgPool2d(2, ceil_mode=True),
        "AvgPool3d": lambda: L.AvgPool3d(2),
        "AdaptiveAvgPool1d": lambda: L.AdaptiveAvgPool1d(2),
        "AdaptiveAvgPool2d": lambda: L.AdaptiveAvgPool2d(2),
        "AdaptiveAvgPool3d": lambda: L.AdaptiveAvgPool3d(2),
        "AdaptiveMaxPool1d": lambda: L.AdaptiveMaxPool1d(2),
        "AdaptiveMaxPool2d": lambda: L.AdaptiveMaxPool2d(2),
        "AdaptiveMaxPool3d": lambda: L.AdaptiveMaxPool3d(2),
        "Upsample": lambda: L.Upsample(scale_factor=2),
        "ReLU": L.ReLU,
        "ReLU6": L.ReLU6,
        "RReLU": L.RReLU,
        "LeakyReLU": L.LeakyReLU,
        "PReLU": L.PReLU,
        "ELU": L.ELU,
        "SELU": L.SELU,
        "CELU": L.CELU,
        "GELU": L.GELU,
        "SiLU": L.SiLU,
        "Mish": L.Mish,
        "Sigmoid": L.Sigmoid,
        "Tanh": L.Tanh,
        "Hardtanh": L.Hardtanh,
        "Hardsigmoid": L.Hardsigmoid,
        "Hardswish": L.Hardswish,
        "Softplus": L.Softplus,
        "Softmax": lambda: L.Softmax(dim=-1),
        "LogSoftmax": lambda: L.LogSoftmax(dim=-1),
        "Flatten": L.Flatten,
        "Unflatten": lambda: L.Unflatten(1, (2, 2)),
        "Dropout": L.Dropout,
        "Identity": L.Identity,
        "Embedding": lambda: L.Embedding(5, 3),
        "LayerNorm": lambda: L.LayerNorm(3),
        "RMSNorm": lambda: L.RMSNorm(3),
        "GroupNorm": lambda: L.GroupNorm(1, 2),
        "BatchNorm1d": lambda: L.BatchNorm1d(2),
        "BatchNorm2d": lambda: L.BatchNorm2d(2),
        "BatchNorm3d": lambda: L.BatchNorm3d(2),
        "MultiheadAttention": lambda: L.MultiheadAttention(4, 2),
        "LSTM": lambda: L.LSTM(3, 2),
        "GRU": lambda: L.GRU(3, 2),
        "Snake1d": lambda: L.Snake1d(2),
        "MSELoss": L.MSELoss,
        "L1Loss": L.L1Loss,
        "SmoothL1Loss": L.SmoothL1Loss,
        "CrossEntropyLoss": L.CrossEntropyLoss,
        "NLLLoss": L.NLLLoss,
        "BCELoss": L.BCELoss,
        "BCEWithLogitsLoss": L.BCEWithLogitsLoss,
        "KLDivLoss": L.KLDivLoss,
        "Sequential": lambda: L.Sequential(L.Linear(3, 3), L.ReLU()),
    }


LAYERS = _layers()


def _public(mod: Any) -> list[str]:
    out = []
    for n in sorted(dir(mod)):
        obj = getattr(mod, n)
        if n.startswith("_") or not callable(obj) or isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        if getattr(obj, "__module__", "") in ("typing", "builtins") or n in ("Any", "Optional", "Sequence", "Tensor"):
            continue
        out.append(n)
    return out


def api_entries() -> list[tuple[str, str, Any]]:
    """(name, kind, target): kind is func (call target(*args)), method (call
    getattr(tensor, target)(*args)), layer (call a fresh LAYERS[target]()(*args))."""
    e: list[tuple[str, str, Any]] = []
    e += [("cp." + n, "func", getattr(cp, n)) for n in _junk_sweep.function_names()]
    e += [("Tensor." + n, "method", n) for n in _junk_sweep.method_names()]
    e += [("F." + n, "func", getattr(F, n)) for n in F.__all__]
    e += [("nn." + n, "func", getattr(nn, n)) for n in sorted(LAYERS)]  # constructors with junk
    e += [("nn." + n + ".forward", "layer", n) for n in sorted(LAYERS)]
    e += [("nn.init." + n, "func", getattr(nn.init, n)) for n in _public(nn.init) if n != "no_grad"]
    e += [
        ("nn.utils." + n, "func", getattr(nn.utils, n))
        for n in ("clip_grad_norm_", "clip_grad_value_", "weight_norm", "remove_weight_norm")
    ]
    e += [("nn.utils.parametrizations.weight_norm", "func", nn.utils.parametrizations.weight_norm)]
    e += [("optim." + n, "func", getattr(cp.optim, n)) for n in ("SGD", "Adam", "AdamW")]
    e += [
        ("utils.data." + n, "func", getattr(cp.utils.data, n)) for n in ("TensorDataset", "DataLoader", "random_split", "default_collate")
    ]
    e += [("safetensors." + n, "func", getattr(cp.safetensors, n)) for n in ("load", "save")]
    e += [("autograd.grad", "func", cp.autograd.grad)]
    return e


API = api_entries()

# ------------------------------------------------------------------ properties


def prop_api_junk(data: Any) -> str:
    """One call of one API entry with drawn arguments. Returns its description."""
    name, kind, target = data.draw(st.sampled_from(API), label="api")
    a = data.draw(args, label="args")
    kw = data.draw(kwargs, label="kwargs")
    recv = None
    if kind == "method":
        recv = data.draw(tensors(), label="self")
    elif kind == "layer":
        recv = LAYERS[target]()
        if data.draw(st.booleans(), label="eval"):
            recv.eval()
    return call_api(name, kind, target, recv, a, kw)


def call_api(name: str, kind: str, target: Any, recv: Any, a: tuple, kw: dict) -> str:
    """Call one API entry (a method of `recv`, a layer: `recv` or a fresh one, or a
    function) with `a`/`kw` under `run`'s checks; returns the call's description."""
    if kind == "method":
        what = describe(f"{short(recv)}.{target}", a, kw)

        def call() -> Any:
            attr = getattr(recv, target)
            return attr(*a, **kw) if callable(attr) else attr

        run(name, what, call)
        return what
    if kind == "layer":
        fn = recv if recv is not None else LAYERS[target]()
    else:
        fn = target
    what = describe(name, a, kw)
    run(name, what, lambda: fn(*a, **kw))
    return what


def prop_tensor_args(data: Any) -> str:
    """Tensor-heavy calls: every argument a tensor of some dtype/shape, the
    common mix for broadcasting, dtype and shape mistakes."""
    name, kind, target = data.draw(st.sampled_from(API), label="api")
    a = tuple(data.draw(st.lists(tensors(), min_size=1, max_size=3), label="tensors"))
    kw = data.draw(st.dictionaries(st.sampled_from(["dim", "keepdim"]), st.integers(-5, 5), max_size=1), label="kw")
    recv = None
    if kind == "method":
        recv, a = a[0], a[1:]
    return call_api(name, kind, target, recv, a, kw)


def prop_safetensors_bytes(data: Any) -> str:
    """Random tensors round-trip through save/load; mutated bytes load or raise ValueError."""
    ts = data.draw(st.dictionaries(st.text(min_size=1, max_size=6), tensors(grad=False), max_size=4), label="tensors")
    try:
        raw = cp.safetensors.save(ts)
        back = cp.safetensors.load(raw)
    except BaseException as e:  # noqa: BLE001 - valid tensors must always round-trip
        report("safetensors.roundtrip", str({k: short(v) for k, v in ts.items()}), f"{type(e).__name__}: {e}")
        return "roundtrip failed"
    if sorted(back) != sorted(ts):
        report("safetensors.roundtrip", str(sorted(ts)), "names differ")
    for k, t in ts.items():
        if back[k].dtype != t.dtype or back[k].shape != t.shape or not _same(back[k], t):
            report("safetensors.roundtrip", f"{k}: {short(t)}", f"got {short(back[k])}")
    how = data.draw(st.sampled_from(["flip", "truncate", "extend", "header"]), label="mutation")
    b = bytearray(raw)
    if how == "flip" and b:
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "truncate":
        b = b[: data.draw(st.integers(0, len(b)))]
    elif how == "extend":
        b += bytes(data.draw(st.integers(1, 16)))
    elif len(b) >= 8:  # a wrong header length
        n = int.from_bytes(b[:8], "little") + data.draw(st.sampled_from([-3, -1, 1, 7, 10**12, 2**63]))
        b[:8] = (n % 2**64).to_bytes(8, "little")
    what = f"load({how} of {len(raw)} bytes)"
    try:
        cp.safetensors.load(bytes(b))
    except ValueError as e:
        bad = _junk_sweep.check_message(e)
        if bad or "\n" in str(e):
            report("safetensors.load", what, f"ValueError {bad}")
    except BaseException as e:  # noqa: BLE001
        report("safetensors.load", what, f"{type(e).__name__}: {e}")
    return what


def _same(a: cp.Tensor, b: cp.Tensor) -> bool:
    x, y = a.float().numpy() if a.dtype.name == "bfloat16" else a.numpy(), b.float().numpy() if b.dtype.name == "bfloat16" else b.numpy()
    return np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


# Arguments a user might really pass: they get past the first checks and reach
# the kernels (dims, sizes, index tensors, scalars), where junk would stop early.
plausible = st.one_of(
    tensors(),
    st.integers(-3, 3),
    st.floats(-2, 2),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-2, 3), max_size=3).map(tuple),
    st.sampled_from(FLOAT_DTYPES + [cp.int64]),
    st.sampled_from(["mean", "sum", "none", "same", "valid", "cpu"]),
)
PLAUSIBLE_KW = [
    "dim",
    "keepdim",
    "dtype",
    "p",
    "eps",
    "value",
    "stride",
    "padding",
    "dilation",
    "groups",
    "bias",
    "weight",
    "reduction",
    "diagonal",
    "correction",
    "num_classes",
    "size",
    "scale_factor",
    "training",
    "return_indices",
    "ceil_mode",
    "count_include_pad",
    "batch_first",
    "attn_mask",
    "is_causal",
]


_ARITY: dict[str, tuple[int, int, list[str]]] = {}


def arity(name: str, kind: str, target: Any) -> tuple[int, int, list[str]]:
    """(required positionals, max positionals, keyword names) of an entry, from
    its signature (pyo3 functions have text signatures), so that calls get
    past argument parsing; (0, 4, PLAUSIBLE_KW) when there is none."""
    if name not in _ARITY:
        try:
            fn = getattr(cp.Tensor, target) if kind == "method" else LAYERS[target]().forward if kind == "layer" else target
            params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
            pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            need = sum(1 for p in pos if p.default is p.empty)
            most = 8 if any(p.kind == p.VAR_POSITIONAL for p in params) else len(pos)
            kws = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            _ARITY[name] = (min(need, most), most, kws[need:] or [])
        except (TypeError, ValueError):
            _ARITY[name] = (0, 4, PLAUSIBLE_KW)
    return _ARITY[name]


def prop_plausible_args(data: Any) -> str:
    """Any API entry with arguments that look right: small ints, floats,
    tuples, tensors of any dtype and shape, reduction/padding names, as many
    as its signature takes (keywords by their real names)."""
    name, kind, target = data.draw(st.sampled_from(API), label="api")
    need, most, kws = arity(name, kind, target)
    n = data.draw(st.integers(need, max(need, min(most, need + 2))), label="n")
    a = data.draw(st.lists(plausible, min_size=n, max_size=n).map(tuple), label="args")
    kw = data.draw(st.dictionaries(st.sampled_from(kws), plausible, max_size=2), label="kwargs") if kws else {}
    recv = data.draw(tensors(), label="self") if kind == "method" else None
    return call_api(name, kind, target, recv, a, kw)


def prop_layer_shapes(data: Any) -> str:
    """Every layer on inputs of rank 0-5 with sizes 0-5 (channels often
    right), float and integer dtypes, train and eval; then backward."""
    lname = data.draw(st.sampled_from(sorted(LAYERS)), label="layer")
    layer = LAYERS[lname]()
    if data.draw(st.booleans(), label="eval"):
        layer.eval()
    rank = data.draw(st.integers(0, 5), label="rank")
    shape = data.draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank), label="shape")
    if rank >= 2 and data.draw(st.booleans()):
        shape[1] = data.draw(st.sampled_from([2, 3, 4]))
    if rank >= 1 and data.draw(st.booleans()):
        shape[-1] = data.draw(st.sampled_from([2, 3, 4]))
    x = data.draw(tensors(dtypes=FLOAT_DTYPES[:2] + [cp.int64], shape=shape, grad=False), label="x")
    if x.dtype.is_floating_point:
        x.requires_grad_(True)
    need, most, _ = arity(f"nn.{lname}.forward", "layer", lname)
    n_more = data.draw(st.integers(max(need - 1, 0), max(need - 1, min(most - 1, 2))), label="n_more")
    extra = data.draw(st.lists(tensors(shape=shape, grad=False), min_size=n_more, max_size=n_more).map(tuple), label="more")
    what = describe(f"nn.{lname}.forward", (x, *extra), {})

    def call() -> Any:
        out = layer(x, *extra)
        first = out[0] if isinstance(out, tuple) else out
        if isinstance(first, cp.Tensor) and first.requires_grad and first.numel() > 0:
            first.float().sum().backward()
        return out

    run(f"nn.{lname}.forward", what, call)
    return what


PROPERTIES: dict[str, Callable[[Any], str]] = {
    "api_junk": prop_api_junk,
    "plausible_args": prop_plausible_args,
    "layer_shapes": prop_layer_shapes,
    "tensor_args": prop_tensor_args,
    "safetensors_bytes": prop_safetensors_bytes,
}
