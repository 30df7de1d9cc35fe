//! Depthwise convolution (one input channel per group, `mult` output channels each)
//! as direct loops over each plane: per kernel tap, one multiply-add of a shifted input
//! row into an output row (forward), the same with the roles swapped (the adjoint: the
//! input gradient, or a depthwise transposed convolution), and one dot product per tap
//! and row (the weight gradient). Why: as GEMMs, a depthwise layer is thousands of
//! `mult x L x taps` products (taps = 9 for 3x3), each mostly overhead; measured 5x
//! torch's time forward and backward. With unit x-stride the row loops are contiguous
//! and vectorize; there the f32 forward sums all taps of 4 vectors of outputs in
//! registers, the padding given by masked loads (`forward_f32`, AVX2 or AVX-512 over
//! `ops::lanes`).
use super::im2col::for_rows;
use super::passes::Keep;
use super::Geom;
use crate::ops::float::Float;
use crate::ops::lanes::{Features, Kernel, Lanes};
use crate::ops::parallel::{for_chunks, par_ok};
use crate::ops::reduce::sum_slice;
use crate::ops::vector::{axpy, dot};

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
pub(crate) fn forward<T: Keep>(img: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
    if let (Some(img32), Some(w32)) = (T::as_f32(img), T::as_f32(w)) {
        if crate::ops::cpu::has_avx2_fma() && g.stride[2] == 1 {
            let b32 = bias.map(|b| T::as_f32(b).expect("bias has the operands' dtype"));
            return T::from_f32_vec(forward_f32(img32, w32, b32, g, w_rows)).expect("T is f32 here");
        }
    }
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

/// Vectors per register block: four independent chains of multiply-adds (one chain
/// would wait on each FMA's latency); 64 positions with AVX-512, 32 with AVX2.
const CHAINS: usize = 4;
/// The widest register block (AVX-512's), which `PaddedPlane` pads rows for.
const BLOCK: usize = 64;

/// A SIMD level's shape for this file's f32 kernels.
trait Level: Lanes {
    /// Vectors per tap in the weight gradient's accumulators: two with AVX-512 (18 of
    /// its 32 registers), one with AVX2 (9 of 16).
    const WG: usize = if Self::LANES == 16 { 2 } else { 1 };
}

impl<V: Lanes> Level for V {}

/// One output plane of the f32 forward as a `Kernel` (`plane::<V>`'s arguments).
struct Plane<'a, V: Lanes> {
    src: &'a [f32],
    w: &'a [f32],
    b: f32,
    dst: &'a mut [f32],
    geo: &'a RowGeo<'a, V::Mask>,
    rows_in: &'a mut [u16],
}

impl<W: Lanes> Kernel for Plane<'_, W> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        // The plane was built for the level it runs at (`forward_with::<V>` runs
        // `Plane::<V>` at V): W's code is V's.
        assert_eq!(V::LANES, W::LANES, "depthwise: a plane run at another level");
        // SAFETY: the caller's (`Kernel::body`: V's features, which are W's; `plane`'s
        // contract).
        unsafe { plane::<W>(self) }
    }
}

/// `wgrad_plane::<V>` as a `Kernel`: (a, padded, pp, g).
struct WgradPlane<'a>((&'a [f32], &'a [f32], &'a PaddedPlane, &'a Geom));

impl Kernel for WgradPlane<'_> {
    type Out = ([f32; 9], f32);
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) -> ([f32; 9], f32) {
        let (a, padded, pp, g) = self.0;
        // SAFETY: the caller's (`Kernel::body`: V's features; `wgrad_plane`'s contract).
        unsafe { wgrad_plane::<V>(a, padded, pp, g) }
    }
}

/// The f32 forward at x-stride 1 with AVX2 or AVX-512 (`forward_with` at the CPU's level).
fn forward_f32(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, w_rows: usize) -> Vec<f32> {
    crate::ops::lanes::at_cpu_lanes!(forward_with(img, w, bias, g, w_rows)).expect("depthwise forward (f32 kernel) without AVX2")
}

