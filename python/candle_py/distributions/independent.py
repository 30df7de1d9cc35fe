"""`torch.distributions.Independent`."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .._core import Tensor
from .._size import Size
from . import constraints
from .distribution import Distribution
from .utils import _sum_rightmost

__all__ = ["Independent"]


class Independent(Distribution):
    """Reinterprets `reinterpreted_batch_ndims` batch dims of a distribution as event dims
    (e.g. a diagonal Normal over vectors: `Independent(Normal(loc, scale), 1)`)."""

    arg_constraints: Dict[str, Any] = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int, validate_args: Optional[bool] = None) -> None:
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}"
            )
        shape = base_distribution.batch_shape + base_distribution.event_shape
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        batch_shape = shape[: len(shape) - event_dim]
        event_shape = shape[len(shape) - event_dim :]
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = Size(batch_shape)
        new.base_dist = self.base_dist.expand(batch_shape + self.event_shape[: self.reinterpreted_batch_ndims])
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        super(Independent, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return bool(self.base_dist.has_rsample)

    @property
    def has_enumerate_support(self) -> bool:  # type: ignore[override]
        if self.reinterpreted_batch_ndims > 0:
            return False
        return bool(self.base_dist.has_enumerate_support)

    @constraints.dependent_property
    def support(self) -> Any:
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Any) -> Tensor:
        log_prob = self.base_dist.log_prob(value)
        return _sum_rightmost(log_prob, self.reinterpreted_batch_ndims)  # type: ignore[no-any-return]

    def entropy(self) -> Tensor:
        entropy = self.base_dist.entropy()
        return _sum_rightmost(entropy, self.reinterpreted_batch_ndims)  # type: ignore[no-any-return]

    def enumerate_support(self, expand: bool = True) -> Tensor:
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self) -> str:
        return self.__class__.__name__ + f"({self.base_dist}, {self.reinterpreted_batch_ndims})"
