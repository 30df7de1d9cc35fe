//! q4_0 and q4_1 weights (blocks of 32 four-bit quants; q4_0: `d * (q - 8)`,
//! q4_1: `d * q + m`) times q8 activations, 8 weight rows per pass.
//!
//! Repacked layout, per tile of 8 rows and per block: 128 bytes of quants, rows
//! paired (0,4) (1,5) (2,6) (3,7) so that one 32-byte load holds two rows and the
//! AVX2 reduction ends with the 8 rows' sums in lane order; then the 8 rows' f16
//! scales (and mins) in arrays of their own. The f16 values stay f16: GEMV is
//! memory-bound and widening them would add 20% to the bytes read.
use super::act::Q8x32;
use super::TILE;
use half::f16;

pub(crate) struct Q4Pack {
    /// q4_1 (with mins) rather than q4_0 (offset 8).
    with_min: bool,
    nb: usize,
    qs: Vec<u8>,
    d: Vec<f16>,
    m: Vec<f16>,
}

impl Q4Pack {
    /// From GGML's bytes of an (n, nb * 32) tensor; rows past `n` (the last tile's
    /// padding) are zero with scale 0.
    pub(crate) fn new(raw: &[u8], n: usize, nb: usize, with_min: bool) -> Q4Pack {
        let bs = if with_min { 20 } else { 18 };
        let tiles = n.div_ceil(TILE);
        let mut p = Q4Pack {
            with_min,
            nb,
            qs: vec![0; tiles * nb * 128],
            d: vec![f16::ZERO; tiles * nb * TILE],
            m: if with_min { vec![f16::ZERO; tiles * nb * TILE] } else { Vec::new() },
        };
        for r in 0..n {
            let (t, lane) = (r / TILE, r % TILE);
            for b in 0..nb {
                let blk = &raw[(r * nb + b) * bs..][..bs];
                let g = t * nb + b;
                p.d[g * TILE + lane] = f16::from_le_bytes([blk[0], blk[1]]);
                if with_min {
                    p.m[g * TILE + lane] = f16::from_le_bytes([blk[2], blk[3]]);
                }
                p.qs[g * 128 + qs_offset(lane)..][..16].copy_from_slice(&blk[bs - 16..]);
            }
        }
        p
    }

