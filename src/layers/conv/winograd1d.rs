//! The f32 forward of a 1-D, stride-1 convolution with 2 to 7 taps as Winograd
//! F(m, r) over 8 points (`m = 9 - r` outputs per tile: F(6, 3), F(4, 5), F(2, 7)):
//! each run of `m` outputs ("tile") is computed from the 8 inputs under it as
//! `A^T [(G g) . (B^T d)]`, so 8 products per (tile, input channel, output channel)
//! replace the `m r` multiply-adds of the direct sum (2.25x fewer at 3 taps, 2.5x at 5,
//! 1.75x at 7). The element-wise products over all channels are 8 GEMMs, one per point
//! `xi`: `M_xi (tiles x Co) = V_xi (tiles x C) @ U_xi (C x Co)`, on the 2-D kernel's
//! register tiles (`winograd::product_tile_rows`).
//!
//! Why: the direct kernel (`direct`) and oneDNN both run a 64 -> 64 channel, 5-tap
//! layer near the FMA peak (7.8 ms each for 8 x 64 x 4096 on two Zen 4 cores), so only
//! fewer multiplies get past it. As in the 2-D kernel, a block of tiles is copied
//! channels-last (zero-padded) into a slab, the transforms run in registers across
//! channels (one vector: 16 with AVX-512, 8 with AVX2), and M is transformed back and
//! copied to the (N, C, L) output, within buffers sized to stay in L2.
//!
//! The points are 0, +-1, +-2, +-1/2 and infinity, for every tap count: `B^T` depends on
//! the points alone (it is the 8-point interpolation's transpose, the same matrix as
//! the common F(6, 3)'s), `G` and `A^T` on the taps and outputs (made in f64 by
//! `g_matrix` and `at_scales`). Rounding: about 1e-6 relative to the outputs' magnitudes
//! with 64 channels (checked against float64 in the tests), inside the 1e-4 conv
//! tolerance. Outputs that come out non-finite (the transforms subtract, so an infinite
//! input can give NaN where the direct sum is infinite) make the caller run a direct
//! method instead.
use super::winograd::{grow, product_tile_rows};
use super::Geom;
use crate::ops::lanes::{Features, Kernel, Lanes};
use crate::ops::parallel::SyncPtr;
use std::cell::RefCell;

/// Points per tile (inputs under a tile, and GEMMs).
const ALPHA: usize = 8;
/// The finite points; the eighth is infinity.
const POINTS: [f64; ALPHA - 1] = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5];
/// Channels from which the kernel runs on each side (fewer leave the GEMMs too shallow
/// to pay for the transforms, as in the 2-D kernel).
const MIN_CHANNELS: usize = 16;

/// Whether this kernel runs the forward: AVX2 and FMA (or AVX-512), one group, a 1-D
/// window (a 2-D one with a single row, unpadded along it, too) of 2 to 7 taps at stride
/// and dilation 1, 16+ input and output channels, and at least one whole tile of outputs.
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    crate::ops::cpu::has_avx2_fma()
        && g.groups == 1
        && g.ins[..2] == [1, 1]
        && g.outs[..2] == [1, 1]
        && g.k[..2] == [1, 1]
        && (2..=ALPHA - 1).contains(&g.k[2])
        && g.stride == [1, 1, 1]
        && g.dil == [1, 1, 1]
        && g.c >= MIN_CHANNELS
        && w_rows >= MIN_CHANNELS
        && g.outs[2] >= ALPHA + 1 - g.k[2]
}

/// `G` (8 x r) for `r` taps: row j = (p_j^k / prod_{l != j} (p_j - p_l))_k for the
/// finite points, and the infinity row picks the last tap (Toom-Cook; see the module
/// doc). Columns past `r` are zero.
fn g_matrix(r: usize) -> [[f64; ALPHA - 1]; ALPHA] {
    let mut g = [[0.0; ALPHA - 1]; ALPHA];
    for (j, &p) in POINTS.iter().enumerate() {
        let f: f64 = POINTS.iter().enumerate().filter(|&(l, _)| l != j).map(|(_, &q)| p - q).product();
        for (k, e) in g[j].iter_mut().enumerate().take(r) {
            *e = p.powi(k as i32) / f;
        }
    }
    g[ALPHA - 1][r - 1] = 1.0;
    g
}

