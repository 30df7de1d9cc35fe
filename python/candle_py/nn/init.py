"""`nn.init`: PyTorch's initialisers (same distributions), drawing from the
default generator (`candle_py.manual_seed` seeds it) or the `generator=` given.
Each fills its tensor in place."""

from __future__ import annotations

import math
from typing import Optional

from .. import _core
from .._core import Generator, ShapeError, Tensor
from ..autograd import no_grad

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_", "dirac_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_",
    "sparse_",
]  # fmt: skip


def calculate_gain(nonlinearity: str, param: Optional[float] = None) -> float:
    """The recommended scale for weights feeding `nonlinearity` ("relu", "tanh",
    "leaky_relu" with slope `param`, "selu", ...), as `torch.nn.init.calculate_gain`."""
    linear = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid"}
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ShapeError(f"fan in and fan out can not be computed for tensor with fewer than 2 dimensions (shape {list(t.shape)})")
    receptive = 1
    for d in t.shape[2:]:
        receptive *= d
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Fill `tensor` in place with draws from U(a, b); returns it."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Fill `tensor` in place with draws from N(mean, std**2); returns it."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill `tensor` in place with `val`; returns it."""
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill `tensor` in place with zeros; returns it."""
    with no_grad():
        return tensor.zero_()


def ones_(tensor: Tensor) -> Tensor:
    """Fill `tensor` in place with ones; returns it."""
    return constant_(tensor, 1.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill the 2-D `tensor` in place with the identity matrix; returns it."""
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: only tensors with 2 dimensions are supported, got shape {list(tensor.shape)}")
    with no_grad():
        return tensor.copy_(_core.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill the 3-, 4- or 5-D `tensor` in place with the Dirac delta (as
    `torch.nn.init.dirac_`): a convolution with it is the identity on the first
    `min(out_channels // groups, in_channels)` channels of each group; returns it."""
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = list(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    center = tuple(s // 2 for s in sizes[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min_dim):
                tensor[(g * out_per_group + d, d) + center] = 1
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Glorot initialization: U(-a, a) with `a = gain * sqrt(6 / (fan_in + fan_out))`,
    in place; returns `tensor`."""
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """Glorot initialization: N(0, std**2) with `std = gain * sqrt(2 / (fan_in + fan_out))`,
    in place; returns `tensor`."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    fan_in, fan_out = _fans(tensor)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan = fan_in if mode == "fan_in" else fan_out
    if fan == 0:
        return 0.0
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Optional[Generator] = None,
) -> Tensor:
    """He initialization: U(-bound, bound) with `bound = sqrt(3) * gain / sqrt(fan)`,
    where `fan` is fan_in or fan_out (`mode`) and the gain comes from
    `nonlinearity` and its slope `a`; in place, returns `tensor`."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Optional[Generator] = None,
) -> Tensor:
    """He initialization: N(0, std**2) with `std = gain / sqrt(fan)` (`mode` picks
    fan_in or fan_out, `nonlinearity` and `a` the gain); in place, returns `tensor`."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Optional[Generator] = None,
) -> Tensor:
    """Normal values redrawn until they fall in [a, b]."""
    if not (math.isfinite(mean) and math.isfinite(std) and std >= 0 and a < b):
        raise ValueError(f"trunc_normal_: need finite mean and std >= 0 and a < b, got mean={mean}, std={std}, a={a}, b={b}")
    with no_grad():
        n = tensor.numel()
        out = _core.empty(0, dtype=tensor.dtype, device=tensor.device)
        for _ in range(1000):  # a bound, not a hang, when [a, b] lies far in a tail
            if out.numel() >= n:
                break
            draw = _core.randn(max(2 * n, 16), generator=generator, dtype=tensor.dtype, device=tensor.device) * std + mean
            keep = draw[(draw >= a).logical_and(draw <= b)]
            out = _core.cat([out, keep])
        if out.numel() < n:
            raise ValueError(f"trunc_normal_: [{a}, {b}] is too far from mean={mean} (std={std}) to sample")
        return tensor.copy_(out[:n].reshape(tuple(tensor.shape)))


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Optional[Generator] = None) -> Tensor:
    """A (semi-)orthogonal matrix times `gain`, as PyTorch: the tensor viewed as (rows,
    numel / rows) is the Q of a QR decomposition of N(0, 1) draws (of its transpose when
    wider than tall), Q's columns signed by R's diagonal; in place, returns `tensor`."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from .. import linalg

    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = _core.empty(rows, cols, dtype=tensor.dtype, device=tensor.device).normal_(0.0, 1.0, generator=generator)
        if rows < cols:
            flat = flat.t()
        q, r = linalg.qr(flat)
        q = q * r.diagonal(0, -2, -1).sign()
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tuple(tensor.shape)))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Optional[Generator] = None) -> Tensor:
    """N(0, std**2) draws with `ceil(sparsity * rows)` entries of each column set to zero
    (rows picked at random per column), as PyTorch; a 2-D tensor, in place."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0.0, std, generator=generator)
        for col in range(cols):
            zero_rows = _core.randperm(rows, generator=generator)[:num_zeros]
            tensor[zero_rows, col] = 0
    return tensor


# A non-tensor argument raises TypeError, not AttributeError (see _typecheck.py).
from ._typecheck import type_check_functions as _type_check  # noqa: E402

_type_check(globals(), __all__)
