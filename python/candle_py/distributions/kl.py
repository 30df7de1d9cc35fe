"""`torch.distributions.kl`: `kl_divergence(p, q)` dispatched on the most specific pair
registered with `register_kl`, with PyTorch's formulas for its pairs of the families
implemented here (Bernoulli, Beta, Binomial, Categorical, Cauchy, Dirichlet, Exponential,
ExponentialFamily, Gamma, Geometric, Gumbel, HalfNormal, Independent, Laplace,
MultivariateNormal, Normal, OneHotCategorical, Pareto, Poisson, TransformedDistribution,
Uniform and their mixed pairs)."""

from __future__ import annotations

import math
import warnings
from functools import total_ordering
from typing import Any, Callable, Dict, Tuple

from .. import _composed_linalg, _composed_math, _core, autograd
from .._core import Tensor
from ..nn.functional import softplus
from ._linalg import solve_triangular
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost
from .utils import euler_constant as _euler_gamma

_KL_REGISTRY: Dict[Tuple[type, type], Callable[..., Any]] = {}  # Source of truth mapping a few general (type, type) pairs to functions.
_KL_MEMOIZE: Dict[Tuple[type, type], Any] = {}  # Memoized version mapping many specific (type, type) pairs to functions.

__all__ = ["register_kl", "kl_divergence"]

inf = math.inf


