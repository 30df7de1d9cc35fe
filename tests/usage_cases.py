"""The usage sweep: one or more cases for every name of ../shared/torch_usage.md (the 296
PyTorch names real code calls most), written once against the PyTorch API.

`tools/make_fixtures_usage_sweep.py` runs every case on torch and stores the encoded
results in tests/fixtures/usage_sweep/; `tests/test_usage_sweep.py` runs the same case
on candle_py and compares. Nothing here imports torch: each case takes the library
module `lib` (`torch` or `candle_py`) and returns a dict of named results: tensors
(compared by dtype, shape and values), Python values, dtype names, exception kinds.

Inputs are fixed pseudo-random NumPy arrays (`_r`, seeded by name), so both libraries
see the same numbers; modules get the same weights through `load_state_dict` (`_load`).
Random-number functions cannot match torch's streams, so their cases return properties
(shape, dtype, bounds, moments within wide limits, dropout's scaling) instead of values.
"""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

Case = Callable[[Any], Dict[str, Any]]
# case id -> (names of torch_usage.md it covers, function, tolerance)
CASES: Dict[str, Tuple[Tuple[str, ...], Case, float]] = {}

TOL = 1e-5  # f32 elementwise
TOL_MM = 1e-4  # matmul / conv / attention


def case(*names: str, tol: float = TOL, cid: str = "") -> Callable[[Case], Case]:
    def reg(fn: Case) -> Case:
        key = cid or fn.__name__
        assert key not in CASES, key
        CASES[key] = (names, fn, tol)
        return fn

    return reg


# -- inputs ----------------------------------------------------------------------------


def _seed(s: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(s))


def _np(*shape: int, seed: str = "x", kind: str = "normal") -> np.ndarray:
    rng = np.random.default_rng(_seed(seed))
    if kind == "pos":
        return (np.abs(rng.standard_normal(shape)) + 0.1).astype(np.float32)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape).astype(np.float32)
    if kind == "int":
        return rng.integers(-5, 6, shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def _r(lib: Any, *shape: int, seed: str = "x", kind: str = "normal", grad: bool = False) -> Any:
    t = lib.tensor(_np(*shape, seed=seed, kind=kind))
    if grad:
        t.requires_grad_(True)
    return t


def _special(lib: Any) -> Any:
    return lib.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.5, 0.25])


def _w(lib: Any, y: Any) -> Any:
    """Fixed weights for a weighted-sum backward of `y`."""
    return lib.cos(lib.arange(y.numel(), dtype=lib.float32).reshape(y.shape) * 0.37)


def _back(lib: Any, y: Any) -> None:
    (y * _w(lib, y)).sum().backward()


def _back_all(lib: Any, ys: Dict[str, Any], prep: Optional[Callable[[Any], Any]] = None) -> None:
    """One backward through the sum of every output's weighted sum (in `ys`' order),
    each output first passed through `prep` when given (e.g. `nan_to_num`)."""
    total = None
    for y in ys.values():
        term = ((prep(y) if prep else y) * _w(lib, y)).sum()
        total = term if total is None else total + term
    total.backward()


def _load(lib: Any, m: Any, seed: str) -> Any:
    """Give `m` the same deterministic weights on both libraries via load_state_dict."""
    sd = m.state_dict()
    new = {}
    for k, v in sd.items():
        if v.dtype.is_floating_point:
            a = _np(*v.shape, seed=seed + k) * 0.5
            if k.endswith("running_var"):
                a = np.abs(a) + 0.5
            new[k] = lib.tensor(a)
        else:
            new[k] = v
    m.load_state_dict(new)
    return m


def _module(lib: Any, m: Any, *xs: Any, seed: str = "m", train: bool = True) -> Dict[str, Any]:
    """Forward (and backward when differentiable) of module `m` with loaded weights."""
    _load(lib, m, seed)
    m.train(train)
    y = m(*xs)
    out: Dict[str, Any] = {"y": y, "param_names": [n for n, _ in m.named_parameters()]}
    if y.requires_grad:
        _back(lib, y)
        for i, x in enumerate(xs):
            if getattr(x, "requires_grad", False):
                out[f"gx{i}"] = x.grad
        for n, p in m.named_parameters():
            out["g." + n] = p.grad
    return out


def _kind(e: BaseException) -> str:
    """The most derived builtin exception class of `e` (libraries subclass them)."""
    return next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")


def _err(fn: Callable[[], Any]) -> str:
    """'ok', or 'raises <kind>' for the exception the call raised."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the kind is the result
        return "raises " + _kind(e)
    return "ok"


def _try(fn: Callable[[], Any]) -> Any:
    """`fn()`, or 'raises <kind>' (edge inputs that some ops reject)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the kind is the result
        return "raises " + _kind(e)


def _dt(d: Any) -> str:
    return str(d).rsplit(".", 1)[-1]


def _F(lib: Any) -> Any:
    return lib.nn.functional


# -- result encoding (shared by the tool and the test) -----------------------------------


def encode(lib: Any, v: Any, arrays: Dict[str, np.ndarray], key: str) -> Any:
    """A JSON-able form of `v`; tensors go to `arrays[key]` as NumPy."""
    # candle_py's complex tensors and dtypes are classes of their own (python/candle_py/_complex.py)
    if isinstance(v, (lib.Tensor, getattr(lib, "ComplexTensor", lib.Tensor))):
        t = v.detach().cpu()
        if getattr(t, "is_sparse", False):
            t = t.to_dense()
        dtype = _dt(t.dtype)
        if dtype in ("bfloat16", "float16"):
            t = t.float()
        a = np.asarray(t.numpy())
        if np.iscomplexobj(a):
            a = np.stack([a.real, a.imag], axis=-1)
        arrays[key] = np.ascontiguousarray(a)
        return {"tensor": key, "dtype": dtype, "shape": list(v.shape)}
    if isinstance(v, (lib.dtype, getattr(lib, "ComplexDType", lib.dtype))):
        return {"dtype_name": _dt(v)}
    if isinstance(v, lib.Size):
        return {"size": list(v)}
    if isinstance(v, (list, tuple)):
        return [encode(lib, x, arrays, f"{key}.{i}") for i, x in enumerate(v)]
    if isinstance(v, dict):
        return {"dict": {str(k): encode(lib, x, arrays, f"{key}.{k}") for k, x in v.items()}}
    if isinstance(v, float) and not math.isfinite(v):
        return {"float": repr(v)}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.ndarray):
        arrays[key] = np.ascontiguousarray(v)
        return {"ndarray": key}
    raise TypeError(f"{key}: cannot encode {type(v)}")


def run_case(lib: Any, cid: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    lib.manual_seed(0)
    res = CASES[cid][1](lib)
    arrays: Dict[str, np.ndarray] = {}
    enc = {k: encode(lib, v, arrays, f"{cid}/{k}") for k, v in res.items()}
    return enc, arrays


# shared/API.md's error rule: where PyTorch raises RuntimeError (or NotImplementedError
# for a dtype without a kernel), candle_py raises the builtin that names the problem:
# ValueError for bad values and shapes, TypeError for dtypes, IndexError for indices.
DOCUMENTED_KINDS = {
    ("RuntimeError", "ValueError"),
    ("RuntimeError", "TypeError"),
    ("RuntimeError", "IndexError"),
    ("NotImplementedError", "TypeError"),
}


def compare(got: Any, exp: Any, ga: Dict[str, np.ndarray], ea: Dict[str, np.ndarray], tol: float, where: str) -> None:
    if isinstance(exp, dict) and "tensor" in exp:
        assert isinstance(got, dict) and "tensor" in got, f"{where}: expected a tensor, got {got!r}"
        assert got["dtype"] == exp["dtype"], f"{where}: dtype {got['dtype']} != {exp['dtype']}"
        assert got["shape"] == exp["shape"], f"{where}: shape {got['shape']} != {exp['shape']}"
        a, e = ga[got["tensor"]], ea[exp["tensor"]]
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol, equal_nan=True, err_msg=where)
        else:
            np.testing.assert_array_equal(a, e, err_msg=where)
        return
    if isinstance(exp, dict) and "ndarray" in exp:
        np.testing.assert_allclose(ga[got["ndarray"]], ea[exp["ndarray"]], rtol=tol, atol=tol, err_msg=where)
        return
    if isinstance(exp, dict) and "dict" in exp:
        assert isinstance(got, dict) and "dict" in got, f"{where}: expected a dict, got {got!r}"
        assert sorted(got["dict"]) == sorted(exp["dict"]), f"{where}: keys {sorted(got['dict'])} != {sorted(exp['dict'])}"
        for k in exp["dict"]:
            compare(got["dict"][k], exp["dict"][k], ga, ea, tol, f"{where}.{k}")
        return
    if isinstance(exp, list):
        assert isinstance(got, list) and len(got) == len(exp), f"{where}: {got!r} != {exp!r}"
        for i, (g, e) in enumerate(zip(got, exp)):
            compare(g, e, ga, ea, tol, f"{where}[{i}]")
        return
    if isinstance(exp, float) and type(got) is float:
        assert math.isclose(got, exp, rel_tol=tol, abs_tol=tol), f"{where}: {got!r} != {exp!r}"
        return
    if isinstance(exp, str) and isinstance(got, str) and exp.startswith("raises ") and got.startswith("raises "):
        pair = (exp[7:], got[7:])
        assert pair[0] == pair[1] or pair in DOCUMENTED_KINDS, f"{where}: {got} where PyTorch {exp}"
        return
    assert type(got) is type(exp) and got == exp, f"{where}: {got!r} ({type(got).__name__}) != {exp!r} ({type(exp).__name__})"


# =====================================================================================
# Generated cases: unary elementwise ops (typical, special values + empty + 0-d, ints)
# =====================================================================================

_UNARY: List[Tuple[str, str, str]] = [
    # (name in torch_usage.md, how to call, input kind for the typical case)
    ("torch.sqrt", "lib.sqrt(x)", "pos"),
    ("Tensor.sqrt", "x.sqrt()", "pos"),
    ("torch.cos", "lib.cos(x)", "normal"),
    ("Tensor.cos", "x.cos()", "normal"),
    ("torch.sin", "lib.sin(x)", "normal"),
    ("Tensor.sin", "x.sin()", "normal"),
    ("torch.tanh", "lib.tanh(x)", "normal"),
    ("Tensor.tanh", "x.tanh()", "normal"),
    ("torch.exp", "lib.exp(x)", "normal"),
    ("Tensor.exp", "x.exp()", "normal"),
    ("torch.log", "lib.log(x)", "pos"),
    ("Tensor.log", "x.log()", "pos"),
    ("torch.rsqrt", "lib.rsqrt(x)", "pos"),
    ("Tensor.rsqrt", "x.rsqrt()", "pos"),
    ("torch.sigmoid", "lib.sigmoid(x)", "normal"),
    ("Tensor.sigmoid", "x.sigmoid()", "normal"),
    ("torch.abs", "lib.abs(x)", "normal"),
    ("Tensor.abs", "x.abs()", "normal"),
    ("torch.sign", "lib.sign(x)", "normal"),
    ("Tensor.sign", "x.sign()", "normal"),
    ("Tensor.neg", "x.neg()", "normal"),
    ("Tensor.square", "x.square()", "normal"),
    ("Tensor.ceil", "x.ceil()", "normal"),
    ("Tensor.floor", "x.floor()", "normal"),
    ("Tensor.logical_not", "x.logical_not()", "normal"),
    ("torch.isinf", "lib.isinf(x)", "normal"),
    ("F.silu", "lib.nn.functional.silu(x)", "normal"),
    ("F.relu", "lib.nn.functional.relu(x)", "normal"),
    ("F.gelu", "lib.nn.functional.gelu(x)", "normal"),
    ("F.logsigmoid", "lib.nn.functional.logsigmoid(x)", "normal"),
    ("F.softplus", "lib.nn.functional.softplus(x)", "normal"),
    ("F.relu6", "lib.nn.functional.relu6(x * 4)", "normal"),
]
# integer inputs: the ops PyTorch accepts on int64 (others raise; the error kind is compared)
_DIFFERENTIABLE = {"Tensor.logical_not", "torch.isinf", "Tensor.sign", "torch.sign", "Tensor.ceil", "Tensor.floor"}


def _unary_cases() -> None:
    for name, expr, kind in _UNARY:
        slug = name.replace(".", "_").lower()

        def typical(lib: Any, expr: str = expr, kind: str = kind, name: str = name) -> Dict[str, Any]:
            x = _r(lib, 3, 4, seed=name, kind=kind, grad=name not in _DIFFERENTIABLE)
            y = eval(expr, {"lib": lib, "x": x})  # noqa: S307 - the fixed expressions above
            out = {"y": y, "y0d": eval(expr, {"lib": lib, "x": x.detach()[1, 2]})}  # noqa: S307
            if x.requires_grad:
                _back(lib, y)
                out["gx"] = x.grad
            return out

        def edge(lib: Any, expr: str = expr) -> Dict[str, Any]:
            x = _special(lib)
            return {"special": eval(expr, {"lib": lib, "x": x}), "empty": eval(expr, {"lib": lib, "x": lib.zeros(0, 3)})}  # noqa: S307

        def ints(lib: Any, expr: str = expr) -> Dict[str, Any]:
            x = lib.tensor([[-3, 0, 2], [5, 1, -1]])
            out: Dict[str, Any] = {}
            try:
                out["y"] = eval(expr, {"lib": lib, "x": x})  # noqa: S307
            except Exception as e:  # noqa: BLE001
                out["err"] = "raises " + _kind(e)
            return out

        case(name, cid=f"{slug}[typical]")(typical)
        case(name, cid=f"{slug}[edge]")(edge)
        case(name, cid=f"{slug}[int]")(ints)


_unary_cases()

# in-place unary ops: same values as out of place, the same object returned


def _inplace_cases() -> None:
    for name, method, ref, kind in [
        ("Tensor.sqrt_", "sqrt_", "sqrt", "pos"),
        ("Tensor.sigmoid_", "sigmoid_", "sigmoid", "normal"),
        ("Tensor.tanh_", "tanh_", "tanh", "normal"),
    ]:

        def fn(lib: Any, method: str = method, ref: str = ref, kind: str = kind, name: str = name) -> Dict[str, Any]:
            x = _r(lib, 3, 4, seed=name, kind=kind)
            y = getattr(x, method)()
            s = _special(lib)
            getattr(s, method)()
            return {"x": x, "same": y is x, "ref": getattr(_r(lib, 3, 4, seed=name, kind=kind), ref)(), "special": s}

        case(name, cid=name.replace(".", "_").lower())(fn)


_inplace_cases()

# =====================================================================================
# Binary elementwise ops: broadcasting, scalars, ints, type promotion, backward
# =====================================================================================

_BINARY: List[Tuple[str, str]] = [
    ("Tensor.add", "a.add(b)"),
    ("Tensor.add[alpha]", "a.add(b, alpha=2.5)"),
    ("Tensor.mul", "a.mul(b)"),
    ("Tensor.multiply", "a.multiply(b)"),
    ("Tensor.subtract", "a.subtract(b)"),
    ("Tensor.sub", "a.sub(b)"),
    ("Tensor.div", "a.div(b)"),
    ("Tensor.pow", "a.abs().pow(b)"),
    ("torch.pow", "lib.pow(a.abs(), b)"),
    ("torch.maximum", "lib.maximum(a, b)"),
    ("Tensor.minimum", "a.minimum(b)"),
    ("Tensor.eq", "a.eq(b)"),
    ("Tensor.less", "a.less(b)"),
    ("Tensor.ge", "a.ge(b)"),
    ("Tensor.lerp", "a.lerp(b, 0.3)"),
]


