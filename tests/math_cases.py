"""Composed math cases (python/candle_py/_composed_math.py), written once against the
PyTorch API (`lib` is `torch` or `candle_py`): `tools/make_fixtures_math.py` runs them on
torch into tests/fixtures/math/, `tests/test_math_ops.py` on candle_py and compares.

Each case covers one op: typical inputs, the gradients of a weighted sum (`_back`), NaN /
inf / -inf, empty and 0-d inputs, integer and bool dtypes, scalar arguments, the Tensor
method and in-place forms, and bad inputs through `_err` (the exception kind is compared).
Inputs come from usage_cases' seeded NumPy arrays, so both libraries see the same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict

from fixture_cases import Cases
from usage_cases import _back, _err, _r

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF, NAN = math.inf, math.nan


def _leaf(lib: Any, values: Any, dtype: Any = None) -> Any:
    return lib.tensor(values, dtype=dtype or lib.float32, requires_grad=True)


def _grads(lib: Any, fn: Callable[..., Any], *xs: Any) -> Dict[str, Any]:
    """`fn(*xs)` and the gradients of its weighted sum for each of `xs`."""
    y = fn(*xs)
    _back(lib, y)
    out = {"y": y}
    for i, x in enumerate(xs):
        out[f"g{i}"] = _g(lib, x)
    return out


def _g(lib: Any, x: Any) -> Any:
    """`x.grad`; torch's zero-gradient tensors (ZeroTensor) as plain zeros."""
    g = x.grad
    if g is not None and getattr(g, "_is_zerotensor", lambda: False)():
        return lib.zeros_like(g)
    return g


def _flat(prefix: str, d: Dict[str, Any]) -> Dict[str, Any]:
    return {f"{prefix}_{k}": v for k, v in d.items()}


def _binary_edges(lib: Any, fn: Callable[[Any, Any], Any], name: str) -> Dict[str, Any]:
    """Typical inputs with broadcasting, special-value pairs, empty and 0-d inputs, f64."""
    a = _r(lib, 3, 4, seed=name + "a", grad=True)
    b = _r(lib, 4, seed=name + "b", grad=True)
    sp = [NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5, 1e30]
    pa = [x for x in sp for _ in sp]
    pb = [y for _ in sp for y in sp]
    out = _flat("typ", _grads(lib, fn, a, b))
    out.update(_flat("sp", _grads(lib, fn, _leaf(lib, pa), _leaf(lib, pb))))
    out["empty"] = fn(lib.zeros(0, 3), lib.zeros(3))
    out["zero_d"] = fn(lib.tensor(0.5), lib.tensor(-1.25))
    out["f64"] = fn(_r(lib, 5, seed=name + "c").double(), _r(lib, 5, seed=name + "d"))
    out["bad_shape"] = _err(lambda: fn(lib.ones(2, 3), lib.ones(4)))
    return out


# -- arithmetic ----------------------------------------------------------------------------


@case()
def addcmul(lib: Any) -> Dict[str, Any]:
    x, t1, t2 = _r(lib, 3, 4, seed="am0", grad=True), _r(lib, 4, seed="am1", grad=True), _r(lib, 3, 1, seed="am2", grad=True)
    out = _flat("typ", _grads(lib, lambda x, t1, t2: lib.addcmul(x, t1, t2, value=-0.75), x, t1, t2))
    i = lib.tensor([[1, -2, 3]])
    out.update(
        {
            "default": lib.addcmul(x.detach(), t1.detach(), t2.detach()),
            "method": x.detach().addcmul(t1.detach(), t2.detach(), value=2),
            "int": lib.addcmul(i, i, i, value=2),
            "int_float_value": lib.addcmul(i, i, i, value=0.5),
            "int_float_input": lib.addcmul(i.float(), i, i, value=0.5),
            "special": lib.addcmul(lib.tensor([NAN, INF, 1.0]), lib.tensor([1.0, 1.0, INF]), lib.tensor([1.0, -1.0, 0.0])),
            "empty": lib.addcmul(lib.zeros(0), lib.zeros(0), lib.zeros(0)),
            "zero_d": lib.addcmul(lib.tensor(1.0), lib.tensor(2.0), lib.tensor(3.0), value=0.5),
            "bool": _err(lambda: lib.addcmul(lib.tensor([True]), lib.tensor([True]), lib.tensor([True]))),
            "bad_shape": _err(lambda: lib.addcmul(lib.ones(2), lib.ones(3), lib.ones(2))),
            "not_tensor": _err(lambda: lib.addcmul(lib.ones(2), 2.0, lib.ones(2))),
        }
    )
    y = _r(lib, 3, 4, seed="am3")
    r = y.addcmul_(t1.detach(), t2.detach(), value=3)
    out["inplace"], out["inplace_same"] = y, r is y
    out["inplace_broadcast_self"] = _err(lambda: lib.ones(4).addcmul_(lib.ones(3, 4), lib.ones(4)))
    out["inplace_int_self"] = _err(lambda: lib.ones(2, dtype=lib.int64).addcmul_(lib.ones(2), lib.ones(2)))
    return out


