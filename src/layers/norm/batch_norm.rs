//! Batch norm over dim 1: per-channel statistics in f64, one parallel pass over
//! channels forward and one backward.
use super::*;
use crate::ops::reduce::lane_sum_t;

/// Channels of a (N, C, S) view: y = (x - mean_c) * rstd_c * w_c + b_c with the
/// statistics given (batch statistics in training, running ones in eval).
pub(crate) struct BatchNorm {
    pub(crate) c: usize,
    pub(crate) s: usize,
    pub(crate) mean: Vec<f64>,
    pub(crate) rstd: Vec<f64>,
    /// Statistics came from this batch (their gradient flows), or are constants.
    pub(crate) batch_stats: bool,
}

pub(crate) fn bn_forward<T: Fl>(x: &[T], w: &[T], b: &[T], op: &BatchNorm) -> Vec<T> {
    let (c, s) = (op.c, op.s);
    if s == 0 {
        return vec![T::ZERO; x.len()];
    }
    // Every row is written whole by `scale_shift_fast`: no zero fill.
    crate::ops::parallel::filled_plain(x.len(), |out| {
        crate::ops::parallel::for_chunks(out, s, crate::ops::parallel::par_ok(x.len()), |nc, o| {
            let (ch, xr) = (nc % c, &x[nc * s..(nc + 1) * s]);
            // y = (x - mean) * k + b with k = rstd * w.
            scale_shift_fast(xr, o, op.mean[ch], op.rstd[ch] * w[ch].f(), b[ch].f());
        })
    })
}

// The row kernels compute in the input's precision (as PyTorch's float kernels):
// float32 rows run 16 lanes wide. Sums use 16 independent accumulators (one would
// wait on every add) and are combined in f64; x enters as `x - mean`, so a large
// mean does not cancel away the digits of the result.

/// `o = (x - mean) * k + z` over a row.
#[inline(always)]
fn scale_shift<T: Fl>(x: &[T], o: &mut [T], mean: f64, k: f64, z: f64) {
    let (m, k, z) = (T::of(mean), T::of(k), T::of(z));
    for (ov, &xv) in o.iter_mut().zip(x) {
        *ov = (xv - m) * k + z;
    }
}

/// Sums of `g` and of `g * (x - mean)` over a row.
#[inline(always)]
fn grad_sums<T: Fl>(x: &[T], g: &[T], mean: f64) -> (f64, f64) {
    const L: usize = 16;
    let m = T::of(mean);
    let (mut a, mut b) = ([T::ZERO; L], [T::ZERO; L]);
    let n = x.len() / L * L;
    for (xc, gc) in x[..n].chunks_exact(L).zip(g[..n].chunks_exact(L)) {
        for l in 0..L {
            a[l] += gc[l];
            b[l] += gc[l] * (xc[l] - m);
        }
    }
    let (mut sa, mut sb) = (a.iter().map(|v| v.f()).sum::<f64>(), b.iter().map(|v| v.f()).sum::<f64>());
    for (&xv, &gv) in x[n..].iter().zip(&g[n..]) {
        sa += gv.f();
        sb += (gv * (xv - m)).f();
    }
    (sa, sb)
}

/// `dx = a * g + b * (x - mean) + c` over a row (the statistics' gradient, folded).
#[inline(always)]
fn dx_row<T: Fl>(x: &[T], g: &[T], dx: &mut [T], a: f64, b: f64, mean: f64, c: f64) {
    let (a, b, m, c) = (T::of(a), T::of(b), T::of(mean), T::of(c));
    for ((d, &xv), &gv) in dx.iter_mut().zip(x).zip(g) {
        *d = a * gv + b * (xv - m) + c;
    }
}

/// `scale_shift` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn scale_shift_avx512<T: Fl>(x: &[T], o: &mut [T], mean: f64, k: f64, z: f64) {
    scale_shift(x, o, mean, k, z)
}

/// `scale_shift` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scale_shift_avx2<T: Fl>(x: &[T], o: &mut [T], mean: f64, k: f64, z: f64) {
    scale_shift(x, o, mean, k, z)
}

/// `scale_shift` at the CPU's vector width.
pub(super) fn scale_shift_fast<T: Fl>(x: &[T], o: &mut [T], mean: f64, k: f64, z: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::cpu::has_avx512() {
            // SAFETY: checked just above.
            return unsafe { scale_shift_avx512(x, o, mean, k, z) };
        }
        if crate::ops::cpu::has_avx2_fma() {
            // SAFETY: checked just above.
            return unsafe { scale_shift_avx2(x, o, mean, k, z) };
        }
    }
    scale_shift(x, o, mean, k, z)
}

/// `grad_sums` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn grad_sums_avx512<T: Fl>(x: &[T], g: &[T], mean: f64) -> (f64, f64) {
    grad_sums(x, g, mean)
}

/// `grad_sums` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn grad_sums_avx2<T: Fl>(x: &[T], g: &[T], mean: f64) -> (f64, f64) {
    grad_sums(x, g, mean)
}

/// `grad_sums` at the CPU's vector width.
pub(super) fn grad_sums_fast<T: Fl>(x: &[T], g: &[T], mean: f64) -> (f64, f64) {
    if let Some(sums) = T::grad_sums_simd(x, g, mean) {
        return sums;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::cpu::has_avx512() {
            // SAFETY: checked just above.
            return unsafe { grad_sums_avx512(x, g, mean) };
        }
        if crate::ops::cpu::has_avx2_fma() {
            // SAFETY: checked just above.
            return unsafe { grad_sums_avx2(x, g, mean) };
        }
    }
    grad_sums(x, g, mean)
}

