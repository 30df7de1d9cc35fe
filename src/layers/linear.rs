//! `F.linear` as one fused op: `y = x W^T + b` in a single GEMM call per thread
//! (a block of rows or of columns), no transposed copy of `W`; the GEMM overwrites
//! uninitialised memory (no zero fill, no read of the destination: 7-10% faster at
//! BERT shapes than accumulating into zeros), then the thread adds the bias to its
//! block. Batch dims of `x` fold into the rows of one (M, K) x (K, N) product, which
//! parallelises far better than a batch of small ones. 2-D float matmul comes here too (`matmul2d`). A few rows against
//! a long depth (a small batch through a large layer) take `ops::dot_rows` instead.
//!
//! The backward is three plain products (`dx = g W`, `dW = g^T x` through this
//! kernel, `db = sum(g)`). Other dtypes and devices take Candle's matmul +
//! broadcast add, with the same result.
use crate::ops::dot_rows;
use crate::ops::float::{as_f32, Float};
use crate::ops::gemm::{gemm, Parallelism};
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};

pub(crate) const OP: &str = "linear";

/// The (row, column) strides and start of a 2-D layout.
pub(crate) fn mat(l: &Layout) -> (usize, isize, isize) {
    let s = l.stride();
    (l.start_offset(), s[0] as isize, s[1] as isize)
}

