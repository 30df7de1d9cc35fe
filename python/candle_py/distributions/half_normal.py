"""`torch.distributions.HalfNormal`."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _core
from .._core import Tensor
from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfNormal"]


class HalfNormal(TransformedDistribution):
    """|X| for X ~ Normal(0, scale)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    base_dist: Normal

    def __init__(self, scale: Any, validate_args: Optional[bool] = None) -> None:
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return _core.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Any) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)
