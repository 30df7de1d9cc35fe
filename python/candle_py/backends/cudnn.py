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

from typing import Optional

from ._flags import install

__all__ = ["enabled", "benchmark", "deterministic", "allow_tf32", "is_available", "version"]

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


install(__name__, frozenset({"enabled", "benchmark", "deterministic", "allow_tf32"}))