/// `B^T d` (8 x 8): row j holds the coefficients of `prod_{l != j} (x - p_l)` for the
/// finite points, the last row those of `prod_l (x - p_l)`; written out with the rows'
/// shared terms (pairs of rows differ in the sign of the odd powers).
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
unsafe fn bt<V: Lanes>(d: [V; ALPHA]) -> [V; ALPHA] {
    // SAFETY: the caller's level.
    unsafe {
        let s = V::splat;
        let t1 = s(4.25).fnmadd(d[4], d[2].add(d[6]));
        let t2 = s(4.25).fnmadd(d[3], d[1].add(d[5]));
        let t3 = s(1.25).fnmadd(d[4], s(0.25).fmadd(d[2], d[6]));
        let t4 = s(2.5).fnmadd(d[3], s(0.5).fmadd(d[1], d[5].add(d[5])));
        let t5 = s(5.0).fnmadd(d[4], s(4.0).fmadd(d[2], d[6]));
        let t6 = s(2.5).fnmadd(d[3], s(2.0).fmadd(d[1], s(0.5).mul(d[5])));
        [
            s(5.25).fmadd(d[2].sub(d[4]), d[6].sub(d[0])),
            t1.add(t2),
            t1.sub(t2),
            t3.add(t4),
            t3.sub(t4),
            t5.add(t6),
            t5.sub(t6),
            s(5.25).fmadd(d[3].sub(d[5]), d[7].sub(d[1])),
        ]
    }
}

/// `A^T`'s scales for output i: `2^i` and `2^-i` (row i of `A^T` is
/// `(0^i, 1, (-1)^i, 2^i, (-2)^i, 2^-i, (-2)^-i, [i == m - 1])`).
fn at_scales(m: usize) -> [(f32, f32); ALPHA - 1] {
    std::array::from_fn(|i| if i < m { (2f32.powi(i as i32), 0.5f32.powi(i as i32)) } else { (0.0, 0.0) })
}

/// The geometry one block needs.
struct Plan {
    c: usize,
    co: usize,
    /// Input channels rounded up to whole vectors (the slab's and V's position stride),
    /// and output channels to whole strips of U (M's and the output copy's).
    cp: usize,
    cop: usize,
    /// Input and output lengths, the left padding, outputs per tile, tiles per sample.
    lin: usize,
    lout: usize,
    pad: usize,
    m: usize,
    tn: usize,
    scales: [(f32, f32); ALPHA - 1],
}

thread_local! {
    /// Each thread's block buffers (input slab, V, M, channels-last output), reused.
    static BUFS: RefCell<[Vec<f32>; 4]> = const { RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()]) };
}

