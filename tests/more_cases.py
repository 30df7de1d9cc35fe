"""Cases of python/candle_py/_composed_more.py, written once against the PyTorch API (`lib`
is `torch` or `candle_py`): `tools/make_fixtures_more.py` runs them on torch into
tests/fixtures/more/, `tests/test_more_ops.py` on candle_py and compares.

Each case covers one op or a family: typical inputs, the gradients of a weighted sum
(`_back`) where PyTorch's op is differentiable, NaN / inf, empty and 0-d inputs, integer and
bool dtypes, the Tensor method and in-place forms, and bad inputs through `_err` (the
exception kind is compared). Inputs are explicit values or usage_cases' seeded NumPy
arrays (`_r`), so both libraries see the same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List

from fixture_cases import Cases
from usage_cases import _back, _err, _r, _try

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF, NAN = math.inf, math.nan


def _leaf(lib: Any, values: Any, dtype: Any = None) -> Any:
    return lib.tensor(values, dtype=dtype or lib.float32, requires_grad=True)


def _g(lib: Any, x: Any) -> Any:
    """`x.grad`; torch's zero-gradient tensors (ZeroTensor) as plain zeros."""
    g = x.grad
    if g is not None and getattr(g, "_is_zerotensor", lambda: False)():
        return lib.zeros_like(g)
    return g


def _grads(lib: Any, fn: Callable[..., Any], *xs: Any) -> Dict[str, Any]:
    """`fn(*xs)` and the gradients of its weighted sum for each of `xs`."""
    y = fn(*xs)
    _back(lib, y)
    out = {"y": y}
    for i, x in enumerate(xs):
        out[f"g{i}"] = _g(lib, x)
    return out


def _flat(prefix: str, d: Dict[str, Any]) -> Dict[str, Any]:
    return {f"{prefix}_{k}": v for k, v in d.items()}


def _inplace(lib: Any, x: Any, fn: Callable[[Any], Any]) -> Dict[str, Any]:
    """`fn(x)` on a copy of `x`: the copy afterwards and whether `fn` returned it."""
    y = x.clone()
    r = fn(y)
    return {"value": y, "same": r is y}


# -- aliases of functionals ----------------------------------------------------------------


@case(1e-4)
def conv_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x1, w1, b1 = _r(lib, 2, 3, 7, seed="c1x", grad=True), _r(lib, 4, 3, 3, seed="c1w", grad=True), _r(lib, 4, seed="c1b", grad=True)
    out.update(_flat("c1", _grads(lib, lambda x, w, b: lib.conv1d(x, w, b, 2, 1), x1, w1, b1)))
    x2, w2 = _r(lib, 1, 2, 5, 5, seed="c2x", grad=True), _r(lib, 4, 1, 3, 3, seed="c2w", grad=True)
    out.update(_flat("c2", _grads(lib, lambda x, w: lib.conv2d(x, w, None, 1, 1, 1, 2), x2, w2)))
    x3, w3 = _r(lib, 1, 2, 4, 4, 4, seed="c3x"), _r(lib, 3, 2, 2, 2, 2, seed="c3w")
    out["c3"] = lib.conv3d(x3, w3, stride=2)
    out["c1_same"] = lib.conv1d(x1.detach(), w1.detach(), padding="same")
    out["c2_dilated"] = lib.conv2d(x2.detach(), w2.detach(), groups=2, dilation=2)
    xt, wt = _r(lib, 2, 4, 5, seed="t1x", grad=True), _r(lib, 4, 3, 3, seed="t1w", grad=True)
    out.update(_flat("t1", _grads(lib, lambda x, w: lib.conv_transpose1d(x, w, None, 2, 1, 1), xt, wt)))
    out["t2"] = lib.conv_transpose2d(_r(lib, 1, 2, 3, 3, seed="t2x"), _r(lib, 2, 3, 2, 2, seed="t2w"), _r(lib, 3, seed="t2b"), 2)
    out["t3"] = lib.conv_transpose3d(_r(lib, 1, 2, 2, 2, 2, seed="t3x"), _r(lib, 2, 1, 2, 2, 2, seed="t3w"))
    out["not_tensor"] = _err(lambda: lib.conv2d([[1.0]], w2))
    out["bad_shape"] = _err(lambda: lib.conv1d(lib.ones(2, 5, 7), lib.ones(4, 3, 3)))
    return out


@case()
def dropout_aliases(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="dr")
    out: Dict[str, Any] = {
        "eval": lib.dropout(x, 0.5, False),
        "p0": lib.dropout(x, 0.0, True),
        "p1": lib.dropout(x, 1.0, True),
        "alpha_eval": lib.alpha_dropout(x, 0.3, False),
        "feature_alpha_eval": lib.feature_alpha_dropout(x, 0.3, False),
        "bad_p": _err(lambda: lib.dropout(x, 1.5, True)),
        "missing_train": _err(lambda: lib.dropout(x, 0.5)),  # type: ignore[call-arg]
    }
    for name in ("dropout_", "alpha_dropout_", "feature_alpha_dropout_"):
        out.update(_flat(name, _inplace(lib, x, lambda y, name=name: getattr(lib, name)(y, 0.5, False))))
    out.update(_flat("dropout_p1", _inplace(lib, x, lambda y: lib.dropout_(y, 1.0, True))))
    # training with p in (0, 1): the kept elements are scaled by 1 / (1 - p)
    y = lib.dropout(lib.ones(2000), 0.25, True)
    out["train_kept_scale"] = lib.unique(y)
    return out


@case(1e-4)
def norm_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x, w, b = _r(lib, 2, 3, 4, seed="ln", grad=True), _r(lib, 4, seed="lnw", grad=True), _r(lib, 4, seed="lnb", grad=True)
    out.update(_flat("ln", _grads(lib, lambda x, w, b: lib.layer_norm(x, [4], w, b, 1e-3), x, w, b)))
    out["ln_plain"] = lib.layer_norm(x.detach(), (3, 4))
    out["ln_int_shape"] = _err(lambda: lib.layer_norm(x.detach(), 4))
    xg, wg = _r(lib, 2, 4, 3, seed="gn", grad=True), _r(lib, 4, seed="gnw", grad=True)
    out.update(_flat("gn", _grads(lib, lambda x, w: lib.group_norm(x, 2, w, None), xg, wg)))
    xb = _r(lib, 4, 3, 2, seed="bn", grad=True)
    rm, rv = lib.zeros(3), lib.ones(3)
    wb, bb = _r(lib, 3, seed="bnw", grad=True), _r(lib, 3, seed="bnb", grad=True)
    out.update(_flat("bn", _grads(lib, lambda x, w, b: lib.batch_norm(x, w, b, rm, rv, True, 0.2, 1e-5, False), xb, wb, bb)))
    out["bn_running_mean"], out["bn_running_var"] = rm, rv
    out["bn_eval"] = lib.batch_norm(xb.detach(), None, None, rm, rv, False, 0.1, 1e-5, True)
    out["bn_eval_no_stats"] = _err(lambda: lib.batch_norm(xb.detach(), None, None, None, None, False, 0.1, 1e-5, True))
    out["bn_missing"] = _err(lambda: lib.batch_norm(xb.detach(), None, None, rm, rv))  # type: ignore[call-arg]
    xi = _r(lib, 2, 3, 5, seed="in", grad=True)
    out.update(_flat("in", _grads(lib, lambda x: lib.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False), xi)))
    return out


@case()
def embedding_alias(lib: Any) -> Dict[str, Any]:
    w = _r(lib, 5, 3, seed="emb", grad=True)
    idx = lib.tensor([[0, 2, 4], [2, 2, 1]])
    out = _flat("plain", _grads(lib, lambda w: lib.embedding(w, idx), w))
    w2 = _r(lib, 5, 3, seed="emb", grad=True)
    out.update(_flat("pad", _grads(lib, lambda w: lib.embedding(w, idx, 2), w2)))
    w3 = _r(lib, 5, 3, seed="emb", grad=True)
    out.update(_flat("neg_pad", _grads(lib, lambda w: lib.embedding(w, idx, -1), w3)))
    out["swapped"] = _err(lambda: lib.embedding(idx, w.detach()))
    out["out_of_range"] = _err(lambda: lib.embedding(w.detach(), lib.tensor([7])))
    return out


@case(1e-4)
def shape_and_distance_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x1, x2, w = _r(lib, 3, 2, seed="bl1", grad=True), _r(lib, 3, 4, seed="bl2", grad=True), _r(lib, 5, 2, 4, seed="blw", grad=True)
    out.update(_flat("bilinear", _grads(lib, lambda a, b, w: lib.bilinear(a, b, w, None), x1, x2, w)))
    px = _r(lib, 1, 8, 2, 3, seed="ps")
    out["pixel_shuffle"] = lib.pixel_shuffle(px, 2)
    out["pixel_unshuffle"] = lib.pixel_unshuffle(lib.pixel_shuffle(px, 2), 2)
    out["channel_shuffle"] = lib.channel_shuffle(px, 4)
    out["pixel_shuffle_bad"] = _err(lambda: lib.pixel_shuffle(px, 3))
    a, b = _r(lib, 4, 3, seed="cs1", grad=True), _r(lib, 4, 3, seed="cs2", grad=True)
    out.update(_flat("cos", _grads(lib, lambda a, b: lib.cosine_similarity(a, b, 0), a, b)))
    out["cos_default"] = lib.cosine_similarity(a.detach(), b.detach())
    c, d = _r(lib, 4, 3, seed="pd1", grad=True), _r(lib, 4, 3, seed="pd2", grad=True)
    out.update(_flat("pdist", _grads(lib, lambda a, b: lib.pairwise_distance(a, b, 1.5, 1e-6, True), c, d)))
    out["pdist_default"] = lib.pairwise_distance(c.detach(), d.detach())
    return out


