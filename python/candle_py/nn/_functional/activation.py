"""Activation functions, softmax and log_softmax, snake."""

from __future__ import annotations

import math
from typing import Any, Optional

from ... import _core
from ..._core import Tensor


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """`max(input, 0)`, elementwise. `inplace` is accepted for PyTorch compatibility; the result is always a new tensor."""
    return input.relu()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """`min(max(input, 0), 6)`, elementwise."""
    return hardtanh(input, 0.0, 6.0)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """Clamp `input` to `[min_val, max_val]` (default `[-1, 1]`)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return input.clamp(min_val, max_val)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """`input` where positive, `negative_slope * input` elsewhere."""
    return _core.where(input > 0, input, input * negative_slope)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """`input` where positive, `weight * input` elsewhere; a `weight` of several
    values holds one slope per channel (dim 1)."""
    w = weight
    if input.ndim >= 2 and weight.numel() > 1:
        w = weight.reshape(*([1, weight.numel()] + [1] * (input.ndim - 2)))
    return _core.where(input > 0, input, input * w)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: a slope drawn from U(lower, upper) per element in
    training, the fixed slope (lower + upper) / 2 in evaluation."""
    if training:
        slope = _core.rand_like(input) * (upper - lower) + lower
        return _core.where(input >= 0, input, input * slope)
    return _core.where(input >= 0, input, input * ((lower + upper) / 2))


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """`input` where positive, `alpha * (exp(input) - 1)` elsewhere."""
    return _core.where(input > 0, input, (input.clamp(max=0.0).exp() - 1) * alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with the fixed constants of self-normalizing networks (`scale * elu(input, alpha)`)."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return elu(input, alpha) * scale


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """`input` where positive, `alpha * (exp(input / alpha) - 1)` elsewhere."""
    return _core.where(input > 0, input, ((input.clamp(max=0.0) / alpha).exp() - 1) * alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit `input * Phi(input)`; `approximate="tanh"` uses the
    tanh approximation instead of the exact erf form."""
    if approximate == "none":
        return input._gelu()
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * sigmoid(input)` (swish)."""
    return input * input.sigmoid()


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """`log(1 + exp(beta * input)) / beta`, smooth ReLU; where `beta * input`
    exceeds `threshold` the result is `input` itself."""
    if not isinstance(beta, (int, float)) or not isinstance(threshold, (int, float)):
        raise TypeError(f"softplus(): beta and threshold must be numbers, got {type(beta).__name__} and {type(threshold).__name__}")
    scaled = input * beta
    soft = (scaled.clamp(max=threshold)).exp().log1p() / beta
    return _core.where(scaled > threshold, input, soft)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * tanh(softplus(input))`."""
    return input * softplus(input).tanh()


def sigmoid(input: Tensor) -> Tensor:
    """`1 / (1 + exp(-input))`, elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """Piecewise-linear sigmoid: `clamp(input + 3, 0, 6) / 6`."""
    return (input + 3.0).clamp(0.0, 6.0) / 6.0


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """`input * clamp(input + 3, 0, 6) / 6`."""
    return input * (input + 3.0).clamp(0.0, 6.0) / 6.0


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
