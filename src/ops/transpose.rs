//! Transposes of float32 blocks: `dst[p][c] = src[c][p]`, 16 x 16 at a time in
//! AVX-512 registers, 8 x 8 in AVX2 ones. The convolutions' channels-last copies and
//! the packing of a recurrent layer's gate columns use it.
use super::cpu::{simd_level, Simd};

/// `dst[p * dst_ps + c] = src[c * src_rs + p]` for `c < chans`, `p < len`: square blocks
/// in registers (`transpose16` with AVX-512, `transpose8` with AVX2), the ragged edges
/// element by element.
///
/// # Safety
/// `src` holds `chans` rows of `len` floats, `src_rs` apart; `dst` holds `len` rows of
/// `chans` floats, `dst_ps` apart.
pub(crate) unsafe fn transpose(src: *const f32, src_rs: usize, chans: usize, len: usize, dst: *mut f32, dst_ps: usize) {
    // SAFETY: the caller's bounds, with no padding columns.
    unsafe { transpose_padded(src, src_rs, chans, chans, len, dst, dst_ps) }
}

/// `transpose` into `cols >= chans` columns, those past `chans` zero: the blocks that
/// straddle `chans` load zero registers for the missing rows, those past it store
/// zeros. A partial panel of packed keys (an attention's 65th key, padded to 64
/// columns) gets its zeros at the transposes' cost; a fill before the transpose was
/// a `memset` per panel that took longer than the transposes themselves.
///
/// # Safety
/// `src` holds `chans` rows of `len` floats, `src_rs` apart; `dst` holds `len` rows of
/// `cols` floats, `dst_ps` apart.
pub(crate) unsafe fn transpose_padded(src: *const f32, src_rs: usize, chans: usize, cols: usize, len: usize, dst: *mut f32, dst_ps: usize) {
    let side = match simd_level() {
        Simd::Avx512 => 16,
        Simd::Avx2 => 8,
        Simd::Plain => usize::MAX,
    };
    for c0 in (0..cols).step_by(side.min(cols.max(1))) {
        let c1 = c0.saturating_add(side).min(cols);
        // Rows of this block that exist in `src` (the rest read as zeros).
        let live = chans.saturating_sub(c0).min(c1 - c0);
        for p0 in (0..len).step_by(side.min(len.max(1))) {
            let p1 = p0.saturating_add(side).min(len);
            #[cfg(target_arch = "x86_64")]
            if c1 - c0 == side && p1 - p0 == side {
                // SAFETY: rows c0..c0 + live and positions p0..p1 lie in `src`, rows
                // p0..p1 and columns c0..c1 in `dst` (the caller's bounds); the source
                // pointer is formed only when a row is read. The level says the CPU has
                // the block routine's features.
                unsafe {
                    let s = if live > 0 { src.add(c0 * src_rs + p0) } else { src };
                    let d = dst.add(p0 * dst_ps + c0);
                    if side == 16 {
                        transpose16(s, src_rs, live, d, dst_ps)
                    } else {
                        transpose8(s, src_rs, live, d, dst_ps)
                    }
                };
                continue;
            }
            for c in c0..c1 {
                for p in p0..p1 {
                    // SAFETY: c < cols, p < len in `dst`; c < chans in `src` (the caller's bounds).
                    unsafe { *dst.add(p * dst_ps + c) = if c < chans { *src.add(c * src_rs + p) } else { 0.0 } };
                }
            }
        }
    }
}

