//! Layer norm: rows of `d` normalized in one parallel pass forward and one backward,
//! f32 rows through AVX-512 kernels where the CPU has them.
use super::*;
use crate::ops::reduce::lane_sum_t;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

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

/// Sum over a row of `g(accumulator, 16 values)` in 4 x 16 f32 lanes folded in f64
/// (masked tail lanes are 0 before g, so g must map 0 to 0 there: the caller
/// passes `tail_g` for the tail).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA; `xr` must point to `d` readable
/// floats, with `d64 = d / 64 * 64`, `d16 = d / 16 * 16` and `tail` the mask of
/// lanes `d16..d`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn lanes_sum(
    xr: *const f32,
    (d64, d16, tail): (usize, usize, __mmask16),
    g: impl Fn(__m512, __m512) -> __m512,
    tail_g: impl Fn(__m512, __m512) -> __m512,
) -> f64 {
    // SAFETY: the 16-wide loads start at i with i + 16 <= d16 <= d (i + 64 <= d64 in
    // the unrolled loop); the masked load reads only lanes d16..d: all inside the row.
    unsafe {
        let z = _mm512_setzero_ps();
        let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
        let mut i = 0;
        while i < d64 {
            a0 = g(a0, _mm512_loadu_ps(xr.add(i)));
            a1 = g(a1, _mm512_loadu_ps(xr.add(i + 16)));
            a2 = g(a2, _mm512_loadu_ps(xr.add(i + 32)));
            a3 = g(a3, _mm512_loadu_ps(xr.add(i + 48)));
            i += 64;
        }
        while i < d16 {
            a0 = g(a0, _mm512_loadu_ps(xr.add(i)));
            i += 16;
        }
        if tail != 0 {
            a1 = tail_g(a1, _mm512_maskz_loadu_ps(tail, xr.add(d16)));
        }
        // Fold in f64: 2 x 8 lanes per accumulator.
        let wide = |v: __m512| {
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            _mm512_add_pd(lo, hi)
        };
        _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(wide(a0), wide(a1)), _mm512_add_pd(wide(a2), wide(a3))))
    }
}

/// Mean and biased variance of a long f32 run (a group-norm group) in one pass over
/// memory: each block of 4096 (in L1 after its first read) gets its own two-pass
/// moments in f32 lanes (`lanes_sum`, as torch's vectorized moments run in f32), and
/// the blocks are merged in f64 by Chan's formula. Two passes over the whole group
/// read it twice from L2/L3: GroupNorm(8, 64) on 8x64x56x56 ran its forward in
/// 1.08-1.14x torch's time so, 0.88-0.99x with one.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn moments_f32_avx512(xs: &[f32]) -> (f64, f64) {
    let (mut n, mut mean, mut m2) = (0.0f64, 0.0f64, 0.0f64);
    for blk in xs.chunks(4096) {
        let d = blk.len();
        let shape = (d / 64 * 64, d / 16 * 16, ((1u32 << (d % 16)) - 1) as __mmask16);
        let add = |a: __m512, v: __m512| _mm512_add_ps(a, v);
        // SAFETY (both calls): the CPU features are the caller's; `blk` holds d floats
        // and `shape` is d's.
        let mb = unsafe { lanes_sum(blk.as_ptr(), shape, add, add) } / d as f64;
        let mv = _mm512_set1_ps(mb as f32);
        let sq = |a: __m512, v: __m512| {
            let c = _mm512_sub_ps(v, mv);
            _mm512_fmadd_ps(c, c, a)
        };
        // Tail lanes were loaded as 0: their deviation is masked off.
        let sq_tail = |a: __m512, v: __m512| {
            let c = _mm512_maskz_sub_ps(shape.2, v, mv);
            _mm512_fmadd_ps(c, c, a)
        };
        let m2b = unsafe { lanes_sum(blk.as_ptr(), shape, sq, sq_tail) };
        let (nb, tot) = (d as f64, n + d as f64);
        let delta = mb - mean;
        mean += delta * nb / tot;
        m2 += m2b + delta * delta * n * nb / tot;
        n = tot;
    }
    (mean, m2 / n.max(1.0))
}

