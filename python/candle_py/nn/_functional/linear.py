"""Linear maps, dropout and index lookups (embedding, one_hot)."""

from __future__ import annotations

from typing import Optional, Union

import numpy as np

from ... import _autocast, _core
from ..._core import QTensor, ShapeError, Tensor
from ...autograd import no_grad as _no_grad


def linear(input: Tensor, weight: Union[Tensor, QTensor], bias: Optional[Tensor] = None) -> Tensor:
    """`input @ weight.T + bias`; `weight` may be a `QTensor` (Candle's quantized kernels)."""
    if isinstance(weight, QTensor):
        # Candle's kernels take float32/float16/bfloat16 as they come: autocast does not apply.
        return _core._qlinear(input, weight, bias)
    # One fused GEMM (bias folded into the output's initial value, batch dims
    # folded into rows); shape/dtype errors name both operands. Inside autocast the
    # operands are first cast to its dtype (linear is on PyTorch's lower-precision list).
    x, w, b = _autocast.lower(input, weight, bias)
    return _core._linear(x, w, b)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """`y_k = x1 @ W_k @ x2 + b_k` for weight of shape (out, in1, in2)."""
    # PyTorch's autocast leaves bilinear alone; ours is composed from matmul, which
    # autocast would cast, so it runs with autocast off.
    with _autocast.disabled():
        return _bilinear(input1, input2, weight, bias)


