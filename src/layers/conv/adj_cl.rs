//! The f32 adjoint of a strided convolution (its input gradient, and the forward of a
//! strided transposed convolution) with 16+ image channels, as register-blocked
//! products scattered into a channels-last image:
//! `img[p * stride + tap, c] += sum over o of a[o, p] * w[o, c, tap]`. For a tap and a
//! run of consecutive positions `p` (12 with AVX-512, 6 with AVX2), the products are
//! `a (run x Co) @ w_tap (Co x C)`: the broadcasts of `a` are consecutive floats of its
//! own (channel-major) rows, and each `w_tap` row is vector loads of a once-packed
//! weight. The tile's result (2 vectors of channels per position) is added from the
//! registers into the padded channels-last image at the positions' windows, which is
//! copied back (channel-major, padding cut, bias added) at the end of each sample.
//!
//! Why: the im2col path multiplied into a column matrix with the `gemm` crate and then
//! summed the columns back into the image (col2im), a pass over `taps` copies of the
//! image; a ResNet's 32 -> 64 stride-2 layer's input gradient took 2.8 ms there (torch:
//! 1.4 ms). Stride 1 stays on the flipped-kernel forward (`implicit::adjoint`).
use super::fwd_cl::MIN_PLANE;
use super::wgrad_cl::Padded;
use super::Geom;
use crate::ops::cpu::has_avx2_fma;
use crate::ops::lanes::{at_cpu_lanes, Features, Kernel, Lanes};
use crate::ops::transpose::transpose;

/// Channel vectors of a tile; positions (the broadcast side) are 12 with AVX-512 (24
/// accumulators of its 32 registers) and 6 with AVX2 (12 of 16).
const NV: usize = 2;
/// Image channels from which this kernel runs (it pads them to 16s).
const MIN_C: usize = 16;

/// Whether `conv_adj_cl` runs: AVX2 (or AVX-512), one group, a stride above 1 on some axis, 16+
/// image channels, and (when it splits over threads) a sample per thread at least.
pub(crate) fn applies(g: &Geom, par: bool) -> bool {
    let threads = if par { crate::ops::pool::num_threads() } else { 1 };
    has_avx2_fma() && g.groups == 1 && g.stride != [1, 1, 1] && g.c >= MIN_C && g.n >= threads && g.ovol() >= MIN_PLANE
}

/// img (N, C, *ins) = the adjoint of the convolution `g` applied to `a` (N, rows, *outs)
/// with the weight `w` (rows, C, *k), plus `bias` (C) when given. Samples are split over
/// the threads when `par`. Call only where `applies(g, par)`.
pub(crate) fn conv_adj_cl(a: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, rows: usize, par: bool) -> Vec<f32> {
    assert!(has_avx2_fma() && g.groups == 1 && g.c >= MIN_C, "conv_adj_cl: AVX2, one group and {MIN_C}+ channels only");
    let (l, iv, kv, c) = (g.ovol(), g.ivol(), g.kvol(), g.c);
    assert!(a.len() >= g.n * rows * l && w.len() >= rows * c * kv, "conv_adj_cl: operand sizes");
    let pd = Padded::new(g);
    // w (rows, C, taps) -> (taps, rows, C padded to 16s), zeros past C.
    let mut wt = vec![0f32; kv * rows * pd.cp];
    for o in 0..rows {
        for ch in 0..c {
            for t in 0..kv {
                wt[(t * rows + o) * pd.cp + ch] = w[(o * c + ch) * kv + t];
            }
        }
    }
    // Each output position's window origin in the padded image (floats, tap excluded).
    let step = g.stride[2] * pd.cp;
    let origin: Vec<usize> = pd.out_row_origins(g).into_iter().flat_map(|row| (0..g.outs[2]).map(move |ox| row + ox * step)).collect();
    let mut out = vec![0f32; g.n * c * iv];
    let threads = if par { rayon::current_num_threads().min(g.n).max(1) } else { 1 };
    let per = g.n.div_ceil(threads);
    let part = |t: usize, chunk: &mut [f32]| {
        let mut img = vec![0f32; pd.pixels() * pd.cp];
        for (s, dst) in chunk.chunks_exact_mut(c * iv).enumerate() {
            let n = t * per + s;
            img.fill(0.0);
            let a_n = &a[n * rows * l..(n + 1) * rows * l];
            at_cpu_lanes!(sample(a_n, &wt, rows, l, &pd, &origin, &mut img)).expect("conv_adj_cl: AVX2 checked above");
            copy_back(&img, g, &pd, bias, dst);
        }
    };
    crate::ops::parallel::for_chunks(&mut out, per * c * iv, threads > 1, part);
    out
}

