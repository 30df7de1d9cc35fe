"""`torch.distributions.StudentT`."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .._size import Size
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t-distribution with `df` degrees of freedom, location `loc` and `scale`."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def mean(self) -> Tensor:
        return _core.where(self.df <= 1, _core.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        big = self.df > 2
        df = _core.where(big, self.df, _core.full_like(self.df, 3.0))  # no NaN gradient from the unused branch
        m = self.scale.pow(2) * df / (df - 2)
        m = _core.where(big, m, _core.where(self.df > 1, _core.full_like(m, math.inf), _core.full_like(m, math.nan)))
        return m

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0, validate_args: Optional[bool] = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch_shape = self.df.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        # NOTE: This does not agree with scipy implementation as much as other distributions.
        # (see https://github.com/fritzo/notebooks/blob/master/debug-student-t.ipynb). Using DoubleTensor
        # parameters seems to help.

        #   X ~ Normal(0, 1)
        #   Z ~ Chi2(df)
        #   Y = X / sqrt(Z / df) ~ StudentT(df)
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * (Z / self.df).rsqrt()
        return self.loc + self.scale * Y

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + (0.5 * self.df).lgamma() - (0.5 * (self.df + 1.0)).lgamma()
        return -0.5 * (self.df + 1.0) * (y**2.0 / self.df).log1p() - Z

    def entropy(self) -> Tensor:
        lbeta = (0.5 * self.df).lgamma() + math.lgamma(0.5) - (0.5 * (self.df + 1)).lgamma()
        return (
            self.scale.log()
            + 0.5 * (self.df + 1) * ((0.5 * (self.df + 1)).digamma() - (0.5 * self.df).digamma())
            + 0.5 * self.df.log()
            + lbeta
        )
