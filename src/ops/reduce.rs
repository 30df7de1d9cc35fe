//! Multi-threaded sums and products over any dims, as Candle custom ops with
//! their backward written out (Candle's sum is single-threaded; it has no
//! product). CPU code for f32/f64 (any dtype for products); other devices and
//! dtypes take Candle's own sum, which runs there with its backward.
use super::cpu::has_avx512;
use super::float::{as_f32, as_f32_mut, Float};
use super::lanes::{Features, Kernel, Lanes};
use crate::ops::layout::Dense;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Rows of at least this many elements each make a parallel task worthwhile.
pub(crate) const GRAIN: usize = 1 << 14;

pub(crate) fn fast_path(t: &Tensor) -> bool {
    t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64)
}

/// `(outer, r, inner)` of a contiguous tensor reduced over dims `lo..=hi`.
pub(crate) fn split(dims: &[usize], lo: usize, hi: usize) -> (usize, usize, usize) {
    let outer = dims[..lo].iter().product();
    let r = dims[lo..=hi].iter().product();
    let inner = dims[hi + 1..].iter().product();
    (outer, r, inner)
}

/// Reductions with 32 independent lanes (two vectors of f32), so the loops vectorize
/// despite float non-associativity (a single running accumulator would serialize them);
/// the tail is one more zero-padded chunk, and the lanes are then added pairwise (halves
/// onto halves, each step one vector add). Why pairwise: a running scalar sum over the
/// lanes was a chain of 16+ dependent adds, which dominated short rows (global average
/// pooling's 196-element planes spent most of their time there).
#[inline(always)]
pub(crate) fn sum_slice<T: Float>(x: &[T]) -> T {
    sum_slice_of::<T, false>(x)
}

/// `sum_slice`, of the squares when `SQ` (a flag, not a closure, as `lanes::fold`'s).
#[inline(always)]
fn sum_slice_of<T: Float, const SQ: bool>(x: &[T]) -> T {
    let mut acc = [T::ZERO; 32];
    let chunks = x.chunks_exact(32);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..32 {
            acc[k] += if SQ { c[k] * c[k] } else { c[k] };
        }
    }
    // The tail as one more (zero-padded) chunk: adding it lane by lane into `acc` kept
    // `acc` on the stack.
    let mut tail = [T::ZERO; 32];
    tail[..rem.len()].copy_from_slice(rem);
    for k in 0..32 {
        acc[k] += if SQ { tail[k] * tail[k] } else { tail[k] };
    }
    // Constant trip counts, so the halves stay in registers (a loop over the widths
    // went through the stack, with stalled store-to-load forwarding).
    for k in 0..16 {
        acc[k] += acc[k + 16];
    }
    for k in 0..8 {
        acc[k] += acc[k + 8];
    }
    for k in 0..4 {
        acc[k] += acc[k + 4];
    }
    (acc[0] + acc[2]) + (acc[1] + acc[3])
}

/// The sum of a whole slice: partial sums over chunks (in parallel when large), then
/// combined; the same chunks either way, so the rounding does not depend on threads.
pub(crate) fn sum_all_slice<T: Float>(x: &[T]) -> T {
    sum_all_slice_of::<T, false>(x)
}

/// `sum_all_slice`, of the squares when `SQ` (the chunks' partial sums are then plain).
fn sum_all_slice_of<T: Float, const SQ: bool>(x: &[T]) -> T {
    let chunk = |i: usize| sum_slice_of::<T, SQ>(&x[i * GRAIN * 4..((i + 1) * GRAIN * 4).min(x.len())]);
    let parts: Vec<T> = super::parallel::map_indices(x.len().div_ceil(GRAIN * 4), super::parallel::par_ok(x.len()), chunk);
    sum_slice(&parts)
}

/// Sum of `f(v)` over a row in the element type, 32 independent lanes (as PyTorch's
/// float kernels accumulate float in cascades): no widening, so 8 or 16 lanes per
/// vector instruction.
#[inline(always)]
pub(crate) fn lane_sum_t<T: Float>(xs: &[T], f: impl Fn(T) -> T) -> f64 {
    let mut acc = [T::ZERO; 32];
    let chunks = xs.chunks_exact(32);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..32 {
            acc[k] += f(c[k]);
        }
    }
    acc.iter().map(|v| v.f()).sum::<f64>() + rem.iter().map(|&v| f(v).f()).sum::<f64>()
}

