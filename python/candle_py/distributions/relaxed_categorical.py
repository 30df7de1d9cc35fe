"""`torch.distributions.RelaxedOneHotCategorical` and `ExpRelaxedCategorical` (Concrete)."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform
from .utils import broadcast_all, clamp_probs

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical sample."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # The true support is actually a submanifold of this.
    has_rsample = True

    def __init__(
        self, temperature: Tensor, probs: Optional[Tensor] = None, logits: Optional[Tensor] = None, validate_args: Optional[bool] = None
    ) -> None:
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        super(ExpRelaxedCategorical, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits  # type: ignore[no-any-return]

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs  # type: ignore[no-any-return]

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(_core.rand(tuple(shape), dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value: Any) -> Tensor:
        K = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = _core.full_like(self.temperature, float(K)).lgamma() - self.temperature.log().mul(-(K - 1))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """RelaxedOneHotCategorical (Concrete / Gumbel-softmax) on the simplex: reparameterizable."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True
    base_dist: ExpRelaxedCategorical

    def __init__(
        self, temperature: Tensor, probs: Optional[Tensor] = None, logits: Optional[Tensor] = None, validate_args: Optional[bool] = None
    ) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs
