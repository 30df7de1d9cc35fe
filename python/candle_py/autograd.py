"""`no_grad`, `enable_grad`, `set_grad_enabled` and `autograd.grad`.

Grad mode is per thread, as in PyTorch. Each context manager also works as a
decorator.
"""

from __future__ import annotations

import functools
from types import TracebackType
from typing import Any, Callable, Optional, Type, TypeVar

from ._core import _set_grad_enabled, grad, is_grad_enabled

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "grad", "is_grad_enabled"]


class _GradMode:
    _mode: bool = False

    def __init__(self) -> None:
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

    def __init__(self, mode: bool) -> None:
        super().__init__()
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
