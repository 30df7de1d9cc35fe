"""Elementwise math and reductions PyTorch has that are compositions of existing tensor
ops: `addcmul`, `addcdiv`, `nan_to_num`, `nansum`, `nanmean`, `std_mean`, `var_mean`,
`aminmax`, `count_nonzero`, `diff`, `isin`, `logaddexp`, `logaddexp2`, `hypot`, `xlogy`,
`logit`, `sinc`, `deg2rad`, `rad2deg`, `float_power`, `copysign`, `heaviside`, `signbit`,
`sgn`, `positive`, `fix`, `dist`, `renorm`; and their Tensor methods and in-place `_`
twins where PyTorch has them (attached to `Tensor` at the end of this module).

Every result is built from differentiable tensor ops (`where`, `abs`, `exp`, `log1p`,
`maximum`, `sum`, `norm`, ...), never a Python loop over elements, so gradients flow
through each as through PyTorch's own formula, including its values at the edges (0 for
`xlogy` at `x = 0`, `sinc` at 0; NaN for `hypot` at (0, 0), `logit` outside [0, 1]).
Dtypes follow PyTorch: integer inputs give float results where PyTorch's do.
"""

from __future__ import annotations

import builtins
import collections
import inspect
import math
from typing import Any, Callable, Optional, Sequence, Tuple, Union

from ._complex import ComplexTensor
from ._core import (
    DTypeError,
    ShapeError,
    Tensor,
    bfloat16,
    float16,
    float32,
    float64,
    get_default_dtype,
    int16,
    int32,
    int64,
    tensor,
    where,
)
from ._core import bool as _bool

__all__ = [
    "addcmul", "addcdiv", "nan_to_num", "nansum", "nanmean", "std_mean", "var_mean", "aminmax", "count_nonzero",
    "diff", "isin", "logaddexp", "logaddexp2", "hypot", "xlogy", "logit", "sinc", "deg2rad", "rad2deg",
    "float_power", "copysign", "heaviside", "signbit", "sgn", "positive", "fix", "dist", "renorm",
]  # fmt: skip

Number = Union[int, float, bool]
DimArg = Optional[Union[int, Sequence[int]]]

# `torch.return_types.aminmax`: a named tuple with `.min` and `.max`.
aminmax_result = collections.namedtuple("aminmax", ("min", "max"), module="candle_py.return_types")  # type: ignore[name-match]

_LN2 = math.log(2.0)


# -- helpers ------------------------------------------------------------------------------


def _need(x: Any, op: str, arg: str = "input") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    return x


def _shape(t: Any) -> str:
    return str(list(t.shape)) if isinstance(t, Tensor) else "[]"