    /// The 8 outputs of tile `t` for activation row `i`.
    pub(crate) fn tile(&self, t: usize, x: &Q8x32, i: usize, simd: bool, out: &mut [f32; TILE]) {
        let (nb, g0) = (self.nb, t * self.nb);
        let xr =
            Row { qs: &x.qs[i * nb * 32..][..nb * 32], d: &x.d[i * nb..][..nb], isum: &x.isum[i * nb..][..nb], s: &x.s[i * nb..][..nb] };
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: callers pass `simd` true only after `super::simd_ok()` (AVX2, FMA, F16C).
            return unsafe { self.tile_avx2(g0, &xr, out) };
        }
        let _ = simd;
        for (lane, o) in out.iter_mut().enumerate() {
            let mut acc = 0f32;
            for b in 0..nb {
                let q = &self.qs[(g0 + b) * 128 + qs_offset(lane)..][..16];
                let y = &xr.qs[b * 32..][..32];
                let mut sumi: i32 = (0..16).map(|j| (q[j] & 15) as i32 * y[j] as i32 + (q[j] >> 4) as i32 * y[j + 16] as i32).sum();
                if !self.with_min {
                    sumi -= 8 * xr.isum[b];
                }
                let dxy = self.d[(g0 + b) * TILE + lane].to_f32() * xr.d[b];
                acc = dxy.mul_add(sumi as f32, acc);
                if self.with_min {
                    acc = self.m[(g0 + b) * TILE + lane].to_f32().mul_add(xr.s[b], acc);
                }
            }
            *o = acc;
        }
    }

    /// Tile `t` for the `R` activation rows from `i`: `tile` for each, but the AVX2
    /// path unpacks each block's nibbles once for all of them (prefill's GEMM).
    pub(crate) fn tiles<const R: usize>(&self, t: usize, x: &Q8x32, i: usize, simd: bool, out: &mut [[f32; TILE]; R]) {
        #[cfg(target_arch = "x86_64")]
        if simd {
            let nb = self.nb;
            assert!(x.d.len() >= (i + R) * nb);
            // SAFETY: callers pass `simd` true only after `super::simd_ok()` (AVX2, FMA, F16C).
            return unsafe { self.tiles_avx2(t * nb, x, i, out) };
        }
        for (r, o) in out.iter_mut().enumerate() {
            self.tile(t, x, i + r, simd, o);
        }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `x` must hold rows `i .. i + R`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tiles_avx2<const R: usize>(&self, g0: usize, x: &Q8x32, i: usize, out: &mut [[f32; TILE]; R]) {
        use std::arch::x86_64::*;
        let nb = self.nb;
        assert!(self.qs.len() >= (g0 + nb) * 128 && self.d.len() >= (g0 + nb) * TILE && x.qs.len() >= (i + R) * nb * 32);
        assert!(x.d.len() >= (i + R) * nb && x.isum.len() >= (i + R) * nb && x.s.len() >= (i + R) * nb);
        assert!(!self.with_min || self.m.len() >= (g0 + nb) * TILE);
        let mask = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); R];
        for b in 0..nb {
            // SAFETY (all loads below): in bounds by the asserts above; unaligned loads.
            let base = unsafe { self.qs.as_ptr().add((g0 + b) * 128) };
            let mut lo = [_mm256_setzero_si256(); 4];
            let mut hi = [_mm256_setzero_si256(); 4];
            for p in 0..4 {
                let q = unsafe { _mm256_loadu_si256(base.add(p * 32) as *const __m256i) };
                lo[p] = _mm256_and_si256(q, mask);
                hi[p] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
            }
            let dw = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.d.as_ptr().add((g0 + b) * TILE) as *const __m128i)) };
            let mw = if self.with_min {
                unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.m.as_ptr().add((g0 + b) * TILE) as *const __m128i)) }
            } else {
                _mm256_setzero_ps()
            };
            for (r, a) in acc.iter_mut().enumerate() {
                let xb = (i + r) * nb + b;
                let y = unsafe { _mm256_loadu_si256(x.qs.as_ptr().add(xb * 32) as *const __m256i) };
                let ylo = _mm256_permute2x128_si256(y, y, 0x00);
                let yhi = _mm256_permute2x128_si256(y, y, 0x11);
                let mut v = [_mm256_setzero_si256(); 4];
                for p in 0..4 {
                    let s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[p], ylo), _mm256_maddubs_epi16(hi[p], yhi));
                    v[p] = _mm256_madd_epi16(s16, ones);
                }
                // The same integer sums and float steps as `tile_avx2`, so equal results.
                let mut s = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
                if !self.with_min {
                    s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * x.isum[xb]));
                }
                *a = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(x.d[xb])), _mm256_cvtepi32_ps(s), *a);
                if self.with_min {
                    *a = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.s[xb]), *a);
                }
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            // SAFETY: each `o` holds 8 floats.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), a) };
        }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile_avx2(&self, g0: usize, x: &Row, out: &mut [f32; TILE]) {
        use std::arch::x86_64::*;
        let nb = self.nb;
        assert!(self.qs.len() >= (g0 + nb) * 128 && self.d.len() >= (g0 + nb) * TILE && x.qs.len() >= nb * 32);
        assert!(!self.with_min || self.m.len() >= (g0 + nb) * TILE);
        let mask = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        for b in 0..nb {
            // SAFETY (all loads below): in bounds by the asserts above; unaligned loads.
            let y = unsafe { _mm256_loadu_si256(x.qs.as_ptr().add(b * 32) as *const __m256i) };
            // Both 128-bit halves hold elements 0..16 (ylo) or 16..32 (yhi): each half of
            // a quant register is one row's low or high nibbles.
            let ylo = _mm256_permute2x128_si256(y, y, 0x00);
            let yhi = _mm256_permute2x128_si256(y, y, 0x11);
            let base = unsafe { self.qs.as_ptr().add((g0 + b) * 128) };
            let mut v = [_mm256_setzero_si256(); 4];
            for (p, vp) in v.iter_mut().enumerate() {
                let q = unsafe { _mm256_loadu_si256(base.add(p * 32) as *const __m256i) };
                let lo = _mm256_and_si256(q, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                // u4 * i8 pairs stay far below i16's limit (2 * 15 * 128).
                let s16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
                *vp = _mm256_madd_epi16(s16, ones);
            }
            // Pairs (0,4)(1,5)(2,6)(3,7): two rounds of horizontal adds leave rows 0..8 in order.
            let mut s = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            if !self.with_min {
                s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * x.isum[b]));
            }
            let dw = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.d.as_ptr().add((g0 + b) * TILE) as *const __m128i)) };
            let dxy = _mm256_mul_ps(dw, _mm256_set1_ps(x.d[b]));
            acc = _mm256_fmadd_ps(dxy, _mm256_cvtepi32_ps(s), acc);
            if self.with_min {
                let m = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.m.as_ptr().add((g0 + b) * TILE) as *const __m128i)) };
                acc = _mm256_fmadd_ps(m, _mm256_set1_ps(x.s[b]), acc);
            }
        }
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    }
}

/// One activation row's blocks.
struct Row<'a> {
    qs: &'a [i8],
    d: &'a [f32],
    isum: &'a [i32],
    s: &'a [f32],
}

/// Where row `lane` of a tile keeps its 16 bytes within a block's 128.
fn qs_offset(lane: usize) -> usize {
    (lane % 4) * 32 + (lane / 4) * 16
}
