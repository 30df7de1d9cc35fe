//! Our own f32 GEMM, on BLIS's design: the right operand is packed into `KC x NR`
//! column strips and the left one into `MR x KC` row strips, and a register-blocked
//! micro-kernel (12 x 32 with AVX-512, 6 x 16 with AVX2) multiplies one pair of strips
//! into a tile of the destination; the packing makes the kernel's speed independent of
//! the operands' layouts, and lets a right operand be computed as it is packed.
//!
//! Why not only the `gemm` crate: on this kind of CPU its f32 path depends on the
//! operands' layouts and on the product's shape. Measured with AVX-512 on 2 threads,
//! a convolution's `32 x 3072 x 288` product (row-major weight and columns) ran at
//! 110 GFLOP/s against 241 for the same product with a column-major right operand,
//! and torch's 235; short products (`m <= 64`) and transposed operands (the weight
//! gradient of a linear layer) lose 15-50%. Packing costs `O(mk + kn)` moves against
//! `O(mnk)` multiply-adds.
//!
//! Its users are the implicit-GEMM convolution (`layers::conv::implicit`), whose
//! right operand is packed straight from the image (`Right`), and the recurrent
//! layers' time loop (`layers::recurrent`), whose weight is packed once for the small
//! products of every step (`Packed`), and the convolutions' weight gradients and the
//! adjoints of large weights (`layers::conv::passes`, `wgrad_cols`), whose operands are
//! read transposed (a column-major right operand packs as 16 x 16 register transposes).
//! Plain products stay on
//! the `gemm` crate (`ops::gemm`): measured here on products of linear layers
//! (1024 x 384 x 1152 and the like), the crate's kernels ran 15-40% faster than this
//! one, whose row-major left operand costs a transposing pack; it won only where few
//! rows meet a long row-major right operand, the convolution's case.
use super::cpu::{simd_level, Simd};
use super::parallel::SyncPtr;
use std::cell::RefCell;

mod rows;

/// Depth of one packed block: a `KC x NR` strip of the right operand (32 KiB with
/// AVX-512) stays in L1 while the micro-kernel sweeps the left block's strips.
const KC: usize = 256;
/// Columns of one packed right block (`KC x NC`, 2 MiB: L2/L3).
const NC: usize = 2048;

/// One micro-kernel: its tile (`MR x NR`), the rows of a packed left block (`MC`,
/// `MC x KC` floats stay in L2), and the tile routine.
trait Kernel {
    const MR: usize;
    const NR: usize;
    const MC: usize;
    /// `C[..mr, ..nr] = beta * A_strip @ B_strip (+ C unless overwrite)`.
    ///
    /// # Safety
    /// The CPU has the kernel's features; `a` holds `kc * MR` floats, `b` `kc * NR`;
    /// `c` points to `mr <= MR` rows of `nr <= NR` writable (and, unless `overwrite`,
    /// initialized) floats, `c_rs` apart.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile(kc: usize, a: *const f32, b: *const f32, c: *mut f32, c_rs: isize, mr: usize, nr: usize, beta: f32, overwrite: bool);
}

/// A `Kernel` whose tile is the `target_feature` function `$tile` (features `$feat`).
macro_rules! kernel {
    ($name:ident, $mr:expr, $nr:expr, $mc:expr, $tile:ident, $feat:literal) => {
        #[cfg(target_arch = "x86_64")]
        struct $name;

        #[cfg(target_arch = "x86_64")]
        impl Kernel for $name {
            const MR: usize = $mr;
            const NR: usize = $nr;
            const MC: usize = $mc;
            #[rustfmt::skip]
            unsafe fn tile(kc: usize, a: *const f32, b: *const f32, c: *mut f32, c_rs: isize, mr: usize, nr: usize, beta: f32, overwrite: bool) {
                // SAFETY: forwarded from the caller: the CPU has the features `$feat`
                // (the dispatch in `sgemm_with` checked), the buffers are as documented.
                unsafe { $tile(kc, a, b, c, c_rs, mr, nr, beta, overwrite) }
            }
        }
    };
}

kernel!(Avx512, 12, 32, 240, tile_avx512, "avx512f,avx2,fma");
kernel!(Avx2, 6, 16, 144, tile_avx2, "avx2,fma");

