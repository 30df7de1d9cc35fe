"""Cases of `torch.distributions` (python/candle_py/distributions/), written once against
the PyTorch API (`lib` is `torch` or `candle_py`): `tools/make_fixtures_distributions.py`
runs them on torch into tests/fixtures/distributions/, `tests/test_distributions.py` on
candle_py and compares.

Only deterministic quantities are compared: log_prob, entropy, cdf/icdf, mean, variance,
stddev, mode, KL divergences, the gradients of their weighted sums to the parameters,
shapes and dtypes of samples (never their values: the random streams differ), supports
and constraints, validation errors (kind and PyTorch's message), edge values (probs
0 / 1, logits +-inf, values outside the support with and without validation).
The statistics of samples are checked in tests/test_distributions.py itself.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Dict, List

import numpy as np

from fixture_cases import Cases
from usage_cases import _err, _np, _w

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF, NAN = math.inf, math.nan


def _D(lib: Any) -> Any:
    return lib.distributions


def _p(lib: Any, *shape: int, seed: str, kind: str = "normal", scale: float = 1.0, shift: float = 0.0, dtype: Any = None) -> Any:
    """A leaf parameter tensor that requires grad (fixed seeded values)."""
    a = _np(*shape, seed=seed, kind=kind) * scale + shift
    return lib.tensor(a, dtype=dtype or lib.float32, requires_grad=True)


def _t(lib: Any, values: Any, dtype: Any = None) -> Any:
    return lib.tensor(values, dtype=dtype or lib.float32)


def _grads(lib: Any, outs: List[Any], params: List[Any]) -> List[Any]:
    """Gradients of the weighted sum of `outs` (NaN/inf entries dropped) to `params`."""
    total = None
    for y in outs:
        w = _w(lib, y)
        finite = lib.isfinite(y.detach()) if y.is_floating_point() else None
        term = lib.where(finite, y, lib.zeros_like(y)) * w if finite is not None else y * w
        total = term.sum() if total is None else total + term.sum()
    assert total is not None
    total.backward()
    return [p.grad for p in params]


def _msg(fn: Callable[[], Any]) -> str:
    """'ok', or '<kind>: <message>' with the library's module prefix written as torch's."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is the result
        kind = next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")
        return f"{kind}: {e}".replace("candle_py.", "torch.")
    return "ok"


