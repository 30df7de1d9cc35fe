//! The f32 forward of a 1-3 D convolution at x-stride 1 or 2, read straight from the
//! image: each strip of 32 consecutive outputs of an output slice (two vectors of 16) is
//! a 12 x 32 register tile over 12 output channels (8 x 48 at x-stride 1 where 8s fit
//! the channels and 12s do not), and every (input channel, tap) step loads the strip's
//! input in place — masked loads give the padding (masked lanes are never read) — and
//! multiplies it by 12 broadcast weights. No column matrix and no packing
//! of the image. Where output rows are a multiple of 16 wide each vector is one run of
//! one input row; other widths fill a vector from the two rows it spans (three for
//! rows of 9 to 15), one merging masked load each.
//!
//! Why: the implicit GEMM (`implicit`) packs a strip of columns per (channel, tap) for
//! the GEMM to read; with few output channels each packed column feeds only a few
//! rows, and the packing cost as much as the multiplying (perf on a 32 -> 32 channel
//! layer at 32x32, batch 32: 42% of the time in the packer, 50% in the GEMM tile).
use super::Geom;
use crate::ops::parallel::SyncPtr;

/// Output channels per tile (the broadcast side), and vectors of 16 positions per strip:
/// 12 x 2 in general, 8 x 3 at x-stride 1 where the output channels are a multiple of 8
/// that 12-channel tiles fit badly (16 channels as 12 + 4 left a third of the second
/// tile idle). 24 accumulators either way.
const TILES: [(usize, usize); 2] = [(12, 2), (8, 3)];
/// Lanes per vector.
const L: usize = 16;
/// The most taps one kernel window may have (the per-strip tables are arrays).
const MAX_TAPS: usize = 64;
/// Output rows at least this wide: a vector of 16 then spans at most three rows.
const MIN_ROW: usize = 8;

/// Whether this kernel runs the forward: AVX-512, one group, a 1-, 2- or 3-D window at
/// dilation 1 and an x-stride of 1 or 2 (any y- and z-stride), output rows at least 8
/// wide, and at least 8 output channels (fewer waste most of the 12-row tile).
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    crate::ops::cpu::has_avx512()
        && g.groups == 1
        && matches!(g.stride[2], 1 | 2)
        && g.dil == [1, 1, 1]
        && g.outs[2] >= MIN_ROW
        && g.kvol() <= MAX_TAPS
        && w_rows >= 8
}

