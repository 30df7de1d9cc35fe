"""More PyTorch names that real programs call, composed from existing tensor ops:

- PyTorch's top-level aliases of functionals (`conv1d`, `layer_norm`, `batch_norm`,
  `embedding`, `max_pool2d`, `kl_div`, `ctc_loss`, ... with PyTorch's own argument orders
  and integer `reduction`s) and the in-place function forms (`relu_`, `exp_`, `clamp_`,
  `zero_`, `fill_`, `selu_`, `dropout_`, ...; `torch.exp_(x)` is `x.exp_()`), `fill`;
- small compositions: `tile`, `ravel`, `clone`, `detach`, `rsub`, `scalar_tensor`, `range`,
  `logspace`, `promote_types`, `result_type`, `can_cast`, `isposinf`, `isneginf`, `isreal`,
  `fmax`, `fmin`, `frexp`, `ldexp`, `nextafter`, `gcd`, `lcm`, `diagflat`, `cross`, `cummax`,
  `cummin`, `unravel_index`, `histc`, `bucketize`, `searchsorted`, `quantile`,
  `nanquantile`, `nanmedian`, the windows (`hann_window`, `hamming_window`,
  `blackman_window`, `bartlett_window`, `kaiser_window`), `select_scatter`,
  `slice_scatter`, `diagonal_scatter`, `index_put`, `put`, `split_with_sizes`, `is_signed`,
  `is_nonzero`, `is_same_size`, `is_inference`, `get_device`;
- their Tensor methods (and `short`, `sum_to_size`, `fill_diagonal_`, `put_`,
  `index_put_`, `apply_`, `map_`, the properties `is_cpu`, `nbytes`, `itemsize`),
  attached to `Tensor` at the end of this module.

Results are built from tensor ops (`where`, comparisons, `gather`, `index_copy`, `sort`,
`lerp`, bit views of floats, ...), never a Python loop over elements (`apply_` and
`map_`, which call a Python function per element, excepted, as in PyTorch), so the
differentiable ones (`fmax`, `frexp`'s mantissa, `ldexp`, `cross`, `cummax` values,
`quantile`, `nanmedian`, the scatters, `index_put`, `put`, `fill`, ...) pass gradients as
PyTorch's formulas do. Scans and searches run in O(log n) vectorized steps: `cummax`
doubles its window each step, `searchsorted` bisects every value at once. Sizes taken
from arguments (window lengths, `range`, `logspace` steps, `histc` bins, `tile`,
`diagflat`) are bounded so a huge one raises instead of exhausting memory.
"""

from __future__ import annotations

import builtins
import collections
import math
import numbers
import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from ._complex import ComplexDType, ComplexTensor, complex64, complex128
from ._composed_math import _as, _as_inplace, _as_method, _broadcast, _need, _result_dtype, _shape
from ._core import (
    DTypeError,
    ShapeError,
    Tensor,
    arange,
    bfloat16,
    cat,
    float16,
    float32,
    float64,
    get_default_dtype,
    int16,
    int32,
    int64,
    tensor,
    uint8,
    uint32,
    where,
    zeros,
)
from ._core import bool as _bool
from ._core import dtype as _DType
from ._core import tensor as _tensor

__all__ = [
    # PyTorch's top-level aliases of functionals
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dropout",
    "alpha_dropout", "feature_alpha_dropout", "layer_norm", "group_norm", "batch_norm", "instance_norm", "embedding",
    "bilinear", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "cosine_similarity", "pairwise_distance",
    "selu", "celu", "rrelu", "prelu", "threshold", "hardshrink", "kl_div", "binary_cross_entropy_with_logits",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
    "hinge_embedding_loss", "margin_ranking_loss", "triplet_margin_loss", "poisson_nll_loss",
    "cosine_embedding_loss", "ctc_loss",
    # in-place function forms
    "selu_", "celu_", "rrelu_", "threshold_", "dropout_", "alpha_dropout_", "feature_alpha_dropout_",
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_", "asinh_",
    "atan_", "atanh_", "ceil_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_",
    "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "round_",
    "detach_", "zero_", "fill_", "fill", "clamp_", "clip_", "clamp_min_", "clamp_max_", "addmv_", "nan_to_num_",
    "xlogy_", "logit_", "gcd_", "lcm_", "ldexp_", "index_put_",
    # compositions
    "tile", "ravel", "clone", "detach", "rsub", "scalar_tensor", "range", "logspace", "promote_types", "result_type",
    "can_cast", "isposinf", "isneginf", "isreal", "fmax", "fmin", "frexp", "ldexp", "nextafter", "gcd", "lcm",
    "diagflat", "cross", "cummax", "cummin", "unravel_index", "histc", "bucketize", "searchsorted", "quantile",
    "nanquantile", "nanmedian", "hann_window", "hamming_window", "blackman_window", "bartlett_window",
    "kaiser_window", "select_scatter", "slice_scatter", "diagonal_scatter", "index_put", "put",
    "split_with_sizes", "is_signed", "is_nonzero", "is_same_size", "is_inference", "get_device",
]  # fmt: skip

Number = Union[int, float, bool]
IntOrSeq = Union[int, Sequence[int]]

# `torch.return_types.*`: named tuples with PyTorch's field names.
cummax_result = collections.namedtuple("cummax", ("values", "indices"), module="candle_py.return_types")  # type: ignore[name-match]
cummin_result = collections.namedtuple("cummin", ("values", "indices"), module="candle_py.return_types")  # type: ignore[name-match]
frexp_result = collections.namedtuple("frexp", ("mantissa", "exponent"), module="candle_py.return_types")  # type: ignore[name-match]
nanmedian_result = collections.namedtuple("nanmedian", ("values", "indices"), module="candle_py.return_types")  # type: ignore[name-match]

# The most elements a result sized by an argument (a window, `range`, `logspace`, `histc`'s
# bins, `tile`, `diagflat`) may have: beyond it PyTorch's allocation fails, ours would
# exhaust memory (or take hours).
_MAX_ELEMS = 2**32


# -- helpers ------------------------------------------------------------------------------


def _F() -> Any:
    """candle_py.nn.functional (imported when first needed: nn imports much of the package)."""
    from .nn import functional

    return functional


def _opt(x: Any, op: str, arg: str) -> Optional[Tensor]:
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{arg}' must be Tensor or None, not {type(x).__name__}")
    return x


def _int(op: str, arg: str, v: Any) -> int:
    """`v` as a Python int (PyTorch's int arguments take ints and bools, not floats)."""
    if isinstance(v, Tensor) and v.numel() == 1 and not v.dtype.is_floating_point and v.dtype != _bool:
        return int(v.item())
    if not isinstance(v, (int, builtins.bool)):
        raise TypeError(f"{op}(): argument '{arg}' must be int, not {type(v).__name__}")
    return int(v)


def _number(op: str, arg: str, v: Any) -> Union[int, float]:
    """A Python number (or a one-element tensor's value) for PyTorch's `Scalar` arguments."""
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ShapeError(f"{op}(): argument '{arg}' must be a number or a one-element tensor, got shape {_shape(v)}")
        v = v.item()
    if isinstance(v, builtins.bool):
        return int(v)
    if not isinstance(v, (int, float)):
        raise TypeError(f"{op}(): argument '{arg}' must be a number, not {type(v).__name__}")
    return v


def _int_seq(op: str, arg: str, v: Any) -> Tuple[int, ...]:
    """An int or a sequence of ints (PyTorch's `int[]` arguments) as a tuple."""
    if isinstance(v, (int, builtins.bool)):
        return (int(v),)
    if not isinstance(v, (tuple, list)) and not (isinstance(v, Sequence) and not isinstance(v, str)):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not {type(v).__name__}")
    out = []
    for d in v:
        if not isinstance(d, (int, builtins.bool)):
            raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, but found element of type {type(d).__name__}")
        out.append(int(d))
    return tuple(out)


def _wrap(op: str, dim: Any, ndim: int) -> int:
    """`dim` wrapped into `[0, ndim)` (a 0-d tensor takes -1 and 0), or PyTorch's IndexError."""
    d = _int(op, "dim", dim)
    n = builtins.max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def _guard(op: str, n: int, what: str) -> None:
    if n > _MAX_ELEMS:
        raise ValueError(f"{op}: {what} would have {n} elements, more than {_MAX_ELEMS}")


def _kind(dt: Any) -> int:
    """0 for bool, 1 for integers, 2 for floating point, 3 for complex (PyTorch's categories)."""
    if isinstance(dt, ComplexDType):
        return 3
    return 0 if dt == _bool else (2 if dt.is_floating_point else 1)


def _is_int(dt: Any) -> bool:
    return _kind(dt) == 1


# The signed integer of a float's width (its bits), the mantissa bits, exponent bits and bias.
_FLOAT_BITS = {float32: (int32, 23, 8, 127), float64: (int64, 52, 11, 1023), float16: (int16, 10, 5, 15), bfloat16: (int16, 7, 8, 127)}


def _pow2(k: Tensor, dt: Any) -> Tensor:
    """`2.0 ** k` (k an integer tensor within the normal exponent range of `dt`), exact: the
    float whose exponent field is `k + bias` and whose mantissa is 0."""
    ity, mbits, _, bias = _FLOAT_BITS[dt]
    return ((k.to(ity) + bias) << mbits).view(dt)


def _binary(op: str, input: Any, other: Any) -> Tuple[Tensor, Tensor, Any]:
    """Both arguments checked as tensors, broadcastable, in their promoted dtype."""
    _need(input, op)
    _need(other, op, "other")
    _broadcast(op, input, other)
    dt = _result_dtype(input, other)
    return _as(input, dt), _as(other, dt), dt


def _ints(v: Any, n: int) -> Optional[List[int]]:
    """An int or a sequence of 1 or `n` ints as `n` ints; None for anything else (left to
    the functional to reject)."""
    if isinstance(v, (int, builtins.bool)):
        return [int(v)] * n
    if isinstance(v, (tuple, list)) and len(v) in (1, n) and all(isinstance(x, (int, builtins.bool)) for x in v):
        return [int(x) for x in v] * (n if len(v) == 1 else 1)
    return None


# The most elements a functional's padded copy or result may have where it is also over 16
# times its input: the functionals allocate helpers (int64 indices, ...) of that size too.
_MAX_EXPANSION = 2**30


def _size_guard(op: str, input: Tensor, lead: int, sizes: Sequence[int]) -> None:
    """Raise (rather than let the functional try to allocate) where a result or padded copy of
    `lead * prod(sizes)` elements would pass the size bound and be over 16 times the input."""
    total = lead
    for n in sizes:
        total *= builtins.max(n, 0)
    if total > _MAX_EXPANSION and total > 16 * builtins.max(input.numel(), 1):
        raise ValueError(f"{op}: a result of {total} elements (input of shape {_shape(input)}) is more than {_MAX_EXPANSION}")


def _conv_guard(op: str, input: Tensor, weight: Tensor, nsp: int, stride: Any, padding: Any, dilation: Any, groups: Any) -> None:
    """The padded input of a convolution stays within the size bound."""
    p = _ints(padding, nsp)
    if p is None or input.dim() < nsp + 1:
        return
    shape = list(input.shape)
    lead = 1
    for n in shape[:-nsp]:
        lead *= n
    _size_guard(op, input, lead, [n + 2 * q for n, q in zip(shape[-nsp:], p)])


def _conv_transpose_guard(
    op: str, input: Tensor, weight: Tensor, nsp: int, stride: Any, padding: Any, output_padding: Any, groups: Any, dilation: Any
) -> None:
    """The output of a transposed convolution stays within the size bound."""
    s, p, o, d = _ints(stride, nsp), _ints(padding, nsp), _ints(output_padding, nsp), _ints(dilation, nsp)
    if None in (s, p, o, d) or input.dim() < nsp + 1 or weight.dim() != nsp + 2 or not isinstance(groups, int):
        return
    assert s is not None and p is not None and o is not None and d is not None
    shape = list(input.shape)
    lead = weight.shape[1] * builtins.max(groups, 1)
    for n in shape[: -nsp - 1]:
        lead *= n
    k = list(weight.shape[2:])
    out = [(n - 1) * si - 2 * pi + di * (ki - 1) + oi + 1 for n, si, pi, di, ki, oi in zip(shape[-nsp:], s, p, d, k, o)]
    _size_guard(op, input, lead, out)


# -- PyTorch's top-level aliases of functionals ------------------------------------------