/// The maximum of a slice over 16 lanes, folded halves onto halves. The fold was a
/// running max over the lanes and the tail: a chain of 16+ dependent steps per call,
/// which set the pace of softmax over short rows (2048 rows of 64: 1.5x torch's time).
#[inline(always)]
pub(crate) fn max_slice<T: Float>(x: &[T]) -> T {
    let mut acc = [T::NEG_INF; 16];
    let chunks = x.chunks_exact(16);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] = acc[k].maximum(c[k]);
        }
    }
    let mut tail = [T::NEG_INF; 16];
    tail[..rem.len()].copy_from_slice(rem);
    for k in 0..16 {
        acc[k] = acc[k].maximum(tail[k]);
    }
    for k in 0..8 {
        acc[k] = acc[k].maximum(acc[k + 8]);
    }
    for k in 0..4 {
        acc[k] = acc[k].maximum(acc[k + 4]);
    }
    acc[0].maximum(acc[2]).maximum(acc[1].maximum(acc[3]))
}

/// `acc += row` (of the squares when `SQ`), element by element, in the dispatched
/// AVX-512 / AVX2 loop (the bias gradient's sum over rows ran 4 lanes at a time in
/// this generic code's baseline build).
#[inline(always)]
fn add_into<T: Float, const SQ: bool>(acc: &mut [T], row: &[T]) {
    super::simd_map::zip_assign_here(acc, row, |a, v| a + if SQ { v * v } else { v });
}

#[inline(always)]
fn row_sums<T: Float, const SQ: bool>(rows: &[T], out: &mut [T], r: usize) {
    for (v, row) in out.iter_mut().zip(rows.chunks(r)) {
        *v = sum_slice_of::<T, SQ>(row);
    }
}

/// `row_sums` compiled for AVX-512 (dtypes other than f32).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn row_sums_avx512<T: Float, const SQ: bool>(rows: &[T], out: &mut [T], r: usize) {
    row_sums::<T, SQ>(rows, out, r)
}

/// Row sums of float32 rows at the level `V` (`lanes::fold`: four accumulators of
/// `V::LANES` lanes, the tail one masked load, folded in f64). The generic form
/// (`sum_slice`) copied each row's tail into a padded chunk (a `memmove` call per row)
/// and chained all of a row's adds through one pair of accumulators; with rows of 196
/// (global average pooling of 14x14 planes) that latency, not the memory, set the pace.
///
/// # Safety
/// Runs inside a function compiled with `V`'s features, on a CPU that has them;
/// `rows` holds `out.len()` rows of `r` floats (asserted).
#[inline(always)]
unsafe fn row_sums_f32<V: Lanes, const SQ: bool>(rows: &[f32], out: &mut [f32], r: usize) {
    assert!(rows.len() >= out.len() * r);
    for (i, o) in out.iter_mut().enumerate() {
        // SAFETY: row i spans r floats from i * r, inside `rows` (asserted); the caller's
        // level.
        *o = unsafe { crate::ops::lanes::fold::<V, SQ>(rows.as_ptr().add(i * r), r, V::zero()) } as f32;
    }
}

/// `row_sums_f32` as a `Kernel`: (rows, out, r).
struct RowSums<'a, const SQ: bool>((&'a [f32], &'a mut [f32], usize));

impl<const SQ: bool> Kernel for RowSums<'_, SQ> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let (rows, out, r) = self.0;
        // SAFETY: the caller's (`Kernel::body`: V's features).
        unsafe { row_sums_f32::<V, SQ>(rows, out, r) }
    }
}

/// `row_sums_f32` at the level `V`, which the CPU must have (`at_cpu_lanes!`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn row_sums_at<V: Features>(rows: &[f32], out: &mut [f32], r: usize, squares: bool) {
    // SAFETY: the caller picked a level the CPU has.
    unsafe {
        if squares {
            V::run(RowSums::<true>((rows, out, r)))
        } else {
            V::run(RowSums::<false>((rows, out, r)))
        }
    }
}

/// `out[i]` = the sum of row `i` (rows of `r` elements), at the CPU's vector width,
/// rows split over threads when the pass is large.
pub(crate) fn row_sums_fast<T: Float>(rows: &[T], out: &mut [T], r: usize) {
    row_sums_of::<T, false>(rows, out, r)
}

