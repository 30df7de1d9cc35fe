"""Process-wide numerics switches PyTorch scripts set: the float32 matmul precision
and deterministic algorithms.

Both are stored and read back as in PyTorch, and neither changes a result here,
for reasons that hold on every candle_py device:

- matmul precision ("highest" / "high" / "medium"): PyTorch may then use TF32 or
  bfloat16 passes for float32 matmuls. candle_py's CPU GEMM always multiplies and
  accumulates float32 in float32, and Candle's CUDA matmul keeps cuBLAS's default
  math mode, whatever this says.
- deterministic algorithms: PyTorch then refuses or replaces its nondeterministic
  kernels (atomics-based scatter/index_add on CUDA, cuDNN autotuning). candle_py's
  CPU kernels reduce in a fixed order, so repeated runs give identical results
  already; there is no nondeterministic kernel to refuse.
"""

from __future__ import annotations

import warnings

__all__ = [
    "set_float32_matmul_precision", "get_float32_matmul_precision",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled",
]  # fmt: skip

_PRECISIONS = ("highest", "high", "medium")
_state = {"precision": "highest", "deterministic": False, "warn_only": False}


def set_float32_matmul_precision(precision: str) -> None:
    """Set the float32 matmul precision ("highest", "high" or "medium"). Stored and
    returned by `get_float32_matmul_precision`; candle_py's matmuls compute in full
    float32 at every setting. Another string warns and changes nothing, as PyTorch."""
    if precision not in _PRECISIONS:
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current set_float32_matmul_precision call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    _state["precision"] = precision


def get_float32_matmul_precision() -> str:
    """The float32 matmul precision last set ("highest" by default)."""
    return str(_state["precision"])


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (stored; candle_py's kernels are deterministic
    already, so nothing is refused or replaced)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    _state["deterministic"] = mode
    _state["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in effect."""
    return bool(_state["deterministic"])


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether deterministic mode was asked for with `warn_only=True`."""
    return bool(_state["warn_only"])
