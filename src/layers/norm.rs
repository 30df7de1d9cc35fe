//! Layer norm and batch norm as fused Candle ops with hand-written backward.
//!
//! Candle's fused layer_norm records no backward, and the same normalization
//! written with broadcast ops spends most of its backward in Candle's
//! single-threaded broadcast reductions (about 9x PyTorch). Here forward and
//! backward are each one parallel pass over rows (layer norm) or channels
//! (batch norm); statistics are accumulated in f64.
//!
//! The fused kernels are CPU code for f32/f64. Other devices and dtypes get
//! the same math from Candle ops (`*_ops` below), which run on every device
//! and carry Candle's backward.
use crate::errors::{shape_err, OpResult};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Storage, Tensor};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::sync::Mutex;

trait Fl: Copy + Send + Sync + 'static + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> {
    fn f(self) -> f64;
    fn of(v: f64) -> Self;
    /// The layer-norm rows through a hand-vectorized kernel where this dtype has one
    /// and the CPU runs it; false when the caller must run the generic `ln_rows`.
    fn ln_rows_simd(_x: &[Self], _w: &[Self], _b: &[Self], _out: &mut [Self], _stats: &mut [(f64, f64)], _d: usize, _eps: f64) -> bool {
        false
    }
    /// `ln_bwd_rows` through a hand-vectorized kernel, as `ln_rows_simd`.
    fn ln_bwd_rows_simd(_xc: &[Self], _gc: &[Self], _ws: &[Self], _sc: &[(f64, f64)], _dxc: &mut [Self], _dw: &mut [f64], _db: &mut [f64], _d: usize) -> bool {
        false
    }
}
impl Fl for f32 {
    #[cfg(target_arch = "x86_64")]
    fn ln_bwd_rows_simd(xc: &[f32], gc: &[f32], ws: &[f32], sc: &[(f64, f64)], dxc: &mut [f32], dw: &mut [f64], db: &mut [f64], d: usize) -> bool {
        if !crate::kernels::has_avx512() {
            return false;
        }
        assert!(xc.len() == sc.len() * d && gc.len() == xc.len() && dxc.len() == xc.len() && ws.len() >= d && dw.len() >= d && db.len() >= d);
        // SAFETY: AVX-512F, AVX2 and FMA were detected; the lengths are checked above.
        unsafe { ln_bwd_rows_f32_avx512(xc, gc, ws, sc, dxc, dw, db, d) };
        true
    }
    #[cfg(target_arch = "x86_64")]
    fn ln_rows_simd(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32], stats: &mut [(f64, f64)], d: usize, eps: f64) -> bool {
        if !crate::kernels::has_avx512() {
            return false;
        }
        // SAFETY: AVX-512F, AVX2 and FMA were detected; the slices hold whole rows of `d`
        // (stats.len() of them) and w, b hold at least `d` (checked by the caller).
        unsafe { ln_rows_f32_avx512(x, w, b, out, stats, d, eps) };
        true
    }
    #[inline(always)]
    fn f(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
}
impl Fl for f64 {
    #[inline(always)]
    fn f(self) -> f64 {
        self
    }
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
}

fn slice<'a, T>(v: &'a [T], l: &Layout) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("norm: expected contiguous inputs"),
    }
}

