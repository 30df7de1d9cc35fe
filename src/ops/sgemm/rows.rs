//! Products of a few row-major rows by a `Packed` right operand, the rows read where
//! they lie.
//!
//! A recurrent layer multiplies `batch` rows (20 in a word LM) by its packed weight at
//! every step, forward and backward. `Packed::mul` first packs the rows into 12-row
//! strips (on each thread, all of them: 4% of an LSTM's forward) and then runs whole
//! 12-row tiles, so 20 rows cost 24 rows' multiply-adds. Here a tile broadcasts its
//! left elements straight from the rows (a few rows of a few hundred floats sit in L1),
//! and the rows split into tiles as evenly as 12-row tiles allow (20 = 10 + 10), the
//! height a constant of each kernel instance so that its accumulators stay in
//! registers.
use super::{Mat, Packed};
use crate::ops::cpu::{simd_level, Simd};

/// The widest tile (as `Avx512`'s kernel: 12 x 32 floats in 24 accumulators).
const MAX_ROWS: usize = 12;

impl Packed {
    /// `dst[.., c0..c1] = a @ B[.., c0..c1] (+ dst when read_dst)` as `mul` with beta 1,
    /// for a row-major `a` (unit column stride). Returns false, having done nothing,
    /// where this kernel does not run (no AVX-512, or another layout), for the caller
    /// to use `mul`.
    ///
    /// # Safety
    /// As `mul`.
    pub(crate) unsafe fn mul_rows(&self, m: usize, dst: *mut f32, dst_rs: isize, read_dst: bool, a: Mat, (c0, c1): (usize, usize)) -> bool {
        if a.cs != 1 || self.nr != 32 || !matches!(simd_level(), Simd::Avx512) {
            return false;
        }
        debug_assert!(c0.is_multiple_of(self.nr) && c1 <= self.n);
        if m == 0 || c0 >= c1 {
            return true;
        }
        let width = self.n.div_ceil(self.nr) * self.nr;
        let tiles = m.div_ceil(MAX_ROWS);
        for p0 in (0..self.k).step_by(self.kstep) {
            let kc = self.kstep.min(self.k - p0);
            let block = &self.data[width * p0..];
            for t in c0 / 32..c1.div_ceil(32) {
                let nr = (c1 - t * 32).min(32);
                let mut r = 0;
                for s in 0..tiles {
                    let rows = m / tiles + usize::from(s < m % tiles);
                    // SAFETY: rows r..r + rows < m and depth p0..p0 + kc lie inside `a`
                    // (row-major, the caller's contract); strip t of this depth block
                    // holds kc x 32 packed floats; the destination tile is rows r.. and
                    // columns t * 32..+nr of the caller's block; the level is AVX-512.
                    unsafe {
                        let ap = a.ptr.offset(r as isize * a.rs + p0 as isize);
                        let c = dst.offset(r as isize * dst_rs + (t * 32) as isize);
                        tile_any(rows, kc, (ap, a.rs), block.as_ptr().add(t * 32 * kc), (c, dst_rs), nr, p0 == 0 && !read_dst);
                    }
                    r += rows;
                }
            }
        }
        true
    }
}

/// `tile::<rows>`.
///
/// # Safety
/// As `tile`, with `1 <= rows <= MAX_ROWS`.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_any(rows: usize, kc: usize, a: (*const f32, isize), b: *const f32, c: (*mut f32, isize), nr: usize, overwrite: bool) {
    // SAFETY: the caller's contract, for each instance.
    unsafe {
        match rows {
            1 => tile::<1>(kc, a, b, c, nr, overwrite),
            2 => tile::<2>(kc, a, b, c, nr, overwrite),
            3 => tile::<3>(kc, a, b, c, nr, overwrite),
            4 => tile::<4>(kc, a, b, c, nr, overwrite),
            5 => tile::<5>(kc, a, b, c, nr, overwrite),
            6 => tile::<6>(kc, a, b, c, nr, overwrite),
            7 => tile::<7>(kc, a, b, c, nr, overwrite),
            8 => tile::<8>(kc, a, b, c, nr, overwrite),
            9 => tile::<9>(kc, a, b, c, nr, overwrite),
            10 => tile::<10>(kc, a, b, c, nr, overwrite),
            11 => tile::<11>(kc, a, b, c, nr, overwrite),
            12 => tile::<12>(kc, a, b, c, nr, overwrite),
            _ => unreachable!("tile height {rows} outside 1..=12"),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile_any(_: usize, _: usize, _: (*const f32, isize), _: *const f32, _: (*mut f32, isize), _: usize, _: bool) {
    unreachable!("mul_rows runs only with AVX-512")
}

/// `C[..MR, ..nr] = A @ B_strip (+ C unless overwrite)`: `A` is `MR` rows of `kc`
/// floats, `a_rs` apart; `B_strip` `kc` packed rows of 32.
///
/// # Safety
/// The CPU has AVX-512F and FMA; the rows and the strip are readable; `c` holds `MR`
/// rows of `nr <= 32` writable (and unless `overwrite`, initialized) floats, `c_rs` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile<const MR: usize>(
    kc: usize,
    (a, a_rs): (*const f32, isize),
    b: *const f32,
    (c, c_rs): (*mut f32, isize),
    nr: usize,
    overwrite: bool,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    let rows: [*const f32; MR] = std::array::from_fn(|i| a.wrapping_offset(i as isize * a_rs));
    // SAFETY: the caller's contract: element p of each row and step p of the strip are
    // readable for p < kc; the masks keep the stores inside the first `nr` columns.
    unsafe {
        let mut bp = b;
        for p in 0..kc {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for (row, ap) in acc.iter_mut().zip(&rows) {
                let ai = _mm512_set1_ps(*ap.add(p));
                row[0] = _mm512_fmadd_ps(ai, b0, row[0]);
                row[1] = _mm512_fmadd_ps(ai, b1, row[1]);
            }
            bp = bp.add(32);
        }
        let mask = |w: usize| -> __mmask16 { ((1u32 << w.min(16)) - 1) as __mmask16 };
        let (m0, m1) = (mask(nr), mask(nr.saturating_sub(16)));
        for (i, row) in acc.iter().enumerate() {
            let p = c.offset(i as isize * c_rs);
            let (mut r0, mut r1) = (row[0], row[1]);
            if !overwrite {
                r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, p));
                r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, p.add(16)));
            }
            _mm512_mask_storeu_ps(p, m0, r0);
            _mm512_mask_storeu_ps(p.add(16), m1, r1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every height from 1 to 30 rows, a strided left operand, two depth blocks,
    /// column ranges starting past 0 and ending mid-strip, both accumulation modes,
    /// against a float64 product.
    #[test]
    fn rows_in_place_equal_the_float64_product() {
        if !matches!(simd_level(), Simd::Avx512) {
            return;
        }
        let (k, n) = (300, 100);
        let b = crate::ops::test_values(k * n, 7);
        // SAFETY: `b` is a k x n row-major matrix.
        let packed = unsafe { Packed::new(&Mat::new(b.as_ptr(), n as isize, 1), k, n) }.unwrap();
        for m in 1..=30 {
            let a_rs = k + 5;
            let a = crate::ops::test_values(m * a_rs, m as u64);
            for (c0, c1) in [(0, n), (32, 90), (64, 65)] {
                for read in [false, true] {
                    let dst_rs = n + 3;
                    let mut dst = vec![0.5f32; m * dst_rs];
                    // SAFETY: `a` is m rows of k floats a_rs apart, `dst` m rows of n.
                    let ran = unsafe {
                        packed.mul_rows(m, dst.as_mut_ptr(), dst_rs as isize, read, Mat::new(a.as_ptr(), a_rs as isize, 1), (c0, c1))
                    };
                    assert!(ran);
                    for i in 0..m {
                        for j in 0..n {
                            let got = dst[i * dst_rs + j] as f64;
                            let want = if (c0..c1).contains(&j) {
                                (0..k).map(|p| a[i * a_rs + p] as f64 * b[p * n + j] as f64).sum::<f64>() + if read { 0.5 } else { 0.0 }
                            } else {
                                0.5
                            };
                            assert!(
                                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                                "m {m} cols {c0}..{c1} read {read} ({i}, {j}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
