//! Multi-threaded CPU kernels where Candle's are single-threaded or lack a
//! backward: sums over any dims, and softmax / log_softmax over any dim.
//!
//! Each is a Candle `CustomOp1` with its backward written out, so it takes part
//! in autograd. The custom ops are CPU code; on other devices (CUDA, Metal)
//! and for other dtypes each entry point below uses Candle's own ops, which
//! run there with their backward: `sum_keepdim` Candle's sum, `softmax` a
//! max-shifted exp/sum, `gelu_erf` Candle's gelu_erf. Only `prod_keepdim`
//! copies to the CPU and back (Candle has no product reduction).
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// Rows of at least this many elements each make a parallel task worthwhile.
const GRAIN: usize = 1 << 14;

fn fast_path(t: &Tensor) -> bool {
    t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64)
}

/// `(outer, r, inner)` of a contiguous tensor reduced over dims `lo..=hi`.
fn split(dims: &[usize], lo: usize, hi: usize) -> (usize, usize, usize) {
    let outer = dims[..lo].iter().product();
    let r = dims[lo..=hi].iter().product();
    let inner = dims[hi + 1..].iter().product();
    (outer, r, inner)
}

trait Float: Copy + Send + Sync + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> + std::ops::Div<Output = Self> + PartialOrd + 'static {
    const ZERO: Self;
    const NEG_INF: Self;
    /// `FMA`: the caller runs with FMA enabled (see `madd`).
    fn exp<const FMA: bool>(self) -> Self;
    fn ln(self) -> Self;
    fn max(self, o: Self) -> Self;
}
impl Float for f32 {
    const ZERO: f32 = 0.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn exp<const FMA: bool>(self) -> f32 {
        fast_exp::<FMA>(self)
    }
    fn ln(self) -> f32 {
        f32::ln(self)
    }
    #[inline(always)]
    fn max(self, o: f32) -> f32 {
        if self > o { self } else { o }
    }
}
impl Float for f64 {
    const ZERO: f64 = 0.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    #[inline(always)]
    fn exp<const FMA: bool>(self) -> f64 {
        f64::exp(self)
    }
    fn ln(self) -> f64 {
        f64::ln(self)
    }
    #[inline(always)]
    fn max(self, o: f64) -> f64 {
        if self > o { self } else { o }
    }
}

/// `fast_exp`'s range: from just above ln(f32::MIN_POSITIVE) (-87.33654), so no
/// result is subnormal, to the last x whose 2^n does not overflow (x log2 e
/// rounds to 127; the true value passes f32::MAX only at 88.7228).
const EXP_LO: f32 = -87.3365;
const EXP_HI: f32 = 88.376;

/// exp for f32 without branches, so loops over it vectorize: 2^n * p(r) with
/// |r| <= ln2/2 and a degree-6 polynomial (error about 1 ulp, as Cephes' expf).
/// Below `EXP_LO` it gives exactly 0 rather than a subnormal (a masked score of
/// -1e30 or -inf must weigh nothing, and subnormals make every later product
/// slow: a causal softmax fed to a matmul ran 27x slower); above `EXP_HI` +inf;
/// NaN stays NaN (selects, which vectorize, not branches).
#[inline(always)]
pub fn fast_exp<const FMA: bool>(x: f32) -> f32 {
    let e = exp_in_range::<FMA>(x.max(EXP_LO).min(EXP_HI));
    let e = if x < EXP_LO { 0.0 } else { e };
    let e = if x > EXP_HI { f32::INFINITY } else { e };
    if x.is_nan() { x } else { e }
}

/// exp for `x <= 0`, where `-inf` (or anything below -87.68) gives exactly 0:
/// the exponent then rounds to -127, whose scale bits are all zero. No branch.
#[inline(always)]
pub fn fast_exp_nonpos<const FMA: bool>(x: f32) -> f32 {
    exp_in_range::<FMA>(x.max(-88.0))
}

/// `a * b + c`, as one fused instruction where the caller is compiled with FMA
/// (`FMA = true`: inside the `#[target_feature(enable = "...fma")]` variants). Rust
/// never fuses `a * b + c` by itself, and `mul_add` without the feature is a libm
/// call, so the portable variants pass `false`. Fused, the polynomials below take
/// half the instructions: softmax ~11% and the attention kernel ~7% faster.
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

