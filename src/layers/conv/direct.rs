//! The f32 forward of a 1-3 D convolution at x-stride 1 or 2, read straight from the
//! image: each strip of consecutive outputs of an output slice (`NV` vectors) is an
//! `MR x NV` register tile over `MR` output channels (12 x 2 vectors of 16 with AVX-512,
//! 6 x 2 vectors of 8 with AVX2; at x-stride 1, where the channels fit the first badly,
//! 8 x 3 / 4 x 2; for fewer than 8 output channels 4 x 4 / 4 x 2), and every (input
//! channel, tap) step loads the strip's input in place — masked loads give the padding (masked lanes are never read) — and multiplies it by
//! `MR` broadcast weights. No column matrix and no packing of the image. Where output
//! rows are a multiple of the vector wide each vector is one run of one input row;
//! other widths fill a vector from the two rows it spans (three for rows of 9 to 15
//! with 16 lanes), one merging masked load each. The kernel is written once over
//! `ops::lanes` and instantiated per SIMD level.
//!
//! Why: the implicit GEMM (`implicit`) packs a strip of columns per (channel, tap) for
//! the GEMM to read; with few output channels each packed column feeds only a few
//! rows, and the packing cost as much as the multiplying (perf on a 32 -> 32 channel
//! layer at 32x32, batch 32: 42% of the time in the packer, 50% in the GEMM tile).
use super::Geom;
use crate::ops::lanes::{Features, Kernel, Lanes};
use crate::ops::parallel::SyncPtr;

/// The most taps one kernel window may have (the per-strip tables are arrays).
const MAX_TAPS: usize = 128;
/// Output rows at least this wide: a vector of 16 then spans at most three rows (of 8
/// lanes, two).
const MIN_ROW: usize = 8;

/// Which instance of the strip kernel runs: runs per vector (1-3), x-stride 2, and the
/// level's second tile shape.
#[derive(Clone, Copy)]
struct Kind {
    runs: usize,
    s2: bool,
    /// Which of `Level::TILES`' shapes.
    tile: usize,
}

/// A SIMD level's tile shapes.
trait Level: Lanes {
    /// (output channels, vectors) per tile: the general shape, and the one used at
    /// x-stride 1 where the output channels are a multiple of its channels and the
    /// first shape's would idle an eighth of their rows or more (16 channels as 12 + 4
    /// left a third of the second tile idle). AVX-512: 12 x 2 and 8 x 3, 24
    /// accumulators of its 32 registers. AVX2: 6 x 2 (12 of 16) and 4 x 2; 4 x 3 left
    /// no register for the masks, and LLVM spilled accumulators in the masked loop.
    /// The third shape is for fewer than 8 output channels (an RGB output layer: 32 -> 3
    /// channels, 9x9): 4 channels by 4 vectors with AVX-512, so each input vector feeds
    /// 3-4 live rows instead of 3 of 12. (`run_strip` instantiates the same shapes.)
    const TILES: [(usize, usize); 3] = if Self::LANES == 16 { [(12, 2), (8, 3), (4, 4)] } else { [(6, 2), (4, 2), (4, 2)] };
}

impl<V: Lanes> Level for V {}

/// `strip::<V, P, S, MR, NV>` as a `Kernel`: (geometry, img, packed weight, bias, out,
/// (output slice, strip, samples, first sample)).
#[allow(clippy::type_complexity)]
struct StripTiles<'a, const P: usize, const S: usize, const MR: usize, const NV: usize>(
    (&'a Strip, *const f32, &'a [f32], Option<&'a [f32]>, *mut f32, (usize, usize, usize, usize)),
);

impl<const P: usize, const S: usize, const MR: usize, const NV: usize> Kernel for StripTiles<'_, P, S, MR, NV> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let (g, img, wp, bias, out, at) = self.0;
        // SAFETY: the caller's (`Kernel::body`: V's features; `strip`'s contract).
        unsafe { strip::<V, P, S, MR, NV>(g, img, wp, bias, out, at) }
    }
}

