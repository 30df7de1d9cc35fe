//! Convolutions whose window is the whole image (no padding, a 1 x 1 x 1 output, one
//! group): each output is a dot product of a whole sample with a whole filter, so the
//! three passes are plain GEMMs over the operands as they lie in memory, with no
//! columns and no permutes. Forward `out (N x co) = img (N x C*taps) @ W^T`, adjoint
//! `img = a (N x co) @ W`, weight gradient `dW = a^T @ img`.
//!
//! Why: DCGAN's and PatchGAN's last layer (`Conv2d(512, 1, 4)` on a 4 x 4 map) and
//! "fully connected as convolution" heads took the im2col path, which walks 8192
//! column rows of one element per sample: 1.3 ms for a batch of 16, against 0.2 ms
//! for torch (0.27 M multiply-adds).
use super::Geom;
use crate::ops::float::Float;
use crate::ops::gemm::{gemm_slices, Parallelism};
use crate::ops::parallel::{filled, par_gemm};

/// Whether the window covers the whole image: one group, no padding, unit dilation
/// (or a 1-tap axis), and a window as large as the image on every axis.
pub(crate) fn applies(g: &Geom) -> bool {
    g.groups == 1 && g.pad == [0; 3] && g.k == g.ins && (0..3).all(|a| g.k[a] == 1 || g.dil[a] == 1)
}

fn threads(macs: usize) -> Parallelism {
    if par_gemm(macs) {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    }
}

/// out (N, co) = img (N, kc) @ w (co, kc)^T, plus `bias` (co).
pub(crate) fn forward<T: Float>(img: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, co: usize) -> Vec<T> {
    let (n, kc) = (g.n, g.c * g.ivol());
    let mut out = filled(n * co, |dst| gemm_slices((n, co, kc), dst, false, img, (kc, 1), w, (1, kc), threads(n * co * kc)));
    if let Some(b) = bias {
        for row in out.chunks_exact_mut(co.max(1)) {
            row.iter_mut().zip(b).for_each(|(v, &b)| *v += b);
        }
    }
    out
}

/// img (N, C, *ins) = a (N, co) @ w (co, C * taps), plus `bias` (C) on every tap.
pub(crate) fn adjoint<T: Float>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, co: usize) -> Vec<T> {
    let (n, kv, kc) = (g.n, g.ivol(), g.c * g.ivol());
    let mut out = filled(n * kc, |dst| gemm_slices((n, kc, co), dst, false, a, (co, 1), w, (kc, 1), threads(n * co * kc)));
    if let Some(b) = bias {
        for sample in out.chunks_exact_mut(kc.max(1)) {
            for (plane, &b) in sample.chunks_exact_mut(kv.max(1)).zip(b) {
                plane.iter_mut().for_each(|v| *v += b);
            }
        }
    }
    out
}

/// dW (co, C * taps) = a (N, co)^T @ img (N, C * taps), and the bias gradient (the sums
/// of `a` over the batch) when `bias`.
pub(crate) fn weight_grad<T: Float>(a: &[T], img: &[T], g: &Geom, co: usize, bias: bool) -> (Vec<T>, Option<Vec<T>>) {
    let (n, kc) = (g.n, g.c * g.ivol());
    let dw = filled(co * kc, |dst| gemm_slices((co, kc, n), dst, false, a, (1, co), img, (kc, 1), threads(n * co * kc)));
    let db = bias.then(|| {
        let mut db = vec![T::ZERO; co];
        for row in a.chunks_exact(co.max(1)).take(n) {
            db.iter_mut().zip(row).for_each(|(s, &v)| *s += v);
        }
        db
    });
    (dw, db)
}

#[cfg(test)]
mod tests {
    use super::super::passes::{conv_adj, conv_fwd, conv_wgrad, Buf};
    use super::*;
    use std::sync::OnceLock;

    /// Equal to the im2col passes (checked against PyTorch's fixtures) on whole-image
    /// windows in 1-3 d, with and without bias, f32 and f64, and a batch of one.
    #[test]
    fn matches_the_im2col_passes() {
        // (n, c, co, ins)
        for (i, (n, c, co, ins)) in
            [(16, 32, 1, [1, 4, 4]), (3, 5, 7, [1, 1, 9]), (1, 4, 3, [2, 3, 2]), (5, 2, 40, [1, 1, 1])].into_iter().enumerate()
        {
            let g = Geom::for_test(n, c, 1, ins, ins, [1; 3], [0; 3], [1; 3]);
            assert!(applies(&g) && g.ovol() == 1);
            let seed = 70 + 4 * i as u64;
            let img = crate::ops::test_values(n * c * g.ivol(), seed);
            let w = crate::ops::test_values(co * c * g.kvol(), seed + 1);
            let a = crate::ops::test_values(n * co, seed + 2);
            let bias_o = crate::ops::test_values(co, seed + 3);
            let bias_c = crate::ops::test_values(c, seed + 4);
            for b in [None, Some(&bias_o[..])] {
                let what = format!("{g:?} co={co} bias={}", b.is_some());
                super::super::assert_close(&forward(&img, &w, b, &g, co), &conv_fwd(&img, &w, b, &g, co, None), &what);
            }
            for b in [None, Some(&bias_c[..])] {
                let what = format!("{g:?} adjoint bias={}", b.is_some());
                super::super::assert_close(&adjoint(&a, &w, b, &g, co), &conv_adj(&a, &w, b, &g, co), &what);
            }
            let sink = OnceLock::new();
            let want = conv_wgrad(&a, &img, &g, co, None, Some(&sink));
            let Some(Buf::F32(want_b)) = sink.get() else { panic!("the im2col path's bias sums") };
            let (got, got_b) = weight_grad(&a, &img, &g, co, true);
            super::super::assert_close(&got, &want, &format!("{g:?} weight grad"));
            super::super::assert_close(&got_b.expect("bias sums"), want_b, &format!("{g:?} bias grad"));
            // f64 runs the same GEMMs.
            let img64: Vec<f64> = img.iter().map(|&v| v as f64).collect();
            let w64: Vec<f64> = w.iter().map(|&v| v as f64).collect();
            let got64 = forward(&img64, &w64, None, &g, co);
            let want = forward(&img, &w, None, &g, co);
            assert!(got64.iter().zip(&want).all(|(x, y)| (*x as f32 - y).abs() <= 1e-4 * (1.0 + y.abs())), "{g:?} f64");
        }
    }
}
