//! The f32 forward of a 3x3, stride-1 2-D convolution as Winograd F(4x4, 3x3): each 4x4
//! block of outputs ("tile") is computed from the 6x6 input patch under it as
//! `A^T [(G g G^T) . (B^T d B)] A`, so the 36 products per (tile, input channel, output
//! channel) replace the 144 multiply-adds of the direct sum: a quarter of the work. The
//! element-wise products over all channels are 36 GEMMs, one per patch position `xi`:
//! `M_xi (tiles x Co) = V_xi (tiles x C) @ U_xi (C x Co)`, with `U = G g G^T` transformed
//! and packed once per call and `V = B^T d B` per block of tiles.
//!
//! Why: the direct kernel (`direct`) runs near the FMA peak, as oneDNN's does, so fewer
//! multiplies are the only way past it. The transforms vectorise across channels (a
//! vector: 16 with AVX-512, 8 with AVX2, one kernel over `ops::lanes`): a
//! block of tile rows is copied channels-last (zero-padded) into a slab, each patch's 36
//! vectors are transformed in registers into `V`, and `M` is transformed back and copied
//! to the NCHW output, all within the block's buffers (sized to stay in cache).
//!
//! Numerics: F(4x4, 3x3) with the points 0, +-1, +-2 rounds a little more than the direct
//! sum (the transforms scale by up to 8 and 1/24); errors stay near 1e-6 relative to the
//! inputs' magnitudes for the channel counts it takes, inside the 1e-4 conv tolerance.
use super::Geom;
use crate::ops::lanes::Lanes;
#[cfg(target_arch = "x86_64")]
use crate::ops::lanes::{X16, X8};
use crate::ops::parallel::SyncPtr;
use std::cell::RefCell;

/// Outputs per tile side, and the input patch's side (`M + 2` for a 3-tap kernel).
const M: usize = 4;
const A: usize = 6;
/// Positions of a patch (one GEMM each).
const XI: usize = A * A;
/// Channels from which the kernel runs (fewer leave most of each vector idle and the
/// GEMMs too shallow to pay for the transforms).
const MIN_CHANNELS: usize = 16;

/// A SIMD level's shapes for this kernel. The products' register tile is `TR` tiles
/// (broadcast from V in place, row by row) by two vectors of output channels (a strip
/// of the packed U, `2 * LANES` wide): 12 x 32 with AVX-512 (24 of its 32 registers),
/// 6 x 16 with AVX2 (12 of 16).
trait Level: Lanes {
    const TR: usize;
    /// Floats of the block's transformed input and output (V and M) we aim for: the
    /// share of L2 they can have beside the packed weights (1 MiB of the 2 MiB an
    /// AVX-512 Xeon core has, 512 KiB where AVX2 CPUs have 512 KiB-1 MiB).
    const BLOCK_FLOATS: usize;
    /// `compute::<Self>` inside a function compiled with this level's features.
    ///
    /// # Safety
    /// As `compute`, on a CPU with this level's features.
    unsafe fn run(p: &Plan, img: &[f32], up: &[f32], bias: &[f32], rows: (usize, usize), out: *mut f32, bufs: &mut [Vec<f32>; 4]) -> bool;
}

