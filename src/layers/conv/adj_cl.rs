//! The f32 adjoint of a strided convolution (its input gradient, and the forward of a
//! strided transposed convolution) with 16+ image channels, as register-blocked
//! products scattered into a channels-last image:
//! `img[p * stride + tap, c] += sum over o of a[o, p] * w[o, c, tap]`. For a tap and a
//! run of 12 consecutive positions `p`, the products are `a (12 x Co) @ w_tap (Co x C)`:
//! the broadcasts of `a` are consecutive floats of its own (channel-major) rows, and
//! each `w_tap` row is 16-lane loads of a once-packed weight. The 12 x 32 result is added
//! into the padded channels-last image at the positions' windows, which is copied back
//! (channel-major, padding cut, bias added) at the end of each sample.
//!
//! Why: the im2col path multiplied into a column matrix with the `gemm` crate and then
//! summed the columns back into the image (col2im), a pass over `taps` copies of the
//! image; a ResNet's 32 -> 64 stride-2 layer's input gradient took 2.8 ms there (torch:
//! 1.4 ms). Stride 1 stays on the flipped-kernel forward (`implicit::adjoint`).
use super::wgrad_cl::Padded;
use super::Geom;
use crate::ops::cpu::has_avx512;
use crate::ops::transpose::transpose;

/// Lanes of one vector; positions (the broadcast side) and channel vectors of a tile.
const LANES: usize = 16;
const MR: usize = 12;
const NV: usize = 2;
/// Image channels from which this kernel runs (it pads them to 16s).
const MIN_C: usize = 16;

/// Whether `conv_adj_cl` runs: AVX-512, one group, a stride above 1 on some axis, 16+
/// image channels, and (when it splits over threads) a sample per thread at least.
pub(crate) fn applies(g: &Geom, par: bool) -> bool {
    let threads = if par { crate::ops::pool::num_threads() } else { 1 };
    has_avx512() && g.groups == 1 && g.stride != [1, 1, 1] && g.c >= MIN_C && g.n >= threads && g.ovol() > 0
}

/// img (N, C, *ins) = the adjoint of the convolution `g` applied to `a` (N, rows, *outs)
/// with the weight `w` (rows, C, *k), plus `bias` (C) when given. Samples are split over
/// the threads when `par`. Call only where `applies(g, par)`.
pub(crate) fn conv_adj_cl(a: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, rows: usize, par: bool) -> Vec<f32> {
    assert!(has_avx512() && g.groups == 1 && g.c >= MIN_C, "conv_adj_cl: AVX-512, one group and {MIN_C}+ channels only");
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
            sample(&a[n * rows * l..(n + 1) * rows * l], &wt, rows, l, &pd, &origin, &mut img);
            copy_back(&img, g, &pd, bias, dst);
        }
    };
    crate::ops::parallel::for_chunks(&mut out, per * c * iv, threads > 1, part);
    out
}

/// Adds one sample's adjoint into the padded channels-last `img`: per run of 12
/// positions, tap and pair of channel vectors, one tile.
fn sample(a: &[f32], wt: &[f32], rows: usize, l: usize, pd: &Padded, origin: &[usize], img: &mut [f32]) {
    let cv = pd.cp / LANES;
    let mut acc = [0f32; MR * NV * LANES];
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
                let b = wt[t * rows * pd.cp + v0 * LANES..].as_ptr();
                // SAFETY: the CPU has AVX-512 (`applies`); for every o < rows the kernel reads
                // MR floats at `src + o * stride` (a full run of the sample's row o, or the
                // tail copy) and `nv` vectors at `b + o * cp` (within the packed weight, as
                // v0 + nv <= cv), and writes `acc`.
                #[cfg(target_arch = "x86_64")]
                unsafe {
                    if nv == NV {
                        tile::<NV>(src, stride, b, pd.cp, rows, &mut acc)
                    } else {
                        tile::<1>(src, stride, b, pd.cp, rows, &mut acc)
                    }
                };
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("conv_adj_cl off x86-64 ({src:?} {stride} {b:?})");
                for i in 0..run {
                    let at = origin[p0 + i] + toff + v0 * LANES;
                    let dst = &mut img[at..at + nv * LANES];
                    for (d, s) in dst.iter_mut().zip(&acc[i * NV * LANES..]) {
                        *d += s;
                    }
                }
            }
        }
    }
}

/// `acc[i, v] = sum over o < k of a[o * a_rs + i] * b[o * b_rs + v]` for the 12 positions
/// `i` and `W` vectors `v` (each 16 lanes), stored `NV * 16` floats per position.
///
/// # Safety
/// The CPU has AVX-512F; for every o < k, 12 floats at `a + o * a_rs` and `W * 16` at
/// `b + o * b_rs` are readable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile<const W: usize>(a: *const f32, a_rs: usize, b: *const f32, b_rs: usize, k: usize, acc: &mut [f32; MR * NV * LANES]) {
    use std::arch::x86_64::*;
    let mut sum = [[_mm512_setzero_ps(); W]; MR];
    for o in 0..k {
        // SAFETY (both reads): row o of each operand (the caller).
        let (pa, pb) = unsafe { (a.add(o * a_rs), b.add(o * b_rs)) };
        let mut bv = [_mm512_setzero_ps(); W];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = unsafe { _mm512_loadu_ps(pb.add(v * LANES)) };
        }
        for (i, s) in sum.iter_mut().enumerate() {
            let av = _mm512_set1_ps(unsafe { *pa.add(i) });
            for (x, bx) in s.iter_mut().zip(bv) {
                *x = _mm512_fmadd_ps(av, bx, *x);
            }
        }
    }
    for (i, s) in sum.iter().enumerate() {
        for (v, x) in s.iter().enumerate() {
            // SAFETY: position i < MR, vector v < W <= NV of `acc`.
            unsafe { _mm512_storeu_ps(acc.as_mut_ptr().add((i * NV + v) * LANES), *x) };
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
        if !has_avx512() {
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
                        assert!(applies(&g, par));
                        conv_adj_cl(&a, &w, b, &g, rows, par)
                    });
                    super::super::assert_close(&got, &want, &format!("{g:?} bias={} par={par}", b.is_some()));
                }
            }
        }
    }
}
