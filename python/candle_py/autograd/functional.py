"""`torch.autograd.functional`-style helpers built on `autograd.grad`: `vjp`, `jvp`,
`jacobian`, `hessian`, `hvp`, `vhp` (reverse mode throughout; `jvp` by the double-vjp
trick)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from .. import _core
from .._core import Tensor
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]

Inputs = Union[Tensor, tuple[Tensor, ...]]


def _tuple(x: Any) -> tuple[Any, ...]:
    return x if isinstance(x, tuple) else (x,)


def _prepare(inputs: Inputs) -> tuple[tuple[Tensor, ...], bool]:
    single = isinstance(inputs, Tensor)
    ins = _tuple(inputs)
    return tuple(i.detach().requires_grad_(True) for i in ins), single


def _grads(outs: tuple[Tensor, ...], ins: tuple[Tensor, ...], v: Optional[tuple[Any, ...]], create_graph: bool) -> tuple[Tensor, ...]:
    outs_rg = [(o, g) for o, g in zip(outs, v if v is not None else [None] * len(outs)) if o.requires_grad]
    if not outs_rg:
        return tuple(_core.zeros_like(i) for i in ins)
    gs = _core.grad(
        [o for o, _ in outs_rg],
        list(ins),
        grad_outputs=[g for _, g in outs_rg],
        create_graph=create_graph,
        retain_graph=True,
        allow_unused=True,
    )
    return tuple(g if g is not None else _core.zeros_like(i) for g, i in zip(gs, ins))


def vjp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """`(func(inputs), v^T J)`."""
    ins, single = _prepare(inputs)
    with enable_grad():
        out = func(*ins)
        outs = _tuple(out)
        g = _grads(outs, ins, _tuple(v) if v is not None else None, create_graph)
    res = tuple(x if create_graph else x.detach() for x in g)
    return (out if create_graph else _detach(out)), (res[0] if single else res)


def jvp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """`(func(inputs), J v)`, from two reverse passes."""
    ins, single = _prepare(inputs)
    vs = _tuple(v) if v is not None else tuple(_core.ones_like(i) for i in ins)
    with enable_grad():
        out = func(*ins)
        outs = _tuple(out)
        us = tuple(_core.zeros_like(o).requires_grad_(True) for o in outs)
        g = _grads(outs, ins, us, True)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        jv: tuple[Tensor, ...] = tuple(_core.zeros_like(o) for o in outs)
        if pairs:
            got = _core.grad(
                [p[0] for p in pairs], list(us), grad_outputs=[p[1] for p in pairs], create_graph=create_graph, allow_unused=True
            )
            jv = tuple(x if x is not None else z for x, z in zip(got, jv))
    res = tuple(x if create_graph else x.detach() for x in jv)
    return (out if create_graph else _detach(out)), (res[0] if not isinstance(out, tuple) else res)


def jacobian(
    func: Callable[..., Any],
    inputs: Inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of `func` at `inputs`: shape `out.shape + in.shape` per pair."""
    ins, single_in = _prepare(inputs)
    with enable_grad():
        out = func(*ins)
        outs = _tuple(out)
        rows: list[tuple[Tensor, ...]] = []
        for o in outs:
            flat = o.reshape(-1)
            per_in: list[list[Tensor]] = [[] for _ in ins]
            for k in range(flat.shape[0]):
                g = _grads((flat[k],), ins, None, create_graph) if o.requires_grad else tuple(_core.zeros_like(i) for i in ins)
                for j, gj in enumerate(g):
                    per_in[j].append(gj if create_graph else gj.detach())
            rows.append(
                tuple(
                    _core.stack(p).reshape(tuple(o.shape) + tuple(i.shape)) if p else _core.zeros(tuple(o.shape) + tuple(i.shape))
                    for p, i in zip(per_in, ins)
                )
            )
    if not isinstance(out, tuple):
        return rows[0][0] if single_in else rows[0]
    return tuple(r[0] if single_in else r for r in rows)


def hessian(
    func: Callable[..., Any],
    inputs: Inputs,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of a scalar `func` at `inputs`."""
    ins, single = _prepare(inputs)

    def grad_fn(*xs: Tensor) -> Any:
        with enable_grad():
            out = func(*xs)
            g = _core.grad([out], list(xs), create_graph=True, allow_unused=True)
        g = tuple(x if x is not None else _core.zeros_like(i) for x, i in zip(g, xs))
        return g[0] if single else g

    return jacobian(grad_fn, ins[0] if single else ins, create_graph=create_graph)


def vhp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """`(func(inputs), v^T H)` of a scalar `func`."""
    ins, single = _prepare(inputs)
    vs = _tuple(v) if v is not None else tuple(_core.ones_like(i) for i in ins)
    with enable_grad():
        out = func(*ins)
        g = _core.grad([out], list(ins), create_graph=True, allow_unused=True)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
        hv = (
            _core.grad([p[0] for p in pairs], list(ins), grad_outputs=[p[1] for p in pairs], create_graph=create_graph, allow_unused=True)
            if pairs
            else ()
        )
    res = (
        tuple((x if create_graph else x.detach()) if x is not None else _core.zeros_like(i) for x, i in zip(hv, ins))
        if hv
        else tuple(_core.zeros_like(i) for i in ins)
    )
    return (out if create_graph else out.detach()), (res[0] if single else res)


def hvp(func: Callable[..., Any], inputs: Inputs, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple[Any, Any]:
    """`(func(inputs), H v)`; the Hessian of a scalar function is symmetric, so this is `vhp`."""
    return vhp(func, inputs, v, create_graph, strict)


def _detach(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(t.detach() for t in x)
    return x.detach()
