//! The f32 weight gradient of a convolution with 16+ input channels per group, as a
//! register-blocked GEMM over channels-last copies of its two operands:
//! `dW[o, c, tap] = sum over positions p of a[o, p] * img[c, p * stride + tap]`.
//! For a fixed tap this is `a (Co x P) @ img_tap (P x C)`, and with the image copied
//! channels-last and zero-padded, row `p` of `img_tap` is 16-lane loads at one address
//! (`(p * stride + tap) * C`): no column matrix, no packing. The upstream gradient is
//! copied position-major, so the tile's broadcasts of `a[o..o+MR, p]` are consecutive.
//! A tile is MR output channels x NV vectors of input channels: 24 accumulators of 16
//! lanes with AVX-512, 12 of 8 with AVX2 (6 x 2).
//!
//! Why: the im2col path writes `taps` copies of the image and multiplies them with the
//! `gemm` crate's slow (transposed) layout, and the dot-product kernel (`wgrad`) must
//! reduce each sum across its lanes and spills its 24 accumulators: a 32 -> 32 channel
//! layer at 32x32, batch 32, took 6.6 ms there (torch: 1.7 ms). Both copies cost
//! `O(positions x channels)` moves against `O(positions x channels x Co x taps)`
//! multiply-adds.
use super::Geom;
use crate::ops::cpu::has_avx2_fma;
use crate::ops::lanes::{at_cpu_lanes, Features, Kernel, Lanes};
use crate::ops::transpose::transpose;

/// The channel-padding unit of the channels-last copies (`Padded`): one AVX-512
/// vector, two of AVX2.
pub(super) const CH_BLOCK: usize = 16;
/// Input channels per group from which this kernel runs (it pads them to 16s).
const MIN_CG: usize = 16;
/// Output positions copied per block of samples: a block's two copies stay in L2.
const BLOCK_POS: usize = 512;
/// Columns of the position-major gradient copy past the last output channel (zeros),
/// so a tile's broadcasts never leave the row.
const A_PAD: usize = 24;

/// Whether `conv_wgrad_cl` runs: AVX2 (or AVX-512), at least 16 input channels per group, and (when
/// it splits over threads) at least two samples per thread's share.
pub(crate) fn applies(g: &Geom, par: bool) -> bool {
    let threads = if par { crate::ops::pool::num_threads() } else { 1 };
    has_avx2_fma() && g.c / g.groups >= MIN_CG && g.n >= threads && g.ovol() > 0
}

/// The walk over one block's output positions: each output row's start in the
/// channels-last image (tap offset excluded), and the steps between positions.
struct Walk {
    samples: usize,
    ow: usize,
    /// Floats between positions of the gradient copy (its row length).
    ap: usize,
    a_sample: usize,
    b_sample: usize,
    /// Image floats between consecutive output columns (x-stride x channels).
    b_step: usize,
    rows: Vec<usize>,
    /// Positions per chunk (`CHUNK_FLOATS` over the floats of one position's two rows).
    chunk: usize,
}

/// The padded channels-last geometry: spatial sizes with padding, channels per group
/// rounded up to 16s, and every tap's offset in floats.
pub(super) struct Padded {
    pub(super) dims: [usize; 3],
    pub(super) cgp: usize,
    pub(super) cp: usize,
    pub(super) taps: Vec<usize>,
}