#[inline(always)]
fn exp_in_range<const FMA: bool>(x: f32) -> f32 {
    // Round x*log2(e) to the nearest integer n by adding 1.5*2^23 (the float's
    // low mantissa bits then hold n), so no libm call or cast breaks vectorization.
    const SHIFT: f32 = 12_582_912.0;
    let t = madd::<FMA>(x, std::f32::consts::LOG2_E, SHIFT);
    let n = t - SHIFT;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = madd::<FMA>(-n, 1.428_606_8e-6, madd::<FMA>(-n, 0.693_145_75, x));
    let mut p = 1.987_569_1e-4_f32;
    for k in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5] {
        p = madd::<FMA>(p, r, k);
    }
    let p = madd::<FMA>(p * r, r, r) + 1.0;
    p * f32::from_bits((ni.wrapping_add(127) as u32) << 23)
}

pub(crate) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f") && has_avx2_fma()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Reductions with 16 independent lanes, so the loops vectorize despite float
/// non-associativity (a single running accumulator would serialize them).
#[inline(always)]
fn sum_slice<T: Float>(x: &[T]) -> T {
    let mut acc = [T::ZERO; 16];
    let chunks = x.chunks_exact(16);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] = acc[k] + c[k];
        }
    }
    let mut s = T::ZERO;
    for &a in acc.iter().chain(rem) {
        s = s + a;
    }
    s
}

#[inline(always)]
fn max_slice<T: Float>(x: &[T]) -> T {
    let mut acc = [T::NEG_INF; 16];
    let chunks = x.chunks_exact(16);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] = acc[k].max(c[k]);
        }
    }
    let mut m = T::NEG_INF;
    for &a in acc.iter().chain(rem) {
        m = m.max(a);
    }
    m
}

#[inline(always)]
fn add_into<T: Float>(acc: &mut [T], row: &[T]) {
    for (a, &v) in acc.iter_mut().zip(row) {
        *a = *a + v;
    }
}

#[inline(always)]
fn row_sums<T: Float>(rows: &[T], out: &mut [T], r: usize) {
    for (v, row) in out.iter_mut().zip(rows.chunks(r)) {
        *v = sum_slice(row);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn row_sums_avx512<T: Float>(rows: &[T], out: &mut [T], r: usize) {
    row_sums(rows, out, r)
}

fn reduce_block<T: Float>(src: &[T], outer: usize, r: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; outer * inner];
    if inner == 1 {
        if outer == 1 {
            // One long sum: partial sums per chunk, then combine.
            let parts: Vec<T> = src.par_chunks(GRAIN * 4).map(sum_slice).collect();
            out[0] = sum_slice(&parts);
        } else {
            let per = (GRAIN / r.max(1)).max(1);
            let wide = has_avx512();
            out.par_chunks_mut(per).enumerate().for_each(|(ci, o)| {
                let rows = &src[ci * per * r..(ci * per + o.len()) * r];
                #[cfg(target_arch = "x86_64")]
                if wide {
                    // SAFETY: the CPU features were detected above.
                    unsafe { row_sums_avx512(rows, o, r) };
                    return;
                }
                let _ = wide;
                row_sums(rows, o, r);
            });
        }
    } else {
        let col_chunk = (GRAIN / r.max(1)).clamp(64, inner.max(64));
        out.par_chunks_mut(inner).enumerate().for_each(|(o, dst)| {
            let block = &src[o * r * inner..(o + 1) * r * inner];
            dst.par_chunks_mut(col_chunk).enumerate().for_each(|(cj, d)| {
                let j0 = cj * col_chunk;
                for i in 0..r {
                    add_into(d, &block[i * inner + j0..i * inner + j0 + d.len()]);
                }
            });
        });
    }
    out
}

struct SumBlock {
    lo: usize,
    hi: usize,
}

impl CustomOp1 for SumBlock {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.dims();
        let (outer, r, inner) = split(dims, self.lo, self.hi);
        let mut out_dims = dims.to_vec();
        for d in &mut out_dims[self.lo..=self.hi] {
            *d = 1;
        }
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("sum: expected a contiguous input") };
        let st = match s {
            CpuStorage::F32(v) => CpuStorage::F32(reduce_block(&v[a..b], outer, r, inner)),
            CpuStorage::F64(v) => CpuStorage::F64(reduce_block(&v[a..b], outer, r, inner)),
            _ => candle_core::bail!("sum: fast path supports f32 and f64"),
        };
        Ok((st, Shape::from(out_dims)))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad_res.broadcast_as(arg.shape())?))
    }
}

