"""`torch.distributions.Cauchy`."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """Cauchy (Lorentz) distribution with location `loc` and scale `scale`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: Optional[bool] = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if _is_number(loc) and _is_number(scale) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Cauchy, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Cauchy, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return _core.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return _core.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _core.empty(tuple(shape), dtype=self.loc.dtype, device=self.loc.device).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5  # type: ignore[no-any-return]

    def icdf(self, value: Any) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()
