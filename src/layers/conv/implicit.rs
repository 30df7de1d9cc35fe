//! The f32 forward convolution as an implicit GEMM: `ops::sgemm` packs its right
//! operand's strips straight from the image, so the (C*K, L) column matrix is never
//! written out. Why: for a CIFAR-sized ResNet layer (32 -> 32 channels at 32x32,
//! batch 32) that matrix is 38 MB per forward, nine copies of the image streamed
//! through L3 before the GEMM reads them again; the strips here (`KC x 32` floats)
//! are gathered into L1 and used at once.
use super::im2col::{copy_run, fill_run};
use super::Geom;
use crate::ops::parallel::filled_plain;
use crate::ops::sgemm::{sgemm_with, takes, Mat, Right};

/// The image columns of `nb` consecutive samples for one group: element (channel *
/// taps + tap, sample * L + position) is the input under that tap at that output
/// position of that sample, or 0 in the padding.
struct Columns<'a> {
    /// The first sample's group channels, then the next sample's `stride` floats on:
    /// (cg, D, H, W) planes each.
    img: &'a [f32],
    /// Floats from one sample to the next (C * D * H * W).
    stride: usize,
    g: &'a Geom,
    /// Each tap's offset along (z, y, x) relative to `o * stride`.
    offs: &'a [[isize; 3]],
}

impl Right for Columns<'_> {
    unsafe fn pack(&self, nr: usize, (p0, kc): (usize, usize), (c0, cols): (usize, usize), out: &mut [f32]) {
        let g = self.g;
        let [d, h, w] = g.ins;
        let [od, oh, ow] = g.outs;
        let (kv, iv, l) = (self.offs.len(), d * h * w, od * oh * ow);
        let [sz, sy, sx] = g.stride;
        assert!(nr <= 32, "conv columns: strips of at most 32 columns");
        for (t, strip) in out.chunks_exact_mut(nr * kc).take(cols.div_ceil(nr)).enumerate() {
            let s0 = c0 + t * nr;
            let live = (cols - t * nr).min(nr);
            // The strip's positions as runs along an output row: (first column in the
            // strip, sample, oz, oy, ox0, length); each run holds at least one of the
            // `live <= 32` positions.
            let mut runs = [(0usize, 0usize, 0usize, 0usize, 0usize, 0usize); 32];
            let mut count = 0;
            let mut j = 0;
            while j < live {
                let q = s0 + j;
                let (n, pos) = (q / l, q % l);
                let (ox, rest) = (pos % ow, pos / ow);
                let len = (ow - ox).min(live - j);
                runs[count] = (j, n, rest / oh, rest % oh, ox, len);
                count += 1;
                j += len;
            }
            for p in 0..kc {
                let kk = p0 + p;
                let (ch, off) = (kk / kv, self.offs[kk % kv]);
                let dst = &mut strip[p * nr..(p + 1) * nr];
                fill_run(&mut dst[live..], 0.0);
                for &(j0, n, oz, oy, ox0, len) in &runs[..count] {
                    let plane = &self.img[n * self.stride + ch * iv..][..iv];
                    let seg = &mut dst[j0..j0 + len];
                    let (iz, iy) = ((oz * sz) as isize + off[0], (oy * sy) as isize + off[1]);
                    if iz < 0 || iz >= d as isize || iy < 0 || iy >= h as isize {
                        fill_run(seg, 0.0);
                        continue;
                    }
                    let row = &plane[(iz as usize * h + iy as usize) * w..][..w];
                    let x0 = (ox0 * sx) as isize + off[2];
                    if sx == 1 {
                        // Columns whose input falls left of 0 or past w are padding.
                        let lo = (-x0).clamp(0, len as isize) as usize;
                        let hi = (w as isize - x0).clamp(lo as isize, len as isize) as usize;
                        // Short runs (at most 32): `copy_run`/`fill_run` move them as fixed-size
                        // blocks instead of calling memcpy/memset.
                        fill_run(&mut seg[..lo], 0.0);
                        // A run may start past the row's end (padding wider than the
                        // kernel's reach on that side): nothing to copy then.
                        if hi > lo {
                            copy_run(&mut seg[lo..hi], &row[(x0 + lo as isize) as usize..(x0 + hi as isize) as usize]);
                        }
                        fill_run(&mut seg[hi..], 0.0);
                    } else {
                        for (jj, v) in seg.iter_mut().enumerate() {
                            let ix = x0 + (jj * sx) as isize;
                            *v = if ix >= 0 && ix < w as isize { row[ix as usize] } else { 0.0 };
                        }
                    }
                }
            }
        }
    }
}

