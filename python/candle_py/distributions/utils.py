"""Helpers shared by the distributions (`torch.distributions.utils`): broadcasting of
parameters, probabilities <-> logits, `lazy_property`, and the private samplers and
special functions that candle_py's core lacks (`_standard_gamma` with its implicit
reparameterization gradient, `_gammainc`, `_binomial`), composed of tensor ops."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Sequence, Tuple

from .. import _composed_linalg, _core
from .._core import Tensor
from .._dtype_info import finfo
from .._size import Size
from ..autograd import no_grad
from ..nn import functional as F

__all__ = [
    "broadcast_all",
    "logits_to_probs",
    "clamp_probs",
    "probs_to_logits",
    "lazy_property",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]

euler_constant: float = 0.57721566490153286060  # Euler Mascheroni Constant

_Number = (numbers.Number,)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, Tensor)


def broadcast_all(*values: Any) -> Tuple[Tensor, ...]:
    """Broadcast tensors and numbers to one shape; numbers become tensors of the first
    tensor's dtype (the default dtype when all are numbers)."""
    if not all(isinstance(v, Tensor) or _is_number(v) for v in values):
        raise ValueError("Input arguments must all be instances of Number, torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        dtype = _core.get_default_dtype()
        device = None
        for v in values:
            if isinstance(v, Tensor):
                dtype, device = v.dtype, v.device
                break
        values = tuple(v if isinstance(v, Tensor) else _core.tensor(v, dtype=dtype, device=device) for v in values)
    return _composed_linalg.broadcast_tensors(*values)


def _standard_normal(shape: Sequence[int], dtype: Any, device: Any) -> Tensor:
    return _core.empty(tuple(shape), dtype=dtype, device=device).normal_()


def _sum_rightmost(value: Any, dim: int) -> Any:
    """Sum out the `dim` rightmost dimensions of `value`."""
    if dim == 0:
        return value
    required_shape = tuple(value.shape[:-dim]) + (-1,)
    return value.reshape(required_shape).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Sigmoid of log-odds (binary) or softmax over the last dimension."""
    if is_binary:
        return logits.sigmoid()
    return F.softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped to [eps, 1 - eps] of their dtype."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or log-probabilities of (clamped) probabilities."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access and then stored on the instance (a
    non-data descriptor: `__init__` may assign the attribute instead)."""

    def __init__(self, wrapped: Callable[[Any], Any]) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        from ..autograd import enable_grad

        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_mask(n: int, diag: int, device: Any) -> Tensor:
    arange = _core.arange(n, device=device)
    return arange < arange.view(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular entries of a (batched) square matrix, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The (batched) square lower-triangular matrix holding `vec` in row order."""
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    eps = finfo(vec.dtype).eps
    if round(n) - n > eps:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as "
            + "the lower triangular part of a square D x D matrix."
        )
    m = round(n)
    mask = _tril_mask(m, diag, vec.device).reshape(-1)
    pos = mask.long().cumsum(0) - 1
    idx = _core.where(mask, pos, _core.zeros_like(pos))
    flat = vec.index_select(-1, idx) if vec.shape[-1] else vec.new_zeros(tuple(vec.shape[:-1]) + (m * m,))
    flat = _core.where(mask, flat, _core.zeros_like(flat))
    return flat.reshape(tuple(vec.shape[:-1]) + (m, m))


# -- samplers and special functions the core lacks ----------------------------------------


def _f64(x: Tensor) -> Tensor:
    return x.detach().to(_core.float64)


def _sample_standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) samples (no gradient), Marsaglia and Tsang's method in float64:
    each rejection round draws for the elements still pending; alpha < 1 is boosted
    (Gamma(alpha + 1) * U^(1/alpha)). Results are clamped to the dtype's `tiny`."""
    with no_grad():
        a = _f64(alpha).reshape(-1)
        n = a.numel()
        out = _core.full((n,), math.nan, dtype=_core.float64, device=a.device)
        if n == 0:
            return out.reshape(alpha.shape).to(alpha.dtype)
        small = a < 1
        a1 = _core.where(small, a + 1, a)
        d = a1 - 1.0 / 3.0
        c = 1.0 / (9.0 * d).sqrt()
        valid = (a > 0) & (a < math.inf)
        out = _core.where(a == math.inf, _core.full_like(out, math.inf), out)
        out = _core.where(a == 0, _core.zeros_like(out), out)
        pending = _core.arange(n, device=a.device)[valid]
        rounds = 0
        while pending.numel() > 0:
            rounds += 1
            if rounds > 10000:  # pragma: no cover - acceptance is above 95% per round
                raise RuntimeError("_standard_gamma: rejection sampling did not finish")
            dp, cp_ = d[pending], c[pending]
            z = _core.randn(pending.numel(), dtype=_core.float64, device=a.device)
            u = _core.rand(pending.numel(), dtype=_core.float64, device=a.device)
            v = (1 + cp_ * z) ** 3
            vpos = v > 0
            logv = _core.where(vpos, v, _core.ones_like(v)).log()
            ok = vpos & (u.log() < 0.5 * z * z + dp - dp * v + dp * logv)
            if bool(ok.any()):
                out[pending[ok]] = (dp * v)[ok]
            pending = pending[~ok]
        if bool(small.any()):
            u = _core.rand(n, dtype=_core.float64, device=a.device)
            boosted = (out.log() + u.log() / a).exp()
            out = _core.where(small & valid, boosted, out)
        res = out.reshape(alpha.shape).to(alpha.dtype)
        tiny = finfo(alpha.dtype).tiny
        return _core.where(res < tiny, _core.full_like(res, tiny), res)


def _standard_gamma_grad(alpha: Tensor, x: Tensor) -> Tensor:
    """d x / d alpha of a Gamma(alpha, 1) sample x at fixed CDF (implicit
    reparameterization): -(dP(alpha, x)/dalpha) / p(x; alpha), where P is the
    regularized lower incomplete gamma function. Its series
    P = x^a e^-x sum_n x^n / Gamma(a + n + 1), differentiated term by term, gives
    -sum_n [x^(n+1) Gamma(a) / Gamma(a + n + 1)] (log x - digamma(a + n + 1)), summed in
    float64 by recurrence, each element until its terms vanish; for alpha > 1000 the Wilson-Hilferty
    approximation x = a (1 - 1/(9a) + z / (3 sqrt(a)))^3 is differentiated at fixed z."""
    with no_grad():
        a, xx = _composed_linalg.broadcast_tensors(_f64(alpha), _f64(x))
        shape, dtype = a.shape, x.dtype
        a, xx = a.reshape(-1), xx.reshape(-1)
        if a.numel() == 0:
            return _core.zeros(tuple(shape), dtype=dtype, device=x.device)
        big = a > 1000
        a_s = _core.where(big, _core.ones_like(a), a)
        xpos = xx > 0
        x_s = _core.where(xpos & ~big, xx, _core.ones_like(xx))
        logx = x_s.log()
        psi_a = a_s.digamma()
        # the n = 0 term, then the recurrence r_n = r_(n-1) x / (a + n),
        # h_n = h_(n-1) + 1 / (a + n) (digamma(a + n + 1) = digamma(a) + h_n); the elements
        # whose terms have vanished past the peak n = x - a leave the loop
        acc = _core.zeros_like(a_s)
        idx = _core.arange(a_s.numel(), device=a.device)[~big & xpos]
        aa, xx_, lx, ps = a_s[idx], x_s[idx], logx[idx], psi_a[idx]
        r = xx_ / aa
        h = 1.0 / aa
        sub = r * (lx - ps - h)
        mag = sub.abs()
        n = 1
        while idx.numel() > 0 and n < 1_000_000:
            for _ in range(16):
                ak = aa + n
                r = r * xx_ / ak
                h = h + 1.0 / ak
                term = r * (lx - ps - h)
                sub = sub + term
                mag = mag + term.abs()
                n += 1
            done = (aa + n > xx_) & (r * ((lx - ps - h).abs() + 1) <= 1e-17 * mag)
            if bool(done.any()):
                acc[idx[done]] = sub[done]
                keep = ~done
                idx, aa, xx_, lx, ps, r, h, sub, mag = (t[keep] for t in (idx, aa, xx_, lx, ps, r, h, sub, mag))
        grad = -acc
        # Wilson-Hilferty for large alpha
        ab = _core.where(big, a, _core.full_like(a, 2000.0))
        xb = _core.where(big & xpos, xx, ab)
        w = (xb / ab) ** (1.0 / 3.0)
        z = (w - 1 + 1 / (9 * ab)) * 3 * ab.sqrt()
        dw = 1 / (9 * ab * ab) - z / (6 * ab**1.5)
        grad_big = w**3 + 3 * ab * w * w * dw
        grad = _core.where(big, grad_big, grad)
        grad = _core.where(xpos, grad, _core.zeros_like(grad))
        grad = _core.where(grad == grad, grad, _core.zeros_like(grad))
        return grad.reshape(tuple(shape)).to(dtype)


def _standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) samples; differentiable in alpha through the implicit
    reparameterization gradient (`_standard_gamma_grad`), as torch._standard_gamma."""
    x = _sample_standard_gamma(alpha)
    if _core.is_grad_enabled() and alpha.requires_grad:
        g = _standard_gamma_grad(alpha, x)
        x = x + (alpha - alpha.detach()) * g
    return x


def _gammainc(a: Tensor, x: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function P(a, x) (`torch.special.gammainc`):
    its series below x = a + 1, Lentz's continued fraction of Q = 1 - P above, in float64.
    Differentiable in x (the Gamma density); no gradient flows to a (PyTorch has none)."""
    a, x = _composed_linalg.broadcast_tensors(a, x)
    dtype = x.dtype if x.is_floating_point() else a.dtype
    with no_grad():
        a64, x64 = _f64(a), _f64(x)
        ok = (a64 > 0) & (x64 >= 0)
        aa = _core.where(ok, a64, _core.ones_like(a64))
        use_series = x64 < aa + 1
        # series: P = x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n)), for x < a + 1
        xs = _core.where(ok & use_series, x64, _core.zeros_like(x64))
        term = 1.0 / aa
        ssum = term
        ap = aa
        for _ in range(100_000):
            ap = ap + 1
            term = term * xs / ap
            ssum = ssum + term
            if not bool((term > ssum * 1e-17).any()):
                break
        log_pre_s = aa * xs.clamp(min=1e-300).log() - xs - aa.lgamma()
        p_series = (log_pre_s + ssum.log()).exp()
        # Lentz's continued fraction for Q = 1 - P, for x >= a + 1
        xc = _core.where(ok & ~use_series, x64, aa + 2)
        fpmin = 1e-300
        b = xc + 1 - aa
        cc = _core.full_like(xc, 1.0 / fpmin)
        dd = 1.0 / b
        h = dd
        for i in range(1, 100_000):
            an = -i * (i - aa)
            b = b + 2
            dd = an * dd + b
            dd = _core.where(dd.abs() < fpmin, _core.full_like(dd, fpmin), dd)
            cc = b + an / cc
            cc = _core.where(cc.abs() < fpmin, _core.full_like(cc, fpmin), cc)
            dd = 1.0 / dd
            delta = dd * cc
            h = h * delta
            if not bool(((delta - 1).abs() > 1e-15).any()):
                break
        log_pre_c = aa * xc.log() - xc - aa.lgamma()
        q_cf = (log_pre_c + h.log()).exp()
        p = _core.where(use_series, p_series, 1 - q_cf)
        p = _core.where(x64 == 0, _core.zeros_like(p), p)
        p = _core.where(x64 == math.inf, _core.ones_like(p), p)
        p = _core.where(ok | ((x64 == math.inf) & (a64 > 0)), p, _core.full_like(p, math.nan))
        p = p.to(dtype)
    if _core.is_grad_enabled() and x.requires_grad:
        with no_grad():
            xd = _core.where(ok & (x64 > 0), x64, _core.ones_like(x64))
            dens = ((aa - 1) * xd.log() - xd - aa.lgamma()).exp()
            dens = _core.where(ok & (x64 > 0), dens, _core.zeros_like(dens)).to(dtype)
        p = p + (x - x.detach()) * dens
    return p


def _binomial(count: Tensor, prob: Tensor) -> Tensor:
    """Binomial(count, prob) samples (no gradient), in float64: inversion by geometric
    waiting times where count * min(p, 1 - p) < 10, Hormann's BTRS rejection elsewhere
    (each round draws for the elements still pending); p > 0.5 is sampled as
    count - Binomial(count, 1 - p)."""
    with no_grad():
        n64, p64 = _composed_linalg.broadcast_tensors(_f64(count), _f64(prob))
        shape = n64.shape
        n64, p64 = n64.reshape(-1), p64.reshape(-1)
        size = n64.numel()
        out = _core.zeros(size, dtype=_core.float64, device=n64.device)
        if size == 0:
            return out.reshape(tuple(shape)).to(prob.dtype)
        flip = p64 > 0.5
        q = _core.where(flip, 1 - p64, p64)
        valid = (n64 >= 0) & (q >= 0) & (q <= 0.5) & (n64 < math.inf)
        trivial = (q == 0) | (n64 == 0)
        use_inv = valid & ~trivial & (n64 * q < 10)
        use_btrs = valid & ~trivial & ~use_inv
        dev = n64.device
        # inversion: count geometric waiting times until their sum exceeds n
        idx = _core.arange(size, device=dev)[use_inv]
        if idx.numel():
            nn, lq = n64[idx], (-q[idx]).log1p()
            gsum = _core.zeros_like(nn)
            cnt = _core.zeros_like(nn)
            live = _core.ones_like(nn).bool()
            while bool(live.any()):
                u = _core.rand(nn.numel(), dtype=_core.float64, device=dev)
                geom = (u.log() / lq).ceil()
                gsum = gsum + _core.where(live, geom, _core.zeros_like(geom))
                stop = live & (gsum > nn)
                cnt = cnt + (live & ~stop).double()
                live = live & ~stop
            out[idx] = cnt
        idx = _core.arange(size, device=dev)[use_btrs]
        if idx.numel():
            nn, pp = n64[idx], q[idx]
            qq = 1 - pp
            spq = (nn * pp * qq).sqrt()
            b = 1.15 + 2.53 * spq
            a = -0.0873 + 0.0248 * b + 0.01 * pp
            c = nn * pp + 0.5
            v_r = 0.92 - 4.2 / b
            alpha = (2.83 + 5.1 / b) * spq
            lpq = (pp / qq).log()
            m = ((nn + 1) * pp).floor()
            h = (m + 1).lgamma() + (nn - m + 1).lgamma()
            res = _core.zeros_like(nn)
            pending = _core.arange(nn.numel(), device=dev)
            rounds = 0
            while pending.numel() > 0:
                rounds += 1
                if rounds > 10000:  # pragma: no cover
                    raise RuntimeError("binomial: rejection sampling did not finish")
                u = _core.rand(pending.numel(), dtype=_core.float64, device=dev) - 0.5
                v = _core.rand(pending.numel(), dtype=_core.float64, device=dev)
                us = 0.5 - u.abs()
                ap, bp, cp_, np_ = a[pending], b[pending], c[pending], nn[pending]
                k = ((2 * ap / us + bp) * u + cp_).floor()
                inside = (k >= 0) & (k <= np_)
                quick = inside & (us >= 0.07) & (v <= v_r[pending])
                ks = _core.where(inside, k, _core.zeros_like(k))
                lv = (v * alpha[pending] / (ap / (us * us) + bp)).log()
                bound = h[pending] - (ks + 1).lgamma() - (np_ - ks + 1).lgamma() + (ks - m[pending]) * lpq[pending]
                ok = quick | (inside & (lv <= bound))
                if bool(ok.any()):
                    res[pending[ok]] = k[ok]
                pending = pending[~ok]
            out[idx] = res
        out = _core.where(flip, n64 - out, out)
        out = _core.where(trivial & valid, _core.where(flip, n64, _core.zeros_like(n64)), out)
        out = _core.where(valid, out, _core.full_like(out, math.nan))
        return out.reshape(tuple(shape)).to(prob.dtype)


def _as_size(sample_shape: Any) -> Size:
    if isinstance(sample_shape, Size):
        return sample_shape
    if isinstance(sample_shape, int):
        return Size((sample_shape,))
    return Size(tuple(sample_shape))


def _optional_tensor(v: Optional[Any]) -> Optional[Tensor]:
    return v if v is None or isinstance(v, Tensor) else _core.tensor(v)
