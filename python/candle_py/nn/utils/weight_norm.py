"""`nn.utils.weight_norm` (state keys `weight_g`, `weight_v`) and
`remove_weight_norm`, as PyTorch's: the weight is recomputed from g and v
before every forward, and a weight-normed layer also loads a checkpoint in the
`parametrizations.weight.original0/1` layout or with a plain `weight`."""

from __future__ import annotations

from typing import Any, Dict, Optional, TypeVar

from ..module import Module, RemovableHandle
from ..parameter import Parameter
from ._norm import compose, norm_except_dim

M = TypeVar("M", bound=Module)

__all__ = ["weight_norm", "remove_weight_norm"]


class _WeightNorm:
    def __init__(self, name: str, dim: Optional[int]) -> None:
        self.name, self.dim = name, dim
        self.hooks: list[RemovableHandle] = []

    def compute(self, module: Module) -> Any:
        return compose(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"), self.dim)

    def __call__(self, module: Module, args: Any) -> None:
        object.__setattr__(module, self.name, self.compute(module))

    def remap(self, sd: Dict[str, Any], prefix: str) -> None:
        """Accept a plain weight or the parametrizations layout for this layer."""
        n = self.name
        plain, g, v = prefix + n, prefix + n + "_g", prefix + n + "_v"
        p0, p1 = prefix + f"parametrizations.{n}.original0", prefix + f"parametrizations.{n}.original1"
        if g not in sd and p0 in sd and p1 in sd:
            sd[g], sd[v] = sd.pop(p0), sd.pop(p1)
        elif g not in sd and plain in sd:
            w = sd.pop(plain)
            sd[g], sd[v] = norm_except_dim(w, self.dim), w


def weight_norm(module: M, name: str = "weight", dim: Optional[int] = 0) -> M:
    """Reparametrize `module.<name>` as `g * v / ||v||` (norm over all dims but `dim`)."""
    if not isinstance(module, Module):
        raise TypeError(f"weight_norm: expected an nn.Module, got {type(module).__name__}")
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter {name!r}")
    fn = _WeightNorm(name, -1 if dim is None else dim)
    w = weight.detach()
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(w, fn.dim)))
    module.register_parameter(name + "_v", Parameter(w))
    object.__setattr__(module, name, fn.compute(module))
    fn.hooks = [module.register_forward_pre_hook(fn), module._register_load_state_dict_pre_hook(fn.remap)]
    return module


def remove_weight_norm(module: M, name: str = "weight") -> M:
    """Fold g and v back into one `weight` parameter."""
    if not isinstance(module, Module):
        raise TypeError(f"remove_weight_norm: expected an nn.Module, got {type(module).__name__}")
    for hook in list(module._forward_pre_hooks.values()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            w = hook.compute(module).detach()
            for h in hook.hooks:
                h.remove()
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(w))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {type(module).__name__}")