/// Sum over `dims` (sorted, non-empty), keeping them as size-1 dims.
pub fn sum_keepdim(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    // Empty inputs go to Candle too: the blocked kernel splits rows by their (zero) length.
    if !fast_path(t) || t.elem_count() == 0 {
        return t.sum_keepdim(dims.to_vec());
    }
    let mut cur = t.contiguous()?;
    // Reduce runs of consecutive dims in one pass each, last run first.
    let mut i = dims.len();
    while i > 0 {
        let hi = dims[i - 1];
        let mut lo = hi;
        i -= 1;
        while i > 0 && dims[i - 1] + 1 == lo {
            lo -= 1;
            i -= 1;
        }
        cur = cur.apply_op1(SumBlock { lo, hi })?;
    }
    Ok(cur)
}

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
        for d in dst.iter_mut() {
            *d = *d / s;
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
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_chunk_avx2<T: Float>(s: &[T], d: &mut [T], n: usize, log: bool) {
    rows_chunk::<T, true>(s, d, n, log)
}

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
            // SAFETY: the CPU features were detected above.
            unsafe { rows_chunk_avx512(s, d, n, log) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: the CPU features were detected above.
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
                *mj = mj.max(v);
            }
        }
        let mut sum = vec![T::ZERO; inner];
        for i in 0..r {
            let row = &s[i * inner..(i + 1) * inner];
            let out = &mut d[i * inner..(i + 1) * inner];
            for j in 0..inner {
                let e = (row[j] - m[j]).exp::<false>();
                out[j] = e;
                sum[j] = sum[j] + e;
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
        if self.log { "log_softmax" } else { "softmax" }
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = l.dims();
        let (_, r, inner) = split(dims, self.dim, self.dim);
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("softmax: expected a contiguous input") };
        fn run<T: Float>(v: &[T], r: usize, inner: usize, log: bool) -> Vec<T> {
            let mut out = vec![T::ZERO; v.len()];
            if r == 0 || v.is_empty() {
                return out;
            }
            if inner == 1 {
                softmax_rows(v, &mut out, r, log);
            } else {
                softmax_strided(v, &mut out, r, inner, log);
            }
            out
        }
        let st = match s {
            CpuStorage::F32(v) => CpuStorage::F32(run(&v[a..b], r, inner, self.log)),
            CpuStorage::F64(v) => CpuStorage::F64(run(&v[a..b], r, inner, self.log)),
            _ => candle_core::bail!("softmax: fast path supports f32 and f64"),
        };
        Ok((st, l.shape().clone()))
    }
    fn bwd(&self, _arg: &Tensor, res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        let d = self.dim;
        let gx = if self.log {
            // d log_softmax: g - softmax * sum(g)
            let s = g.sum_keepdim(d)?;
            g.sub(&res.exp()?.broadcast_mul(&s)?)?
        } else {
            // d softmax: y * (g - sum(g * y))
            let s = g.mul(res)?.sum_keepdim(d)?;
            res.mul(&g.broadcast_sub(&s)?)?
        };
        Ok(Some(gx))
    }
}