/// The 12 x 32 tile: 24 accumulators, two loads of the right strip and 12 broadcasts
/// of the left one per step of depth. The row loops have constant bounds, so the
/// accumulators stay in registers (the `i < mr` test only gates the stores).
///
/// # Safety
/// As `Kernel::tile`, on a CPU with AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx512(kc: usize, a: *const f32, b: *const f32, c: *mut f32, c_rs: isize, mr: usize, nr: usize, beta: f32, overwrite: bool) {
    use std::arch::x86_64::*;
    const MR: usize = 12;
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    // SAFETY: the strips hold `kc` steps of MR and 32 floats (caller); `c` has `mr` rows
    // of `nr` writable floats, and the masks keep loads and stores inside the first `nr`.
    unsafe {
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            let b0 = _mm512_loadu_ps(b);
            let b1 = _mm512_loadu_ps(b.add(16));
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*a.add(i));
                row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
            }
            a = a.add(MR);
            b = b.add(32);
        }
        let mask = |w: usize| -> __mmask16 { ((1u32 << w.min(16)) - 1) as __mmask16 };
        let (m0, m1) = (mask(nr), mask(nr.saturating_sub(16)));
        let vb = _mm512_set1_ps(beta);
        for (i, row) in acc.iter().enumerate() {
            if i < mr {
                let p = c.offset(i as isize * c_rs);
                let (mut r0, mut r1) = (_mm512_mul_ps(row[0], vb), _mm512_mul_ps(row[1], vb));
                if !overwrite {
                    r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, p));
                    r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, p.add(16)));
                }
                _mm512_mask_storeu_ps(p, m0, r0);
                _mm512_mask_storeu_ps(p.add(16), m1, r1);
            }
        }
    }
}

/// The 6 x 16 tile: 12 accumulators of 8 lanes (16 ymm registers in all).
///
/// # Safety
/// As `Kernel::tile`, on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2(kc: usize, a: *const f32, b: *const f32, c: *mut f32, c_rs: isize, mr: usize, nr: usize, beta: f32, overwrite: bool) {
    use std::arch::x86_64::*;
    const MR: usize = 6;
    // Lane masks for `maskload`/`maskstore`: 8 - w leading -1s read from offset w.
    static MASKS: [i32; 16] = [-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    // SAFETY: as in `tile_avx512`; `MASKS[8 - w..]` holds 8 ints for every w in 0..=8.
    // A prefetch never faults, so its address may lie past the buffers.
    unsafe {
        // The destination rows into L1 while the products run (they are read at the end
        // unless `overwrite`, and written either way), and the right strip a kilobyte
        // ahead: a strip comes from L2 or L3 on its first tile, and on a Zen 3 a 6 x 16
        // tile loop over packed strips ran at 60-85 GFLOP/s per core without these hints
        // and at ~100 (its peak) with them.
        for i in 0..mr {
            let p = c.offset(i as isize * c_rs);
            _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(15) as *const i8);
        }
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            let b0 = _mm256_loadu_ps(b);
            let b1 = _mm256_loadu_ps(b.add(8));
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(256) as *const i8);
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = _mm256_broadcast_ss(&*a.add(i));
                row[0] = _mm256_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm256_fmadd_ps(ai, b1, row[1]);
            }
            a = a.add(MR);
            b = b.add(16);
        }
        let mask = |w: usize| _mm256_loadu_si256(MASKS.as_ptr().add(8 - w.min(8)) as *const __m256i);
        let (m0, m1) = (mask(nr), mask(nr.saturating_sub(8)));
        let vb = _mm256_set1_ps(beta);
        for (i, row) in acc.iter().enumerate() {
            if i < mr {
                let p = c.offset(i as isize * c_rs);
                let (mut r0, mut r1) = (_mm256_mul_ps(row[0], vb), _mm256_mul_ps(row[1], vb));
                if !overwrite {
                    r0 = _mm256_add_ps(r0, _mm256_maskload_ps(p, m0));
                    r1 = _mm256_add_ps(r1, _mm256_maskload_ps(p.add(8), m1));
                }
                // Plain stores where the row is whole: AMD's Zen cores microcode
                // `maskstore` (tens of cycles each).
                if nr >= 16 {
                    _mm256_storeu_ps(p, r0);
                    _mm256_storeu_ps(p.add(8), r1);
                } else {
                    let bits = |w: usize| (1u32 << w.min(8)) - 1;
                    crate::ops::lanes::store_masked8(r0, p, bits(nr));
                    crate::ops::lanes::store_masked8(r1, p.add(8), bits(nr.saturating_sub(8)));
                }
            }
        }
    }
}

