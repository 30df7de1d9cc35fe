"""`candle_py.quantized`: GGML-quantized weights over Candle's quantized storage.

`quantize(t, "q4k")` packs a float tensor into GGML blocks (a `QTensor`);
`QTensor.dequantize()` gives the float32 tensor back; `matmul(x, w)` computes
`x @ w.T` with Candle's quantized kernels, the weight staying packed.
`load_gguf` / `save_gguf` read and write llama.cpp's GGUF files: loading maps
the file and validates its whole layout (counts, lengths, types, dims, offsets,
alignment) before any tensor is built, so a broken or hostile file raises
ValueError and costs no allocation beyond its header and tensors.

The dtype names: f32, f16, bf16 (stored as floats), q4_0, q4_1, q5_0, q5_1,
q8_0, q8_1 (blocks of 32), q2k, q3k, q4k, q5k, q6k, q8k (blocks of 256); GGML's
spellings ("Q4_K") are accepted too.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from . import _core
from ._core import QTensor, Tensor

__all__ = ["QTensor", "DTYPES", "quantize", "dequantize", "matmul", "cat", "block_size", "load_gguf", "save_gguf"]

PathLike = Union[str, "os.PathLike[str]"]

DTYPES: Tuple[str, ...] = tuple(_core._qtypes())
"""Every quantized dtype name, in GGML's order."""


def block_size(dtype: str) -> int:
    """Elements per block of `dtype`: a quantized tensor's last dim must be a multiple of it."""
    return _core._qtype(dtype)[1]  # type: ignore[no-any-return]


def quantize(t: Tensor, dtype: str = "q4k") -> QTensor:
    """Pack the float tensor `t` (at least 1-d, last dim a multiple of the block
    size) into `dtype`'s blocks; raises ShapeError (a ValueError) otherwise."""
    return _core._quantize(t, dtype)


def dequantize(q: QTensor, device: Any = None) -> Tensor:
    """The float32 tensor `q` encodes (`q.dequantize(device)`)."""
    return q.dequantize(device)


def matmul(x: Tensor, w: QTensor) -> Tensor:
    """`x @ w.T` for `x` of shape (..., K) and a quantized weight `w` of shape (N, K),
    as a linear layer stores it (MLX's `quantized_matmul` with `transpose=True`). The
    result is (..., N) in x's dtype; differentiable in `x`. Each row of `x` is
    quantized to 8 bits (q8_0, q8_1 or q8k) first, then multiplied in integers, as in
    llama.cpp: q4_0, q4_1, q8_0, q4k and q6k on the CPU by our multi-threaded kernels,
    other types by Candle's QMatMul. A row of `x` holding NaN or inf gives a NaN row."""
    return _core._qlinear(x, w, None, "quantized.matmul:")


def cat(tensors: Sequence[QTensor], dim: int = 0) -> QTensor:
    """QTensors of one dtype and device joined along dim 0 (their shapes must agree
    past it), without requantizing: GGML stores rows one after another, so the result
    holds the same blocks. How fused projections are built (a Llama layer's q, k and v
    weights as one (q + k + v, hidden) weight). Only dim 0 (or its negative spelling)
    is supported: other dims cut through the blocks' row layout."""
    tensors = list(tensors)
    rank = len(tensors[0].shape) if tensors else 1
    if isinstance(dim, bool) or not isinstance(dim, int) or dim not in (0, -rank):
        raise ValueError(f"quantized.cat: only dim 0 is supported (rows of blocks follow each other), got dim={dim!r}")
    return _core._qcat(tensors)


def load_gguf(path: PathLike, device: Any = None) -> Tuple[Dict[str, QTensor], Dict[str, Any]]:
    """Read a GGUF file: (tensors by name in file order, metadata by key) with
    metadata as Python ints, floats, bools, strs and lists. Tensors land on
    `device` (default: the default device). A malformed file raises ValueError."""
    return _core._load_gguf(os.fspath(path), device)  # type: ignore[no-any-return]


def save_gguf(path: PathLike, tensors: Dict[str, Union[QTensor, Tensor]], metadata: Optional[Dict[str, Any]] = None) -> None:
    """Write a GGUF file (version 2, data aligned to 32 bytes), atomically.

    Values may be QTensors or float32/float16/bfloat16 tensors (stored as GGUF's
    f32/f16/bf16). Metadata: bool, str, float (stored as float32, as GGUF files
    hold hyper-parameters), int (uint32 when it fits, as llama.cpp's counts, else
    int64/uint64), a NumPy scalar (its own type, e.g. `np.float64(x)`), or a list
    of one kind of these."""
    _core._save_gguf(os.fspath(path), tensors, metadata or {})
