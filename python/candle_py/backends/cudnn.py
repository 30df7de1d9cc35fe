"""`candle_py.backends.cudnn`: `torch.backends.cudnn`'s flags.

candle_py never calls cuDNN: convolutions run our own CPU kernels (GPU tensors are
convolved on the CPU and copied back) and attention, matmul and the rest use
Candle's kernels. So `is_available()` is False and the flags select nothing:

- `enabled` (True): would route convolutions through cuDNN; there is no cuDNN path.
- `benchmark` (False): would let cuDNN time candidate algorithms; we have one algorithm per op.
- `deterministic` (False): would force deterministic cuDNN algorithms; our convolution
  kernels are deterministic already (fixed reduction order).
- `allow_tf32` (True): would let cuDNN convolutions use TF32; ours compute in full float32.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, Optional

from ._flags import install

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version", "flags"]

enabled: bool = True
benchmark: bool = False
deterministic: bool = False
allow_tf32: bool = True


def is_available() -> bool:
    """False: candle_py uses no cuDNN (see the module docstring)."""
    return False


def version() -> Optional[int]:
    """None: no cuDNN is loaded (PyTorch returns None without cuDNN too)."""
    return None


@contextlib.contextmanager
def flags(
    enabled: bool = False,
    benchmark: bool = False,
    benchmark_limit: int = 10,
    deterministic: bool = False,
    allow_tf32: bool = True,
    fp32_precision: str = "none",
    depthwise_kernel: str = "auto",
) -> Iterator[None]:
    """Set `enabled`, `benchmark`, `deterministic` and `allow_tf32` for a `with` block
    and restore them after (`torch.backends.cudnn.flags`); like the flags themselves
    they select nothing here. `benchmark_limit`, `fp32_precision` and
    `depthwise_kernel` tune cuDNN's algorithm search, which does not exist here."""
    mod: Any = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {n: getattr(mod, n) for n in names}
    try:
        for n, v in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
            setattr(mod, n, v)
        yield
    finally:
        for n, v in saved.items():
            setattr(mod, n, v)


install(__name__, frozenset({"enabled", "benchmark", "deterministic", "allow_tf32"}))