impl Padded {
    pub(super) fn new(g: &Geom) -> Padded {
        // Past the image, as far as the last window reaches: `pad` after it, or further
        // where the padding at the end is wider than at the start ("same" with an even
        // window pads one more at the end).
        let dims: [usize; 3] =
            std::array::from_fn(|a| (g.ins[a] + 2 * g.pad[a]).max((g.outs[a].max(1) - 1) * g.stride[a] + g.dil[a] * (g.k[a] - 1) + 1));
        let cgp = (g.c / g.groups).next_multiple_of(CH_BLOCK);
        let cp = cgp * g.groups;
        let taps = (0..g.kvol())
            .map(|t| {
                let tz = t / (g.k[1] * g.k[2]);
                let (ty, tx) = ((t / g.k[2]) % g.k[1], t % g.k[2]);
                ((tz * g.dil[0] * dims[1] + ty * g.dil[1]) * dims[2] + tx * g.dil[2]) * cp
            })
            .collect();
        Padded { dims, cgp, cp, taps }
    }
    pub(super) fn pixels(&self) -> usize {
        self.dims.iter().product()
    }
    /// Every input row (z, y) of `g`, in order: its index `z h + y` and the padded pixel
    /// where it starts (past the padding).
    pub(super) fn interior_rows<'a>(&'a self, g: &'a Geom) -> impl Iterator<Item = (usize, usize)> + 'a {
        let [d, h, _] = g.ins;
        (0..d * h).map(move |r| (r, ((r / h + g.pad[0]) * self.dims[1] + r % h + g.pad[1]) * self.dims[2] + g.pad[2]))
    }
    /// Copies one sample `img_n` (C, *ins) into `dst`, its padded channels-last image
    /// (each group's channels from its own block of `cgp`); the padding is left as it is.
    pub(super) fn copy_in(&self, g: &Geom, img_n: &[f32], dst: &mut [f32]) {
        let (iv, ins_w, cg) = (g.ivol(), g.ins[2], g.c / g.groups);
        for gi in 0..g.groups {
            for (r, pix) in self.interior_rows(g) {
                let src = &img_n[gi * cg * iv + r * ins_w..];
                assert!(src.len() > (cg - 1) * iv + ins_w - 1 && (pix + ins_w) * self.cp <= dst.len());
                // SAFETY: the channel rows `src[c * iv..][..ins_w]` lie in the sample
                // (asserted), and the `ins_w` pixels from `pix` in `dst`, each of
                // `cp >= gi * cgp + cg` channels.
                unsafe { transpose(src.as_ptr(), iv, cg, ins_w, dst[pix * self.cp + gi * self.cgp..].as_mut_ptr(), self.cp) };
            }
        }
    }
    /// Every output row (oz, oy) of `g`, in order: where its first window starts in the
    /// padded image, in floats (tap offset excluded).
    pub(super) fn out_row_origins(&self, g: &Geom) -> Vec<usize> {
        let [od, oh, _] = g.outs;
        (0..od * oh).map(|r| ((r / oh * g.stride[0] * self.dims[1] + r % oh * g.stride[1]) * self.dims[2]) * self.cp).collect()
    }
}

/// dW (G*mg, cg*taps) for the upstream gradient `a` (N, G*mg, *outs) and the image
/// (N, C, *ins), with the per-channel sums of `a` (the bias gradient) when `bias`.
/// Samples are split over the threads when `par`, each summing into its own buffer.
/// Call only where `applies(g, par)`.
pub(crate) fn conv_wgrad_cl(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, par: bool, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    assert!(has_avx2_fma() && g.c / g.groups >= MIN_CG && g.ovol() > 0, "conv_wgrad_cl: AVX2 and {MIN_CG}+ channels per group only");
    let (l, iv, kv) = (g.ovol(), g.ivol(), g.kvol());
    assert!(a.len() >= g.n * w_rows * l && img.len() >= g.n * g.c * iv, "conv_wgrad_cl: operand sizes");
    let pd = Padded::new(g);
    let sizes = (w_rows * kv * pd.cgp, if bias { w_rows } else { 0 });
    let (dwt, db) = super::sum_over_samples(g.n, par, sizes, |range, dwt, db| samples(a, img, g, &pd, w_rows, range, dwt, db));
    // (o, tap, padded c) -> the weight's (o, c, tap).
    let (cg, kc) = (g.c / g.groups, g.c / g.groups * kv);
    let mut dw = vec![0f32; w_rows * kc];
    for (o, row) in dw.chunks_exact_mut(kc).enumerate() {
        for t in 0..kv {
            let src = &dwt[(o * kv + t) * pd.cgp..][..cg];
            for (c, v) in src.iter().enumerate() {
                row[c * kv + t] = *v;
            }
        }
    }
    (dw, bias.then_some(db))
}

/// Adds samples `n0..n1`'s weight gradient into `dwt` (o, tap, padded c) and their
/// gradient sums into `db` (when it is not empty), a block of samples at a time.
#[allow(clippy::too_many_arguments)]
fn samples(a: &[f32], img: &[f32], g: &Geom, pd: &Padded, w_rows: usize, (n0, n1): (usize, usize), dwt: &mut [f32], db: &mut [f32]) {
    let (l, iv) = (g.ovol(), g.ivol());
    let mg = w_rows / g.groups;
    let block = (BLOCK_POS / l).clamp(1, n1 - n0);
    let ap = w_rows + A_PAD;
    let (a_sample, b_sample) = (l * ap, pd.pixels() * pd.cp);
    // Zeroed once: the padding (borders, channels past cg, columns past w_rows) is never
    // written, and every block writes the same interior positions.
    let mut at = vec![0f32; block * a_sample];
    let mut im = vec![0f32; block * b_sample];
    let chunk = (CHUNK_FLOATS / (pd.cp + ap)).max(16);
    let mut walk =
        Walk { samples: 0, ow: g.outs[2], ap, a_sample, b_sample, b_step: g.stride[2] * pd.cp, rows: pd.out_row_origins(g), chunk };
    for s0 in (n0..n1).step_by(block) {
        let nb = block.min(n1 - s0);
        for s in 0..nb {
            let n = s0 + s;
            let a_n = &a[n * w_rows * l..(n + 1) * w_rows * l];
            // SAFETY: `a_n` holds w_rows rows of l floats; `at`'s sample holds l rows of
            // `ap >= w_rows` floats.
            unsafe { transpose(a_n.as_ptr(), l, w_rows, l, at[s * a_sample..].as_mut_ptr(), ap) };
            if !db.is_empty() {
                for (b, row) in db.iter_mut().zip(a_n.chunks_exact(l)) {
                    *b += crate::ops::reduce::sum_slice(row);
                }
            }
            pd.copy_in(g, &img[n * g.c * iv..(n + 1) * g.c * iv], &mut im[s * b_sample..(s + 1) * b_sample]);
        }
        walk.samples = nb;
        at_cpu_lanes!(tiles(g, pd, &walk, &at, &im, mg, dwt)).expect("conv_wgrad_cl: AVX2 checked above");
    }
}

