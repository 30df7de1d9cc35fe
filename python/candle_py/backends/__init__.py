"""`candle_py.backends`: PyTorch's `torch.backends` switches, so scripts that set them run.

candle_py has one implementation of each op per device (Candle's kernels and ours;
no cuDNN, oneDNN, TF32 or opt_einsum paths to choose between), so most switches
have nothing to switch. They are still real attributes — settable, read back as
set — and each submodule says, flag by flag, why setting it changes no result:
`cudnn`, `cuda` (`cuda.matmul.allow_tf32`, `is_built()`), `mps`, `mkldnn`,
`openmp`, `opt_einsum`. `cpu.get_cpu_capability()` reports the SIMD level of
candle_py's CPU kernels.
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mkldnn, mps, openmp, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "openmp", "opt_einsum"]
