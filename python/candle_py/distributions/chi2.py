"""`torch.distributions.Chi2`."""

from __future__ import annotations

from typing import Any, Optional

from .._core import Tensor
from . import constraints
from .gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    """Chi-squared distribution with `df` degrees of freedom (Gamma(df / 2, 1 / 2))."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: Optional[bool] = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2
