"""`torch.sparse`: functions of sparse COO tensors (`candle_py._sparse.SparseTensor`)."""

from __future__ import annotations

from ._sparse import sparse_addmm as addmm
from ._sparse import sparse_log_softmax as log_softmax
from ._sparse import sparse_mm as mm
from ._sparse import sparse_softmax as softmax
from ._sparse import sparse_sum as sum

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax"]
