//! Batched matrix products: `matmul` of operands with batch dimensions, which
//! broadcast (`(2, 1, m, k) @ (3, k, n)`), at any strides (a transposed `k` in
//! attention's `q @ k.transpose(-2, -1)` is read in place, not copied).
//!
//! Why not Candle's `broadcast_matmul`: it runs the batches one after another,
//! each a GEMM split over all threads by the `gemm` crate, so attention-sized
//! products (hundreds of 65 x 64 matrices) paid a fork-join per matrix and ran
//! 1.2-4.4x torch's time; it also copies strided operands and rejects some batch
//! broadcasts (`(2, 3, 3) @ (2, 3, 2, 3, 1)`). Here the batches (and, when they
//! are fewer than the threads, row blocks of each) are split over the threads
//! once, and each task is a single-threaded GEMM on the operands' own strides.
use super::float::{as_f32, Float};
use super::gemm::{gemm, Parallelism};
use super::parallel::SyncPtr;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor};

/// The broadcast batch shape of two operands' leading dims, or None if they clash.
pub(crate) fn batch_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |d: &[usize], i: usize| if i + d.len() >= r { d[i + d.len() - r] } else { 1 };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

/// The storage offset of each of an operand's matrices, one per index of the output's
/// batch (row-major order); broadcast dims repeat a matrix.
fn matrix_offsets(l: &Layout, batch: &[usize]) -> Vec<usize> {
    let (dims, stride) = (l.dims(), l.stride());
    let lead = dims.len() - 2;
    let skip = batch.len() - lead;
    // The stride of each output batch dim in this operand (0 where it broadcasts).
    let bs: Vec<usize> = (0..batch.len()).map(|i| if i < skip || dims[i - skip] == 1 { 0 } else { stride[i - skip] }).collect();
    super::layout::strided_offsets(batch, &bs, l.start_offset())
}

/// Products of at most this many multiply-adds per matrix take `small_product`: the
/// `gemm` crate's set-up and packing cost about half a microsecond per call, which
/// made a batch of 256 attention products of 32 x 16 x 32 (makemore's transformer)
/// take 2.8x torch's time; up to ~65 x 64 x 65 (a ViT's heads) the register tiles still
/// ran 5-10% faster than the crate.
const SMALL_MACS: usize = 1 << 19;

/// `dst (m x n, dense) = a (m x k) @ b (k x n)` at any strides, for small matrices:
/// `b` copied into `scratch` as dense rows when its columns are strided, then tiles of
/// 4 rows x 16 columns accumulated in registers over the depth (a row at a time through
/// memory was bound by store-to-load forwarding: 7x slower).
///
/// # Safety
/// `a` and `b` address (m, k) and (k, n) matrices at these strides; `dst` holds m * n
/// writable elements.
#[inline(always)]
unsafe fn small_product<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    (a, a_rs, a_cs): (*const T, isize, isize),
    (b, b_rs, b_cs): (*const T, isize, isize),
    scratch: &mut Vec<T>,
) {
    const MR: usize = 4;
    const W: usize = 16;
    // SAFETY: every offset below is (row, column) inside the matrices the caller
    // describes (rows of `a` below m, columns of `b` below n, depth below k), and `dst`
    // holds m * n elements.
    unsafe {
        let (rows, row_stride) = dense_rows(n, k, (b, b_rs, b_cs), scratch);
        for i0 in (0..m).step_by(MR) {
            let mr = MR.min(m - i0);
            for j0 in (0..n).step_by(W) {
                let w = W.min(n - j0);
                let mut acc = [[T::ZERO; W]; MR];
                for p in 0..k {
                    let mut bb = [T::ZERO; W];
                    let src = rows.add(p * row_stride + j0);
                    if w == W {
                        bb.copy_from_slice(std::slice::from_raw_parts(src, W));
                    } else {
                        bb[..w].copy_from_slice(std::slice::from_raw_parts(src, w));
                    }
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let av = if r < mr { *a.offset((i0 + r) as isize * a_rs + p as isize * a_cs) } else { T::ZERO };
                        for (o, &bv) in acc_r.iter_mut().zip(&bb) {
                            *o += av * bv;
                        }
                    }
                }
                for (r, acc_r) in acc.iter().enumerate().take(mr) {
                    std::slice::from_raw_parts_mut(dst.add((i0 + r) * n + j0), w).copy_from_slice(&acc_r[..w]);
                }
            }
        }
    }
}

