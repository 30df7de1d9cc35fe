"""Rearrangements of (N, C, H, W) tensors: pixel_shuffle / pixel_unshuffle,
channel_shuffle, and the sliding-window unfold (im2col) / fold (col2im).

Each is a reshape/permute, or one `index_select` (unfold) / `scatter_add` (fold)
over a window index built with tensor arithmetic, so gradients come from those ops."""

from __future__ import annotations

from typing import Sequence, Tuple, Union

from ... import _core
from ..._core import Tensor

_Pair = Union[int, Sequence[int]]


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r) with `r = upscale_factor`."""
    r = int(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {upscale_factor}")
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={c} is not divisible by {r * r}"
        )
    k = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W) with `r = downscale_factor`: the inverse of `pixel_shuffle`."""
    r = int(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {downscale_factor}")
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height ({h}) and width ({w}) to be divisible by downscale_factor ({r})")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the channels (dim 1) of (N, C, *) into `groups` groups and interleave
    them: (N, g, C/g, *) -> (N, C/g, g, *) -> (N, C, *)."""
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with sizes {list(input.shape)}")
    n, c, *rest = input.shape
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {g} groups.")
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(n, c, *rest)


def _pair(v: _Pair, name: str, op: str) -> Tuple[int, int]:
    t = (int(v), int(v)) if isinstance(v, int) else tuple(int(a) for a in v)
    if len(t) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    return t  # type: ignore[return-value]


def _window_index(
    op: str, size: Tuple[int, int], kernel_size: _Pair, dilation: _Pair, padding: _Pair, stride: _Pair, device: _core.device
) -> Tuple[Tensor, Tuple[int, int], Tuple[int, int], int, int]:
    """Flat positions in the padded (Hp * Wp) plane of every (kernel offset, window)
    pair, shape (kh * kw * L,), kernel offset major (PyTorch's column layout)."""
    k = _pair(kernel_size, "kernel_size", op)
    d = _pair(dilation, "dilation", op)
    p = _pair(padding, "padding", op)
    s = _pair(stride, "stride", op)
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise RuntimeError(
            f"{op}: kernel_size, dilation and stride must be positive and padding non-negative, got "
            f"kernel_size={k}, dilation={d}, padding={p}, stride={s}"
        )
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    oh = (hp - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wp - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(
            f"{op}: given input with spatial size {list(size)}, kernel_size={k}, dilation={d}, padding={p}, "
            f"calculated shape of the array of sliding blocks as ({oh}, {ow}), which is too small (non-positive)"
        )
    ki = _core.arange(k[0], device=device).reshape(k[0], 1, 1, 1) * d[0]
    kj = _core.arange(k[1], device=device).reshape(1, k[1], 1, 1) * d[1]
    oi = _core.arange(oh, device=device).reshape(1, 1, oh, 1) * s[0]
    oj = _core.arange(ow, device=device).reshape(1, 1, 1, ow) * s[1]
    idx = ((ki + oi) * wp + (kj + oj)).reshape(-1)
    return idx, p, (hp, wp), k[0] * k[1], oh * ow


def unfold(input: Tensor, kernel_size: _Pair, dilation: _Pair = 1, padding: _Pair = 0, stride: _Pair = 1) -> Tensor:
    """Sliding local blocks (im2col): (N, C, H, W) -> (N, C * kh * kw, L), or
    (C, H, W) -> (C * kh * kw, L) unbatched, L the number of window positions."""
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    x = input.unsqueeze(0) if input.ndim == 3 else input
    n, c, h, w = x.shape
    idx, p, (hp, wp), kk, length = _window_index("unfold", (h, w), kernel_size, dilation, padding, stride, x.device)
    if p != (0, 0):
        from .vision import pad

        x = pad(x, (p[1], p[1], p[0], p[0]))
    cols = x.reshape(n, c, hp * wp).index_select(2, idx).reshape(n, c * kk, length)
    return cols.squeeze(0) if input.ndim == 3 else cols


def fold(input: Tensor, output_size: _Pair, kernel_size: _Pair, dilation: _Pair = 1, padding: _Pair = 0, stride: _Pair = 1) -> Tensor:
    """Sum sliding local blocks back into an image (col2im), the adjoint of `unfold`:
    (N, C * kh * kw, L) -> (N, C, H, W) with `(H, W) = output_size`; overlaps add up."""
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got {input.ndim}D)")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    size = _pair(output_size, "output_size", "fold")
    idx, p, (hp, wp), kk, length = _window_index("fold", size, kernel_size, dilation, padding, stride, x.device)
    n, ck, l_in = x.shape
    if ck % kk:
        raise RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
            f"but got input.size(1)={ck} and kernel_size={kk}"
        )
    if l_in != length:
        raise RuntimeError(
            f"Given output_size={list(size)}, kernel_size, dilation, padding and stride, expected size of input's dimension 2 to match "
            f"the calculated number of sliding blocks {length}, but got input.size(2)={l_in}."
        )
    c = ck // kk
    src = x.reshape(n, c, kk * length)
    plane = _core.zeros(n, c, hp * wp, dtype=x.dtype, device=x.device)
    out = plane.scatter_add(2, idx.reshape(1, 1, -1).expand(n, c, kk * length).contiguous(), src).reshape(n, c, hp, wp)
    out = out.narrow(2, p[0], size[0]).narrow(3, p[1], size[1])
    return out.squeeze(0) if input.ndim == 2 else out


__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "unfold", "fold"]
