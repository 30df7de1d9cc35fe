"""Containers: `Sequential`, `ModuleList`, `ModuleDict` (PyTorch's keys: `0.weight`)."""

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


__all__ = ["Sequential", "ModuleList", "ModuleDict", "Identity"]
