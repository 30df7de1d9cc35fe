"""Activation layers: each wraps its `nn.functional` twin (defined once there)."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = [
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
    "Sigmoid", "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softmax", "LogSoftmax",
    "Softsign", "Softmin", "Hardshrink", "Softshrink", "Tanhshrink", "Threshold", "GLU",
]  # fmt: skip


class _Elementwise(Module):
    """An activation with PyTorch's `inplace` flag: with `inplace=True` the result
    is written into the input, which is returned."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Elementwise):
    """`F.relu` as a layer: `max(x, 0)`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)


class ReLU6(_Elementwise):
    """`F.relu6` as a layer: `min(max(x, 0), 6)`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.relu6(input, inplace=self.inplace)


class SiLU(_Elementwise):
    """`F.silu` as a layer: `x * sigmoid(x)`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)


class Mish(_Elementwise):
    """`F.mish` as a layer: `x * tanh(softplus(x))`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, inplace=self.inplace)


class SELU(_Elementwise):
    """`F.selu` as a layer: the self-normalizing scaled ELU."""

    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input, inplace=self.inplace)


class Hardsigmoid(_Elementwise):
    """`F.hardsigmoid` as a layer: `clamp(x + 3, 0, 6) / 6`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input, inplace=self.inplace)


class Hardswish(_Elementwise):
    """`F.hardswish` as a layer: `x * clamp(x + 3, 0, 6) / 6`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, inplace=self.inplace)


class Sigmoid(Module):
    """`1 / (1 + exp(-x))` as a layer."""

    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Tanh(Module):
    """Hyperbolic tangent as a layer."""

    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class LeakyReLU(_Elementwise):
    """`F.leaky_relu` as a layer: `x` where positive, `negative_slope * x` elsewhere."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Elementwise):
    """`F.elu` as a layer: `x` where positive, `alpha * (exp(x) - 1)` elsewhere."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(_Elementwise):
    """`F.celu` as a layer: `x` where positive, `alpha * (exp(x / alpha) - 1)` elsewhere."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(_Elementwise):
    """`F.hardtanh` as a layer: clamp to `[min_val, max_val]`."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        if min_val > max_val:
            raise ValueError(f"[Hardtanh] min_val ({min_val}) must not be greater than max_val ({max_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class RReLU(_Elementwise):
    """Random negative slope from U(lower, upper) in training; (lower+upper)/2 in eval."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__(inplace)
        if lower > upper:
            raise ValueError(f"[RReLU] lower ({lower}) must not be greater than upper ({upper})")
        self.lower, self.upper = lower, upper

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """`F.gelu` as a layer; `approximate` is "none" (exact, erf) or "tanh"."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"[GELU] approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate='{self.approximate}'"


class Softplus(Module):
    """`F.softplus` as a layer: `log(1 + exp(beta * x)) / beta`, linear above `threshold`."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """`F.softmax` along `dim` as a layer: values along `dim` become positive and sum to 1."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """`F.log_softmax` along `dim` as a layer."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)


class PReLU(Module):
    """Leaky ReLU with a learnable slope (one, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if num_parameters < 1:
            raise ValueError(f"[PReLU] num_parameters must be positive, got {num_parameters}")
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(_core.full((num_parameters,), init, dtype=dtype or _core.get_default_dtype(), device=device))

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softsign(Module):
    """`F.softsign` as a layer: `x / (1 + |x|)`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(Module):
    """`F.tanhshrink` as a layer: `x - tanh(x)`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class Softmin(Module):
    """`F.softmin` along `dim` as a layer: `softmax(-x)`, favouring the smallest values."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Hardshrink(Module):
    """`F.hardshrink` as a layer: `x` where `|x| > lambd`, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """`F.softshrink` as a layer: `x` moved towards 0 by `lambd`, 0 within `[-lambd, lambd]`."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class Threshold(_Elementwise):
    """`F.threshold` as a layer: `x` where `x > threshold`, else `value`."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.threshold, self.value = threshold, value

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """`F.glu` as a layer: first half of `dim` times the sigmoid of the second half."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
