"""`torch.distributions.Categorical`."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _composed_linalg, _core
from .._core import Tensor
from .._dtype_info import finfo
from .._size import Size
from . import constraints
from .distribution import Distribution
from .utils import _as_size, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


class Categorical(Distribution):
    """Categorical distribution over {0, ..., K - 1}, parameterized by `probs` (normalized
    along the last dimension) or `logits` (unnormalized log-probabilities)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs: Optional[Tensor] = None, logits: Optional[Tensor] = None, validate_args: Optional[bool] = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            assert logits is not None
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            # Normalize
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = batch_shape + Size((self._num_events,))
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return self._param.size()  # type: ignore[no-any-return]

    @property
    def mean(self) -> Tensor:
        return _core.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(dim=-1)  # type: ignore[no-any-return]

    @property
    def variance(self) -> Tensor:
        return _core.full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = _as_size(sample_shape)
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        samples_2d = _core.multinomial(probs_2d, sample_shape.numel(), True).T
        return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = _composed_linalg.broadcast_tensors(value, self.logits)
        # a copy: the core's gather panics on a size-1 slice of an expanded (stride 0) index
        value = value[..., :1].clone()
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        min_real = finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)  # type: ignore[no-any-return]

    def enumerate_support(self, expand: bool = True) -> Tensor:
        num_events = self._num_events
        values = _core.arange(num_events, dtype=_core.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
