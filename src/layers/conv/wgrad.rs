//! The f32 weight gradient of a stride-1 convolution with wide output rows, read
//! straight from the image: `dW[o, (c, tap)] = sum over samples and positions of
//! a[o, pos] * img[c, pos + tap]`. Both factors are contiguous along the positions of
//! an output row, so a dot-product kernel (4 output channels x 6 columns with AVX-512,
//! 3 x 4 with AVX2, one vector each, written once over `ops::lanes`) loads them in
//! place: no column matrix, no packing. The padding columns are masked loads (masked
//! lanes are never read).
//!
//! It serves images of fewer than 16 channels per group (a network's first layer); with
//! more, `wgrad_cl`'s channels-last GEMM is faster (no reduction across lanes).
//!
//! Why: the im2col path writes nine copies of the image (38 MB for a 32 -> 32 channel
//! layer at 32x32, batch 32) and then multiplies them with a transposed operand, the
//! `gemm` crate's slow layout.
use super::Geom;
use crate::ops::cpu::{simd_level, Simd};
use crate::ops::lanes::{Features, Kernel, Lanes};

/// Output rows from which this kernel runs (narrower rows waste most of each vector).
const MIN_ROW: usize = 32;

/// Whether `conv_wgrad_direct` runs for this geometry (and CPU).
pub(crate) fn applies(g: &Geom) -> bool {
    crate::ops::cpu::has_avx2_fma() && g.stride == [1, 1, 1] && g.outs[2] >= MIN_ROW
}

/// dW (G*mg, cg*taps) for the upstream gradient `a` (N, G*mg, *outs) and the image
/// (N, C, *ins), with the per-channel sums of `a` (the bias gradient) when `bias`.
/// Samples are split over the threads when `par`, each thread summing into its own
/// buffer. Call only where `applies(g)`. Tiles of output channels x columns: 4 x 6
/// with AVX-512 (24 accumulators of its 32 registers), 3 x 4 with AVX2 (12 of 16).
pub(crate) fn conv_wgrad_direct(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, par: bool, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    assert!(applies(g), "conv_wgrad_direct: stride-1 geometry with rows of {MIN_ROW}+ on AVX2 only");
    match simd_level() {
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => wgrad_with::<crate::ops::lanes::X16, 4, 6>(a, img, g, w_rows, par, bias),
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => wgrad_with::<crate::ops::lanes::X8, 3, 4>(a, img, g, w_rows, par, bias),
        _ => unreachable!("conv_wgrad_direct without AVX2 (`applies` says no)"),
    }
}

/// `conv_wgrad_direct` at the level `V` (which the CPU has) with `TO x TK` tiles.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn wgrad_with<V: Features, const TO: usize, const TK: usize>(
    a: &[f32],
    img: &[f32],
    g: &Geom,
    w_rows: usize,
    par: bool,
    bias: bool,
) -> (Vec<f32>, Option<Vec<f32>>) {
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
                    // SAFETY: the caller's level (`applies` checked AVX2; the dispatch picked
                    // the CPU's level); `Tile` checks its extents (assert).
                    unsafe { V::run(Tile { a: a_n, img: img_n, zeros: &zeros, g, rows, cols, sums: &mut sums }) };
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

/// One tile: `sums[i][j] = sum over the sample's positions of a[rows[i], pos] *
/// img[cols[j] channel, pos + cols[j] offset]`, one vector of positions of an output
/// row at a time. `zeros` is a row of zeros (the padding rows' input), at least an
/// input row long.
struct Tile<'a, const TO: usize, const TK: usize> {
    a: &'a [f32],
    img: &'a [f32],
    zeros: &'a [f32],
    g: &'a Geom,
    rows: [usize; TO],
    cols: [(usize, [isize; 3]); TK],
    sums: &'a mut [[f32; TK]; TO],
}