/// The instance of `StripTiles` that `kind` selects, with the tile shapes `($mr0, $nv0)`
/// and `($mr1, $nv1)`, run at the level `$v`.
macro_rules! strip_instances {
    ($v:ty, ($mr0:literal, $nv0:literal), ($mr1:literal, $nv1:literal), ($mr2:literal, $nv2:literal), $kind:expr, $args:expr) => {
        match ($kind.tile, $kind.runs, $kind.s2) {
            (0, 1, false) => <$v>::run(StripTiles::<1, 1, $mr0, $nv0>($args)),
            (0, 2, false) => <$v>::run(StripTiles::<2, 1, $mr0, $nv0>($args)),
            (0, _, false) => <$v>::run(StripTiles::<3, 1, $mr0, $nv0>($args)),
            (0, 1, true) => <$v>::run(StripTiles::<1, 2, $mr0, $nv0>($args)),
            (0, 2, true) => <$v>::run(StripTiles::<2, 2, $mr0, $nv0>($args)),
            (0, _, true) => <$v>::run(StripTiles::<3, 2, $mr0, $nv0>($args)),
            (1, 1, false) => <$v>::run(StripTiles::<1, 1, $mr1, $nv1>($args)),
            (1, 2, false) => <$v>::run(StripTiles::<2, 1, $mr1, $nv1>($args)),
            (1, _, false) => <$v>::run(StripTiles::<3, 1, $mr1, $nv1>($args)),
            (1, 1, true) => <$v>::run(StripTiles::<1, 2, $mr1, $nv1>($args)),
            (1, 2, true) => <$v>::run(StripTiles::<2, 2, $mr1, $nv1>($args)),
            (1, _, true) => <$v>::run(StripTiles::<3, 2, $mr1, $nv1>($args)),
            (_, 1, false) => <$v>::run(StripTiles::<1, 1, $mr2, $nv2>($args)),
            (_, 2, false) => <$v>::run(StripTiles::<2, 1, $mr2, $nv2>($args)),
            (_, _, false) => <$v>::run(StripTiles::<3, 1, $mr2, $nv2>($args)),
            (_, 1, true) => <$v>::run(StripTiles::<1, 2, $mr2, $nv2>($args)),
            (_, 2, true) => <$v>::run(StripTiles::<2, 2, $mr2, $nv2>($args)),
            (_, _, true) => <$v>::run(StripTiles::<3, 2, $mr2, $nv2>($args)),
        }
    };
}

/// One strip task at the level `V` (`Level::TILES`' shapes), the instance `kind` selects.
///
/// # Safety
/// As `strip`, on a CPU with `V`'s features.
#[allow(clippy::type_complexity)]
unsafe fn run_strip<V: Features>(kind: Kind, args: (&Strip, *const f32, &[f32], Option<&[f32]>, *mut f32, (usize, usize, usize, usize))) {
    // SAFETY: the caller's.
    unsafe {
        if V::LANES == 16 {
            strip_instances!(V, (12, 2), (8, 3), (4, 4), kind, args)
        } else {
            strip_instances!(V, (6, 2), (4, 2), (4, 2), kind, args)
        }
    }
}

/// Whether this kernel runs the forward: AVX2 (or AVX-512), one group, a 1-, 2- or 3-D
/// window at dilation 1 and an x-stride of 1 or 2 (any y- and z-stride), output rows at
/// least 8 wide, at most `MAX_TAPS` taps (an 11x11 window); any number of output
/// channels (fewer than 8 take the narrow tile).
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    crate::ops::cpu::has_avx2_fma()
        && g.groups == 1
        && matches!(g.stride[2], 1 | 2)
        && g.dil == [1, 1, 1]
        && g.outs[2] >= MIN_ROW
        && g.kvol() <= MAX_TAPS
        && w_rows >= 1
}

