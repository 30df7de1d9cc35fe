"""Convolution layers: `Conv1d/2d/3d` and `ConvTranspose1d/2d/3d`, with PyTorch's
signatures, parameter shapes, initialisation, state_dict keys and `extra_repr`.
The arithmetic is `_core._conv` (im2col + GEMM in Rust, differentiable)."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

from .. import _core
from .._core import ShapeError, Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_SPATIAL = {1: "L", 2: "H, W", 3: "D, H, W"}


def _ntuple(v: Any, n: int, layer: str, name: str) -> Tuple[int, ...]:
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"[{layer}] '{name}' must be an int or a tuple of {n} ints, got {v!r}")
        return tuple(int(x) for x in v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"[{layer}] '{name}' must be an int or a tuple of {n} ints, got {v!r}")
    return (int(v),) * n


class _ConvNd(Module):
    _nd = 0
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        output_padding: Any = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name, n = type(self).__name__, self._nd
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"[{name}] '{arg}' must be a positive integer, got {v!r}")
        if in_channels % groups != 0:
            raise ValueError(f"[{name}] in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"[{name}] out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"[{name}] padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        self.kernel_size = _ntuple(kernel_size, n, name, "kernel_size")
        self.stride = _ntuple(stride, n, name, "stride")
        self.dilation = _ntuple(dilation, n, name, "dilation")
        self.output_padding = _ntuple(output_padding, n, name, "output_padding")
        for arg, vals, lo in (
            ("kernel_size", self.kernel_size, 1),
            ("stride", self.stride, 1),
            ("dilation", self.dilation, 1),
            ("output_padding", self.output_padding, 0),
        ):
            if any(v < lo for v in vals):
                raise ValueError(f"[{name}] '{arg}' must be {'positive' if lo else 'non-negative'}, got {vals}")
        if isinstance(padding, str):
            if self._transposed:
                raise ValueError(f"[{name}] padding must be an int or a tuple of ints, got {padding!r}")
            if padding not in ("same", "valid"):
                raise ValueError(f"[{name}] padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"[{name}] padding='same' is not supported for strided convolutions (stride={self.stride})")
            self.padding: Union[str, Tuple[int, ...]] = padding
        else:
            self.padding = _ntuple(padding, n, name, "padding")
            if any(p < 0 for p in self.padding):
                raise ValueError(f"[{name}] 'padding' must be non-negative, got {self.padding}")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'[{name}] only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.transposed = self._transposed
        self.padding_mode = padding_mode
        # F.pad order: last spatial dim first, (left, right) each.
        pads = []
        if self.padding == "same":
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
        elif self.padding == "valid":
            pads = [0, 0] * n
        else:
            assert not isinstance(self.padding, str)
            for p in reversed(self.padding):
                pads += [p, p]
        self._reversed_padding_repeated_twice = pads
        dt = _core.get_default_dtype() if dtype is None else dtype
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(_core.empty(*shape, dtype=dt, device=device))
        if bias:
            self.bias: Optional[Parameter] = Parameter(_core.empty(out_channels, dtype=dt, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._fans(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def _check_input(self, input: Tensor) -> None:
        name, n = type(self).__name__, self._nd
        if not isinstance(input, Tensor):
            raise TypeError(f"[{name}] expected a Tensor input, got {type(input).__name__}")
        shape = tuple(input.shape)
        if input.ndim not in (n + 1, n + 2):
            raise ShapeError(
                f"[{name}] expected a {n + 1}-d (C, {_SPATIAL[n]}) or {n + 2}-d (N, C, {_SPATIAL[n]}) input, got {list(shape)}"
            )
        c = shape[-n - 1]
        if c != self.in_channels:
            raise ShapeError(
                f"[{name}] expected input with {self.in_channels} channels (N, {self.in_channels}, {_SPATIAL[n]}), got {list(shape)}"
            )

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, 0, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        name = type(self).__name__
        if self.padding_mode != "zeros":
            unbatched = input.ndim == self._nd + 1
            x = input.unsqueeze(0) if unbatched else input
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            out = F._conv_nd(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups, self._nd, f"[{name}]")
            return out.squeeze(0) if unbatched else out
        return F._conv_nd(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups, self._nd, f"[{name}]")


class Conv1d(_Conv):
    """1-D convolution layer over (N, C_in, L) or (C_in, L) input, as `torch.nn.Conv1d`:
    `in_channels`, `out_channels`, `kernel_size`, `stride`, `padding` (int, tuple,
    "valid" or "same"), `dilation`, `groups`, `bias` and `padding_mode` ("zeros",
    "reflect", "replicate" or "circular"). Weight (C_out, C_in / groups, K)."""

    _nd = 1


class Conv2d(_Conv):
    """2-D convolution layer over (N, C_in, H, W) or (C_in, H, W) input, with the
    arguments of Conv1d per spatial dim. Weight (C_out, C_in / groups, kH, kW)."""

    _nd = 2


class Conv3d(_Conv):
    """3-D convolution layer over (N, C_in, D, H, W) or unbatched input, with the
    arguments of Conv1d per spatial dim. Weight (C_out, C_in / groups, kD, kH, kW)."""

    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, output_padding, device, dtype
        )

    def _output_padding(self, input: Tensor, output_size: Optional[Sequence[int]]) -> Tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        name, n = type(self).__name__, self._nd
        size = tuple(int(s) for s in output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"[{name}] output_size must have {n} or {n + 2} elements, got {tuple(output_size)}")
        out = []
        for i in range(n):
            pad_i = int(self.padding[i])
            base = (input.shape[-n + i] - 1) * self.stride[i] - 2 * pad_i + self.dilation[i] * (self.kernel_size[i] - 1) + 1
            extra = size[i] - base
            if extra < 0 or (extra >= self.stride[i] and extra >= self.dilation[i]):
                raise ShapeError(
                    f"[{name}] requested an output size of {list(size)}, but valid sizes for input {list(input.shape)} "
                    f"range from {base} to {base + max(self.stride[i], self.dilation[i]) - 1} in spatial dim {i}"
                )
            out.append(extra)
        return tuple(out)

    def forward(self, input: Tensor, output_size: Optional[Sequence[int]] = None) -> Tensor:
        self._check_input(input)
        op = self._output_padding(input, output_size)
        return F._conv_transpose_nd(
            input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation, self._nd, f"[{type(self).__name__}]"
        )


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution layer (upsampling by `stride`): `in_channels`,
    `out_channels`, `kernel_size`, `stride`, `padding`, `output_padding`, `groups`,
    `bias`, `dilation`; `forward(input, output_size=None)` can ask for one of the
    output lengths the stride allows. Weight (C_in, C_out / groups, K)."""

    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution layer, with the arguments of ConvTranspose1d per
    spatial dim. Weight (C_in, C_out / groups, kH, kW)."""

    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution layer, with the arguments of ConvTranspose1d per
    spatial dim. Weight (C_in, C_out / groups, kD, kH, kW)."""

    _nd = 3
