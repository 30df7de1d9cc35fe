//! Layer norm: rows of `d` normalized in one parallel pass forward and one backward,
//! f32 rows through the `f32_lanes` kernels where the CPU has AVX2 or AVX-512.
use super::*;
use crate::ops::reduce::lane_sum_t;

/// Rows of length `d`: y = (x - mean) * rstd * w + b.
pub(crate) struct LayerNorm {
    pub(crate) d: usize,
    pub(crate) eps: f64,
    /// Per-row (mean, rstd) from the forward, for the backward.
    pub(crate) stats: Mutex<Vec<(f64, f64)>>,
}

/// Mean and biased variance of a row (a layer-norm row, a group-norm group): two
/// passes over cache-resident data.
#[inline(always)]
pub(crate) fn moments<T: Fl>(xs: &[T]) -> (f64, f64) {
    let m = xs.len() as f64;
    let mean = lane_sum_t(xs, |v| v) / m;
    let mt = T::of(mean);
    (mean, lane_sum_t(xs, |v| (v - mt) * (v - mt)) / m)
}

#[inline(always)]
pub(crate) fn ln_rows<T: Fl>(x: &[T], w: &[T], b: &[T], out: &mut [T], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    for ((o, xr), st) in out.chunks_mut(d).zip(x.chunks(d)).zip(stats.iter_mut()) {
        let (mean, var) = moments(xr);
        let rstd = 1.0 / (var + eps).sqrt();
        // Statistics in f64, the row itself in its own dtype (as PyTorch): the f32
        // pass runs 16 lanes wide instead of 8.
        let (m, r) = (T::of(mean), T::of(rstd));
        for (((o, &x), &w), &b) in o.iter_mut().zip(xr).zip(&w[..d]).zip(&b[..d]) {
            *o = (x - m) * r * w + b;
        }
        *st = (mean, rstd);
    }
}

/// `ln_rows` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn ln_rows_avx512<T: Fl>(x: &[T], w: &[T], b: &[T], out: &mut [T], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    ln_rows(x, w, b, out, stats, d, eps)
}

/// `ln_rows` compiled for AVX2 (4 f64 lanes for the statistics, 8 f32 for the row).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn ln_rows_avx2<T: Fl>(x: &[T], w: &[T], b: &[T], out: &mut [T], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    ln_rows(x, w, b, out, stats, d, eps)
}