/// `small_product` for float32 with AVX-512. Each block of 8 rows of `a` is first
/// copied depth-major into `apack` (zeros past the last row), so the tiles broadcast
/// from one pointer at fixed offsets (read in place at the row stride, the compiler
/// chained the row addresses through one register: 8 dependent adds per step of
/// depth). The block's columns then go 32 at a time through `tile` (16 accumulators:
/// 2 loads and 8 broadcasts per 16 multiply-adds, so the multiply-adds bound it; an
/// 8 x 16 tile's 9 loads per 8 bound it at 2/3 of that), the last 9-31 through a
/// masked `tile`, and a last 1-8 through `narrow_columns`, which spends one 8-lane
/// multiply-add per column and step instead of a whole tile's (a 65-wide product
/// wasted a fifth of its work on its last column). The last block's rows go 4, 2, 1
/// at a time; full blocks of row-major `a` are copied by 8 x 8 register transposes.
/// Steady-state loops, (192,65,32) @ (192,32,65): 1.41-1.51x -> 1.03-1.08x torch's
/// time; (96,64,64) @ (96,64,64) 1.18x (torch at ~80% of the machine's FMA peak,
/// these at ~70%).
///
/// # Safety
/// As `small_product`, on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn small_product_f32_avx512(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (a, a_rs, a_cs): (*const f32, isize, isize),
    (b, b_rs, b_cs): (*const f32, isize, isize),
    (scratch, apack): (&mut Vec<f32>, &mut Vec<f32>),
) {
    apack.resize(k * 8, 0.0);
    // Columns taken by whole and masked tiles; the rest (at most 8) by `narrow_columns`.
    let wide = if n % 32 == 0 || n % 32 > 8 { n } else { n - n % 32 };
    // SAFETY: as `small_product`: rows below m, columns below n (the masks keep every
    // load and store of a partial tile inside its columns), depth below k; `apack`
    // holds k * 8 floats.
    unsafe {
        let (rows, row_stride) = dense_rows(n, k, (b, b_rs, b_cs), scratch);
        let bm = (rows, row_stride);
        for i0 in (0..m).step_by(8) {
            let mr = 8.min(m - i0);
            let pk = apack.as_mut_ptr();
            let src = a.offset(i0 as isize * a_rs);
            // Row-major rows go 8 x 8 at a time through a register transpose (scalar
            // copies took a quarter of the time of 65 x 32 x 65 products).
            let fast = if mr == 8 && a_cs == 1 { k - k % 8 } else { 0 };
            for p0 in (0..fast).step_by(8) {
                crate::ops::layout::transpose8x8(src.add(p0), a_rs, pk.add(p0 * 8), 8);
            }
            if mr < 8 {
                apack.fill(0.0);
            }
            let pk = apack.as_mut_ptr();
            for r in 0..mr {
                let row = src.offset(r as isize * a_rs);
                for p in fast..k {
                    *pk.add(p * 8 + r) = *row.offset(p as isize * a_cs);
                }
            }
            let d = dst.add(i0 * n);
            let mut r0 = 0;
            while r0 < mr {
                let left = mr - r0;
                let (ap, dr) = (pk.add(r0) as *const f32, d.add(r0 * n));
                for j0 in (0..wide).step_by(32) {
                    match left {
                        8.. => tile::<8>(k, ap, bm, j0, wide, (dr, n)),
                        4..=7 => tile::<4>(k, ap, bm, j0, wide, (dr, n)),
                        2..=3 => tile::<2>(k, ap, bm, j0, wide, (dr, n)),
                        _ => tile::<1>(k, ap, bm, j0, wide, (dr, n)),
                    }
                }
                r0 += match left {
                    8.. => 8,
                    4..=7 => 4,
                    2..=3 => 2,
                    _ => 1,
                };
            }
            if wide < n {
                narrow_columns(k, pk, bm, (wide, n), (d, n), mr);
            }
        }
    }
}

