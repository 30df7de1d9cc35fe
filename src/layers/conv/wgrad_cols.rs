//! The f32 weight gradient of a convolution with few input channels per group (under
//! `wgrad_cl`'s 16) that `wgrad`'s stride-1 kernel does not take, as `ops::sgemm`
//! products over small blocks of samples: each thread takes a range of samples and,
//! per block, writes the block's columns (`im2col`, kept in L2) and adds
//! `cols (kc x nb L) @ a^T (nb L x mg)` into a weight gradient of its own; the
//! threads' sums are added at the end. With few channels the gradient is small and
//! the depth (positions) long, so splitting the depth over threads costs one small
//! sum, where splitting the output leaves each thread packing every column.
//!
//! Why: the im2col path wrote the whole batch's columns, permuted the upstream
//! gradient channel-major and ran one `gemm`-crate product of 48 x 64 x 16384 (a
//! 3 -> 64 channel 4 x 4 stride-2 layer at 64 x 64, batch 16: DCGAN's first layer and
//! its generator's last) on one thread, the crate's slow layout for a short, deep
//! product: 5.3 ms against torch's 0.8.
use super::im2col::{channel_major, im2col};
use super::passes::from_transposed;
use super::Geom;
use crate::ops::parallel::filled;
use crate::ops::sgemm::{sgemm_with, takes, Mat};

/// Column-matrix floats per block of samples (256 KiB: the block's columns, written
/// once and packed once, stay in L2).
const BLOCK_FLOATS: usize = 1 << 16;

/// Whether `conv_wgrad_cols` runs: a CPU `ops::sgemm` serves, a product it takes
/// (columns per group x output channels per group), and a gradient small enough that
/// one per thread is cheap next to the product (at most 64 multiply-adds per element
/// of the gradient would be a product too shallow for the split).
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    let (mg, kc) = (w_rows / g.groups, g.c / g.groups * g.kvol());
    takes(kc, mg) && g.n * g.ovol() >= 64
}

/// dW (G*mg, cg*taps) for the upstream gradient `a` (N, G*mg, *outs) and the image
/// (N, C, *ins), with the per-channel sums of `a` (the bias gradient) when `bias`.
/// Samples are split over the threads when `par`. Call only where `applies(g, w_rows)`.
pub(crate) fn conv_wgrad_cols(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, par: bool, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    let (mg, kc, l) = (w_rows / g.groups, g.c / g.groups * g.kvol(), g.ovol());
    let (iv, rows) = (g.c * g.ivol(), g.groups * mg);
    assert!(takes(kc, mg), "conv_wgrad_cols: a {kc} x {mg} product is not sgemm's");
    assert!(a.len() >= g.n * rows * l && img.len() >= g.n * iv, "conv_wgrad_cols: operand sizes");
    let per_sample = (g.c * g.kvol() * l).max(1);
    let block = (BLOCK_FLOATS / per_sample).max(1);
    // Each thread's sum is dW^T per group (kc x mg), transposed once at the end.
    let (dwt, db) = super::sum_over_samples(g.n, par, (g.groups * kc * mg, if bias { rows } else { 0 }), |(n0, n1), dwt, db| {
        for s0 in (n0..n1).step_by(block) {
            let nb = block.min(n1 - s0);
            let nl = nb * l;
            // im2col writes every column of the block.
            let cols = filled(g.c * g.kvol() * nl, |c| im2col(&img[s0 * iv..(s0 + nb) * iv], g, nb, c));
            let ap = channel_major(&a[s0 * rows * l..(s0 + nb) * rows * l], nb, rows, l);
            for gi in 0..g.groups {
                let lhs = Mat::new(cols[gi * kc * nl..].as_ptr(), nl as isize, 1);
                let rhs = Mat::new(ap[gi * mg * nl..].as_ptr(), 1, nl as isize);
                // SAFETY: `takes(kc, mg)` (asserted); the destination is this thread's
                // group block of kc x mg initialized floats; `lhs` is the group's kc rows
                // of the block's nl columns, `rhs` the transpose of its mg rows of `ap`
                // (nl floats each), both inside their buffers, which nothing writes.
                unsafe { sgemm_with((kc, mg, nl), dwt[gi * kc * mg..].as_mut_ptr(), mg as isize, true, lhs, &rhs, 1.0, 1) };
            }
            if !db.is_empty() {
                for (b, row) in db.iter_mut().zip(ap.chunks_exact(nl)) {
                    *b += crate::ops::reduce::sum_slice(row);
                }
            }
        }
    });
    (from_transposed(&dwt, mg, kc), bias.then_some(db))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal to the im2col weight gradient (checked against PyTorch's fixtures) with the
    /// bias sums: DCGAN's 3 -> 64 stride-2 layer (smaller), a 7 x 7 stride-2 stem, 1-d
    /// and 3-d windows, groups, blocks of several samples, a sample larger than a
    /// block, and threads.
    #[test]
    fn matches_the_im2col_path() {
        if !crate::ops::sgemm::takes(6, 16) {
            return;
        }
        // (n, c, groups, w_rows, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 6] = [
            (5, 3, 1, 64, [1, 32, 32], [1, 4, 4], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
            (3, 3, 1, 24, [1, 40, 40], [1, 7, 7], [1, 2, 2], [0, 3, 3], [1, 1, 1]),
            (4, 2, 1, 17, [1, 1, 300], [1, 1, 9], [1, 1, 3], [0, 0, 4], [1, 1, 2]),
            (3, 4, 2, 32, [4, 6, 6], [3, 3, 3], [1, 1, 2], [1, 1, 1], [1, 1, 1]),
            (7, 8, 1, 16, [1, 5, 5], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (2, 1, 1, 20, [1, 200, 200], [1, 3, 3], [1, 2, 2], [0, 1, 1], [1, 1, 1]),
        ];
        for (i, (n, c, groups, w_rows, ins, k, stride, pad, dil)) in cases.into_iter().enumerate() {
            let g = Geom::for_test(n, c, groups, ins, k, stride, pad, dil);
            assert!(applies(&g, w_rows), "{g:?}");
            super::super::check_wgrad(&g, w_rows, 31 + 2 * i as u64, |a, img, par| conv_wgrad_cols(a, img, &g, w_rows, par, true));
        }
    }
}
