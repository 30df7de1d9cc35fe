//! Depthwise convolution (one input channel per group, `mult` output channels each)
//! as direct loops over each plane: per kernel tap, one multiply-add of a shifted input
//! row into an output row (forward), the same with the roles swapped (the adjoint: the
//! input gradient, or a depthwise transposed convolution), and one dot product per tap
//! and row (the weight gradient). Why: as GEMMs, a depthwise layer is thousands of
//! `mult x L x taps` products (taps = 9 for 3x3), each mostly overhead; measured 5x
//! torch's time forward and backward. With unit x-stride the row loops are contiguous
//! and vectorize.
use super::im2col::for_rows;
use super::Geom;
use crate::ops::float::Float;
use crate::ops::parallel::{for_chunks, par_ok};
use crate::ops::reduce::sum_slice;
use crate::ops::vector::{axpy, dot};
use rayon::prelude::*;

/// Whether this geometry is depthwise: every group holds one input channel.
pub(crate) fn applies(g: &Geom) -> bool {
    g.groups > 1 && g.groups == g.c
}

/// The input row `src`, stride `sx`, from column `x0 * sx + xoff` on, times `wv`,
/// added into `dst[x0..x1]`.
#[inline(always)]
fn axpy_row<T: Float>(dst: &mut [T], src: &[T], (x0, x1, xoff): (usize, usize, isize), sx: usize, wv: T) {
    let start = (x0 * sx) as isize + xoff;
    if sx == 1 {
        axpy(&mut dst[x0..x1], wv, &src[start as usize..start as usize + (x1 - x0)]);
    } else {
        for (j, d) in dst[x0..x1].iter_mut().enumerate() {
            *d += wv * src[(start + (j * sx) as isize) as usize];
        }
    }
}