/// `out (N, Co, [OD,] OH, OW) = conv(img (N, C, [D,] H, W), w (Co, C, [kd,] kh, kw)) (+ bias)`
/// where `applies` holds.
pub(crate) fn conv_fwd_direct(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Vec<f32> {
    crate::ops::lanes::at_cpu_lanes!(direct(img, w, bias, g, co, par)).expect("conv (direct) without AVX2 (`applies` says no)")
}

/// `conv_fwd_direct` at the level `V`, which the CPU must have.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn direct<V: Features>(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Vec<f32> {
    let (c, kv) = (g.c, g.kvol());
    let (h, wd) = (g.ins[1], g.ins[2]);
    let (oh, ow) = (g.outs[1], g.outs[2]);
    let (plane, oplane) = (h * wd, oh * ow);
    let (ivol, ovol) = (g.ivol(), g.ovol());
    let l = V::LANES;
    assert!(img.len() >= g.n * c * ivol && w.len() >= co * c * kv, "conv (direct): operand sizes");
    // Weights as strips of `mr` channels, step-major (the GEMM's left packing): strip b
    // holds w[mr b + i, p] at p * mr + i (channels past `co` as zeros), so each step's
    // broadcasts are consecutive.
    let depth = c * kv;
    // The second shape at x-stride 1 only: at stride 2 each vector costs two loads and
    // a permute, and three vectors per 8 broadcasts measured 1.8x slower (AVX-512, 64 ->
    // 128 channels at 16x16).
    let [(mr0, _), (mr1, _), _] = V::TILES;
    let waste = co.div_ceil(mr0) * mr0 * 8 >= co * 9;
    let wide = g.stride[2] == 1 && co.is_multiple_of(mr1) && waste;
    let tile = if co < 8 { 2 } else { wide as usize };
    let (mr, nv) = V::TILES[tile];
    let mut wp = vec![0f32; co.div_ceil(mr) * mr * depth];
    // SAFETY: `w` holds the (co, depth) row-major weight (asserted above), and `wp` the
    // co.div_ceil(mr) strips of mr x depth floats that `pack_left` writes.
    unsafe { crate::ops::sgemm::pack_left(mr, crate::ops::sgemm::Mat::new(w.as_ptr(), depth as isize, 1), (0, co), (0, depth), &mut wp) };
    let strips = oplane.div_ceil(l * nv);
    // Dilation is 1 here (`applies`): a tap's offset is its index minus the padding.
    let mut taps = [[0isize; 3]; MAX_TAPS];
    taps[..kv].copy_from_slice(&g.tap_offsets());
    let kx = g.k[2];
    // Uniform strips (whole vectors inside one output row) exist where rows hold a strip.
    let padded = (ow >= nv * l && g.ovol() > 0).then(|| Padded::new(img, g, par));
    let geo = Strip { c, kv, d: g.ins[0], h, wd, ow, plane, oplane, ivol, ovol, co, kx, taps, sz: g.stride[0], sy: g.stride[1], padded };
    let od = g.outs[0];
    // Rows a multiple of the vector wide: one run per vector; rows of 8 with 16 lanes
    // (every vector starts a row and covers two) or as wide as a vector or wider (a
    // vector ends at most one row boundary): two; rows of 9 to 15 with 16 lanes: three.
    let runs = if ow.is_multiple_of(l) {
        1
    } else if l.is_multiple_of(ow) || ow >= l {
        2
    } else {
        3
    };
    let kind = Kind { runs, s2: g.stride[2] == 2, tile };
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
            let at = (oz, s, nb.min(g.n - n), n);
            // SAFETY: the level was checked by `at_cpu_lanes`; samples n..n + at.2 lie
            // inside `img` (asserted above); the strip's outputs (positions s * LANES nv..
            // of output slice oz of each of the co volumes of those samples) are inside
            // `out`, and no other task writes them.
            unsafe {
                let (src, o) = (img.as_ptr().add(n * c * ivol), dst.ptr().add(n * co * ovol + oz * oplane));
                run_strip::<V>(kind, (&geo, src, &wp, bias, o, at));
            }
        };
        let tasks = g.n.div_ceil(nb) * per;
        crate::ops::parallel::for_tasks(tasks, par, task);
    })
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
    /// The zero-padded copy of every sample that uniform strips read (`Padded`), None
    /// where no strip is uniform.
    padded: Option<Padded>,
}