def _binary_cases() -> None:
    for name, expr in _BINARY:
        base = name.split("[")[0]
        slug = name.replace(".", "_").replace("[", "_").replace("]", "").lower()

        def typical(lib: Any, expr: str = expr, name: str = name) -> Dict[str, Any]:
            a = _r(lib, 3, 4, seed=name + "a", grad=True)
            b = _r(lib, 4, seed=name + "b", grad=True)  # broadcast
            y = eval(expr, {"lib": lib, "a": a, "b": b})  # noqa: S307
            out = {"y": y}
            if y.requires_grad:
                _back(lib, y)
                out["ga"], out["gb"] = a.grad, b.grad
            return out

        def edge(lib: Any, expr: str = expr) -> Dict[str, Any]:
            s = _special(lib)
            t = lib.tensor([1.0, math.nan, 2.0, -math.inf, 0.0, 3.0, -1.0, 0.5])
            args = {
                "special": (s, t),
                "empty": (lib.zeros(0, 3), lib.ones(3)),
                "zero_d": (lib.tensor(1.5), lib.tensor(-0.5)),
                "int": (lib.tensor([[3, -2, 4]]), lib.tensor([2, 5, -3])),
                "int_float": (lib.tensor([3, -2, 4]), lib.tensor([0.5, 2.0, -1.0])),
                "scalar": (lib.tensor([1.0, -2.0, 3.0]), 2),
            }
            if "maximum" in expr or "minimum" in expr:
                # torch refuses a Python number here (TypeError); candle_py accepts one
                # (a superset of the signature), so only tensors are compared.
                del args["scalar"]
            return {k: _try(lambda a=a, b=b: eval(expr, {"lib": lib, "a": a, "b": b})) for k, (a, b) in args.items()}  # noqa: S307

        case(base, cid=f"{slug}[typical]")(typical)
        case(base, cid=f"{slug}[edge]")(edge)


_binary_cases()


@case("Tensor.mul_", "Tensor.add_", "Tensor.div_")
def inplace_arith(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="ip")
    r1 = x.mul_(2.0)
    x.add_(_r(lib, 4, seed="ip2"), alpha=-0.5)
    x.div_(lib.tensor(4.0))
    i = lib.tensor([1, 2, 3])
    i.mul_(3)
    i.add_(2)
    return {"x": x, "same": r1 is x, "i": i, "int_div_err": _err(lambda: lib.tensor([1, 2]).div_(2))}


# =====================================================================================
# Creation
# =====================================================================================


@case("torch.tensor")
def tensor_creation(lib: Any) -> Dict[str, Any]:
    return {
        "f": lib.tensor([[1.0, 2.5], [3.0, -4.0]]),
        "i": lib.tensor([1, 2, 3]),
        "b": lib.tensor([True, False]),
        "scalar": lib.tensor(3.5),
        "empty": lib.tensor([]),
        "mixed": lib.tensor([1, 2.5]),
        "dtype": lib.tensor([1, 2], dtype=lib.float32),
        "np": lib.tensor(np.arange(6, dtype=np.float64).reshape(2, 3)),
        "rg": lib.tensor([1.0], requires_grad=True).requires_grad,
        "nan": lib.tensor([math.nan, math.inf]),
        "ragged_err": _err(lambda: lib.tensor([[1, 2], [3]])),
    }


@case("torch.arange")
def arange(lib: Any) -> Dict[str, Any]:
    return {
        "n": lib.arange(5),
        "ab": lib.arange(2, 7),
        "step": lib.arange(0, 1, 0.25),
        "neg": lib.arange(5, 0, -2),
        "f": lib.arange(5.0),
        "dt": lib.arange(3, dtype=lib.float32),
        "empty": lib.arange(0),
        "zero_step": _err(lambda: lib.arange(0, 5, 0)),
    }


@case("torch.ones", "torch.zeros", "torch.empty", "torch.full")
def fill_creation(lib: Any) -> Dict[str, Any]:
    e = lib.empty(2, 3)
    return {
        "ones": lib.ones(2, 3),
        "ones_tuple": lib.ones((2, 3), dtype=lib.int64),
        "zeros": lib.zeros(4),
        "zeros0": lib.zeros(()),
        "zeros_empty": lib.zeros(0, 2),
        "empty_shape": e.shape,
        "empty_dtype": e.dtype,
        "empty_i": lib.empty(3, dtype=lib.int32).dtype,
        "full": lib.full((2, 2), 7.5),
        "full_int": lib.full((2,), 3),
        "full_bool": lib.full((2,), True),
        "full_nan": lib.full((2,), math.nan),
        "neg": _err(lambda: lib.zeros(-1)),
    }


@case("torch.zeros_like", "torch.ones_like", "torch.full_like", "torch.empty_like")
def like_creation(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3)
    i = lib.tensor([1, 2])
    return {
        "zl": lib.zeros_like(x),
        "ol": lib.ones_like(i),
        "ol_dt": lib.ones_like(i, dtype=lib.float32),
        "fl": lib.full_like(x, 2.5),
        "fl_i": lib.full_like(i, 7),
        "el": (lib.empty_like(x).shape, lib.empty_like(i).dtype),
        "zl_rg": lib.zeros_like(x.requires_grad_()).requires_grad,
    }


@case("torch.linspace")
def linspace(lib: Any) -> Dict[str, Any]:
    return {
        "a": lib.linspace(0, 1, 5),
        "b": lib.linspace(-3, 7, 11),
        "one": lib.linspace(2, 5, 1),
        "zero": lib.linspace(0, 1, 0),
        "rev": lib.linspace(1, -1, 4),
        "neg_err": _err(lambda: lib.linspace(0, 1, -1)),
    }


@case("torch.eye")
def eye(lib: Any) -> Dict[str, Any]:
    return {"sq": lib.eye(3), "rect": lib.eye(2, 4), "i": lib.eye(2, dtype=lib.int64), "z": lib.eye(0)}


@case("torch.from_numpy", "torch.as_tensor", "Tensor.numpy")
def numpy_bridge(lib: Any) -> Dict[str, Any]:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lib.from_numpy(a)  # (shared/API.md: candle_py's from_numpy copies; torch's shares)
    i = lib.from_numpy(np.array([1, 2], dtype=np.int64))
    at = lib.as_tensor([1.0, 2.0])
    at2 = lib.as_tensor(np.array([3, 4], dtype=np.int32), dtype=lib.float32)
    n = lib.tensor([[1.5, 2.0]]).numpy()
    return {
        "t": t,
        "i": i,
        "at": at,
        "at2": at2,
        "n": n,
        "n_dtype": str(n.dtype),
        "same": lib.as_tensor(t) is t,
        "numpy_grad_err": _err(lambda: lib.ones(2, requires_grad=True).numpy()),
    }


@case("torch.LongTensor", "torch.FloatTensor", "torch.Tensor")
def legacy_constructors(lib: Any) -> Dict[str, Any]:
    return {
        "long": lib.LongTensor([1, 2, 3]),
        "float": lib.FloatTensor([1, 2]),
        "T": lib.Tensor([1, 2]),
        "T_shape": lib.Tensor(2, 3).shape,
        "isinst": isinstance(lib.ones(2), lib.Tensor),
        "long_dtype": lib.LongTensor([1.7]),
    }


@case("Tensor.new_zeros", "Tensor.new_empty", "Tensor.new_tensor")
def new_methods(lib: Any) -> Dict[str, Any]:
    x = lib.ones(2, dtype=lib.float64)
    return {
        "nz": x.new_zeros(2, 3),
        "nz_t": x.new_zeros((1,)),
        "ne": (x.new_empty(4).shape, x.new_empty(4).dtype),
        "nt": x.new_tensor([1, 2]),
        "nt_f": x.new_tensor([1.5]),
        "nt_rg": x.new_tensor([1.0]).requires_grad,
    }


@case("torch.sparse_coo_tensor", "Tensor.to_sparse")
def sparse(lib: Any) -> Dict[str, Any]:
    idx = lib.tensor([[0, 1, 1], [2, 0, 2]])
    s = lib.sparse_coo_tensor(idx, lib.tensor([3.0, 4.0, 5.0]), (2, 3))
    d = lib.tensor([[0.0, 1.0], [2.0, 0.0]])
    return {"dense": s.to_dense(), "shape": s.shape, "ts": d.to_sparse().to_dense(), "is_sparse": d.to_sparse().is_sparse}


# =====================================================================================
# Views and shape manipulation
# =====================================================================================


@case("Tensor.transpose", "Tensor.permute", "Tensor.t", "Tensor.contiguous", "Tensor.is_contiguous", "Tensor.stride")
def transpose_permute(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, grad=True)
    y = x.transpose(0, 2)
    p = x.permute(2, 0, 1)
    p2 = x.permute((1, -1, 0))
    out = {
        "tr": y,
        "tr_neg": x.transpose(-1, -2),
        "p": p,
        "p2": p2,
        "t": x[0].t(),
        "t1": lib.arange(3).t(),
        "contig": (y.is_contiguous(), y.contiguous().is_contiguous(), x.is_contiguous()),
        "stride": (x.stride(), y.stride(), x.stride(1), y.contiguous().stride()),
        "t3_err": _err(lambda: x.t()),
        "perm_err": _err(lambda: x.permute(0, 1)),
    }
    _back(lib, (y * 2).sum(0) + p.sum(0).t())
    out["gx"] = x.grad
    return out


@case("Tensor.view", "Tensor.reshape", "Tensor.view_as", "Tensor.reshape_as")
def view_reshape(lib: Any) -> Dict[str, Any]:
    x = lib.arange(24.0).reshape(2, 3, 4)
    v = x.view(6, 4)
    v[0, 0] = 100.0  # shares storage
    return {
        "v": v,
        "x00": x[0, 0, 0],
        "v_neg": x.view(-1, 2),
        "v_tuple": x.view((4, 6)),
        "r": x.transpose(0, 1).reshape(-1),
        "r0": lib.tensor(5.0).reshape(1, 1),
        "r_empty": lib.zeros(0, 3).reshape(3, 0),
        "view_err": _err(lambda: x.transpose(0, 1).view(-1)),
        "bad_err": _err(lambda: x.view(5, 5)),
        "va": x.view_as(lib.zeros(4, 6)),
        "ra": x.reshape_as(lib.zeros(24)),
    }


@case("Tensor.view", cid="view[dtype]")
def view_dtype(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[1.0, -2.0, math.inf, math.nan], [0.0, -0.0, 1e-40, 65504.0]])
    base = lib.zeros(2, 3)
    w = base.view(lib.int32)
    w[1] = 1065353216
    base[0, 2] = -1.0
    return {
        "i": lib.tensor([1.0, -2.0]).view(lib.int32),
        "f": lib.tensor([1065353216], dtype=lib.int32).view(lib.float32),
        "u8": x.view(lib.uint8),
        "h": x.view(lib.float16),
        "i64": x.view(lib.int64),
        "f64": lib.arange(4).view(lib.float64),
        "b": lib.tensor([1, 0, 2], dtype=lib.uint8).view(lib.bool),
        "t": lib.arange(6.0).reshape(2, 3).t().view(lib.int32),
        "i_0d": lib.tensor(1.5).view(lib.int32),
        "empty": lib.zeros(0, 4).view(lib.int16),
        "base": base,
        "w": w,
        "odd_err": _err(lambda: lib.zeros(2, 3).view(lib.int64)),
        "0d_err": _err(lambda: lib.tensor(1.0).view(lib.uint8)),
        "stride_err": _err(lambda: lib.zeros(2, 3).t().view(lib.float16)),
    }


@case("Tensor.unsqueeze", "Tensor.squeeze", "Tensor.flatten", "torch.flatten")
def squeeze_unsqueeze(lib: Any) -> Dict[str, Any]:
    x = lib.arange(6.0).reshape(2, 1, 3, 1)
    return {
        "u0": lib.arange(3).unsqueeze(0),
        "u_neg": lib.arange(3).unsqueeze(-1),
        "u_0d": lib.tensor(1.0).unsqueeze(0),
        "s": x.squeeze(),
        "s1": x.squeeze(1),
        "s_noop": x.squeeze(0),
        "s_neg": x.squeeze(-1),
        "s_tuple": x.squeeze((1, 3)),
        "f": x.flatten(),
        "f1": x.flatten(1),
        "f_range": x.flatten(1, 2),
        "f_0d": lib.tensor(2.0).flatten(),
        "tf": lib.flatten(x, start_dim=2),
        "u_err": _err(lambda: lib.arange(3).unsqueeze(3)),
    }


@case("Tensor.t_", "Tensor.transpose_", "Tensor.swapdims_", "Tensor.swapaxes_", "Tensor.squeeze_", "Tensor.unsqueeze_", "torch.swapdims")
def inplace_views(lib: Any) -> Dict[str, Any]:
    x = lib.arange(6.0).reshape(2, 3)
    row = x[0]
    same = x.t_() is x
    x[1, 0] = 100.0  # the storage is still shared with `row`
    z = lib.zeros(2, 1, 3, 1)
    shapes = [tuple(z.squeeze_(1).shape), tuple(z.unsqueeze_(0).shape), tuple(z.squeeze_().shape)]
    shapes += [tuple(z.transpose_(0, 1).shape), tuple(z.swapdims_(0, 1).shape), tuple(z.swapaxes_(1, 0).shape)]
    leaf = _r(lib, 2, 3, grad=True)
    a = _r(lib, 2, 3, seed="a", grad=True)
    b = a * 2
    b.t_()
    b.unsqueeze_(0)
    _back(lib, b)
    return {
        "x": x,
        "row": row,
        "same": same,
        "contig": x.is_contiguous(),
        "shapes": shapes,
        "sw": lib.swapdims(lib.arange(6).reshape(1, 2, 3), 0, 2),
        "b_shape": tuple(b.shape),
        "ga": a.grad,
        "leaf_err": _err(lambda: leaf.t_()),
        "t_err": _err(lambda: lib.zeros(2, 2, 2).t_()),
        "sq_err": _err(lambda: lib.zeros(2, 1).squeeze_(5)),
    }


@case("Tensor.expand", "Tensor.expand_as", "Tensor.repeat", "Tensor.repeat_interleave", "torch.repeat_interleave")
def expand_repeat(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 1, grad=True)
    e = x.expand(3, 4)
    r = x.repeat(2, 3)
    ri = x.repeat_interleave(2, dim=0)
    _back(lib, e.sum(1) + r.sum(1)[:3] + ri.sum(1)[::2])
    return {
        "e": e,
        "e_neg": x.expand(2, -1, 5),
        "ea": x.expand_as(lib.zeros(3, 2)),
        "r": r,
        "r_new_dim": lib.tensor([1, 2]).repeat(2, 2),
        "ri": ri,
        "ri_flat": lib.tensor([[1, 2], [3, 4]]).repeat_interleave(2),
        "ri_tensor": lib.repeat_interleave(lib.tensor([1, 2, 3]), lib.tensor([1, 0, 2])),
        "ri_counts": lib.repeat_interleave(lib.tensor([2, 1])),
        "gx": x.grad,
        "e_err": _err(lambda: x.expand(2, 4)),
    }