/// `row_sums_fast`, of the squares when `SQ`.
fn row_sums_of<T: Float, const SQ: bool>(rows: &[T], out: &mut [T], r: usize) {
    let per = (GRAIN / r.max(1)).max(1);
    let wide = has_avx512();
    let run = |(ci, o): (usize, &mut [T])| {
        let rs = &rows[ci * per * r..(ci * per + o.len()) * r];
        if let (Some(src), Some(dst)) = (as_f32(rs), as_f32_mut(o)) {
            if crate::ops::lanes::at_cpu_lanes!(row_sums_at(src, dst, r, SQ)).is_some() {
                return;
            }
        }
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`.
            return unsafe { row_sums_avx512::<T, SQ>(rs, o, r) };
        }
        let _ = wide;
        row_sums::<T, SQ>(rs, o, r);
    };
    super::parallel::for_chunks(out, per, super::parallel::par_ok(rows.len()), |ci, o| run((ci, o)));
}

/// Sums (of the squares when `SQ`) over the `r` of a contiguous `(outer, r, inner)`.
fn reduce_block<T: Float, const SQ: bool>(src: &[T], outer: usize, r: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; outer * inner];
    if inner == 1 {
        if outer == 1 {
            out[0] = sum_all_slice_of::<T, SQ>(src);
        } else {
            row_sums_of::<T, SQ>(src, &mut out, r);
        }
    } else {
        // Whole rows of `inner` added into an accumulator row: contiguous reads. With
        // few output rows (a sum over the leading dims), long rows split by columns;
        // short ones split each block's rows into bands summed apart, whose partial
        // rows are then added up.
        let threads = super::pool::num_threads();
        let par = super::parallel::par_ok(src.len());
        let tasks = 2 * threads;
        if par && outer < tasks && inner >= tasks * 1024 {
            // Long rows: split the columns instead (runs of >= 1024 still stream).
            let cols = inner.div_ceil(tasks.div_ceil(outer));
            out.par_chunks_mut(inner).enumerate().for_each(|(o, dst)| {
                let block = &src[o * r * inner..(o + 1) * r * inner];
                dst.par_chunks_mut(cols).enumerate().for_each(|(cj, d)| {
                    let j0 = cj * cols;
                    for i in 0..r {
                        add_into::<T, SQ>(d, &block[i * inner + j0..i * inner + j0 + d.len()]);
                    }
                });
            });
            return out;
        }
        let bands = if !par || outer >= tasks { 1 } else { tasks.div_ceil(outer).min(r) };
        let band_rows = r.div_ceil(bands);
        let sum_band = |o: usize, k: usize, dst: &mut [T]| {
            let block = &src[o * r * inner..(o + 1) * r * inner];
            for i in k * band_rows..((k + 1) * band_rows).min(r) {
                add_into::<T, SQ>(dst, &block[i * inner..(i + 1) * inner]);
            }
        };
        if bands == 1 {
            super::parallel::for_chunks(&mut out, inner, par, |o, dst| sum_band(o, 0, dst));
        } else {
            let mut parts = vec![T::ZERO; outer * bands * inner];
            super::parallel::for_chunks(&mut parts, inner, true, |t, dst| sum_band(t / bands, t % bands, dst));
            for (dst, p) in out.chunks_mut(inner).zip(parts.chunks(bands * inner)) {
                for band in p.chunks(inner) {
                    add_into::<T, false>(dst, band);
                }
            }
        }
    }
    out
}

/// The sum over dims `lo..=hi` (of the squares when `squares`), kept as size 1.
struct SumBlock {
    lo: usize,
    hi: usize,
    squares: bool,
}

impl CustomOp1 for SumBlock {
    fn name(&self) -> &'static str {
        if self.squares {
            "sum of squares"
        } else {
            "sum"
        }
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.dims();
        let (outer, r, inner) = split(dims, self.lo, self.hi);
        let mut out_dims = dims.to_vec();
        for d in &mut out_dims[self.lo..=self.hi] {
            *d = 1;
        }
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("sum: expected a contiguous input") };
        let sq = self.squares;
        let st = match s {
            CpuStorage::F32(v) if sq => CpuStorage::F32(reduce_block::<_, true>(&v[a..b], outer, r, inner)),
            CpuStorage::F32(v) => CpuStorage::F32(reduce_block::<_, false>(&v[a..b], outer, r, inner)),
            CpuStorage::F64(v) if sq => CpuStorage::F64(reduce_block::<_, true>(&v[a..b], outer, r, inner)),
            CpuStorage::F64(v) => CpuStorage::F64(reduce_block::<_, false>(&v[a..b], outer, r, inner)),
            _ => candle_core::bail!("sum: fast path supports f32 and f64"),
        };
        Ok((st, Shape::from(out_dims)))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let g = grad_res.broadcast_as(arg.shape())?;
        Ok(Some(if self.squares { (arg.affine(2.0, 0.0)? * g)? } else { g }))
    }
}

/// Sum over `dims` (sorted, non-empty), keeping them as size-1 dims.
pub fn sum_keepdim(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // Empty inputs go to Candle too: the blocked kernel splits rows by their (zero) length.
    if !fast_path(t) || t.elem_count() == 0 {
        return t.sum_keepdim(dims.to_vec());
    }
    let mut cur = t.dense()?;
    for (lo, hi) in dim_runs(dims) {
        cur = cur.apply_op1(SumBlock { lo, hi, squares: false })?;
    }
    Ok(cur)
}

/// The runs of consecutive dims in `dims` (sorted) as `(lo, hi)`, last run first: each
/// is reduced in one pass.
fn dim_runs(dims: &[usize]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = dims.len();
    while i > 0 {
        let hi = dims[i - 1];
        let mut lo = hi;
        i -= 1;
        while i > 0 && dims[i - 1] + 1 == lo {
            lo -= 1;
            i -= 1;
        }
        runs.push((lo, hi));
    }
    runs
}

/// The sum of the squares over `dims` (sorted, non-empty), kept as size-1 dims: the
/// 2-norm's statistic in one pass over the input (the square pass wrote a tensor the
/// size of the input, which the sum then read: `norm(dim=-1)` took 1.6x torch's
/// time). Float32/float64 CPU tensors; the rest square and sum.
pub fn sum_squares_keepdim(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    if !fast_path(t) || t.elem_count() == 0 {
        return t.sqr()?.sum_keepdim(dims.to_vec());
    }
    let mut cur = t.dense()?;
    // The last run of consecutive dims squares, the runs before it (if any) sum.
    for (k, (lo, hi)) in dim_runs(dims).into_iter().enumerate() {
        cur = cur.apply_op1_no_bwd(&SumBlock { lo, hi, squares: k == 0 })?;
    }
    Ok(cur)
}

/// `amax` / `amin` (`is_max`) over dim `d` of a float32/float64 CPU tensor (`d` not
/// empty, the result keeps it as size 1): values only, in one vectorized pass, NaN
/// wherever the reduced slice holds one (as PyTorch's). Other devices and dtypes take
/// `sort::extreme`'s values. It went through `max(dim)`'s search for the first index
/// (two passes per row and an index tensor, or a transposed copy off the last dim):
/// amax(-1) of (8, 256, 384) took 190-230 us, torch 35-45.
pub(crate) fn extreme_values(t: &Tensor, d: usize, is_max: bool) -> Result<Tensor> {
    if !fast_path(t) || t.dims()[d] == 0 {
        return Ok(crate::ops::sort::extreme(t, d, is_max)?.0);
    }
    let run = || -> Result<Tensor> {
        let x = t.dense()?;
        let (outer, r, inner) = split(x.dims(), d, d);
        let mut shape = x.dims().to_vec();
        shape[d] = 1;
        let (st, l) = x.storage_and_layout();
        let Some((a, _)) = l.contiguous_offsets() else { candle_core::bail!("amax: expected a dense input") };
        fn go<T: Float>(v: &[T], (outer, r, inner): (usize, usize, usize), is_max: bool) -> Vec<T> {
            let mut out = vec![T::ZERO; outer * inner];
            let (wide, simd) = (has_avx512(), crate::ops::cpu::has_avx2_fma());
            let per = if inner == 1 { (GRAIN / r).max(1) } else { (GRAIN / r).max(16) };
            super::parallel::for_chunks(&mut out, per, super::parallel::par_ok(v.len()), |ci, o| {
                if inner == 1 {
                    if let (Some(src), Some(dst)) = (as_f32(v), as_f32_mut(o)) {
                        let rows = &src[ci * per * r..][..dst.len() * r];
                        if crate::ops::lanes::at_cpu_lanes!(row_extremes_at(rows, dst, r, is_max)).is_some() {
                            return;
                        }
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if wide {
                    // SAFETY: `wide` is `has_avx512()`.
                    return unsafe { extreme_block_avx512(v, (r, inner), ci * per, o, is_max) };
                } else if simd {
                    // SAFETY: `simd` is `has_avx2_fma()`.
                    return unsafe { extreme_block_avx2(v, (r, inner), ci * per, o, is_max) };
                }
                let _ = (wide, simd);
                extreme_block(v, (r, inner), ci * per, o, is_max)
            });
            out
        }
        let dims = (outer, r, inner);
        let out = match &*st {
            candle_core::Storage::Cpu(CpuStorage::F32(v)) => Tensor::from_vec(go(&v[a..], dims, is_max), shape, t.device())?,
            candle_core::Storage::Cpu(CpuStorage::F64(v)) => Tensor::from_vec(go(&v[a..], dims, is_max), shape, t.device())?,
            _ => candle_core::bail!("amax: expected float32 or float64"),
        };
        Ok(out)
    };
    run()
}

/// `f` folded over a row (`f` associative and commutative: a product, a max) in 64
/// independent lanes (four vectors of f32), then the lanes folded halves onto halves:
/// one running value made each step wait for the last (a compare and blend, ~6 cycles
/// per vector), and a scalar fold over the lanes was a chain of 16 more.
#[inline(always)]
fn lane_fold<T: Copy>(row: &[T], init: T, f: impl Fn(T, T) -> T) -> T {
    let mut acc = [init; 64];
    let chunks = row.chunks_exact(64);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..64 {
            acc[j] = f(acc[j], c[j]);
        }
    }
    for (a, &e) in acc.iter_mut().zip(rest) {
        *a = f(*a, e);
    }
    let mut w = 32;
    while w > 0 {
        for j in 0..w {
            acc[j] = f(acc[j], acc[j + w]);
        }
        w /= 2;
    }
    acc[0]
}

/// The extreme (`MAX`: largest, else smallest) of a float32 row of at least `V::LANES`
/// elements, or None where the row holds a NaN or an infinity (then `lane_fold`'s exact
/// path decides). Four accumulators take a vector `max` each (the minimum as the maximum
/// of the negated values, exact); NaN, which `max` may drop, is caught apart by
/// `x * 0 + acc` (NaN for a NaN or an infinite x, else 0). `pick` with `lane_fold`
/// spent four operations per vector and as many again folding its 64 lanes: amax(-1) of
/// an (8, 256, 384) float32 tensor took 41 us, torch 30.
///
/// # Safety
/// Runs inside a function compiled with `V`'s features, on a CPU that has them.
#[inline(always)]
unsafe fn row_extreme<V: Lanes, const MAX: bool>(row: &[f32]) -> Option<f32> {
    let (l, d) = (V::LANES, row.len());
    if d < l {
        return None;
    }
    let (p, full) = (row.as_ptr(), d / l);
    // SAFETY: whole vectors end at full * l <= d; the last one, at d - l >= 0, overlaps
    // the ones before (harmless for a maximum); the caller's level.
    unsafe {
        let (zero, neg) = (V::zero(), V::splat(-1.0));
        let mut m = [signed::<V, MAX>(p, neg); 4];
        let mut bad = [zero; 4];
        let mut v = 0;
        while v + 4 <= full {
            for k in 0..4 {
                let x = signed::<V, MAX>(p.add((v + k) * l), neg);
                m[k] = m[k].max(x);
                bad[k] = x.fmadd(zero, bad[k]);
            }
            v += 4;
        }
        for (k, w) in (v..full).chain((d % l != 0).then_some(full)).enumerate() {
            let x = signed::<V, MAX>(p.add((w * l).min(d - l)), neg);
            m[k] = m[k].max(x);
            bad[k] = x.fmadd(zero, bad[k]);
        }
        if !bad[0].add(bad[1]).add(bad[2].add(bad[3])).ordered() {
            return None;
        }
        let top = m[0].max(m[1]).max(m[2].max(m[3])).max_lane();
        Some(if MAX { top } else { -top })
    }
}

/// The vector at `p`, negated (by `neg`, all -1) unless `MAX`. A function, not a
/// closure: a closure is not compiled with the caller's features (tools/avx_audit.py).
///
/// # Safety
/// The caller's level; `V::LANES` readable floats at `p`.
#[inline(always)]
unsafe fn signed<V: Lanes, const MAX: bool>(p: *const f32, neg: V) -> V {
    // SAFETY: the caller's.
    unsafe {
        if MAX {
            V::load(p)
        } else {
            V::load(p).mul(neg)
        }
    }
}

/// `row_extreme` over the rows of `rows` (`out.len()` rows of `r`), `lane_fold` for the
/// rows it declines, as a `Kernel`: (rows, out, r).
struct RowExtremes<'a, const MAX: bool>((&'a [f32], &'a mut [f32], usize));

impl<const MAX: bool> Kernel for RowExtremes<'_, MAX> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let (rows, out, r) = self.0;
        for (row, o) in rows.chunks_exact(r).zip(out.iter_mut()) {
            // SAFETY: the caller's (`Kernel::body`: V's features).
            *o = match unsafe { row_extreme::<V, MAX>(row) } {
                Some(e) => e,
                None => lane_fold(row, row[0], pick::<f32, MAX>),
            };
        }
    }
}

/// `RowExtremes` at the level `V`, which the CPU must have (`at_cpu_lanes!`).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn row_extremes_at<V: Features>(rows: &[f32], out: &mut [f32], r: usize, is_max: bool) {
    // SAFETY: the caller picked a level the CPU has.
    unsafe {
        if is_max {
            V::run(RowExtremes::<true>((rows, out, r)))
        } else {
            V::run(RowExtremes::<false>((rows, out, r)))
        }
    }
}

/// `m` or `e`, whichever is further in the direction of `MAX`, and NaN from either.
#[inline(always)]
fn pick<T: Float, const MAX: bool>(m: T, e: T) -> T {
    if (if MAX { e > m } else { e < m }) || e.is_nan() {
        e
    } else {
        m
    }
}

/// Outputs `at..at + out.len()` (row-major over (outer, inner)) of the extreme over `r`
/// of the dense (outer, r, inner) block `v`.
#[inline(always)]
fn extreme_block<T: Float>(v: &[T], (r, inner): (usize, usize), at: usize, out: &mut [T], is_max: bool) {
    if is_max {
        extreme_block_dir::<T, true>(v, (r, inner), at, out)
    } else {
        extreme_block_dir::<T, false>(v, (r, inner), at, out)
    }
}

#[inline(always)]
fn extreme_block_dir<T: Float, const MAX: bool>(v: &[T], (r, inner): (usize, usize), at: usize, out: &mut [T]) {
    if inner == 1 {
        // Rows: `lane_fold`'s independent lanes.
        for (k, o) in out.iter_mut().enumerate() {
            let row = &v[(at + k) * r..(at + k + 1) * r];
            *o = lane_fold(row, row[0], pick::<T, MAX>);
        }
        return;
    }
    // Slices: the outputs of one outer index are `inner` lanes, updated row by row.
    let mut done = 0;
    while done < out.len() {
        let (o, i0) = ((at + done) / inner, (at + done) % inner);
        let len = (inner - i0).min(out.len() - done);
        let dst = &mut out[done..done + len];
        let base = o * r * inner + i0;
        dst.copy_from_slice(&v[base..base + len]);
        for k in 1..r {
            for (m, &e) in dst.iter_mut().zip(&v[base + k * inner..base + k * inner + len]) {
                *m = pick::<T, MAX>(*m, e);
            }
        }
        done += len;
    }
}

/// `extreme_block` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn extreme_block_avx512<T: Float>(v: &[T], dims: (usize, usize), at: usize, out: &mut [T], is_max: bool) {
    extreme_block(v, dims, at, out, is_max)
}

/// `extreme_block` compiled for AVX2 (the baseline build took amax(-1) of an (8, 256,
/// 384) float32 tensor in 118 us on a Zen 3, torch 36).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn extreme_block_avx2<T: Float>(v: &[T], dims: (usize, usize), at: usize, out: &mut [T], is_max: bool) {
    extreme_block(v, dims, at, out, is_max)
}

/// Products along one dim of a contiguous tensor, as (outer, r, inner) blocks.
trait ProdElem: Copy + Send + Sync + std::ops::Mul<Output = Self> + 'static {
    const ONE: Self;
}
macro_rules! prod_elem {
    ($($t:ty => $one:expr),*) => { $(impl ProdElem for $t { const ONE: $t = $one; })* };
}
prod_elem!(f32 => 1.0, f64 => 1.0, i64 => 1, i32 => 1, i16 => 1, u8 => 1, u32 => 1);

fn prod_block<T: ProdElem>(src: &[T], outer: usize, r: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::ONE; outer * inner];
    if inner == 0 {
        return out;
    }
    if inner == 1 {
        // Rows: `lane_fold`'s independent products. One task per row with one chain of
        // dependent multiplies made `prod(-1)` of (8, 256, 384) take 1.6 ms, torch 0.14.
        let per = (GRAIN / r.max(1)).max(1);
        super::parallel::for_chunks(&mut out, per, super::parallel::par_ok(src.len()), |ci, o| {
            for (k, d) in o.iter_mut().enumerate() {
                *d = lane_fold(&src[(ci * per + k) * r..(ci * per + k + 1) * r], T::ONE, |p, e| p * e);
            }
        });
        return out;
    }
    out.par_chunks_mut(inner).enumerate().for_each(|(o, dst)| {
        let block = &src[o * r * inner..(o + 1) * r * inner];
        for i in 0..r {
            for (d, &v) in dst.iter_mut().zip(&block[i * inner..(i + 1) * inner]) {
                *d = *d * v;
            }
        }
    });
    out
}

/// For each element, the product of all the others along the dim (the exact
/// gradient of `prod`, zeros included): left prefix products times right suffix products.
fn exclusive_prod<T: ProdElem>(src: &[T], outer: usize, r: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::ONE; src.len()];
    if inner == 0 || r == 0 {
        return out;
    }
    out.par_chunks_mut(r * inner).zip(src.par_chunks(r * inner)).for_each(|(dst, block)| {
        let mut run = vec![T::ONE; inner];
        for i in 0..r {
            for j in 0..inner {
                dst[i * inner + j] = run[j];
                run[j] = run[j] * block[i * inner + j];
            }
        }
        run.iter_mut().for_each(|v| *v = T::ONE);
        for i in (0..r).rev() {
            for j in 0..inner {
                dst[i * inner + j] = dst[i * inner + j] * run[j];
                run[j] = run[j] * block[i * inner + j];
            }
        }
    });
    let _ = outer;
    out
}

struct ProdDim {
    dim: usize,
    exclusive: bool,
}

impl CustomOp1 for ProdDim {
    fn name(&self) -> &'static str {
        "prod"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.dims();
        let (outer, r, inner) = split(dims, self.dim, self.dim);
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("prod: expected a contiguous input") };
        let mut out_dims = dims.to_vec();
        if !self.exclusive {
            out_dims[self.dim] = 1;
        }
        macro_rules! run {
            ($v:expr, $variant:ident) => {
                CpuStorage::$variant(if self.exclusive {
                    exclusive_prod(&$v[a..b], outer, r, inner)
                } else {
                    prod_block(&$v[a..b], outer, r, inner)
                })
            };
        }
        let st = match s {
            CpuStorage::F32(v) => run!(v, F32),
            CpuStorage::F64(v) => run!(v, F64),
            CpuStorage::I64(v) => run!(v, I64),
            CpuStorage::I32(v) => run!(v, I32),
            CpuStorage::I16(v) => run!(v, I16),
            CpuStorage::U8(v) => run!(v, U8),
            CpuStorage::U32(v) => run!(v, U32),
            _ => candle_core::bail!("prod: unsupported dtype"),
        };
        Ok((st, Shape::from(out_dims)))
    }
}

/// Product over `dim`, keeping it as a size-1 dim (the autograd formula is
/// `autograd::indexing::prod_keepdim`'s). Runs on the CPU (other devices copy there and back).
pub fn prod_keepdim(t: &Tensor, dim: usize) -> Result<Tensor> {
    prod_on_cpu(t, ProdDim { dim, exclusive: false })
}

/// For each element, the product of the others along `dim` (same shape as `t`).
pub fn prod_others(t: &Tensor, dim: usize) -> Result<Tensor> {
    prod_on_cpu(t, ProdDim { dim, exclusive: true })
}

fn prod_on_cpu(t: &Tensor, op: ProdDim) -> Result<Tensor> {
    let dev = t.device().clone();
    let x = if dev.is_cpu() { t.dense()? } else { t.to_device(&candle_core::Device::Cpu)?.dense()? };
    let out = x.apply_op1_no_bwd(&op)?;
    if dev.is_cpu() {
        Ok(out)
    } else {
        out.to_device(&dev)
    }
}

/// `sum |x|^p` over a whole slice, accumulated in f64 (squares in the element type's
/// lanes for p = 2, absolute values for p = 1, `powf` otherwise), in parallel chunks when large: the pieces of
/// `clip_grad_norm_`'s total norm.
pub(crate) fn pow_sum<T: Float>(x: &[T], p: f64) -> f64 {
    let part = |c: &[T]| -> f64 {
        if p == 2.0 {
            lane_sum_t(c, |v| v * v)
        } else if p == 1.0 {
            c.iter().map(|&v| v.f().abs()).sum()
        } else {
            c.iter().map(|&v| v.f().abs().powf(p)).sum()
        }
    };
    if super::parallel::par_ok(x.len()) {
        let chunk = |i: usize| part(&x[i * GRAIN * 4..((i + 1) * GRAIN * 4).min(x.len())]);
        super::parallel::map_indices(x.len().div_ceil(GRAIN * 4), true, chunk).into_iter().sum()
    } else {
        part(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::ops::lanes::{X16, X8};

    /// Float32 row sums and sums of squares (`row_sums_of` at the CPU's level, and each
    /// SIMD level's kernel this CPU has): every row length from 1 to 70 and 196, on one
    /// and several threads' worth of rows, equal the float64 sums; an infinity or NaN in
    /// a row's masked tail reaches that row's sum only.
    #[test]
    fn row_sums_follow_the_float64_sums() {
        type Kernel = fn(&[f32], &mut [f32], usize, bool);
        let mut kernels: Vec<Kernel> =
            vec![|x, o, r, sq| if sq { row_sums_of::<f32, true>(x, o, r) } else { row_sums_of::<f32, false>(x, o, r) }];
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::cpu::has_avx2_fma() {
                kernels.push(row_sums_at::<X8>);
            }
            if has_avx512() {
                kernels.push(row_sums_at::<X16>);
            }
        }
        for (r, kernel) in (1..=70).chain([196]).flat_map(|r| kernels.iter().map(move |k| (r, k))) {
            for (rows, sq) in [1, 3, 5000].into_iter().flat_map(|n| [(n, false), (n, true)]) {
                let mut x = crate::ops::test_values(rows * r, r as u64);
                let mut out = vec![0f32; rows];
                kernel(&x, &mut out, r, sq);
                for (i, &got) in out.iter().enumerate() {
                    let want: f64 = x[i * r..(i + 1) * r].iter().map(|&v| if sq { v as f64 * v as f64 } else { v as f64 }).sum();
                    assert!((got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()), "r {r} row {i} sq {sq}: {got} vs {want}");
                }
                if rows == 3 {
                    x[r - 1] = f32::INFINITY;
                    x[2 * r - 1] = f32::NAN;
                    kernel(&x, &mut out, r, sq);
                    assert!(out[0] == f32::INFINITY && out[1].is_nan() && out[2].is_finite(), "r {r} sq {sq}: {out:?}");
                }
            }
        }
    }

    /// Float32 row maxima and minima (each SIMD level's `row_extremes_at` this CPU has):
    /// every row length from 1 to 70 and 384 equal a scalar scan; a NaN anywhere in a row
    /// (the first element, the overlapping last vector, the middle) gives NaN, an
    /// infinity of either sign its exact extreme, and the rows around stay as they were.
    #[test]
    fn row_extremes_follow_a_scalar_scan() {
        type Kernel = fn(&[f32], &mut [f32], usize, bool);
        #[allow(unused_mut)]
        let mut kernels: Vec<Kernel> = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if crate::ops::cpu::has_avx2_fma() {
                kernels.push(row_extremes_at::<X8>);
            }
            if has_avx512() {
                kernels.push(row_extremes_at::<X16>);
            }
        }
        let scan = |row: &[f32], max: bool| {
            row.iter().fold(row[0], |m, &e| {
                if m.is_nan() || e.is_nan() {
                    f32::NAN
                } else if max {
                    m.max(e)
                } else {
                    m.min(e)
                }
            })
        };
        for (r, kernel) in (1..=70).chain([384]).flat_map(|r| kernels.iter().map(move |k| (r, k))) {
            for max in [true, false] {
                let x = crate::ops::test_values(5 * r, r as u64);
                let mut out = vec![0f32; 5];
                kernel(&x, &mut out, r, max);
                for (i, &got) in out.iter().enumerate() {
                    assert_eq!(got, scan(&x[i * r..(i + 1) * r], max), "r {r} row {i} max {max}");
                }
                for (at, special) in
                    [(0, f32::NAN), (r - 1, f32::NAN), (r / 2, f32::NAN), (r / 3, f32::INFINITY), (r - 1, f32::NEG_INFINITY)]
                {
                    let mut y = x.clone();
                    y[2 * r + at] = special;
                    kernel(&y, &mut out, r, max);
                    for (i, &got) in out.iter().enumerate() {
                        let want = scan(&y[i * r..(i + 1) * r], max);
                        assert!(
                            got == want || (got.is_nan() && want.is_nan()),
                            "r {r} row {i} max {max} {special} at {at}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// `sum_squares_keepdim` over every run of dims of a (3, 5, 7) tensor and over
    /// split runs: the float64 sums of the squares, float32 and float64.
    #[test]
    fn sums_of_squares_over_any_dims() {
        let x = Tensor::new(crate::ops::test_values(105, 7), &candle_core::Device::Cpu).unwrap().reshape((3, 5, 7)).unwrap();
        for dims in [vec![0], vec![1], vec![2], vec![0, 1], vec![1, 2], vec![0, 2], vec![0, 1, 2]] {
            for dt in [DType::F32, DType::F64] {
                let x = x.to_dtype(dt).unwrap();
                let got = sum_squares_keepdim(&x, &dims).unwrap().to_dtype(DType::F64).unwrap();
                let want = x.to_dtype(DType::F64).unwrap().sqr().unwrap().sum_keepdim(dims.clone()).unwrap();
                let err = (got - &want).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f64>().unwrap();
                assert!(err <= 1e-5, "dims {dims:?} {dt:?}: {err}");
            }
        }
    }
}
