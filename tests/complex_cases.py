"""Cases of the complex tensors (complex64/complex128: view_as_complex/view_as_real,
complex, polar, elementwise math, matmul, reductions, shape ops, indexing, autograd),
written once against the PyTorch API (`lib` is `torch` or `candle_py`):
`tools/make_fixtures_complex.py` runs them on torch into tests/fixtures/complex/,
`tests/test_complex.py` on candle_py and compares.

Complex values are made only from real tensors (`view_as_complex`, `complex`, `polar`),
never from Python complex literals in `tensor(...)` or `dtype=complex64` in creation
functions. Complex tensors are encoded as their real/imaginary parts stacked in a last
axis (usage_cases.encode); Python complex numbers (`item()`, `tolist()`) are returned
as [real, imag] pairs. Gradients are those of a real loss of the complex results, taken
with respect to real leaves (and, in `complex_leaf`, a complex leaf: PyTorch's
convention, grad = dL/dre + i dL/dim).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List

import numpy as np

from fixture_cases import Cases
from usage_cases import _err, _r, _w

CASES = Cases()
case = CASES.case
run_case = CASES.run

INF, NAN = math.inf, math.nan
TOL_C = 1e-4  # matmul, exp/log/pow, polar, sums of squares


# -- inputs and losses -------------------------------------------------------------------


def _cx(lib: Any, *shape: int, seed: str, scale: float = 1.0, grad: bool = False) -> Any:
    """A deterministic complex64 tensor of `shape` and its real (..., 2) base (a leaf with `grad`)."""
    x = _r(lib, *shape, 2, seed=seed) * scale
    if grad:
        x.requires_grad_(True)
    return lib.view_as_complex(x), x


def _c(lib: Any, re: List[float], im: List[float]) -> Any:
    return lib.complex(lib.tensor(re), lib.tensor(im))


def _edges(lib: Any) -> Any:
    """Zero (both signs), negative reals, infinities and nans in either part."""
    return _c(
        lib,
        [0.0, -0.0, 3.0, -2.0, -1.0, 0.0, INF, -INF, INF, NAN, 1.0, 1.0, 1e-3, 0.5],
        [0.0, 0.0, -4.0, 0.0, -0.0, -1.0, 1.0, 0.0, NAN, 1.0, INF, NAN, 2.0, -0.25],
    )


_FINITE_OR_NAN = [0, 1, 2, 3, 4, 5, 9, 11, 12, 13]  # the points of _edges without an infinite part


def _sq(lib: Any, out: Any) -> Any:
    """The real loss sum(|out|^2) as the sum of squares of the real view."""
    return lib.view_as_real(out).pow(2).sum()


def _wl(lib: Any, out: Any) -> Any:
    """A weighted real loss of the real and imaginary parts of `out`."""
    r = lib.view_as_real(out)
    return (r * _w(lib, r)).sum()


def _pairs(v: Any) -> Any:
    """Python complex numbers (nested in lists) as [real, imag] pairs."""
    if isinstance(v, list):
        return [_pairs(x) for x in v]
    return [v.real, v.imag]


# -- view_as_complex / view_as_real --------------------------------------------------------


@case()
def view_roundtrip(lib: Any) -> Dict[str, Any]:
    x = lib.arange(6.0).reshape(3, 2) / 4 - 0.5
    c = lib.view_as_complex(x)
    z0 = lib.view_as_complex(lib.tensor([1.5, -2.0]))
    e = lib.view_as_complex(lib.zeros(2, 0, 2))
    x64 = lib.linspace(-1, 1, 8, dtype=lib.float64).reshape(2, 2, 2)
    c64 = lib.view_as_complex(x64)
    strided = lib.view_as_complex(lib.arange(12.0).reshape(3, 4)[:, :2])
    return {
        "c": c,
        "c_shape": c.shape,
        "c_dtype": c.dtype,
        "back": lib.view_as_real(c),
        "back_shape": lib.view_as_real(c).shape,
        "z0": z0,
        "z0_shape": z0.shape,
        "z0_ndim": z0.ndim,
        "z0_back": lib.view_as_real(z0),
        "empty": e,
        "empty_shape": e.shape,
        "empty_back_shape": lib.view_as_real(e).shape,
        "c64": c64,
        "c64_dtype": c64.dtype,
        "c64_back_dtype": lib.view_as_real(c64).dtype,
        "strided_rows": strided,
        "is_complex": [lib.is_complex(c), c.is_complex(), lib.is_complex(x), x.is_complex()],
        "err_last_dim_3": _err(lambda: lib.view_as_complex(lib.ones(3, 3))),
        "err_last_dim_1": _err(lambda: lib.view_as_complex(lib.ones(4, 1))),
        "err_0d": _err(lambda: lib.view_as_complex(lib.tensor(1.0))),
        "err_int": _err(lambda: lib.view_as_complex(lib.tensor([[1, 2]]))),
        "err_transposed": _err(lambda: lib.view_as_complex(lib.arange(8.0).reshape(2, 4).t())),
        "err_odd_offset": _err(lambda: lib.view_as_complex(lib.arange(12.0).reshape(3, 4)[:, 1:3])),
        "err_real_of_real": _err(lambda: lib.view_as_real(lib.ones(3, 2))),
    }


@case()
def view_semantics(lib: Any) -> Dict[str, Any]:
    x = lib.arange(8.0).reshape(4, 2)
    c = lib.view_as_complex(x)
    c[0] = 5 + 1j
    after_set = x.clone()
    c.mul_(2)
    after_mul = x.clone()
    x[3, 1] = -7.0  # the base's writes show in the complex view
    seen_in_c = c.clone()
    r = lib.view_as_real(c)
    r[2, 0] = 100.0  # and the real view's writes in the complex tensor and the base
    c[1:3] += lib.view_as_complex(lib.tensor([[1.0, 1.0], [2.0, -2.0]]))
    return {"after_set": after_set, "after_mul": after_mul, "seen_in_c": seen_in_c, "c": c, "x": x, "r": r}


# -- complex / polar -------------------------------------------------------------------------


@case(tol=TOL_C)
def complex_polar(lib: Any) -> Dict[str, Any]:
    re = lib.tensor([[0.5], [-1.0], [2.0]], requires_grad=True)
    im = lib.tensor([1.0, -0.25, 0.0, 3.0], requires_grad=True)
    c = lib.complex(re, im)  # (3, 1) with (4,) -> (3, 4)
    _wl(lib, c * c).backward()
    ab = lib.tensor([1.0, 2.0, 0.5, 0.0], requires_grad=True)
    an = lib.tensor([[0.0], [math.pi / 3], [-2.0]], requires_grad=True)
    p = lib.polar(ab, an)
    (p.real.sum() + 2 * p.imag.sum() + _sq(lib, p * p)).backward()
    re64 = lib.linspace(-1, 1, 3, dtype=lib.float64)
    c64 = lib.complex(re64, re64 * 2)
    p64 = lib.polar(lib.ones(3, dtype=lib.float64), re64)
    return {
        "c": c,
        "c_dtype": c.dtype,
        "g_re": re.grad,
        "g_im": im.grad,
        "p": p,
        "p_dtype": p.dtype,
        "g_abs": ab.grad,
        "g_angle": an.grad,
        "c64": c64,
        "c64_dtype": c64.dtype,
        "p64": p64,
        "p64_dtype": p64.dtype,
        "parts_back": [c.real, c.imag, lib.real(p), lib.imag(p)],
        "err_int": _err(lambda: lib.complex(lib.tensor([1, 2]), lib.tensor([3, 4]))),
        "err_mixed": _err(lambda: lib.complex(lib.ones(2), lib.ones(2, dtype=lib.float64))),
        "err_shape": _err(lambda: lib.complex(lib.ones(2), lib.ones(3))),
    }


# -- elementwise arithmetic ---------------------------------------------------------------


@case()
def arith_operands(lib: Any) -> Dict[str, Any]:
    c, _ = _cx(lib, 3, 4, seed="arith_c")
    d, _ = _cx(lib, 4, seed="arith_d")
    r = _r(lib, 3, 1, seed="arith_r")
    rr = _r(lib, 4, seed="arith_rr")
    return {
        "c+d": c + d,
        "c-d": c - d,
        "c*d": c * d,
        "c/d": c / d,
        "d*c": d * c,
        "d/c": d / c,
        "c+r": c + r,
        "r+c": r + c,
        "c-r": c - r,
        "r-c": r - c,
        "c*r": c * r,
        "rr*c": rr * c,
        "c/r": c / r,
        "r/c": r / c,
        "c+2": c + 2,
        "2-c": 2 - c,
        "c*2.5": c * 2.5,
        "2.5*c": 2.5 * c,
        "c/4": c / 4,
        "1/c": 1 / c,
        "c+1j": c + 1j,
        "c*(1-2j)": c * (1 - 2j),
        "(1+2j)*c": (1 + 2j) * c,
        "(1+2j)-c": (1 + 2j) - c,
        "c/(1-1j)": c / (1 - 1j),
        "(2+1j)/c": (2 + 1j) / c,
        "neg": -c,
        "fn_neg": lib.neg(c),
        "fn_add": lib.add(c, d),
        "fn_sub": lib.sub(c, r),
        "fn_mul": lib.mul(r, c),
        "fn_div": lib.div(c, d),
        "square": c.square(),
        "fn_square": lib.square(d),
        "dtypes": [(c + r).dtype, (r * c).dtype, (c * 2).dtype, (c + 1j).dtype, (c / d).dtype],
        "c64_plus_f64": (c + lib.ones(4, dtype=lib.float64)).dtype,
        "err_shape": _err(lambda: c + lib.view_as_complex(lib.ones(3, 2))),
    }


@case(tol=TOL_C)
def arith_grads(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 3, 4, seed="ag_c", grad=True)
    d, xd = _cx(lib, 4, seed="ag_d", grad=True)
    r = _r(lib, 3, 1, seed="ag_r", grad=True)
    out = c * d + r * c - c / d + 2.5 * c - r / c + (1 - 2j) * c.square() - d / (2 + 1j) + (-c) * r
    _sq(lib, out).backward()
    # a second, linear loss: grad of Re/Im parts
    y, xy = _cx(lib, 2, 3, seed="ag_y", grad=True)
    w = lib.tensor([[1.0], [-2.0]], requires_grad=True)
    o2 = y * w + y / 2 - 1j * y
    (o2.real.sum() + 2 * o2.imag.sum()).backward()
    return {"out": out, "gx": x.grad, "gxd": xd.grad, "gr": r.grad, "o2": o2, "gxy": xy.grad, "gw": w.grad}


@case(tol=TOL_C)
def rotary_llama(lib: Any) -> Dict[str, Any]:
    """The rotary embedding exactly as Meta's llama/model.py writes it."""
    torch = lib

    def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> Any:
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device)  # type: ignore
        freqs = torch.outer(t, freqs).float()  # type: ignore
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
        return freqs_cis

    def reshape_for_broadcast(freqs_cis: Any, x: Any) -> Any:
        ndim = x.ndim
        assert 0 <= 1 < ndim
        assert freqs_cis.shape == (x.shape[1], x.shape[-1])
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(xq: Any, xk: Any, freqs_cis: Any) -> Any:
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    bsz, seqlen, n_heads, head_dim, start_pos = 2, 5, 3, 8, 2
    all_freqs = precompute_freqs_cis(head_dim, 16)
    freqs_cis = all_freqs[start_pos : start_pos + seqlen]
    xq = _r(lib, bsz, seqlen, n_heads, head_dim, seed="rope_q", grad=True)
    xk = _r(lib, bsz, seqlen, n_heads, head_dim, seed="rope_k", grad=True)
    q, k = apply_rotary_emb(xq, xk, freqs_cis)
    ((q * _w(lib, q)).sum() + (k * k).sum() * 0.5 + (q * k).sum()).backward()
    return {
        "freqs_cis": all_freqs,
        "freqs_dtype": all_freqs.dtype,
        "slice_shape": freqs_cis.shape,
        "q": q,
        "k": k,
        "q_dtype": q.dtype,
        "gq": xq.grad,
        "gk": xk.grad,
        "norms_kept": (q.reshape(-1, 2).pow(2).sum(-1) - xq.detach().reshape(-1, 2).pow(2).sum(-1)).abs().max().item() < 1e-4,
    }