/// `small_product` for float32 with AVX2 and FMA, on the register tiles of `ops::tiles`
/// (6 rows x 16 columns): `b` copied into rows of `n` rounded up to 16 (zeros past
/// `n`), `a` read in place at its strides, the result written straight into `dst` when
/// `n` is a multiple of 16, else through a padded copy. The generic loop, compiled for
/// baseline x86-64, ran (192,65,32) @ (192,32,65) at ~9 GFLOP/s: 6-10x torch's time.
///
/// # Safety
/// As `small_product`, on a CPU with AVX2 and FMA; the strides are not negative.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn small_product_f32_avx2(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (a, a_rs, a_cs): (*const f32, isize, isize),
    (b, b_rs, b_cs): (*const f32, isize, isize),
    (bpad, cpad): (&mut Vec<f32>, &mut Vec<f32>),
) {
    use super::tiles::{Depth, Epi, Product, Tiles};
    let np = n.div_ceil(16) * 16;
    bpad.clear();
    bpad.resize(k * np, 0.0);
    // SAFETY: as `small_product`: the reads of `b` are its (row p < k, column j < n)
    // elements; `bpad` holds k rows of np >= n floats; the tiles read A's rows below m
    // at depths below k, B's k padded rows, and write m rows of np floats into `dst`
    // (np == n, its m * n elements) or into `cpad` (m * np), whose first n columns are
    // then copied to `dst`; the caller's CPU has AVX2 and FMA (the tiles' level).
    unsafe {
        for (p, row) in bpad.chunks_exact_mut(np).enumerate() {
            let src = b.offset(p as isize * b_rs);
            if b_cs == 1 {
                row[..n].copy_from_slice(std::slice::from_raw_parts(src, n));
            } else {
                for (j, o) in row[..n].iter_mut().enumerate() {
                    *o = *src.offset(j as isize * b_cs);
                }
            }
        }
        let (c, c_rs) = if np == n {
            (dst, n)
        } else {
            cpad.resize(m * np, 0.0);
            (cpad.as_mut_ptr(), np)
        };
        <super::lanes::X8 as Tiles>::mm(Product {
            m,
            n: np,
            k,
            a,
            a_st: (a_rs as usize, a_cs as usize),
            b: bpad.as_ptr(),
            b_rs: np,
            b_c64: 64,
            c,
            c_rs,
            add: false,
            alpha: 1.0,
            ep: Epi::NONE,
            depth: Depth::All,
        });
        if np != n {
            for r in 0..m {
                std::ptr::copy_nonoverlapping(cpad.as_ptr().add(r * np), dst.add(r * n), n);
            }
        }
    }
}

/// `R` rows x columns `j0..min(j0 + 32, n)` of the product: the rows' depth-major
/// values at `ap` (8 floats a step of depth, the tile's rows first), `b`'s dense rows
/// `(ptr, stride)`, the destination's row 0 at `d` (rows `n`-strided).
///
/// # Safety
/// `ap` holds `k` steps of 8 floats; `b` `k` rows of `n` columns; `d` `R` rows of `n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn tile<const R: usize>(
    k: usize,
    ap: *const f32,
    (b, b_rs): (*const f32, usize),
    j0: usize,
    n: usize,
    (d, d_rs): (*mut f32, usize),
) {
    use std::arch::x86_64::*;
    let mask = |w: usize| ((1u32 << w.min(16)) - 1) as __mmask16;
    let (m0, m1) = (mask(n - j0), mask((n - j0).saturating_sub(16)));
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    // SAFETY: the caller's buffers; the masks keep every access of `b` and `d` inside
    // columns j0..n.
    unsafe {
        let mut bp = b.add(j0);
        let mut ap = ap;
        for _ in 0..k {
            let b0 = _mm512_maskz_loadu_ps(m0, bp);
            let b1 = _mm512_maskz_loadu_ps(m1, bp.add(16));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r));
                acc_r[0] = _mm512_fmadd_ps(av, b0, acc_r[0]);
                acc_r[1] = _mm512_fmadd_ps(av, b1, acc_r[1]);
            }
            ap = ap.add(8);
            bp = bp.add(b_rs);
        }
        for (r, acc_r) in acc.iter().enumerate() {
            let p = d.add(r * d_rs + j0);
            _mm512_mask_storeu_ps(p, m0, acc_r[0]);
            _mm512_mask_storeu_ps(p.add(16), m1, acc_r[1]);
        }
    }
}

/// Columns `j0..j0 + C` of an 8-row block: per column, the 8 rows in one 8-lane
/// register, one multiply-add per step of depth (`ap`'s depth-major rows times the
/// column's value broadcast); the first `mr` rows stored. `C` is a constant so the
/// accumulators stay in registers.
///
/// # Safety
/// As `tile`, with `j0 + C <= n` and `mr <= 8` rows of `d`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
unsafe fn narrow<const C: usize, const U: usize>(
    k: usize,
    ap: *const f32,
    (b, b_rs): (*const f32, usize),
    j0: usize,
    (d, d_rs): (*mut f32, usize),
    mr: usize,
) {
    use std::arch::x86_64::*;
    // `U` sums a column (over steps of depth u, u + U, ...): one chain of dependent
    // multiply-adds a column made the last column of a 65-wide product latency-bound.
    let mut acc = [[_mm256_setzero_ps(); C]; U];
    // SAFETY: the caller's buffers: depth below k, columns j0..j0 + C, rows below mr.
    unsafe {
        let step = |acc: &mut [__m256; C], p: usize| {
            let av = _mm256_loadu_ps(ap.add(p * 8));
            let bp = b.add(p * b_rs + j0);
            for (c, acc_c) in acc.iter_mut().enumerate() {
                *acc_c = _mm256_fmadd_ps(av, _mm256_set1_ps(*bp.add(c)), *acc_c);
            }
        };
        for p in (0..k - k % U).step_by(U) {
            for (u, acc_u) in acc.iter_mut().enumerate() {
                step(acc_u, p + u);
            }
        }
        for p in k - k % U..k {
            step(&mut acc[0], p);
        }
        let mut lanes = [0f32; 8];
        for c in 0..C {
            let sum = acc.iter().fold(_mm256_setzero_ps(), |s, acc_u| _mm256_add_ps(s, acc_u[c]));
            _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
            for (r, &v) in lanes.iter().enumerate().take(mr) {
                *d.add(r * d_rs + j0 + c) = v;
            }
        }
    }
}

/// `narrow` for the last `j1 - j0` (1 to 8) columns.
///
/// # Safety
/// As `narrow`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn narrow_columns(k: usize, ap: *const f32, b: (*const f32, usize), (j0, j1): (usize, usize), d: (*mut f32, usize), mr: usize) {
    // SAFETY: forwarded; each arm's C is j1 - j0.
    unsafe {
        match j1 - j0 {
            1 => narrow::<1, 4>(k, ap, b, j0, d, mr),
            2 => narrow::<2, 4>(k, ap, b, j0, d, mr),
            3 => narrow::<3, 4>(k, ap, b, j0, d, mr),
            4 => narrow::<4, 4>(k, ap, b, j0, d, mr),
            5 => narrow::<5, 2>(k, ap, b, j0, d, mr),
            6 => narrow::<6, 2>(k, ap, b, j0, d, mr),
            7 => narrow::<7, 2>(k, ap, b, j0, d, mr),
            8 => narrow::<8, 2>(k, ap, b, j0, d, mr),
            c => unreachable!("narrow_columns takes 1 to 8 columns, got {c}"),
        }
    }
}

/// `b` (k x n) as dense rows: itself when its columns are contiguous, else a copy in
/// `scratch`, made column by column (a transposed operand, `k.transpose(-2, -1)`,
/// reads each column as one contiguous run). Returns the rows and their stride.
///
/// # Safety
/// `b` addresses a (k, n) matrix at these strides.
#[inline(always)]
unsafe fn dense_rows<T: Float>(n: usize, k: usize, (b, b_rs, b_cs): (*const T, isize, isize), scratch: &mut Vec<T>) -> (*const T, usize) {
    if b_cs == 1 {
        return (b, b_rs as usize);
    }
    scratch.resize(k * n, T::ZERO);
    let sp = scratch.as_mut_ptr();
    // SAFETY: (p, j) below (k, n) is inside `b`; `scratch` holds k * n elements.
    unsafe {
        for j in 0..n {
            let col = b.offset(j as isize * b_cs);
            for p in 0..k {
                *sp.add(p * n + j) = *col.offset(p as isize * b_rs);
            }
        }
    }
    (scratch.as_ptr(), n)
}