/// `out (N, Co, L') = conv(img (N, C, L), w (Co, C, r)) (+ bias)` where `applies` holds;
/// None where an output is not finite (the caller then runs a direct method).
pub(crate) fn conv_fwd_winograd1d(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Option<Vec<f32>> {
    crate::ops::lanes::at_cpu_lanes!(fwd(img, w, bias, g, co, par)).expect("conv (winograd1d) without AVX2 (`applies` says no)")
}

/// `U_xi = (G g)_xi` per point, packed for `product_tile_rows`: panel xi holds strips of
/// `nr` output channels (zeros past co), input-channel-major, strip after strip. Summed
/// in f64, a panel per task (at 512 -> 512 channels and 3 taps the transform was 15% of
/// the forward on one thread).
fn kernel_transform(w: &[f32], c: usize, co: usize, r: usize, nr: usize, par: bool) -> Vec<f32> {
    let gm = g_matrix(r);
    let strips = co.div_ceil(nr);
    let mut up = vec![0f32; ALPHA * strips * c * nr];
    crate::ops::parallel::for_chunks(&mut up, strips * c * nr, par, |xi, panel| {
        let row = &gm[xi][..r];
        for o in 0..co {
            let strip = &mut panel[o / nr * c * nr..][..c * nr];
            for (ch, taps) in w[o * c * r..][..c * r].chunks_exact(r).enumerate() {
                let u: f64 = taps.iter().zip(row).map(|(&x, &k)| x as f64 * k).sum();
                strip[ch * nr + o % nr] = u as f32;
            }
        }
    });
    up
}

/// `conv_fwd_winograd1d` at the level `V`, which the CPU must have.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn fwd<V: Features>(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Option<Vec<f32>> {
    let (c, r) = (g.c, g.k[2]);
    let nr = 2 * V::LANES;
    let (lin, lout) = (g.ins[2], g.outs[2]);
    let m = ALPHA + 1 - r;
    let p = Plan {
        c,
        co,
        cp: c.next_multiple_of(V::LANES),
        cop: co.next_multiple_of(nr),
        lin,
        lout,
        pad: g.pad[2],
        m,
        tn: lout.div_ceil(m),
        scales: at_scales(m),
    };
    assert!(img.len() >= g.n * c * lin && w.len() >= co * c * r, "conv (winograd1d): operand sizes");
    let up = kernel_transform(w, c, co, r, nr, par);
    let mut bias_v = vec![0f32; p.cop];
    if let Some(b) = bias {
        bias_v[..co].copy_from_slice(&b[..co]);
    }
    // Blocks of tiles of one sample: as many as keep V and M within the level's share
    // of L2 (as the 2-D kernel's: 1 MiB with AVX-512, 512 KiB with AVX2), and at least
    // two per thread when threaded. With wide channels that is few tiles, and every
    // block streams all of U (8 C Co floats: 8 MiB at 512 -> 512) for them: there,
    // up to `REUSE` tiles, as long as one point's V and M (what a GEMM touches) stay
    // within 4x that share (3 taps on 2 x 2048 at 512 -> 512 channels: 30.3 -> 25.0 ms;
    // 8 x 1024 at 128 -> 128: 3.6 -> 2.9 ms).
    const REUSE: usize = 192;
    let block_floats: usize = if V::LANES == 16 { 1 << 18 } else { 1 << 17 };
    let threads = if par { rayon::current_num_threads() } else { 1 };
    let per_tile = p.cp + p.cop;
    let cap = (block_floats / (ALPHA * per_tile)).max(REUSE.min(4 * block_floats / ALPHA / per_tile)).max(1);
    let per_sample = p.tn.div_ceil(cap).max((2 * threads).div_ceil(g.n.max(1))).min(p.tn).max(1);
    let tb = p.tn.div_ceil(per_sample);
    let per_sample = p.tn.div_ceil(tb);
    let finite = std::sync::atomic::AtomicBool::new(true);
    let out = crate::ops::parallel::filled_plain(g.n * co * lout, |out: &mut [f32]| {
        let dst = SyncPtr(out.as_mut_ptr());
        let task = |b: usize| {
            let (n, t0) = (b / per_sample, (b % per_sample) * tb);
            let block = (n, t0, (t0 + tb).min(p.tn));
            let ok = BUFS.with(|bufs| {
                let bufs = &mut *bufs.borrow_mut();
                // SAFETY: the block's tiles cover outputs of sample n that no other block
                // writes; `img` holds the samples (asserted above), `up` the packed
                // panels and `bias_v` cop floats; the caller chose a level the CPU has.
                unsafe { V::run(Block { p: &p, img, up: &up, bias: &bias_v, block, out: dst.ptr(), bufs }) }
            });
            if !ok {
                finite.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        };
        crate::ops::parallel::for_tasks(g.n * per_sample, par, task);
    });
    finite.into_inner().then_some(out)
}

/// One block of tiles `t0..t1` of sample `n` (`block`), as a `Kernel`: whether every
/// output it wrote was finite.
struct Block<'a> {
    p: &'a Plan,
    img: &'a [f32],
    up: &'a [f32],
    bias: &'a [f32],
    block: (usize, usize, usize),
    out: *mut f32,
    bufs: &'a mut [Vec<f32>; 4],
}

