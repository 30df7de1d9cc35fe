//! Softmax and log-softmax over any dim as one Candle custom op with its
//! backward: rows in parallel, the exp loop compiled for AVX2/AVX-512 and picked
//! at run time. Other devices and dtypes get the same math from Candle's ops.
use super::cpu::{has_avx2_fma, has_avx512};
use super::float::Float;
use super::reduce::{fast_path, max_slice, split, sum_slice, GRAIN};
use crate::ops::layout::Dense;
use crate::ops::parallel::filled_plain;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

#[inline(always)]
fn softmax_row<T: Float, const FMA: bool>(src: &[T], dst: &mut [T], log: bool) {
    let m = max_slice(src);
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = (v - m).exp::<FMA>();
    }
    let s = sum_slice(dst);
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
    dst.par_chunks_mut(per * n).zip(src.par_chunks(per * n)).for_each(|(d, s)| {
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

/// Softmax over a middle dim: each (outer) block is an r x inner matrix, reduced over r.
fn softmax_strided<T: Float>(src: &[T], dst: &mut [T], r: usize, inner: usize, log: bool) {
    dst.par_chunks_mut(r * inner).zip(src.par_chunks(r * inner)).for_each(|(d, s)| {
        let mut m = vec![T::NEG_INF; inner];
        for i in 0..r {
            for (mj, &v) in m.iter_mut().zip(&s[i * inner..(i + 1) * inner]) {
                *mj = mj.maximum(v);
            }
        }
        let mut sum = vec![T::ZERO; inner];
        for i in 0..r {
            let row = &s[i * inner..(i + 1) * inner];
            let out = &mut d[i * inner..(i + 1) * inner];
            for j in 0..inner {
                let e = (row[j] - m[j]).exp::<false>();
                out[j] = e;
                sum[j] += e;
            }
        }
        for i in 0..r {
            let row = &s[i * inner..(i + 1) * inner];
            let out = &mut d[i * inner..(i + 1) * inner];
            for j in 0..inner {
                out[j] = if log { row[j] - m[j] - sum[j].ln() } else { out[j] / sum[j] };
            }
        }
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
        let task = |(o, (yr, gr)): (&mut [T], (&[T], &[T]))| {
            for ((o, y), g) in o.chunks_mut(n).zip(yr.chunks(n)).zip(gr.chunks(n)) {
                row_grad(y, g, o, log);
            }
        };
        // `row_grad` writes each row whole: no zero fill first.
        filled_plain(y.len(), |out| {
            if crate::ops::parallel::par_ok(y.len()) {
                out.par_chunks_mut(per * n).zip(y.par_chunks(per * n).zip(g.par_chunks(per * n))).for_each(task);
            } else {
                task((out, (y, g)));
            }
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

/// One row of `softmax_backward_last` (8-lane sums so the loops vectorize).
#[inline(always)]
fn row_grad<T: Float>(y: &[T], g: &[T], o: &mut [T], log: bool) {
    const L: usize = 8;
    let n8 = y.len() / L * L;
    let mut acc = [T::ZERO; L];
    for (yc, gc) in y[..n8].chunks_exact(L).zip(g[..n8].chunks_exact(L)) {
        for l in 0..L {
            acc[l] += if log { gc[l] } else { gc[l] * yc[l] };
        }
    }
    let mut s = acc.iter().fold(T::ZERO, |a, &b| a + b);
    for (&yv, &gv) in y[n8..].iter().zip(&g[n8..]) {
        s += if log { gv } else { gv * yv };
    }
    for ((o, &yv), &gv) in o.iter_mut().zip(y).zip(g) {
        *o = if log { gv - yv.exp::<false>() * s } else { yv * (gv - s) };
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