/// `dst (m x n) = x (m x k) * w^T (k x n) [+ b]`, with `w` stored as (n, k).
pub(crate) fn forward<T: Float>(x: &[T], xl: &Layout, w: &[T], wl: &Layout, b: Option<(&[T], &Layout)>) -> Vec<T> {
    let (m, k) = xl.shape().dims2().unwrap_or((0, 0));
    let n = wl.dims()[0];
    let bias_row: Option<Vec<T>> = b.map(|(b, bl)| {
        let (o, s) = (bl.start_offset(), bl.stride()[0]);
        (0..n).map(|j| b[o + j * s]).collect()
    });
    let (xo, x_rs, x_cs) = mat(xl);
    let (wo, w_rs, w_cs) = mat(wl);
    if m == 0 || n == 0 || k == 0 {
        return match &bias_row {
            Some(row) => (0..m).flat_map(|_| row.iter().copied()).collect(),
            None => vec![T::ZERO; m * n],
        };
    }
    // One block per thread, each a single-threaded GEMM: gemm's own rayon mode
    // synchronises per cache block and scales poorly on medium products (2 threads
    // gave 1.2-1.5x one instead of ~1.9x at BERT-sized layers). Blocks of columns
    // (each thread packs only its part of W: the crate packs W per call) where rows are
    // few against the depth; else blocks of rows. Column blocks interleave the
    // threads' writes within each output row, and the cores' prefetchers then pull
    // each other's lines: the bias fill of a (512, 384) output took 46 us by columns
    // and 11 by rows, and Linear(128->384) on 512 rows 245 us against 186 (torch 180).
    let threads = if crate::ops::parallel::par_linear(m * n * k) { rayon::current_num_threads() } else { 1 };
    // A column-major x (a transposed left operand: the weight gradient g^T x) is
    // split by rows whatever the shape: the crate packs the left operand per call, and
    // column blocks would each pack all of it (1152 x 384 x 2048 and 576 x 192 x 1040
    // took 10-11% less time by rows).
    let left_col_major = x_rs == 1 && x_cs != 1;
    // A few rows of x against a row-major W: dot products along the depth, W read in
    // place (`ops::dot_rows`: the crate would copy all of W first).
    if let (Some(xf), Some(wf)) = (as_f32(x), as_f32(w)) {
        if x_cs == 1 && w_cs == 1 && dot_rows::takes(m, n, k) {
            // Split as a memory-bound pass over W too: one row of x against a large W
            // (a decode step) is W's read, 2 threads reading faster than one.
            let threads = if crate::ops::parallel::par_ok(n * k) { rayon::current_num_threads() } else { threads };
            let bias = bias_row.as_deref().and_then(as_f32);
            let mut out: Vec<T> = Vec::with_capacity(m * n);
            // SAFETY: `takes` checked AVX-512; the layouts describe (m, k) and (n, k)
            // matrices with unit column strides inside `x` and `w`; `bias` has n values;
            // the output has capacity m * n, and the kernel writes every element.
            unsafe {
                dot_rows::linear(
                    (m, n, k),
                    out.as_mut_ptr() as *mut f32,
                    (xf.as_ptr().add(xo), x_rs as usize),
                    (wf.as_ptr().add(wo), w_rs as usize),
                    bias,
                    threads,
                );
                out.set_len(m * n);
            }
            return out;
        }
    }
    // Deep products (k >= 256) split by columns too while the rows are not many times
    // the columns: each thread's GEMM then packs only its half of W (the crate packs
    // W, its left operand once it transposes the product for the row-major output,
    // through a strided gather). On a Zen 5 (AVX-512, 2 threads), a GPT layer's
    // products (1024 rows, widths 384 / 1152 / 1536) took 0.7-0.8% less time in all,
    // old and new split alternating in one process: up to 3-3.5% on single products,
    // none slower by more than the rounds' spread (~1%); the crate alone, outside
    // this library, gained 3-10% on the same shapes.
    let by_cols = threads > 1 && m < 4 * n && (m < 2 * k || k >= 256) && n >= 32 * threads && !left_col_major;
    let (step, total) = if by_cols { (n.div_ceil(threads).div_ceil(16) * 16, n) } else { (m.div_ceil(threads), m) };
    // Every element is written by the GEMM (it overwrites: no zero fill), then gets
    // the bias added by the thread that wrote it: bias + product, the one rounding
    // torch's addmm makes. Filling the bias first for the GEMM to accumulate
    // into wrote every output line once more, to memory not yet in cache: 7.5% of a
    // ViT forward (2080 x 192 -> 576 and the like), whose forward took 54 ms instead of
    // 57-63.
    let mut out: Vec<T> = Vec::with_capacity(m * n);
    let dst = crate::ops::parallel::SyncPtr(out.as_mut_ptr());
    let block = |t: usize| {
        let (a, b) = ((t * step).min(total), ((t + 1) * step).min(total));
        if a == b {
            return;
        }
        let (r0, mr, c0, nc) = if by_cols { (0, m, a, b - a) } else { (a, b - a, 0, n) };
        // SAFETY: the layouts describe (m, k) and (n, k) matrices inside `x` and `w`
        // (checked by Candle when the tensors were made); `dst` is the (m, n) row-major
        // output, and blocks write disjoint rows or columns of it. The GEMM does not
        // read the destination (read_dst = false).
        unsafe {
            gemm(
                (mr, nc, k),
                dst.ptr().add(r0 * n + c0),
                n as isize,
                false,
                (x.as_ptr().offset(xo as isize + r0 as isize * x_rs), x_rs, x_cs),
                // W^T: element (kk, j) of the right operand is w[j, kk].
                (w.as_ptr().offset(wo as isize + c0 as isize * w_rs), w_cs, w_rs),
                T::ONE,
                Parallelism::None,
            );
        }
        if let Some(row) = &bias_row {
            for r in r0..r0 + mr {
                // SAFETY: row r, columns c0..c0+nc of the (m, n) output: inside its m * n
                // capacity, written by the GEMM above and by this block only (blocks are
                // disjoint).
                let d = unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(r * n + c0), nc) };
                // The dispatched AVX-512 / AVX2 loop: this generic function is compiled
                // for the baseline, where the add ran 4 lanes at a time (2.2% of a GPT
                // training step's samples, stalled on its loads).
                crate::ops::simd_map::zip_assign_here(d, &row[c0..c0 + nc], |o, bv| o + bv);
            }
        }
    };
    if threads > 1 {
        crate::ops::parallel::for_tasks(threads, true, block);
    } else {
        block(0);
    }
    // SAFETY: the capacity is m * n, and the blocks (rows or columns `t * step..`, for
    // t < threads, cover 0..total) have written all m x n elements (see above).
    unsafe { out.set_len(m * n) };
    out
}

pub(crate) fn cpu_fwd(
    x: (&CpuStorage, &Layout),
    w: (&CpuStorage, &Layout),
    b: Option<(&CpuStorage, &Layout)>,
) -> Result<(CpuStorage, Shape)> {
    let (m, _) = x.1.shape().dims2()?;
    let n = w.1.dims()[0];
    let out = match (x.0, w.0, b.map(|b| b.0)) {
        (CpuStorage::F32(xv), CpuStorage::F32(wv), None) => CpuStorage::F32(forward(xv, x.1, wv, w.1, None)),
        (CpuStorage::F32(xv), CpuStorage::F32(wv), Some(CpuStorage::F32(bv))) => {
            CpuStorage::F32(forward(xv, x.1, wv, w.1, Some((bv, b.unwrap().1))))
        }
        (CpuStorage::F64(xv), CpuStorage::F64(wv), None) => CpuStorage::F64(forward(xv, x.1, wv, w.1, None)),
        (CpuStorage::F64(xv), CpuStorage::F64(wv), Some(CpuStorage::F64(bv))) => {
            CpuStorage::F64(forward(xv, x.1, wv, w.1, Some((bv, b.unwrap().1))))
        }
        _ => candle_core::bail!("linear: the fused kernel takes float32 or float64 operands of one dtype"),
    };
    Ok((out, Shape::from((m, n))))
}

