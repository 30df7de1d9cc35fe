"""`torch.distributions.ExponentialFamily`: entropy by the Bregman divergence of the log normalizer."""

from __future__ import annotations

from typing import Any, Tuple

from .. import autograd
from .._core import Tensor
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential families p_F(x; theta) = exp(<t(x), theta> - F(theta) + k(x)):
    `_natural_params`, `_log_normalizer` and `_mean_carrier_measure` give the entropy and
    the KL divergence between members of one family (through autograd)."""

    @property
    def _natural_params(self) -> Tuple[Tensor, ...]:
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Any) -> Tensor:
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> Any:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """Entropy by the Bregman divergence of the log normalizer."""
        result: Any = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        lg_normal = self._log_normalizer(*nparams)
        gradients = autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result  # type: ignore[no-any-return]