@case("torch.cat", "torch.stack")
def cat_stack(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 2, 3, seed="a", grad=True), _r(lib, 1, 3, seed="b", grad=True)
    c = lib.cat([a, b])
    s = lib.stack([a, a * 2], dim=-1)
    _back(lib, c.sum() + s.sum(-1).sum())
    return {
        "c": c,
        "c1": lib.cat((a, a), dim=1),
        "c_neg": lib.cat([a, a], dim=-1),
        "c_empty": lib.cat([a.detach(), lib.zeros(0, 3)]),
        "c_legacy_empty": lib.cat([a.detach(), lib.zeros(0)]),
        "c_promote": lib.cat([lib.tensor([1]), lib.tensor([2.5])]),
        "s": s,
        "s0": lib.stack([lib.tensor(1.0), lib.tensor(2.0)]),
        "ga": a.grad,
        "gb": b.grad,
        "cat_err": _err(lambda: lib.cat([lib.zeros(2, 3), lib.zeros(2, 4)])),
        "stack_err": _err(lambda: lib.stack([lib.zeros(2), lib.zeros(3)])),
        "none_err": _err(lambda: lib.cat([])),
    }


@case("Tensor.split", "torch.split", "Tensor.chunk", "torch.chunk", "Tensor.unbind")
def split_chunk(lib: Any) -> Dict[str, Any]:
    x = lib.arange(20.0).reshape(5, 4)
    return {
        "split2": x.split(2),
        "split_list": x.split([1, 3], dim=1),
        "split_fn": lib.split(x, 3, dim=-1),
        "chunk": x.chunk(3),
        "chunk_more": lib.chunk(lib.arange(3), 5),
        "chunk_dim": x.chunk(2, dim=1),
        "unbind": x.unbind(1),
        "unbind0": lib.tensor([1, 2]).unbind(),
        "split_err": _err(lambda: x.split([1, 1])),
    }


@case("Tensor.flip", "Tensor.unfold", "Tensor.select")
def flip_unfold_select(lib: Any) -> Dict[str, Any]:
    x = lib.arange(12.0).reshape(3, 4)
    return {
        "flip": x.flip(0),
        "flip2": x.flip((0, -1)),
        "unfold": lib.arange(7.0).unfold(0, 3, 2),
        "unfold2": x.unfold(1, 2, 1),
        "select": x.select(1, -1),
        "select0": x.select(0, 2),
        "sel_err": _err(lambda: x.select(0, 3)),
    }


@case("torch.view_as_complex", "torch.view_as_real")
def complex_views(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 2)
    c = lib.view_as_complex(x)
    return {"c": c, "c_shape": c.shape, "c_dtype": c.dtype, "back": lib.view_as_real(c)}


# =====================================================================================
# Indexing, masking, gather/scatter
# =====================================================================================


@case("Tensor.masked_fill", "Tensor.masked_fill_")
def masked_fill(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    mask = lib.tensor([True, False, True, False])
    y = x.masked_fill(mask, -math.inf).softmax(-1)
    _back(lib, y)
    z = lib.zeros(2, 3)
    r = z.masked_fill_(lib.tensor([[True, False, False], [False, False, True]]), 5.0)
    return {
        "y": y,
        "gx": x.grad,
        "z": z,
        "same": r is z,
        "tensor_value": lib.ones(3).masked_fill(lib.tensor([False, True, True]), lib.tensor(2.0)),
        "int": lib.arange(4).masked_fill(lib.arange(4) > 1, -1),
        "causal": lib.zeros(3, 3).masked_fill(lib.ones(3, 3).triu(1).bool(), -math.inf),
    }


@case("Tensor.gather", "torch.gather")
def gather(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    idx = lib.tensor([[0, 3], [1, 1], [2, 0]])
    g = x.gather(1, idx)
    _back(lib, g)
    return {
        "g": g,
        "gx": x.grad,
        "g0": lib.gather(x.detach(), 0, lib.tensor([[2, 1, 0, 0]])),
        "neg": lib.gather(x.detach(), -1, idx),
        "err": _err(lambda: x.gather(1, lib.tensor([[5]]))),
    }


@case("Tensor.scatter_", "Tensor.scatter", "Tensor.index_add_", "Tensor.index_select")
def scatter_index(lib: Any) -> Dict[str, Any]:
    z = lib.zeros(3, 4)
    r = z.scatter_(1, lib.tensor([[0, 2], [1, 3], [3, 0]]), _r(lib, 3, 2))
    x = _r(lib, 4, 3, grad=True)
    idx = lib.tensor([2, 0, 2])
    sel = x.index_select(0, idx)
    _back(lib, sel)
    acc = lib.zeros(3, 2)
    acc.index_add_(0, lib.tensor([0, 2, 0]), lib.ones(3, 2))
    return {
        "z": z,
        "same": r is z,
        "scalar": lib.zeros(2, 3).scatter(1, lib.tensor([[1], [2]]), 7.0),
        "reduce_add": lib.ones(4).scatter(0, lib.tensor([0, 0, 1]), lib.tensor([1.0, 2.0, 3.0]), reduce="add"),
        "reduce_mul": lib.full((4,), 2.0).scatter(0, lib.tensor([0, 0, 1]), lib.tensor([1.5, 2.0, 3.0]), reduce="multiply"),
        "reduce_mul_val": lib.full((2, 3), 2.0).scatter_(1, lib.tensor([[0, 0], [2, 1]]), 3.0, reduce="multiply"),
        "sel": sel,
        "gx": x.grad,
        "sel_neg": x.detach().index_select(-1, lib.tensor([2])),
        "acc": acc,
        "alpha": lib.zeros(2).index_add_(0, lib.tensor([1, 1]), lib.tensor([1.0, 2.0]), alpha=2.0),
    }


@case("torch.where", "Tensor.where")
def where(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 3, 4, seed="a", grad=True), _r(lib, 4, seed="b", grad=True)
    y = lib.where(a > 0, a, b)
    _back(lib, y)
    return {
        "y": y,
        "ga": a.grad,
        "gb": b.grad,
        "scalar": lib.where(a.detach() > 0, a.detach(), 0.0),
        "int_f": lib.where(lib.tensor([True, False]), lib.tensor([1, 2]), 0.5),
        "method": a.detach().where(a.detach() < 0, lib.tensor(-1.0)),
        "nonzero_form": lib.where(lib.tensor([[0, 1], [1, 1]])),
        "nan": lib.where(lib.tensor([True, False]), lib.tensor([math.nan, 1.0]), lib.tensor([0.0, math.inf])),
    }


@case("Tensor.nonzero", "torch.nonzero")
def nonzero(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[0.0, 1.5, 0.0], [math.nan, 0.0, -2.0]])
    return {
        "nz": x.nonzero(),
        "t": lib.nonzero(x, as_tuple=True),
        "empty": lib.zeros(3).nonzero(),
        "b": lib.tensor([True, False, True]).nonzero(),
        "zero_d": lib.nonzero(lib.tensor(3)),
    }


# =====================================================================================
# Reductions
# =====================================================================================


@case("Tensor.mean", "torch.mean")
def mean(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, grad=True)
    y = x.mean(dim=(0, -1), keepdim=True)
    _back(lib, y)
    return {
        "all": x.detach().mean(),
        "d1": lib.mean(x.detach(), 1),
        "y": y,
        "gx": x.grad,
        "empty": lib.zeros(0).mean(),
        "nan": _special(lib).mean(),
        "dtype": lib.tensor([1, 2]).mean(dtype=lib.float32),
        "int_err": _err(lambda: lib.tensor([1, 2]).mean()),
    }


@case("Tensor.sum", "torch.sum")
def sum_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, grad=True)
    y = x.sum(-1)
    _back(lib, y)
    return {
        "all": x.detach().sum(),
        "y": y,
        "gx": x.grad,
        "multi": lib.sum(x.detach(), (0, 2), keepdim=True),
        "int": lib.tensor([1, 2, 3]).sum(),
        "bool": lib.tensor([True, True, False]).sum(),
        "empty": lib.zeros(0, 3).sum(0),
        "nan": _special(lib).sum(),
        "dtype": lib.tensor([1, 2]).sum(dtype=lib.float64),
        "no_dims": x.detach().sum(()),  # an empty list of dims reduces every dim
        "mean_no_dims": x.detach().mean(dim=()),
    }


@case("Tensor.var", "torch.var", "Tensor.std")
def var_std(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 5, grad=True)
    v = x.var(1)
    _back(lib, v)
    return {
        "v": v,
        "gx": x.grad,
        "all": lib.var(x.detach()),
        "biased": x.detach().var(0, unbiased=False),
        "corr": lib.var(x.detach(), dim=1, correction=0, keepdim=True),
        "std": x.detach().std(),
        "std_d": x.detach().std(dim=-1, keepdim=True),
        "one": lib.tensor([2.0]).var(),
        "unbiased_pos": x.detach().var(False),  # the var(unbiased: bool) overload
        "std_unbiased_pos": x.detach().std(True),
        "no_dims": x.detach().var(()),
    }


@case("Tensor.max", "torch.max", "torch.min", "Tensor.amax", "Tensor.amin")
def max_min(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[1.0, 5.0, 5.0], [-2.0, 0.0, -7.0]], requires_grad=True)
    m = x.max(dim=1)
    _back(lib, m.values + x.amax(0).sum())
    return {
        "all": x.detach().max(),
        "vals": m.values,
        "idx": m.indices,
        "tuple": tuple(lib.min(x.detach(), dim=0, keepdim=True)),
        "binary": lib.max(x.detach(), lib.zeros(3)),
        "min_all": lib.min(x.detach()),
        "gx": x.grad,
        "amax": x.detach().amax(dim=(0, 1)),
        "amin": x.detach().amin(-1, keepdim=True),
        "nan": _special(lib).max(),
        "int": lib.tensor([3, 9, 2]).max(),
        "empty_err": _err(lambda: lib.zeros(0).max()),
        "amax_no_dims": x.detach().amax(()),
    }


@case("torch.argmax", "Tensor.argmax")
def argmax(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[1.0, 5.0, 5.0], [-2.0, 0.0, -7.0]])
    return {
        "flat": lib.argmax(x),
        "d1": x.argmax(dim=1),
        "keep": x.argmax(-1, keepdim=True),
        "nan": lib.tensor([1.0, math.nan, 3.0]).argmax(),
        "int": lib.tensor([3, 9, 9]).argmax(),
    }


@case("Tensor.any", "Tensor.all", "torch.all")
def any_all(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[True, False], [True, True]])
    return {
        "any": x.any(),
        "all": x.all(),
        "any1": x.any(dim=1),
        "all0": lib.all(x, dim=0),
        "float": lib.tensor([0.0, math.nan]).any(),
        "empty_all": lib.all(lib.zeros(0)),
        "empty_any": lib.zeros(0).any(),
        "int": lib.tensor([1, 2]).all(),
    }


@case("Tensor.norm", "F.normalize")
def norm(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    n = _F(lib).normalize(x, dim=-1)
    _back(lib, n)
    return {
        "fro": x.detach().norm(),
        "p1": x.detach().norm(p=1, dim=1),
        "pinf": x.detach().norm(p=math.inf, dim=0),
        "keep": x.detach().norm(dim=-1, keepdim=True),
        "n": n,
        "gx": x.grad,
        "n0": _F(lib).normalize(lib.zeros(2, 3)),
        "n_p1": _F(lib).normalize(x.detach(), p=1.0, dim=0),
        "no_dims": x.detach().norm(dim=()),
        "int_err": _err(lambda: lib.tensor([1, 2]).norm()),
        "bool_err": _err(lambda: lib.tensor([True]).norm(p=1)),
    }


@case("Tensor.cumsum", "torch.cumprod", "torch.prod")
def cumulative(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    c = x.cumsum(1)
    p = lib.cumprod(x, dim=0)
    _back(lib, c + p)
    return {
        "c": c,
        "p": p,
        "gx": x.grad,
        "c_neg": x.detach().cumsum(-2),
        "c_int": lib.tensor([1, 2, 3]).cumsum(0),
        "c_bool": lib.tensor([True, True]).cumsum(0),
        "prod": lib.prod(x.detach()),
        "prod_d": lib.prod(x.detach(), 1, keepdim=True),
        "prod_int": lib.prod(lib.tensor([2, 3, 4])),
        "empty": lib.prod(lib.zeros(0)),
    }


@case("Tensor.logsumexp", "Tensor.log_softmax", "F.log_softmax")
def logsumexp(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    y = x.logsumexp(-1) + _F(lib).log_softmax(x, dim=0).sum(1)
    _back(lib, y)
    return {
        "y": y,
        "gx": x.grad,
        "lse_inf": lib.tensor([-math.inf, -math.inf]).logsumexp(0),
        "lse_big": lib.tensor([1000.0, 1000.0]).logsumexp(0),
        "ls": x.detach().log_softmax(1),
        "ls_dtype": x.detach().log_softmax(1, dtype=lib.float64),
        "ls_inf": lib.tensor([0.0, -math.inf]).log_softmax(0),
    }


@case("torch.topk", "Tensor.topk")
def topk(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[1.0, 5.0, 3.0, 4.0], [0.0, -2.0, 8.0, 1.0]])
    t = lib.topk(x, 2)
    return {
        "v": t.values,
        "i": t.indices,
        "small": tuple(x.topk(1, dim=0, largest=False)),
        "int": tuple(lib.tensor([3, 1, 2]).topk(2)),
        "k0": tuple(x.topk(0)),
        "err": _err(lambda: x.topk(5)),
    }


@case("Tensor.sort", "Tensor.argsort")
def sort(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[3.0, 1.0, 2.0], [math.nan, -1.0, 0.0]])
    s = x.sort()
    return {
        "v": s.values,
        "i": s.indices,
        "desc": tuple(x.sort(dim=0, descending=True)),
        "stable": tuple(lib.tensor([2, 1, 2, 1]).sort(stable=True)),
        "arg": x.argsort(),
        "arg_desc": lib.tensor([1, 3, 2]).argsort(descending=True),
    }


@case("torch.unique", "torch.bincount")
def unique_bincount(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([3, 1, 3, 2, 1, 3])
    u, inv, cnt = lib.unique(x, return_inverse=True, return_counts=True)
    return {
        "u": lib.unique(x),
        "inv": inv,
        "cnt": cnt,
        "uu": u,
        "f": lib.unique(lib.tensor([2.0, 1.0, 2.0])),
        "dim": lib.unique(lib.tensor([[1, 2], [1, 2], [0, 1]]), dim=0),
        "bc": lib.bincount(lib.tensor([0, 2, 2, 5])),
        "bc_w": lib.bincount(lib.tensor([0, 1, 1]), weights=lib.tensor([0.5, 1.0, 2.0])),
        "bc_min": lib.bincount(lib.tensor([1]), minlength=4),
        "bc_empty": lib.bincount(lib.tensor([], dtype=lib.int64)),
        "bc_neg": _err(lambda: lib.bincount(lib.tensor([-1]))),
    }


@case("torch.equal", "torch.allclose")
def equal_allclose(lib: Any) -> Dict[str, Any]:
    a = lib.tensor([1.0, 2.0, math.nan])
    return {
        "eq": lib.equal(lib.tensor([1, 2]), lib.tensor([1, 2])),
        "neq_shape": lib.equal(lib.tensor([1, 2]), lib.tensor([1, 2, 3])),
        "nan": lib.equal(a, a),
        "ac": lib.allclose(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0 + 1e-9])),
        "ac_false": lib.allclose(lib.tensor([1.0]), lib.tensor([1.1])),
        "ac_nan": lib.allclose(a, a, equal_nan=True),
        "ac_nan2": lib.allclose(a, a),
        "ac_tol": lib.allclose(lib.tensor([1.0]), lib.tensor([1.05]), atol=0.1),
    }


# =====================================================================================
# Linear algebra
# =====================================================================================


