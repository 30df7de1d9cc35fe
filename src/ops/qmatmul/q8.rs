//! q8_0 weights (blocks of 32 signed bytes with an f16 scale) times q8_0
//! activations, 8 weight rows per pass.
//!
//! Repacked layout, per tile of 8 rows and per block: the 8 rows' 32 quants one
//! after the other (256 bytes), and the 8 f16 scales in an array of their own.
use super::act::Q8x32;
use super::TILE;
use half::f16;

pub(crate) struct Q8Pack {
    nb: usize,
    qs: Vec<i8>,
    d: Vec<f16>,
}

impl Q8Pack {
    /// From GGML's bytes of an (n, nb * 32) tensor (34-byte blocks: f16 scale, 32 quants).
    pub(crate) fn new(raw: &[u8], n: usize, nb: usize) -> Q8Pack {
        let tiles = n.div_ceil(TILE);
        let mut p = Q8Pack { nb, qs: vec![0; tiles * nb * TILE * 32], d: vec![f16::ZERO; tiles * nb * TILE] };
        for r in 0..n {
            let (t, lane) = (r / TILE, r % TILE);
            for b in 0..nb {
                let blk = &raw[(r * nb + b) * 34..][..34];
                let g = t * nb + b;
                p.d[g * TILE + lane] = f16::from_le_bytes([blk[0], blk[1]]);
                for (q, &v) in p.qs[(g * TILE + lane) * 32..][..32].iter_mut().zip(&blk[2..]) {
                    *q = v as i8;
                }
            }
        }
        p
    }

    /// The 8 outputs of tile `t` for activation row `i`.
    pub(crate) fn tile(&self, t: usize, x: &Q8x32, i: usize, simd: bool, out: &mut [f32; TILE]) {
        let (nb, g0) = (self.nb, t * self.nb);
        let (xq, xd) = (&x.qs[i * nb * 32..][..nb * 32], &x.d[i * nb..][..nb]);
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: callers pass `simd` true only after `super::simd_ok()` (AVX2, FMA, F16C).
            return unsafe { self.tile_avx2(g0, xq, xd, out) };
        }
        let _ = simd;
        for (lane, o) in out.iter_mut().enumerate() {
            let mut acc = 0f32;
            for (b, &dy) in xd.iter().enumerate() {
                let q = &self.qs[((g0 + b) * TILE + lane) * 32..][..32];
                let sumi: i32 = q.iter().zip(&xq[b * 32..][..32]).map(|(&a, &y)| a as i32 * y as i32).sum();
                let dxy = self.d[(g0 + b) * TILE + lane].to_f32() * dy;
                acc = dxy.mul_add(sumi as f32, acc);
            }
            *o = acc;
        }
    }

    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile_avx2(&self, g0: usize, xq: &[i8], xd: &[f32], out: &mut [f32; TILE]) {
        use std::arch::x86_64::*;
        let nb = self.nb;
        assert!(self.qs.len() >= (g0 + nb) * TILE * 32 && self.d.len() >= (g0 + nb) * TILE && xq.len() >= nb * 32 && xd.len() >= nb);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        for (b, &dy) in xd[..nb].iter().enumerate() {
            // SAFETY (all loads below): in bounds by the assert above; unaligned loads.
            let y = unsafe { _mm256_loadu_si256(xq.as_ptr().add(b * 32) as *const __m256i) };
            let base = unsafe { self.qs.as_ptr().add((g0 + b) * TILE * 32) };
            let mut v = [_mm256_setzero_si256(); TILE];
            for (r, vr) in v.iter_mut().enumerate() {
                let w = unsafe { _mm256_loadu_si256(base.add(r * 32) as *const __m256i) };
                // maddubs multiplies unsigned by signed bytes: move w's sign onto y.
                // |w| <= 128 and |y| <= 127 keep the pair sums inside i16.
                let p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(y, w));
                *vr = _mm256_madd_epi16(p, ones);
            }
            // Rows 0..4 and 4..8 reduced to halves, then the halves' partial sums added.
            let a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
            let c = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
            let s = _mm256_add_epi32(_mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(a, c, 0x31));
            let dw = unsafe { _mm256_cvtph_ps(_mm_loadu_si128(self.d.as_ptr().add((g0 + b) * TILE) as *const __m128i)) };
            acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(s), acc);
        }
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
    }
}