@case(tol=2e-2)
def rotary_llama_bf16(lib: Any) -> Dict[str, Any]:
    """Meta's apply_rotary_emb on bfloat16 activations: rotated in float32, cast back by type_as."""
    freqs = 1.0 / (10000.0 ** (lib.arange(0, 4, 2)[:2].float() / 4))
    freqs = lib.outer(lib.arange(3), freqs).float()
    freqs_cis = lib.polar(lib.ones_like(freqs), freqs)
    xq = _r(lib, 1, 3, 2, 4, seed="rope_bf").to(lib.bfloat16).requires_grad_()
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    out = lib.view_as_real(xq_ * freqs_cis.view(1, 3, 1, 2)).flatten(3).type_as(xq)
    out.float().pow(2).sum().backward()
    return {"out": out, "dtype": out.dtype, "g": xq.grad, "g_dtype": xq.grad.dtype}


# -- abs / angle / sgn ---------------------------------------------------------------------


@case()
def abs_angle_sgn(lib: Any) -> Dict[str, Any]:
    e = _edges(lib)
    re = lib.tensor([0.0, 3.0, -1.0, 0.5, -2.0, 0.0], requires_grad=True)
    im = lib.tensor([0.0, -4.0, 1.0, 2.0, 0.0, -1.5], requires_grad=True)
    z = lib.complex(re, im)
    s = z.sgn()
    (z.abs().sum() + (z.angle() * lib.arange(1.0, 7.0)).sum() + s.real.sum() + 2 * s.imag.sum()).backward()
    xr = lib.tensor([-1.0, -0.0, 0.0, 2.0, NAN, -INF, INF], requires_grad=True)
    ar = lib.angle(xr)
    (ar * lib.arange(1.0, 8.0)).sum().backward()
    return {
        "abs": e.abs(),
        "fn_abs": lib.abs(e),
        "abs_dtype": e.abs().dtype,
        "angle": e.angle(),
        "fn_angle": lib.angle(e),
        # without the infinite points, whose sgn PyTorch gives as nan+nanj or nan+0j by SIMD lane
        "sgn": e[lib.tensor(_FINITE_OR_NAN)].sgn(),
        "fn_sgn": lib.sgn(e[lib.tensor(_FINITE_OR_NAN)]),
        "z_abs": z.abs(),
        "z_angle": z.angle(),
        "z_sgn": s,
        "g_re": re.grad,
        "g_im": im.grad,
        "real_angle": ar,
        "real_angle_dtype": ar.dtype,
        "real_angle_grad": xr.grad,
        "real_angle_int": lib.angle(lib.tensor([-3, 0, 2])),
        "abs_c128": lib.abs(e.to(lib.complex128)),
        "abs_c128_dtype": lib.abs(e.to(lib.complex128)).dtype,
    }