@case()
def addcdiv(lib: Any) -> Dict[str, Any]:
    x, t1 = _r(lib, 3, 4, seed="ad0", grad=True), _r(lib, 4, seed="ad1", grad=True)
    t2 = _r(lib, 3, 1, seed="ad2", kind="pos", grad=True)
    out = _flat("typ", _grads(lib, lambda x, t1, t2: lib.addcdiv(x, t1, t2, value=0.5), x, t1, t2))
    out.update(
        {
            "default": lib.addcdiv(x.detach(), t1.detach(), t2.detach()),
            "method": x.detach().addcdiv(t1.detach(), t2.detach(), value=-2),
            "by_zero": lib.addcdiv(lib.zeros(3), lib.tensor([1.0, -1.0, 0.0]), lib.zeros(3)),
            "int_num": lib.addcdiv(lib.tensor([1]), lib.tensor([1.0]), lib.tensor([2]), value=2),
            "int_den": lib.addcdiv(lib.tensor([1.0]), lib.tensor([3]), lib.tensor([2.0])),
            "int_both": _err(lambda: lib.addcdiv(lib.ones(2), lib.tensor([1, 2]), lib.tensor([2, 2]))),
            "empty": lib.addcdiv(lib.zeros(2, 0), lib.zeros(0), lib.ones(0)),
            "zero_d": lib.addcdiv(lib.tensor(1.0), lib.tensor(2.0), lib.tensor(4.0)),
            "bad_shape": _err(lambda: lib.addcdiv(lib.ones(2), lib.ones(3), lib.ones(2))),
        }
    )
    y = _r(lib, 3, 4, seed="ad3")
    out["inplace_same"] = y.addcdiv_(t1.detach(), t2.detach(), value=3) is y
    out["inplace"] = y
    return out


@case()
def nan_to_num(lib: Any) -> Dict[str, Any]:
    sp = [NAN, INF, -INF, 0.0, -1.5, 2.0]
    out = _flat("grad", _grads(lib, lambda x: lib.nan_to_num(x), _leaf(lib, sp)))
    x = lib.tensor(sp)
    out.update(
        {
            "set": lib.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0),
            "posinf_only": lib.nan_to_num(x, posinf=7.0),
            "method": x.nan_to_num(neginf=0.0),
            "f64": lib.nan_to_num(x.double()),
            "f16": lib.nan_to_num(x.half()),
            "int": lib.nan_to_num(lib.tensor([1, -2, 3])),
            "bool": lib.nan_to_num(lib.tensor([True, False])),
            "empty": lib.nan_to_num(lib.zeros(0, 2)),
            "zero_d": lib.nan_to_num(lib.tensor(INF)),
            "not_tensor": _err(lambda: lib.nan_to_num(1.0)),
        }
    )
    y = x.clone()
    out["inplace_same"] = y.nan_to_num_(nan=-1.0) is y
    out["inplace"] = y
    return out


# -- reductions --------------------------------------------------------------------------


def _nan_input(lib: Any, grad: bool = False) -> Any:
    x = _r(lib, 3, 4, seed="nanr")
    x[0, 1] = NAN
    x[2, 0] = NAN
    x[1, :] = NAN
    return x.requires_grad_(grad)


@case()
def nansum(lib: Any) -> Dict[str, Any]:
    out = _flat("all", _grads(lib, lambda x: lib.nansum(x), _nan_input(lib, True)))
    out.update(_flat("dim", _grads(lib, lambda x: lib.nansum(x, 1, keepdim=True), _nan_input(lib, True))))
    x = _nan_input(lib)
    out.update(
        {
            "dims": lib.nansum(x, (0, 1)),
            "neg_dim": x.nansum(-2),
            "keepdim_all": lib.nansum(x, keepdim=True),
            "dtype": lib.nansum(x, 0, dtype=lib.float64),
            "inf": lib.nansum(lib.tensor([INF, NAN, 1.0])),
            "int": lib.nansum(lib.tensor([[1, 2], [3, 4]]), 0),
            "bool": lib.nansum(lib.tensor([True, True, False])),
            "empty": lib.nansum(lib.zeros(0, 3), 0),
            "empty_all": lib.nansum(lib.zeros(0)),
            "zero_d": lib.nansum(lib.tensor(NAN)),
            "bad_dim": _err(lambda: lib.nansum(x, 2)),
        }
    )
    return out


@case()
def nanmean(lib: Any) -> Dict[str, Any]:
    out = _flat("all", _grads(lib, lambda x: lib.nanmean(x), _nan_input(lib, True)))
    out.update(_flat("dim", _grads(lib, lambda x: lib.nanmean(x, 0), _nan_input(lib, True))))
    x = _nan_input(lib)
    out.update(
        {
            "dim1": lib.nanmean(x, 1, keepdim=True),  # an all-NaN row gives NaN
            "dims": x.nanmean((0, 1)),
            "dtype": lib.nanmean(x, 0, dtype=lib.float64),
            "f64": lib.nanmean(x.double(), -1),
            "empty": lib.nanmean(lib.zeros(0)),
            "zero_d": lib.nanmean(lib.tensor(2.5)),
            "int": _err(lambda: lib.nanmean(lib.tensor([1, 2]))),
            "bool": _err(lambda: lib.nanmean(lib.tensor([True]))),
        }
    )
    return out


