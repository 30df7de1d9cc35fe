"""`candle_py.autograd`: grad modes, `grad`, custom `Function`s and `functional` helpers."""

from __future__ import annotations

from . import functional
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad,
    grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

# Written out (not computed) so that type checkers see the exports.
__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "grad",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "Function",
    "FunctionCtx",
    "once_differentiable",
    "functional",
]