# -- exp / log / sqrt / reciprocal / pow -----------------------------------------------------


@case(tol=TOL_C)
def exp_log_sqrt(lib: Any) -> Dict[str, Any]:
    e = _edges(lib)
    c, x = _cx(lib, 2, 5, seed="els", grad=True)
    ex, lg, sq, rc = c.exp(), c.log(), c.sqrt(), c.reciprocal()
    (_wl(lib, ex) + _wl(lib, lg) + _sq(lib, sq) + rc.real.sum() - 3 * rc.imag.sum()).backward()
    return {
        "exp": e.exp(),
        "fn_exp": lib.exp(e),
        "log": e.log(),
        "fn_log": lib.log(e),
        "sqrt": e.sqrt(),
        "fn_sqrt": lib.sqrt(e),
        "reciprocal": e.reciprocal(),
        "fn_reciprocal": lib.reciprocal(e),
        "neg_reals": [
            lib.sqrt(lib.complex(lib.tensor([-4.0, -1.0]), lib.zeros(2))),
            lib.log(lib.complex(lib.tensor([-1.0, -math.e]), lib.zeros(2))),
        ],
        "c_exp": ex,
        "c_log": lg,
        "c_sqrt": sq,
        "c_rec": rc,
        "gx": x.grad,
        "dtypes": [ex.dtype, lg.dtype, sq.dtype, rc.dtype],
    }


@case(tol=TOL_C)
def pow_cases(lib: Any) -> Dict[str, Any]:
    e = _c(lib, [0.0, 3.0, -2.0, -1.0, 0.5, INF], [0.0, -4.0, 0.0, 1.0, -0.25, 0.0])
    c, x = _cx(lib, 2, 4, seed="pow_c", grad=True)
    d, xd = _cx(lib, 4, seed="pow_d", scale=0.5, grad=True)
    p2, ph, pm, pt, pf = c**2, c.pow(0.5), c**-1, c**d, lib.pow(c, 3)
    (_sq(lib, p2) + _wl(lib, ph) + pm.real.sum() + pm.imag.sum() + _wl(lib, pt) + pf.abs().sum()).backward()
    return {
        "sq_edges": e**2,
        "half_edges": e.pow(0.5),
        "int3_edges": lib.pow(e, 3),
        "neg_edges": e.pow(-2)[1:5],
        "p2": p2,
        "ph": ph,
        "pm": pm,
        "pt": pt,
        "pf": pf,
        "p_float": c**1.5,
        "p_one": c**1,
        "gx": x.grad,
        "gxd": xd.grad,
        "dtypes": [p2.dtype, ph.dtype, pt.dtype],
    }


# -- matmul -------------------------------------------------------------------------------


@case(tol=TOL_C)
def matmul(lib: Any) -> Dict[str, Any]:
    a, xa = _cx(lib, 2, 3, seed="mm_a", grad=True)
    b, xb = _cx(lib, 3, 4, seed="mm_b", grad=True)
    r = _r(lib, 3, 4, seed="mm_r", grad=True)
    rb = lib.complex(r, lib.zeros_like(r))
    ab = a @ b
    ar = lib.matmul(a, rb)
    bt, _ = _cx(lib, 2, 2, 3, seed="mm_bt")
    batched = bt @ b.detach()
    mv = a @ b.detach()[:, 0]
    (_sq(lib, ab) + _wl(lib, ar)).backward()
    a64 = a.detach().to(lib.complex128)
    return {
        "ab": ab,
        "ab_dtype": ab.dtype,
        "ar": ar,
        "batched": batched,
        "mv": mv,
        "ga": xa.grad,
        "gb": xb.grad,
        "gr": r.grad,
        "ab64": a64 @ b.detach().to(lib.complex128),
        "ab64_dtype": (a64 @ b.detach().cdouble()).dtype,
        "err_complex_at_real": _err(lambda: a @ r.detach()),
        "err_shape": _err(lambda: a @ a),
    }


# -- reductions ------------------------------------------------------------------------------


@case(tol=TOL_C)
def reductions(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 3, 4, seed="red", grad=True)
    s_all, s0, s1k = c.sum(), c.sum(0), c.sum(1, keepdim=True)
    m_all, m1, m0k = c.mean(), lib.mean(c, 1), c.mean(dim=0, keepdim=True)
    loss = _sq(lib, s0) + _wl(lib, s1k) + s_all.abs() + m_all.real * 3 + _wl(lib, m1) + _sq(lib, m0k) + _sq(lib, lib.sum(c, -1))
    loss.backward()
    return {
        "sum": s_all,
        "sum_shape": s_all.shape,
        "sum0": s0,
        "sum1k": s1k,
        "fn_sum": lib.sum(c),
        "fn_sum_neg": lib.sum(c, -1),
        "sum_tuple": c.sum((0, 1)),
        "mean": m_all,
        "mean1": m1,
        "mean0k": m0k,
        "fn_mean": lib.mean(c),
        "dtypes": [s_all.dtype, m_all.dtype],
        "gx": x.grad,
        "empty_sum": lib.view_as_complex(lib.zeros(0, 2)).sum(),
        "err_implicit_backward": _err(lambda: lib.view_as_complex(lib.ones(3, 2, requires_grad=True)).sum().backward()),
    }


# -- shape ops and indexing -----------------------------------------------------------------


@case()
def shape_ops(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 2, 3, 4, seed="shape", grad=True)
    outs = {
        "reshape": c.reshape(6, 4),
        "fn_reshape": lib.reshape(c, (4, -1)),
        "view": c.view(3, 8),
        "view_flat": c.view(-1),
        "flatten": c.flatten(),
        "flatten12": c.flatten(1, 2),
        "fn_flatten": lib.flatten(c, 0, 1),
        "unsqueeze": c.unsqueeze(1),
        "fn_unsqueeze": lib.unsqueeze(c, -1),
        "squeeze": c[:, :1].squeeze(1),
        "squeeze_all": c[:1, :, :1].squeeze(),
        "fn_squeeze": lib.squeeze(c.unsqueeze(0), 0),
        "transpose": c.transpose(0, 2),
        "fn_transpose": lib.transpose(c, 1, 2),
        "t": c[0].t(),
        "permute": c.permute(2, 0, 1),
        "fn_permute": lib.permute(c, (1, 2, 0)),
        "expand": c[:, :1].expand(2, 3, 4),
        "expand_new": c[0, 0].expand(2, 4),
        "contiguous": c.transpose(0, 1).contiguous(),
        "clone": c.clone(),
        "detach": c.detach(),
    }
    loss = sum(_wl(lib, v) for k, v in outs.items() if k != "detach")
    loss.backward()
    outs.update(
        {
            "gx": x.grad,
            "shape": c.shape,
            "ndim": c.ndim,
            "dim": c.dim(),
            "size": c.size(),
            "size1": c.size(1),
            "size_neg": c.size(-1),
            "numel": c.numel(),
            "t_contig_view": _err(lambda: c.transpose(0, 1).view(-1)),
            "requires_grad": [c.requires_grad, c.detach().requires_grad, c.is_leaf, c.detach().is_leaf],
            "real_of_permuted": lib.view_as_real(c.permute(2, 0, 1)),
        }
    )
    return outs


@case()
def indexing_get(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 3, 4, seed="idx", grad=True)
    mask = lib.tensor([True, False, True])
    idx = lib.tensor([2, 0, 2])
    outs = {
        "row": c[1],
        "elem": c[1, 2],
        "elem_shape": c[1, 2].shape,
        "slice": c[:, 1:],
        "step": c[-1, ::2],
        "none": c[None, :, 1],
        "ellipsis": c[..., 0],
        "mask": c[mask],
        "mask2d": c[c.abs() > 1.0],
        "idx": c[idx],
        "idx_cols": c[:, idx],
        "neg": c[-2:, -1],
    }
    loss = sum(_wl(lib, v) for k, v in outs.items() if k != "elem_shape")
    loss.backward()
    outs["gx"] = x.grad
    outs["err_oob"] = _err(lambda: c[3])
    return outs


@case()
def indexing_set(lib: Any) -> Dict[str, Any]:
    base = lib.arange(24.0).reshape(3, 4, 2) / 8 - 1
    c = lib.view_as_complex(base.clone())
    res: Dict[str, Any] = {}
    c[0] = lib.view_as_complex(lib.tensor([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0], [4.0, -4.0]]))
    res["complex_row"] = c.clone()
    c[:, 1] = lib.tensor([7.0, 8.0, 9.0])
    res["real_col"] = c.clone()
    c[1, 2] = 3 - 4j
    res["py_complex"] = c.clone()
    c[lib.tensor([False, True, True])] = 0.5 + 0.5j
    res["mask_rows"] = c.clone()
    c[lib.tensor([0, 2]), 3] = lib.view_as_complex(lib.tensor([[-1.0, 1.0], [-2.0, 2.0]]))
    res["idx_tensor"] = c.clone()
    c[..., -1] = lib.tensor(2.5)
    res["ellipsis_real0d"] = c.clone()
    c[None, 2, ::2] = 1j
    res["none_step"] = c.clone()
    c[c.abs() < 1] = 0j
    res["mask_elem"] = c.clone()
    res["base_unchanged"] = base
    return res


# -- dtypes and the complex128 path ---------------------------------------------------------


@case()
def dtypes(lib: Any) -> Dict[str, Any]:
    c, _ = _cx(lib, 2, 3, seed="dt")
    c128 = c.to(lib.complex128)
    out: Dict[str, Any] = {}
    for name in ("complex64", "complex128", "cfloat", "cdouble", "float32"):
        d = getattr(lib, name)
        out[name] = [d.is_complex, d.is_floating_point, d.itemsize, d.to_real(), str(d).rsplit(".", 1)[-1], d]
    out.update(
        {
            "aliases": [lib.cfloat == lib.complex64, lib.cdouble == lib.complex128, lib.complex64 == lib.complex128],
            "c_is": [c.is_complex(), c.is_floating_point(), c.dtype.is_complex],
            "c128": c128,
            "c128_dtype": c128.dtype,
            "cdouble": c.cdouble(),
            "cdouble_dtype": c.cdouble().dtype,
            "back_to_64": c128.to(lib.complex64),
            "cfloat_dtype": c128.cfloat().dtype,
            "same": c.to(lib.complex64),
            "real_view_dtype": lib.view_as_real(c128).dtype,
            "real_part_dtype": [c128.real.dtype, c128.imag.dtype, c128.abs().dtype, c128.angle().dtype],
        }
    )
    return out