/// Whether the implicit GEMM runs this forward: f32 on a CPU `ops::sgemm` serves,
/// with enough output channels per group for its tiles, and output rows of 16+
/// positions. On 8-wide rows each 32-column strip packs four short runs, and the
/// materialised columns with a batch-wide GEMM measured as fast (128 -> 128 channels
/// at 8x8, batch 32: 3.2 ms against 3.1).
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    g.outs[2] >= MIN_ROW && takes(w_rows / g.groups, chunk_samples(g) * g.ovol())
}

/// Output row width from which the implicit GEMM runs.
const MIN_ROW: usize = 16;

/// a (N, G*mg, L) = W_g (mg x kc) @ columns(img)_g (+ bias), over chunks of `nb`
/// samples (enough for `MIN_COLS` columns): a one-sample chunk writes its output block
/// in place (row stride L); a wider one goes through a channel-major buffer and a
/// permute. Chunks run in parallel when `par` and there are at least two, else the
/// GEMM splits its columns over the threads.
pub(crate) fn conv_fwd_implicit(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, w_rows: usize, par: bool) -> Vec<f32> {
    let (mg, cg) = (w_rows / g.groups, g.c / g.groups);
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let (kc, rows) = (cg * kv, g.groups * mg);
    let offs = g.tap_offsets();
    // Each group's weight transposed once (kc x mg, column-major rows of the left
    // operand), so the GEMM of every chunk packs it as contiguous runs.
    let wt: Vec<f32> = (0..g.groups)
        .flat_map(|gi| {
            let wg = &w[gi * mg * kc..(gi + 1) * mg * kc];
            (0..kc).flat_map(move |p| (0..mg).map(move |r| wg[r * kc + p]))
        })
        .collect();
    let nb = chunk_samples(g);
    let chunks = g.n.div_ceil(nb);
    let threads = rayon::current_num_threads();
    let by_chunk = par && chunks >= 2;
    let gemm_threads = if par && !by_chunk { threads } else { 1 };
    // The groups' GEMMs for samples n0.. (nbc of them) into `dst` (rows, nbc * L), row
    // stride nbc * L; `dst` holds the bias first when `read` (one-sample chunks).
    let gemms = |n0: usize, nbc: usize, dst: &mut [f32], read: bool| {
        let cols_n = nbc * l;
        for gi in 0..g.groups {
            let block = &mut dst[gi * mg * cols_n..(gi + 1) * mg * cols_n];
            let cols = Columns { img: &img[(n0 * g.c + gi * cg) * iv..], stride: g.c * iv, g, offs: &offs };
            let wg = Mat::new(wt[gi * mg * kc..(gi + 1) * mg * kc].as_ptr(), 1, mg as isize);
            // SAFETY: `block` holds the mg x cols_n block (row stride cols_n), filled when
            // it is read; `wg` is the group's mg x kc weight, column-major inside `wt`;
            // `cols` packs any block of its kc x cols_n extent (samples n0..n0 + nbc of the
            // group's channels). `applies` (checked by the caller) implies takes(mg, cols_n).
            unsafe { sgemm_with((mg, cols_n, kc), block.as_mut_ptr(), cols_n as isize, read, wg, &cols, 1.0, gemm_threads) };
        }
    };
    let chunk = |ci: usize, out: &mut [f32]| {
        let (n0, nbc) = (ci * nb, out.len() / (rows * l));
        if nbc == 1 {
            if let Some(b) = bias {
                for (r, row) in out.chunks_exact_mut(l).enumerate() {
                    row.fill(b[r]);
                }
            }
            gemms(n0, 1, out, bias.is_some());
        } else {
            // Every element is written by the groups' GEMMs, then all of `out` by the permute.
            let a = filled_plain(rows * nbc * l, |a| gemms(n0, nbc, a, false));
            super::im2col::from_channel_major(&a, nbc, rows, l, bias, super::as_uninit_mut(out));
        }
    };
    // Every element is written by its chunk (see `chunk`).
    filled_plain(g.n * rows * l, |out| {
        crate::ops::parallel::for_chunks(out, nb * rows * l, by_chunk, chunk);
    })
}

