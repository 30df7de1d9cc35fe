"""Padding and resizing (PyTorch's "vision functions"): pad, interpolate."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

from ... import _autocast, _core
from ..._core import ShapeError, Tensor
from .conv_pool import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None) -> Tensor:
    """Pad the last `len(pad) // 2` dims: `pad = (left_last, right_last, left_prev, ...)`.

    Modes: "constant" (with `value`), "reflect", "replicate", "circular"."""
    if len(pad) % 2 != 0 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: padding length must be even and at most 2 * ndim, got {len(pad)} for shape {list(input.shape)}")
    if mode in ("reflect", "replicate"):
        (input,) = _autocast.fp32(input)  # reflection/replication padding are on PyTorch's autocast float32 list
    if mode in ("reflect", "replicate", "circular"):
        _check_index_pad(input, pad, mode)
        # One pass forward and backward (`layers::resample`); None: not a CPU float
        # tensor, or a negative padding (the index_select path below).
        res = _core._pad_index(input, [int(p) for p in pad], mode)
        if res is not None:
            return res
    out = input
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        if left == 0 and right == 0:
            continue
        size = out.shape[dim]
        if mode == "constant":
            if left < 0:
                out = out.narrow(dim, -left, out.shape[dim] + left)
                left = 0
            if right < 0:
                out = out.narrow(dim, 0, out.shape[dim] + right)
                right = 0
            parts = []
            fill = 0.0 if value is None else value
            if left:
                s = list(out.shape)
                s[dim] = left
                parts.append(_core.full(tuple(s), fill, dtype=out.dtype, device=out.device))
            parts.append(out)
            if right:
                s = list(out.shape)
                s[dim] = right
                parts.append(_core.full(tuple(s), fill, dtype=out.dtype, device=out.device))
            out = _core.cat(parts, dim)
            continue
        # Reflect and circular sizes were checked by `_check_index_pad`.
        if mode == "reflect":
            idx = list(range(left, 0, -1)) + list(range(size)) + list(range(size - 2, size - 2 - right, -1))
        elif mode == "replicate":
            idx = [0] * left + list(range(size)) + [size - 1] * right
        elif mode == "circular":
            idx = [(j - left) % size for j in range(size + left + right)]
        else:
            raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
        out = out.index_select(dim, _core.tensor(idx, device=out.device))
    return out


def _check_index_pad(input: Tensor, pad: Sequence[int], mode: str) -> None:
    """PyTorch's limits on the non-constant paddings: 1 to 3 padded dims, of an input
    with one or two more dims (N, C); reflect and circular sizes per padded dim."""
    n = len(pad) // 2
    if not 1 <= n <= 3 or input.ndim not in (n + 1, n + 2):
        raise NotImplementedError(
            f"pad: padding size {len(pad)} is not supported for {input.ndim}D input tensor in {mode!r} mode; supported: "
            "2D or 3D input with padding size 2, 3D or 4D with 4, 4D or 5D with 6"
        )
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        left, right, size = int(pad[2 * i]), int(pad[2 * i + 1]), input.shape[dim]
        if mode == "reflect" and (left >= size or right >= size):
            raise ValueError(f"pad: reflect padding ({left}, {right}) must be smaller than the input size {size} in dim {dim}")
        if mode == "circular" and (left > size or right > size):
            raise ValueError(f"pad: circular padding ({left}, {right}) is larger than the input size {size} in dim {dim}")


_Size = Union[int, Sequence[int], None]
_Scale = Union[float, Sequence[float], None]


def _per_dim(v: Any, n: int, what: str) -> Optional[Tuple[Any, ...]]:
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return (v,) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"interpolate: {what} must have {n} elements for {n} spatial dims, got {v}")
    return v


def _resize_dim(x: Tensor, dim: int, out: int, scale: Optional[float], mode: str, align_corners: bool) -> Tensor:
    size = x.shape[dim]
    if out == size and scale in (None, 1.0):
        return x
    if mode in ("nearest", "nearest-exact"):
        s = (1.0 / scale) if scale else size / out
        off = 0.5 if mode == "nearest-exact" else 0.0  # nearest-exact samples pixel centres
        idx = [min(int(math.floor((i + off) * s)), size - 1) for i in range(out)]
        return x.index_select(dim, _core.tensor(idx, device=x.device))
    if mode == "cubic":
        return _cubic_dim(x, dim, out, scale, align_corners)
    # Linear: each output sample mixes its two neighbouring inputs.
    if align_corners:
        s = (size - 1) / (out - 1) if out > 1 else 0.0
        src = [i * s for i in range(out)]
    else:
        s = (1.0 / scale) if scale else size / out
        src = [max((i + 0.5) * s - 0.5, 0.0) for i in range(out)]
    i0 = [min(int(math.floor(v)), size - 1) for v in src]
    i1 = [min(i + 1, size - 1) for i in i0]
    lam = [v - i for v, i in zip(src, i0)]
    shape = [1] * x.ndim
    shape[dim] = out
    w1 = _core.tensor(lam, dtype=x.dtype, device=x.device).reshape(shape)
    a = x.index_select(dim, _core.tensor(i0, device=x.device))
    b = x.index_select(dim, _core.tensor(i1, device=x.device))
    return a * (1 - w1) + b * w1


_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic convolution coefficient


def _cubic_weights(t: float) -> Tuple[float, float, float, float]:
    """Keys' cubic convolution weights of the 4 taps around a sample `t` in [0, 1)."""
    a = _CUBIC_A

    def near(x: float) -> float:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: float) -> float:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _cubic_dim(x: Tensor, dim: int, out: int, scale: Optional[float], align_corners: bool) -> Tensor:
    """Bicubic resampling along one dim (separable, as PyTorch's kernel): 4 taps with
    indices clamped at the borders, source coordinates not clamped."""
    size = x.shape[dim]
    if align_corners:
        s = (size - 1) / (out - 1) if out > 1 else 0.0
        src = [i * s for i in range(out)]
    else:
        s = (1.0 / scale) if scale else size / out
        src = [(i + 0.5) * s - 0.5 for i in range(out)]
    shape = [1] * x.ndim
    shape[dim] = out
    acc: Optional[Tensor] = None
    for k in range(4):
        idx, ws = [], []
        for v in src:
            f = math.floor(v)
            idx.append(min(max(f - 1 + k, 0), size - 1))
            ws.append(_cubic_weights(v - f)[k])
        w = _core.tensor(ws, dtype=x.dtype, device=x.device).reshape(shape)
        term = x.index_select(dim, _core.tensor(idx, device=x.device)) * w
        acc = term if acc is None else acc + term
    assert acc is not None
    return acc


