"""`candle_py.autograd`: grad modes, `grad`, custom `Function`s and `functional` helpers."""

from __future__ import annotations

from . import functional, grad_mode
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

__all__ = grad_mode.__all__ + ["Function", "FunctionCtx", "once_differentiable", "functional"]
