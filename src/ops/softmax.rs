//! Softmax and log-softmax over any dim as one Candle custom op with its
//! backward: rows in parallel, the exp loop compiled for AVX2/AVX-512 and picked
//! at run time. Other devices and dtypes get the same math from Candle's ops.
use super::cpu::{has_avx2_fma, has_avx512};
use super::float::Float;
use super::reduce::{fast_path, max_slice, split, GRAIN};
use crate::ops::layout::Dense;
use crate::ops::parallel::filled_plain;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};

/// The sum of 16 lanes, halves onto halves (constant trip counts, so it stays in
/// registers): a running sum over the lanes is a chain of dependent adds per row.
#[inline(always)]
fn fold16<T: Float>(mut acc: [T; 16]) -> T {
    for k in 0..8 {
        acc[k] += acc[k + 8];
    }
    for k in 0..4 {
        acc[k] += acc[k + 4];
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3])
}

#[inline(always)]
fn softmax_row<T: Float, const FMA: bool>(src: &[T], dst: &mut [T], log: bool) {
    let m = max_slice(src);
    // The exps summed as they are written (16 lanes, the tail's elements into lanes of
    // their own): no second pass reading them back, one fold per row.
    let mut acc = [T::ZERO; 16];
    let mut dc = dst.chunks_exact_mut(16);
    let mut sc = src.chunks_exact(16);
    for (d, s) in (&mut dc).zip(&mut sc) {
        for k in 0..16 {
            let e = (s[k] - m).exp::<FMA>();
            d[k] = e;
            acc[k] += e;
        }
    }
    for (k, (d, &v)) in dc.into_remainder().iter_mut().zip(sc.remainder()).enumerate() {
        let e = (v - m).exp::<FMA>();
        *d = e;
        acc[k] += e;
    }
    let s = fold16(acc);
    if log {
        let ls = s.ln();
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = v - m - ls;
        }
    } else {
        // One division per row, a product per element (a vector division costs
        // several products' time); the result moves by at most one rounding.
        let inv = T::ONE / s;
        for d in dst.iter_mut() {
            *d *= inv;
        }
    }
}

#[inline(always)]
fn rows_chunk<T: Float, const FMA: bool>(s: &[T], d: &mut [T], n: usize, log: bool) {
    for (dr, sr) in d.chunks_mut(n).zip(s.chunks(n)) {
        softmax_row::<T, FMA>(sr, dr, log);
    }
}

/// The same loop compiled for AVX2+FMA, picked at run time so the wheel stays portable.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_chunk_avx2<T: Float>(s: &[T], d: &mut [T], n: usize, log: bool) {
    rows_chunk::<T, true>(s, d, n, log)
}

/// The same loop compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_chunk_avx512<T: Float>(s: &[T], d: &mut [T], n: usize, log: bool) {
    rows_chunk::<T, true>(s, d, n, log)
}