/// Floats of the two copies' rows that one chunk of positions covers (72 KiB): every
/// tile of a chunk (all taps, channel vectors and output channels) runs before the next
/// chunk, so each tile reads the chunk's rows from L1/L2 instead of streaming a whole
/// block from L3 (a 1-D sample of 4096 positions is a 1 MiB image copy, which each of
/// its 5 taps x 11 output-channel tiles re-read: its weight gradient ran at
/// 130 GFLOP/s). Measured over chunks of 64 to 512 positions: 64-channel layers were
/// fastest at 128, 128-channel ones at 64, 32-channel ones at 128-256.
const CHUNK_FLOATS: usize = 18 * 1024;

/// One run of consecutive positions along an output row: its first position's row in
/// the gradient copy and window origin in the image copy (floats), and its length.
type Run = (usize, usize, usize);

/// The block's positions as runs (sample by sample, row by row, each run at most
/// a chunk long), grouped into chunks of at most `walk.chunk` positions.
fn chunks(walk: &Walk) -> Vec<Vec<Run>> {
    let mut out: Vec<Vec<Run>> = vec![Vec::new()];
    let mut filled = 0;
    for s in 0..walk.samples {
        for (r, &boff) in walk.rows.iter().enumerate() {
            for x0 in (0..walk.ow).step_by(walk.chunk) {
                let len = walk.chunk.min(walk.ow - x0);
                if filled + len > walk.chunk {
                    out.push(Vec::new());
                    filled = 0;
                }
                let a0 = s * walk.a_sample + (r * walk.ow + x0) * walk.ap;
                let b0 = s * walk.b_sample + boff + x0 * walk.b_step;
                out.last_mut().expect("one chunk at least").push((a0, b0, len));
                filled += len;
            }
        }
    }
    out
}

/// Every tile of one block: per chunk of positions, group, block of input-channel
/// vectors, tap and block of output channels, the kernel adds the chunk's positions
/// into `dwt`.
fn tiles<V: Features>(g: &Geom, pd: &Padded, walk: &Walk, at: &[f32], im: &[f32], mg: usize, dwt: &mut [f32]) {
    let kv = g.kvol();
    let cv = pd.cgp / V::LANES;
    let out_rs = kv * pd.cgp;
    // The last position each tile reads must lie in the copies (checked once here).
    let last_b = (walk.samples - 1) * walk.b_sample
        + walk.rows.last().copied().unwrap_or(0)
        + (walk.ow - 1) * walk.b_step
        + pd.taps.last().copied().unwrap_or(0)
        + pd.cp;
    assert!(last_b <= im.len() && walk.samples * walk.a_sample <= at.len() && dwt.len() >= g.groups * mg * out_rs);
    for chunk in chunks(walk) {
        for gi in 0..g.groups {
            let mut v0 = 0;
            while v0 < cv {
                // AVX2's 16 registers hold 6 x 2 accumulators (`cv` of 8 lanes is even).
                let nv = match cv - v0 {
                    _ if V::LANES == 8 => 2,
                    r if r >= 4 => 4,
                    3 => 3,
                    r => r,
                };
                let mr = if V::LANES == 8 { 6 } else { 24 / nv };
                for (t, &toff) in pd.taps.iter().enumerate() {
                    let b = im[toff + gi * pd.cgp + v0 * V::LANES..].as_ptr();
                    for o0 in (0..mg).step_by(mr) {
                        let o = gi * mg + o0;
                        let a = at[o..].as_ptr();
                        let out = dwt[(o * kv + t) * pd.cgp + v0 * V::LANES..].as_mut_ptr();
                        let k = ((walk, &chunk[..]), a, b, out, out_rs, mr.min(mg - o0));
                        // SAFETY: the CPU has V's features (`applies`); the kernel reads `mr`
                        // floats from each position's row of `at` (rows of `ap = w_rows + 24`
                        // floats, and `o + mr <= w_rows + 24`), `nv` vectors at each position
                        // of `im` (within `last_b`, asserted above, as `v0 + nv <= cv`), and
                        // adds into `rows` rows of `out_rs` floats of `dwt`.
                        unsafe {
                            match (V::LANES, nv) {
                                (8, _) => V::run(Tile::<2, 6>(k)),
                                (_, 4) => V::run(Tile::<4, 6>(k)),
                                (_, 3) => V::run(Tile::<3, 8>(k)),
                                (_, 2) => V::run(Tile::<2, 12>(k)),
                                _ => V::run(Tile::<1, 24>(k)),
                            }
                        }
                    }
                }
                v0 += nv;
            }
        }
    }
}

