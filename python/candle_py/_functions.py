"""PyTorch's function forms (`cp.exp(x)`, `cp.sum(x, 1)`, ...) of Tensor methods.

Each function forwards to the Tensor method of the same name, so the behaviour
is defined once, in the core (the compositions `isnan`, `isclose`, `fmod`, ... too:
src/bindings/compare.rs).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from ._complex import ComplexTensor, _as_complex
from ._core import Tensor, tensor

Number = Union[int, float, bool]

__all__ = [
    # unary (and the Tensor-method tables of src/bindings/unary.rs, added below: generated)
    "abs", "neg", "negative", "relu", "sign", "square", "logical_not", "round",
    # binary
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "remainder", "fmod", "pow", "atan2", "arctan2", "polygamma", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "greater", "less", "logical_and", "logical_or", "logical_xor", "matmul", "mm", "bmm", "dot",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "bitwise_not",
    # reductions
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std", "cumsum",
    "softmax", "log_softmax", "all", "any", "norm", "prod", "cumprod", "logsumexp", "logcumsumexp",
    # sorting and selection
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "mode", "nonzero", "argwhere",
    "unique", "unique_consecutive", "bincount",
    # shapes and selection
    "reshape", "transpose", "swapaxes", "swapdims", "permute", "squeeze", "unsqueeze", "flatten", "narrow",
    "chunk", "split", "unbind", "index_select", "gather", "scatter", "scatter_add", "masked_fill",
    "clamp", "clamp_min", "clamp_max", "clip", "flip", "tril", "triu", "t", "broadcast_to",
    # predicates
    "isnan", "isinf", "isfinite", "isclose", "allclose", "equal",
]  # fmt: skip


def _check(x: Any, op: str) -> Tensor:
    if not isinstance(x, (Tensor, ComplexTensor)):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x  # type: ignore[return-value]  # a complex tensor answers the same methods


def _t(x: Any) -> Tensor:
    return x if isinstance(x, (Tensor, ComplexTensor)) else tensor(x)  # type: ignore[return-value]


def _lhs(input: Any, other: Any) -> Tensor:
    """The operand whose method a binary function calls: a complex `other` makes a real
    `input` complex first (`mul(x, z)`), as PyTorch promotes it."""
    if isinstance(other, ComplexTensor) and not isinstance(input, ComplexTensor):
        return _as_complex(input, other._p.dtype, "binary op")  # type: ignore[return-value]
    return _t(input)


def _unary(name: str) -> Callable[..., Tensor]:
    def f(input: Tensor) -> Tensor:
        return getattr(_t(input), name)()  # type: ignore[no-any-return]

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"`{name}(input)`: elementwise, as `torch.{name}`."
    return f


abs = _unary("abs")
neg = negative = _unary("neg")
# <generated: tensor_unary (tools/gen_surface.py)>
__all__ += [
    "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sigmoid", "erf", "reciprocal", "frac", "atan", "asin", "acos", "sinh",
    "cosh", "asinh", "acosh", "atanh", "arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh",
    "exp2", "erfc", "erfinv", "lgamma", "digamma", "floor", "ceil", "trunc",
]  # fmt: skip
exp = _unary("exp")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
expm1 = _unary("expm1")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
reciprocal = _unary("reciprocal")
frac = _unary("frac")
atan = _unary("atan")
asin = _unary("asin")
acos = _unary("acos")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
arctan = _unary("arctan")
arcsin = _unary("arcsin")
arccos = _unary("arccos")
arcsinh = _unary("arcsinh")
arccosh = _unary("arccosh")
arctanh = _unary("arctanh")
exp2 = _unary("exp2")
erfc = _unary("erfc")
erfinv = _unary("erfinv")
lgamma = _unary("lgamma")
digamma = _unary("digamma")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
# </generated>
relu = _unary("relu")


def round(input: Tensor, *, decimals: Optional[int] = None) -> Tensor:
    """Round half to even (to `decimals` decimal places when given), as `torch.round`."""
    return _t(input).round(decimals=decimals)


sign = _unary("sign")
square = _unary("square")
logical_not = _unary("logical_not")
bitwise_not = _unary("bitwise_not")


def _binary(name: str) -> Callable[..., Tensor]:
    def f(input: Any, other: Any) -> Tensor:
        return getattr(_lhs(input, other), name)(other)  # type: ignore[no-any-return]

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"`{name}(input, other)`: elementwise with broadcasting, as `torch.{name}`."
    return f


def add(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """`input + alpha * other`."""
    return _lhs(input, other).add(other if alpha == 1 else other * alpha)


def sub(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """`input - alpha * other`."""
    return _lhs(input, other).sub(other if alpha == 1 else other * alpha)


subtract = sub
mul = multiply = _binary("mul")
true_divide = _binary("div")


def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """Division; `rounding_mode` is None (true division), "floor" or "trunc"."""
    return _lhs(input, other).divide(other, rounding_mode=rounding_mode)


divide = div
floor_divide = _binary("floor_divide")
remainder = _binary("remainder")


def fmod(input: Any, other: Any) -> Tensor:
    """Remainder with the sign of the dividend (C's fmod)."""
    return _t(input).fmod(other)


pow = _binary("pow")
atan2 = _binary("atan2")
arctan2 = _binary("arctan2")
maximum = _binary("maximum")
minimum = _binary("minimum")
eq = _binary("eq")
ne = _binary("ne")
lt = less = _binary("lt")
le = _binary("le")
gt = greater = _binary("gt")
ge = _binary("ge")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
bitwise_left_shift = _binary("bitwise_left_shift")
bitwise_right_shift = _binary("bitwise_right_shift")
matmul = _binary("matmul")
mm = _binary("mm")
bmm = _binary("bmm")
dot = _binary("dot")


def polygamma(n: int, input: Tensor) -> Tensor:
    """The n-th derivative of the digamma function of `input`, elementwise (n >= 0)."""
    return _check(input, "polygamma").polygamma(n)


def _method(name: str) -> Callable[..., Any]:
    def f(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(_t(input), name)(*args, **kwargs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"`{name}(input, ...)`: same as `Tensor.{name}`."
    return f


sum = _method("sum")
mean = _method("mean")
max = _method("max")
min = _method("min")
amax = _method("amax")
amin = _method("amin")
argmax = _method("argmax")
argmin = _method("argmin")
var = _method("var")
std = _method("std")
cumsum = _method("cumsum")
softmax = _method("softmax")
log_softmax = _method("log_softmax")
all = _method("all")
any = _method("any")
norm = _method("norm")
prod = _method("prod")
cumprod = _method("cumprod")
logsumexp = _method("logsumexp")
logcumsumexp = _method("logcumsumexp")
sort = _method("sort")
argsort = _method("argsort")
msort = _method("msort")
topk = _method("topk")
kthvalue = _method("kthvalue")
median = _method("median")
mode = _method("mode")
nonzero = _method("nonzero")
argwhere = _method("argwhere")
unique = _method("unique")
unique_consecutive = _method("unique_consecutive")
bincount = _method("bincount")
reshape = _method("reshape")
transpose = _method("transpose")
swapaxes = _method("swapaxes")
swapdims = _method("swapdims")
permute = _method("permute")
squeeze = _method("squeeze")
unsqueeze = _method("unsqueeze")
flatten = _method("flatten")
narrow = _method("narrow")
chunk = _method("chunk")
split = _method("split")
unbind = _method("unbind")
index_select = _method("index_select")
gather = _method("gather")
scatter = _method("scatter")
scatter_add = _method("scatter_add")
masked_fill = _method("masked_fill")
clamp = _method("clamp")
clamp_min = _method("clamp_min")
clamp_max = _method("clamp_max")
clip = _method("clip")
flip = _method("flip")
tril = _method("tril")
triu = _method("triu")
t = _method("t")
broadcast_to = _method("broadcast_to")


def isnan(input: Tensor) -> Tensor:
    """True where the value is NaN."""
    return _check(input, "isnan").isnan()


def isinf(input: Tensor) -> Tensor:
    """True where the value is +inf or -inf."""
    return _check(input, "isinf").isinf()


def isfinite(input: Tensor) -> Tensor:
    """True where the value is neither NaN nor infinite."""
    return _check(input, "isfinite").isfinite()


def isclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """`|input - other| <= atol + rtol * |other|`, elementwise."""
    return _lhs(_check(input, "isclose"), other).isclose(other, rtol, atol, equal_nan)


def allclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """True when every element is `isclose`."""
    return _lhs(_check(input, "allclose"), other).allclose(other, rtol, atol, equal_nan)


def equal(input: Tensor, other: Tensor) -> bool:
    """True when shapes and all values are equal."""
    return _check(input, "equal").equal(_check(other, "equal"))
