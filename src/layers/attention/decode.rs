//! Attention of one new position per sequence over a key/value cache (a decode step
//! of a causal language model), with grouped-query heads.
//!
//! Why a kernel of its own: in a decode step the cache is read once per token and
//! the products are tiny, so the time is the memory traffic. This kernel
//! - reads each kv head once for all the query heads of its group (the general
//!   forward reads it once per query head);
//! - reads a float16 cache directly, widening each row in registers (F16C): half
//!   the bytes of a float32 cache, as llama.cpp's default cache;
//! - splits long caches into key chunks (flash-decoding), so a single sequence with
//!   three kv heads still keeps every thread busy; the chunks' partial softmax sums
//!   are merged at the end.
//!
//! No mask: a decode position attends every cached position, itself included.

use super::forward::dot_any;
use super::rows::{exp_row_fast, fast_exp};
use crate::ops::parallel::SyncPtr;
use half::f16;

/// Keys per chunk at least: below this a chunk's fixed costs (its scratch, the merge)
/// outweigh what splitting gains.
const MIN_CHUNK: usize = 64;

/// A cache element: float32 or float16, widened to float32 row by row.
pub(crate) trait KvElem: Copy + Send + Sync + 'static {
    /// `dst[i] = src[i]` as f32.
    fn widen(src: &[Self], dst: &mut [f32]);
    /// `widen` with F16C instructions where they apply.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn widen_avx2(src: &[Self], dst: &mut [f32]);
}