/// The f32 forward at x-stride 1, read from the image in place: each block of
/// `CHAINS` vectors of outputs of a row is summed over the taps in registers and stored
/// once, each tap's inputs loaded with a mask that zeroes the padding (lanes left of
/// the row, past its end, or a whole row outside the plane; those lanes are never
/// read). Why: the tap-by-tap passes (`axpy_row`) load and store each output row once
/// per tap (9 times for 3x3), 2.8x torch's time on 8x64x56x56; a zero-padded copy of
/// each plane instead of the masks cost a quarter of the time (allocating, clearing and
/// copying it).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn forward_with<V: Features>(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, w_rows: usize) -> Vec<f32> {
    let l = V::LANES;
    let (kv, iv, ov) = (g.kvol(), g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    let ow = g.outs[2];
    let [h, wd] = [g.ins[1] as isize, g.ins[2] as isize];
    // Each tap's (z, y, x) offset from an output position's window origin.
    let taps = g.tap_offsets();
    // Per tap and vector of output positions: the lanes whose input column lies inside
    // the row and whose output lies inside the output row.
    let nv = ow.div_ceil(l);
    let xmask: Vec<u16> = taps
        .iter()
        .flat_map(|t| {
            (0..nv).map(move |v| {
                (0..l)
                    .filter(|&j| {
                        let (o, x) = (v * l + j, (v * l + j) as isize + t[2]);
                        o < ow && (0..wd).contains(&x)
                    })
                    .fold(0u16, |m, j| m | 1 << j)
            })
        })
        .collect();
    // Each tap's offset in the plane from an output position's window origin, and the
    // range of the taps' z and y offsets.
    let offs: Vec<isize> = taps.iter().map(|t| (t[0] * h + t[1]) * wd + t[2]).collect();
    let span = |a: usize| taps.iter().fold((isize::MAX, isize::MIN), |(lo, hi), t| (lo.min(t[a]), hi.max(t[a])));
    let (zr, yr) = (span(0), span(1));
    // The vectors whose lanes are all live for every tap (each tap's inputs inside the
    // row, the outputs inside the output row): a contiguous run, often empty.
    let whole = (1u16 << (l - 1) << 1).wrapping_sub(1);
    let live = |v: usize| (0..taps.len()).all(|t| xmask[t * nv + v] == whole);
    let lo = (0..nv).find(|&v| live(v)).unwrap_or(nv);
    let hi = (lo..nv).find(|&v| !live(v)).unwrap_or(nv);
    // SAFETY: the caller chose a level the CPU has.
    let masks = unsafe { V::run(MaskTable::<V>(&xmask, std::marker::PhantomData)) };
    let geo = RowGeo { g, taps: &taps, offs: &offs, xmask: &xmask, masks: &masks, plain: (lo, hi), zr, yr };
    let par = par_ok(g.n * w_rows * ov * kv);
    crate::ops::parallel::filled_plain(g.n * w_rows * ov, |out: &mut [f32]| {
        for_chunks(out, ov.max(1), par, |p, dst| {
            let (n, o) = (p / w_rows, p % w_rows);
            let src = &img[(n * g.c + o / mult) * iv..][..iv];
            let b = bias.map_or(0.0, |b| b[o]);
            let mut rows_in = vec![0u16; kv];
            // SAFETY: the caller chose a level the CPU has; `plane`'s extents hold (`src`
            // is the input plane, `dst` the output plane, `geo` built from `g` above).
            unsafe { V::run(Plane::<V> { src, w: &w[o * kv..][..kv], b, dst, geo: &geo, rows_in: &mut rows_in }) };
        })
    })
}

/// Lane bits as the level's masks (`W`, the level it runs at), built inside the level's
/// features (AVX2's come from vector instructions).
struct MaskTable<'a, W>(&'a [u16], std::marker::PhantomData<W>);

