"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`,
`ParameterDict` (PyTorch's keys: `0.weight`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, Optional, Tuple, Union, overload

from .module import Module


def _renumber(container: Module, mods: list) -> None:
    """Store `mods` under keys 0..n-1, as PyTorch's list-like containers do after an edit."""
    container._modules.clear()
    for i, m in enumerate(mods):
        container._modules[str(i)] = m


def _index(idx: int, n: int, what: str) -> int:
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx % n


class Sequential(Module):
    """Modules applied in order; built from modules or from an `OrderedDict`."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    @overload
    def __getitem__(self, idx: slice) -> "Sequential": ...
    @overload
    def __getitem__(self, idx: int) -> Module: ...
    def __getitem__(self, idx: Union[int, slice]) -> Union[Module, "Sequential"]:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index(idx, len(items), "Sequential")][1]  # type: ignore[return-value]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[_index(idx, len(self._modules), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx: Union[int, slice]) -> None:
        keys = list(self._modules.keys())
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys), "Sequential")]]
        for k in targets:
            del self._modules[k]
        _renumber(self, list(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    def append(self, module: Module) -> "Sequential":
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        """Add each of `modules` at the end; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Insert `module` before position `index`; returns self."""
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        mods.insert(index % (n + 1) if index < 0 else index, module)
        _renumber(self, mods)
        return self

    def forward(self, input: Any) -> Any:
        """Feed `input` through each module in order and return the last output."""
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules whose parameters the parent module sees (keys `0.`, `1.`, ...)."""

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: Union[int, slice]) -> Any:
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])  # type: ignore[arg-type]
        return mods[_index(idx, len(mods), "ModuleList")]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: Union[int, slice]) -> None:
        mods = list(self._modules.values())
        del mods[idx]
        _renumber(self, mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    def __repr__(self) -> str:
        """PyTorch's layout, with runs of identical children folded: `(0-5): 6 x Layer(...)`."""
        from .module import _addindent

        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list = []  # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2) for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def append(self, module: Module) -> "ModuleList":
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Add each of `modules` at the end; returns self."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert `module` before position `index`."""
        mods = list(self._modules.values())
        mods.insert(index, module)
        _renumber(self, mods)


class ModuleDict(Module):
    """A dict of modules whose parameters the parent module sees (keys `name.`)."""

    def __init__(self, modules: Optional[Union[Mapping[str, Module], Iterable[Tuple[str, Module]]]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        m = self._modules[key]
        assert m is not None
        return m

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        """The names of the modules, in insertion order."""
        return self._modules.keys()

    def items(self) -> Iterable[Tuple[str, Module]]:
        """The `(name, module)` pairs, in insertion order."""
        return [(k, v) for k, v in self._modules.items() if v is not None]

    def values(self) -> Iterable[Module]:
        """The modules, in insertion order."""
        return [v for v in self._modules.values() if v is not None]

    def pop(self, key: str) -> Module:
        """Remove the module named `key` and return it."""
        v = self[key]
        del self._modules[key]
        return v

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Union[Mapping[str, Module], Iterable[Tuple[str, Module]]]) -> None:
        """Add or replace modules from a mapping or from `(name, module)` pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for k, m in pairs:
            self[k] = m


class Identity(Module):
    """Returns its input unchanged (accepts and ignores any constructor arguments)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        """Return `input` unchanged."""
        return input


def _as_parameter(value: Any) -> Any:
    """PyTorch's rule: a plain Tensor stored in a parameter container becomes a
    Parameter; other objects (ints, strings, ...) are kept as they are."""
    from .._core import Tensor
    from .parameter import Parameter

    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(key: str, p: Any) -> str:
    from .._core import Tensor
    from .parameter import Parameter

    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p.shape)
        dev = f" ({p.device})" if p.device.type != "cpu" else ""
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{p.dtype} of size {size}{dev}]"
    return f"  ({key}): Object of type: {type(p).__name__}"


class ParameterList(Module):
    """A list of parameters registered under keys "0", "1", ... (so `state_dict()`
    holds `0`, `1`, ...); plain Tensors are wrapped into Parameters."""

    def __init__(self, values: Optional[Iterable[Any]] = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get(self, i: int) -> Any:
        key = str(i)
        return self._parameters[key] if key in self._parameters else getattr(self, key)

    def __getitem__(self, idx: Union[int, slice]) -> Any:
        if isinstance(idx, slice):
            return ParameterList([self._get(i) for i in range(*idx.indices(self._size))])
        return self._get(_index(idx, self._size, "ParameterList"))

    def __setitem__(self, idx: int, param: Any) -> None:
        i = _index(idx, self._size, "ParameterList")
        setattr(self, str(i), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self._get(i) for i in range(self._size))

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def __dir__(self) -> list:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value: Any) -> "ParameterList":
        """Add `value` at the end."""
        new_idx = self._size
        self._size += 1
        setattr(self, str(new_idx), _as_parameter(value))
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Append every value of `values`."""
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")

    def extra_repr(self) -> str:
        return "\n".join(_describe(str(i), p) for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters registered under their keys (in insertion order);
    plain Tensors are wrapped into Parameters."""

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: "OrderedDict[str, None]" = OrderedDict()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """`self[key]`, first setting it to `default` when missing."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every parameter."""
        for k in list(self._keys):
            del self[k]

    def pop(self, key: str) -> Any:
        """Remove `key` and return its parameter."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> Tuple[str, Any]:
        """Remove and return the last inserted (key, parameter) pair."""
        k, _ = self._keys.popitem()
        self._keys[k] = None
        return k, self.pop(k)

    def get(self, key: str, default: Any = None) -> Any:
        """`self[key]` if present, else `default`."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> "ParameterDict":
        """A new ParameterDict with every key of `keys` set to `default`."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._keys.keys()

    def items(self) -> Iterable[Tuple[str, Any]]:
        """(key, parameter) pairs, in insertion order."""
        return [(k, self[k]) for k in self._keys]

    def values(self) -> Iterable[Any]:
        """The parameters, in insertion order."""
        return [self[k] for k in self._keys]

    def update(self, parameters: Any) -> None:
        """Add the pairs of a mapping, of a ParameterDict, or of an iterable of (key, value) pairs."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = []
            for j, p in enumerate(parameters):
                if not hasattr(p, "__len__") or len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} should be an iterable of length 2")
                pairs.append((p[0], p[1]))
        for k, v in pairs:
            self[k] = v

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def extra_repr(self) -> str:
        return "\n".join(_describe(k, p) for k, p in self.items())


__all__ = ["Sequential", "ModuleList", "ModuleDict", "Identity", "ParameterList", "ParameterDict"]
