"""`torch.distributions.Bernoulli`."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

from .. import _composed_math, _core
from .._core import Tensor
from .._size import Size
from ..autograd import no_grad
from ..nn.functional import binary_cross_entropy_with_logits
from . import constraints
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


class Bernoulli(ExponentialFamily):
    """Bernoulli distribution over {0, 1}, parameterized by `probs` or `logits` (not both)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: Optional[bool] = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = _is_number(probs)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = _is_number(logits)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(Bernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.probs  # type: ignore[no-any-return]

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return _core.where(self.probs == 0.5, _core.full_like(mode, math.nan), mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)  # type: ignore[no-any-return]

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
            return _core.bernoulli(self.probs.expand(shape))

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self) -> Tensor:
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = _core.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self) -> Tuple[Tensor]:
        return (_composed_math.logit(self.probs),)

    def _log_normalizer(self, x: Any) -> Tensor:  # type: ignore[override]
        return x.exp().log1p()  # type: ignore[no-any-return]
