"""Gradient clipping: `clip_grad_norm_` and `clip_grad_value_`, in place on `.grad`."""

from __future__ import annotations

import math
from typing import Iterable, Union

from ... import _core
from ..._core import Tensor
from ...autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_"]

_Params = Union[Tensor, Iterable[Tensor]]


def _grads(parameters: _Params) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"clip_grad: parameters must be Tensors, got {type(p).__name__}")
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(
    parameters: _Params, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach: object = None
) -> Tensor:
    """Scale all gradients so their joint norm is at most `max_norm`; returns the norm before clipping."""
    params = _grads(parameters)
    if not params:
        return _core.tensor(0.0)
    with no_grad():
        grads: list[Tensor] = [g for g in (p.grad for p in params) if g is not None]
        fused = None
        if math.isfinite(norm_type) and norm_type > 0:
            fused = _core._total_norm(grads, float(norm_type))  # one Rust pass per gradient
        if fused is not None:
            total = fused
        elif norm_type == math.inf:
            total = _core.stack([g.abs().max().float() for g in grads]).max()
        else:
            norms = _core.stack([g.norm(norm_type).float() for g in grads])
            total = norms.norm(norm_type)
        if error_if_nonfinite and not math.isfinite(float(total)):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients is non-finite, so it cannot be clipped")
        # torch's arithmetic: the factor in the total's dtype, clamped to 1.
        coef = float((max_norm / (total + 1e-6)).clamp(max=1.0))
        # In place, as PyTorch (a reference to a `.grad` sees the clipping); a factor of
        # exactly 1 changes nothing, so it is skipped.
        if (coef < 1.0 or math.isnan(coef)) and not _core._scale_(grads, coef):
            for g in grads:
                g.mul_(coef)
    return total


def clip_grad_value_(parameters: _Params, clip_value: float, foreach: object = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    for p in _grads(parameters):
        p.grad = p.grad.clamp(-clip_value, clip_value)  # type: ignore[union-attr]
