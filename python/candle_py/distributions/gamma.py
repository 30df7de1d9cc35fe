"""`torch.distributions.Gamma`."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from .._size import Size
from ..autograd import no_grad
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _gammainc, _is_number, _standard_gamma, broadcast_all

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """Gamma distribution of shape `concentration` and `rate`. `rsample` is differentiable
    in both (implicit reparameterization for the concentration, as PyTorch's)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration: Any, rate: Any, validate_args: Optional[bool] = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = Size() if _is_number(concentration) and _is_number(rate) else self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value: Any) -> Tensor:
        value = _core.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value) - self.rate * value - self.concentration.lgamma()

    def entropy(self) -> Tensor:
        return (
            self.concentration - self.rate.log() + self.concentration.lgamma() + (1.0 - self.concentration) * self.concentration.digamma()
        )

    @property
    def _natural_params(self) -> Tuple[Tensor, Tensor]:
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x: Any, y: Any) -> Tensor:  # type: ignore[override]
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()  # type: ignore[no-any-return]

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return _gammainc(self.concentration, self.rate * value)