def conv1d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0,
    dilation: IntOrSeq = 1, groups: int = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv1d`: the 1-D convolution, `F.conv1d` at the top level."""
    _need(input, "conv1d")
    _need(weight, "conv1d", "weight")
    _conv_guard("conv1d", input, weight, 1, stride, padding, dilation, groups)
    return _F().conv1d(input, weight, _opt(bias, "conv1d", "bias"), stride, padding, dilation, groups)  # type: ignore[no-any-return]


def conv2d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0,
    dilation: IntOrSeq = 1, groups: int = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv2d`: the 2-D convolution, `F.conv2d` at the top level."""
    _need(input, "conv2d")
    _need(weight, "conv2d", "weight")
    _conv_guard("conv2d", input, weight, 2, stride, padding, dilation, groups)
    return _F().conv2d(input, weight, _opt(bias, "conv2d", "bias"), stride, padding, dilation, groups)  # type: ignore[no-any-return]


def conv3d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: Union[IntOrSeq, str] = 0,
    dilation: IntOrSeq = 1, groups: int = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv3d`: the 3-D convolution, `F.conv3d` at the top level."""
    _need(input, "conv3d")
    _need(weight, "conv3d", "weight")
    _conv_guard("conv3d", input, weight, 3, stride, padding, dilation, groups)
    return _F().conv3d(input, weight, _opt(bias, "conv3d", "bias"), stride, padding, dilation, groups)  # type: ignore[no-any-return]