/// `ln_rows` for f32 with AVX-512: the two statistic passes (the sum, then the sum
/// of squared deviations from the mean) run in f32, 4 x 16 lanes (so each lane sums
/// a 64th of the row) folded in f64, as PyTorch's vectorized moments run in f32;
/// widening every value to f64 (as `ln_rows`) made the statistics cost more than the
/// row's memory traffic (a (512, 768) block in cache took 1.4x torch's time). The
/// output pass runs 16 f32 lanes; tails are masked.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA. `x` and `out` must hold at least
/// `stats.len() * d` floats (whole rows), `w` and `b` at least `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn ln_rows_f32_avx512(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    use std::arch::x86_64::*;
    let (d64, d16) = (d / 64 * 64, d / 16 * 16);
    let tail = ((1u32 << (d - d16)) - 1) as __mmask16;
    let shape = (d64, d16, tail);
    // SAFETY: the CPU features are the caller's; for row r < stats.len(), `xr` / `o` are
    // row r of `x` / `out` (both hold stats.len() * d floats), so `lanes_sum` reads d
    // floats there; the 16-wide loads and stores run at i + 16 <= d16 <= d inside row r
    // and the first d of `w` and `b`; the tail mask enables only lanes d16..d.
    unsafe {
        for (r, st) in stats.iter_mut().enumerate() {
            let xr = x.as_ptr().add(r * d);
            let o = out.as_mut_ptr().add(r * d);
            let add = |a: __m512, v: __m512| _mm512_add_ps(a, v);
            let mean = lanes_sum(xr, shape, add, add) / d as f64;
            let mv = _mm512_set1_ps(mean as f32);
            let sq = |a: __m512, v: __m512| {
                let c = _mm512_sub_ps(v, mv);
                _mm512_fmadd_ps(c, c, a)
            };
            // Tail lanes past d were loaded as 0: their deviation is masked off.
            let sq_tail = |a: __m512, v: __m512| {
                let c = _mm512_maskz_sub_ps(tail, v, mv);
                _mm512_fmadd_ps(c, c, a)
            };
            let var = lanes_sum(xr, shape, sq, sq_tail) / d as f64;
            let rstd = 1.0 / (var + eps).sqrt();
            let (m, rs) = (mv, _mm512_set1_ps(rstd as f32));
            let row = |v: __m512, wv: __m512, bv: __m512| _mm512_fmadd_ps(_mm512_mul_ps(_mm512_sub_ps(v, m), rs), wv, bv);
            let mut i = 0;
            while i < d16 {
                let y = row(_mm512_loadu_ps(xr.add(i)), _mm512_loadu_ps(w.as_ptr().add(i)), _mm512_loadu_ps(b.as_ptr().add(i)));
                _mm512_storeu_ps(o.add(i), y);
                i += 16;
            }
            if tail != 0 {
                let ld = |p: *const f32| _mm512_maskz_loadu_ps(tail, p.add(d16));
                _mm512_mask_storeu_ps(o.add(d16), tail, row(ld(xr), ld(w.as_ptr()), ld(b.as_ptr())));
            }
            *st = (mean, rstd);
        }
    }
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

/// `ln_bwd_rows` for f32 with AVX-512: 8 values at a time widened to f64, the row
/// sums and the dw/db partials updated with vector FMAs (the generic loop leaves
/// the two row sums scalar).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA. `xc`, `gc` and `dxc` must hold at least
/// `sc.len() * d` floats (whole rows), `ws`, `dw` and `db` at least `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn ln_bwd_rows_f32_avx512(
    xc: &[f32],
    gc: &[f32],
    ws: &[f32],
    sc: &[(f64, f64)],
    dxc: &mut [f32],
    dw: &mut [f64],
    db: &mut [f64],
    d: usize,
) {
    use std::arch::x86_64::*;
    let d8 = d / 8 * 8;
    // SAFETY: the CPU features are the caller's; for row r < sc.len(), `xr`, `gr`, `o` are
    // row r of `xc`, `gc`, `dxc` (sc.len() * d floats each), and `w`, `dwp`, `dbp` the
    // first d of `ws`, `dw`, `db`: the 8-wide accesses run at i + 8 <= d8 <= d and the
    // scalar ones at j < d, all inside those rows.
    unsafe {
        let (w, dwp, dbp) = (ws.as_ptr(), dw.as_mut_ptr(), db.as_mut_ptr());
        let wide = |p: *const f32| _mm512_cvtps_pd(_mm256_loadu_ps(p));
        for (r, &(mean, rstd)) in sc.iter().enumerate() {
            let (xr, gr, o) = (xc.as_ptr().add(r * d), gc.as_ptr().add(r * d), dxc.as_mut_ptr().add(r * d));
            let (mv, rv) = (_mm512_set1_pd(mean), _mm512_set1_pd(rstd));
            let (mut a1, mut a2) = (_mm512_setzero_pd(), _mm512_setzero_pd());
            let mut i = 0;
            while i < d8 {
                let xh = _mm512_mul_pd(_mm512_sub_pd(wide(xr.add(i)), mv), rv);
                let gv = wide(gr.add(i));
                let gw = _mm512_mul_pd(gv, wide(w.add(i)));
                a1 = _mm512_add_pd(a1, gw);
                a2 = _mm512_fmadd_pd(gw, xh, a2);
                _mm512_storeu_pd(dwp.add(i), _mm512_fmadd_pd(gv, xh, _mm512_loadu_pd(dwp.add(i))));
                _mm512_storeu_pd(dbp.add(i), _mm512_add_pd(gv, _mm512_loadu_pd(dbp.add(i))));
                i += 8;
            }
            let (mut s1, mut s2) = (_mm512_reduce_add_pd(a1), _mm512_reduce_add_pd(a2));
            for j in d8..d {
                let (xh, gv) = ((*xr.add(j) as f64 - mean) * rstd, *gr.add(j) as f64);
                let gw = gv * *w.add(j) as f64;
                s1 += gw;
                s2 += gw * xh;
                *dwp.add(j) += gv * xh;
                *dbp.add(j) += gv;
            }
            let (m1, m2) = (s1 / d as f64, s2 / d as f64);
            let (m1v, m2v) = (_mm512_set1_pd(m1), _mm512_set1_pd(m2));
            let mut i = 0;
            while i < d8 {
                let xh = _mm512_mul_pd(_mm512_sub_pd(wide(xr.add(i)), mv), rv);
                let t = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(wide(gr.add(i)), wide(w.add(i))), m1v), _mm512_mul_pd(xh, m2v));
                _mm256_storeu_ps(o.add(i), _mm512_cvtpd_ps(_mm512_mul_pd(rv, t)));
                i += 8;
            }
            for j in d8..d {
                let xh = (*xr.add(j) as f64 - mean) * rstd;
                *o.add(j) = (rstd * (*gr.add(j) as f64 * *w.add(j) as f64 - m1 - xh * m2)) as f32;
            }
        }
    }
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
