"""`torch.distributions.Poisson`."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from .._size import Size
from ..autograd import no_grad
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """Poisson distribution of rate `rate` over the nonnegative integers."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def __init__(self, rate: Any, validate_args: Optional[bool] = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if _is_number(rate) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return _core.poisson(self.rate.expand(shape).contiguous())

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self) -> Tuple[Tensor]:
        return (self.rate.log(),)

    def _log_normalizer(self, x: Any) -> Tensor:  # type: ignore[override]
        return x.exp()  # type: ignore[no-any-return]