def _repr(d: Any) -> str:
    return repr(d).replace("candle_py.", "torch.")


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the kind is the result
        return "raises " + next(c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins")


def _summary(lib: Any, d: Any, values: Any, sample_shape: Any = (2, 3)) -> Dict[str, Any]:
    """The deterministic surface of distribution `d`: shapes, flags, support, moments,
    log_prob at `values`, entropy, cdf, and the shape/dtype of its samples."""
    out: Dict[str, Any] = {
        "batch_shape": list(d.batch_shape),
        "event_shape": list(d.event_shape),
        "has_rsample": bool(d.has_rsample),
        "has_enumerate_support": bool(d.has_enumerate_support),
        "repr": _repr(d),
        "arg_constraints": {k: repr(v) for k, v in d.arg_constraints.items()},
        "support": _try(lambda: repr(d.support)),
        "mean": _try(lambda: d.mean),
        "variance": _try(lambda: d.variance),
        "stddev": _try(lambda: d.stddev),
        "mode": _try(lambda: d.mode),
        "log_prob": _try(lambda: d.log_prob(values)),
        "entropy": _try(lambda: d.entropy()),
        "cdf": _try(lambda: d.cdf(values)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = d.sample(sample_shape)
    out["sample_shape"] = list(s.shape)
    out["sample_dtype"] = str(s.dtype).rsplit(".", 1)[-1]
    s0 = d.sample()
    out["sample0_shape"] = list(s0.shape)
    if d.has_rsample:
        out["rsample_shape"] = list(d.rsample(sample_shape).shape)
    out["expand"] = _try(
        lambda: [list(d.expand((4,) + tuple(d.batch_shape)).batch_shape), list(d.expand((4,) + tuple(d.batch_shape)).sample().shape)]
    )
    return out


# -- Normal ----------------------------------------------------------------------------


@case()
def normal(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    loc, scale = _p(lib, 2, 3, seed="nloc"), _p(lib, 2, 3, seed="nscale", kind="pos")
    d = D.Normal(loc, scale)
    x = _t(lib, _np(4, 2, 3, seed="nx") * 2)
    out = _summary(lib, d, x)
    lp, ent, cdf = d.log_prob(x), d.entropy(), d.cdf(x)
    u = _t(lib, _np(2, 3, seed="nu", kind="unit"))
    icdf = d.icdf(u)
    out["icdf"] = icdf
    out["perplexity"] = d.perplexity()
    out["grads"] = _grads(lib, [lp, ent, cdf, icdf], [loc, scale])
    return out


@case()
def normal_edges(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    d = D.Normal(_t(lib, [0.0, 1.0, -2.0]), _t(lib, [1.0, 0.5, 3.0]))
    edge = _t(lib, [[INF, -INF, NAN], [0.0, 1e30, -1e30]])
    return {
        "lp": D.Normal(_t(lib, [0.0, 1.0, -2.0]), _t(lib, [1.0, 0.5, 3.0]), validate_args=False).log_prob(edge),
        "lp_validated": _msg(lambda: d.log_prob(edge)),
        "cdf_inf": d.cdf(_t(lib, [INF, -INF, 0.0])),
        "icdf_edges": d.icdf(_t(lib, [0.0, 1.0, 0.5])),
        "icdf_out": d.icdf(_t(lib, [-0.5, 1.5, NAN])),
        "bad_scale": _msg(lambda: D.Normal(0.0, -1.0)),
        "bad_scale_t": _msg(lambda: D.Normal(_t(lib, [0.0, 1.0]), _t(lib, [-1.0, 1.0]))),
        "nan_loc": _msg(lambda: D.Normal(_t(lib, [NAN]), _t(lib, [1.0]))),
        "zero_scale_unvalidated": D.Normal(0.0, 0.0, validate_args=False).log_prob(_t(lib, [0.0, 1.0])),
        "neg_scale_unvalidated": D.Normal(0.0, -1.0, validate_args=False).log_prob(_t(lib, [0.5])),
        "wrong_shape": _msg(lambda: d.log_prob(_t(lib, [1.0, 2.0]))),
        "not_tensor": _msg(lambda: d.log_prob(1.0)),
        "scalar": _summary(lib, D.Normal(0.5, 2.0), _t(lib, [0.0, 1.0])),
        "f64": D.Normal(_t(lib, [0.0, 1.0], lib.float64), 2.0).log_prob(_t(lib, [0.5, 0.25], lib.float64)),
        "f64_entropy": D.Normal(_t(lib, [0.0, 1.0], lib.float64), 2.0).entropy(),
        "broadcast": _summary(lib, D.Normal(_t(lib, [[0.0], [1.0]]), _t(lib, [1.0, 2.0, 3.0])), _t(lib, [0.5])),
        "bad_type": _err(lambda: D.Normal("a", 1.0)),
    }


# -- Bernoulli, Categorical, OneHotCategorical ---------------------------------------------


@case()
def bernoulli(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    probs = _p(lib, 2, 3, seed="bp", kind="unit")
    d = D.Bernoulli(probs=probs)
    x = _t(lib, (_np(4, 2, 3, seed="bx", kind="unit") > 0.5).astype(np.float32))
    out = _summary(lib, d, x)
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.logits], [probs])
    logits = _p(lib, 2, 3, seed="bl", scale=3.0)
    dl = D.Bernoulli(logits=logits)
    out["logits"] = _summary(lib, dl, x)
    out["logit_probs"] = dl.probs
    out["grads_logits"] = _grads(lib, [dl.log_prob(x), dl.entropy(), dl.probs], [logits])
    out["enumerate"] = d.enumerate_support()
    out["enumerate_noexpand"] = d.enumerate_support(expand=False)
    return out


@case()
def bernoulli_edges(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    p = _t(lib, [0.0, 1.0, 0.5, 1e-8])
    v = _t(lib, [[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    d = D.Bernoulli(probs=p)
    dl = D.Bernoulli(logits=_t(lib, [INF, -INF, 0.0, 100.0]), validate_args=False)
    return {
        "lp": d.log_prob(v),
        "entropy": d.entropy(),
        "mean": d.mean,
        "variance": d.variance,
        "mode": d.mode,
        "logits": d.logits,
        "lp_logits": dl.log_prob(v),
        "entropy_logits": dl.entropy(),
        "probs_logits": dl.probs,
        "half_value_unvalidated": D.Bernoulli(probs=p, validate_args=False).log_prob(_t(lib, [0.5, 2.0, -1.0, 0.5])),
        "half_value_validated": _msg(lambda: d.log_prob(_t(lib, [0.5, 0.0, 1.0, 0.0]))),
        "bad_probs": _msg(lambda: D.Bernoulli(probs=_t(lib, [1.5]))),
        "neither": _msg(lambda: D.Bernoulli()),
        "both": _msg(lambda: D.Bernoulli(probs=0.5, logits=0.0)),
        "scalar": _summary(lib, D.Bernoulli(0.3), _t(lib, [0.0, 1.0])),
        "param_shape": list(d.param_shape),
    }


@case()
def categorical(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    probs = _p(lib, 2, 4, seed="cp", kind="pos")
    d = D.Categorical(probs=probs)  # unnormalized: normalized by the constructor
    x = _t(lib, [[0, 3], [2, 1], [1, 1]], lib.int64)
    out = _summary(lib, d, x, sample_shape=(5,))
    out["probs"] = d.probs
    out["logits"] = d.logits
    out["enumerate"] = d.enumerate_support()
    out["enumerate_noexpand"] = d.enumerate_support(expand=False)
    out["param_shape"] = list(d.param_shape)
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy()], [probs])
    logits = _p(lib, 2, 4, seed="cl", scale=2.0)
    dl = D.Categorical(logits=logits)
    out["logits_summary"] = _summary(lib, dl, x, sample_shape=(3, 2))
    out["logits_norm"] = dl.logits
    out["grads_logits"] = _grads(lib, [dl.log_prob(x), dl.entropy(), dl.probs], [logits])
    out["float_value"] = dl.log_prob(_t(lib, [1.0, 3.0]))
    out["sample_zero"] = _err(lambda: dl.sample((0,)))
    out["one_d"] = _summary(lib, D.Categorical(probs=_t(lib, [0.1, 0.2, 0.7])), _t(lib, [2, 0], lib.int64), sample_shape=(4,))
    return out


@case()
def categorical_edges(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    d = D.Categorical(probs=_t(lib, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]))
    dl = D.Categorical(logits=_t(lib, [[-INF, 0.0, 1.0], [0.0, -INF, -INF]]))
    v = _t(lib, [0, 1, 2], lib.int64).reshape(3, 1)
    return {
        "lp": d.log_prob(v),
        "entropy": d.entropy(),
        "logits": d.logits,
        "mode": d.mode,
        "lp_logits": dl.log_prob(v),
        "entropy_logits": dl.entropy(),
        "probs_logits": dl.probs,
        "out_of_range": _msg(lambda: d.log_prob(_t(lib, [3, 0], lib.int64))),
        "negative_value": _msg(lambda: d.log_prob(_t(lib, [-1, 0], lib.int64))),
        "bad_probs": _err(lambda: D.Categorical(probs=_t(lib, [-0.5, 1.5]))),
        "zero_d": _msg(lambda: D.Categorical(probs=_t(lib, 1.0))),
        "zero_d_logits": _msg(lambda: D.Categorical(logits=_t(lib, 1.0))),
        "neither": _msg(lambda: D.Categorical()),
        "kl_zero": D.kl_divergence(d, D.Categorical(probs=_t(lib, [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]))),
        "support": repr(d.support),
    }


@case()
def one_hot_categorical(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    probs = _p(lib, 2, 3, seed="ohp", kind="pos")
    d = D.OneHotCategorical(probs=probs)
    x = lib.nn.functional.one_hot(_t(lib, [[0, 2], [1, 1]], lib.int64), 3).to(lib.float32)
    out = _summary(lib, d, x, sample_shape=(4,))
    out["enumerate"] = d.enumerate_support()
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy()], [probs])
    out["not_one_hot"] = _msg(lambda: d.log_prob(_t(lib, [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])))
    st = D.OneHotCategoricalStraightThrough(logits=_p(lib, 3, seed="st"))
    out["st"] = [bool(st.has_rsample), list(st.rsample((2,)).shape)]
    return out


# -- continuous families ----------------------------------------------------------------


@case()
def uniform(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    low = _p(lib, 2, 3, seed="ulow")
    high = (low.detach() + _t(lib, _np(2, 3, seed="uw", kind="pos"))).requires_grad_()
    d = D.Uniform(low, high)
    x = lib.where(low.detach() < 0, low.detach() + 0.05, low.detach() + 0.01)
    out = _summary(lib, d, x)
    out["icdf"] = d.icdf(_t(lib, _np(2, 3, seed="uu", kind="unit")))
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.cdf(x), d.mean, d.variance], [low, high])
    out["outside_unvalidated"] = D.Uniform(low.detach(), high.detach(), validate_args=False).log_prob(low.detach() - 1)
    out["cdf_outside"] = D.Uniform(low.detach(), high.detach(), validate_args=False).cdf(high.detach() + 1)
    out["outside_validated"] = _msg(lambda: d.log_prob(low.detach() - 1))
    out["bad"] = _msg(lambda: D.Uniform(1.0, 0.0))
    out["scalar"] = _summary(lib, D.Uniform(-1.0, 2.0), _t(lib, [0.0, 1.5]))
    return out


@case()
def exponential(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    rate = _p(lib, 2, 3, seed="erate", kind="pos")
    d = D.Exponential(rate)
    x = _t(lib, _np(2, 3, seed="ex", kind="pos"))
    out = _summary(lib, d, x)
    out["icdf"] = d.icdf(_t(lib, _np(2, 3, seed="eu", kind="unit")))
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.cdf(x)], [rate])
    out["negative_unvalidated"] = D.Exponential(rate.detach(), validate_args=False).log_prob(-x)
    out["negative_validated"] = _msg(lambda: d.log_prob(-x))
    out["zero"] = d.log_prob(lib.zeros(2, 3))
    return out


@case()
def laplace_cauchy(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    loc, scale = _p(lib, 3, seed="lloc"), _p(lib, 3, seed="lscale", kind="pos")
    x = _t(lib, _np(2, 3, seed="lx") * 3)
    u = _t(lib, _np(3, seed="lu", kind="unit"))
    out: Dict[str, Any] = {}
    for name in ("Laplace", "Cauchy"):
        d = getattr(D, name)(loc, scale)
        out[name] = _summary(lib, d, x)
        out[name + "_icdf"] = d.icdf(u)
        loc.grad = None
        scale.grad = None
        out[name + "_grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.cdf(x), d.icdf(u)], [loc, scale])
    return out


@case()
def gamma(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    conc = lib.tensor([[0.3, 1.0, 2.5], [7.0, 0.05, 40.0]], requires_grad=True)
    rate = _p(lib, 2, 3, seed="grate", kind="pos")
    d = D.Gamma(conc, rate)
    x = _t(lib, _np(4, 2, 3, seed="gx", kind="pos") * 3)
    out = _summary(lib, d, x)
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.mean, d.mode], [conc, rate])
    xx = x.clone().requires_grad_()
    cdf = D.Gamma(conc.detach(), rate.detach()).cdf(xx)  # PyTorch has no derivative for the concentration
    out["cdf_grad_x"] = _grads(lib, [cdf], [xx])
    out["zero"] = d.log_prob(lib.zeros(2, 3))
    out["cdf_edges"] = D.Gamma(_t(lib, [0.5, 2.0, 3.0]), 1.0).cdf(_t(lib, [0.0, INF, 1e-30]))
    out["cdf_large"] = D.Gamma(_t(lib, [100.0, 1000.0, 0.01, 30.0]), 1.0).cdf(_t(lib, [95.0, 1050.0, 2.0, 45.0]))
    out["negative_unvalidated"] = D.Gamma(conc.detach(), rate.detach(), validate_args=False).log_prob(-x)
    out["bad"] = _msg(lambda: D.Gamma(_t(lib, [0.0]), _t(lib, [1.0])))
    out["chi2"] = _summary(lib, D.Chi2(_t(lib, [1.0, 3.0, 10.0])), _t(lib, [0.5, 2.0, 9.0]))
    return out


@case(tol=2e-3)
def gamma_implicit_gradient(lib: Any) -> Dict[str, Any]:
    """d x / d alpha at fixed CDF, the gradient Gamma.rsample gives to the concentration."""
    a = np.array([0.05, 0.3, 0.5, 1.0, 1.0, 2.0, 2.0, 5.0, 8.0, 9.0, 20.0, 50.0, 200.0, 2000.0])
    x = np.array([1e-6, 0.01, 0.2, 0.5, 4.0, 0.5, 6.0, 5.0, 8.0, 14.0, 18.0, 60.0, 190.0, 2050.0])
    at, xt = lib.tensor(a, dtype=lib.float64), lib.tensor(x, dtype=lib.float64)
    fn = getattr(lib, "_standard_gamma_grad", None) or lib.distributions.utils._standard_gamma_grad
    g = fn(at, xt)
    return {"rel": g / (x / a)}  # relative to the scale of x / a


@case()
def beta_dirichlet(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    c1, c0 = _p(lib, 2, 3, seed="bc1", kind="pos", scale=2.0), _p(lib, 2, 3, seed="bc0", kind="pos", scale=2.0)
    d = D.Beta(c1, c0)
    x = _t(lib, _np(2, 3, seed="betax", kind="unit"))
    out = _summary(lib, d, x)
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.mean, d.variance], [c1, c0])
    out["edges"] = D.Beta(_t(lib, [1.0, 2.0, 0.5]), _t(lib, [1.0, 1.0, 0.5])).log_prob(_t(lib, [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    out["outside"] = _msg(lambda: d.log_prob(x + 1))
    out["mode"] = D.Beta(_t(lib, [2.0, 0.5, 3.0]), _t(lib, [3.0, 0.5, 0.8])).mode
    out["scalar"] = _summary(lib, D.Beta(2.0, 3.0), _t(lib, [0.25]))
    conc = _p(lib, 2, 4, seed="dirc", kind="pos", scale=2.0)
    dd = D.Dirichlet(conc)
    v = lib.nn.functional.softmax(_t(lib, _np(3, 2, 4, seed="dirv")), -1)
    out["dirichlet"] = _summary(lib, dd, v)
    out["dirichlet_grads"] = _grads(lib, [dd.log_prob(v), dd.entropy(), dd.mean, dd.variance], [conc])
    out["dirichlet_mode"] = D.Dirichlet(_t(lib, [[2.0, 3.0, 1.5], [0.5, 0.3, 0.9]])).mode
    out["dirichlet_not_simplex"] = _msg(lambda: dd.log_prob(v * 2))
    out["dirichlet_zero_d"] = _msg(lambda: D.Dirichlet(_t(lib, 1.0)))
    out["dirichlet_bad"] = _err(lambda: D.Dirichlet(_t(lib, [1.0, -1.0])))
    return out


@case()
def student_t(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    df = lib.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 30.0], requires_grad=True)
    loc, scale = _p(lib, 6, seed="tloc"), _p(lib, 6, seed="tscale", kind="pos")
    d = D.StudentT(df, loc, scale)
    x = _t(lib, _np(2, 6, seed="tx") * 2)
    out = _summary(lib, d, x)
    out["grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.variance, d.mean], [df, loc, scale])
    out["scalar"] = _summary(lib, D.StudentT(4.0), _t(lib, [0.0, 1.0]))
    return out


@case()
def poisson_geometric_binomial(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    rate = lib.tensor([0.5, 3.0, 20.0], requires_grad=True)
    d = D.Poisson(rate)
    k = _t(lib, [[0.0, 2.0, 19.0], [3.0, 0.0, 25.0]])
    out: Dict[str, Any] = {"poisson": _summary(lib, d, k)}
    out["poisson_grads"] = _grads(lib, [d.log_prob(k)], [rate])
    out["poisson_zero_rate"] = D.Poisson(_t(lib, [0.0, 0.0])).log_prob(_t(lib, [0.0, 1.0]))
    out["poisson_fraction"] = _msg(lambda: d.log_prob(_t(lib, [0.5, 1.0, 2.0])))
    out["poisson_fraction_unvalidated"] = D.Poisson(rate.detach(), validate_args=False).log_prob(_t(lib, [0.5, -1.0, 2.0]))
    probs = lib.tensor([0.1, 0.5, 1.0], requires_grad=True)
    g = D.Geometric(probs)
    out["geometric"] = _summary(lib, g, k)
    out["geometric_grads"] = _grads(lib, [g.log_prob(k), g.mean], [probs])
    out["geometric_zero"] = _msg(lambda: D.Geometric(_t(lib, [0.0, 0.5])))
    out["geometric_logits"] = _summary(lib, D.Geometric(logits=_t(lib, [-1.0, 0.0, 2.0])), k)
    n = _t(lib, [[5.0, 10.0, 20.0]])
    bp = lib.tensor([0.2, 0.5, 0.9], requires_grad=True)
    b = D.Binomial(n, bp)
    kb = _t(lib, [[0.0, 5.0, 18.0], [5.0, 10.0, 20.0]])
    out["binomial"] = _summary(lib, b, kb)
    out["binomial_grads"] = _grads(lib, [b.log_prob(kb), b.mean, b.variance], [bp])
    b10 = D.Binomial(10, _t(lib, [0.0, 0.3, 1.0]))
    out["binomial_edges"] = [
        b10.log_prob(_t(lib, [[0.0, 3.0, 10.0], [1.0, 0.0, 9.0]])),
        b10.entropy(),
        b10.mode,
        b10.enumerate_support(False),
    ]
    out["binomial_logits"] = _summary(lib, D.Binomial(7, logits=_t(lib, [-2.0, 0.0, 3.0])), _t(lib, [1.0, 2.0, 7.0]))
    out["binomial_over"] = _msg(lambda: b10.log_prob(_t(lib, [11.0, 0.0, 0.0])))
    out["binomial_bad_count"] = _err(lambda: D.Binomial(_t(lib, [1.5]), _t(lib, [0.5])))
    return out


@case()
def transformed(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    T = D.transforms
    loc, scale = _p(lib, 3, seed="trloc"), _p(lib, 3, seed="trscale", kind="pos")
    out: Dict[str, Any] = {}
    # LogNormal, Gumbel, HalfNormal, HalfCauchy, Pareto
    x = _t(lib, _np(2, 3, seed="trx", kind="pos") * 2)
    for name, d in [
        ("LogNormal", D.LogNormal(loc, scale)),
        ("Gumbel", D.Gumbel(loc, scale)),
        ("HalfNormal", D.HalfNormal(scale)),
        ("HalfCauchy", D.HalfCauchy(scale)),
        ("Pareto", D.Pareto(scale, loc.abs() + 0.5)),
    ]:
        out[name] = _summary(lib, d, x + (scale.detach() if name == "Pareto" else 0))
        out[name + "_icdf"] = _try(lambda d=d: d.icdf(_t(lib, [0.1, 0.5, 0.9])))
        loc.grad = None
        scale.grad = None
        xv = x + (scale.detach() if name == "Pareto" else 0)
        out[name + "_grads"] = _grads(lib, [d.log_prob(xv), d.entropy(), d.mean], [loc, scale])
    out["halfnormal_negative"] = D.HalfNormal(scale.detach(), validate_args=False).log_prob(-x)
    out["lognormal_zero"] = D.LogNormal(0.0, 1.0, validate_args=False).log_prob(_t(lib, [0.0, -1.0, 1.0]))
    # tanh-squashed Gaussian (SAC's policy)
    mu, sig = _p(lib, 2, seed="sacmu"), _p(lib, 2, seed="sacsig", kind="pos")
    sq = D.TransformedDistribution(D.Normal(mu, sig), [T.TanhTransform(cache_size=1), T.AffineTransform(1.0, 2.0)])
    y = _t(lib, [[0.5, -0.9], [2.5, 1.0]])
    out["squashed"] = [sq.log_prob(y), list(sq.batch_shape), list(sq.event_shape), repr(sq.support), list(sq.rsample((5,)).shape)]
    out["squashed_grads"] = _grads(lib, [sq.log_prob(y)], [mu, sig])
    out["squashed_cdf"] = sq.cdf(y)
    # normalizing flow on vectors: Independent base, elementwise transforms
    base = D.Independent(D.Normal(lib.zeros(2, 3), lib.ones(2, 3)), 1)
    flow = D.TransformedDistribution(base, [T.AffineTransform(loc, scale, event_dim=1), T.SigmoidTransform()])
    z = _t(lib, _np(2, 3, seed="flowz", kind="unit"))
    loc.grad = None
    scale.grad = None
    out["flow"] = [flow.log_prob(z), list(flow.batch_shape), list(flow.event_shape)]
    out["flow_grads"] = _grads(lib, [flow.log_prob(z)], [loc, scale])
    out["bad_transforms"] = _msg(lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), "exp"))
    out["expand"] = list(D.LogNormal(0.0, 1.0).expand((3, 2)).sample().shape)
    return out


@case()
def transforms(lib: Any) -> Dict[str, Any]:
    T = _D(lib).transforms
    x = _t(lib, _np(2, 4, seed="tfx"))
    out: Dict[str, Any] = {}
    items = [
        ("exp", T.ExpTransform()),
        ("sigmoid", T.SigmoidTransform()),
        ("tanh", T.TanhTransform()),
        ("softplus", T.SoftplusTransform()),
        ("affine", T.AffineTransform(_t(lib, [1.0, -1.0, 0.5, 2.0]), _t(lib, [2.0, -0.5, 1.0, 3.0]))),
        ("affine_scalar", T.AffineTransform(0.5, -2.0)),
        ("power", T.PowerTransform(_t(lib, 2.0))),
        ("compose", T.ComposeTransform([T.AffineTransform(0.0, 2.0), T.ExpTransform()])),
        ("exp_inv", T.ExpTransform().inv),
        ("stick", T.StickBreakingTransform()),
        ("lower_cholesky", T.LowerCholeskyTransform()),
    ]
    for name, t in items:
        xin = x.abs() + 0.1 if name in ("power", "exp_inv") else x
        if name == "lower_cholesky":
            xin = x[:, :4].reshape(2, 2, 2)
        y = t(xin)
        back = t.inv(y)
        ent: Dict[str, Any] = {"y": y, "back": back, "repr": repr(t), "bijective": bool(t.bijective)}
        ent["ladj"] = _try(lambda t=t, xin=xin, y=y: t.log_abs_det_jacobian(xin, y))
        ent["sign"] = _try(lambda t=t: t.sign if isinstance(t.sign, int) else t.sign)
        ent["domain"] = repr(t.domain)
        ent["codomain"] = repr(t.codomain)
        ent["fshape"] = list(t.forward_shape(lib.Size([2, 4])))
        out[name] = ent
    sm = T.SoftmaxTransform()
    out["softmax"] = [sm(x), sm.inv(sm(x)), list(sm.forward_shape(lib.Size([3])))]
    out["abs"] = [T.AbsTransform()(x), T.AbsTransform().inv(x)]
    r = T.ReshapeTransform((4,), (2, 2))
    out["reshape"] = [list(r(x).shape), list(r.inv(r(x)).shape), r.log_abs_det_jacobian(x, r(x)), list(r.forward_shape((5, 4)))]
    ind = T.IndependentTransform(T.ExpTransform(), 1)
    out["independent"] = [ind(x), ind.log_abs_det_jacobian(x, ind(x)), repr(ind.domain)]
    out["cat"] = T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], dim=-1, lengths=[2, 2])(x)
    out["stack"] = T.StackTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], dim=0)(x)
    out["identity"] = [T.identity_transform(x), repr(T.identity_transform.domain)]
    out["eq"] = [
        T.ExpTransform() == T.ExpTransform(),
        T.ExpTransform() == T.SigmoidTransform(),
        T.ExpTransform().inv == T.ExpTransform().inv,
    ]
    out["cache_bad"] = _err(lambda: T.ExpTransform(cache_size=2))
    c = T.ExpTransform(cache_size=1)
    y = c(x)
    out["cache_same"] = c.inv(y) is x
    out["compose_event_dim"] = [T.ComposeTransform([T.StickBreakingTransform(), T.ExpTransform().inv]).domain.event_dim]
    out["cdf_transform"] = T.CumulativeDistributionTransform(_D(lib).Normal(0.0, 1.0))(x)
    return out


@case()
def multivariate_normal(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    a = _np(2, 3, 3, seed="mvna")
    cov_np = a @ a.transpose(0, 2, 1) + np.eye(3, dtype=np.float32)
    cov = lib.tensor(cov_np, requires_grad=True)
    loc = _p(lib, 2, 3, seed="mvnloc")
    x = _t(lib, _np(4, 2, 3, seed="mvnx"))
    out: Dict[str, Any] = {}
    d = D.MultivariateNormal(loc, covariance_matrix=cov)
    out["cov"] = _summary(lib, d, x)
    out["cov_tril"] = d.scale_tril
    out["cov_precision"] = d.precision_matrix
    out["cov_grads"] = _grads(lib, [d.log_prob(x), d.entropy(), d.variance], [loc, cov])
    tril = lib.tensor(np.linalg.cholesky(cov_np.astype(np.float64)).astype(np.float32), requires_grad=True)
    loc.grad = None
    dt = D.MultivariateNormal(loc, scale_tril=tril)
    out["tril"] = _summary(lib, dt, x)
    out["tril_cov"] = dt.covariance_matrix
    out["tril_grads"] = _grads(lib, [dt.log_prob(x), dt.entropy()], [loc, tril])
    prec = lib.tensor(np.linalg.inv(cov_np.astype(np.float64)).astype(np.float32), requires_grad=True)
    dp = D.MultivariateNormal(loc.detach(), precision_matrix=prec)
    out["prec"] = _summary(lib, dp, x)
    out["prec_tril"] = dp.scale_tril
    out["prec_grads"] = _grads(lib, [dp.log_prob(x), dp.entropy()], [prec])
    # one covariance for a batch of locs
    db = D.MultivariateNormal(_t(lib, _np(4, 3, seed="mvnb")), covariance_matrix=_t(lib, cov_np[0]))
    out["broadcast"] = _summary(lib, db, _t(lib, _np(5, 1, 3, seed="mvnbx")))
    out["kl"] = D.kl_divergence(d, dt)
    out["kl_batch"] = D.kl_divergence(db, D.MultivariateNormal(lib.zeros(3), scale_tril=tril.detach()[1]))
    out["not_pd"] = _msg(lambda: D.MultivariateNormal(lib.zeros(2), covariance_matrix=_t(lib, [[1.0, 2.0], [2.0, 1.0]])))
    out["not_pd_unvalidated"] = _err(
        lambda: D.MultivariateNormal(lib.zeros(2), covariance_matrix=_t(lib, [[1.0, 2.0], [2.0, 1.0]]), validate_args=False)
    )
    out["not_sym"] = _msg(lambda: D.MultivariateNormal(lib.zeros(2), covariance_matrix=_t(lib, [[1.0, 0.5], [0.0, 1.0]])))
    out["bad_tril"] = _msg(lambda: D.MultivariateNormal(lib.zeros(2), scale_tril=_t(lib, [[1.0, 0.5], [0.0, 1.0]])))
    out["two"] = _msg(lambda: D.MultivariateNormal(lib.zeros(2), covariance_matrix=lib.eye(2), scale_tril=lib.eye(2)))
    out["zero_d"] = _msg(lambda: D.MultivariateNormal(_t(lib, 0.0), covariance_matrix=lib.eye(2)))
    out["f64"] = D.MultivariateNormal(
        _t(lib, [0.0, 1.0], lib.float64), covariance_matrix=_t(lib, [[2.0, 0.3], [0.3, 1.0]], lib.float64)
    ).log_prob(_t(lib, [0.5, 0.5], lib.float64))
    return out


@case()
def independent_and_relaxed(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    loc, scale = _p(lib, 2, 3, seed="iloc"), _p(lib, 2, 3, seed="iscale", kind="pos")
    d = D.Independent(D.Normal(loc, scale), 1)
    x = _t(lib, _np(4, 2, 3, seed="ix"))
    out: Dict[str, Any] = {"independent": _summary(lib, d, x)}
    out["independent_grads"] = _grads(lib, [d.log_prob(x), d.entropy()], [loc, scale])
    out["independent_bad"] = _msg(lambda: D.Independent(D.Normal(0.0, 1.0), 1))
    out["independent_enum"] = _err(lambda: D.Independent(D.Bernoulli(lib.ones(2, 2) * 0.5), 1).enumerate_support())
    temp = lib.tensor(0.7, requires_grad=True)
    probs = _p(lib, 3, seed="rbp", kind="unit")
    rb = D.RelaxedBernoulli(temp, probs=probs)
    v = _t(lib, [0.1, 0.5, 0.95])
    out["relaxed_bernoulli"] = _summary(lib, rb, v)
    out["relaxed_bernoulli_grads"] = _grads(lib, [rb.log_prob(v)], [temp, probs])
    temp.grad = None
    logits = _p(lib, 2, 3, seed="rcl")
    rc = D.RelaxedOneHotCategorical(temp, logits=logits)
    vc = lib.nn.functional.softmax(_t(lib, _np(2, 3, seed="rcv")), -1)
    out["relaxed_categorical"] = _summary(lib, rc, vc)
    out["relaxed_categorical_grads"] = _grads(lib, [rc.log_prob(vc)], [temp, logits])
    return out


# -- KL divergences ----------------------------------------------------------------------


def _families(lib: Any, tag: str) -> Dict[str, Any]:
    """One distribution of each family with batch shape (3,): name -> (distribution, its leaf parameters)."""
    D = _D(lib)
    leaves: List[Any] = []

    def p(kind: str, sub: str, *shape: int, **kw: Any) -> Any:
        t = _p(lib, *(shape or (3,)), seed=tag + sub, kind=kind, **kw)
        leaves.append(t)
        return t

    def fam(make: Callable[[], Any]) -> Any:
        leaves.clear()
        d = make()
        return d, list(leaves)

    return {
        "Normal": fam(lambda: D.Normal(p("normal", "nl"), p("pos", "ns"))),
        "Laplace": fam(lambda: D.Laplace(p("normal", "ll"), p("pos", "ls"))),
        "Cauchy": fam(lambda: D.Cauchy(p("normal", "cl"), p("pos", "cs"))),
        "Gumbel": fam(lambda: D.Gumbel(p("normal", "gl"), p("pos", "gs"))),
        "Exponential": fam(lambda: D.Exponential(p("pos", "er"))),
        "Gamma": fam(lambda: D.Gamma(p("pos", "gc", scale=3.0), p("pos", "gr"))),
        "Beta": fam(lambda: D.Beta(p("pos", "b1", scale=2.0), p("pos", "b0", scale=2.0))),
        "Uniform": fam(lambda: D.Uniform(p("normal", "ulo"), p("pos", "uhi", shift=1.5))),
        "Uniform01": fam(lambda: D.Uniform(p("unit", "u0", scale=0.4), p("unit", "u1", scale=0.4, shift=0.55))),
        "HalfNormal": fam(lambda: D.HalfNormal(p("pos", "hs"))),
        "Pareto": fam(lambda: D.Pareto(p("pos", "ps"), p("pos", "pa", shift=1.5))),
        "Poisson": fam(lambda: D.Poisson(p("pos", "pr", scale=3.0))),
        "Bernoulli": fam(lambda: D.Bernoulli(p("unit", "bp"))),
        "Geometric": fam(lambda: D.Geometric(p("unit", "gp"))),
        "Binomial": fam(lambda: D.Binomial(10, p("unit", "bip"))),
        "Categorical": fam(lambda: D.Categorical(p("pos", "cat", 3, 4))),
        "OneHotCategorical": fam(lambda: D.OneHotCategorical(p("pos", "oh", 3, 4))),
        "Dirichlet": fam(lambda: D.Dirichlet(p("pos", "dir", 3, 4, scale=2.0))),
        "LogNormal": fam(lambda: D.LogNormal(p("normal", "lnl"), p("pos", "lns"))),
        "Independent": fam(lambda: D.Independent(D.Normal(p("normal", "inl", 3, 2), p("pos", "ins", 3, 2)), 1)),
        "Chi2": fam(lambda: D.Chi2(p("pos", "chi", scale=3.0))),
    }


KL_PAIRS = [
    ("Normal", "Normal"),
    ("Laplace", "Laplace"),
    ("Cauchy", "Cauchy"),
    ("Gumbel", "Gumbel"),
    ("Exponential", "Exponential"),
    ("Gamma", "Gamma"),
    ("Beta", "Beta"),
    ("Uniform", "Uniform"),
    ("HalfNormal", "HalfNormal"),
    ("Pareto", "Pareto"),
    ("Poisson", "Poisson"),
    ("Bernoulli", "Bernoulli"),
    ("Geometric", "Geometric"),
    ("Binomial", "Binomial"),
    ("Categorical", "Categorical"),
    ("OneHotCategorical", "OneHotCategorical"),
    ("Dirichlet", "Dirichlet"),
    ("LogNormal", "LogNormal"),
    ("Independent", "Independent"),
    ("Chi2", "Chi2"),
    ("Bernoulli", "Poisson"),
    ("Beta", "Pareto"),
    ("Beta", "Exponential"),
    ("Beta", "Gamma"),
    ("Beta", "Normal"),
    ("Beta", "Uniform01"),
    ("Exponential", "Beta"),
    ("Exponential", "Gamma"),
    ("Exponential", "Gumbel"),
    ("Exponential", "Normal"),
    ("Exponential", "Uniform"),
    ("Gamma", "Exponential"),
    ("Gamma", "Gumbel"),
    ("Gamma", "Normal"),
    ("Gamma", "Uniform"),
    ("Gumbel", "Normal"),
    ("Gumbel", "Exponential"),
    ("Laplace", "Normal"),
    ("Laplace", "Gamma"),
    ("Normal", "Gumbel"),
    ("Normal", "Laplace"),
    ("Normal", "Exponential"),
    ("Pareto", "Exponential"),
    ("Pareto", "Gamma"),
    ("Pareto", "Normal"),
    ("Pareto", "Uniform"),
    ("Poisson", "Bernoulli"),
    ("Poisson", "Binomial"),
    ("Uniform01", "Beta"),
    ("Uniform", "Exponential"),
    ("Uniform", "Gamma"),
    ("Uniform", "Gumbel"),
    ("Uniform", "Normal"),
    ("Uniform", "Pareto"),
    ("Chi2", "Gamma"),
    ("Chi2", "Exponential"),
]


def _kl_case(pair_slice: slice) -> Callable[[Any], Dict[str, Any]]:
    def fn(lib: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for pname, qname in KL_PAIRS[pair_slice]:
            (p, pp), (q, qp) = _families(lib, "p")[pname], _families(lib, "q")[qname]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kl = _try(lambda p=p, q=q: _D(lib).kl_divergence(p, q))
            key = f"{pname}_{qname}"
            out[key] = kl
            if not isinstance(kl, str) and kl.requires_grad:
                out[key + "_grads"] = _grads(lib, [kl], pp + qp)
        return out

    return fn


for _i in range(0, len(KL_PAIRS), 8):
    _f = _kl_case(slice(_i, _i + 8))
    _f.__name__ = f"kl_{_i // 8}"
    case()(_f)


@case()
def kl_errors_and_registry(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    out: Dict[str, Any] = {}
    out["missing"] = _msg(lambda: D.kl_divergence(D.Cauchy(0.0, 1.0), D.Normal(0.0, 1.0)))
    out["binomial_count"] = _msg(lambda: D.kl_divergence(D.Binomial(5, _t(lib, [0.5])), D.Binomial(10, _t(lib, [0.5]))))
    out["binomial_inf"] = D.kl_divergence(D.Binomial(10, _t(lib, [0.5])), D.Binomial(5, _t(lib, [0.5])))
    out["bernoulli_edges"] = D.kl_divergence(D.Bernoulli(_t(lib, [0.0, 1.0, 0.5, 0.3])), D.Bernoulli(_t(lib, [0.5, 0.5, 0.0, 1.0])))
    out["uniform_inf"] = D.kl_divergence(
        D.Uniform(_t(lib, [0.0, -1.0]), _t(lib, [1.0, 1.0])), D.Uniform(_t(lib, [0.0, 0.0]), _t(lib, [2.0, 2.0]))
    )
    out["transformed_mismatch"] = _err(
        lambda: D.kl_divergence(
            D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform()]),
            D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.SigmoidTransform()]),
        )
    )
    out["mvn_event_mismatch"] = _err(
        lambda: D.kl_divergence(D.MultivariateNormal(lib.zeros(2), lib.eye(2)), D.MultivariateNormal(lib.zeros(3), lib.eye(3)))
    )

    class MyNormal(D.Normal):
        pass

    out["subclass"] = D.kl_divergence(MyNormal(_t(lib, [0.0]), _t(lib, [2.0])), D.Normal(_t(lib, [1.0]), _t(lib, [1.0])))

    @D.register_kl(MyNormal, MyNormal)
    def _kl_mine(p: Any, q: Any) -> Any:
        return p.loc * 0 + 42.0

    out["registered"] = D.kl_divergence(MyNormal(_t(lib, [0.0]), _t(lib, [2.0])), MyNormal(_t(lib, [1.0]), _t(lib, [1.0])))
    out["expfamily"] = _err(lambda: D.kl_divergence(D.Poisson(_t(lib, [1.0])), D.Exponential(_t(lib, [1.0]))))
    return out


NAMES = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution", "ExpRelaxedCategorical",
    "Exponential", "ExponentialFamily", "Gamma", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent", "Laplace",
    "LogNormal", "LogitRelaxedBernoulli", "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough",
    "Pareto", "Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform",
    "constraints", "kl_divergence", "register_kl", "transforms", "AbsTransform", "AffineTransform", "CatTransform",
    "ComposeTransform", "CumulativeDistributionTransform", "ExpTransform", "IndependentTransform", "LowerCholeskyTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform", "StackTransform",
    "StickBreakingTransform", "TanhTransform", "Transform", "identity_transform",
]  # fmt: skip


# -- constraints, validation switch, Distribution protocol ---------------------------------


@case()
def constraints(lib: Any) -> Dict[str, Any]:
    C = _D(lib).constraints
    v = _t(lib, [[-1.0, 0.0, 0.5], [1.0, 2.0, NAN]])
    items = {
        "real": C.real,
        "positive": C.positive,
        "nonnegative": C.nonnegative,
        "unit_interval": C.unit_interval,
        "boolean": C.boolean,
        "nonnegative_integer": C.nonnegative_integer,
        "positive_integer": C.positive_integer,
        "greater_than": C.greater_than(0.5),
        "greater_than_eq": C.greater_than_eq(0.5),
        "less_than": C.less_than(1.0),
        "interval": C.interval(-0.5, 1.0),
        "half_open_interval": C.half_open_interval(0.0, 1.0),
        "integer_interval": C.integer_interval(0, 1),
        "real_vector": C.real_vector,
        "simplex": C.simplex,
        "one_hot": C.one_hot,
        "independent": C.independent(C.positive, 1),
        "multinomial": C.multinomial(3),
    }
    out: Dict[str, Any] = {}
    for k, c in items.items():
        out[k] = [repr(c), c.check(v), bool(c.is_discrete), int(c.event_dim)]
    m = _t(lib, [[[1.0, 0.0], [0.5, 2.0]], [[1.0, 0.3], [0.3, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
    for k in ("lower_triangular", "lower_cholesky", "square", "symmetric", "positive_definite", "positive_semidefinite"):
        c = getattr(C, k)
        out[k] = [repr(c), c.check(m), int(c.event_dim)]
    out["corr_cholesky"] = [repr(C.corr_cholesky), C.corr_cholesky.check(_t(lib, [[[1.0, 0.0], [0.6, 0.8]], [[1.0, 0.0], [0.5, 0.5]]]))]
    out["dependent"] = [repr(C.dependent), C.is_dependent(C.dependent), C.is_dependent(C.real), _err(lambda: C.dependent.check(v))]
    out["dependent_event_dim"] = _err(lambda: C.dependent.event_dim)
    out["dependent_call"] = C.dependent(is_discrete=True, event_dim=1).event_dim
    out["cat"] = C.cat([C.positive, C.real], dim=-1, lengths=[1, 2]).check(v)
    out["stack"] = C.stack([C.positive, C.real], dim=0).check(v)
    out["independent_too_few"] = _err(lambda: C.independent(C.real, 2).check(_t(lib, 1.0)))
    out["all"] = sorted(C.__all__)
    return out


@case()
def validation_switch(lib: Any) -> Dict[str, Any]:
    D = _D(lib)
    out: Dict[str, Any] = {"default": bool(D.Distribution._validate_args)}
    try:
        D.Distribution.set_default_validate_args(False)
        out["off_ctor"] = _msg(lambda: D.Normal(0.0, -1.0))
        out["off_lp"] = D.Normal(0.0, 1.0).log_prob(_t(lib, [NAN]))
        out["on_explicit"] = _msg(lambda: D.Normal(0.0, -1.0, validate_args=True))
    finally:
        D.Distribution.set_default_validate_args(True)
    out["on_ctor"] = _msg(lambda: D.Normal(0.0, -1.0))
    out["bad_value"] = _err(lambda: D.Distribution.set_default_validate_args("yes"))
    d = D.Normal(_t(lib, [0.0, 1.0]), 1.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = d.sample_n(3)
    out["sample_n"] = [list(s.shape), [x.category.__name__ for x in w]]
    out["extended_shape"] = list(d._extended_shape((5,)))
    out["base_errors"] = [_err(lambda: D.Distribution().sample()), _err(lambda: D.Distribution().mean), _err(lambda: D.Distribution().mode)]
    out["no_rsample"] = _err(lambda: D.Poisson(_t(lib, [1.0])).rsample())
    out["poisson_entropy"] = _err(lambda: D.Poisson(_t(lib, [1.0])).entropy())
    out["inhomogeneous"] = _msg(lambda: D.Binomial(_t(lib, [3.0, 4.0]), _t(lib, [0.5, 0.5])).entropy())
    out["expand_custom"] = _err(
        lambda: type("N2", (D.Normal,), {"__init__": lambda self, a: D.Normal.__init__(self, a, 1.0)})(0.0).expand((2,))
    )
    out["names"] = {n: hasattr(D, n) for n in NAMES}
    return out


@case()
def exponential_family_entropy(lib: Any) -> Dict[str, Any]:
    """ExponentialFamily.entropy (Bregman, through autograd) equals each family's own."""
    D = _D(lib)
    out = {}
    for name, d in [
        ("Normal", D.Normal(_t(lib, [0.0, 1.0]), _t(lib, [1.0, 2.0]))),
        ("Gamma", D.Gamma(_t(lib, [2.0, 3.0]), _t(lib, [1.0, 0.5]))),
        ("Exponential", D.Exponential(_t(lib, [2.0, 3.0]))),
        ("Bernoulli", D.Bernoulli(_t(lib, [0.2, 0.7]))),
        ("Beta", D.Beta(_t(lib, [2.0, 3.0]), _t(lib, [1.5, 0.5]))),
    ]:
        out[name] = _try(lambda d=d: D.ExponentialFamily.entropy(d))
    return out


# -- a REINFORCE step as pytorch/examples/reinforcement_learning/reinforce.py writes it ----


def _policy(lib: Any) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.affine1 = nn.Linear(4, 128)
            self.dropout = nn.Dropout(p=0.0)
            self.affine2 = nn.Linear(128, 2)

        def forward(self, x: Any) -> Any:
            x = self.affine1(x)
            x = self.dropout(x)
            x = F.relu(x)
            action_scores = self.affine2(x)
            return F.softmax(action_scores, dim=1)

    policy = Policy()
    sd = policy.state_dict()
    policy.load_state_dict({k: lib.tensor(_np(*v.shape, seed="pol" + k) * 0.3) for k, v in sd.items()})
    return policy


@case(tol=1e-4)
def reinforce_step(lib: Any) -> Dict[str, Any]:
    """One episode of REINFORCE (sampled actions replaced by fixed ones, which is what the
    random streams cannot give both libraries): Categorical(probs) from a softmax policy,
    log_prob of the action, -log_prob * normalized return, backward, one Adam step."""
    D = _D(lib)
    policy = _policy(lib)
    optimizer = lib.optim.Adam(policy.parameters(), lr=1e-2)
    eps = float(np.finfo(np.float32).eps.item())
    gamma = 0.99
    states = _np(6, 4, seed="rlstates")
    actions = [0, 1, 1, 0, 1, 1]
    rewards = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    saved_log_probs = []
    sampled = []
    for t in range(6):
        state = lib.from_numpy(states[t]).float().unsqueeze(0)
        probs = policy(state)
        m = D.Categorical(probs)
        a = m.sample()
        sampled.append([list(a.shape), str(a.dtype).rsplit(".", 1)[-1], int(a.item()) in (0, 1)])
        action = lib.tensor([actions[t]])
        saved_log_probs.append(m.log_prob(action))
    R = 0.0
    returns_list: List[float] = []
    for r in rewards[::-1]:
        R = r + gamma * R
        returns_list.insert(0, R)
    returns = lib.tensor(returns_list)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    policy_loss = []
    for log_prob, R_t in zip(saved_log_probs, returns):
        policy_loss.append(-log_prob * R_t)
    optimizer.zero_grad()
    loss = lib.cat(policy_loss).sum()
    loss.backward()
    grads = {k: p.grad.clone() for k, p in policy.named_parameters()}
    optimizer.step()
    return {
        "log_probs": lib.cat(saved_log_probs).detach(),
        "loss": loss.detach(),
        "grads": grads,
        "params": {k: p.detach().clone() for k, p in policy.named_parameters()},
        "sampled": sampled,
    }
