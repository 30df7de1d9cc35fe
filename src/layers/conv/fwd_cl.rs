//! The f32 forward of a strided convolution with 16+ input channels (one group), as
//! register tiles over a channels-last, zero-padded copy of each sample:
//! `out[p, o] = sum over taps and c of img[origin(p) + tap, c] * w[o, c, tap]`. A tile
//! is a run of positions times a block of output-channel vectors: with AVX-512, 6
//! positions x 4 vectors of 16 where the output channels pad (to 16s) to a multiple of
//! 64, else 12 x 2 (or 12 x 1); with AVX2, 6 positions x 2 vectors of 8. Each step
//! (tap, input channel) broadcasts one input float per position and loads the output
//! channels' weights as vectors of a once-transposed (c, tap, o) weight, and the whole
//! sum stays in registers. The tile's result is written channels-last and turned
//! channel-major (bias added) once per sample.
//!
//! Why: the in-place strip kernel (`direct`) at x-stride 2 loads two vectors and
//! permutes their even lanes for each of its broadcast vectors, and with rows narrower
//! than a vector two runs of each: on the input gradient of a 64 -> 32 channel k4 s2
//! transposed convolution at 28x28 it spent more loads than multiply-adds (36% of that
//! layer's forward and backward). Here a step is 10 loads for 24 multiply-adds (AVX2:
//! 8 for 12).
use super::wgrad_cl::{Padded, CH_BLOCK};
use super::Geom;
use crate::ops::cpu::has_avx2_fma;
use crate::ops::lanes::{at_cpu_lanes, Features, Kernel, Lanes};
use crate::ops::transpose::transpose;

/// Input channels from which this kernel runs (it pads them to 16s), and output channels.
const MIN_C: usize = 16;
const MIN_CO: usize = 32;
/// Output positions per sample from which this kernel (and `adj_cl`) runs. Its tiles
/// are 6 positions of one sample against every output channel, so the whole weight
/// streams through once per tile: at 4x4 output planes with many channels (DCGAN's
/// 256 -> 512 layer, a 4096 x 512 weight of 8 MB, 48 passes per batch of 16) the
/// im2col GEMM across the batch reuses each weight block for all positions. Batch 16,
/// ms (torch): ConvTranspose2d 512 -> 256 at 4x4 forward 15.9 -> 8.7 (7.2).
pub(crate) const MIN_PLANE: usize = 32;

/// Whether `conv_fwd_cl` runs: AVX2 (or AVX-512), one group, a stride above 1 on some axis, 16+
/// input channels, 32+ output channels (with fewer, a tile is 12 broadcasts for 12
/// multiply-adds, no better than `direct`'s), and (when it splits over threads) a sample
/// per thread at least.
pub(crate) fn applies(g: &Geom, co: usize, par: bool) -> bool {
    let threads = if par { crate::ops::pool::num_threads() } else { 1 };
    has_avx2_fma() && g.groups == 1 && g.stride != [1, 1, 1] && g.c >= MIN_C && co >= MIN_CO && g.n >= threads && g.ovol() >= MIN_PLANE
}