@case()
def activation_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    vals = [-3.0, -1.0, -0.5, -0.25, -0.1, 0.25, 0.5, 1.0, 2.0]  # (candle_py's rrelu takes the slope 1 at 0, PyTorch the negative one)
    for name, fn in (
        ("selu", lambda x: lib.selu(x)),
        ("celu", lambda x: lib.celu(x, 1.5)),
        ("rrelu", lambda x: lib.rrelu(x)),
        ("threshold", lambda x: lib.threshold(x, 0.3, -7.0)),
        ("hardshrink", lambda x: lib.hardshrink(x, 0.5)),
        ("hardshrink_method", lambda x: x.hardshrink(0.25)),
        ("prelu", lambda x: lib.prelu(x.reshape(1, 3, 3), lib.tensor([0.1, 0.2, 0.3]))),
    ):
        out.update(_flat(name, _grads(lib, fn, _leaf(lib, vals))))
    x = lib.tensor(vals)
    out["hardshrink_default"] = lib.hardshrink(x)
    out["threshold_int"] = lib.threshold(lib.tensor([1, 2, 3]), 1, 9)
    out["selu_int"] = _err(lambda: lib.selu(lib.tensor([1, 2])))
    out["celu_int"] = _err(lambda: lib.celu(lib.tensor([1, 2])))
    out["rrelu_int"] = _err(lambda: lib.rrelu(lib.tensor([1, 2])))
    out["hardshrink_int"] = _err(lambda: lib.hardshrink(lib.tensor([1, 2])))
    for name, fn in (
        ("selu_", lambda y: lib.selu_(y)),
        ("celu_", lambda y: lib.celu_(y, 2.0)),
        ("threshold_", lambda y: lib.threshold_(y, 0.0, 5.0)),
        ("rrelu_", lambda y: lib.rrelu_(y, 0.1, 0.3)),
    ):
        out.update(_flat(name, _inplace(lib, x, fn)))
    return out


@case()
def loss_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    lp = lib.log_softmax(_r(lib, 3, 4, seed="kl1"), -1).requires_grad_(True)
    t = lib.softmax(_r(lib, 3, 4, seed="kl2"), -1)
    for r in (0, 1, 2, 5):
        out.update(
            _flat(
                f"kl{r}",
                _grads(lib, lambda x, r=r: lib.kl_div(x, t, r), lib.log_softmax(_r(lib, 3, 4, seed="kl1"), -1).requires_grad_(True)),
            )
        )
    out["kl_log_target"] = lib.kl_div(lp.detach(), t.log(), 2, log_target=True)
    out["kl_default"] = lib.kl_div(lp.detach(), t)  # an omitted reduction reduces nothing in PyTorch's binding
    out["kl_str_reduction"] = _err(lambda: lib.kl_div(lp, t, "mean"))  # type: ignore[arg-type]
    out["kl_bool_reduction"] = _err(lambda: lib.kl_div(lp, t, True))
    z, y = _r(lib, 3, 4, seed="bce", grad=True), _r(lib, 3, 4, seed="bcet", kind="unit")
    w, pw = _r(lib, 4, seed="bcew", kind="pos"), _r(lib, 4, seed="bcep", kind="pos")
    out.update(_flat("bce", _grads(lib, lambda z: lib.binary_cross_entropy_with_logits(z, y, w, pw, 2), z)))
    out["bce_default"] = lib.binary_cross_entropy_with_logits(z.detach(), y)
    out["bce_none"] = lib.binary_cross_entropy_with_logits(z.detach(), y, None, None, 0)
    s = lib.tensor([1.0, -1.0, 1.0, -1.0])
    h = _r(lib, 4, seed="hinge", grad=True)
    out.update(_flat("hinge", _grads(lib, lambda h: lib.hinge_embedding_loss(h, s, 0.5, 0), h)))
    out["hinge_mean"] = lib.hinge_embedding_loss(h.detach(), s)
    m1, m2 = _r(lib, 4, seed="mr1", grad=True), _r(lib, 4, seed="mr2", grad=True)
    out.update(_flat("ranking", _grads(lib, lambda a, b: lib.margin_ranking_loss(a, b, s, 0.1, 0), m1, m2)))
    a, p, n = _r(lib, 3, 5, seed="ta", grad=True), _r(lib, 3, 5, seed="tp"), _r(lib, 3, 5, seed="tn")
    out.update(_flat("triplet", _grads(lib, lambda a: lib.triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6, True, 0), a)))
    out["triplet_default"] = lib.triplet_margin_loss(a.detach(), p, n)
    out["ranking_default"] = lib.margin_ranking_loss(m1.detach(), m2.detach(), s)
    li, tg = _r(lib, 6, seed="pl", grad=True), lib.tensor([0.0, 1.0, 2.0, 3.0, 1.0, 0.0])
    out.update(_flat("poisson", _grads(lib, lambda x: lib.poisson_nll_loss(x, tg, True, True, 1e-8, 0), li)))
    out["poisson_rate"] = lib.poisson_nll_loss(li.detach().exp(), tg, False, False, 1e-8, 1)
    out["poisson_missing"] = _err(lambda: lib.poisson_nll_loss(li, tg, True, False))  # type: ignore[call-arg]
    c1, c2 = _r(lib, 4, 3, seed="ce1", grad=True), _r(lib, 4, 3, seed="ce2")
    out.update(_flat("cos_emb", _grads(lib, lambda x: lib.cosine_embedding_loss(x, c2, s, 0.2, 0), c1)))
    out["cos_emb_default"] = lib.cosine_embedding_loss(c1.detach(), c2, s)
    logp = lib.log_softmax(_r(lib, 6, 2, 4, seed="ctc"), -1).requires_grad_(True)
    targets = lib.tensor([[1, 2, 2], [3, 1, 0]])
    out.update(_flat("ctc", _grads(lib, lambda x: lib.ctc_loss(x, targets, [6, 5], [3, 2], 0, 0), logp)))
    out["ctc_default"] = lib.ctc_loss(logp.detach(), targets, lib.tensor([6, 5]), lib.tensor([3, 2]))
    out["ctc_mean"] = lib.ctc_loss(logp.detach(), targets, lib.tensor([6, 5]), lib.tensor([3, 2]), 0, 1)
    out["ctc_sum"] = lib.ctc_loss(logp.detach(), targets, [6, 5], [3, 2], 0, 2)
    return out