/// A zero-padded copy of the image, each channel's volume `cv` floats (slices `pp`
/// apart, rows `pw`), samples `c cv` apart, with room past each row for a uniform
/// strip's whole vectors; `soff`: each (channel, tap) step's offset from a window's
/// origin, in step order (one table lookup per step instead of a tap counter and a
/// channel jump: those were 7 of the 21 instructions of a 4 x 2 tile's step with AVX2).
///
/// Why one copy per call: uniform strips had copied their own input windows (the
/// padding as zeros; and the channels of an image lie a plane apart, for planes a
/// multiple of 4 KiB on the same few L1 sets), in row pieces of `L NV S + kx - 1`
/// floats: on a 3-D layer with 8 channels and 27 taps, 72 pieces of 18 floats per strip
/// against 16 output channels of work, 15% of the forward in `memmove` and more around
/// it. Here the pitches spread the channels over the L1 sets.
struct Padded {
    data: Vec<f32>,
    cv: usize,
    pp: usize,
    pw: usize,
    soff: Vec<isize>,
}

impl Padded {
    /// The copy for `g`'s image `img` (samples whole), its rows `ow S + kx - 1` wide
    /// (the reach of a uniform strip ending at the row's end).
    fn new(img: &[f32], g: &Geom, par: bool) -> Padded {
        let (c, kv) = (g.c, g.kvol());
        let [d, h, wd] = g.ins;
        let [od, oh, ow] = g.outs;
        let (pd, ph) = ((od - 1) * g.stride[0] + g.k[0], (oh - 1) * g.stride[1] + g.k[1]);
        let pw = ow * g.stride[2] + g.k[2] - 1;
        // Slice and channel pitches of an odd number of cache lines, so consecutive
        // slices and channels start in different L1 sets (a pitch near a multiple of 4
        // KiB put 4 of a 1-D layer's channels of 4096 on each set: 1.1x the time).
        let odd_lines = |v: usize| (v.div_ceil(16) | 1) * 16;
        let pp = if pd == 1 { ph * pw } else { odd_lines(ph * pw) };
        let cv = odd_lines(pd * pp);
        let [pz, py, px] = g.pad;
        let soff = (0..c)
            .flat_map(|ch| {
                let ks = g.k;
                (0..kv).map(move |t| (ch * cv + (t / (ks[1] * ks[2])) * pp + (t / ks[2] % ks[1]) * pw + t % ks[2]) as isize)
            })
            .collect();
        let data = crate::ops::parallel::filled_plain(g.n * c * cv, |out: &mut [f32]| {
            crate::ops::parallel::for_chunks(out, cv, par, |nc, vol| {
                let src = &img[nc * d * h * wd..(nc + 1) * d * h * wd];
                vol[pd * pp..].fill(0.0);
                for z in 0..pd {
                    let slice = &mut vol[z * pp..(z + 1) * pp];
                    slice[ph * pw..].fill(0.0);
                    for y in 0..ph {
                        let row = &mut slice[y * pw..(y + 1) * pw];
                        let (iz, iy) = (z as isize - pz as isize, y as isize - py as isize);
                        if iz < 0 || iz >= d as isize || iy < 0 || iy >= h as isize {
                            row.fill(0.0);
                            continue;
                        }
                        // Padded x = image x + px: the image row lands at px.., clipped.
                        let sr = &src[(iz as usize * h + iy as usize) * wd..][..wd];
                        let (lo, hi) = (px.min(pw), (px + wd).min(pw));
                        row[..lo].fill(0.0);
                        row[lo..hi].copy_from_slice(&sr[..hi - lo]);
                        row[hi..].fill(0.0);
                    }
                }
            })
        });
        Padded { data, cv, pp, pw, soff }
    }
}