#[cfg(target_arch = "x86_64")]
impl Level for X16 {
    const TR: usize = 12;
    const BLOCK_FLOATS: usize = 1 << 18;
    unsafe fn run(p: &Plan, img: &[f32], up: &[f32], bias: &[f32], rows: (usize, usize), out: *mut f32, bufs: &mut [Vec<f32>; 4]) -> bool {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn winograd_avx512(
            p: &Plan,
            img: &[f32],
            up: &[f32],
            bias: &[f32],
            rows: (usize, usize),
            out: *mut f32,
            bufs: &mut [Vec<f32>; 4],
        ) -> bool {
            // SAFETY: forwarded; this function has the level's features.
            unsafe { compute::<X16>(p, img, up, bias, rows, out, bufs) }
        }
        // SAFETY: the caller's (the CPU has AVX-512F, AVX2 and FMA).
        unsafe { winograd_avx512(p, img, up, bias, rows, out, bufs) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Level for X8 {
    const TR: usize = 6;
    const BLOCK_FLOATS: usize = 1 << 17;
    unsafe fn run(p: &Plan, img: &[f32], up: &[f32], bias: &[f32], rows: (usize, usize), out: *mut f32, bufs: &mut [Vec<f32>; 4]) -> bool {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn winograd_avx2(
            p: &Plan,
            img: &[f32],
            up: &[f32],
            bias: &[f32],
            rows: (usize, usize),
            out: *mut f32,
            bufs: &mut [Vec<f32>; 4],
        ) -> bool {
            // SAFETY: forwarded; this function has the level's features.
            unsafe { compute::<X8>(p, img, up, bias, rows, out, bufs) }
        }
        // SAFETY: the caller's (the CPU has AVX2 and FMA).
        unsafe { winograd_avx2(p, img, up, bias, rows, out, bufs) }
    }
}

/// `G` of F(4x4, 3x3): the kernel transform (6 x 3).
const G: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// Whether this kernel runs the forward: AVX2 and FMA (or AVX-512), one group, a 3x3
/// window at stride and dilation 1 in 2-D, 16+ input and output channels, and output
/// planes at least 4x4 (one whole tile).
pub(crate) fn applies(g: &Geom, w_rows: usize) -> bool {
    crate::ops::cpu::has_avx2_fma()
        && g.groups == 1
        && g.ins[0] == 1
        && g.outs[0] == 1
        && g.k == [1, 3, 3]
        && g.stride == [1, 1, 1]
        && g.dil == [1, 1, 1]
        && g.c >= MIN_CHANNELS
        && w_rows >= MIN_CHANNELS
        && g.outs[1] >= M
        && g.outs[2] >= M
}

/// `U_xi = (G g G^T)_xi` per patch position, packed for `product_tile`: panel xi holds
/// strips of `nr` output channels (zeros past co), input-channel-major, strip after
/// strip. Per input channel (in parallel) the kernels' taps are gathered
/// output-channel-major and `G g` formed (6 x 3 rows of co), so each step is a loop over
/// consecutive output channels (vectorised by the compiler); then each panel (in
/// parallel) forms `(G g) G^T`.
fn kernel_transform(w: &[f32], c: usize, co: usize, nr: usize, par: bool) -> Vec<f32> {
    let g: [[f32; 3]; A] = G.map(|row| row.map(|x| x as f32));
    let g_k = |ch: usize| {
        let mut k = vec![0f32; 9 * co];
        for o in 0..co {
            for (tap, &x) in w[(o * c + ch) * 9..][..9].iter().enumerate() {
                k[tap * co + o] = x;
            }
        }
        let mut gk = vec![0f32; A * 3 * co];
        for i in 0..A {
            for b in 0..3 {
                let dst = &mut gk[(i * 3 + b) * co..][..co];
                for a in 0..3 {
                    let (coef, src) = (g[i][a], &k[(a * 3 + b) * co..][..co]);
                    dst.iter_mut().zip(src).for_each(|(d, s)| *d += coef * s);
                }
            }
        }
        gk
    };
    let gks: Vec<Vec<f32>> = crate::ops::parallel::map_indices(c, par, g_k);
    let cop = co.next_multiple_of(nr);
    let mut up = vec![0f32; XI * c * cop];
    let panel = |(xi, out): (usize, &mut [f32])| {
        let (i, j) = (xi / A, xi % A);
        let mut row = vec![0f32; cop];
        for (ch, gk) in gks.iter().enumerate() {
            row.fill(0.0);
            for b in 0..3 {
                let (coef, src) = (g[j][b], &gk[(i * 3 + b) * co..][..co]);
                row.iter_mut().zip(src).for_each(|(d, s)| *d += coef * s);
            }
            for (s, part) in row.chunks_exact(nr).enumerate() {
                out[(s * c + ch) * nr..][..nr].copy_from_slice(part);
            }
        }
    };
    crate::ops::parallel::for_chunks(&mut up, c * cop, par, |xi, out| panel((xi, out)));
    up
}

/// The geometry one block needs.
struct Plan {
    c: usize,
    co: usize,
    /// Input channels rounded up to whole vectors (the slab's and V's pixel stride), and
    /// output channels to whole strips of U (M's and the output copy's).
    cp: usize,
    cop: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    pad: [usize; 2],
    /// Tile rows per output plane, tiles per tile row.
    ty: usize,
    tx: usize,
    /// The input slab's width: the columns the tiles of a row read.
    wp: usize,
}

thread_local! {
    /// Each thread's block buffers (input slab, channels-last copy, V, M), reused.
    static BUFS: RefCell<[Vec<f32>; 4]> = const { RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()]) };
}

/// `out (N, Co, OH, OW) = conv(img (N, C, H, W), w (Co, C, 3, 3)) (+ bias)` where
/// `applies` holds; None where an output is not finite (the caller then runs a direct
/// method): the transforms subtract, so an infinite input can turn outputs that the
/// direct sum makes infinite into NaN, and large finite ones can overflow.
pub(crate) fn conv_fwd_winograd(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Option<Vec<f32>> {
    crate::ops::lanes::at_cpu_lanes!(fwd(img, w, bias, g, co, par)).expect("conv (winograd) without AVX2 (`applies` says no)")
}

/// `conv_fwd_winograd` with the level `V`, which the CPU must have.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn fwd<V: Level>(img: &[f32], w: &[f32], bias: Option<&[f32]>, g: &Geom, co: usize, par: bool) -> Option<Vec<f32>> {
    let c = g.c;
    let nr = 2 * V::LANES;
    let cp = c.next_multiple_of(V::LANES);
    let (oh, ow) = (g.outs[1], g.outs[2]);
    let (ty, tx) = (oh.div_ceil(M), ow.div_ceil(M));
    let p = Plan {
        c,
        co,
        cp,
        cop: co.next_multiple_of(nr),
        h: g.ins[1],
        w: g.ins[2],
        oh,
        ow,
        pad: [g.pad[1], g.pad[2]],
        ty,
        tx,
        wp: tx * M + 2,
    };
    assert!(img.len() >= g.n * c * p.h * p.w && w.len() >= co * c * 9, "conv (winograd): operand sizes");
    let up = kernel_transform(w, c, co, nr, par);
    let mut bias_v = vec![0f32; p.cop];
    if let Some(b) = bias {
        bias_v[..co].copy_from_slice(&b[..co]);
    }
    // Blocks of whole tile rows (of one or several samples): as many as keep V and M
    // within BLOCK_FLOATS, at least two per thread when threaded and a
    // multiple of the threads (so they finish together).
    let rows_total = g.n * ty;
    let per_row = XI * tx * (cp + p.cop);
    let threads = if par { rayon::current_num_threads() } else { 1 };
    let blocks = rows_total.div_ceil((V::BLOCK_FLOATS / per_row).max(1)).max(2 * threads).next_multiple_of(threads);
    let rows = rows_total.div_ceil(blocks).max(1);
    let blocks = rows_total.div_ceil(rows);
    let oplane = oh * ow;
    let finite = std::sync::atomic::AtomicBool::new(true);
    let out = crate::ops::parallel::filled_plain(g.n * co * oplane, |out: &mut [f32]| {
        let dst = SyncPtr(out.as_mut_ptr());
        let task = |b: usize| {
            let (r0, r1) = (b * rows, ((b + 1) * rows).min(rows_total));
            // SAFETY: the block's tile rows cover output rows of its samples that no other
            // block writes; `img` holds the samples (asserted above); the caller chose a
            // level the CPU has.
            let ok = BUFS.with(|bufs| unsafe { V::run(&p, img, &up, &bias_v, (r0, r1), dst.ptr(), &mut bufs.borrow_mut()) });
            if !ok {
                finite.store(false, std::sync::atomic::Ordering::Relaxed);
            }
        };
        crate::ops::parallel::for_tasks(blocks, par, task);
    });
    finite.into_inner().then_some(out)
}

/// Tile rows `r0..r1` (row r: sample r / ty, tile row r % ty): input transform, the 36
/// GEMMs, output transform. Whether every output was finite.
///
/// # Safety
/// The CPU has `V`'s features (this is inlined into `Level::run`'s wrapper); `img` holds
/// every sample's planes, `out` every sample's output planes, and no other thread writes
/// the output rows of these tile rows.
#[inline(always)]
unsafe fn compute<V: Level>(
    p: &Plan,
    img: &[f32],
    up: &[f32],
    bias: &[f32],
    (r0, r1): (usize, usize),
    out: *mut f32,
    bufs: &mut [Vec<f32>; 4],
) -> bool {
    let nr = 2 * V::LANES;
    // Tiles in the block, and as many as whole register tiles hold (the rows past `nt`
    // are computed from stale V rows and never read).
    let nt = ((r1 - r0) * p.tx).next_multiple_of(V::TR);
    let (plane, oplane) = (p.h * p.w, p.oh * p.ow);
    let [slab, cl, v, m] = bufs;
    let slab_rows = M * (r1 - r0) + 2;
    grow(slab, slab_rows * p.wp * p.cp);
    grow(cl, (slab_rows * p.w).max(M * (r1 - r0) * p.ow) * p.cp.max(p.cop));
    grow(v, XI * nt * p.cp);
    grow(m, XI * nt * p.cop);
    let mut r = r0;
    while r < r1 {
        let (n, first, t0, t1) = segment(p, (r0, r1), r);
        // SAFETY: sample n's planes are in `img`; the buffers hold the segment.
        unsafe {
            gather(p, img.as_ptr().add(n * p.c * plane), (t0, t1), slab, cl);
            input_transform::<V>(p, slab.as_ptr(), t1 - t0, v.as_mut_ptr(), nt, first);
        }
        r += t1 - t0;
    }
    // M_xi = V_xi @ U_xi, register tile by register tile.
    for xi in 0..XI {
        for s in 0..p.cop / nr {
            for t in (0..nt).step_by(V::TR) {
                // SAFETY: V_xi rows t..t + TR (of nt, each cp floats, c read), U_xi
                // strip s (c steps of nr), M_xi rows t..t + TR columns nr s.. (cop).
                unsafe {
                    product_tile::<V>(
                        p.c,
                        v.as_ptr().add((xi * nt + t) * p.cp),
                        p.cp,
                        up.as_ptr().add((xi * p.cop / nr + s) * p.c * nr),
                        m.as_mut_ptr().add((xi * nt + t) * p.cop + s * nr),
                        p.cop,
                    )
                };
            }
        }
    }
    let mut finite = true;
    let mut r = r0;
    while r < r1 {
        let (n, first, t0, t1) = segment(p, (r0, r1), r);
        let (oy0, oy1) = (t0 * M, (t1 * M).min(p.oh));
        // SAFETY: the segment's output rows of sample n (the caller's), the buffers.
        unsafe {
            finite &= output_transform::<V>(p, m.as_ptr(), nt, (first, t0), t1 - t0, bias, cl.as_mut_ptr());
            crate::ops::transpose::transpose(cl.as_ptr(), p.cop, (oy1 - oy0) * p.ow, p.co, out.add(n * p.co * oplane + oy0 * p.ow), oplane);
        }
        r += t1 - t0;
    }
    finite
}

/// The run of the block's tile rows `r0..r1` that starts at row `r`, within one sample:
/// (sample, the run's first tile in the block, its tile rows `t0..t1` of the sample).
#[inline(always)]
fn segment(p: &Plan, (r0, r1): (usize, usize), r: usize) -> (usize, usize, usize, usize) {
    let (n, t0) = (r / p.ty, r % p.ty);
    let t1 = p.ty.min(t0 + (r1 - r));
    (n, (r - r0) * p.tx, t0, t1)
}

/// `product_tile_rows` with the level's `TR` rows.
///
/// # Safety
/// As `product_tile_rows`.
#[inline(always)]
unsafe fn product_tile<V: Level>(k: usize, a: *const f32, a_rs: usize, b: *const f32, out: *mut f32, out_rs: usize) {
    // SAFETY: the caller's; TR is 12 (AVX-512) or 6 (AVX2), a constant per level.
    unsafe {
        if V::TR == 12 {
            product_tile_rows::<V, 12>(k, a, a_rs, b, out, out_rs)
        } else {
            product_tile_rows::<V, 6>(k, a, a_rs, b, out, out_rs)
        }
    }
}

/// `out[i][0..2 LANES] = sum_ch a[i][ch] * b[ch][0..2 LANES]` for the `TR` rows of a
/// register tile: `a` rows `a_rs` apart (broadcast in place), `b` packed (`2 LANES`
/// floats per step). Also the 1-D Winograd's (`winograd1d`) products.
///
/// # Safety
/// The CPU has `V`'s features; `a` holds `TR` rows of `k` floats `a_rs` apart, `b`
/// `k * 2 LANES` floats, `out` `TR` rows of `2 LANES` writable floats `out_rs` apart;
/// `2 TR` accumulators fit the level's registers (TR 12 with AVX-512, 6 with AVX2).
#[inline(always)]
pub(super) unsafe fn product_tile_rows<V: Lanes, const TR: usize>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: *const f32,
    out: *mut f32,
    out_rs: usize,
) {
    let l = V::LANES;
    // SAFETY: the caller's extents and level.
    unsafe {
        // The constant bound keeps the accumulators in registers.
        let mut acc = [[V::zero(); 2]; TR];
        for ch in 0..k {
            let (b0, b1) = (V::load(b.add(ch * 2 * l)), V::load(b.add(ch * 2 * l + l)));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = V::splat(*a.add(i * a_rs + ch));
                row[0] = ai.fmadd(b0, row[0]);
                row[1] = ai.fmadd(b1, row[1]);
            }
        }
        for (i, row) in acc.iter().enumerate() {
            row[0].store(out.add(i * out_rs));
            row[1].store(out.add(i * out_rs + l));
        }
    }
}