def _moments(lib: Any, fn: Any, name: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x = _r(lib, 3, 4, seed="mom" + name, grad=True)
    v, m = fn(x, 1)
    _back(lib, v)
    out.update({"v": v, "m": m, "gx": _g(lib, x)})
    x = _r(lib, 3, 4, seed="mom" + name)
    out.update(
        {
            "all": fn(x),
            "tuple_type": type(fn(x)).__name__,
            "correction0": fn(x, 0, correction=0),
            "correction2": fn(x, (0, 1), correction=2, keepdim=True),
            "unbiased_positional": fn(x, 1, False, True),
            "unbiased_only": fn(x, False),
            "unbiased_kw": fn(x, dim=0, unbiased=False),
            "keepdim_all": fn(x, keepdim=True),
            "single": fn(lib.tensor([2.0])),
            "zero_d": fn(lib.tensor(2.0)),
            "nan": fn(lib.tensor([1.0, NAN, 2.0])),
            "f64": fn(x.double(), -1),
            "int": _err(lambda: fn(lib.tensor([1, 2]))),
            "bad_dim": _err(lambda: fn(x, 3)),
        }
    )
    return out


@case()
def var_mean(lib: Any) -> Dict[str, Any]:
    return _moments(lib, lib.var_mean, "v")


@case()
def std_mean(lib: Any) -> Dict[str, Any]:
    return _moments(lib, lib.std_mean, "s")


@case()
def aminmax(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="amm", grad=True)
    r = lib.aminmax(x, dim=1)
    _back(lib, r.min * 2 + r.max)
    out: Dict[str, Any] = {"min": r.min, "max": r.max, "gx": _g(lib, x), "type": type(r).__name__}
    x = _r(lib, 3, 4, seed="amm")
    mn, mx = lib.aminmax(x)
    out.update(
        {
            "all_min": mn,
            "all_max": mx,
            "keepdim": list(lib.aminmax(x, dim=0, keepdim=True)),
            "keepdim_all": list(lib.aminmax(x, keepdim=True)),
            "method": list(x.aminmax(dim=-1)),
            "nan": list(lib.aminmax(lib.tensor([[1.0, NAN], [INF, -INF]]), dim=1)),
            "int": list(lib.aminmax(lib.tensor([3, -1, 7]))),
            "bool": list(lib.aminmax(lib.tensor([True, False]))),
            "zero_d": list(lib.aminmax(lib.tensor(2.0))),
            "empty_kept": list(lib.aminmax(lib.zeros(0, 3), dim=1)),
            "empty": _err(lambda: lib.aminmax(lib.zeros(0))),
            "empty_dim": _err(lambda: lib.aminmax(lib.zeros(0, 3), dim=0)),
            "bad_dim": _err(lambda: lib.aminmax(x, dim=2)),
        }
    )
    g = _leaf(lib, [1.0, 3.0, 3.0, -2.0, -2.0])  # ties share the gradient
    t = lib.aminmax(g)
    (t.min + t.max * 3).backward()
    out["ties_grad"] = _g(lib, g)
    return out


@case()
def count_nonzero(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[0.0, 1.0, NAN], [0.0, -0.0, INF]])
    return {
        "all": lib.count_nonzero(x),
        "dim": lib.count_nonzero(x, 1),
        "dims": lib.count_nonzero(x, (0, 1)),
        "neg": x.count_nonzero(dim=-2),
        "int": lib.count_nonzero(lib.tensor([[0, 3], [-1, 0]]), 0),
        "bool": lib.count_nonzero(lib.tensor([True, False, True])),
        "empty": lib.count_nonzero(lib.zeros(0, 2), 0),
        "zero_d": lib.count_nonzero(lib.tensor(5.0)),
        "bad_dim": _err(lambda: lib.count_nonzero(x, 5)),
    }


@case()
def diff(lib: Any) -> Dict[str, Any]:
    out = _flat("n1", _grads(lib, lambda x: lib.diff(x), _r(lib, 3, 5, seed="df", grad=True)))
    out.update(_flat("n2", _grads(lib, lambda x: lib.diff(x, n=2, dim=0), _r(lib, 4, 3, seed="df2", grad=True))))
    p, a = _r(lib, 3, 2, seed="dfp", grad=True), _r(lib, 3, 1, seed="dfa", grad=True)
    out.update(_flat("pa", _grads(lib, lambda x, p, a: lib.diff(x, 1, -1, p, a), _r(lib, 3, 5, seed="df", grad=True), p, a)))
    x = _r(lib, 3, 5, seed="df")
    out.update(
        {
            "n0": lib.diff(x, n=0),
            "n_long": lib.diff(x, n=7),
            "method": x.diff(n=3, dim=1),
            "special": lib.diff(lib.tensor([INF, INF, 1.0, NAN, 2.0])),
            "int": lib.diff(lib.tensor([1, 4, 9, 16]), n=2),
            "bool": lib.diff(lib.tensor([True, True, False, True])),
            "empty": lib.diff(lib.zeros(0)),
            "one": lib.diff(lib.ones(1)),
            "zero_d": _err(lambda: lib.diff(lib.tensor(1.0))),
            "neg_n": _err(lambda: lib.diff(x, n=-1)),
            "prepend_ndim": _err(lambda: lib.diff(x, prepend=lib.tensor(1.0))),
            "prepend_shape": _err(lambda: lib.diff(x, prepend=lib.ones(2, 1))),
            "bad_dim": _err(lambda: lib.diff(x, dim=2)),
        }
    )
    return out


