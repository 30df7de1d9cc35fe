//! Register-tiled float32 products `C (+)= alpha A B` written once over `ops::lanes`
//! (`Tiles`: 6 x 64 tiles with AVX-512, 6 x 16 with AVX2), A read in place at any row
//! and column stride, B in rows (or 64-column panels) of a multiple of 16 columns, with
//! an optional epilogue fused into the store (`Epi`: a mask tile added, a limit and a
//! causal diagonal past which the tile holds -inf, the row maxima). Used by the
//! attention kernel (`layers::attention`) and the batched small products (`ops::bmm`):
//! the `gemm` crate packs both operands of every call, which at these sizes costs as
//! much as the product.
use crate::ops::lanes::Lanes;

/// `C[R x LANES*NC] (+)= alpha * A[R x k] B[k x LANES*NC]`, A's element (r, kk) at
/// `a + r * a_rs + kk * a_cs` (so a transposed A is read in place), B rows of stride
/// `b_rs`: accumulators stay in registers.
///
/// # Safety
/// The CPU has `V`'s features. `a` must be readable at `r * a_rs + kk * a_cs` for
/// r < R, kk < k; `b` at `k` rows of `LANES * NC` floats, `b_rs` apart; `c` must point
/// to R rows of `LANES * NC` writable floats (also readable when `add`), `c_rs` apart,
/// not overlapping `a`, `b` or the mask. `ep.mask` is null, or for each row r < R the
/// first `min(ep.row_lim(r), LANES * NC)` floats at `ep.mask + r * m_rs` are readable and
/// the addresses `ep.mask + r * m_rs + LANES * cc` (cc < NC) stay inside the mask's
/// allocation. `ep.rmax` is null or points to R readable and writable floats.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ukr<V: Lanes, const R: usize, const NC: usize>(
    k: usize,
    a: *const f32,
    (a_rs, a_cs): (usize, usize),
    b: *const f32,
    b_rs: usize,
    c: *mut f32,
    c_rs: usize,
    add: bool,
    alpha: f32,
    ep: Epi,
) {
    let lanes = V::LANES;
    #[cfg(target_arch = "x86_64")]
    if !ep.mask.is_null() {
        // The mask tile comes from L3 in rows 4 KiB+ apart, which the hardware
        // prefetcher does not follow: ask for it now, use it after the k loop.
        for r in 0..R {
            for cc in 0..NC {
                // SAFETY: r < R and cc < NC: the caller keeps these mask addresses inside the
                // mask's allocation; a prefetch reads nothing.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(ep.mask.add(r * ep.m_rs + cc * lanes) as *const i8)
                };
            }
        }
    }
    // SAFETY: the caller's level.
    let mut acc = [[unsafe { V::zero() }; NC]; R];
    let mut kk = 0;
    // SAFETY: kk < k, cc < NC and r < R: the LANES floats at `b + kk * b_rs + LANES * cc`
    // are inside B's row kk (LANES * NC floats), and `a + r * a_rs + kk * a_cs` is A's
    // element (r, kk), both readable (the caller's contract); the caller's level.
    unsafe {
        while kk < k {
            let bp = b.add(kk * b_rs);
            let ap = a.add(kk * a_cs);
            let mut bv = [V::zero(); NC];
            let mut cc = 0;
            while cc < NC {
                bv[cc] = V::load(bp.add(cc * lanes));
                cc += 1;
            }
            let mut r = 0;
            while r < R {
                let av = V::splat(*ap.add(r * a_rs));
                let mut cc = 0;
                while cc < NC {
                    acc[r][cc] = av.fmadd(bv[cc], acc[r][cc]);
                    cc += 1;
                }
                r += 1;
            }
            kk += 1;
        }
    }
    // SAFETY: r < R and cc < NC: `cp` is C's row r, columns LANES * cc.. + LANES, inside
    // C (writable, and readable when `add`); the mask load enables only lanes below
    // `live`, i.e. columns below `row_lim(r)`, which the caller keeps readable, at an
    // address inside the mask's allocation (a masked load touches no masked-off lane);
    // `ep.rmax + r` is one of the R floats of `rmax` when it is not null; the caller's level.
    unsafe {
        let al = V::splat(alpha);
        let ninf = V::splat(f32::NEG_INFINITY);
        let mut r = 0;
        while r < R {
            let mut mx = ninf;
            let rl = ep.row_lim(r);
            let mut cc = 0;
            while cc < NC {
                let cp = c.add(r * c_rs + cc * lanes);
                // Lanes at or past the row's limit: -inf, and the mask is not read there
                // (a masked load does not touch memory in masked-off lanes).
                let live = rl.saturating_sub(cc * lanes);
                let full = live >= lanes;
                let km = V::mask(if full { u32::MAX } else { (1u32 << live) - 1 });
                let v = if add {
                    acc[r][cc].fmadd(al, V::load(cp))
                } else if !ep.mask.is_null() {
                    acc[r][cc].fmadd(al, V::load_mask(ep.mask.add(r * ep.m_rs + cc * lanes), km))
                } else {
                    acc[r][cc].mul(al)
                };
                let v = if full { v } else { ninf.blend(v, km) };
                v.store(cp);
                mx = mx.max(v);
                cc += 1;
            }
            if !ep.rmax.is_null() {
                let p = ep.rmax.add(r);
                *p = (*p).max(mx.max_lane());
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

/// The row blocks of one column band (`NC` vectors of `V` wide) of `C = alpha A B`:
/// `ukr` tiles of 6 rows, then one of the rest.
///
/// # Safety
/// As `ukr` for each tile: `m` rows of A, C and the epilogue, `LANES * NC` columns.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn band<V: Lanes, const NC: usize>(
    m: usize,
    k: usize,
    a: *const f32,
    (a_rs, a_cs): (usize, usize),
    b: *const f32,
    b_rs: usize,
    c: *mut f32,
    c_rs: usize,
    add: bool,
    alpha: f32,
    ep: Epi,
) {
    let mut r0 = 0;
    // SAFETY: rows r0..r0 + R (R = min(6, m - r0)) of the band are the parts of the
    // caller's A, C, mask and row maxes that `ukr` and `Epi::at` ask for.
    unsafe {
        while r0 < m {
            let (ap, cp, e, st) = (a.add(r0 * a_rs), c.add(r0 * c_rs), ep.at(r0, 0), (a_rs, a_cs));
            match m - r0 {
                1 => ukr::<V, 1, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
                2 => ukr::<V, 2, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
                3 => ukr::<V, 3, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
                4 => ukr::<V, 4, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
                5 => ukr::<V, 5, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
                _ => ukr::<V, 6, NC>(k, ap, st, b, b_rs, cp, c_rs, add, alpha, e),
            }
            r0 += 6;
        }
    }
}

/// One product `C[m x n] (+)= alpha * A B` for `Tiles::mm`, n a multiple of 16.
#[derive(Clone, Copy)]
pub(crate) struct Product {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// A's element (r, kk) is at `a + r * a_st.0 + kk * a_st.1` (a transposed A is
    /// read in place).
    pub(crate) a: *const f32,
    pub(crate) a_st: (usize, usize),
    /// B is `k` rows of `n`: row `kk`'s columns `64 t..64 t + 64` at
    /// `b + t * b_c64 + kk * b_rs` (64-column panels, or plain rows with `b_c64` 64).
    pub(crate) b: *const f32,
    pub(crate) b_rs: usize,
    pub(crate) b_c64: usize,
    /// C's rows, `c_rs` apart; read too when `add`.
    pub(crate) c: *mut f32,
    pub(crate) c_rs: usize,
    pub(crate) add: bool,
    pub(crate) alpha: f32,
    pub(crate) ep: Epi,
}

/// The register-tiled product of a SIMD level, or none (`NoTiles`): what the packed
/// attention paths are generic over, so the plain build of a task has no intrinsics.
pub(crate) trait Tiles {
    /// `p.c (+)= p.alpha * A B` by register tiles of 6 rows (4 x 16 lanes with AVX-512:
    /// 24 of its 32 registers hold sums; 2 x 8 with AVX2: 12 of its 16).
    ///
    /// # Safety
    /// The CPU has the level's features; `n` is a multiple of 16. A must be readable at
    /// `r * a_st.0 + kk * a_st.1` (r < m, kk < k), B as `Product` lays it out; `c` must
    /// point to `m` rows of `n` writable floats (readable too when `add`), `c_rs` apart,
    /// not overlapping the inputs. `ep` as `ukr` asks, for the whole m x n tile:
    /// `ep.mask` null, or row r's first `min(ep.row_lim(r), n)` readable and `ep.mask +
    /// r * m_rs + col` (col < n, a multiple of 8) inside its allocation; `ep.rmax` null
    /// or `m` readable and writable floats.
    unsafe fn mm(p: Product);
}

/// `Tiles` for a level: column bands of up to `$most` vectors, one `band` instance per
/// width in `$nc` (the widest first).
macro_rules! tiles {
    ($v:ty, $most:literal, [$($nc:literal),*]) => {
        #[cfg(target_arch = "x86_64")]
        impl Tiles for $v {
            #[inline(always)]
            unsafe fn mm(p: Product) {
                let Product { m, n, k, a, a_st, b, b_rs, b_c64, c, c_rs, add, alpha, ep } = p;
                let lanes = <$v as Lanes>::LANES;
                let mut c0 = 0;
                // SAFETY: each band is columns c0..c0 + LANES * NC (NC = the vectors left,
                // at most $most; n a multiple of 16) of the m x n product, so its B
                // columns (64-column panel c0 / 64, from column c0 % 64), C block, mask
                // and row maxes are the parts of the caller's buffers that `band` and
                // `Epi::at` ask for; the caller guarantees the CPU features.
                unsafe {
                    while c0 < n {
                        let nc = ((n - c0) / lanes).min($most);
                        let bp = b.add(c0 / 64 * b_c64 + c0 % 64);
                        let (cp, e) = (c.add(c0), ep.at(0, c0));
                        match nc {
                            $($nc => band::<$v, $nc>(m, k, a, a_st, bp, b_rs, cp, c_rs, add, alpha, e),)*
                            _ => unreachable!("n is a multiple of 16"),
                        }
                        c0 += lanes * nc;
                    }
                }
            }
        }
    };
}
tiles!(crate::ops::lanes::X16, 4, [4, 3, 2, 1]);
tiles!(crate::ops::lanes::X8, 2, [2]);

/// No register-tiled product: the build of a task for CPUs without AVX2 (and off
/// x86-64), which never takes the packed paths.
pub(crate) enum NoTiles {}

impl Tiles for NoTiles {
    unsafe fn mm(_: Product) {
        unreachable!("the packed attention paths run only with AVX2 or AVX-512")
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::ops::lanes::{X16, X8};

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 20) as f32 / 4096.0 - 0.5).collect()
    }

    /// `T::mm` against a plain triple loop in f64: plain and transposed A, overwrite and
    /// accumulate, row counts around the 6-row tiles, several bands and panels, and the
    /// epilogue (mask add, a limit, the causal diagonal, row maxes).
    fn check<T: Tiles>() {
        for &(m, n, k) in &[(1usize, 16usize, 3usize), (7, 48, 64), (13, 80, 17), (64, 128, 64)] {
            for transposed in [false, true] {
                for add in [false, true] {
                    let a = data(m * k, 1);
                    let (a_rs, a_cs) = if transposed { (1, m) } else { (k, 1) };
                    // B as 64-column panels of k rows: column c of row kk at (c / 64) * 64k + kk * 64 + c % 64.
                    let panels_n = n.div_ceil(64) * 64;
                    let b = data(k * panels_n, 2);
                    let at = |kk: usize, c: usize| b[c / 64 * 64 * k + kk * 64 + c % 64];
                    let mask = data(m * n, 3);
                    let c0 = data(m * n, 4);
                    let (lim, diag) = (n - 5, Some(2isize));
                    let mut c = c0.clone();
                    let mut rmax = vec![f32::NEG_INFINITY; m];
                    let ep = if add { Epi::NONE } else { Epi { mask: mask.as_ptr(), m_rs: n, rmax: rmax.as_mut_ptr(), lim, diag } };
                    // SAFETY: the caller checked the CPU has T's level; the buffers hold what `mm` reads and writes.
                    unsafe {
                        T::mm(Product {
                            m,
                            n,
                            k,
                            a: a.as_ptr(),
                            a_st: (a_rs, a_cs),
                            b: b.as_ptr(),
                            b_rs: 64,
                            b_c64: 64 * k,
                            c: c.as_mut_ptr(),
                            c_rs: n,
                            add,
                            alpha: 0.5,
                            ep,
                        })
                    };
                    for r in 0..m {
                        let mut mx = f32::NEG_INFINITY;
                        for col in 0..n {
                            let dot: f64 = (0..k).map(|kk| a[r * a_rs + kk * a_cs] as f64 * at(kk, col) as f64).sum();
                            let want = if add {
                                c0[r * n + col] as f64 + 0.5 * dot
                            } else if col < lim.min((2 + r as isize + 1) as usize) {
                                0.5 * dot + mask[r * n + col] as f64
                            } else {
                                f64::NEG_INFINITY
                            };
                            let got = c[r * n + col];
                            assert!(
                                got as f64 == want || (got as f64 - want).abs() < 1e-4,
                                "{m}x{n}x{k} t={transposed} add={add} ({r}, {col}): {got} vs {want}"
                            );
                            mx = mx.max(got);
                        }
                        if !add {
                            assert_eq!(rmax[r], mx, "row max {r}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn tiles_match_a_plain_product() {
        if crate::ops::cpu::has_avx2_fma() {
            check::<X8>();
        }
        if crate::ops::cpu::has_avx512() {
            check::<X16>();
        }
    }
}
