"""`autograd.Function`: custom ops with a Python backward, recorded as one graph node.

`forward(ctx, *args)` runs with grad mode off; the outputs join the graph as the
outputs of a node whose backward calls `backward(ctx, *grad_outputs)` (grad mode on
when the backward is asked for `create_graph=True`, so a backward written with
differentiable ops can be differentiated again).
"""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from .._core import Tensor
from .grad_mode import no_grad

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The `ctx` of a custom Function: what `forward` leaves for `backward`."""

    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved: Optional[tuple[Any, ...]] = ()
        self._versions: tuple[Optional[int], ...] = ()
        self._non_differentiable: list[Tensor] = []
        self._dirty: list[Tensor] = []
        self._materialize = True
        self._released = False

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors (or None) for `backward`; an in-place change to one before the
        backward raises there, as in PyTorch."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {len(self._versions)} is not a Tensor")
        self._saved = tensors
        self._versions = tuple(t._version if isinstance(t, Tensor) else None for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to `save_for_backward`, checked against in-place changes."""
        if self._released or self._saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they have already been "
                "freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors "
                "after calling backward."
            )
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if isinstance(t, Tensor) and t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace operation: "
                    f"[{t.dtype} {list(t.shape)}], which is saved tensor {i} of a custom Function, is at version {t._version}; "
                    f"expected version {v} instead."
                )
        return self._saved

    def mark_non_differentiable(self, *outputs: Tensor) -> None:
        """These outputs get no gradient (e.g. indices); they do not require grad."""
        self._non_differentiable.extend(outputs)

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Inputs that `forward` modified in place (they are returned as outputs)."""
        self._dirty.extend(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, `backward` receives None (not zeros) for outputs without a gradient."""
        self._materialize = bool(value)

    def _release(self) -> None:
        self._saved = None
        self._released = True


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        super().__init__(name, bases, attrs)
        cls._backward_name = f"{name}Backward"  # type: ignore[attr-defined]


class Function(metaclass=_FunctionMeta):
    """Subclass with static `forward(ctx, *args)` and `backward(ctx, *grad_outputs)`,
    then call `MyFn.apply(*args)`."""

    _backward_name: str

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """The computation; runs with grad mode off."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """Gradients of the inputs (one per `forward` argument; None where none) from the outputs'."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom autograd.Function to use it with backward mode AD."
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        """Optional (PyTorch 2 style): fill `ctx` from the inputs and output of a `forward` without ctx."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run `forward` and record its outputs in the autograd graph."""
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        uses_setup = "setup_context" in cls.__dict__ or any("setup_context" in b.__dict__ for b in cls.__mro__[1:-1] if b is not Function)
        with no_grad():
            out = cls.forward(*args, **kwargs) if uses_setup else cls.forward(ctx, *args, **kwargs)
        if uses_setup:
            cls.setup_context(ctx, args, out)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        # An input returned as is becomes a new tensor object, so the input keeps its history.
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        dirty = {id(t) for t in ctx._dirty}
        outs = tuple(o.detach() if isinstance(o, Tensor) and id(o) in inputs_by_id and id(o) not in dirty else o for o in outs)
        if _core.is_grad_enabled() and any(ctx.needs_input_grad):
            non_diff = {id(t) for t in ctx._non_differentiable}
            _core._function_node(
                cls._backward_name,
                ctx,
                cls.backward,
                [a if isinstance(a, Tensor) else None for a in args],
                [o if isinstance(o, Tensor) else None for o in outs],
                [isinstance(o, Tensor) and id(o) not in non_diff for o in outs],
                ctx._materialize,
            )
        return outs[0] if single else outs


def once_differentiable(fn: Any) -> Any:
    """Marks a `backward` that is not itself differentiable: it runs with grad mode off."""

    import functools

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper
