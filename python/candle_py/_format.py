"""PyTorch-style `repr` for tensors, drawn with NumPy's printer."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._core import Tensor

# dtypes PyTorch leaves out of the repr: the default float, the default int, bool.
_IMPLICIT = {"float32", "int64", "bool"}


def _format_array(a: np.ndarray) -> str:
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        all_int = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        big = finite.size > 0 and (np.abs(finite).max() >= 1e8 or (np.abs(finite[finite != 0]).min(initial=1.0) < 1e-4))
        if big:
            fmt = {"float_kind": lambda v: np.format_float_scientific(v, precision=4, exp_digits=2)}
            return np.array2string(a, separator=", ", prefix="tensor(", formatter=fmt, threshold=1000, edgeitems=3)
        if all_int:
            return np.array2string(a, separator=", ", prefix="tensor(", floatmode="maxprec", precision=4, threshold=1000, edgeitems=3)
        return np.array2string(a, separator=", ", prefix="tensor(", floatmode="fixed", precision=4, threshold=1000, edgeitems=3)
    if a.dtype.kind == "b":
        return np.array2string(a, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3, formatter={"bool": lambda v: "True" if v else "False"})
    return np.array2string(a, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)


def tensor_repr(t: "Tensor") -> str:
    name = t.dtype.name
    src = t.detach()
    if name in ("float16", "bfloat16"):
        src = src.float()
    a = np.asarray(src.cpu())
    body = _format_array(a) if a.ndim > 0 else _format_array(a.reshape(1))[1:-1]
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if a.size == 0 and a.ndim > 1:
        extras.append(f"size={tuple(t.shape)}")
    if name not in _IMPLICIT or (a.size == 0 and name != "float32"):
        extras.append(f"dtype=candle_py.{name}")
    if t.requires_grad:
        extras.append("requires_grad=True" if t.is_leaf else "grad_fn=<Backward>")
    if a.size == 0 and a.ndim > 1:
        body = "[]"
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