/// `dx = g W`, `dW = g^T x` for the 2-D operands.
pub(crate) fn grads(x: &Tensor, w: &Tensor, g: &Tensor) -> Result<(Tensor, Tensor)> {
    // The forward kernel reads strided operands: dx = g (w^T)^T and dW = g^T (x^T)^T with
    // the same size-based threading as the forward (Candle's matmul always wakes the pool).
    if g.device().is_cpu() && matches!(g.dtype(), DType::F32 | DType::F64) && g.dtype() == x.dtype() && g.dtype() == w.dtype() {
        return Ok((g.apply_op2_no_bwd(&w.t()?, &Linear)?, g.t()?.apply_op2_no_bwd(&x.t()?, &Linear)?));
    }
    Ok((g.matmul(w)?, g.t()?.matmul(x)?))
}

pub(crate) struct Linear;

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        OP
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_fwd((s1, l1), (s2, l2), None)
    }
    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = grads(x, w, g)?;
        Ok((Some(dx), Some(dw)))
    }
}

pub(crate) struct LinearBias;

impl CustomOp3 for LinearBias {
    fn name(&self) -> &'static str {
        OP
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        cpu_fwd((s1, l1), (s2, l2), Some((s3, l3)))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, dw) = grads(x, w, g)?;
        Ok((Some(dx), Some(dw), Some(crate::ops::reduce::sum_keepdim(g, &[0])?.squeeze(0)?)))
    }
}

/// The whole op on 2-D `x`: the fused kernel where it applies, else Candle's ops.
pub(crate) fn linear2d(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let fused = x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64);
    if !fused {
        let y = x.matmul(&w.t()?)?;
        return match b {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        };
    }
    match b {
        Some(b) => x.apply_op3(w, b, LinearBias),
        None => x.apply_op2(w, Linear),
    }
}

/// `a @ b` for 2-D operands of one dtype: the linear kernel with `W = b^T` (a
/// strided view, no copy); one block per thread beats Candle's matmul (the gemm
/// crate's own threading) by 4% at 1024^2 and 15% at 512^2. Where the kernel does
/// not apply, `linear2d` itself falls back to Candle's matmul.
pub(crate) fn matmul2d(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    linear2d(a, &b.t()?, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `forward` against an f64 triple loop, f32 and f64: a split by columns (k >= 256,
    /// the second block ragged), by rows, a product too small to split, and a
    /// column-major x (split by rows whatever the shape); with and without a bias.
    #[test]
    fn forward_matches_reference() {
        let mut rnd = crate::ops::test_stream(7);
        for &(m, n, k, x_col_major) in &[(100, 70, 300, false), (300, 40, 300, false), (20, 50, 40, false), (90, 70, 300, true)] {
            let (x, w, b) = (rnd(m * k), rnd(n * k), rnd(n));
            let xl = if x_col_major { Layout::new(Shape::from((m, k)), vec![1, m], 0) } else { Layout::contiguous((m, k)) };
            let (wl, bl) = (Layout::contiguous((n, k)), Layout::contiguous(n));
            let x_at = |i: usize, p: usize| if x_col_major { x[p * m + i] } else { x[i * k + p] } as f64;
            for bias in [false, true] {
                let want: Vec<f64> = (0..m * n)
                    .map(|e| {
                        let (i, j) = (e / n, e % n);
                        (0..k).map(|p| x_at(i, p) * w[j * k + p] as f64).sum::<f64>() + if bias { b[j] as f64 } else { 0.0 }
                    })
                    .collect();
                let got32 = forward(&x, &xl, &w, &wl, bias.then_some((&b[..], &bl)));
                let wide = |v: &[f32]| v.iter().map(|&e| e as f64).collect::<Vec<f64>>();
                let (x64, w64, b64) = (wide(&x), wide(&w), wide(&b));
                let got64 = forward(&x64, &xl, &w64, &wl, bias.then_some((&b64[..], &bl)));
                for (e, &exp) in want.iter().enumerate() {
                    let tol = 1e-4 * (1.0 + exp.abs());
                    assert!((got32[e] as f64 - exp).abs() <= tol, "f32 {m}x{n}x{k} bias={bias} at {e}: {} vs {exp}", got32[e]);
                    assert!(
                        (got64[e] - exp).abs() <= 1e-9 * (1.0 + exp.abs()),
                        "f64 {m}x{n}x{k} bias={bias} at {e}: {} vs {exp}",
                        got64[e]
                    );
                }
            }
        }
    }
}