@case()
def pool_aliases(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x = _r(lib, 2, 3, 9, seed="pool1", grad=True)
    out.update(_flat("max1", _grads(lib, lambda x: lib.max_pool1d(x, 3), x)))
    out.update(_flat("avg1", _grads(lib, lambda x: lib.avg_pool1d(x, 3, 2, 1, True, False), _r(lib, 2, 3, 9, seed="pool1", grad=True))))
    out["max1_stride"] = lib.max_pool1d(x.detach(), 2, 1, 1, 2, True)
    out["avg1_default"] = lib.avg_pool1d(x.detach(), 2)
    x2 = _r(lib, 1, 2, 6, 6, seed="pool2")
    out["max2"] = lib.max_pool2d(x2, 2)
    out["max2_pad"] = lib.max_pool2d(x2, (3, 2), (1, 2), 1)
    out["max3"] = lib.max_pool3d(_r(lib, 1, 1, 4, 4, 4, seed="pool3"), 2)
    out["adaptive_avg"] = lib.adaptive_avg_pool1d(x.detach(), 4)
    r = lib.adaptive_max_pool1d(x.detach(), 4)
    out["adaptive_max"] = list(r)
    out["adaptive_max_type"] = type(r).__name__
    out["bad_kernel"] = _err(lambda: lib.max_pool1d(x.detach(), 20))
    return out


# -- in-place function forms ------------------------------------------------------------------

_UNARY_INPLACE = [
    "abs_", "acos_", "arccos_", "asin_", "arcsin_", "asinh_", "arcsinh_", "atan_", "arctan_", "atanh_", "arctanh_",
    "ceil_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_",
    "log10_", "log1p_", "log2_", "log_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "rsqrt_",
    "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "zero_",
]  # fmt: skip


@case()
def unary_inplace_functions(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x = lib.tensor([0.05, 0.3, -0.45, 0.8, -0.95, 0.0])
    for name in _UNARY_INPLACE:
        out.update(_flat(name, _inplace(lib, x, getattr(lib, name))))
    for name in ("acosh_", "arccosh_"):
        out.update(_flat(name, _inplace(lib, x.abs() + 1, getattr(lib, name))))
    out["int_sqrt_"] = _err(lambda: lib.sqrt_(lib.tensor([4, 9])))
    out["not_tensor"] = _err(lambda: lib.exp_(1.0))
    return out


@case()
def other_inplace_functions(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x = lib.tensor([-1.26, 0.5, 2.5, NAN, INF, 0.35])
    out.update(_flat("round_", _inplace(lib, x, lambda y: lib.round_(y))))
    out.update(_flat("round_dec", _inplace(lib, x, lambda y: lib.round_(y, decimals=1))))
    out.update(_flat("clamp_", _inplace(lib, x, lambda y: lib.clamp_(y, min=-1.0, max=1.0))))
    out.update(_flat("clamp_min_only", _inplace(lib, x, lambda y: lib.clamp_(y, 0.4))))
    out.update(_flat("clip_", _inplace(lib, x, lambda y: lib.clip_(y, None, 0.0))))
    out.update(_flat("clamp_min_", _inplace(lib, x, lambda y: lib.clamp_min_(y, 0.4))))
    out.update(_flat("clamp_max_", _inplace(lib, x, lambda y: lib.clamp_max_(y, lib.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])))))
    out["clamp_none"] = _err(lambda: lib.clamp_(x.clone()))
    out.update(_flat("nan_to_num_", _inplace(lib, x, lambda y: lib.nan_to_num_(y, nan=9.0, posinf=8.0))))
    out.update(_flat("xlogy_", _inplace(lib, x.abs(), lambda y: lib.xlogy_(y, 2.0))))
    out.update(_flat("logit_", _inplace(lib, lib.tensor([0.2, 0.5, 0.99]), lambda y: lib.logit_(y, 0.1))))
    out.update(_flat("fill_", _inplace(lib, x, lambda y: lib.fill_(y, 3))))
    out.update(_flat("fill_t", _inplace(lib, x, lambda y: lib.fill_(y, lib.tensor(-2.5)))))
    out["fill_1d"] = _err(lambda: lib.fill_(x.clone(), lib.tensor([1.0])))
    out.update(_flat("zero_", _inplace(lib, x, lambda y: lib.zero_(y))))
    v = lib.tensor([1.0, 2.0])
    out.update(
        _flat(
            "addmv_",
            _inplace(lib, v, lambda y: lib.addmv_(y, lib.tensor([[1.0, 2.0], [3.0, 4.0]]), lib.tensor([1.0, -1.0]), beta=2, alpha=0.5)),
        )
    )
    d = _r(lib, 3, seed="det", grad=True) * 2
    r = lib.detach_(d)
    out.update({"detach_same": r is d, "detach_requires_grad": d.requires_grad, "detach_is_leaf": d.is_leaf})
    i = lib.tensor([12, -18, 7])
    out.update(_flat("gcd_", _inplace(lib, i, lambda y: lib.gcd_(y, lib.tensor([18, 12, 0])))))
    out.update(_flat("lcm_", _inplace(lib, i, lambda y: lib.lcm_(y, lib.tensor([18, 12, 0])))))
    out.update(_flat("ldexp_", _inplace(lib, lib.tensor([1.0, -3.0]), lambda y: lib.ldexp_(y, lib.tensor([3, -2])))))
    out["ldexp_int"] = _err(lambda: lib.ldexp_(lib.tensor([1, 2]), lib.tensor([1, 1])))
    out.update(
        _flat("index_put_", _inplace(lib, lib.zeros(3, 2), lambda y: lib.index_put_(y, (lib.tensor([0, 2]),), lib.tensor([1.0, 2.0]))))
    )
    return out


@case()
def fill_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, seed="fill", grad=True)
    v = lib.tensor(1.5, requires_grad=True)
    out = _flat("t", _grads(lib, lambda x, v: lib.fill(x, v), x, v))
    x2 = _r(lib, 2, 3, seed="fill", grad=True)
    out.update(_flat("n", _grads(lib, lambda x: lib.fill(x, -4), x2)))
    out.update(
        {
            "int_float": lib.fill(lib.tensor([1, 2]), 2.7),
            "int_tensor": lib.fill(lib.tensor([1, 2]), lib.tensor(3.9)),
            "bool": lib.fill(lib.tensor([True, False]), 0),
            "zero_d": lib.fill(lib.tensor(1.0), INF),
            "empty": lib.fill(lib.zeros(0, 2), 1.0),
            "f64": lib.fill(lib.zeros(2, dtype=lib.float64), 0.1),
            "one_d_value": _err(lambda: lib.fill(lib.zeros(2), lib.tensor([1.0]))),
            "not_tensor": _err(lambda: lib.fill([1.0], 2.0)),
        }
    )
    return out


# -- small compositions --------------------------------------------------------------------


@case()
def tile(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, seed="tile", grad=True)
    out = _flat("grad", _grads(lib, lambda x: lib.tile(x, (2, 1, 2)), x))
    x = x.detach()
    out.update(
        {
            "short_dims": lib.tile(x, (2,)),
            "same": lib.tile(x, [2, 3]),
            "empty_dims": lib.tile(x, ()),
            "zero_d": lib.tile(lib.tensor(5), ()),
            "zero_d_dims": lib.tile(lib.tensor(5), (3,)),
            "zero_rep": lib.tile(x, (0, 2)),
            "empty": lib.tile(lib.zeros(0, 2), (2, 2)),
            "method": x.tile(2, 1),
            "method_tuple": x.tile((1, 2)),
            "method_int": lib.tensor([1, 2]).tile(2),
            "int_dims": _err(lambda: lib.tile(x, 2)),
            "negative": _err(lambda: lib.tile(x, (-1,))),
            "bool": lib.tile(lib.tensor([True, False]), (2,)),
        }
    )
    return out


@case()
def ravel_clone_detach(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, seed="rcd", grad=True)
    out = _flat("ravel", _grads(lib, lambda x: lib.ravel(x.t()), x))
    x2 = _r(lib, 2, 3, seed="rcd", grad=True)
    out.update(_flat("clone", _grads(lib, lambda x: lib.clone(x) * 2, x2)))
    d = lib.detach(x2)
    out.update(
        {
            "ravel_0d": lib.ravel(lib.tensor(3)),
            "clone_requires_grad": lib.clone(x2).requires_grad,
            "detach": d,
            "detach_requires_grad": d.requires_grad,
            "clone_not_tensor": _err(lambda: lib.clone(3)),
        }
    )
    return out


@case()
def rsub(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 3, 4, seed="rs1", grad=True), _r(lib, 4, seed="rs2", grad=True)
    out = _flat("grad", _grads(lib, lambda a, b: lib.rsub(a, b, alpha=2.5), a, b))
    i = lib.tensor([1, 2, 3])
    out.update(
        {
            "scalar": lib.rsub(a.detach(), 5),
            "int_scalar": lib.rsub(i, 5),
            "int_float_scalar": lib.rsub(i, 2.5),
            "int_alpha": lib.rsub(i, lib.tensor([5, 5, 5]), alpha=2),
            "uint8_scalar": lib.rsub(lib.tensor([1, 2], dtype=lib.uint8), 1),
            "int_float_alpha": _err(lambda: lib.rsub(i, 5, alpha=2.5)),
            "bool": _err(lambda: lib.rsub(lib.tensor([True]), lib.tensor([True]))),
            "bool_scalar": _err(lambda: lib.rsub(lib.tensor([True]), 5)),
            "scalar_first": _err(lambda: lib.rsub(3, i)),
            "bad_shape": _err(lambda: lib.rsub(lib.ones(2), lib.ones(3))),
            "empty": lib.rsub(lib.zeros(0), 1.0),
        }
    )
    return out


@case()
def scalar_tensor(lib: Any) -> Dict[str, Any]:
    return {
        "int": lib.scalar_tensor(3),
        "bool": lib.scalar_tensor(True),
        "float": lib.scalar_tensor(-2.5),
        "dtype": lib.scalar_tensor(3, dtype=lib.int64),
        "f64": lib.scalar_tensor(0.1, dtype=lib.float64),
        "from_tensor": lib.scalar_tensor(lib.tensor(7)),
        "inf": lib.scalar_tensor(INF),
        "grad": lib.scalar_tensor(1.0, requires_grad=True).requires_grad,
        "str": _err(lambda: lib.scalar_tensor("a")),
    }


@case()
def range_(lib: Any) -> Dict[str, Any]:
    return {
        "ints": lib.range(1, 4),
        "step": lib.range(0, 1, 0.3),
        "tenths": lib.range(0, 1, 0.1),
        "tenths_f64": lib.range(0, 1, 0.1, dtype=lib.float64),
        "negative": lib.range(3, -2, -1.5),
        "int64": lib.range(1, 4, dtype=lib.int64),
        "int_trunc_step": lib.range(0.0, 5, 1.5, dtype=lib.int64),
        "single": lib.range(2, 2),
        "grad": lib.range(0, 2, requires_grad=True).requires_grad,
        "zero_step": _err(lambda: lib.range(1, 1, 0)),
        "bad_sign": _err(lambda: lib.range(1, 0)),
        "bad_sign_neg": _err(lambda: lib.range(0, 5, -1)),
        "inf": _err(lambda: lib.range(0, INF)),
        "nan": _err(lambda: lib.range(0, NAN)),
        "missing_end": _err(lambda: lib.range(5)),  # type: ignore[call-arg]
        "str": _err(lambda: lib.range(0, "a")),
    }


@case()
def logspace(lib: Any) -> Dict[str, Any]:
    return {
        "default": lib.logspace(0, 2, 3),
        "fractional": lib.logspace(-1.5, 2.25, 7),
        "base2": lib.logspace(2, 0, 4, base=2),
        "f64": lib.logspace(0.1, 0.9, 9, dtype=lib.float64),
        "int": lib.logspace(0, 2, 3, dtype=lib.int64),
        "int_base": lib.logspace(0, 1, 5, base=2.5, dtype=lib.int32),
        "one": lib.logspace(1.5, 9, 1),
        "zero": lib.logspace(0, 2, 0),
        "tensor_ends": lib.logspace(lib.tensor(0.0), lib.tensor(2.0), 3),
        "negative_base": lib.logspace(0, 2, 3, base=-2.0),
        "grad": lib.logspace(0, 2, 3, requires_grad=True).requires_grad,
        "negative_steps": _err(lambda: lib.logspace(0, 2, -1)),
        "float_steps": _err(lambda: lib.logspace(0, 2, 2.5)),
        "one_d_ends": _err(lambda: lib.logspace(lib.tensor([0.0]), 1, 5)),
    }


