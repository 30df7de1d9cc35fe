"""`candle_py.linalg`: PyTorch's `torch.linalg` for real matrices: norms, determinants,
inverses, linear solves, Cholesky, triangular solves, LU, matrix powers and products;
and the top-level `det`, `logdet`, `slogdet`, `inverse`, `cholesky_solve`,
`cholesky_inverse`, `matrix_power` with their Tensor methods.

The factorizations are Rust kernels (`src/ops/linalg.rs`: LU with partial pivoting,
Cholesky, triangular solves, over batches in parallel, computed in float64 and returned
in the input's dtype). Their gradients are PyTorch's formulas written with tensor ops
(`autograd.Function`s whose backward is itself differentiable): `inv` gives
`-inv^T G inv^T`, `solve` gives `solve(A^T, G)` and `-G_B X^T`, `det` `G det A^{-T}`,
`cholesky` `L^{-T} Phi(L^T G) L^{-1}` symmetrized, and so on. Norms, `matrix_power`,
`multi_dot`, `cross` and `vecdot` are compositions of differentiable ops.

Errors are PyTorch's: `LinAlgError` (a `RuntimeError`, and a `ValueError` as candle_py's
value errors are) for singular or non-positive-definite input, `ValueError` for shapes,
`TypeError` for integer input. Not here yet: the SVD and eigendecompositions (and what
needs them: `svd`, `eigh`, `pinv`, `lstsq`, `matrix_rank`, `cond`, the 2 and nuclear
matrix norms), which raise `NotImplementedError` naming themselves.
"""

from __future__ import annotations

import collections
import math
from typing import Any, List, Optional, Sequence, Tuple, Union

from . import _core
from ._composed_linalg import broadcast_shapes, broadcast_tensors
from ._core import DTypeError, ShapeError, Tensor
from .autograd.function import Function, FunctionCtx

__all__ = [
    "LinAlgError", "vector_norm", "matrix_norm", "norm", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex",
    "cholesky", "cholesky_ex", "solve_triangular", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "matrix_power",
    "multi_dot", "cross", "vecdot", "diagonal", "matmul", "svd", "svdvals", "eigh", "eigvalsh", "eig", "eigvals",
    "pinv", "lstsq", "matrix_rank", "cond", "qr", "matrix_exp", "tensorinv", "tensorsolve",
]  # fmt: skip

Dims = Optional[Union[int, Sequence[int]]]


class LinAlgError(ValueError, RuntimeError):
    """A matrix the operation cannot handle: singular (`inv`, `solve`), not
    positive-definite (`cholesky`); PyTorch's `torch.linalg.LinAlgError`."""


slogdet_result = collections.namedtuple("slogdet", ("sign", "logabsdet"), module="candle_py.return_types")  # type: ignore[name-match]
inv_ex_result = collections.namedtuple("inv_ex", ("inverse", "info"), module="candle_py.return_types")  # type: ignore[name-match]
solve_ex_result = collections.namedtuple("solve_ex", ("result", "info"), module="candle_py.return_types")  # type: ignore[name-match]
cholesky_ex_result = collections.namedtuple("cholesky_ex", ("L", "info"), module="candle_py.return_types")  # type: ignore[name-match]
lu_factor_result = collections.namedtuple("lu_factor", ("LU", "pivots"), module="candle_py.return_types")  # type: ignore[name-match]
lu_factor_ex_result = collections.namedtuple("lu_factor_ex", ("LU", "pivots", "info"), module="candle_py.return_types")  # type: ignore[name-match]
lu_result = collections.namedtuple("lu", ("P", "L", "U"), module="candle_py.return_types")  # type: ignore[name-match]
qr_result = collections.namedtuple("linalg_qr", ("Q", "R"), module="candle_py.return_types")  # type: ignore[name-match]


# -- checks ---------------------------------------------------------------------------------


def _float(x: Any, op: str, name: str = "A") -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if not x.is_floating_point():
        raise DTypeError(f"{op}: Expected a floating point or complex tensor as input. Got {x.dtype}")
    return x


def _square(x: Any, op: str, name: str = "A") -> Tensor:
    a = _float(x, op, name)
    if a.ndim < 2:
        raise ShapeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{op}: {name} must be batches of square matrices, but they are {a.shape[-2]} by {a.shape[-1]} matrices")
    return a


