"""Autocast's casting policy for the functional layer (`torch.autocast` on the ops
PyTorch's autocast lists).

The state (on/off and dtype, per thread and device type) is the core's
(`_core._autocast_state`), because `matmul` / `@` / `mm` / `bmm` are Tensor methods
that cast inside the core. The functional ops cast here, as PyTorch's CPU autocast
lists them:

- lower precision (`lower`): `linear`, `conv*`, `conv_transpose*`, `prelu`,
  `scaled_dot_product_attention` (and, in the core, `matmul`, `mm`, `bmm`);
- float32 (`fp32`): the losses (`mse_loss`, `l1_loss`, `smooth_l1_loss`,
  `huber_loss`, `nll_loss`, `cross_entropy`, `binary_cross_entropy`,
  `binary_cross_entropy_with_logits`, `kl_div`), `prod`, and the 3-d poolings
  (`avg_pool3d`, `max_pool3d`, `adaptive_avg_pool3d`), reflect/replicate padding;
- every other op runs in the dtype of its inputs (type promotion as usual).

Only float tensors other than float64 are cast (PyTorch's eligibility rule). Ops
PyTorch does not autocast but that candle_py composes from matmul (`bilinear`, the
RNN layers) run under `disabled()`, so their results keep PyTorch's dtypes.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Tuple

from . import _core
from ._core import Tensor

__all__ = ["lower", "fp32", "disabled", "active_dtype"]

_DEVICE_TYPES = ("cpu", "cuda", "mps")


def _cast(t: Optional[Tensor], dtype: Optional[_core.dtype]) -> Optional[Tensor]:
    if t is None or dtype is None or t.dtype == dtype:
        return t
    return t.to(dtype)


def lower(*tensors: Optional[Tensor]) -> Tuple[Any, ...]:
    """The tensors cast to the autocast dtype where autocast is on for their device
    (ineligible ones, and all of them outside autocast, unchanged)."""
    return tuple(_cast(t, None if t is None else _core._autocast_dtype_of(t)) for t in tensors)


def fp32(*tensors: Optional[Tensor]) -> Tuple[Any, ...]:
    """The tensors cast to float32 where autocast is on for their device and they are
    eligible (float16/bfloat16/float32); unchanged otherwise."""
    return tuple(_cast(t, None if t is None or _core._autocast_dtype_of(t) is None else _core.float32) for t in tensors)


def active_dtype(t: Tensor) -> Optional[_core.dtype]:
    """The autocast dtype `t` would be cast to, or None."""
    return _core._autocast_dtype_of(t)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Autocast off on every device type for the block (this thread), restored after."""
    saved = [(d, *_core._autocast_state(d)) for d in _DEVICE_TYPES]
    try:
        for d, _, dt in saved:
            _core._set_autocast_state(d, False, dt)
        yield
    finally:
        for d, on, dt in saved:
            _core._set_autocast_state(d, on, dt)