/// At least `len` floats (new ones zero).
pub(super) fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// The input slab of tile rows `t0..t1` of one sample (`img`: its first plane): slab row
/// `i` is image row `t0 * 4 - pad + i`, slab column `j` image column `j - pad`, each
/// pixel `cp` channels (zeros outside the image and past `c`).
///
/// # Safety
/// `img` holds the sample's `c` planes; `slab` and `cl` are sized by `compute`.
unsafe fn gather(p: &Plan, img: *const f32, (t0, t1): (usize, usize), slab: &mut [f32], cl: &mut [f32]) {
    let rows = M * (t1 - t0) + 2;
    let top = (t0 * M) as isize - p.pad[0] as isize;
    let y0 = top.max(0) as usize;
    let y1 = ((top + rows as isize).max(0) as usize).min(p.h);
    slab[..rows * p.wp * p.cp].fill(0.0);
    if y0 >= y1 {
        return;
    }
    // Rows y0..y1 channels-last, then each into its padded slab row.
    // SAFETY: rows y0..y1 of the c planes; `cl` holds (y1 - y0) * w pixels of cp floats.
    unsafe { crate::ops::transpose::transpose(img.add(y0 * p.w), p.h * p.w, p.c, (y1 - y0) * p.w, cl.as_mut_ptr(), p.cp) };
    let cols = p.w.min(p.wp.saturating_sub(p.pad[1]));
    for y in y0..y1 {
        let i = (y as isize - top) as usize;
        let src = &cl[(y - y0) * p.w * p.cp..][..cols * p.cp];
        slab[(i * p.wp + p.pad[1]) * p.cp..][..cols * p.cp].copy_from_slice(src);
    }
}