/// Outputs `s * L NV ..` (`L NV` of them, `L` the lanes of `V`, clipped to the slice) of
/// output slice `oz` of every output channel of `samples` consecutive samples, `MR`
/// channels per tile: `img` is the first sample's first input volume (sample `n0` of
/// the call, which indexes `g.padded`), `out` slice `oz` of its first output volume.
/// Each vector's lanes are up to `P` runs along output rows
/// (1 where rows are a multiple of `L` wide, 2 where they are `L` or wider or divide
/// `L`, else 3), each loaded from its input row by one masked load; at x-stride `S` = 2
/// a run's inputs are every other float of `2 * len`, loaded as two vectors whose even
/// lanes a permute then gathers.
///
/// # Safety
/// The CPU has `V`'s features and this runs inside a function compiled with them;
/// `img` points to `c` readable volumes of `ivol` floats, `out` to `co` writable slices
/// of `oplane` floats `ovol` apart; samples `n0..n0 + samples` lie inside `g.padded`
/// when it is Some; `wp` holds the weight strips as `direct` packs them for `MR`;
/// every `L` lanes span at most `P` rows.
#[inline(always)]
unsafe fn strip<V: Lanes, const P: usize, const S: usize, const MR: usize, const NV: usize>(
    g: &Strip,
    img: *const f32,
    wp: &[f32],
    bias: Option<&[f32]>,
    out: *mut f32,
    (oz, s, samples, n0): (usize, usize, usize, usize),
) {
    let l = V::LANES;
    // Per vector, run and tap: where loaded lane 0 would read inside a plane (so loaded
    // lane q reads `off + q`; output lane j is loaded lane S * j), and the run's loaded
    // lanes (S * L of them: bits 0..L the first load, L..2L the second) whose input
    // lies inside the image (the others are padding, loaded as 0). Runs past the plane
    // keep an empty mask.
    let mut off = [[[0isize; MAX_TAPS]; P]; NV];
    let mut mask = [[[0u32; MAX_TAPS]; P]; NV];
    let mut live = [0u32; NV];
    for v in 0..NV {
        let pos = (s * NV + v) * l;
        let lanes = g.oplane.saturating_sub(pos).min(l);
        live[v] = (1u32 << lanes) - 1;
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
    // A strip is uniform where its NV vectors are whole and lie in one output row (the
    // strips of 1-D rows, and strips inside one row of an image): its tiles then read
    // the zero-padded copy (`Padded`) at one offset per step and plain vectors at fixed
    // displacements from it, without masks (per step that is 3 scalar and 3 mask loads
    // fewer beside the 8 broadcasts and 3 vectors, which had kept the load ports as busy
    // as the FMA units). The zero padding makes the edge strips uniform too: on a 3-D
    // layer with rows of 32 every strip touches an edge.
    let in_row = (s * NV * l) % g.ow + NV * l <= g.ow;
    let padded = g.padded.as_ref().filter(|_| in_row && live.iter().all(|&m| m == (1 << l) - 1));
    // The masks in the level's form, built once for all the strip's tiles and samples:
    // per (vector, run, tap), the first load's and (x-stride 2) the second's.
    // SAFETY (both): the caller runs this with V's features.
    let none = unsafe { V::mask(0) };
    let mut vmask = [[[(none, none); MAX_TAPS]; P]; NV];
    for (vm, m) in vmask.iter_mut().flatten().zip(mask.iter().flatten()) {
        for (d, &bits) in vm[..g.kv].iter_mut().zip(&m[..g.kv]) {
            *d = unsafe { (V::mask(bits), V::mask(bits >> l)) };
        }
    }
    let steps = g.c * g.kv;
    let (istride, ostride) = (g.c * g.ivol, g.co * g.ovol);
    // A uniform strip's window origin in each padded sample: output (oz, oy, ox) reads
    // padded (oz sz, oy sy, ox S) on (the padding's offsets cancel the taps' own).
    let (oy, ox) = (s * NV * l / g.ow, s * NV * l % g.ow);
    let origin = padded.map_or(0, |p| oz * g.sz * p.pp + oy * g.sy * p.pw + ox * S);
    for smp in 0..samples {
        // SAFETY: sample smp < samples lies inside the image and the output.
        let (img, out) = unsafe { (img.add(smp * istride), out.add(smp * ostride)) };
        // The next sample's inputs (or, after the last, the next strip's), into L2 while
        // this one computes: each input channel is its own stream (64 of them in a
        // 64-channel layer, 1-D), more than the hardware prefetcher follows, and a
        // strip's first tile otherwise waited on them. The next strip reads L NV S
        // floats further along the same rows (or its rows' successors, where a hint at
        // the wrong line only costs the hint). A prefetch is a hint: it never faults,
        // whatever the address.
        let ahead = if smp + 1 < samples { 0 } else { (NV * l * S) as isize };
        let hint = |p: *const f32| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: SSE, part of x86-64's baseline.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
                _mm_prefetch::<_MM_HINT_T1>(p as *const i8);
                _mm_prefetch::<_MM_HINT_T1>(p.wrapping_add(l * S + g.kx - 1) as *const i8);
            }
        };
        if let Some(p) = padded {
            let n = if smp + 1 < samples { n0 + smp + 1 } else { n0 };
            let base = p.data.as_ptr().wrapping_add(n * g.c * p.cv + origin).wrapping_offset(ahead);
            for &o in p.soff.iter().step_by(g.kx) {
                hint(base.wrapping_offset(o));
            }
            // SAFETY: the caller's conditions, for sample smp; the padded sample n0 + smp
            // holds every tap's whole vectors of a uniform strip (rows `ow S + kx - 1`
            // wide, every slice and row a window reaches).
            unsafe {
                let at = p.data.as_ptr().add((n0 + smp) * g.c * p.cv + origin);
                sample_tiles::<V, P, S, MR, NV, true>(g, (at, 0), wp, bias, out, s, (&off, &vmask, &live), steps, &p.soff)
            }
        } else {
            let next = if smp + 1 < samples { img.wrapping_add(istride) } else { img.wrapping_sub(smp * istride) };
            for ch in 0..g.c {
                let base = next.wrapping_add(ch * g.ivol);
                for run in off.iter().flatten() {
                    for &o in run[..g.kv].iter().step_by(g.kx) {
                        hint(base.wrapping_offset(o + ahead));
                    }
                }
            }
            // SAFETY: the caller's conditions, for sample smp.
            unsafe { sample_tiles::<V, P, S, MR, NV, false>(g, (img, g.ivol), wp, bias, out, s, (&off, &vmask, &live), steps, &[]) }
        }
    }
}