def _dtypes(lib: Any) -> List[Any]:
    return [lib.bool, lib.uint8, lib.int16, lib.int32, lib.int64, lib.float16, lib.bfloat16, lib.float32, lib.float64]


@case()
def promote_types(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    dts = _dtypes(lib) + [lib.complex64, lib.complex128]
    for a in dts:
        for b in dts:
            out[f"{a}|{b}".replace("torch.", "").replace("candle_py.", "")] = lib.promote_types(a, b)
    for b in (lib.int64, lib.bool, lib.uint8, lib.float32, lib.float16, lib.float64):
        out[f"uint32|{b}".replace("torch.", "").replace("candle_py.", "")] = _try(lambda b=b: lib.promote_types(lib.uint32, b))
    out["not_dtype"] = _err(lambda: lib.promote_types(lib.float32, "a"))
    return out


@case()
def result_type(lib: Any) -> Dict[str, Any]:
    t = lib.tensor
    i, u, f16, f, d = t([1, 2]), t([1, 2], dtype=lib.uint8), t([1.0], dtype=lib.float16), t([1.0]), t([1.0], dtype=lib.float64)
    b = t([True])
    return {
        "int_float": lib.result_type(i, 2.5),
        "int_0d_float": lib.result_type(i, t(2.5)),
        "uint8_int": lib.result_type(u, -1),
        "uint8_0d_int64": lib.result_type(u, t(5)),
        "uint8_int16": lib.result_type(u, t([1], dtype=lib.int16)),
        "scalars": lib.result_type(2, 2.5),
        "bool_int": lib.result_type(True, 2),
        "bool_tensor_int": lib.result_type(b, 2),
        "bool_bool": lib.result_type(b, False),
        "half_0d_double": lib.result_type(f16, t(1.0, dtype=lib.float64)),
        "half_double": lib.result_type(f16, d),
        "float_complex": lib.result_type(f, 1j),
        "double_complex": lib.result_type(d, 1j),
        "int_complex": lib.result_type(i, 1j),
        "0d_0d": lib.result_type(t(1), t(1.0, dtype=lib.float64)),
        "0d_scalar": lib.result_type(t(1, dtype=lib.int32), 7),
        "0d_float_scalar": lib.result_type(t(1, dtype=lib.int32), 7.5),
        "f32_double_scalar": lib.result_type(f, 1e300),
        "bad": _err(lambda: lib.result_type(i, "a")),
    }


@case()
def can_cast(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    dts = _dtypes(lib) + [lib.complex64]
    for a in dts:
        for b in dts:
            out[f"{a}|{b}".replace("torch.", "").replace("candle_py.", "")] = lib.can_cast(a, b)
    out["not_dtype"] = _err(lambda: lib.can_cast(lib.float32, 3))
    return out


@case()
def isposinf_isneginf_isreal(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[NAN, INF], [-INF, 0.0], [-0.0, 1e38]])
    return {
        "pos": lib.isposinf(x),
        "neg": lib.isneginf(x),
        "pos_method": x.isposinf(),
        "neg_method": x.isneginf(),
        "f64": lib.isposinf(x.double()),
        "f16": lib.isneginf(x.half()),
        "int": lib.isposinf(lib.tensor([1, 2])),
        "bool": lib.isneginf(lib.tensor([True])),
        "empty": lib.isposinf(lib.zeros(0, 2)),
        "zero_d": lib.isposinf(lib.tensor(INF)),
        "real": lib.isreal(x),
        "real_method": x.isreal(),
        "real_int": lib.isreal(lib.tensor([1, 2])),
        "real_bool": lib.isreal(lib.tensor([True])),
        "real_0d": lib.isreal(lib.tensor(1.0)),
        "real_complex": lib.isreal(lib.complex(lib.tensor([1.0, 2.0]), lib.tensor([0.0, 1.0]))),
        "not_tensor": _err(lambda: lib.isposinf(1.0)),
    }


@case()
def fmax_fmin(lib: Any) -> Dict[str, Any]:
    sp = [NAN, INF, -INF, 0.0, -0.0, 1.5, -2.5, 1.5]
    pa = [a for a in sp for _ in sp]
    pb = [b for _ in sp for b in sp]
    out: Dict[str, Any] = {}
    for name in ("fmax", "fmin"):
        fn = getattr(lib, name)
        out.update(_flat(name, _grads(lib, fn, _leaf(lib, pa), _leaf(lib, pb))))
        out.update(_flat(name + "_bc", _grads(lib, fn, _r(lib, 3, 4, seed=name + "a", grad=True), _r(lib, 4, seed=name + "b", grad=True))))
        out[name + "_method"] = getattr(lib.tensor([1.0, NAN]), name)(lib.tensor([NAN, NAN]))
        out[name + "_int"] = fn(lib.tensor([1, -5, 3]), lib.tensor([2, -7, 3]))
        out[name + "_int_float"] = fn(lib.tensor([1, 4]), lib.tensor([2.5, NAN]))
        out[name + "_bool"] = fn(lib.tensor([True, False, False]), lib.tensor([False, True, False]))
        out[name + "_f64"] = fn(lib.tensor([1.0, NAN], dtype=lib.float64), lib.tensor([NAN, 2.0]))
        out[name + "_empty"] = fn(lib.zeros(0), lib.zeros(0))
        out[name + "_0d"] = fn(lib.tensor(NAN), lib.tensor([1.0, 2.0]))
        out[name + "_scalar"] = _err(lambda fn=fn: fn(lib.tensor([1.0]), 2.0))
        out[name + "_bad_shape"] = _err(lambda fn=fn: fn(lib.ones(2), lib.ones(3)))
    return out


@case()
def frexp(lib: Any) -> Dict[str, Any]:
    vals = [0.0, -0.0, 1.0, -3.5, 1e-40, -1e-45, 3e38, INF, -INF, NAN, 6.0, 0.1, 2.0**-126, 1.17e-38]
    x = _leaf(lib, vals)
    m, e = lib.frexp(x)
    _back(lib, m)
    r = lib.frexp(lib.tensor([5.0]))
    d = lib.frexp(lib.tensor([0.0, 1e-310, 5e-324, 1e300, -7.25, INF], dtype=lib.float64))
    h = lib.frexp(lib.tensor([1.5, 6e-8, 65504.0, -0.0, 1e-5], dtype=lib.float16))
    b = lib.frexp(lib.tensor([1.5, 1e-39, -3e38], dtype=lib.bfloat16))
    return {
        "mantissa": m,
        "exponent": e,
        "grad": _g(lib, x),
        "fields": [r.mantissa, r.exponent],
        "type": type(r).__name__,
        "method": list(lib.tensor([[3.0, -0.25]]).frexp()),
        "f64": list(d),
        "f16": list(h),
        "bf16": list(b),
        "empty": list(lib.frexp(lib.zeros(0, 2))),
        "zero_d": list(lib.frexp(lib.tensor(12.0))),
        "int": _err(lambda: lib.frexp(lib.tensor([1, 2]))),
    }


@case()
def ldexp(lib: Any) -> Dict[str, Any]:
    x, e = _r(lib, 3, 4, seed="ldx", grad=True), lib.tensor([1.0, -2.0, 0.5, 3.0], requires_grad=True)
    out = _flat("grad", _grads(lib, lib.ldexp, x, e))
    out.update(
        {
            "int_int": lib.ldexp(lib.tensor([1, 2]), lib.tensor([1, 2])),
            "float_int": lib.ldexp(lib.tensor([1.0, 2.0]), lib.tensor([1, -2])),
            "f64": lib.ldexp(lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([1, 2])),
            "f16": lib.ldexp(lib.tensor([1.0, 2.0], dtype=lib.float16), lib.tensor([1, 2])),
            "f16_big_exponent": lib.ldexp(lib.tensor([1e-3, 2.0], dtype=lib.float16), lib.tensor([20, -30])),
            "f16_f32": lib.ldexp(lib.tensor([1.0, 2.0], dtype=lib.float16), lib.tensor([1.0, 2.0])),
            "int_int32": lib.ldexp(lib.tensor([1, 2]), lib.tensor([1, 2], dtype=lib.int32)),
            "f32_f64": lib.ldexp(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0], dtype=lib.float64)),
            "int_f16": lib.ldexp(lib.tensor([1, 2]), lib.tensor([1.0, 2.0], dtype=lib.float16)),
            "f64_0d": lib.ldexp(lib.tensor(1.0, dtype=lib.float64), lib.tensor([1, 2])),
            "special": lib.ldexp(lib.tensor([NAN, INF, 0.0, 1.0, -0.0, -INF]), lib.tensor([1, 1, 200, 200, -300, -5])),
            "exact": lib.ldexp(lib.tensor([1e-40, 3.0, 1e-30, 1.5, 0.75, -1.0]), lib.tensor([160, -160, 120, -149, -149, 2**40])),
            "exact_f64": lib.ldexp(lib.tensor([1e-310, 3.0], dtype=lib.float64), lib.tensor([1100, -1075])),
            "exact_f16": lib.ldexp(lib.tensor([6e-8, 3.0, 1e-3], dtype=lib.float16), lib.tensor([30, -25, 20])),
            "float_exponent_nan": lib.ldexp(lib.tensor([0.0, 1e-30]), lib.tensor([200.0, 120.0])),
            "method": lib.tensor([3.0]).ldexp(lib.tensor([4])),
            "scalar": _err(lambda: lib.ldexp(lib.tensor([1.0]), 2)),
            "bad_shape": _err(lambda: lib.ldexp(lib.ones(2), lib.ones(3))),
        }
    )
    y = lib.tensor([1.0, 2.0])
    out["inplace_same"] = y.ldexp_(lib.tensor([2, 3])) is y
    out["inplace"] = y
    out["inplace_int"] = _err(lambda: lib.tensor([1, 2]).ldexp_(lib.tensor([1, 2])))
    return out