impl Kernel for Block<'_> {
    type Out = bool;
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) -> bool {
        // SAFETY: the caller's (`Kernel::body`: V's features; `fwd`'s task).
        unsafe {
            if V::LANES == 16 {
                compute::<V, 12>(self)
            } else {
                compute::<V, 6>(self)
            }
        }
    }
}

/// The block's input transform, its 8 GEMMs on `TR x 2 LANES` register tiles, and its
/// output transform into the output rows.
///
/// # Safety
/// The CPU has `V`'s features; as `Block`'s fields say; `2 TR` accumulators fit the
/// level's registers.
#[inline(always)]
unsafe fn compute<V: Lanes, const TR: usize>(k: Block<'_>) -> bool {
    let (p, (n, t0, t1)) = (k.p, k.block);
    let (l, nr) = (V::LANES, 2 * V::LANES);
    let tiles = t1 - t0;
    // Tiles rounded up to whole register tiles: the rows past `tiles` are computed from
    // stale V rows and never read.
    let nt = tiles.next_multiple_of(TR);
    let wn = tiles * p.m + ALPHA - 1;
    let [slab, v, mm, cl] = k.bufs;
    grow(slab, wn * p.cp);
    grow(v, ALPHA * nt * p.cp);
    grow(mm, ALPHA * nt * p.cop);
    grow(cl, tiles * p.m * p.cop);
    // The slab: position i is input position t0 m - pad + i, channels-last; zeros in the
    // padding. Lanes past c are never read (the GEMMs' depth is c). Rows a..b hold image
    // positions; a block may lie wholly in a padding wider than itself (a == b).
    let s = (t0 * p.m) as isize - p.pad as isize;
    let a = (-s).clamp(0, wn as isize) as usize;
    let b = (p.lin as isize - s).clamp(a as isize, wn as isize) as usize;
    slab[..a * p.cp].fill(0.0);
    slab[b * p.cp..wn * p.cp].fill(0.0);
    if b > a {
        // SAFETY: positions s + a .. s + b (inside 0..lin by the clamps) of sample n's c
        // rows (inside `img`: `fwd`'s assertion); slab rows a..b of cp floats (grown above).
        unsafe {
            crate::ops::transpose::transpose(
                k.img.as_ptr().add(n * p.c * p.lin + (s + a as isize) as usize),
                p.lin,
                p.c,
                b - a,
                slab.as_mut_ptr().add(a * p.cp),
                p.cp,
            )
        };
    }
    // SAFETY (the three passes): slab rows t m + j < wn for j < 8; V_xi rows < nt of cp
    // floats, M_xi rows < nt of cop; U's panels (`kernel_transform`); `cl` rows < tiles m
    // of cop; the CPU has V's features (the caller's).
    unsafe {
        let (sp, vp) = (slab.as_ptr(), v.as_mut_ptr());
        for t in 0..tiles {
            for c0 in (0..p.cp).step_by(l) {
                let d: [V; ALPHA] = std::array::from_fn(|j| V::load(sp.add((t * p.m + j) * p.cp + c0)));
                for (xi, e) in bt(d).into_iter().enumerate() {
                    e.store(vp.add((xi * nt + t) * p.cp + c0));
                }
            }
        }
        let strips = p.cop / nr;
        for xi in 0..ALPHA {
            for st in 0..strips {
                let panel = k.up.as_ptr().add((xi * strips + st) * p.c * nr);
                for t in (0..nt).step_by(TR) {
                    product_tile_rows::<V, TR>(
                        p.c,
                        v.as_ptr().add((xi * nt + t) * p.cp),
                        p.cp,
                        panel,
                        mm.as_mut_ptr().add((xi * nt + t) * p.cop + st * nr),
                        p.cop,
                    );
                }
            }
        }
        // 0 * x is 0 for finite x and NaN otherwise: the sum stays 0 while all are finite.
        let (zero, mut probe) = (V::zero(), V::zero());
        let (mp, cp_out) = (mm.as_ptr(), cl.as_mut_ptr());
        for t in 0..tiles {
            let live = (p.lout - (t0 + t) * p.m).min(p.m);
            for c0 in (0..p.cop).step_by(l) {
                let x: [V; ALPHA] = std::array::from_fn(|xi| V::load(mp.add((xi * nt + t) * p.cop + c0)));
                let bv = V::load(k.bias.as_ptr().add(c0));
                let (s1, d1) = (x[1].add(x[2]), x[1].sub(x[2]));
                let (s2, d2) = (x[3].add(x[4]), x[3].sub(x[4]));
                let (s3, d3) = (x[5].add(x[6]), x[5].sub(x[6]));
                for (i, &(up2, down2)) in p.scales.iter().enumerate().take(live) {
                    let (a1, a2, a3) = if i % 2 == 0 { (s1, s2, s3) } else { (d1, d2, d3) };
                    let mut y = V::splat(down2).fmadd(a3, V::splat(up2).fmadd(a2, a1.add(bv)));
                    if i == 0 {
                        y = y.add(x[0]);
                    }
                    if i == p.m - 1 {
                        y = y.add(x[ALPHA - 1]);
                    }
                    probe = y.fmadd(zero, probe);
                    y.store(cp_out.add((t * p.m + i) * p.cop + c0));
                }
            }
        }
        let first = t0 * p.m;
        let len = (t1 * p.m).min(p.lout) - first;
        crate::ops::transpose::transpose(cl.as_ptr(), p.cop, len, p.co, k.out.add(n * p.co * p.lout + first), p.lout);
        probe.ordered()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equals the materialised-columns path in float64 (itself checked against PyTorch's
    /// fixtures) to 1e-4 for every tap count (2 to 7): lengths that end in a partial tile,
    /// pads from 0 to wider than the window and than a block, channel counts off the
    /// vectors, several blocks per sample, bias, with and without threads.
    #[test]
    fn matches_the_float64_path() {
        if !crate::ops::cpu::has_avx2_fma() {
            return;
        }
        let mut seed = 91u64;
        // (n, c, co, len, taps, pad)
        // The last two: pads wider than a block, so whole blocks lie in the padding.
        let cases: [(usize, usize, usize, usize, usize, usize); 11] = [
            (2, 16, 16, 64, 3, 1),
            (3, 17, 33, 50, 5, 2),
            (1, 64, 64, 4100, 5, 2),
            (2, 20, 24, 29, 7, 3),
            (1, 32, 16, 40, 2, 0),
            (2, 16, 40, 23, 4, 0),
            (1, 24, 18, 31, 6, 8),
            (4, 48, 64, 200, 3, 1),
            (1, 130, 20, 9, 5, 2),
            (1, 16, 16, 10, 3, 50),
            (1, 16, 24, 200, 5, 300),
        ];
        for (n, c, co, len, r, pad) in cases {
            let g = Geom::for_test(n, c, 1, [1, 1, len], [1, 1, r], [1; 3], [0, 0, pad], [1; 3]);
            assert!(applies(&g, co), "{g:?}");
            seed += 3;
            super::super::check_against_float64(&g, co, seed, &levels());
        }
    }

    /// `G`, `B^T` and `A^T` make the correlation exactly (in f64, to rounding) for
    /// every tap count: `A^T [(G g) . (B^T d)]` against `sum_k g_k d_{i+k}`.
    #[test]
    fn transforms_make_the_correlation() {
        let bt_rows: [[f64; ALPHA]; ALPHA] = [
            [-1.0, 0.0, 5.25, 0.0, -5.25, 0.0, 1.0, 0.0],
            [0.0, 1.0, 1.0, -4.25, -4.25, 1.0, 1.0, 0.0],
            [0.0, -1.0, 1.0, 4.25, -4.25, -1.0, 1.0, 0.0],
            [0.0, 0.5, 0.25, -2.5, -1.25, 2.0, 1.0, 0.0],
            [0.0, -0.5, 0.25, 2.5, -1.25, -2.0, 1.0, 0.0],
            [0.0, 2.0, 4.0, -2.5, -5.0, 0.5, 1.0, 0.0],
            [0.0, -2.0, 4.0, 2.5, -5.0, -0.5, 1.0, 0.0],
            [0.0, -1.0, 0.0, 5.25, 0.0, -5.25, 0.0, 1.0],
        ];
        // The coefficients of prod_{l != j} (x - p_l) (and of the full product): B^T.
        for (j, row) in bt_rows.iter().enumerate() {
            let mut poly = vec![1.0f64];
            for (_, &q) in POINTS.iter().enumerate().filter(|&(l, _)| l != j) {
                let mut next = vec![0.0; poly.len() + 1];
                for (e, &a) in poly.iter().enumerate() {
                    next[e + 1] += a;
                    next[e] -= q * a;
                }
                poly = next;
            }
            poly.resize(ALPHA, 0.0);
            assert_eq!(&poly[..], &row[..], "B^T row {j}");
        }
        let d: Vec<f64> = (0..ALPHA).map(|i| (i as f64 * 0.37 - 1.1).sin()).collect();
        for r in 2..ALPHA {
            let m = ALPHA + 1 - r;
            let gk: Vec<f64> = (0..r).map(|k| (k as f64 * 0.71 + 0.3).cos()).collect();
            let gm = g_matrix(r);
            let prod: Vec<f64> = (0..ALPHA)
                .map(|xi| (0..r).map(|k| gm[xi][k] * gk[k]).sum::<f64>() * (0..ALPHA).map(|j| bt_rows[xi][j] * d[j]).sum::<f64>())
                .collect();
            let scales = at_scales(m);
            for i in 0..m {
                let at_row: Vec<f64> = (0..ALPHA)
                    .map(|xi| match xi {
                        0 => (i == 0) as u8 as f64,
                        7 => (i == m - 1) as u8 as f64,
                        _ => {
                            let (up, down) = (scales[i].0 as f64, scales[i].1 as f64);
                            let sign = if xi % 2 == 0 && i % 2 == 1 { -1.0 } else { 1.0 };
                            sign * [1.0, up, down][(xi - 1) / 2]
                        }
                    })
                    .collect();
                let y: f64 = at_row.iter().zip(&prod).map(|(a, b)| a * b).sum();
                let want: f64 = (0..r).map(|k| gk[k] * d[i + k]).sum();
                assert!((y - want).abs() < 1e-12, "r={r} i={i}: {y} vs {want}");
            }
        }
    }

    /// An infinite or NaN input (or weight) gives None, so the caller runs a direct
    /// method.
    #[test]
    fn non_finite_operands_are_left_to_the_direct_path() {
        let g = Geom::for_test(1, 16, 1, [1, 1, 40], [1, 1, 5], [1; 3], [0, 0, 2], [1; 3]);
        super::super::check_non_finite_fallback(&g, 16, &levels());
    }

    /// This kernel's forward at each level this CPU has, named.
    fn levels() -> Vec<(&'static str, super::super::WinogradRun)> {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::ops::lanes::{X16, X8};
            super::super::winograd_levels(fwd::<X8>, fwd::<X16>)
        }
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }
}
