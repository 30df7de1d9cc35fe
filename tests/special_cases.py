"""Cases of the elementwise functions of src/ops/special.rs (inverse and hyperbolic
trigonometry, exp2, erfc, erfinv, lgamma, digamma, polygamma, atan2), written once
against the PyTorch API (`lib` is `torch` or `candle_py`): `tools/make_fixtures_special.py`
runs them on torch into tests/fixtures/special/, `tests/test_special_ops.py` on
candle_py and compares. Gradients are those of a weighted sum (`_back`).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import numpy as np

from fixture_cases import Case, Cases
from usage_cases import _back, _err, _np

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF, NAN = math.inf, math.nan


# name -> (typical inputs inside the domain, edge inputs)
DOMAINS: Dict[str, Tuple[np.ndarray, list]] = {
    "atan": (_np(3, 4, seed="atan") * 3, [0.0, -0.0, 1e30, -1e30, INF, -INF, NAN]),
    "asin": (_np(3, 4, seed="asin", kind="unit") * 1.8 - 0.9, [1.0, -1.0, 1.5, 0.0, -0.0, INF, NAN]),
    "acos": (_np(3, 4, seed="acos", kind="unit") * 1.8 - 0.9, [1.0, -1.0, -1.5, 0.0, INF, NAN]),
    "sinh": (_np(3, 4, seed="sinh") * 3, [0.0, -0.0, 89.0, 100.0, -100.0, INF, -INF, NAN]),
    "cosh": (_np(3, 4, seed="cosh") * 3, [0.0, 89.0, 100.0, -100.0, INF, -INF, NAN]),
    "asinh": (_np(3, 4, seed="asinh") * 5, [0.0, -0.0, 1e30, -1e30, INF, -INF, NAN]),
    "acosh": (_np(3, 4, seed="acosh", kind="pos") * 3 + 1.0, [1.0, 0.5, -1.0, 1e30, INF, -INF, NAN]),
    "atanh": (_np(3, 4, seed="atanh", kind="unit") * 1.8 - 0.9, [1.0, -1.0, 2.0, 0.0, -0.0, NAN]),
    "exp2": (_np(3, 4, seed="exp2") * 4, [0.0, -0.0, 127.9, 128.0, -149.0, -200.0, INF, -INF, NAN]),
    "erfc": (_np(3, 4, seed="erfc") * 2, [0.0, -0.0, 9.0, 10.0, -10.0, INF, -INF, NAN]),
    "erfinv": (_np(3, 4, seed="erfinv", kind="unit") * 1.98 - 0.99, [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, NAN]),
    "lgamma": (_np(3, 4, seed="lgamma", kind="pos") * 5, [0.0, -0.0, -1.0, -2.5, 1.0, 2.0, 0.5, 1e-8, 30.0, INF, -INF, NAN]),
    "digamma": (_np(3, 4, seed="digamma", kind="pos") * 5, [0.0, -0.0, -1.0, -2.5, 1.0, 0.5, 1e-8, 30.0, 1e20, INF, -INF, NAN]),
}


def _unary(name: str) -> Case:
    typical, edges = DOMAINS[name]

    def fn(lib: Any) -> Dict[str, Any]:
        x = lib.tensor(typical, requires_grad=True)
        y = getattr(lib, name)(x)
        _back(lib, y)
        e32 = lib.tensor(edges, dtype=lib.float32)
        e64 = lib.tensor(edges, dtype=lib.float64)
        return {
            "y": y,
            "gx": x.grad,
            "node": y.grad_fn.name(),
            "method": getattr(lib.tensor(typical), name)(),
            "edges32": getattr(lib, name)(e32),
            "edges64": getattr(lib, name)(e64),
            "f64": getattr(lib, name)(lib.tensor(typical, dtype=lib.float64)),
            "int": getattr(lib, name)(lib.tensor([1, 2, 3])),
            "zero_d": getattr(lib, name)(lib.tensor(float(typical.flat[0]))),
            "empty": getattr(lib, name)(lib.zeros(0, 3)),
            "half": getattr(lib, name)(lib.tensor(typical[:1], dtype=lib.bfloat16)),
        }

    fn.__name__ = name
    return fn


for _name in DOMAINS:
    case()(_unary(_name))


@case()
def arc_aliases(lib: Any) -> Dict[str, Any]:
    x = lib.tensor(_np(5, seed="alias", kind="unit") * 1.8 - 0.9)
    return {
        "arctan": lib.arctan(x),
        "arcsin": lib.arcsin(x),
        "arccos": x.arccos(),
        "arcsinh": lib.arcsinh(x),
        "arccosh": (x + 2).arccosh(),
        "arctanh": lib.arctanh(x),
    }


@case()
def inplace_twins(lib: Any) -> Dict[str, Any]:
    x = lib.tensor(_np(2, 3, seed="inpl", kind="unit") * 1.8 - 0.9, requires_grad=True)
    y = x * 1
    y.atan_()
    y.sinh_()
    y.erfc_()
    _back(lib, y)
    z = lib.tensor([0.5, 1.5])
    r = z.lgamma_()
    leaf = lib.ones(2, requires_grad=True)
    return {
        "y": y,
        "gx": x.grad,
        "z": z,
        "same": r is z,
        "leaf_err": _err(lambda: leaf.atan_()),
        "int_err": _err(lambda: lib.tensor([1, 2]).asin_()),
    }


@case()
def polygamma(lib: Any) -> Dict[str, Any]:
    x = lib.tensor(_np(3, 4, seed="polyg", kind="pos") * 4, requires_grad=True)
    out: Dict[str, Any] = {}
    for n in range(4):
        y = lib.polygamma(n, x)
        out[f"p{n}"] = y
    y = lib.polygamma(1, x)
    _back(lib, y)
    out["g1"] = x.grad
    edges = [0.0, -0.0, -1.0, -2.5, 1.0, 0.5, 1e-8, 30.0, INF, -INF, NAN]
    for n in range(4):
        out[f"edges{n}"] = lib.polygamma(n, lib.tensor(edges))
        out[f"edges64_{n}"] = lib.polygamma(n, lib.tensor(edges, dtype=lib.float64))
    out["method"] = lib.tensor([0.5, 2.0]).polygamma(2)
    out["int"] = lib.polygamma(1, lib.tensor([1, 2]))
    out["neg_err"] = _err(lambda: lib.polygamma(-1, x))
    return out


@case()
def second_derivatives(lib: Any) -> Dict[str, Any]:
    out = {}
    for name in ("atan", "asin", "acosh", "erfinv", "lgamma", "digamma", "exp2", "erfc", "cosh"):
        typical = DOMAINS[name][0]
        x = lib.tensor(typical[0], requires_grad=True)
        (g,) = lib.autograd.grad(getattr(lib, name)(x).sum(), x, create_graph=True)
        (g2,) = lib.autograd.grad(g.sum(), x)
        out[f"{name}_g"] = g.detach()
        out[f"{name}_g2"] = g2
    return out


@case()
def atan2(lib: Any) -> Dict[str, Any]:
    y = lib.tensor(_np(3, 4, seed="aty"), requires_grad=True)
    x = lib.tensor(_np(4, seed="atx"), requires_grad=True)
    r = lib.atan2(y, x)
    _back(lib, r)
    zy = lib.tensor([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, INF, INF, -INF, NAN, 0.0, 1.0], requires_grad=True)
    zx = lib.tensor([0.0, 0.0, -0.0, -0.0, INF, -INF, INF, -INF, 1.0, 1.0, 0.0, 0.0], requires_grad=True)
    rz = lib.atan2(zy, zx)
    rz.sum().backward()
    return {
        "r": r,
        "gy": y.grad,
        "gx": x.grad,
        "node": r.grad_fn.name(),
        "edges": rz,
        "gzy": zy.grad,
        "gzx": zx.grad,
        "method": lib.tensor([1.0, -1.0]).atan2(lib.tensor([-1.0, -1.0])),
        "arctan2": lib.arctan2(lib.tensor([1.0]), lib.tensor([2.0])),
        "int": lib.atan2(lib.tensor([1, -2]), lib.tensor([3, 4])),
        "f64": lib.atan2(lib.tensor([1.0], dtype=lib.float64), lib.tensor([3.0])),
        "zero_d": lib.atan2(lib.tensor(1.0), lib.tensor([1.0, -1.0])),
        "empty": lib.atan2(lib.zeros(0, 2), lib.zeros(2)),
        "inplace": lib.tensor([1.0, 2.0]).atan2_(lib.tensor([2.0, 1.0])),
        "shape_err": _err(lambda: lib.atan2(lib.zeros(2, 3), lib.zeros(4))),
        "scalar_err": _err(lambda: lib.atan2(lib.zeros(2), 2.0)),
    }


@case()
def torch_special(lib: Any) -> Dict[str, Any]:
    sp = lib.special
    x = lib.tensor(_np(3, 4, seed="tsp") * 2, requires_grad=True)
    y = sp.ndtr(x) + sp.multigammaln(x.abs() + 2, 3) + sp.expit(x) + sp.log_softmax(x, 1) + sp.softmax(x, 0)
    _back(lib, y)
    u = lib.tensor(_np(5, seed="tsp_u", kind="unit"))
    p = lib.tensor(_np(5, seed="tsp_p", kind="pos"))
    e = lib.tensor([0.0, -0.0, INF, -INF, NAN, -40.0, 40.0])
    return {
        "y": y,
        "gx": x.grad,
        "ndtr_edges": sp.ndtr(e),
        "ndtr_int": sp.ndtr(lib.tensor([0, 1])),
        "mvlgamma": sp.multigammaln(p + 1, 4),
        "aliases": lib.stack(
            [sp.logit(u), sp.erf(u), sp.erfc(u), sp.erfinv(u), sp.gammaln(p), sp.digamma(p), sp.psi(p), sp.polygamma(2, p)]
        ),
        "more": lib.stack([sp.xlogy(u, p), sp.exp2(u), sp.expm1(u), sp.log1p(u), sp.round(p * 3), sp.sinc(u)]),
        "lse": sp.logsumexp(x.detach(), 1),
        "lsm64": sp.log_softmax(x.detach(), 1, dtype=lib.float64),
        "p_err": _err(lambda: sp.multigammaln(p, 0)),
    }