@case(0.0)
def nextafter(lib: Any) -> Dict[str, Any]:
    a = lib.tensor([1.0, 0.0, -0.0, INF, NAN, 1.0, -1.0, -INF, 3.4028234663852886e38, 1e-45, -1e-45, 2.0, 0.0])
    b = lib.tensor([2.0, -1.0, 1.0, 0.0, 0.0, 1.0, -2.0, 0.0, INF, 0.0, 0.0, NAN, -0.0])
    return {
        "f32": lib.nextafter(a, b),
        "f32_bits": lib.nextafter(a, b).view(lib.int32),
        "f64": lib.nextafter(a.double(), b.double()).view(lib.int64),
        "f16": lib.nextafter(
            lib.tensor([1.0, 0.0, -2.0, 65504.0], dtype=lib.float16), lib.tensor([2.0, -1.0, 0.0, INF], dtype=lib.float16)
        ),
        "bf16": lib.nextafter(lib.tensor([1.0, -1.0], dtype=lib.bfloat16), lib.tensor([2.0, 0.0], dtype=lib.bfloat16)),
        "promoted": lib.nextafter(lib.tensor([1.0]), lib.tensor([2.0], dtype=lib.float64)),
        "broadcast": lib.nextafter(lib.tensor([[1.0], [2.0]]), lib.tensor([0.0, 5.0])),
        "method": lib.tensor([1.0]).nextafter(lib.tensor([0.0])),
        "empty": lib.nextafter(lib.zeros(0), lib.zeros(0)),
        "int": _err(lambda: lib.nextafter(lib.tensor([1]), lib.tensor([2]))),
        "scalar": _err(lambda: lib.nextafter(lib.tensor([1.0]), 2.0)),
    }


@case()
def gcd_lcm(lib: Any) -> Dict[str, Any]:
    a = lib.tensor([12, -18, 0, 0, 7, 1071, 46368, -75025, 2**40, 9])
    b = lib.tensor([18, 12, 5, 0, -14, 462, 28657, 46368, 2**20, -9])
    out: Dict[str, Any] = {}
    for name in ("gcd", "lcm"):
        fn = getattr(lib, name)
        out.update(
            {
                name: fn(a, b),
                name + "_int32": fn(lib.tensor([12], dtype=lib.int32), lib.tensor([18])),
                name + "_uint8": fn(lib.tensor([12, 200], dtype=lib.uint8), lib.tensor([18, 150], dtype=lib.uint8)),
                name + "_int16": fn(lib.tensor([12, -300], dtype=lib.int16), lib.tensor([18, 420], dtype=lib.int16)),
                name + "_bc": fn(lib.tensor([[4], [6]]), lib.tensor([6, 9, 10])),
                name + "_method": lib.tensor([4, 6]).__getattribute__(name)(lib.tensor([6, 4])),
                name + "_empty": fn(lib.zeros(0, dtype=lib.int64), lib.zeros(0, dtype=lib.int64)),
                name + "_0d": fn(lib.tensor(21), lib.tensor(6)),
                name + "_float": _err(lambda fn=fn: fn(lib.tensor([1.0]), lib.tensor([2.0]))),
                name + "_bool": _err(lambda fn=fn: fn(lib.tensor([True]), lib.tensor([True]))),
                name + "_scalar": _err(lambda fn=fn: fn(lib.tensor([12]), 4)),
            }
        )
        y = lib.tensor([12, 10])
        out[name + "_inplace_same"] = getattr(y, name + "_")(lib.tensor([8, 4])) is y
        out[name + "_inplace"] = y
    return out


@case()
def diagflat(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 2, seed="dgf", grad=True)
    out = _flat("grad", _grads(lib, lambda x: lib.diagflat(x, 1), x))
    out.update(
        {
            "default": lib.diagflat(lib.tensor([1, 2, 3])),
            "negative": lib.diagflat(lib.tensor([[1.0, 2.0]]), -2),
            "method": lib.tensor([1.0, 2.0]).diagflat(1),
            "zero_d": lib.diagflat(lib.tensor(5.0)),
            "empty": lib.diagflat(lib.zeros(0)),
            "empty_offset": lib.diagflat(lib.zeros(0), 1),
            "bool": lib.diagflat(lib.tensor([True, False])),
        }
    )
    return out


@case()
def cross(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 4, 3, seed="cr1", grad=True), _r(lib, 1, 3, seed="cr2", grad=True)
    out = _flat("grad", _grads(lib, lambda a, b: lib.cross(a, b, dim=1), a, b))
    a2, b2 = _r(lib, 3, 2, seed="cr3"), _r(lib, 3, 2, seed="cr4")
    out.update(
        {
            "default_dim": lib.cross(a2, b2),
            "neg_dim": lib.cross(a.detach(), b.detach(), -1),
            "method": a2.cross(b2, 0),
            "int": lib.cross(lib.tensor([1, 2, 3]), lib.tensor([4, 5, 6])),
            "f64": lib.cross(lib.tensor([1.0, 0.0, 0.0], dtype=lib.float64), lib.tensor([0.0, 1.0, 0.0], dtype=lib.float64)),
            "special": lib.cross(lib.tensor([INF, 1.0, 0.0]), lib.tensor([1.0, NAN, 2.0])),
            "empty": lib.cross(lib.zeros(0, 3), lib.zeros(0, 3), 1),
            "no_dim3": _err(lambda: lib.cross(lib.ones(2), lib.ones(2))),
            "ndim_mismatch": _err(lambda: lib.cross(lib.ones(1, 3), lib.ones(3))),
            "len_mismatch": _err(lambda: lib.cross(lib.ones(1, 3), lib.ones(1, 2), dim=1)),
            "dtype_mismatch": _err(lambda: lib.cross(lib.ones(3), lib.ones(3, dtype=lib.int64))),
            "bool": _err(lambda: lib.cross(lib.ones(3, dtype=lib.bool), lib.ones(3, dtype=lib.bool))),
            "bad_dim": _err(lambda: lib.cross(lib.ones(3), lib.ones(3), 1)),
        }
    )
    return out