/// Differentiable softmax (or log_softmax) over `dim`.
pub fn softmax(t: &Tensor, dim: usize, log: bool) -> Result<Tensor> {
    if fast_path(t) {
        return t.contiguous()?.apply_op1(Softmax { dim, log });
    }
    let max = t.max_keepdim(dim)?.detach();
    let diff = t.broadcast_sub(&max)?;
    let e = diff.exp()?;
    let s = e.sum_keepdim(dim)?;
    if log { diff.broadcast_sub(&s.log()?) } else { e.broadcast_div(&s) }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn fast_erf_is_accurate() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_erf_is_accurate_with::<false>();
        fast_erf_is_accurate_with::<true>();
    }

    fn fast_erf_is_accurate_with<const FMA: bool>() {
        let mut x = -6.0f64;
        while x < 6.0 {
            let exact = libm_erf(x);
            assert!((fast_erf::<FMA>(x as f32) as f64 - exact).abs() < 5e-7, "x={x} fast={} exact={exact}", fast_erf::<FMA>(x as f32));
            x += 0.001;
        }
    }

    #[test]
    fn fast_erf_saturates_past_the_clamp() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_erf_saturates_past_the_clamp_with::<false>();
        fast_erf_saturates_past_the_clamp_with::<true>();
    }

    fn fast_erf_saturates_past_the_clamp_with<const FMA: bool>() {
        for x in [4.0f32, 4.5, 100.0, 1e30, f32::INFINITY] {
            assert_eq!(fast_erf::<FMA>(x), 1.0);
            assert_eq!(fast_erf::<FMA>(-x), -1.0);
        }
    }

    /// erf by its Taylor series (|x| < 3) or the continued-fraction tail: a reference only.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 3.0 {
            let (mut sum, mut term, mut n) = (x, x, 0.0);
            while term.abs() > 1e-17 {
                n += 1.0;
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
            }
            return sum * 2.0 / std::f64::consts::PI.sqrt();
        }
        let t = x.abs();
        let mut f = t;
        for k in (1..60).rev() {
            f = t + (k as f64 / 2.0) / f;
        }
        let tail = (-t * t).exp() / (f * std::f64::consts::PI.sqrt());
        x.signum() * (1.0 - tail)
    }

    #[test]
    fn fast_exp_is_accurate() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_is_accurate_with::<false>();
        fast_exp_is_accurate_with::<true>();
    }

    fn fast_exp_is_accurate_with<const FMA: bool>() {
        let mut x = EXP_LO;
        while x <= EXP_HI {
            let (a, b) = (fast_exp::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
            x += 0.0137;
        }
        for x in [EXP_LO, -87.3, -87.1, 88.37, EXP_HI] {
            let (a, b) = (fast_exp::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
        }
    }

    #[test]
    fn fast_exp_edges_are_zero_inf_nan_never_subnormal() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_edges_are_zero_inf_nan_never_subnormal_with::<false>();
        fast_exp_edges_are_zero_inf_nan_never_subnormal_with::<true>();
    }

    fn fast_exp_edges_are_zero_inf_nan_never_subnormal_with<const FMA: bool>() {
        for x in [f32::NEG_INFINITY, -1e30, -104.0, -88.0, -87.34] {
            assert_eq!(fast_exp::<FMA>(x), 0.0, "x={x}");
        }
        assert!(fast_exp::<FMA>(EXP_LO) >= f32::MIN_POSITIVE);
        assert_eq!(fast_exp::<FMA>(0.0), 1.0);
        assert_eq!(fast_exp::<FMA>(88.8), f32::INFINITY);
        assert_eq!(fast_exp::<FMA>(f32::INFINITY), f32::INFINITY);
        assert!(fast_exp::<FMA>(f32::NAN).is_nan());
    }

    #[test]
    fn fast_exp_nonpos_is_accurate_and_zero_at_neg_inf() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with::<false>();
        fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with::<true>();
    }

    fn fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with<const FMA: bool>() {
        assert_eq!(fast_exp_nonpos::<FMA>(f32::NEG_INFINITY), 0.0);
        assert_eq!(fast_exp_nonpos::<FMA>(-1e30), 0.0);
        assert_eq!(fast_exp_nonpos::<FMA>(0.0), 1.0);
        let mut x = -87.0f32;
        while x <= 0.0 {
            let (a, b) = (fast_exp_nonpos::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
            x += 0.0137;
        }
    }
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
                CpuStorage::$variant(if self.exclusive { exclusive_prod(&$v[a..b], outer, r, inner) } else { prod_block(&$v[a..b], outer, r, inner) })
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
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let others = arg.detach().contiguous()?.apply_op1_no_bwd(&ProdDim { dim: self.dim, exclusive: true })?;
        Ok(Some(others.broadcast_mul(grad_res)?))
    }
}

/// Product over `dim`, keeping it as a size-1 dim; differentiable for floats.
/// Runs on the CPU (other devices copy there and back).
pub fn prod_keepdim(t: &Tensor, dim: usize) -> Result<Tensor> {
    let dev = t.device().clone();
    let x = if dev.is_cpu() { t.contiguous()? } else { t.to_device(&candle_core::Device::Cpu)?.contiguous()? };
    let out = x.apply_op1(ProdDim { dim, exclusive: false })?;
    if dev.is_cpu() { Ok(out) } else { out.to_device(&dev) }
}

/// erf for f32 as a branch-free rational function of x^2 on [-4, 4] (the
/// approximation Eigen and XLA use; max abs error 3e-7, near the clamp), so loops
/// vectorize. Past the clamp it is exactly +-1 (f32's erf rounds to 1 from 3.92):
/// the approximation's 1 - 1.8e-7 there made GELU(-1000) -8.9e-5 instead of -0.
#[inline(always)]
pub fn fast_erf<const FMA: bool>(x: f32) -> f32 {
    let e = erf_in_range::<FMA>(x.max(-4.0).min(4.0));
    if x >= 4.0 {
        1.0
    } else if x <= -4.0 {
        -1.0
    } else {
        e
    }
}

#[inline(always)]
fn erf_in_range<const FMA: bool>(x: f32) -> f32 {
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    for k in [2.770_681_4e-8, -2.101_024e-6, -5.692_506_4e-5, -7.349_906_3e-4, -2.954_600_1e-3, -1.609_603_3e-2] {
        p = madd::<FMA>(p, x2, k);
    }
    let mut q = -1.456_607_2e-5_f32;
    for k in [-2.133_740_6e-4, -1.682_827e-3, -7.373_329e-3, -1.426_473_9e-2] {
        q = madd::<FMA>(q, x2, k);
    }
    x * p / q
}

