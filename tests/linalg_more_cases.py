"""Cases of `candle_py.linalg` (python/candle_py/linalg.py over src/ops/linalg.rs): norms,
determinants, inverses, linear solves, Cholesky, triangular solves, LU, matrix powers and
the products, written once against the PyTorch API (`lib` is `torch` or `candle_py`):
`tools/make_fixtures_linalg_more.py` runs them on torch into tests/fixtures/linalg_more/,
`tests/test_linalg_more.py` on candle_py and compares.

Most families run twice, in float32 (`<name>_f32`, tolerance 1e-4) and float64
(`<name>_f64`, 1e-9). Inputs are seeded NumPy arrays made well-conditioned here
(`A + shift I`, SPD as `B B^T + n I`), so both libraries see the same numbers; gradients
are those of a weighted sum `(out * W).sum()` with NumPy-made weights of the output's own
dtype (`_loss`), returned as the leaves' `.grad`. Bad inputs give their exception kind
(`_err`): where PyTorch raises `torch.linalg.LinAlgError` (a RuntimeError), candle_py's
`LinAlgError` is a ValueError too.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Sequence

import numpy as np

from fixture_cases import Cases
from usage_cases import _err, _np, _try

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF = math.inf
TOL32, TOL64 = 1e-4, 1e-9

Out = Dict[str, Any]


# -- inputs ------------------------------------------------------------------------------


def _t(lib: Any, a: Any, dt: str = "float32", grad: bool = False) -> Any:
    """`a` (NumPy or nested lists) as a `dt` tensor, a leaf requiring grad if `grad`."""
    t = lib.tensor(np.ascontiguousarray(np.asarray(a, dtype=np.float64).astype(dt)))
    if grad:
        t.requires_grad_(True)
    return t


def _mat(lib: Any, *shape: int, seed: str, dt: str = "float32", shift: float = 4.0, grad: bool = False) -> Any:
    """Seeded (..., n, n) matrices plus `shift * I` (well-conditioned for shift 4)."""
    a = _np(*shape, seed=seed).astype(np.float64) + shift * np.eye(shape[-1])
    return _t(lib, a, dt, grad)


def _spd_np(*shape: int, seed: str) -> np.ndarray:
    """Seeded symmetric positive-definite (..., n, n): `B B^T + n I`, exactly symmetric."""
    b = _np(*shape, seed=seed).astype(np.float64)
    n = shape[-1]
    s = b @ np.swapaxes(b, -1, -2) + n * np.eye(n)
    return (s + np.swapaxes(s, -1, -2)) / 2


def _lower_np(*shape: int, seed: str) -> np.ndarray:
    """Seeded lower-triangular (..., n, n) with a diagonal in [1, 2): a Cholesky-like factor."""
    a = np.tril(_np(*shape, seed=seed).astype(np.float64) * 0.5)
    d = np.abs(_np(*shape[:-1], seed=seed + "d").astype(np.float64)) % 1.0 + 1.0
    idx = np.arange(shape[-1])
    a[..., idx, idx] = d
    return a


def _loss(lib: Any, *ys: Any) -> None:
    """Backward of `sum((y * W_y).sum())`, W_y fixed NumPy weights of y's shape and dtype."""
    total = None
    for y in ys:
        dt = str(y.dtype).rsplit(".", 1)[-1]
        w = np.cos(np.arange(y.numel(), dtype=np.float64) * 0.37 + 0.1).reshape(tuple(y.shape)).astype(dt)
        term = (y * lib.tensor(w)).sum()
        total = term if total is None else total + term
    assert total is not None
    total.backward()


def _i(lib: Any, *shape: int) -> Any:
    return lib.tensor(_np(*shape, seed="int", kind="int"))


def _both(name: str, tol32: float = TOL32, tol64: float = TOL64) -> Callable[[Callable[[Any, str], Out]], Callable[[Any, str], Out]]:
    """Register `fn(lib, dt)` as the cases `<name>_f32` and `<name>_f64`."""

    def reg(fn: Callable[[Any, str], Out]) -> Callable[[Any, str], Out]:
        for dt, tol in (("float32", tol32), ("float64", tol64)):

            def c(lib: Any, fn: Callable[[Any, str], Out] = fn, dt: str = dt) -> Out:
                return fn(lib, dt)

            c.__name__ = f"{name}_f{dt[-2:]}"
            case(tol)(c)
        return fn

    return reg


