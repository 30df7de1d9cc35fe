"""`torch.distributions.OneHotCategorical` and `OneHotCategoricalStraightThrough`."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from ..nn.functional import one_hot
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .utils import _as_size

__all__ = ["OneHotCategorical", "OneHotCategoricalStraightThrough"]


class OneHotCategorical(Distribution):
    """A Categorical whose samples are one-hot vectors of size K."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs: Optional[Tensor] = None, logits: Optional[Tensor] = None, validate_args: Optional[bool] = None) -> None:
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        super(OneHotCategorical, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self) -> Tensor:
        return self._categorical._param  # type: ignore[no-any-return]

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs  # type: ignore[no-any-return]

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits  # type: ignore[no-any-return]

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs  # type: ignore[no-any-return]

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        mode = probs.argmax(dim=-1)
        return one_hot(mode, num_classes=probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self) -> Tensor:
        return self._categorical.probs * (1 - self._categorical.probs)  # type: ignore[no-any-return]

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = _as_size(sample_shape)
        probs = self._categorical.probs
        num_events = self._categorical._num_events
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, num_events).to(probs.dtype)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self.event_shape[0]
        values = _core.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical with the straight-through gradient estimator in `rsample`."""

    has_rsample = True

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