def conv_transpose1d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
    output_padding: IntOrSeq = 0, groups: int = 1, dilation: IntOrSeq = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv_transpose1d`: the 1-D transposed convolution, `F.conv_transpose1d`."""
    _need(input, "conv_transpose1d")
    _need(weight, "conv_transpose1d", "weight")
    b = _opt(bias, "conv_transpose1d", "bias")
    _conv_transpose_guard("conv_transpose1d", input, weight, 1, stride, padding, output_padding, groups, dilation)
    return _F().conv_transpose1d(input, weight, b, stride, padding, output_padding, groups, dilation)  # type: ignore[no-any-return]


def conv_transpose2d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
    output_padding: IntOrSeq = 0, groups: int = 1, dilation: IntOrSeq = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv_transpose2d`: the 2-D transposed convolution, `F.conv_transpose2d`."""
    _need(input, "conv_transpose2d")
    _need(weight, "conv_transpose2d", "weight")
    b = _opt(bias, "conv_transpose2d", "bias")
    _conv_transpose_guard("conv_transpose2d", input, weight, 2, stride, padding, output_padding, groups, dilation)
    return _F().conv_transpose2d(input, weight, b, stride, padding, output_padding, groups, dilation)  # type: ignore[no-any-return]


def conv_transpose3d(
    input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntOrSeq = 1, padding: IntOrSeq = 0,
    output_padding: IntOrSeq = 0, groups: int = 1, dilation: IntOrSeq = 1,
) -> Tensor:  # fmt: skip
    """`torch.conv_transpose3d`: the 3-D transposed convolution, `F.conv_transpose3d`."""
    _need(input, "conv_transpose3d")
    _need(weight, "conv_transpose3d", "weight")
    b = _opt(bias, "conv_transpose3d", "bias")
    _conv_transpose_guard("conv_transpose3d", input, weight, 3, stride, padding, output_padding, groups, dilation)
    return _F().conv_transpose3d(input, weight, b, stride, padding, output_padding, groups, dilation)  # type: ignore[no-any-return]


def _p(op: str, p: Any) -> float:
    v = _number(op, "p", p)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {v}")
    return float(v)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.dropout(input, p, train)`: `F.dropout` (zeros with probability `p` and scales
    the rest by `1 / (1 - p)` when `train`; the input itself otherwise)."""
    return _F().dropout(_need(input, "dropout"), _p("dropout", p), builtins.bool(train))  # type: ignore[no-any-return]


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.alpha_dropout(input, p, train)`: `F.alpha_dropout` (keeps SELU's mean and variance)."""
    return _F().alpha_dropout(_need(input, "alpha_dropout"), _p("alpha_dropout", p), builtins.bool(train))  # type: ignore[no-any-return]


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """`torch.feature_alpha_dropout(input, p, train)`: `F.feature_alpha_dropout` (whole channels)."""
    x = _need(input, "feature_alpha_dropout")
    return _F().feature_alpha_dropout(x, _p("feature_alpha_dropout", p), builtins.bool(train))  # type: ignore[no-any-return]


def _into(input: Tensor, result: Tensor) -> Tensor:
    """`input`, holding `result` (what an in-place functional returned: `input` itself, or
    a new tensor where the functional took a shortcut, as dropout with p = 1 does)."""
    return input if result is input else input.copy_(result)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place `dropout`: writes the result into `input` and returns it."""
    x = _need(input, "dropout_")
    return _into(x, _F().dropout(x, _p("dropout_", p), builtins.bool(train), inplace=True))


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place `alpha_dropout`: writes the result into `input` and returns it."""
    x = _need(input, "alpha_dropout_")
    return _into(x, _F().alpha_dropout(x, _p("alpha_dropout_", p), builtins.bool(train), inplace=True))


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place `feature_alpha_dropout`: writes the result into `input` and returns it."""
    x = _need(input, "feature_alpha_dropout_")
    p = _p("feature_alpha_dropout_", p)
    return _into(x, _F().feature_alpha_dropout(x, p, builtins.bool(train), inplace=True))


def _shape_arg(op: str, arg: str, v: Any) -> List[int]:
    if isinstance(v, (int, builtins.bool)):
        raise TypeError(f"{op}(): argument '{arg}' must be tuple of ints, not int")
    return list(_int_seq(op, arg, v))


def layer_norm(
    input: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
    eps: float = 1e-05, cudnn_enable: bool = True,
) -> Tensor:  # fmt: skip
    """`torch.layer_norm`: `F.layer_norm` over the trailing `normalized_shape` (`cudnn_enable` is ignored)."""
    _need(input, "layer_norm")
    shape = _shape_arg("layer_norm", "normalized_shape", normalized_shape)
    w, b = _opt(weight, "layer_norm", "weight"), _opt(bias, "layer_norm", "bias")
    return _F().layer_norm(input, shape, w, b, eps)  # type: ignore[no-any-return]


def group_norm(
    input: Tensor, num_groups: int, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-05,
    cudnn_enabled: bool = True,
) -> Tensor:  # fmt: skip
    """`torch.group_norm`: `F.group_norm` (`cudnn_enabled` is ignored)."""
    _need(input, "group_norm")
    w, b = _opt(weight, "group_norm", "weight"), _opt(bias, "group_norm", "bias")
    return _F().group_norm(input, _int("group_norm", "num_groups", num_groups), w, b, eps)  # type: ignore[no-any-return]


def batch_norm(
    input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], running_mean: Optional[Tensor],
    running_var: Optional[Tensor], training: bool, momentum: float, eps: float, cudnn_enabled: bool,
) -> Tensor:  # fmt: skip
    """`torch.batch_norm`, with PyTorch's argument order (weight and bias before the running
    statistics, all required): `F.batch_norm`."""
    op = "batch_norm"
    _need(input, op)
    w, b = _opt(weight, op, "weight"), _opt(bias, op, "bias")
    rm, rv = _opt(running_mean, op, "running_mean"), _opt(running_var, op, "running_var")
    return _F().batch_norm(input, rm, rv, w, b, builtins.bool(training), momentum, eps)  # type: ignore[no-any-return]


def instance_norm(
    input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], running_mean: Optional[Tensor],
    running_var: Optional[Tensor], use_input_stats: bool, momentum: float, eps: float, cudnn_enabled: bool,
) -> Tensor:  # fmt: skip
    """`torch.instance_norm`, with PyTorch's argument order (all required): `F.instance_norm`."""
    op = "instance_norm"
    _need(input, op)
    w, b = _opt(weight, op, "weight"), _opt(bias, op, "bias")
    rm, rv = _opt(running_mean, op, "running_mean"), _opt(running_var, op, "running_var")
    return _F().instance_norm(input, rm, rv, w, b, builtins.bool(use_input_stats), momentum, eps)  # type: ignore[no-any-return]


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """`torch.embedding(weight, indices)`: the rows of `weight` at `indices` (`F.embedding`
    with its arguments swapped); a `padding_idx` >= 0 gets no gradient, a negative one is none."""
    _need(weight, "embedding", "weight")
    _need(indices, "embedding", "indices")
    pad = _int("embedding", "padding_idx", padding_idx)
    return _F().embedding(indices, weight, pad if pad >= 0 else None, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)  # type: ignore[no-any-return]


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """`torch.bilinear`: `x1^T W x2 + b` per output feature, `F.bilinear`."""
    _need(input1, "bilinear", "input1")
    _need(input2, "bilinear", "input2")
    _need(weight, "bilinear", "weight")
    return _F().bilinear(input1, input2, weight, _opt(bias, "bilinear", "bias"))  # type: ignore[no-any-return]


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """`torch.pixel_shuffle`: `(*, C r^2, H, W)` to `(*, C, H r, W r)`, `F.pixel_shuffle`."""
    _need(input, "pixel_shuffle")
    return _F().pixel_shuffle(input, _int("pixel_shuffle", "upscale_factor", upscale_factor))  # type: ignore[no-any-return]


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """`torch.pixel_unshuffle`: the inverse of `pixel_shuffle`, `F.pixel_unshuffle`."""
    _need(input, "pixel_unshuffle")
    return _F().pixel_unshuffle(input, _int("pixel_unshuffle", "downscale_factor", downscale_factor))  # type: ignore[no-any-return]


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """`torch.channel_shuffle`: the channels regrouped (`(g, C/g)` read as `(C/g, g)`), `F.channel_shuffle`."""
    _need(input, "channel_shuffle")
    return _F().channel_shuffle(input, _int("channel_shuffle", "groups", groups))  # type: ignore[no-any-return]


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-08) -> Tensor:
    """`torch.cosine_similarity`: `F.cosine_similarity` along `dim`."""
    _need(x1, "cosine_similarity", "x1")
    _need(x2, "cosine_similarity", "x2")
    return _F().cosine_similarity(x1, x2, _int("cosine_similarity", "dim", dim), eps)  # type: ignore[no-any-return]


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-06, keepdim: bool = False) -> Tensor:
    """`torch.pairwise_distance`: the `p`-norm of `x1 - x2 + eps` over the last dim, `F.pairwise_distance`."""
    _need(x1, "pairwise_distance", "x1")
    _need(x2, "pairwise_distance", "x2")
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)  # type: ignore[no-any-return]


def selu(input: Tensor) -> Tensor:
    """`torch.selu`: `F.selu`."""
    return _F().selu(_need(input, "selu"))  # type: ignore[no-any-return]


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """`torch.celu`: `F.celu` with `alpha`."""
    return _F().celu(_need(input, "celu"), alpha)  # type: ignore[no-any-return]


def _floating(op: str, input: Any) -> Tensor:
    _need(input, op)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: not implemented for {input.dtype} (floating point input only)")
    return input


def _no_generator(op: str, generator: Any) -> None:
    if generator is not None:
        raise ValueError(f"{op}: a generator argument is not supported (the global generator is used; seed it with manual_seed)")


def rrelu(input: Tensor, lower: float = 0.125, upper: float = 0.3333333333333333, training: bool = False, generator: Any = None) -> Tensor:
    """`torch.rrelu`: `F.rrelu` (random slopes in `[lower, upper]` when `training`, their mean
    otherwise; floating point tensors only, as PyTorch's)."""
    _no_generator("rrelu", generator)
    return _F().rrelu(_floating("rrelu", input), lower, upper, builtins.bool(training))  # type: ignore[no-any-return]


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """`torch.prelu`: `F.prelu` (the learned slope `weight` for negative inputs)."""
    _need(input, "prelu")
    _need(weight, "prelu", "weight")
    return _F().prelu(input, weight)  # type: ignore[no-any-return]


def threshold(input: Tensor, threshold: Number, value: Number) -> Tensor:
    """`torch.threshold`: `value` where `input <= threshold`, `input` elsewhere; `F.threshold`."""
    return _F().threshold(_need(input, "threshold"), threshold, value)  # type: ignore[no-any-return]


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """`torch.hardshrink`: 0 where `|input| <= lambd`, `input` elsewhere; `F.hardshrink`
    (floating point tensors only, as PyTorch's)."""
    return _F().hardshrink(_floating("hardshrink", input), lambd)  # type: ignore[no-any-return]


def selu_(input: Tensor) -> Tensor:
    """In-place `selu`: writes the result into `input` and returns it."""
    x = _need(input, "selu_")
    return _into(x, _F().selu(x, inplace=True))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place `celu`: writes the result into `input` and returns it."""
    x = _need(input, "celu_")
    return _into(x, _F().celu(x, alpha, inplace=True))


def rrelu_(input: Tensor, lower: float = 0.125, upper: float = 0.3333333333333333, training: bool = False, generator: Any = None) -> Tensor:
    """In-place `rrelu`: writes the result into `input` and returns it."""
    _no_generator("rrelu_", generator)
    x = _floating("rrelu_", input)
    return _into(x, _F().rrelu(x, lower, upper, builtins.bool(training), inplace=True))


def threshold_(input: Tensor, threshold: Number, value: Number) -> Tensor:
    """In-place `threshold`: writes the result into `input` and returns it."""
    x = _need(input, "threshold_")
    return _into(x, _F().threshold(x, threshold, value, inplace=True))


# PyTorch's `at::Reduction` values of the `reduction` argument of its top-level losses. An
# omitted `reduction` is 0 there (no reduction): the Python binding reads the schema's
# default `at::Reduction::Mean` as the integer 0, so `torch.kl_div(a, b)` is elementwise.
_REDUCTION = {1: "mean", 2: "sum"}


def _reduction(op: str, reduction: Any) -> str:
    """PyTorch's integer `reduction` (0 none, 1 mean, 2 sum; other ints reduce nothing, as in
    PyTorch) as the functional's name; strings and bools raise, as there."""
    if isinstance(reduction, builtins.bool) or not isinstance(reduction, int):
        raise TypeError(f"{op}(): argument 'reduction' must be int (0: none, 1: mean, 2: sum), not {type(reduction).__name__}")
    return _REDUCTION.get(reduction, "none")


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *, log_target: bool = False) -> Tensor:
    """`torch.kl_div`: the pointwise KL divergence of log-probabilities `input` from `target`,
    not reduced (`reduction=0`, what PyTorch's top-level losses do when it is omitted),
    averaged over all elements (1) or summed (2)."""
    _need(input, "kl_div")
    _need(target, "kl_div", "target")
    red = _reduction("kl_div", reduction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # F's note about 'mean' vs 'batchmean': the top-level op means 'mean'
        return _F().kl_div(input, target, reduction=red, log_target=log_target)  # type: ignore[no-any-return]


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, weight: Optional[Tensor] = None, pos_weight: Optional[Tensor] = None, reduction: int = 0
) -> Tensor:
    """`torch.binary_cross_entropy_with_logits`: `F.binary_cross_entropy_with_logits` with an integer `reduction`."""
    op = "binary_cross_entropy_with_logits"
    _need(input, op)
    _need(target, op, "target")
    w, pw = _opt(weight, op, "weight"), _opt(pos_weight, op, "pos_weight")
    return _F().binary_cross_entropy_with_logits(input, target, w, reduction=_reduction(op, reduction), pos_weight=pw)  # type: ignore[no-any-return]


def _stride(stride: Any) -> Any:
    """PyTorch's `stride=[]` default (the kernel size) as the functional's None."""
    return None if isinstance(stride, (tuple, list)) and len(stride) == 0 else stride


def max_pool1d(
    input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq = (), padding: IntOrSeq = 0, dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """`torch.max_pool1d`: `F.max_pool1d` (no indices; an empty `stride` is the kernel size)."""
    _need(input, "max_pool1d")
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)  # type: ignore[no-any-return]


def max_pool2d(
    input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq = (), padding: IntOrSeq = 0, dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """`torch.max_pool2d`: `F.max_pool2d` (no indices; an empty `stride` is the kernel size)."""
    _need(input, "max_pool2d")
    return _F().max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)  # type: ignore[no-any-return]


def max_pool3d(
    input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq = (), padding: IntOrSeq = 0, dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
) -> Tensor:  # fmt: skip
    """`torch.max_pool3d`: `F.max_pool3d` (no indices; an empty `stride` is the kernel size)."""
    _need(input, "max_pool3d")
    return _F().max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)  # type: ignore[no-any-return]


def avg_pool1d(
    input: Tensor, kernel_size: IntOrSeq, stride: IntOrSeq = (), padding: IntOrSeq = 0, ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:  # fmt: skip
    """`torch.avg_pool1d`: `F.avg_pool1d` (an empty `stride` is the kernel size)."""
    _need(input, "avg_pool1d")
    return _F().avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)  # type: ignore[no-any-return]


def _adaptive_guard(op: str, input: Any, output_size: Any) -> Tensor:
    _need(input, op)
    size = _ints(output_size, 1)
    if size is not None and input.dim() >= 1:
        lead = input.numel() // builtins.max(input.shape[-1], 1) if input.shape[-1] else 0
        _size_guard(op, input, builtins.max(lead, 1), size)
    return input  # type: ignore[no-any-return]


def adaptive_avg_pool1d(input: Tensor, output_size: IntOrSeq) -> Tensor:
    """`torch.adaptive_avg_pool1d`: `F.adaptive_avg_pool1d`."""
    return _F().adaptive_avg_pool1d(_adaptive_guard("adaptive_avg_pool1d", input, output_size), output_size)  # type: ignore[no-any-return]


def adaptive_max_pool1d(input: Tensor, output_size: IntOrSeq) -> Tuple[Tensor, Tensor]:
    """`torch.adaptive_max_pool1d`: the tuple `(values, indices)` of `F.adaptive_max_pool1d`."""
    out = _F().adaptive_max_pool1d(_adaptive_guard("adaptive_max_pool1d", input, output_size), output_size, return_indices=True)
    return (out[0], out[1])


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 0) -> Tensor:
    """`torch.hinge_embedding_loss`: `F.hinge_embedding_loss` with an integer `reduction`."""
    op = "hinge_embedding_loss"
    _need(input, op)
    _need(target, op, "target")
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction(op, reduction))  # type: ignore[no-any-return]


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 0) -> Tensor:
    """`torch.margin_ranking_loss`: `F.margin_ranking_loss` with an integer `reduction`."""
    op = "margin_ranking_loss"
    _need(input1, op, "input1")
    _need(input2, op, "input2")
    _need(target, op, "target")
    return _F().margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(op, reduction))  # type: ignore[no-any-return]


def triplet_margin_loss(
    anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0, eps: float = 1e-06,
    swap: bool = False, reduction: int = 0,
) -> Tensor:  # fmt: skip
    """`torch.triplet_margin_loss`: `F.triplet_margin_loss` with an integer `reduction`."""
    op = "triplet_margin_loss"
    _need(anchor, op, "anchor")
    _need(positive, op, "positive")
    _need(negative, op, "negative")
    red = _reduction(op, reduction)
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=red)  # type: ignore[no-any-return]


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int) -> Tensor:
    """`torch.poisson_nll_loss` (every argument required, an integer `reduction`): `F.poisson_nll_loss`."""
    op = "poisson_nll_loss"
    _need(input, op)
    _need(target, op, "target")
    red = _reduction(op, reduction)
    return _F().poisson_nll_loss(input, target, builtins.bool(log_input), builtins.bool(full), eps=eps, reduction=red)  # type: ignore[no-any-return]


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 0) -> Tensor:
    """`torch.cosine_embedding_loss`: `F.cosine_embedding_loss` with an integer `reduction`."""
    op = "cosine_embedding_loss"
    _need(input1, op, "input1")
    _need(input2, op, "input2")
    _need(target, op, "target")
    return _F().cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(op, reduction))  # type: ignore[no-any-return]


def ctc_loss(
    log_probs: Tensor, targets: Tensor, input_lengths: Union[Tensor, Sequence[int]], target_lengths: Union[Tensor, Sequence[int]],
    blank: int = 0, reduction: int = 0, zero_infinity: bool = False,
) -> Tensor:  # fmt: skip
    """`torch.ctc_loss`: `F.ctc_loss` with an integer `reduction` (0, the default: per batch
    element; 1: each loss divided by its target length, then averaged; 2: summed)."""
    op = "ctc_loss"
    _need(log_probs, op, "log_probs")
    _need(targets, op, "targets")
    red = _reduction(op, reduction)
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, reduction=red, zero_infinity=zero_infinity)  # type: ignore[no-any-return]


# -- in-place function forms (`torch.exp_(x)` is `x.exp_()`) --------------------------------


def abs_(input: Tensor) -> Tensor:
    """In-place `abs` (`input.abs_()`); returns `input`."""
    return _need(input, "abs_").abs_()


def acos_(input: Tensor) -> Tensor:
    """In-place `acos` (`input.acos_()`); returns `input`."""
    return _need(input, "acos_").acos_()


def acosh_(input: Tensor) -> Tensor:
    """In-place `acosh` (`input.acosh_()`); returns `input`."""
    return _need(input, "acosh_").acosh_()


def arccos_(input: Tensor) -> Tensor:
    """In-place `arccos` (`input.arccos_()`); returns `input`."""
    return _need(input, "arccos_").arccos_()


def arccosh_(input: Tensor) -> Tensor:
    """In-place `arccosh` (`input.arccosh_()`); returns `input`."""
    return _need(input, "arccosh_").arccosh_()


def arcsin_(input: Tensor) -> Tensor:
    """In-place `arcsin` (`input.arcsin_()`); returns `input`."""
    return _need(input, "arcsin_").arcsin_()


def arcsinh_(input: Tensor) -> Tensor:
    """In-place `arcsinh` (`input.arcsinh_()`); returns `input`."""
    return _need(input, "arcsinh_").arcsinh_()


def arctan_(input: Tensor) -> Tensor:
    """In-place `arctan` (`input.arctan_()`); returns `input`."""
    return _need(input, "arctan_").arctan_()


def arctanh_(input: Tensor) -> Tensor:
    """In-place `arctanh` (`input.arctanh_()`); returns `input`."""
    return _need(input, "arctanh_").arctanh_()


def asin_(input: Tensor) -> Tensor:
    """In-place `asin` (`input.asin_()`); returns `input`."""
    return _need(input, "asin_").asin_()


def asinh_(input: Tensor) -> Tensor:
    """In-place `asinh` (`input.asinh_()`); returns `input`."""
    return _need(input, "asinh_").asinh_()


def atan_(input: Tensor) -> Tensor:
    """In-place `atan` (`input.atan_()`); returns `input`."""
    return _need(input, "atan_").atan_()


def atanh_(input: Tensor) -> Tensor:
    """In-place `atanh` (`input.atanh_()`); returns `input`."""
    return _need(input, "atanh_").atanh_()


def ceil_(input: Tensor) -> Tensor:
    """In-place `ceil` (`input.ceil_()`); returns `input`."""
    return _need(input, "ceil_").ceil_()


def cos_(input: Tensor) -> Tensor:
    """In-place `cos` (`input.cos_()`); returns `input`."""
    return _need(input, "cos_").cos_()


def cosh_(input: Tensor) -> Tensor:
    """In-place `cosh` (`input.cosh_()`); returns `input`."""
    return _need(input, "cosh_").cosh_()


def deg2rad_(input: Tensor) -> Tensor:
    """In-place `deg2rad` (`input.deg2rad_()`); returns `input`."""
    return _need(input, "deg2rad_").deg2rad_()


def erf_(input: Tensor) -> Tensor:
    """In-place `erf` (`input.erf_()`); returns `input`."""
    return _need(input, "erf_").erf_()


def erfc_(input: Tensor) -> Tensor:
    """In-place `erfc` (`input.erfc_()`); returns `input`."""
    return _need(input, "erfc_").erfc_()


def exp2_(input: Tensor) -> Tensor:
    """In-place `exp2` (`input.exp2_()`); returns `input`."""
    return _need(input, "exp2_").exp2_()


def exp_(input: Tensor) -> Tensor:
    """In-place `exp` (`input.exp_()`); returns `input`."""
    return _need(input, "exp_").exp_()


def expm1_(input: Tensor) -> Tensor:
    """In-place `expm1` (`input.expm1_()`); returns `input`."""
    return _need(input, "expm1_").expm1_()


def fix_(input: Tensor) -> Tensor:
    """In-place `fix` (`input.fix_()`); returns `input`."""
    return _need(input, "fix_").fix_()


def floor_(input: Tensor) -> Tensor:
    """In-place `floor` (`input.floor_()`); returns `input`."""
    return _need(input, "floor_").floor_()


def frac_(input: Tensor) -> Tensor:
    """In-place `frac` (`input.frac_()`); returns `input`."""
    return _need(input, "frac_").frac_()


def log10_(input: Tensor) -> Tensor:
    """In-place `log10` (`input.log10_()`); returns `input`."""
    return _need(input, "log10_").log10_()


def log1p_(input: Tensor) -> Tensor:
    """In-place `log1p` (`input.log1p_()`); returns `input`."""
    return _need(input, "log1p_").log1p_()


def log2_(input: Tensor) -> Tensor:
    """In-place `log2` (`input.log2_()`); returns `input`."""
    return _need(input, "log2_").log2_()


def log_(input: Tensor) -> Tensor:
    """In-place `log` (`input.log_()`); returns `input`."""
    return _need(input, "log_").log_()


def neg_(input: Tensor) -> Tensor:
    """In-place `neg` (`input.neg_()`); returns `input`."""
    return _need(input, "neg_").neg_()


def negative_(input: Tensor) -> Tensor:
    """In-place `negative` (`input.negative_()`); returns `input`."""
    return _need(input, "negative_").negative_()


def rad2deg_(input: Tensor) -> Tensor:
    """In-place `rad2deg` (`input.rad2deg_()`); returns `input`."""
    return _need(input, "rad2deg_").rad2deg_()


def reciprocal_(input: Tensor) -> Tensor:
    """In-place `reciprocal` (`input.reciprocal_()`); returns `input`."""
    return _need(input, "reciprocal_").reciprocal_()


def relu_(input: Tensor) -> Tensor:
    """In-place `relu` (`input.relu_()`); returns `input`."""
    return _need(input, "relu_").relu_()


def rsqrt_(input: Tensor) -> Tensor:
    """In-place `rsqrt` (`input.rsqrt_()`); returns `input`."""
    return _need(input, "rsqrt_").rsqrt_()


def sigmoid_(input: Tensor) -> Tensor:
    """In-place `sigmoid` (`input.sigmoid_()`); returns `input`."""
    return _need(input, "sigmoid_").sigmoid_()


def sin_(input: Tensor) -> Tensor:
    """In-place `sin` (`input.sin_()`); returns `input`."""
    return _need(input, "sin_").sin_()


def sinc_(input: Tensor) -> Tensor:
    """In-place `sinc` (`input.sinc_()`); returns `input`."""
    return _need(input, "sinc_").sinc_()


def sinh_(input: Tensor) -> Tensor:
    """In-place `sinh` (`input.sinh_()`); returns `input`."""
    return _need(input, "sinh_").sinh_()


def sqrt_(input: Tensor) -> Tensor:
    """In-place `sqrt` (`input.sqrt_()`); returns `input`."""
    return _need(input, "sqrt_").sqrt_()


def square_(input: Tensor) -> Tensor:
    """In-place `square` (`input.square_()`); returns `input`."""
    return _need(input, "square_").square_()


def tan_(input: Tensor) -> Tensor:
    """In-place `tan` (`input.tan_()`); returns `input`."""
    return _need(input, "tan_").tan_()


def tanh_(input: Tensor) -> Tensor:
    """In-place `tanh` (`input.tanh_()`); returns `input`."""
    return _need(input, "tanh_").tanh_()


def trunc_(input: Tensor) -> Tensor:
    """In-place `trunc` (`input.trunc_()`); returns `input`."""
    return _need(input, "trunc_").trunc_()


def round_(input: Tensor, *, decimals: int = 0) -> Tensor:
    """In-place `round` to `decimals` places, halves to even (`input.round_()`); returns `input`."""
    _need(input, "round_")
    d = _int("round_", "decimals", decimals)
    return input.round_(decimals=d) if d else input.round_()


def detach_(input: Tensor) -> Tensor:
    """`input.detach_()`: `input` taken out of the graph (a leaf without gradient); returns it."""
    return _need(input, "detach_").detach_()


def zero_(input: Tensor) -> Tensor:
    """`input.zero_()`: every element set to 0; returns `input`."""
    return _need(input, "zero_").zero_()


def _fill_value(op: str, value: Any) -> Any:
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise ShapeError(f"{op}: only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions")
        return value
    if isinstance(value, (int, float, builtins.bool)):
        return value
    raise TypeError(f"{op}(): argument 'value' must be a number or a 0-d Tensor, not {type(value).__name__}")


def fill_(input: Tensor, value: Union[Number, Tensor]) -> Tensor:
    """`input.fill_(value)`: every element set to `value` (a number or a 0-d tensor); returns `input`."""
    _need(input, "fill_")
    return input.fill_(_fill_value("fill_", value))


def fill(input: Tensor, value: Union[Number, Tensor]) -> Tensor:
    """A tensor of `input`'s shape and dtype filled with `value` (a number, cast as
    `fill_` casts, or a 0-d tensor); out of place. Gradients: zeros for `input`, the sum of
    the output's for a tensor `value`, as PyTorch's."""
    _need(input, "fill")
    v = _fill_value("fill", value)
    v = v.to(input.dtype) if isinstance(v, Tensor) else tensor(v).to(input.dtype)
    never = zeros(*input.shape, dtype=_bool, device=input.device)
    return where(never, input, v)


def clamp_(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """`input.clamp_(min, max)`; returns `input`."""
    return _need(input, "clamp_").clamp_(min, max)


def clip_(input: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """`input.clip_(min, max)` (alias of `clamp_`); returns `input`."""
    return _need(input, "clip_").clip_(min, max)


def clamp_min_(input: Tensor, min: Union[Number, Tensor]) -> Tensor:
    """`input.clamp_min_(min)`; returns `input`."""
    return _need(input, "clamp_min_").clamp_min_(min)


def clamp_max_(input: Tensor, max: Union[Number, Tensor]) -> Tensor:
    """`input.clamp_max_(max)`; returns `input`."""
    return _need(input, "clamp_max_").clamp_max_(max)


def addmv_(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`input.addmv_(mat, vec, beta=, alpha=)`: `beta * input + alpha * (mat @ vec)` written into `input`."""
    return _need(input, "addmv_").addmv_(mat, vec, beta=beta, alpha=alpha)


def nan_to_num_(input: Tensor, nan: float = 0.0, posinf: Optional[float] = None, neginf: Optional[float] = None) -> Tensor:
    """`input.nan_to_num_(nan, posinf, neginf)`; returns `input`."""
    return _need(input, "nan_to_num_").nan_to_num_(nan, posinf, neginf)


def xlogy_(input: Tensor, other: Union[Tensor, Number]) -> Tensor:
    """`input.xlogy_(other)`; returns `input`."""
    return _need(input, "xlogy_").xlogy_(other)


def logit_(input: Tensor, eps: Optional[float] = None) -> Tensor:
    """`input.logit_(eps)`; returns `input`."""
    return _need(input, "logit_").logit_(eps)


def gcd_(input: Tensor, other: Tensor) -> Tensor:
    """`input.gcd_(other)`; returns `input`."""
    return _gcd_inplace(_need(input, "gcd_"), other)


def lcm_(input: Tensor, other: Tensor) -> Tensor:
    """`input.lcm_(other)`; returns `input`."""
    return _lcm_inplace(_need(input, "lcm_"), other)


def ldexp_(input: Tensor, other: Tensor) -> Tensor:
    """`input.ldexp_(other)`; returns `input`."""
    return _ldexp_inplace(_need(input, "ldexp_"), other)


def index_put_(input: Tensor, indices: Sequence[Tensor], values: Tensor, accumulate: bool = False) -> Tensor:
    """`input.index_put_(indices, values, accumulate)`; returns `input`."""
    return _index_put_method(_need(input, "index_put_"), indices, values, accumulate)


# -- small compositions ---------------------------------------------------------------------


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """`input` repeated `dims[i]` times along each dim; a shorter `dims` is padded with
    leading 1s, a longer one adds leading dims (as `repeat`)."""
    _need(input, "tile")
    return _tile("tile", input, _shape_arg("tile", "dims", dims))


def _tile(op: str, input: Tensor, dims: Sequence[int]) -> Tensor:
    reps = (1,) * (input.dim() - len(dims)) + tuple(dims)
    if any(r < 0 for r in reps):
        raise ValueError(f"{op}: negative repetitions {list(dims)} for a tensor of shape {_shape(input)}")
    if len(reps) == 0:
        return input.clone()
    total = input.numel()
    for r in reps:
        total *= r
    _guard(op, total, f"the result of tiling a tensor of shape {_shape(input)} by {list(dims)}")
    return input.repeat(*reps)


def ravel(input: Tensor) -> Tensor:
    """`input` flattened to 1-D (a view when possible)."""
    return _need(input, "ravel").ravel()


def clone(input: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of `input` that stays in the graph (`memory_format` is accepted and ignored:
    candle_py tensors have one layout)."""
    return _need(input, "clone").clone()


def detach(input: Tensor) -> Tensor:
    """`input` without its graph (shares its data)."""
    return _need(input, "detach").detach()


def rsub(input: Tensor, other: Union[Tensor, Number], *, alpha: Number = 1) -> Tensor:
    """`other - alpha * input` (`other` a tensor or a number), type-promoted; bool tensors
    raise, and so does a float `alpha` with integer tensors, as in PyTorch."""
    _need(input, "rsub")
    if isinstance(other, Tensor):
        _broadcast("rsub", input, other)
    elif not isinstance(other, (int, float, builtins.bool)):
        raise TypeError(f"rsub(): argument 'other' must be Tensor or Number, not {type(other).__name__}")
    if not isinstance(alpha, (int, float, builtins.bool)):
        raise TypeError(f"rsub(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    dt = _result_dtype(input, other)
    if input.dtype == _bool or (isinstance(other, Tensor) and other.dtype == _bool):
        raise DTypeError("rsub: subtraction, the `-` operator, with a bool tensor is not supported; use `~` or `logical_not()`")
    if _kind(dt) < 2 and isinstance(alpha, float):
        raise DTypeError(f"rsub: for integral input tensors ({dt}), argument alpha must not be a floating point number")
    scaled = input if alpha == 1 else input * alpha
    return other - scaled


def scalar_tensor(
    s: Union[Number, Tensor], *, dtype: Any = None, layout: Any = None, device: Any = None, requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:  # fmt: skip
    """A 0-d tensor holding `s`, of the default float dtype unless `dtype` is given (even for
    an int or bool `s`, as PyTorch's)."""
    v = _number("scalar_tensor", "s", s)
    dt = get_default_dtype() if dtype is None else dtype
    return tensor(v, dtype=dt, device=device, requires_grad=requires_grad)


def range(
    start: Number, end: Number, step: Number = 1, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """Deprecated `torch.range`: `start, start + step, ...` up to `end` inclusive, of the
    default float dtype unless `dtype` is given (warns, as PyTorch; use `arange`)."""
    warnings.warn(
        "torch.range is deprecated and will be removed in a future release because its behavior is inconsistent with "
        "Python's range builtin. Instead, use torch.arange, which produces values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    dt = get_default_dtype() if dtype is None else dtype
    vals = [_number("range", n, v) for n, v in (("start", start), ("end", end), ("step", step))]
    if not dt.is_floating_point:  # PyTorch accumulates integer ranges in int64: the arguments truncate
        for v in vals:
            if not math.isfinite(v):
                raise ValueError(f"range: unsupported range: {vals[0]} -> {vals[1]}")
        vals = [int(v) for v in vals]
    a, b, s = vals
    if s == 0:
        raise ValueError("range: step must be nonzero")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"range: unsupported range: {a} -> {b}")
    if not ((s > 0 and b >= a) or (s < 0 and b <= a)):
        raise ValueError("range: upper bound and lower bound inconsistent with step sign")
    n = int((b - a) // s) + 1 if isinstance(a, int) and isinstance(b, int) and isinstance(s, int) else int((b - a) / s + 1)
    _guard("range", n, f"range({a}, {b}, {s})")
    if dt.is_floating_point:
        out = (arange(n, dtype=float64) * float(s) + float(a)).to(dt)
    else:
        out = (arange(n, dtype=int64) * s + a).to(dt)
    if device is not None:
        out = out.to(device)
    return out.requires_grad_(True) if requires_grad else out


def _zero_d_scalar(op: str, arg: str, v: Any) -> Union[int, float]:
    if isinstance(v, Tensor) and v.dim() != 0:
        raise ShapeError(f"{op} only supports 0-dimensional {arg} and end tensors, but got {arg} with {v.dim()} dimension(s).")
    return _number(op, arg, v)


def logspace(
    start: Union[Number, Tensor], end: Union[Number, Tensor], steps: int, base: float = 10.0, *, dtype: Any = None,
    layout: Any = None, device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """`steps` values `base ** e` for `e` evenly spaced from `start` to `end` (inclusive),
    computed as PyTorch's (from either end toward the middle, in double precision, then cast)."""
    a = _zero_d_scalar("logspace", "start", start)
    b = _zero_d_scalar("logspace", "end", end)
    n = _int("logspace", "steps", steps)
    base_v = float(_number("logspace", "base", base))
    if n < 0:
        raise ValueError(f"logspace: number of steps must be non-negative, got {n}")
    _guard("logspace", n, f"logspace with {n} steps")
    dt = get_default_dtype() if dtype is None else dtype
    if n == 0:
        out = zeros(0, dtype=dt)
    elif n == 1:
        out = tensor([base_v ** float(a)], dtype=float64).to(dt)
    else:
        if dt.is_floating_point:  # the ends in the result dtype, their difference in it too
            ta, tb = tensor(a, dtype=dt), tensor(b, dtype=dt)
            lo, hi, diff = float(ta.item()), float(tb.item()), float((tb - ta).item())
        else:  # integer dtypes: the ends truncate, the base is a float32
            lo, hi = float(int(a)), float(int(b))
            diff = hi - lo
            base_v = float(tensor(base_v, dtype=float32).item())
        step = diff / (n - 1)
        i = arange(n, dtype=float64)
        e = where(i < n // 2, i * step + lo, hi - (float(n - 1) - i) * step)
        out = tensor(base_v, dtype=float64).pow(e)
        out = out.trunc().to(dt) if not dt.is_floating_point else out.to(dt)
    if device is not None:
        out = out.to(device)
    return out.requires_grad_(True) if requires_grad else out


# -- dtype promotion --------------------------------------------------------------------------


_DTYPES = (_DType, ComplexDType)


def _dtype_arg(op: str, arg: str, v: Any) -> Any:
    if not isinstance(v, _DTYPES):
        raise TypeError(f"{op}(): argument '{arg}' must be candle_py.dtype, not {type(v).__name__}")
    return v


def _promote(a: Any, b: Any) -> Any:
    if a == b:
        return a
    if isinstance(a, ComplexDType) or isinstance(b, ComplexDType):
        ra = a.to_real() if isinstance(a, ComplexDType) else a
        rb = b.to_real() if isinstance(b, ComplexDType) else b
        return complex128 if _promote(ra, rb) == float64 else complex64
    if uint32 in (a, b) and not (a.is_floating_point or b.is_floating_point):
        raise DTypeError(f"promote_types: promotion for uint32 is not supported, attempted to promote {a} and {b}")
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return a if ka > kb else b
    if {a, b} == {float16, bfloat16}:
        return float32
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return a if a.is_signed else b


def promote_types(type1: Any, type2: Any) -> Any:
    """The smallest dtype both `type1` and `type2` convert to without losing their category
    (bool < integer < floating < complex), as PyTorch's table: `uint8` with `int16` is
    `int16`, `float16` with `bfloat16` is `float32`; `uint32` with an integer raises."""
    return _promote(_dtype_arg("promote_types", "type1", type1), _dtype_arg("promote_types", "type2", type2))


def _combine(higher: Any, lower: Any) -> Any:
    """PyTorch's `combine_categories`: a lower-priority operand only promotes the result when
    it is of a higher category (float over int, complex over float)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _kind(higher) == 3:
        return higher
    if _kind(lower) == 3:
        return (complex128 if higher == float64 else complex64) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher == _bool or lower.is_floating_point:
        return _promote(higher, lower)
    return higher


def _operand(op: str, x: Any) -> Tuple[int, Any]:
    """(priority, dtype): 0 for Python numbers (float ones take the default dtype), 1 for
    0-d tensors, 2 for tensors with dims."""
    if isinstance(x, (Tensor, ComplexTensor)):
        return (2 if x.dim() > 0 else 1), x.dtype
    if isinstance(x, builtins.bool):
        return 0, _bool
    if isinstance(x, int):
        return 0, int64
    if isinstance(x, float):
        return 0, get_default_dtype()
    if isinstance(x, complex):
        return 0, complex128 if get_default_dtype() == float64 else complex64
    raise TypeError(f"{op}(): expected a Tensor or a Number, got {type(x).__name__}")


def result_type(tensor: Union[Tensor, Number], other: Union[Tensor, Number]) -> Any:
    """The dtype an arithmetic op on `tensor` and `other` (tensors or numbers) returns:
    tensors with dims decide, 0-d tensors only when of a higher category, numbers last."""
    slots: List[Any] = [None, None, None]
    for x in (tensor, other):
        p, dt = _operand("result_type", x)
        slots[p] = dt if slots[p] is None else _promote(slots[p], dt)
    return _combine(slots[2], _combine(slots[1], slots[0]))


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's casting rule allows `from_` into `to` in an in-place op: not complex
    to real, not floating to integer, nothing but bool to bool."""
    a, b = _dtype_arg("can_cast", "from_", from_), _dtype_arg("can_cast", "to", to)
    if _kind(a) == 3 and _kind(b) != 3:
        return False
    if _kind(a) == 2 and _kind(b) < 2:
        return False
    return not (a != _bool and b == _bool)


# -- elementwise --------------------------------------------------------------------------------


def _real_only(op: str, input: Any) -> Tensor:
    if isinstance(input, ComplexTensor):
        raise DTypeError(f"{op} does not support complex inputs.")
    return _need(input, op)


def isposinf(input: Tensor) -> Tensor:
    """Bool tensor: where `input` is `+inf` (all false for integer and bool tensors)."""
    x = _real_only("isposinf", input).detach()
    if not x.dtype.is_floating_point:
        return zeros(*x.shape, dtype=_bool, device=x.device)
    return x == math.inf


def isneginf(input: Tensor) -> Tensor:
    """Bool tensor: where `input` is `-inf` (all false for integer and bool tensors)."""
    x = _real_only("isneginf", input).detach()
    if not x.dtype.is_floating_point:
        return zeros(*x.shape, dtype=_bool, device=x.device)
    return x == -math.inf


def isreal(input: Tensor) -> Tensor:
    """Bool tensor: where `input`'s imaginary part is 0 (everywhere for real tensors)."""
    if isinstance(input, ComplexTensor):
        return input.imag.detach() == 0
    x = _need(input, "isreal").detach()
    return zeros(*x.shape, dtype=_bool, device=x.device).logical_not()


def _fext(op: str, input: Tensor, other: Tensor, greater: bool) -> Tensor:
    a, b, dt = _binary(op, input, other)
    if dt == _bool:
        return a.logical_or(b) if greater else a.logical_and(b)
    both = a.maximum(b) if greater else a.minimum(b)  # ties split the gradient, as PyTorch's
    if not dt.is_floating_point:
        return both
    return where(b.isnan(), a, where(a.isnan(), b, both))


def fmax(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise maximum ignoring NaN (NaN only where both are, the gradient then to
    `input`); ties split the gradient, as PyTorch's."""
    return _fext("fmax", input, other, True)


def fmin(input: Tensor, other: Tensor) -> Tensor:
    """The elementwise minimum ignoring NaN (NaN only where both are, the gradient then to
    `input`); ties split the gradient, as PyTorch's."""
    return _fext("fmin", input, other, False)


def _exponent(x: Tensor) -> Tensor:
    """`e` with `|x| = m * 2**e`, `m` in [0.5, 1), read from the float's exponent bits
    (subnormals scaled into the normal range first); 0 for 0, inf and NaN. int32."""
    dt = x.dtype
    ity, mbits, ebits, bias = _FLOAT_BITS[dt]
    xa = x.abs()
    smallest_normal = tensor(1, dtype=ity).__lshift__(mbits).view(dt)
    sub = (xa < smallest_normal) & (xa > 0)
    xs = where(sub, xa * float(2 ** (mbits + 1)), xa)
    field = (xs.contiguous().view(ity) >> mbits) & ((1 << ebits) - 1)
    e = field - (bias - 1) - where(sub, mbits + 1, 0).to(ity)
    return where((xa == 0) | x.isfinite().logical_not(), 0, e).to(int32)


def frexp(input: Tensor) -> Any:
    """The named tuple `(mantissa, exponent)` with `input = mantissa * 2**exponent`,
    `|mantissa|` in [0.5, 1) (0, inf and NaN give themselves and 0); the exponent is
    int32. The mantissa's gradient is `grad / 2**exponent`."""
    _need(input, "frexp")
    dt = input.dtype
    if not dt.is_floating_point:
        raise DTypeError(f"frexp(): only supports floating-point dtypes, got {dt}")
    e = _exponent(input.detach())
    half = (-e).div(2, rounding_mode="floor")
    m = input * _pow2(half, dt) * _pow2(-e - half, dt)  # two exact power-of-two factors (2**-e can overflow)
    return frexp_result(m, e)


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """`input * 2 ** other` (`other` a tensor) in the promoted dtype of the two (the default
    float dtype when that is an integer one). An integer `other` scales exactly, as C's
    `ldexp` (rounding once, so `0 * 2**200` is 0 and `1e-40 * 2**160` is finite in
    float32); a floating one multiplies by `2.0 ** other`, as PyTorch's."""
    _need(input, "ldexp")
    _need(other, "ldexp", "other")
    _broadcast("ldexp", input, other)
    dt = _result_dtype(input, other)
    if not dt.is_floating_point:
        dt = get_default_dtype()
    if other.dtype.is_floating_point:
        out = input * (2.0**other)
        return out if out.dtype == dt else out.to(dt)
    x = _as(input, dt)
    _, mbits, _, bias = _FLOAT_BITS[dt]
    lo, hi = 2 - bias, bias  # the exponents of 2**k normal in dt, one margin below for the mantissa
    ex = _exponent(x.detach())
    half = (-ex).div(2, rounding_mode="floor")
    m = x * _pow2(half, dt) * _pow2(-ex - half, dt)  # x's mantissa in [0.5, 1), exactly
    e = ex.to(int64) + other.detach().to(int32).to(int64).clamp(-4 * bias, 4 * bias)  # C's int exponent
    e = e.clamp(2 * lo - 1, 2 * hi)  # beyond, the result is 0 or inf either way
    e1 = e.clamp(lo, hi)  # m * 2**e1 stays normal: exact; the second factor rounds once
    return m * _pow2(e1, dt) * _pow2(e - e1, dt)


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    """The next representable float after `input` toward `other` (floating dtypes only;
    `other` where they are equal, NaN where either is). Not differentiable."""
    a, b, dt = _binary("nextafter", input, other)
    if not dt.is_floating_point:
        raise DTypeError(f"nextafter: not implemented for {dt}")
    shape = _broadcast("nextafter", a, b)
    a = a.detach().expand(*shape).contiguous()
    b = b.detach().expand(*shape).contiguous()
    ity = _FLOAT_BITS[dt][0]
    away = (b > a) == (a > 0)  # moving away from zero grows the magnitude bits
    step = where(away, 1, -1).to(ity)
    nxt = (a.view(ity) + step).view(dt)
    tiny = tensor(1, dtype=ity).view(dt)
    out = where(a == 0, where(b > 0, tiny, -tiny), nxt)
    out = where(a == b, b, out)
    return where(a.isnan() | b.isnan(), math.nan, out)


def _gcd_parts(op: str, input: Tensor, other: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    a, b, dt = _binary(op, input, other)
    if not _is_int(dt):
        raise DTypeError(f"{op}: not implemented for {dt} (integer tensors only)")
    shape = _broadcast(op, a, b)
    a = a.detach().expand(*shape).contiguous()
    b = b.detach().expand(*shape).contiguous()
    x, y = a.abs(), b.abs()
    # Euclid on every pair at once until all remainders are 0 (at most ~92 rounds for int64)
    for _ in builtins.range(200):
        nz = x != 0
        if not builtins.bool(nz.any()):
            break
        safe = where(nz, x, 1).to(dt)
        x, y = where(nz, y % safe, 0).to(dt), where(nz, x, y).to(dt)
    return y, a, b


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor of each pair (integer tensors; `gcd(0, 0) = 0`), non-negative."""
    return _gcd_parts("gcd", input, other)[0]


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple of each pair (integer tensors; 0 where either is 0), non-negative."""
    g, a, b = _gcd_parts("lcm", input, other)
    safe = where(g == 0, 1, g).to(g.dtype)
    return where(g == 0, 0, (a.div(safe, rounding_mode="trunc") * b).abs()).to(g.dtype)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with `input` flattened on its `offset`-th diagonal, zeros elsewhere."""
    _need(input, "diagflat")
    k = _int("diagflat", "offset", offset)
    n = input.numel() + builtins.abs(k)
    _guard("diagflat", n * n, f"a {n} x {n} matrix")
    return input.reshape(-1).diag(k)


def cross(input: Tensor, other: Tensor, dim: Optional[int] = None) -> Tensor:
    """The cross product of 3-vectors along `dim` (default, deprecated as in PyTorch: the
    first dim of `input` of size 3), the other dims broadcast; one dtype for both."""
    _need(input, "cross")
    _need(other, "cross", "other")
    if input.dim() != other.dim():
        raise ShapeError(f"cross: inputs must have the same number of dimensions (shapes {_shape(input)} and {_shape(other)})")
    if input.dtype != other.dtype:
        raise DTypeError(f"cross: expected both inputs to have the same dtype, got {input.dtype} and {other.dtype}")
    if input.dtype == _bool:
        raise DTypeError("cross: not implemented for candle_py.bool")
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated. Please either pass the dim explicitly or "
            "simply use torch.linalg.cross. The default value of dim will change to agree with that of linalg.cross in "
            "a future release.",
            UserWarning,
            stacklevel=2,
        )
        sizes = list(input.shape)
        if 3 not in sizes:
            raise ShapeError(f"cross: no dimension of size 3 in input (shape {sizes})")
        d = sizes.index(3)
    else:
        d = _wrap("cross", dim, input.dim())
    if input.dim() == 0 or input.shape[d] != 3 or other.shape[d] != 3:
        got = (input.shape[d], other.shape[d]) if input.dim() else (1, 1)
        raise ShapeError(f"cross: inputs dimension {d} must have length 3. Got {got[0]} and {got[1]}")
    _broadcast("cross", input, other)
    a = [input.narrow(d, i, 1) for i in (0, 1, 2)]
    b = [other.narrow(d, i, 1) for i in (0, 1, 2)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


# -- scans ----------------------------------------------------------------------------------


def _cum_extreme(op: str, input: Tensor, dim: int, greater: bool) -> Tuple[Tensor, Tensor]:
    """Running max (min) along `dim` and where it was taken: NaN ranks above every number
    and, on ties, the later index wins, as PyTorch's. A log-step doubling scan: after the
    step of width s each position holds the best of the 2s elements ending at it."""
    _need(input, op)
    d = _wrap(op, dim, input.dim())
    if input.dim() == 0:
        return input.clone(), zeros((), dtype=int64, device=input.device)
    x = input.detach().movedim(d, -1).contiguous()
    if x.dtype == _bool:
        x = x.to(uint8)
    n = x.shape[-1]
    idx = arange(n, dtype=int64, device=x.device).expand(*x.shape).contiguous()
    floating = x.dtype.is_floating_point
    s = 1
    while s < n:
        pv, pi, cv, ci = x[..., : n - s], idx[..., : n - s], x[..., s:], idx[..., s:]
        earlier = (pv > cv) if greater else (pv < cv)  # the earlier element wins only when strictly better
        if floating:
            earlier = (earlier | pv.isnan()) & cv.isnan().logical_not()
        x = cat([x[..., :s], where(earlier, pv, cv)], -1)
        idx = cat([idx[..., :s], where(earlier, pi, ci)], -1)
        s *= 2
    indices = idx.movedim(-1, d).contiguous()
    return input.gather(d, indices), indices


def cummax(input: Tensor, dim: int) -> Any:
    """The named tuple `(values, indices)` of the running maximum along `dim`: NaN
    propagates, ties take the last index; gradients flow to the elements picked."""
    return cummax_result(*_cum_extreme("cummax", input, dim, True))


def cummin(input: Tensor, dim: int) -> Any:
    """The named tuple `(values, indices)` of the running minimum along `dim`: NaN
    propagates, ties take the last index; gradients flow to the elements picked."""
    return cummin_result(*_cum_extreme("cummin", input, dim, False))


def unravel_index(indices: Tensor, shape: Union[int, Sequence[int]]) -> Tuple[Tensor, ...]:
    """The coordinates (a tuple of int64 tensors, one per dim of `shape`) of flat `indices`
    into a tensor of `shape`, as PyTorch's (out-of-range and negative indices wrap)."""
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): argument 'indices' must be Tensor, not {type(indices).__name__}")
    if indices.dtype.is_floating_point or indices.dtype == _bool:
        raise DTypeError(f"unravel_index: expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, (int, builtins.bool)):
        dims: Tuple[int, ...] = (int(shape),)
    elif isinstance(shape, Sequence):
        for s in shape:
            if not isinstance(s, int):
                raise TypeError(f"unravel_index: expected 'shape' sequence to only contain ints, but got {type(s).__name__}")
        dims = tuple(int(s) for s in shape)
    else:
        raise TypeError(f"unravel_index: expected 'shape' to be int or sequence of ints, but got {type(shape).__name__}")
    if any(s < 0 for s in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, but got {dims}")
    if any(s == 0 for s in dims) and indices.numel() > 0:
        raise ValueError(f"unravel_index: 'shape' cannot have zero dimensions when 'indices' is non-empty, but got {dims}")
    coefs = []
    acc = 1
    for s in reversed(dims):
        coefs.append(acc)
        acc *= s
    coefs.reverse()
    if any(c >= 2**63 for c in coefs):
        raise ValueError(f"unravel_index: the strides of shape {dims} overflow int64")
    idx = indices.detach().to(int64).unsqueeze(-1)
    out = idx.div(tensor(coefs, dtype=int64), rounding_mode="floor") % tensor(dims, dtype=int64)
    return tuple(out.unbind(-1))


# -- histograms and searches ------------------------------------------------------------------


def histc(input: Tensor, bins: int = 100, min: Number = 0, max: Number = 0) -> Tensor:
    """Counts of `input`'s elements in `bins` equal-width bins over [min, max] (the data's
    own range when min == max; values outside are ignored, `max` falls in the last bin), of
    `input`'s floating dtype. Not differentiable."""
    _need(input, "histc")
    dt = input.dtype
    if not dt.is_floating_point:
        raise DTypeError(f"histc: not implemented for {dt} (floating point input only)")
    nb = _int("histc", "bins", bins)
    if nb <= 0:
        raise ValueError(f"histc: bins must be > 0, but got {nb}")
    _guard("histc", nb, f"a histogram of {nb} bins")
    lo, hi = float(_number("histc", "min", min)), float(_number("histc", "max", max))
    x = input.detach().reshape(-1)
    if lo == hi and x.numel() > 0:
        lo, hi = float(x.amin().item()), float(x.amax().item())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"histc: range of [{lo}, {hi}] is not finite")
    if not lo < hi:
        raise ValueError(f"histc: max must be larger than min (got min={lo}, max={hi})")
    # PyTorch's edges are in the input dtype; the bin index is computed in float (double for f64)
    left, right = tensor(lo, dtype=dt), tensor(hi, dtype=dt)
    inside = (x >= left) & (x <= right)
    work = float64 if dt == float64 else float32
    xv, lv, rv = x.masked_select(inside).to(work), left.to(work), right.to(work)
    pos = ((xv - lv) * float(nb) / (rv - lv)).to(int64)
    pos = where(pos >= nb, nb - 1, pos)
    return pos.bincount(minlength=nb).to(dt)


def searchsorted(
    sorted_sequence: Tensor, input: Union[Tensor, Number], *, out_int32: bool = False, right: bool = False,
    side: Optional[str] = None, sorter: Optional[Tensor] = None,
) -> Tensor:  # fmt: skip
    """For each value of `input`, the index where it would go in the last dim of
    `sorted_sequence` (1-D, or with `input`'s leading dims) to keep it sorted: the first
    such index (`right=False` / `side='left'`) or the last. `sorter` sorts an unsorted
    sequence. A vectorized bisection, the same steps as PyTorch's (so NaN goes last);
    int64 results (int32 with `out_int32`)."""
    op = "searchsorted"
    _need(sorted_sequence, op, "sorted_sequence")
    if isinstance(input, Tensor):
        values = input
    elif isinstance(input, (int, float, builtins.bool)):
        values = None
    else:
        raise TypeError(f"searchsorted(): argument 'input' must be Tensor or Number, not {type(input).__name__}")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise ValueError("searchsorted(): side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence
    if seq.dim() == 0:
        raise ShapeError("searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension")
    if seq.dim() > 1:
        if values is None:
            raise ShapeError(
                f"searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, got shape {_shape(seq)}"
            )
        if values.dim() != seq.dim() or tuple(values.shape[:-1]) != tuple(seq.shape[:-1]):
            raise ShapeError(
                "searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor "
                f"and input value tensor must match, but we got boundaries tensor {_shape(seq)} and input value tensor {_shape(values)}"
            )
    if sorter is not None:
        _need(sorter, op, "sorter")
        if sorter.dtype != int64:
            raise DTypeError(f"searchsorted(): sorter must be a tensor of long dtype but got dtype {sorter.dtype}")
        if tuple(sorter.shape) != tuple(seq.shape):
            raise ShapeError(
                f"searchsorted(): boundary and sorter must have the same size, but got boundary tensor {_shape(seq)} "
                f"and sorter tensor {_shape(sorter)}"
            )
        m0 = seq.shape[-1]
        if sorter.numel() and (builtins.bool((sorter < 0).any()) or builtins.bool((sorter >= m0).any())):
            raise IndexError("searchsorted(): sorter index out of range")
        seq = seq.gather(-1, sorter)
    dt = _result_dtype(seq, input)
    if dt == _bool:
        raise DTypeError("searchsorted: not implemented for candle_py.bool")
    seq = _as(seq.detach(), dt).contiguous()
    v = tensor(input, dtype=dt) if values is None else _as(values.detach(), dt)
    out_shape = tuple(v.shape)
    v = v.reshape(-1) if seq.dim() == 1 else v.contiguous()
    m = seq.shape[-1]
    lo = zeros(*v.shape, dtype=int64, device=v.device)
    if m > 0 and v.numel() > 0:
        hi = lo + m
        for _ in builtins.range(m.bit_length() + 1):
            active = lo < hi
            if not builtins.bool(active.any()):
                break
            mid = (lo + hi).div(2, rounding_mode="floor")
            at = seq.gather(-1, mid.clamp(max=m - 1))
            go_right = (at > v).logical_not() if right else (at >= v).logical_not()  # NaN compares false: goes right
            lo = where(active & go_right, mid + 1, lo)
            hi = where(active & go_right.logical_not(), mid, hi)
    out = lo.reshape(out_shape)
    return out.to(int32) if out_int32 else out


def bucketize(input: Union[Tensor, Number], boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each value of `input` among the sorted 1-D `boundaries`: `i` with
    `boundaries[i-1] < x <= boundaries[i]` (`right=False`) or `boundaries[i-1] <= x <
    boundaries[i]` (`right=True`); `searchsorted(boundaries, input)`."""
    _need(boundaries, "bucketize", "boundaries")
    if boundaries.dim() != 1:
        raise ShapeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# -- quantiles and medians ----------------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op: str, input: Tensor, q: Any, dim: Optional[int], keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    _need(input, op)
    dt = input.dtype
    if input.numel() == 0:
        raise ValueError(f"{op}() input tensor must be non-empty")
    if dt not in (float32, float64):
        raise DTypeError(f"{op}() input tensor must be either float or double dtype, got {dt}")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise ShapeError(f"{op}() q must be a scalar or 1D tensor, got shape {_shape(q)}")
        if q.dtype != dt:
            raise DTypeError(f"{op}() q tensor must be same dtype as the input tensor (q {q.dtype}, input {dt})")
        qt, scalar_q = q.detach(), q.dim() == 0
        if qt.numel() and not builtins.bool(((qt >= 0) & (qt <= 1)).all()):
            raise ValueError(f"{op}() q values must be in the range [0, 1]")
    elif isinstance(q, (int, float)) and not isinstance(q, builtins.bool):
        if not 0 <= q <= 1:
            raise ValueError(f"{op}() q must be in the range [0, 1] but got {q}")
        qt, scalar_q = tensor(float(q), dtype=dt), True
    else:
        raise TypeError(f"{op}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, but got {interpolation}")
    nd = input.dim()
    if dim is None:
        x = input.reshape(-1)
    else:
        d = _wrap(op, dim, nd)
        x = input.movedim(d, -1) if nd > 0 else input.reshape(1)
    srt = x.sort(-1).values  # NaN sorts last
    n = srt.shape[-1]
    qv = qt.reshape(-1)
    lead = tuple(srt.shape[:-1])
    nan = srt.detach().isnan()
    if ignore_nan:
        count = nan.logical_not().sum(-1, keepdim=True).to(dt)
        ranks = qv * (count - 1)
        ranks = where(ranks < 0, 0.0, ranks)
    else:
        last = float(n - 1)
        ranks = (qv * last).expand(*lead, qv.shape[0])
        ranks = where(nan.any(-1, keepdim=True), last, ranks)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # halves to even, as PyTorch
    below = ranks.to(int64)
    out = srt.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weight = ranks.new_full(tuple(ranks.shape), 0.5) if interpolation == "midpoint" else ranks - below.to(dt)
        above = srt.gather(-1, ranks.ceil().to(int64))
        out = out.lerp(above, weight)
    out = out.movedim(-1, 0)  # the q dim first
    if keepdim:
        if dim is None:
            out = out.reshape(qv.shape[0], *([1] * nd))
        elif nd > 0:
            out = out.unsqueeze(_wrap(op, dim, nd) + 1)
    return out.squeeze(0) if scalar_q else out


def quantile(
    input: Tensor, q: Union[float, Tensor], dim: Optional[int] = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """The `q`-quantiles (a float, or a 0-d or 1-D tensor of input's dtype, whose values
    lead the result's dims) of `input` (float32/float64) over `dim` (all elements when
    None), between sorted neighbours by `interpolation` (linear, lower, higher, midpoint,
    nearest); NaN where a slice has one. Differentiable."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(
    input: Tensor, q: Union[float, Tensor], dim: Optional[int] = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """`quantile` ignoring NaN (NaN only where a slice has nothing else)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def nanmedian(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Any:
    """The lower median ignoring NaN (NaN where there is nothing else): of all elements (a
    0-d tensor, its gradient spread evenly over the elements equal to it, as PyTorch's), or
    along `dim` as the named tuple `(values, indices)` (ties: the first equal element in a
    stable sort, where PyTorch's choice is unspecified)."""
    _need(input, "nanmedian")
    if input.dtype == _bool:
        raise DTypeError("nanmedian: not implemented for candle_py.bool")
    floating = input.dtype.is_floating_point
    if dim is None:
        if not floating or input.numel() == 0:
            return input.median()
        keep = input.detach().isnan().logical_not()
        if not builtins.bool(keep.any()):
            return input.median()
        return input.masked_select(keep).median()
    d = _wrap("nanmedian", dim, input.dim())
    if input.dim() == 0:
        return nanmedian_result(input.clone(), zeros((), dtype=int64, device=input.device))
    if input.shape[d] == 0:
        raise IndexError(f"nanmedian(): Expected reduction dim {d} to have non-zero size (input of shape {_shape(input)})")
    x = input.detach()
    order = x.sort(d, stable=True).indices
    count = x.isnan().logical_not().sum(d, keepdim=True) if floating else x.new_full((1,) * x.dim(), x.shape[d], dtype=int64)
    pos = (count - 1).div(2, rounding_mode="floor").clamp(min=0)
    pos = pos.expand(*[1 if i == d else s for i, s in enumerate(x.shape)]).contiguous()
    indices = order.gather(d, pos)
    values = input.gather(d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return nanmedian_result(values, indices)


# -- window functions -------------------------------------------------------------------------


def _window_args(op: str, window_length: Any, periodic: Any, requested: Any) -> Tuple[int, bool, Any]:
    n = _int(op, "window_length", window_length)
    if not isinstance(periodic, (builtins.bool, int)):
        raise TypeError(f"{op}(): argument 'periodic' must be bool, not {type(periodic).__name__}")
    if n < 0:
        raise ValueError(f"{op} requires non-negative window_length, got window_length={n}")
    dt = get_default_dtype() if requested is None else requested
    if not isinstance(dt, _DType) or not dt.is_floating_point:
        raise DTypeError(f"{op} expects floating point dtypes, got: {dt}")
    _guard(op, n, f"a window of length {n}")
    return n, builtins.bool(periodic), dt


def _window_out(w: Tensor, periodic: bool, device: Any, requires_grad: bool) -> Tensor:
    if periodic:
        w = w[:-1]
    if device is not None:
        w = w.to(device)
    return w.requires_grad_(True) if requires_grad else w


def hamming_window(
    window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype: Any = None,
    layout: Any = None, device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Hamming window `alpha - beta cos(2 pi n / (N - 1))` (periodic: one longer, last
    dropped, for spectral use), of the default float dtype unless `dtype` is given."""
    n, periodic, dt = _window_args("hamming_window", window_length, periodic, dtype)
    if n <= 1:
        return _window_out(zeros(n, dtype=dt) + 1, False, device, requires_grad)
    m = n + 1 if periodic else n
    w = (arange(m, dtype=dt) * (math.pi * 2.0 / (m - 1))).cos() * -float(beta) + float(alpha)
    return _window_out(w, periodic, device, requires_grad)


def hann_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Hann window `0.5 - 0.5 cos(2 pi n / (N - 1))` (periodic: one longer, last dropped)."""
    _window_args("hann_window", window_length, periodic, dtype)
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Blackman window `0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))`."""
    n, periodic, dt = _window_args("blackman_window", window_length, periodic, dtype)
    if n <= 1:
        return _window_out(zeros(n, dtype=dt) + 1, False, device, requires_grad)
    m = n + 1 if periodic else n
    t = arange(m, dtype=dt) * (math.pi / (m - 1))
    w = (t * 4).cos() * 0.08 - (t * 2).cos() * 0.5 + 0.42
    return _window_out(w, periodic, device, requires_grad)


def bartlett_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The triangular Bartlett window `1 - |2n / (N - 1) - 1|`."""
    n, periodic, dt = _window_args("bartlett_window", window_length, periodic, dtype)
    if n <= 1:
        return _window_out(zeros(n, dtype=dt) + 1, False, device, requires_grad)
    m = n + 1 if periodic else n
    t = arange(m, dtype=dt) * (2.0 / (m - 1))
    half = ((m - 1) >> 1) + 1
    w = cat([t[:half], 2 - t[half:]])
    return _window_out(w, periodic, device, requires_grad)


# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on
# (8, inf), PyTorch's `calc_i0` (for the Kaiser window).
_I0_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16, 1.71539128555513303061e-15,
    -1.16853328779934516808e-14, 7.67618549860493561688e-14, -4.85644678311192946090e-13, 2.95505266312963983461e-12,
    -1.72682629144155570723e-11, 9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7, 1.11738753912010371815e-6,
    -4.41673835845875056359e-6, 1.64484480707288970893e-5, -5.75419501008210370398e-5, 1.88502885095841655729e-4,
    -5.76375574538582365885e-4, 1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2, 1.71620901522208775349e-1,
    -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)  # fmt: skip
_I0_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17, 3.46122286769746109310e-17,
    -2.82762398051658348494e-16, -3.42548561967721913462e-16, 1.77256013305652638360e-15, 3.81168066935262242075e-15,
    -9.55484669882830764870e-15, -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11, -3.14991652796324136454e-11,
    1.18891471078464383424e-11, 4.94060238822496958910e-10, 3.39623202570838634515e-9, 2.26666899049817806459e-8,
    2.04891858946906374183e-7, 2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)  # fmt: skip


def _chbevl(x: Tensor, coefs: Sequence[float]) -> Tensor:
    b0, b1, b2 = x * 0 + coefs[0], x * 0, x * 0
    for c in coefs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return (b0 - b2) * 0.5


def _i0(x: Tensor) -> Tensor:
    """The modified Bessel function I0, elementwise (Cephes' approximation, as PyTorch)."""
    x = x.abs()
    small = _chbevl(x / 2.0 - 2.0, _I0_A) * x.exp()
    xl = where(x > 8.0, x, 8.0)
    large = _chbevl(32.0 / xl - 2.0, _I0_B) * x.exp() / xl.sqrt()
    return where(x <= 8.0, small, large)


def kaiser_window(
    window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype: Any = None, layout: Any = None,
    device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The Kaiser window `I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)`, `a = (N - 1) / 2`,
    computed in float (double for float64) as PyTorch's."""
    n, periodic, dt = _window_args("kaiser_window", window_length, periodic, dtype)
    b = float(_number("kaiser_window", "beta", beta))
    if n <= 1:
        return _window_out(zeros(n, dtype=dt) + 1, False, device, requires_grad)
    m = n + 1 if periodic else n
    work = float64 if dt == float64 else float32
    alpha = (m - 1) / 2.0
    t = (arange(m, dtype=dt).to(work) - alpha) / alpha
    arg = (1 - t * t).abs().sqrt() * b
    w = (_i0(arg) / _i0(tensor(b, dtype=work))).to(dt)
    return _window_out(w, periodic, device, requires_grad)


# -- scatters and puts ----------------------------------------------------------------------


def _positions(input: Tensor) -> Tensor:
    """The flat index of each element of `input`, in its shape (int64)."""
    return arange(input.numel(), dtype=int64, device=input.device).reshape(*input.shape)


def _scatter_at(op: str, input: Tensor, pos: Tensor, src: Tensor) -> Tensor:
    """`input` with the elements at flat positions `pos` replaced by `src` (of `pos`'s
    shape, cast to input's dtype); gradients flow to both."""
    if tuple(src.shape) != tuple(pos.shape):
        raise ShapeError(
            f"{op}: expected src to have a size equal to the slice of self. src size = {_shape(src)}, slice size = {_shape(pos)}"
        )
    s = src if src.dtype == input.dtype else src.to(input.dtype)
    flat = input.reshape(-1).index_copy(0, pos.reshape(-1), s.reshape(-1))
    return flat.reshape(*input.shape)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """`input` with the slice `input.select(dim, index)` replaced by `src` (out of place)."""
    _need(input, "select_scatter")
    _need(src, "select_scatter", "src")
    if input.dim() == 0:
        raise IndexError("select_scatter: select() cannot be applied to a 0-dim tensor.")
    d = _wrap("select_scatter", dim, input.dim())
    i = _int("select_scatter", "index", index)
    size = input.shape[d]
    if not -size <= i < size:
        raise IndexError(f"select_scatter: index {i} out of range for tensor of size {_shape(input)} at dimension {d}")
    return _scatter_at("select_scatter", input, _positions(input).select(d, i), src)


def slice_scatter(
    input: Tensor, src: Tensor, dim: int = 0, start: Optional[int] = None, end: Optional[int] = None, step: int = 1
) -> Tensor:
    """`input` with the slice `start:end:step` along `dim` replaced by `src` (out of place)."""
    _need(input, "slice_scatter")
    _need(src, "slice_scatter", "src")
    if input.dim() == 0:
        raise IndexError("slice_scatter: slice() cannot be applied to a 0-dim tensor.")
    d = _wrap("slice_scatter", dim, input.dim())
    st = _int("slice_scatter", "step", step)
    if st <= 0:
        raise ValueError(f"slice_scatter: slice step must be positive, got {st}")
    a = None if start is None else _int("slice_scatter", "start", start)
    b = None if end is None else _int("slice_scatter", "end", end)
    pos = _positions(input)[(slice(None),) * d + (slice(a, b, st),)]
    return _scatter_at("slice_scatter", input, pos, src)


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """`input` with its diagonal `input.diagonal(offset, dim1, dim2)` replaced by `src` (out of place)."""
    _need(input, "diagonal_scatter")
    _need(src, "diagonal_scatter", "src")
    if input.dim() < 2:
        raise ShapeError(f"diagonal_scatter: expected a tensor of at least 2 dims, got shape {_shape(input)}")
    d1, d2 = _wrap("diagonal_scatter", dim1, input.dim()), _wrap("diagonal_scatter", dim2, input.dim())
    if d1 == d2:
        raise ValueError(f"diagonal_scatter: diagonal dimensions cannot be identical {dim1}, {dim2}")
    pos = _positions(input).diagonal(_int("diagonal_scatter", "offset", offset), d1, d2)
    return _scatter_at("diagonal_scatter", input, pos, src)


def _index_positions(op: str, input: Tensor, indices: Any) -> Tensor:
    """The flat positions `input[indices]` reads (PyTorch's advanced indexing: long, int
    and bool tensors, byte tensors as masks)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    if len(indices) == 0:
        raise ValueError(f"{op}(): indices must not be empty")
    idx = []
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 'indices', but got {type(t).__name__}")
        if t.dtype in (int64, _bool):
            idx.append(t.detach())
        elif t.dtype == uint8:
            idx.append(t.detach().to(_bool))
        elif t.dtype in (int32, int16):
            idx.append(t.detach().to(int64))
        else:
            raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, got {t.dtype}")
    return _positions(input)[tuple(idx)]


def index_put(input: Tensor, indices: Sequence[Tensor], values: Tensor, accumulate: bool = False) -> Tensor:
    """`input` with `values` (broadcast) written at `input[indices]` (a tuple of index or
    mask tensors), or added there with `accumulate=True` (duplicates add up); out of place.
    Without `accumulate`, duplicate indices keep the last value."""
    _need(input, "index_put")
    _need(values, "index_put", "values")
    if values.dtype != input.dtype:
        raise DTypeError(
            f"index_put: Index put requires the source and destination dtypes match, got {input.dtype} for the "
            f"destination and {values.dtype} for the source."
        )
    pos = _index_positions("index_put", input, indices)
    try:
        vals = values.expand(*pos.shape)
    except (ValueError, RuntimeError):
        raise ShapeError(
            f"index_put: shape mismatch: value tensor of shape {_shape(values)} cannot be broadcast to indexing result "
            f"of shape {_shape(pos)}"
        ) from None
    flat, p, v = input.reshape(-1), pos.reshape(-1), vals.reshape(-1)
    out = flat.index_add(0, p, v) if accumulate else flat.index_copy(0, p, v)
    return out.reshape(*input.shape)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """`input` (seen flat) with `source` written at the flat `index` (negative counts from
    the end), or added with `accumulate=True`; out of place."""
    _need(input, "put")
    _need(index, "put", "index")
    _need(source, "put", "source")
    if index.dtype != int64:
        raise DTypeError(f"put_(): Expected a long tensor for index, but got {index.dtype}")
    if source.dtype != input.dtype:
        raise DTypeError(
            f"put_(): self and source expected to have the same dtype, but got self.dtype = {input.dtype} and source.dtype = {source.dtype}"
        )
    if index.numel() != source.numel():
        raise IndexError(
            f"put_(): Expected source and index to have the same number of elements, but got source.numel() = {source.numel()}, "
            f"index.numel() = {index.numel()}"
        )
    n = input.numel()
    p = index.detach().reshape(-1)
    if p.numel() == 0:
        return input.clone()
    if n == 0:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    bad = (p < -n) | (p >= n)
    if builtins.bool(bad.any()):
        raise IndexError(f"put: out of range: tried to access index {int(p.masked_select(bad)[0].item())} on a tensor of {n} elements.")
    p = where(p < 0, p + n, p)
    flat, v = input.reshape(-1), source.reshape(-1)
    out = flat.index_add(0, p, v) if accumulate else flat.index_copy(0, p, v)
    return out.reshape(*input.shape)


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> Tuple[Tensor, ...]:
    """`input` split along `dim` into pieces of `split_sizes` (non-negative, summing to the dim's size)."""
    _need(input, "split_with_sizes")
    sizes = list(_int_seq("split_with_sizes", "split_sizes", split_sizes))
    if input.dim() == 0:
        raise IndexError("split_with_sizes: cannot split a 0-dim tensor")
    d = _wrap("split_with_sizes", dim, input.dim())
    if any(s < 0 for s in sizes):
        raise ValueError(f"split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes={sizes}")
    if builtins.sum(sizes) != input.shape[d]:
        raise ValueError(
            f"split_with_sizes expects split_sizes to sum exactly to {input.shape[d]} (input tensor's size at dimension {d}), "
            f"but got split_sizes={sizes}"
        )
    out = []
    at = 0
    for s in sizes:
        out.append(input.narrow(d, at, s))
        at += s
    return tuple(out)


def is_signed(input: Tensor) -> bool:
    """Whether `input`'s dtype is signed (floating point and signed integers)."""
    return builtins.bool(_need(input, "is_signed").dtype.is_signed)


def is_nonzero(input: Tensor) -> bool:
    """Whether the one element of `input` is not zero (NaN counts as non-zero); other
    sizes raise, as `bool(tensor)` would be ambiguous."""
    _need(input, "is_nonzero")
    n = input.numel()
    if n == 0:
        raise ValueError("is_nonzero: Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise ValueError(f"is_nonzero: Boolean value of Tensor with more than one value is ambiguous (shape {_shape(input)})")
    return builtins.bool(input.item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether `input` and `other` have the same shape."""
    _need(input, "is_same_size")
    _need(other, "is_same_size", "other")
    return tuple(input.shape) == tuple(other.shape)


def is_inference(input: Tensor) -> bool:
    """Whether `input` is an inference tensor: never, in candle_py (`inference_mode` only
    stops graph recording; the tensors made in it are ordinary ones)."""
    _need(input, "is_inference")
    return False


def get_device(input: Tensor) -> int:
    """The device index of `input`: -1 on the CPU, the ordinal of a GPU otherwise."""
    _need(input, "get_device")
    dev = input.device
    if dev.type == "cpu":
        return -1
    index = getattr(dev, "index", None)
    return 0 if index is None else int(index)


# -- Tensor methods ----------------------------------------------------------------------------


def _tile_method(self: Tensor, *dims: Any) -> Tensor:
    """`self` repeated `dims[i]` times along each dim (`x.tile(2, 3)` or `x.tile((2, 3))`);
    a shorter `dims` is padded with leading 1s."""
    reps = dims[0] if len(dims) == 1 and not isinstance(dims[0], (int, builtins.bool)) else dims
    return _tile("tile", self, _int_seq("tile", "dims", reps))


def _sum_to_size(self: Tensor, *size: Any) -> Tensor:
    """`self` summed down to `size` (which must expand to self's shape): leading dims and
    the dims where `size` is 1 are summed away."""
    if len(size) == 0:
        raise TypeError("sum_to_size() missing 1 required positional argument: 'size'")
    target = _int_seq("sum_to_size", "size", size[0] if len(size) == 1 and not isinstance(size[0], (int, builtins.bool)) else size)
    shape = tuple(self.shape)
    lead = len(shape) - len(target)
    if lead < 0 or any(t != 1 and t != s for t, s in zip(target, shape[lead:])):
        raise ShapeError(f"sum_to_size: size {list(target)} is not expandable to size {list(shape)}.")
    if target == shape:
        return self
    out = self
    if lead:
        out = out.sum(tuple(builtins.range(lead)))
    keep = tuple(i for i, (t, s) in enumerate(zip(target, out.shape)) if t == 1 and s != 1)
    if keep:
        out = out.sum(keep, keepdim=True)
    if out.dtype == _bool:
        out = out.to(int64)
    return out


def _fill_scalar(op: str, dt: Any, v: Any) -> Any:
    """PyTorch's cast of a fill value to `dt` (floats truncate for integers)."""
    v = _number(op, "fill_value", v)
    if dt == _bool:
        return builtins.bool(v)
    if dt.is_floating_point:
        return float(v)
    if not math.isfinite(v):
        raise ValueError(f"{op}: value {v} cannot be converted to type {dt} without overflow")
    from ._dtype_info import iinfo

    info = iinfo(dt)
    iv = int(v)
    if not info.min <= iv <= info.max:
        raise ValueError(f"{op}: value {v} cannot be converted to type {dt} without overflow")
    return iv


def _fill_diagonal_(self: Tensor, fill_value: Number, wrap: bool = False) -> Tensor:
    """The main diagonal (all indices equal) set to `fill_value`, in place; for a 2-D tall
    matrix `wrap=True` restarts the diagonal every `ncols + 1` rows, as NumPy's."""
    nd = self.dim()
    if nd < 2:
        raise ValueError(f"fill_diagonal_: dimensions must larger than 1 (got shape {_shape(self)})")
    shape = list(self.shape)
    h, w = shape[0], shape[1]
    if nd > 2 and any(s != h for s in shape):
        raise ShapeError(f"fill_diagonal_: all dimensions of input must be of equal length (got shape {shape})")
    v = _fill_scalar("fill_diagonal_", self.dtype, fill_value)
    numel = self.numel()
    if nd == 2:
        step, count = w + 1, builtins.min(h, w)
        if wrap and h > w + 1:
            count = (numel + step - 1) // step
    else:
        step, count = builtins.sum(h**i for i in builtins.range(nd)), h
    pos = arange(count, dtype=int64, device=self.device) * step
    mask = zeros(numel, dtype=_bool, device=self.device).index_fill(0, pos, True).reshape(*shape)
    return self.masked_fill_(mask, v)


def _index_put_method(self: Tensor, indices: Sequence[Tensor], values: Tensor, accumulate: bool = False) -> Tensor:
    """In-place `index_put`: `values` written (or added, `accumulate=True`) at `self[indices]`; returns `self`."""
    _need(self, "index_put_")
    res = index_put(self._inplace_source(), indices, values, accumulate)
    return self.copy_(res)


def _put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place `put`: `source` written (or added, `accumulate=True`) at the flat `index`; returns `self`."""
    res = put(self._inplace_source(), index, source, accumulate)
    return self.copy_(res)


def _converter(op: str, dt: Any) -> Callable[[Any], Any]:
    """A callable's return value as an element of `dt` (floats truncate for integers)."""

    def conv(r: Any) -> Any:
        if not isinstance(r, numbers.Real):
            raise TypeError(f"{op}: the callable must return a number, got {type(r).__name__}")
        v = float(r)
        if dt == _bool:
            return builtins.bool(r)
        if dt.is_floating_point:
            return v
        if not math.isfinite(v):
            raise ValueError(f"{op}: value {r} cannot be converted to type {dt} without overflow")
        return math.trunc(r)

    return conv


def _per_element(op: str, self: Tensor, fn: Any) -> Callable[[Any], Any]:
    if not builtins.callable(fn):
        raise TypeError(f"{op}(): '{type(fn).__name__}' object is not callable")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() instead.")
    if self.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors")
    return _converter(op, self.dtype)


def _apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Each element replaced by `callable(element)`, in place, one Python call per element
    (CPU only, and not on a tensor that requires grad, as PyTorch's); returns `self`."""
    conv = _per_element("apply_", self, callable)
    vals = [conv(callable(v)) for v in self.reshape(-1).tolist()]
    self.copy_(tensor(vals, dtype=self.dtype).reshape(*self.shape))
    return self


def _map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """Each element replaced by `callable(element, other)` with `other` the matching element
    of `tensor` (same dtype, broadcast to self's shape), in place, one Python call per
    element (CPU only); returns `self`."""
    conv = _per_element("map_", self, callable)
    _need(tensor, "map_", "tensor")
    if tensor.dtype != self.dtype:
        raise DTypeError(f"map_: expected {self.dtype} for 'tensor' (got {tensor.dtype})")
    try:
        other = tensor.detach().expand(*self.shape)
    except (ValueError, RuntimeError):
        raise ShapeError(f"map_: tensor of shape {_shape(tensor)} cannot be broadcast to self's shape {_shape(self)}") from None
    vals = [conv(callable(a, b)) for a, b in zip(self.reshape(-1).tolist(), other.reshape(-1).tolist())]
    self.copy_(_tensor(vals, dtype=self.dtype).reshape(*self.shape))
    return self


def _short(self: Tensor) -> Tensor:
    """`self` as int16 (`self.to(candle_py.int16)`)."""
    return self.to(int16)


def _is_cpu(self: Tensor) -> bool:
    """Whether `self` lives on the CPU."""
    return builtins.bool(self.device.type == "cpu")


def _nbytes(self: Tensor) -> int:
    """The bytes of `self`'s elements (`numel() * itemsize`, views and expansions counted in full)."""
    return int(self.numel() * self.element_size())


def _itemsize(self: Tensor) -> int:
    """The bytes of one element (`element_size()`)."""
    return int(self.element_size())


def _gcd_inplace(self: Tensor, other: Tensor) -> Tensor:
    return _as_inplace(gcd)(self, other)  # type: ignore[no-any-return]


def _lcm_inplace(self: Tensor, other: Tensor) -> Tensor:
    return _as_inplace(lcm)(self, other)  # type: ignore[no-any-return]


def _ldexp_inplace(self: Tensor, other: Tensor) -> Tensor:
    return _as_inplace(ldexp)(self, other)  # type: ignore[no-any-return]


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = name
    fn.__qualname__ = "Tensor." + name
    return fn


# The Tensor methods of this module (PyTorch's method forms), their in-place twins, and
# the methods and properties with no function form.
for _n in (
    "hardshrink", "isposinf", "isneginf", "isreal", "fmax", "fmin", "frexp", "ldexp", "nextafter", "gcd", "lcm",
    "diagflat", "cross", "cummax", "cummin", "histc", "quantile", "nanquantile", "nanmedian", "is_signed", "is_nonzero",
    "is_same_size", "is_inference", "get_device", "split_with_sizes", "index_put", "put", "select_scatter",
    "slice_scatter", "diagonal_scatter",
):  # fmt: skip
    setattr(Tensor, _n, _as_method(globals()[_n]))
for _n in ("ldexp", "nextafter", "gcd", "lcm"):
    setattr(Tensor, _n + "_", _as_inplace(globals()[_n]))
_fn: Callable[..., Any]
for _n, _fn in (
    ("tile", _tile_method), ("sum_to_size", _sum_to_size), ("fill_diagonal_", _fill_diagonal_),
    ("index_put_", _index_put_method), ("put_", _put_), ("apply_", _apply_), ("map_", _map_), ("short", _short),
):  # fmt: skip
    setattr(Tensor, _n, _named(_fn, _n))
for _n, _fn in (("is_cpu", _is_cpu), ("nbytes", _nbytes), ("itemsize", _itemsize)):
    setattr(Tensor, _n, property(_fn, doc=_fn.__doc__))  # read-only attributes, as PyTorch's
del _n, _fn