/// The tiles of one strip of one sample (see `strip`), from the strip's tables.
///
/// # Safety
/// As `strip`, for one sample.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
unsafe fn sample_tiles<V: Lanes, const P: usize, const S: usize, const MR: usize, const NV: usize, const U: bool>(
    g: &Strip,
    (img, cstride): (*const f32, usize),
    wp: &[f32],
    bias: Option<&[f32]>,
    out: *mut f32,
    s: usize,
    (off, mask, live): (&[[[isize; MAX_TAPS]; P]; NV], &[[[(V::Mask, V::Mask); MAX_TAPS]; P]; NV], &[u32; NV]),
    steps: usize,
    soff: &[isize],
) {
    let l = V::LANES;
    // SAFETY (every intrinsic below): the caller runs this inside a function compiled
    // with V's features, on a CPU that has them.
    for (b, wb) in wp.chunks_exact(steps * MR).enumerate() {
        let mut acc = [[unsafe { V::zero() }; NV]; MR];
        let mut wq = wb.as_ptr();
        // One loop over the (channel, tap) steps, not a loop over taps inside one over
        // channels: across the nest LLVM stored some accumulators to the stack at every
        // step (perf: the stores beside the FMAs), in one loop it keeps them in registers.
        if U {
            // Uniform: every step's window offset from the strip's table, no masks.
            for &o in soff {
                let mut bv = [unsafe { V::zero() }; NV];
                for (v, x) in bv.iter_mut().enumerate() {
                    let p = img.wrapping_offset(o + (v * l * S) as isize);
                    // SAFETY: a uniform strip (see `strip`): all S * L lanes of the vector
                    // read inputs inside the windows' copy.
                    unsafe {
                        *x = V::load(p);
                        if S == 2 {
                            *x = V::evens(*x, V::load(p.add(l)));
                        }
                    }
                }
                // SAFETY: `wq` walks the strip's steps * MR weights, MR per step.
                unsafe {
                    fma_step(&mut acc, &bv, wq);
                    wq = wq.add(MR);
                }
            }
        } else {
            let (mut base, mut t) = (img, 0);
            for _ in 0..steps {
                let mut bv = [unsafe { V::zero() }; NV];
                for v in 0..NV {
                    let mut hi = unsafe { V::zero() };
                    for r in 0..P {
                        let ((m0, m1), p) = (mask[v][r][t], base.wrapping_offset(off[v][r][t]));
                        // SAFETY: only the lanes in the masks are read, each at an input
                        // (iz, iy, x) inside this volume; the address of the others is formed
                        // with wrapping arithmetic and never dereferenced. One run fills
                        // the vector alone (no merge: the unselected lanes load as 0).
                        unsafe {
                            if P == 1 {
                                bv[v] = V::load_mask(p, m0);
                                if S == 2 {
                                    hi = V::load_mask(p.wrapping_add(l), m1);
                                }
                            } else {
                                bv[v] = bv[v].merge_mask(p, m0);
                                if S == 2 {
                                    hi = hi.merge_mask(p.wrapping_add(l), m1);
                                }
                            }
                        }
                    }
                    if S == 2 {
                        bv[v] = unsafe { V::evens(bv[v], hi) };
                    }
                }
                // SAFETY: `wq` walks the strip's steps * MR weights, MR per step.
                unsafe {
                    fma_step(&mut acc, &bv, wq);
                    wq = wq.add(MR);
                }
                t += 1;
                if t == g.kv {
                    // The next channel of the sample's volumes; past the last one the
                    // pointer is not used.
                    (base, t) = (base.wrapping_add(cstride), 0);
                }
            }
        }
        // No early `break`: a loop of constant trip count unrolls, so `acc` is indexed by
        // constants and lives in registers (with a break LLVM indexed it at run time and
        // kept it on the stack, storing every accumulator at every step).
        for (i, row) in acc.iter().enumerate() {
            let o = b * MR + i;
            if o < g.co {
                let bo = unsafe { V::splat(bias.map_or(0.0, |bs| bs[o])) };
                for v in 0..NV {
                    // SAFETY: output channel o < co; the lanes in `live` are positions
                    // (s * NV + v) * L + lane < oplane of its slice.
                    unsafe { row[v].add(bo).store_masked(out.add(o * g.ovol + (s * NV + v) * l), live[v]) };
                }
            }
        }
    }
}