def _broadcast(op: str, *xs: Any) -> Tuple[int, ...]:
    """The broadcast shape of the tensors among `xs`, or a ShapeError naming `op`."""
    shapes = [tuple(x.shape) for x in xs if isinstance(x, Tensor)]
    n = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        sizes = {s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeError(f"{op}: shapes {', '.join(str(list(s)) for s in shapes)} cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _stand_in(x: Any) -> Any:
    """A one-element stand-in of `x` for dtype promotion (0-d stays 0-d, scalars stay)."""
    if isinstance(x, Tensor):
        return x.detach().new_zeros(() if x.dim() == 0 else (1,))
    return x


def _result_dtype(*xs: Any) -> Any:
    """PyTorch's promoted dtype of tensors and Python scalars (through our arithmetic)."""
    acc = _stand_in(xs[0])
    for x in xs[1:]:
        acc = acc * 0 + _stand_in(x) * 0 if not (_is_bool(acc) and _is_bool(x)) else acc.logical_or(_stand_in(x))
    return acc.dtype


def _is_bool(x: Any) -> bool:
    return (isinstance(x, Tensor) and x.dtype == _bool) or isinstance(x, builtins.bool)


def _float_of(dtype: Any) -> Any:
    """`dtype` if floating, else the default float dtype (PyTorch's int -> float rule)."""
    return dtype if dtype.is_floating_point else get_default_dtype()


def _as(x: Any, dtype: Any) -> Tensor:
    """`x` as a tensor of `dtype` (scalars become 0-d tensors)."""
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else x.to(dtype)
    return tensor(x, dtype=dtype)


def _floats(op: str, *xs: Any) -> Tuple[Tensor, ...]:
    """The arguments as tensors of their promoted float dtype (ints promote to the default)."""
    if not any(isinstance(x, Tensor) for x in xs):
        raise TypeError(f"{op}(): expected at least one Tensor argument, got {', '.join(type(x).__name__ for x in xs)}")
    _broadcast(op, *xs)
    dt = _float_of(_result_dtype(*xs))
    return tuple(_as(x, dt) for x in xs)


def _float_only(op: str, *xs: Tensor) -> Tuple[Tensor, ...]:
    """For ops PyTorch implements for floating dtypes only (no int -> float promotion)."""
    for i, x in enumerate(xs):
        _need(x, op, "input" if i == 0 else "other")
    _broadcast(op, *xs)
    dt = _result_dtype(*xs)
    if not dt.is_floating_point:
        raise DTypeError(f"{op}: not implemented for {dt} (expected floating point inputs, got {', '.join(str(x.dtype) for x in xs)})")
    return tuple(_as(x, dt) for x in xs)


def _nan_grad(x: Tensor, bad: Tensor) -> Tensor:
    """Zero (forward) whose gradient with respect to `x` is NaN where `bad` (where `x` is
    infinite there): `0 * sqrt(exp(-|x|))`, the sqrt's infinite slope at 0 times 0. Used
    where PyTorch's formula gives NaN (e.g. `result / self` at an infinite `self`)."""
    return where(bad, (-x.abs()).exp(), 1.0).sqrt() * 0.0


def _dims(dim: DimArg) -> Optional[Tuple[int, ...]]:
    if dim is None:
        return None
    return (dim,) if isinstance(dim, int) else tuple(dim)


# -- arithmetic -----------------------------------------------------------------------------


def _addc(op: str, input: Tensor, tensor1: Tensor, tensor2: Tensor, value: Number) -> Tuple[Tensor, Tensor, Tensor, Number]:
    _need(input, op)
    _need(tensor1, op, "tensor1")
    _need(tensor2, op, "tensor2")
    _broadcast(op, input, tensor1, tensor2)
    dt = _result_dtype(input, tensor1, tensor2)
    if dt == _bool:
        raise DTypeError(f"{op}: not implemented for {dt}")
    if not dt.is_floating_point and isinstance(value, float):
        value = int(value)  # PyTorch casts the value to the integer result type
    return input.to(dt), tensor1.to(dt), tensor2.to(dt), value


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Number = 1) -> Tensor:
    """`input + value * tensor1 * tensor2`, broadcast, in the promoted dtype."""
    a, t1, t2, v = _addc("addcmul", input, tensor1, tensor2, value)
    out = a._addc_out(t1, t2, v, False)  # one pass where it applies, the same values
    if out is not None:
        return out
    return a + t1 * t2 if v == 1 else a + (t1 * v) * t2


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Number = 1) -> Tensor:
    """`input + value * tensor1 / tensor2`, broadcast; integer `tensor1` and `tensor2`
    raise (PyTorch removed integer division here)."""
    if isinstance(tensor1, Tensor) and isinstance(tensor2, Tensor):
        if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
            raise DTypeError(
                f"addcdiv: integer division is not supported (tensor1 {tensor1.dtype}, tensor2 {tensor2.dtype}); "
                "use a floating tensor1 or tensor2"
            )
    a, t1, t2, v = _addc("addcdiv", input, tensor1, tensor2, value)
    out = a._addc_out(t1, t2, v, True)  # one pass where it applies, the same values
    if out is not None:
        return out
    return a + t1 / t2 if v == 1 else a + (t1 * v) / t2


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: Optional[float] = None, neginf: Optional[float] = None) -> Tensor:
    """NaN, +inf and -inf replaced by `nan`, `posinf`, `neginf` (defaults: 0, and the
    dtype's largest and lowest finite values). Integer and bool tensors come back copied."""
    from ._dtype_info import finfo

    _need(input, "nan_to_num")
    if not input.dtype.is_floating_point:
        return input.clone()
    fi = finfo(input.dtype)
    hi = fi.max if posinf is None else posinf
    lo = fi.min if neginf is None else neginf
    x = input
    out = x._nan_to_num_out(float(nan), float(hi), float(lo))  # one pass where it applies
    if out is not None:
        return out
    return where(x.isnan(), nan, where(x == math.inf, hi, where(x == -math.inf, lo, x)))