/// `out[i] = a[i] @ b[i]` over the broadcast batch, `out` dense `(batch..., m, n)`.
fn forward<T: Float>(a: &[T], al: &Layout, b: &[T], bl: &Layout, batch: &[usize]) -> Vec<T> {
    let (ad, bd) = (al.dims(), bl.dims());
    let (m, k, n) = (ad[ad.len() - 2], ad[ad.len() - 1], bd[bd.len() - 1]);
    let (a_rs, a_cs) = (al.stride()[ad.len() - 2] as isize, al.stride()[ad.len() - 1] as isize);
    let (b_rs, b_cs) = (bl.stride()[bd.len() - 2] as isize, bl.stride()[bd.len() - 1] as isize);
    let nb: usize = batch.iter().product();
    if nb == 0 || m == 0 || n == 0 {
        return Vec::new();
    }
    if k == 0 {
        return vec![T::ZERO; nb * m * n];
    }
    let (ao, bo) = (matrix_offsets(al, batch), matrix_offsets(bl, batch));
    if m * n * k <= SMALL_MACS {
        // The float32 operands where a vector kernel runs (Some only when T is f32).
        let level = super::cpu::simd_level();
        let f32_ops = as_f32(a).zip(as_f32(b)).filter(|_| level != super::cpu::Simd::Plain);
        let mut out: Vec<T> = Vec::with_capacity(nb * m * n);
        let dst = SyncPtr(out.as_mut_ptr());
        let run = |range: std::ops::Range<usize>| {
            let (mut scratch, mut scratch32, mut apack) = (Vec::new(), Vec::new(), Vec::new());
            for i in range {
                // SAFETY: matrix i of each operand lies at its offset (as for the GEMM
                // below); output matrix i is written by this task only.
                unsafe {
                    let d = dst.ptr().add(i * m * n);
                    #[cfg(target_arch = "x86_64")]
                    if let Some((a32, b32)) = f32_ops {
                        // `T` is f32 here (`as_f32` said so), so `d` points to f32s; `level`
                        // is AVX2 or AVX-512, what the CPU has (strides of a layout are
                        // never negative).
                        let (av, bv, d) = (a32.as_ptr().add(ao[i]), b32.as_ptr().add(bo[i]), d as *mut f32);
                        if level == super::cpu::Simd::Avx512 {
                            small_product_f32_avx512((m, n, k), d, (av, a_rs, a_cs), (bv, b_rs, b_cs), (&mut scratch32, &mut apack));
                        } else {
                            small_product_f32_avx2((m, n, k), d, (av, a_rs, a_cs), (bv, b_rs, b_cs), (&mut scratch32, &mut apack));
                        }
                        continue;
                    }
                    let _ = f32_ops;
                    small_product((m, n, k), d, (a.as_ptr().add(ao[i]), a_rs, a_cs), (b.as_ptr().add(bo[i]), b_rs, b_cs), &mut scratch);
                }
            }
        };
        // Split from a million multiply-adds (~0.1 ms here): lower than the GEMM policy's
        // threshold, since these tasks need no packing and share no operand.
        if super::pool::num_threads() > 1 && nb > 1 && nb * m * n * k >= 1 << 20 {
            let per = nb.div_ceil(2 * super::pool::num_threads()).max(1);
            super::parallel::for_tasks(nb.div_ceil(per), true, |c| run(c * per..((c + 1) * per).min(nb)));
        } else {
            run(0..nb);
        }
        // SAFETY: every output matrix was written by `small_product`.
        unsafe { out.set_len(nb * m * n) };
        return out;
    }
    let threads = if super::parallel::par_gemm(nb * m * n * k) { super::pool::num_threads() } else { 1 };
    // Enough tasks to keep every thread busy: whole matrices when there are plenty,
    // else row blocks (of at least 16 rows: thinner ones waste the kernel's tile).
    let blocks = if nb >= 2 * threads { 1 } else { (2 * threads).div_ceil(nb).min(m.div_ceil(16)).max(1) };
    let step = m.div_ceil(blocks);
    let mut out: Vec<T> = Vec::with_capacity(nb * m * n);
    let dst = SyncPtr(out.as_mut_ptr());
    let task = |t: usize| {
        let (i, j) = (t / blocks, t % blocks);
        let (r0, r1) = ((j * step).min(m), ((j + 1) * step).min(m));
        if r0 == r1 {
            return;
        }
        // SAFETY: matrix i of each operand starts at its offset and spans (m, k) / (k, n)
        // at these strides inside the storage (Candle checked the layouts when the views
        // were made); this task writes rows r0..r1 of output matrix i only, inside the
        // nb * m * n capacity, and the GEMM overwrites them without reading.
        unsafe {
            gemm(
                (r1 - r0, n, k),
                dst.ptr().add(i * m * n + r0 * n),
                n as isize,
                false,
                (a.as_ptr().add(ao[i]).offset(r0 as isize * a_rs), a_rs, a_cs),
                (b.as_ptr().add(bo[i]), b_rs, b_cs),
                T::ONE,
                Parallelism::None,
            )
        }
    };
    super::parallel::for_tasks(nb * blocks, threads > 1, task);
    // SAFETY: the tasks cover every row of every output matrix (blocks of `step` rows
    // up to m, for each of the nb matrices), all written above.
    unsafe { out.set_len(nb * m * n) };
    out
}