def register_kl(type_p: type, type_q: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator to register a pairwise function with `kl_divergence`:

        @register_kl(Normal, Normal)
        def kl_normal_normal(p, q):
            ...

    Lookup returns the most specific (type, type) match ordered by subclass; ambiguous
    matches warn (RuntimeWarning) and the left-most one wins."""
    if not isinstance(type_p, type) and issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) and issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun: Callable[..., Any]) -> Callable[..., Any]:
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # reset since lookup order may have changed
        return fun

    return decorator


@total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types: type) -> None:
        self.types = types

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Match) and self.types == other.types

    def __le__(self, other: "_Match") -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True

    __hash__ = object.__hash__


def _dispatch_kl(type_p: type, type_q: type) -> Any:
    """The most specific approximate match, assuming single inheritance."""
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    # Check that the left- and right- lexicographic orders agree.
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl({left_p.__name__}, {right_q.__name__})",
            RuntimeWarning,
            stacklevel=2,
        )
    return left_fun


def _infinite_like(tensor: Tensor) -> Tensor:
    return _core.full_like(tensor, inf)


def _x_log_x(tensor: Tensor) -> Tensor:
    return _composed_math.xlogy(tensor, tensor)


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """trace(X @ X.T) of a batch of matrices."""
    n = bmat.size(-1)
    m = bmat.size(-2)
    flat_trace = bmat.reshape(-1, m * n).pow(2).sum(-1)
    return flat_trace.reshape(tuple(bmat.shape[:-2]))


def _set_inf(x: Tensor, mask: Any) -> Tensor:
    return _core.where(mask, _core.full_like(x, inf), x)


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = integral of p(x) log(p(x) / q(x)), batched over the batch shape.

    Raises NotImplementedError when no pair is registered for the types of p and q."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)  # type: ignore[no-any-return]


################################################################################
# KL Divergence Implementations
################################################################################

# Same distributions


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Any, q: Any) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _set_inf(t1, q.probs == 0)
    t1 = _core.where(p.probs == 0, _core.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _set_inf(t2, q.probs == 1)
    t2 = _core.where(p.probs == 1, _core.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Any, q: Any) -> Tensor:
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + (sum_params_p).lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + (sum_params_q).lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    t5 = (sum_params_q - sum_params_p) * sum_params_p.digamma()
    return t1 - t2 + t3 + t4 + t5  # type: ignore[no-any-return]


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Any, q: Any) -> Tensor:
    # from https://math.stackexchange.com/questions/2214993/
    # kullback-leibler-divergence-for-binomial-distributions-p-and-q
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _set_inf(kl, p.total_count > q.total_count)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Any, q: Any) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = _set_inf(t, (q.probs == 0).expand_as(t))
    t = _core.where((p.probs == 0).expand_as(t), _core.zeros_like(t), t)
    return t.sum(-1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Any, q: Any) -> Tensor:
    # From http://bariskurt.com/kullback-leibler-divergence-between-two-dirichlet-and-beta-distributions/
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)  # type: ignore[no-any-return]


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Any, q: Any) -> Tensor:
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1  # type: ignore[no-any-return]


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: Any, q: Any) -> Tensor:
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot"
            "                             be computed using Bregman divergences"
        )
    p_nparams = [np_.detach().requires_grad_() for np_ in p._natural_params]
    q_nparams = q._natural_params
    lg_normal = p._log_normalizer(*p_nparams)
    gradients = autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result = result - _sum_rightmost(term, len(q.event_shape))
    return result  # type: ignore[no-any-return]


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Any, q: Any) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4  # type: ignore[no-any-return]


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Any, q: Any) -> Tensor:
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * _euler_gamma
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + _euler_gamma)  # type: ignore[no-any-return]


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Any, q: Any) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits  # type: ignore[no-any-return]


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: Any, q: Any) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Any, q: Any) -> Tensor:
    # From http://www.mast.queensu.ca/~communications/Papers/gil-msc11.pdf
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1  # type: ignore[no-any-return]


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p: Any, q: Any) -> Tensor:
    # From https://en.wikipedia.org/wiki/Multivariate_normal_distribution#Kullback%E2%80%93Leibler_divergence
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with                          different event shapes cannot be computed"
        )
    half_term1 = q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) - p._unbroadcasted_scale_tril.diagonal(
        dim1=-2, dim2=-1
    ).log().sum(-1)
    combined_batch_shape = _composed_linalg.broadcast_shapes(q._unbroadcasted_scale_tril.shape[:-2], p._unbroadcasted_scale_tril.shape[:-2])
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    term2 = _batch_trace_XXT(solve_triangular(q_scale_tril, p_scale_tril))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, (q.loc - p.loc))
    return half_term1 + 0.5 * (term2 + term3 - n)  # type: ignore[no-any-return]


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Any, q: Any) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())  # type: ignore[no-any-return]


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: Any, q: Any) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Any, q: Any) -> Tensor:
    # From http://www.mast.queensu.ca/~communications/Papers/gil-msc11.pdf
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return _set_inf(result, p.support.lower_bound < q.support.lower_bound)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Any, q: Any) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)  # type: ignore[no-any-return]


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: Any, q: Any) -> Tensor:
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Any, q: Any) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _set_inf(result, (q.low > p.low) | (q.high < p.high))


# Different distributions
@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Any, q: Any) -> Tensor:
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)  # type: ignore[no-any-return]


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.concentration1)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Any, q: Any) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))  # type: ignore[no-any-return]


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Any, q: Any) -> Tensor:
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4  # type: ignore[no-any-return]


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Any, q: Any) -> Tensor:
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1) + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal  # type: ignore[no-any-return]


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Any, q: Any) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    return _set_inf(result, (q.low > p.support.lower_bound) | (q.high < p.support.upper_bound))


@register_kl(Exponential, Beta)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Any, q: Any) -> Tensor:
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + q.concentration.lgamma() + q.concentration * _euler_gamma - (1 + _euler_gamma)  # type: ignore[no-any-return]


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Any, q: Any) -> Tensor:
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3  # type: ignore[no-any-return]


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Any, q: Any) -> Tensor:
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * math.pi).log()
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal  # type: ignore[no-any-return]


@register_kl(Gamma, Beta)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Any, q: Any) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate  # type: ignore[no-any-return]


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Any, q: Any) -> Tensor:
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3  # type: ignore[no-any-return]


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Any, q: Any) -> Tensor:
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * 2 * math.pi).log() - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal  # type: ignore[no-any-return]


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p: Any, q: Any) -> Tensor:
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _euler_gamma - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_euler_gamma + 1)  # type: ignore[no-any-return]


@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Any, q: Any) -> Tensor:
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1  # type: ignore[no-any-return]


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Any, q: Any) -> Tensor:
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))  # type: ignore[no-any-return]


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Any, q: Any) -> Tensor:
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = scale_ratio.log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * loc_diff_scale_ratio.pow(2)).exp()
    t3 = loc_diff * (math.sqrt(0.5) * loc_diff_scale_ratio).erf()
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))  # type: ignore[no-any-return]


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Any, q: Any) -> Tensor:
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    result = t1 - t2 + t3 - 1
    return _set_inf(result, p.alpha <= 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Any, q: Any) -> Tensor:
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    result = t1 + t2 + t3 + t4 - 1
    return _set_inf(result, p.alpha <= 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Any, q: Any) -> Tensor:
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    result = t1 - t2 + (t3 + t4) / var_normal - 1
    return _set_inf(result, p.alpha <= 2)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p: Any, q: Any) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Any, q: Any) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term) / common_term
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = t3 + t4 - t1 - t2
    return _set_inf(result, (p.high > q.support.upper_bound) | (p.low < q.support.lower_bound))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponetial(p: Any, q: Any) -> Tensor:
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Any, q: Any) -> Tensor:
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Any, q: Any) -> Tensor:
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
    return t1 - t2  # type: ignore[no-any-return]


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Any, q: Any) -> Tensor:
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = (common_term).pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)  # type: ignore[no-any-return]


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Any, q: Any) -> Tensor:
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * (support_uniform)).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    result = t2 * (q.alpha + 1) - t1
    return _set_inf(result, p.low < q.support.lower_bound)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Any, q: Any) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)  # type: ignore[no-any-return]


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Any, q: Any) -> Tensor:
    # From https://arxiv.org/abs/1905.10965
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2  # type: ignore[no-any-return]