fn softmax_rows<T: Float>(src: &[T], dst: &mut [T], n: usize, log: bool) {
    let per = (GRAIN / n.max(1)).max(1);
    let simd = has_avx2_fma();
    let wide = has_avx512();
    crate::ops::parallel::for_chunks(dst, per * n, true, |i, d| {
        let s = &src[i * per * n..i * per * n + d.len()];
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`: the CPU supports AVX-512F, AVX2 and FMA.
            unsafe { rows_chunk_avx512(s, d, n, log) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: `simd` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
            unsafe { rows_chunk_avx2(s, d, n, log) };
            return;
        }
        let _ = (simd, wide);
        rows_chunk::<T, false>(s, d, n, log);
    });
}

/// One (outer) block of a softmax over a middle dim: an r x inner matrix reduced over
/// r, every pass along the contiguous inner rows (`m` and `sum` are inner-long scratch).
#[inline(always)]
fn strided_block<T: Float, const FMA: bool>(s: &[T], d: &mut [T], r: usize, inner: usize, log: bool, m: &mut [T], sum: &mut [T]) {
    m.fill(T::NEG_INF);
    for row in s.chunks_exact(inner).take(r) {
        for (mj, &v) in m.iter_mut().zip(row) {
            *mj = mj.maximum(v);
        }
    }
    sum.fill(T::ZERO);
    for (row, out) in s.chunks_exact(inner).zip(d.chunks_exact_mut(inner)).take(r) {
        for (((o, &v), &mj), sj) in out.iter_mut().zip(row).zip(m.iter()).zip(sum.iter_mut()) {
            let e = (v - mj).exp::<FMA>();
            *o = e;
            *sj += e;
        }
    }
    // `log` tested outside the loops, which then vectorize over the inner rows.
    if log {
        for sj in sum.iter_mut() {
            *sj = sj.ln();
        }
        for (row, out) in s.chunks_exact(inner).zip(d.chunks_exact_mut(inner)).take(r) {
            for (((o, &v), &mj), &ls) in out.iter_mut().zip(row).zip(m.iter()).zip(sum.iter()) {
                *o = v - mj - ls;
            }
        }
    } else {
        for sj in sum.iter_mut() {
            *sj = T::ONE / *sj;
        }
        for out in d.chunks_exact_mut(inner).take(r) {
            for (o, &inv) in out.iter_mut().zip(sum.iter()) {
                *o *= inv;
            }
        }
    }
}

/// `strided_block` compiled for AVX2+FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn strided_block_avx2<T: Float>(s: &[T], d: &mut [T], r: usize, inner: usize, log: bool, m: &mut [T], sum: &mut [T]) {
    strided_block::<T, true>(s, d, r, inner, log, m, sum)
}

/// `strided_block` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn strided_block_avx512<T: Float>(s: &[T], d: &mut [T], r: usize, inner: usize, log: bool, m: &mut [T], sum: &mut [T]) {
    strided_block::<T, true>(s, d, r, inner, log, m, sum)
}

/// Softmax over a middle dim: each (outer) block is an r x inner matrix, reduced over r.
/// The block's passes run along its contiguous inner rows at the CPU's vector width;
/// the portable build with `log` tested per element ran 3-4x torch's time on
/// (8, 21, 64, 64) over dim 1 (a segmentation net's classes).
fn softmax_strided<T: Float>(src: &[T], dst: &mut [T], r: usize, inner: usize, log: bool) {
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    crate::ops::parallel::for_chunks(dst, r * inner, true, |i, d| {
        let s = &src[i * r * inner..i * r * inner + d.len()];
        let (mut m, mut sum) = (vec![T::ZERO; inner], vec![T::ZERO; inner]);
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`: the CPU supports AVX-512F, AVX2 and FMA.
            return unsafe { strided_block_avx512(s, d, r, inner, log, &mut m, &mut sum) };
        }
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: `simd` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
            return unsafe { strided_block_avx2(s, d, r, inner, log, &mut m, &mut sum) };
        }
        let _ = (wide, simd);
        strided_block::<T, false>(s, d, r, inner, log, &mut m, &mut sum);
    });
}

struct Softmax {
    dim: usize,
    log: bool,
}

impl CustomOp1 for Softmax {
    fn name(&self) -> &'static str {
        if self.log {
            "log_softmax"
        } else {
            "softmax"
        }
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.dims();
        let (_, r, inner) = split(dims, self.dim, self.dim);
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("softmax: expected a contiguous input") };
        fn run<T: Float>(v: &[T], r: usize, inner: usize, log: bool) -> Vec<T> {
            if r == 0 || v.is_empty() {
                return vec![T::ZERO; v.len()];
            }
            // Both kernels write every element (each row or column block whole) before
            // reading it back: no zero fill first.
            filled_plain(v.len(), |out| {
                if inner == 1 {
                    softmax_rows(v, out, r, log);
                } else {
                    softmax_strided(v, out, r, inner, log);
                }
            })
        }
        let st = match s {
            CpuStorage::F32(v) => CpuStorage::F32(run(&v[a..b], r, inner, self.log)),
            CpuStorage::F64(v) => CpuStorage::F64(run(&v[a..b], r, inner, self.log)),
            _ => candle_core::bail!("softmax: fast path supports f32 and f64"),
        };
        Ok((st, l.shape().clone()))
    }
}