/// `B^T x` for F(4x4, 3x3), lane-wise.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
unsafe fn bt<V: Lanes>(x: [V; A]) -> [V; A] {
    // SAFETY: the caller's level.
    unsafe {
        let (four, five, two) = (V::splat(4.0), V::splat(5.0), V::splat(2.0));
        let a = four.fnmadd(x[2], x[4]); // x4 - 4 x2
        let b = four.fnmadd(x[1], x[3]); // x3 - 4 x1
        let c = x[4].sub(x[2]);
        let d = two.mul(x[3].sub(x[1]));
        [four.fmadd(x[0], five.fnmadd(x[2], x[4])), a.add(b), a.sub(b), c.add(d), c.sub(d), four.fmadd(x[1], five.fnmadd(x[3], x[5]))]
    }
}

/// `A^T x` for F(4x4, 3x3), lane-wise.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
unsafe fn at<V: Lanes>(x: [V; A]) -> [V; M] {
    // SAFETY: the caller's level.
    unsafe {
        let (s12, d12) = (x[1].add(x[2]), x[1].sub(x[2]));
        let (s34, d34) = (x[3].add(x[4]), x[3].sub(x[4]));
        [x[0].add(s12).add(s34), V::splat(2.0).fmadd(d34, d12), V::splat(4.0).fmadd(s34, s12), V::splat(8.0).fmadd(d34, d12).add(x[5])]
    }
}