/// `out (N, Co, [OD,] OH, OW) = conv(img (N, C, [D,] H, W), w (Co, C, [kd,] kh, kw)) (+ bias)`
/// where `applies` holds.
pub(crate) fn conv_fwd_direct(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Vec<f32> {
    let (c, kv) = (g.c, g.kvol());
    let (h, wd) = (g.ins[1], g.ins[2]);
    let (oh, ow) = (g.outs[1], g.outs[2]);
    let (plane, oplane) = (h * wd, oh * ow);
    let (ivol, ovol) = (g.ivol(), g.ovol());
    assert!(img.len() >= g.n * c * ivol && w.len() >= co * c * kv, "conv (direct): operand sizes");
    // Weights as strips of `mr` channels, step-major (the GEMM's left packing): strip b
    // holds w[mr b + i, p] at p * mr + i (channels past `co` as zeros), so each step's
    // broadcasts are consecutive.
    let depth = c * kv;
    // 8 x 48 where 12-channel tiles would idle more than an eighth of their rows, at
    // x-stride 1 only: at stride 2 each vector costs two loads and a permute, and three
    // vectors per 8 broadcasts measured 1.8x slower (64 -> 128 channels at 16x16).
    let waste12 = co.div_ceil(12) * 12 * 8 >= co * 9;
    let (mr, nv) = if g.stride[2] == 1 && co.is_multiple_of(8) && waste12 { TILES[1] } else { TILES[0] };
    let mut wp = vec![0f32; co.div_ceil(mr) * mr * depth];
    // SAFETY: `w` holds the (co, depth) row-major weight (asserted above), and `wp` the
    // co.div_ceil(12) strips of 12 x depth floats that `pack_left` writes.
    unsafe { crate::ops::sgemm::pack_left(mr, crate::ops::sgemm::Mat::new(w.as_ptr(), depth as isize, 1), (0, co), (0, depth), &mut wp) };
    let strips = oplane.div_ceil(L * nv);
    // Dilation is 1 here (`applies`): a tap's offset is its index minus the padding.
    let mut taps = [[0isize; 3]; MAX_TAPS];
    taps[..kv].copy_from_slice(&g.tap_offsets());
    let geo = Strip { c, kv, d: g.ins[0], h, wd, ow, plane, oplane, ivol, ovol, co, kx: g.k[2], taps, sz: g.stride[0], sy: g.stride[1] };
    let od = g.outs[0];
    let s2 = g.stride[2] == 2;
    // Rows a multiple of 16 wide: one run per vector; rows of 8 (every vector starts a
    // row and covers two) or of 16+ (a vector ends at most one row boundary): two; rows
    // of 9 to 15: three.
    let runs = if ow.is_multiple_of(L) {
        1
    } else if L.is_multiple_of(ow) || ow >= L {
        2
    } else {
        3
    };
    // A task is one strip of one output slice for a run of `nb` samples, which share
    // its tables of offsets and masks (with 8 input channels and 27 taps, building them
    // per sample took a quarter of a 3-D convolution's time): all samples where the
    // strips alone make enough tasks to balance the threads.
    let per = od * strips;
    let nb = if par { g.n.div_ceil((16 * rayon::current_num_threads()).div_ceil(per).clamp(1, g.n.max(1))) } else { g.n }.max(1);
    // Every position of every output plane is written: the strips cover each plane
    // (the last one's store masks stop at the plane's end).
    crate::ops::parallel::filled_plain(g.n * co * ovol, |out: &mut [f32]| {
        let dst = SyncPtr(out.as_mut_ptr());
        let task = |t: usize| {
            let (n, oz, s) = (t / per * nb, (t / strips) % od, t % strips);
            let at = (oz, s, nb.min(g.n - n));
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX-512 was checked by `applies` (the caller's condition); samples
            // n..n + at.2 lie inside `img` (asserted above); the strip's outputs
            // (positions s * 16 nv.. of output slice oz of each of the co volumes of those
            // samples) are inside `out`, and no other task writes them.
            unsafe {
                let (src, o) = (img.as_ptr().add(n * c * ivol), dst.ptr().add(n * co * ovol + oz * oplane));
                match (runs, s2, mr) {
                    (1, false, 12) => strip_avx512::<1, 1, 12, 2>(&geo, src, &wp, bias, o, at),
                    (2, false, 12) => strip_avx512::<2, 1, 12, 2>(&geo, src, &wp, bias, o, at),
                    (_, false, 12) => strip_avx512::<3, 1, 12, 2>(&geo, src, &wp, bias, o, at),
                    (1, true, 12) => strip_avx512::<1, 2, 12, 2>(&geo, src, &wp, bias, o, at),
                    (2, true, 12) => strip_avx512::<2, 2, 12, 2>(&geo, src, &wp, bias, o, at),
                    (_, true, 12) => strip_avx512::<3, 2, 12, 2>(&geo, src, &wp, bias, o, at),
                    (1, false, _) => strip_avx512::<1, 1, 8, 3>(&geo, src, &wp, bias, o, at),
                    (2, false, _) => strip_avx512::<2, 1, 8, 3>(&geo, src, &wp, bias, o, at),
                    (_, false, _) => strip_avx512::<3, 1, 8, 3>(&geo, src, &wp, bias, o, at),
                    (1, true, _) => strip_avx512::<1, 2, 8, 3>(&geo, src, &wp, bias, o, at),
                    (2, true, _) => strip_avx512::<2, 2, 8, 3>(&geo, src, &wp, bias, o, at),
                    (_, true, _) => strip_avx512::<3, 2, 8, 3>(&geo, src, &wp, bias, o, at),
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("conv (direct) without AVX-512 (applies says no): {n} {oz} {s}");
        };
        let tasks = g.n.div_ceil(nb) * per;
        crate::ops::parallel::for_tasks(tasks, par, task);
    })
}

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// Each thread's copy of a uniform strip's input windows (see `strip_avx512`).
    static WINDOWS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The geometry one strip task needs.
struct Strip {
    c: usize,
    kv: usize,
    /// Input depth (1 in 2-D), rows and row width.
    d: usize,
    h: usize,
    wd: usize,
    ow: usize,
    /// One input slice, one output slice, one input volume, one output volume.
    plane: usize,
    oplane: usize,
    ivol: usize,
    ovol: usize,
    co: usize,
    /// Window width, and each tap's (z, y, x) offset minus the padding, in tap order.
    kx: usize,
    taps: [[isize; 3]; MAX_TAPS],
    /// Input slices from one output slice to the next, and rows from one row to the next.
    sz: usize,
    sy: usize,
}

/// Outputs `s * 16 NV ..` (`16 NV` of them, clipped to the slice) of output slice `oz`
/// of every output channel of `samples` consecutive samples, `MR` channels per tile:
/// `img` is the first sample's first input volume, `out` slice `oz` of its first
/// output volume. Each vector's lanes are up to `P` runs along output rows (1 where
/// rows are a multiple of 16 wide, 2 where they are 8 or 16+ wide, else 3), each loaded from its input row by
/// one masked load; at x-stride `S` = 2 a run's inputs are every other float of
/// `2 * len`, loaded as two vectors of 16 whose even lanes a permute then gathers.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA; `img` points to `c` readable volumes of
/// `ivol` floats, `out` to `co` writable slices of `oplane` floats `ovol` apart; `wp`
/// holds the weight strips as `conv_fwd_direct` packs them for `MR`; every 16 lanes span at most `P` rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn strip_avx512<const P: usize, const S: usize, const MR: usize, const NV: usize>(
    g: &Strip,
    img: *const f32,
    wp: &[f32],
    bias: Option<&[f32]>,
    out: *mut f32,
    (oz, s, samples): (usize, usize, usize),
) {
    use std::arch::x86_64::*;
    // Per vector, run and tap: where loaded lane 0 would read inside a plane (so loaded
    // lane q reads `off + q`; output lane j is loaded lane S * j), and the run's loaded
    // lanes (S * 16 of them: bits 0..16 the first load, 16..32 the second) whose input
    // lies inside the image (the others are padding, loaded as 0). Runs past the plane
    // keep an empty mask.
    let mut off = [[[0isize; MAX_TAPS]; P]; NV];
    let mut mask = [[[0u32; MAX_TAPS]; P]; NV];
    let mut live = [0 as __mmask16; NV];
    for v in 0..NV {
        let pos = (s * NV + v) * L;
        let lanes = g.oplane.saturating_sub(pos).min(L);
        live[v] = ((1u32 << lanes) - 1) as __mmask16;
        let (mut j, mut r) = (0, 0);
        while j < lanes {
            assert!(r < P, "conv (direct): a vector spans more than {P} output rows");
            let (oy, ox) = ((pos + j) / g.ow, (pos + j) % g.ow);
            let len = (g.ow - ox).min(lanes - j);
            for t in 0..g.kv {
                let [tz, ty, tx] = g.taps[t];
                let iz = (oz * g.sz) as isize + tz;
                let iy = (oy * g.sy) as isize + ty;
                let x0 = (ox * S) as isize + tx;
                off[v][r][t] = iz * g.plane as isize + iy * g.wd as isize + x0 - (S * j) as isize;
                mask[v][r][t] = if iy < 0 || iy >= g.h as isize || iz < 0 || iz >= g.d as isize {
                    0
                } else {
                    // Loaded lanes S*j + q for q in lo..hi read x0 + q, inside the row.
                    let lo = (-x0).clamp(0, (S * len) as isize) as u64;
                    let hi = (g.wd as isize - x0).clamp(lo as isize, (S * len) as isize) as u64;
                    ((((1u64 << hi) - 1) & !((1u64 << lo) - 1)) << (S * j)) as u32
                };
            }
            j += len;
            r += 1;
        }
    }
    // A strip is uniform where each vector is one run (its first) whose lanes all read
    // inside the image, the NV runs of a tap 16 S floats apart (the interior strips of
    // 1-D rows, and strips inside one interior row of an image): its loop then loads
    // one offset per tap and plain vectors at fixed displacements from it, without the
    // masks (per step that is 3 scalar and 3 mask loads fewer beside the 8 broadcasts
    // and 3 vectors, which had kept the load ports as busy as the FMA units).
    let full = if S == 2 { u32::MAX } else { 0xffff };
    let uniform = (0..NV)
        .all(|v| live[v] == 0xffff && (0..g.kv).all(|t| mask[v][0][t] == full && off[v][0][t] == off[0][0][t] + (v * L * S) as isize));
    // A uniform strip's tiles read from a copy of its windows: per input channel, each
    // window row's span (`seg` = 16 NV S + kx - 1 floats), back to back, and `woff` gives
    // each tap's offset in that copy. The channels of an image lie a plane apart, and
    // planes a multiple of 4 KiB (1-D rows of 4096, 32x32 images) map every channel's
    // inputs to the same few L1 sets: each of the co / MR tiles then re-read the strip's
    // inputs from L2. The copy is C * rows * seg floats per strip and sample against
    // co * C * taps * 16 NV multiply-adds.
    let windows = uniform.then(|| {
        let seg = NV * L * S + g.kx - 1;
        let mut woff = off;
        for (t, o) in woff[0][0][..g.kv].iter_mut().enumerate() {
            *o = ((t / g.kx) * seg + t % g.kx) as isize;
        }
        (seg, g.kv / g.kx, woff)
    });
    let steps = g.c * g.kv;
    let (istride, ostride) = (g.c * g.ivol, g.co * g.ovol);
    for smp in 0..samples {
        // SAFETY: sample smp < samples lies inside the image and the output.
        let (img, out) = unsafe { (img.add(smp * istride), out.add(smp * ostride)) };
        // The next sample's inputs (or, after the last, the next strip's), into L2 while
        // this one computes: each input channel is its own stream (64 of them in a
        // 64-channel layer, 1-D), more than the hardware prefetcher follows, and a
        // strip's first tile otherwise waited on them. The next strip reads 16 NV S
        // floats further along the same rows (or its rows' successors, where a hint at
        // the wrong line only costs the hint).
        let (next, ahead) =
            if smp + 1 < samples { (img.wrapping_add(istride), 0) } else { (img.wrapping_sub(smp * istride), (NV * L * S) as isize) };
        for ch in 0..g.c {
            let base = next.wrapping_add(ch * g.ivol);
            for run in off.iter().flatten() {
                for &o in run[..g.kv].iter().step_by(g.kx) {
                    let p = base.wrapping_offset(o + ahead);
                    // A prefetch is a hint: it never faults, whatever the address.
                    _mm_prefetch::<_MM_HINT_T1>(p as *const i8);
                    _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(L * S + g.kx - 1) as *const i8);
                }
            }
        }
        if let Some((seg, wrows, woff)) = &windows {
            let (seg, wrows) = (*seg, *wrows);
            WINDOWS.with(|w| {
                let win = &mut *w.borrow_mut();
                win.clear();
                for ch in 0..g.c {
                    for r in 0..wrows {
                        // SAFETY: a uniform strip's taps of window row r load floats
                        // off[r kx] .. off[r kx] + seg of the channel, all inside it.
                        let row = unsafe { std::slice::from_raw_parts(img.add(ch * g.ivol).offset(off[0][0][r * g.kx]), seg) };
                        win.extend_from_slice(row);
                    }
                }
                // SAFETY: the caller's conditions, for sample smp; the tiles read each
                // channel's windows (`wrows * seg` floats, every tap's vectors inside).
                unsafe { sample_tiles::<P, S, MR, NV, true>(g, (win.as_ptr(), wrows * seg), wp, bias, out, s, (woff, &mask, &live), steps) }
            })
        } else {
            // SAFETY: the caller's conditions, for sample smp.
            unsafe { sample_tiles::<P, S, MR, NV, false>(g, (img, g.ivol), wp, bias, out, s, (&off, &mask, &live), steps) }
        }
    }
}

/// The tiles of one strip of one sample (see `strip_avx512`), from the strip's tables.
///
/// # Safety
/// As `strip_avx512`, for one sample.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn sample_tiles<const P: usize, const S: usize, const MR: usize, const NV: usize, const U: bool>(
    g: &Strip,
    (img, cstride): (*const f32, usize),
    wp: &[f32],
    bias: Option<&[f32]>,
    out: *mut f32,
    s: usize,
    (off, mask, live): (&[[[isize; MAX_TAPS]; P]; NV], &[[[u32; MAX_TAPS]; P]; NV], &[std::arch::x86_64::__mmask16; NV]),
    steps: usize,
) {
    use std::arch::x86_64::*;
    // Even lanes of (lo, hi): lane j takes lane 2j of the 32.
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (b, wb) in wp.chunks_exact(steps * MR).enumerate() {
        let mut acc = [[_mm512_setzero_ps(); NV]; MR];
        let mut wq = wb.as_ptr();
        for ch in 0..g.c {
            // SAFETY: channel ch < c of the sample's volumes (or of the strip's windows).
            let base = unsafe { img.add(ch * cstride) };
            for t in 0..g.kv {
                let mut bv = [_mm512_setzero_ps(); NV];
                for v in 0..NV {
                    if U {
                        let p = base.wrapping_offset(off[0][0][t] + (v * L * S) as isize);
                        // SAFETY: a uniform strip (see `strip_avx512`): all S * 16 lanes of
                        // the vector read inputs inside this volume's row.
                        unsafe {
                            bv[v] = _mm512_loadu_ps(p);
                            if S == 2 {
                                bv[v] = _mm512_permutex2var_ps(bv[v], evens, _mm512_loadu_ps(p.add(L)));
                            }
                        }
                        continue;
                    }
                    let mut hi = _mm512_setzero_ps();
                    for r in 0..P {
                        let (m, p) = (mask[v][r][t], base.wrapping_offset(off[v][r][t]));
                        // SAFETY: only the lanes in the masks are read, each at an input
                        // (iz, iy, x) inside this volume; the address of the others is formed
                        // with wrapping arithmetic and never dereferenced.
                        unsafe {
                            bv[v] = _mm512_mask_loadu_ps(bv[v], m as __mmask16, p);
                            if S == 2 {
                                hi = _mm512_mask_loadu_ps(hi, (m >> 16) as __mmask16, p.wrapping_add(L));
                            }
                        }
                    }
                    if S == 2 {
                        bv[v] = _mm512_permutex2var_ps(bv[v], evens, hi);
                    }
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    // SAFETY: `wq` walks the strip's steps * 12 weights, 12 per step.
                    let a = _mm512_set1_ps(unsafe { *wq.add(i) });
                    for v in 0..NV {
                        row[v] = _mm512_fmadd_ps(a, bv[v], row[v]);
                    }
                }
                // SAFETY: one step of 12 weights on, at most to the strip's end.
                wq = unsafe { wq.add(MR) };
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let o = b * MR + i;
            if o >= g.co {
                break;
            }
            let bo = _mm512_set1_ps(bias.map_or(0.0, |bs| bs[o]));
            for v in 0..NV {
                // SAFETY: output channel o < co; the lanes in `live` are positions
                // (s * NV + v) * 16 + lane < oplane of its slice.
                unsafe { _mm512_mask_storeu_ps(out.add(o * g.ovol + (s * NV + v) * L), live[v], _mm512_add_ps(row[v], bo)) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::passes::{conv_adj, conv_fwd};
    use super::*;

    /// The in-place forward equals the materialised-columns path (itself checked
    /// against PyTorch's fixtures): partial channel blocks, an odd number of 16-wide
    /// runs, windows from 1x1 to 5x5 with padding from none to full, 1-d, x-strides of
    /// 1 and 2 (y-strides 1 to 3), 3-D (z-strides 1 and 2), bias, with and without
    /// threads, uniform strips (window copies) at x-strides 1 and 2; and the adjoint
    /// (`implicit::conv_adj_implicit`, which runs here when its flipped forward
    /// qualifies) equals col2im.
    #[test]
    fn matches_the_im2col_path() {
        if !crate::ops::cpu::has_avx512() {
            return;
        }
        let mut rnd = crate::ops::test_stream(21);
        // (n, c, w_rows, ins, k, pad)
        type Case = (usize, usize, usize, [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 14] = [
            // Five samples, 16 strips a plane: tasks of three samples and of two.
            (5, 3, 16, [1, 12, 64], [1, 3, 3], [0, 1, 1]),
            (2, 3, 20, [1, 5, 32], [1, 3, 3], [0, 1, 1]),
            // 64 output channels: 8 x 48 tiles (12s would idle an eighth); 1-D, k5, past a
            // strip; the middle strips are uniform (read from window copies).
            (2, 6, 64, [1, 1, 150], [1, 1, 5], [0, 0, 2]),
            (2, 6, 64, [1, 1, 160], [1, 1, 5], [0, 0, 2]),
            (1, 4, 12, [1, 3, 16], [1, 3, 5], [0, 1, 2]),
            (2, 2, 9, [1, 8, 20], [1, 5, 5], [0, 0, 0]),
            (1, 8, 32, [1, 4, 48], [1, 3, 3], [0, 1, 1]),
            (2, 3, 16, [1, 1, 64], [1, 1, 3], [0, 0, 1]),
            (1, 5, 8, [1, 2, 18], [1, 1, 3], [0, 0, 0]),
            // Rows of 8 to 15 and of 16+ not a multiple of 16: vectors across two or three
            // rows, a plane ending mid-vector.
            (2, 6, 13, [1, 8, 8], [1, 3, 3], [0, 1, 1]),
            (1, 3, 12, [1, 5, 11], [1, 3, 3], [0, 1, 1]),
            (2, 4, 10, [1, 7, 15], [1, 3, 5], [0, 2, 0]),
            (2, 5, 14, [1, 5, 27], [1, 3, 3], [0, 1, 1]),
            // A strip inside one interior row (positions 144..192 of rows of 112): uniform,
            // read from the window copy of its three rows.
            (2, 5, 16, [1, 6, 112], [1, 3, 3], [0, 1, 1]),
        ];
        let strided: [(Case, [usize; 3]); 9] = [
            // 1-D at x-stride 2: the strips from the second on are uniform (two loads each).
            ((2, 4, 12, [1, 1, 256], [1, 1, 3], [0, 0, 1]), [1, 1, 2]),
            ((2, 3, 20, [1, 9, 64], [1, 3, 3], [0, 1, 1]), [1, 2, 2]),
            ((1, 4, 12, [1, 7, 33], [1, 3, 3], [0, 1, 1]), [1, 2, 2]),
            ((2, 5, 9, [1, 6, 40], [1, 1, 1], [0, 0, 0]), [1, 2, 2]),
            ((1, 3, 16, [1, 5, 35], [1, 3, 5], [0, 0, 2]), [1, 3, 2]),
            // 3-D: slices padded and not, z-strides 1 and 2, windows 1 to 3 deep, rows of
            // 8 to 15 and 16+.
            ((2, 8, 16, [4, 6, 32], [3, 3, 3], [1, 1, 1]), [1, 1, 1]),
            ((1, 3, 13, [5, 4, 9], [2, 3, 3], [0, 1, 1]), [2, 1, 1]),
            ((2, 4, 10, [3, 5, 20], [1, 3, 3], [0, 1, 1]), [1, 1, 2]),
            ((1, 5, 24, [6, 3, 17], [3, 1, 3], [1, 0, 1]), [2, 2, 1]),
        ];
        let all = cases.iter().map(|&c| (c, [1; 3])).chain(strided);
        for ((n, c, w_rows, ins, k, pad), stride) in all {
            let g = Geom::for_test(n, c, 1, ins, k, stride, pad, [1; 3]);
            assert!(applies(&g, w_rows), "{g:?}");
            let img: Vec<f32> = rnd(n * c * g.ivol());
            let w: Vec<f32> = rnd(w_rows * c * g.kvol());
            let bias: Vec<f32> = rnd(w_rows.max(c));
            for b in [None, Some(&bias[..w_rows])] {
                let want = conv_fwd(&img, &w, b, &g, w_rows, None);
                for par in [false, true] {
                    let got = super::super::on_two_threads(|| conv_fwd_direct(&img, &w, b, &g, w_rows, par));
                    super::super::assert_close(&got, &want, &format!("{g:?} bias={} par={par}", b.is_some()));
                }
            }
        }
        // The adjoint of a 16 -> 12 channel convolution at 6x32: its flipped forward has
        // 12 output channels and 32-wide rows, so it runs in place.
        let g = Geom::for_test(2, 12, 1, [1, 6, 32], [1, 3, 3], [1; 3], [0, 1, 1], [1; 3]);
        let adj = super::super::implicit::adjoint(&g, 16).expect("stride 1, rows of 16+");
        assert!(applies(&adj, g.c));
        let a: Vec<f32> = rnd(2 * 16 * g.ovol());
        let w: Vec<f32> = rnd(16 * 12 * g.kvol());
        let want = conv_adj(&a, &w, None, &g, 16);
        let got = super::super::implicit::conv_adj_implicit(&a, &w, None, &g, &adj, 16, false);
        super::super::assert_close(&got, &want, "adjoint");
    }
}
