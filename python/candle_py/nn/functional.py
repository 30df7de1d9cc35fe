"""`candle_py.nn.functional` (import as `F`): PyTorch's functional forms.

Everything here is a composition of differentiable Tensor ops, so gradients
flow through all of it (Candle's fused CPU kernels such as layer_norm record no
backward, so they are not used on training paths).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

from .. import _core
from .._core import ShapeError, Tensor
from ..autograd import no_grad as _no_grad
from ._devices import on_cpu, sdpa_math

__all__ = [
    "linear", "bilinear", "relu", "relu6", "leaky_relu", "prelu", "rrelu", "elu", "selu", "celu",
    "gelu", "silu", "mish", "sigmoid", "tanh", "hardtanh", "hardsigmoid", "hardswish", "softplus",
    "softmax", "log_softmax", "dropout", "embedding", "layer_norm", "rms_norm", "group_norm",
    "batch_norm", "normalize", "pad", "one_hot", "interpolate", "snake", "multi_head_attention_forward",
    "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
]  # fmt: skip


def _check_tensor(x: Any, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


# -- linear ----------------------------------------------------------------------
def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """`input @ weight.T + bias`."""
    _check_tensor(input, "linear")
    # One fused GEMM (bias folded into the output's initial value, batch dims
    # folded into rows); shape/dtype errors name both operands.
    return _core._linear(input, weight, bias)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """`y_k = x1 @ W_k @ x2 + b_k` for weight of shape (out, in1, in2)."""
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


# -- activations -------------------------------------------------------------------
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
    weight: Tensor,
    padding_idx: Optional[int] = None,
    max_norm: Optional[float] = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` picked by the integer tensor `input`: the result has shape
    `(*input.shape, embedding_dim)`. The other arguments are accepted for
    PyTorch compatibility."""
    if input.dtype.is_floating_point or input.dtype == _core.bool:
        raise TypeError(
            f"embedding: indices must be an integer tensor (int64 or int32), got {input.dtype} of shape "
            f"{list(input.shape)}; convert with .long()"
        )
    idx = input.reshape(-1)
    try:
        out = weight.index_select(0, idx)
    except IndexError as e:  # name the layer's op and shapes, not index_select
        raise IndexError(f"embedding: {str(e).split(': ', 1)[-1]} (weight {list(weight.shape)}, input {list(input.shape)})") from None
    return out.reshape(*tuple(input.shape), weight.shape[1])


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Integer class indices to one-hot int64 vectors along a new last dim of size
    `num_classes` (`-1`: one more than the largest index)."""
    if tensor.dtype.is_floating_point:
        raise TypeError(f"one_hot is only applicable to index tensors, got {tensor.dtype} of shape {list(tensor.shape)}")
    n = int(tensor.max().item()) + 1 if num_classes < 0 else num_classes
    classes = _core.arange(n, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()


# -- normalization -------------------------------------------------------------------
def _fused_ok(*ts: Optional[Tensor]) -> bool:
    """The fused Rust norm kernels run on CPU float32/float64 with matching dtypes."""
    first = ts[0]
    assert first is not None
    return (
        first.device.type == "cpu"
        and first.dtype in (_core.float32, _core.float64)
        and all(t is None or (t.dtype == first.dtype and t.device.type == "cpu") for t in ts)
    )


def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing `normalized_shape` dims to zero mean and unit
    variance (biased, plus `eps`), then scale by `weight` and shift by `bias`."""
    shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
    k = len(shape)
    if tuple(input.shape[input.ndim - k :]) != shape:
        raise ShapeError(f"layer_norm: expected input with shape [*, {', '.join(map(str, shape))}], got {list(input.shape)}")
    if _fused_ok(input, weight, bias):
        # One fused pass each way (Rust), with its own backward.
        d = math.prod(shape)
        w = weight if weight is not None else _core.ones(d, dtype=input.dtype)
        b = bias if bias is not None else _core.zeros(d, dtype=input.dtype)
        return _core._layer_norm(input, w, b, d, eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None, eps: Optional[float] = None) -> Tensor:
    """Divide by the root mean square over the trailing `normalized_shape` dims
    (plus `eps`; default the dtype's machine epsilon), then scale by `weight`."""
    shape = tuple(normalized_shape) if not isinstance(normalized_shape, int) else (normalized_shape,)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    if eps is None:
        eps = 1.1920928955078125e-07 if input.dtype == _core.float32 else 2.220446049250313e-16
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out * weight if weight is not None else out


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Split the channels (dim 1) into `num_groups` groups, normalize each group of
    each sample to zero mean and unit variance, then apply the per-channel
    `weight` and `bias`."""
    n, c = input.shape[0], input.shape[1]
    if c % num_groups != 0:
        raise ShapeError(f"group_norm: num_channels ({c}) must be divisible by num_groups ({num_groups})")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(-1, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(-1, keepdim=True)
    out = (centered * (var + eps).rsqrt()).reshape(tuple(input.shape))
    shape = [1, c] + [1] * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def batch_norm(
    input: Tensor,
    running_mean: Optional[Tensor],
    running_var: Optional[Tensor],
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch norm over dim 1; in training, normalizes with batch statistics and
    updates the running ones in place (unbiased variance, as PyTorch)."""
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected at least 2-D input (N, C, ...), got {list(input.shape)}")
    c = input.shape[1]
    dims = (0,) + tuple(range(2, input.ndim))
    shape = [1, c] + [1] * (input.ndim - 2)
    n = input.numel() // c if c else 0
    if training:
        if n <= 1:
            raise ShapeError(f"batch_norm: expected more than 1 value per channel when training, got input size {list(input.shape)}")
        with _no_grad():
            mean = input.mean(dims)
            var = ((input - mean.reshape(shape)) ** 2).mean(dims)
            if running_mean is not None and running_var is not None:
                running_mean.mul_(1 - momentum).add_(mean * momentum)
                running_var.mul_(1 - momentum).add_(var * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required in evaluation mode")
        mean, var = running_mean, running_var
    if _fused_ok(input, weight, bias):
        w = weight if weight is not None else _core.ones(c, dtype=input.dtype)
        b = bias if bias is not None else _core.zeros(c, dtype=input.dtype)
        return _core._batch_norm(input, w, b, mean, var, training, eps)
    if training:
        bmean = input.mean(dims, keepdim=True)
        centered = input - bmean
        out = centered * ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    else:
        out = (input - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """Divide `input` by its `p`-norm along `dim` (clamped below by `eps`), giving unit-norm vectors."""
    norm = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / norm


# -- padding ---------------------------------------------------------------------------
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None) -> Tensor:
    """Pad the last `len(pad) // 2` dims: `pad = (left_last, right_last, left_prev, ...)`.

    Modes: "constant" (with `value`), "reflect", "replicate", "circular"."""
    if len(pad) % 2 != 0 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: padding length must be even and at most 2 * ndim, got {len(pad)} for shape {list(input.shape)}")
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
        if mode == "reflect":
            if left >= size or right >= size:
                raise ValueError(f"pad: reflect padding ({left}, {right}) must be smaller than the input size {size} in dim {dim}")
            idx = list(range(left, 0, -1)) + list(range(size)) + list(range(size - 2, size - 2 - right, -1))
        elif mode == "replicate":
            idx = [0] * left + list(range(size)) + [size - 1] * right
        elif mode == "circular":
            if left > size or right > size:
                raise ValueError(f"pad: circular padding ({left}, {right}) is larger than the input size {size} in dim {dim}")
            idx = [(j - left) % size for j in range(size + left + right)]
        else:
            raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
        out = out.index_select(dim, _core.tensor(idx, device=out.device))
    return out


# -- losses ------------------------------------------------------------------------------
def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _legacy(size_average: Optional[bool], reduce: Optional[bool], reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{op}: target size {list(target.shape)} must be the same as input size {list(input.shape)}")


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    weight: Optional[Tensor] = None,
) -> Tensor:
    """Squared error `(input - target) ** 2`, optionally weighted, reduced by
    `reduction` ("mean", "sum" or "none"; `size_average`/`reduce` are the legacy forms)."""
    _same_shape(input, target, "mse_loss")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "mse_loss")