def _bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2:
        raise ShapeError(f"bilinear: input shapes {list(input1.shape)} and {list(input2.shape)} do not match weight {list(weight.shape)}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    tmp = (x1 @ weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    out = (tmp * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, out_f)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """In training, zero each element with probability `p` and scale the survivors
    by `1 / (1 - p)`; outside training (or `p == 0`) return `input` unchanged."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    keep = (_core.rand_like(input) >= p).to(input.dtype)
    return input * keep * (1.0 / (1.0 - p))


def embedding(
    input: Tensor,
    weight: Union[Tensor, QTensor],
    padding_idx: Optional[int] = None,
    max_norm: Optional[float] = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` picked by the integer tensor `input`: the result has shape
    `(*input.shape, embedding_dim)`. As PyTorch: rows looked up at `padding_idx` get
    no gradient; with `max_norm`, the looked-up rows whose `norm_type`-norm exceeds it
    are rescaled in `weight` (in place) to that norm first; `scale_grad_by_freq`
    divides each row's gradient by how often it occurs in `input`. `sparse` asks
    PyTorch for a sparse gradient; ours is dense, with the same values. A `QTensor`
    weight gives float32 rows; it has no gradient, so `padding_idx`,
    `scale_grad_by_freq` and `sparse` change nothing, and `max_norm` is refused."""
    if isinstance(weight, QTensor):
        if max_norm is not None:
            raise ValueError("embedding: max_norm rescales rows of the weight in place, which a quantized weight cannot do")
        return _core._qembedding(input, weight)
    if input.dtype.is_floating_point or input.dtype == _core.bool:
        raise TypeError(
            f"embedding: indices must be an integer tensor (int64 or int32), got {input.dtype} of shape "
            f"{list(input.shape)}; convert with .long()"
        )
    idx = input.reshape(-1)
    if max_norm is not None:
        _renorm_rows(weight, idx, float(max_norm), float(norm_type))
    try:
        out = weight.index_select(0, idx)
    except IndexError as e:  # name the layer's op and shapes, not index_select
        raise IndexError(f"embedding: {str(e).split(': ', 1)[-1]} (weight {list(weight.shape)}, input {list(input.shape)})") from None
    if padding_idx is not None or scale_grad_by_freq:
        scale = _inverse_frequency(idx, out) if scale_grad_by_freq else _core.ones(idx.shape[0], dtype=out.dtype, device=out.device)
        if padding_idx is not None:
            scale = _core.where(idx == padding_idx % weight.shape[0], 0.0, scale).to(out.dtype)
        out = _scale_grad(out, scale.unsqueeze(1))
    return out.reshape(*tuple(input.shape), weight.shape[1])


def _inverse_frequency(idx: Tensor, like: Tensor) -> Tensor:
    """Per position of the 1-D index tensor `idx`, 1 / (how often its index occurs in
    `idx`), in `like`'s dtype and device: `scale_grad_by_freq`'s gradient factors."""
    _, inverse, counts = np.unique(np.asarray(idx), return_inverse=True, return_counts=True)
    return _core.from_numpy((1.0 / counts[inverse]).astype(np.float64)).to(like.dtype).to(like.device)


def _scale_grad(t: Tensor, s: Tensor) -> Tensor:
    """`t` with its gradient multiplied by `s` (broadcast): t * s + t.detach() * (1 - s)
    has the value t and the gradient s."""
    return t * s + t.detach() * (1 - s)


def _renorm_rows(weight: Tensor, idx: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's `embedding_renorm_`: the rows of `weight` at `idx` whose norm exceeds
    `max_norm` are scaled to `max_norm / (norm + 1e-7)`, in place, outside autograd."""
    rows = _core.from_numpy(np.unique(np.asarray(idx)).astype(np.int64)).to(weight.device)
    with _no_grad():
        picked = weight.index_select(0, rows)
        norms = picked.norm(norm_type, 1, keepdim=True)
        scale = _core.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).to(weight.dtype)
        weight[rows] = picked * scale


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Integer class indices to one-hot int64 vectors along a new last dim of size
    `num_classes` (`-1`: one more than the largest index)."""
    if tensor.dtype.is_floating_point:
        raise TypeError(f"one_hot is only applicable to index tensors, got {tensor.dtype} of shape {list(tensor.shape)}")
    # PyTorch refuses negative indices and indices >= num_classes (instead of all-zero rows).
    if tensor.numel() and int(tensor.min().item()) < 0:
        raise ValueError("one_hot: class values must be non-negative")
    n = int(tensor.max().item()) + 1 if num_classes < 0 else num_classes
    if tensor.numel() and int(tensor.max().item()) >= n:
        raise ValueError(f"one_hot: class values must be smaller than num_classes ({n})")
    classes = _core.arange(n, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Optional[Tensor] = None,
    max_norm: Optional[float] = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Optional[Tensor] = None,
    include_last_offset: bool = False,
    padding_idx: Optional[int] = None,
) -> Tensor:
    """Sum, mean or max of bags of embedding rows, without the intermediate
    (bag, row) tensor the user would build: `input` is (B, n) (one bag per row) or
    1-D with `offsets` giving each bag's start (`include_last_offset`: the last
    offset is the end). `per_sample_weights` scale rows ("sum" only); rows at
    `padding_idx` are left out (and not counted in the mean); empty bags give zeros.
    `scale_grad_by_freq` divides each looked-up row's gradient by how often its index
    occurs in `input` ("sum" and "mean"). `sparse` asks PyTorch for a sparse gradient;
    ours is dense, with the same values."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("embedding_bag: max mode does not support scaling the gradient by the frequency")
    if input.dtype.is_floating_point or input.dtype == _core.bool:
        raise TypeError(f"embedding_bag: indices must be an integer tensor, got {input.dtype} of shape {list(input.shape)}")
    if weight.ndim != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got mode='{mode}')."
            )
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(
                f"embedding_bag: per_sample_weights has to be of the same shape as input ({list(input.shape)}), "
                f"got {list(per_sample_weights.shape)}"
            )
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length sequences.")
        b, n = input.shape
        starts = [i * n for i in range(b)]
        flat = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        starts = [int(v) for v in offsets.tolist()]
        flat, psw = input, per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    m = flat.shape[0]
    ends = starts[1:] + [m]
    if include_last_offset:
        if not starts:
            raise ValueError("embedding_bag: include_last_offset needs at least one offset")
        starts, ends = starts[:-1], starts[1:]
    if starts and starts[0] != 0:
        raise ValueError(
            f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {starts[0]}"
        )
    if any(e < s for s, e in zip(starts, ends)) or any(e > m for e in ends):
        raise ValueError(f"embedding_bag: offsets must be non-decreasing and at most the input length {m}, got {starts}")
    nbags, dim = len(starts), weight.shape[1]
    if max_norm is not None and m:
        _renorm_rows(weight, flat, float(max_norm), float(norm_type))
    lens = [e - s for s, e in zip(starts, ends)]
    width = max(lens, default=0)
    if nbags == 0 or width == 0:
        return _core.zeros(nbags, dim, dtype=weight.dtype, device=weight.device)
    # (bags, width) positions into `flat`; the slots past a bag's end are masked.
    dev = weight.device
    col = _core.arange(width, device=dev).unsqueeze(0)
    valid = col < _core.tensor(lens, device=dev).unsqueeze(1)
    pos = _core.where(valid, _core.tensor(starts, device=dev).unsqueeze(1) + col, _core.zeros_like(col))
    ids = flat.to(_core.int64).index_select(0, pos.reshape(-1)).reshape(nbags, width)
    if padding_idx is not None:
        valid = valid & (ids != padding_idx % weight.shape[0])
    try:
        rows = weight.index_select(0, ids.reshape(-1)).reshape(nbags, width, dim)
    except IndexError as e:
        raise IndexError(f"embedding_bag: {str(e).split(': ', 1)[-1]} (weight {list(weight.shape)}, input {list(input.shape)})") from None
    if scale_grad_by_freq:
        # Each looked-up row's gradient divided by how often its index occurs in the
        # whole input (torch counts every index, in bags or not).
        per_pos = _inverse_frequency(flat, rows)
        rows = _scale_grad(rows, per_pos.index_select(0, pos.reshape(-1)).reshape(nbags, width, 1))
    mask = valid.to(weight.dtype).unsqueeze(2)
    if mode == "max":
        big = rows.masked_fill(~valid.unsqueeze(2), float("-inf")).amax(1)
        nonempty = valid.to(_core.int64).sum(1, keepdim=True) > 0
        return _core.where(nonempty, big, _core.zeros_like(big))
    if psw is not None:
        w = psw.index_select(0, pos.reshape(-1)).reshape(nbags, width, 1)
        rows = rows * w
    total = (rows * mask).sum(1)
    if mode == "sum":
        return total
    count = valid.to(weight.dtype).sum(1, keepdim=True).clamp(min=1)
    return total / count
