"""`torch.distributions.Binomial`."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from ..autograd import no_grad
from . import constraints
from .distribution import Distribution
from .utils import _binomial, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Binomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    # works like clamp(x, min=0) but has grad at 0 is 0.5
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """Binomial distribution: `total_count` Bernoulli trials of probability `probs` (or `logits`)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None, validate_args: Optional[bool] = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(Binomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs  # type: ignore[no-any-return]

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)  # type: ignore[no-any-return]

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)  # type: ignore[no-any-return]

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return self._param.size()  # type: ignore[no-any-return]

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return _binomial(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = (self.total_count + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (self.total_count - value + 1).lgamma()
        # k * log(p) + (n - k) * log(1 - p) = k * (log(p) - log(1 - p)) + n * log(1 - p)
        #     (case logit < 0)              = k * logit - n * log1p(e^logit)
        #     (case logit > 0)              = k * logit - n * (log(p) - log(1 - p)) + n * log(p)
        #                                   = k * logit - n * logit - n * log1p(e^-logit)
        #     (merge two cases)             = k * logit - n * max(logit, 0) - n * log1p(e^-|logit|)
        normalize_term = (
            self.total_count * _clamp_by_zero(self.logits) + self.total_count * (-self.logits.abs()).exp().log1p() - log_factorial_n
        )
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total_count = int(self.total_count.max())
        if not self.total_count.min() == total_count:
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = _core.arange(1 + total_count, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
