"""`nn.Module`: PyTorch's module protocol.

Parameters, buffers and submodules are kept in three ordered dicts, routed
there by `__setattr__`; `state_dict` keys are dotted paths (`0.weight`,
`encoder.layer.0.attention.self.query.bias`), exactly as PyTorch names them, so
a PyTorch checkpoint loads unchanged.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple, TypeVar, Union

from .. import _core
from .._core import Tensor, is_grad_enabled
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from .parameter import Buffer, Parameter

T = TypeVar("T", bound="Module")


class StateDictError(RuntimeError, ValueError):
    """A state_dict that does not fit the module: missing or unexpected keys, or
    wrong shapes. Catchable as RuntimeError (PyTorch) or ValueError."""


class _IncompatibleKeys(NamedTuple):
    missing_keys: List[str]
    unexpected_keys: List[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return f"_IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _addindent(s: str, num_spaces: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * num_spaces + line for line in lines)


def zero_grads(params: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Drop (or zero) the `.grad` of every tensor in `params`: Module's and Optimizer's `zero_grad`."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad = _core.zeros_like(p.grad)


class RemovableHandle:
    """Returned by the `register_*_hook` methods; `remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, store: Dict[int, Any], hook: Any) -> None:
        RemovableHandle._next_id += 1
        self.id = RemovableHandle._next_id
        self._store = store
        store[self.id] = hook

    def remove(self) -> None:
        """Unregister the hook this handle was returned for (a second call does nothing)."""
        self._store.pop(self.id, None)


class _BackwardHooks:
    """One call's backward hooks: identity Functions around the module's tensor inputs
    and outputs see the gradients flowing through them (PyTorch's BackwardHook)."""

    def __init__(self, module: "Module") -> None:
        self.module = module
        self.grad_outputs: Optional[tuple[Any, ...]] = None
        self.inputs_tracked = False

    def wrap_inputs(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not idx:
            return args
        self.inputs_tracked = True
        wrapped = _HookIn.apply(self, *[args[i] for i in idx])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        out = list(args)
        for i, w in zip(idx, wrapped):
            out[i] = w
        return tuple(out)

    def wrap_outputs(self, out: Any) -> Any:
        outs = out if isinstance(out, tuple) else (out,)
        idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not idx:
            return out
        wrapped = _HookOut.apply(self, *[outs[i] for i in idx])
        wrapped = wrapped if isinstance(wrapped, tuple) else (wrapped,)
        new = list(outs)
        for i, w in zip(idx, wrapped):
            new[i] = w
        return tuple(new) if isinstance(out, tuple) else new[0]

    def on_grad_outputs(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        for hook in list(self.module._backward_pre_hooks.values()):
            res = hook(self.module, grads)
            if res is not None:
                grads = res if isinstance(res, tuple) else (res,)
        self.grad_outputs = grads
        if not self.inputs_tracked:
            # No input takes part: the hooks see grad_input of None, as in PyTorch.
            for hook in list(self.module._backward_hooks.values()):
                hook(self.module, (None,), grads)
        return grads

    def on_grad_inputs(self, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grads, self.grad_outputs)
            if res is not None:
                grads = res if isinstance(res, tuple) else (res,)
        return grads


class _HookIdentity(Function):
    """Identity on tensors whose backward shows the gradients to the module's hooks."""

    @staticmethod
    def forward(ctx: Any, state: _BackwardHooks, *xs: Tensor) -> Any:
        ctx.state = state
        return tuple(x.detach() for x in xs) if len(xs) > 1 else xs[0].detach()


class _HookIn(_HookIdentity):
    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None,) + tuple(ctx.state.on_grad_inputs(grads))


class _HookOut(_HookIdentity):
    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None,) + tuple(ctx.state.on_grad_outputs(grads))


class Module:
    """Base class for all layers and models; subclass it as in PyTorch."""

    training: bool
    _parameters: Dict[str, Optional[Parameter]]
    _buffers: Dict[str, Optional[Tensor]]
    _non_persistent_buffers: Set[str]
    _modules: Dict[str, Optional["Module"]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_load_state_dict_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())

    # -- the forward pass ------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation of the module; subclasses define it and are called as `module(*args)`."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks") or d.get("_backward_pre_hooks")):
            # No hooks: straight to forward (a decode step makes hundreds of these calls).
            return self.forward(*args, **kwargs)
        for hook in list(self.__dict__.get("_forward_pre_hooks", {}).values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        bw = self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")
        state = _BackwardHooks(self) if bw and is_grad_enabled() else None
        if state is not None:
            args = state.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        for hook in list(self.__dict__.get("_forward_hooks", {}).values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        if state is not None:
            out = state.wrap_outputs(out)
        return out

    # -- hooks ---------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> "RemovableHandle":
        """`hook(module, args)` runs before `forward`; it may return new args."""
        return RemovableHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Callable[..., Any]) -> "RemovableHandle":
        """`hook(module, args, output)` runs after `forward`; it may return a new output."""
        return RemovableHandle(self._forward_hooks, hook)

    def register_full_backward_hook(self, hook: Callable[..., Any]) -> "RemovableHandle":
        """`hook(module, grad_input, grad_output)` runs when the gradients with respect to
        the module's inputs are computed; it may return replacement `grad_input`."""
        return RemovableHandle(self._backward_hooks, hook)

    def register_full_backward_pre_hook(self, hook: Callable[..., Any]) -> "RemovableHandle":
        """`hook(module, grad_output)` runs when the gradients with respect to the module's
        outputs are computed; it may return replacement `grad_output`."""
        return RemovableHandle(self._backward_pre_hooks, hook)

    def _register_load_state_dict_pre_hook(self, hook: Callable[[Dict[str, Any], str], None]) -> "RemovableHandle":
        """`hook(state_dict, prefix)` may rewrite this module's keys before loading
        (how weight-normed layers accept plain or other-layout checkpoints)."""
        return RemovableHandle(self._load_state_dict_pre_hooks, hook)

    # -- attribute routing -------------------------------------------------------
    def _check_init(self) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters/modules before Module.__init__() call")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_init()
            self._remove_from(name, d)
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self._check_init()
            self._remove_from(name, d)
            self._modules[name] = value
        elif isinstance(value, Buffer):
            self._check_init()
            self._remove_from(name, d)
            self.register_buffer(name, value, persistent=getattr(value, "_persistent", True))
        elif "_parameters" in d and name in self._parameters:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' (Parameter or None expected)")
            self._parameters[name] = None
        elif "_modules" in d and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' (Module or None expected)")
            self._modules[name] = None
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' (Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name: str, d: Dict[str, Any]) -> None:
        d.pop(name, None)
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        self._non_persistent_buffers.discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # -- registration ---------------------------------------------------------------
    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Add a parameter under `name` (None registers the name with no tensor)."""
        self._check_init()
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f'parameter name must be a non-empty string without ".", got {name!r}')
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' (Parameter or None required)")
        if name in self.__dict__ or name in self._buffers or name in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """Add a non-trainable tensor under `name`; `persistent=False` keeps it out of the state_dict."""
        self._check_init()
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f'buffer name must be a non-empty string without ".", got {name!r}')
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        if name in self.__dict__ or name in self._parameters or name in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        """Add a child module under `name` (None registers the name with no module)."""
        self._check_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str) or "." in name or name == "":
            raise KeyError(f'module name must be a non-empty string without ".", got {name!r}')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path `target` ("" is the module itself)."""
        mod: Module = self
        if target == "":
            return mod
        for item in target.split("."):
            sub = mod._modules.get(item)
            if sub is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}`")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path `target`, e.g. `"0.weight"`."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        p = mod._parameters.get(name)
        if p is None:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return p

    # -- iteration ------------------------------------------------------------------
    def named_modules(
        self, memo: Optional[Set[int]] = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[Tuple[str, "Module"]]:
        """Yield `(dotted name, module)` for this module and every descendant, each once unless `remove_duplicate=False`."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """Yield this module and every descendant."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """Yield `(name, module)` for the direct children."""
        seen: Set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        """Yield the direct child modules."""
        for _, m in self.named_children():
            yield m

    def _named_members(
        self, get: Callable[["Module"], Any], prefix: str, recurse: bool, remove_duplicate: bool = True
    ) -> Iterator[Tuple[str, Any]]:
        seen: Set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator[Tuple[str, Parameter]]:
        """Yield `(dotted name, parameter)`, of descendants too when `recurse`; shared parameters once."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Yield the parameters (of descendants too when `recurse`), e.g. for an optimizer."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True) -> Iterator[Tuple[str, Tensor]]:
        """Yield `(dotted name, buffer)`, of descendants too when `recurse`."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Yield the buffers (of descendants too when `recurse`)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and gradients -------------------------------------------------------
    def train(self: T, mode: bool = True) -> T:
        """Set training mode (`mode=True`) or evaluation mode on this module and its descendants; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
        return self

    def eval(self: T) -> T:
        """Set evaluation mode (dropout off, batch norm uses running statistics); returns self."""
        return self.train(False)

    def requires_grad_(self: T, requires_grad: bool = True) -> T:
        """Set `requires_grad` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (`set_to_none=True`) or to zeros."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self: T, fn: Callable[["Module"], None]) -> T:
        """Call `fn` on every descendant, then on this module; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply_to_tensors(self, fn: Callable[[Tensor], Tensor]) -> None:
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    p.data = fn(p.detach())
                    if p.grad is not None:
                        p.grad = fn(p.grad)
            for k, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[k] = fn(b)

    def to(self: T, *args: Any, **kwargs: Any) -> T:
        """Move and/or cast parameters and buffers in place (dtypes apply to floating point ones)."""

        # Non-float tensors (int buffers) move but keep their dtype, as in PyTorch.
        dev = kwargs.get("device")
        for a in args:
            if isinstance(a, Tensor):
                dev = a.device
            elif isinstance(a, (str, _core.device)) or (isinstance(a, int) and not isinstance(a, bool)):
                dev = a

        def move(t: Tensor) -> Tensor:
            if t.dtype.is_floating_point:
                return t.to(*args, **kwargs)
            return t.to(dev) if dev is not None else t

        self._apply_to_tensors(move)
        if dev is not None:
            for m in self.modules():
                m._move_extra(dev)
        return self

    def _move_extra(self, device: Any) -> None:
        """Move state kept outside parameters and buffers (a quantized layer's QTensor
        weight) to `device`; `to()` calls it on every module. Nothing by default."""

    def float(self: T) -> T:
        """Cast floating-point parameters and buffers to float32, in place; returns self."""
        return self.to(_core.float32)

    def double(self: T) -> T:
        """Cast floating-point parameters and buffers to float64, in place; returns self."""
        return self.to(_core.float64)

    def half(self: T) -> T:
        """Cast floating-point parameters and buffers to float16, in place; returns self."""
        return self.to(_core.float16)

    def bfloat16(self: T) -> T:
        """Cast floating-point parameters and buffers to bfloat16, in place; returns self."""
        return self.to(_core.bfloat16)

    def cpu(self: T) -> T:
        """Move every parameter and buffer to the CPU (the Parameter objects stay the same)."""
        return self.to("cpu")

    def cuda(self: T, device: Optional[Union[int, str, _core.device]] = None) -> T:
        """Move every parameter and buffer to a CUDA device (default `"cuda:0"`)."""
        if device is None:
            return self.to("cuda")
        return self.to(f"cuda:{device}" if isinstance(device, int) else device)

    # -- state dicts ------------------------------------------------------------------
    def state_dict(
        self, *, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "", keep_vars: bool = False
    ) -> Dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (PyTorch's keys), detached
        unless `keep_vars`; `prefix` is put before every key."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_own(self, sd: Dict[str, Any], prefix: str, errors: List[str], found: Set[str], missing: List[str]) -> None:
        """Copy this module's own entries from `sd` (keys under `prefix`)."""
        own: Dict[str, Tuple[str, Optional[Tensor]]] = {}
        for name, p in self._parameters.items():
            own[name] = ("parameter", p)
        for name, b in self._buffers.items():
            if name not in self._non_persistent_buffers:
                own[name] = ("buffer", b)
        for name, (kind, cur) in own.items():
            key = prefix + name
            if key not in sd:
                if cur is not None:
                    missing.append(key)
                continue
            found.add(key)
            value = sd[key]
            if isinstance(value, _core.QTensor):  # a GGUF file's tensor (`quantized.load_gguf`)
                value = value.dequantize()
            if not isinstance(value, Tensor):
                try:
                    value = _core.tensor(value)
                except (TypeError, ValueError):
                    errors.append(f'While copying the {kind} named "{key}", expected a Tensor, got {type(value).__name__}.')
                    continue
            if cur is None:
                continue
            if tuple(value.shape) != tuple(cur.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {list(value.shape)} from checkpoint, "
                    f"the shape in current model is {list(cur.shape)}."
                )
                continue
            if cur.dtype.is_floating_point and not value.dtype.is_floating_point:
                errors.append(
                    f"dtype mismatch for {key}: copying a param of dtype {value.dtype} from checkpoint, "
                    f"the dtype in current model is {cur.dtype}."
                )
                continue
            value = value.to(cur.dtype).to(cur.device)
            if kind == "parameter":
                with no_grad():
                    cur.copy_(value)  # in place, as PyTorch: the parameter object and its storage stay
            else:
                self._buffers[name] = value.clone()

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from `state_dict` (PyTorch's keys).

        Returns the missing and unexpected keys; with `strict=True` any of them,
        and always a shape or dtype mismatch, raises `StateDictError` listing all."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        errors: List[str] = []
        found: Set[str] = set()
        missing: List[str] = []
        mods = list(self.named_modules(prefix="", remove_duplicate=False))
        if any(m.__dict__.get("_load_state_dict_pre_hooks") for _, m in mods):
            state_dict = OrderedDict(state_dict)
            for prefix, mod in mods:
                for hook in mod.__dict__.get("_load_state_dict_pre_hooks", {}).values():
                    hook(state_dict, prefix + ("." if prefix else ""))
        for prefix, mod in mods:
            mod._load_own(state_dict, prefix + ("." if prefix else ""), errors, found, missing)
        unexpected = [k for k in state_dict if k not in found]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # -- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """Extra text shown inside the parentheses of `repr(module)`; layers override it."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = ["(" + key + "): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


__all__ = ["Module", "StateDictError", "Parameter", "Buffer", "RemovableHandle"]