@case("torch.matmul", "Tensor.matmul", "torch.mm", "torch.bmm", "torch.dot", tol=TOL_MM)
def matmul(lib: Any) -> Dict[str, Any]:
    a = _r(lib, 2, 3, 4, seed="a", grad=True)
    b = _r(lib, 4, 5, seed="b", grad=True)
    y = lib.matmul(a, b)
    _back(lib, y)
    v = _r(lib, 4, seed="v")
    return {
        "y": y,
        "ga": a.grad,
        "gb": b.grad,
        "mv": a.detach().matmul(v),
        "vv": v.matmul(v),
        "vm": v.matmul(b.detach()),
        "bcast": lib.matmul(_r(lib, 2, 1, 3, 4), _r(lib, 3, 4, 2, seed="c")),
        "op": a.detach() @ b.detach(),
        "mm": lib.mm(a.detach()[0], b.detach()),
        "bmm": lib.bmm(a.detach(), _r(lib, 2, 4, 2, seed="d")),
        "dot": lib.dot(v, v * 2),
        "int": lib.matmul(lib.tensor([[1, 2]]), lib.tensor([[3], [4]])),
        "empty": lib.matmul(lib.zeros(2, 0), lib.zeros(0, 3)),
        "err": _err(lambda: lib.mm(lib.zeros(2, 3), lib.zeros(2, 3))),
        "bmm_err": _err(lambda: lib.bmm(lib.zeros(2, 3), lib.zeros(3, 2))),
        "dot_err": _err(lambda: lib.dot(lib.zeros(2), lib.zeros(3))),
    }


@case("torch.matmul", "torch.bmm", tol=TOL_MM, cid="batched_matmul")
def batched_matmul(lib: Any) -> Dict[str, Any]:
    """Batched products as attention writes them: heads split by a transpose, keys
    transposed in place, batches that broadcast (also across ranks), small matrices
    (makemore's 32 x 16 heads) and large ones, with gradients of both operands."""
    out: Dict[str, Any] = {}
    for name, (bs, t, d) in {"small": ((4, 4), 32, 16), "large": ((1, 1), 96, 64)}.items():
        x = _r(lib, bs[0], t, bs[1] * d, seed="x" + name, grad=True)
        q = x.view(bs[0], t, bs[1], d).transpose(1, 2)
        k = _r(lib, bs[0], bs[1], t, d, seed="k" + name, grad=True)
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        y = att @ k
        _back(lib, y)
        out[name] = y
        out[name + "_gx"] = x.grad
        out[name + "_gk"] = k.grad
    a = _r(lib, 2, 3, 3, seed="a", grad=True)
    b = _r(lib, 2, 3, 2, 3, 1, seed="b", grad=True)
    y = a @ b
    _back(lib, y)
    out.update(cross_rank=y, cross_ga=a.grad, cross_gb=b.grad)
    w = _r(lib, 5, 7, seed="w", grad=True)
    z = _r(lib, 3, 7, 4, seed="z").transpose(1, 2)
    y = z @ w.t()
    _back(lib, y)
    out.update(strided_left=y, strided_gw=w.grad)
    out["f64"] = _r(lib, 6, 9, 5, seed="f").double() @ _r(lib, 1, 5, 3, seed="g").double()
    out["zero_k"] = lib.matmul(lib.zeros(2, 3, 0), lib.zeros(2, 0, 4))
    out["zero_batch"] = lib.matmul(lib.zeros(0, 3, 2), lib.zeros(2, 4))
    out["err"] = _err(lambda: lib.matmul(lib.zeros(2, 3, 4), lib.zeros(3, 4, 5)))
    return out


@case("torch.clamp", "torch.relu", "torch.nn.functional.hardtanh", cid="nan_incoming_grads")
def nan_incoming_grads(lib: Any) -> Dict[str, Any]:
    """Gradients of the bounded activations when the incoming gradient is NaN or
    infinite: PyTorch selects (0 where the bound holds), it does not multiply by a mask."""
    F = _F(lib)
    nan, inf = float("nan"), float("inf")
    x = lib.tensor([1.0, 5.0, nan, -3.0, 0.0, 2.0], requires_grad=True)
    g = lib.tensor([nan, inf, nan, nan, nan, -inf])
    out: Dict[str, Any] = {}
    fns = {
        "clamp": lambda t: t.clamp(0, 2),
        "clamp_min": lambda t: t.clamp(min=0),
        "clamp_max": lambda t: lib.clamp(t, max=2),
        "hardtanh": lambda t: F.hardtanh(t),
        "relu": lambda t: lib.relu(t),
        "relu6": lambda t: F.relu6(t),
        "threshold": lambda t: F.threshold(t, 0.5, 0.0),
    }
    for name, f in fns.items():
        x.grad = None
        f(x).backward(g)
        out[name] = x.grad
    return out


@case("torch.pow", "Tensor.pow", cid="pow_special_exponents")
def pow_special_exponents(lib: Any) -> Dict[str, Any]:
    """The exponents PyTorch's CPU pow computes by formula (3: x*x*x, -2, -1, -0.5) and
    a general one, at edge values, with gradients (the tanh GELU's `pow(x, 3.0)`)."""
    vals = [0.0, -0.0, 1.0, -1.5, 2.5, 1e-20, -1e20, float("inf"), float("-inf"), float("nan"), 3.0, 0.25]
    out: Dict[str, Any] = {}
    for e in (3.0, -2.0, -1.0, -0.5, 1.5):
        x = lib.tensor(vals)
        out[f"e{e}"] = lib.pow(x, e)
        g = _r(lib, 64, seed=f"g{e}", grad=True)
        y = g.pow(e) if e in (3.0, -2.0, -1.0) else g.abs().add(0.5).pow(e)
        _back(lib, y)
        out[f"e{e}_y"] = y
        out[f"e{e}_grad"] = g.grad
    return out


@case("torch.einsum", tol=TOL_MM)
def einsum(lib: Any) -> Dict[str, Any]:
    a = _r(lib, 2, 3, 4, seed="a", grad=True)
    b = _r(lib, 2, 4, 5, seed="b")
    y = lib.einsum("bij,bjk->bik", a, b)
    _back(lib, y)
    q, k = _r(lib, 2, 3, 5, 4, seed="q"), _r(lib, 2, 3, 6, 4, seed="k")
    return {
        "bmm": y,
        "ga": a.grad,
        "attn": lib.einsum("b h i d, b h j d -> b h i j", q, k),
        "trace": lib.einsum("ii", _r(lib, 3, 3)),
        "diag": lib.einsum("ii->i", _r(lib, 3, 3)),
        "outer": lib.einsum("i,j->ij", lib.arange(3.0), lib.arange(2.0)),
        "sum": lib.einsum("ijk->", a.detach()),
        "perm": lib.einsum("ijk->kji", a.detach()),
        "ellipsis": lib.einsum("...ij,...jk->...ik", a.detach(), b),
        "list_arg": lib.einsum("ij,jk", [a.detach()[0], b[0]]),
        "err": _err(lambda: lib.einsum("ij,jk->ik", lib.zeros(2, 3), lib.zeros(4, 2))),
    }


@case("torch.triu", "torch.tril", "Tensor.triu", "Tensor.tril", "Tensor.triu_")
def triangles(lib: Any) -> Dict[str, Any]:
    x = lib.arange(1.0, 13.0).reshape(3, 4)
    y = lib.ones(3, 3)
    r = y.triu_(1)
    return {
        "triu": lib.triu(x),
        "triu1": lib.triu(x, diagonal=1),
        "triu_neg": x.triu(-1),
        "tril": lib.tril(x),
        "tril_m": x.tril(-1),
        "batched": lib.tril(lib.ones(2, 3, 3), 1),
        "inplace": y,
        "same": r is y,
        "bool": lib.ones(3, 3, dtype=lib.bool).tril(),
        "err": _err(lambda: lib.triu(lib.ones(3))),
    }


@case("torch.diag", "torch.trapezoid", "torch.cdist", tol=TOL_MM)
def diag_trapz_cdist(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 4, 3, seed="a"), _r(lib, 5, 3, seed="b")
    return {
        "d_vec": lib.diag(lib.tensor([1.0, 2.0, 3.0])),
        "d_vec_k": lib.diag(lib.tensor([1, 2]), 1),
        "d_mat": lib.diag(lib.arange(12.0).reshape(3, 4)),
        "d_mat_k": lib.diag(lib.arange(12.0).reshape(3, 4), -1),
        "tz": lib.trapezoid(lib.tensor([1.0, 2.0, 4.0])),
        "tz_x": lib.trapezoid(lib.tensor([1.0, 2.0, 4.0]), lib.tensor([0.0, 1.0, 3.0])),
        "tz_dx": lib.trapezoid(lib.arange(12.0).reshape(3, 4), dx=0.5, dim=0),
        "cd": lib.cdist(a, b),
        "cd_p1": lib.cdist(a, b, p=1.0),
        "cd_batched": lib.cdist(a.unsqueeze(0), a.unsqueeze(0)),
    }


@case("torch.meshgrid")
def meshgrid(lib: Any) -> Dict[str, Any]:
    a, b = lib.arange(3.0), lib.arange(2.0)
    return {"ij": lib.meshgrid(a, b, indexing="ij"), "xy": lib.meshgrid(a, b, indexing="xy"), "list": lib.meshgrid([a, a], indexing="ij")}


# =====================================================================================
# Dtype / device / conversion methods
# =====================================================================================


