"""`candle_py.backends.cpu`: `torch.backends.cpu.get_cpu_capability()`.

candle_py's CPU kernels are compiled for baseline x86-64 plus AVX2 and AVX-512
variants, one of which is chosen at run time. The environment variable
`CANDLE_PY_MAX_ISA` (`sse4.2`, `avx2` or `avx512`, read once at the first kernel
call) caps that choice, to test the slower paths on a faster CPU; it does not
reach Candle's matmul (the `gemm` crate detects the CPU on its own).
"""

from __future__ import annotations

from .. import _core

__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """The SIMD level candle_py's own CPU kernels run, in PyTorch's words:
    "DEFAULT" (baseline, SSE2), "AVX2" (AVX2 + FMA) or "AVX512"."""
    return _core._cpu_capability()  # type: ignore[no-any-return]
