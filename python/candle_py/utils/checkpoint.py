"""`candle_py.utils.checkpoint`: `checkpoint` and `checkpoint_sequential`, as
`torch.utils.checkpoint`, without the memory saving.

PyTorch's activation checkpointing drops a segment's intermediate activations in
the forward pass and recomputes them during backward, trading compute for memory;
gradients are the same either way. candle_py runs the function once and keeps its
graph as usual: values and gradients equal PyTorch's, the memory saving is not
there. `use_reentrant` and `preserve_rng_state` are accepted for compatibility
(they select between PyTorch's two recomputation schemes and whether the RNG
state is replayed during recomputation; with no recomputation neither applies).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..nn.module import Module

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: Optional[bool] = None,
    preserve_rng_state: bool = True,
    context_fn: Optional[Callable[[], Any]] = None,
    determinism_check: str = "default",
    debug: bool = False,
    **kwargs: Any,
) -> Any:
    """`function(*args, **kwargs)` (see the module docstring). As PyTorch, keyword
    arguments for `function` are refused when `use_reentrant=True`."""
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if context_fn is not None:
        # The two contexts wrap the forward run and the recomputation; only the first happens here.
        forward_ctx, _ = context_fn()
        with forward_ctx:
            return function(*args, **kwargs)
    return function(*args, **kwargs)


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,
    use_reentrant: Optional[bool] = None,
    **kwargs: Any,
) -> Any:
    """Run `functions` (a `Sequential` or a list of modules/functions) in order on
    `input`, in `segments` checkpointed segments (see `checkpoint`)."""
    fns: Sequence[Any] = list(functions.children()) if isinstance(functions, Module) else list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be positive, got {segments}")
    for f in fns:
        input = f(input)
    return input
