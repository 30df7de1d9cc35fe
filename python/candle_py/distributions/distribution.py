"""`torch.distributions.Distribution`: the base class (shapes, argument and sample
validation with PyTorch's messages, `sample`/`rsample`/`log_prob`/... interface)."""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

from .._core import Tensor
from .._size import Size
from ..autograd import no_grad
from . import constraints
from .utils import _as_size, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """Abstract base class for probability distributions.

    Args:
        batch_shape (Size): The shape over which parameters are batched.
        event_shape (Size): The shape of a single sample (without batching).
        validate_args (bool, optional): Whether to validate arguments. Default: None.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Set whether validation is enabled (default: on, off under `python -O`)."""
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (), validate_args: Optional[bool] = None) -> None:
        self._batch_shape = _as_size(batch_shape)
        self._event_shape = _as_size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. "
                    + "Please set `arg_constraints = {}` or initialize the distribution "
                    + "with `validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # skip constraints that cannot be checked
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # skip checking lazily-constructed args
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {repr(self)} "
                        f"to satisfy the constraint {repr(constraint)}, "
                        f"but found invalid values:\n{value}"
                    )
        super().__init__()

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        """A new distribution with batch dimensions expanded to `batch_shape` (parameters are expanded views)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> Dict[str, Any]:
        """Argument name -> the Constraint it must satisfy."""
        raise NotImplementedError

    @property
    def support(self) -> Any:
        """The Constraint of the distribution's support."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A `sample_shape` shaped sample (or batch of samples), without gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A `sample_shape` shaped reparameterized sample: gradients flow to the parameters."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """`n` samples (deprecated: use `sample((n,))`)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density/mass function at `value`."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at `value`."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at `value`."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """All values of a discrete distribution's support, along dimension 0."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, batched over batch_shape."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """exp(entropy)."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        """sample_shape + batch_shape + event_shape."""
        return Size(tuple(_as_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Any) -> None:
        """Check that `value`'s rightmost dimensions match the shapes and that it lies in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if value.size()[event_dim_start:] != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs {self._event_shape}.")
        actual_shape = value.size()
        expected_shape = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs {expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable "
                + "sample validation. Please initialize the distribution with "
                + "`validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        if support is None:
            raise AssertionError("support is unexpectedly None")
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({repr(support)}) "
                f"of the distribution {repr(self)}, "
                f"but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls: Any, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        param_names = [k for k in self.arg_constraints if k in self.__dict__]
        args_string = ", ".join(
            [f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}" for p in param_names]
        )
        return self.__class__.__name__ + "(" + args_string + ")"
