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
//! come from L2, which with the sums below keeps it short of that as `m` nears `k / 4`),
//! and a horizontal sum per output at the end of the depth. Each thread takes a block
//! of `W`'s rows, whose tile of 4 stays in L1 while it meets every row block of `x` (in
//! L2), so `W` is read from memory once.
use super::cpu::{simd_level, Simd};
use super::parallel::SyncPtr;

/// Rows of `x` (and of `W`) in one tile.
const T: usize = 4;

/// Whether this kernel takes the product: AVX-512, and few rows against the depth
/// (`6 m <= k`; `4 m <= k` when `W`, `n k` floats, is 4 MiB or more and so is read from
/// memory by the crate's copy too). Its cost over the FMAs is a horizontal sum per
/// output (`m n`) and `x`'s loads from L2, the crate's a copy of `W` (`n k`). Measured
/// against torch on 2 threads (`m x k x n`, here vs the crate): 8 x 1024 x 4096 0.59x vs
/// 2.96x, 32 x 1024 x 4096 0.71x vs 2.05x, 16 x 384 x 1152 0.65x vs 2.63x; from `6 m`
/// to `12 m`: 96 x 768 x 768 0.97x vs 1.12x, 128 x 1024 x 4096 0.93x vs 1.33x,
/// 48 x 384 x 1152 1.05x vs 1.14x; at `4 m` with the large `W`: 128 x 512 x 2048 1.08x
/// vs 1.41x, 200 x 1024 x 1024 0.93x vs 1.10x, with a smaller one 96 x 384 x 1152
/// 1.17x vs 1.15x; at `2 m`, 512 x 1024 x 4096 1.87x vs 1.09x.
pub(crate) fn takes(m: usize, n: usize, k: usize) -> bool {
    let depth_per_row = if n.saturating_mul(k) >= 1 << 20 { 4 } else { 6 };
    m.saturating_mul(depth_per_row) <= k && matches!(simd_level(), Simd::Avx512)
}

/// `dst (m x n, rows `n` apart) = x (m x k) W^T (+ bias)`, `x`'s rows `x_rs` apart and
/// `W`'s (n x k) rows `w_rs` apart, both with unit column stride; columns split into
/// `threads` blocks on the team (each block reads its rows of `W` once).
///
/// # Safety
/// `takes(m, n, k)` held (the CPU has AVX-512); `x` holds `m` rows of `k` readable floats,
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

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// Each thread's copy of `x`, aligned to its block of `W` (see `columns`).
    static X_COPY: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Columns `c0..c1` of the product, tile by tile: 4 rows of `W` against every row
/// block of `x`, the tails (1-3 rows of either) by narrower instances.
///
/// The loop is bound by its loads, and a 64-byte load that straddles two cache lines
/// costs two: `Linear(768, 768)` on 64 rows took 272-301 us with `x` 64-byte aligned
/// and 336-448 us without (torch 271-296 either way). Our allocator (`crate::alloc`)
/// puts buffers on lines, but a view (a row slice, a `split` of a fused projection)
/// may start anywhere, and a large `x` is also read `n / 4` times from L2. So `x` is
/// read in place only when it is aligned, its rows a multiple of 16 floats apart, and
/// it holds at most 64K floats; else each thread first copies it, so aligned, into its
/// own L2 (`m k` floats, a few percent of the `m k n` product). `W`'s loads are left
/// as they fall: aligning them too, by starting the depth loop at `W`'s first aligned
/// column, gained 0-6% but made the sums' order, so their rounding, depend on where
/// `W` lies (equal weights at two addresses gave different outputs).
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
    if c0 == c1 {
        return;
    }
    // An aligned x of up to 256 KiB is read in place (the copy cost 1-5% at
    // 16 x 384 x 1152 and 64 x 768 x 768); a larger one is still copied, into this
    // core's L2 (128 x 1024 x 4096 took 2-6% less time with the copy).
    if (x as usize).is_multiple_of(64) && x_rs.is_multiple_of(16) && m * k <= 1 << 16 {
        // SAFETY: forwarded from the caller.
        return unsafe { tiles((m, n, k), dst, (x, x_rs), (w, w_rs), bias, (c0, c1)) };
    }
    let xs = k.next_multiple_of(16);
    X_COPY.with_borrow_mut(|buf| {
        buf.resize(m * xs + 16, 0.0);
        let base = buf.as_mut_ptr();
        // Floats up to the buffer's first 64-byte boundary, where the copy starts.
        let lead = (64 - (base as usize) % 64) % 64 / 4;
        for i in 0..m {
            // SAFETY: row i of x holds k floats (caller); the copy's row i spans
            // lead + i xs .. + k <= 15 + m xs.
            unsafe { std::ptr::copy_nonoverlapping(x.add(i * x_rs), base.add(lead + i * xs), k) };
        }
        // SAFETY: as above: the copy holds m rows of k floats xs apart.
        unsafe { tiles((m, n, k), dst, (base.add(lead), xs), (w, w_rs), bias, (c0, c1)) }
    })
}

/// The tiles of `columns`, over `x` (in place or the aligned copy).
///
/// # Safety
/// As `columns`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tiles(
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
                let g = Geom { k, x_rs, w_rs, d_rs: n };
                match (r, c) {
                    (4, 4) => tile::<4, 4>(g, xi, wj, d, b),
                    (4, 3) => tile::<4, 3>(g, xi, wj, d, b),
                    (4, 2) => tile::<4, 2>(g, xi, wj, d, b),
                    (4, _) => tile::<4, 1>(g, xi, wj, d, b),
                    (3, 4) => tile::<3, 4>(g, xi, wj, d, b),
                    (2, 4) => tile::<2, 4>(g, xi, wj, d, b),
                    (_, 4) => tile::<1, 4>(g, xi, wj, d, b),
                    // Both tails at once (the last tile of a block): one row at a time.
                    (r, c) => {
                        for q in 0..r {
                            let (xq, dq) = (xi.add(q * x_rs), d.add(q * n));
                            match c {
                                3 => tile::<1, 3>(g, xq, wj, dq, b),
                                2 => tile::<1, 2>(g, xq, wj, dq, b),
                                _ => tile::<1, 1>(g, xq, wj, dq, b),
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

/// A tile's depth and its row strides.
#[derive(Clone, Copy)]
struct Geom {
    k: usize,
    x_rs: usize,
    w_rs: usize,
    d_rs: usize,
}

/// `d[r][c] = sum_p x[r][p] * w[c][p] (+ b[c])` for an `R x C` tile: `R * C` vector
/// accumulators over the depth, 16 lanes a step, the last `k % 16` lanes masked.
///
/// # Safety
/// The CPU has AVX-512F; `x` holds `R` rows of `g.k` floats `g.x_rs` apart, `w` `C`
/// rows `g.w_rs` apart; `d` `R` rows of `C` writable floats `g.d_rs` apart; `b` (when
/// given) at least `C` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
// Constant-bound index loops over the register tile: unrolled, the accumulators stay
// in registers.
#[allow(clippy::needless_range_loop)]
#[inline]
unsafe fn tile<const R: usize, const C: usize>(g: Geom, x: *const f32, w: *const f32, d: *mut f32, b: Option<&[f32]>) {
    use std::arch::x86_64::*;
    let Geom { k, x_rs, w_rs, d_rs } = g;
    // SAFETY: every load reads lanes p..p+16 of a row the caller guarantees, masked to
    // the lanes below k; the stores write the tile's R x C outputs.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let step = |p: usize, mask: __mmask16, acc: &mut [[__m512; C]; R]| {
            let xv: [__m512; R] = std::array::from_fn(|r| _mm512_maskz_loadu_ps(mask, x.add(r * x_rs + p)));
            for c in 0..C {
                let wv = _mm512_maskz_loadu_ps(mask, w.add(c * w_rs + p));
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
                }
            }
        };
        let full = k - k % 16;
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
    /// and two column blocks, `W` starting at every alignment: equal to the product
    /// summed in f64, and bit for bit the same at every alignment of `W` and `x`.
    #[test]
    fn dot_products_equal_the_reference_for_every_tail() {
        if !takes(1, 1, 12) {
            return;
        }
        let val = |i: usize| ((i * 7919 % 113) as f32 - 56.0) / 37.0;
        let shapes = [(1, 1, 1), (4, 4, 16), (5, 7, 15), (7, 9, 17), (3, 2, 33), (13, 11, 100), (128, 6, 5), (6, 9, 64)];
        for (m, n, k) in shapes {
            // Rows a multiple of 16 apart where k is: at the shift that puts x on a
            // line, the in-place path.
            let (x_rs, w_rs) = if k % 16 == 0 { (k, k) } else { (k + 3, k + 1) };
            for (threads, with_bias) in [(1, false), (2, false), (1, true), (2, true)] {
                let mut first: Option<Vec<f32>> = None;
                // W and x from `shift` floats into their buffers: every alignment.
                for shift in 0..16 {
                    let x_buf: Vec<f32> = (0..m * x_rs + shift).map(|i| val(i + 16 - shift)).collect();
                    let w_buf: Vec<f32> = (0..n * w_rs + shift).map(|i| val(i + 21 - shift)).collect();
                    let (x, w) = (&x_buf[shift..], &w_buf[shift..]);
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
                                "({m}, {n}, {k}) threads {threads} bias {with_bias} shift {shift}: [{i}, {j}] {got} vs {r}"
                            );
                        }
                    }
                    match &first {
                        None => first = Some(out),
                        Some(f) => assert!(
                            f.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "({m}, {n}, {k}) threads {threads} bias {with_bias}: shift {shift} changed the rounding"
                        ),
                    }
                }
            }
        }
    }
}