const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f32 = 0.398_942_3;

#[inline(always)]
fn gelu_chunk<const FMA: bool>(src: &[f32], dst: &mut [f32], grad: bool) {
    if grad {
        // d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = 0.5 * (1.0 + fast_erf::<FMA>(x * SQRT_HALF)) + x * INV_SQRT_2PI * fast_exp::<FMA>(-0.5 * x * x);
        }
    } else {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = 0.5 * x * (1.0 + fast_erf::<FMA>(x * SQRT_HALF));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gelu_chunk_avx512(src: &[f32], dst: &mut [f32], grad: bool) {
    use std::arch::x86_64::*;
    if grad {
        return gelu_chunk::<true>(src, dst, grad);
    }
    // The forward as `fast_erf` computes it, with the one division replaced by a
    // reciprocal estimate and a Newton step (relative error ~1e-8): a 16-lane
    // division would take most of the time.
    let n = src.len().min(dst.len()) / 16 * 16;
    let c = |v: f32| _mm512_set1_ps(v);
    let (lo, hi, sh, half, one, two) = (c(-4.0), c(4.0), c(SQRT_HALF), c(0.5), c(1.0), c(2.0));
    let mut i = 0;
    while i < n {
        let x = _mm512_loadu_ps(src.as_ptr().add(i));
        let z = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x, sh), lo), hi);
        let z2 = _mm512_mul_ps(z, z);
        let mut p = c(-2.726_142_3e-10);
        for k in [2.770_681_4e-8, -2.101_024e-6, -5.692_506_4e-5, -7.349_906_3e-4, -2.954_600_1e-3, -1.609_603_3e-2] {
            p = _mm512_fmadd_ps(p, z2, c(k));
        }
        let mut q = c(-1.456_607_2e-5);
        for k in [-2.133_740_6e-4, -1.682_827e-3, -7.373_329e-3, -1.426_473_9e-2] {
            q = _mm512_fmadd_ps(q, z2, c(k));
        }
        let r = _mm512_rcp14_ps(q);
        let r = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, two));
        let erf = _mm512_mul_ps(_mm512_mul_ps(z, p), r);
        // Exactly +-1 where z was clamped (see fast_erf): z is +-4 there.
        let erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(z), hi), erf, _mm512_mul_ps(z, c(0.25)));
        let y = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, erf));
        _mm512_storeu_ps(dst.as_mut_ptr().add(i), y);
        i += 16;
    }
    gelu_chunk::<true>(&src[n..], &mut dst[n..], grad)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_chunk_avx2(src: &[f32], dst: &mut [f32], grad: bool) {
    gelu_chunk::<true>(src, dst, grad)
}

fn gelu_map(src: &[f32], grad: bool) -> Vec<f32> {
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    // Every chunk is written in full by `gelu_chunk*` before anything reads it.
    crate::parallel::filled_plain(src.len(), |out: &mut [f32]| {
        crate::parallel::for_chunks(out, GRAIN, crate::parallel::par_ok(src.len()), |i, d| {
            let s = &src[i * GRAIN..i * GRAIN + d.len()];
            #[cfg(target_arch = "x86_64")]
            {
                if wide {
                    // SAFETY: the CPU features were detected above.
                    unsafe { gelu_chunk_avx512(s, d, grad) };
                    return;
                }
                if simd {
                    // SAFETY: as above.
                    unsafe { gelu_chunk_avx2(s, d, grad) };
                    return;
                }
            }
            let _ = (wide, simd);
            gelu_chunk::<false>(s, d, grad);
        })
    })
}

/// Exact (erf) GELU on f32, forward or its derivative.
struct Gelu {
    derivative: bool,
}

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "gelu"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("gelu: expected a contiguous input") };
        match s {
            CpuStorage::F32(v) => Ok((CpuStorage::F32(gelu_map(&v[a..b], self.derivative)), l.shape().clone())),
            _ => candle_core::bail!("gelu: fast path supports f32"),
        }
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let d = arg.detach().contiguous()?.apply_op1_no_bwd(&Gelu { derivative: true })?;
        Ok(Some(d.mul(grad_res)?))
    }
}

/// GELU with the exact erf form; the fast kernel for f32 on the CPU, Candle's
/// own `gelu_erf` (one kernel on every device, with its backward) elsewhere.
pub fn gelu_erf(t: &Tensor) -> Result<Tensor> {
    if t.device().is_cpu() && t.dtype() == DType::F32 {
        return t.contiguous()?.apply_op1(Gelu { derivative: false });
    }
    t.gelu_erf()
}
