//! The products of the attention kernel beyond `ops::gemm` (which serves any
//! float type): for float32 on AVX-512 a register-tiled micro-kernel over
//! pre-packed K panels and padded V, with the mask add and row max fused into the
//! score tile's store (`Epi`).
use super::*;

/// K transposed into (d x 64) panels (sp keys, a multiple of 64) and V padded to (s, dvp) per kv slice, with sp and dvp
/// rounded up to 16 lanes, for the f32 AVX-512 micro-kernel (no per-tile packing).
pub(crate) struct Packed {
    pub(crate) kt: Vec<f32>,
    pub(crate) vp: Vec<f32>,
    pub(crate) sp: usize,
    /// Keys per K^T panel: 64, or all of them (rounded to 16) when fewer.
    pub(crate) pw: usize,
    pub(crate) dvp: usize,
}

pub(crate) fn pack(g: &Geo, k: &[f32], v: &[f32]) -> Packed {
    let (s, d, dv) = (g.s, g.d, g.dv);
    let dvp = dv.div_ceil(16) * 16;
    let (nk, nv) = (g.k_slices.len(), g.v_slices.len());
    let (k_rs, v_rs) = (g.k_rs, g.v_rs);
    // K^T in panels of 64 keys: panel p holds [d][64] contiguous, so the
    // micro-kernel streams it (a plain (d, s) transpose would alias in L1).
    // Short sequences take one panel of s keys rounded to 16, not 64.
    let pw = s.div_ceil(16).clamp(1, 4) * 16;
    let sp = s.div_ceil(pw) * pw;
    // Each panel row is written left to right (reading the key rows, which sit in
    // L1, with a stride); columns past the last key are zeroed, nothing else is.
    let kt = crate::ops::parallel::filled(nk * d * sp, |kt| {
        crate::ops::parallel::for_chunks(kt, d * sp, crate::ops::parallel::par_ok(nk * d * sp), |u, dst| {
            let src = &k[g.k_slices[u]..];
            for (pi, panel) in dst.chunks_mut(d * pw).enumerate() {
                let j0 = pi * pw;
                let keys = s.min(j0 + pw) - j0;
                if keys > 0 && (j0 + keys - 1) * k_rs + d <= src.len() && pw * k_rs <= i32::MAX as usize {
                    // SAFETY: the packed path runs only where AVX-512 was detected (`forward`
                    // packs only when `simd_level()` is `Avx512`); the check above keeps every
                    // gathered element ((j0 + jj) * k_rs + dd, jj < keys, dd < d) inside `src`
                    // and the gather's i32 offsets (< pw * k_rs) from overflowing; `panel`
                    // is d rows of pw (a multiple of 16) floats, all written.
                    unsafe { transpose_panel(src.as_ptr().add(j0 * k_rs), k_rs, keys, d, pw, panel.as_mut_ptr() as *mut f32) };
                    continue;
                }
                for (dd, prow) in panel.chunks_mut(pw).enumerate() {
                    for (jj, o) in prow[..keys].iter_mut().enumerate() {
                        o.write(src[(j0 + jj) * k_rs + dd]);
                    }
                    for o in prow[keys..].iter_mut() {
                        o.write(0.0);
                    }
                }
            }
        })
    });
    let vp = if dvp == dv {
        Vec::new()
    } else {
        let mut vp = vec![0f32; nv * s * dvp];
        if nv > 0 && s * dvp > 0 {
            crate::ops::parallel::for_chunks(&mut vp, s * dvp, true, |u, dst| {
                let base = g.v_slices[u];
                for j in 0..s {
                    dst[j * dvp..j * dvp + dv].copy_from_slice(&v[base + j * v_rs..base + j * v_rs + dv]);
                }
            });
        }
        vp
    };
    Packed { kt, vp, sp, pw, dvp }
}

/// Panel row `dd` = element `dd` of keys 0..keys (rows `k_rs` apart), zeros up to `pw`:
/// 16 keys per masked gather instead of one scattered store per element.
///
/// # Safety
/// The CPU must support AVX-512F. `src` must be readable at `j * k_rs + dd` for every
/// key `j < keys` and `dd < d`, with `16 * k_rs <= i32::MAX`; `dst` must point to
/// `d * pw` writable floats, `pw` a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_panel(src: *const f32, k_rs: usize, keys: usize, d: usize, pw: usize, dst: *mut f32) {
    use std::arch::x86_64::*;
    let lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(k_rs as i32));
    for dd in 0..d {
        let mut jb = 0;
        while jb < pw {
            let live = keys.saturating_sub(jb).min(16);
            let km: __mmask16 = if live >= 16 { 0xFFFF } else { ((1u32 << live) - 1) as __mmask16 };
            let v = if km == 0 {
                _mm512_setzero_ps()
            } else {
                // SAFETY: km != 0 means jb < keys, so `src.add(jb * k_rs + dd)` is key jb's
                // element dd; lane l (enabled only for jb + l < keys) reads key jb + l's
                // element dd, byte offset 4 * l * k_rs (fits the i32 lanes), inside `src`.
                unsafe { _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), km, lanes, src.add(jb * k_rs + dd)) }
            };
            // SAFETY: dd < d and jb + 16 <= pw (pw a multiple of 16), so the 16 floats
            // at dd * pw + jb are inside the d * pw of `dst`.
            unsafe { _mm512_storeu_ps(dst.add(dd * pw + jb), v) };
            jb += 16;
        }
    }
}

/// Stand-in off x86-64, so `pack` compiles there.
///
/// # Safety
/// Never called: the packed kernel runs only on x86-64 with AVX-512. It panics.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn transpose_panel(_: *const f32, _: usize, _: usize, _: usize, _: usize, _: *mut f32) {
    unreachable!("the packed kernel runs only with AVX-512")
}