/// Run `f` on the typed data of three contiguous CPU tensors (x, w, g) of one
/// float dtype, and wrap its three result vectors as tensors shaped like x, w, w.
macro_rules! with_slices {
    ($x:expr, $w:expr, $g:expr, |$xs:ident, $ws:ident, $gs:ident| $body:expr) => {{
        let (x, w, g) = ($x.contiguous()?, $w.contiguous()?, $g.contiguous()?);
        let (sx, lx) = x.storage_and_layout();
        let (sw, lw) = w.storage_and_layout();
        let (sg, lg) = g.storage_and_layout();
        let dev = candle_core::Device::Cpu;
        match (&*sx, &*sw, &*sg) {
            (Storage::Cpu(CpuStorage::F32(a)), Storage::Cpu(CpuStorage::F32(b)), Storage::Cpu(CpuStorage::F32(c))) => {
                let ($xs, $ws, $gs) = (slice(a, lx)?, slice(b, lw)?, slice(c, lg)?);
                let (dx, dw, db) = $body;
                (Tensor::from_vec(dx, x.dims(), &dev)?, Tensor::from_vec(dw, w.dims(), &dev)?, Tensor::from_vec(db, w.dims(), &dev)?)
            }
            (Storage::Cpu(CpuStorage::F64(a)), Storage::Cpu(CpuStorage::F64(b)), Storage::Cpu(CpuStorage::F64(c))) => {
                let ($xs, $ws, $gs) = (slice(a, lx)?, slice(b, lw)?, slice(c, lg)?);
                let (dx, dw, db) = $body;
                (Tensor::from_vec(dx, x.dims(), &dev)?, Tensor::from_vec(dw, w.dims(), &dev)?, Tensor::from_vec(db, w.dims(), &dev)?)
            }
            _ => candle_core::bail!("norm backward: expected float32 or float64 CPU tensors of one dtype"),
        }
    }};
}

/// Rows of length `d`: y = (x - mean) * rstd * w + b.
struct LayerNorm {
    d: usize,
    eps: f64,
    /// Per-row (mean, rstd) from the forward, for the backward.
    stats: Mutex<Vec<(f64, f64)>>,
}

/// Sum of `f(v)` over a row with 32 independent f64 lanes, so the loop vectorizes
/// into four accumulators (one would wait on the add latency every step).
#[inline(always)]
fn lane_sum<T: Fl>(xs: &[T], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; 32];
    let chunks = xs.chunks_exact(32);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..32 {
            acc[k] += f(c[k].f());
        }
    }
    acc.iter().sum::<f64>() + rem.iter().map(|v| f(v.f())).sum::<f64>()
}