def interpolate(
    input: Tensor,
    size: _Size = None,
    scale_factor: _Scale = None,
    mode: str = "nearest",
    align_corners: Optional[bool] = None,
    recompute_scale_factor: Optional[bool] = None,
    antialias: bool = False,
) -> Tensor:
    """Resize (N, C, ...) by nearest, nearest-exact, (bi/tri)linear, bicubic or area
    interpolation, as PyTorch."""
    n = input.ndim - 2
    if n < 1 or n > 3:
        raise ShapeError(f"interpolate: expected 3-D, 4-D or 5-D input (N, C, ...), got {list(input.shape)}")
    linear = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
    if mode not in ("nearest", "nearest-exact", "area", *linear):
        raise ValueError(f"interpolate: mode must be nearest, nearest-exact, linear, bilinear, bicubic, trilinear or area, got {mode!r}")
    if mode in linear and linear[mode] != n:
        raise ShapeError(f"interpolate: mode {mode!r} expects {linear[mode] + 2}-D input, got {list(input.shape)}")
    if mode not in linear and align_corners:
        raise ValueError("interpolate: align_corners only works with linear modes")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    sizes = _per_dim(size, n, "size")
    scales = _per_dim(scale_factor, n, "scale_factor")
    if scales is not None:
        sizes = tuple(int(math.floor(input.shape[2 + i] * scales[i])) for i in range(n))
        if recompute_scale_factor:
            scales = None
    assert sizes is not None
    if any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output size must be positive, got {list(sizes)}")
    if mode == "area":  # PyTorch's "area" is adaptive average pooling to the output size
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[n - 1](input, tuple(int(v) for v in sizes))
    kind = {"nearest": "nearest", "nearest-exact": "nearest-exact", "bicubic": "cubic"}.get(mode, "linear")
    # One pass forward and backward (`layers::resample`, PyTorch's index and weight
    # tables); None: not a CPU float tensor (the index_select path below).
    res = _core._interpolate(
        input, [int(v) for v in sizes], None if scales is None else [float(v) for v in scales], kind, bool(align_corners)
    )
    if res is not None:
        return res
    out = input
    for i in range(n):
        out = _resize_dim(
            out,
            2 + i,
            int(sizes[i]),
            None if scales is None else float(scales[i]),
            kind,
            bool(align_corners),
        )
    return out