impl KvElem for f32 {
    #[inline(always)]
    fn widen(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn widen_avx2(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl KvElem for f16 {
    #[inline(always)]
    fn widen(src: &[f16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
    // With the features enabled here the intrinsics inline into `chunk_avx2`
    // (without them each became a call per 8 elements).
    #[cfg(target_arch = "x86_64")]
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn widen_avx2(src: &[f16], dst: &mut [f32]) {
        use std::arch::x86_64::*;
        let n = src.len().min(dst.len());
        let mut i = 0;
        // SAFETY: each step reads 8 halves (16 bytes) at i and writes 8 floats at i with
        // i + 8 <= n, inside both slices; F16C is the caller's contract.
        unsafe {
            while i + 8 <= n {
                let h = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
                i += 8;
            }
        }
        for j in i..n {
            dst[j] = src[j].to_f32();
        }
    }
}

/// The shapes of one call: `b` sequences, `hq` query heads in groups of `hq / hkv`
/// per kv head, head size `d`; the cache holds `cap` positions per (sequence, kv head)
/// of which the first `len` are read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DecodeGeo {
    pub(crate) b: usize,
    pub(crate) hq: usize,
    pub(crate) hkv: usize,
    pub(crate) d: usize,
    pub(crate) cap: usize,
    pub(crate) len: usize,
}

/// `softmax(scale * q K^T) V` for `q` (b, hq, d) over caches `k`, `v` laid out
/// (b, hkv, cap, d) contiguous: the output (b, hq, d).
///
/// Panics (a caller bug, checked by the binding) when the slices are shorter than the
/// geometry says, `hkv` does not divide `hq`, or `len` exceeds `cap`.
pub(crate) fn decode_attention<E: KvElem>(g: DecodeGeo, q: &[f32], k: &[E], v: &[E], scale: f32) -> Vec<f32> {
    let DecodeGeo { b, hq, hkv, d, cap, len } = g;
    assert!(hkv > 0 && hq % hkv == 0 && len <= cap && d > 0, "decode_attention: bad geometry {g:?}");
    assert!(q.len() >= b * hq * d && k.len() >= b * hkv * cap * d && v.len() >= b * hkv * cap * d);
    let group = hq / hkv;
    let mut out = vec![0f32; b * hq * d];
    if len == 0 || b * hq == 0 {
        return out;
    }
    // Enough tasks for every thread (several each, to balance a thread slowed by a
    // neighbour), but no chunk shorter than MIN_CHUNK keys.
    let heads = b * hkv;
    let threads = crate::ops::pool::num_threads();
    let want = (4 * threads).div_ceil(heads).max(1);
    let chunks = want.min(len.div_ceil(MIN_CHUNK)).max(1);
    let per = len.div_ceil(chunks);
    let chunks = len.div_ceil(per);
    // Per (head, chunk, group row): the row max, the sum of exps and d accumulators.
    let stride = d + 2;
    let mut part = vec![0f32; heads * chunks * group * stride];
    let pp = SyncPtr(part.as_mut_ptr());
    let simd = crate::ops::cpu::has_avx2_fma() && cfg!(target_arch = "x86_64") && f16c();
    let task = |t: usize| {
        let (hd, c) = (t / chunks, t % chunks);
        let (j0, j1) = (c * per, ((c + 1) * per).min(len));
        let qs = &q[(hd / hkv * hq + (hd % hkv) * group) * d..][..group * d];
        let kc = &k[hd * cap * d..][..len * d];
        let vc = &v[hd * cap * d..][..len * d];
        // SAFETY: task t owns the `group * stride` floats at (hd * chunks + c) *
        // group * stride of `part` (sized heads * chunks * group * stride): no other
        // task writes them, and `part` outlives `for_each`.
        let dst = unsafe { std::slice::from_raw_parts_mut(pp.ptr().add(t * group * stride), group * stride) };
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: `simd` means AVX2, FMA and F16C were detected.
            unsafe { chunk_avx2(qs, kc, vc, j0, j1, d, group, scale, dst) };
            return;
        }
        chunk::<E, false>(qs, kc, vc, j0, j1, d, group, scale, dst);
    };
    crate::ops::team::for_each(heads * chunks, &task);
    // Merge the chunks of each (head, group row): rescale to the largest max.
    for hd in 0..heads {
        for r in 0..group {
            let o = &mut out[(hd / hkv * hq + (hd % hkv) * group + r) * d..][..d];
            let at = |c: usize| &part[((hd * chunks + c) * group + r) * stride..][..stride];
            let m = (0..chunks).map(|c| at(c)[0]).fold(f32::NEG_INFINITY, f32::max);
            if m == f32::NEG_INFINITY {
                continue; // every score -inf: zeros, as the general forward gives
            }
            let mut l = 0f32;
            for c in 0..chunks {
                let p = at(c);
                let a = if p[0] == f32::NEG_INFINITY { 0.0 } else { (p[0] - m).exp() };
                l += a * p[1];
                for (x, &y) in o.iter_mut().zip(&p[2..]) {
                    *x += a * y;
                }
            }
            let inv = if l == 0.0 { 0.0 } else { 1.0 / l };
            o.iter_mut().for_each(|x| *x *= inv);
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
fn f16c() -> bool {
    std::is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn f16c() -> bool {
    false
}

/// `chunk` with AVX2 + FMA + F16C: the chunk's keys and values widened to float32
/// once (so each is converted once for the whole group), scores of 8 keys at a time
/// reduced together (one transposed horizontal sum instead of eight), and the
/// `P V` accumulators of 64 features held in registers over all the chunk's keys.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn chunk_avx2<E: KvElem>(q: &[f32], k: &[E], v: &[E], j0: usize, j1: usize, d: usize, group: usize, scale: f32, dst: &mut [f32]) {
    use std::arch::x86_64::*;
    if !d.is_multiple_of(8) {
        return chunk::<E, true>(q, k, v, j0, j1, d, group, scale, dst);
    }
    let w = j1 - j0;
    let mut buf = vec![0f32; w * d];
    let mut sc = vec![0f32; group * w];
    // SAFETY (whole body): every pointer below addresses `buf` (w * d floats), `sc`
    // (group * w), `q` (group * d, the caller's slice) or `dst` (group * (d + 2)),
    // at offsets the loop bounds keep inside them; AVX2/FMA/F16C are the contract.
    unsafe {
        E::widen_avx2(&k[j0 * d..j1 * d], &mut buf);
        let (bp, sp) = (buf.as_ptr(), sc.as_mut_ptr());
        let w8 = w - w % 8;
        for r in 0..group {
            let qp = q.as_ptr().add(r * d);
            let mut jb = 0;
            while jb < w8 {
                let mut a = [_mm256_setzero_ps(); 8];
                let mut c = 0;
                while c < d {
                    let qv = _mm256_loadu_ps(qp.add(c));
                    for (t, at) in a.iter_mut().enumerate() {
                        *at = _mm256_fmadd_ps(qv, _mm256_loadu_ps(bp.add((jb + t) * d + c)), *at);
                    }
                    c += 8;
                }
                _mm256_storeu_ps(sp.add(r * w + jb), _mm256_mul_ps(hsum8(&a), _mm256_set1_ps(scale)));
                jb += 8;
            }
            for j in w8..w {
                *sp.add(r * w + j) = scale * super::forward::dot_f32_avx2(&q[r * d..(r + 1) * d], &buf[j * d..(j + 1) * d]);
            }
        }
        let stride = d + 2;
        softmax_rows::<true>(&mut sc, w, stride, dst);
        E::widen_avx2(&v[j0 * d..j1 * d], &mut buf);
        let bp = buf.as_ptr();
        for r in 0..group {
            let op = dst.as_mut_ptr().add(r * stride + 2);
            let pr = sc.as_ptr().add(r * w);
            let mut c0 = 0;
            while c0 < d {
                let nv = ((d - c0) / 8).min(8);
                let mut a = [_mm256_setzero_ps(); 8];
                for j in 0..w {
                    let p = _mm256_set1_ps(*pr.add(j));
                    let row = bp.add(j * d + c0);
                    if nv == 8 {
                        for (t, at) in a.iter_mut().enumerate() {
                            *at = _mm256_fmadd_ps(p, _mm256_loadu_ps(row.add(8 * t)), *at);
                        }
                    } else {
                        for (t, at) in a[..nv].iter_mut().enumerate() {
                            *at = _mm256_fmadd_ps(p, _mm256_loadu_ps(row.add(8 * t)), *at);
                        }
                    }
                }
                for (t, at) in a[..nv].iter().enumerate() {
                    _mm256_storeu_ps(op.add(c0 + 8 * t), *at);
                }
                c0 += 8 * nv;
            }
        }
    }
}

/// The horizontal sums of 8 vectors, as one vector: lane t is the sum of `a[t]`.
///
/// # Safety
/// The CPU must support AVX.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn hsum8(a: &[std::arch::x86_64::__m256; 8]) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // hadd(x, y) = [x0+x1, x2+x3, y0+y1, y2+y3 | x4+x5, x6+x7, y4+y5, y6+y7]: two
    // rounds give [s0, s1, s2, s3 | s0', s1', s2', s3'] (sums of each half), and the
    // halves of two such vectors add up to the eight sums.
    let h0123 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    let h4567 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31))
}

/// Keys `j0..j1` for the `group` query rows `q` (group x d): writes per row its max
/// score, its sum of exps and the unnormalized `P V` (d floats) into `dst`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn chunk<E: KvElem, const SIMD: bool>(
    q: &[f32],
    k: &[E],
    v: &[E],
    j0: usize,
    j1: usize,
    d: usize,
    group: usize,
    scale: f32,
    dst: &mut [f32],
) {
    let w = j1 - j0;
    let mut row = vec![0f32; d];
    let mut sc = vec![0f32; group * w];
    let widen = |src: &[E], out: &mut [f32]| {
        #[cfg(target_arch = "x86_64")]
        if SIMD {
            // SAFETY: SIMD is true only in `chunk_avx2`, which runs where AVX2, FMA and
            // F16C were detected.
            unsafe { E::widen_avx2(src, out) };
            return;
        }
        E::widen(src, out);
    };
    for j in j0..j1 {
        widen(&k[j * d..(j + 1) * d], &mut row);
        for r in 0..group {
            sc[r * w + j - j0] = scale * dot_any::<f32, SIMD>(&q[r * d..(r + 1) * d], &row);
        }
    }
    let stride = d + 2;
    softmax_rows::<SIMD>(&mut sc, w, stride, dst);
    for j in j0..j1 {
        widen(&v[j * d..(j + 1) * d], &mut row);
        for r in 0..group {
            let p = sc[r * w + j - j0];
            for (a, &x) in dst[r * stride + 2..(r + 1) * stride].iter_mut().zip(&row) {
                *a += p * x;
            }
        }
    }
}

/// For each row of `w` scores in `sc`: its max into `dst[r * stride]`, the scores
/// replaced by `exp(score - max)` and their sum into `dst[r * stride + 1]` (zeros and
/// 0 for a row of -inf only).
#[inline(always)]
fn softmax_rows<const FMA: bool>(sc: &mut [f32], w: usize, stride: usize, dst: &mut [f32]) {
    let fast = fast_exp::<f32>();
    for (r, s) in sc.chunks_exact_mut(w).enumerate() {
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        dst[r * stride] = m;
        dst[r * stride + 1] = if m == f32::NEG_INFINITY {
            s.iter_mut().for_each(|p| *p = 0.0);
            0.0
        } else {
            exp_row_fast::<f32, FMA>(s, m, fast)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain softmax attention of one query row against `len` keys.
    fn reference(q: &[f32], k: &[f32], v: &[f32], len: usize, d: usize, scale: f32) -> Vec<f32> {
        let s: Vec<f64> = (0..len).map(|j| (0..d).map(|i| (q[i] * k[j * d + i]) as f64).sum::<f64>() * scale as f64).collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..d).map(|i| ((0..len).map(|j| e[j] * v[j * d + i] as f64).sum::<f64>() / z) as f32).collect()
    }

    #[test]
    fn matches_plain_softmax_for_f32_and_f16_caches() {
        // d = 64: whole register blocks; 40: a partial block; 12: not a multiple of 8
        // (the plain loop); lengths around the 64-key chunks and the 8-key score blocks.
        for d in [64, 40, 12] {
            check(d);
        }
    }

    fn check(d: usize) {
        let (b, hq, hkv, cap) = (2, 6, 2, 300);
        let mut x = 1u64;
        let mut rnd = || {
            x = crate::layers::attention::splitmix(x);
            (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let q: Vec<f32> = (0..b * hq * d).map(|_| rnd()).collect();
        let k: Vec<f32> = (0..b * hkv * cap * d).map(|_| rnd()).collect();
        let v: Vec<f32> = (0..b * hkv * cap * d).map(|_| rnd()).collect();
        let (kh, vh): (Vec<f16>, Vec<f16>) = (k.iter().map(|&x| f16::from_f32(x)).collect(), v.iter().map(|&x| f16::from_f32(x)).collect());
        let (kr, vr): (Vec<f32>, Vec<f32>) = (kh.iter().map(|x| x.to_f32()).collect(), vh.iter().map(|x| x.to_f32()).collect());
        let scale = 0.3;
        for len in [1, 63, 64, 65, 257, 300] {
            let g = DecodeGeo { b, hq, hkv, d, cap, len };
            let of32 = decode_attention(g, &q, &k, &v, scale);
            let of16 = decode_attention(g, &q, &kh, &vh, scale);
            for n in 0..b {
                for h in 0..hq {
                    let kv = (n * hkv + h / (hq / hkv)) * cap * d;
                    let qr = &q[(n * hq + h) * d..][..d];
                    let want = reference(qr, &k[kv..], &v[kv..], len, d, scale);
                    let want16 = reference(qr, &kr[kv..], &vr[kv..], len, d, scale);
                    for i in 0..d {
                        let (a, a16) = (of32[(n * hq + h) * d + i], of16[(n * hq + h) * d + i]);
                        assert!((a - want[i]).abs() < 1e-5, "f32 len {len} ({n},{h},{i}): {a} vs {}", want[i]);
                        assert!((a16 - want16[i]).abs() < 1e-5, "f16 len {len} ({n},{h},{i}): {a16} vs {}", want16[i]);
                    }
                }
            }
        }
    }
}
