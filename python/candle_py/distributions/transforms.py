"""`torch.distributions.transforms`: invertible maps with their log-abs-det-Jacobians,
for TransformedDistribution (normalizing flows, LogNormal, Gumbel, ...)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, List, Optional, Sequence

from .. import _composed_linalg, _core
from .._core import Tensor
from .._dtype_info import finfo
from .._size import Size
from ..nn.functional import logsigmoid, pad, softplus
from . import constraints
from .utils import _is_number, _sum_rightmost, broadcast_all, lazy_property

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftplusTransform",
    "TanhTransform",
    "SoftmaxTransform",
    "StackTransform",
    "StickBreakingTransform",
    "Transform",
    "identity_transform",
]


class Transform:
    """Abstract class for invertible transformations with computable log det jacobians.

    Args:
        cache_size (int): 0 (no caching) or 1 (cache the latest single value).
    """

    bijective: Any = False
    domain: Any
    codomain: Any

    def __init__(self, cache_size: int = 0) -> None:
        self._cache_size = cache_size
        self._inv: Optional[Transform] = None
        if cache_size == 0:
            pass  # default behavior
        elif cache_size == 1:
            self._cached_x_y: Any = None, None
        else:
            raise ValueError("cache_size must be 0 or 1")
        super().__init__()

    def __getstate__(self) -> Any:
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return int(self.domain.event_dim)
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> "Transform":
        """The inverse Transform, such that `t.inv(t(x)) == x`."""
        inv = self._inv
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = inv
        return inv

    @property
    def sign(self) -> Any:
        """The sign of the Jacobian determinant, if applicable (monotone maps)."""
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> "Transform":
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        # Necessary for Python2
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Any) -> Any:
        """Computes the transform `x => y`."""
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y: Any) -> Any:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x: Any) -> Any:
        raise NotImplementedError

    def _inverse(self, y: Any) -> Any:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        """log |dy/dx| given input and output."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"

    def forward_shape(self, shape: Any) -> Any:
        """The output shape for an input shape."""
        return shape

    def inverse_shape(self, shape: Any) -> Any:
        """The input shape for an output shape."""
        return shape


