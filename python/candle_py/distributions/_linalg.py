"""The small dense linear algebra MultivariateNormal needs and candle_py's core lacks
(`torch.linalg.cholesky`, `solve_triangular`, `cholesky_inverse`), composed of
differentiable tensor ops: n steps over the columns (or rows), each vectorized over the
batch, so gradients flow through them as through PyTorch's."""

from __future__ import annotations

from typing import List, Tuple

from .. import _core
from .._core import Tensor


def _check_square(op: str, a: Tensor) -> None:
    if a.dim() < 2:
        raise ValueError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: A must be batches of square matrices, but they are {a.shape[-2]} by {a.shape[-1]} matrices")


def cholesky_ex(a: Tensor) -> Tuple[Tensor, Tensor]:
    """(L, info) with A = L L^T for the lower triangle of each (symmetrized) matrix of `a`;
    info is 0 where the factorization succeeded, else the order of the first leading
    minor that is not positive-definite (`torch.linalg.cholesky_ex`)."""
    _check_square("linalg.cholesky", a)
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    a = 0.5 * (a + a.mT)  # exact for symmetric input; spreads the gradient as PyTorch's
    cols: List[Tensor] = []
    diag: List[Tensor] = []
    for j in range(n):
        s = a[..., :, j]
        if j:
            lp = _core.stack(cols, -1)  # (..., n, j)
            s = s - (lp * lp[..., j : j + 1, :]).sum(-1)
        d = s[..., j : j + 1].sqrt()
        diag.append(s[..., j].detach())
        parts = []
        if j:
            parts.append(_core.zeros(batch + (j,), dtype=a.dtype, device=a.device))
        parts.append(d)
        if j + 1 < n:
            parts.append(s[..., j + 1 :] / d)
        cols.append(_core.cat(parts, -1) if len(parts) > 1 else parts[0])
    if n == 0:
        return a.clone(), _core.zeros(batch, dtype=_core.int32, device=a.device)
    L = _core.stack(cols, -1)
    piv = _core.stack(diag, -1)
    bad = ~(piv > 0)
    order = _core.arange(1, n + 1, device=a.device).to(_core.int32)
    big = _core.full_like(order, n + 1)
    first = _core.where(bad, order.expand(tuple(bad.shape)), big.expand(tuple(bad.shape))).min(-1).values
    info = _core.where(first > n, _core.zeros_like(first), first)
    return L, info


def cholesky(a: Tensor) -> Tensor:
    """The lower Cholesky factor of each matrix of `a` (`torch.linalg.cholesky`); raises
    RuntimeError as PyTorch's when a matrix is not positive-definite."""
    L, info = cholesky_ex(a)
    if bool((info != 0).any()):
        flat = info.reshape(-1)
        k = int((flat != 0).long().argmax())
        order = int(flat[k])
        where = f"(Batch element {k}): " if info.dim() else ""
        raise RuntimeError(
            f"linalg.cholesky: {where}The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {order} is not positive-definite)."
        )
    return L


def solve_triangular(L: Tensor, B: Tensor) -> Tensor:
    """X with L X = B for lower-triangular L (..., n, n) and B (..., n, k), batch
    dimensions broadcast (`torch.linalg.solve_triangular(L, B, upper=False)`)."""
    n = L.shape[-1]
    rows: List[Tensor] = []
    for i in range(n):
        r = B[..., i : i + 1, :]
        if i:
            r = r - L[..., i : i + 1, :i] @ _core.cat(rows, -2)
        rows.append(r / L[..., i : i + 1, i : i + 1])
    if n == 0:
        return B * 1
    return _core.cat(rows, -2)


def solve_triangular_vec(L: Tensor, x: Tensor) -> Tensor:
    """y with L y = x for lower-triangular L (..., n, n) and vectors x (..., n), batch
    dimensions broadcast."""
    n = L.shape[-1]
    ys: List[Tensor] = []
    for i in range(n):
        r = x[..., i]
        if i:
            r = r - (L[..., i, :i] * _core.stack(ys, -1)).sum(-1)
        ys.append(r / L[..., i, i])
    if n == 0:
        return x * 1
    return _core.stack(ys, -1)


def cholesky_inverse(L: Tensor) -> Tensor:
    """(L L^T)^-1 from the lower Cholesky factor L (`torch.cholesky_inverse`)."""
    n = L.shape[-1]
    eye = _core.eye(n, dtype=L.dtype, device=L.device)
    linv = solve_triangular(L, eye.expand(tuple(L.shape)))
    return linv.mT @ linv