/// `C[R x 16*NC] (+)= alpha * A[R x k] B[k x 16*NC]`, A rows of stride `a_rs`
/// (unit stride along k), B rows of stride `b_rs`: accumulators stay in registers.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA. `a` must point to R rows of `k`
/// readable floats, `a_rs` apart; `b` to `k` rows of `16 * NC` readable floats, `b_rs`
/// apart; `c` to R rows of `16 * NC` writable floats (also readable when `add`), `c_rs`
/// apart, not overlapping `a`, `b` or the mask. `ep.mask` is null, or for each row
/// r < R the first `min(ep.row_lim(r), 16 * NC)` floats at `ep.mask + r * m_rs` are
/// readable and the addresses `ep.mask + r * m_rs + 16 * cc` (cc < NC) stay inside
/// the mask's allocation. `ep.rmax` is null or points to R readable and writable floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ukr<const R: usize, const NC: usize>(
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: *const f32,
    b_rs: usize,
    c: *mut f32,
    c_rs: usize,
    add: bool,
    alpha: f32,
    ep: Epi,
) {
    use std::arch::x86_64::*;
    if !ep.mask.is_null() {
        // The mask tile comes from L3 in rows 4 KiB+ apart, which the hardware
        // prefetcher does not follow: ask for it now, use it after the k loop.
        for r in 0..R {
            for cc in 0..NC {
                // SAFETY: r < R and cc < NC: the caller keeps these mask addresses inside the
                // mask's allocation; a prefetch reads nothing.
                _mm_prefetch::<_MM_HINT_T0>(unsafe { ep.mask.add(r * ep.m_rs + cc * 16) } as *const i8);
            }
        }
    }
    let mut acc = [[_mm512_setzero_ps(); NC]; R];
    let mut kk = 0;
    // SAFETY: kk < k, cc < NC and r < R: the 16 floats at `b + kk * b_rs + 16 * cc` are
    // inside B's row kk (16 * NC floats), and `a + r * a_rs + kk` inside A's row r (k
    // floats), both readable (the caller's contract).
    unsafe {
        while kk < k {
            let bp = b.add(kk * b_rs);
            let mut bv = [_mm512_setzero_ps(); NC];
            let mut cc = 0;
            while cc < NC {
                bv[cc] = _mm512_loadu_ps(bp.add(cc * 16));
                cc += 1;
            }
            let mut r = 0;
            while r < R {
                let av = _mm512_set1_ps(*a.add(r * a_rs + kk));
                let mut cc = 0;
                while cc < NC {
                    acc[r][cc] = _mm512_fmadd_ps(av, bv[cc], acc[r][cc]);
                    cc += 1;
                }
                r += 1;
            }
            kk += 1;
        }
    }
    let al = _mm512_set1_ps(alpha);
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut r = 0;
    // SAFETY: r < R and cc < NC: `cp` is C's row r, columns 16 * cc.. + 16, inside C
    // (writable, and readable when `add`); the mask load enables only lanes below
    // `live`, i.e. columns below `row_lim(r)`, which the caller keeps readable, at an
    // address inside the mask's allocation (a masked load touches no masked-off lane);
    // `ep.rmax + r` is one of the R floats of `rmax` when it is not null.
    unsafe {
        while r < R {
            let mut mx = ninf;
            let rl = ep.row_lim(r);
            let mut cc = 0;
            while cc < NC {
                let cp = c.add(r * c_rs + cc * 16);
                // Lanes at or past the row's limit: -inf, and the mask is not read there
                // (a masked load does not touch memory in masked-off lanes).
                let live = rl.saturating_sub(cc * 16);
                let km: __mmask16 = if live >= 16 { 0xFFFF } else { ((1u32 << live) - 1) as __mmask16 };
                let v = if add {
                    _mm512_fmadd_ps(acc[r][cc], al, _mm512_loadu_ps(cp))
                } else if !ep.mask.is_null() {
                    _mm512_fmadd_ps(acc[r][cc], al, _mm512_maskz_loadu_ps(km, ep.mask.add(r * ep.m_rs + cc * 16)))
                } else {
                    _mm512_mul_ps(acc[r][cc], al)
                };
                let v = if km == 0xFFFF { v } else { _mm512_mask_blend_ps(km, ninf, v) };
                _mm512_storeu_ps(cp, v);
                mx = _mm512_max_ps(mx, v);
                cc += 1;
            }
            if !ep.rmax.is_null() {
                let p = ep.rmax.add(r);
                *p = (*p).max(_mm512_reduce_max_ps(mx));
            }
            r += 1;
        }
    }
}

/// What the score tile's store also does: add a mask tile (rows `m_rs` apart,
/// unit column stride) and fold each row's max into `rmax`. Doing it while the
/// tile is still in registers saves two passes over it in the row loop.
#[derive(Clone, Copy)]
pub(crate) struct Epi {
    pub(crate) mask: *const f32,
    pub(crate) m_rs: usize,
    pub(crate) rmax: *mut f32,
    /// Columns from this tile's first on that take part (the rest are padding up to
    /// 16 lanes, or past the end of the mask row): stored as -inf, never read.
    pub(crate) lim: usize,
    /// Causal: row r keeps columns below `diag + r + 1` (the query index minus the
    /// key index of the tile's corner); `None` when not causal.
    pub(crate) diag: Option<isize>,
}