@case()
def isin(lib: Any) -> Dict[str, Any]:
    e = lib.tensor([[1.0, 2.0, NAN], [4.0, 2.0, -0.0]])
    t = lib.tensor([2.0, 0.0, NAN, 9.0, 2.0])
    return {
        "basic": lib.isin(e, t),
        "invert": lib.isin(e, t, invert=True),
        "unique": lib.isin(lib.tensor([3, 1, 2]), lib.tensor([2, 5]), assume_unique=True),
        "unique_invert": lib.isin(lib.tensor([3, 1, 2]), lib.tensor([2, 5]), assume_unique=True, invert=True),
        "int": lib.isin(lib.tensor([[5, 1], [1, 7]]), lib.tensor([1, 1, 7])),
        "int_float": lib.isin(lib.tensor([1, 2]), lib.tensor([2.0, 1.5])),
        "scalar_test": lib.isin(lib.tensor([1, 2, 2]), 2),
        "scalar_elements": lib.isin(2, lib.tensor([1, 2])),
        "inf": lib.isin(lib.tensor([INF, -INF, 1.0]), lib.tensor([INF])),
        "empty_elements": lib.isin(lib.zeros(0, 2), t),
        "empty_test": lib.isin(e, lib.zeros(0)),
        "empty_test_invert": lib.isin(e, lib.zeros(0), invert=True),
        "zero_d": lib.isin(lib.tensor(2.0), t),
        "many": lib.isin(lib.arange(40).reshape(4, 10) % 13, lib.arange(0, 30, 4)),
        "scalars": _err(lambda: lib.isin(1, 2)),
        "bool": _err(lambda: lib.isin(lib.tensor([True]), lib.tensor([True]))),
    }


# -- elementwise -------------------------------------------------------------------------


def _int_inputs(lib: Any, fn: Any) -> Dict[str, Any]:
    i = lib.tensor([1, 0, 3])
    return {"int": _err(lambda: fn(i, i)), "bool": _err(lambda: fn(i > 0, i > 0))}


@case()
def logaddexp(lib: Any) -> Dict[str, Any]:
    out = _binary_edges(lib, lib.logaddexp, "lae")
    out.update(_int_inputs(lib, lib.logaddexp))
    x = _r(lib, 5, seed="lae2")
    out["large_gap"] = lib.logaddexp(lib.tensor([100.0, -100.0, 0.0]), lib.tensor([-100.0, 100.0, -1e-7]))
    out["method"] = x.logaddexp(x.flip(0))
    out["scalar"] = _err(lambda: lib.logaddexp(x, 1.0))
    return out


@case()
def logaddexp2(lib: Any) -> Dict[str, Any]:
    out = _binary_edges(lib, lib.logaddexp2, "lae2")
    out.update(_int_inputs(lib, lib.logaddexp2))
    x = _r(lib, 5, seed="lae22")
    out["large_gap"] = lib.logaddexp2(lib.tensor([100.0, -100.0, 0.0]), lib.tensor([-100.0, 100.0, -1e-7]))
    out["method"] = x.logaddexp2(x.flip(0))
    return out


@case()
def hypot(lib: Any) -> Dict[str, Any]:
    out = _binary_edges(lib, lib.hypot, "hyp")
    out.update(_int_inputs(lib, lib.hypot))
    x = _r(lib, 5, seed="hyp2")
    out["tiny_huge"] = lib.hypot(lib.tensor([1e-30, 3e30, 1e-45, 0.0]), lib.tensor([1e-30, 4e30, 0.0, -2.0]))
    out["method"] = x.hypot(x.flip(0))
    y = x.clone()
    out["inplace_same"] = y.hypot_(lib.ones(5)) is y
    out["inplace"] = y
    out["inplace_broadcast_self"] = _err(lambda: lib.ones(3).hypot_(lib.ones(2, 3)))
    out["scalar"] = _err(lambda: lib.hypot(x, 1.0))
    return out


