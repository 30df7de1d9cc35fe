//! The f32 weight gradient of a stride-1 convolution with wide output rows, read
//! straight from the image: `dW[o, (c, tap)] = sum over samples and positions of
//! a[o, pos] * img[c, pos + tap]`. Both factors are contiguous along the positions of
//! an output row, so a dot-product kernel (4 output channels x 6 columns of 16 lanes
//! each, AVX-512) loads them in place: no column matrix, no packing. The padding
//! columns are masked loads (masked lanes are never read).
//!
//! It serves images of fewer than 16 channels per group (a network's first layer); with
//! more, `wgrad_cl`'s channels-last GEMM is faster (no reduction across lanes).
//!
//! Why: the im2col path writes nine copies of the image (38 MB for a 32 -> 32 channel
//! layer at 32x32, batch 32) and then multiplies them with a transposed operand, the
//! `gemm` crate's slow layout.
use super::Geom;
use crate::ops::cpu::has_avx512;

/// Output channels x columns of one tile.
const TO: usize = 4;
const TK: usize = 6;
/// Output rows from which this kernel runs (narrower rows waste most of each 16 lanes).
const MIN_ROW: usize = 32;

/// Whether `conv_wgrad_direct` runs for this geometry (and CPU).
pub(crate) fn applies(g: &Geom) -> bool {
    has_avx512() && g.stride == [1, 1, 1] && g.outs[2] >= MIN_ROW
}

/// dW (G*mg, cg*taps) for the upstream gradient `a` (N, G*mg, *outs) and the image
/// (N, C, *ins), with the per-channel sums of `a` (the bias gradient) when `bias`.
/// Samples are split over the threads when `par`, each thread summing into its own
/// buffer. Call only where `applies(g)`.
pub(crate) fn conv_wgrad_direct(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, par: bool, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    assert!(applies(g), "conv_wgrad_direct: stride-1 geometry with rows of {MIN_ROW}+ on AVX-512 only");
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let (mg, cg) = (w_rows / g.groups, g.c / g.groups);
    let kc = cg * kv;
    let offs = g.tap_offsets();
    let zeros = vec![0.0f32; g.ins[2]];
    let one = |n: usize, dw: &mut [f32], db: &mut [f32]| {
        for gi in 0..g.groups {
            let a_n = &a[(n * w_rows + gi * mg) * l..(n * w_rows + (gi + 1) * mg) * l];
            let img_n = &img[(n * g.c + gi * cg) * iv..(n * g.c + (gi + 1) * cg) * iv];
            let dw_g = &mut dw[gi * mg * kc..(gi + 1) * mg * kc];
            for o0 in (0..mg).step_by(TO) {
                for k0 in (0..kc).step_by(TK) {
                    // Rows and columns past the end repeat the last one; their sums are dropped.
                    let rows: [usize; TO] = std::array::from_fn(|i| (o0 + i).min(mg - 1));
                    let cols: [(usize, [isize; 3]); TK] = std::array::from_fn(|j| {
                        let kk = (k0 + j).min(kc - 1);
                        (kk / kv, offs[kk % kv])
                    });
                    let mut sums = [[0.0f32; TK]; TO];
                    // SAFETY: `applies(g)` (asserted above) says the CPU has AVX-512F, AVX2 and FMA;
                    // the rows index `a_n` (mg rows of l) and the columns `img_n`'s cg planes.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        tile_avx512(a_n, img_n, &zeros, g, rows, cols, &mut sums)
                    };
                    #[cfg(not(target_arch = "x86_64"))]
                    unreachable!("conv_wgrad_direct off x86-64 ({:?} {:?})", rows, cols);
                    for i in 0..TO.min(mg - o0) {
                        for j in 0..TK.min(kc - k0) {
                            dw_g[(o0 + i) * kc + k0 + j] += sums[i][j];
                        }
                    }
                }
            }
            if bias {
                for (o, row) in a_n.chunks_exact(l).enumerate() {
                    db[gi * mg + o] += crate::ops::reduce::sum_slice(row);
                }
            }
        }
    };
    let (dw, db) = super::sum_over_samples(g.n, par, (w_rows * kc, w_rows), |(n0, n1), dw, db| {
        for n in n0..n1 {
            one(n, dw, db);
        }
    });
    (dw, bias.then_some(db))
}

