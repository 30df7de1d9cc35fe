//! Our CPU kernels for `y = x @ W^T` with a quantized `W` (N, K) of the types real
//! GGUF files use (q4_0, q4_1, q8_0, q4k, q6k); other types stay on Candle's QMatMul.
//!
//! As in llama.cpp, each row of `x` is quantized once per call to the 8-bit format
//! matching the weight (`act`), then every output is a sum over blocks of exact
//! integer dot products times float scales. The weight is repacked once (per type
//! file) so one pass over an activation block feeds 8 output rows (a tile).
//!
//! Threads: tiles of output columns are split over the spinning team (`ops::team`,
//! sized like the active pool), all M rows of a tile done by one task while its weights are in
//! cache. Decode (M = 1) thus streams each weight byte once, spread over the cores.
//! The scalar path computes the same integer sums and the same float steps in the
//! same order (fused multiply-adds), so its results equal the AVX2 path's bit for bit.
mod act;
mod kquant;
mod q4;
mod q8;

use super::parallel::{filled_plain, SyncPtr};
use candle_core::quantized::{GgmlDType, QTensor};
use std::sync::Arc;

/// Weight rows per kernel pass.
pub(crate) const TILE: usize = 8;

/// A repacked weight and its shape.
pub(crate) struct Packed {
    n: usize,
    k: usize,
    w: Weights,
}

enum Weights {
    Q4(q4::Q4Pack),
    Q8(q8::Q8Pack),
    K(kquant::KPack),
}

/// Whether our kernels take this type.
pub(crate) fn supports(t: GgmlDType) -> bool {
    matches!(t, GgmlDType::Q4_0 | GgmlDType::Q4_1 | GgmlDType::Q8_0 | GgmlDType::Q4K | GgmlDType::Q6K)
}