#[inline(always)]
fn ln_rows<T: Fl>(x: &[T], w: &[T], b: &[T], out: &mut [T], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    for ((o, xr), st) in out.chunks_mut(d).zip(x.chunks(d)).zip(stats.iter_mut()) {
        let mean = lane_sum(xr, |v| v) / d as f64;
        let var = lane_sum(xr, |v| (v - mean) * (v - mean)) / d as f64;
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn ln_rows_avx512<T: Fl>(x: &[T], w: &[T], b: &[T], out: &mut [T], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    ln_rows(x, w, b, out, stats, d, eps)
}

/// `ln_rows` for f32 with AVX-512: the two statistic passes widen 8 values at a
/// time to f64 (as `ln_rows`, so results match it to rounding), four accumulators
/// deep; the output pass runs 16 f32 lanes with a masked tail. The generic loop
/// leaves the widening scalar, about 2.5x slower at BERT's d = 384.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn ln_rows_f32_avx512(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32], stats: &mut [(f64, f64)], d: usize, eps: f64) {
    use std::arch::x86_64::*;
    let (d32, d8, d16) = (d / 32 * 32, d / 8 * 8, d / 16 * 16);
    let tail = ((1u32 << (d - d16)) - 1) as __mmask16;
    // Sum over a row of g(8 widened values), plus the scalar tail.
    #[inline]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn wsum(xr: *const f32, d: usize, d32: usize, d8: usize, g: impl Fn(__m512d) -> __m512d, gs: impl Fn(f64) -> f64) -> f64 {
        let wide = |i: usize| g(_mm512_cvtps_pd(_mm256_loadu_ps(xr.add(i))));
        let (mut a0, mut a1, mut a2, mut a3) = (_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd());
        let mut i = 0;
        while i < d32 {
            a0 = _mm512_add_pd(a0, wide(i));
            a1 = _mm512_add_pd(a1, wide(i + 8));
            a2 = _mm512_add_pd(a2, wide(i + 16));
            a3 = _mm512_add_pd(a3, wide(i + 24));
            i += 32;
        }
        while i < d8 {
            a0 = _mm512_add_pd(a0, wide(i));
            i += 8;
        }
        let mut s = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
        while i < d {
            s += gs(*xr.add(i) as f64);
            i += 1;
        }
        s
    }
    for (r, st) in stats.iter_mut().enumerate() {
        let xr = x.as_ptr().add(r * d);
        let o = out.as_mut_ptr().add(r * d);
        let mean = wsum(xr, d, d32, d8, |v| v, |v| v) / d as f64;
        let mv = _mm512_set1_pd(mean);
        let var = wsum(xr, d, d32, d8, |v| {
            let c = _mm512_sub_pd(v, mv);
            _mm512_mul_pd(c, c)
        }, |v| (v - mean) * (v - mean)) / d as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        let (m, rs) = (_mm512_set1_ps(mean as f32), _mm512_set1_ps(rstd as f32));
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

fn ln_forward<T: Fl>(x: &[T], w: &[T], b: &[T], d: usize, eps: f64) -> (Vec<T>, Vec<(f64, f64)>) {
    let rows = if d == 0 { 0 } else { x.len() / d };
    let mut stats = vec![(0.0, 0.0); rows];
    if d == 0 {
        return (vec![T::of(0.0); x.len()], stats);
    }
    let wide = crate::kernels::has_avx512();
    assert!(w.len() >= d && b.len() >= d, "layer_norm: weight and bias hold the normalized row");
    let run = |(o, (xr, st)): (&mut [T], (&[T], &mut [(f64, f64)]))| {
        if T::ln_rows_simd(xr, w, b, o, st, d, eps) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU features were detected above.
            unsafe { ln_rows_avx512(xr, w, b, o, st, d, eps) };
            return;
        }
        let _ = wide;
        ln_rows(xr, w, b, o, st, d, eps);
    };
    // Blocks of about 16K elements: a few per thread, each worth a hand-off.
    let block = (16384 / d).max(1);
    // `ln_rows` writes every element of every row before anything reads it.
    let out = crate::parallel::filled_plain(x.len(), |out: &mut [T]| {
        if crate::parallel::par_ok(x.len()) {
            out.par_chunks_mut(d * block).zip(x.par_chunks(d * block).zip(stats.par_chunks_mut(block))).for_each(run);
        } else {
            run((out, (x, &mut stats)));
        }
    });
    (out, stats)
}

impl CustomOp3 for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let (st, stats) = match (s1, s2, s3) {
            (CpuStorage::F32(x), CpuStorage::F32(w), CpuStorage::F32(b)) => {
                let (o, s) = ln_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self.d, self.eps);
                (CpuStorage::F32(o), s)
            }
            (CpuStorage::F64(x), CpuStorage::F64(w), CpuStorage::F64(b)) => {
                let (o, s) = ln_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self.d, self.eps);
                (CpuStorage::F64(o), s)
            }
            _ => candle_core::bail!("layer_norm: input, weight and bias must all be float32 or all float64"),
        };
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = stats;
        Ok((st, l1.shape().clone()))
    }
    fn bwd(&self, x: &Tensor, w: &Tensor, _b: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let d = self.d;
        let (dx, dw, db) = with_slices!(x, w, g, |xs, ws, gs| ln_backward(xs, ws, gs, &stats, d));
        Ok((Some(dx), Some(dw), Some(db)))
    }
}