struct Bmm;

impl CustomOp2 for Bmm {
    fn name(&self) -> &'static str {
        "matmul"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (ad, bd) = (l1.dims(), l2.dims());
        if ad.len() < 2 || bd.len() < 2 || ad[ad.len() - 1] != bd[bd.len() - 2] {
            candle_core::bail!("matmul: shapes {ad:?} and {bd:?} cannot be multiplied");
        }
        let Some(batch) = batch_shape(&ad[..ad.len() - 2], &bd[..bd.len() - 2]) else {
            candle_core::bail!("matmul: batch dimensions of {ad:?} and {bd:?} cannot be broadcast");
        };
        let mut dims = batch.clone();
        dims.extend([ad[ad.len() - 2], bd[bd.len() - 1]]);
        let out = match (s1, s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => CpuStorage::F32(forward(a, l1, b, l2, &batch)),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => CpuStorage::F64(forward(a, l1, b, l2, &batch)),
            _ => candle_core::bail!("matmul: the batched kernel takes float32 or float64 operands of one dtype"),
        };
        Ok((out, Shape::from(dims)))
    }
}

/// Whether `batched` takes these operands: on the CPU, both float32 or both float64.
pub(crate) fn takes(a: &Tensor, b: &Tensor) -> bool {
    a.device().is_cpu() && b.device().is_cpu() && a.dtype() == b.dtype() && matches!(a.dtype(), DType::F32 | DType::F64)
}