/// One 8 x 8 block: `dst[j * dst_ps + i] = src[i * src_rs + j]` (0 for `i >= rows`), as
/// `transpose16` with 256-bit registers (unpack, shuffle within 128-bit lanes, then
/// `permute2f128`).
///
/// # Safety
/// The CPU has AVX2; `rows <= 8` rows of 8 floats at `src` (`src_rs` apart), 8 rows of 8
/// at `dst` (`dst_ps` apart).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose8(src: *const f32, src_rs: usize, rows: usize, dst: *mut f32, dst_ps: usize) {
    use std::arch::x86_64::*;
    if rows == 0 {
        // A block wholly past the rows: zeros (see `transpose16`).
        for j in 0..8 {
            // SAFETY: row j of the destination block (the caller).
            unsafe { _mm256_storeu_ps(dst.add(j * dst_ps), _mm256_setzero_ps()) };
        }
        return;
    }
    // Constant loop lengths keep the rows in registers (see `transpose16`).
    let mut r = [_mm256_setzero_ps(); 8];
    if rows >= 8 {
        for (i, x) in r.iter_mut().enumerate() {
            // SAFETY: row i < 8 <= rows of the block (the caller).
            *x = unsafe { _mm256_loadu_ps(src.add(i * src_rs)) };
        }
    } else {
        for (i, x) in r.iter_mut().enumerate() {
            if i < rows {
                // SAFETY: row i < rows of the block (the caller).
                *x = unsafe { _mm256_loadu_ps(src.add(i * src_rs)) };
            }
        }
    }
    let mut t = [_mm256_setzero_ps(); 8];
    for q in 0..4 {
        t[2 * q] = _mm256_unpacklo_ps(r[2 * q], r[2 * q + 1]);
        t[2 * q + 1] = _mm256_unpackhi_ps(r[2 * q], r[2 * q + 1]);
    }
    // u[4q + m], lane L: column 4L + m of rows 4q..4q + 4.
    let mut u = [_mm256_setzero_ps(); 8];
    for q in 0..2 {
        let b = 4 * q;
        u[b] = _mm256_shuffle_ps::<0x44>(t[b], t[b + 2]);
        u[b + 1] = _mm256_shuffle_ps::<0xEE>(t[b], t[b + 2]);
        u[b + 2] = _mm256_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        u[b + 3] = _mm256_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
    }
    for m in 0..4 {
        // SAFETY: rows m and 4 + m of the destination block (the caller).
        unsafe {
            _mm256_storeu_ps(dst.add(m * dst_ps), _mm256_permute2f128_ps::<0x20>(u[m], u[4 + m]));
            _mm256_storeu_ps(dst.add((4 + m) * dst_ps), _mm256_permute2f128_ps::<0x31>(u[m], u[4 + m]));
        }
    }
}

