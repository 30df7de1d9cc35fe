"""`torch.distributions.Beta`."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .dirichlet import Dirichlet
from .exp_family import ExponentialFamily
from .utils import _is_number, broadcast_all

__all__ = ["Beta"]


class Beta(ExponentialFamily):
    """Beta distribution of `concentration1` (alpha) and `concentration0` (beta), a
    two-component Dirichlet (its `rsample` gradient: see Dirichlet)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: Optional[bool] = None) -> None:
        if _is_number(concentration1) and _is_number(concentration0):
            concentration1_concentration0 = _core.tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration1_concentration0 = _core.stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(concentration1_concentration0, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = _core.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self) -> Tuple[Tensor, Tensor]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Any, y: Any) -> Tensor:  # type: ignore[override]
        return x.lgamma() + y.lgamma() - (x + y).lgamma()  # type: ignore[no-any-return]
