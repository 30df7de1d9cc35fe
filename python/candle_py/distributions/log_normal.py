"""`torch.distributions.LogNormal`."""

from __future__ import annotations

from typing import Any, Optional

from .._core import Tensor
from . import constraints
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform

__all__ = ["LogNormal"]


class LogNormal(TransformedDistribution):
    """exp of a Normal(loc, scale)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True
    base_dist: Normal

    def __init__(self, loc: Any, scale: Any, validate_args: Optional[bool] = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc
