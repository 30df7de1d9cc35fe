//! `x W^T (+ b)` for a few rows of `x` as dot products along the depth, with `W` read
//! where it lies: a linear layer's forward at small batch (an LLM's prompt, one
//! sentence through BERT).
//!
//! Why not the `gemm` crate there: it packs the operand along whose columns its
//! micro-kernel runs, which for `x W^T` into a row-major output is all of `W`, on
//! every call. With few rows that copy outweighs the product: `Linear(1024, 4096)` on
//! 32 rows took 3.3 ms against torch's 1.6 (its 16 MiB weight read, copied and read
//! again), and `Linear(384, 1152)` on 16 rows 2.63x torch's time. Both `x` and `W` are
//! contiguous along the depth, so a tile of `R` rows of `x` by `C` rows of `W` needs
//! only their own loads: `R + C` vector loads per `R * C` multiply-adds (4 x 4: 8 per
//! 16, few enough for the FMA units to bound the loop were they all from L1; `x`'s
//! come from L2, which with the sums below keeps it short of that at `12 m > k`), and
//! a horizontal sum per output at the end of the depth. Each thread takes a block of `W`'s rows, whose
//! tile of 4 stays in L1 while it meets every row block of `x` (in L2), so `W` is
//! read from memory once.
use super::cpu::{simd_level, Simd};
use super::parallel::SyncPtr;

/// Rows of `x` (and of `W`) in one tile.
const T: usize = 4;

/// Whether this kernel takes the product: AVX-512, and few rows against the depth
/// (`12 m <= k`). Its cost over the FMAs is a horizontal sum per output (`m n`), the
/// crate's a copy of `W` (`n k`); measured against torch on 2 threads, `m x k x n`
/// 8 x 1024 x 4096 0.59x here vs 2.96x in the crate, 32 x 1024 x 4096 0.82x vs 2.05x,
/// 16 x 384 x 1152 0.75x vs 2.63x, 64 x 768 x 768 1.00x vs 1.25x; at the border
/// 32 x 384 x 1152 1.37x vs 1.29x; past it 128 x 384 x 1152 1.84x vs 1.13x and
/// 128 x 20 x 400 3.07x vs 0.73x (the sums and the loads of `x` from L2 dominate).
pub(crate) fn takes(m: usize, k: usize) -> bool {
    m.saturating_mul(12) <= k && matches!(simd_level(), Simd::Avx512)
}

/// `dst (m x n, rows `n` apart) = x (m x k) W^T (+ bias)`, `x`'s rows `x_rs` apart and
/// `W`'s (n x k) rows `w_rs` apart, both with unit column stride; columns split into
/// `threads` blocks on the team (each block reads its rows of `W` once).
///
/// # Safety
/// `takes(m, k)` held (the CPU has AVX-512); `x` holds `m` rows of `k` readable floats,
/// `w` `n` rows of `k`, `bias` (when given) `n` floats; `dst` `m * n` writable floats
/// that nothing else accesses during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn linear(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (x, x_rs): (*const f32, usize),
    (w, w_rs): (*const f32, usize),
    bias: Option<&[f32]>,
    threads: usize,
) {
    let (xp, wp, dp) = (SyncPtr(x as *mut f32), SyncPtr(w as *mut f32), SyncPtr(dst));
    let step = n.div_ceil(threads.max(1)).next_multiple_of(T);
    let block = |t: usize| {
        let (c0, c1) = ((t * step).min(n), ((t + 1) * step).min(n));
        // SAFETY: forwarded from the caller; blocks write disjoint columns c0..c1.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            columns((m, n, k), dp.ptr(), (xp.ptr(), x_rs), (wp.ptr(), w_rs), bias, (c0, c1))
        };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("dot_rows called off x86-64 (dot_rows::takes says no): columns {c0}..{c1}");
    };
    if threads > 1 {
        crate::ops::parallel::for_tasks(threads, true, block);
    } else {
        block(0);
    }
}

/// Columns `c0..c1` of the product, tile by tile: 4 rows of `W` against every row
/// block of `x`, the tails (1-3 rows of either) by narrower instances.
///
/// # Safety
/// As `linear`, with `c0 <= c1 <= n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn columns(
    (m, n, k): (usize, usize, usize),
    dst: *mut f32,
    (x, x_rs): (*const f32, usize),
    (w, w_rs): (*const f32, usize),
    bias: Option<&[f32]>,
    (c0, c1): (usize, usize),
) {
    let mut j = c0;
    while j < c1 {
        let c = (c1 - j).min(T);
        let mut i = 0;
        while i < m {
            let r = (m - i).min(T);
            let b = bias.map(|b| &b[j..j + c]);
            // SAFETY: rows i..i+r of x and j..j+c of W exist (r <= m - i, c <= c1 - j),
            // as do the outputs d[..r rows of n][..c]; the CPU has AVX-512 (caller).
            unsafe {
                let (xi, wj, d) = (x.add(i * x_rs), w.add(j * w_rs), dst.add(i * n + j));
                match (r, c) {
                    (4, 4) => tile::<4, 4>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (4, 3) => tile::<4, 3>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (4, 2) => tile::<4, 2>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (4, _) => tile::<4, 1>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (3, 4) => tile::<3, 4>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (2, 4) => tile::<2, 4>(k, xi, x_rs, wj, w_rs, d, n, b),
                    (_, 4) => tile::<1, 4>(k, xi, x_rs, wj, w_rs, d, n, b),
                    // Both tails at once (the last tile of a block): one row at a time.
                    (r, c) => {
                        for q in 0..r {
                            let (xq, dq) = (xi.add(q * x_rs), d.add(q * n));
                            match c {
                                3 => tile::<1, 3>(k, xq, x_rs, wj, w_rs, dq, n, b),
                                2 => tile::<1, 2>(k, xq, x_rs, wj, w_rs, dq, n, b),
                                _ => tile::<1, 1>(k, xq, x_rs, wj, w_rs, dq, n, b),
                            }
                        }
                    }
                }
            }
            i += r;
        }
        j += c;
    }
}

/// `d[r][c] = sum_p x[r][p] * w[c][p] (+ b[c])` for an `R x C` tile: `R * C` vector
/// accumulators over the depth, 16 lanes a step, the last `k % 16` lanes masked.
///
/// # Safety
/// The CPU has AVX-512F; `x` holds `R` rows of `k` floats `x_rs` apart, `w` `C` rows
/// `w_rs` apart; `d` `R` rows of `C` writable floats `d_rs` apart; `b` (when given)
/// at least `C` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
// Constant-bound index loops over the register tile: unrolled, the accumulators stay
// in registers.
#[allow(clippy::needless_range_loop)]
#[inline]
unsafe fn tile<const R: usize, const C: usize>(
    k: usize,
    x: *const f32,
    x_rs: usize,
    w: *const f32,
    w_rs: usize,
    d: *mut f32,
    d_rs: usize,
    b: Option<&[f32]>,
) {
    use std::arch::x86_64::*;
    // SAFETY: every load reads lanes p..p+16 (or the masked k % 16 tail) of a row the
    // caller guarantees; the stores write the tile's R x C outputs.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let full = k - k % 16;
        let step = |p: usize, mask: __mmask16, acc: &mut [[__m512; C]; R]| {
            let xv: [__m512; R] = std::array::from_fn(|r| _mm512_maskz_loadu_ps(mask, x.add(r * x_rs + p)));
            for c in 0..C {
                let wv = _mm512_maskz_loadu_ps(mask, w.add(c * w_rs + p));
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
                }
            }
        };
        for p in (0..full).step_by(16) {
            step(p, 0xFFFF, &mut acc);
        }
        if full < k {
            step(full, ((1u32 << (k - full)) - 1) as __mmask16, &mut acc);
        }
        for r in 0..R {
            for c in 0..C {
                let s = _mm512_reduce_add_ps(acc[r][c]);
                *d.add(r * d_rs + c) = match b {
                    Some(b) => s + b[c],
                    None => s,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tile shape and tail (rows and columns 1-3 past a multiple of 4, depths
    /// below, at and past a multiple of 16), with and without bias, strided rows, one
    /// and two column blocks: equal to the product summed in f64.
    #[test]
    fn dot_products_equal_the_reference_for_every_tail() {
        if !takes(1, 12) {
            return;
        }
        let val = |i: usize| ((i * 7919 % 113) as f32 - 56.0) / 37.0;
        for (m, n, k) in [(1, 1, 1), (4, 4, 16), (5, 7, 15), (7, 9, 17), (3, 2, 33), (13, 11, 100), (128, 6, 5)] {
            for threads in [1, 2] {
                for with_bias in [false, true] {
                    let (x_rs, w_rs) = (k + 3, k + 1);
                    let x: Vec<f32> = (0..m * x_rs).map(val).collect();
                    let w: Vec<f32> = (0..n * w_rs).map(|i| val(i + 5)).collect();
                    let b: Vec<f32> = (0..n).map(|i| val(i + 11)).collect();
                    let mut out = vec![f32::NAN; m * n];
                    // SAFETY: the buffers hold the shapes passed; this test runs only with AVX-512.
                    unsafe {
                        linear((m, n, k), out.as_mut_ptr(), (x.as_ptr(), x_rs), (w.as_ptr(), w_rs), with_bias.then_some(&b[..]), threads)
                    };
                    for i in 0..m {
                        for j in 0..n {
                            let r: f64 = (0..k).map(|p| x[i * x_rs + p] as f64 * w[j * w_rs + p] as f64).sum::<f64>()
                                + if with_bias { b[j] as f64 } else { 0.0 };
                            let got = out[i * n + j] as f64;
                            assert!(
                                (got - r).abs() <= 1e-5 * (1.0 + r.abs()),
                                "({m}, {n}, {k}) threads {threads} bias {with_bias}: [{i}, {j}] {got} vs {r}"
                            );
                        }
                    }
                }
            }
        }
    }
}