@case(tol=1e-10)
def complex128_path(lib: Any) -> Dict[str, Any]:
    x = lib.linspace(-2, 2, 12, dtype=lib.float64).reshape(2, 3, 2).requires_grad_()
    c = lib.view_as_complex(x)
    r = lib.linspace(0.5, 1.5, 3, dtype=lib.float64).requires_grad_()
    m = lib.view_as_complex(lib.linspace(-1, 1, 12, dtype=lib.float64).reshape(3, 2, 2))
    out = c.exp() * r + c / lib.complex(r, lib.ones_like(r)) + (c @ m).sum() * 0.1 + c.abs() - c.sqrt() * 1j + c**2
    (_sq(lib, out) + out.log().abs().sum()).backward()
    return {
        "out": out,
        "dtype": out.dtype,
        "gx": x.grad,
        "gx_dtype": x.grad.dtype,
        "gr": r.grad,
        "mm": c @ m,
        "mixed": (c + lib.ones(3)).dtype,
        "mixed_c64": (c + lib.view_as_complex(lib.ones(3, 2))).dtype,
        "mixed_c64_val": c + lib.view_as_complex(lib.ones(3, 2)),
        "angle": c.angle(),
        "sum": c.sum(1),
        "mean": c.mean(),
    }


# -- comparisons and special values -----------------------------------------------------------


@case()
def compare_ops(lib: Any) -> Dict[str, Any]:
    c = _c(lib, [1.0, 2.0, NAN, INF, 0.0, -0.0], [0.0, -1.0, 0.0, 1.0, NAN, 0.0])
    d = _c(lib, [1.0, 2.0, NAN, INF, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0, NAN, -0.0])
    a, _ = _cx(lib, 5, seed="cmp")
    return {
        "eq": c == d,
        "ne": c != d,
        "fn_eq": lib.eq(c, d),
        "fn_ne": lib.ne(c, d),
        "eq_dtype": (c == d).dtype,
        "eq_self": a == a.clone(),
        "isnan": lib.isnan(c),
        "isnan_m": c.isnan(),
        "isinf": lib.isinf(c),
        "isfinite": lib.isfinite(c),
        "allclose_near": lib.allclose(a, a + 1e-7),
        "allclose_far": lib.allclose(a, a + 1e-2j),
        "allclose_broadcast": lib.allclose(a[:1].expand(5), a[0] + a[:1] * 0),
        "allclose_nan": [lib.allclose(c, c), lib.allclose(c, c, equal_nan=True)],
    }


# -- real/imag parts, conj, conversions --------------------------------------------------------


@case()
def real_imag_views(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 2, 3, seed="ri", grad=True)
    lin = c.real.sum() + 2 * c.imag.sum() + (lib.real(c) * lib.imag(c)).sum()
    lin.backward()
    v = lib.view_as_complex(lib.arange(6.0).reshape(3, 2))
    v.real[0] = 9
    v.imag[1:] = lib.tensor([-3.0, -4.0])
    lib.real(v)[2] += 0.5
    f = lib.tensor([1.0, -2.0])
    return {
        "real": c.real,
        "imag": c.imag,
        "fn_real": lib.real(c),
        "fn_imag": lib.imag(c),
        "dtypes": [c.real.dtype, c.imag.dtype],
        "gx": x.grad,
        "v": v,
        "to_float32": v.to(lib.float32),
        "to_float32_dtype": v.to(lib.float32).dtype,
        "to_float64": v.to(lib.float64),
        "real_of_real": lib.real(f),
        "err_imag_of_real": _err(lambda: f.imag),
        "err_fn_imag_of_real": _err(lambda: lib.imag(f)),
    }


@case()
def conj_ops(lib: Any) -> Dict[str, Any]:
    c, x = _cx(lib, 2, 3, seed="conj", grad=True)
    cj = c.conj()
    out = c * lib.conj(c) + lib.conj_physical(c) * 2 + lib.resolve_conj(cj) * (1 + 1j)
    _wl(lib, out).backward()
    f = lib.tensor([1.0, -2.0])
    return {
        # torch marks conj() results with a lazy conjugate bit, which numpy() refuses: resolved
        "conj": cj.resolve_conj(),
        "fn_conj": lib.conj(c).resolve_conj(),
        "conj_physical": lib.conj_physical(c),
        "resolve_conj": lib.resolve_conj(cj),
        "conj_real_view": lib.view_as_real(cj.resolve_conj()),
        "out": out,
        "gx": x.grad,
        "conj_of_real": [lib.conj(f), lib.conj_physical(f), lib.resolve_conj(f)],
        "dtype": cj.dtype,
    }