impl<W: Lanes> Kernel for MaskTable<'_, W> {
    type Out = Vec<W::Mask>;
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) -> Vec<W::Mask> {
        assert_eq!(V::LANES, W::LANES, "depthwise: masks built at another level");
        // SAFETY: the caller's level, which is W's (`forward_with::<W>`).
        self.0.iter().map(|&m| unsafe { W::mask(m as u32) }).collect()
    }
}

/// What every plane of one depthwise forward shares: the geometry, each tap's (z, y, x)
/// offset from a window origin and offset in the plane, the per-tap lane masks of the
/// row's vectors (`xmask`), and the range of the taps' z and y offsets.
struct RowGeo<'a, M> {
    g: &'a Geom,
    taps: &'a [[isize; 3]],
    offs: &'a [isize],
    xmask: &'a [u16],
    /// `xmask` as the level's masks.
    masks: &'a [M],
    /// The row's vectors that need no mask (`row`).
    plain: (usize, usize),
    zr: (isize, isize),
    yr: (isize, isize),
}

/// One output plane: its rows through `row`, the interior ones (every tap's input row
/// inside the plane) without the per-row test. One call per plane, not per row: a call
/// per 56-wide row spent a fifth of the pass on entering the kernel.
///
/// # Safety
/// The CPU has `V`'s features; `src` is the input plane (`g.ivol()` floats), `dst` the
/// output plane (`g.ovol()`), `w` the plane's `g.kvol()` taps, `rows_in` `g.kvol()`
/// entries, and `geo` describes `g`.
#[inline(always)]
unsafe fn plane<V: Lanes>(k: Plane<'_, V>) {
    let Plane { src, w, b, dst, geo, rows_in } = k;
    let g = geo.g;
    let [od, oh, ow] = g.outs;
    let [d, h, wd] = g.ins.map(|v| v as isize);
    let (zr, yr) = (geo.zr, geo.yr);
    for oz in 0..od {
        for oy in 0..oh {
            let (z0, y0) = ((oz * g.stride[0]) as isize, (oy * g.stride[1]) as isize);
            let base = (z0 * h + y0) * wd;
            let dst = &mut dst[(oz * oh + oy) * ow..][..ow];
            let inside = (0..d).contains(&(z0 + zr.0)) && (0..d).contains(&(z0 + zr.1));
            // SAFETY: the caller's level; the masks select only inputs inside the plane
            // (`xmask`, and every tap's row inside the plane or masked off by `rows_in`).
            unsafe {
                if inside && (0..h).contains(&(y0 + yr.0)) && (0..h).contains(&(y0 + yr.1)) {
                    row::<V, false>(src, base, geo.offs, &[], (geo.xmask, geo.masks, geo.plain), w, b, dst)
                } else {
                    for (r, t) in rows_in.iter_mut().zip(geo.taps) {
                        let inside = (0..d).contains(&(z0 + t[0])) && (0..h).contains(&(y0 + t[1]));
                        *r = if inside { u16::MAX } else { 0 };
                    }
                    row::<V, true>(src, base, geo.offs, rows_in, (geo.xmask, geo.masks, geo.plain), w, b, dst)
                }
            };
        }
    }
}

/// A zero-padded copy of one input plane (1-3 d) for the f32 register-block kernels:
/// rows of `pw` floats, `ph` rows per depth slice, `pd` slices, wide and deep enough that
/// every tap's loads for whole 64-lane blocks of every output row stay inside it.
struct PaddedPlane {
    pw: usize,
    ph: usize,
    pd: usize,
    /// Each tap's offset from an output row's origin.
    offs: Vec<usize>,
}