def l1_loss(
    input: Tensor, target: Tensor, size_average: Optional[bool] = None, reduce: Optional[bool] = None, reduction: str = "mean"
) -> Tensor:
    """Absolute error `|input - target|`, reduced by `reduction` ("mean", "sum" or "none")."""
    _same_shape(input, target, "l1_loss")
    return _reduce((input - target).abs(), _legacy(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """Huber-like loss: `0.5 * d**2 / beta` where `|d| < beta`, `|d| - 0.5 * beta`
    elsewhere (`d = input - target`), reduced by `reduction`."""
    _same_shape(input, target, "smooth_l1_loss")
    d = (input - target).abs()
    if beta == 0.0:
        loss = d
    else:
        loss = _core.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, _legacy(size_average, reduce, reduction), "smooth_l1_loss")


def _class_dim_last(x: Tensor) -> Tensor:
    """(N, C, d1, ...) -> (N * d1 * ..., C); (C,) -> (1, C); (N, C) unchanged."""
    if x.ndim == 1:
        return x.unsqueeze(0)
    if x.ndim == 2:
        return x
    c = x.shape[1]
    return x.permute(0, *range(2, x.ndim), 1).reshape(-1, c)


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood from log-probabilities `input` (N, C, ...) and class
    indices `target` (N, ...): `-input[n, target[n]]`, optionally weighted per
    class; targets equal to `ignore_index` count for nothing. "mean" divides by
    the total weight of the counted targets."""
    reduction = _legacy(size_average, reduce, reduction)
    if target.dtype.is_floating_point:
        raise TypeError(f"nll_loss: expected target of an integer dtype (class indices), got {target.dtype}")
    logp = _class_dim_last(input)
    n, c = logp.shape
    t = target.reshape(-1)
    if t.shape[0] != n:
        raise ShapeError(f"nll_loss: expected target of {n} elements for input {list(input.shape)}, got {list(target.shape)}")
    valid = t != ignore_index
    safe_t = _core.where(valid, t, 0)
    if safe_t.numel() and (int(safe_t.max().item()) >= c or int(safe_t.min().item()) < 0):
        raise IndexError(f"nll_loss: target {int(safe_t.max().item())} is out of bounds for {c} classes")
    picked = logp.gather(1, safe_t.unsqueeze(1)).squeeze(1)
    w = valid.to(logp.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe_t)
    loss = -picked * w
    out_shape = tuple(target.shape)
    if reduction == "none":
        return loss.reshape(out_shape)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / w.sum()
    raise ValueError(f"nll_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    ignore_index: int = -100,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy from logits, with class indices or class probabilities as
    target, class `weight`, `ignore_index` and `label_smoothing` (PyTorch's formulas)."""
    reduction = _legacy(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if isinstance(input, Tensor) and isinstance(target, Tensor) and not target.dtype.is_floating_point:
        # (N, C) logits with class indices: one fused op (None where it does not apply).
        fused = _core._cross_entropy(input, target, weight, int(ignore_index), reduction, float(label_smoothing))
        if fused is not None:
            return fused
    class_dim = 0 if input.ndim == 1 else 1
    logp = input.log_softmax(class_dim)
    c = input.shape[class_dim]
    if target.dtype.is_floating_point:
        # Probabilities over classes, same shape as input.
        _same_shape(input, target, "cross_entropy")
        tgt = target
        if label_smoothing > 0:
            tgt = tgt * (1 - label_smoothing) + label_smoothing / c
        wshape = [1] * input.ndim
        wshape[class_dim] = c
        per = logp * tgt
        if weight is not None:
            per = per * weight.reshape(wshape)
        loss = -per.sum(class_dim)
        if reduction == "mean":
            return loss.sum() / (loss.numel() if input.ndim > 1 else 1)
        return _reduce(loss, reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    flat = _class_dim_last(logp)
    t = target.reshape(-1)
    valid = (t != ignore_index).to(flat.dtype)
    if weight is not None:
        smooth = -(flat * weight.reshape(1, c)).sum(1) * valid
    else:
        smooth = -flat.sum(1) * valid
    if reduction == "none":
        smooth_r = smooth.reshape(tuple(target.shape))
    elif reduction == "sum":
        smooth_r = smooth.sum()
    else:
        if weight is not None:
            denom = (weight.index_select(0, _core.where(t != ignore_index, t, 0)) * valid).sum()
        else:
            denom = valid.sum()
        smooth_r = smooth.sum() / denom
    return nll * (1 - label_smoothing) + smooth_r * (label_smoothing / c)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
) -> Tensor:
    """`-(target * log(input) + (1 - target) * log(1 - input))` for probabilities
    `input`, with the logs clamped at -100; optional `weight`, reduced by `reduction`."""
    _same_shape(input, target, "binary_cross_entropy")
    log_p = input.log().clamp(min=-100.0)
    log_1p = (1 - input).log().clamp(min=-100.0)
    loss = -(target * log_p + (1 - target) * log_1p)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Optional[Tensor] = None,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    pos_weight: Optional[Tensor] = None,
) -> Tensor:
    """Sigmoid + binary cross-entropy in one numerically stable expression:
    `(1 - y) * x + (1 + (pw - 1) * y) * (log(1 + exp(-|x|)) + max(-x, 0))`."""
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    x, y = input, target.to(input.dtype)
    log_term = (-x.abs()).exp().log1p() + (-x).relu()
    if pos_weight is not None:
        loss = (1 - y) * x + (1 + (pos_weight - 1) * y) * log_term
    else:
        loss = (1 - y) * x + log_term
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: Optional[bool] = None,
    reduce: Optional[bool] = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Kullback-Leibler divergence `target * (log(target) - input)` for log-probabilities
    `input` (with `log_target`, `target` is given as log-probabilities too);
    "batchmean" divides the sum by the batch size."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = _core.where(target > 0, target, 1.0)
        loss = _core.where(target > 0, target * (safe.log() - input), 0.0)
    reduction = _legacy(size_average, reduce, reduction)
    if reduction == "batchmean":
        return loss.sum() / input.shape[0]
    return _reduce(loss, reduction, "kl_div")


# -- convolution and pooling (the arithmetic is in Rust: _core._conv / _max_pool / _avg_pool) ----
__all__ += [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
]  # fmt: skip


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
    out = on_cpu(_core._conv, op, x, weight, bias, list(stride), list(lo), list(hi), list(dilation), int(groups), False, [0] * n, op)
    return out.squeeze(0) if unbatched else out


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
    out = on_cpu(
        _core._conv,
        op,
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
    return on_cpu(_core._max_pool, op, input, list(k), list(s), list(p), list(d), bool(ceil_mode), bool(return_indices), op)


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
    return on_cpu(
        _core._avg_pool,
        op,
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
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_avg_pool1d:",
        input,
        _adaptive_size(input, output_size, 1, "adaptive_avg_pool1d:"),
        False,
        False,
        "adaptive_avg_pool1d:",
    )


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Mean pooling whose windows are chosen so that the last two dims become
    `output_size` (an int, or a pair whose None entries keep the input size)."""
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_avg_pool2d:",
        input,
        _adaptive_size(input, output_size, 2, "adaptive_avg_pool2d:"),
        False,
        False,
        "adaptive_avg_pool2d:",
    )


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Mean pooling whose windows are chosen so that the last three dims become `output_size`."""
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_avg_pool3d:",
        input,
        _adaptive_size(input, output_size, 3, "adaptive_avg_pool3d:"),
        False,
        False,
        "adaptive_avg_pool3d:",
    )


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last dim becomes
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_max_pool1d:",
        input,
        _adaptive_size(input, output_size, 1, "adaptive_max_pool1d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool1d:",
    )


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last two dims become
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_max_pool2d:",
        input,
        _adaptive_size(input, output_size, 2, "adaptive_max_pool2d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool2d:",
    )


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling whose windows are chosen so that the last three dims become
    `output_size`; `return_indices` also returns the positions of the maxima."""
    return on_cpu(
        _core._adaptive_pool,
        "adaptive_max_pool3d:",
        input,
        _adaptive_size(input, output_size, 3, "adaptive_max_pool3d:"),
        True,
        bool(return_indices),
        "adaptive_max_pool3d:",
    )


# -- resizing -------------------------------------------------------------------------
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
    if mode == "nearest":
        s = (1.0 / scale) if scale else size / out
        idx = [min(int(math.floor(i * s)), size - 1) for i in range(out)]
        return x.index_select(dim, _core.tensor(idx, device=x.device))
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


def interpolate(
    input: Tensor,
    size: _Size = None,
    scale_factor: _Scale = None,
    mode: str = "nearest",
    align_corners: Optional[bool] = None,
    recompute_scale_factor: Optional[bool] = None,
    antialias: bool = False,
) -> Tensor:
    """Resize (N, C, ...) by nearest or (bi/tri)linear interpolation, as PyTorch."""
    n = input.ndim - 2
    if n < 1 or n > 3:
        raise ShapeError(f"interpolate: expected 3-D, 4-D or 5-D input (N, C, ...), got {list(input.shape)}")
    linear = {"linear": 1, "bilinear": 2, "trilinear": 3}
    if mode not in ("nearest", *linear):
        raise ValueError(f"interpolate: mode must be nearest, linear, bilinear or trilinear, got {mode!r}")
    if mode in linear and linear[mode] != n:
        raise ShapeError(f"interpolate: mode {mode!r} expects {linear[mode] + 2}-D input, got {list(input.shape)}")
    if mode == "nearest" and align_corners:
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
    out = input
    for i in range(n):
        out = _resize_dim(
            out,
            2 + i,
            int(sizes[i]),
            None if scales is None else float(scales[i]),
            "nearest" if mode == "nearest" else "linear",
            bool(align_corners),
        )
    return out


def snake(x: Tensor, alpha: Tensor) -> Tensor:
    """Snake activation: `x + 1/(alpha + 1e-9) * sin(alpha * x)^2` (alpha broadcast, e.g. (1, C, 1))."""
    s = (alpha * x).sin()
    return x + (alpha + 1e-9).reciprocal() * (s * s)


# -- attention -------------------------------------------------------------------
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """`softmax(Q K^T * scale + mask) V` over (..., L, D) x (..., S, D) x (..., S, Dv), as PyTorch.

    A fused CPU kernel (online softmax over key blocks, never the L x S matrix),
    differentiable in query, key and value. `attn_mask` is boolean (True takes
    part) or additive float, broadcast to (..., L, S); `is_causal` is the top-left
    aligned lower-triangular mask; `enable_gqa` lets Hq be a multiple of the kv heads.
    Rows with every key masked give zeros (as torch's CPU kernel).
    """
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, f"{op} ({name})")
    if attn_mask is not None:
        _check_tensor(attn_mask, f"{op} (attn_mask)")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"{op}: dropout_p must be a float, got {type(dropout_p).__name__}")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"{op}: scale must be a float or None, got {type(scale).__name__}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: attn_mask must not be given together with is_causal=True (got attn_mask of shape {list(attn_mask.shape)})")
    if query.device.type != "cpu":  # the fused kernel is CPU code; PyTorch's math path elsewhere
        return sdpa_math(query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale, bool(enable_gqa))
    return _core._sdpa(
        query, key, value, attn_mask, float(dropout_p), bool(is_causal), None if scale is None else float(scale), bool(enable_gqa)
    )


__all__ += ["scaled_dot_product_attention"]


def _as_additive(mask: Tensor, dtype: Any) -> Tensor:
    """Bool masks (True = not allowed) become -inf/0; float masks are added as they are."""
    if mask.dtype == _core.bool:
        return _core.where(mask, float("-inf"), 0.0).to(dtype)
    return mask.to(dtype)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Optional[Tensor],
    in_proj_bias: Optional[Tensor],
    bias_k: Optional[Tensor],
    bias_v: Optional[Tensor],
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Optional[Tensor],
    training: bool = True,
    key_padding_mask: Optional[Tensor] = None,
    need_weights: bool = True,
    attn_mask: Optional[Tensor] = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Optional[Tensor] = None,
    k_proj_weight: Optional[Tensor] = None,
    v_proj_weight: Optional[Tensor] = None,
    static_k: Optional[Tensor] = None,
    static_v: Optional[Tensor] = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> Tuple[Tensor, Optional[Tensor]]:
    """PyTorch's `F.multi_head_attention_forward`: inputs (L, N, E) (or unbatched
    (L, E)); returns the output and the (head-averaged) attention weights."""
    name = "[multi_head_attention_forward]"
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, e = query.shape
    if e != embed_dim_to_check:
        raise ShapeError(f"{name} expected query with embed_dim {embed_dim_to_check}, got {list(query.shape)}")
    if e % num_heads != 0:
        raise ValueError(f"{name} embed_dim {e} not divisible by num_heads {num_heads}")
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:e], in_proj_bias[e : 2 * e], in_proj_bias[2 * e :]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ValueError(f"{name} use_separate_proj_weight needs q_proj_weight, k_proj_weight and v_proj_weight")
        q, k, v = linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk), linear(value, v_proj_weight, bv)
    else:
        if in_proj_weight is None:
            raise ValueError(f"{name} in_proj_weight is required unless use_separate_proj_weight=True")
        w = in_proj_weight
        q, k, v = linear(query, w[:e], bq), linear(key, w[e : 2 * e], bk), linear(value, w[2 * e :], bv)
    if bias_k is not None and bias_v is not None:
        k = _core.cat([k, bias_k.expand(1, bsz, e)], 0)
        v = _core.cat([v, bias_v.expand(1, bsz, e)], 0)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    h = num_heads
    hd = e // h
    q = q.reshape(tgt_len, bsz * h, hd).transpose(0, 1)
    k = static_k if static_k is not None else k.reshape(k.shape[0], bsz * h, hd).transpose(0, 1)
    v = static_v if static_v is not None else v.reshape(v.shape[0], bsz * h, hd).transpose(0, 1)
    if add_zero_attn:
        k = _core.cat([k, _core.zeros(bsz * h, 1, hd, dtype=k.dtype, device=k.device)], 1)
        v = _core.cat([v, _core.zeros(bsz * h, 1, hd, dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    scores = (q * (1.0 / math.sqrt(hd))) @ k.transpose(1, 2)  # (B*H, L, S)
    if is_causal and attn_mask is None:
        attn_mask = _core.ones(tgt_len, src_len, dtype=_core.bool, device=scores.device).triu(1)
    if attn_mask is not None:
        m = _as_additive(attn_mask, scores.dtype)
        if m.ndim == 2:
            m = m.unsqueeze(0)
        scores = scores + m
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(f"{name} expected key_padding_mask of shape {[bsz, src_len]}, got {list(key_padding_mask.shape)}")
        kpm = _as_additive(key_padding_mask, scores.dtype).reshape(bsz, 1, 1, src_len)
        scores = (scores.reshape(bsz, h, tgt_len, src_len) + kpm).reshape(bsz * h, tgt_len, src_len)
    weights = scores.softmax(-1)
    if dropout_p > 0 and training:
        weights = dropout(weights, dropout_p, True)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len, bsz, e)
    out = linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    wts = weights.reshape(bsz, h, tgt_len, src_len)
    if average_attn_weights:
        wts = wts.mean(1)
    if unbatched:
        wts = wts.squeeze(0)
    return out, wts


# Non-tensor inputs raise PyTorch's TypeError ("tanh(): argument 'input' (position 1)
# must be Tensor, not list") instead of an AttributeError from inside.
from ._typecheck import type_check_functions as _type_check  # noqa: E402

_type_check(globals(), __all__)