@case(
    "Tensor.to",
    "Tensor.float",
    "Tensor.double",
    "Tensor.long",
    "Tensor.int",
    "Tensor.bool",
    "Tensor.bfloat16",
    "Tensor.type_as",
    "Tensor.type",
)
def conversions(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([-1.7, 0.0, 2.5, 3.99])
    x64 = x.to(lib.float64)
    return {
        "to_dtype": x64,
        "to_same": x.to(lib.float32) is x,
        "to_device": x.to("cpu") is x,
        "to_device_obj": x.to(lib.device("cpu"), lib.float64),
        "to_kw": x.to(dtype=lib.int64),
        "to_other": x.to(lib.tensor([1], dtype=lib.int32)),
        "to_copy": x.to(lib.float32, copy=True) is x,
        "float": lib.tensor([1, 2]).float(),
        "double": x.double(),
        "long": x.long(),
        "int": x.int(),
        "bool": x.bool(),
        "bf16": x.bfloat16(),
        "bf16_round": lib.tensor([1.00390625, 3.14159]).bfloat16(),
        "type_as": lib.tensor([1, 2]).type_as(x),
        "type_str": x.type(),
        "type_conv": x.type(lib.int64),
        "type_str_conv": lib.tensor([1, 2]).type("torch.FloatTensor").dtype,
        "nan_long": lib.tensor([1.5, -1.5]).long(),
        "grad_keep": lib.ones(2, requires_grad=True).to(lib.float64).requires_grad,
    }


@case("Tensor.cpu", "Tensor.pin_memory", "torch.device")
def devices(lib: Any) -> Dict[str, Any]:
    x = lib.ones(2)
    d = lib.device("cpu")
    return {
        "cpu_same": x.cpu() is x,
        "cpu": x.cpu(),
        "device": str(x.device),
        "type": d.type,
        "eq": d == lib.device("cpu"),
        "str": str(lib.device("cuda", 1)),
        "idx": lib.device("cuda:1").index,
        "cpu_idx": d.index,
        "type_cuda": lib.device("cuda:0").type,
        "bad": _err(lambda: lib.device("nonsense")),
        "ctx_factory": str(lib.zeros(1, device=d).device),
        "pin_err": _err(lambda: x.pin_memory()),
    }


@case("Tensor.cuda", "torch.cuda.is_available")
def cuda_cpu_only(lib: Any) -> Dict[str, Any]:
    # The CPU-only behaviour (this machine has no GPU; the fixture is made on a torch
    # without one): no CUDA device, and asking for one raises RuntimeError.
    return {
        "available": lib.cuda.is_available(),
        "count": lib.cuda.device_count(),
        "cuda_err": _err(lambda: lib.ones(2).cuda()),
        "to_err": _err(lambda: lib.ones(2).to("cuda")),
        "factory_err": _err(lambda: lib.zeros(2, device="cuda")),
    }


@case("Tensor.item", "Tensor.tolist", "Tensor.size", "Tensor.numel", "Tensor.dim", "Tensor.element_size", "Tensor.data_ptr")
def introspection(lib: Any) -> Dict[str, Any]:
    x = lib.arange(6.0).reshape(2, 3)
    v = x[1]
    return {
        "item": lib.tensor(2.5).item(),
        "item_int": lib.tensor([7]).item(),
        "item_bool": lib.tensor(True).item(),
        "item_err": _err(lambda: x.item()),
        "tolist": x.tolist(),
        "tolist_0d": lib.tensor(3).tolist(),
        "tolist_b": lib.tensor([True]).tolist(),
        "size": x.size(),
        "size_d": x.size(-1),
        "size_is_tuple": isinstance(x.size(), tuple),
        "numel": x.numel(),
        "numel_0d": lib.tensor(1.0).numel(),
        "numel_empty": lib.zeros(0, 3).numel(),
        "dim": (x.dim(), lib.tensor(1).dim()),
        "esize": (
            x.element_size(),
            lib.tensor([1]).element_size(),
            lib.tensor([True]).element_size(),
            x.double().element_size(),
            x.bfloat16().element_size(),
        ),
        "ptr_view": v.data_ptr() - x.data_ptr(),
        "ptr_int": isinstance(x.data_ptr(), int),
    }


@case("torch.finfo")
def finfo(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for d in ("float32", "float64", "float16", "bfloat16"):
        f = lib.finfo(getattr(lib, d))
        out[d] = [f.eps, f.max, f.min, f.tiny, f.bits, f.resolution]
    out["default"] = lib.finfo().eps
    out["int_err"] = _err(lambda: lib.finfo(lib.int64))
    return out


@case("torch.is_tensor")
def is_tensor(lib: Any) -> Dict[str, Any]:
    return {
        "t": lib.is_tensor(lib.ones(1)),
        "p": lib.is_tensor(lib.nn.Parameter(lib.ones(1))),
        "l": lib.is_tensor([1]),
        "n": lib.is_tensor(np.ones(1)),
    }


# =====================================================================================
# In-place fills and copy
# =====================================================================================


@case("Tensor.copy_", "Tensor.fill_", "Tensor.zero_", "Tensor.clone", "Tensor.detach", "Tensor.detach_", "Tensor.requires_grad_")
def copy_fill(lib: Any) -> Dict[str, Any]:
    x = lib.zeros(2, 3)
    r = x.copy_(lib.tensor([1.0, 2.0, 3.0]))  # broadcast
    y = lib.zeros(2, dtype=lib.int64)
    y.copy_(lib.tensor([1.7, -2.2]))
    f = lib.ones(3).fill_(2.5)
    z = lib.ones(2).zero_()
    a = lib.ones(2, requires_grad=True)
    c = a.clone()
    d = a.detach()
    d2 = (a * 2).detach_()
    v = lib.arange(3.0)
    cl = v.clone()
    cl[0] = 10.0
    dv = v.detach()
    dv[1] = 20.0  # shares storage
    w = lib.ones(2)
    rw = w.requires_grad_()
    src = lib.ones(2, requires_grad=True)
    dst = lib.zeros(2)
    dst.copy_(src * 3)
    _back(lib, dst)
    return {
        "x": x,
        "same": r is x,
        "y": y,
        "f": f,
        "fill_t": lib.zeros(2).fill_(lib.tensor(4.0)),
        "z": z,
        "c_rg": (c.requires_grad, c.grad_fn is not None),
        "d_rg": (d.requires_grad, d.grad_fn is None, d2.requires_grad, d2.is_leaf),
        "v": v,
        "rw": (rw is w, w.requires_grad, lib.ones(1).requires_grad_(False).requires_grad),
        "copy_grad": src.grad,
        "copy_err": _err(lambda: lib.zeros(2).copy_(lib.zeros(3))),
        "nonleaf_err": _err(lambda: (a * 2).requires_grad_(False)),
    }


@case("Tensor.pow", "torch.pow", "Tensor.round", "torch.round", "Tensor.frac", "Tensor.trunc")
def pow_round_edges(lib: Any) -> Dict[str, Any]:
    """C's pow values with tensor exponents (`1 ** nan`, `(-1) ** inf`, `nan ** 0`, ...),
    `round(decimals=)`, and the rounding family on bool and integer tensors."""
    nan, inf = math.nan, math.inf
    b = lib.tensor([1.0, 1.0, nan, 0.0, -1.0, 2.0, -8.0, 0.0, -2.0, -0.0])
    e = lib.tensor([nan, inf, 0.0, 0.0, inf, -inf, 1 / 3, -1.0, 3.0, -3.0])
    x = lib.tensor([1.2345, -2.5, 1234.5, 0.125, 0.135, 2.675, 1.55, nan, -inf], requires_grad=True)
    r = x.round(decimals=2)
    (r.sum() + lib.round(x, decimals=-2).sum()).backward()
    bools, ints = lib.tensor([True, False]), lib.tensor([3, -4])
    return {
        "pow": b**e,
        "fn": lib.pow(b, e),
        "f64": lib.pow(b.double(), e.double()),
        "half": (b.half() ** e.half()).float(),
        "r2": r,
        "r_neg": lib.round(x.detach(), decimals=-2),
        "r0": x.detach().round(decimals=0),
        "r": lib.round(x.detach()),
        "gx": x.grad,
        "r_int": ints.round(),
        "r_int_dec": _err(lambda: ints.round(decimals=1)),
        "bool": [_err(lambda n=n: getattr(bools, n)()) for n in ("floor", "ceil", "round", "trunc", "frac", "abs")],
        "int": [ints.floor(), ints.ceil(), ints.trunc(), ints.abs(), _err(lambda: ints.frac())],
    }


@case("Tensor.clamp", "torch.clamp", "torch.clip", "Tensor.clamp_")
def clamp(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    y = x.clamp(-0.5, 0.5)
    _back(lib, y)
    z = _special(lib)
    r = z.clamp_(min=-1.0)
    return {
        "y": y,
        "gx": x.grad,
        "min": lib.clamp(x.detach(), min=0.0),
        "max": lib.clip(x.detach(), max=0.1),
        "tensor_bounds": x.detach().clamp(lib.zeros(4), lib.ones(4) * 0.2),
        "int": lib.tensor([-3, 5, 1]).clamp(0, 2),
        "int_f": lib.tensor([-3, 5, 1]).clamp(0.5),
        "inplace": z,
        "same": r is z,
        "nan": _special(lib).clamp(-1, 1),
        "err": _err(lambda: x.clamp()),
        "g_bounds": _clamp_bound_grads(lib),
    }


@case("F.relu", "F.hardtanh", "F.relu6", "F.hardswish", "nn.ReLU6")
def activation_bound_grads(lib: Any) -> Dict[str, Any]:
    """Values and gradients of the piecewise activations at their kinks and at NaN:
    relu and hardtanh pass NaN's gradient, hardswish is 0 at -3 and 1 at 3."""
    out: Dict[str, Any] = {}
    fs = {
        "relu": lambda t: _F(lib).relu(t),
        "relu_inplace": lambda t: _F(lib).relu(t * 1, inplace=True),
        "hardtanh": lambda t: _F(lib).hardtanh(t, -1.0, 1.0),
        "relu6": lambda t: _F(lib).relu6(t * 3),
        "relu6_layer": lambda t: lib.nn.ReLU6()(t * 3),
        "hardswish": lambda t: _F(lib).hardswish(t * 3),
        "leaky": lambda t: _F(lib).leaky_relu(t, 0.1),
    }
    for k, f in fs.items():
        t = lib.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, math.nan], requires_grad=True)
        y = f(t)
        y.sum().backward()
        out[k] = y
        out["g_" + k] = t.grad
    return out


def _clamp_bound_grads(lib: Any) -> List[Any]:
    """Gradients of number-bounded clamps at the bounds, inside, outside and at NaN
    (PyTorch's pass only strictly inside), and of tensor-bounded ones (split at ties)."""
    out = []
    for f in (
        lambda t: t.clamp(0.5, 1.0),
        lambda t: t.clamp(min=0.5),
        lambda t: lib.clamp(t, max=1.0),
        lambda t: lib.clip(t, 0.5, 1),
        lambda t: t.clamp_min(0.5),
        lambda t: t.clamp(lib.tensor(0.5), lib.tensor(1.0)),
    ):
        t = lib.tensor([0.0, 0.5, 0.75, 1.0, 2.0, math.nan], requires_grad=True)
        f(t).sum().backward()
        out.append(t.grad)
    return out


@case("Tensor.softmax", "torch.softmax", "F.softmax")
def softmax(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, grad=True)
    y = x.softmax(-1)
    _back(lib, y)
    return {
        "y": y,
        "gx": x.grad,
        "d0": lib.softmax(x.detach(), 0),
        "F": _F(lib).softmax(x.detach(), dim=1),
        "dtype": _F(lib).softmax(x.detach(), dim=1, dtype=lib.float64),
        "inf": lib.tensor([[0.0, -math.inf], [-math.inf, -math.inf]]).softmax(-1),
        "big": lib.tensor([1000.0, 0.0]).softmax(0),
        "empty": lib.zeros(0, 3).softmax(-1),
        "int_err": _err(lambda: lib.tensor([1, 2]).softmax(0)),
    }


@case("torch.softmax", "F.softmax", "F.log_softmax", cid="softmax_mid")
def softmax_mid(lib: Any) -> Dict[str, Any]:
    """Over a middle dim (the strided kernel): inner rows of 37 (two vectors and a
    tail), a segmentation-style (N, classes, H, W) input, -inf and NaN, gradients."""
    x = _r(lib, 2, 5, 37, seed="smid", grad=True) * 4
    y = lib.softmax(x, 1)
    z = _F(lib).log_softmax(x, dim=0)
    loss = (y * _w(lib, y)).sum() + (z * _w(lib, z)).sum()
    loss.backward()
    seg = _r(lib, 2, 21, 8, 9, seed="sseg") * 10
    edge = lib.tensor([[[0.0, -math.inf, math.nan], [1.0, -math.inf, 2.0]]])
    return {
        "y": y,
        "z": z,
        "gx": x.grad,
        "seg": _F(lib).softmax(seg, dim=1),
        "seg_log": _F(lib).log_softmax(seg, dim=1),
        "edge": lib.softmax(edge, 1),
        "edge_log": lib.log_softmax(edge, 1),
    }


# =====================================================================================
# Random number functions: properties only
# =====================================================================================


def _stats(t: Any) -> Tuple[float, float]:
    a = np.asarray(t.double().numpy())
    return float(a.mean()), float(a.std())


@case("torch.manual_seed", "torch.randn", "torch.randn_like", "torch.rand", "torch.rand_like")
def rand_normal(lib: Any) -> Dict[str, Any]:
    lib.manual_seed(123)
    a = lib.randn(4, 5)
    lib.manual_seed(123)
    b = lib.randn(4, 5)
    c = lib.randn(4, 5)
    big = lib.randn(20000)
    m, s = _stats(big)
    u = lib.rand(20000)
    um, us = _stats(u)
    rl = lib.randn_like(lib.zeros(2, 3, dtype=lib.float64))
    ul = lib.rand_like(lib.zeros(3))
    g = lib.manual_seed(5)
    return {
        "repro": bool((a == b).all()),
        "advances": bool((a != c).any()),
        "shape": (a.shape, a.dtype, lib.randn((2, 3)).shape, lib.randn(2, dtype=lib.float64).dtype),
        "normal": (abs(m) < 0.05, abs(s - 1.0) < 0.05),
        "uniform": (float(u.min()) >= 0.0, float(u.max()) < 1.0, abs(um - 0.5) < 0.02, abs(us - 1 / math.sqrt(12)) < 0.02),
        "like": (rl.shape, rl.dtype, ul.shape, ul.dtype),
        "gen": isinstance(g, lib.Generator),
        "rg": lib.randn(2, requires_grad=True).requires_grad,
        "empty": lib.randn(0).shape,
    }


@case("torch.randint", "torch.randperm", "torch.multinomial")
def rand_int(lib: Any) -> Dict[str, Any]:
    r = lib.randint(0, 10, (5000,))
    r2 = lib.randint(5, (3, 2))
    p = lib.randperm(50)
    probs = lib.tensor([0.0, 0.2, 0.8])
    m = lib.multinomial(probs, 4000, replacement=True)
    frac = float((m == 2).float().mean())
    nr = lib.multinomial(lib.tensor([[0.1, 0.0, 0.5, 0.4]]), 3)
    return {
        "r": (r.dtype, r.shape, int(r.min()) >= 0, int(r.max()) <= 9, len(set(r.tolist())) == 10),
        "r2": (r2.shape, int(r2.max()) < 5),
        "rdt": lib.randint(0, 3, (2,), dtype=lib.int32).dtype,
        "p": (p.dtype, sorted(p.tolist()) == list(range(50))),
        "p0": lib.randperm(0).shape,
        "m": (m.dtype, m.shape, int((m == 0).sum()), abs(frac - 0.8) < 0.03),
        "nr": (nr.shape, sorted(nr[0].tolist()) == [0, 2, 3]),
        "err": _err(lambda: lib.multinomial(lib.tensor([0.5, 0.5]), 3)),
        "bad_range": _err(lambda: lib.randint(5, 2, (2,))),
    }


@case("Tensor.uniform_", "Tensor.normal_", "Tensor.random_", "Tensor.bernoulli_")
def inplace_random(lib: Any) -> Dict[str, Any]:
    u = lib.empty(10000).uniform_(-2, 3)
    n = lib.empty(10000).normal_(1.0, 0.5)
    r = lib.empty(2000).random_(0, 4)
    b = lib.empty(10000).bernoulli_(0.3)
    um, _ = _stats(u)
    nm, ns = _stats(n)
    x = lib.zeros(3)
    return {
        "u": (float(u.min()) >= -2, float(u.max()) < 3, abs(um - 0.5) < 0.1),
        "n": (abs(nm - 1.0) < 0.03, abs(ns - 0.5) < 0.03),
        "r": (r.dtype, sorted(set(r.tolist())) == [0.0, 1.0, 2.0, 3.0]),
        "ri": lib.zeros(100, dtype=lib.int64).random_(3).max().item() <= 2,
        "b": (sorted(set(b.tolist())) == [0.0, 1.0], abs(float(b.mean()) - 0.3) < 0.03),
        "same": x.uniform_() is x,
    }


@case("nn.Dropout", "F.dropout", "nn.Dropout2d")
def dropout(lib: Any) -> Dict[str, Any]:
    x = lib.ones(200, 100, requires_grad=True)
    d = lib.nn.Dropout(0.25)
    y = d(x)
    zero = float((y == 0).float().mean())
    kept = y[y != 0]
    y.sum().backward()
    d.eval()
    ye = d(x)
    fy = _F(lib).dropout(x.detach(), 0.5, training=True)
    d2 = lib.nn.Dropout2d(0.5)
    z = d2(lib.ones(4, 50, 3, 3))
    ch = z.sum((2, 3))
    return {
        "train": (abs(zero - 0.25) < 0.02, bool(lib.allclose(kept, lib.full_like(kept, 1 / 0.75)))),
        "grad_match": bool(lib.equal(x.grad, y.detach())),
        "eval_identity": bool(lib.equal(ye, x)),
        "F_default_train": bool(lib.equal(_F(lib).dropout(x.detach(), 0.5, training=False), x.detach())),
        "F": abs(float((fy == 0).float().mean()) - 0.5) < 0.02,
        "p0": bool(lib.equal(_F(lib).dropout(x.detach(), 0.0), x.detach())),
        "p1": _F(lib).dropout(lib.ones(3), 1.0),
        "d2_whole_channels": sorted({round(v, 3) for v in ch.flatten().tolist()}),
        "err": _err(lambda: lib.nn.Dropout(1.5)),
        "repr": repr(lib.nn.Dropout(0.1)),
    }


# =====================================================================================
# Autograd / grad mode / context
# =====================================================================================


@case("Tensor.backward", "torch.no_grad", "torch.inference_mode")
def grad_mode(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, grad=True)
    y = (x * x).sum()
    y.backward()
    g1 = x.grad.clone()
    (x * 3).sum().backward()  # accumulates
    with lib.no_grad():
        z = x * 2
        nested = lib.is_grad_enabled()
    with lib.inference_mode():
        w = x * 2
        inf_on = lib.is_inference_mode_enabled()
    v = _r(lib, 2, grad=True)
    (v * 2).backward(lib.tensor([1.0, -1.0]))

    @lib.no_grad()
    def deco(t: Any) -> Any:
        return t * 2

    return {
        "g1": g1,
        "gacc": x.grad,
        "no_grad": (z.requires_grad, nested, lib.is_grad_enabled()),
        "inference": (w.requires_grad, inf_on, lib.is_inference_mode_enabled()),
        "gv": v.grad,
        "deco": deco(x).requires_grad,
        "nonscalar_err": _err(lambda: (x * 2).backward()),
        "nograd_err": _err(lambda: lib.ones(2).sum().backward()),
        "twice_err": _err(lambda: [y.backward() for _ in range(1)]),
    }


@case("torch.compile")
def compile_(lib: Any) -> Dict[str, Any]:
    # candle_py documents `compile` as returning a callable that computes exactly what
    # the model does (eager only); torch's compiled module computes the same values.
    m = _load(lib, lib.nn.Linear(3, 2), "cmp")
    x = _r(lib, 4, 3)
    cm = lib.compile(m, backend="eager")
    f = lib.compile(lambda t: t.sin() * 2, backend="eager")
    return {"y": cm(x), "ref": m(x), "f": f(x), "callable": callable(cm)}


@case("torch.set_float32_matmul_precision", "torch.is_autocast_enabled", "torch.set_printoptions")
def settings(lib: Any) -> Dict[str, Any]:
    before = lib.get_float32_matmul_precision()
    lib.set_float32_matmul_precision("high")
    got = lib.get_float32_matmul_precision()
    lib.set_float32_matmul_precision(before)
    bad = _err(lambda: lib.set_float32_matmul_precision("bogus"))
    lib.set_printoptions(precision=2)
    s = str(lib.tensor([1.23456, 2.5]))
    lib.set_printoptions(profile="default")
    s2 = str(lib.tensor([1.23456]))
    with lib.autocast("cpu", dtype=lib.bfloat16):
        inside = lib.is_autocast_enabled("cpu")
    return {
        "prec": (before, got),
        "bad": bad,
        "autocast": (lib.is_autocast_enabled(), inside, lib.is_autocast_enabled("cpu")),
        "print": s.replace("torch.", "").replace("candle_py.", ""),
        "print_default": s2,
    }


# =====================================================================================
# nn.Module machinery
# =====================================================================================


def _mlp(lib: Any) -> Any:
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Identity()])
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 1, bias=False)})
            self.scale = nn.Parameter(lib.ones(4))
            self.register_buffer("offset", lib.zeros(4))
            self.register_buffer("tmp", lib.ones(1), persistent=False)
            self.extra = nn.Buffer(lib.full((2,), 3.0))

        def forward(self, x: Any) -> Any:
            h = self.fc(x) * self.scale + self.offset
            for b in self.blocks:
                h = b(h).relu()
            return self.heads["a"](h).sum(-1) + self.heads["b"](h).squeeze(-1) + self.extra.sum()

    return Net()