def _batch_element(info: Tensor) -> Tuple[Optional[str], int]:
    """The first failing matrix of a batch (as PyTorch names it) and its info."""
    flat = info.reshape(-1).tolist()
    for i, v in enumerate(flat):
        if v != 0:
            return (f"(Batch element {i}): " if info.ndim > 0 else ""), int(v)
    return None, 0


def _eye_like(a: Tensor) -> Tensor:
    n = a.shape[-1]
    return _core.eye(n, dtype=a.dtype, device=a.device).expand(*a.shape)


# -- kernels with their gradients -----------------------------------------------------------


def _lu(a: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    return _core._linalg_lu(a.detach().contiguous())  # type: ignore[no-any-return]


def _lu_solve_plain(lu: Tensor, piv: Tensor, b: Tensor, trans: bool = False) -> Tensor:
    return _core._linalg_lu_solve(lu.contiguous(), piv.contiguous(), b.detach().contiguous(), trans)  # type: ignore[no-any-return]


def _tri_plain(t: Tensor, b: Tensor, upper: bool, unit: bool) -> Tensor:
    return _core._linalg_triangular(t.detach().contiguous(), b.detach().contiguous(), upper, unit)  # type: ignore[no-any-return]


class _Solve(Function):
    """`X = A^{-1} B` (A and B of equal batch dims; B (..., n, k)) from one LU."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, b: Tensor, op: str) -> Tensor:  # type: ignore[override]
        lu, piv, info = _lu(a)
        where, k = _batch_element(info)
        if k:
            if op == "linalg.inv":
                raise LinAlgError(
                    f"{op}: {where}The diagonal element {k} is zero, the inversion could not be completed because the input "
                    "matrix is singular."
                )
            raise LinAlgError(f"{op}: {where}The solver failed because the input matrix is singular.")
        x = _lu_solve_plain(lu, piv, b)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], None]:  # type: ignore[override]
        a, x = ctx.saved_tensors
        gb = solve(a.mT, g)
        ga = -(gb @ x.mT) if ctx.needs_input_grad[0] else None
        return ga, gb, None


class _Cholesky(Function):
    """Lower Cholesky factor `L` of `A = L L^T`."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:  # type: ignore[override]
        low, info = _core._linalg_cholesky(a.detach().contiguous())
        where, k = _batch_element(info)
        if k:
            raise LinAlgError(
                f"linalg.cholesky: {where}The factorization could not be completed because the input is not positive-definite "
                f"(the leading minor of order {k} is not positive-definite)."
            )
        ctx.save_for_backward(low)
        return low  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:  # type: ignore[override]
        (low,) = ctx.saved_tensors
        phi = (low.mT @ g).tril()
        phi = phi * (1.0 - 0.5 * _core.eye(phi.shape[-1], dtype=phi.dtype))  # the diagonal halved
        # S = L^{-T} Phi L^{-1}, symmetrized: the gradient of a symmetric input
        s = solve_triangular(low.mT, solve_triangular(low.mT, phi.mT, upper=True).mT, upper=True)
        return 0.5 * (s + s.mT)


class _Triangular(Function):
    """`X = T^{-1} B` for the upper or lower triangle `T` of `A` (unit diagonal if `unit`)."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, b: Tensor, upper: bool, unit: bool) -> Tensor:  # type: ignore[override]
        x = _tri_plain(a, b, upper, unit)
        ctx.save_for_backward(a, x)
        ctx.upper, ctx.unit = upper, unit  # type: ignore[attr-defined]
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tuple[Optional[Tensor], Tensor, None, None]:  # type: ignore[override]
        a, x = ctx.saved_tensors
        upper, unit = ctx.upper, ctx.unit  # type: ignore[attr-defined]
        gb = solve_triangular(a.mT, g, upper=not upper, unitriangular=unit)
        ga = None
        if ctx.needs_input_grad[0]:
            ga = -(gb @ x.mT)
            ga = ga.triu(1 if unit else 0) if upper else ga.tril(-1 if unit else 0)
        return ga, gb, None, None


class _Det(Function):
    """`det(A)` from LU: the product of U's diagonal, signed by the permutation."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:  # type: ignore[override]
        sign, logabs, lu, piv = _sign_logabs(a)
        d = sign * logabs.exp()
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tensor:  # type: ignore[override]
        a, d = ctx.saved_tensors
        # G det A^{-T}; at a singular matrix (det 0) that is 0, as PyTorch gives it
        return (g * d).unsqueeze(-1).unsqueeze(-1) * inv(_nonsingular(a)).mT


class _Slogdet(Function):
    """`(sign, log|det A|)`; the gradient flows through `logabsdet`: `G A^{-T}`."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tuple[Tensor, Tensor]:  # type: ignore[override]
        sign, logabs, _, _ = _sign_logabs(a)
        ctx.save_for_backward(a)
        ctx.mark_non_differentiable(sign)
        return sign, logabs

    @staticmethod
    def backward(ctx: FunctionCtx, g_sign: Optional[Tensor], g_log: Tensor) -> Tensor:  # type: ignore[override]
        (a,) = ctx.saved_tensors
        return g_log.unsqueeze(-1).unsqueeze(-1) * inv(_nonsingular(a)).mT


def _nonsingular(a: Tensor) -> Tensor:
    """`a` with its singular matrices replaced by the identity (whose gradient terms are
    then scaled by a zero determinant, or meaningless as PyTorch's are)."""
    _, _, info = _lu(a)
    if not bool((info != 0).any()):
        return a
    return _core.where((info != 0).unsqueeze(-1).unsqueeze(-1), _eye_like(a), a)


def _sign_logabs(a: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """sign and log|det| of `a` from its LU factors (0 and -inf for a singular matrix)."""
    n = a.shape[-1]
    lu, piv, _ = _lu(a)
    diag = lu.diagonal(0, -2, -1)
    swaps = (piv != _core.arange(1, n + 1, dtype=_core.int32)).sum(-1)
    perm_sign = 1.0 - 2.0 * (swaps % 2).to(a.dtype)
    sign = perm_sign * diag.sign().prod(-1) if n else _core.ones(a.shape[:-2], dtype=a.dtype)
    logabs = diag.abs().log().sum(-1) if n else _core.zeros(a.shape[:-2], dtype=a.dtype)
    return sign, logabs, lu, piv


# -- public functions -----------------------------------------------------------------------


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix of `A` (..., n, n); `LinAlgError` if singular."""
    a = _square(A, "linalg.inv")
    return _Solve.apply(a, _eye_like(a).contiguous(), "linalg.inv")  # type: ignore[no-any-return]


def inv_ex(A: Tensor, *, check_errors: bool = False) -> Any:
    """`(inverse, info)`: info > 0 marks a singular matrix (its inverse is then not
    meaningful) instead of raising, unless `check_errors`."""
    a = _square(A, "linalg.inv_ex")
    _, _, info = _lu(a)
    if check_errors or not bool((info != 0).any()):
        return inv_ex_result(inv(a), info)
    lu, piv, _ = _lu(a)
    return inv_ex_result(_lu_solve_plain(lu, piv, _eye_like(a)), info)


def _rhs(a: Tensor, b: Tensor, op: str, left: bool) -> Tuple[Tensor, Tensor, bool]:
    """Broadcast `A` and `B` for `A X = B` (`X A = B` if not `left`); a vector `B` (..., n)
    is a single column when that is the only reading PyTorch allows."""
    n = a.shape[-1]
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    bm = b.unsqueeze(-1) if vector else b
    if not left:
        bm = bm.mT
    if bm.shape[-2] != n:
        raise ShapeError(
            f"{op}: Incompatible shapes of A and B for the equation {'AX = B' if left else 'XA = B'} "
            f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2] if b.ndim > 1 else b.shape[-1]}x{1 if vector else b.shape[-1]})"
        )
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(bm.shape[:-2]))
    a2 = a.expand(*batch, n, n)
    b2 = bm.expand(*batch, *bm.shape[-2:])
    return a2, b2, vector


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """`X` with `A X = B` (`X A = B` if not `left`), batch dims broadcast; `B` may be a
    vector (..., n). `LinAlgError` if `A` is singular."""
    a = _square(A, "linalg.solve")
    b = _float(B, "linalg.solve", "B")
    if a.dtype != b.dtype:
        raise DTypeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type {a.dtype} and B of type {b.dtype} instead"
        )
    a2, b2, vector = _rhs(a, b, "linalg.solve", left)
    x = _Solve.apply(a2 if left else a2.mT, b2, "torch.linalg.solve")
    if not left:
        x = x.mT
    return x.squeeze(-1) if vector else x  # type: ignore[no-any-return]


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> Any:
    """`(result, info)`: info > 0 for a singular matrix instead of raising."""
    a = _square(A, "linalg.solve_ex")
    _, _, info = _lu(a)
    if check_errors or not bool((info != 0).any()):
        return solve_ex_result(solve(a, B, left=left), info)
    b = _float(B, "linalg.solve_ex", "B")
    a2, b2, vector = _rhs(a, b, "linalg.solve_ex", left)
    lu, piv, _ = _lu(a2 if left else a2.mT)
    x = _lu_solve_plain(lu, piv, b2)
    x = x if left else x.mT
    return solve_ex_result(x.squeeze(-1) if vector else x, info)


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of each symmetric positive-definite matrix (its lower
    triangle is read): `L` with `A = L L^T`, or `U = L^T` if `upper`."""
    a = _square(A, "linalg.cholesky")
    low = _Cholesky.apply(a)
    return low.mT if upper else low  # type: ignore[no-any-return]


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> Any:
    """`(L, info)`: info = k > 0 when the leading minor of order k is not
    positive-definite (L then as LAPACK leaves it) instead of raising."""
    a = _square(A, "linalg.cholesky_ex")
    low, info = _core._linalg_cholesky(a.detach().contiguous())
    if check_errors or not bool((info != 0).any()):
        low = cholesky(a)
    return cholesky_ex_result(low.mT if upper else low, info)


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
    """`X` with `T X = B` (`X T = B` if not `left`) for the upper (`upper`) or lower
    triangle `T` of `A`, its diagonal taken as ones if `unitriangular`."""
    a = _square(A, "linalg.solve_triangular")
    b = _float(B, "linalg.solve_triangular", "B")
    if b.ndim < 2:
        raise ShapeError(f"linalg.solve_triangular: The input tensor B must have at least 2 dimensions, got {list(b.shape)}")
    n = a.shape[-1]
    bm = b if left else b.mT
    if bm.shape[-2] != n:
        raise ShapeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation ({n}x{n} and {list(b.shape)})")
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(bm.shape[:-2]))
    a2, b2 = a.expand(*batch, n, n), bm.expand(*batch, *bm.shape[-2:])
    if left:
        return _Triangular.apply(a2, b2, upper, unitriangular)  # type: ignore[no-any-return]
    return _Triangular.apply(a2.mT, b2, not upper, unitriangular).mT  # type: ignore[no-any-return]


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix (0 for a singular one)."""
    return _Det.apply(_square(A, "linalg.det"))  # type: ignore[no-any-return]


def slogdet(A: Tensor) -> Any:
    """`(sign, logabsdet)` of each square matrix: `det = sign * exp(logabsdet)`, with
    sign 0 and logabsdet -inf for a singular one."""
    sign, logabs = _Slogdet.apply(_square(A, "linalg.slogdet"))
    return slogdet_result(sign, logabs)


def _no_grad_factor(a: Tensor, op: str) -> None:
    if a.requires_grad and _core.is_grad_enabled():
        raise NotImplementedError(f"{op}: gradients through the LU factors are not supported by candle_py; use linalg.solve, inv or det")


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> Any:
    """`(LU, pivots, info)` as LAPACK's getrf: `P A = L U` packed in one matrix, pivots
    int32 and 1-based, info > 0 for a zero pivot."""
    a = _square(A, "linalg.lu_factor_ex")
    if not pivot:
        raise NotImplementedError("linalg.lu_factor_ex: LU without pivoting is only available for CUDA tensors")
    _no_grad_factor(a, "linalg.lu_factor_ex")
    lu_, piv, info = _lu(a)
    where, k = _batch_element(info)
    if check_errors and k:
        raise LinAlgError(
            f"linalg.lu_factor_ex: {where}The factorization could not be completed because the input is singular (U[{k},{k}] is zero)."
        )
    return lu_factor_ex_result(lu_, piv, info)


def lu_factor(A: Tensor, *, pivot: bool = True) -> Any:
    """`(LU, pivots)` of `lu_factor_ex`, raising if a pivot is zero."""
    lu_, piv, info = lu_factor_ex(A, pivot=pivot)
    where, k = _batch_element(info)
    if k:
        raise LinAlgError(
            f"torch.linalg.lu_factor: {where}U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. "
            "If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
        )
    return lu_factor_result(lu_, piv)


def lu(A: Tensor, *, pivot: bool = True) -> Any:
    """`(P, L, U)` with `A = P L U`."""
    lu_, piv, _ = lu_factor_ex(A, pivot=pivot)
    n = lu_.shape[-1]
    low = lu_.tril(-1) + _eye_like(lu_)
    up = lu_.triu()
    # P from the row swaps: apply them to the identity's rows, then transpose (A = P L U)
    perm = _core.arange(n).expand(*lu_.shape[:-2], n).contiguous().tolist() if n else []
    piv_l = piv.reshape(-1, n).tolist() if n else []
    rows: List[List[int]] = []
    flat_perm = [perm] if lu_.ndim == 2 else _flatten_batches(perm, lu_.ndim - 2)
    for p, sw in zip(flat_perm, piv_l):
        p = list(p)
        for i, s in enumerate(sw):
            p[i], p[s - 1] = p[s - 1], p[i]
        rows.append(p)
    eye = _core.eye(n, dtype=lu_.dtype)
    pm = _core.stack([eye[_core.tensor(r, dtype=_core.int64)] for r in rows]) if rows else _core.zeros(*lu_.shape, dtype=lu_.dtype)
    return lu_result(pm.reshape(*lu_.shape).mT.contiguous(), low, up)


def _flatten_batches(x: Any, depth: int) -> List[Any]:
    for _ in range(depth - 1):
        x = [y for z in x for y in z]
    return list(x)


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """`X` with `A X = B` (`A^T X = B` if `adjoint`; `X A = B` if not `left`) from
    `lu_factor`'s factors."""
    lu_ = _square(LU, "linalg.lu_solve", "LU")
    b = _float(B, "linalg.lu_solve", "B")
    _no_grad_factor(b, "linalg.lu_solve")
    n = lu_.shape[-1]
    bm = b if left else b.mT
    trans = adjoint if left else not adjoint
    if bm.shape[-2] != n:
        raise ShapeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation ({n}x{n} and {list(b.shape)})")
    batch = broadcast_shapes(tuple(lu_.shape[:-2]), tuple(bm.shape[:-2]))
    x = _lu_solve_plain(lu_.expand(*batch, n, n), pivots.expand(*batch, n), bm.expand(*batch, *bm.shape[-2:]), trans)
    return x if left else x.mT


def matrix_power(A: Tensor, n: int) -> Tensor:
    """`A` multiplied by itself `n` times (the identity for 0, powers of the inverse for
    n < 0), by repeated squaring."""
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.matrix_power(): argument 'A' must be Tensor, not {type(A).__name__}")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        shape = f"{A.shape[-2]} by {A.shape[-1]} matrices" if A.ndim >= 2 else f"a {A.ndim}-D tensor"
        raise ShapeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {shape}")
    # integer matrices take non-negative powers, as in PyTorch
    a = _float(A, "linalg.inv") if n < 0 else A
    if n == 0:
        eye = _core.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(*a.shape)
        if not a.is_floating_point():
            return eye.clone()
        # in the graph with a zero gradient, as PyTorch's (a 0 that is never NaN)
        return eye + _core.where(a.isfinite(), a, 0.0) * 0.0
    if n == 1:
        return a.clone()
    base = inv(a) if n < 0 else a
    k = abs(n)
    out: Optional[Tensor] = None
    while k:
        if k & 1:
            out = base if out is None else out @ base
        k >>= 1
        if k:
            base = base @ base
    assert out is not None
    return out


def vector_norm(x: Tensor, ord: Union[int, float] = 2, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """`sum(|x|^ord)^(1/ord)` over `dim` (every dim if None); inf: max |x|, -inf: min,
    0: the count of nonzeros."""
    t = _float(x, "linalg.vector_norm", "x")
    if dtype is not None:
        t = t.to(dtype)
    dims = None if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    if dims == ():
        dims = None
    a = t.abs()
    if ord == math.inf:
        return a.amax(dim=dims if dims is not None else tuple(range(t.ndim)), keepdim=keepdim) if t.ndim else a
    if ord == -math.inf:
        return a.amin(dim=dims if dims is not None else tuple(range(t.ndim)), keepdim=keepdim) if t.ndim else a
    every = dims if dims is not None else tuple(range(t.ndim))
    if ord == 0:
        # the count of nonzeros, in the graph with a zero gradient (as PyTorch's)
        count = (a != 0).to(t.dtype) + _core.where(a.isfinite(), a, 0.0) * 0.0
        return count.sum(dim=every, keepdim=keepdim) if t.ndim else count
    if ord < 0:
        # a zero entry makes the norm 0 (|0|^ord is inf): value and gradient 0 there
        zero = (a == 0).to(t.dtype).amax(dim=every, keepdim=True) > 0 if t.ndim else a == 0
        safe = _core.where(a == 0, 1.0, a)
        out = _core.where(zero, 0.0, safe.norm(p=float(ord), dim=every, keepdim=True) if t.ndim else safe)
        return out if keepdim or not t.ndim else out.squeeze(every)
    if ord == 2:
        return t.norm(p=2, dim=dims, keepdim=keepdim)
    return t.norm(p=float(ord), dim=dims, keepdim=keepdim)


def matrix_norm(
    A: Tensor, ord: Union[str, int, float] = "fro", dim: Tuple[int, int] = (-2, -1), keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The Frobenius norm (`'fro'`), or the max/min absolute column (1/-1) or row
    (inf/-inf) sum, over the two dims `dim`."""
    a = _float(A, "linalg.matrix_norm")
    if a.ndim < 2:
        raise ShapeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        a = a.to(dtype)
    d0, d1 = (d % a.ndim for d in dim)
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return a.norm(p=2, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs the singular values, which candle_py does not compute yet")
    if ord not in (1, -1, math.inf, -math.inf):
        raise ValueError(f"linalg.matrix_norm: Order {ord} not supported.")
    sum_dim, red_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = a.abs().sum(dim=sum_dim, keepdim=True)
    out = sums.amax(dim=red_dim, keepdim=True) if ord in (1, math.inf) else sums.amin(dim=red_dim, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def norm(A: Tensor, ord: Any = None, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """`vector_norm` or `matrix_norm` as PyTorch's `linalg.norm` picks: a 2-tuple `dim`
    (or a 2-D input with `ord` and no dim) is a matrix norm; otherwise a vector norm
    (2-norm of the flattened input when both are None)."""
    a = _float(A, "linalg.norm")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 2:
            return matrix_norm(a, "fro" if ord is None else ord, (dims[0], dims[1]), keepdim, dtype=dtype)
        return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(a, 2, None, keepdim, dtype=dtype)
    if a.ndim == 2:
        return matrix_norm(a, ord, (-2, -1), keepdim, dtype=dtype)
    if a.ndim == 1:
        return vector_norm(a, ord, None, keepdim, dtype=dtype)
    raise ValueError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {a.ndim}D.")


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices (the first may be a row vector, the last a
    column vector), associated left to right."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise ShapeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    out = ts[0]
    for t in ts[1:]:
        out = out @ t
    if first_vec:
        out = out.squeeze(0)
    if last_vec:
        out = out.squeeze(-1)
    return out


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along `dim` (broadcast)."""
    if input.ndim != other.ndim:
        raise ShapeError("linalg.cross: inputs must have the same number of dimensions.")
    a, b = broadcast_tensors(input, other) if tuple(input.shape) != tuple(other.shape) else (input, other)
    if a.shape[dim] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and {b.shape[dim]}")
    a0, a1, a2 = a.unbind(dim)
    b0, b1, b2 = b.unbind(dim)
    return _core.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product along `dim` (broadcast); floating inputs, as PyTorch's."""
    _float(x, "linalg.vecdot", "x")
    _float(y, "linalg.vecdot", "y")
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of the matrices over `dim1`, `dim2`."""
    return A.diagonal(offset, dim1, dim2)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """`input @ other`."""
    return input @ other


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of `A` read as a matrix of its first `ind` dims by the rest."""
    rows = math.prod(A.shape[:ind])
    if rows != math.prod(A.shape[ind:]):
        raise ShapeError(
            "linalg.tensorinv: Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), "
            f"got {list(A.shape)}"
        )
    return inv(A.reshape(rows, -1)).reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A: Tensor, B: Tensor, dims: Optional[Sequence[int]] = None) -> Tensor:
    """`X` with `tensordot(A, X, X.ndim) = B`."""
    if dims is not None:
        rest = [d for d in range(A.ndim) if d not in [d % A.ndim for d in dims]]
        A = A.permute(*rest, *[d % A.ndim for d in dims])
    out_shape = A.shape[B.ndim :]
    return solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(*out_shape)


def _missing(name: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"linalg.{name}: candle_py does not compute singular values or eigendecompositions yet")

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"`linalg.{name}`: not available yet (needs an SVD or eigendecomposition); raises NotImplementedError."
    return f


svd = _missing("svd")
svdvals = _missing("svdvals")
eigh = _missing("eigh")
eigvalsh = _missing("eigvalsh")
eig = _missing("eig")
eigvals = _missing("eigvals")
pinv = _missing("pinv")
lstsq = _missing("lstsq")
matrix_rank = _missing("matrix_rank")
cond = _missing("cond")


def _qr_square_backward(q: Tensor, r: Tensor, gq: Tensor, gr: Tensor) -> Tensor:
    """PyTorch's `linalg_qr_backward` for m >= n (Q m x n, R n x n):
    `gA = (gQ + Q syminvadj(triu(gR R^T - Q^T gQ))) R^{-T}`, where `syminvadj(X) =
    X + X^T` with the diagonal counted once."""
    m = (gr @ r.mT - q.mT @ gq).triu()
    m = m + m.mT - m.diagonal(0, -2, -1).diag_embed()
    return solve_triangular(r.mT, gq + q @ m, upper=False, left=False)


class _QR(Function):
    """`A = Q R` (Householder, LAPACK's signs); the gradient PyTorch's for "reduced" and
    for "complete" with rows <= columns."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor, complete: bool) -> Any:  # type: ignore[override]
        q, r = _core._linalg_qr(a.detach().contiguous(), complete)
        ctx.save_for_backward(q, r)
        ctx.shape = tuple(a.shape)  # type: ignore[attr-defined]
        return q, r

    @staticmethod
    def backward(ctx: FunctionCtx, gq: Optional[Tensor], gr: Optional[Tensor]) -> Any:  # type: ignore[override]
        q, r = ctx.saved_tensors
        m, n = ctx.shape[-2], ctx.shape[-1]  # type: ignore[attr-defined]
        gq = _core.zeros_like(q) if gq is None else gq
        gr = _core.zeros_like(r) if gr is None else gr
        if m >= n:
            if q.shape[-1] != n:
                raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
            return _qr_square_backward(q, r, gq, gr), None
        # Wide: A = Q [X | Y] with X square; Y = Q^T A_Y carries Q's gradient too.
        x, y = r[..., :m], r[..., m:]
        gx, gy = gr[..., :m], gr[..., m:]
        a_y = q @ y
        ga_x = _qr_square_backward(q, x, gq + a_y @ gy.mT, gx)
        return _core.cat([ga_x, q @ gy], -1), None


class _QROnlyR(Function):
    """R of `mode="r"`: no Q, so no gradient (PyTorch raises at the backward, as here)."""

    @staticmethod
    def forward(ctx: FunctionCtx, a: Tensor) -> Tensor:  # type: ignore[override]
        return _core._linalg_qr(a.detach().contiguous(), False)[1]

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Any:  # type: ignore[override]
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
        )


def qr(A: Tensor, mode: str = "reduced") -> Any:
    """`(Q, R)` with `A = Q R`, Q's columns orthonormal and R upper triangular (batches
    over the leading dims). `mode`: "reduced" (Q m x k, R k x n, k = min(m, n)),
    "complete" (Q m x m, R m x n) or "r" (R only; Q is an empty tensor). Computed by
    Householder reflections in float64 with LAPACK's sign conventions, as PyTorch's."""
    a = _float(A, "linalg.qr")
    if a.ndim < 2:
        raise ShapeError(f"linalg.qr: The input tensor A must have at least 2 dimensions. Got {a.ndim} dimensions.")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'")
    if mode == "r":
        return qr_result(_core.empty(0, dtype=a.dtype), _QROnlyR.apply(a))
    q, r = _QR.apply(a, mode == "complete")
    return qr_result(q, r)


matrix_exp = _missing("matrix_exp")


# -- the top-level functions and Tensor methods PyTorch has ---------------------------------


def logdet(input: Tensor) -> Tensor:
    """`log(det(A))`: NaN for a negative determinant, -inf for a singular matrix."""
    sign, logabs = slogdet(input)
    return _core.where(sign < 0, math.nan, _core.where(sign == 0, -math.inf, logabs))


class _CholeskySolve(Function):
    """`X = A^{-1} B` with `A = L L^T` (`U^T U` if `upper`) from the factor's triangle;
    PyTorch's gradient for the factor is a full matrix (not masked to the triangle)."""

    @staticmethod
    def forward(ctx: FunctionCtx, b: Tensor, factor: Tensor, upper: bool) -> Tensor:  # type: ignore[override]
        low = factor.mT if upper else factor
        x = _tri_plain(low.mT, _tri_plain(low, b, False, False), True, False)
        ctx.save_for_backward(factor, x)
        ctx.upper = upper  # type: ignore[attr-defined]
        return x

    @staticmethod
    def backward(ctx: FunctionCtx, g: Tensor) -> Tuple[Tensor, Optional[Tensor], None]:  # type: ignore[override]
        factor, x = ctx.saved_tensors
        upper = ctx.upper  # type: ignore[attr-defined]
        gb = _CholeskySolve.apply(g, factor, upper)
        gf = None
        if ctx.needs_input_grad[1]:
            common = -(gb @ x.mT)
            common = common + common.mT
            gf = factor @ common if upper else common @ factor
        return gb, gf, None


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """`X` with `A X = B` where `A = L L^T` (`U^T U` if `upper`) from its factor."""
    b = _float(B, "cholesky_solve", "input")
    f = _square(L, "cholesky_solve", "input2")
    if b.ndim < 2:
        raise ShapeError(f"cholesky_solve: b should have at least 2 dimensions, but has {b.ndim} dimensions instead")
    n = f.shape[-1]
    if b.shape[-2] != n:
        raise ShapeError(
            f"cholesky_solve: Incompatible matrix sizes for cholesky_solve: each A matrix is {n} by {n} but each b matrix is "
            f"{b.shape[-2]} by {b.shape[-1]}"
        )
    batch = broadcast_shapes(tuple(b.shape[:-2]), tuple(f.shape[:-2]))
    return _CholeskySolve.apply(b.expand(*batch, *b.shape[-2:]), f.expand(*batch, n, n), upper)  # type: ignore[no-any-return]


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of `A = L L^T` (`U^T U` if `upper`) from its factor."""
    return cholesky_solve(_eye_like(_square(L, "cholesky_inverse", "input")), L, upper)


def _tensor_det(self: Tensor) -> Tensor:
    """The determinant of this matrix (batch)."""
    return det(self)


def _tensor_logdet(self: Tensor) -> Tensor:
    """`log(det(self))`."""
    return logdet(self)


def _tensor_slogdet(self: Tensor) -> Any:
    """`(sign, logabsdet)` of this matrix (batch)."""
    return slogdet(self)


def _tensor_inverse(self: Tensor) -> Tensor:
    """The inverse of this matrix (batch)."""
    return inv(self)


def _tensor_cholesky_solve(self: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """`cholesky_solve(self, input2, upper)`: solve with the Cholesky factor `input2`."""
    return cholesky_solve(self, input2, upper)


def _tensor_cholesky_inverse(self: Tensor, upper: bool = False) -> Tensor:
    """The inverse of the matrix whose Cholesky factor this is."""
    return cholesky_inverse(self, upper)


def _tensor_matrix_power(self: Tensor, n: int) -> Tensor:
    """This matrix to the power `n`."""
    return matrix_power(self, n)


for _name, _fn in (
    ("det", _tensor_det),
    ("logdet", _tensor_logdet),
    ("slogdet", _tensor_slogdet),
    ("inverse", _tensor_inverse),
    ("cholesky_solve", _tensor_cholesky_solve),
    ("cholesky_inverse", _tensor_cholesky_inverse),
    ("matrix_power", _tensor_matrix_power),
):
    assert not hasattr(Tensor, _name), _name
    setattr(Tensor, _name, _fn)
