"""`torch.distributions.Pareto`."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from . import constraints
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .utils import broadcast_all

__all__ = ["Pareto"]


def _clamp_min(x: Tensor, m: float) -> Tensor:
    # clamp(min=m) with PyTorch's gradient at clamped entries: 0 even where the incoming
    # gradient is NaN (the core's clamp backward multiplies by the mask, giving NaN there)
    return _core.where(x < m, m, x)


class Pareto(TransformedDistribution):
    """Pareto Type 1 distribution of `scale` and shape `alpha`."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Any, alpha: Any, validate_args: Optional[bool] = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        # mean is inf for alpha <= 1
        a = _clamp_min(self.alpha, 1.0)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        # var is inf for alpha <= 2
        a = _clamp_min(self.alpha, 2.0)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        return constraints.greater_than_eq(self.scale)

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