/// `acc[i][v] += w[i] * bv[v]`: one step of a tile, `MR` weights broadcast against
/// `NV` input vectors.
///
/// # Safety
/// Inside a function compiled with `V`'s features; `w` holds `MR` readable floats.
#[inline(always)]
unsafe fn fma_step<V: Lanes, const MR: usize, const NV: usize>(acc: &mut [[V; NV]; MR], bv: &[V; NV], w: *const f32) {
    for (i, row) in acc.iter_mut().enumerate() {
        // SAFETY: the caller's (features; MR floats at `w`).
        unsafe {
            let a = V::splat(*w.add(i));
            for (x, b) in row.iter_mut().zip(bv) {
                *x = a.fmadd(*b, *x);
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::passes::{conv_adj, conv_fwd};
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::ops::lanes::{X16, X8};

    /// The in-place forward equals the materialised-columns path (itself checked
    /// against PyTorch's fixtures): partial channel blocks, an odd number of 16-wide
    /// runs, windows from 1x1 to 5x5 with padding from none to full, 1-d, x-strides of
    /// 1 and 2 (y-strides 1 to 3), 3-D (z-strides 1 and 2), bias, with and without
    /// threads, uniform strips (window copies) at x-strides 1 and 2; and the adjoint
    /// (`implicit::conv_adj_implicit`, which runs here when its flipped forward
    /// qualifies) equals col2im. Every SIMD level this CPU has.
    #[test]
    fn matches_the_im2col_path() {
        type Kernel = fn(&[f32], &[f32], Option<&[f32]>, &Geom, usize, bool) -> Vec<f32>;
        let mut levels: Vec<(&str, Kernel)> = Vec::new();
        if crate::ops::cpu::has_avx2_fma() {
            levels.push(("avx2", direct::<X8>));
        }
        if crate::ops::cpu::has_avx512() {
            levels.push(("avx512", direct::<X16>));
        }
        if levels.is_empty() {
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
                for (level, kernel) in &levels {
                    for par in [false, true] {
                        let got = super::super::on_two_threads(|| kernel(&img, &w, b, &g, w_rows, par));
                        super::super::assert_close(&got, &want, &format!("{level} {g:?} bias={} par={par}", b.is_some()));
                    }
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