@case()
def inplace_ops(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 3, 2, 2, seed="inpl")
    c = lib.view_as_complex(x)
    d, _ = _cx(lib, 2, seed="inpl_d")
    res: Dict[str, Any] = {}
    c.mul_(2)
    res["mul_int"] = c.clone()
    c.mul_(d)
    res["mul_c"] = c.clone()
    c.add_(d)
    res["add_c"] = c.clone()
    c.add_(1 - 1j)
    res["add_py"] = c.clone()
    c.sub_(lib.tensor([0.5, -0.5]))
    res["sub_real"] = c.clone()
    c.sub_(d)
    res["sub_c"] = c.clone()
    c.div_(d)
    res["div_c"] = c.clone()
    c.div_(2j)
    res["div_py"] = c.clone()
    c[1].copy_(d)
    res["copy_row"] = c.clone()
    res["base_x"] = x.clone()
    c[2].zero_()
    res["zero_row"] = c.clone()
    c.mul_(c)
    res["self_mul"] = c.clone()
    c.zero_()
    res["zero"] = c
    res["x_after"] = x
    res["ret_is_self"] = c.mul_(3) is c
    return res


@case(tol=TOL_C)
def complex_leaf(lib: Any) -> Dict[str, Any]:
    x = _r(lib, 2, 3, 2, seed="leaf")
    z = lib.view_as_complex(x).detach().requires_grad_()
    a = lib.view_as_complex(_r(lib, 3, 2, seed="leaf_a"))
    out = z * a + z.conj() * 2 - z.exp() * 0.5
    (_sq(lib, out) + z.abs().sum() + (z * z).real.sum()).backward()
    g = z.grad.clone()
    # backward(gradient) of a complex output, accumulating into z.grad
    gz = lib.view_as_complex(lib.linspace(-1, 1, 12).reshape(2, 3, 2))
    y = z * a + z.log()
    y.backward(gz)
    # a complex leaf made by polar: sgn at zero-free points, sqrt, reciprocal
    w = lib.polar(lib.tensor([1.0, 2.0, 0.5]), lib.tensor([0.3, -1.0, 2.5])).requires_grad_()
    q = w.sqrt() + w.reciprocal() + w.sgn() * 3 + w.angle() + w.abs() ** 2
    q.backward(lib.complex(lib.ones(3), lib.zeros(3)))
    return {
        "is_leaf": [z.is_leaf, z.requires_grad, out.is_leaf, out.requires_grad],
        "g": g,
        "g_dtype": z.grad.dtype,
        "g_accum": z.grad.clone(),
        "w_grad": w.grad.clone(),
        "w_leaf": w.is_leaf,
        "q": q,
        "q_dtype": q.dtype,
        "y": y,
        "err_no_gradient": _err(lambda: (z * 2).backward()),
        "err_real_gradient_for_complex": _err(lambda: (z * 2).backward(lib.ones(2, 3))),
    }


@case()
def numpy_tolist_item(lib: Any) -> Dict[str, Any]:
    c, _ = _cx(lib, 2, 3, seed="np")
    a = c.numpy()
    z = lib.view_as_complex(lib.tensor([1.5, -2.25]))
    v = z.item()
    c128 = c.to(lib.complex128)
    return {
        "numpy": np.stack([a.real, a.imag], -1),
        "numpy_dtype": str(a.dtype),
        "numpy128_dtype": str(c128.numpy().dtype),
        "numpy_shape": list(a.shape),
        "tolist": _pairs(c.tolist()),
        "tolist_0d": _pairs(z.tolist()),
        "tolist_type": type(c.tolist()[0][0]).__name__,
        "item": [v.real, v.imag],
        "item_type": type(v).__name__,
        "item_128": _pairs(lib.view_as_complex(lib.tensor([0.1, 0.2], dtype=lib.float64)).item()),
        "err_item_many": _err(lambda: c.item()),
    }
