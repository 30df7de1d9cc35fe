"""`Optimizer`: PyTorch's base class. Keeps parameter groups and a per-parameter
state; each optimizer hands a group's parameters, gradients and state to its
one Rust update (`_step_group`). Parameters are updated in place (under
`no_grad`), so modules keep the same Parameter objects. A subclass may instead
override `step` itself, as with `torch.optim.Optimizer`."""

from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from .._core import Tensor
from ..autograd import enable_grad, no_grad
from ..nn.module import zero_grads

ParamsT = Union[Iterable[Tensor], Iterable[Dict[str, Any]]]


def _refuse_differentiable(name: str, differentiable: bool) -> None:
    """`differentiable=True` asks for autograd through the update, which the Rust
    steps do not record: refused rather than ignored."""
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True (autograd through the optimizer step) is not supported")


class Optimizer:
    """Base class of optimizers, as `torch.optim.Optimizer`: `params` is an iterable of
    tensors or of param-group dicts (each may override the `defaults`, e.g. its own `lr`)."""

    defaults: Dict[str, Any]
    param_groups: List[Dict[str, Any]]
    state: Dict[Tensor, Dict[str, Any]]

    def __init__(self, params: ParamsT, defaults: Dict[str, Any]) -> None:
        self.defaults = defaults
        self.state = {}
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)  # type: ignore[arg-type]

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Add a group of parameters (a dict with `params`), filling missing options from `defaults`."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to None (`set_to_none=True`) or to zeros."""
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        """Update `params` (those of `group` with a gradient) in place, with their state."""
        raise NotImplementedError(f"{type(self).__name__} must define step() or _step_group()")

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """Update every parameter that has a gradient, in place. `closure`, if given,
        re-evaluates the model with gradients enabled and its loss is returned."""
        self._opt_called = True  # lets a scheduler warn when it is stepped before the optimizer
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                pairs = [(p, p.grad) for p in group["params"]]
                params = [p for p, g in pairs if g is not None]
                grads = [g for _, g in pairs if g is not None]
                if params:
                    self._step_group(group, params, grads)
        return loss

    # -- state dicts: parameters are referred to by their position, as in PyTorch --
    def state_dict(self) -> Dict[str, Any]:
        """The per-parameter state and the param groups, with parameters named by index (PyTorch's layout)."""
        index: Dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {
            index[id(p)]: {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in s.items()}
            for p, s in self.state.items()
            if id(p) in index
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore a `state_dict()`; its groups must match this optimizer's in number and size."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's group")
        by_index = {i: p for mine, theirs in zip(self.param_groups, groups) for i, p in zip(theirs["params"], mine["params"])}
        self.state = {}
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {
                k: (
                    v.clone().to(p.dtype)
                    if isinstance(v, Tensor) and v.dtype.is_floating_point and k not in ("step", "mu_product")
                    else copy.deepcopy(v)
                )
                for k, v in s.items()
            }
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = v

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(k for k in g if k != "params"):
                lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"