impl PaddedPlane {
    fn new(g: &Geom) -> PaddedPlane {
        let reach = |a: usize| g.dil[a] * (g.k[a] - 1);
        let pw = (g.ins[2] + 2 * g.pad[2]).max(g.outs[2].next_multiple_of(BLOCK) + reach(2));
        let ph = (g.ins[1] + 2 * g.pad[1]).max((g.outs[1] - 1) * g.stride[1] + reach(1) + 1);
        let pd = (g.ins[0] + 2 * g.pad[0]).max((g.outs[0] - 1) * g.stride[0] + reach(0) + 1);
        let offs = (0..g.kvol())
            .map(|t| {
                let (kz, ky, kx) = (t / (g.k[1] * g.k[2]), (t / g.k[2]) % g.k[1], t % g.k[2]);
                (kz * g.dil[0] * ph + ky * g.dil[1]) * pw + kx * g.dil[2]
            })
            .collect();
        PaddedPlane { pw, ph, pd, offs }
    }
    /// The padded copy of `src` (one input plane).
    fn copy(&self, src: &[f32], g: &Geom) -> Vec<f32> {
        let mut padded = vec![0f32; self.pd * self.ph * self.pw];
        for z in 0..g.ins[0] {
            for y in 0..g.ins[1] {
                let at = ((z + g.pad[0]) * self.ph + y + g.pad[1]) * self.pw + g.pad[2];
                padded[at..at + g.ins[2]].copy_from_slice(&src[(z * g.ins[1] + y) * g.ins[2]..][..g.ins[2]]);
            }
        }
        padded
    }
    /// Where output row (oz, oy)'s window origin lies in the copy.
    fn row(&self, g: &Geom, oz: usize, oy: usize) -> usize {
        (oz * g.stride[0] * self.ph + oy * g.stride[1]) * self.pw
    }
}

/// The f32 weight gradient of a 3x3 (9-tap) depthwise convolution at x-stride 1 with
/// AVX2 or AVX-512: per output channel, each block of `WG` vectors of each row of `a` is
/// loaded once and multiplied into all 9 taps' accumulators from the padded input
/// plane; the bias gradient sums the same blocks. Why: the tap-by-tap dot products read
/// every row of `a` and of the input 9 times.
fn weight_grad_f32(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    crate::ops::lanes::at_cpu_lanes!(weight_grad_with(a, img, g, w_rows, bias))
        .expect("depthwise weight gradient (f32 kernel) without AVX2")
}

/// `weight_grad_f32` at the level `V`, which the CPU must have.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn weight_grad_with<V: Features>(a: &[f32], img: &[f32], g: &Geom, w_rows: usize, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    let pp = PaddedPlane::new(g);
    let per_channel = |o: usize| -> ([f32; 9], f32) {
        let mut sums = ([0f32; 9], 0f32);
        for n in 0..g.n {
            let padded = pp.copy(&img[(n * g.c + o / mult) * iv..][..iv], g);
            let ap = &a[(n * w_rows + o) * ov..][..ov];
            // SAFETY: the caller chose a level the CPU has; the padded plane covers every
            // tap's loads for whole blocks of every output row (`PaddedPlane`).
            let (dw, db) = unsafe { V::run(WgradPlane((ap, &padded, &pp, g))) };
            sums.0.iter_mut().zip(dw).for_each(|(s, d)| *s += d);
            sums.1 += db;
        }
        sums
    };
    let parts: Vec<([f32; 9], f32)> = crate::ops::parallel::map_indices(w_rows, par_ok(g.n * w_rows * ov * 9), per_channel);
    let db = bias.then(|| parts.iter().map(|p| p.1).collect());
    (parts.into_iter().flat_map(|p| p.0).collect(), db)
}