/// Adds one sample's adjoint into the padded channels-last `img`: per run of positions,
/// tap and pair of channel vectors, one tile.
fn sample<V: Features>(a: &[f32], wt: &[f32], rows: usize, l: usize, pd: &Padded, origin: &[usize], img: &mut [f32]) {
    if V::LANES == 8 {
        sample_runs::<V, 6>(a, wt, rows, l, pd, origin, img)
    } else {
        sample_runs::<V, 12>(a, wt, rows, l, pd, origin, img)
    }
}

/// `sample` with runs of `MR` positions.
fn sample_runs<V: Features, const MR: usize>(a: &[f32], wt: &[f32], rows: usize, l: usize, pd: &Padded, origin: &[usize], img: &mut [f32]) {
    let cv = pd.cp / V::LANES;
    // Every window lies in the image: the furthest origin plus the last tap and a
    // position's channels (the tiles add there unchecked).
    let reach = origin.iter().max().copied().unwrap_or(0) + pd.taps.last().copied().unwrap_or(0) + pd.cp;
    assert!(reach <= img.len() && origin.len() >= l, "conv_adj_cl: windows inside the padded image");
    let dst = img.as_mut_ptr();
    // The last run of a sample may be short: its positions are copied here (zeros after).
    let mut tail = vec![0f32; rows * MR];
    for p0 in (0..l).step_by(MR) {
        let run = MR.min(l - p0);
        let (src, stride) = if run == MR {
            (a[p0..].as_ptr(), l)
        } else {
            for o in 0..rows {
                tail[o * MR..o * MR + run].copy_from_slice(&a[o * l + p0..o * l + p0 + run]);
                tail[o * MR + run..(o + 1) * MR].fill(0.0);
            }
            (tail.as_ptr(), MR)
        };
        for (t, &toff) in pd.taps.iter().enumerate() {
            for v0 in (0..cv).step_by(NV) {
                let nv = NV.min(cv - v0);
                let b = wt[t * rows * pd.cp + v0 * V::LANES..].as_ptr();
                let k = ((src, stride, b, pd.cp, rows), (dst, &origin[p0..p0 + run], toff + v0 * V::LANES));
                // SAFETY: the CPU has V's features (`applies`); for every o < rows the
                // kernel reads MR floats at `src + o * stride` (a full run of the sample's
                // row o, or the tail copy) and `nv` vectors at `b + o * cp` (within the
                // packed weight, as v0 + nv <= cv), and adds nv vectors at each of the
                // run's windows plus `toff + v0 LANES` (inside `img`: asserted above, as
                // v0 + nv <= cv and the channels of a position are cp floats).
                unsafe {
                    if nv == NV {
                        V::run(Tile::<MR, NV>(k))
                    } else {
                        V::run(Tile::<MR, 1>(k))
                    }
                };
            }
        }
    }
}

/// `img[origins[i] + off + v] += sum over o < k of a[o * a_rs + i] * b[o * b_rs + v]`
/// for the positions `i < origins.len() <= MR` and `W` vectors `v`, added from the
/// registers (in the level's vectors: the closure that added a stored tile ran in
/// 4-lane SSE, a tenth of a transposed convolution's time). Fields: (a, a_rs, b, b_rs,
/// k), (img, origins, off).
///
/// Contract (`Kernel::body`): for every o < k, `MR` floats at `a + o * a_rs` and `W`
/// vectors at `b + o * b_rs` are readable, and `W` vectors at `img + origins[i] + off`
/// are writable for each i.
#[allow(clippy::type_complexity)]
struct Tile<'a, const MR: usize, const W: usize>(((*const f32, usize, *const f32, usize, usize), (*mut f32, &'a [usize], usize)));