/// `sums[i][j] = sum over the sample's positions of a[rows[i], pos] * img[cols[j]
/// channel, pos + cols[j] offset]`, 16 positions of an output row at a time.
///
/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA; `rows` index rows of `a` (each `g.ovol()` long)
/// and `cols` channels of `img` (planes of `g.ivol()`); `zeros` is a row of zeros (the
/// padding rows' input), at least an input row long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile_avx512(
    a: &[f32],
    img: &[f32],
    zeros: &[f32],
    g: &Geom,
    rows: [usize; TO],
    cols: [(usize, [isize; 3]); TK],
    sums: &mut [[f32; TK]; TO],
) {
    use std::arch::x86_64::*;
    let [d, h, w] = g.ins;
    let [od, oh, ow] = g.outs;
    let (l, iv) = (od * oh * ow, d * h * w);
    assert!(rows.iter().all(|&r| (r + 1) * l <= a.len()) && cols.iter().all(|&(c, _)| (c + 1) * iv <= img.len()) && zeros.len() >= w);
    let mut acc = [[_mm512_setzero_ps(); TK]; TO];
    // No `array::from_fn` here: its closures were not inlined into this `target_feature`
    // function and cost 3x the multiply-adds.
    // Lane masks change only at a row's first and last 16 positions (and in padding
    // rows), so they are computed per row for those chunks, not per load: computing
    // them per load cost more than the multiply-adds. `mid_full`: every middle chunk
    // lies inside the input row for every column (false only for paddings or
    // dilations reaching past 16 columns, where the masks are computed per chunk).
    let last_x0 = (ow - 1) / 16 * 16;
    let (min_off, max_off) = cols.iter().fold((isize::MAX, isize::MIN), |(lo, hi), c| (lo.min(c.1[2]), hi.max(c.1[2])));
    let mid_full = 16 + min_off >= 0 && last_x0 as isize + max_off <= w as isize;
    let (am_first, am_last) = (lane_mask(0, ow.min(16) as isize), lane_mask(0, (ow - last_x0) as isize));
    let (first, last, mid) = (column_masks(&cols, w, 0, ow), column_masks(&cols, w, last_x0, ow), column_masks(&cols, w, 16, ow));
    // Per column: its plane and its offsets as a flat (z, y) row index, so each row's
    // address is one multiply-add (this setup runs once per output row, every 2 vector
    // steps of a 32-wide row, and dominated the kernel when written with slices).
    let mut plane = [img.as_ptr(); TK];
    for j in 0..TK {
        plane[j] = img.as_ptr().wrapping_add(cols[j].0 * iv);
    }
    for oz in 0..od {
        for oy in 0..oh {
            let arow = (oz * oh + oy) * ow;
            // Each column's input row (`zeros` for a padding row) as the address of its
            // x = 0 position, which may lie before the row (only lanes inside it are
            // read). No branch in the loop below: with one, the accumulators were
            // spilled to the stack.
            let mut src = [zeros.as_ptr(); TK];
            for j in 0..TK {
                let off = cols[j].1;
                let (iz, iy) = (oz as isize + off[0], oy as isize + off[1]);
                let inside = (iz as usize) < d && (iy as usize) < h;
                let row = if inside { plane[j].wrapping_add((iz as usize * h + iy as usize) * w) } else { zeros.as_ptr() };
                src[j] = row.wrapping_offset(off[2]);
            }
            for x0 in (0..ow).step_by(16) {
                let am = if x0 == last_x0 {
                    am_last
                } else if x0 == 0 {
                    am_first
                } else {
                    0xFFFF
                };
                let bm = if x0 == 0 {
                    first
                } else if x0 == last_x0 {
                    last
                } else if mid_full {
                    mid
                } else {
                    column_masks(&cols, w, x0, ow)
                };
                // SAFETY (the four loads): the mask keeps each load to the row's positions
                // from x0 (at most 16, up to ow), inside row `rows[i]` of `a` (checked above).
                let av = unsafe {
                    [
                        _mm512_maskz_loadu_ps(am, a.as_ptr().add(rows[0] * l + arow + x0)),
                        _mm512_maskz_loadu_ps(am, a.as_ptr().add(rows[1] * l + arow + x0)),
                        _mm512_maskz_loadu_ps(am, a.as_ptr().add(rows[2] * l + arow + x0)),
                        _mm512_maskz_loadu_ps(am, a.as_ptr().add(rows[3] * l + arow + x0)),
                    ]
                };
                // Every index below is a constant (the macro spells the six columns out), so
                // LLVM can keep the accumulators in registers; with the 4 + 6 loaded vectors
                // and the masks it still spills some to the stack (perf, with 6 columns and
                // with 5), which is one reason `wgrad_cl` serves 16+ channels.
                macro_rules! column {
                    ($j:literal) => {{
                        // SAFETY: the mask's lanes are exactly the input columns inside the row
                        // (0 <= x0 + lane + off < w), which lies inside `img` or is `zeros`
                        // (checked above); no other lane is read.
                        let bv = unsafe { _mm512_maskz_loadu_ps(bm[$j], src[$j].wrapping_add(x0)) };
                        acc[0][$j] = _mm512_fmadd_ps(av[0], bv, acc[0][$j]);
                        acc[1][$j] = _mm512_fmadd_ps(av[1], bv, acc[1][$j]);
                        acc[2][$j] = _mm512_fmadd_ps(av[2], bv, acc[2][$j]);
                        acc[3][$j] = _mm512_fmadd_ps(av[3], bv, acc[3][$j]);
                    }};
                }
                column!(0);
                column!(1);
                column!(2);
                column!(3);
                column!(4);
                column!(5);
            }
        }
    }
    for (sum_row, acc_row) in sums.iter_mut().zip(acc) {
        for (sum, v) in sum_row.iter_mut().zip(acc_row) {
            *sum = _mm512_reduce_add_ps(v);
        }
    }
}