/// One sample's plane: `dw[t] = sum_x a[x] * src[origin(x) + offs[t]]` and the sum of `a`.
///
/// # Safety
/// The CPU has `V`'s features; `padded` is `pp`'s copy of the input plane for `g`.
#[inline(always)]
unsafe fn wgrad_plane<V: Level>(a: &[f32], padded: &[f32], pp: &PaddedPlane, g: &Geom) -> ([f32; 9], f32) {
    let (l, wg) = (V::LANES, V::WG);
    let [od, oh, ow] = g.outs;
    // SAFETY: the caller's level and extents (commented at the loads).
    unsafe {
        let mut acc = [[V::zero(); 2]; 9];
        let mut asum = V::zero();
        let mut offs = [0usize; 9];
        offs.copy_from_slice(&pp.offs[..9]);
        for oz in 0..od {
            for oy in 0..oh {
                let arow = &a[(oz * oh + oy) * ow..][..ow];
                let src = &padded[pp.row(g, oz, oy)..];
                for x0 in (0..ow).step_by(wg * l) {
                    // Lanes past the row's end are masked off on both sides (an input
                    // there, infinite, would otherwise make 0 * inf = NaN).
                    let mut live = [0u32; 2];
                    let mut av = [V::zero(); 2];
                    for v in 0..wg {
                        let at = x0 + l * v;
                        live[v] = if at >= ow { 0 } else { ((1u64 << (ow - at).min(l)) - 1) as u32 };
                        // The mask keeps the load inside the row of `a`.
                        av[v] = V::load_masked(arow.as_ptr().add(at.min(ow)), live[v]);
                        asum = asum.add(av[v]);
                    }
                    for (t, row) in acc.iter_mut().enumerate() {
                        let p = src.as_ptr().add(offs[t] + x0);
                        for v in 0..wg {
                            // The taps' loads for whole blocks are inside `padded`.
                            row[v] = av[v].fmadd(V::load_masked(p.add(l * v), live[v]), row[v]);
                        }
                    }
                }
            }
        }
        let mut dw = [0f32; 9];
        for (d, r) in dw.iter_mut().zip(&acc) {
            *d = if wg == 2 { r[0].add(r[1]).sum() } else { r[0].sum() };
        }
        (dw, asum.sum())
    }
}

/// One output row: `dst` = `b` + the sum over taps of `w[t]` times the input at `src`
/// offset `base + offs[t]` + the output position, with `ROWS` only for the taps whose
/// `rows_in[t]` is set. The vectors `plain.0..plain.1` (whose every tap's inputs lie
/// inside the row and outputs inside `dst`) run `CHAINS` at a time with plain loads and
/// stores (a fused load-multiply-add per tap and vector); the others two at a time
/// with the lane masks of `xmask` (row-major by tap, `dst.len().div_ceil(LANES)` per
/// tap; `masks` the same as the level's masks), or the whole row at once (`whole`)
/// where only its first and last vectors need masks. Why: a mask test on every load
/// made the loop issue-bound (6-7 instructions per tap and vector; the row's edges are
/// the only vectors that need one).
///
/// # Safety
/// The CPU has `V`'s features; every selected lane's input is inside `src`, and every
/// input of the plain vectors.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn row<V: Lanes, const ROWS: bool>(
    src: &[f32],
    base: isize,
    offs: &[isize],
    rows_in: &[u16],
    (xmask, masks, plain): (&[u16], &[V::Mask], (usize, usize)),
    w: &[f32],
    b: f32,
    dst: &mut [f32],
) {
    let l = V::LANES;
    let nv = dst.len().div_ceil(l);
    let at = src.as_ptr().wrapping_offset(base);
    let out = dst.as_mut_ptr();
    // SAFETY: the caller's level and extents; vectors v < nv hold outputs inside `dst`
    // (whole ones for the plain vectors).
    unsafe {
        // The usual row: masked first and last vectors around plain ones, few enough to
        // hold every vector's sum at once (two chains of one vector each waited on the
        // multiply-add latency: a third of the pass on 56-wide rows).
        if plain == (1, nv.saturating_sub(1)) {
            let args = (at, (offs, rows_in), (masks, nv), w, b, dst.len(), out);
            match nv {
                3 => return whole::<V, 3, ROWS>(args),
                4 => return whole::<V, 4, ROWS>(args),
                5 => return whole::<V, 5, ROWS>(args),
                6 => return whole::<V, 6, ROWS>(args),
                7 => return whole::<V, 7, ROWS>(args),
                8 => return whole::<V, 8, ROWS>(args),
                _ => {}
            }
        }
        let mut v = plain.0;
        while v + CHAINS <= plain.1 {
            span::<V, CHAINS, ROWS>(at, (offs, rows_in), w, b, v * l, out);
            v += CHAINS;
        }
        match plain.1 - v {
            1 => span::<V, 1, ROWS>(at, (offs, rows_in), w, b, v * l, out),
            2 => span::<V, 2, ROWS>(at, (offs, rows_in), w, b, v * l, out),
            3 => span::<V, 3, ROWS>(at, (offs, rows_in), w, b, v * l, out),
            _ => {}
        }
        // The edges two at a time (usually the row's first and last vectors).
        let mut es = (0..plain.0).chain(plain.1..nv);
        while let Some(v) = es.next() {
            let xm = (xmask, masks, nv);
            match es.next() {
                Some(u) => edges::<V, 2, ROWS>(at, (offs, rows_in), xm, w, b, ([v, u], dst.len()), out),
                None => edges::<V, 1, ROWS>(at, (offs, rows_in), xm, w, b, ([v], dst.len()), out),
            }
        }
    }
}

