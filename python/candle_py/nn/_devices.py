"""How nn's Rust kernels meet tensors that live off the CPU.

Convolution, pooling and the fused attention kernel in `_core` are CPU code
(Candle custom ops with hand-written backwards). On another device:

- convolution and pooling take the documented fallback `on_cpu`: the inputs
  are copied to the CPU, the kernel runs there and the results are copied
  back. `Tensor.to` is differentiable, so gradients reach the GPU tensors.
  Correct, but it pays two transfers and CPU speed.
- scaled dot-product attention runs `sdpa_math`, PyTorch's "math" backend:
  matmul, mask, softmax, matmul, all Candle ops that run on the device.

Either way the tensors must share one device; if not, `DeviceError` names them.
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional

from .. import _core
from .._core import DeviceError, ShapeError, Tensor


def _devices(op: str, args: tuple) -> Optional[_core.device]:
    """The one device of the tensors in `args` (None if there are none)."""
    seen: List[_core.device] = []
    for a in args:
        if isinstance(a, Tensor) and a.device not in seen:
            seen.append(a.device)
    if len(seen) > 1:
        raise DeviceError(f"{op} expected all tensors on one device, got {' and '.join(map(str, seen))}")
    return seen[0] if seen else None


def on_cpu(kernel: Callable[..., Any], op: str, *args: Any) -> Any:
    """`kernel(*args)` for a CPU-only `_core` kernel, whatever the tensors' device."""
    dev = _devices(op, args)
    if dev is None or dev.type == "cpu":
        return kernel(*args)
    out = kernel(*[a.cpu() if isinstance(a, Tensor) else a for a in args])
    if isinstance(out, tuple):  # (values, indices) of max pooling
        return tuple(o.to(dev) for o in out)
    return out.to(dev)


def sdpa_math(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor],
    dropout_p: float,
    is_causal: bool,
    scale: Optional[float],
    enable_gqa: bool,
) -> Tensor:
    """`softmax(Q K^T * scale + mask) V` from device ops, with the fused kernel's
    semantics: bool masks (True takes part) or additive ones, top-left causal mask,
    grouped kv heads, rows with every key masked give zeros. Half-precision
    inputs are computed in float32, as the fused kernel does."""
    op = "scaled_dot_product_attention:"
    _devices(op, (query, key, value, attn_mask))
    dt = query.dtype
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(
            f"{op} expected query, key and value of at least 2 dims, got shapes {list(query.shape)}, {list(key.shape)}, {list(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"{op} query {list(query.shape)}, key {list(key.shape)} and value {list(value.shape)} "
            "must share the embedding size (query/key) and the sequence length (key/value)"
        )
    wide = dt in (_core.float16, _core.bfloat16)
    q, k, v = (t.float() for t in (query, key, value)) if wide else (query, key, value)
    if enable_gqa and min(q.ndim, k.ndim, v.ndim) >= 3:
        k, v = _repeat_kv(q, k, "key", op), _repeat_kv(q, v, "value", op)
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (q * scale) @ k.transpose(-2, -1)
    if is_causal:
        attn_mask = _core.ones(L, S, dtype=_core.bool, device=q.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == _core.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask.to(scores.dtype)
    # A row whose keys are all masked (max -inf) gives zeros; it is softmaxed
    # as zeros first so that neither the value nor the gradient becomes NaN.
    live = scores.amax(-1, keepdim=True) > -math.inf
    probs = scores.masked_fill(live.logical_not(), 0.0).softmax(-1)
    probs = probs * live.to(probs.dtype)
    if dropout_p > 0.0:
        keep = (_core.rand_like(probs) >= dropout_p).to(probs.dtype)
        probs = probs * keep * (1.0 / (1.0 - dropout_p))
    out = probs @ v
    return out.to(dt) if wide else out


def _repeat_kv(q: Tensor, x: Tensor, name: str, op: str) -> Tensor:
    """Grouped heads: kv head h // (Hq / Hkv) serves query head h."""
    hq, hk = q.shape[-3], x.shape[-3]
    if hk == 0 or hq % hk != 0:
        raise ShapeError(
            f"{op} with enable_gqa the number of query heads must be a multiple of the {name} heads, "
            f"got query {list(q.shape)} and {name} {list(x.shape)}"
        )
    if hk in (hq, 1):
        return x
    g = hq // hk
    lead = tuple(x.shape[:-3])
    s, d = x.shape[-2], x.shape[-1]
    return x.unsqueeze(-3).expand(*lead, hk, g, s, d).reshape(*lead, hk * g, s, d)