@case()
def cummax_cummin(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    seq = [1.0, 3.0, 2.0, 3.0, NAN, 5.0, NAN, 1.0, -INF, 0.0, -0.0]
    for name in ("cummax", "cummin"):
        fn = getattr(lib, name)
        x = _leaf(lib, seq)
        r = fn(x, 0)
        _back(lib, r.values)
        out.update({name + "_values": r.values, name + "_indices": r.indices, name + "_grad": _g(lib, x)})
        y = _r(lib, 3, 17, seed=name, grad=True)
        r2 = fn(y, 1)
        _back(lib, r2.values)
        out.update({name + "_2d": list(r2), name + "_2d_grad": _g(lib, y)})
        z = _r(lib, 5, 3, 2, seed=name + "z")
        out[name + "_dim0"] = list(fn(z, 0))
        out[name + "_neg_dim"] = list(z.__getattribute__(name)(-2))
        out[name + "_ties"] = list(fn(lib.tensor([2, 2, 1, 2, 3, 3, 0]), 0))
        out[name + "_int"] = list(fn(lib.tensor([[5, -1, 7, 7], [0, 0, -3, 9]]), 1))
        out[name + "_bool"] = list(fn(lib.tensor([False, True, False, True]), 0))
        out[name + "_f64"] = list(fn(lib.tensor([1.0, NAN, 2.0], dtype=lib.float64), 0))
        out[name + "_zero_d"] = list(fn(lib.tensor(2.0), 0))
        out[name + "_empty"] = list(fn(lib.zeros(0), 0))
        out[name + "_empty_dim"] = list(fn(lib.zeros(2, 0), 1))
        out[name + "_long"] = list(fn(lib.tensor([float((i * 37) % 101) for i in range(300)]), 0))
        out[name + "_type"] = type(r).__name__
        out[name + "_bad_dim"] = _err(lambda fn=fn: fn(lib.ones(3), 1))
    return out


@case()
def unravel_index(lib: Any) -> Dict[str, Any]:
    return {
        "basic": list(lib.unravel_index(lib.tensor([5, 7, -1, 8, 100]), (2, 4))),
        "zero_d": list(lib.unravel_index(lib.tensor(5), (2, 4))),
        "int32": list(lib.unravel_index(lib.tensor([5], dtype=lib.int32), 8)),
        "3d": list(lib.unravel_index(lib.tensor([[0, 23], [13, 7]]), (2, 3, 4))),
        "size": list(lib.unravel_index(lib.tensor([3]), lib.Size([2, 2]))),
        "empty_shape": list(lib.unravel_index(lib.tensor([5]), ())),
        "empty_indices": list(lib.unravel_index(lib.zeros(0, dtype=lib.int64), (2, 0))),
        "float": _err(lambda: lib.unravel_index(lib.tensor([5.0]), (2, 4))),
        "bool": _err(lambda: lib.unravel_index(lib.tensor([True]), (2, 4))),
        "negative_shape": _err(lambda: lib.unravel_index(lib.tensor([5]), (2, -4))),
        "zero_shape": _err(lambda: lib.unravel_index(lib.tensor([5]), (2, 0))),
        "float_shape": _err(lambda: lib.unravel_index(lib.tensor([5]), (2.5, 4))),
        "bad_shape": _err(lambda: lib.unravel_index(lib.tensor([5]), None)),
    }


@case()
def histc(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 200, seed="hist")
    return {
        "default": lib.histc(x),
        "bins": lib.histc(x, bins=7, min=-1.0, max=1.5),
        "edges": lib.histc(lib.tensor([0.0, 1.0, 2.0, 3.0, 0.75, 3.0001, -0.0001]), bins=4, min=0, max=3),
        "inf_outside": lib.histc(lib.tensor([1.0, 2.0, INF, -INF]), bins=4, min=0, max=3),
        "nan_outside": lib.histc(lib.tensor([1.0, 2.0, NAN]), bins=4, min=0, max=3),
        "same": lib.histc(lib.tensor([1.0, 1.0]), bins=4),
        "empty": lib.histc(lib.zeros(0), bins=4),
        "2d": lib.histc(lib.tensor([[1.0, 2.0], [3.0, 4.0]]), bins=4),
        "f64": lib.histc(x.double(), bins=5),
        "f16": lib.histc(lib.tensor([1.0, 2.0, 2.5], dtype=lib.float16), bins=4),
        "method": x.histc(3, -2, 2),
        "grad_free": lib.histc(_r(lib, 5, seed="hg", grad=True), bins=3).requires_grad,
        "nan_range": _err(lambda: lib.histc(lib.tensor([1.0, NAN]), bins=4)),
        "inf_range": _err(lambda: lib.histc(lib.tensor([1.0]), bins=4, min=0, max=INF)),
        "min_gt_max": _err(lambda: lib.histc(lib.tensor([1.0]), bins=4, min=3, max=1)),
        "zero_bins": _err(lambda: lib.histc(lib.tensor([1.0]), bins=0)),
        "int": _err(lambda: lib.histc(lib.tensor([1, 2]), bins=4)),
    }


@case()
def searchsorted_bucketize(lib: Any) -> Dict[str, Any]:
    seq = lib.tensor([1.0, 2.0, 2.0, 3.0, 5.0, 8.0])
    v = lib.tensor([[0.0, 1.0, 2.0, 2.5], [3.0, 8.0, 9.0, -INF]])
    s2 = lib.tensor([[1, 3, 5, 7], [2, 4, 6, 8], [0, 0, 0, 0]])
    v2 = lib.tensor([[3, 6, 0], [1, 9, 4], [0, 1, -1]])
    unsorted, sorter = lib.tensor([3.0, 1.0, 2.0, 5.0]), lib.tensor([1, 2, 0, 3])
    return {
        "left": lib.searchsorted(seq, v),
        "right": lib.searchsorted(seq, v, right=True),
        "side_right": lib.searchsorted(seq, v, side="right"),
        "side_left_right_false": lib.searchsorted(seq, v, side="left", right=False),
        "int32": lib.searchsorted(seq, v, out_int32=True),
        "nd": lib.searchsorted(s2, v2),
        "nd_right": lib.searchsorted(s2, v2, right=True),
        "scalar": lib.searchsorted(seq, 2),
        "scalar_float": lib.searchsorted(seq, 2.5, right=True),
        "zero_d": lib.searchsorted(seq, lib.tensor(3.0)),
        "sorter": lib.searchsorted(unsorted, lib.tensor([2.0, 0.0, 4.0, 6.0]), sorter=sorter),
        "nan": lib.searchsorted(lib.tensor([1.0, 2.0, NAN]), lib.tensor([NAN, 1.0, INF])),
        "nan_right": lib.searchsorted(lib.tensor([1.0, 2.0, NAN]), lib.tensor([NAN, 1.0, INF]), right=True),
        "mixed_dtypes": lib.searchsorted(lib.tensor([1, 2, 3]), lib.tensor([2.5, 2.0])),
        "mixed_f64": lib.searchsorted(seq, lib.tensor([2.0], dtype=lib.float64)),
        "uint8_int16": lib.searchsorted(lib.tensor([1, 2, 3], dtype=lib.uint8), lib.tensor([2], dtype=lib.int16)),
        "empty_seq": lib.searchsorted(lib.zeros(0), lib.tensor([1.0])),
        "empty_values": lib.searchsorted(seq, lib.zeros(0)),
        "long_seq": lib.searchsorted(lib.arange(1000.0), lib.tensor([-1.0, 0.0, 0.5, 499.5, 998.9, 999.0, 1e6]), right=True),
        "unsorted": lib.searchsorted(lib.tensor([5.0, 1.0, 4.0, 2.0, 3.0]), lib.tensor([1.5, 3.5])),
        "bad_side": _err(lambda: lib.searchsorted(seq, v, side="middle")),
        "opposite": _err(lambda: lib.searchsorted(seq, v, side="left", right=True)),
        "bad_lead": _err(lambda: lib.searchsorted(lib.ones(1, 3), lib.ones(3))),
        "bad_lead2": _err(lambda: lib.searchsorted(s2, lib.ones(1, 3))),
        "zero_d_seq": _err(lambda: lib.searchsorted(lib.tensor(1.0), lib.ones(3))),
        "sorter_size": _err(lambda: lib.searchsorted(unsorted, v, sorter=lib.tensor([1, 2]))),
        "sorter_dtype": _err(lambda: lib.searchsorted(unsorted, v, sorter=sorter.float())),
        "sorter_range": _err(lambda: lib.searchsorted(unsorted, v, sorter=lib.tensor([1, 2, 0, 9]))),
        "bool": _err(lambda: lib.searchsorted(lib.tensor([False, True]), lib.tensor([True]))),
        "bucketize": lib.bucketize(v, seq),
        "bucketize_right": lib.bucketize(v, seq, right=True),
        "bucketize_int32": lib.bucketize(lib.tensor([1, 3]), lib.tensor([1.0, 2.0, 3.0]), out_int32=True),
        "bucketize_scalar": lib.bucketize(2.5, seq),
        "bucketize_2d": _err(lambda: lib.bucketize(v, s2)),
        "bucketize_0d": _err(lambda: lib.bucketize(v, lib.tensor(1.0))),
    }


_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


@case()
def quantile(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    q = lib.tensor([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0])
    for mode in _MODES:
        x = _r(lib, 4, 7, seed="qt", grad=True)
        out.update(_flat(mode, _grads(lib, lambda x, mode=mode: lib.quantile(x, q, dim=1, interpolation=mode), x)))
        out[mode + "_all"] = lib.quantile(x.detach(), 0.3, interpolation=mode)
        out[mode + "_halves"] = lib.quantile(
            lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), lib.tensor([0.125, 0.375, 0.625, 0.875]), interpolation=mode
        )
    x = _r(lib, 3, 4, seed="qt2")
    out.update(
        {
            "scalar_q": lib.quantile(x, 0.4, 0),
            "q_0d": lib.quantile(x, lib.tensor(0.4), 1),
            "keepdim": lib.quantile(x, lib.tensor([0.5, 1.0]), 1, keepdim=True),
            "keepdim_all": lib.quantile(x, lib.tensor([0.5, 1.0]), keepdim=True),
            "keepdim_scalar": lib.quantile(x, 0.5, -1, True),
            "method": x.quantile(0.75, dim=0),
            "nan": lib.quantile(lib.tensor([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]]), 0.5, 1),
            "inf": lib.quantile(lib.tensor([1.0, INF, -INF, 2.0]), lib.tensor([0.0, 0.5, 0.75, 1.0])),
            "f64": lib.quantile(x.double(), lib.tensor([0.2, 0.8], dtype=lib.float64), 1),
            "zero_d": lib.quantile(lib.tensor(3.0), 0.5),
            "zero_d_keepdim": lib.quantile(lib.tensor(3.0), 0.5, 0, True),
            "empty_q": lib.quantile(x, lib.zeros(0)),
            "int_q": lib.quantile(x, 1),
            "int": _err(lambda: lib.quantile(lib.tensor([1, 2]), 0.5)),
            "f16": _err(lambda: lib.quantile(x.half(), 0.5)),
            "q_dtype": _err(lambda: lib.quantile(x, lib.tensor([0.5], dtype=lib.float64))),
            "q_range": _err(lambda: lib.quantile(x, 1.5)),
            "q_nan": _err(lambda: lib.quantile(x, NAN)),
            "q_tensor_range": _err(lambda: lib.quantile(x, lib.tensor([0.5, -0.1]))),
            "q_2d": _err(lambda: lib.quantile(x, lib.tensor([[0.5]]))),
            "empty": _err(lambda: lib.quantile(lib.zeros(0), 0.5)),
            "empty_dim": _err(lambda: lib.quantile(lib.zeros(2, 0), 0.5, 0)),
            "mode": _err(lambda: lib.quantile(x, 0.5, interpolation="foo")),
            "bad_dim": _err(lambda: lib.quantile(x, 0.5, 2)),
        }
    )
    return out