/// The softmax (or log-softmax) gradient over the last dim from the output `y` and
/// the upstream `g` (contiguous CPU f32/f64 of one shape), one pass per row:
/// `y * (g - sum(g * y))`, or `g - exp(y) * sum(g)`. `None` where it does not apply.
pub fn softmax_backward_last(y: &Tensor, g: &Tensor, log: bool) -> Option<Tensor> {
    if !y.device().is_cpu() || y.dims() != g.dims() || y.dtype() != g.dtype() || y.rank() == 0 {
        return None;
    }
    let n = *y.dims().last()?;
    let (Some((ya, yb)), Some((ga, gb))) = (y.layout().contiguous_offsets(), g.layout().contiguous_offsets()) else { return None };
    let (ys, _) = y.storage_and_layout();
    let (gs, _) = g.storage_and_layout();
    fn run<T: Float>(y: &[T], g: &[T], n: usize, log: bool) -> Vec<T> {
        if n == 0 {
            return vec![T::ZERO; y.len()];
        }
        let per = (GRAIN / n).max(1);
        let simd = has_avx2_fma();
        let task = |(o, (yr, gr)): (&mut [T], (&[T], &[T]))| {
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: `simd` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
                return unsafe { grad_rows_avx2(yr, gr, o, n, log) };
            }
            let _ = simd;
            grad_rows::<T, false>(yr, gr, o, n, log);
        };
        // `row_grad` writes each row whole: no zero fill first.
        filled_plain(y.len(), |out| {
            crate::ops::parallel::for_chunks(out, per * n, crate::ops::parallel::par_ok(y.len()), |i, o| {
                let r = i * per * n..i * per * n + o.len();
                task((o, (&y[r.clone()], &g[r])));
            });
        })
    }
    let dev = candle_core::Device::Cpu;
    match (&*ys, &*gs) {
        (candle_core::Storage::Cpu(CpuStorage::F32(yv)), candle_core::Storage::Cpu(CpuStorage::F32(gv))) => {
            Tensor::from_vec(run(&yv[ya..yb], &gv[ga..gb], n, log), y.shape(), &dev).ok()
        }
        (candle_core::Storage::Cpu(CpuStorage::F64(yv)), candle_core::Storage::Cpu(CpuStorage::F64(gv))) => {
            Tensor::from_vec(run(&yv[ya..yb], &gv[ga..gb], n, log), y.shape(), &dev).ok()
        }
        _ => None,
    }
}

/// Rows of `softmax_backward_last` (rows of `n`).
#[inline(always)]
fn grad_rows<T: Float, const FMA: bool>(y: &[T], g: &[T], o: &mut [T], n: usize, log: bool) {
    for ((o, y), g) in o.chunks_mut(n).zip(y.chunks(n)).zip(g.chunks(n)) {
        row_grad::<T, FMA>(y, g, o, log);
    }
}

/// `grad_rows` compiled for AVX2+FMA (the portable build is SSE2: 2048 rows of 64 took
/// 27 us, now ~20). Not AVX-512: on this Zen 5 its 8x512x768 backward ran at 430 us in
/// half the runs against 270 for AVX2 (and 300 for SSE2), for no gain elsewhere.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn grad_rows_avx2<T: Float>(y: &[T], g: &[T], o: &mut [T], n: usize, log: bool) {
    grad_rows::<T, true>(y, g, o, n, log)
}

/// One row of `softmax_backward_last`: the row's sum in 16 lanes (the tail's elements
/// in lanes of their own) folded halves onto halves, then one pass. `log` is tested
/// outside the loops: inside, the vectorized loop computed the exp for every element
/// and selected. A running fold over the lanes was a chain of dependent adds per row,
/// most of the time for short rows. The exponential is `approx`'s fused-multiply-add
/// form in the AVX2 variant (`FMA`): its plain form made a word LM's (700, 7792)
/// log-softmax backward 1.3x torch's time.
#[inline(always)]
fn row_grad<T: Float, const FMA: bool>(y: &[T], g: &[T], o: &mut [T], log: bool) {
    let mut acc = [T::ZERO; 16];
    let n16 = y.len() / 16 * 16;
    if log {
        for gc in g[..n16].chunks_exact(16) {
            for k in 0..16 {
                acc[k] += gc[k];
            }
        }
        for (k, &gv) in g[n16..].iter().enumerate() {
            acc[k] += gv;
        }
    } else {
        for (yc, gc) in y[..n16].chunks_exact(16).zip(g[..n16].chunks_exact(16)) {
            for k in 0..16 {
                acc[k] += gc[k] * yc[k];
            }
        }
        for (k, (&yv, &gv)) in y[n16..].iter().zip(&g[n16..]).enumerate() {
            acc[k] += gv * yv;
        }
    }
    let s = fold16(acc);
    if log {
        for ((o, &yv), &gv) in o.iter_mut().zip(y).zip(g) {
            *o = gv - yv.exp::<FMA>() * s;
        }
    } else {
        for ((o, &yv), &gv) in o.iter_mut().zip(y).zip(g) {
            *o = yv * (gv - s);
        }
    }
}

/// Differentiable softmax (or log_softmax) over `dim`.
pub fn softmax(t: &Tensor, dim: usize, log: bool) -> Result<Tensor> {
    if fast_path(t) {
        return t.dense()?.apply_op1(Softmax { dim, log });
    }
    let max = t.max_keepdim(dim)?.detach();
    let diff = t.broadcast_sub(&max)?;
    let e = diff.exp()?;
    let s = e.sum_keepdim(dim)?;
    if log {
        diff.broadcast_sub(&s.log()?)
    } else {
        e.broadcast_div(&s)
    }
}
