"""`candle_py.backends.cuda`: `torch.backends.cuda`'s `is_built()`, `matmul` flags and
scaled-dot-product-attention backend switches.

The SDPA switches (`enable_flash_sdp`, `enable_mem_efficient_sdp`, `enable_math_sdp`,
`enable_cudnn_sdp`, their `*_enabled()` readers and the `sdp_kernel` context manager)
are stored and read back. They choose among PyTorch's CUDA attention kernels;
candle_py's `F.scaled_dot_product_attention` has one implementation per device (the
fused CPU kernel, the math path elsewhere), with the same results, so they select
nothing (and disabling them all does not make attention fail, as it would in PyTorch).

`matmul.allow_tf32` (False), `matmul.allow_fp16_reduced_precision_reduction` (True) and
`matmul.allow_bf16_reduced_precision_reduction` (True) are settable and read back, but
select nothing: Candle's CUDA matmul is cuBLAS with its own fixed settings, and the CPU
matmul always accumulates float32 in float32. `allow_tf32` mirrors
`candle_py.set_float32_matmul_precision` ("highest" is False, "high"/"medium" True) as
in PyTorch.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator

from .. import _core, _settings

__all__ = [
    "is_built", "matmul", "enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp", "enable_cudnn_sdp",
    "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled", "sdp_kernel",
]  # fmt: skip


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


_SDP: Dict[str, bool] = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _set_sdp(name: str, enabled: bool) -> None:
    if not isinstance(enabled, bool):
        raise TypeError(f"enable_{name}_sdp(): argument 'enabled' must be bool, not {type(enabled).__name__}")
    _SDP[name] = enabled


def enable_flash_sdp(enabled: bool) -> None:
    """Store the flash-attention switch (see the module docstring)."""
    _set_sdp("flash", enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Store the memory-efficient-attention switch (see the module docstring)."""
    _set_sdp("mem_efficient", enabled)


def enable_math_sdp(enabled: bool) -> None:
    """Store the math-attention switch (see the module docstring)."""
    _set_sdp("math", enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    """Store the cuDNN-attention switch (see the module docstring)."""
    _set_sdp("cudnn", enabled)


def flash_sdp_enabled() -> bool:
    """The flash-attention switch last set (True by default)."""
    return _SDP["flash"]


def mem_efficient_sdp_enabled() -> bool:
    """The memory-efficient-attention switch last set (True by default)."""
    return _SDP["mem_efficient"]


def math_sdp_enabled() -> bool:
    """The math-attention switch last set (True by default)."""
    return _SDP["math"]


def cudnn_sdp_enabled() -> bool:
    """The cuDNN-attention switch last set (True by default)."""
    return _SDP["cudnn"]


@contextlib.contextmanager
def sdp_kernel(
    enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True, enable_cudnn: bool = True
) -> Iterator[None]:
    """Set the four SDPA switches for a `with` block and restore them after."""
    saved = dict(_SDP)
    try:
        for name, v in (("flash", enable_flash), ("math", enable_math), ("mem_efficient", enable_mem_efficient), ("cudnn", enable_cudnn)):
            _set_sdp(name, v)
        yield
    finally:
        _SDP.update(saved)