/// A row of `N` vectors whose first and last take masked loads and the others plain
/// ones: all `N` sums in registers over the taps, each tap's masked loads without a
/// branch (an empty mask reads nothing).
///
/// # Safety
/// As `row`, with `row`'s plain vectors `1..N - 1` and `N` = `nv`.
#[inline(always)]
#[allow(clippy::type_complexity)]
unsafe fn whole<V: Lanes, const N: usize, const ROWS: bool>(
    (at, (offs, rows_in), (masks, nv), w, b, len, out): (*const f32, (&[isize], &[u16]), (&[V::Mask], usize), &[f32], f32, usize, *mut f32),
) {
    let l = V::LANES;
    // SAFETY: the caller's.
    unsafe {
        let mut acc = [V::splat(b); N];
        for (t, (&off, &wt)) in offs.iter().zip(w).enumerate() {
            if ROWS && rows_in[t] == 0 {
                continue;
            }
            let (wv, p) = (V::splat(wt), at.wrapping_offset(off));
            acc[0] = wv.fmadd(V::load_mask(p, masks[t * nv]), acc[0]);
            for (v, a) in acc.iter_mut().enumerate().take(N - 1).skip(1) {
                *a = wv.fmadd(V::load(p.wrapping_add(v * l)), *a);
            }
            acc[N - 1] = wv.fmadd(V::load_mask(p.wrapping_add((N - 1) * l), masks[t * nv + N - 1]), acc[N - 1]);
        }
        for (v, a) in acc.iter().enumerate().take(N - 1) {
            a.store(out.add(v * l));
        }
        let live = (len - (N - 1) * l).min(l);
        acc[N - 1].store_masked(out.add((N - 1) * l), ((1u64 << live) - 1) as u32);
    }
}

/// `N` whole vectors of outputs from position `x0`: every tap's inputs loaded plainly.
///
/// # Safety
/// As `row`, for the plain vectors `x0 / LANES..+ N`.
#[inline(always)]
unsafe fn span<V: Lanes, const N: usize, const ROWS: bool>(
    at: *const f32,
    (offs, rows_in): (&[isize], &[u16]),
    w: &[f32],
    b: f32,
    x0: usize,
    out: *mut f32,
) {
    let l = V::LANES;
    // SAFETY: the caller's.
    unsafe {
        let mut acc = [V::splat(b); N];
        for (t, (&off, &wt)) in offs.iter().zip(w).enumerate() {
            if ROWS && rows_in[t] == 0 {
                continue;
            }
            let (wv, p) = (V::splat(wt), at.wrapping_offset(off + x0 as isize));
            for (v, a) in acc.iter_mut().enumerate() {
                *a = wv.fmadd(V::load(p.add(v * l)), *a);
            }
        }
        for (v, a) in acc.iter().enumerate() {
            a.store(out.add(x0 + v * l));
        }
    }
}