@case(
    "nn.Parameter", "nn.ModuleList", "nn.ModuleDict", "nn.Buffer", "nn.Identity",
    "nn.Module.register_buffer", "nn.Module.named_parameters", "nn.Module.load_state_dict",
    tol=TOL_MM,
)  # fmt: skip
def module_machinery(lib: Any) -> Dict[str, Any]:
    m = _mlp(lib)
    x = _r(lib, 5, 3, grad=True)
    out = _module(lib, m, x, seed="mlp")
    sd = m.state_dict()
    p = lib.nn.Parameter(lib.ones(2))
    q = lib.nn.Parameter(lib.ones(2), requires_grad=False)
    missing = _mlp(lib).load_state_dict({k: v for k, v in sd.items() if k != "fc.bias"}, strict=False)
    extra = dict(sd)
    extra["bogus"] = lib.zeros(1)
    out.update(
        {
            "sd_keys": list(sd),
            "buffers": [n for n, _ in m.named_buffers()],
            "modules": [n for n, _ in m.named_modules()],
            "children": [n for n, _ in m.named_children()],
            "n_params": sum(t.numel() for t in m.parameters()),
            "param": (p.requires_grad, isinstance(p, lib.Tensor), isinstance(p, lib.nn.Parameter), q.requires_grad, p.is_leaf),
            "param_repr_ok": repr(p).startswith("Parameter containing:"),
            "ml": (len(m.blocks), type(m.blocks[-1]).__name__, len(m.blocks[:1])),
            "md": (list(m.heads.keys()), "a" in m.heads, len(m.heads)),
            "missing": (list(missing.missing_keys), list(missing.unexpected_keys)),
            "strict_err": _err(lambda: _mlp(lib).load_state_dict(extra)),
            "shape_err": _err(lambda: lib.nn.Linear(2, 2).load_state_dict({"weight": lib.zeros(3, 2), "bias": lib.zeros(2)})),
            "identity": lib.nn.Identity(54, unused="x")(x.detach()),
            "buf_rg": m.offset.requires_grad,
        }
    )
    m.zero_grad()
    out["zeroed"] = [pp.grad is None for pp in m.parameters()]
    return out


@case("nn.Sequential", tol=TOL_MM)
def sequential(lib: Any) -> Dict[str, Any]:
    nn = lib.nn
    s = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 2))
    out = _module(lib, s, _r(lib, 3, 4, grad=True), seed="seq")
    out["len"] = len(s)
    out["idx"] = type(s[1]).__name__
    out["slice"] = type(s[1:]).__name__
    out["neg"] = type(s[-1]).__name__
    out["keys"] = list(s.state_dict())
    od = nn.Sequential()
    od.add_module("a", nn.Identity())
    od.append(nn.Tanh())
    out["named"] = [n for n, _ in od.named_children()]
    out["empty"] = nn.Sequential()(lib.ones(2))
    return out


@case("nn.DataParallel", tol=TOL_MM)
def data_parallel(lib: Any) -> Dict[str, Any]:
    m = _load(lib, lib.nn.Linear(3, 2), "dp")
    dp = lib.nn.DataParallel(m)
    x = _r(lib, 4, 3)
    return {"y": dp(x), "module": dp.module is m, "keys": list(dp.state_dict())}


# =====================================================================================
# Layers (forward + backward, weights through load_state_dict)
# =====================================================================================


def _layer(
    name: str, ctor: Callable[[Any], Any], shape: Tuple[int, ...], tol: float = TOL, train: bool = True, cid: str = "", kind: str = "normal"
) -> None:
    def fn(lib: Any) -> Dict[str, Any]:
        return _module(lib, ctor(lib), _r(lib, *shape, seed=name, kind=kind, grad=True), seed=name, train=train)

    case(name, tol=tol, cid=cid or name.replace(".", "_").lower())(fn)


_layer("nn.Linear", lambda lib: lib.nn.Linear(4, 3), (2, 5, 4), TOL_MM)
_layer("nn.Linear", lambda lib: lib.nn.Linear(4, 3, bias=False), (4,), TOL_MM, cid="nn_linear[nobias_1d]")
_layer("nn.Conv2d", lambda lib: lib.nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 7), TOL_MM)
_layer(
    "nn.Conv2d",
    lambda lib: lib.nn.Conv2d(4, 4, (3, 1), padding="same", groups=2, dilation=2, bias=False),
    (1, 4, 6, 5),
    TOL_MM,
    cid="nn_conv2d[groups_same]",
)
_layer("nn.Conv1d", lambda lib: lib.nn.Conv1d(3, 5, 3, padding=1), (2, 3, 8), TOL_MM)
_layer("nn.ConvTranspose2d", lambda lib: lib.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1), (2, 3, 4, 4), TOL_MM)
_layer("nn.LayerNorm", lambda lib: lib.nn.LayerNorm(6), (2, 3, 6))
_layer("nn.LayerNorm", lambda lib: lib.nn.LayerNorm((3, 6), elementwise_affine=False), (2, 3, 6), cid="nn_layernorm[noaffine]")
_layer("nn.RMSNorm", lambda lib: lib.nn.RMSNorm(6, eps=1e-6), (2, 3, 6))
_layer("nn.GroupNorm", lambda lib: lib.nn.GroupNorm(2, 4), (2, 4, 3, 3))
_layer("nn.InstanceNorm2d", lambda lib: lib.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4))
_layer("nn.BatchNorm2d", lambda lib: lib.nn.BatchNorm2d(3), (4, 3, 2, 2), train=False, cid="nn_batchnorm2d[eval]")
_layer("nn.ReLU", lambda lib: lib.nn.ReLU(), (3, 4))
_layer("nn.GELU", lambda lib: lib.nn.GELU(), (3, 4))
_layer("nn.GELU", lambda lib: lib.nn.GELU(approximate="tanh"), (3, 4), cid="nn_gelu[tanh]")
_layer("nn.SiLU", lambda lib: lib.nn.SiLU(), (3, 4))
_layer("nn.LeakyReLU", lambda lib: lib.nn.LeakyReLU(0.2), (3, 4))
_layer("nn.Softmax", lambda lib: lib.nn.Softmax(dim=1), (3, 4))
_layer("nn.Sigmoid", lambda lib: lib.nn.Sigmoid(), (3, 4))
_layer("nn.Tanh", lambda lib: lib.nn.Tanh(), (3, 4))
_layer("nn.Flatten", lambda lib: lib.nn.Flatten(), (2, 3, 4))
_layer("nn.Upsample", lambda lib: lib.nn.Upsample(scale_factor=2, mode="nearest"), (1, 2, 3, 3))
_layer(
    "nn.Upsample", lambda lib: lib.nn.Upsample(size=(5, 4), mode="bilinear", align_corners=False), (1, 2, 3, 3), cid="nn_upsample[bilinear]"
)
_layer("nn.AvgPool2d", lambda lib: lib.nn.AvgPool2d(2), (1, 2, 5, 5))
_layer("nn.MaxPool2d", lambda lib: lib.nn.MaxPool2d(3, stride=2, padding=1), (1, 2, 5, 5))
_layer("nn.AdaptiveAvgPool2d", lambda lib: lib.nn.AdaptiveAvgPool2d((2, 3)), (1, 2, 5, 7))
_layer("nn.AdaptiveAvgPool2d", lambda lib: lib.nn.AdaptiveAvgPool2d(1), (2, 3, 4, 4), cid="nn_adaptiveavgpool2d[1]")
_layer("nn.PixelShuffle", lambda lib: lib.nn.PixelShuffle(2), (1, 8, 2, 3))
_layer("nn.ReflectionPad2d", lambda lib: lib.nn.ReflectionPad2d((1, 2, 0, 1)), (1, 2, 3, 4))


@case("nn.Embedding")
def embedding(lib: Any) -> Dict[str, Any]:
    e = _load(lib, lib.nn.Embedding(10, 4, padding_idx=0), "emb")
    idx = lib.tensor([[0, 3, 3], [9, 1, 0]])
    y = e(idx)
    _back(lib, y)
    e2 = lib.nn.Embedding(5, 2)
    return {
        "y": y,
        "gw": e.weight.grad,
        "pad_row_zero_init": bool((lib.nn.Embedding(4, 3, padding_idx=1).weight[1] == 0).all()),
        "shape": (e2.weight.shape, e2.weight.requires_grad),
        "oob": _err(lambda: e(lib.tensor([10]))),
        "float_idx": _err(lambda: e(lib.tensor([1.0]))),
        "int32": e(lib.tensor([2], dtype=lib.int32)),
    }


def _bn_train(lib: Any) -> Dict[str, Any]:
    bn = _load(lib, lib.nn.BatchNorm2d(3, momentum=0.2), "bn")
    x = _r(lib, 4, 3, 2, 2, grad=True)
    y = bn(x)
    _back(lib, y)
    bn(_r(lib, 4, 3, 2, 2, seed="x2"))
    bn.eval()
    ye = bn(_r(lib, 2, 3, 2, 2, seed="x3"))
    return {
        "y": y,
        "gx": x.grad,
        "gw": bn.weight.grad,
        "gb": bn.bias.grad,
        "rm": bn.running_mean,
        "rv": bn.running_var,
        "nbt": bn.num_batches_tracked,
        "eval": ye,
        "keys": list(bn.state_dict()),
    }


case("nn.BatchNorm2d", cid="nn_batchnorm2d[train]")(_bn_train)


@case("nn.LSTM", tol=TOL_MM)
def lstm(lib: Any) -> Dict[str, Any]:
    m = _load(lib, lib.nn.LSTM(3, 4, num_layers=2, batch_first=True), "lstm")
    x = _r(lib, 2, 5, 3, grad=True)
    y, (h, c) = m(x)
    _back(lib, y.sum() + h.sum() * 0.5 + c.sum() * 0.25)
    h0 = _r(lib, 2, 2, 4, seed="h0")
    c0 = _r(lib, 2, 2, 4, seed="c0")
    y2, _ = m(x.detach(), (h0, c0))
    return {
        "y": y,
        "h": h,
        "c": c,
        "gx": x.grad,
        "gw": m.weight_ih_l0.grad,
        "gwh1": m.weight_hh_l1.grad,
        "y2": y2,
        "keys": list(m.state_dict()),
    }


@case("nn.LSTMCell", tol=TOL_MM)
def lstm_cell(lib: Any) -> Dict[str, Any]:
    m = _load(lib, lib.nn.LSTMCell(3, 4), "cell")
    x = _r(lib, 2, 3, grad=True)
    h, c = m(x)
    h2, c2 = m(x, (h, c))
    _back(lib, h2 + c2 * 0.5)
    return {
        "h": h,
        "c": c,
        "h2": h2,
        "c2": c2,
        "gx": x.grad,
        "gw": m.weight_hh.grad,
        "unbatched": m(x.detach()[0])[0],
        "keys": list(m.state_dict()),
    }


@case("nn.MultiheadAttention", tol=TOL_MM)
def mha(lib: Any) -> Dict[str, Any]:
    m = _load(lib, lib.nn.MultiheadAttention(8, 2, batch_first=True), "mha")
    q = _r(lib, 2, 3, 8, seed="q", grad=True)
    kv = _r(lib, 2, 4, 8, seed="kv")
    y, w = m(q, kv, kv)
    _back(lib, y)
    mask = lib.tensor([[False, False, True, True], [False, False, False, True]])
    y2, w2 = m(q.detach(), kv, kv, key_padding_mask=mask, average_attn_weights=False)
    causal = lib.ones(3, 3, dtype=lib.bool).triu(1)
    y3, w3 = m(q.detach(), q.detach(), q.detach(), attn_mask=causal, need_weights=False)
    return {"y": y, "w": w, "gq": q.grad, "gw": m.in_proj_weight.grad, "y2": y2, "w2": w2, "y3": y3, "w3": w3, "keys": list(m.state_dict())}


def _loss_inputs(lib: Any) -> Tuple[Any, Any, Any]:
    logits = _r(lib, 4, 5, seed="logits", grad=True)
    target = lib.tensor([1, 0, 4, 2])
    p = _r(lib, 4, 5, seed="p", kind="unit", grad=True)
    return logits, target, p