/// V for the `rows` tile rows of a slab: tile (r, x) is tile `first + r * tx + x` of
/// the block's `nt`; `V[xi][tile][ch]` at `(xi * nt + tile) * cp + ch`.
///
/// # Safety
/// The CPU has `V`'s features; `slab` holds `4 rows + 2` rows of `wp * cp` floats; `v`
/// holds `36 * nt * cp` floats and the tiles are inside `0..nt`.
// `i` picks element i of every column (`cols[j][i]`), not a column.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn input_transform<V: Lanes>(p: &Plan, slab: *const f32, rows: usize, v: *mut f32, nt: usize, first: usize) {
    for r in 0..rows {
        for x in 0..p.tx {
            let tile = first + r * p.tx + x;
            for c0 in (0..p.cp).step_by(V::LANES) {
                // SAFETY: slab rows r * 4 + i, columns x * 4 + j < wp, channels
                // c0..c0 + LANES <= cp; position xi = 6 i + j of tile < nt in `v`.
                unsafe {
                    // Columns first (cols[j] = B^T d[.][j]), then the rows of that: B^T d B.
                    let mut cols = [[V::zero(); A]; A];
                    for (j, col) in cols.iter_mut().enumerate() {
                        let mut d = [V::zero(); A];
                        for (i, x_i) in d.iter_mut().enumerate() {
                            *x_i = V::load(slab.add(((r * M + i) * p.wp + x * M + j) * p.cp + c0));
                        }
                        *col = bt(d);
                    }
                    for i in 0..A {
                        let mut row = [V::zero(); A];
                        for (j, e) in row.iter_mut().enumerate() {
                            *e = cols[j][i];
                        }
                        for (j, val) in bt(row).into_iter().enumerate() {
                            val.store(v.add(((i * A + j) * nt + tile) * p.cp + c0));
                        }
                    }
                }
            }
        }
    }
}