# exactly singular (partial pivoting leaves an exact zero row), permutation matrices
SINGULAR = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]
PERMS = [
    [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
    [[0, 1, 0], [1, 0, 0], [0, 0, 1]],
    [[0, 1, 0], [0, 0, 1], [1, 0, 0]],
    [[0, 0, 1], [0, 1, 0], [1, 0, 0]],
]
NOT_PD = [[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]  # leading minor of order 2 is -3


# -- norms -------------------------------------------------------------------------------

VORDS: Sequence[float] = (2, 1, INF, -INF, 0, 3.5, -1)


@_both("vector_norm")
def _vector_norm(lib: Any, dt: str) -> Out:
    xs = _np(3, 4, seed="vn")
    out: Out = {}
    for i, o in enumerate(VORDS):
        x = _t(lib, xs, dt, grad=True)
        y = lib.linalg.vector_norm(x, ord=o, dim=-1)
        _loss(lib, y)
        out[f"y{i}"] = y
        if o == 0:  # PyTorch: differentiable output, but the leaf's grad stays None (a zero gradient)
            out["ord0_requires_grad"] = y.requires_grad
            out["ord0_grad_none_or_zero"] = x.grad is None or not bool(x.grad.any())
        else:
            out[f"g{i}"] = x.grad
        xd = x.detach()
        out[f"all{i}"] = lib.linalg.vector_norm(xd, ord=o)
        out[f"keep{i}"] = lib.linalg.vector_norm(xd, o, (0, 1), True)
        out[f"dim0_{i}"] = lib.linalg.vector_norm(xd, ord=o, dim=0)
    x3 = _t(lib, _np(2, 3, 4, seed="vn3"), dt, grad=True)
    y = lib.linalg.vector_norm(x3, dim=(0, 2), keepdim=True)
    _loss(lib, y)
    out["tuple_dim"], out["g_tuple_dim"] = y, x3.grad
    out["default"] = lib.linalg.vector_norm(x3.detach())
    out["zero_d"] = lib.linalg.vector_norm(_t(lib, -2.5, dt))
    out["empty"] = lib.linalg.vector_norm(lib.zeros(0, 3, dtype=getattr(lib, dt)))
    out["empty_dim"] = lib.linalg.vector_norm(lib.zeros(2, 0, dtype=getattr(lib, dt)), dim=-1)
    out["empty_rows"] = lib.linalg.vector_norm(lib.zeros(0, 3, dtype=getattr(lib, dt)), ord=INF, dim=-1)
    return out


@case(TOL32)
def vector_norm_edges(lib: Any) -> Out:
    out: Out = {}
    # the gradient at the zero vector is 0 for every ord (PyTorch masks the division)
    for i, o in enumerate((2, 1, INF, 3.5)):
        z = lib.zeros(3, requires_grad=True)
        y = lib.linalg.vector_norm(z, ord=o)
        y.backward()
        out[f"zero{i}"], out[f"gzero{i}"] = y, z.grad
    # ties of the inf norm share the gradient
    t = _t(lib, [3.0, -3.0, 1.0, 3.0], grad=True)
    lib.linalg.vector_norm(t, ord=INF).backward()
    out["g_tie_inf"] = t.grad
    t = _t(lib, [0.5, -0.5, 1.0, 2.0], grad=True)
    lib.linalg.vector_norm(t, ord=-INF).backward()
    out["g_tie_ninf"] = t.grad
    # a zero entry: the -1 and -inf norms are 0, and so is their gradient
    for name, o in (("neg1", -1), ("ninf", -INF)):
        z = _t(lib, [1.0, 0.0, 2.0], grad=True)
        lib.linalg.vector_norm(z, ord=o).backward()
        out[f"g_{name}_zero_entry"] = z.grad
    # ties of the matrix 1-norm's column sums share the gradient as well
    m = _t(lib, [[3.0, -1.0, 1.0], [-1.0, 3.0, 0.5]], grad=True)
    lib.linalg.matrix_norm(m, ord=1).backward()
    out["g_matrix_norm_tie"] = m.grad
    z = _t(lib, [[1.0, 0.0, 2.0], [1.0, 2.0, 4.0]])
    out["neg1_zero"] = lib.linalg.vector_norm(z, ord=-1, dim=-1)
    out["ninf_zero"] = lib.linalg.vector_norm(z, ord=-INF, dim=-1)
    out["zero_ord_count"] = lib.linalg.vector_norm(z, ord=0, dim=-1)
    # dtype=: computed and returned in that dtype
    x = _t(lib, _np(5, seed="vnd"))
    out["dtype64"] = lib.linalg.vector_norm(x, dtype=lib.float64)
    out["nan"] = lib.linalg.vector_norm(_t(lib, [1.0, math.nan, 2.0]))
    out["inf"] = lib.linalg.vector_norm(_t(lib, [1.0, -INF, 2.0]), ord=1)
    out["err_int"] = _err(lambda: lib.linalg.vector_norm(_i(lib, 4)))
    out["err_empty_inf"] = _err(lambda: lib.linalg.vector_norm(lib.zeros(0), ord=INF))
    out["err_empty_inf_dim"] = _err(lambda: lib.linalg.vector_norm(lib.zeros(2, 0), ord=INF, dim=-1))
    out["err_dim"] = _err(lambda: lib.linalg.vector_norm(lib.ones(2, 3), dim=2))
    return out


MORDS: Sequence[Any] = ("fro", 1, -1, INF, -INF)


@_both("matrix_norm")
def _matrix_norm(lib: Any, dt: str) -> Out:
    an = _np(2, 3, 4, seed="mn")
    out: Out = {}
    for i, o in enumerate(MORDS):
        a = _t(lib, an, dt, grad=True)
        y = lib.linalg.matrix_norm(a, ord=o)
        _loss(lib, y)
        out[f"y{i}"], out[f"g{i}"] = y, a.grad
        ad = a.detach()
        out[f"keep{i}"] = lib.linalg.matrix_norm(ad, o, keepdim=True)
        out[f"swap{i}"] = lib.linalg.matrix_norm(ad, ord=o, dim=(-1, -2))
        out[f"dim02_{i}"] = lib.linalg.matrix_norm(ad, ord=o, dim=(0, 2))
        out[f"empty{i}"] = lib.linalg.matrix_norm(lib.zeros(0, 3, 3, dtype=getattr(lib, dt)), ord=o)
    out["default"] = lib.linalg.matrix_norm(_t(lib, an[0], dt))
    out["fro_empty_mat"] = lib.linalg.matrix_norm(lib.zeros(2, 0, 0, dtype=getattr(lib, dt)))
    return out


@_both("norm")
def _norm(lib: Any, dt: str) -> Out:
    v = _t(lib, _np(5, seed="nv"), dt, grad=True)
    m = _t(lib, _np(3, 4, seed="nm"), dt, grad=True)
    t3 = _t(lib, _np(2, 3, 4, seed="n3"), dt, grad=True)
    yv, ym, y3 = lib.linalg.norm(v), lib.linalg.norm(m), lib.linalg.norm(t3)
    _loss(lib, yv, ym, y3)
    out: Out = {"vec": yv, "fro": ym, "flat3": y3, "gv": v.grad, "gm": m.grad, "g3": t3.grad}
    md, t3d, vd = m.detach(), t3.detach(), v.detach()
    out["vec_ord1"] = lib.linalg.norm(vd, 1)
    out["vec_ord_inf"] = lib.linalg.norm(vd, ord=INF)
    out["vec_ord35"] = lib.linalg.norm(vd, ord=3.5)
    out["mat_ord1"] = lib.linalg.norm(md, ord=1)
    out["mat_ord_inf"] = lib.linalg.norm(md, ord=-INF)
    out["mat_fro"] = lib.linalg.norm(md, ord="fro")
    out["dim_int"] = lib.linalg.norm(t3d, dim=1)
    out["dim_int_ord"] = lib.linalg.norm(t3d, ord=3.5, dim=-1, keepdim=True)
    out["dim_tuple"] = lib.linalg.norm(t3d, dim=(1, 2))
    out["dim_tuple_ord1"] = lib.linalg.norm(t3d, ord=1, dim=(0, 2))
    out["dim_tuple_keep"] = lib.linalg.norm(t3d, ord=INF, dim=(-2, -1), keepdim=True)
    out["empty"] = lib.linalg.norm(lib.zeros(0, 3, dtype=getattr(lib, dt)))
    return out


# -- determinants ------------------------------------------------------------------------


@_both("det")
def _det(lib: Any, dt: str) -> Out:
    a = _mat(lib, 2, 3, 4, 4, seed="det", dt=dt, grad=True)
    bn = _np(3, 3, seed="detneg").astype(np.float64) + 3 * np.eye(3)
    neg = _t(lib, bn[[1, 0, 2]], dt, grad=True)  # rows swapped: a negative determinant
    one = _t(lib, [[[2.5]], [[-0.5]], [[1.5]]], dt, grad=True)
    ya, yn, y1 = lib.linalg.det(a), lib.linalg.det(neg), lib.linalg.det(one)
    _loss(lib, ya, yn, y1)
    out: Out = {"y": ya, "g": a.grad, "neg": yn, "g_neg": neg.grad, "one": y1, "g_one": one.grad}
    ad = a.detach()
    out["top"] = lib.det(ad)
    out["method"] = ad.det()
    out["pos"] = lib.linalg.det(_t(lib, bn, dt))
    out["perms"] = lib.linalg.det(_t(lib, PERMS, dt))
    out["singular"] = lib.linalg.det(_t(lib, SINGULAR, dt))
    out["zeros"] = lib.linalg.det(lib.zeros(3, 3, dtype=getattr(lib, dt)))
    out["empty_batch"] = lib.linalg.det(lib.zeros(0, 3, 3, dtype=getattr(lib, dt)))
    out["empty_mat"] = lib.linalg.det(lib.zeros(2, 0, 0, dtype=getattr(lib, dt)))
    out["m2d"] = lib.linalg.det(_t(lib, [[1.0, 2.0], [3.0, 4.0]], dt))
    return out


@_both("slogdet")
def _slogdet(lib: Any, dt: str) -> Out:
    a = _mat(lib, 2, 3, 4, 4, seed="sld", dt=dt, grad=True)
    bn = _np(3, 3, seed="sldneg").astype(np.float64) + 3 * np.eye(3)
    neg = _t(lib, bn[[2, 1, 0]], dt, grad=True)
    r = lib.linalg.slogdet(a)
    rn = lib.linalg.slogdet(neg)
    _loss(lib, r.logabsdet, rn.logabsdet)
    out: Out = {"sign": r.sign, "logabsdet": r.logabsdet, "g": a.grad}
    out.update({"neg_sign": rn.sign, "neg_logabsdet": rn.logabsdet, "g_neg": neg.grad})
    ad = a.detach()
    s, la = r
    out["unpacked_equal"] = bool(lib.equal(s, r.sign)) and bool(lib.equal(la, r.logabsdet))
    t = lib.slogdet(ad)
    out["top_sign"], out["top_logabsdet"] = t.sign, t.logabsdet
    m = ad.slogdet()
    out["method_sign"], out["method_logabsdet"] = m.sign, m.logabsdet
    # logdet: log det, nan for a negative determinant, -inf for a singular matrix
    spd = _t(lib, _spd_np(2, 3, 3, seed="ld"), dt, grad=True)
    yl = lib.logdet(spd)
    _loss(lib, yl)
    out["logdet"], out["g_logdet"] = yl, spd.grad
    out["logdet_method"] = spd.detach().logdet()
    out["logdet_neg"] = lib.logdet(neg.detach())
    out["logdet_batch"] = lib.logdet(ad)
    sing = lib.linalg.slogdet(_t(lib, SINGULAR, dt))
    out["sing_sign"], out["sing_logabsdet"] = sing.sign, sing.logabsdet
    out["sing_logdet"] = lib.logdet(_t(lib, SINGULAR, dt))
    perm = lib.linalg.slogdet(_t(lib, PERMS, dt))
    out["perm_sign"], out["perm_logabsdet"] = perm.sign, perm.logabsdet
    e = lib.linalg.slogdet(lib.zeros(2, 0, 0, dtype=getattr(lib, dt)))
    out["empty_mat_sign"], out["empty_mat_logabsdet"] = e.sign, e.logabsdet
    e = lib.linalg.slogdet(lib.zeros(0, 3, 3, dtype=getattr(lib, dt)))
    out["empty_batch_sign"], out["empty_batch_logabsdet"] = e.sign, e.logabsdet
    out["one"] = list(lib.linalg.slogdet(_t(lib, [[-0.25]], dt)))
    return out


# -- inverses ----------------------------------------------------------------------------


@_both("inv")
def _inv(lib: Any, dt: str) -> Out:
    an = _np(2, 3, 4, 4, seed="inv").astype(np.float64) + 4 * np.eye(4)
    a = _t(lib, an, dt, grad=True)
    y = lib.linalg.inv(a)
    _loss(lib, y)
    out: Out = {"y": y, "g": a.grad}
    a2 = _t(lib, an[1, 2], dt, grad=True)
    r = lib.linalg.inv_ex(a2)
    _loss(lib, r.inverse)
    out.update({"ex_inverse": r.inverse, "ex_info": r.info, "g_ex": a2.grad})
    out["ex_batch_info"] = lib.linalg.inv_ex(a.detach()).info
    one = _t(lib, [[[2.0]], [[-0.5]]], dt, grad=True)
    y1 = lib.linalg.inv(one)
    _loss(lib, y1)
    out["one"], out["g_one"] = y1, one.grad
    ad = a.detach()
    out["top"] = lib.inverse(ad)
    out["method"] = ad.inverse()
    out["perms"] = lib.linalg.inv(_t(lib, PERMS, dt))
    out["empty_batch"] = lib.linalg.inv(lib.zeros(0, 3, 3, dtype=getattr(lib, dt)))
    out["empty_mat"] = lib.linalg.inv(lib.zeros(2, 0, 0, dtype=getattr(lib, dt)))
    # inv_ex does not raise: info is LAPACK's (1-based index of U's first zero diagonal element)
    sb = np.stack([np.eye(3) * 2, np.asarray(SINGULAR)])
    out["ex_singular_info"] = lib.linalg.inv_ex(_t(lib, sb, dt)).info
    out["ex_zeros_info"] = lib.linalg.inv_ex(lib.zeros(3, 3, dtype=getattr(lib, dt))).info
    return out


# -- solves ------------------------------------------------------------------------------


@_both("solve")
def _solve(lib: Any, dt: str) -> Out:
    out: Out = {}
    # matrix RHS with broadcast batch dims: A (2, 1, 3, 3), B (4, 3, 2) -> (2, 4, 3, 2)
    a = _mat(lib, 2, 1, 3, 3, seed="sa", dt=dt, grad=True)
    b = _t(lib, _np(4, 3, 2, seed="sb"), dt, grad=True)
    x = lib.linalg.solve(a, b)
    _loss(lib, x)
    out.update({"x": x, "gA": a.grad, "gB": b.grad})
    # vector RHS: b (n,), and b of A's batch shape (..., n)
    a1 = _mat(lib, 3, 3, seed="sv", dt=dt, grad=True)
    v = _t(lib, _np(3, seed="svb"), dt, grad=True)
    xv = lib.linalg.solve(a1, v)
    _loss(lib, xv)
    out.update({"vec": xv, "gA_vec": a1.grad, "gb_vec": v.grad})
    ab = _mat(lib, 2, 3, 3, seed="svbatch", dt=dt, grad=True)
    vb = _t(lib, _np(2, 3, seed="svbb"), dt, grad=True)
    xb = lib.linalg.solve(ab, vb)
    _loss(lib, xb)
    out.update({"vec_batch": xb, "gA_vec_batch": ab.grad, "gb_vec_batch": vb.grad})
    out["vec_broadcast"] = lib.linalg.solve(ab.detach(), v.detach())
    out["mat_2x2rhs"] = lib.linalg.solve(ab.detach(), _t(lib, _np(2, 3, 2, seed="m22"), dt))
    # left=False: X A = B, B (..., k, n)
    al = _mat(lib, 3, 3, seed="sl", dt=dt, grad=True)
    bl = _t(lib, _np(2, 2, 3, seed="slb"), dt, grad=True)
    xl = lib.linalg.solve(al, bl, left=False)
    _loss(lib, xl)
    out.update({"right": xl, "gA_right": al.grad, "gB_right": bl.grad})
    r = lib.linalg.solve_ex(a.detach(), b.detach())
    out["ex_result"], out["ex_info"] = r.result, r.info
    sb = np.stack([np.eye(3) * 2, np.asarray(SINGULAR)])
    out["ex_singular_info"] = lib.linalg.solve_ex(_t(lib, sb, dt), _t(lib, np.ones((2, 3, 1)), dt)).info
    z = getattr(lib, dt)
    out["empty_batch"] = lib.linalg.solve(lib.zeros(0, 3, 3, dtype=z), lib.zeros(0, 3, 2, dtype=z))
    out["empty_mat"] = lib.linalg.solve(lib.zeros(2, 0, 0, dtype=z), lib.zeros(2, 0, 1, dtype=z))
    out["empty_rhs"] = lib.linalg.solve(a1.detach(), lib.zeros(3, 0, dtype=z))
    out["one"] = lib.linalg.solve(_t(lib, [[4.0]], dt), _t(lib, [[2.0, -1.0]], dt))
    return out


@_both("cholesky")
def _cholesky(lib: Any, dt: str) -> Out:
    sn = _spd_np(2, 3, 4, 4, seed="chol")
    s = _t(lib, sn, dt, grad=True)
    low = lib.linalg.cholesky(s)
    _loss(lib, low)
    out: Out = {"L": low, "g": s.grad}
    su = _t(lib, sn[0, 1], dt, grad=True)
    up = lib.linalg.cholesky(su, upper=True)
    _loss(lib, up)
    out.update({"U": up, "g_upper": su.grad})
    r = lib.linalg.cholesky_ex(s.detach())
    out["ex_L"], out["ex_info"] = r.L, r.info
    out["ex_upper_L"] = lib.linalg.cholesky_ex(s.detach(), upper=True).L
    nb = np.stack([np.eye(3), np.asarray(NOT_PD), -np.eye(3)])
    out["ex_not_pd_info"] = lib.linalg.cholesky_ex(_t(lib, nb, dt)).info
    # only the lower triangle is read (upper=False)
    junk = np.tril(sn[1, 0]) + np.triu(np.full((4, 4), 7.0), 1)
    out["lower_only"] = lib.linalg.cholesky(_t(lib, junk, dt))
    out["one"] = lib.linalg.cholesky(_t(lib, [[[4.0]], [[0.25]]], dt))
    z = getattr(lib, dt)
    out["empty_batch"] = lib.linalg.cholesky(lib.zeros(0, 3, 3, dtype=z))
    out["empty_mat"] = lib.linalg.cholesky(lib.zeros(2, 0, 0, dtype=z))
    return out


@_both("cholesky_solve")
def _cholesky_solve(lib: Any, dt: str) -> Out:
    ln = _lower_np(2, 3, 3, seed="cs")
    low = _t(lib, ln, dt, grad=True)
    b = _t(lib, _np(2, 3, 2, seed="csb"), dt, grad=True)
    x = lib.cholesky_solve(b, low)
    _loss(lib, x)
    out: Out = {"x": x, "gB": b.grad, "gL": low.grad}
    up = _t(lib, np.swapaxes(ln, -1, -2), dt, grad=True)
    b2 = _t(lib, _np(2, 3, 2, seed="csb"), dt, grad=True)
    xu = lib.cholesky_solve(b2, up, upper=True)
    _loss(lib, xu)
    out.update({"x_upper": xu, "gB_upper": b2.grad, "gU": up.grad})
    out["method"] = b.detach().cholesky_solve(low.detach())
    out["broadcast"] = lib.cholesky_solve(_t(lib, _np(4, 1, 3, 2, seed="csbb"), dt), low.detach())
    # cholesky_inverse: (L L^T)^{-1}
    li = _t(lib, ln, dt, grad=True)
    yi = lib.cholesky_inverse(li)
    _loss(lib, yi)
    out.update({"inv": yi, "g_inv": li.grad})
    ui = _t(lib, np.swapaxes(ln[1], -1, -2), dt, grad=True)
    yu = lib.cholesky_inverse(ui, upper=True)
    _loss(lib, yu)
    out.update({"inv_upper": yu, "g_inv_upper": ui.grad})
    out["inv_method"] = low.detach().cholesky_inverse()
    z = getattr(lib, dt)
    out["inv_empty"] = lib.cholesky_inverse(lib.zeros(0, 0, dtype=z))
    out["solve_empty"] = lib.cholesky_solve(lib.zeros(0, 3, 2, dtype=z), lib.zeros(0, 3, 3, dtype=z))
    return out


@_both("solve_triangular")
def _solve_triangular(lib: Any, dt: str) -> Out:
    an = _np(3, 4, 4, seed="st").astype(np.float64) + 4 * np.eye(4)  # both triangles non-zero: one is ignored
    bn = _np(3, 4, 2, seed="stb")
    out: Out = {}
    for name, kw in (
        ("upper", {"upper": True}),
        ("lower", {"upper": False}),
        ("unit_upper", {"upper": True, "unitriangular": True}),
        ("unit_lower", {"upper": False, "unitriangular": True}),
    ):
        a, b = _t(lib, an, dt, grad=True), _t(lib, bn, dt, grad=True)
        x = lib.linalg.solve_triangular(a, b, **kw)
        _loss(lib, x)
        out.update({name: x, f"gA_{name}": a.grad, f"gB_{name}": b.grad})
    a, b = _t(lib, an, dt, grad=True), _t(lib, np.swapaxes(bn, -1, -2), dt, grad=True)
    x = lib.linalg.solve_triangular(a, b, upper=False, left=False)
    _loss(lib, x)
    out.update({"right_lower": x, "gA_right": a.grad, "gB_right": b.grad})
    out["right_upper_unit"] = lib.linalg.solve_triangular(a.detach(), b.detach(), upper=True, left=False, unitriangular=True)
    # broadcast: A (4, 4) with B (2, 4, 3)
    a1 = _t(lib, an[0], dt, grad=True)
    b1 = _t(lib, _np(2, 4, 3, seed="stbb"), dt)
    x = lib.linalg.solve_triangular(a1, b1, upper=True)
    _loss(lib, x)
    out.update({"broadcast": x, "gA_broadcast": a1.grad})
    z = getattr(lib, dt)
    out["empty"] = lib.linalg.solve_triangular(lib.zeros(0, 3, 3, dtype=z), lib.zeros(0, 3, 1, dtype=z), upper=True)
    out["one"] = lib.linalg.solve_triangular(_t(lib, [[2.0]], dt), _t(lib, [[1.0, -3.0]], dt), upper=False)
    return out


# -- QR ----------------------------------------------------------------------------------


@_both("qr")
def _qr(lib: Any, dt: str) -> Out:
    """Householder QR with LAPACK's signs: tall, square, wide and batched inputs in each
    mode, gradients of Q and R together (the wide case routes Q's gradient through R's
    extra columns), R alone's refusal, and the empty shapes."""
    out: Out = {}
    for name, shape in (("tall", (5, 3)), ("square", (4, 4)), ("wide", (3, 5)), ("batch", (2, 3, 4, 3))):
        an = _np(*shape, seed=f"qr_{name}")
        for mode in ("reduced", "complete", "r"):
            q, r = lib.linalg.qr(_t(lib, an, dt), mode=mode)
            out[f"{name}_{mode}_Q"], out[f"{name}_{mode}_R"] = q, r
        for mode in ("reduced", "complete"):
            if mode == "complete" and shape[-2] > shape[-1]:
                a = _t(lib, an, dt, grad=True)
                q, r = lib.linalg.qr(a, mode=mode)
                out[f"{name}_complete_backward"] = _err(lambda q=q: _loss(lib, q))
                continue
            a = _t(lib, an, dt, grad=True)
            q, r = lib.linalg.qr(a, mode=mode)
            _loss(lib, q, r)
            out[f"{name}_{mode}_grad"] = a.grad
        a = _t(lib, an, dt, grad=True)
        out[f"{name}_r_backward"] = _err(lambda a=a: _loss(lib, lib.linalg.qr(a, mode="r").R))
    z = getattr(lib, dt)
    for shape in ((0, 3), (3, 0), (2, 0, 0)):
        for mode in ("reduced", "complete"):
            q, r = lib.linalg.qr(lib.zeros(*shape, dtype=z), mode=mode)
            out[f"empty_{shape}_{mode}"] = [q, r]
    out["vector"] = _err(lambda: lib.linalg.qr(_t(lib, [1.0, 2.0], dt)))
    out["mode"] = _err(lambda: lib.linalg.qr(_t(lib, np.eye(2), dt), mode="full"))
    return out


# -- LU ----------------------------------------------------------------------------------


@_both("lu")
def _lu(lib: Any, dt: str) -> Out:
    # no shift: pivoting happens (row swaps in most matrices of the batch)
    an = _np(2, 3, 4, 4, seed="lu")
    a = _t(lib, an, dt)
    r = lib.linalg.lu_factor(a)
    out: Out = {"LU": r.LU, "pivots": r.pivots}
    lu, piv = r
    out["unpacked_equal"] = bool(lib.equal(lu, r.LU)) and bool(lib.equal(piv, r.pivots))
    p = lib.linalg.lu(a)
    out.update({"P": p.P, "L": p.L, "U": p.U})
    out["PLU"] = p.P @ p.L @ p.U
    b = _t(lib, _np(2, 3, 4, 2, seed="lub"), dt)
    out["solve"] = lib.linalg.lu_solve(r.LU, r.pivots, b)
    # a permutation needs every row swapped
    perm = _t(lib, PERMS, dt)
    rp = lib.linalg.lu_factor(perm)
    out["perm_LU"], out["perm_pivots"] = rp.LU, rp.pivots
    out["perm_P"] = lib.linalg.lu(perm).P
    # lu of a singular matrix factors (U has a zero on its diagonal); lu_factor raises
    rs = lib.linalg.lu(_t(lib, SINGULAR, dt))
    out["sing_P"], out["sing_L"], out["sing_U"] = rs.P, rs.L, rs.U
    out["one"] = list(lib.linalg.lu_factor(_t(lib, [[[3.0]], [[-2.0]]], dt)))
    out["one_lu"] = list(lib.linalg.lu(_t(lib, [[-2.0]], dt)))
    z = getattr(lib, dt)
    out["empty_batch"] = list(lib.linalg.lu_factor(lib.zeros(0, 3, 3, dtype=z)))
    out["empty_mat"] = list(lib.linalg.lu_factor(lib.zeros(2, 0, 0, dtype=z)))
    out["empty_lu"] = list(lib.linalg.lu(lib.zeros(0, 3, 3, dtype=z)))
    out["empty_solve"] = lib.linalg.lu_solve(lib.zeros(0, 3, 3, dtype=z), lib.zeros(0, 3, dtype=lib.int32), lib.zeros(0, 3, 2, dtype=z))
    return out


# -- matrix powers and products -----------------------------------------------------------


@_both("matrix_power")
def _matrix_power(lib: Any, dt: str) -> Out:
    an = _np(2, 3, 3, seed="mp").astype(np.float64) * 0.5 + 2 * np.eye(3)
    a = _t(lib, an, dt)
    out: Out = {f"p{n}": lib.linalg.matrix_power(a, n) for n in (0, 1, 2, 3, -1, -2)}
    for n, tag in ((3, "3"), (-2, "m2"), (1, "1")):
        x = _t(lib, an, dt, grad=True)
        y = lib.linalg.matrix_power(x, n)
        _loss(lib, y)
        out[f"g{tag}"] = x.grad
    out["top"] = lib.matrix_power(a, 3)
    out["method"] = a.matrix_power(-2)
    out["one"] = lib.linalg.matrix_power(_t(lib, [[-2.0]], dt), 5)
    z = getattr(lib, dt)
    out["empty_batch"] = lib.linalg.matrix_power(lib.zeros(0, 3, 3, dtype=z), 2)
    out["empty_mat0"] = lib.linalg.matrix_power(lib.zeros(2, 0, 0, dtype=z), 0)
    out["empty_mat_neg"] = lib.linalg.matrix_power(lib.zeros(2, 0, 0, dtype=z), -1)
    out["p0_singular"] = lib.linalg.matrix_power(_t(lib, SINGULAR, dt), 0)
    return out


@_both("multi_dot")
def _multi_dot(lib: Any, dt: str) -> Out:
    a = _t(lib, _np(3, 4, seed="md_a"), dt, grad=True)
    b = _t(lib, _np(4, 5, seed="md_b"), dt, grad=True)
    c = _t(lib, _np(5, 2, seed="md_c"), dt, grad=True)
    y = lib.linalg.multi_dot([a, b, c])
    _loss(lib, y)
    out: Out = {"y": y, "gA": a.grad, "gB": b.grad, "gC": c.grad}
    v = _t(lib, _np(4, seed="md_v"), dt, grad=True)
    w = _t(lib, _np(5, seed="md_w"), dt, grad=True)
    b2 = _t(lib, _np(4, 5, seed="md_b"), dt, grad=True)
    yf = lib.linalg.multi_dot([v, b2, c.detach()])
    yl = lib.linalg.multi_dot((a.detach(), b2, w))
    ys = lib.linalg.multi_dot([v, b2, w])
    _loss(lib, yf, yl, ys)
    out.update({"first1d": yf, "last1d": yl, "both1d": ys, "gv": v.grad, "gw": w.grad, "gB2": b2.grad})
    ad, bd, cd = a.detach(), b.detach(), c.detach()
    out["two"] = lib.linalg.multi_dot([ad, bd])
    out["four"] = lib.linalg.multi_dot([ad, bd, cd, _t(lib, _np(2, 3, seed="md_d"), dt)])
    out["dots"] = lib.linalg.multi_dot([v.detach(), _t(lib, _np(4, seed="md_u"), dt)])
    z = getattr(lib, dt)
    out["empty"] = lib.linalg.multi_dot([lib.zeros(2, 0, dtype=z), lib.zeros(0, 3, dtype=z), lib.ones(3, 2, dtype=z)])
    return out


@_both("cross_vecdot")
def _cross_vecdot(lib: Any, dt: str) -> Out:
    a = _t(lib, _np(2, 1, 3, seed="cr_a"), dt, grad=True)
    b = _t(lib, _np(1, 4, 3, seed="cr_b"), dt, grad=True)
    y = lib.linalg.cross(a, b)  # broadcast within equal ndim (PyTorch rejects (2, 1, 3) x (4, 3))
    _loss(lib, y)
    out: Out = {"cross": y, "g_cross_a": a.grad, "g_cross_b": b.grad}
    a0 = _t(lib, _np(3, 4, seed="cr_a0"), dt, grad=True)
    b0 = _t(lib, _np(3, 4, seed="cr_b0"), dt, grad=True)
    y0 = lib.linalg.cross(a0, b0, dim=0)
    _loss(lib, y0)
    out.update({"cross_dim0": y0, "g_cross0_a": a0.grad, "g_cross0_b": b0.grad})
    out["cross_basis"] = lib.linalg.cross(_t(lib, np.eye(3), dt), _t(lib, np.roll(np.eye(3), 1, axis=0), dt))
    x = _t(lib, _np(3, 4, seed="vd_x"), dt, grad=True)
    v = _t(lib, _np(4, seed="vd_y"), dt, grad=True)
    yv = lib.linalg.vecdot(x, v)
    _loss(lib, yv)
    out.update({"vecdot": yv, "g_vecdot_x": x.grad, "g_vecdot_y": v.grad})
    out["vecdot_dim0"] = lib.linalg.vecdot(x.detach(), _t(lib, _np(3, 4, seed="vd_z"), dt), dim=0)
    out["vecdot_empty"] = lib.linalg.vecdot(lib.zeros(2, 0, dtype=getattr(lib, dt)), lib.zeros(2, 0, dtype=getattr(lib, dt)))
    return out


@_both("diagonal_matmul")
def _diagonal_matmul(lib: Any, dt: str) -> Out:
    a = _t(lib, _np(2, 3, 4, seed="dg"), dt, grad=True)
    y = lib.linalg.diagonal(a, offset=1)
    _loss(lib, y)
    out: Out = {"d1": y, "g_d1": a.grad}
    ad = a.detach()
    out["d0"] = lib.linalg.diagonal(ad)
    out["dm1"] = lib.linalg.diagonal(ad, offset=-1)
    out["d_big"] = lib.linalg.diagonal(ad, offset=5)
    out["d02"] = lib.linalg.diagonal(ad, dim1=0, dim2=2)
    out["d10"] = lib.linalg.diagonal(ad, offset=1, dim1=1, dim2=0)
    m = _t(lib, _np(2, 3, 4, seed="mm_a"), dt, grad=True)
    n = _t(lib, _np(4, 5, seed="mm_b"), dt, grad=True)
    ym = lib.linalg.matmul(m, n)
    _loss(lib, ym)
    out.update({"matmul": ym, "g_matmul_a": m.grad, "g_matmul_b": n.grad})
    out["matmul_vec"] = lib.linalg.matmul(m.detach(), _t(lib, _np(4, seed="mm_v"), dt))
    return out


# -- bad inputs ---------------------------------------------------------------------------


@case()
def errors(lib: Any) -> Out:
    L = lib.linalg
    rect, sq, i = lib.ones(2, 3), lib.eye(3), _i(lib, 3, 3)
    sing, notpd = _t(lib, SINGULAR), _t(lib, NOT_PD)
    calls: Dict[str, Callable[[], Any]] = {
        # not square / too few dims
        "det_rect": lambda: L.det(rect),
        "slogdet_rect": lambda: L.slogdet(rect),
        "top_det_rect": lambda: lib.det(rect),
        "logdet_rect": lambda: lib.logdet(rect),
        "inv_rect": lambda: L.inv(rect),
        "inv_ex_rect": lambda: L.inv_ex(rect),
        "inverse_rect": lambda: lib.inverse(rect),
        "cholesky_rect": lambda: L.cholesky(rect),
        "solve_rect": lambda: L.solve(rect, lib.ones(2, 1)),
        "solve_triangular_rect": lambda: L.solve_triangular(rect, lib.ones(2, 1), upper=True),
        "matrix_power_rect": lambda: L.matrix_power(rect, 2),
        "matrix_power_rect0": lambda: L.matrix_power(rect, 0),
        "det_1d": lambda: L.det(lib.ones(3)),
        "inv_1d": lambda: L.inv(lib.ones(3)),
        "cholesky_1d": lambda: L.cholesky(lib.ones(3)),
        "matrix_norm_1d": lambda: L.matrix_norm(lib.ones(3)),
        # integer input
        "det_int": lambda: L.det(i),
        "slogdet_int": lambda: L.slogdet(i),
        "inv_int": lambda: L.inv(i),
        "inverse_int": lambda: lib.inverse(i),
        "solve_int": lambda: L.solve(i, i),
        "cholesky_int": lambda: L.cholesky(i),
        "solve_triangular_int": lambda: L.solve_triangular(i, i, upper=True),
        "lu_factor_int": lambda: L.lu_factor(i),
        "matrix_norm_int": lambda: L.matrix_norm(i),
        "norm_int": lambda: L.norm(i),
        "matrix_power_int_neg": lambda: L.matrix_power(i, -1),
        # mismatched shapes and dtypes
        "solve_rows": lambda: L.solve(sq, lib.ones(4, 2)),
        "solve_vec_rows": lambda: L.solve(sq, lib.ones(4)),
        "solve_batch": lambda: L.solve(lib.ones(2, 3, 3), lib.ones(3, 3, 1)),
        "solve_right_cols": lambda: L.solve(sq, lib.ones(2, 4), left=False),
        "solve_dtype": lambda: L.solve(sq, lib.ones(3, 1, dtype=lib.float64)),
        "solve_triangular_rows": lambda: L.solve_triangular(sq, lib.ones(4, 1), upper=False),
        "solve_triangular_1d_rhs": lambda: L.solve_triangular(sq, lib.ones(3), upper=False),
        "cholesky_solve_rows": lambda: lib.cholesky_solve(lib.ones(4, 1), sq),
        "lu_solve_rows": lambda: L.lu_solve(sq, lib.ones(3, dtype=lib.int32), lib.ones(4, 1)),
        "cross_size": lambda: L.cross(lib.ones(4), lib.ones(4)),
        "cross_broadcast": lambda: L.cross(lib.ones(2, 3), lib.ones(4, 3)),
        "cross_ndim": lambda: L.cross(lib.ones(2, 1, 3), lib.ones(4, 3)),
        "vecdot_size": lambda: L.vecdot(lib.ones(3), lib.ones(4)),
        "multi_dot_one": lambda: L.multi_dot([sq]),
        "multi_dot_3d": lambda: L.multi_dot([sq, lib.ones(2, 3, 3), sq]),
        "multi_dot_inner": lambda: L.multi_dot([lib.ones(2, 3), lib.ones(4, 2)]),
        "matrix_norm_ord": lambda: L.matrix_norm(sq, ord=3),
        "matrix_norm_dim": lambda: L.matrix_norm(sq, dim=(0, 0)),
        "norm_3d_ord": lambda: L.norm(lib.ones(2, 2, 2), ord=1),
        # singular and not positive-definite: LinAlgError (PyTorch's is a RuntimeError)
        "inv_singular": lambda: L.inv(sing),
        "inv_zeros": lambda: L.inv(lib.zeros(2, 2)),
        "inverse_singular": lambda: lib.inverse(sing),
        "inv_batch_singular": lambda: L.inv(lib.stack([sq, sing])),
        "solve_singular": lambda: L.solve(sing, lib.ones(3, 1)),
        "cholesky_not_pd": lambda: L.cholesky(notpd),
        "cholesky_neg": lambda: L.cholesky(-sq),
        "cholesky_batch_not_pd": lambda: L.cholesky(lib.stack([sq, notpd])),
        # these do not raise
        "inv_ex_singular": lambda: L.inv_ex(sing),
        "solve_ex_singular": lambda: L.solve_ex(sing, lib.ones(3, 1)),
        "cholesky_ex_not_pd": lambda: L.cholesky_ex(notpd),
        "lu_solve_singular": lambda: L.lu_solve(*L.lu_factor(sing), lib.ones(3, 1)),
        "lu_factor_singular": lambda: L.lu_factor(sing),
        "lu_singular": lambda: L.lu(sing),
        "det_singular": lambda: L.det(sing),
        "inv_ex_check": lambda: L.inv_ex(sing, check_errors=True),
        "cholesky_ex_check": lambda: L.cholesky_ex(notpd, check_errors=True),
    }
    out: Out = {k: _err(f) for k, f in calls.items()}
    out["matrix_power_int"] = _try(lambda: L.matrix_power(i, 2))
    out["matrix_power_int0"] = _try(lambda: L.matrix_power(i, 0))
    out["vecdot_int"] = _try(lambda: L.vecdot(i, i))
    out["cross_int"] = _try(lambda: L.cross(i, i))
    out["multi_dot_int"] = _try(lambda: L.multi_dot([i, i, i]))
    out["diagonal_int"] = _try(lambda: L.diagonal(i, offset=1))
    out["is_runtime_error"] = issubclass(L.LinAlgError, RuntimeError)
    return out