impl<const TO: usize, const TK: usize> Kernel for Tile<'_, TO, TK> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        // SAFETY: the caller's level; `tile` checks the extents.
        unsafe { tile::<V, TO, TK>(self) }
    }
}

/// `Tile` at the level `V`.
///
/// # Safety
/// Inside a function compiled with `V`'s features, on a CPU that has them.
#[inline(always)]
unsafe fn tile<V: Lanes, const TO: usize, const TK: usize>(t: Tile<'_, TO, TK>) {
    let Tile { a, img, zeros, g, rows, cols, sums } = t;
    let lanes = V::LANES;
    let [d, h, w] = g.ins;
    let [od, oh, ow] = g.outs;
    let (l, iv) = (od * oh * ow, d * h * w);
    assert!(rows.iter().all(|&r| (r + 1) * l <= a.len()) && cols.iter().all(|&(c, _)| (c + 1) * iv <= img.len()) && zeros.len() >= w);
    // SAFETY (every vector op): the caller's level.
    let mut acc = [[unsafe { V::zero() }; TK]; TO];
    // Lane masks change only at a row's first and last vector (and in padding rows),
    // so they are built once per tile for those, not per load: computing them per load
    // cost more than the multiply-adds. `mid_full`: every middle vector lies inside
    // the input row for every column (false only for paddings or dilations reaching
    // past a vector, where the masks are computed per vector); its loads are plain.
    let last_x0 = (ow - 1) / lanes * lanes;
    let (min_off, max_off) = cols.iter().fold((isize::MAX, isize::MIN), |(lo, hi), c| (lo.min(c.1[2]), hi.max(c.1[2])));
    let mid_full = lanes as isize + min_off >= 0 && last_x0 as isize + max_off <= w as isize;
    let (am_first, am_last) =
        unsafe { (V::mask(lane_mask(lanes, 0, ow.min(lanes) as isize)), V::mask(lane_mask(lanes, 0, (ow - last_x0) as isize))) };
    let (first, last) =
        unsafe { (to_masks::<V, TK>(column_masks(lanes, &cols, w, 0, ow)), to_masks::<V, TK>(column_masks(lanes, &cols, w, last_x0, ow))) };
    // Per column: its plane, so each row's address is one multiply-add (this setup runs
    // once per output row, and dominated the kernel when written with slices).
    let mut plane = [img.as_ptr(); TK];
    for j in 0..TK {
        plane[j] = img.as_ptr().wrapping_add(cols[j].0 * iv);
    }
    for oz in 0..od {
        for oy in 0..oh {
            let arow = (oz * oh + oy) * ow;
            // Each column's input row (`zeros` for a padding row) as the address of its
            // x = 0 position, which may lie before the row (only lanes inside it are
            // read). No branch in the loops below: with one, the accumulators were
            // spilled to the stack.
            let mut src = [zeros.as_ptr(); TK];
            for j in 0..TK {
                let off = cols[j].1;
                let (iz, iy) = (oz as isize + off[0], oy as isize + off[1]);
                let inside = (iz as usize) < d && (iy as usize) < h;
                let row = if inside { plane[j].wrapping_add((iz as usize * h + iy as usize) * w) } else { zeros.as_ptr() };
                src[j] = row.wrapping_offset(off[2]);
            }
            let ap: [*const f32; TO] = std::array::from_fn(|i| a.as_ptr().wrapping_add(rows[i] * l + arow));
            // SAFETY (the steps): the masks keep each load to the row's positions from x0
            // (up to ow) in row `rows[i]` of `a` (checked above), and to the input columns
            // inside the row (0 <= x0 + lane + off < w), which lies inside `img` or is
            // `zeros`; the plain middle vectors lie inside both (`mid_full`).
            unsafe {
                step::<V, TO, TK>(&mut acc, (&ap, &src), 0, Some((am_first, &first)));
                let mut x0 = lanes;
                while x0 < last_x0 {
                    if mid_full {
                        step::<V, TO, TK>(&mut acc, (&ap, &src), x0, None);
                    } else {
                        let full = V::mask(lane_mask(lanes, 0, lanes as isize));
                        step::<V, TO, TK>(
                            &mut acc,
                            (&ap, &src),
                            x0,
                            Some((full, &to_masks::<V, TK>(column_masks(lanes, &cols, w, x0, ow)))),
                        );
                    }
                    x0 += lanes;
                }
                if last_x0 > 0 {
                    step::<V, TO, TK>(&mut acc, (&ap, &src), last_x0, Some((am_last, &last)));
                }
            }
        }
    }
    for (sum_row, acc_row) in sums.iter_mut().zip(acc) {
        for (sum, v) in sum_row.iter_mut().zip(acc_row) {
            // SAFETY: the caller's level.
            *sum = unsafe { v.sum() };
        }
    }
}