/// Columns one GEMM of the implicit path aims for: samples are grouped until their
/// positions reach it, so small maps (8x8, 16x16) still make wide products.
const MIN_COLS: usize = 512;

/// Samples per chunk of `conv_fwd_implicit`.
fn chunk_samples(g: &Geom) -> usize {
    MIN_COLS.div_ceil(g.ovol().max(1)).clamp(1, g.n.max(1))
}

/// The adjoint of a stride-1 convolution (its input gradient, or a stride-1 transposed
/// convolution) as a convolution of `a`: the kernel flipped in space with its two
/// channel axes swapped (per group), padded by `dil * (k - 1) - pad` on each axis; this
/// is the geometry of that convolution, or None where it does not apply (strides, or
/// a padding wider than the dilated kernel) or neither Winograd nor the implicit GEMM
/// would run.
pub(crate) fn adjoint(g: &Geom, w_rows: usize) -> Option<Geom> {
    let adj = flipped_geom(g, w_rows)?;
    (applies(&adj, g.c) || super::winograd::applies(&adj, g.c) || super::winograd1d::applies(&adj, g.c)).then_some(adj)
}

/// The geometry of the stride-1 adjoint as a convolution (`adjoint`'s, whichever kernel
/// would run it): None where strided or where a padding is wider than the dilated kernel.
pub(crate) fn flipped_geom(g: &Geom, w_rows: usize) -> Option<Geom> {
    if g.stride != [1, 1, 1] {
        return None;
    }
    let mut pad = [0; 3];
    for (ax, p) in pad.iter_mut().enumerate() {
        *p = (g.dil[ax] * (g.k[ax] - 1)).checked_sub(g.pad[ax])?;
    }
    Some(Geom { n: g.n, c: w_rows, groups: g.groups, ins: g.outs, outs: g.ins, k: g.k, stride: [1; 3], pad, dil: g.dil })
}

/// The kernel of that convolution: W (G*mg, cg, taps) -> W' (G*cg, mg, taps reversed).
pub(crate) fn flip_kernel(w: &[f32], g: &Geom, w_rows: usize) -> Vec<f32> {
    let (mg, cg, kv) = (w_rows / g.groups, g.c / g.groups, g.kvol());
    let mut flipped = vec![0.0f32; w.len()];
    for gi in 0..g.groups {
        for o in 0..mg {
            for c in 0..cg {
                let src = &w[((gi * mg + o) * cg + c) * kv..][..kv];
                let dst = &mut flipped[((gi * cg + c) * mg + o) * kv..][..kv];
                for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                    *d = *s;
                }
            }
        }
    }
    flipped
}

/// img (N, C, *ins) = the adjoint of the convolution `g` applied to `a` (N, w_rows,
/// *outs), as the forward convolution `adj` (from `adjoint`) with the flipped kernel:
/// as Winograd F(4x4, 3x3) (`winograd`), as 1-D Winograd F(9 - r, r) (`winograd1d`) or
/// in place (`direct`) where those kernels run it, else as an implicit GEMM.
pub(crate) fn conv_adj_implicit(a: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, adj: &Geom, w_rows: usize, par: bool) -> Vec<f32> {
    let flipped = flip_kernel(w, g, w_rows);
    if super::winograd::applies(adj, g.c) {
        if let Some(out) = super::winograd::conv_fwd_winograd(a, &flipped, bias, adj, g.c, par) {
            return out;
        }
    }
    if super::winograd1d::applies(adj, g.c) {
        if let Some(out) = super::winograd1d::conv_fwd_winograd1d(a, &flipped, bias, adj, g.c, par) {
            return out;
        }
    }
    if super::direct::applies(adj, g.c) {
        return super::direct::conv_fwd_direct(a, &flipped, bias, adj, g.c, par);
    }
    if applies(adj, g.c) {
        return conv_fwd_implicit(a, &flipped, bias, adj, g.c, par);
    }
    // Winograd's geometry with a non-finite output: col2im, a direct sum.
    super::passes::conv_adj(a, w, bias, g, w_rows)
}

