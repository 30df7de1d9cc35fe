"""Convolution and pooling; the arithmetic is in Rust (`_core._conv` / `_max_pool` / `_avg_pool` / `_adaptive_pool`)."""

from __future__ import annotations

from typing import Any, Optional

from ... import _autocast, _core
from ..._core import ShapeError, Tensor
from .common import _check_tensor


def _tuple_n(v: Any, n: int, op: str, name: str) -> tuple:
    if isinstance(v, (list, tuple)):
        if len(v) == 1 and n > 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{op} '{name}' must be an int or a tuple of {n} ints, got {tuple(v)}")
        return tuple(int(x) for x in v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{op} '{name}' must be an int or a tuple of {n} ints, got {v!r}")
    return (v,) * n


def _conv_rank(input: Any, weight: Any, n: int, op: str) -> bool:
    """Checks ranks; returns True for an unbatched (C, *spatial) input."""
    _check_tensor(input, op)
    _check_tensor(weight, op)
    if weight.ndim != n + 2:
        raise ShapeError(f"{op} expected a {n + 2}-d weight, got shape {list(weight.shape)}")
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{op} expected a {n + 1}-d (unbatched) or {n + 2}-d (batched) input, got shape {list(input.shape)}")
    return input.ndim == n + 1


def _conv_nd(
    input: Tensor, weight: Tensor, bias: Optional[Tensor], stride: Any, padding: Any, dilation: Any, groups: int, n: int, op: str
) -> Tensor:
    unbatched = _conv_rank(input, weight, n, op)
    x = input.unsqueeze(0) if unbatched else input
    stride = _tuple_n(stride, n, op, "stride")
    dilation = _tuple_n(dilation, n, op, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * n
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op} padding='same' is not supported for strided convolutions (stride={stride})")
            k = tuple(weight.shape[2:])
            lo = tuple(d * (kk - 1) // 2 for d, kk in zip(dilation, k))
            hi = tuple(d * (kk - 1) - before for d, kk, before in zip(dilation, k, lo))
        else:
            raise ValueError(f"{op} padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
    else:
        lo = hi = _tuple_n(padding, n, op, "padding")
    x, weight, bias, low = _autocast_conv(x, weight, bias)
    out = _core._conv(x, weight, bias, list(stride), list(lo), list(hi), list(dilation), int(groups), False, [0] * n, op)
    out = out if low is None else out.to(low)
    return out.squeeze(0) if unbatched else out


def _autocast_conv(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> "tuple[Tensor, Tensor, Optional[Tensor], Optional[Any]]":
    """Autocast for convolution (on PyTorch's lower-precision list): the operands are
    rounded to the autocast dtype; our convolution kernels take float32/float64
    only, so the rounded operands are convolved in float32 and the result rounded to
    the autocast dtype (PyTorch's CPU half-precision convolutions also accumulate in
    float32). Returns the operands to convolve and the dtype of the result (None
    outside autocast)."""
    low = _autocast.active_dtype(x)
    if low is None:
        return x, weight, bias, None
    x, weight, bias = _autocast.lower(x, weight, bias)
    f32 = _core.float32
    return x.to(f32), weight.to(f32), None if bias is None else bias.to(f32), low


def _conv_transpose_nd(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
    n: int,
    op: str,
) -> Tensor:
    unbatched = _conv_rank(input, weight, n, op)
    x = input.unsqueeze(0) if unbatched else input
    p = _tuple_n(padding, n, op, "padding")
    x, weight, bias, low = _autocast_conv(x, weight, bias)
    out = _core._conv(
        x,
        weight,
        bias,
        list(_tuple_n(stride, n, op, "stride")),
        list(p),
        list(p),
        list(_tuple_n(dilation, n, op, "dilation")),
        int(groups),
        True,
        list(_tuple_n(output_padding, n, op, "output_padding")),
        op,
    )
    out = out if low is None else out.to(low)
    return out.squeeze(0) if unbatched else out


def conv1d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Tensor:
    """1-D convolution (cross-correlation) of `input` (N, C_in, L) or (C_in, L) with
    `weight` (C_out, C_in / groups, K), plus `bias`. `stride`, `padding` (an int,
    a tuple, "valid" or "same"), `dilation` and `groups` as in PyTorch."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d:")


def conv2d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Tensor:
    """2-D convolution of `input` (N, C_in, H, W) or (C_in, H, W) with `weight`
    (C_out, C_in / groups, kH, kW), plus `bias`. `stride`, `padding` (an int, a
    tuple, "valid" or "same"), `dilation` and `groups` as in PyTorch."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d:")


def conv3d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1
) -> Tensor:
    """3-D convolution of `input` (N, C_in, D, H, W) or unbatched with `weight`
    (C_out, C_in / groups, kD, kH, kW), plus `bias`. `stride`, `padding`,
    `dilation` and `groups` as in PyTorch."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d:")


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 1-D convolution (the gradient of conv1d with respect to its input)
    with `weight` (C_in, C_out / groups, K); `output_padding` adds rows on one
    side to pick among the output sizes a stride allows."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 1, "conv_transpose1d:")


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 2-D convolution with `weight` (C_in, C_out / groups, kH, kW);
    `stride`, `padding`, `output_padding`, `groups` and `dilation` as in PyTorch."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 2, "conv_transpose2d:")


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 3-D convolution with `weight` (C_in, C_out / groups, kD, kH, kW);
    `stride`, `padding`, `output_padding`, `groups` and `dilation` as in PyTorch."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 3, "conv_transpose3d:")


def _half_pool(kernel: Any, input: Tensor, *args: Any) -> Any:
    """Run a pooling kernel (float32/float64 only) on float16/bfloat16 input in
    float32 and round the values back, as PyTorch's half-precision CPU pooling
    accumulates in float32 (max pooling is exact either way); autocast makes such
    inputs (a convolution's output), so pooling must take them."""
    if input.dtype not in (_core.float16, _core.bfloat16):
        return kernel(input, *args)
    out = kernel(input.to(_core.float32), *args)
    if isinstance(out, tuple):
        return (out[0].to(input.dtype), *out[1:])
    return out.to(input.dtype)


def _pool_args(input: Any, kernel_size: Any, stride: Any, padding: Any, n: int, op: str) -> tuple:
    _check_tensor(input, op)
    k = _tuple_n(kernel_size, n, op, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else _tuple_n(stride, n, op, "stride")
    return k, s, _tuple_n(padding, n, op, "padding")


def _max_pool_nd(
    input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool, return_indices: bool, n: int, op: str
) -> Any:
    k, s, p = _pool_args(input, kernel_size, stride, padding, n, op)
    d = _tuple_n(dilation, n, op, "dilation")
    if n == 3:
        (input,) = _autocast.fp32(input)  # max_pool3d is on PyTorch's autocast float32 list
    return _half_pool(_core._max_pool, input, list(k), list(s), list(p), list(d), bool(ceil_mode), bool(return_indices), op)


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Maximum over sliding windows of `kernel_size` along the last dim (`stride`
    defaults to the kernel size; padding counts as -inf). `return_indices` also
    returns the flat positions of the maxima."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d:")


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Maximum over sliding `kernel_size` windows of the last two dims, with
    `stride` (default: the kernel size), `padding`, `dilation` and `ceil_mode`;
    `return_indices` also returns the flat positions of the maxima."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d:")


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Maximum over sliding `kernel_size` windows of the last three dims, with
    `stride`, `padding`, `dilation`, `ceil_mode` and `return_indices` as in max_pool2d."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d:")


def _avg_pool_nd(
    input: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Optional[int],
    n: int,
    op: str,
) -> Tensor:
    k, s, p = _pool_args(input, kernel_size, stride, padding, n, op)
    if n == 3:
        (input,) = _autocast.fp32(input)  # avg_pool3d is on PyTorch's autocast float32 list
    return _half_pool(
        _core._avg_pool,
        input,
        list(k),
        list(s),
        list(p),
        bool(ceil_mode),
        bool(count_include_pad),
        None if divisor_override is None else int(divisor_override),
        op,
    )


def avg_pool1d(
    input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True
) -> Tensor:
    """Mean over sliding windows of `kernel_size` along the last dim; `padding`
    counts as zeros unless `count_include_pad=False`."""
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d:")


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Optional[int] = None,
) -> Tensor:
    """Mean over sliding `kernel_size` windows of the last two dims, with `stride`,
    `padding`, `ceil_mode`, `count_include_pad`; `divisor_override` replaces the
    window size as the divisor."""
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2, "avg_pool2d:")