pub(crate) fn ln_forward<T: Fl>(x: &[T], w: &[T], b: &[T], d: usize, eps: f64) -> (Vec<T>, Vec<(f64, f64)>) {
    let rows = x.len().checked_div(d).unwrap_or(0);
    let mut stats = vec![(0.0, 0.0); rows];
    if d == 0 {
        return (vec![T::of(0.0); x.len()], stats);
    }
    let (wide, avx2) = (crate::ops::cpu::has_avx512(), crate::ops::cpu::has_avx2_fma());
    assert!(w.len() >= d && b.len() >= d, "layer_norm: weight and bias hold the normalized row");
    #[allow(clippy::type_complexity)]
    let run = |(o, (xr, st)): (&mut [T], (&[T], &mut [(f64, f64)]))| {
        if T::ln_rows_simd(xr, w, b, o, st, d, eps) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`: the CPU supports AVX-512F, AVX2 and FMA.
            unsafe { ln_rows_avx512(xr, w, b, o, st, d, eps) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: `avx2` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
            unsafe { ln_rows_avx2(xr, w, b, o, st, d, eps) };
            return;
        }
        let _ = (wide, avx2);
        ln_rows(xr, w, b, o, st, d, eps);
    };
    // Blocks of about 16K elements: a few per thread, each worth a hand-off.
    let block = (16384 / d).max(1);
    // `ln_rows` writes every element of every row before anything reads it.
    let out = crate::ops::parallel::filled_plain(x.len(), |out: &mut [T]| {
        let par = crate::ops::parallel::par_ok(x.len());
        crate::ops::parallel::for_chunks2(out, d * block, &mut stats, block, par, |i, o, st| {
            let xr = &x[i * d * block..i * d * block + o.len()];
            run((o, (xr, st)));
        });
    });
    (out, stats)
}

norm_op3!(
    LayerNorm,
    "layer_norm",
    |me, x, w, b| {
        let (o, stats) = ln_forward(x, w, b, me.d, me.eps);
        *me.stats.lock().unwrap_or_else(|p| p.into_inner()) = stats;
        o
    },
    |xs, ws, gs| {
        let stats = me.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ln_backward(xs, ws, gs, &stats, me.d)
    }
);

/// One task's rows of the layer-norm backward: `dx` for each row, and the task's
/// partial `dw` (sum of g * xhat) and `db` (sum of g) added into `dw`, `db`.
/// The two row sums run in 8 independent f64 lanes (one accumulator would wait on
/// the add latency at every element), so the loops vectorize.
#[inline(always)]
pub(crate) fn ln_bwd_rows<T: Fl>(xc: &[T], gc: &[T], ws: &[T], sc: &[(f64, f64)], dxc: &mut [T], dw: &mut [f64], db: &mut [f64], d: usize) {
    const L: usize = 8;
    let d8 = d / L * L;
    let ws = &ws[..d];
    for (r, &(mean, rstd)) in sc.iter().enumerate() {
        let (xr, gr) = (&xc[r * d..(r + 1) * d], &gc[r * d..(r + 1) * d]);
        let (mut a1, mut a2) = ([0.0f64; L], [0.0f64; L]);
        // Fixed-size chunks: no bounds checks in the loop body, so it vectorizes.
        let chunks = xr[..d8].chunks_exact(L).zip(gr.chunks_exact(L)).zip(ws.chunks_exact(L));
        for ((((xc, gc), wc), dwc), dbc) in chunks.zip(dw.chunks_exact_mut(L)).zip(db.chunks_exact_mut(L)) {
            for l in 0..L {
                let (xh, gv) = ((xc[l].f() - mean) * rstd, gc[l].f());
                let gw = gv * wc[l].f();
                a1[l] += gw;
                a2[l] += gw * xh;
                dwc[l] += gv * xh;
                dbc[l] += gv;
            }
        }
        let (mut s1, mut s2) = (a1.iter().sum::<f64>(), a2.iter().sum::<f64>());
        for j in d8..d {
            let (xh, gv) = ((xr[j].f() - mean) * rstd, gr[j].f());
            let gw = gv * ws[j].f();
            s1 += gw;
            s2 += gw * xh;
            dw[j] += gv * xh;
            db[j] += gv;
        }
        let (m1, m2) = (s1 / d as f64, s2 / d as f64);
        for ((o, &x), (&g, &w)) in dxc[r * d..(r + 1) * d].iter_mut().zip(xr).zip(gr.iter().zip(ws)) {
            let xh = (x.f() - mean) * rstd;
            *o = T::of(rstd * (g.f() * w.f() - m1 - xh * m2));
        }
    }
}

/// `ln_bwd_rows` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn ln_bwd_rows_avx512<T: Fl>(
    xc: &[T],
    gc: &[T],
    ws: &[T],
    sc: &[(f64, f64)],
    dxc: &mut [T],
    dw: &mut [f64],
    db: &mut [f64],
    d: usize,
) {
    ln_bwd_rows(xc, gc, ws, sc, dxc, dw, db, d)
}

/// `ln_bwd_rows` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ln_bwd_rows_avx2<T: Fl>(
    xc: &[T],
    gc: &[T],
    ws: &[T],
    sc: &[(f64, f64)],
    dxc: &mut [T],
    dw: &mut [f64],
    db: &mut [f64],
    d: usize,
) {
    ln_bwd_rows(xc, gc, ws, sc, dxc, dw, db, d)
}

pub(crate) fn ln_backward<T: Fl>(xs: &[T], ws: &[T], gs: &[T], stats: &[(f64, f64)], d: usize) -> (Vec<T>, Vec<T>, Vec<T>) {
    if d == 0 {
        return (vec![T::of(0.0); xs.len()], Vec::new(), Vec::new());
    }
    let rows = xs.len() / d;
    let (wide, avx2) = (crate::ops::cpu::has_avx512(), crate::ops::cpu::has_avx2_fma());
    // A few tasks per thread, each with its own dw/db partial sums (combined after).
    let per = rows.div_ceil(4 * crate::ops::pool::num_threads()).max(16);
    #[allow(clippy::type_complexity)]
    let task = |((dxc, xc), (gc, sc)): ((&mut [T], &[T]), (&[T], &[(f64, f64)]))| {
        let (mut dw, mut db) = (vec![0.0; d], vec![0.0; d]);
        if T::ln_bwd_rows_simd(xc, gc, ws, sc, dxc, &mut dw, &mut db, d) {
            return (dw, db);
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`: the CPU supports AVX-512F, AVX2 and FMA.
            unsafe { ln_bwd_rows_avx512(xc, gc, ws, sc, dxc, &mut dw, &mut db, d) };
            return (dw, db);
        }
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: `avx2` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
            unsafe { ln_bwd_rows_avx2(xc, gc, ws, sc, dxc, &mut dw, &mut db, d) };
            return (dw, db);
        }
        let _ = (wide, avx2);
        ln_bwd_rows(xc, gc, ws, sc, dxc, &mut dw, &mut db, d);
        (dw, db)
    };
    let mut partial: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    // Every row-kernel variant writes each element of its rows: no zero fill (a
    // single-threaded memset of dx was 6% of a layer norm's forward+backward).
    let dx = crate::ops::parallel::filled_plain(xs.len(), |dx| {
        partial = if crate::ops::parallel::par_ok(xs.len()) {
            crate::ops::parallel::map_chunks(dx, d * per, true, |i, dxc| {
                let (a, r0, len) = (i * d * per, i * per, dxc.len());
                task(((dxc, &xs[a..a + len]), (&gs[a..a + len], &stats[r0..r0 + len / d])))
            })
        } else {
            vec![task(((dx, xs), (gs, stats)))]
        };
    });
    let (mut dw, mut db) = (vec![0.0; d], vec![0.0; d]);
    for (pw, pb) in partial {
        for i in 0..d {
            dw[i] += pw[i];
            db[i] += pb[i];
        }
    }
    (dx, dw.into_iter().map(T::of).collect(), db.into_iter().map(T::of).collect())
}