#[cfg(test)]
mod tests {
    use super::super::passes::conv_fwd;
    use super::*;

    /// The implicit GEMM equals the materialised-columns path (itself checked against
    /// PyTorch's fixtures) on 1-, 2- and 3-d geometries with strides, dilations,
    /// padding, groups, bias, several depth blocks and edge tiles, with and without
    /// threads; also on narrow rows, which `applies` leaves to the other path.
    #[test]
    fn matches_the_im2col_path() {
        if !takes(16, 64) {
            return;
        }
        let mut rnd = crate::ops::test_stream(7);
        // (n, c, groups, w_rows, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 8] = [
            (2, 3, 1, 8, [1, 9, 40], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (2, 4, 1, 12, [1, 11, 70], [1, 3, 5], [1, 2, 2], [0, 2, 3], [1, 2, 1]),
            (1, 6, 2, 14, [1, 5, 33], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (2, 5, 1, 9, [1, 1, 100], [1, 1, 5], [1, 1, 1], [0, 0, 2], [1, 1, 1]),
            (1, 40, 1, 30, [1, 4, 33], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            (1, 2, 1, 6, [3, 4, 34], [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
            (3, 3, 1, 16, [1, 6, 7], [1, 3, 3], [1, 2, 1], [0, 1, 0], [1, 1, 2]),
            (2, 3, 1, 7, [1, 1, 110], [1, 1, 4], [1, 1, 3], [0, 0, 1], [1, 1, 1]),
        ];
        for (n, c, groups, w_rows, ins, k, stride, pad, dil) in cases {
            let g = Geom::for_test(n, c, groups, ins, k, stride, pad, dil);
            let img: Vec<f32> = rnd(n * c * g.ivol());
            let w: Vec<f32> = rnd(w_rows * c / groups * g.kvol());
            let bias: Vec<f32> = rnd(w_rows);
            for with_bias in [false, true] {
                let b = with_bias.then_some(&bias[..]);
                let want = conv_fwd(&img, &w, b, &g, w_rows, None);
                for par in [false, true] {
                    let got = super::super::on_two_threads(|| conv_fwd_implicit(&img, &w, b, &g, w_rows, par));
                    super::super::assert_close(&got, &want, &format!("{g:?} bias={with_bias} par={par}"));
                }
            }
        }
    }

    /// The adjoint through the flipped-kernel convolution equals `conv_adj` (col2im),
    /// with groups, dilation, 1-3 d, bias and padding from 0 to the full kernel width.
    #[test]
    fn adjoint_matches_col2im() {
        use super::super::passes::conv_adj;
        if !takes(16, 64) {
            return;
        }
        let mut rnd = crate::ops::test_stream(11);
        // (n, c, groups, w_rows, ins, k, pad, dil)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 5] = [
            (2, 8, 1, 6, [1, 5, 36], [1, 3, 3], [0, 1, 1], [1, 1, 1]),
            (1, 12, 2, 10, [1, 4, 40], [1, 3, 3], [0, 0, 2], [1, 1, 2]),
            (2, 7, 1, 5, [1, 1, 64], [1, 1, 5], [0, 0, 4], [1, 1, 1]),
            (1, 6, 1, 4, [3, 3, 33], [3, 3, 3], [1, 2, 1], [1, 1, 1]),
            (2, 9, 1, 8, [1, 6, 38], [1, 3, 3], [0, 1, 1], [1, 2, 1]),
        ];
        for (n, c, groups, w_rows, ins, k, pad, dil) in cases {
            let g = Geom::for_test(n, c, groups, ins, k, [1; 3], pad, dil);
            let adj = adjoint(&g, w_rows).expect("stride 1, rows of 16+");
            let a: Vec<f32> = rnd(n * w_rows * g.ovol());
            let w: Vec<f32> = rnd(w_rows * c / groups * g.kvol());
            let bias: Vec<f32> = rnd(c);
            for b in [None, Some(&bias[..])] {
                let want = conv_adj(&a, &w, b, &g, w_rows);
                for par in [false, true] {
                    let got = super::super::on_two_threads(|| conv_adj_implicit(&a, &w, b, &g, &adj, w_rows, par));
                    super::super::assert_close(&got, &want, &format!("{g:?} par={par}"));
                }
            }
        }
    }
}
