"""Non-tensor arguments raise TypeError, as in PyTorch, not AttributeError.

`F.tanh([1, 2])` or `nn.Linear(3, 2)(0.0)` would otherwise fail deep inside
with `'list' object has no attribute 'tanh'`. `typed(fn)` checks, before the
call, every parameter annotated `Tensor` (and `Optional[Tensor]`, which also
takes None) and raises `TypeError: tanh(): argument 'input' must be Tensor,
not list`. The positions are worked out once, at import; a call pays a few
isinstance checks.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Iterable, TypeVar

from .._core import Tensor

Fn = TypeVar("Fn", bound=Callable[..., Any])
_MISSING = object()
_REQUIRED = ("Tensor",)
_OPTIONAL = ("Optional[Tensor]", "Tensor | None")


def typed(fn: Fn, op: str | None = None) -> Fn:
    """`fn` with its Tensor-annotated parameters checked."""
    params = list(inspect.signature(fn).parameters.values())
    checks = []  # (position or -1 if keyword-only, name, None allowed)
    for i, p in enumerate(params):
        ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
        if ann in _REQUIRED or ann in _OPTIONAL:
            pos = i if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else -1
            checks.append((pos, p.name, ann in _OPTIONAL))
    if not checks:
        return fn
    name = op or fn.__name__
    # A bound method's `self` is not in `args`; `forward(self, input)` counts it.
    shift = 1 if params and params[0].name == "self" else 0

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for pos, pname, none_ok in checks:
            if 0 <= pos < len(args):
                x = args[pos]
            else:
                x = kwargs.get(pname, _MISSING)
                if x is _MISSING:
                    continue  # a default, or a missing argument Python reports itself
            if not isinstance(x, Tensor) and not (none_ok and x is None):
                what = type(x).__name__
                raise TypeError(
                    f"{name}(): argument '{pname}' (position {pos + 1 - shift}) must be Tensor, not {what}"
                    if pos >= 0
                    else f"{name}(): argument '{pname}' must be Tensor, not {what}"
                )
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def type_check_functions(namespace: dict, names: Iterable[str]) -> None:
    """Replace each function `names[i]` in `namespace` by its checked version."""
    for n in names:
        f = namespace.get(n)
        if inspect.isfunction(f):
            namespace[n] = typed(f)


def type_check_forwards(classes: Iterable[type], base: type) -> None:
    """Check the Tensor arguments of each built-in layer's `forward`, also
    when a shared private base class defines it (BatchNorm1d/2d/3d). `base`
    (Module) keeps its own forward."""
    for cls in classes:
        f = getattr(cls, "forward", None)
        if not inspect.isfunction(f) or getattr(f, "_tensor_checked", False) or f is getattr(base, "forward", None):
            continue
        checked = typed(f, f"[{cls.__name__}] forward")
        checked._tensor_checked = True  # type: ignore[attr-defined]
        cls.forward = checked  # type: ignore[attr-defined]