/// One task's rows of the layer-norm backward: `dx` for each row, and the task's
/// partial `dw` (sum of g * xhat) and `db` (sum of g) added into `dw`, `db`.
/// The two row sums run in 8 independent f64 lanes (one accumulator would wait on
/// the add latency at every element), so the loops vectorize.
#[inline(always)]
fn ln_bwd_rows<T: Fl>(xc: &[T], gc: &[T], ws: &[T], sc: &[(f64, f64)], dxc: &mut [T], dw: &mut [f64], db: &mut [f64], d: usize) {
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn ln_bwd_rows_avx512<T: Fl>(xc: &[T], gc: &[T], ws: &[T], sc: &[(f64, f64)], dxc: &mut [T], dw: &mut [f64], db: &mut [f64], d: usize) {
    ln_bwd_rows(xc, gc, ws, sc, dxc, dw, db, d)
}

/// `ln_bwd_rows` for f32 with AVX-512: 8 values at a time widened to f64, the row
/// sums and the dw/db partials updated with vector FMAs (the generic loop leaves
/// the two row sums scalar).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn ln_bwd_rows_f32_avx512(xc: &[f32], gc: &[f32], ws: &[f32], sc: &[(f64, f64)], dxc: &mut [f32], dw: &mut [f64], db: &mut [f64], d: usize) {
    use std::arch::x86_64::*;
    let d8 = d / 8 * 8;
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

fn ln_backward<T: Fl>(xs: &[T], ws: &[T], gs: &[T], stats: &[(f64, f64)], d: usize) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut dx = vec![T::of(0.0); xs.len()];
    if d == 0 {
        return (dx, Vec::new(), Vec::new());
    }
    let rows = xs.len() / d;
    let wide = crate::kernels::has_avx512();
    // A few tasks per thread, each with its own dw/db partial sums (combined after).
    let per = rows.div_ceil(4 * rayon::current_num_threads()).max(16);
    let task = |((dxc, xc), (gc, sc)): ((&mut [T], &[T]), (&[T], &[(f64, f64)]))| {
        let (mut dw, mut db) = (vec![0.0; d], vec![0.0; d]);
        if T::ln_bwd_rows_simd(xc, gc, ws, sc, dxc, &mut dw, &mut db, d) {
            return (dw, db);
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: the CPU features were detected above.
            unsafe { ln_bwd_rows_avx512(xc, gc, ws, sc, dxc, &mut dw, &mut db, d) };
            return (dw, db);
        }
        let _ = wide;
        ln_bwd_rows(xc, gc, ws, sc, dxc, &mut dw, &mut db, d);
        (dw, db)
    };
    let partial: Vec<(Vec<f64>, Vec<f64>)> = if crate::parallel::par_ok(xs.len()) {
        dx.par_chunks_mut(d * per).zip(xs.par_chunks(d * per)).zip(gs.par_chunks(d * per).zip(stats.par_chunks(per))).map(task).collect()
    } else {
        vec![task(((&mut dx, xs), (gs, stats)))]
    };
    let (mut dw, mut db) = (vec![0.0; d], vec![0.0; d]);
    for (pw, pb) in partial {
        for i in 0..d {
            dw[i] += pw[i];
            db[i] += pb[i];
        }
    }
    (dx, dw.into_iter().map(T::of).collect(), db.into_iter().map(T::of).collect())
}

/// Channels of a (N, C, S) view: y = (x - mean_c) * rstd_c * w_c + b_c with the
/// statistics given (batch statistics in training, running ones in eval).
struct BatchNorm {
    c: usize,
    s: usize,
    mean: Vec<f64>,
    rstd: Vec<f64>,
    /// Statistics came from this batch (their gradient flows), or are constants.
    batch_stats: bool,
}

fn bn_forward<T: Fl>(x: &[T], w: &[T], b: &[T], op: &BatchNorm) -> Vec<T> {
    let mut out = vec![T::of(0.0); x.len()];
    let (c, s) = (op.c, op.s);
    if s == 0 {
        return out;
    }
    out.par_chunks_mut(s).zip(x.par_chunks(s)).enumerate().for_each(|(nc, (o, xr))| {
        let ch = nc % c;
        let (m, r, wv, bv) = (op.mean[ch], op.rstd[ch], w[ch].f(), b[ch].f());
        for (ov, xv) in o.iter_mut().zip(xr) {
            *ov = T::of((xv.f() - m) * r * wv + bv);
        }
    });
    out
}

impl CustomOp3 for BatchNorm {
    fn name(&self) -> &'static str {
        "batch_norm"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        let st = match (s1, s2, s3) {
            (CpuStorage::F32(x), CpuStorage::F32(w), CpuStorage::F32(b)) => CpuStorage::F32(bn_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self)),
            (CpuStorage::F64(x), CpuStorage::F64(w), CpuStorage::F64(b)) => CpuStorage::F64(bn_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self)),
            _ => candle_core::bail!("batch_norm: input, weight and bias must all be float32 or all float64"),
        };
        Ok((st, l1.shape().clone()))
    }
    fn bwd(&self, x: &Tensor, w: &Tensor, _b: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, dw, db) = with_slices!(x, w, g, |xs, ws, gs| bn_backward(xs, ws, gs, self));
        Ok((Some(dx), Some(dw), Some(db)))
    }
}