def avg_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Optional[int] = None,
) -> Tensor:
    """Mean over sliding `kernel_size` windows of the last three dims, with the
    arguments of avg_pool2d."""
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3, "avg_pool3d:")


def _adaptive_size(input: Tensor, output_size: Any, n: int, op: str) -> list:
    _check_tensor(input, op)
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{op} expected a {n + 1}-d or {n + 2}-d input, got shape {list(input.shape)}")
    sizes = tuple(output_size) if isinstance(output_size, (list, tuple)) else (output_size,) * n
    if len(sizes) != n:
        raise ValueError(f"{op} output_size must be an int or a tuple of {n} values, got {output_size!r}")
    spatial = tuple(input.shape[-n:])
    return [spatial[i] if v is None else int(v) for i, v in enumerate(sizes)]


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Mean pooling whose windows are chosen so that the last dim becomes `output_size`."""
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 1, "adaptive_avg_pool1d:"),
        False,
        False,
        "adaptive_avg_pool1d:",
    )


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Mean pooling whose windows are chosen so that the last two dims become
    `output_size` (an int, or a pair whose None entries keep the input size)."""
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 2, "adaptive_avg_pool2d:"),
        False,
        False,
        "adaptive_avg_pool2d:",
    )


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Mean pooling whose windows are chosen so that the last three dims become `output_size`."""
    _check_tensor(input, "adaptive_avg_pool3d:")
    (input,) = _autocast.fp32(input)  # on PyTorch's autocast float32 list
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 3, "adaptive_avg_pool3d:"),
        False,
        False,
        "adaptive_avg_pool3d:",
    )


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last dim becomes
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 1, "adaptive_max_pool1d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool1d:",
    )


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last two dims become
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 2, "adaptive_max_pool2d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool2d:",
    )


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last three dims become
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return _half_pool(
        _core._adaptive_pool,
        input,
        _adaptive_size(input, output_size, 3, "adaptive_max_pool3d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool3d:",
    )


def _lp_pool_nd(input: Tensor, norm_type: Any, kernel_size: Any, stride: Any, ceil_mode: bool, nd: int, op: str) -> Tensor:
    """PyTorch's power-average pooling, composed as torch composes it: the mean of
    x ** p over each window times the window's size, to the power 1 / p (p = +-inf:
    max of |x|, -max of -|x|). Padding is always 0."""
    _check_tensor(input, op)
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"{op} norm_type must be a number, got {type(norm_type).__name__}")
    if norm_type == 0:
        raise ValueError(f"norm_type must be a non-zero value, but got {norm_type}")
    if norm_type == float("inf"):
        return _max_pool_nd(input.abs(), kernel_size, stride, 0, 1, ceil_mode, False, nd, op)
    if norm_type == -float("inf"):
        return -_max_pool_nd(-input.abs(), kernel_size, stride, 0, 1, ceil_mode, False, nd, op)
    window = 1
    for k in _tuple_n(kernel_size, nd, op, "kernel_size"):
        window *= k
    out = _avg_pool_nd(input.pow(norm_type), kernel_size, stride, 0, ceil_mode, True, None, nd, op)
    return (out.sign() * out.abs().relu()).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over the last dim: `(sum over the window of x ** p) ** (1 / p)`
    (p = `norm_type`; inf gives max pooling of |x|); `stride` defaults to the kernel size."""
    return _lp_pool_nd(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d:")


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over the last two dims (see `lp_pool1d`)."""
    return _lp_pool_nd(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d:")


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over the last three dims (see `lp_pool1d`)."""
    return _lp_pool_nd(input, norm_type, kernel_size, stride, ceil_mode, 3, "lp_pool3d:")