@case()
def xlogy(lib: Any) -> Dict[str, Any]:
    out = _binary_edges(lib, lib.xlogy, "xly")
    xs = [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, -1.5, 0.0, 3.0]
    ys = [0.0, 1.0, NAN, -1.0, 0.0, -1.0, 2.0, INF, INF]
    out.update(_flat("edges", _grads(lib, lib.xlogy, _leaf(lib, xs), _leaf(lib, ys))))
    x = _r(lib, 4, seed="xly2", kind="pos")
    i = lib.tensor([0, 1, 2])
    out.update(
        {
            "scalar_other": lib.xlogy(x, 2),
            "scalar_other_float": lib.xlogy(x, 0.5),
            "scalar_input": lib.xlogy(3, x),
            "scalar_zero": lib.xlogy(0.0, lib.tensor([0.0, NAN, 1.0])),
            "int": lib.xlogy(i, i),
            "int_scalar": lib.xlogy(i, 2.5),
            "bool": lib.xlogy(i > 0, i),
            "f64": lib.xlogy(x.double(), x),
            "method": x.xlogy(x.flip(0)),
            "scalars": _err(lambda: lib.xlogy(2.0, 3.0)),
            "inplace_int": _err(lambda: lib.tensor([1, 2]).xlogy_(2)),
        }
    )
    g = _r(lib, 4, seed="xly3", kind="pos", grad=True)
    _back(lib, lib.xlogy(g, 3.0))
    out["g_scalar_other"] = _g(lib, g)
    y = x.clone()
    out["inplace_same"] = y.xlogy_(x) is y
    out["inplace"] = y
    return out


@case()
def logit(lib: Any) -> Dict[str, Any]:
    sp = [0.0, 1.0, 2.0, -1.0, 0.5, NAN, 0.25, 0.9, INF, -0.0]
    out = _flat("noeps", _grads(lib, lib.logit, _leaf(lib, sp)))
    out.update(_flat("eps", _grads(lib, lambda x: lib.logit(x, 0.1), _leaf(lib, sp + [0.1, 0.05, 0.95]))))
    out.update(_flat("typ", _grads(lib, lambda x: x.logit(eps=1e-3), _r(lib, 3, 4, seed="lgt", kind="unit", grad=True))))
    x = _r(lib, 5, seed="lgt2", kind="unit")
    y = x.clone()
    out.update(
        {
            "neg_eps": lib.logit(x, eps=-1.0),
            "f64": lib.logit(x.double(), 1e-6),
            "int": lib.logit(lib.tensor([0, 1, 2])),
            "bool": lib.logit(lib.tensor([True, False])),
            "empty": lib.logit(lib.zeros(0)),
            "zero_d": lib.logit(lib.tensor(0.75)),
            "inplace_same": y.logit_(0.2) is y,
            "inplace": y,
            "inplace_int": _err(lambda: lib.tensor([0, 1]).logit_()),
        }
    )
    return out


@case()
def sinc(lib: Any) -> Dict[str, Any]:
    sp = [0.0, -0.0, INF, -INF, NAN, 1.0, 0.5, -2.5, 1e-20, 3.0]
    out = _flat("sp", _grads(lib, lib.sinc, _leaf(lib, sp)))
    out.update(_flat("typ", _grads(lib, lambda x: x.sinc(), _r(lib, 3, 4, seed="snc", grad=True))))
    y = _r(lib, 4, seed="snc2")
    out.update(
        {
            "int": lib.sinc(lib.tensor([0, 1, 2])),
            "bool": lib.sinc(lib.tensor([True, False])),
            "f64": lib.sinc(lib.tensor([0.0, 0.5, 1e-9], dtype=lib.float64)),
            "empty": lib.sinc(lib.zeros(0, 2)),
            "zero_d": lib.sinc(lib.tensor(0.25)),
            "inplace_same": y.sinc_() is y,
            "inplace": y,
        }
    )
    return out


@case()
def log1p_expm1_rsqrt(lib: Any) -> Dict[str, Any]:
    """`log1p`, `expm1` and `rsqrt` as their own kernels: small values keep their low bits
    (the ratios to x stay 1; `log(1 + x)` and `exp(x) - 1` lose them), special values,
    gradients and node names, float64, long inputs (the vector loops) and in-place twins."""
    sp = [1e-30, -1e-20, 1e-10, -3e-8, 1e-5, -1e-3, 0.3, -0.7, 5.0, 80.0, 0.0, -0.0, NAN, INF, -INF, -1.0, -2.0, 100.0]
    tiny = [1e-30, -1e-20, 1e-10, -3e-8, 2e-6, -5e-5]
    out = _flat("log1p", _grads(lib, lib.log1p, _leaf(lib, sp)))
    out.update(_flat("expm1", _grads(lib, lambda x: x.expm1(), _leaf(lib, sp))))
    out.update(_flat("rsqrt", _grads(lib, lib.rsqrt, _leaf(lib, [1e-30, 1e-10, 0.25, 1.0, 4.0, 1e30, 0.0, -0.0, -1.0, INF, NAN]))))
    w = _r(lib, 40, 50, seed="l1p")
    long_ = {}
    for dt in ("float32", "float64"):
        t, d = lib.tensor(tiny, dtype=getattr(lib, dt)), getattr(lib, dt)
        long_[f"log1p_ratio_{dt}"] = lib.log1p(t) / t
        long_[f"expm1_ratio_{dt}"] = lib.expm1(t) / t
        x = w.to(d)
        long_[f"log1p_long_{dt}"] = (x.abs() * 3).log1p()
        long_[f"expm1_long_{dt}"] = (x * 20).expm1()
        long_[f"expm1_small_long_{dt}"] = (x * 1e-3).expm1() / (x * 1e-3)
        long_[f"rsqrt_long_{dt}"] = (x.abs() + 0.01).rsqrt()
    y, z, v = (w.abs() * 0.5).clone(), (w * 0.5).clone(), (w.abs() + 0.5).clone()
    out.update(long_)
    out.update(
        {
            "names": [
                lib.log1p(_leaf(lib, [0.5])).grad_fn.name(),
                lib.expm1(_leaf(lib, [0.5])).grad_fn.name(),
                lib.rsqrt(_leaf(lib, [0.5])).grad_fn.name(),
            ],
            "inplace_log1p": y.log1p_(),
            "inplace_expm1": z.expm1_(),
            "inplace_rsqrt": v.rsqrt_(),
            "int": lib.log1p(lib.tensor([0, 1, 3])),
            "empty": lib.expm1(lib.zeros(0, 2)),
            "zero_d": lib.rsqrt(lib.tensor(0.25)),
        }
    )
    return out


