"""`nn.Parameter`: a Tensor that a Module registers as a learnable parameter."""

from __future__ import annotations

from typing import Any, Dict

from .._core import Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad by default and that `Module.__setattr__`
    registers in `parameters()` and `state_dict()`."""

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            data = Tensor()
        if isinstance(data, Tensor):
            data = data.detach()
        return super().__new__(cls, data, requires_grad=requires_grad)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (Parameter, (self.detach().clone(), self.requires_grad))

    def __copy__(self) -> "Parameter":
        # A Parameter sharing this one's data (torch's copy.copy rebuilds from the same storage).
        return Parameter(self.detach(), self.requires_grad)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Parameter":
        # As torch's Parameter.__deepcopy__: the class and a copy of the data; `.grad`
        # is not copied (a plain tensor's deepcopy does copy it).
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        result = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (PyTorch's `nn.Buffer`)."""

    def __new__(cls, data: Any = None, *, persistent: bool = True) -> "Buffer":
        t = super().__new__(cls, Tensor() if data is None else data)
        t._persistent = persistent  # type: ignore[attr-defined]
        return t  # type: ignore[return-value]
