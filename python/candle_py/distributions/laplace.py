"""`torch.distributions.Laplace`."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._dtype_info import finfo
from .._size import Size
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Laplace distribution with location `loc` and scale `scale`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return (2**0.5) * self.scale

    def __init__(self, loc: Any, scale: Any, validate_args: Optional[bool] = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = Size() if _is_number(loc) and _is_number(scale) else self.loc.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Laplace, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Laplace, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        fi = finfo(self.loc.dtype)
        u = _core.empty(tuple(shape), dtype=self.loc.dtype, device=self.loc.device).uniform_(fi.eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value: Any) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()