/// `a @ b` for operands of rank >= 2 whose batch dims broadcast (no autograd: the
/// caller records the node). Call only where `takes(a, b)`.
pub(crate) fn batched(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.apply_op2_no_bwd(b, &Bmm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// The product computed naively in f64 from the operands' own values.
    fn reference(a: &Tensor, b: &Tensor) -> Vec<f64> {
        let (ad, bd) = (a.dims().to_vec(), b.dims().to_vec());
        let batch = batch_shape(&ad[..ad.len() - 2], &bd[..bd.len() - 2]).unwrap();
        let a = a.broadcast_as([batch.clone(), ad[ad.len() - 2..].to_vec()].concat()).unwrap().contiguous().unwrap();
        let b = b.broadcast_as([batch.clone(), bd[bd.len() - 2..].to_vec()].concat()).unwrap().contiguous().unwrap();
        let (av, bv) = (a.flatten_all().unwrap().to_vec1::<f32>().unwrap(), b.flatten_all().unwrap().to_vec1::<f32>().unwrap());
        let (m, k, n) = (ad[ad.len() - 2], ad[ad.len() - 1], bd[bd.len() - 1]);
        let nb: usize = batch.iter().product();
        let mut out = vec![0f64; nb * m * n];
        for i in 0..nb {
            for r in 0..m {
                for c in 0..n {
                    out[(i * m + r) * n + c] = (0..k).map(|p| av[(i * m + r) * k + p] as f64 * bv[(i * k + p) * n + c] as f64).sum();
                }
            }
        }
        out
    }

    #[test]
    fn broadcast_and_strided_batches_match_the_naive_product() {
        let mut vals = crate::ops::test_stream(7);
        let t =
            |dims: &[usize], v: &mut dyn FnMut(usize) -> Vec<f32>| Tensor::from_vec(v(dims.iter().product()), dims, &Device::Cpu).unwrap();
        let cases: Vec<(Tensor, Tensor)> = vec![
            (t(&[2, 3, 3], &mut vals), t(&[2, 3, 2, 3, 1], &mut vals)),
            (t(&[5, 1, 33, 20], &mut vals), t(&[4, 20, 17], &mut vals)),
            // q @ k^T with k transposed in place, and a batch of one wide matrix.
            (t(&[3, 40, 64], &mut vals), t(&[3, 50, 64], &mut vals).transpose(1, 2).unwrap()),
            (t(&[1, 300, 70], &mut vals).transpose(1, 2).unwrap(), t(&[300, 90], &mut vals)),
            (t(&[64, 4, 32, 16], &mut vals), t(&[64, 4, 32, 16], &mut vals).transpose(2, 3).unwrap()),
            (t(&[7, 5, 3], &mut vals).transpose(1, 2).unwrap(), t(&[7, 9, 5], &mut vals).transpose(1, 2).unwrap()),
            // The AVX-512 small kernel's edges: 32-wide tiles plus 1 or 8 narrow columns,
            // 13 = 8 + 4 + 1 and 7 = 4 + 2 + 1 rows, depth 20 = two 8 x 8 transposes + 4,
            // a 16-column tile of a column-major b, a column-major a in full row blocks.
            (t(&[3, 13, 20], &mut vals), t(&[3, 20, 65], &mut vals)),
            (t(&[2, 7, 11], &mut vals), t(&[2, 11, 40], &mut vals)),
            (t(&[2, 7, 11], &mut vals), t(&[2, 11, 16], &mut vals).transpose(1, 2).unwrap().contiguous().unwrap().transpose(1, 2).unwrap()),
            (t(&[2, 11, 17], &mut vals).transpose(1, 2).unwrap(), t(&[2, 11, 33], &mut vals)),
            (t(&[2, 0, 3], &mut vals), t(&[3, 4], &mut vals)),
            (t(&[2, 3, 0], &mut vals), t(&[2, 0, 4], &mut vals)),
            // The AVX2 tiles: 6-row tiles plus 1 row (13, 7), one 16-wide band written in
            // place (16, 32 columns) or through the padded copy (17, 40, 65), depth 1.
            (t(&[4, 13, 1], &mut vals), t(&[4, 1, 17], &mut vals)),
            (t(&[2, 6, 9], &mut vals).transpose(1, 2).unwrap(), t(&[2, 6, 32], &mut vals)),
        ];
        for (a, b) in cases {
            let want = reference(&a, &b);
            // float32 (the AVX-512 or AVX2 kernels, whichever the CPU has) and float64 (the
            // generic small kernel and the gemm crate's f64 path).
            for dt in [DType::F32, DType::F64] {
                let got = batched(&a.to_dtype(dt).unwrap(), &b.to_dtype(dt).unwrap()).unwrap();
                let got = got.flatten_all().unwrap().to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap();
                assert_eq!(got.len(), want.len(), "{:?} @ {:?}", a.dims(), b.dims());
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{dt:?} {:?} @ {:?}: {g} vs {w}", a.dims(), b.dims());
                }
            }
        }
    }

    #[test]
    fn clashing_batches_are_an_error() {
        let a = Tensor::zeros((2, 3, 4), DType::F32, &Device::Cpu).unwrap();
        let b = Tensor::zeros((3, 4, 5), DType::F32, &Device::Cpu).unwrap();
        assert!(batched(&a, &b).is_err());
    }
}
