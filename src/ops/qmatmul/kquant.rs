//! q4k and q6k weights (super-blocks of 256) times q8k activations, on GGML's own
//! block bytes (one row at a time: a super-block's integer sums fill AVX2 registers
//! without interleaving rows).
//!
//! q4k (144 bytes): f16 `d`, f16 `dmin`, 12 bytes packing eight 6-bit scales and
//! mins, 128 bytes of nibbles (each 32 bytes: low nibbles one sub-block of 32, high
//! nibbles the next); value `d * sc * q - dmin * mn`.
//! q6k (210 bytes): 128 bytes of low nibbles, 64 of 2-bit highs, 16 i8 scales (one per
//! 16 values), f16 `d`; value `d * sc * (q - 32)`.
//! Per super-block the kernels form exact integer sums, then the same float steps.
use super::act::Q8x256;
use super::TILE;
use candle_core::quantized::QTensor;
use half::f16;
use std::borrow::Cow;
use std::sync::Arc;

const Q4K_BYTES: usize = 144;
const Q6K_BYTES: usize = 210;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Q4K,
    Q6K,
}

pub(crate) struct KPack {
    kind: Kind,
    n: usize,
    nb: usize,
    src: Src,
}

/// Where the blocks are: the kernels read GGML's own layout, so a CPU `QTensor`'s
/// bytes serve as they are (no second copy of the weight in memory).
enum Src {
    Owned(Vec<u8>),
    /// A CPU tensor whose `data()` borrows its storage, `len` bytes long.
    Shared(Arc<QTensor>),
}

impl KPack {
    pub(crate) fn new(raw: &[u8], n: usize, nb: usize, kind: Kind) -> KPack {
        KPack { kind, n, nb, src: Src::Owned(raw.to_vec()) }
    }

    /// Over `q`'s own bytes (n rows of nb super-blocks) when it is a CPU tensor (its
    /// `data()` borrows them), else over a copy; None when the byte count is not that.
    pub(crate) fn shared(q: &Arc<QTensor>, n: usize, nb: usize, kind: Kind) -> Option<KPack> {
        let len = n * nb * Self::bytes_of(kind);
        match q.data().ok()? {
            Cow::Borrowed(b) if b.len() == len => Some(KPack { kind, n, nb, src: Src::Shared(q.clone()) }),
            raw if raw.len() == len => Some(Self::new(&raw, n, nb, kind)),
            _ => None,
        }
    }

    pub(crate) fn raw(&self) -> &[u8] {
        match &self.src {
            Src::Owned(v) => v,
            // `shared` checked that `data()` borrows, and the tensor is immutable.
            Src::Shared(q) => match q.data() {
                Ok(Cow::Borrowed(b)) => b,
                _ => unreachable!("KPack::shared keeps only tensors whose data() borrows"),
            },
        }
    }

    fn bytes_of(kind: Kind) -> usize {
        match kind {
            Kind::Q4K => Q4K_BYTES,
            Kind::Q6K => Q6K_BYTES,
        }
    }

    fn block_bytes(&self) -> usize {
        Self::bytes_of(self.kind)
    }

    /// The 8 outputs of tile `t` (rows past `n` give 0) for activation row `i`.
    pub(crate) fn tile(&self, t: usize, x: &Q8x256, i: usize, simd: bool, out: &mut [f32; TILE]) {
        let (nb, bb, raw) = (self.nb, self.block_bytes(), self.raw());
        for (lane, o) in out.iter_mut().enumerate() {
            let r = t * TILE + lane;
            if r >= self.n {
                *o = 0.0;
                continue;
            }
            let mut acc = 0f32;
            for b in 0..nb {
                let w = &raw[(r * nb + b) * bb..][..bb];
                let (xq, xd) = (&x.qs[(i * nb + b) * 256..][..256], x.d[i * nb + b]);
                let bs = &x.bsums[(i * nb + b) * 16..][..16];
                acc = match self.kind {
                    Kind::Q4K => q4k_block(w, xq, xd, bs, simd, acc),
                    Kind::Q6K => q6k_block(w, xq, xd, bs, simd, acc),
                };
            }
            *o = acc;
        }
    }
}

/// q4k's eight 6-bit scales and mins from their 12 packed bytes.
fn q4k_scales(p: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (mut sc, mut mn) = ([0u8; 8], [0u8; 8]);
    for j in 0..4 {
        sc[j] = p[j] & 63;
        mn[j] = p[j + 4] & 63;
        sc[j + 4] = (p[j + 8] & 15) | ((p[j] >> 6) << 4);
        mn[j + 4] = (p[j + 8] >> 4) | ((p[j + 4] >> 6) << 4);
    }
    (sc, mn)
}

/// `sum_j sc[j] * (q . y over sub-block j)` for one super-block.
fn q4k_sum(qs: &[u8], y: &[i8], sc: &[u8; 8], simd: bool) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: callers pass `simd` true only after `super::simd_ok()`; lengths are fixed.
        return unsafe { q4k_sum_avx2(qs, y, sc) };
    }
    let _ = simd;
    let mut a = 0i32;
    for (j, &s) in sc.iter().enumerate() {
        let (c, shift) = (j / 2, 4 * (j % 2));
        let q = &qs[32 * c..][..32];
        let sum: i32 = q.iter().zip(&y[32 * j..][..32]).map(|(&v, &yv)| ((v >> shift) & 15) as i32 * yv as i32).sum();
        a += s as i32 * sum;
    }
    a
}