@case("F.cross_entropy", "nn.CrossEntropyLoss")
def cross_entropy(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x, t, _ = _loss_inputs(lib)
    loss = F.cross_entropy(x, t)
    loss.backward()
    xd = x.detach()
    soft = xd.softmax(-1)
    return {
        "loss": loss,
        "gx": x.grad,
        "none": F.cross_entropy(xd, t, reduction="none"),
        "sum": F.cross_entropy(xd, t, reduction="sum"),
        "ignore": F.cross_entropy(xd, lib.tensor([1, -100, 4, -100])),
        "ignore_all": F.cross_entropy(xd[:1], lib.tensor([-100])),
        "smooth": F.cross_entropy(xd, t, label_smoothing=0.1),
        "weight": F.cross_entropy(xd, t, weight=lib.arange(1.0, 6.0)),
        "probs": F.cross_entropy(xd, soft),
        "nd": F.cross_entropy(_r(lib, 2, 5, 3), lib.tensor([[0, 1, 2], [4, 3, 0]])),
        "module": lib.nn.CrossEntropyLoss(ignore_index=0)(xd, t),
        "oob": _err(lambda: F.cross_entropy(xd, lib.tensor([5, 0, 0, 0]))),
        "float_target_err": _err(lambda: F.cross_entropy(xd, lib.tensor([1.0, 0.0, 0.0, 0.0]))),
    }


@case("F.cross_entropy", cid="cross_entropy_wide_rows")
def cross_entropy_wide_rows(lib: Any) -> Dict[str, Any]:
    """A batch large enough to split over threads (66 x 1003 logits: rows with a
    16-lane tail), ignored rows, a row with -inf logits, float64, and the gradients of
    "mean", "none" (weighted upstream) and weighted label smoothing; each gradient as
    five whole rows and a weighted sum of every row (a small fixture)."""
    F = _F(lib)
    xn = _np(66, 1003, seed="ce_wide") * 3.0
    xn[7, ::2] = -math.inf
    tn = (np.arange(66) * 37) % 1003
    tn[7] = 1
    tn[::11] = -100
    t = lib.tensor(tn)
    rows = lib.tensor([0, 7, 11, 40, 65])
    wcol = lib.cos(lib.arange(1003.0) * 0.37)

    def summary(g: Any) -> Tuple[Any, Any]:
        return g[rows], (g.double() * wcol.double()).sum(1)

    out: Dict[str, Any] = {}
    for name, kw in (("mean", {}), ("wsmooth", {"label_smoothing": 0.2, "weight": lib.cos(lib.arange(1003.0) * 0.1) + 1.5})):
        x = lib.tensor(xn, requires_grad=True)
        loss = F.cross_entropy(x, t, **kw)
        loss.backward()
        out[name], (out[f"g_{name}_rows"], out[f"g_{name}_sums"]) = loss, summary(x.grad)
    x = lib.tensor(xn, requires_grad=True)
    none = F.cross_entropy(x, t, reduction="none")
    _back(lib, none)
    out["none"], (out["g_none_rows"], out["g_none_sums"]) = none, summary(x.grad)
    x64 = lib.tensor(xn.astype(np.float64), requires_grad=True)
    l64 = F.cross_entropy(x64, t)
    l64.backward()
    out["f64"], (out["g_f64_rows"], out["g_f64_sums"]) = l64, summary(x64.grad)
    return out


@case("F.layer_norm", cid="layer_norm_row_tails")
def layer_norm_row_tails(lib: Any) -> Dict[str, Any]:
    """Rows whose length is not a multiple of the 16/64-float blocks (masked tails),
    shorter than one block, a constant row, and an offset mean; values and gradients
    (d = 1 left out: its normalized value is 0 exactly, torch's is rounding noise)."""
    F = _F(lib)
    out: Dict[str, Any] = {}
    for d in (5, 17, 100, 129):
        xn = _np(9, d, seed=f"ln{d}") * 0.5 + 10.0
        xn[4] = 3.0
        x = lib.tensor(xn, requires_grad=True)
        w = _r(lib, d, seed=f"lnw{d}", grad=True)
        b = _r(lib, d, seed=f"lnb{d}", grad=True)
        y = F.layer_norm(x, (d,), w, b)
        _back(lib, y)
        out[f"y{d}"], out[f"gx{d}"], out[f"gw{d}"], out[f"gb{d}"] = y, x.grad, w.grad, b.grad
    return out


@case("F.avg_pool2d", "F.avg_pool3d", "F.adaptive_avg_pool3d", "nn.AvgPool3d", cid="avg_pool_rows_first")
def avg_pool_rows_first(lib: Any) -> Dict[str, Any]:
    """Average pooling whose windows span several rows and most of each row (3x3 and
    3-d windows, overlapping or not, padded, ceil_mode, count_include_pad=False,
    divisor_override, adaptive 3-d): the path that adds a window's rows first; values
    and gradients."""
    F = _F(lib)
    out: Dict[str, Any] = {}
    x2 = _r(lib, 2, 3, 9, 11, seed="ar2", grad=True)
    x3 = _r(lib, 2, 2, 7, 9, 10, seed="ar3", grad=True)
    ys = {
        "k3s2p1_3d": F.avg_pool3d(x3, 3, 2, 1),
        "k3s2p1_nocount_3d": F.avg_pool3d(x3, 3, 2, 1, count_include_pad=False),
        "ceil_3d": F.avg_pool3d(x3, (2, 3, 3), (2, 2, 3), (1, 1, 0), ceil_mode=True),
        "div_3d": F.avg_pool3d(x3, 2, divisor_override=5),
        "k3s1p1_2d": F.avg_pool2d(x2, 3, 1, 1),
        "k3s2_ceil_2d": F.avg_pool2d(x2, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        "adaptive_3d": F.adaptive_avg_pool3d(x3, (3, 4, 4)),
        "layer_3d": lib.nn.AvgPool3d((3, 2, 2), stride=(1, 2, 2))(x3),
    }
    out.update(ys)
    _back_all(lib, ys)
    out["g2"], out["g3"] = x2.grad, x3.grad
    return out


@case("F.conv1d", "F.conv2d", cid="conv_long_rows", tol=TOL_MM)
def conv_long_rows(lib: Any) -> Dict[str, Any]:
    """Convolutions whose output rows are long (1-D rows of 700, 2-D rows of 112 at
    stride 1 and 2-D/1-D at x-stride 2): the strips of outputs inside one row read a
    copy of their input windows, and the weight gradient walks the positions in chunks
    that split rows; values and gradients of input, weight and bias."""
    F = _F(lib)
    out: Dict[str, Any] = {}
    x1 = _r(lib, 2, 16, 700, seed="cl1", grad=True)
    w1 = _r(lib, 64, 16, 5, seed="cw1", grad=True)
    b1 = _r(lib, 64, seed="cb1", grad=True)
    x2 = _r(lib, 2, 16, 6, 112, seed="cl2", grad=True)
    w2 = _r(lib, 16, 16, 3, 3, seed="cw2", grad=True)
    x3 = _r(lib, 2, 16, 256, seed="cl3", grad=True)
    w3 = _r(lib, 12, 16, 3, seed="cw3", grad=True)
    ys = {
        "k5p2_1d": F.conv1d(x1, w1, b1, padding=2),
        "k3p1_2d": F.conv2d(x2, w2, padding=1),
        "k3s2p1_1d": F.conv1d(x3, w3, stride=2, padding=1),
    }
    out.update(ys)
    _back_all(lib, ys)
    for k, t in (("x1", x1), ("w1", w1), ("b1", b1), ("x2", x2), ("w2", w2), ("x3", x3), ("w3", w3)):
        out["g_" + k] = t.grad
    return out


@case("F.lp_pool1d", "F.lp_pool2d", "F.lp_pool3d", "nn.LPPool1d", "nn.LPPool2d", "nn.LPPool3d")
def lp_pool(lib: Any) -> Dict[str, Any]:
    """Power-average pooling: p = 2, 1.5 (NaN where a window's sum of x ** p is), 3 on
    positive inputs, +-inf (max pooling of |x|), ceil_mode, a stride, an unbatched
    input; values and gradients; the layers' reprs."""
    F = _F(lib)
    out: Dict[str, Any] = {}
    x1, x2 = _r(lib, 2, 3, 9, grad=True), _r(lib, 2, 3, 7, 9, seed="lp2", grad=True)
    x3 = _r(lib, 2, 2, 5, 6, 7, seed="lp3", kind="pos", grad=True)
    ys = {
        "p2_1d": F.lp_pool1d(x1, 2, 2),
        "p15_1d": F.lp_pool1d(x1, 1.5, 3, 2, True),
        "inf_1d": F.lp_pool1d(x1, float("inf"), 2),
        "p2_2d": F.lp_pool2d(x2, 2.0, (2, 3), stride=(2, 1)),
        "ninf_2d": F.lp_pool2d(x2, -float("inf"), 3, 2, True),
        "p3_3d": F.lp_pool3d(x3, 3, 2),
        "unbatched_2d": F.lp_pool2d(x2[0], 2, 2),
        "layer_2d": lib.nn.LPPool2d(2, 3, stride=2)(x2),
    }
    out.update(ys)
    _back_all(lib, ys, lib.nan_to_num)
    out["g1"], out["g2"], out["g3"] = x1.grad, x2.grad, x3.grad
    out["repr"] = [repr(lib.nn.LPPool2d(2, 3, stride=2)), repr(lib.nn.LPPool1d(1.5, 2)), repr(lib.nn.LPPool3d(2, (1, 2, 2)))]
    out["zero_err"] = _err(lambda: F.lp_pool2d(x2, 0, 2))
    return out


@case("F.nll_loss", "nn.NLLLoss", "F.kl_div")
def nll_kl(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x, t, _ = _loss_inputs(lib)
    lp = F.log_softmax(x, -1)
    loss = F.nll_loss(lp, t)
    loss.backward()
    lpd = lp.detach()
    q = _r(lib, 4, 5, seed="q").softmax(-1)
    return {
        "loss": loss,
        "gx": x.grad,
        "none": F.nll_loss(lpd, t, reduction="none"),
        "module": lib.nn.NLLLoss(weight=lib.arange(1.0, 6.0))(lpd, t),
        "kl": F.kl_div(lpd, q, reduction="batchmean"),
        "kl_sum": F.kl_div(lpd, q, reduction="sum"),
        "kl_log": F.kl_div(lpd, q.log(), reduction="mean", log_target=True),
        "kl_zero_target": F.kl_div(lpd, lib.zeros(4, 5), reduction="sum"),
    }


@case("F.mse_loss", "nn.MSELoss", "F.l1_loss", "F.smooth_l1_loss")
def regression_losses(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    a = _r(lib, 3, 4, seed="a", grad=True)
    b = _r(lib, 3, 4, seed="b")
    loss = F.mse_loss(a, b) + F.l1_loss(a, b) + F.smooth_l1_loss(a, b, beta=0.5)
    loss.backward()
    ad = a.detach()
    return {
        "loss": loss,
        "ga": a.grad,
        "mse_none": F.mse_loss(ad, b, reduction="none"),
        "mse_sum": lib.nn.MSELoss(reduction="sum")(ad, b),
        "mse_mod": lib.nn.MSELoss()(ad, b),
        "l1_sum": F.l1_loss(ad, b, reduction="sum"),
        "sl1": F.smooth_l1_loss(ad, b),
        "sl1_beta0": F.smooth_l1_loss(ad, b, beta=0.0),
        "empty": F.mse_loss(lib.zeros(0), lib.zeros(0)),
        "nan": F.mse_loss(_special(lib), lib.zeros(8), reduction="none"),
    }


@case("F.binary_cross_entropy", "nn.BCELoss", "F.binary_cross_entropy_with_logits")
def bce(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x, _, p = _loss_inputs(lib)
    y = _r(lib, 4, 5, seed="y", kind="unit").round()
    loss = F.binary_cross_entropy(p, y) + F.binary_cross_entropy_with_logits(x, y)
    loss.backward()
    pd, xd = p.detach(), x.detach()
    return {
        "loss": loss,
        "gp": p.grad,
        "gx": x.grad,
        "mod": lib.nn.BCELoss(reduction="sum")(pd, y),
        "w": F.binary_cross_entropy(pd, y, weight=lib.arange(5.0)),
        "edge": F.binary_cross_entropy(lib.tensor([0.0, 1.0, 1.0]), lib.tensor([0.0, 1.0, 0.0]), reduction="none"),
        "logits_pw": F.binary_cross_entropy_with_logits(xd, y, pos_weight=lib.full((5,), 2.0)),
        "logits_big": F.binary_cross_entropy_with_logits(lib.tensor([100.0, -100.0]), lib.tensor([0.0, 0.0]), reduction="none"),
        "range_err": _err(lambda: F.binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0]))),
    }


# =====================================================================================
# Functional layers
# =====================================================================================


@case("F.linear", "F.conv2d", "F.conv1d", tol=TOL_MM)
def f_linear_conv(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x = _r(lib, 2, 3, 6, 6, grad=True)
    w = _r(lib, 4, 3, 3, 3, seed="w", grad=True)
    b = _r(lib, 4, seed="b", grad=True)
    y = F.conv2d(x, w, b, stride=(2, 1), padding=1)
    _back(lib, y)
    xl = _r(lib, 3, 5, seed="xl")
    wl = _r(lib, 2, 5, seed="wl")
    x1 = _r(lib, 2, 4, 9, seed="x1")
    w1 = _r(lib, 6, 2, 3, seed="w1")
    return {
        "y": y,
        "gx": x.grad,
        "gw": w.grad,
        "gb": b.grad,
        "valid": F.conv2d(x.detach(), w.detach()),
        "same": F.conv2d(x.detach(), w.detach(), padding="same", dilation=2),
        "lin": F.linear(xl, wl),
        "lin_b": F.linear(xl, wl, lib.ones(2)),
        "lin_1d": F.linear(xl[0], wl),
        "c1": F.conv1d(x1, w1, groups=2, stride=2),
        "c1_pad": F.conv1d(x1, w1, lib.ones(6), padding=2, groups=2),
        "err": _err(lambda: F.conv2d(x.detach(), lib.zeros(4, 2, 3, 3))),
    }


@case("F.scaled_dot_product_attention", tol=TOL_MM)
def sdpa(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    q = _r(lib, 2, 2, 4, 8, seed="q", grad=True)
    k = _r(lib, 2, 2, 5, 8, seed="k", grad=True)
    v = _r(lib, 2, 2, 5, 8, seed="v", grad=True)
    y = F.scaled_dot_product_attention(q, k, v)
    _back(lib, y)
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    bmask = lib.tensor([[True, True, False, True, False]] * 4)
    fmask = _r(lib, 4, 5, seed="fm")
    qs = _r(lib, 2, 2, 5, 8, seed="qs", grad=True)
    yc = F.scaled_dot_product_attention(qs, kd, vd, is_causal=True)
    _back(lib, yc)
    return {
        "y": y,
        "gq": q.grad,
        "gk": k.grad,
        "gv": v.grad,
        "bool": F.scaled_dot_product_attention(qd, kd, vd, attn_mask=bmask),
        "float": F.scaled_dot_product_attention(qd, kd, vd, attn_mask=fmask),
        "causal": yc,
        "gqs": qs.grad,
        "causal_rect": F.scaled_dot_product_attention(qd, kd, vd, is_causal=True),
        "scale": F.scaled_dot_product_attention(qd, kd, vd, scale=0.3),
        "3d": F.scaled_dot_product_attention(qd[0], kd[0], vd[0]),
        "p0": F.scaled_dot_product_attention(qd, kd, vd, dropout_p=0.0),
        "gqa": F.scaled_dot_product_attention(_r(lib, 1, 4, 3, 8, seed="g"), kd[:1], vd[:1], enable_gqa=True),
    }


@case("F.pad")
def pad(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x = _r(lib, 1, 2, 3, 4, grad=True)
    y = F.pad(x, (1, 2, 0, 1), value=0.5)
    _back(lib, y)
    xd = x.detach()
    return {
        "y": y,
        "gx": x.grad,
        "1d": F.pad(lib.arange(3.0), (2, 1)),
        "neg": F.pad(xd, (-1, 0, 1, -1)),
        "reflect": F.pad(xd, (2, 1, 1, 2), mode="reflect"),
        "replicate": F.pad(xd, (1, 1, 2, 0), mode="replicate"),
        "circular": F.pad(xd, (1, 2, 1, 0), mode="circular"),
        "3dim": F.pad(lib.arange(6.0).reshape(1, 2, 3), (1, 1), mode="reflect"),
        "int": F.pad(lib.tensor([1, 2]), (1, 1), value=7),
        "odd_err": _err(lambda: F.pad(xd, (1,))),
    }


@case("F.interpolate")
def interpolate(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x = _r(lib, 1, 2, 3, 4, grad=True)
    y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    _back(lib, y)
    xd = x.detach()
    return {
        "y": y,
        "gx": x.grad,
        "nearest": F.interpolate(xd, size=(5, 7)),
        "nearest_sf": F.interpolate(xd, scale_factor=1.5, mode="nearest"),
        "bil_ac": F.interpolate(xd, size=(6, 5), mode="bilinear", align_corners=True),
        "bil_down": F.interpolate(xd, size=(2, 3), mode="bilinear"),
        "1d_linear": F.interpolate(xd[0], size=7, mode="linear"),
        "area": F.interpolate(xd, size=(1, 2), mode="area"),
        "exact": F.interpolate(xd, scale_factor=2, mode="nearest-exact"),
        "err": _err(lambda: F.interpolate(xd)),
    }


@case("F.interpolate", cid="interpolate[bicubic]")
def interpolate_bicubic(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 1, 2, 3, 4)
    F = _F(lib)
    return {"a": F.interpolate(x, size=(5, 6), mode="bicubic"), "ac": F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True)}


@case("F.interpolate", cid="interpolate[kernels]")
def interpolate_kernels(lib: Any) -> Dict[str, Any]:
    """The one-pass resampling kernels (`layers::resample`): odd ratios up and down,
    float32 index edges (nearest 26 -> 22 reads position 12 at output 11, as PyTorch's
    float32 scale gives; 13 in float64), scale factors that set the source coordinates, the size-keeping copy,
    1-D and 3-D, float64, and every mode's gradient."""
    F = _F(lib)
    x = _r(lib, 2, 3, 14, 9, grad=True)
    ys = {
        "near": F.interpolate(x, size=(20, 13)),
        "near_sf": F.interpolate(x, scale_factor=(0.7, 1.3)),
        "exact": F.interpolate(x, size=(5, 17), mode="nearest-exact"),
        "exact_sf": F.interpolate(x, scale_factor=1.45, mode="nearest-exact"),
        "bil": F.interpolate(x, scale_factor=(1.7, 0.55), mode="bilinear"),
        "bil_ac": F.interpolate(x, size=(1, 19), mode="bilinear", align_corners=True),
        "bil_same": F.interpolate(x, size=(14, 9), mode="bilinear"),
        "bic": F.interpolate(x, size=(23, 4), mode="bicubic"),
        "bic_ac": F.interpolate(x, scale_factor=2.5, mode="bicubic", align_corners=True),
    }
    _back_all(lib, ys)
    x1 = _r(lib, 2, 3, 11, seed="y", grad=True)
    ys1 = {"lin": F.interpolate(x1, size=25, mode="linear"), "near1": F.interpolate(x1, scale_factor=0.6)}
    _back_all(lib, ys1)
    x3 = lib.tensor(_np(1, 2, 5, 4, 6, seed="z").astype(np.float64), requires_grad=True)
    ys3 = {
        "tri": F.interpolate(x3, size=(7, 3, 11), mode="trilinear"),
        "tri_ac": F.interpolate(x3, scale_factor=(1.5, 2.0, 0.5), mode="trilinear", align_corners=True),
        "near3": F.interpolate(x3, size=(9, 8, 4)),
    }
    _back_all(lib, ys3)
    edge = F.interpolate(_r(lib, 1, 2, 26, seed="w"), size=22)
    return {**ys, "gx": x.grad, **ys1, "gx1": x1.grad, **ys3, "gx3": x3.grad, "near_edge": edge}


@case("F.pad", cid="pad[kernels]")
def pad_kernels(lib: Any) -> Dict[str, Any]:
    """Reflect, replicate and circular padding of 1 to 3 dims on the one-pass kernel,
    uneven and zero sides, a circular pad the size of its dim, float64, gradients."""
    F = _F(lib)
    x = _r(lib, 2, 3, 6, 7, grad=True)
    ys = {
        "reflect2": F.pad(x, (3, 6, 5, 0), mode="reflect"),
        "replicate2": F.pad(x, (0, 4, 2, 9), mode="replicate"),
        "circular2": F.pad(x, (7, 2, 1, 6), mode="circular"),
        "reflect1": F.pad(x[0], (2, 1), mode="reflect"),
        "replicate1": F.pad(x[1], (5, 5), mode="replicate"),
    }
    _back_all(lib, ys)
    ys["one_dim_of_4d"] = _err(lambda: F.pad(x.detach(), (2, 1), mode="reflect"))
    ys["four_dims"] = _err(lambda: F.pad(x.detach(), (1,) * 8, mode="replicate"))
    x3 = lib.tensor(_np(2, 4, 3, 5, seed="z").astype(np.float64), requires_grad=True)
    ys3 = {
        "reflect3": F.pad(x3, (1, 4, 2, 0, 1, 2), mode="reflect"),
        "replicate3": F.pad(x3, (2, 2, 0, 3, 4, 1), mode="replicate"),
        "circular3": F.pad(x3, (5, 0, 1, 3, 2, 2), mode="circular"),
    }
    _back_all(lib, ys3)
    return {**ys, "gx": x.grad, **ys3, "gx3": x3.grad}


@case("F.layer_norm", "F.group_norm", "F.batch_norm")
def f_norms(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x = _r(lib, 2, 4, 3, grad=True)
    w, b = _r(lib, 3, seed="w", grad=True), _r(lib, 3, seed="b", grad=True)
    y = F.layer_norm(x, (3,), w, b, eps=1e-5)
    _back(lib, y)
    xd = x.detach()
    rm, rv = lib.zeros(4), lib.ones(4)
    bt = F.batch_norm(xd, rm, rv, training=True, momentum=0.3)
    return {
        "y": y,
        "gx": x.grad,
        "gw": w.grad,
        "gb": b.grad,
        "ln2": F.layer_norm(xd, (4, 3)),
        "ln_const": F.layer_norm(lib.ones(2, 3), (3,)),
        "gn": F.group_norm(xd, 2, lib.arange(4.0), lib.ones(4)),
        "gn_noaff": F.group_norm(xd, 1),
        "bn_eval": F.batch_norm(xd, lib.arange(4.0) * 0.1, lib.arange(1.0, 5.0), lib.ones(4) * 2, lib.zeros(4)),
        "bn_train": bt,
        "rm": rm,
        "rv": rv,
        "gn_err": _err(lambda: F.group_norm(xd, 3)),
    }


@case("F.max_pool2d", "F.adaptive_max_pool2d", "F.avg_pool2d", "F.adaptive_avg_pool2d")
def f_pools(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    x = _r(lib, 1, 2, 5, 6, grad=True)
    y = F.max_pool2d(x, 2) + F.avg_pool2d(x, 2)
    _back(lib, y)
    xd = x.detach()
    return {
        "y": y,
        "gx": x.grad,
        "mp_ceil": F.max_pool2d(xd, 2, ceil_mode=True),
        "mp_pad": F.max_pool2d(xd, 3, stride=2, padding=1),
        "mp_idx": tuple(F.max_pool2d(xd, 2, return_indices=True)),
        "mp_nan": F.max_pool2d(lib.tensor([[[[1.0, math.nan], [0.0, 2.0]]]]), 2),
        "amp": F.adaptive_max_pool2d(xd, (2, 4)),
        "amp_idx": tuple(F.adaptive_max_pool2d(xd, 1, return_indices=True)),
        "ap_pad": F.avg_pool2d(xd, 3, stride=1, padding=1),
        "ap_nopadcount": F.avg_pool2d(xd, 3, stride=1, padding=1, count_include_pad=False),
        "ap_ceil": F.avg_pool2d(xd, 2, ceil_mode=True),
        "aap": F.adaptive_avg_pool2d(xd, (3, 4)),
        "aap_none": F.adaptive_avg_pool2d(xd, (None, 2)),
        "aap_3d": F.adaptive_avg_pool2d(xd[0], 2),
    }


@case("F.one_hot")
def one_hot(lib: Any) -> Dict[str, Any]:
    F = _F(lib)
    return {
        "a": F.one_hot(lib.tensor([0, 2, 1])),
        "n": F.one_hot(lib.tensor([[0], [3]]), num_classes=5),
        "empty": F.one_hot(lib.tensor([], dtype=lib.int64), 3),
        "neg": _err(lambda: F.one_hot(lib.tensor([-1]))),
        "oob": _err(lambda: F.one_hot(lib.tensor([3]), 2)),
        "float": _err(lambda: F.one_hot(lib.tensor([1.0]))),
    }


# =====================================================================================
# nn.init
# =====================================================================================


@case("nn.init.zeros_", "nn.init.ones_", "nn.init.constant_", "nn.init.dirac_")
def init_exact(lib: Any) -> Dict[str, Any]:
    init = lib.nn.init
    w = lib.nn.Parameter(lib.randn(3, 4))
    r = init.zeros_(w)
    d = lib.empty(4, 2, 3, 3)
    init.dirac_(d)
    d2 = lib.empty(4, 4, 3)
    init.dirac_(d2, groups=2)
    return {
        "z": w,
        "same": r is w,
        "rg": w.requires_grad and w.is_leaf,
        "o": init.ones_(lib.empty(2, 3)),
        "c": init.constant_(lib.empty(2), 0.25),
        "ci": init.constant_(lib.empty(2, dtype=lib.int64), 3),
        "d": d,
        "d2": d2,
        "d_err": _err(lambda: init.dirac_(lib.empty(2, 3))),
    }


@case(
    "nn.init.normal_", "nn.init.uniform_", "nn.init.xavier_uniform_", "nn.init.xavier_normal_",
    "nn.init.kaiming_uniform_", "nn.init.kaiming_normal_", "nn.init.trunc_normal_",
)  # fmt: skip
def init_random(lib: Any) -> Dict[str, Any]:
    init = lib.nn.init

    def st(fn: Callable[[Any], Any], shape: Tuple[int, ...] = (256, 400)) -> Tuple[float, float, float, float]:
        t = lib.empty(*shape)
        fn(t)
        m, s = _stats(t)
        return m, s, float(t.min()), float(t.max())

    out: Dict[str, Any] = {}
    m, s, lo, hi = st(lambda t: init.normal_(t, 0.5, 0.02))
    out["normal"] = (abs(m - 0.5) < 0.002, abs(s / 0.02 - 1) < 0.03)
    m, s, lo, hi = st(lambda t: init.uniform_(t, -0.1, 0.3))
    out["uniform"] = (lo >= -0.1, hi < 0.3, abs(m - 0.1) < 0.005)
    bound = math.sqrt(6 / (256 + 400))
    m, s, lo, hi = st(init.xavier_uniform_)
    out["xu"] = (lo >= -bound, hi <= bound, abs(s / (bound / math.sqrt(3)) - 1) < 0.03)
    m, s, lo, hi = st(lambda t: init.xavier_normal_(t, gain=2.0))
    out["xn"] = abs(s / (2.0 * math.sqrt(2 / 656)) - 1) < 0.03
    kb = math.sqrt(6 / 400)
    m, s, lo, hi = st(lambda t: init.kaiming_uniform_(t, nonlinearity="relu"))
    out["ku"] = (lo >= -kb, hi <= kb, abs(s / (kb / math.sqrt(3)) - 1) < 0.03)
    m, s, lo, hi = st(lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)))  # nn.Linear's default
    b5 = math.sqrt(6 / ((1 + 5) * 400))
    out["ku_a5"] = (lo >= -b5, hi <= b5)
    m, s, lo, hi = st(lambda t: init.kaiming_normal_(t, mode="fan_out"))
    out["kn"] = abs(s / math.sqrt(2 / 256) - 1) < 0.03
    m, s, lo, hi = st(lambda t: init.kaiming_normal_(t), (64, 16, 3, 3))
    out["kn_conv"] = abs(s / math.sqrt(2 / (16 * 9)) - 1) < 0.03
    m, s, lo, hi = st(lambda t: init.trunc_normal_(t, std=0.02))
    out["tn"] = (lo >= -2.0, hi <= 2.0, abs(s / 0.02 - 1) < 0.03)
    m, s, lo, hi = st(lambda t: init.trunc_normal_(t, mean=0.0, std=1.0, a=-0.5, b=1.0))
    out["tn_cut"] = (lo >= -0.5, hi <= 1.0, lo < -0.49, hi > 0.99)
    out["fan_err"] = _err(lambda: init.xavier_uniform_(lib.empty(3)))
    return out


# =====================================================================================
# Serialization, optimizers, schedulers, data
# =====================================================================================


@case("torch.save", "torch.load")
def save_load(lib: Any) -> Dict[str, Any]:
    m = _load(lib, lib.nn.Linear(3, 2), "sl")
    obj = {"model": m.state_dict(), "step": 7, "name": "ckpt", "t": lib.arange(4).reshape(2, 2), "list": [lib.tensor(1.5), 2]}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ckpt.pt")
        lib.save(obj, path)
        back = lib.load(path, weights_only=True)
        m2 = lib.nn.Linear(3, 2)
        m2.load_state_dict(back["model"])
        x = lib.arange(6.0).reshape(2, 3)
        view = lib.arange(10.0)[2:6]
        lib.save(view, path)
        v = lib.load(path, map_location="cpu")
    return {
        "keys": sorted(back),
        "step": back["step"],
        "name": back["name"],
        "t": back["t"],
        "list": back["list"],
        "model": m2(x),
        "ref": m(x),
        "view": v,
    }


@case("optim.AdamW", "optim.SGD", "optim.Adam")
def optimizers(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, kw in [
        ("AdamW", {"lr": 0.05, "weight_decay": 0.1}),
        ("Adam", {"lr": 0.05, "betas": (0.8, 0.9)}),
        ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ]:
        m = _load(lib, lib.nn.Linear(3, 2), "opt")
        opt = getattr(lib.optim, name)(m.parameters(), **kw)
        x, y = _r(lib, 8, 3, seed="ox"), _r(lib, 8, 2, seed="oy")
        for _ in range(4):
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
        out[name] = (m.weight, m.bias, loss)
    m = _load(lib, lib.nn.Linear(3, 2), "opt")
    groups = lib.optim.AdamW([{"params": [m.weight]}, {"params": [m.bias], "weight_decay": 0.0}], lr=0.01)
    out["groups"] = [(g["lr"], g["weight_decay"]) for g in groups.param_groups]
    return out


@case("lr_scheduler.StepLR", "lr_scheduler.CosineAnnealingLR", "lr_scheduler.LambdaLR", "lr_scheduler.LinearLR", "lr_scheduler.OneCycleLR")
def schedulers(lib: Any) -> Dict[str, Any]:
    S = lib.optim.lr_scheduler
    out: Dict[str, Any] = {}
    for name, mk in [
        ("step", lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
        ("cos", lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.01)),
        ("lambda", lambda o: S.LambdaLR(o, lambda e: 1.0 / (e + 1))),
        ("linear", lambda o: S.LinearLR(o, start_factor=0.25, total_iters=3)),
        ("onecycle", lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=8)),
    ]:
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        sch = mk(opt)
        lrs = []
        for _ in range(6):
            opt.step()
            sch.step()
            lrs.append(opt.param_groups[0]["lr"])
        out[name] = lrs
        out[name + "_last"] = sch.get_last_lr()
    return out


@case("utils.data.DataLoader")
def dataloader(lib: Any) -> Dict[str, Any]:
    D = lib.utils.data
    ds = D.TensorDataset(lib.arange(10.0).reshape(5, 2), lib.arange(5))
    batches = list(D.DataLoader(ds, batch_size=2, shuffle=False))
    dropped = list(D.DataLoader(ds, batch_size=2, drop_last=True))
    lst = list(D.DataLoader([(i, float(i) * 0.5) for i in range(3)], batch_size=2))
    return {
        "batches": batches,
        "n": len(D.DataLoader(ds, batch_size=2)),
        "dropped": len(dropped),
        "lst": lst,
        "ds_len": len(ds),
        "item": ds[1],
    }


@case("Tensor.to", "Tensor.float", "Tensor.double", "nn.Module.to", tol=TOL_MM)
def module_to(lib: Any) -> Dict[str, Any]:
    # `model.to(...)` is counted as `Tensor.to` in torch_usage.md: modules convert in place.
    m = _load(lib, lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4)), "mto")
    r = m.to(lib.float64)
    x = _r(lib, 5, 3).double()
    y = m(x)
    m2 = m.to("cpu").float()
    return {
        "same": r is m,
        "dtypes": [str(v.dtype).rsplit(".", 1)[-1] for v in m.state_dict().values()],
        "y": y,
        "back": m2(x.float()),
        "half": m2.double().half()[0].weight.dtype,
        "nb": x.to("cpu", non_blocking=True).dtype,
        "int_buffer": m[1].num_batches_tracked.dtype,
    }


@case("torch.jit")
def jit_markers(lib: Any) -> Dict[str, Any]:
    # candle_py's documented jit: script/trace raise (no TorchScript); the markers that
    # scriptable code uses behave as torch's do when the code runs eagerly.
    @lib.jit.ignore
    def f(t: Any) -> Any:
        return t * 2

    @lib.jit.unused
    def g(t: Any) -> Any:
        return t + 1

    return {"scripting": lib.jit.is_scripting(), "tracing": lib.jit.is_tracing(), "f": f(lib.ones(2)), "g": g(lib.ones(2))}


@case("Tensor.repeat", "Tensor.expand", "Tensor.chunk", "Tensor.squeeze", "torch.stack", "Tensor.permute", "Tensor.sum")
def shape_edges(lib: Any) -> Dict[str, Any]:
    s = lib.tensor(2.0)
    return {
        "rep0": lib.arange(3).repeat(0, 2),
        "rep_0d": s.repeat(3),
        "exp_0d": s.expand(2, 3),
        "chunk_neg": lib.arange(6).reshape(2, 3).chunk(2, dim=-1),
        "sq_0d": s.squeeze(),
        "sq_0d_dim": s.squeeze(0),
        "stack_neg": lib.stack([lib.arange(2), lib.arange(2)], dim=-2),
        "perm_0d": s.permute(()),
        "sum_0d_dim": s.sum(0),
        "sum_neg_oob": _err(lambda: lib.ones(2).sum(-2)),
        "perm_dup": _err(lambda: lib.ones(2, 2).permute(0, 0)),
    }