/// out (N, co, *outs) = the convolution `g` of `img` (N, C, *ins) with `w` (co, C, *k),
/// plus `bias` (co) when given. Samples are split over the threads when `par`. Call only
/// where `applies(g, co, par)` (any co works; fewer than 32 run slower than `direct`).
pub(crate) fn conv_fwd_cl(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Vec<f32> {
    at_cpu_lanes!(fwd_at(img, w, bias, g, co, par)).expect("conv_fwd_cl: AVX2 or AVX-512 only")
}

/// `conv_fwd_cl` with the vectors of `V`.
fn fwd_at<V: Features>(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Vec<f32> {
    assert!(g.groups == 1 && g.c >= MIN_C, "conv_fwd_cl: one group and {MIN_C}+ channels only");
    let (l, iv, kv, c) = (g.ovol(), g.ivol(), g.kvol(), g.c);
    assert!(img.len() >= g.n * c * iv && w.len() >= co * c * kv, "conv_fwd_cl: operand sizes");
    let pd = Padded::new(g);
    let cop = co.next_multiple_of(CH_BLOCK);
    // w (co, C taps) -> (C taps, co padded to 16s): one transpose (zeros past co).
    let mut wt = vec![0f32; c * kv * cop];
    // SAFETY: `w` holds co rows of C taps floats (asserted); `wt` C taps rows of cop >= co.
    unsafe { transpose(w.as_ptr(), c * kv, co, c * kv, wt.as_mut_ptr(), cop) };
    // Each step's (channel, tap) offset in a window of the padded image, channel-major
    // as the weight's rows (channels past C are zeros on both sides: skipped).
    let offs: Vec<usize> = (0..c).flat_map(|ch| pd.taps.iter().map(move |t| t + ch)).collect();
    // Each output position's window origin in the padded image (floats, tap excluded).
    let step = g.stride[2] * pd.cp;
    let origin: Vec<usize> = pd.out_row_origins(g).into_iter().flat_map(|row| (0..g.outs[2]).map(move |ox| row + ox * step)).collect();
    let threads = if par { rayon::current_num_threads().min(g.n).max(1) } else { 1 };
    let per = g.n.div_ceil(threads);
    crate::ops::parallel::filled_plain(g.n * co * l, |out: &mut [f32]| {
        let part = |t: usize, chunk: &mut [f32]| {
            // Zeroed once: the padding (borders, channels past C) is never written.
            let mut im = vec![0f32; pd.pixels() * pd.cp];
            let mut ocl = vec![0f32; l * cop];
            for (s, dst) in chunk.chunks_exact_mut(co * l).enumerate() {
                pd.copy_in(g, &img[(t * per + s) * c * iv..][..c * iv], &mut im);
                sample::<V>(&im, &wt, &pd, &offs, &origin, cop, &mut ocl);
                // SAFETY: `ocl` holds l rows of `cop >= co` floats; `dst` co rows of l.
                unsafe { transpose(ocl.as_ptr(), cop, l, co, dst.as_mut_ptr(), l) };
                if let Some(bias) = bias {
                    for (plane, b) in dst.chunks_exact_mut(l).zip(bias) {
                        plane.iter_mut().for_each(|v| *v += b);
                    }
                }
            }
        };
        crate::ops::parallel::for_chunks(out, per * co * l, threads > 1, part);
    })
}

/// One sample's output, channels-last (`l` rows of `cop` floats), from its padded
/// channels-last image: per run of positions and block of output-channel vectors, a tile.
fn sample<V: Features>(im: &[f32], wt: &[f32], pd: &Padded, offs: &[usize], origin: &[usize], cop: usize, ocl: &mut [f32]) {
    let cv = cop / V::LANES;
    let l = origin.len();
    // Output-channel vectors per tile and positions per tile (24 accumulators, or 12;
    // AVX2 has 16 registers: 12). `cop` is a multiple of 16, so `cv` of 8 lanes is even.
    let (nv, mr) = if V::LANES == 8 {
        (2, 6)
    } else if cv.is_multiple_of(4) {
        (4, 6)
    } else if cv.is_multiple_of(2) {
        (2, 12)
    } else {
        (1, 12)
    };
    assert!(im.len() >= pd.pixels() * pd.cp && wt.len() >= offs.len() * cop && ocl.len() >= l * cop);
    // Output-channel blocks outermost: a block's weights (taps x cp x nv vectors) stay
    // in L2 for all of the sample's positions (with 128 -> 256 channels and 4 x 4 taps
    // all the weights are 2 MB, streamed once per run of positions the other way round).
    for v0 in (0..cv).step_by(nv) {
        for p0 in (0..l).step_by(mr) {
            let live = mr.min(l - p0);
            // A short last run repeats its last position (computed, not stored).
            let org: [usize; 12] = std::array::from_fn(|i| origin[p0 + i.min(live - 1)]);
            let (w, out) = (wt[v0 * V::LANES..].as_ptr(), ocl[p0 * cop + v0 * V::LANES..].as_mut_ptr());
            let t = (im.as_ptr(), &org, offs, w, cop, out, live);
            // SAFETY: the CPU has V's features (`conv_fwd_cl`); every position's window
            // (origin + step offset) lies in the padded image `im`; the weight has a row
            // per step, read from vector v0, `nv` vectors each (v0 + nv <= cv); the tile
            // writes `live` rows of `nv` vectors from `out`, inside `ocl`.
            unsafe {
                match (V::LANES, nv) {
                    (8, _) => V::run(Tile::<6, 2>(t)),
                    (_, 4) => V::run(Tile::<6, 4>(t)),
                    (_, 2) => V::run(Tile::<12, 2>(t)),
                    _ => V::run(Tile::<12, 1>(t)),
                }
            }
        }
    }
}

/// `out[i, v] = sum over steps k of im[org[i] + offs[k]] * w[k * w_rs + v LANES ..]` for
/// the first `live` of `MR` positions and `NV` vectors, stored `w_rs` floats apart per
/// position. Fields: (im, org, offs, w, w_rs, out, live).
///
/// Contract (`Kernel::body`): `im[org[i] + offs[k]]` is readable for every i < MR and
/// step k; `w` has `offs.len()` rows of `w_rs` floats with `NV` vectors readable from
/// each; `out` has `live` writable rows of `NV` vectors, `w_rs` apart.
struct Tile<'a, const MR: usize, const NV: usize>((*const f32, &'a [usize; 12], &'a [usize], *const f32, usize, *mut f32, usize));

impl<const MR: usize, const NV: usize> Kernel for Tile<'_, MR, NV> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let (im, org, offs, w, w_rs, out, live) = self.0;
        // SAFETY (every call and access below): the level's features and the buffers
        // (the contract above).
        unsafe {
            let mut acc = [[V::zero(); NV]; MR];
            let pa: [*const f32; MR] = std::array::from_fn(|i| im.add(org[i]));
            let mut pw = w;
            for &off in offs {
                let mut wv = [V::zero(); NV];
                for (v, x) in wv.iter_mut().enumerate() {
                    *x = V::load(pw.add(v * V::LANES));
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    let a = V::splat(*pa[i].add(off));
                    for (x, wx) in row.iter_mut().zip(wv) {
                        *x = a.fmadd(wx, *x);
                    }
                }
                pw = pw.add(w_rs);
            }
            for (i, row) in acc.iter().enumerate().take(live) {
                for (v, x) in row.iter().enumerate() {
                    x.store(out.add(i * w_rs + v * V::LANES));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::passes::conv_fwd;
    use super::*;

    /// Equal to the im2col forward (checked against PyTorch's fixtures) with and without
    /// bias, on 1-3 d geometries with strides 2 and 3, padding, dilation, 1 x 1 windows,
    /// channel counts off the 16s, output channels of every tile shape (64s, 32s, 16s and
    /// partial vectors), position tails and threads.
    #[test]
    fn matches_the_im2col_path() {
        if !has_avx2_fma() {
            return;
        }
        let mut rnd = crate::ops::test_stream(41);
        // (n, c, co, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 7] = [
            (4, 32, 64, [1, 16, 16], [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
            (3, 32, 64, [1, 14, 14], [1, 4, 4], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
            (2, 64, 20, [1, 9, 9], [1, 1, 1], [1, 2, 2], [0, 0, 0], [1, 1, 1]),
            (3, 20, 7, [1, 11, 10], [1, 4, 4], [1, 2, 3], [0, 1, 2], [1, 1, 1]),
            (2, 48, 30, [1, 1, 50], [1, 1, 5], [1, 1, 3], [0, 0, 2], [1, 1, 2]),
            (2, 17, 128, [5, 6, 7], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]),
            (2, 16, 5, [1, 7, 7], [1, 3, 3], [1, 2, 1], [0, 1, 1], [2, 1, 1]),
        ];
        for (n, c, co, ins, k, stride, pad, dil) in cases {
            let g = Geom::for_test(n, c, 1, ins, k, stride, pad, dil);
            let img: Vec<f32> = rnd(n * c * g.ivol());
            let w: Vec<f32> = rnd(co * c * g.kvol());
            let bias: Vec<f32> = rnd(co);
            for b in [None, Some(&bias[..])] {
                let want = conv_fwd(&img, &w, b, &g, co, None);
                for par in [false, true] {
                    let got = super::super::on_two_threads(|| {
                        assert_eq!(applies(&g, co, par), co >= MIN_CO);
                        conv_fwd_cl(&img, &w, b, &g, co, par)
                    });
                    super::super::assert_close(&got, &want, &format!("{g:?} co={co} bias={} par={par}", b.is_some()));
                }
            }
        }
    }
}
