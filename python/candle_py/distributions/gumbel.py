"""`torch.distributions.Gumbel`."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._dtype_info import finfo
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform
from .uniform import Uniform
from .utils import _is_number, broadcast_all, euler_constant

__all__ = ["Gumbel"]


class Gumbel(TransformedDistribution):
    """Gumbel (type I extreme value) distribution with location `loc` and `scale`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Any, scale: Any, validate_args: Optional[bool] = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = finfo(self.loc.dtype)
        if _is_number(loc) and _is_number(scale):
            base_dist = Uniform(fi.tiny, 1 - fi.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(_core.full_like(self.loc, fi.tiny), _core.full_like(self.loc, 1 - fi.eps), validate_args=validate_args)
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=-_core.ones_like(self.scale)),
            ExpTransform().inv,
            AffineTransform(loc=loc, scale=-self.scale),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    # Explicitly defining the log probability function for Gumbel due to precision issues
    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()  # type: ignore[no-any-return]

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * euler_constant

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + euler_constant)
