"""`candle_py.backends.cuda`: `torch.backends.cuda`'s `is_built()` and `matmul` flags.

`matmul.allow_tf32` (False), `matmul.allow_fp16_reduced_precision_reduction` (True) and
`matmul.allow_bf16_reduced_precision_reduction` (True) are settable and read back, but
select nothing: Candle's CUDA matmul is cuBLAS with its own fixed settings, and the CPU
matmul always accumulates float32 in float32. `allow_tf32` mirrors
`candle_py.set_float32_matmul_precision` ("highest" is False, "high"/"medium" True) as
in PyTorch.
"""

from __future__ import annotations

from typing import Any

from .. import _core, _settings

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """True when this build has the `cuda` feature (a GPU may still be missing)."""
    return _core.cuda_is_built()


class _MatmulFlags:
    """`backends.cuda.matmul`: the cuBLAS switches (see the module docstring)."""

    _names = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        object.__setattr__(self, "allow_fp16_reduced_precision_reduction", True)
        object.__setattr__(self, "allow_bf16_reduced_precision_reduction", True)

    @property
    def allow_tf32(self) -> bool:
        """TF32 for float32 matmuls: True unless the matmul precision is "highest"."""
        return _settings.get_float32_matmul_precision() != "highest"

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._names:
            raise AttributeError(f"Unknown attribute {name}")
        if not isinstance(value, bool):
            raise TypeError(f"backends.cuda.matmul.{name} must be a bool, got {type(value).__name__}")
        if name == "allow_tf32":
            _settings.set_float32_matmul_precision("high" if value else "highest")
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"Unknown attribute {name}")


matmul = _MatmulFlags()