/// The outputs of `rows` tile rows (tiles `first + r * tx + x` of the block's `nt`; the
/// first is tile row `t0` of its plane) from M, plus the bias, channels-last into `cl`:
/// output row `r * 4 + i` (those inside the plane), column `x * 4 + j` (those inside
/// it) at `((r * 4 + i) * ow + x * 4 + j) * cop`. Whether every value was finite (lanes
/// past `co` included: products with zero weights, finite where the inputs are).
///
/// # Safety
/// The CPU has `V`'s features; `m` holds `36 * nt * cop` floats, `bias` `cop`, and `cl`
/// `rows * 4 * ow * cop`.
// As in `input_transform`, `i` picks element i of every column.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn output_transform<V: Lanes>(
    p: &Plan,
    m: *const f32,
    nt: usize,
    (first, t0): (usize, usize),
    rows: usize,
    bias: &[f32],
    cl: *mut f32,
) -> bool {
    // SAFETY: the caller's level and extents (commented at each access).
    unsafe {
        // 0 * x is 0 for finite x and NaN otherwise: the sum stays 0 while all are finite.
        let (zero, mut probe) = (V::zero(), V::zero());
        for r in 0..rows {
            let ylive = (p.oh - (t0 + r) * M).min(M);
            for x in 0..p.tx {
                let tile = first + r * p.tx + x;
                let xlive = (p.ow - x * M).min(M);
                for c0 in (0..p.cop).step_by(V::LANES) {
                    // `bias` holds cop floats.
                    let bv = V::load(bias.as_ptr().add(c0));
                    // Columns first (cols[j] = A^T m[.][j]), then the rows of that: A^T m A.
                    let mut cols = [[V::zero(); M]; A];
                    for (j, col) in cols.iter_mut().enumerate() {
                        let mut d = [V::zero(); A];
                        for (i, x_i) in d.iter_mut().enumerate() {
                            // Position 6 i + j of tile < nt, channels c0..c0 + LANES <= cop.
                            *x_i = V::load(m.add(((i * A + j) * nt + tile) * p.cop + c0));
                        }
                        *col = at(d);
                    }
                    for i in 0..ylive {
                        let mut row = [V::zero(); A];
                        for (j, e) in row.iter_mut().enumerate() {
                            *e = cols[j][i];
                        }
                        for (j, val) in at(row).into_iter().enumerate().take(xlive) {
                            // Output row r * 4 + i < rows * 4, column x * 4 + j < ow.
                            let y = val.add(bv);
                            probe = y.fmadd(zero, probe);
                            y.store(cl.add(((r * M + i) * p.ow + x * M + j) * p.cop + c0));
                        }
                    }
                }
            }
        }
        probe.ordered()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equals the materialised-columns path in float64 (itself checked against PyTorch's
    /// fixtures) to 1e-4: odd plane sizes (partial tiles at the right and bottom), pads
    /// 0 to 2, channel counts not a multiple of 16, several samples per block and
    /// several blocks per sample, bias, with and without threads.
    #[test]
    fn matches_the_float64_path() {
        if !crate::ops::cpu::has_avx2_fma() {
            return;
        }
        let mut seed = 77u64;
        // (n, c, co, h, w, pad)
        let cases: [(usize, usize, usize, usize, usize, usize); 7] = [
            (2, 16, 16, 6, 6, 0),
            (3, 16, 32, 8, 8, 1),
            (2, 20, 17, 9, 13, 1),
            (1, 32, 48, 30, 7, 2),
            (4, 64, 64, 16, 16, 1),
            (2, 128, 40, 11, 10, 1),
            (1, 24, 16, 70, 66, 1),
        ];
        for (n, c, co, h, w, pad) in cases {
            let g = Geom::for_test(n, c, 1, [1, h, w], [1, 3, 3], [1; 3], [0, pad, pad], [1; 3]);
            assert!(applies(&g, co), "{g:?}");
            seed += 3;
            super::super::check_against_float64(&g, co, seed, &levels());
        }
    }

    /// An infinite or NaN input (or weight) gives None, so the caller runs a direct
    /// method: the transforms would turn some of the direct sum's infinities into NaN.
    #[test]
    fn non_finite_operands_are_left_to_the_direct_path() {
        let g = Geom::for_test(1, 16, 1, [1, 8, 8], [1, 3, 3], [1; 3], [0, 1, 1], [1; 3]);
        super::super::check_non_finite_fallback(&g, 16, &levels());
    }

    /// This kernel's forward at each level this CPU has, named.
    fn levels() -> Vec<(&'static str, super::super::WinogradRun)> {
        #[cfg(target_arch = "x86_64")]
        {
            super::super::winograd_levels(fwd::<X8>, fwd::<X16>)
        }
        #[cfg(not(target_arch = "x86_64"))]
        Vec::new()
    }
}
