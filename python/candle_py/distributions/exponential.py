"""`torch.distributions.Exponential`."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """Exponential distribution of rate `rate`."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def __init__(self, rate: Any, validate_args: Optional[bool] = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if _is_number(rate) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Exponential, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _core.empty(tuple(shape), dtype=self.rate.dtype, device=self.rate.device).exponential_() / self.rate

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Any) -> Tensor:
        return -((-value).log1p()) / self.rate  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()

    @property
    def _natural_params(self) -> Tuple[Tensor]:
        return (-self.rate,)

    def _log_normalizer(self, x: Any) -> Tensor:  # type: ignore[override]
        return -((-x).log())  # type: ignore[no-any-return]