fn bn_backward<T: Fl>(xs: &[T], ws: &[T], gs: &[T], op: &BatchNorm) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (c, s) = (op.c, op.s);
    let n = if c * s == 0 { 0 } else { xs.len() / (c * s) };
    let m = (n * s) as f64;
    // Per-channel sums of g and g * x_hat.
    let sums: Vec<(f64, f64)> = (0..c)
        .into_par_iter()
        .map(|ch| {
            let (mut sg, mut sgx) = (0.0, 0.0);
            let (mean, rstd) = (op.mean[ch], op.rstd[ch]);
            for i in 0..n {
                let base = (i * c + ch) * s;
                for k in 0..s {
                    let gv = gs[base + k].f();
                    sg += gv;
                    sgx += gv * (xs[base + k].f() - mean) * rstd;
                }
            }
            (sg, sgx)
        })
        .collect();
    let mut dx = vec![T::of(0.0); xs.len()];
    if s > 0 {
        dx.par_chunks_mut(s).enumerate().for_each(|(nc, dr)| {
            let ch = nc % c;
            let base = nc * s;
            let (mean, r, wv, (sg, sgx)) = (op.mean[ch], op.rstd[ch], ws[ch].f(), sums[ch]);
            for k in 0..s {
                let gv = gs[base + k].f();
                dr[k] = T::of(if op.batch_stats {
                    let xh = (xs[base + k].f() - mean) * r;
                    wv * r * (gv - sg / m - xh * sgx / m)
                } else {
                    wv * r * gv
                });
            }
        });
    }
    (dx, sums.iter().map(|p| T::of(p.1)).collect(), sums.iter().map(|p| T::of(p.0)).collect())
}

/// The fused kernels take CPU tensors of one dtype, f32 or f64.
fn fused(ts: &[&Tensor]) -> bool {
    let dt = ts[0].dtype();
    matches!(dt, DType::F32 | DType::F64) && ts.iter().all(|t| t.device().is_cpu() && t.dtype() == dt)
}

/// Layer norm over rows of `d` from Candle ops (any device; mixed devices fail in Candle).
fn layer_norm_ops(x: &Tensor, w: &Tensor, b: &Tensor, d: usize, eps: f64) -> Result<Tensor> {
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (odt, x) = (x.dtype(), &wide(x)?);
    let rows = x.reshape(((), d))?;
    let mean = rows.mean_keepdim(1)?;
    let xc = rows.broadcast_sub(&mean)?;
    let rstd = (xc.sqr()?.mean_keepdim(1)? + eps)?.sqrt()?.recip()?;
    let (w, b) = (w.reshape((1, d))?.to_dtype(x.dtype())?, b.reshape((1, d))?.to_dtype(x.dtype())?);
    xc.broadcast_mul(&rstd)?.broadcast_mul(&w)?.broadcast_add(&b)?.reshape(x.shape())?.to_dtype(odt)
}

/// Half-precision inputs are normalized in f32, as PyTorch does.
fn wide(x: &Tensor) -> Result<Tensor> {
    match x.dtype() {
        DType::F16 | DType::BF16 => x.to_dtype(DType::F32),
        _ => Ok(x.clone()),
    }
}

/// Batch norm over dim 1 from Candle ops. With `batch_stats` the statistics are
/// recomputed from `x` inside the graph, so the gradient flows through them.
fn batch_norm_ops(x: &Tensor, w: &Tensor, b: &Tensor, mean: &Tensor, var: &Tensor, batch_stats: bool, eps: f64) -> Result<Tensor> {
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (odt, x) = (x.dtype(), &wide(x)?);
    let c = x.dims()[1];
    let x3 = x.reshape((x.dims()[0], c, ()))?;
    let (xc, v) = if batch_stats {
        let xc = x3.broadcast_sub(&x3.mean_keepdim(2)?.mean_keepdim(0)?)?;
        let v = xc.sqr()?.mean_keepdim(2)?.mean_keepdim(0)?;
        (xc, v)
    } else {
        let m = mean.detach().reshape((1, c, 1))?.to_dtype(x.dtype())?;
        (x3.broadcast_sub(&m)?, var.detach().reshape((1, c, 1))?.to_dtype(x.dtype())?)
    };
    let rstd = (v + eps)?.sqrt()?.recip()?;
    let (w, b) = (w.reshape((1, c, 1))?.to_dtype(x.dtype())?, b.reshape((1, c, 1))?.to_dtype(x.dtype())?);
    xc.broadcast_mul(&rstd)?.broadcast_mul(&w)?.broadcast_add(&b)?.reshape(x.shape())?.to_dtype(odt)
}

