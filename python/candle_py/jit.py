"""`candle_py.jit`: the `torch.jit` names scripts use.

TorchScript compiles a model into a serializable graph program; candle_py runs
eagerly and has no such graph, so `script` and `trace` raise NotImplementedError.
The decorators that only mark functions for the TorchScript compiler (`ignore`,
`unused`, `export`) return the function unchanged, and `is_scripting()` /
`is_tracing()` are False, so code written to be scriptable runs eagerly as is.
"""

from __future__ import annotations

from typing import Any, Callable, Final, NoReturn, TypeVar

__all__ = ["script", "trace", "ignore", "unused", "export", "is_scripting", "is_tracing", "Final"]

F = TypeVar("F", bound=Callable[..., Any])


def script(obj: Any, *args: Any, **kwargs: Any) -> NoReturn:
    """Raises NotImplementedError: candle_py has no TorchScript compiler (it runs eagerly)."""
    raise NotImplementedError("candle_py.jit.script: TorchScript is not supported (candle_py runs eagerly; call the module directly)")


def trace(func: Any, *args: Any, **kwargs: Any) -> NoReturn:
    """Raises NotImplementedError: candle_py records no graph to trace into TorchScript."""
    raise NotImplementedError(
        "candle_py.jit.trace: TorchScript tracing is not supported (candle_py runs eagerly; call the module directly)"
    )


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """`@jit.ignore` / `@jit.ignore(drop=...)`: the function, unchanged."""
    if callable(drop):
        return drop

    def decorator(fn: F) -> F:
        return fn

    return decorator


def unused(fn: F) -> F:
    """`@jit.unused`: the function, unchanged."""
    return fn


def export(fn: F) -> F:
    """`@jit.export`: the function, unchanged."""
    return fn


def is_scripting() -> bool:
    """False: code never runs under TorchScript here."""
    return False


def is_tracing() -> bool:
    """False: code never runs under the TorchScript tracer here."""
    return False