/// `out[i, v] += sum over the runs' positions p of a[p, i] * b[p, v]` for `i < rows`,
/// with `MR` broadcasts of `a` and `NV` vectors of `b` per position. Fields:
/// ((walk, runs), a, b, out, out_rs, rows).
///
/// Contract (`Kernel::body`): every position's `MR` floats of `a` and `NV` vectors of
/// `b` lie in their buffers, and `out` has `rows <= MR` rows of `NV` vectors, `out_rs`
/// apart.
#[allow(clippy::type_complexity)]
struct Tile<'a, const NV: usize, const MR: usize>(((&'a Walk, &'a [Run]), *const f32, *const f32, *mut f32, usize, usize));

impl<const NV: usize, const MR: usize> Kernel for Tile<'_, NV, MR> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let ((w, runs), a, b, out, out_rs, rows) = self.0;
        // SAFETY (every call and access below): the level's features and the walk's
        // positions in the buffers (the contract above).
        unsafe {
            let mut acc = [[V::zero(); NV]; MR];
            for &(a0, b0, len) in runs {
                let (mut pa, mut pb) = (a.add(a0), b.add(b0));
                for _ in 0..len {
                    let mut bv = [V::zero(); NV];
                    for (v, x) in bv.iter_mut().enumerate() {
                        *x = V::load(pb.add(v * V::LANES));
                    }
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        let av = V::splat(*pa.add(i));
                        for (x, bx) in acc_i.iter_mut().zip(bv) {
                            *x = av.fmadd(bx, *x);
                        }
                    }
                    pa = pa.wrapping_add(w.ap);
                    pb = pb.wrapping_add(w.b_step);
                }
            }
            for (i, acc_i) in acc.iter().enumerate().take(rows) {
                for (v, x) in acc_i.iter().enumerate() {
                    let p = out.add(i * out_rs + v * V::LANES);
                    V::load(p).add(*x).store(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal to the im2col weight gradient (checked against PyTorch's fixtures) with the
    /// bias sums, on 1-3 d geometries with strides, padding, dilation, groups, channel
    /// counts that are not multiples of 16, every vector-block width (1-4), chunks of several
    /// samples and chunks that split a row, and threads.
    #[test]
    fn matches_the_im2col_path() {
        if !has_avx2_fma() {
            return;
        }
        // (n, c, groups, w_rows, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 9] = [
            // 1-D rows of 700 positions: chunks of 121 split each row.
            (2, 64, 1, 64, [1, 1, 700], [1, 1, 5], [1, 1, 1], [0, 0, 2], [1, 1, 1]),
            (4, 32, 1, 32, [1, 8, 8], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (3, 64, 1, 13, [1, 9, 7], [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
            (2, 20, 1, 30, [1, 6, 11], [1, 1, 1], [1, 2, 2], [0, 0, 0], [1, 1, 1]),
            (2, 48, 1, 7, [1, 5, 40], [1, 3, 5], [1, 1, 1], [0, 2, 4], [1, 1, 1]),
            (2, 40, 2, 10, [1, 5, 9], [1, 3, 3], [1, 1, 2], [0, 2, 2], [1, 2, 2]),
            (2, 16, 1, 6, [1, 1, 70], [1, 1, 7], [1, 1, 3], [0, 0, 3], [1, 1, 1]),
            (2, 17, 1, 25, [3, 4, 5], [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
            (5, 128, 1, 9, [1, 3, 3], [1, 2, 2], [1, 1, 1], [0, 0, 0], [1, 1, 1]),
        ];
        for (i, (n, c, groups, w_rows, ins, k, stride, pad, dil)) in cases.into_iter().enumerate() {
            let g = Geom::for_test(n, c, groups, ins, k, stride, pad, dil);
            super::super::check_wgrad(&g, w_rows, 11 + 2 * i as u64, |a, img, par| {
                assert!(applies(&g, par));
                conv_wgrad_cl(a, img, &g, w_rows, par, true)
            });
        }
    }
}
