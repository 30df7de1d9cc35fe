"""`candle_py.compile`: PyTorch's `torch.compile`, for scripts that call it.

Eager execution is candle_py's only mode: each op runs its Rust kernel as it is
called, and there is no graph capture or code generation to hand the model to.
`compile` therefore returns the model (or function) itself; calling it computes
exactly what the uncompiled one does — which is also what `torch.compile`
promises of its compiled result, so `backend`, `mode`, `options`, `fullgraph` and
`dynamic` (which choose how to compile) do not change any result.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, TypeVar, Union, overload

__all__ = ["compile"]

F = TypeVar("F", bound=Callable[..., Any])


@overload
def compile(
    model: F,
    *,
    fullgraph: bool = ...,
    dynamic: Optional[bool] = ...,
    backend: Union[str, Callable[..., Any], None] = ...,
    mode: Optional[str] = ...,
    options: Optional[Dict[str, Any]] = ...,
    name: Optional[str] = ...,
    disable: bool = ...,
    recompile_limit: Optional[int] = ...,
    isolate_recompiles: bool = ...,
    dynamic_shapes: Any = ...,
) -> F: ...
@overload
def compile(
    model: None = ...,
    *,
    fullgraph: bool = ...,
    dynamic: Optional[bool] = ...,
    backend: Union[str, Callable[..., Any], None] = ...,
    mode: Optional[str] = ...,
    options: Optional[Dict[str, Any]] = ...,
    name: Optional[str] = ...,
    disable: bool = ...,
    recompile_limit: Optional[int] = ...,
    isolate_recompiles: bool = ...,
    dynamic_shapes: Any = ...,
) -> Callable[[F], F]: ...
def compile(
    model: Optional[Callable[..., Any]] = None,
    *,
    fullgraph: bool = False,
    dynamic: Optional[bool] = None,
    backend: Union[str, Callable[..., Any], None] = None,
    mode: Optional[str] = None,
    options: Optional[Dict[str, Any]] = None,
    name: Optional[str] = None,
    disable: bool = False,
    recompile_limit: Optional[int] = None,
    isolate_recompiles: bool = False,
    dynamic_shapes: Any = None,
) -> Any:
    """Return `model` unchanged: eager is candle_py's only mode (see the module
    docstring). Also a decorator, bare (`@compile`) or with arguments
    (`@compile(mode="max-autotune")`). As PyTorch, `mode` and `options` together
    raise RuntimeError, and `model` must be callable."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if model is None:

        def decorator(fn: F) -> F:
            return compile(
                fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, name=name, disable=disable
            )

        return decorator
    if not callable(model):
        raise RuntimeError("The compiled model or function must be callable, got " + type(model).__name__)
    return model
