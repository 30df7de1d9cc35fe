"""`torch.distributions` for candle_py: parameterizable probability distributions and
sampling functions, with PyTorch's classes, constraints, transforms and KL divergences.

Deterministic quantities (log_prob, entropy, cdf/icdf, mean/variance/mode, KL) are
PyTorch's formulas in candle_py tensor ops, so their values and gradients match
PyTorch's. Sampling uses candle_py's generators (`cp.manual_seed`): same distributions
as PyTorch, not the same values. `rsample` is reparameterized (gradients flow to the
parameters) where PyTorch's is; Gamma (and Chi2, StudentT) use the implicit
reparameterization gradient as PyTorch does; Beta and Dirichlet carry the Gamma
gradients through the normalization (unbiased, not PyTorch's per-sample values).

Not here: ContinuousBernoulli, FisherSnedecor, Kumaraswamy, LKJCholesky,
LowRankMultivariateNormal, MixtureSameFamily, Multinomial, NegativeBinomial, VonMises,
Weibull, Wishart, InverseGamma, LogisticNormal, GeneralizedPareto, and
`biject_to`/`transform_to`.
"""

from __future__ import annotations

from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import RelaxedBernoulli
from .relaxed_categorical import RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .uniform import Uniform

__all__ = [
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "Dirichlet",
    "Distribution",
    "Exponential",
    "ExponentialFamily",
    "Gamma",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Poisson",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "StudentT",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]
