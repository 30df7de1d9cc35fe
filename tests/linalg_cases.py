"""Cases of the composed linear-algebra and shape functions (python/candle_py/_composed_linalg.py),
written once against the PyTorch API (`lib` is `torch` or `candle_py`):
`tools/make_fixtures_linalg.py` runs them on torch into tests/fixtures/linalg/,
`tests/test_linalg_ops.py` on candle_py and compares.

Each case returns typical results, gradients of a weighted sum (`_back`), empty and 0-d
inputs, integer dtypes where PyTorch allows them, and the exception kind of bad inputs
(`_err`). Inputs come from usage_cases' seeded NumPy arrays, so both libraries see the same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Dict

from fixture_cases import Cases
from usage_cases import TOL_MM, _back, _err, _np, _r, _w

CASES = Cases()
case = CASES.case
run_case = CASES.run


def _i(lib: Any, *shape: int, seed: str = "i") -> Any:
    return lib.tensor(_np(*shape, seed=seed, kind="int"))


def _grads(lib: Any, y: Any, *xs: Any) -> Dict[str, Any]:
    _back(lib, y)
    return {f"g{k}": x.grad for k, x in enumerate(xs)}


# -- products --------------------------------------------------------------------------


@case()
def outer_ger(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 4, seed="oa", grad=True), _r(lib, 3, seed="ob", grad=True)
    y = lib.outer(a, b)
    out = {"y": y, "ger": lib.ger(a, b), "m": a.outer(b), "mger": a.ger(b), **_grads(lib, y, a, b)}
    out["int"] = lib.outer(_i(lib, 3), _i(lib, 2, seed="j"))
    out["mixed"] = lib.outer(_i(lib, 3), _r(lib, 2))
    out["empty"] = lib.outer(lib.ones(0), lib.ones(3))
    out["err_2d"] = _err(lambda: lib.outer(lib.ones(2, 2), lib.ones(2)))
    out["err_0d"] = _err(lambda: lib.outer(lib.ones(2), lib.tensor(1.0)))
    return out


@case()
def vdot_(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 5, seed="va", grad=True), _r(lib, 5, seed="vb", grad=True)
    y = lib.vdot(a, b)
    out = {"y": y, "m": a.vdot(b), **_grads(lib, y, a, b)}
    out["int"] = lib.vdot(_i(lib, 4), _i(lib, 4, seed="j"))
    out["empty"] = lib.vdot(lib.ones(0), lib.ones(0))
    out["err_dtype"] = _err(lambda: lib.vdot(_i(lib, 2), lib.ones(2)))
    out["err_size"] = _err(lambda: lib.vdot(lib.ones(2), lib.ones(3)))
    out["err_2d"] = _err(lambda: lib.vdot(lib.ones(2, 2), lib.ones(4)))
    return out


@case(TOL_MM)
def mv_(lib: Any) -> Dict[str, Any]:
    m, v = _r(lib, 3, 4, seed="mm", grad=True), _r(lib, 4, seed="mv", grad=True)
    y = lib.mv(m, v)
    out = {"y": y, "m": m.mv(v), **_grads(lib, y, m, v)}
    out["int"] = lib.mv(_i(lib, 2, 3), _i(lib, 3, seed="j"))
    out["empty_rows"] = lib.mv(lib.ones(0, 3), lib.ones(3))
    out["empty_k"] = lib.mv(lib.ones(2, 0), lib.ones(0))
    out["err_size"] = _err(lambda: lib.mv(lib.ones(2, 3), lib.ones(4)))
    out["err_dims"] = _err(lambda: lib.mv(lib.ones(3), lib.ones(3)))
    out["err_dtype"] = _err(lambda: lib.mv(lib.ones(2, 2), _i(lib, 2)))
    return out


@case(TOL_MM)
def inner_(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 2, 3, seed="ia", grad=True), _r(lib, 4, 3, seed="ib", grad=True)
    y = lib.inner(a, b)
    out = {"y": y, "m": a.inner(b), **_grads(lib, y, a, b)}
    out["vec"] = lib.inner(_r(lib, 3, seed="x1"), _r(lib, 3, seed="x2"))
    out["batch"] = lib.inner(_r(lib, 2, 1, 3, seed="x3"), _r(lib, 3, seed="x4"))
    out["scalar"] = lib.inner(lib.tensor(2.5), _r(lib, 2, 3))
    out["int"] = lib.inner(_i(lib, 2, 3), _i(lib, 3, seed="j"))
    out["empty"] = lib.inner(lib.ones(2, 0), lib.ones(3, 0))
    out["err_size"] = _err(lambda: lib.inner(lib.ones(2, 3), lib.ones(2, 4)))
    out["err_dtype"] = _err(lambda: lib.inner(lib.ones(2, 3), _i(lib, 3)))
    return out


@case(TOL_MM)
def kron_(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 2, 3, seed="ka", grad=True), _r(lib, 3, 2, seed="kb", grad=True)
    y = lib.kron(a, b)
    out = {"y": y, "m": a.kron(b), **_grads(lib, y, a, b)}
    out["ndim"] = lib.kron(_r(lib, 2, seed="k1"), _r(lib, 2, 1, 3, seed="k2"))
    out["int"] = lib.kron(_i(lib, 2, 2), _i(lib, 2, seed="j"))
    out["mixed"] = lib.kron(_i(lib, 2), _r(lib, 2))
    out["scalar"] = lib.kron(lib.tensor(3.0), lib.tensor(2.0))
    out["scalar_vec"] = lib.kron(lib.tensor(3.0), _r(lib, 3))
    out["empty"] = lib.kron(lib.ones(2, 0), lib.ones(3, 2))
    return out


@case(TOL_MM)
def tensordot_(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 2, 3, 4, seed="ta", grad=True), _r(lib, 3, 4, 5, seed="tb", grad=True)
    y = lib.tensordot(a, b, 2)
    out = {"y": y, **_grads(lib, y, a, b)}
    c, d = _r(lib, 3, 4, 2, seed="tc"), _r(lib, 4, 3, seed="td")
    out["lists"] = lib.tensordot(c, d, dims=([1, 0], [0, 1]))
    out["err_ints"] = _err(lambda: lib.tensordot(c, d, dims=(0, 1)))
    out["tuple_lists"] = lib.tensordot(c, d, ([0], [1]))
    out["zero"] = lib.tensordot(_r(lib, 2), _r(lib, 3), 0)
    out["default"] = lib.tensordot(_r(lib, 2, 2, 3), _r(lib, 2, 3, 4), 2)
    out["neg"] = lib.tensordot(c, d, ([-3], [-1]))
    out["bcast1"] = lib.tensordot(_r(lib, 2, 1, seed="b1"), _r(lib, 3, 4, seed="b2"), ([1], [0]))
    out["int"] = lib.tensordot(_i(lib, 2, 3), _i(lib, 3, 2, seed="j"), 1)
    out["empty"] = lib.tensordot(lib.ones(2, 0), lib.ones(0, 3), 1)
    out["scalars"] = lib.tensordot(lib.tensor(2.0), lib.tensor(3.0), 0)
    out["err_size"] = _err(lambda: lib.tensordot(lib.ones(2, 3), lib.ones(4, 5), 1))
    out["err_neg"] = _err(lambda: lib.tensordot(lib.ones(2, 3), lib.ones(3, 5), -1))
    out["err_big"] = _err(lambda: lib.tensordot(lib.ones(2, 3), lib.ones(3), 2))
    out["err_len"] = _err(lambda: lib.tensordot(lib.ones(2, 3), lib.ones(3, 2), ([0, 1], [0])))
    out["err_dtype"] = _err(lambda: lib.tensordot(lib.ones(2, 3), _i(lib, 3, 2), 1))
    out["err_dim"] = _err(lambda: lib.tensordot(lib.ones(2, 3), lib.ones(3, 2), ([5], [0])))
    return out


def _nan(lib: Any, *shape: int) -> Any:
    return lib.full(shape, math.nan)


@case(TOL_MM)
def addmm_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="ax", grad=True)
    m1, m2 = _r(lib, 3, 2, seed="a1", grad=True), _r(lib, 2, 4, seed="a2", grad=True)
    y = lib.addmm(x, m1, m2, beta=0.5, alpha=-2.0)
    out = {"y": y, **_grads(lib, y, x, m1, m2)}
    out["default"] = lib.addmm(x, m1, m2)
    out["method"] = x.addmm(m1, m2, alpha=3)
    out["bcast_row"] = lib.addmm(_r(lib, 4, seed="r"), m1, m2)
    out["bcast_0d"] = lib.addmm(lib.tensor(1.5), m1, m2, beta=2)
    out["beta0_nan"] = lib.addmm(_nan(lib, 3, 4), m1, m2, beta=0)
    out["beta0_inf"] = lib.addmm(lib.full((3, 4), math.inf), m1, m2, beta=0.0)
    out["alpha0_nan"] = lib.addmm(x, _nan(lib, 3, 2), m2, alpha=0)
    out["nan_beta1"] = lib.addmm(_nan(lib, 3, 4), m1, m2)
    xi, mi, ni = _i(lib, 2, 2), _i(lib, 2, 3, seed="j"), _i(lib, 3, 2, seed="k")
    out["int"] = lib.addmm(xi, mi, ni, beta=2, alpha=3)
    out["int_float_scalars"] = lib.addmm(xi, mi, ni, beta=0.5, alpha=2.5)
    out["bool_scalars"] = lib.addmm(x, m1, m2, beta=True, alpha=True)
    out["empty_k"] = lib.addmm(x, lib.ones(3, 0), lib.ones(0, 4))
    out["empty_n"] = lib.addmm(lib.ones(0, 4), lib.ones(0, 2), m2)
    x2 = _r(lib, 3, 4, seed="ip")
    r = x2.addmm_(m1.detach(), m2.detach(), beta=2, alpha=0.5)
    out["inplace"] = x2
    out["inplace_is_self"] = r is x2
    out["err_shape"] = _err(lambda: lib.addmm(x, m2, m1))
    out["err_input"] = _err(lambda: lib.addmm(lib.ones(2, 4), m1, m2))
    out["err_dims"] = _err(lambda: lib.addmm(x, lib.ones(3), m2))
    out["err_dtype"] = _err(lambda: lib.addmm(x.double(), m1, m2))
    out["err_dtype_mats"] = _err(lambda: lib.addmm(x, m1.double(), m2))
    out["err_inplace_bcast"] = _err(lambda: lib.ones(1, 4).addmm_(m1.detach(), m2.detach()))
    return out


@case(TOL_MM)
def addmv_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, seed="vx", grad=True)
    m, v = _r(lib, 3, 4, seed="vm", grad=True), _r(lib, 4, seed="vv", grad=True)
    y = lib.addmv(x, m, v, beta=-1.5, alpha=0.25)
    out = {"y": y, **_grads(lib, y, x, m, v)}
    out["default"] = lib.addmv(x, m, v)
    out["method"] = x.addmv(m, v, beta=2)
    out["bcast"] = lib.addmv(lib.tensor(2.0), m, v)
    out["beta0_nan"] = lib.addmv(_nan(lib, 3), m, v, beta=0)
    out["alpha0_nan"] = lib.addmv(x, _nan(lib, 3, 4), v, alpha=0)
    out["int"] = lib.addmv(_i(lib, 2), _i(lib, 2, 3, seed="j"), _i(lib, 3, seed="k"), beta=1.5, alpha=2)
    out["empty"] = lib.addmv(x, lib.ones(3, 0), lib.ones(0))
    x2 = _r(lib, 3, seed="ip")
    out["inplace_is_self"] = x2.addmv_(m.detach(), v.detach(), alpha=2) is x2
    out["inplace"] = x2
    out["err_size"] = _err(lambda: lib.addmv(x, m, lib.ones(3)))
    out["err_input"] = _err(lambda: lib.addmv(lib.ones(2), m, v))
    out["err_dims"] = _err(lambda: lib.addmv(x, m, lib.ones(4, 1)))
    out["err_dtype"] = _err(lambda: lib.addmv(x, m.double(), v))
    return out


@case()
def addr_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 2, seed="rx", grad=True)
    a, b = _r(lib, 3, seed="ra", grad=True), _r(lib, 2, seed="rb", grad=True)
    y = lib.addr(x, a, b, beta=2, alpha=-0.5)
    out = {"y": y, **_grads(lib, y, x, a, b)}
    out["default"] = lib.addr(x, a, b)
    out["method"] = x.addr(a, b, alpha=3)
    out["bcast"] = lib.addr(_r(lib, 2, seed="r2"), a, b)
    out["beta0_nan"] = lib.addr(_nan(lib, 3, 2), a, b, beta=0)
    out["alpha0_nan"] = lib.addr(x, _nan(lib, 3), b, alpha=0)
    out["int"] = lib.addr(_i(lib, 2, 2), _i(lib, 2, seed="j"), _i(lib, 2, seed="k"), beta=2, alpha=-3)
    out["mixed"] = lib.addr(lib.ones(2, 2), _i(lib, 2, seed="j"), _i(lib, 2, seed="k"))
    out["mixed_f64"] = lib.addr(lib.ones(2, 2, dtype=lib.float64), _r(lib, 2), _r(lib, 2, seed="z"))
    out["bool"] = lib.addr(lib.tensor([[True, False], [False, False]]), lib.tensor([True, False]), lib.tensor([False, True]))
    out["empty"] = lib.addr(lib.ones(0, 2), lib.ones(0), b)
    x2 = _r(lib, 3, 2, seed="ip")
    out["inplace_is_self"] = x2.addr_(a.detach(), b.detach(), beta=0.5) is x2
    out["inplace"] = x2
    out["err_int_alpha"] = _err(lambda: lib.addr(_i(lib, 2, 2), _i(lib, 2), _i(lib, 2), alpha=1.5))
    out["err_int_beta"] = _err(lambda: lib.addr(_i(lib, 2, 2), _i(lib, 2), _i(lib, 2), beta=0.5))
    out["err_dims"] = _err(lambda: lib.addr(x, lib.ones(3, 1), b))
    out["err_input"] = _err(lambda: lib.addr(lib.ones(4, 2), a, b))
    return out


@case(TOL_MM)
def baddbmm_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, seed="bx", grad=True)
    b1, b2 = _r(lib, 2, 3, 5, seed="b1", grad=True), _r(lib, 2, 5, 4, seed="b2", grad=True)
    y = lib.baddbmm(x, b1, b2, beta=0.5, alpha=1.5)
    out = {"y": y, **_grads(lib, y, x, b1, b2)}
    out["default"] = lib.baddbmm(x, b1, b2)
    out["method"] = x.baddbmm(b1, b2, beta=-1)
    out["bcast"] = lib.baddbmm(_r(lib, 3, 1, seed="c"), b1, b2)
    out["beta0_nan"] = lib.baddbmm(_nan(lib, 2, 3, 4), b1, b2, beta=0)
    out["alpha0_nan"] = lib.baddbmm(x, _nan(lib, 2, 3, 5), b2, alpha=0)
    out["int"] = lib.baddbmm(_i(lib, 2, 2, 2), _i(lib, 2, 2, 3, seed="j"), _i(lib, 2, 3, 2, seed="k"), beta=1.5, alpha=2)
    out["empty_b"] = lib.baddbmm(lib.ones(0, 3, 4), lib.ones(0, 3, 5), lib.ones(0, 5, 4))
    out["empty_k"] = lib.baddbmm(x, lib.ones(2, 3, 0), lib.ones(2, 0, 4))
    x2 = _r(lib, 2, 3, 4, seed="ip")
    out["inplace_is_self"] = x2.baddbmm_(b1.detach(), b2.detach(), alpha=0.5) is x2
    out["inplace"] = x2
    out["err_batch"] = _err(lambda: lib.baddbmm(x, b1, lib.ones(3, 5, 4)))
    out["err_k"] = _err(lambda: lib.baddbmm(x, b1, lib.ones(2, 4, 4)))
    out["err_dims"] = _err(lambda: lib.baddbmm(x, lib.ones(3, 5), b2))
    out["err_input"] = _err(lambda: lib.baddbmm(lib.ones(2, 2, 4), b1, b2))
    out["err_dtype"] = _err(lambda: lib.baddbmm(x.double(), b1, b2))
    return out


@case(TOL_MM)
def addbmm_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="cx", grad=True)
    b1, b2 = _r(lib, 2, 3, 5, seed="c1", grad=True), _r(lib, 2, 5, 4, seed="c2", grad=True)
    y = lib.addbmm(x, b1, b2, beta=2, alpha=-0.5)
    out = {"y": y, **_grads(lib, y, x, b1, b2)}
    out["default"] = lib.addbmm(x, b1, b2)
    out["method"] = x.addbmm(b1, b2, alpha=2)
    out["bcast"] = lib.addbmm(_r(lib, 4, seed="c"), b1, b2)
    out["beta0_nan"] = lib.addbmm(_nan(lib, 3, 4), b1, b2, beta=0)
    out["alpha0_nan"] = lib.addbmm(x, _nan(lib, 2, 3, 5), b2, alpha=0)
    out["int"] = lib.addbmm(_i(lib, 2, 2), _i(lib, 3, 2, 3, seed="j"), _i(lib, 3, 3, 2, seed="k"), beta=3, alpha=2)
    out["empty_b"] = lib.addbmm(x, lib.ones(0, 3, 5), lib.ones(0, 5, 4))
    x2 = _r(lib, 3, 4, seed="ip")
    out["inplace_is_self"] = x2.addbmm_(b1.detach(), b2.detach(), beta=0.5) is x2
    out["inplace"] = x2
    out["err_batch"] = _err(lambda: lib.addbmm(x, b1, lib.ones(3, 5, 4)))
    out["err_input"] = _err(lambda: lib.addbmm(lib.ones(3, 3), b1, b2))
    out["err_dims"] = _err(lambda: lib.addbmm(x, lib.ones(3, 5), b2))
    return out


@case(TOL_MM)
def chain_matmul_(lib: Any) -> Dict[str, Any]:
    a, b, c = _r(lib, 2, 3, seed="ca", grad=True), _r(lib, 3, 4, seed="cb", grad=True), _r(lib, 4, 2, seed="cc", grad=True)
    y = lib.chain_matmul(a, b, c)
    out = {"y": y, **_grads(lib, y, a, b, c)}
    out["one"] = lib.chain_matmul(a)
    out["two"] = lib.chain_matmul(a, b)
    out["int"] = lib.chain_matmul(_i(lib, 2, 2), _i(lib, 2, 3, seed="j"))
    out["empty"] = lib.chain_matmul(lib.ones(2, 0), lib.ones(0, 3))
    out["err_none"] = _err(lambda: lib.chain_matmul())
    out["err_shape"] = _err(lambda: lib.chain_matmul(a, c))
    out["err_dims"] = _err(lambda: lib.chain_matmul(a, lib.ones(3)))
    return out


# -- constructors ----------------------------------------------------------------------


@case()
def block_diag_(lib: Any) -> Dict[str, Any]:
    a, b, c = _r(lib, 2, 3, seed="da", grad=True), _r(lib, 2, seed="db", grad=True), lib.tensor(5.0, requires_grad=True)
    y = lib.block_diag(a, b, c)
    out = {"y": y, **_grads(lib, y, a, b, c)}
    out["promote"] = lib.block_diag(lib.tensor(1), lib.ones(2, dtype=lib.float64))
    out["int"] = lib.block_diag(_i(lib, 2, 2), _i(lib, 1, 3, seed="j"))
    out["none"] = lib.block_diag()
    out["empty"] = lib.block_diag(lib.ones(0, 2), lib.ones(2, 0))
    out["err_3d"] = _err(lambda: lib.block_diag(lib.ones(2, 2, 2)))
    return out


@case()
def cartesian_prod_(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 3, seed="pa", grad=True), _r(lib, 2, seed="pb", grad=True)
    y = lib.cartesian_prod(a, b)
    out = {"y": y, **_grads(lib, y, a, b)}
    out["one"] = lib.cartesian_prod(lib.tensor([1, 2, 3]))
    out["three"] = lib.cartesian_prod(lib.tensor([1, 2]), lib.tensor([3]), lib.tensor([4, 5]))
    out["empty"] = lib.cartesian_prod(lib.tensor([1, 2]), lib.tensor([], dtype=lib.int64))
    out["err_dtype"] = _err(lambda: lib.cartesian_prod(lib.tensor([1, 2]), lib.tensor([1.5])))
    out["err_2d"] = _err(lambda: lib.cartesian_prod(lib.ones(2, 2), lib.ones(2)))
    return out


@case()
def combinations_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 4, seed="co", grad=True)
    y = lib.combinations(x, 2)
    out = {"y": y, **_grads(lib, y, x)}
    out["r3"] = lib.combinations(lib.tensor([1, 2, 3, 4]), r=3)
    out["repl"] = lib.combinations(lib.tensor([1, 2, 3]), 2, with_replacement=True)
    out["repl3"] = lib.combinations(lib.tensor([1.0, 2.0]), 3, True)
    out["r1"] = lib.combinations(lib.tensor([1, 2, 3]), 1)
    out["r0"] = lib.combinations(lib.tensor([1, 2, 3]), 0)
    out["r_big"] = lib.combinations(lib.tensor([1, 2, 3]), 4)
    out["empty"] = lib.combinations(lib.tensor([], dtype=lib.int64), 2)
    out["err_2d"] = _err(lambda: lib.combinations(lib.ones(2, 2)))
    out["err_neg"] = _err(lambda: lib.combinations(lib.ones(3), -1))
    return out


@case()
def tri_indices(lib: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for r, c, o in [(3, 3, 0), (4, 3, -1), (3, 5, 2), (3, 3, 10), (3, 3, -10), (0, 3, 0), (2, 0, 1)]:
        out[f"tril_{r}_{c}_{o}"] = lib.tril_indices(r, c, o)
        out[f"triu_{r}_{c}_{o}"] = lib.triu_indices(r, c, o)
    out["dtype"] = lib.tril_indices(3, 2, dtype=lib.int32)
    out["dtype_u"] = lib.triu_indices(3, 2, offset=1, dtype=lib.int32)
    out["err_row"] = _err(lambda: lib.tril_indices(-1, 3))
    out["err_col"] = _err(lambda: lib.triu_indices(3, -1))
    out["err_float"] = _err(lambda: lib.tril_indices(3, 3, dtype=lib.float32))
    return out


@case()
def vander_(lib: Any) -> Dict[str, Any]:
    # values only: torch 2.x's vander backward fails (its cumprod is written in place), so its
    # gradient is checked against the analytic formula in test_linalg_ops.py
    x = _r(lib, 4, seed="vd")
    out = {"y": lib.vander(x)}
    out["N"] = lib.vander(x, N=3)
    out["incr"] = lib.vander(x, 5, increasing=True)
    out["zero_x"] = lib.vander(lib.tensor([0.0, 2.0]), 3)
    out["int"] = lib.vander(lib.tensor([1, 2, 3]))
    out["bool"] = lib.vander(lib.tensor([True, False]))
    out["N0"] = lib.vander(x, 0)
    out["N1"] = lib.vander(x, 1)
    out["empty"] = lib.vander(lib.ones(0))
    out["err_2d"] = _err(lambda: lib.vander(lib.ones(2, 2)))
    out["err_N"] = _err(lambda: lib.vander(lib.ones(2), N=-1))
    return out


# -- broadcasting, stacking ------------------------------------------------------------


@case()
def broadcasting(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 3, 1, seed="ba", grad=True), _r(lib, 4, seed="bb", grad=True)
    ya, yb = lib.broadcast_tensors(a, b)
    _back(lib, ya * 2 + yb)
    out = {"ya": ya, "yb": yb, "ga": a.grad, "gb": b.grad}
    out["three"] = list(lib.broadcast_tensors(lib.ones(2, 1, 1), lib.tensor(3), _i(lib, 1, 3)))
    out["one"] = list(lib.broadcast_tensors(_r(lib, 2)))
    out["none"] = list(lib.broadcast_tensors())
    out["empty"] = list(lib.broadcast_tensors(lib.ones(0, 1), lib.ones(3)))
    out["err"] = _err(lambda: lib.broadcast_tensors(lib.ones(2), lib.ones(3)))
    out["shapes"] = lib.broadcast_shapes((2, 1), (3,), 1)
    out["shapes_int"] = lib.broadcast_shapes(2, (3, 1))
    out["shapes_none"] = lib.broadcast_shapes()
    out["shapes_zero"] = lib.broadcast_shapes((0, 1), (1, 4))
    out["shapes_size"] = lib.broadcast_shapes(lib.Size([5, 1]), [1, 2])
    out["shapes_err"] = _err(lambda: lib.broadcast_shapes((2,), (3,)))
    return out


@case()
def atleast(lib: Any) -> Dict[str, Any]:
    s, v, m, t = lib.tensor(1.5), _r(lib, 3), _r(lib, 2, 3), _r(lib, 2, 3, 4)
    out: Dict[str, Any] = {}
    for n, f in (("1", lib.atleast_1d), ("2", lib.atleast_2d), ("3", lib.atleast_3d)):
        for k, x in (("s", s), ("v", v), ("m", m), ("t", t)):
            out[f"{n}{k}"] = f(x)
        out[f"{n}_many"] = list(f(s, v))
        out[f"{n}_list"] = list(f([s, m]))
        out[f"{n}_none"] = list(f())
        out[f"{n}_is_tuple"] = isinstance(f(s, v), tuple)
    x = lib.tensor(2.0, requires_grad=True)
    _back(lib, lib.atleast_3d(x) * 3)
    out["g"] = x.grad
    out["empty"] = lib.atleast_2d(lib.ones(0))
    return out


@case()
def stacking(lib: Any) -> Dict[str, Any]:
    a, b = _r(lib, 3, seed="sa", grad=True), _r(lib, 3, seed="sb", grad=True)
    y = lib.column_stack([a, b])
    out = {"column": y, **_grads(lib, y, a, b)}
    m, n = _r(lib, 2, 3, seed="sm"), _r(lib, 2, 3, seed="sn")
    out["column_mixed"] = lib.column_stack((m, lib.ones(2), lib.tensor([7.0, 8.0])))
    out["column_0d"] = lib.column_stack([lib.tensor(1.0), lib.tensor(2.0)])
    out["hstack_1d"] = lib.hstack([a.detach(), b.detach(), lib.tensor(3.0)])
    out["hstack_2d"] = lib.hstack((m, n))
    out["hstack_int"] = lib.hstack([lib.tensor([1, 2]), lib.tensor([3])])
    out["hstack_promote"] = lib.hstack([lib.tensor([1, 2]), lib.tensor([3.5])])
    out["vstack_1d"] = lib.vstack([a.detach(), b.detach()])
    out["vstack_2d"] = lib.vstack([m, a.detach()])
    out["row_stack"] = lib.row_stack([m, n])
    out["dstack_1d"] = lib.dstack([a.detach(), b.detach()])
    out["dstack_2d"] = lib.dstack([m, n])
    out["dstack_0d"] = lib.dstack([lib.tensor(1.0), lib.tensor(2.0)])
    out["dstack_3d"] = lib.dstack([_r(lib, 2, 2, 1), _r(lib, 2, 2, 2, seed="z")])
    out["empty"] = lib.vstack([lib.ones(0, 3), m])
    out["err_empty_list"] = _err(lambda: lib.hstack([]))
    out["err_vstack"] = _err(lambda: lib.vstack([lib.ones(2), lib.ones(3)]))
    out["err_column"] = _err(lambda: lib.column_stack([lib.ones(2), lib.ones(3)]))
    out["err_tensor_arg"] = _err(lambda: lib.vstack(lib.ones(2, 2)))
    return out


# -- splitting -------------------------------------------------------------------------


@case()
def tensor_split_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 7, 4, seed="ts", grad=True)
    parts = lib.tensor_split(x, 3)
    ((parts[0] * _w(lib, parts[0])).sum() + parts[2].sum() * 2).backward()
    out: Dict[str, Any] = {"parts": list(parts), "g": x.grad}
    d = x.detach()
    out["dim1"] = list(lib.tensor_split(d, 3, dim=1))
    out["more_than_size"] = list(lib.tensor_split(d, 9))
    out["indices"] = list(lib.tensor_split(d, [1, 5]))
    out["indices_tuple"] = list(lib.tensor_split(d, (2, -1), dim=0))
    out["indices_unsorted"] = list(lib.tensor_split(d, [5, 1]))
    out["indices_big"] = list(lib.tensor_split(d, [3, 20]))
    out["indices_neg"] = list(lib.tensor_split(d, [-2], dim=-1))
    out["indices_empty"] = list(lib.tensor_split(d, []))
    out["tensor_sections"] = list(lib.tensor_split(d, lib.tensor(2)))
    out["tensor_indices"] = list(lib.tensor_split(d, lib.tensor([1, 3])))
    out["method"] = list(d.tensor_split(2, 1))
    out["empty"] = list(lib.tensor_split(lib.ones(0, 2), 2))
    out["int"] = list(lib.tensor_split(lib.arange(5), 2))
    out["err_zero"] = _err(lambda: lib.tensor_split(d, 0))
    out["err_0d"] = _err(lambda: lib.tensor_split(lib.tensor(1.0), 2))
    out["err_dim"] = _err(lambda: lib.tensor_split(d, 2, dim=3))
    out["err_float_tensor"] = _err(lambda: lib.tensor_split(d, lib.tensor([1.0])))
    return out


@case()
def hvd_split(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 4, 6, 2, seed="hs", grad=True)
    parts = lib.hsplit(x, 3)
    _back(lib, parts[1])
    out: Dict[str, Any] = {"h": list(parts), "g": x.grad}
    d = x.detach()
    out["h_idx"] = list(lib.hsplit(d, [1, 4]))
    out["h_1d"] = list(lib.hsplit(lib.arange(6), 2))
    out["v"] = list(lib.vsplit(d, 2))
    out["v_idx"] = list(d.vsplit([3]))
    out["d"] = list(lib.dsplit(d, 2))
    out["d_idx"] = list(d.dsplit([1]))
    out["h_method"] = list(d.hsplit(2))
    out["err_h_div"] = _err(lambda: lib.hsplit(d, 4))
    out["err_h_0d"] = _err(lambda: lib.hsplit(lib.tensor(1.0), 1))
    out["err_v_1d"] = _err(lambda: lib.vsplit(lib.ones(4), 2))
    out["err_d_2d"] = _err(lambda: lib.dsplit(lib.ones(2, 2), 2))
    out["err_v_div"] = _err(lambda: lib.vsplit(d, 3))
    return out


# -- dims and views --------------------------------------------------------------------


@case()
def movedim_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 4, 5, seed="md", grad=True)
    y = lib.movedim(x, 1, -1)
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    out["seq"] = lib.movedim(d, (0, 1), (2, 0))
    out["seq_neg"] = lib.moveaxis(d, [-1, 0], [0, -1])
    out["method"] = d.movedim(3, 0)
    out["method_axis"] = d.moveaxis((1, 2), (3, 2))
    out["same"] = lib.movedim(d, 2, 2)
    out["0d"] = lib.movedim(lib.tensor(3.0), 0, 0)
    out["int"] = lib.movedim(_i(lib, 2, 3), 0, 1)
    out["err_len"] = _err(lambda: lib.movedim(d, (0, 1), (2,)))
    out["err_repeat"] = _err(lambda: lib.movedim(d, (0, 0), (1, 2)))
    out["err_range"] = _err(lambda: lib.movedim(d, 4, 0))
    return out


@case()
def unflatten_adjoint(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 12, seed="uf", grad=True)
    y = lib.unflatten(x, 1, (3, -1))
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    out["neg_dim"] = lib.unflatten(d, -1, [2, 2, 3])
    out["method"] = d.unflatten(0, (2, 1))
    out["err_size"] = _err(lambda: lib.unflatten(d, 1, (5, -1)))
    m = _r(lib, 2, 3, 4, seed="adj", grad=True)
    a = lib.adjoint(m)
    _back(lib, a)
    out["adj"] = a
    out["g_adj"] = m.grad
    out["adj_method"] = m.detach().adjoint()
    out["adj_2d"] = lib.adjoint(_i(lib, 2, 3))
    out["adj_empty"] = lib.adjoint(lib.ones(0, 3))
    out["err_adj_1d"] = _err(lambda: lib.adjoint(lib.ones(3)))
    return out


# -- gathers ---------------------------------------------------------------------------


@case()
def take_along_dim_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="tk", grad=True)
    idx = lib.tensor([[0, 3], [1, 1], [2, 0]])
    y = lib.take_along_dim(x, idx, dim=1)
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    out["flat"] = lib.take_along_dim(d, lib.tensor([[0, 11], [5, 5]]))
    out["method"] = d.take_along_dim(lib.tensor([[2, 0, 1, 1]]), 0)
    out["bcast"] = lib.take_along_dim(d, lib.tensor([[1]]), dim=1)
    out["bcast_in"] = lib.take_along_dim(d[:1], lib.tensor([[0], [3]]), dim=1)
    out["argmax"] = lib.take_along_dim(d, d.argmax(dim=1, keepdim=True), dim=1)
    out["neg_dim"] = lib.take_along_dim(d, lib.tensor([[0, 1, 2, 0]]), dim=-2)
    out["int"] = lib.take_along_dim(_i(lib, 2, 3), lib.tensor([[2], [1]]), 1)
    out["err_int32_idx"] = _err(lambda: lib.take_along_dim(d, lib.tensor([[1]], dtype=lib.int32), 1))
    out["int32_idx_flat"] = lib.take_along_dim(d, lib.tensor([1, 7], dtype=lib.int32))
    out["err_float_idx_flat"] = _err(lambda: lib.take_along_dim(d, lib.tensor([1.0])))
    out["empty"] = lib.take_along_dim(d, lib.ones(3, 0, dtype=lib.int64), 1)
    out["err_range"] = _err(lambda: lib.take_along_dim(d, lib.tensor([12])))  # (torch reads past the end with expanded indices)
    out["err_float_idx"] = _err(lambda: lib.take_along_dim(d, lib.tensor([[1.0]]), 1))
    out["err_ndim"] = _err(lambda: lib.take_along_dim(d, lib.tensor([1]), 1))
    out["err_bcast"] = _err(lambda: lib.take_along_dim(d, lib.tensor([[1], [2]]), 1))
    return out


@case()
def take_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 4, seed="tt", grad=True)
    idx = lib.tensor([[0, 11], [-1, 5], [5, 2]])
    y = lib.take(x, idx)
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    out["method"] = d.take(lib.tensor([3, 3, 0]))
    out["0d_index"] = lib.take(d, lib.tensor(7))
    out["0d_input"] = lib.take(lib.tensor(4.0), lib.tensor([0, 0, -1]))
    out["int"] = lib.take(_i(lib, 5), lib.tensor([4, 0]))
    out["empty"] = lib.take(d, lib.tensor([], dtype=lib.int64))
    out["err_range"] = _err(lambda: lib.take(d, lib.tensor([12])))
    out["err_range_neg"] = _err(lambda: lib.take(d, lib.tensor([-13])))
    out["err_int32"] = _err(lambda: lib.take(d, lib.tensor([1], dtype=lib.int32)))
    out["err_empty_input"] = _err(lambda: lib.take(lib.ones(0), lib.tensor([0])))
    return out


@case()
def narrow_copy_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 4, 5, seed="nc", grad=True)
    y = lib.narrow_copy(x, 1, 1, 3)
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    c = d.narrow_copy(0, -2, 2)
    out["neg_start"] = c
    c.fill_(0.0)
    out["source_unchanged"] = d
    out["contig"] = lib.narrow_copy(d, 1, 0, 2).is_contiguous()
    out["empty"] = lib.narrow_copy(d, 0, 4, 0)
    out["int"] = lib.narrow_copy(_i(lib, 3, 3), 0, 1, 1)
    out["err_len"] = _err(lambda: lib.narrow_copy(d, 0, 2, 5))
    out["err_dim"] = _err(lambda: lib.narrow_copy(d, 2, 0, 1))
    return out


# -- statistics ------------------------------------------------------------------------


@case(TOL_MM)
def cov_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 6, seed="cv", grad=True)
    y = lib.cov(x)
    out = {"y": y, **_grads(lib, y, x)}
    d = x.detach()
    fw = lib.tensor([1, 2, 0, 3, 1, 1])
    aw = _r(lib, 6, seed="aw", kind="unit")
    out["corr0"] = lib.cov(d, correction=0)
    out["corr2"] = d.cov(correction=2)
    out["fw"] = lib.cov(d, fweights=fw)
    out["aw"] = lib.cov(d, aweights=aw)
    out["both"] = lib.cov(d, fweights=fw, aweights=aw)
    out["both_c0"] = lib.cov(d, correction=0, fweights=fw, aweights=aw)
    xw = _r(lib, 2, 6, seed="cw", grad=True)
    yw = lib.cov(xw, fweights=fw, aweights=aw)
    _back(lib, yw)
    out["gw"] = xw.grad
    out["vec"] = lib.cov(_r(lib, 5, seed="cv1"))
    out["int"] = lib.cov(lib.tensor([[1, 2, 4], [3, 1, 0]]))
    out["one_obs"] = lib.cov(lib.tensor([1.0]))
    out["one_var"] = lib.cov(_r(lib, 1, 4))
    out["err_3d"] = _err(lambda: lib.cov(lib.ones(2, 2, 2)))
    out["err_fw_float"] = _err(lambda: lib.cov(d, fweights=aw))
    out["err_aw_int"] = _err(lambda: lib.cov(d, aweights=fw))
    out["err_fw_numel"] = _err(lambda: lib.cov(d, fweights=lib.tensor([1, 2])))
    out["err_fw_neg"] = _err(lambda: lib.cov(d, fweights=lib.tensor([1, -1, 1, 1, 1, 1])))
    out["err_aw_neg"] = _err(lambda: lib.cov(d, aweights=-aw))
    out["err_bool"] = _err(lambda: lib.cov(lib.ones(2, 3).bool()))
    return out


@case(TOL_MM)
def corrcoef_(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 5, seed="cc", grad=True)
    y = lib.corrcoef(x)
    out = {"y": y, **_grads(lib, y, x)}
    out["method"] = x.detach().corrcoef()
    out["vec"] = lib.corrcoef(_r(lib, 4, seed="c1"))
    out["int"] = lib.corrcoef(lib.tensor([[1, 2, 4], [3, 1, 0]]))
    out["perfect"] = lib.corrcoef(lib.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 2.0, 1.0]]))
    out["const_row"] = lib.corrcoef(lib.tensor([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]]))
    return out