class _InverseTransform(Transform):
    """Inverts a single Transform."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> Any:
        assert self._inv is not None
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> Any:
        assert self._inv is not None
        return self._inv.domain

    @property
    def bijective(self) -> Any:  # type: ignore[override]
        assert self._inv is not None
        return self._inv.bijective

    @property
    def sign(self) -> Any:
        assert self._inv is not None
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        assert self._inv is not None
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        assert self._inv is not None
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _InverseTransform):
            return False
        assert self._inv is not None
        return self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({repr(self._inv)})"

    def __call__(self, x: Any) -> Any:
        assert self._inv is not None
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        assert self._inv is not None
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape: Any) -> Any:
        assert self._inv is not None
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape: Any) -> Any:
        assert self._inv is not None
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """Composes multiple transforms in a chain (applied first to last)."""

    def __init__(self, parts: List[Transform], cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ComposeTransform):
            return False
        return self.parts == other.parts

    __hash__ = object.__hash__

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> Any:
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        # Adjust event_dim to be maximum among all parts.
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        assert event_dim >= domain.event_dim
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> Any:
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        # Adjust event_dim to be maximum among all parts.
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        assert event_dim >= codomain.event_dim
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @lazy_property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self) -> Any:  # type: ignore[override]
        sign: Any = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        inv = self._inv
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = inv
            inv._inv = self
        return inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x: Any) -> Any:
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        if not self.parts:
            return _core.zeros_like(x)
        # Compute intermediates. This will be free if parts[:-1] are all cached.
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, x, y in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(x, y), event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape: Any) -> Any:
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape: Any) -> Any:
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        fmt_string = self.__class__.__name__ + "(\n    "
        fmt_string += ",\n    ".join([p.__repr__() for p in self.parts])
        fmt_string += "\n)"
        return fmt_string


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """Wraps a transform to treat `reinterpreted_batch_ndims` extra rightmost dims as dependent."""

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> Any:
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> Any:
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> Any:  # type: ignore[override]
        return self.base_transform.bijective

    @property
    def sign(self) -> Any:
        return self.base_transform.sign

    def _call(self, x: Any) -> Any:
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y: Any) -> Any:
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({repr(self.base_transform)}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape: Any) -> Any:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape: Any) -> Any:
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Unit Jacobian transform to reshape the rightmost part of a tensor."""

    bijective = True

    def __init__(self, in_shape: Any, out_shape: Any, cache_size: int = 0) -> None:
        self.in_shape = Size(in_shape)
        self.out_shape = Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self) -> Any:
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self) -> Any:
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x: Any) -> Any:
        batch_shape = x.shape[: x.dim() - len(self.in_shape)]
        return x.reshape(tuple(batch_shape) + tuple(self.out_shape))

    def _inverse(self, y: Any) -> Any:
        batch_shape = y.shape[: y.dim() - len(self.out_shape)]
        return y.reshape(tuple(batch_shape) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        batch_shape = x.shape[: x.dim() - len(self.in_shape)]
        return x.new_zeros(tuple(batch_shape))

    def forward_shape(self, shape: Any) -> Any:
        if len(shape) < len(self.in_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.in_shape)
        if tuple(shape[cut:]) != tuple(self.in_shape):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {self.in_shape}")
        return Size(tuple(shape[:cut]) + tuple(self.out_shape))

    def inverse_shape(self, shape: Any) -> Any:
        if len(shape) < len(self.out_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.out_shape)
        if tuple(shape[cut:]) != tuple(self.out_shape):
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {self.out_shape}")
        return Size(tuple(shape[:cut]) + tuple(self.in_shape))


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExpTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return x.exp()

    def _inverse(self, y: Any) -> Any:
        return y.log()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return x


class PowerTransform(Transform):
    """y = x ** exponent."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self) -> Any:  # type: ignore[override]
        return self.exponent.sign()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all().item())

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return x.pow(self.exponent)

    def _inverse(self, y: Any) -> Any:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape: Any) -> Any:
        return _composed_linalg.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape: Any) -> Any:
        return _composed_linalg.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _clipped_sigmoid(x: Tensor) -> Tensor:
    fi = finfo(x.dtype)
    return x.sigmoid().clamp(min=fi.tiny, max=1.0 - fi.eps)


class SigmoidTransform(Transform):
    """y = 1 / (1 + exp(-x)) (clipped to (0, 1) of the dtype)."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigmoidTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return _clipped_sigmoid(x)

    def _inverse(self, y: Any) -> Any:
        fi = finfo(y.dtype)
        y = y.clamp(min=fi.tiny, max=1.0 - fi.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)) (inverse: x = log(exp(y) - 1))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftplusTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return softplus(x)

    def _inverse(self, y: Any) -> Any:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return -softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x) (the log-det in the numerically stable form of PyTorch's)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TanhTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return x.tanh()

    def _inverse(self, y: Any) -> Any:
        # We do not clamp to the boundary here as it may degrade the performance of certain algorithms.
        # one should use `cache_size=1` instead
        return y.atanh()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        # We use a formula that is more numerically stable, see details in the following link
        # https://github.com/tensorflow/probability/blob/master/tensorflow_probability/python/bijectors/tanh.py#L69-L80
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x| (not bijective)."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return x.abs()

    def _inverse(self, y: Any) -> Any:
        return y


class AffineTransform(Transform):
    """y = loc + scale * x (pointwise, or over `event_dim` rightmost dims)."""

    bijective = True

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self) -> Any:
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self) -> Any:
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        if _is_number(self.loc) and _is_number(other.loc):
            if self.loc != other.loc:
                return False
        else:
            if not bool((self.loc == other.loc).all().item()):
                return False
        if _is_number(self.scale) and _is_number(other.scale):
            if self.scale != other.scale:
                return False
        else:
            if not bool((self.scale == other.scale).all().item()):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self) -> Any:
        if _is_number(self.scale):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x: Any) -> Any:
        return self.loc + self.scale * x

    def _inverse(self, y: Any) -> Any:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        shape = x.shape
        scale = self.scale
        if _is_number(scale):
            result = _core.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self.event_dim:
            result_size = tuple(result.size()[: -self.event_dim]) + (-1,)
            result = result.view(result_size).sum(-1)
            shape = shape[: -self.event_dim]
        return result.expand(tuple(shape))

    def forward_shape(self, shape: Any) -> Any:
        return _composed_linalg.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape: Any) -> Any:
        return _composed_linalg.broadcast_shapes(shape, getattr(self.loc, "shape", ()), getattr(self.scale, "shape", ()))


