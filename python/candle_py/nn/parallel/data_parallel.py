"""`DataParallel`: PyTorch's single-process multi-GPU wrapper, as it behaves on one device."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

from ... import _core
from ..module import Module

__all__ = ["DataParallel"]


class DataParallel(Module):
    """Wraps `module` (kept as `self.module`, so state_dict keys gain the prefix
    `module.`) and forwards calls to it.

    Without a CUDA device — the CPU, as in PyTorch — `device_ids` is `[]` and the
    call runs the module directly, exactly as PyTorch does. candle_py does not
    replicate a module over several GPUs: with CUDA, `device_ids` naming more than
    one device raises NotImplementedError; one device (the default: device 0) runs
    the module there."""

    def __init__(
        self,
        module: Module,
        device_ids: Optional[Sequence[Union[int, _core.device]]] = None,
        output_device: Optional[Union[int, _core.device]] = None,
        dim: int = 0,
    ) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids: List[int] = []
        self.output_device: Optional[int] = None
        if not _core.cuda_is_available():
            return
        ids = [0] if device_ids is None else [_index(d) for d in device_ids]
        if len(ids) > 1:
            raise NotImplementedError(f"DataParallel: candle_py does not replicate a module over several GPUs (device_ids={ids})")
        self.device_ids = ids
        self.output_device = ids[0] if output_device is None else _index(output_device)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """The wrapped module's result for these arguments."""
        return self.module(*inputs, **kwargs)


def _index(d: Union[int, _core.device]) -> int:
    if isinstance(d, int):
        return d
    idx = _core.device(d).index
    return 0 if idx is None else int(idx)
