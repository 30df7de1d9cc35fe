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

/// `small_product` for float32 with AVX-512: tiles of 8 rows x 16 columns in eight
/// registers, one fused multiply-add per row and step of depth (the generic form's
/// separate multiply and add, 4 rows at a time, ran at half torch's speed). Each tile
/// row's 8 rows of `a` are first copied depth-major into `apack` (zeros past the last
/// row), so the tiles broadcast from one pointer at fixed offsets: read in place at
/// the row stride, the compiler chained the 8 row addresses through one register, 8
/// dependent adds per step of depth, twice the multiply-adds' time.
///
/// # Safety
/// As `small_product`, on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn small_product_f32_avx512(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (a, a_rs, a_cs): (*const f32, isize, isize),
    (b, b_rs, b_cs): (*const f32, isize, isize),
    (scratch, apack): (&mut Vec<f32>, &mut Vec<f32>),
) {
    use std::arch::x86_64::*;
    const MR: usize = 8;
    apack.resize(k * MR, 0.0);
    // SAFETY: as `small_product`: rows below m, columns below n (the masks keep every
    // load and store of a partial tile inside its first w columns), depth below k;
    // `apack` holds k * MR floats.
    unsafe {
        let (rows, row_stride) = dense_rows(n, k, (b, b_rs, b_cs), scratch);
        for i0 in (0..m).step_by(MR) {
            let mr = MR.min(m - i0);
            let pk = apack.as_mut_ptr();
            for p in 0..k {
                let src = a.offset(i0 as isize * a_rs + p as isize * a_cs);
                for r in 0..MR {
                    *pk.add(p * MR + r) = if r < mr { *src.offset(r as isize * a_rs) } else { 0.0 };
                }
            }
            for j0 in (0..n).step_by(16) {
                let w = 16.min(n - j0);
                let mask = ((1u32 << w) - 1) as __mmask16;
                let mut acc = [_mm512_setzero_ps(); MR];
                let mut ap = pk as *const f32;
                for p in 0..k {
                    let bv = _mm512_maskz_loadu_ps(mask, rows.add(p * row_stride + j0));
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        *acc_r = _mm512_fmadd_ps(_mm512_set1_ps(*ap.add(r)), bv, *acc_r);
                    }
                    ap = ap.add(MR);
                }
                for (r, acc_r) in acc.iter().enumerate().take(mr) {
                    _mm512_mask_storeu_ps(dst.add((i0 + r) * n + j0), mask, *acc_r);
                }
            }
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
        // The float32 operands where the AVX-512 kernel runs (Some only when T is f32).
        let f32_ops = as_f32(a).zip(as_f32(b)).filter(|_| super::cpu::has_avx512());
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
                        // `T` is f32 here (`as_f32` said so), so `d` points to f32s.
                        let (av, bv) = (a32.as_ptr().add(ao[i]), b32.as_ptr().add(bo[i]));
                        small_product_f32_avx512(
                            (m, n, k),
                            d as *mut f32,
                            (av, a_rs, a_cs),
                            (bv, b_rs, b_cs),
                            (&mut scratch32, &mut apack),
                        );
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
            (t(&[2, 0, 3], &mut vals), t(&[3, 4], &mut vals)),
            (t(&[2, 3, 0], &mut vals), t(&[2, 0, 4], &mut vals)),
        ];
        for (a, b) in cases {
            let want = reference(&a, &b);
            // float32 (the AVX-512 kernels where the CPU has them) and float64 (the
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