class SoftmaxTransform(Transform):
    """Softmax over the last dimension (not bijective; the inverse is the log)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftmaxTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        logprobs = x
        probs = (logprobs - logprobs.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y: Any) -> Any:
        return y.log()

    def forward_shape(self, shape: Any) -> Any:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    def inverse_shape(self, shape: Any) -> Any:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape


class StickBreakingTransform(Transform):
    """Unconstrained R^(K-1) -> the K-simplex by stick breaking (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return pad(z, [0, 1], value=1) * pad(z_cumprod, [1, 0], value=1)

    def _inverse(self, y: Any) -> Any:
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones(y_crop.shape[-1]).cumsum(-1)
        sf = 1 - y_crop.cumsum(-1)
        # we clamp to make sure that sf is positive which sometimes does not
        # happen when y[-1] ~ 0 or y[:-1].sum() ~ 1
        sf = sf.clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        offset = x.shape[-1] + 1 - x.new_ones(x.shape[-1]).cumsum(-1)
        x = x - offset.log()
        # use the identity 1 - sigmoid(x) = exp(-x) * sigmoid(x)
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: Any) -> Any:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape: Any) -> Any:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(Transform):
    """Unconstrained matrices -> lower-triangular matrices with positive diagonals."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = object.__hash__

    def _call(self, x: Any) -> Any:
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y: Any) -> Any:
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class CatTransform(Transform):
    """Applies a sequence of transforms to the slices of dimension `dim` (as `torch.cat`)."""

    transforms: List[Transform]

    def __init__(self, tseq: Sequence[Transform], dim: int = 0, lengths: Optional[Sequence[int]] = None, cache_size: int = 0) -> None:
        assert all(isinstance(t, Transform) for t in tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        if lengths is None:
            lengths = [1] * len(self.transforms)
        self.lengths = list(lengths)
        assert len(self.lengths) == len(self.transforms)
        self.dim = dim

    @lazy_property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(t.event_dim for t in self.transforms)

    @lazy_property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, x: Any, fn: Any) -> Any:
        assert -x.dim() <= self.dim < x.dim()
        assert x.size(self.dim) == self.length
        out = []
        start = 0
        for trans, length in zip(self.transforms, self.lengths):
            out.append(fn(trans, x.narrow(self.dim, start, length)))
            start = start + length
        return _core.cat(out, dim=self.dim)

    def _call(self, x: Any) -> Any:
        return self._slices(x, lambda t, s: t(s))

    def _inverse(self, y: Any) -> Any:
        return self._slices(y, lambda t, s: t.inv(s))

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        assert -x.dim() <= self.dim < x.dim()
        assert x.size(self.dim) == self.length
        assert -y.dim() <= self.dim < y.dim()
        assert y.size(self.dim) == self.length
        logdetjacs = []
        start = 0
        for trans, length in zip(self.transforms, self.lengths):
            xslice = x.narrow(self.dim, start, length)
            yslice = y.narrow(self.dim, start, length)
            logdetjac = trans.log_abs_det_jacobian(xslice, yslice)
            if trans.event_dim < self.event_dim:
                logdetjac = _sum_rightmost(logdetjac, self.event_dim - trans.event_dim)
            logdetjacs.append(logdetjac)
            start = start + length  # avoid += for jit compat
        # Decide whether to concatenate or sum.
        dim = self.dim
        if dim >= 0:
            dim = dim - x.dim()
        dim = dim + self.event_dim
        if dim < 0:
            return _core.cat(logdetjacs, dim=dim)
        return sum(logdetjacs)

    @property
    def bijective(self) -> Any:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self) -> Any:
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self) -> Any:
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Applies a sequence of transforms to the entries of dimension `dim` (as `torch.stack`)."""

    transforms: List[Transform]

    def __init__(self, tseq: Sequence[Transform], dim: int = 0, cache_size: int = 0) -> None:
        assert all(isinstance(t, Transform) for t in tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z: Any) -> List[Any]:
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _call(self, x: Any) -> Any:
        assert -x.dim() <= self.dim < x.dim()
        assert x.size(self.dim) == len(self.transforms)
        return _core.stack([t(s) for s, t in zip(self._slice(x), self.transforms)], dim=self.dim)

    def _inverse(self, y: Any) -> Any:
        assert -y.dim() <= self.dim < y.dim()
        assert y.size(self.dim) == len(self.transforms)
        return _core.stack([t.inv(s) for s, t in zip(self._slice(y), self.transforms)], dim=self.dim)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        assert -x.dim() <= self.dim < x.dim()
        assert x.size(self.dim) == len(self.transforms)
        assert -y.dim() <= self.dim < y.dim()
        assert y.size(self.dim) == len(self.transforms)
        return _core.stack(
            [t.log_abs_det_jacobian(xs, ys) for xs, ys, t in zip(self._slice(x), self._slice(y), self.transforms)], dim=self.dim
        )

    @property
    def bijective(self) -> Any:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self) -> Any:
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self) -> Any:
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """The CDF of a distribution: its support -> (0, 1)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return self.distribution.support

    def _call(self, x: Any) -> Any:
        return self.distribution.cdf(x)

    def _inverse(self, y: Any) -> Any:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Any, y: Any) -> Any:
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
