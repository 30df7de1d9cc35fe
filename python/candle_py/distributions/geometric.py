"""`torch.distributions.Geometric`."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._dtype_info import finfo
from .._size import Size
from ..autograd import no_grad
from ..nn.functional import binary_cross_entropy_with_logits
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Geometric"]


class Geometric(Distribution):
    """Number of failures before the first success of Bernoulli trials with `probs` (or `logits`)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Optional[bool] = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        probs_or_logits = probs if probs is not None else logits
        batch_shape = Size() if _is_number(probs_or_logits) else probs_or_logits.size()
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            # Add an extra check beyond unit_interval
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                invalid_value = value.detach()[~valid]
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {repr(self)} "
                    f"to be positive but found invalid values:\n{invalid_value}"
                )

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
        super(Geometric, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0  # type: ignore[no-any-return]

    @property
    def mode(self) -> Tensor:
        return _core.zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs  # type: ignore[no-any-return]

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny = finfo(self.probs.dtype).tiny
        with no_grad():
            u = _core.empty(tuple(shape), dtype=self.probs.dtype, device=self.probs.device).uniform_(tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()  # type: ignore[no-any-return]

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = _core.where((probs == 1) & (value == 0), _core.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs  # type: ignore[no-any-return]