/// `_layer_norm(x, weight, bias, d, eps)`: normalize over the last `d` elements.
#[pyfunction]
fn _layer_norm(py: Python<'_>, x: &Bound<'_, PyTensor>, weight: &Bound<'_, PyTensor>, bias: &Bound<'_, PyTensor>, d: usize, eps: f64) -> PyResult<PyTensor> {
    let (xt, dt) = x.get().t_dt();
    let (w, b) = (weight.get().t(), bias.get().t());
    if w.elem_count() != d || b.elem_count() != d || (d > 0 && xt.elem_count() % d != 0) {
        return Err(shape_err("layer_norm", format!("weight {:?} / bias {:?} do not fit the last {d} elements of input {:?}", w.dims(), b.dims(), xt.dims())));
    }
    if !fused(&[&xt, &w, &b]) {
        let out = crate::errors::detach(py, "layer_norm", || layer_norm_ops(&xt, &w, &b, d, eps).op("layer_norm"))?;
        return Ok(PyTensor::wrap_dt(out, dt));
    }
    let op = LayerNorm { d, eps, stats: Mutex::new(Vec::new()) };
    let out = crate::errors::detach_op(py, "layer_norm", || {
        let (x, w, b) = (xt.contiguous()?, w.flatten_all()?.contiguous()?, b.flatten_all()?.contiguous()?);
        x.apply_op3(&w, &b, op)
    })?;
    Ok(PyTensor::wrap_dt(out, dt))
}

/// `_batch_norm(x, weight, bias, mean, var, batch_stats, eps) -> y` over dim 1 of (N, C, ...).
/// With `batch_stats` the gradient also flows through the statistics (training).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _batch_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: &Bound<'_, PyTensor>,
    mean: &Bound<'_, PyTensor>,
    var: &Bound<'_, PyTensor>,
    batch_stats: bool,
    eps: f64,
) -> PyResult<PyTensor> {
    let (xt, dt) = x.get().t_dt();
    if xt.rank() < 2 {
        return Err(shape_err("batch_norm", format!("expected (N, C, ...) input, got {:?}", xt.dims())));
    }
    let c = xt.dims()[1];
    let s: usize = xt.dims()[2..].iter().product();
    let (w, b) = (weight.get().t(), bias.get().t());
    let (mt, vt) = (mean.get().t(), var.get().t());
    if mt.elem_count() != c || vt.elem_count() != c {
        return Err(shape_err("batch_norm", format!("statistics of {} channels for input {:?}", mt.elem_count(), xt.dims())));
    }
    if !fused(&[&xt, &w, &b]) {
        let out = crate::errors::detach(py, "batch_norm", || batch_norm_ops(&xt, &w, &b, &mt, &vt, batch_stats, eps).op("batch_norm"))?;
        return Ok(PyTensor::wrap_dt(out, dt));
    }
    let to_vec = |t: &Tensor| -> PyResult<Vec<f64>> { t.flatten_all().and_then(|t| t.to_dtype(DType::F64)).and_then(|t| t.to_vec1::<f64>()).op("batch_norm") };
    let (mean_v, var_v) = (to_vec(&mt)?, to_vec(&vt)?);
    let rstd = var_v.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    let op = BatchNorm { c, s, mean: mean_v, rstd, batch_stats };
    let out = crate::errors::detach_op(py, "batch_norm", || xt.contiguous()?.apply_op3(&w.contiguous()?, &b.contiguous()?, op))?;
    Ok(PyTensor::wrap_dt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_batch_norm, m)?)?;
    Ok(())
}
