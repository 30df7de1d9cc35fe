"""Activation functions, softmax and log_softmax, snake. Each calls one core op
(`_core._activation` for the parameterized family) with its own backward."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

from ... import _autocast, _core
from ..._core import Tensor


def _result(input: Tensor, fn: Callable[[Tensor], Tensor], inplace: bool) -> Tensor:
    """`fn(input)`, or with `inplace=True` `input` overwritten with it (PyTorch's in-place
    forms: the same tensor object comes back, and autograd records the write). The
    in-place value is computed from an alias under its own version counter, so the
    op's saved input is not invalidated by its own write."""
    if not inplace:
        return fn(input)
    return input.copy_(fn(input._inplace_source()))


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """`max(input, 0)`, elementwise; `inplace=True` writes the result into `input`
    (`Tensor.relu_`: one pass in its own storage outside autograd)."""
    return input.relu_() if inplace else input.relu()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """`min(max(input, 0), 6)`, elementwise."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamp `input` to `[min_val, max_val]` (default `[-1, 1]`)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    if not input.dtype.is_floating_point and input.dtype != _core.bool:
        # PyTorch keeps an integer input's dtype (its bounds cast to the integer type,
        # truncating), so relu6 of an int64 tensor stays int64; float bounds would promote.
        min_val, max_val = int(min_val), int(max_val)
        return _result(input, lambda input: input.clamp(min_val, max_val), inplace)
    return _result(input, lambda input: input._hardtanh(float(min_val), float(max_val)), inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """`input` where positive, `negative_slope * input` elsewhere."""
    return _result(input, lambda input: _core._activation(input, "leaky_relu", negative_slope=float(negative_slope)), inplace)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """`input` where positive, `weight * input` elsewhere; a `weight` of several
    values holds one slope per channel (dim 1)."""
    input, weight = _autocast.lower(input, weight)  # on PyTorch's autocast lower-precision list
    w = weight
    if input.ndim >= 2 and weight.numel() > 1:
        w = weight.reshape(*([1, weight.numel()] + [1] * (input.ndim - 2)))
    return _core.where(input > 0, input, input * w)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: a slope drawn from U(lower, upper) per element in
    training, the fixed slope (lower + upper) / 2 in evaluation."""
    if training:
        slope = _core.rand_like(input) * (upper - lower) + lower
        return _result(input, lambda input: _core.where(input >= 0, input, input * slope), inplace)
    return _result(input, lambda input: _core.where(input >= 0, input, input * ((lower + upper) / 2)), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """`input` where positive, `alpha * (exp(input) - 1)` elsewhere."""
    return _result(input, lambda input: _core._activation(input, "elu", alpha=float(alpha)), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with the fixed constants of self-normalizing networks (`scale * elu(input, alpha)`)."""
    return _result(input, lambda input: _core._activation(input, "selu"), inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """`input` where positive, `alpha * (exp(input / alpha) - 1)` elsewhere."""
    return _result(input, lambda input: _core._activation(input, "celu", alpha=float(alpha)), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit `input * Phi(input)`; `approximate="tanh"` uses the
    tanh approximation instead of the exact erf form."""
    if approximate == "none":
        if not input.dtype.is_floating_point:
            # As PyTorch (no GELU kernel for integer or bool tensors) and as the tanh form,
            # whose `_activation` kernel refuses them with the same message.
            raise _core.DTypeError(f"gelu: expected a floating point input, got {input.dtype.name}")
        return input._gelu()
    if approximate == "tanh":
        return _core._activation(input, "gelu_tanh")
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * sigmoid(input)` (swish)."""
    return _result(input, lambda input: _core._activation(input, "silu"), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """`log(1 + exp(beta * input)) / beta`, smooth ReLU; where `beta * input`
    exceeds `threshold` the result is `input` itself."""
    if not isinstance(beta, (int, float)) or not isinstance(threshold, (int, float)):
        raise TypeError(f"softplus(): beta and threshold must be numbers, got {type(beta).__name__} and {type(threshold).__name__}")
    return _core._activation(input, "softplus", beta=float(beta), threshold=float(threshold))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * tanh(softplus(input))`."""
    return _result(input, lambda input: _core._activation(input, "mish"), inplace)


def sigmoid(input: Tensor) -> Tensor:
    """`1 / (1 + exp(-input))`, elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """Piecewise-linear sigmoid: `clamp(input + 3, 0, 6) / 6`."""
    return _result(input, lambda input: _core._activation(input, "hardsigmoid"), inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * clamp(input + 3, 0, 6) / 6`."""
    return _result(input, lambda input: _core._activation(input, "hardswish"), inplace)


def softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Optional[Any] = None) -> Tensor:
    """Exponentials along `dim` normalized to sum to 1 (`dim=None` means the last
    dim); `dtype` casts the input first."""
    return input.softmax(-1 if dim is None else dim, dtype)


def log_softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Optional[Any] = None) -> Tensor:
    """`log(softmax(input, dim))`, computed stably; `dtype` casts the input first."""
    return input.log_softmax(-1 if dim is None else dim, dtype)


def snake(x: Tensor, alpha: Tensor) -> Tensor:
    """Snake activation: `x + 1/(alpha + 1e-9) * sin(alpha * x)^2` (alpha broadcast, e.g. (1, C, 1))."""
    s = (alpha * x).sin()
    return x + (alpha + 1e-9).reciprocal() * (s * s)


def softsign(input: Tensor) -> Tensor:
    """`input / (1 + |input|)`, elementwise."""
    return input / (input.abs() + 1)


def softmin(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3, dtype: Optional[Any] = None) -> Tensor:
    """`softmax(-input, dim)`: weights that favour the smallest values; `dim=None`
    picks PyTorch's legacy implicit dim (0 for 0-, 1- and 3-D input, else 1) and
    warns; `dtype` casts the input first."""
    x = input if dtype is None else input.to(dtype)
    if dim is None:
        # PyTorch's legacy implicit dim: 0 for 0-, 1- and 3-D input, else 1 (with its warning).
        warnings.warn(
            "Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X as an argument.",
            stacklevel=_stacklevel,
        )
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return (-x).softmax(dim)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """`input` where `|input| > lambd`, 0 elsewhere."""
    # NaN fails both comparisons and stays NaN, as in PyTorch.
    return _core.where(input.abs() <= lambd, input * 0.0, input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """`input - lambd` above `lambd`, `input + lambd` below `-lambd`, 0 between;
    `lambd` must be non-negative, as in PyTorch."""
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}.")
    # PyTorch's branches: NaN falls through to `input * 0`, which keeps it NaN.
    return _core.where(input > lambd, input - lambd, _core.where(input < -lambd, input + lambd, input * 0.0))


def tanhshrink(input: Tensor) -> Tensor:
    """`input - tanh(input)`, elementwise."""
    return input - input.tanh()


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """`input` where `input > threshold`, `value` elsewhere (NaN stays NaN, as in PyTorch)."""
    return _result(input, lambda input: _core.where(input <= threshold, _core.full_like(input, value), input), inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: split `input` in two halves `a, b` along `dim` and return
    `a * sigmoid(b)`; the size of `dim` must be even."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(f"glu: dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], but got {dim})")
    if input.shape[d] % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()
