"""`torch.distributions.MultivariateNormal` (Cholesky factor, triangular solves: see _linalg.py)."""

from __future__ import annotations

import math
from typing import Any, Optional

from .. import _composed_linalg, _core
from .._core import Tensor
from .._size import Size
from . import constraints
from ._linalg import cholesky, cholesky_inverse, solve_triangular, solve_triangular_vec
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Batched matrix-vector product, broadcast over the batch dimensions (elementwise:
    the core's matmul rejects some broadcast batch layouts, e.g. (2, 3, 3) @ (2, 3, 2, 3, 1))."""
    return (bmat * bvec.unsqueeze(-2)).sum(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:
    """The squared Mahalanobis distance x^T M^-1 x for M = L L^T, batch dimensions broadcast."""
    return solve_triangular_vec(bL, bx).pow(2).sum(-1)


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    # Ref: https://nbviewer.jupyter.org/gist/fehiepsi/5ef8e09e61604f10607380467eb82006#Precision-to-scale_tril
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    Id = _core.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return solve_triangular(L_inv, Id.expand(tuple(L_inv.shape)))


class MultivariateNormal(Distribution):
    """Multivariate normal distribution parameterized by a mean vector `loc` and one of
    `covariance_matrix`, `precision_matrix` or `scale_tril` (lower Cholesky factor)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Optional[Tensor] = None,
        precision_matrix: Optional[Tensor] = None,
        scale_tril: Optional[Tensor] = None,
        validate_args: Optional[bool] = None,
    ) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")

        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch dimensions")
            batch_shape = _composed_linalg.broadcast_shapes(scale_tril.shape[:-2], loc.shape[:-1])
            self.scale_tril = scale_tril.expand(tuple(batch_shape) + (-1, -1))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, with optional leading batch dimensions")
            batch_shape = _composed_linalg.broadcast_shapes(covariance_matrix.shape[:-2], loc.shape[:-1])
            self.covariance_matrix = covariance_matrix.expand(tuple(batch_shape) + (-1, -1))
        else:
            assert precision_matrix is not None
            if precision_matrix.dim() < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, with optional leading batch dimensions")
            batch_shape = _composed_linalg.broadcast_shapes(precision_matrix.shape[:-2], loc.shape[:-1])
            self.precision_matrix = precision_matrix.expand(tuple(batch_shape) + (-1, -1))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))

        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:  # precision_matrix is not None
            assert precision_matrix is not None
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = batch_shape + self.event_shape
        cov_shape = batch_shape + self.event_shape + self.event_shape
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        if "covariance_matrix" in self.__dict__:
            new.covariance_matrix = self.covariance_matrix.expand(cov_shape)
        if "scale_tril" in self.__dict__:
            new.scale_tril = self.scale_tril.expand(cov_shape)
        if "precision_matrix" in self.__dict__:
            new.precision_matrix = self.precision_matrix.expand(cov_shape)
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape + self._event_shape + self._event_shape))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        return (self._unbroadcasted_scale_tril @ self._unbroadcasted_scale_tril.mT).expand(
            tuple(self._batch_shape + self._event_shape + self._event_shape)
        )

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return cholesky_inverse(self._unbroadcasted_scale_tril).expand(tuple(self._batch_shape + self._event_shape + self._event_shape))

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self) -> Tensor:
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