impl Epi {
    pub(crate) const NONE: Epi = Epi { mask: std::ptr::null(), m_rs: 0, rmax: std::ptr::null_mut(), lim: usize::MAX, diag: None };
    /// The epilogue of the sub-tile at row `r0`, column `c0` of this one.
    ///
    /// # Safety
    /// When `mask` is not null, `mask + r0 * m_rs + c0` must stay inside the mask's
    /// allocation; when `rmax` is not null, `rmax + r0` inside the row maxes'.
    #[inline(always)]
    unsafe fn at(self, r0: usize, c0: usize) -> Epi {
        // SAFETY: the offsets are applied only to non-null pointers, and stay inside their
        // allocations by the caller's contract.
        unsafe {
            Epi {
                mask: if self.mask.is_null() { self.mask } else { self.mask.add(r0 * self.m_rs + c0) },
                m_rs: self.m_rs,
                rmax: if self.rmax.is_null() { self.rmax } else { self.rmax.add(r0) },
                lim: self.lim.saturating_sub(c0),
                diag: self.diag.map(|d| d + r0 as isize - c0 as isize),
            }
        }
    }

    /// Columns of row `r` that take part, counted from the tile's first.
    #[inline(always)]
    fn row_lim(self, r: usize) -> usize {
        match self.diag {
            Some(d) => self.lim.min((d + r as isize + 1).max(0) as usize),
            None => self.lim,
        }
    }
}

/// Stand-in off x86-64, so `mm16` compiles there.
///
/// # Safety
/// Never called: the packed kernel runs only on x86-64 with AVX-512. It panics.
#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ukr<const R: usize, const NC: usize>(
    _: usize,
    _: *const f32,
    _: usize,
    _: *const f32,
    _: usize,
    _: *mut f32,
    _: usize,
    _: bool,
    _: f32,
    _: Epi,
) {
    unreachable!("the packed kernel runs only with AVX-512")
}

/// `C[m x n] (+)= alpha * A B` with n a multiple of 16, by 6 x 64 register tiles;
/// each 64 columns of B start `b_c64` elements after the previous ones.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (it runs `ukr`), and `n` must be a
/// multiple of 16. `a` must point to `m` rows of `k` readable floats, `a_rs` apart; B
/// is `k` rows of `n` readable floats, row `kk`'s columns `64 t..64 t + 64` at
/// `b + t * b_c64 + kk * b_rs`; `c` to `m` rows of `n` writable floats (readable too
/// when `add`), `c_rs` apart, not overlapping the inputs. `ep` as `ukr` asks, for the
/// whole m x n tile: `ep.mask` null, or row r's first `min(ep.row_lim(r), n)` readable
/// and `ep.mask + r * m_rs + col` (col < n, a multiple of 16) inside its allocation;
/// `ep.rmax` null or `m` readable and writable floats.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn mm16(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    a_rs: usize,
    b: *const f32,
    b_rs: usize,
    b_c64: usize,
    c: *mut f32,
    c_rs: usize,
    add: bool,
    alpha: f32,
    ep: Epi,
) {
    macro_rules! rows {
        ($nc:literal, $c0:expr) => {{
            let mut r0 = 0;
            while r0 < m {
                let (ap, cp) = (a.add(r0 * a_rs), c.add(r0 * c_rs + $c0));
                let bp = b.add($c0 / 64 * b_c64);
                let e = ep.at(r0, $c0);
                match m - r0 {
                    1 => ukr::<1, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    2 => ukr::<2, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    3 => ukr::<3, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    4 => ukr::<4, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    5 => ukr::<5, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    _ => ukr::<6, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                }
                r0 += 6;
            }
        }};
    }
    let mut c0 = 0;
    // SAFETY: each tile is rows r0..r0 + R (R = min(6, m - r0)) and columns
    // c0..c0 + 16 NC (NC = min(4, (n - c0) / 16), n a multiple of 16) of the m x n
    // product, so its A rows, B panel (64-column block c0 / 64), C block, mask and row
    // maxes are the parts of the caller's buffers that `ukr` and `Epi::at` ask for; the
    // caller guarantees the CPU features.
    unsafe {
        while c0 < n {
            match (n - c0) / 16 {
                1 => rows!(1, c0),
                2 => rows!(2, c0),
                3 => rows!(3, c0),
                _ => rows!(4, c0),
            }
            c0 += 64;
        }
    }
}