/// Output vectors `vs` of a row of `len` (its edges), summed side by side (one
/// vector's taps are a chain of dependent multiply-adds): each tap's inputs loaded
/// with its lane mask (`masks`, prebuilt; lanes outside the input row or past the
/// output row are neither read nor faulted on), each vector stored up to `len`.
///
/// # Safety
/// As `row`, for vectors `vs[i] < nv`; `masks[t * nv + v]` is the mask of `xmask`'s bits.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn edges<V: Lanes, const N: usize, const ROWS: bool>(
    at: *const f32,
    (offs, rows_in): (&[isize], &[u16]),
    (xmask, masks, nv): (&[u16], &[V::Mask], usize),
    w: &[f32],
    b: f32,
    (vs, len): ([usize; N], usize),
    out: *mut f32,
) {
    let l = V::LANES;
    // SAFETY: the caller's.
    unsafe {
        let mut acc = [V::splat(b); N];
        for (t, (&off, &wt)) in offs.iter().zip(w).enumerate() {
            if ROWS && rows_in[t] == 0 {
                continue;
            }
            let wv = V::splat(wt);
            for (a, &v) in acc.iter_mut().zip(&vs) {
                if xmask[t * nv + v] != 0 {
                    *a = wv.fmadd(V::load_mask(at.wrapping_offset(off + (v * l) as isize), masks[t * nv + v]), *a);
                }
            }
        }
        for (a, &v) in acc.iter().zip(&vs) {
            let live = (len - v * l).min(l);
            a.store_masked(out.add(v * l), ((1u64 << live) - 1) as u32);
        }
    }
}

/// img (N, C, *ins) = the adjoint of `forward` applied to a (N, C*mult, *outs) (+ bias):
/// each output plane's taps scattered back onto its input plane.
pub(crate) fn adjoint<T: Keep>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
    let (kv, iv, ov) = (g.kvol(), g.ivol(), g.ovol());
    let mult = w_rows / g.c;
    // Stride 1, one output channel per input channel, padding within the kernel's reach:
    // the adjoint is the depthwise forward of `a` with each kernel flipped and padded by
    // reach - pad (the same flipped convolution as every stride-1 adjoint's,
    // `implicit::flipped_geom`), which the f32 forward runs in registers.
    let flipped = (mult == 1 && crate::ops::cpu::has_avx2_fma()).then(|| super::implicit::flipped_geom(g, w_rows)).flatten();
    if let (Some(a32), Some(w32), Some(adj)) = (T::as_f32(a), T::as_f32(w), flipped) {
        let b32 = bias.map(|b| T::as_f32(b).expect("bias has the operands' dtype"));
        let wf = super::implicit::flip_kernel(w32, g, w_rows);
        return T::from_f32_vec(forward_f32(a32, &wf, b32, &adj, w_rows)).expect("T is f32 here");
    }
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
pub(crate) fn weight_grad<T: Keep>(a: &[T], img: &[T], g: &Geom, w_rows: usize, bias: bool) -> (Vec<T>, Option<Vec<T>>) {
    if let (Some(a32), Some(img32), true) =
        (T::as_f32(a), T::as_f32(img), crate::ops::cpu::has_avx2_fma() && g.stride[2] == 1 && g.kvol() == 9)
    {
        let (dw, db) = weight_grad_f32(a32, img32, g, w_rows, bias);
        let wrap = |v: Vec<f32>| T::from_f32_vec(v).expect("T is f32 here");
        return (wrap(dw), db.map(wrap));
    }
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
    let parts: Vec<(Vec<T>, T)> = crate::ops::parallel::map_indices(w_rows, par_ok(g.n * w_rows * ov * kv), per_channel);
    let db = bias.then(|| parts.iter().map(|p| p.1).collect());
    (parts.into_iter().flat_map(|p| p.0).collect(), db)
}

