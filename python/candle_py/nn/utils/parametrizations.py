"""`nn.utils.parametrizations.weight_norm`: PyTorch's newer layout, with state
keys `parametrizations.weight.original0` (g) and `original1` (v). The layer
also loads `weight_g`/`weight_v` checkpoints or a plain `weight`."""

from __future__ import annotations

from typing import Any, Dict, Optional, TypeVar

from ..containers import ModuleDict
from ..module import Module
from ..parameter import Parameter
from ._norm import compose, norm_except_dim

M = TypeVar("M", bound=Module)

__all__ = ["weight_norm"]


class ParametrizationList(Module):
    """Holds the original tensors of one parametrized parameter."""

    def __init__(self, g: Parameter, v: Parameter, dim: Optional[int]) -> None:
        super().__init__()
        self.original0, self.original1 = g, v
        self.dim = dim

    def right_inverse_of(self) -> Any:
        """Recompose the weight from `original0` (g) and `original1` (v)."""
        return compose(self.original0, self.original1, self.dim)


def weight_norm(module: M, name: str = "weight", dim: Optional[int] = 0) -> M:
    """Reparametrize `module.<name>` as `g * v / ||v||` (norm over every dim but `dim`;
    `dim=None` for the whole tensor), stored as
    `parametrizations.<name>.original0` (g) and `.original1` (v), as
    `torch.nn.utils.parametrizations.weight_norm`; returns the module."""
    if not isinstance(module, Module):
        raise TypeError(f"weight_norm: expected an nn.Module, got {type(module).__name__}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: module {type(module).__name__} has no parameter {name!r}")
    d = -1 if dim is None else dim
    w = weight.detach()
    del module._parameters[name]
    if "parametrizations" not in module._modules:
        module.parametrizations = ModuleDict()
    plist = ParametrizationList(Parameter(norm_except_dim(w, d)), Parameter(w), d)
    module.parametrizations[name] = plist

    def refresh(mod: Module, args: Any) -> None:
        object.__setattr__(mod, name, plist.right_inverse_of())

    def remap(sd: Dict[str, Any], prefix: str) -> None:
        p0, p1 = prefix + f"parametrizations.{name}.original0", prefix + f"parametrizations.{name}.original1"
        g, v, plain = prefix + name + "_g", prefix + name + "_v", prefix + name
        if p0 not in sd and g in sd and v in sd:
            sd[p0], sd[p1] = sd.pop(g), sd.pop(v)
        elif p0 not in sd and plain in sd:
            w0 = sd.pop(plain)
            sd[p0], sd[p1] = norm_except_dim(w0, d), w0

    refresh(module, ())
    module.register_forward_pre_hook(refresh)
    module._register_load_state_dict_pre_hook(remap)
    return module