/// Whether the AVX2 variants may run here (they also use FMA and F16C).
pub(crate) fn simd_ok() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::cpu::has_avx2_fma() && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl Packed {
    /// Repack GGML's bytes of an (n, k) weight of type `t`; None for other types or
    /// when the byte count does not match.
    pub(crate) fn new(t: GgmlDType, raw: &[u8], n: usize, k: usize) -> Option<Packed> {
        let (block, bytes) = match t {
            GgmlDType::Q4_0 => (32, 18),
            GgmlDType::Q4_1 => (32, 20),
            GgmlDType::Q8_0 => (32, 34),
            GgmlDType::Q4K => (256, 144),
            GgmlDType::Q6K => (256, 210),
            _ => return None,
        };
        let nb = k / block;
        if !k.is_multiple_of(block) || raw.len() != n * nb * bytes {
            return None;
        }
        let w = match t {
            GgmlDType::Q4_0 => Weights::Q4(q4::Q4Pack::new(raw, n, nb, false)),
            GgmlDType::Q4_1 => Weights::Q4(q4::Q4Pack::new(raw, n, nb, true)),
            GgmlDType::Q8_0 => Weights::Q8(q8::Q8Pack::new(raw, n, nb)),
            GgmlDType::Q4K => Weights::K(kquant::KPack::new(raw, n, nb, kquant::Kind::Q4K)),
            _ => Weights::K(kquant::KPack::new(raw, n, nb, kquant::Kind::Q6K)),
        };
        Some(Packed { n, k, w })
    }

    /// `Packed::new` for the CPU tensor `q` (n, k); the k-quant kernels read its own
    /// bytes instead of a copy (their layout is GGML's).
    pub(crate) fn of(q: &Arc<QTensor>, n: usize, k: usize) -> Option<Packed> {
        let t = q.dtype();
        let kind = match t {
            GgmlDType::Q4K => kquant::Kind::Q4K,
            GgmlDType::Q6K => kquant::Kind::Q6K,
            _ => return Packed::new(t, &q.data().ok()?, n, k),
        };
        if !k.is_multiple_of(t.block_size()) {
            return None;
        }
        let w = kquant::KPack::shared(q, n, k / t.block_size(), kind)?;
        Some(Packed { n, k, w: Weights::K(w) })
    }

    /// `x @ W^T` for `x` (m, k) row-major: (m, n) row-major. `simd` false forces the
    /// portable path (tests compare the two); true uses AVX2 where `simd_ok()`.
    pub(crate) fn matmul(&self, x: &[f32], m: usize, simd: bool) -> Vec<f32> {
        debug_assert_eq!(x.len(), m * self.k);
        let simd = simd && simd_ok();
        match &self.w {
            Weights::Q4(p) => {
                self.run(&act::quantize_32(x), m, |t, xq, i, o| p.tile(t, xq, i, simd, o), |t, xq, i, o| p.tiles(t, xq, i, simd, o))
            }
            Weights::Q8(p) => self.run(
                &act::quantize_32(x),
                m,
                |t, xq, i, o| p.tile(t, xq, i, simd, o),
                |t, xq, i, o| each(t, xq, i, o, |t, xq, i, o| p.tile(t, xq, i, simd, o)),
            ),
            Weights::K(p) => self.run(
                &act::quantize_256(x),
                m,
                |t, xq, i, o| p.tile(t, xq, i, simd, o),
                |t, xq, i, o| each(t, xq, i, o, |t, xq, i, o| p.tile(t, xq, i, simd, o)),
            ),
        }
    }

    /// Every (row, tile) pair through `tile`, tiles split over threads.
    /// `tile4` does 4 activation rows at once (where a kernel can share work between them).
    fn run<X: Sync>(
        &self,
        xq: &X,
        m: usize,
        tile: impl Fn(usize, &X, usize, &mut [f32; TILE]) + Sync,
        tile4: impl Fn(usize, &X, usize, &mut [[f32; TILE]; 4]) + Sync,
    ) -> Vec<f32> {
        let (n, tiles) = (self.n, self.n.div_ceil(TILE));
        // Tiles per task: enough work per task to pay for the hand-off, and several
        // tasks per thread so a thread slowed by a neighbour's process is balanced.
        let threads = super::pool::num_threads();
        let work = m * n * self.k;
        let per_task = if threads > 1 && work >= PAR_MACS { tiles.div_ceil(threads * 4).max(1) } else { tiles };
        // SAFETY of the writes below: each task writes columns of its own tiles only
        // (disjoint between tasks) of the (m, n) output, which `filled_plain` lets us
        // write in full: every (row, column) pair lies in exactly one tile.
        filled_plain(m * n, |y: &mut [f32]| {
            let out = SyncPtr(y.as_mut_ptr());
            let task = |first: usize| {
                let mut buf = [0f32; TILE];
                let mut buf4 = [[0f32; TILE]; 4];
                // Rows in blocks, so a block of quantized activations stays in L2 while the
                // task's tiles pass over it.
                for i0 in (0..m).step_by(M_BLOCK) {
                    for t in first..(first + per_task).min(tiles) {
                        let cols = TILE.min(n - t * TILE);
                        let end = (i0 + M_BLOCK).min(m);
                        let mut i = i0;
                        while i + 4 <= end {
                            tile4(t, xq, i, &mut buf4);
                            for (r, b) in buf4.iter().enumerate() {
                                // SAFETY: as below, for rows i .. i + 4.
                                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), out.ptr().add((i + r) * n + t * TILE), cols) };
                            }
                            i += 4;
                        }
                        for i in i..end {
                            tile(t, xq, i, &mut buf);
                            // SAFETY: row i, columns t*8 .. t*8+cols < n: inside the m*n
                            // buffer, and no other task writes them (see above).
                            unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), out.ptr().add(i * n + t * TILE), cols) };
                        }
                    }
                }
            };
            // On the spinning team (`ops::team`), not the rayon pool: decode calls come
            // tens of microseconds apart, and a woken rayon worker arrives too late.
            super::team::for_each(tiles.div_ceil(per_task), &|j| task(j * per_task));
        })
    }
}

/// `tile` for 4 consecutive activation rows, one at a time.
fn each<X>(t: usize, xq: &X, i: usize, out: &mut [[f32; TILE]; 4], tile: impl Fn(usize, &X, usize, &mut [f32; TILE])) {
    for (r, o) in out.iter_mut().enumerate() {
        tile(t, xq, i + r, o);
    }
}

/// Multiply-adds from which a call is split over threads: a 576x576 q4_1 GEMV
/// (~0.33 M) runs in ~30 us on one core, and a hand-off to a spinning team thread
/// costs about a microsecond.
const PAR_MACS: usize = 1 << 19;

/// Activation rows per pass over a task's tiles (64 rows of K = 1536: 96 KiB).
const M_BLOCK: usize = 64;

#[cfg(test)]
mod tests;
