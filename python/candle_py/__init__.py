"""candle_py: PyTorch-style tensors and autograd on Hugging Face Candle.

`import candle_py as cp`, then use it as you would `torch`: `cp.tensor`,
`cp.zeros`, `x.backward()`, `with cp.no_grad(): ...`.
"""
from __future__ import annotations

from . import _core
from ._core import (
    BackendError,
    DeviceError,
    DTypeError,
    ShapeError,
    Tensor,
    arange,
    as_tensor,
    cat,
    device,
    dtype,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_default_device,
    initial_seed,
    is_grad_enabled,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    set_default_device,
    stack,
    tensor,
    where,
    zeros,
    zeros_like,
)
from ._core import (
    bfloat16,
    bool,
    float16,
    float32,
    float64,
    int16,
    int32,
    int64,
    uint8,
    uint32,
)
from . import autograd, cuda, keras, metal, nn, optim, safetensors, utils
from .safetensors import load_file, save_file
from .autograd import enable_grad, no_grad, set_grad_enabled
from ._functions import (  # the torch.* function forms of Tensor methods
    abs, neg, negative, exp, log, log2, log10, log1p, expm1, sqrt, rsqrt, sin, cos, tan, tanh,
    sigmoid, relu, floor, ceil, round, trunc, frac, sign, square, reciprocal, erf, logical_not,
    add, sub, subtract, mul, multiply, div, divide, true_divide, floor_divide, remainder, fmod,
    pow, maximum, minimum, eq, ne, lt, le, gt, ge, greater, less, logical_and, logical_or,
    logical_xor, matmul, mm, bmm, dot, sum, mean, max, min, amax, amin, argmax, argmin, var,
    std, cumsum, softmax, log_softmax, all, any, norm, prod, reshape, transpose, swapaxes, permute,
    squeeze, unsqueeze, flatten, narrow, chunk, split, unbind, index_select, gather, scatter,
    scatter_add, masked_fill, clamp, clip, flip, tril, triu, t, broadcast_to, isnan, isinf,
    isfinite, isclose, allclose, equal,
)

__version__: str = _core.__version__

# PyTorch's aliases.
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
concat = cat
concatenate = cat

if __version__ != _core.__version__:  # pragma: no cover - a stale build next to new sources
    raise ImportError(f"candle_py: compiled core {_core.__version__} does not match the package {__version__}")


def _dtype_from_name(name: str) -> dtype:
    """Unpickling support for dtypes."""
    return getattr(_core, name)  # type: ignore[no-any-return]


def is_tensor(obj: object) -> builtins_bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> builtins_int:
    if not isinstance(input, Tensor):
        raise TypeError(f"numel(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.numel()


import builtins as _builtins

builtins_bool = _builtins.bool
builtins_int = _builtins.int

__all__ = [
    "Tensor", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange",
    "linspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like", "ones_like",
    "full_like", "empty_like", "rand_like", "randn_like", "cat", "concat", "concatenate",
    "stack", "where", "device", "dtype", "set_default_device", "get_default_device", "manual_seed", "initial_seed", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "autograd", "cuda", "metal",
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "uint8",
    "uint32", "int16", "short", "int32", "int", "int64", "long", "bool",
    "ShapeError", "DTypeError", "DeviceError", "BackendError", "is_tensor", "numel",
    "nn", "optim", "utils", "keras", "safetensors", "load_file", "save_file",

    "abs", "neg", "negative", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt",
    "sin", "cos", "tan", "tanh", "sigmoid", "relu", "floor", "ceil", "round", "trunc", "frac",
    "sign", "square", "reciprocal", "erf", "logical_not", "add", "sub", "subtract", "mul",
    "multiply", "div", "divide", "true_divide", "floor_divide", "remainder", "fmod", "pow",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less", "logical_and",
    "logical_or", "logical_xor", "matmul", "mm", "bmm", "dot", "sum", "mean", "max", "min",
    "amax", "amin", "argmax", "argmin", "var", "std", "cumsum", "softmax", "log_softmax", "all",
    "any", "norm", "prod", "reshape", "transpose", "swapaxes", "permute", "squeeze", "unsqueeze",
    "flatten", "narrow", "chunk", "split", "unbind", "index_select", "gather", "scatter",
    "scatter_add", "masked_fill", "clamp", "clip", "flip", "tril", "triu", "t", "broadcast_to",
    "isnan", "isinf", "isfinite", "isclose", "allclose", "equal",
]