@case()
def nanquantile(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    rows = [[1.0, NAN, 3.0, 4.0, -1.0], [NAN, NAN, NAN, NAN, NAN], [2.0, NAN, NAN, NAN, NAN], [5.0, 4.0, 3.0, 2.0, 1.0]]
    q = lib.tensor([0.0, 0.3, 0.5, 0.8, 1.0])
    for mode in _MODES:
        x = _leaf(lib, rows)
        out.update(_flat(mode, _grads(lib, lambda x, mode=mode: lib.nanquantile(x, q, dim=1, interpolation=mode), x)))
        out[mode + "_all"] = lib.nanquantile(x.detach(), 0.6, interpolation=mode)
    x = lib.tensor(rows)
    out.update(
        {
            "method": x.nanquantile(0.5, dim=0, keepdim=True),
            "all_nan": lib.nanquantile(lib.tensor([NAN, NAN]), 0.5),
            "no_nan": lib.nanquantile(_r(lib, 9, seed="nq"), 0.35),
            "f64": lib.nanquantile(x.double(), 0.25, 1),
            "int": _err(lambda: lib.nanquantile(lib.tensor([1, 2]), 0.5)),
        }
    )
    return out


@case()
def nanmedian(lib: Any) -> Dict[str, Any]:
    x = _leaf(lib, [1.0, 2.0, 2.0, 3.0, NAN])
    out = _flat("all", _grads(lib, lib.nanmedian, x))
    x2 = _leaf(lib, [4.0, 1.0, NAN, 3.0])
    out.update(_flat("all2", _grads(lib, lib.nanmedian, x2)))
    # (no all-NaN row here: PyTorch's index there is whatever its nth_element leaves first)
    m = lib.tensor([[1.0, NAN, 2.0, 7.0], [NAN, NAN, 4.0, NAN], [NAN, NAN, NAN, 6.0], [5.0, -1.0, 0.5, 9.0]])
    y = m.clone().requires_grad_(True)
    r = lib.nanmedian(y, 1)
    _back(lib, r.values)
    out.update({"dim_values": r.values, "dim_indices": r.indices, "dim_grad": _g(lib, y), "dim_type": type(r).__name__})
    out.update(
        {
            "dim0": list(lib.nanmedian(m, 0)),
            "keepdim": list(lib.nanmedian(m, -1, keepdim=True)),
            "method": m.nanmedian(),
            "method_dim": list(m.nanmedian(0)),
            "all_nan": lib.nanmedian(lib.tensor([NAN, NAN])),
            "all_nan_row": lib.nanmedian(lib.tensor([[NAN, NAN, NAN], [1.0, NAN, 2.0]]), 1).values,
            "empty": lib.nanmedian(lib.zeros(0)),
            "int": lib.nanmedian(lib.tensor([1, 3, 2])),
            "int_dim": list(lib.nanmedian(lib.tensor([[1, 3, 2], [9, 7, 8]]), 1)),
            "f64": lib.nanmedian(lib.tensor([1.0, NAN, 5.0], dtype=lib.float64)),
            "zero_d": list(lib.nanmedian(lib.tensor(2.0), 0)),
            "empty_kept": list(lib.nanmedian(lib.zeros(2, 0), 0)),
            "empty_dim": _err(lambda: lib.nanmedian(lib.zeros(2, 0), 1)),
            "bool": _err(lambda: lib.nanmedian(lib.tensor([True, False]))),
            "bad_dim": _err(lambda: lib.nanmedian(m, 2)),
        }
    )
    return out


def _windows(lib: Any, dtype: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        fn = getattr(lib, name)
        for n in (0, 1, 2, 3, 5, 8, 33):
            out[f"{name}_{n}"] = fn(n, dtype=dtype)
            out[f"{name}_{n}_sym"] = fn(n, False, dtype=dtype)
    return out


@case(2e-5)
def windows(lib: Any) -> Dict[str, Any]:
    out = _windows(lib, None)
    out.update(_flat("f64", _windows(lib, lib.float64)))
    out.update(
        {
            "hamming_alpha": lib.hamming_window(10, True, 0.6),
            "hamming_alpha_beta": lib.hamming_window(10, False, 0.5, 0.3, dtype=lib.float64),
            "kaiser_beta": lib.kaiser_window(9, False, 5.0),
            "kaiser_small_beta": lib.kaiser_window(7, True, 0.5, dtype=lib.float64),
            "kaiser_big_beta": lib.kaiser_window(7, False, 30.0, dtype=lib.float64),
            "kaiser_huge_beta": lib.kaiser_window(5, False, 800.0, dtype=lib.float64),
            "requires_grad": lib.hann_window(4, requires_grad=True).requires_grad,
            "negative": _err(lambda: lib.hann_window(-1)),
            "int_dtype": _err(lambda: lib.hann_window(3, dtype=lib.int64)),
            "float_length": _err(lambda: lib.bartlett_window(3.5)),
            "kaiser_negative": _err(lambda: lib.kaiser_window(-2)),
        }
    )
    return out


@case(4e-3)
def windows_half(lib: Any) -> Dict[str, Any]:
    out = _windows(lib, lib.float16)
    out.update(_flat("bf16", {"hann": lib.hann_window(6, dtype=lib.bfloat16), "kaiser": lib.kaiser_window(6, dtype=lib.bfloat16)}))
    return out


# -- tensor properties and shapes ---------------------------------------------------------------


@case()
def tensor_queries(lib: Any) -> Dict[str, Any]:
    t = lib.tensor
    out: Dict[str, Any] = {}
    for name, x in (
        ("f32", t([1.0, 2.0])), ("f16", t([1.0], dtype=lib.float16)), ("f64", t(1.0, dtype=lib.float64)),
        ("u8", t([1, 2], dtype=lib.uint8)), ("i16", t([1], dtype=lib.int16)), ("i64", t([[1, 2]])),
        ("bool", t([True])), ("empty", lib.zeros(2, 0)), ("expanded", lib.zeros(4).expand(3, 4)), ("strided", lib.zeros(4)[::2]),
    ):  # fmt: skip
        out[name] = {
            "is_signed": x.is_signed(),
            "fn_is_signed": lib.is_signed(x),
            "nbytes": x.nbytes,
            "itemsize": x.itemsize,
            "is_cpu": x.is_cpu,
            "get_device": x.get_device(),
            "fn_get_device": lib.get_device(x),
            "is_inference": x.is_inference(),
            "fn_is_inference": lib.is_inference(x),
        }
    out.update(
        {
            "nonzero": [t([1.5]).is_nonzero(), t([0.0]).is_nonzero(), t(NAN).is_nonzero(), t(False).is_nonzero(), t([[-0.0]]).is_nonzero()],
            "fn_nonzero": lib.is_nonzero(t([3])),
            "nonzero_many": _err(lambda: t([1.0, 2.0]).is_nonzero()),
            "nonzero_empty": _err(lambda: t([]).is_nonzero()),
            "same_size": [t([1.0, 2.0]).is_same_size(t([3, 4])), t([1.0]).is_same_size(t([[1.0]])), lib.is_same_size(t(1), t(2.0))],
            "same_size_bad": _err(lambda: t([1.0]).is_same_size(3)),
            "short": t([1.7, -2.2, 30000.0]).short(),
            "short_int": t([[3, -4]]).short(),
        }
    )
    return out


@case()
def split_with_sizes(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 6, 2, seed="sws", grad=True)
    parts = lib.split_with_sizes(x, [1, 2, 3])
    _back(lib, lib.cat([parts[0] * 3, parts[2]], 0))
    y = x.detach()
    return {
        "parts": list(parts),
        "grad": _g(lib, x),
        "type": type(parts).__name__,
        "dim1": list(y.split_with_sizes([1, 1], 1)),
        "neg_dim": list(y.split_with_sizes([2, 0], -1)),
        "zero_size": list(lib.split_with_sizes(lib.tensor([1, 2, 3]), [3, 0])),
        "bad_sum": _err(lambda: y.split_with_sizes([1, 1])),
        "negative": _err(lambda: y.split_with_sizes([-1, 7])),
        "bad_dim": _err(lambda: y.split_with_sizes([6], 2)),
    }


@case()
def sum_to_size(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, seed="sts", grad=True)
    y = x.sum_to_size(3, 1)
    _back(lib, y)
    z = x.detach()
    return {
        "y": y,
        "grad": _g(lib, x),
        "tuple": z.sum_to_size((1, 3, 4)),
        "size": z.sum_to_size(lib.Size([4])),
        "all_ones": z.sum_to_size(1, 1, 1),
        "same": z.sum_to_size(2, 3, 4),
        "empty_target": z.sum_to_size(()),
        "int": lib.tensor([[1, 2], [3, 4]]).sum_to_size(2, 1),
        "bool": lib.tensor([True, False]).sum_to_size(1),
        "not_expandable": _err(lambda: z.sum_to_size(3)),
        "too_long": _err(lambda: z.sum_to_size(1, 2, 3, 4)),
        "none": _err(lambda: z.sum_to_size()),
    }


@case()
def fill_diagonal_(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, shape, wrap in (("square", (3, 3), False), ("tall", (7, 3), False), ("tall_wrap", (7, 3), True), ("wide_wrap", (3, 5), True),
                              ("tall_edge", (4, 3), True), ("cube", (2, 2, 2), False), ("empty", (0, 3), True)):  # fmt: skip
        x = lib.zeros(*shape)
        r = x.fill_diagonal_(1.5, wrap)
        out[name] = x
        out[name + "_same"] = r is x
    out["int"] = lib.zeros(3, 3, dtype=lib.int64).fill_diagonal_(1.5)
    out["bool"] = lib.zeros(2, 2, dtype=lib.bool).fill_diagonal_(1)
    out["true_value"] = lib.zeros(2, 2).fill_diagonal_(True)
    x = _r(lib, 3, 3, seed="fdg", grad=True)
    y = x * 1
    y.fill_diagonal_(0.0)
    _back(lib, y)
    out.update({"grad_y": y, "grad": _g(lib, x)})
    out["unequal"] = _err(lambda: lib.zeros(2, 2, 3).fill_diagonal_(1))
    out["one_d"] = _err(lambda: lib.zeros(3).fill_diagonal_(1))
    return out


@case()
def index_put_put(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x, v = _r(lib, 3, 4, seed="ip", grad=True), _r(lib, 2, 4, seed="ipv", grad=True)
    out.update(_flat("rows", _grads(lib, lambda x, v: lib.index_put(x, (lib.tensor([2, 0]),), v), x, v)))
    x, v = _r(lib, 3, 4, seed="ip", grad=True), _r(lib, 3, seed="ipv2", grad=True)
    out.update(_flat("acc", _grads(lib, lambda x, v: lib.index_put(x, (lib.tensor([1, 1, 2]), lib.tensor([0, 0, 3])), v, True), x, v)))
    z = lib.zeros(3, 2)
    out.update(
        {
            "pairs": lib.index_put(z, (lib.tensor([0, 2]), lib.tensor([1, 0])), lib.tensor([1.0, 2.0])),
            "broadcast": lib.index_put(z, (lib.tensor([0, 2]),), lib.tensor(5.0)),
            "mask": lib.index_put(z, (lib.tensor([True, False, True]),), lib.tensor([5.0, 6.0])),
            "mask2d": lib.index_put(z, (lib.tensor([[True, False], [False, True], [True, True]]),), lib.tensor([1.0, 2.0, 3.0, 4.0])),
            "list": lib.index_put(z, [lib.tensor([1])], lib.tensor(5.0)),
            "int32": lib.index_put(z, (lib.tensor([1], dtype=lib.int32),), lib.tensor(5.0)),
            "negative": lib.index_put(z, (lib.tensor([-1]),), lib.tensor(5.0)),
            "method": z.index_put((lib.tensor([0]),), lib.tensor([7.0, 8.0]), accumulate=True),
            "int_tensor": lib.index_put(lib.zeros(4, dtype=lib.int64), (lib.tensor([1, 1]),), lib.tensor([2, 3]), True),
            "unchanged": z,
            "dtype": _err(lambda: lib.index_put(z, (lib.tensor([0]),), lib.tensor([5]))),
            "scalar_values": _err(lambda: lib.index_put(z, (lib.tensor([0]),), 5.0)),
            "float_index": _err(lambda: lib.index_put(z, (lib.tensor([0.0]),), lib.tensor(5.0))),
            "out_of_range": _err(lambda: lib.index_put(z, (lib.tensor([5]),), lib.tensor(5.0))),
            "too_many": _err(lambda: lib.index_put(z, (lib.tensor([0]), lib.tensor([0]), lib.tensor([0])), lib.tensor(5.0))),
            "none": _err(lambda: lib.index_put(z, (None, lib.tensor([1])), lib.tensor(5.0))),
            "bad_values": _err(lambda: lib.index_put(z, (lib.tensor([0, 1]),), lib.ones(3))),
        }
    )
    w = lib.zeros(3, 2)
    out["inplace_same"] = w.index_put_((lib.tensor([1, 1]),), lib.tensor([1.0, 2.0]), True) is w
    out["inplace"] = w
    x, s = _r(lib, 2, 3, seed="put", grad=True), _r(lib, 3, seed="puts", grad=True)
    out.update(_flat("put", _grads(lib, lambda x, s: lib.put(x, lib.tensor([1, -1, 3]), s), x, s)))
    x, s = _r(lib, 2, 3, seed="put", grad=True), _r(lib, 3, seed="puts", grad=True)
    out.update(_flat("put_acc", _grads(lib, lambda x, s: x.put(lib.tensor([[1, 1], [4, 1]]), lib.cat([s, s[:1]]), accumulate=True), x, s)))
    p = lib.zeros(2, 3)
    out.update(
        {
            "put_same": p.put_(lib.tensor([0, 5]), lib.tensor([9.0, 8.0])) is p,
            "put_inplace": p,
            "put_empty": lib.put(lib.zeros(0), lib.zeros(0, dtype=lib.int64), lib.zeros(0)),
            "put_empty_target": _err(lambda: lib.put(lib.zeros(0), lib.tensor([0]), lib.tensor([1.0]))),
            "put_out_of_range": _err(lambda: lib.put(p, lib.tensor([6]), lib.tensor([9.0]))),
            "put_count": _err(lambda: lib.put(p, lib.tensor([1, 2]), lib.tensor([9.0]))),
            "put_dtype": _err(lambda: lib.put(p, lib.tensor([1]), lib.tensor([9]))),
            "put_index_dtype": _err(lambda: lib.put(p, lib.tensor([1.0]), lib.tensor([9.0]))),
        }
    )
    return out


@case()
def scatters(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    x, s = _r(lib, 3, 4, seed="ss", grad=True), _r(lib, 3, seed="sss", grad=True)
    out.update(_flat("select", _grads(lib, lambda x, s: lib.select_scatter(x, s, 1, -2), x, s)))
    x, s = _r(lib, 5, 2, seed="sl", grad=True), _r(lib, 2, 2, seed="sls", grad=True)
    out.update(_flat("slice", _grads(lib, lambda x, s: lib.slice_scatter(x, s, 0, 1, None, 3), x, s)))
    x, s = _r(lib, 2, 3, 3, seed="dg", grad=True), _r(lib, 3, 2, seed="dgs", grad=True)
    out.update(_flat("diag", _grads(lib, lambda x, s: lib.diagonal_scatter(x, s, 0, 0, 2), x, s)))
    z = lib.zeros(4, 3)
    out.update(
        {
            "select_row": lib.select_scatter(z, lib.tensor([1.0, 2.0, 3.0]), 0, 1),
            "select_cast": lib.select_scatter(z, lib.tensor([1, 2, 3, 4]), 1, 0),
            "select_method": z.select_scatter(lib.ones(4), -1, 2),
            "select_bad_shape": _err(lambda: lib.select_scatter(z, lib.ones(4), 0, 0)),
            "select_bad_index": _err(lambda: lib.select_scatter(z, lib.ones(4), 1, 3)),
            "select_bad_dim": _err(lambda: lib.select_scatter(z, lib.ones(4), 2, 0)),
            "select_0d": _err(lambda: lib.select_scatter(lib.tensor(1.0), lib.tensor(2.0), 0, 0)),
            "slice_start": lib.slice_scatter(z, lib.ones(2, 3), start=-2),
            "slice_clamped": lib.slice_scatter(z, lib.ones(2, 3), 0, 2, 100),
            "slice_empty": lib.slice_scatter(z, lib.ones(0, 3), 0, 3, 1),
            "slice_dim1": lib.slice_scatter(z, lib.ones(4, 2), 1, 0, 3, 2),
            "slice_method": z.slice_scatter(lib.ones(4, 3)),
            "slice_zero_step": _err(lambda: lib.slice_scatter(z, lib.ones(2, 3), 0, 0, 4, 0)),
            "slice_bad_shape": _err(lambda: lib.slice_scatter(z, lib.ones(3, 3), 0)),
            "diag_offset": lib.diagonal_scatter(z, lib.tensor([1.0, 2.0]), 1),
            "diag_negative": lib.diagonal_scatter(z, lib.tensor([1.0, 2.0, 3.0]), -1),
            "diag_empty": lib.diagonal_scatter(z, lib.zeros(0), 5),
            "diag_method": z.diagonal_scatter(lib.ones(3)),
            "diag_bad_shape": _err(lambda: lib.diagonal_scatter(z, lib.ones(2), 0)),
            "unchanged": z,
        }
    )
    return out


@case()
def apply_map(lib: Any) -> Dict[str, Any]:
    x = lib.tensor([[1.0, 2.0], [3.0, -4.5]])
    out: Dict[str, Any] = {}
    r = x.apply_(lambda v: v * 2 + 1)
    out.update({"apply": x, "apply_same": r is x})
    out["apply_int_trunc"] = lib.tensor([1, 2, -3]).apply_(lambda v: v * 1.5)
    out["apply_bool"] = lib.tensor([True, False]).apply_(lambda v: not v)
    out["apply_float_int"] = lib.tensor([1.5, 2.5]).apply_(lambda v: 2)
    out["apply_float_bool"] = lib.tensor([1.5]).apply_(lambda v: True)
    out["apply_0d"] = lib.tensor(3.0).apply_(lambda v: v - 1)
    out["apply_empty"] = lib.zeros(0).apply_(lambda v: v)
    out["apply_view"] = lib.zeros(2, 3)
    out["apply_view"][:, 1].apply_(lambda v: 7.0)
    out["apply_str"] = _err(lambda: lib.tensor([1, 2]).apply_(lambda v: "a"))
    out["apply_none"] = _err(lambda: lib.tensor([1, 2]).apply_(None))
    out["apply_grad"] = _err(lambda: lib.tensor([1.0], requires_grad=True).apply_(lambda v: v))
    y = lib.tensor([[1.0, 2.0], [3.0, 4.0]])
    r = y.map_(lib.tensor([10.0, 20.0]), lambda a, b: a * b - 1)
    out.update({"map": y, "map_same": r is y})
    out["map_int"] = lib.tensor([5, 7]).map_(lib.tensor([2, 3]), lambda a, b: a // b)
    out["map_dtype"] = _err(lambda: lib.tensor([1.0, 2.0]).map_(lib.tensor([10, 20]), lambda a, b: a + b))
    out["map_shape"] = _err(lambda: lib.tensor([1.0, 2.0]).map_(lib.tensor([[10.0, 20.0]]), lambda a, b: a + b))
    out["map_not_tensor"] = _err(lambda: lib.tensor([1.0, 2.0]).map_(3, lambda a, b: a + b))
    return out
