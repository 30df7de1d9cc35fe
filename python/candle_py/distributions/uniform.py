"""`torch.distributions.Uniform`."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["Uniform"]


class Uniform(Distribution):
    """Uniform distribution on the half-open interval [low, high)."""

    has_rsample = True

    @property
    def arg_constraints(self) -> Dict[str, Any]:  # type: ignore[override]
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return math.nan * self.high

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def __init__(self, low: Any, high: Any, validate_args: Optional[bool] = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        batch_shape = Size() if _is_number(low) and _is_number(high) else self.low.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = Size(batch_shape)
        new.low = self.low.expand(batch_shape)
        new.high = self.high.expand(batch_shape)
        super(Uniform, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        rand = _core.rand(tuple(shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)  # type: ignore[no-any-return]

    def icdf(self, value: Any) -> Tensor:
        return value * (self.high - self.low) + self.low  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()