/// Each column's mask for the 16 positions from `x0` of an output row `ow` wide: the
/// lanes whose input column `x0 + lane + off` lies in `0..w`.
#[inline(always)]
fn column_masks(cols: &[(usize, [isize; 3]); TK], w: usize, x0: usize, ow: usize) -> [u16; TK] {
    let live = (ow.saturating_sub(x0)).min(16) as isize;
    let mut m = [0u16; TK];
    for j in 0..TK {
        let off = cols[j].1[2] + x0 as isize;
        m[j] = lane_mask(-off, (w as isize - off).min(live));
    }
    m
}

/// The lanes `lo..hi` (clamped to 0..16) as a mask.
#[inline(always)]
fn lane_mask(lo: isize, hi: isize) -> u16 {
    let (lo, hi) = (lo.clamp(0, 16) as u32, hi.clamp(0, 16) as u32);
    if hi <= lo {
        0
    } else {
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal to the im2col weight gradient (checked against PyTorch's fixtures) with the
    /// bias sums, on 1-3 d geometries with padding up to the kernel width, dilation,
    /// groups, edge tiles (channels not multiples of 4, columns not of 6) and threads.
    #[test]
    fn matches_the_im2col_path() {
        if !has_avx512() {
            return;
        }
        // (n, c, groups, w_rows, ins, k, pad, dil)
        type Case = (usize, usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 5] = [
            (3, 3, 1, 8, [1, 6, 40], [1, 3, 3], [0, 1, 1], [1, 1, 1]),
            (2, 5, 1, 7, [1, 4, 37], [1, 3, 5], [0, 2, 4], [1, 1, 1]),
            (1, 6, 2, 10, [1, 5, 50], [1, 3, 3], [0, 2, 2], [1, 2, 2]),
            (2, 2, 1, 5, [1, 1, 70], [1, 1, 7], [0, 0, 3], [1, 1, 1]),
            (1, 2, 1, 6, [3, 3, 33], [3, 3, 3], [1, 1, 1], [1, 1, 1]),
        ];
        for (i, (n, c, groups, w_rows, ins, k, pad, dil)) in cases.into_iter().enumerate() {
            let g = Geom::for_test(n, c, groups, ins, k, [1; 3], pad, dil);
            assert!(applies(&g));
            super::super::check_wgrad(&g, w_rows, 5 + 2 * i as u64, |a, img, par| conv_wgrad_direct(a, img, &g, w_rows, par, true));
        }
    }
}