/// A strided read-only matrix: element (i, j) at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct Mat {
    ptr: *const f32,
    rs: isize,
    cs: isize,
}
// SAFETY: the matrix is only read, and every caller of `sgemm_with` keeps it alive and
// unwritten for the call (its contract).
unsafe impl Send for Mat {}
// SAFETY: as above.
unsafe impl Sync for Mat {}

impl Mat {
    /// The matrix at `ptr` with row / column strides `rs` / `cs` (in floats). Reading
    /// it is unsafe (`sgemm_with`'s contract says which elements must be readable).
    pub(crate) fn new(ptr: *const f32, rs: isize, cs: isize) -> Mat {
        Mat { ptr, rs, cs }
    }
    /// # Safety
    /// (i, j) lies inside the matrix.
    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> f32 {
        // SAFETY: the caller's (i, j) is inside the matrix the strides describe.
        unsafe { *self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

/// Pack rows `r0..r0 + rows`, depth `p0..p0 + kc` of `a` as `MR x kc` strips
/// (step-major: strip s holds `a[r0 + s*MR + i, p0 + p]` at `p * MR + i`), rows past
/// the end as zeros.
///
/// # Safety
/// The block lies inside `a`; `out` holds `rows.div_ceil(MR) * MR * kc` floats.
pub(crate) unsafe fn pack_left(mr: usize, a: Mat, (r0, rows): (usize, usize), (p0, kc): (usize, usize), out: &mut [f32]) {
    for (s, strip) in out.chunks_exact_mut(mr * kc).take(rows.div_ceil(mr)).enumerate() {
        let live = (rows - s * mr).min(mr);
        if live < mr {
            strip.fill(0.0);
        }
        if a.rs == 1 {
            // Column-major: each step's rows are one contiguous run.
            for (p, dst) in strip.chunks_exact_mut(mr).enumerate() {
                // SAFETY: column p0 + p, rows r0 + s*mr..+live are inside `a` (unit row stride).
                let src = unsafe { std::slice::from_raw_parts(a.ptr.offset((p0 + p) as isize * a.cs + (r0 + s * mr) as isize), live) };
                dst[..live].copy_from_slice(src);
            }
            continue;
        }
        if a.cs == 1 {
            // Row-major: each row's depth run is contiguous; scatter it down the strip.
            for i in 0..live {
                let r = r0 + s * mr + i;
                // SAFETY: row r < r0 + rows, depth p0..p0 + kc are inside `a` (unit column stride).
                let src = unsafe { std::slice::from_raw_parts(a.ptr.offset(r as isize * a.rs + p0 as isize), kc) };
                for (d, &x) in strip[i..].iter_mut().step_by(mr).zip(src) {
                    *d = x;
                }
            }
            continue;
        }
        for i in 0..live {
            let r = r0 + s * mr + i;
            for p in 0..kc {
                // SAFETY: row r < r0 + rows and depth p0 + p < p0 + kc are inside `a`.
                strip[p * mr + i] = unsafe { a.at(r, p0 + p) };
            }
        }
    }
}

/// Pack depth `p0..p0 + kc`, columns `c0..c0 + cols` of `b` as `kc x NR` strips
/// (strip t holds `b[p0 + p, c0 + t*NR + j]` at `p * NR + j`), columns past the end
/// as zeros.
///
/// # Safety
/// The block lies inside `b`; `out` holds `cols.div_ceil(NR) * NR * kc` floats.
unsafe fn pack_right(nr: usize, b: Mat, (p0, kc): (usize, usize), (c0, cols): (usize, usize), out: &mut [f32]) {
    for (t, strip) in out.chunks_exact_mut(nr * kc).take(cols.div_ceil(nr)).enumerate() {
        let live = (cols - t * nr).min(nr);
        let cb = c0 + t * nr;
        if b.cs == 1 {
            // Row-major: each step's NR columns are one contiguous run.
            for (p, dst) in strip.chunks_exact_mut(nr).enumerate() {
                // SAFETY: row p0 + p, columns cb..cb + live are inside `b` (unit column stride).
                let src = unsafe { std::slice::from_raw_parts(b.ptr.offset((p0 + p) as isize * b.rs + cb as isize), live) };
                dst[..live].copy_from_slice(src);
                dst[live..].fill(0.0);
            }
        } else if b.rs == 1 && b.cs > 0 {
            // Column-major: the strip is the transpose of `live` contiguous columns, the
            // columns past them zeros.
            // SAFETY: columns cb..cb + live, rows p0..p0 + kc are inside `b` (unit row
            // stride, columns `cs` apart); `strip` holds kc rows of nr >= live floats.
            unsafe {
                let src = b.ptr.offset(cb as isize * b.cs + p0 as isize);
                super::transpose::transpose_padded(src, b.cs as usize, live, nr, kc, strip.as_mut_ptr(), nr)
            };
        } else {
            if live < nr {
                strip.fill(0.0);
            }
            for j in 0..live {
                for p in 0..kc {
                    // SAFETY: depth p0 + p and column cb + j are inside `b`.
                    strip[p * nr + j] = unsafe { b.at(p0 + p, cb + j) };
                }
            }
        }
    }
}

/// The right operand of a product as the packer sees it: a matrix in memory, or one
/// computed while packing (a convolution's image columns, never materialised).
pub(crate) trait Right: Sync {
    /// Pack depth `p0..p0 + kc` and columns `c0..c0 + cols` as `kc x nr` strips (strip t
    /// holds element (p0 + p, c0 + t*nr + j) at `p * nr + j`), columns past the end as zeros.
    ///
    /// # Safety
    /// The block lies inside the operand; `out` holds `cols.div_ceil(nr) * nr * kc` floats.
    unsafe fn pack(&self, nr: usize, depth: (usize, usize), cols: (usize, usize), out: &mut [f32]);
}

/// A matrix in memory as the right operand.
impl Right for Mat {
    unsafe fn pack(&self, nr: usize, depth: (usize, usize), cols: (usize, usize), out: &mut [f32]) {
        // SAFETY: forwarded (the block is inside the matrix, `out` is large enough).
        unsafe { pack_right(nr, *self, depth, cols, out) }
    }
}

thread_local! {
    /// Each thread's packing buffers (left block, right block), reused across calls.
    static PACK: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Multiply a packed left block (`rows` rows, `MR x kc` strips in `pa`) by the packed
/// right strips `t0..t1` at `pb` (strip t covers columns `t * NR..`, the last ending at
/// column `c_end`) into `dst` (its row 0, column 0 of strip 0; rows `rs` apart).
///
/// # Safety
/// The CPU has `K`'s features; `pa` holds the block's strips, `pb` strips `..t1`
/// (`kc * NR` floats each); the destination tiles are writable (initialized unless
/// `overwrite`) and accessed by no other thread.
#[allow(clippy::too_many_arguments)]
unsafe fn tiles<K: Kernel>(
    kc: usize,
    pa: &[f32],
    pb: *const f32,
    rows: usize,
    (t0, t1): (usize, usize),
    c_end: usize,
    (dst, rs): (*mut f32, isize),
    beta: f32,
    overwrite: bool,
) {
    for t in t0..t1 {
        let nr = (c_end - t * K::NR).min(K::NR);
        for s in 0..rows.div_ceil(K::MR) {
            let mr = (rows - s * K::MR).min(K::MR);
            // SAFETY: the caller's contract covers each strip pair and destination tile.
            unsafe {
                let c = dst.offset((s * K::MR) as isize * rs + (t * K::NR) as isize);
                K::tile(kc, pa.as_ptr().add(s * K::MR * kc), pb.add(t * K::NR * kc), c, rs, mr, nr, beta, overwrite);
            }
        }
    }
}

/// One job: destination rows `r0..r1` and columns `c0..c1`, over the whole depth.
/// Each packed right block serves every row of the job (BLIS's loop order: the right
/// operand's packing is paid once per job, the left one's once per column block).
///
/// # Safety
/// As `sgemm_with`, and no other job writes this block of `dst`.
#[allow(clippy::too_many_arguments)]
unsafe fn job<K: Kernel, R: Right + ?Sized>(
    k: usize,
    dst: SyncPtr<f32>,
    dst_rs: isize,
    read_dst: bool,
    a: Mat,
    b: &R,
    beta: f32,
    (r0, r1): (usize, usize),
    (c0, c1): (usize, usize),
) {
    PACK.with(|bufs| {
        let (pa, pb) = &mut *bufs.borrow_mut();
        for cb in (c0..c1).step_by(NC) {
            let cols = NC.min(c1 - cb);
            // Equal depth blocks (a 288-deep product runs as 144 + 144, not 256 + 32).
            let kstep = k.div_ceil(k.div_ceil(KC));
            for p0 in (0..k).step_by(kstep) {
                let kc = kstep.min(k - p0);
                let overwrite = p0 == 0 && !read_dst;
                let need_b = cols.div_ceil(K::NR) * K::NR * kc;
                if pb.len() < need_b {
                    pb.resize(need_b, 0.0);
                }
                // SAFETY: the block is inside `b` (the job's columns and this depth range).
                unsafe { b.pack(K::NR, (p0, kc), (cb, cols), pb) };
                for rb in (r0..r1).step_by(K::MC) {
                    let rows = K::MC.min(r1 - rb);
                    let need_a = rows.div_ceil(K::MR) * K::MR * kc;
                    if pa.len() < need_a {
                        pa.resize(need_a, 0.0);
                    }
                    // SAFETY: the block is inside `a`.
                    unsafe { pack_left(K::MR, a, (rb, rows), (p0, kc), pa) };
                    // SAFETY: the strips were packed above; the tiles cover rows rb..rb + rows
                    // and columns cb..cb + cols, inside this job's block of `dst`.
                    unsafe {
                        let c = dst.ptr().offset(rb as isize * dst_rs + cb as isize);
                        tiles::<K>(kc, pa, pb.as_ptr(), rows, (0, cols.div_ceil(K::NR)), cols, (c, dst_rs), beta, overwrite);
                    }
                }
            }
        }
    });
}

/// Split the destination into one block per thread along its longer side (in whole
/// tiles), so the blocks are equal and each packs the other side's operand once.
/// Returns (row step, column step).
fn split<K: Kernel>(m: usize, n: usize, threads: usize) -> (usize, usize) {
    if threads <= 1 {
        return (m, n);
    }
    let by_cols = n.div_ceil(K::NR) >= threads && (n >= m || m.div_ceil(K::MR) < threads);
    if by_cols {
        (m, n.div_ceil(K::NR).div_ceil(threads) * K::NR)
    } else {
        (m.div_ceil(K::MR).div_ceil(threads).max(1) * K::MR, n)
    }
}

/// Whether `sgemm_with` takes an `m x n` product: a CPU with AVX2+FMA, and both sides at
/// least half a tile (thinner products waste most of each tile).
pub(crate) fn takes(m: usize, n: usize) -> bool {
    match simd_level() {
        Simd::Avx512 => m >= 6 && n >= 16,
        Simd::Avx2 => m >= 4 && n >= 8,
        Simd::Plain => false,
    }
}

/// `dst (m x n) = beta * a @ b (+ dst when read_dst)`, `dst` row-major with unit column
/// stride, `b` any right operand (`Right`: in memory, or packed from a source), on
/// `threads` workers (1: the calling thread only). Call only where `takes(m, n)`.
///
/// # Safety
/// `dst` holds `m` rows of `n` writable floats `dst_rs` apart (initialized when
/// `read_dst`), disjoint from the operands; `a` (`m x k`) stays readable at its strides
/// for the call, and `b` can pack every block of its `k x n` extent.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_with<R: Right + ?Sized>(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    dst_rs: isize,
    read_dst: bool,
    a: Mat,
    b: &R,
    beta: f32,
    threads: usize,
) {
    let dst = SyncPtr(dst);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !read_dst {
            for i in 0..m {
                // SAFETY: row i of the destination holds n writable floats.
                unsafe { std::slice::from_raw_parts_mut(dst.ptr().offset(i as isize * dst_rs), n).fill(0.0) };
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    match simd_level() {
        // SAFETY: the level says the CPU has each kernel's features; the rest is the caller's.
        Simd::Avx512 => unsafe { run::<Avx512, R>((m, n, k), dst, dst_rs, read_dst, a, b, beta, threads) },
        // SAFETY: as above.
        Simd::Avx2 => unsafe { run::<Avx2, R>((m, n, k), dst, dst_rs, read_dst, a, b, beta, threads) },
        Simd::Plain => unreachable!("sgemm called without AVX2 (ops::sgemm::takes says no)"),
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("sgemm called off x86-64 (ops::sgemm::takes says no)");
}

/// # Safety
/// As `sgemm_with`, with a CPU that has `K`'s features.
#[allow(clippy::too_many_arguments)]
unsafe fn run<K: Kernel, R: Right + ?Sized>(
    (m, n, k): (usize, usize, usize),
    dst: SyncPtr<f32>,
    dst_rs: isize,
    read_dst: bool,
    a: Mat,
    b: &R,
    beta: f32,
    threads: usize,
) {
    let (row_step, col_step) = split::<K>(m, n, threads);
    let blocks: Vec<((usize, usize), (usize, usize))> = (0..m)
        .step_by(row_step)
        .flat_map(|r0| (0..n).step_by(col_step).map(move |c0| ((r0, (r0 + row_step).min(m)), (c0, (c0 + col_step).min(n)))))
        .collect();
    // SAFETY (both arms): the blocks tile the destination without overlap, so each job
    // writes its own block; the operands are the caller's.
    super::parallel::for_tasks(blocks.len(), threads > 1, |i| {
        let (rows, cols) = blocks[i];
        unsafe { job::<K, R>(k, dst, dst_rs, read_dst, a, b, beta, rows, cols) }
    });
}

/// The strip width (columns) of this CPU's kernel, None where `sgemm` does not run.
pub(crate) fn strip_width() -> Option<usize> {
    match simd_level() {
        Simd::Avx512 => Some(Avx512::NR),
        Simd::Avx2 => Some(Avx2::NR),
        Simd::Plain => None,
    }
}

/// A right operand packed once for many products with different left operands: a
/// recurrent layer's weight, multiplied by a new state at every step. Packing the
/// `k x n` operand costs as much as a product with a few rows, which is all one step
/// has. Each product runs on the calling thread over a range of whole strips of
/// columns, so several threads can share the packed operand.
pub(crate) struct Packed {
    k: usize,
    n: usize,
    kstep: usize,
    nr: usize,
    /// Depth block after depth block (`kstep` deep), each `n.div_ceil(nr)` strips of `kc x nr`.
    data: Vec<f32>,
}

impl Packed {
    /// Pack `b` (`k x n`) for this CPU's kernel; None where `sgemm` does not run
    /// (`strip_width`) or the product is empty.
    ///
    /// # Safety
    /// `b` can pack every block of its `k x n` extent.
    pub(crate) unsafe fn new<R: Right + ?Sized>(b: &R, k: usize, n: usize) -> Option<Packed> {
        let nr = strip_width()?;
        if k == 0 || n == 0 {
            return None;
        }
        let kstep = k.div_ceil(k.div_ceil(KC));
        let width = n.div_ceil(nr) * nr;
        let mut data = vec![0.0; width * k];
        for p0 in (0..k).step_by(kstep) {
            let kc = kstep.min(k - p0);
            // SAFETY: the block (depth p0..p0 + kc, every column) is inside `b`; the slice
            // holds `width * kc` floats.
            unsafe { b.pack(nr, (p0, kc), (0, n), &mut data[width * p0..width * (p0 + kc)]) };
        }
        Some(Packed { k, n, kstep, nr, data })
    }

    /// The strip width: column ranges given to `mul` start at a multiple of it.
    pub(crate) fn strip(&self) -> usize {
        self.nr
    }

    /// `dst[.., c0..c1] = beta * a @ B[.., c0..c1] (+ dst when read_dst)` for the `m` rows
    /// of `a` (`m x k`), on the calling thread. `dst` points at column 0 of row 0.
    ///
    /// # Safety
    /// `c0` is a multiple of `strip()` and `c1 <= n`; `dst` holds `m` rows whose columns
    /// `c0..c1` are writable (initialized when `read_dst`) `dst_rs` apart, disjoint from
    /// `a`, which stays readable at its strides, and no other thread accesses them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn mul(&self, m: usize, dst: *mut f32, dst_rs: isize, read_dst: bool, a: Mat, (c0, c1): (usize, usize), beta: f32) {
        debug_assert!(c0.is_multiple_of(self.nr) && c1 <= self.n);
        if m == 0 || c0 >= c1 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        match simd_level() {
            // SAFETY: the level says the CPU has the kernel's features (the one `new`
            // packed for); the rest is the caller's.
            Simd::Avx512 => unsafe { self.mul_k::<Avx512>(m, dst, dst_rs, read_dst, a, (c0, c1), beta) },
            // SAFETY: as above.
            Simd::Avx2 => unsafe { self.mul_k::<Avx2>(m, dst, dst_rs, read_dst, a, (c0, c1), beta) },
            Simd::Plain => unreachable!("a Packed operand exists only where sgemm runs"),
        }
    }

    /// # Safety
    /// As `mul`, on a CPU with `K`'s features, `K` the kernel `new` packed for.
    #[allow(clippy::too_many_arguments)]
    unsafe fn mul_k<K: Kernel>(&self, m: usize, dst: *mut f32, dst_rs: isize, read_dst: bool, a: Mat, (c0, c1): (usize, usize), beta: f32) {
        assert_eq!(K::NR, self.nr, "packed for another kernel");
        let width = self.n.div_ceil(self.nr) * self.nr;
        PACK.with(|bufs| {
            let pa = &mut bufs.borrow_mut().0;
            for p0 in (0..self.k).step_by(self.kstep) {
                let kc = self.kstep.min(self.k - p0);
                let block = &self.data[width * p0..];
                for rb in (0..m).step_by(K::MC) {
                    let rows = K::MC.min(m - rb);
                    let need = rows.div_ceil(K::MR) * K::MR * kc;
                    if pa.len() < need {
                        pa.resize(need, 0.0);
                    }
                    // SAFETY: rows rb..rb + rows, depth p0..p0 + kc are inside `a`.
                    unsafe { pack_left(K::MR, a, (rb, rows), (p0, kc), pa) };
                    // SAFETY: strip t of this depth block holds kc x NR packed floats; the
                    // tiles cover rows rb..rb + rows and columns c0..c1, the caller's block.
                    unsafe {
                        let c = dst.offset(rb as isize * dst_rs);
                        let overwrite = p0 == 0 && !read_dst;
                        tiles::<K>(kc, pa, block.as_ptr(), rows, (c0 / K::NR, c1.div_ceil(K::NR)), c1, (c, dst_rs), beta, overwrite);
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain triple loop in f64.
    fn reference(m: usize, n: usize, k: usize, a: &[f32], (ars, acs): (usize, usize), b: &[f32], (brs, bcs): (usize, usize)) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                out[i * n + j] = (0..k).map(|p| a[i * ars + p * acs] as f64 * b[p * brs + j * bcs] as f64).sum();
            }
        }
        out
    }

    /// Every layout, edge tiles, row strides, accumulation and 1-3 threads, for each
    /// kernel this CPU can run.
    fn check<K: Kernel>() {
        let mut rnd = crate::ops::test_stream(12345);
        for &(m, n, k) in &[(6, 16, 1), (13, 33, 7), (37, 70, 300), (250, 65, 513), (12, 32, 256), (300, 2100, 20), (7, 17, 600)] {
            let a: Vec<f32> = rnd(m * k);
            let b: Vec<f32> = rnd(k * n);
            for &a_row in &[true, false] {
                for &b_row in &[true, false] {
                    let astr = if a_row { (k, 1) } else { (1, m) };
                    let bstr = if b_row { (n, 1) } else { (1, k) };
                    let want = reference(m, n, k, &a, astr, &b, bstr);
                    for &threads in &[1, 2, 3] {
                        for &read in &[false, true] {
                            // A wider destination row (n + 3) checks the row stride.
                            let rs = n + 3;
                            let mut dst = vec![1.0f32; m * rs];
                            let (am, bm) = (
                                Mat { ptr: a.as_ptr(), rs: astr.0 as isize, cs: astr.1 as isize },
                                Mat { ptr: b.as_ptr(), rs: bstr.0 as isize, cs: bstr.1 as isize },
                            );
                            // SAFETY: the buffers hold the matrices at these strides; the caller
                            // checked the CPU has K's features.
                            unsafe { run::<K, Mat>((m, n, k), SyncPtr(dst.as_mut_ptr()), rs as isize, read, am, &bm, 0.5, threads) };
                            for i in 0..m {
                                for j in 0..rs {
                                    let got = dst[i * rs + j] as f64;
                                    let exp = if j >= n { 1.0 } else { 0.5 * want[i * n + j] + if read { 1.0 } else { 0.0 } };
                                    assert!(
                                        (got - exp).abs() <= 1e-4 * (1.0 + exp.abs()),
                                        "{m}x{n}x{k} a_row={a_row} b_row={b_row} t={threads} read={read} at ({i},{j}): {got} vs {exp}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_kernel_matches_reference() {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            check::<Avx2>();
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_kernel_matches_reference() {
        if crate::ops::cpu::has_avx512() {
            check::<Avx512>();
        }
    }
}
