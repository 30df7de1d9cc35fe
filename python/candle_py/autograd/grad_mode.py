"""`no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode` and `autograd.grad`.

Grad mode is per thread, as in PyTorch. Each context manager also works as a
decorator, with or without parentheses (`@no_grad` and `@no_grad()`).
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Any, Callable, Optional, Type, TypeVar

from .._core import _set_grad_enabled, _set_inference_mode, grad, is_grad_enabled, is_inference_mode_enabled

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "grad",
    "is_grad_enabled",
    "is_inference_mode_enabled",
]


class _GradMode:
    _mode: bool = False

    def __new__(cls, orig_func: Optional[Callable[..., Any]] = None) -> Any:
        # `@no_grad` without parentheses: decorate the function directly.
        if orig_func is None or not callable(orig_func):
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func: Optional[Callable[..., Any]] = None) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(_set_grad_enabled(self._mode))

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        _set_grad_enabled(self._prev.pop())

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    """Disable gradient recording inside the block (results do not require grad)."""

    _mode = False


class enable_grad(_GradMode):
    """Re-enable gradient recording inside a `no_grad` block."""

    _mode = True


class set_grad_enabled(_GradMode):
    """`set_grad_enabled(False)` as a function call, a context manager or a decorator."""

    def __new__(cls, mode: bool) -> Any:
        return object.__new__(cls)

    def __init__(self, mode: bool) -> None:
        self._prev = []
        self._mode = bool(mode)
        self._applied = _set_grad_enabled(self._mode)

    def __enter__(self) -> None:
        self._prev.append(self._applied)

    def __call__(self, func: F) -> F:
        _set_grad_enabled(self._applied)
        mode = self._mode

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = _set_grad_enabled(mode)
            try:
                return func(*args, **kwargs)
            finally:
                _set_grad_enabled(prev)

        return wrapper  # type: ignore[return-value]


class inference_mode:
    """`inference_mode(mode=True)`: no graph is recorded inside the block (as `no_grad`);
    a context manager and a decorator, with or without parentheses."""

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self._mode = bool(mode)
        self._prev: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        if self._mode:
            self._prev.append(_set_inference_mode(True))
        else:
            self._prev.append((is_inference_mode_enabled(), is_grad_enabled()))
            _set_inference_mode(False)

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        inference, grad_mode = self._prev.pop()
        _set_inference_mode(inference)
        _set_grad_enabled(grad_mode)

    def __call__(self, func: F) -> F:
        mode = self._mode

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
