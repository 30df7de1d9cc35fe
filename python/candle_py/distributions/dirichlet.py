"""`torch.distributions.Dirichlet`."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from .._size import Size
from ..nn.functional import one_hot
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _standard_gamma

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """Dirichlet distribution over the simplex, parameterized by `concentration`.

    `rsample` normalizes Gamma(concentration) draws; its gradient is the implicit
    reparameterization gradient of those Gamma draws carried through the normalization
    (an unbiased estimator of the same expectation gradients as PyTorch's
    `_dirichlet_grad`, not its per-sample values)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: Optional[bool] = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape + self.event_shape)
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        concentration = self.concentration.expand(shape)
        g = _standard_gamma(concentration)
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration - 1.0).xlogy(value).sum(-1) + self.concentration.sum(-1).lgamma() - self.concentration.lgamma().sum(-1)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        mask = (self.concentration < 1).all(dim=-1)
        if mode.numel():
            hot = one_hot(mode.argmax(dim=-1), concentrationm1.shape[-1]).to(mode.dtype)
            mode = _core.where(mask.unsqueeze(-1), hot, mode)
        return mode

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self) -> Tensor:
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (
            self.concentration.lgamma().sum(-1)
            - a0.lgamma()
            - (k - a0) * a0.digamma()
            - ((self.concentration - 1.0) * self.concentration.digamma()).sum(-1)
        )

    @property
    def _natural_params(self) -> Tuple[Tensor]:
        return (self.concentration,)

    def _log_normalizer(self, x: Any) -> Tensor:  # type: ignore[override]
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()  # type: ignore[no-any-return]
