"""`torch.distributions.constraints`: the regions a distribution's parameters and
values live in. `constraint.check(value)` gives a bool tensor of `value`'s batch shape
(its rightmost `event_dim` dimensions reduced); `repr` and the names are PyTorch's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from .. import _core
from .._dtype_info import finfo
from .._functions import isclose
from ._linalg import cholesky_ex

__all__ = [
    "Constraint",
    "boolean",
    "cat",
    "corr_cholesky",
    "dependent",
    "dependent_property",
    "greater_than",
    "greater_than_eq",
    "independent",
    "integer_interval",
    "interval",
    "half_open_interval",
    "is_dependent",
    "less_than",
    "lower_cholesky",
    "lower_triangular",
    "MixtureSameFamilyConstraint",
    "multinomial",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive",
    "positive_semidefinite",
    "positive_definite",
    "positive_integer",
    "real",
    "real_vector",
    "simplex",
    "square",
    "stack",
    "symmetric",
    "unit_interval",
]

_NOT_SET: Any = NotImplemented


class Constraint:
    """Base class of constraints: `is_discrete`, `event_dim` and `check(value)`."""

    is_discrete: Any = False
    event_dim: Any = 0

    def check(self, value: Any) -> Any:
        """A bool tensor of `sample_shape + batch_shape`: whether each event of `value` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """Placeholder for variables whose support depends on other variables."""

    def __init__(self, *, is_discrete: Any = _NOT_SET, event_dim: Any = _NOT_SET) -> None:
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property  # type: ignore[override]
    def is_discrete(self) -> bool:
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return bool(self._is_discrete)

    @property  # type: ignore[override]
    def event_dim(self) -> int:
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return int(self._event_dim)

    def __call__(self, *, is_discrete: Any = _NOT_SET, event_dim: Any = _NOT_SET) -> "_Dependent":
        """`constraints.dependent(is_discrete=True, event_dim=1)`."""
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x: Any) -> Any:
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint: Any) -> bool:
    """Whether `constraint` is a dependent constraint (whose check cannot be made)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """`@constraints.dependent_property`: a property on instances, a dependent constraint on the class."""

    def __init__(self, fn: Optional[Callable[..., Any]] = None, *, is_discrete: Any = _NOT_SET, event_dim: Any = _NOT_SET) -> None:
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn: Callable[..., Any]) -> "_DependentProperty":  # type: ignore[override]
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """Aggregates a constraint over `reinterpreted_batch_ndims` dims: an event is valid only if all its entries are."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int) -> None:
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int):
            raise AssertionError(f"reinterpreted_batch_ndims must be an int, got {type(reinterpreted_batch_ndims).__name__}")
        if reinterpreted_batch_ndims < 0:
            raise AssertionError(f"reinterpreted_batch_ndims must be >= 0, got {reinterpreted_batch_ndims}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property  # type: ignore[override]
    def is_discrete(self) -> bool:
        return bool(self.base_constraint.is_discrete)

    @property  # type: ignore[override]
    def event_dim(self) -> int:
        return int(self.base_constraint.event_dim) + self.reinterpreted_batch_ndims

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        result = result.reshape(tuple(result.shape[: result.dim() - self.reinterpreted_batch_ndims]) + (-1,))
        return result.all(-1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}({repr(self.base_constraint)}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """Adds back the rightmost batch dimension before checking with the component constraint."""

    def __init__(self, base_constraint: Constraint) -> None:
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint
        super().__init__()

    @property  # type: ignore[override]
    def is_discrete(self) -> bool:
        return bool(self.base_constraint.is_discrete)

    @property  # type: ignore[override]
    def event_dim(self) -> int:
        return int(self.base_constraint.event_dim)

    def check(self, value: Any) -> Any:
        unsqueezed_value = value.unsqueeze(-1 - self.event_dim)
        result = self.base_constraint.check(unsqueezed_value)
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        num_dim_to_keep = value.dim() - self.event_dim
        result = result.reshape(tuple(result.shape[:num_dim_to_keep]) + (-1,))
        return result.all(-1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({repr(self.base_constraint)})"


class _Boolean(Constraint):
    """The two values {0, 1}."""

    is_discrete = True

    def check(self, value: Any) -> Any:
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors."""

    is_discrete = True
    event_dim = 1

    def check(self, value: Any) -> Any:
        is_boolean = (value == 0) | (value == 1)
        is_normalized = value.sum(-1).eq(1)
        return is_boolean.all(-1) & is_normalized


class _IntegerInterval(Constraint):
    """An integer interval [lower_bound, upper_bound]."""

    is_discrete = True

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerLessThan(Constraint):
    """An integer interval (-inf, upper_bound]."""

    is_discrete = True

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    """An integer interval [lower_bound, inf)."""

    is_discrete = True

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound})"


class _Real(Constraint):
    """The extended real line [-inf, inf] (NaN is outside)."""

    def check(self, value: Any) -> Any:
        return value == value


class _GreaterThan(Constraint):
    """A real half line (lower_bound, inf]."""

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return value > self.lower_bound

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    """A real half line [lower_bound, inf)."""

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return value >= self.lower_bound

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    """A real half line [-inf, upper_bound)."""

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return value < self.upper_bound

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    """A real interval [lower_bound, upper_bound]."""

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(Constraint):
    """A real interval [lower_bound, upper_bound)."""

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value: Any) -> Any:
        return (value >= self.lower_bound) & (value < self.upper_bound)

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + f"(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    """The unit simplex in the rightmost dimension: x >= 0 and x.sum(-1) == 1."""

    event_dim = 1

    def check(self, value: Any) -> Any:
        return (value >= 0).all(dim=-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Nonnegative integer values summing to at most an upper bound."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound

    def check(self, x: Any) -> Any:
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


def _flat_min(b: Any) -> Any:
    return b.reshape(tuple(b.shape[:-2]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _flat_min(value.tril() == value)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with positive diagonals."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        lower_triangular = _flat_min(value.tril() == value)
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return lower_triangular & positive_diagonal


class _CorrCholesky(Constraint):
    """Lower Cholesky factors whose rows have unit length."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        tol = finfo(value.dtype).eps * value.size(-1) * 10
        row_norm = (value.detach() ** 2).sum(-1).sqrt()
        unit_row_norm = (row_norm - 1.0).abs().le(tol).all(dim=-1)
        return _LowerCholesky().check(value) & unit_row_norm


class _Square(Constraint):
    """Square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _core.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=_core.bool, device=value.device)


class _Symmetric(_Square):
    """Symmetric square matrices."""

    def check(self, value: Any) -> Any:
        square_check = super().check(value)
        if not bool(square_check.all()):
            return square_check
        return isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Positive-semidefinite matrices (eigenvalues by NumPy: a check, not an op)."""

    def check(self, value: Any) -> Any:
        sym_check = super().check(value)
        if not bool(sym_check.all()):
            return sym_check
        import numpy as np

        eig = np.linalg.eigvalsh(value.detach().cpu().numpy())
        return _core.tensor((eig >= 0).all(-1), device=value.device)


class _PositiveDefinite(_Symmetric):
    """Positive-definite matrices (a Cholesky factorization succeeds)."""

    def check(self, value: Any) -> Any:
        sym_check = super().check(value)
        if not bool(sym_check.all()):
            return sym_check
        return cholesky_ex(value.detach())[1].eq(0)


class _Cat(Constraint):
    """Applies a sequence of constraints to the slices of dimension `dim` (as `torch.cat`)."""

    def __init__(self, cseq: Sequence[Constraint], dim: int = 0, lengths: Optional[Sequence[int]] = None) -> None:
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        if lengths is None:
            lengths = [1] * len(self.cseq)
        self.lengths: List[int] = list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim
        super().__init__()

    @property  # type: ignore[override]
    def is_discrete(self) -> bool:
        return any(c.is_discrete for c in self.cseq)

    @property  # type: ignore[override]
    def event_dim(self) -> int:
        return max(int(c.event_dim) for c in self.cseq)

    def check(self, value: Any) -> Any:
        if not (-value.dim() <= self.dim < value.dim()):
            raise AssertionError(f"dim {self.dim} out of range for value with {value.dim()} dimensions")
        checks = []
        start = 0
        for constr, length in zip(self.cseq, self.lengths):
            checks.append(constr.check(value.narrow(self.dim, start, length)))
            start = start + length
        return _core.cat(checks, self.dim)


class _Stack(Constraint):
    """Applies a sequence of constraints to the entries of dimension `dim` (as `torch.stack`)."""

    def __init__(self, cseq: Sequence[Constraint], dim: int = 0) -> None:
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property  # type: ignore[override]
    def is_discrete(self) -> bool:
        return any(c.is_discrete for c in self.cseq)

    @property  # type: ignore[override]
    def event_dim(self) -> int:
        dim = max(int(c.event_dim) for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value: Any) -> Any:
        if not (-value.dim() <= self.dim < value.dim()):
            raise AssertionError(f"dim {self.dim} out of range for value with {value.dim()} dimensions")
        vs = [value.select(self.dim, i) for i in range(value.size(self.dim))]
        return _core.stack([constr.check(v) for v, constr in zip(vs, self.cseq)], self.dim)


# Public interface.
dependent = _Dependent()
if TYPE_CHECKING:  # a property on instances, a constraint on the class: Any for the checkers
    dependent_property: Any
else:
    dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