@case()
def deg_rad(lib: Any) -> Dict[str, Any]:
    out = _flat("d2r", _grads(lib, lib.deg2rad, _r(lib, 3, 4, seed="d2r", grad=True)))
    out.update(_flat("r2d", _grads(lib, lambda x: x.rad2deg(), _r(lib, 3, 4, seed="r2d", grad=True))))
    sp = lib.tensor([NAN, INF, -INF, 0.0, 180.0, -90.0])
    y, z = sp.clone(), sp.clone()
    out.update(
        {
            "d2r_sp": lib.deg2rad(sp),
            "r2d_sp": lib.rad2deg(sp),
            "d2r_int": lib.deg2rad(lib.tensor([180, -90, 0])),
            "r2d_int": lib.rad2deg(lib.tensor([1, 2])),
            "d2r_bool": lib.deg2rad(lib.tensor([True, False])),
            "d2r_f64": lib.deg2rad(lib.tensor([45.0], dtype=lib.float64)),
            "r2d_f16": lib.rad2deg(lib.tensor([1.0, 0.5], dtype=lib.float16)),
            "empty": lib.deg2rad(lib.zeros(0)),
            "zero_d": lib.rad2deg(lib.tensor(math.pi)),
            "d2r_inplace_same": y.deg2rad_() is y,
            "d2r_inplace": y,
            "r2d_inplace_same": z.rad2deg_() is z,
            "r2d_inplace": z,
            "inplace_int": _err(lambda: lib.tensor([1, 2]).deg2rad_()),
        }
    )
    return out


@case()
def float_power(lib: Any) -> Dict[str, Any]:
    a = _r(lib, 3, 4, seed="fp", kind="pos", grad=True)
    b = _r(lib, 4, seed="fpb", grad=True)
    out = _flat("typ", _grads(lib, lib.float_power, a, b))
    out.update(_flat("scalar_exp", _grads(lib, lambda x: lib.float_power(x, 2.5), _r(lib, 4, seed="fp2", kind="pos", grad=True))))
    out.update(_flat("scalar_base", _grads(lib, lambda x: lib.float_power(2, x), _r(lib, 4, seed="fp3", grad=True))))
    out.update(_flat("zero_base", _grads(lib, lambda x: lib.float_power(x, 2), _leaf(lib, [0.0, -1.0, 3.0]))))
    x = _r(lib, 4, seed="fp4", kind="pos")
    y = x.double()
    out.update(
        {
            "int": lib.float_power(lib.tensor([2, 3]), 2),
            "int_neg_exp": lib.float_power(lib.tensor([2, 4]), -1),
            "bool": lib.float_power(lib.tensor([True, False]), lib.tensor([2, 2])),
            "special": lib.float_power(lib.tensor([NAN, INF, -1.0, 0.0, 1.0]), lib.tensor([1.0, -1.0, 0.5, -1.0, NAN])),
            "method": x.float_power(x),
            "empty": lib.float_power(lib.zeros(0), 2),
            "zero_d": lib.float_power(lib.tensor(3.0), lib.tensor(2)),
            "inplace_same": y.float_power_(2) is y,
            "inplace": y,
            "inplace_f32": _err(lambda: lib.ones(2).float_power_(2)),
            "scalars": _err(lambda: lib.float_power(2.0, 3.0)),
            "bad_shape": _err(lambda: lib.float_power(lib.ones(2), lib.ones(3))),
        }
    )
    return out


@case()
def copysign(lib: Any) -> Dict[str, Any]:
    sp = [NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5]
    pa = [x for x in sp for _ in sp]
    pb = [y for _ in sp for y in sp]
    out = _flat("sp", _grads(lib, lib.copysign, _leaf(lib, pa), _leaf(lib, pb)))
    out.update(_flat("typ", _grads(lib, lib.copysign, _r(lib, 3, 4, seed="cs", grad=True), _r(lib, 4, seed="csb", grad=True))))
    x = _r(lib, 5, seed="cs2")
    y = x.clone()
    out.update(
        {
            "neg_zero_sign": lib.signbit(lib.copysign(lib.tensor([0.0, 1.0]), lib.tensor([-0.0, -0.0]))),
            "scalar": lib.copysign(x, -1),
            "scalar_neg_zero": lib.copysign(x, -0.0),
            "int": lib.copysign(lib.tensor([1, -2, 3]), lib.tensor([-1, 1, 0])),
            "bool": lib.copysign(lib.tensor([True, False]), -1.0),
            "f64": lib.copysign(x.double(), x),
            "method": x.copysign(x.flip(0)),
            "empty": lib.copysign(lib.zeros(0), lib.zeros(0)),
            "zero_d": lib.copysign(lib.tensor(2.0), lib.tensor(-1.0)),
            "inplace_same": y.copysign_(-1.0) is y,
            "inplace": y,
            "bad_shape": _err(lambda: lib.copysign(lib.ones(2), lib.ones(3))),
        }
    )
    return out