fn q4k_block(w: &[u8], y: &[i8], dy: f32, bsums: &[i32], simd: bool, acc: f32) -> f32 {
    let (sc, mn) = q4k_scales(&w[4..16]);
    let qs = &w[16..144];
    let a = q4k_sum(qs, y, &sc, simd);
    let b: i32 = (0..8).map(|j| mn[j] as i32 * (bsums[2 * j] + bsums[2 * j + 1])).sum();
    let d = f16::from_le_bytes([w[0], w[1]]).to_f32() * dy;
    let dmin = f16::from_le_bytes([w[2], w[3]]).to_f32() * dy;
    (-dmin).mul_add(b as f32, d.mul_add(a as f32, acc))
}

/// # Safety
/// AVX2 and FMA; `qs` 128 bytes, `y` 256.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn q4k_sum_avx2(qs: &[u8], y: &[i8], sc: &[u8; 8]) -> i32 {
    use std::arch::x86_64::*;
    assert!(qs.len() >= 128 && y.len() >= 256);
    let mask = _mm256_set1_epi8(0x0F);
    let mut acc = _mm256_setzero_si256();
    for c in 0..4 {
        // SAFETY: in bounds by the assert; unaligned loads.
        let (q, y1, y2) = unsafe {
            (
                _mm256_loadu_si256(qs.as_ptr().add(32 * c) as *const __m256i),
                _mm256_loadu_si256(y.as_ptr().add(64 * c) as *const __m256i),
                _mm256_loadu_si256(y.as_ptr().add(64 * c + 32) as *const __m256i),
            )
        };
        let p1 = _mm256_maddubs_epi16(_mm256_and_si256(q, mask), y1);
        let p2 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask), y2);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c] as i16)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p2, _mm256_set1_epi16(sc[2 * c + 1] as i16)));
    }
    hsum_i32(acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn hsum_i32(v: std::arch::x86_64::__m256i) -> i32 {
    use std::arch::x86_64::*;
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// `sum_e sc[e / 16] * q[e] * y[e]` for one super-block (q the stored 0..64 quants).
fn q6k_sum(ql: &[u8], qh: &[u8], y: &[i8], sc: &[i8; 16], simd: bool) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: callers pass `simd` true only after `super::simd_ok()`; lengths are fixed.
        return unsafe { q6k_sum_avx2(ql, qh, y, sc) };
    }
    let _ = simd;
    let mut a = 0i32;
    for e in 0..256 {
        let (h, l) = (e / 128, e % 128);
        let (g, l) = (l / 32, l % 32);
        let lo = (ql[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 15;
        let hi = (qh[32 * h + l] >> (2 * g)) & 3;
        a += sc[e / 16] as i32 * (lo | (hi << 4)) as i32 * y[e] as i32;
    }
    a
}

fn q6k_block(w: &[u8], y: &[i8], dy: f32, bsums: &[i32], simd: bool, acc: f32) -> f32 {
    let (ql, qh) = (&w[..128], &w[128..192]);
    let sc: [i8; 16] = std::array::from_fn(|k| w[192 + k] as i8);
    let raw = q6k_sum(ql, qh, y, &sc, simd);
    // The quants are stored +32: subtract 32 * sum(y) per 16, with its scale.
    let c: i32 = (0..16).map(|k| sc[k] as i32 * bsums[k]).sum();
    let d = f16::from_le_bytes([w[208], w[209]]).to_f32() * dy;
    d.mul_add((raw - 32 * c) as f32, acc)
}

/// # Safety
/// AVX2 and FMA; `ql` 128 bytes, `qh` 64, `y` 256.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn q6k_sum_avx2(ql: &[u8], qh: &[u8], y: &[i8], sc: &[i8; 16]) -> i32 {
    use std::arch::x86_64::*;
    assert!(ql.len() >= 128 && qh.len() >= 64 && y.len() >= 256);
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        // SAFETY: in bounds by the assert; unaligned loads.
        let (a, b, hb) = unsafe {
            (
                _mm256_loadu_si256(ql.as_ptr().add(64 * h) as *const __m256i),
                _mm256_loadu_si256(ql.as_ptr().add(64 * h + 32) as *const __m256i),
                _mm256_loadu_si256(qh.as_ptr().add(32 * h) as *const __m256i),
            )
        };
        // Groups of 32: low nibbles of a, of b, high nibbles of a, of b; each with two
        // high bits from hb (bits 0-1, 2-3, 4-5, 6-7). Masks keep the 16-bit shifts
        // from carrying bits across bytes.
        let los = [
            _mm256_and_si256(a, m4),
            _mm256_and_si256(b, m4),
            _mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
            _mm256_and_si256(_mm256_srli_epi16(b, 4), m4),
        ];
        let his = [
            _mm256_and_si256(hb, m2),
            _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2),
            _mm256_and_si256(_mm256_srli_epi16(hb, 4), m2),
            _mm256_and_si256(_mm256_srli_epi16(hb, 6), m2),
        ];
        for g in 0..4 {
            let q = _mm256_or_si256(los[g], _mm256_slli_epi16(his[g], 4));
            // SAFETY: in bounds by the assert.
            let yv = unsafe { _mm256_loadu_si256(y.as_ptr().add(128 * h + 32 * g) as *const __m256i) };
            // 6-bit quants times i8: pair sums within 2 * 63 * 128, inside i16.
            let p = _mm256_maddubs_epi16(q, yv);
            let k = 8 * h + 2 * g;
            let s = _mm256_set_m128i(_mm_set1_epi16(sc[k + 1] as i16), _mm_set1_epi16(sc[k] as i16));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
        }
    }
    hsum_i32(acc)
}