impl<const MR: usize, const W: usize> Kernel for Tile<'_, MR, W> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let ((a, a_rs, b, b_rs, k), (img, origins, off)) = self.0;
        // SAFETY (every call and access below): the level's features, row o of each
        // operand and the windows added to (the contract above).
        unsafe {
            let mut sum = [[V::zero(); W]; MR];
            for o in 0..k {
                let (pa, pb) = (a.add(o * a_rs), b.add(o * b_rs));
                let mut bv = [V::zero(); W];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = V::load(pb.add(v * V::LANES));
                }
                for (i, s) in sum.iter_mut().enumerate() {
                    let av = V::splat(*pa.add(i));
                    for (x, bx) in s.iter_mut().zip(bv) {
                        *x = av.fmadd(bx, *x);
                    }
                }
            }
            for (s, &origin) in sum.iter().zip(origins) {
                let p = img.add(origin + off);
                for (v, x) in s.iter().enumerate() {
                    let q = p.add(v * V::LANES);
                    x.add(V::load(q)).store(q);
                }
            }
        }
    }
}

/// The padded channels-last `img` back into `dst` (C, *ins), padding cut, plus `bias`.
fn copy_back(img: &[f32], g: &Geom, pd: &Padded, bias: Option<&[f32]>, dst: &mut [f32]) {
    let (w, iv) = (g.ins[2], g.ivol());
    assert!(dst.len() >= g.c * iv && img.len() >= pd.pixels() * pd.cp);
    for (r, pix) in pd.interior_rows(g) {
        // SAFETY: the `w` pixels from `pix` (each `cp >= C` floats) lie in `img`, and
        // `dst` holds C channel planes of `iv` floats, input row r at `r w`.
        unsafe { transpose(img[pix * pd.cp..].as_ptr(), pd.cp, w, g.c, dst[r * w..].as_mut_ptr(), iv) };
    }
    if let Some(bias) = bias {
        for (plane, b) in dst.chunks_exact_mut(iv).zip(bias) {
            plane.iter_mut().for_each(|v| *v += b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::passes::conv_adj;
    use super::*;

    /// Equal to the col2im adjoint (checked against PyTorch's fixtures) with and without
    /// bias, on 1-3 d geometries with strides 2 and 3, padding, dilation, 1 x 1 windows,
    /// channel counts off the 16s (odd vector counts), sample tails and threads.
    #[test]
    fn matches_the_col2im_path() {
        if !has_avx2_fma() {
            return;
        }
        let mut rnd = crate::ops::test_stream(21);
        // (n, c, rows, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 6] = [
            (4, 32, 64, [1, 16, 16], [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
            (2, 64, 20, [1, 9, 9], [1, 1, 1], [1, 2, 2], [0, 0, 0], [1, 1, 1]),
            (3, 20, 7, [1, 11, 10], [1, 4, 4], [1, 2, 3], [0, 1, 2], [1, 1, 1]),
            (2, 48, 30, [1, 1, 50], [1, 1, 5], [1, 1, 3], [0, 0, 2], [1, 1, 2]),
            (2, 17, 9, [5, 6, 7], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]),
            (2, 16, 5, [1, 7, 7], [1, 3, 3], [1, 2, 1], [0, 1, 1], [2, 1, 1]),
        ];
        for (n, c, rows, ins, k, stride, pad, dil) in cases {
            let g = Geom::for_test(n, c, 1, ins, k, stride, pad, dil);
            let a: Vec<f32> = rnd(n * rows * g.ovol());
            let w: Vec<f32> = rnd(rows * c * g.kvol());
            let bias: Vec<f32> = rnd(c);
            for b in [None, Some(&bias[..])] {
                let want = conv_adj(&a, &w, b, &g, rows);
                for par in [false, true] {
                    let got = super::super::on_two_threads(|| {
                        // Planes under MIN_PLANE positions go to the GEMM path; the kernel
                        // itself still takes them (checked here too).
                        assert_eq!(applies(&g, par), g.ovol() >= MIN_PLANE);
                        conv_adj_cl(&a, &w, b, &g, rows, par)
                    });
                    super::super::assert_close(&got, &want, &format!("{g:?} bias={} par={par}", b.is_some()));
                }
            }
        }
    }
}