/// `dx_row` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn dx_row_avx512<T: Fl>(x: &[T], g: &[T], dx: &mut [T], a: f64, b: f64, mean: f64, c: f64) {
    dx_row(x, g, dx, a, b, mean, c)
}

/// `dx_row` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dx_row_avx2<T: Fl>(x: &[T], g: &[T], dx: &mut [T], a: f64, b: f64, mean: f64, c: f64) {
    dx_row(x, g, dx, a, b, mean, c)
}

/// `dx_row` at the CPU's vector width.
pub(super) fn dx_row_fast<T: Fl>(x: &[T], g: &[T], dx: &mut [T], a: f64, b: f64, mean: f64, c: f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::ops::cpu::has_avx512() {
            // SAFETY: checked just above.
            return unsafe { dx_row_avx512(x, g, dx, a, b, mean, c) };
        }
        if crate::ops::cpu::has_avx2_fma() {
            // SAFETY: checked just above.
            return unsafe { dx_row_avx2(x, g, dx, a, b, mean, c) };
        }
    }
    dx_row(x, g, dx, a, b, mean, c)
}

norm_op3!(BatchNorm, "batch_norm", |me, x, w, b| bn_forward(x, w, b, me), |xs, ws, gs| bn_backward(xs, ws, gs, me));

pub(crate) fn bn_backward<T: Fl>(xs: &[T], ws: &[T], gs: &[T], op: &BatchNorm) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (c, s) = (op.c, op.s);
    let n = xs.len().checked_div(c * s).unwrap_or(0);
    let m = (n * s) as f64;
    // Per-channel sums of g and g * x_hat.
    let sums: Vec<(f64, f64)> = crate::ops::parallel::map_indices(c, crate::ops::parallel::par_ok(xs.len()), |ch| {
        let (mut sg, mut sgx) = (0.0, 0.0);
        let (mean, rstd) = (op.mean[ch], op.rstd[ch]);
        for i in 0..n {
            let r = (i * c + ch) * s..(i * c + ch + 1) * s;
            let (a, b) = grad_sums_fast(&xs[r.clone()], &gs[r], mean);
            sg += a;
            sgx += b * rstd;
        }
        (sg, sgx)
    });
    if s == 0 {
        return (vec![T::ZERO; xs.len()], sums.iter().map(|p| T::of(p.1)).collect(), sums.iter().map(|p| T::of(p.0)).collect());
    }
    // Every row is written whole by `dx_row_fast`: no zero fill.
    let dx = crate::ops::parallel::filled_plain(xs.len(), |dx| {
        crate::ops::parallel::for_chunks(dx, s, crate::ops::parallel::par_ok(xs.len()), |nc, dr| {
            let ch = nc % c;
            let base = nc * s;
            let (mean, r, wv, (sg, sgx)) = (op.mean[ch], op.rstd[ch], ws[ch].f(), sums[ch]);
            // Batch statistics: w r (g - sg/m - xhat sgx/m), xhat = (x - mean) r, as
            // a * g + b * (x - mean) + c; running statistics: w r g.
            let (a, b, cst) = if op.batch_stats { (wv * r, -wv * r * r * sgx / m, -wv * r * sg / m) } else { (wv * r, 0.0, 0.0) };
            let (xr, gr) = (&xs[base..base + s], &gs[base..base + s]);
            dx_row_fast(xr, gr, dr, a, b, mean, cst);
        })
    });
    (dx, sums.iter().map(|p| T::of(p.1)).collect(), sums.iter().map(|p| T::of(p.0)).collect())
}

/// Per-channel mean and biased variance of a dense (N, C, S) tensor in one parallel
/// pass: each (sample, channel) row gives its sums of `x - k` and `(x - k)^2` about the
/// channel's first value `k` (so large offsets do not cancel), combined in f64.
/// Batch norm's training statistics (PyTorch's `var_mean` over dims (0, 2, ...)).
pub(crate) fn channel_moments<T: Fl>(x: &[T], c: usize, s: usize) -> (Vec<f64>, Vec<f64>) {
    let n = x.len().checked_div(c * s).unwrap_or(0);
    if n == 0 || s == 0 {
        return (vec![f64::NAN; c], vec![f64::NAN; c]);
    }
    let sums: Vec<(f64, f64)> = crate::ops::parallel::map_indices(n * c, crate::ops::parallel::par_ok(x.len()), |nc| {
        let k = x[(nc % c) * s];
        let row = &x[nc * s..(nc + 1) * s];
        (lane_sum_t(row, |v| v - k), lane_sum_t(row, |v| (v - k) * (v - k)))
    });
    let m = (n * s) as f64;
    let (mut mean, mut var) = (vec![0.0; c], vec![0.0; c]);
    for ch in 0..c {
        let (mut s1, mut s2) = (0.0, 0.0);
        for i in 0..n {
            let (a, b) = sums[i * c + ch];
            s1 += a;
            s2 += b;
        }
        let k = x[ch * s].f();
        let d = s1 / m;
        mean[ch] = k + d;
        var[ch] = (s2 / m - d * d).max(0.0);
    }
    (mean, var)
}