@case()
def heaviside(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[-1.5, 0.0, 2.0], [NAN, INF, -0.0]])
    v = lib.tensor([0.5, -2.0, 7.0])
    y = x.clone()
    return {
        "basic": lib.heaviside(x, v),
        "scalar_values": lib.heaviside(x, lib.tensor(0.25)),
        "method": x.heaviside(v),
        "int": lib.heaviside(lib.tensor([-2, 0, 3]), lib.tensor([9])),
        "bool": lib.heaviside(lib.tensor([True, False]), lib.tensor([True, True])),
        "f64": lib.heaviside(x.double(), v.double()),
        "empty": lib.heaviside(lib.zeros(0), lib.zeros(1)),
        "zero_d": lib.heaviside(lib.tensor(0.0), lib.tensor(3.0)),
        "inplace_same": y.heaviside_(v) is y,
        "inplace": y,
        "mixed": _err(lambda: lib.heaviside(x, v.double())),
        "float_values": _err(lambda: lib.heaviside(x, 1.0)),
        "bad_shape": _err(lambda: lib.heaviside(lib.ones(2), lib.ones(3))),
    }


@case()
def signbit(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([NAN, -NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5])
    return {
        "f32": lib.signbit(x),
        "method": x.signbit(),
        "f64": lib.signbit(x.double()),
        "f16": lib.signbit(x.half()),
        "bf16": lib.signbit(x[2:].bfloat16()),  # (torch's float -> bfloat16 conversion makes every NaN negative)
        "int": lib.signbit(lib.tensor([-3, 0, 2])),
        "uint8": lib.signbit(lib.tensor([0, 200], dtype=lib.uint8)),
        "bool": lib.signbit(lib.tensor([True, False])),
        "strided": lib.signbit(lib.tensor([[1.0, -1.0], [-0.0, 2.0]]).t()),
        "empty": lib.signbit(lib.zeros(0)),
        "zero_d": lib.signbit(lib.tensor(-0.0)),
        "no_grad": lib.signbit(_leaf(lib, [-1.0])).requires_grad,
    }


@case()
def sgn_positive_fix(lib: Any) -> Dict[str, Any]:
    sp = [NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5, 0.7]
    out = _flat("sgn", _grads(lib, lib.sgn, _leaf(lib, sp)))
    out.update(_flat("fix", _grads(lib, lib.fix, _leaf(lib, sp))))
    out.update(_flat("pos", _grads(lib, lib.positive, _leaf(lib, sp))))
    x = lib.tensor(sp)
    y, z = x.clone(), x.clone()
    out.update(
        {
            "sgn_method": x.sgn(),
            "sgn_int": lib.sgn(lib.tensor([-3, 0, 2])),
            "sgn_bool": lib.sgn(lib.tensor([True, False])),
            "sgn_empty": lib.sgn(lib.zeros(0)),
            "sgn_inplace_same": y.sgn_() is y,
            "sgn_inplace": y,
            "pos_same": lib.positive(x) is x,
            "pos_method_same": x.positive() is x,
            "pos_int": lib.positive(lib.tensor([-3, 2])),
            "pos_bool": _err(lambda: lib.positive(lib.tensor([True]))),
            "fix_method": x.fix(),
            "fix_int": lib.fix(lib.tensor([-3, 2])),
            "fix_f64": lib.fix(lib.tensor([-3.7, 2.2], dtype=lib.float64)),
            "fix_zero_d": lib.fix(lib.tensor(-0.5)),
            "fix_inplace_same": z.fix_() is z,
            "fix_inplace": z,
            "fix_bool": _err(lambda: lib.fix(lib.tensor([True]))),
        }
    )
    return out


@case()
def dist(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for p in (2, 1, 3, 0.5, INF, -INF):
        a, b = _r(lib, 3, 4, seed="dst", grad=True), _r(lib, 4, seed="dstb", grad=True)
        y = lib.dist(a, b, p)
        y.backward()
        out.update({f"p{p}_y": y, f"p{p}_ga": _g(lib, a), f"p{p}_gb": _g(lib, b)})
    out.update(_flat("same", _grads(lib, lib.dist, _leaf(lib, [1.0, 2.0]), _leaf(lib, [1.0, 2.0]))))
    x = _r(lib, 5, seed="dst2")
    out.update(
        {
            "p0": lib.dist(x, lib.tensor([0.0, 1.0, 0.0, 0.0, 0.0]) * x, 0),
            "method": x.dist(x.flip(0), p=3),
            "default": lib.dist(x, x.flip(0)),
            "special": lib.dist(lib.tensor([INF, 1.0]), lib.tensor([0.0, 1.0])),
            "nan": lib.dist(lib.tensor([NAN, 1.0]), lib.tensor([0.0, 1.0])),
            "f64": lib.dist(x.double(), x),
            "empty": lib.dist(lib.zeros(0), lib.zeros(0)),
            "zero_d": lib.dist(lib.tensor(3.0), lib.tensor(-1.0)),
            "int": _err(lambda: lib.dist(lib.tensor([1, 2]), lib.tensor([1, 2]))),
            "bad_shape": _err(lambda: lib.dist(lib.ones(2), lib.ones(3))),
        }
    )
    return out


@case()
def renorm(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 0.8), (3.0, -1, 2.0), (INF, 0, 0.5)):
        x = _r(lib, 3, 4, seed="rn", grad=True)
        y = lib.renorm(x, p, dim, maxnorm)
        _back(lib, y)
        out.update({f"p{p}_d{dim}_y": y, f"p{p}_d{dim}_g": _g(lib, x)})
    x = _r(lib, 2, 3, 2, seed="rn3")
    y = x.clone()
    out.update(
        {
            "three_d": lib.renorm(x, 2, 1, 0.5),
            "method": x.renorm(1, 2, 1.0),
            "big_maxnorm": lib.renorm(x, 2, 0, 100.0),
            "zero_maxnorm": lib.renorm(x, 2, 0, 0.0),
            "nan": lib.renorm(lib.tensor([[NAN, 1.0], [3.0, 4.0]]), 2, 0, 1.0),
            "f64": lib.renorm(x.double(), 2, 0, 0.5),
            "empty": lib.renorm(lib.zeros(0, 3), 2, 0, 1.0),
            "inplace_same": y.renorm_(2, 0, 0.5) is y,
            "inplace": y,
            "one_d": _err(lambda: lib.renorm(lib.ones(3), 2, 0, 1.0)),
            "p0": _err(lambda: lib.renorm(x, 0, 0, 1.0)),
            "neg_maxnorm": _err(lambda: lib.renorm(x, 2, 0, -1.0)),
            "bad_dim": _err(lambda: lib.renorm(x, 2, 3, 1.0)),
            "int": _err(lambda: lib.renorm(lib.ones(2, 2, dtype=lib.int64), 2, 0, 1.0)),
        }
    )
    return out


@case()
def inplace_autograd(lib: Any) -> Dict[str, Any]:
    """In-place forms inside a graph: the gradient flows through the write."""
    out: Dict[str, Any] = {}
    for name, args in (("sinc_", ()), ("logit_", (0.05,)), ("hypot_", (0.5,)), ("xlogy_", (2.0,)), ("copysign_", (-1.0,))):
        a = _r(lib, 4, seed="ipa" + name, kind="unit", grad=True)
        b = a * 1.5
        arg = tuple(lib.full((4,), v) if name == "hypot_" else v for v in args)
        getattr(b, name)(*arg)
        _back(lib, b)
        out[name + "_y"] = b
        out[name + "_g"] = _g(lib, a)
    out["leaf"] = _err(lambda: _r(lib, 2, seed="ipl", grad=True).sinc_())
    return out


@case()
def extremes_clamp_half(lib: Any) -> Dict[str, Any]:
    """Row maxima and minima of float32 rows of every length around the vector widths
    (with NaN and infinities in single rows), clamp with tensor bounds of the input's
    shape in one pass (NaN from any operand, a lower bound above the upper), and float16
    round trips whose lengths leave tails after the 8-wide conversions."""
    out: Dict[str, Any] = {}
    for n in (1, 7, 8, 9, 16, 17, 33, 64, 100, 384):
        x = _r(lib, 6, n, seed=f"ext{n}")
        out[f"amax_{n}"] = x.amax(-1)
        out[f"amin_{n}"] = x.amin(-1)
        y = x.clone()
        y[1, n // 2] = NAN
        y[2, n - 1] = INF
        y[3, 0] = -INF
        y[4, n - 1] = NAN
        out[f"amax_special_{n}"] = y.amax(-1)
        out[f"amin_special_{n}"] = y.amin(-1)
        out[f"max_special_{n}"] = y.max(-1).values
        h = (x * 1000.0).half()
        out[f"half_{n}"] = h
        out[f"half_back_{n}"] = h.float()
    x = _r(lib, 40, 50, seed="clt")
    lo, hi = _r(lib, 40, 50, seed="clt_lo") - 0.5, _r(lib, 40, 50, seed="clt_hi") + 0.5
    lo[0, 0], hi[1, 1], x[2, 2] = NAN, NAN, NAN
    lo[3, 3], hi[3, 3] = 1.0, -1.0
    out["clamp_tensors"] = x.clamp(lo, hi)
    out["clamp_tensors_f64"] = lib.clamp(x.double(), lo.double(), hi.double())
    out["clamp_tensors_broadcast"] = x.clamp(lo[0], hi[:, :1])
    out["half_special"] = lib.tensor([NAN, INF, -INF, 65504.0, 65520.0, 1e-8, -0.0, 6e-8, 1e5, 0.1] * 3).half()
    return out