#[cfg(test)]
mod tests {
    use super::super::passes::{conv_adj, conv_fwd, conv_wgrad, Buf};
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::ops::lanes::{X16, X8};

    /// The direct loops (and the f32 register-block forward at x-stride 1) equal the GEMM
    /// paths (checked against PyTorch's fixtures) in all three directions, with channel
    /// multipliers, strides, dilations, padding, bias and 1-3 d geometries.
    #[test]
    fn matches_the_gemm_paths() {
        // (n, c, mult, ins, k, stride, pad, dil)
        type Case = (usize, usize, usize, [usize; 3], [usize; 3], [usize; 3], [usize; 3], [usize; 3]);
        let cases: [Case; 8] = [
            // Padding past the window's reach: whole output rows and slices of padding only.
            (1, 2, 1, [2, 4, 20], [1, 3, 3], [1, 1, 1], [1, 3, 4], [1, 1, 1]),
            (2, 4, 1, [1, 7, 9], [1, 3, 3], [1, 1, 1], [0, 1, 1], [1, 1, 1]),
            // Rows past one 64-wide register block (and a partial second one); y-stride 2
            // with x-stride 1, dilation, no padding.
            (1, 2, 2, [1, 6, 70], [1, 3, 5], [1, 2, 1], [0, 1, 2], [1, 1, 1]),
            (2, 3, 1, [1, 9, 130], [1, 3, 3], [1, 1, 1], [0, 0, 0], [1, 2, 3]),
            (1, 3, 2, [1, 8, 11], [1, 3, 5], [1, 2, 2], [0, 1, 2], [1, 1, 1]),
            (2, 5, 1, [1, 9, 9], [1, 3, 3], [1, 1, 1], [0, 2, 2], [1, 2, 2]),
            (3, 2, 3, [1, 1, 20], [1, 1, 4], [1, 1, 3], [0, 0, 1], [1, 1, 1]),
            (1, 3, 1, [4, 5, 6], [3, 3, 3], [2, 1, 1], [1, 1, 1], [1, 1, 1]),
        ];
        let mut rnd = crate::ops::test_stream(21);
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
            // Each SIMD level this CPU has (the calls above took the best one).
            #[cfg(target_arch = "x86_64")]
            if g.stride[2] == 1 {
                let levels: [(bool, Fwd, Wg); 2] = [
                    (crate::ops::cpu::has_avx2_fma(), forward_with::<X8>, weight_grad_with::<X8>),
                    (crate::ops::cpu::has_avx512(), forward_with::<X16>, weight_grad_with::<X16>),
                ];
                for (i, (has, fwd, wg)) in levels.into_iter().enumerate() {
                    if !has {
                        continue;
                    }
                    let what = format!("{what} level {i}");
                    super::super::assert_close(
                        &fwd(&img, &w, Some(&bo), &g, w_rows),
                        &conv_fwd(&img, &w, Some(&bo), &g, w_rows, None),
                        &what,
                    );
                    if g.kvol() == 9 {
                        let (dw, db) = wg(&a, &img, &g, w_rows, true);
                        super::super::assert_close(&dw, &want, &what);
                        match sink.get() {
                            Some(Buf::F32(b)) => super::super::assert_close(&db.unwrap(), b, &what),
                            _ => panic!("bias sums"),
                        }
                    }
                }
            }
        }
    }

    type Fwd = fn(&[f32], &[f32], Option<&[f32]>, &Geom, usize) -> Vec<f32>;
    type Wg = fn(&[f32], &[f32], &Geom, usize, bool) -> (Vec<f32>, Option<Vec<f32>>);
}