/// One 16 x 16 block: `dst[j * dst_ps + i] = src[i * src_rs + j]` (0 for `i >= rows`).
/// Pairs of rows are interleaved (`unpack`), then 4 x 4 blocks formed within each
/// 128-bit lane (`shuffle_ps`), then the lanes gathered (two rounds of
/// `shuffle_f32x4`). Written element by element, the two copies took a quarter of the
/// kernel's time.
///
/// # Safety
/// The CPU has AVX-512F; `rows <= 16` rows of 16 floats at `src` (`src_rs` apart), 16
/// rows of 16 at `dst` (`dst_ps` apart).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(src: *const f32, src_rs: usize, rows: usize, dst: *mut f32, dst_ps: usize) {
    use std::arch::x86_64::*;
    if rows == 0 {
        // A block wholly past the rows (a panel's padding): zeros, nothing to shuffle.
        for j in 0..16 {
            // SAFETY: row j of the destination block (the caller).
            unsafe { _mm512_storeu_ps(dst.add(j * dst_ps), _mm512_setzero_ps()) };
        }
        return;
    }
    // Loops of constant length, so the rows stay in registers: a loop to `rows` left
    // them in a stack array (16 zero stores, 16 stores and 16 reloads per block; perf:
    // most of the transposes' time in a ViT's attention).
    let mut r = [_mm512_setzero_ps(); 16];
    if rows >= 16 {
        for (i, x) in r.iter_mut().enumerate() {
            // SAFETY: row i < 16 <= rows of the block (the caller).
            *x = unsafe { _mm512_loadu_ps(src.add(i * src_rs)) };
        }
    } else {
        for (i, x) in r.iter_mut().enumerate() {
            if i < rows {
                // SAFETY: row i < rows of the block (the caller).
                *x = unsafe { _mm512_loadu_ps(src.add(i * src_rs)) };
            }
        }
    }
    // t[2q], t[2q + 1]: rows 2q and 2q + 1 interleaved, elements 0-1 and 2-3 of each lane.
    let mut t = [_mm512_setzero_ps(); 16];
    for q in 0..8 {
        t[2 * q] = _mm512_unpacklo_ps(r[2 * q], r[2 * q + 1]);
        t[2 * q + 1] = _mm512_unpackhi_ps(r[2 * q], r[2 * q + 1]);
    }
    // u[4q + m], lane L: column 4L + m of rows 4q..4q + 4.
    let mut u = [_mm512_setzero_ps(); 16];
    for q in 0..4 {
        let b = 4 * q;
        u[b] = _mm512_shuffle_ps::<0x44>(t[b], t[b + 2]);
        u[b + 1] = _mm512_shuffle_ps::<0xEE>(t[b], t[b + 2]);
        u[b + 2] = _mm512_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        u[b + 3] = _mm512_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
    }
    // Column 4L + m is lane L of u[m], u[4 + m], u[8 + m] and u[12 + m], in that order.
    for m in 0..4 {
        let (x, y) = (_mm512_shuffle_f32x4::<0x88>(u[m], u[4 + m]), _mm512_shuffle_f32x4::<0xDD>(u[m], u[4 + m]));
        let (x2, y2) = (_mm512_shuffle_f32x4::<0x88>(u[8 + m], u[12 + m]), _mm512_shuffle_f32x4::<0xDD>(u[8 + m], u[12 + m]));
        // SAFETY: rows m, 4 + m, 8 + m and 12 + m of the destination block (the caller).
        unsafe {
            _mm512_storeu_ps(dst.add(m * dst_ps), _mm512_shuffle_f32x4::<0x88>(x, x2));
            _mm512_storeu_ps(dst.add((4 + m) * dst_ps), _mm512_shuffle_f32x4::<0x88>(y, y2));
            _mm512_storeu_ps(dst.add((8 + m) * dst_ps), _mm512_shuffle_f32x4::<0xDD>(x, x2));
            _mm512_storeu_ps(dst.add((12 + m) * dst_ps), _mm512_shuffle_f32x4::<0xDD>(y, y2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copies' transpose (this CPU's block size), whole blocks and ragged edges, against indexing.
    #[test]
    fn transpose_matches_indexing() {
        for (chans, len) in [(16, 16), (8, 8), (32, 48), (17, 35), (5, 70), (40, 3), (9, 24), (0, 4), (3, 0)] {
            let (src_rs, dst_ps) = (len + 3, chans + 5);
            let src: Vec<f32> = (0..chans * src_rs).map(|v| v as f32).collect();
            let mut dst = vec![-1f32; len * dst_ps];
            // SAFETY: chans rows of len floats, src_rs apart; len rows of chans, dst_ps apart.
            unsafe { transpose(src.as_ptr(), src_rs, chans, len, dst.as_mut_ptr(), dst_ps) };
            for p in 0..len {
                for c in 0..dst_ps {
                    let want = if c < chans { src[c * src_rs + p] } else { -1.0 };
                    assert_eq!(dst[p * dst_ps + c], want, "{chans}x{len} at p={p} c={c}");
                }
            }
        }
    }

    /// Padded columns: zeros past `chans` up to `cols` (blocks that straddle `chans`,
    /// blocks wholly past it, ragged edges), nothing written past `cols`.
    #[test]
    fn padded_columns_are_zero() {
        for (chans, cols, len) in [(1, 64, 64), (17, 48, 35), (0, 16, 16), (16, 32, 8), (5, 9, 70), (40, 40, 3)] {
            let (src_rs, dst_ps) = (len + 3, cols + 5);
            let src: Vec<f32> = (0..chans * src_rs).map(|v| v as f32 + 1.0).collect();
            let mut dst = vec![-1f32; len * dst_ps];
            // SAFETY: chans rows of len floats, src_rs apart; len rows of cols, dst_ps apart.
            unsafe { transpose_padded(src.as_ptr(), src_rs, chans, cols, len, dst.as_mut_ptr(), dst_ps) };
            for p in 0..len {
                for c in 0..dst_ps {
                    let want = if c < chans {
                        src[c * src_rs + p]
                    } else if c < cols {
                        0.0
                    } else {
                        -1.0
                    };
                    assert_eq!(dst[p * dst_ps + c], want, "{chans}->{cols}x{len} at p={p} c={c}");
                }
            }
        }
    }
}