# -- reductions ---------------------------------------------------------------------------


def _sum(x: Tensor, dim: DimArg, keepdim: bool, dtype: Any) -> Tensor:
    dims = _dims(dim)
    if dims is None or len(dims) == 0:  # PyTorch: no dim, or dim=(), reduces every dim
        if keepdim and x.dim() > 0:
            return x.sum(tuple(range(x.dim())), keepdim=True, dtype=dtype)
        return x.sum(dtype=dtype)
    return x.sum(dims, keepdim=keepdim, dtype=dtype)


def nansum(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The sum treating NaN as zero, over `dim` (an int, a tuple, or all dims)."""
    _need(input, "nansum")
    x = where(input.isnan(), 0.0, input) if input.dtype.is_floating_point else input
    return _sum(x, dim, keepdim, dtype)


def nanmean(input: Tensor, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """The mean of the non-NaN elements over `dim` (NaN where there are none)."""
    _need(input, "nanmean")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    count = _sum(input.isnan().logical_not(), dim, keepdim, None)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def _var_args(op: str, dim: Any, unbiased: Any, correction: Any) -> Tuple[DimArg, Any]:
    if isinstance(dim, builtins.bool):  # the (input, unbiased) overload
        if unbiased is not None:
            raise TypeError(f"{op}(): got an unbiased flag twice")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}(): cannot take both unbiased and correction")
    if correction is None:
        correction = 1 if unbiased is None else int(builtins.bool(unbiased))
    return dim, correction


def _var_with_mean(op: str, input: Tensor, dim: Any, unbiased: Any, keepdim: bool, correction: Any) -> Tuple[Tensor, Tensor]:
    _need(input, op)
    d, corr = _var_args(op, dim, unbiased, correction)
    dims = _dims(d)
    if dims is None or len(dims) == 0:
        dims = tuple(range(input.dim()))
    if input.dim() == 0:
        return input.var(correction=corr), input.mean()
    return input.var(dims, correction=corr, keepdim=keepdim), input.mean(dims, keepdim=keepdim)


def var_mean(
    input: Tensor, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *, correction: Optional[Number] = None
) -> Tuple[Tensor, Tensor]:
    """`(var, mean)` over `dim` (an int, a tuple, or all dims), with Bessel's
    `correction` (default 1; `unbiased=False` is 0). `var_mean(x, False)` as PyTorch."""
    return _var_with_mean("var_mean", input, dim, unbiased, keepdim, correction)


def std_mean(
    input: Tensor, dim: Any = None, unbiased: Optional[bool] = None, keepdim: bool = False, *, correction: Optional[Number] = None
) -> Tuple[Tensor, Tensor]:
    """`(std, mean)` over `dim`, as `var_mean` with the square root of the variance."""
    v, m = _var_with_mean("std_mean", input, dim, unbiased, keepdim, correction)
    return v.sqrt(), m


def aminmax(input: Tensor, *, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    """The named tuple `(min, max)` of `input` over `dim` (or all elements); NaN propagates."""
    _need(input, "aminmax")
    if dim is None:
        if input.numel() == 0:
            raise ShapeError(
                f"aminmax(): cannot compute aminmax of an empty tensor of shape {_shape(input)}: the operation has no identity"
            )
        if keepdim and input.dim() > 0:
            dims = tuple(range(input.dim()))
            return aminmax_result(input.amin(dims, keepdim=True), input.amax(dims, keepdim=True))
        return aminmax_result(input.amin(), input.amax())
    n = builtins.max(input.dim(), 1)
    if not -n <= dim < n:
        raise IndexError(f"aminmax: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    if input.dim() > 0 and input.shape[dim] == 0:
        raise IndexError(f"aminmax: expected reduction dim {dim} to have non-zero size (input of shape {_shape(input)})")
    return aminmax_result(input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim))


def count_nonzero(input: Tensor, dim: DimArg = None) -> Tensor:
    """The number of non-zero elements (int64) over `dim` (an int, a tuple, or all)."""
    _need(input, "count_nonzero")
    nz = input if input.dtype == _bool else input != 0
    return _sum(nz.detach(), dim, False, int64)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Optional[Tensor] = None, append: Optional[Tensor] = None) -> Tensor:
    """The `n`-th forward difference along `dim` (`input[1:] - input[:-1]`, XOR for
    bool), after joining `prepend` and `append` to `input` along `dim`."""
    _need(input, "diff")
    if input.dim() == 0:
        raise ShapeError("diff: expects input to be at least one-dimensional (got a 0-d tensor)")
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    nd = input.dim()
    if not -nd <= dim < nd:
        raise IndexError(f"diff: dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dim = dim % nd
    parts = []
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is not None:
            _need(extra, "diff", name)
            if extra.dim() != nd:
                raise ShapeError(f"diff: expects {name} to have the same number of dims as input ({nd}), got shape {_shape(extra)}")
    from ._core import cat

    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        x = cat(parts, dim)
    else:
        x = input
    lead = (slice(None),) * dim
    for _ in range(n):
        length = x.shape[dim]
        if length == 0:
            break
        hi, lo = x[lead + (slice(1, None),)], x[lead + (slice(0, length - 1),)]
        x = hi.logical_xor(lo) if x.dtype == _bool else hi - lo
    return x


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Bool tensor of `elements`' shape: whether each element occurs in `test_elements`
    (either may be a scalar, not both); `invert=True` negates. Sort-based: the elements
    and test values are sorted together and each element compared with its neighbour."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(
            f"isin(): expected elements or test_elements to be a Tensor, got {type(elements).__name__} and {type(test_elements).__name__}"
        )
    dt = _result_dtype(elements, test_elements)
    if dt == _bool:
        raise DTypeError("isin(): not implemented for bool inputs")
    e = _as(elements, dt).detach()
    t = _as(test_elements, dt).detach().reshape(-1)
    shape = e.shape
    ef = e.reshape(-1)
    if ef.numel() == 0 or t.numel() == 0:
        return e.new_full(shape, builtins.bool(invert), dtype=_bool)
    from ._core import cat

    inverse = None
    if not assume_unique:
        ef, inverse = ef.unique(return_inverse=True)
        t = t.unique()
    both = cat([ef, t])
    values, order = both.sort(stable=True)
    # an element is in the test set when the value after it (sorted, elements first) is equal
    dup = values[1:] == values[:-1]
    if invert:
        dup = dup.logical_not()
    dup = cat([dup, tensor([builtins.bool(invert)], dtype=_bool)])
    mask = dup[order.argsort()][: ef.numel()]
    if inverse is not None:
        mask = mask[inverse]
    return mask.reshape(shape)


# -- elementwise functions ----------------------------------------------------------------


def _logaddexp(op: str, input: Tensor, other: Tensor, two: builtins.bool) -> Tensor:
    a, b = _float_only(op, input, other)
    m = a.maximum(b)
    gap = -(a - b).abs()
    r = m + (gap.exp2().log1p() / _LN2 if two else gap.exp().log1p())
    # both +inf or both -inf: the gap is NaN; the result is that infinity
    return where(a.isinf() & (a == b), a, r)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """`log(exp(input) + exp(other))` without overflow: `max + log1p(exp(-|a - b|))`."""
    return _logaddexp("logaddexp", input, other, False)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """`log2(2**input + 2**other)` without overflow: `max + log1p(2**-|a - b|) / ln 2`."""
    return _logaddexp("logaddexp2", input, other, True)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """`sqrt(input**2 + other**2)` without overflow or underflow (both scaled by the
    larger magnitude); infinite when either is, even with a NaN."""
    a, b = _float_only("hypot", input, other)
    s = a.detach().abs().maximum(b.detach().abs())
    s = where(s.isfinite() & (s > 0), s, 1.0)
    r = ((a / s).square() + (b / s).square()).sqrt() * s
    return where(a.isinf() | b.isinf(), math.inf, r)


def xlogy(input: Union[Tensor, Number], other: Union[Tensor, Number]) -> Tensor:
    """`input * log(other)`, 0 where `input` is 0 (unless `other` is NaN); either
    argument may be a scalar. Integer inputs give the default float dtype."""
    x, y = _floats("xlogy", input, other)
    at0 = x == 0
    # PyTorch's gradient for `input` is `grad * log(other)`, but 0 where input = 0 and other <= 0
    flat = at0 & (y <= 0)
    inf0 = at0 & (y == math.inf)
    out = x * where(flat | inf0, 0.0, y.log())
    # input = 0, other = +inf: the value 0, the input gradient grad * inf (the slope of x^(1/3) at 0)
    out = where(inf0, where(inf0, x, 1.0).pow(1.0 / 3.0), out)
    # the gradient for `other` is `grad * input / other`: NaN at input = other = 0 (sqrt's slope at 0, times 0)
    z = at0 & (y == 0)
    return where(z, out + where(z, y, 1.0).sqrt() * 0.0, out)


def logit(input: Tensor, eps: Optional[float] = None) -> Tensor:
    """`log(p / (1 - p))`, with `p` clamped to `[eps, 1 - eps]` when `eps` is given
    (a negative `eps` is none, as in PyTorch)."""
    _need(input, "logit")
    x = input if input.dtype.is_floating_point else input.to(get_default_dtype())
    if eps is not None and eps >= 0:
        lo = tensor(eps, dtype=x.dtype)
        hi = 1 - lo
        z = where(x < lo, lo, where(x > hi, hi, x))
        return z.log() - (-z).log1p()
    x = x + 0.0  # -0.0 as +0.0: PyTorch's slope at 0 is +inf from either side
    out = x.log() - (-x).log1p()
    # PyTorch's gradient is NaN outside [0, 1] (where the value is NaN too)
    bad = (x < 0) | (x > 1)
    return where(bad, x * where(bad, math.nan, 0.0), out)


def sinc(input: Tensor) -> Tensor:
    """`sin(pi x) / (pi x)`, 1 at 0 (gradient 0 there). Integer inputs give floats."""
    (x,) = _floats("sinc", _need(input, "sinc"))
    at0 = x == 0
    px = where(at0, 1.0, x * math.pi)
    return where(at0, 1.0, px.sin() / px)


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians (`input * pi / 180`); integer inputs give floats."""
    (x,) = _floats("deg2rad", _need(input, "deg2rad"))
    return x * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees (`input * 180 / pi`); integer inputs give floats."""
    (x,) = _floats("rad2deg", _need(input, "rad2deg"))
    return x * (180.0 / math.pi)


def float_power(input: Union[Tensor, Number], exponent: Union[Tensor, Number]) -> Tensor:
    """`input ** exponent` computed in float64 (the result is float64 whatever the inputs)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power(): expected a Tensor argument, got {type(input).__name__} and {type(exponent).__name__}")
    _broadcast("float_power", input, exponent)
    base = input.to(float64) if isinstance(input, Tensor) else float(input)
    exp = exponent.to(float64) if isinstance(exponent, Tensor) else float(exponent)
    out = base.pow(exp) if isinstance(base, Tensor) else base**exp
    if isinstance(exponent, Tensor):
        # `Tensor.pow` with a tensor exponent gives NaN for 1 ** nan, 1 ** inf and (-1) ** +-inf,
        # which C's pow (and PyTorch) define as 1
        b = base if isinstance(base, Tensor) else tensor(base, dtype=float64)
        one = (b == 1) | ((b == -1) & exponent.isinf())
        out = where(one, 1.0, out)
    return out


def signbit(input: Tensor) -> Tensor:
    """Whether the sign bit is set (true for -0.0 and negative NaN); bool, no gradient."""
    _need(input, "signbit")
    dt = input.dtype
    x = input.detach()
    if dt == _bool:
        return x.logical_and(False) if x.numel() else x.clone()
    if not dt.is_floating_point:
        return x < 0
    as_int = {float32: int32, float64: int64, float16: int16, bfloat16: int16}[dt]
    return x.contiguous().view(as_int) < 0


def copysign(input: Tensor, other: Union[Tensor, Number]) -> Tensor:
    """`|input|` with the sign of `other` (a tensor or a scalar; -0.0 counts as negative)."""
    _need(input, "copysign")
    a, b = _floats("copysign", input, other)
    neg = signbit(b)
    mag = a.abs()
    out = where(neg, -mag, mag)
    # PyTorch's gradient is `result / input` (0 at input = 0): NaN at infinite inputs
    bad = a.isfinite().logical_not()
    out = where(bad, out + _nan_grad(a, bad), out)
    if b.requires_grad:  # PyTorch gives `other` a zero gradient: times 1 from an always-false where
        out = out * where(b.isinf() & b.isfinite(), b, 1.0)
    return out


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    """The step function: 0 where `input < 0`, `values` where it is 0, 1 where `> 0`
    (NaN gives 0). `input` and `values` must have one dtype; not differentiable."""
    _need(input, "heaviside")
    _need(values, "heaviside", "values")
    if input.dtype != values.dtype:
        raise DTypeError(f"heaviside: input ({input.dtype}) and values ({values.dtype}) must have the same dtype")
    _broadcast("heaviside", input, values)
    x, v = input.detach(), values.detach()
    if x.dtype == _bool:
        return where(x, True, v)
    return where(x == 0, v, (x > 0).to(x.dtype))


def sgn(input: Tensor) -> Tensor:
    """The sign of each element (for real tensors the same as `sign`; `z / |z|` for complex ones)."""
    if isinstance(input, ComplexTensor):
        return input.sgn()  # type: ignore[return-value]
    return _need(input, "sgn").sign()


def positive(input: Tensor) -> Tensor:
    """`input` itself (`+input`); bool tensors raise, as in PyTorch."""
    _need(input, "positive")
    if input.dtype == _bool:
        raise DTypeError("positive: the `+` operator on a bool tensor is not supported (dtype candle_py.bool)")
    return input


def fix(input: Tensor) -> Tensor:
    """Round toward zero: an alias of `trunc`."""
    _need(input, "fix")
    if input.dtype == _bool:
        raise DTypeError("fix: not implemented for candle_py.bool")
    return input.trunc()


def dist(input: Tensor, other: Tensor, p: Number = 2) -> Tensor:
    """The `p`-norm of `input - other` (broadcast), a 0-d tensor."""
    a, b = _float_only("dist", input, other)
    return (a - b).norm(p)


def renorm(input: Tensor, p: Number, dim: int, maxnorm: Number) -> Tensor:
    """Each slice of `input` along `dim` whose `p`-norm exceeds `maxnorm` scaled down to
    norm `maxnorm` (by `maxnorm / (norm + 1e-7)`); the others unchanged."""
    _need(input, "renorm")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"renorm: expected a floating point tensor, got {input.dtype}")
    if input.dim() < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions (shape {_shape(input)})")
    if not p > 0:
        raise ValueError(f"renorm: non-positive-norm not supported (p={p})")
    if maxnorm < 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    nd = input.dim()
    if not -nd <= dim < nd:
        raise IndexError(f"renorm: dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    dims = tuple(d for d in range(nd) if d != dim % nd)
    norm = input.norm(p, dim=dims, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor


# -- Tensor methods ----------------------------------------------------------------------------


def _kind(dt: Any) -> int:
    return 0 if dt == _bool else (2 if dt.is_floating_point else 1)


def _as_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a Tensor method: `self` is its first argument."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    _name_like(method, fn, fn.__name__)
    method.__doc__ = fn.__doc__
    return method


def _as_inplace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The in-place twin of `fn`: the result (computed from an alias of `self` under its
    own version counter) written into `self` by `copy_`; `self` comes back. As PyTorch,
    the result must keep `self`'s shape and be castable to its dtype."""
    name = fn.__name__ + "_"

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        res = fn(self._inplace_source(), *args, **kwargs)
        if tuple(res.shape) != tuple(self.shape):
            raise ShapeError(f"{name}: output with shape {_shape(self)} doesn't match the broadcast shape {_shape(res)}")
        if _kind(res.dtype) > _kind(self.dtype):
            raise DTypeError(f"{name}: result type {res.dtype} can't be cast to the desired output type {self.dtype}")
        return self.copy_(res)

    _name_like(method, fn, name)
    method.__doc__ = f"In-place `{fn.__name__}`: writes the result into `self` and returns it."
    return method


def _name_like(method: Callable[..., Any], fn: Callable[..., Any], name: str) -> None:
    method.__name__ = name
    method.__qualname__ = "Tensor." + name
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    params[0] = params[0].replace(name="self")
    method.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]


def _float_power_(self: Tensor, exponent: Union[Tensor, Number]) -> Tensor:
    if self.dtype != float64:
        raise DTypeError(
            f"float_power_: the base given to float_power_ has dtype {self.dtype} but the operation's result requires dtype {float64}"
        )
    return _as_inplace(float_power)(self, exponent)


# The Tensor methods of this module (PyTorch's method forms) and their in-place twins.
for _n in (
    "addcmul", "addcdiv", "nan_to_num", "nansum", "nanmean", "aminmax", "count_nonzero", "diff", "logaddexp",
    "logaddexp2", "hypot", "xlogy", "logit", "sinc", "deg2rad", "rad2deg", "float_power", "copysign", "heaviside",
    "signbit", "sgn", "positive", "fix", "dist", "renorm",
):  # fmt: skip
    setattr(Tensor, _n, _as_method(globals()[_n]))
for _n in (
    "nan_to_num", "hypot", "xlogy", "logit", "sinc", "deg2rad", "rad2deg", "copysign",
    "heaviside", "sgn", "fix", "renorm",
):  # fmt: skip
    setattr(Tensor, _n + "_", _as_inplace(globals()[_n]))


def _addc_inplace(fn: Callable[..., Any], divide: bool) -> Callable[..., Any]:
    """`addcmul_` / `addcdiv_`: written directly into `self`'s storage where the Rust
    pass applies (operands of `self`'s dtype and shape, a number `value`, outside
    autograd: an optimizer's update), else `fn`'s in-place twin (same values)."""
    general = _as_inplace(fn)

    def method(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Number = 1) -> Tensor:
        if isinstance(self, Tensor) and self._addc_direct(tensor1, tensor2, value, divide):
            return self
        return general(self, tensor1, tensor2, value=value)

    _name_like(method, fn, fn.__name__ + "_")
    method.__doc__ = f"In-place `{fn.__name__}`: writes the result into `self` and returns it."
    return method


setattr(Tensor, "addcmul_", _addc_inplace(addcmul, False))  # noqa: B010 - attached as the loops attach the others
setattr(Tensor, "addcdiv_", _addc_inplace(addcdiv, True))  # noqa: B010
_name_like(_float_power_, float_power, "float_power_")
_float_power_.__doc__ = "In-place `float_power` (`self` must be float64): writes the result into `self` and returns it."
setattr(Tensor, "float_power_", _float_power_)  # noqa: B010 - attached as the loop above attaches the others
del _n