/// out (N, C*mult, *outs) = depthwise conv of img (N, C, *ins) with w (C*mult, 1, taps)
/// (+ bias): each output plane is the sum over taps of its input plane, shifted.
pub(crate) fn forward<T: Float>(img: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
    let (kv, iv, ov) = (g.kvol(), g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    let mut out = vec![T::ZERO; g.n * w_rows * ov];
    let offs = g.tap_offsets();
    for_chunks(&mut out, ov.max(1), par_ok(g.n * w_rows * ov * kv), |p, plane| {
        let (n, o) = (p / w_rows, p % w_rows);
        let src = &img[(n * g.c + o / mult) * iv..][..iv];
        if let Some(b) = bias {
            plane.fill(b[o]);
        }
        for (t, off) in offs.iter().enumerate() {
            let wv = w[o * kv + t];
            for_rows(g, *off, |dr, sr, x0, x1, xoff| {
                axpy_row(&mut plane[dr..dr + g.outs[2]], &src[sr..sr + g.ins[2]], (x0, x1, xoff), g.stride[2], wv)
            });
        }
    });
    out
}

/// img (N, C, *ins) = the adjoint of `forward` applied to a (N, C*mult, *outs) (+ bias):
/// each output plane's taps scattered back onto its input plane.
pub(crate) fn adjoint<T: Float>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
    let (kv, iv, ov) = (g.kvol(), g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    let mut out = vec![T::ZERO; g.n * g.c * iv];
    let offs = g.tap_offsets();
    let sx = g.stride[2];
    for_chunks(&mut out, iv.max(1), par_ok(g.n * w_rows * ov * kv), |p, plane| {
        let (n, ci) = (p / g.c, p % g.c);
        if let Some(b) = bias {
            plane.fill(b[ci]);
        }
        for o in ci * mult..(ci + 1) * mult {
            let src = &a[(n * w_rows + o) * ov..][..ov];
            for (t, off) in offs.iter().enumerate() {
                let wv = w[o * kv + t];
                for_rows(g, *off, |dr, sr, x0, x1, xoff| {
                    let start = (x0 * sx) as isize + xoff;
                    let row = &mut plane[sr..sr + g.ins[2]];
                    let s = &src[dr + x0..dr + x1];
                    if sx == 1 {
                        axpy(&mut row[start as usize..start as usize + (x1 - x0)], wv, s);
                    } else {
                        for (j, &v) in s.iter().enumerate() {
                            row[(start + (j * sx) as isize) as usize] += wv * v;
                        }
                    }
                });
            }
        }
    });
    out
}

/// dW (C*mult, taps) = per output channel and tap, the sum over samples and positions of
/// a (N, C*mult, *outs) times the shifted input img (N, C, *ins); with `bias`, also each
/// output channel's sum of `a`.
pub(crate) fn weight_grad<T: Float>(a: &[T], img: &[T], g: &Geom, w_rows: usize, bias: bool) -> (Vec<T>, Option<Vec<T>>) {
    let (kv, iv, ov) = (g.kvol(), g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    let offs = g.tap_offsets();
    let sx = g.stride[2];
    let per_channel = |o: usize| -> (Vec<T>, T) {
        let mut dw = vec![T::ZERO; kv];
        let mut db = T::ZERO;
        for n in 0..g.n {
            let ap = &a[(n * w_rows + o) * ov..][..ov];
            let src = &img[(n * g.c + o / mult) * iv..][..iv];
            for (t, off) in offs.iter().enumerate() {
                let mut acc = T::ZERO;
                for_rows(g, *off, |dr, sr, x0, x1, xoff| {
                    let start = (x0 * sx) as isize + xoff;
                    let arow = &ap[dr + x0..dr + x1];
                    if sx == 1 {
                        acc += dot(arow, &src[sr + start as usize..sr + start as usize + (x1 - x0)]);
                    } else {
                        for (j, &v) in arow.iter().enumerate() {
                            acc += v * src[sr + (start + (j * sx) as isize) as usize];
                        }
                    }
                });
                dw[t] += acc;
            }
            if bias {
                db += sum_slice(ap);
            }
        }
        (dw, db)
    };
    let parts: Vec<(Vec<T>, T)> = if par_ok(g.n * w_rows * ov * kv) {
        (0..w_rows).into_par_iter().map(per_channel).collect()
    } else {
        (0..w_rows).map(per_channel).collect()
    };
    let db = bias.then(|| parts.iter().map(|p| p.1).collect());
    (parts.into_iter().flat_map(|p| p.0).collect(), db)
}

#[cfg(test)]
mod tests {
    use super::super::passes::{conv_adj, conv_fwd, conv_wgrad, Buf};
    use super::*;

    /// The direct loops equal the GEMM paths (checked against PyTorch's fixtures) in all
    /// three directions, with channel multipliers, strides, dilations, padding, bias and
    /// 1-3 d geometries.
    #[test]
    fn matches_the_gemm_paths() {
        // (n, c, mult, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 5] = [
            (2, 4, 1, [1, 7, 9], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (1, 3, 2, [1, 8, 11], [1, 3, 5], [1, 2, 2], [0, 1, 2], [1, 1, 1]),
            (2, 5, 1, [1, 9, 9], [1, 3, 3], [1, 1, 1], [0, 2, 2], [1, 2, 2]),
            (3, 2, 3, [1, 1, 20], [1, 1, 4], [1, 1, 3], [0, 0, 1], [1, 1, 1]),
            (1, 3, 1, [4, 5, 6], [3, 3, 3], [2, 1, 1], [1, 1, 1], [1, 1, 1]),
        ];
        let mut seed = 21u64;
        let mut rnd = |len: usize| {
            seed += 1;
            crate::ops::test_values(len, seed)
        };
        for (n, c, mult, ins, k, stride, pad, dil) in cases {
            let g = Geom::for_test(n, c, c, ins, k, stride, pad, dil);
            assert!(applies(&g));
            let w_rows = c * mult;
            let img = rnd(n * c * g.ivol());
            let w = rnd(w_rows * g.kvol());
            let a = rnd(n * w_rows * g.ovol());
            let (bo, bi) = (rnd(w_rows), rnd(c));
            let what = format!("{g:?} mult={mult}");
            super::super::assert_close(&forward(&img, &w, Some(&bo), &g, w_rows), &conv_fwd(&img, &w, Some(&bo), &g, w_rows, None), &what);
            super::super::assert_close(&adjoint(&a, &w, Some(&bi), &g, w_rows), &conv_adj(&a, &w, Some(&bi), &g, w_rows), &what);
            let sink = std::sync::OnceLock::new();
            let want = conv_wgrad(&a, &img, &g, w_rows, None, Some(&sink));
            let (dw, db) = weight_grad(&a, &img, &g, w_rows, true);
            super::super::assert_close(&dw, &want, &what);
            match sink.get() {
                Some(Buf::F32(b)) => super::super::assert_close(&db.unwrap(), b, &what),
                _ => panic!("bias sums"),
            }
        }
    }
}