/// One vector of positions from `x0`: the `TO` rows of `a` (`ap`) times the `TK`
/// columns' inputs (`src`) into the accumulators, loads masked by `masks` (a's, then
/// each column's) or plain.
///
/// # Safety
/// Inside a function compiled with `V`'s features; the loads (the masked lanes, or all)
/// are readable.
#[inline(always)]
unsafe fn step<V: Lanes, const TO: usize, const TK: usize>(
    acc: &mut [[V; TK]; TO],
    (ap, src): (&[*const f32; TO], &[*const f32; TK]),
    x0: usize,
    masks: Option<(V::Mask, &[V::Mask; TK])>,
) {
    // SAFETY: the caller's.
    unsafe {
        let mut av = [V::zero(); TO];
        for (v, p) in av.iter_mut().zip(ap) {
            *v = match masks {
                Some((am, _)) => V::load_mask(p.add(x0), am),
                None => V::load(p.add(x0)),
            };
        }
        for j in 0..TK {
            let p = src[j].wrapping_add(x0);
            let bv = match masks {
                Some((_, bm)) => V::load_mask(p, bm[j]),
                None => V::load(p),
            };
            for i in 0..TO {
                acc[i][j] = av[i].fmadd(bv, acc[i][j]);
            }
        }
    }
}

/// Lane bits as the level's masks. (A function, not a closure: closures are compiled
/// without the caller's features and may stay out of line.)
///
/// # Safety
/// Inside a function compiled with `V`'s features.
#[inline(always)]
unsafe fn to_masks<V: Lanes, const TK: usize>(bits: [u32; TK]) -> [V::Mask; TK] {
    // SAFETY: the caller's level.
    let mut m = [unsafe { V::mask(0) }; TK];
    for (d, b) in m.iter_mut().zip(bits) {
        // SAFETY: as above.
        *d = unsafe { V::mask(b) };
    }
    m
}

/// Each column's lane bits for the `lanes` positions from `x0` of an output row `ow`
/// wide: the lanes whose input column `x0 + lane + off` lies in `0..w`.
#[inline(always)]
fn column_masks<const TK: usize>(lanes: usize, cols: &[(usize, [isize; 3]); TK], w: usize, x0: usize, ow: usize) -> [u32; TK] {
    let live = (ow.saturating_sub(x0)).min(lanes) as isize;
    let mut m = [0u32; TK];
    for j in 0..TK {
        let off = cols[j].1[2] + x0 as isize;
        m[j] = lane_mask(lanes, -off, (w as isize - off).min(live));
    }
    m
}

/// The lanes `lo..hi` (clamped to 0..lanes) as bits.
#[inline(always)]
fn lane_mask(lanes: usize, lo: isize, hi: isize) -> u32 {
    let (lo, hi) = (lo.clamp(0, lanes as isize) as u32, hi.clamp(0, lanes as isize) as u32);
    if hi <= lo {
        0
    } else {
        ((1u32 << hi) - 1) & !((1u32 << lo) - 1)
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
        if !crate::ops::cpu::has_avx2_fma() {
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
