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
    // A tile wholly past the causal diagonal (or the limit) stores only -inf: its
    // products are never read, so none are computed (its last row keeps the most).
    let k = if ep.row_lim(R - 1) == 0 { 0 } else { k };
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
    // The sums leave the registers once, into `tile`, which the epilogue reads (its
    // rows are not unrolled). Indexed by the epilogue's loops, `acc` itself lived in
    // memory: LLVM kept it in registers through the depth loop but also stored all
    // R x NC sums to the stack at every step (24 stores beside 24 FMAs per step, in the
    // attention's 6 x 64 tiles).
    // SAFETY: the caller's level.
    let mut tile = [[unsafe { V::zero() }; NC]; R];
    for r in 0..R {
        for cc in 0..NC {
            tile[r][cc] = acc[r][cc];
        }
    }
    let acc = tile;
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
    depth: Depth,
) {
    let mut r0 = 0;
    // SAFETY: rows r0..r0 + R (R = min(6, m - r0)) of the band are the parts of the
    // caller's A, C, mask and row maxes that `ukr` and `Epi::at` ask for; depths k0..k1
    // lie inside 0..k, so A's elements and B's rows from k0 on are the caller's too.
    unsafe {
        while r0 < m {
            let (k0, k1) = depth.range(r0, (m - r0).min(6), k);
            if k0 == k1 && add {
                // Nothing to add: A is zero over this block's rows.
                r0 += 6;
                continue;
            }
            let (ap, bp, kd) = (a.add(r0 * a_rs + k0 * a_cs), b.add(k0 * b_rs), k1 - k0);
            let (cp, e, st) = (c.add(r0 * c_rs), ep.at(r0, 0), (a_rs, a_cs));
            match m - r0 {
                1 => ukr::<V, 1, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
                2 => ukr::<V, 2, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
                3 => ukr::<V, 3, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
                4 => ukr::<V, 4, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
                5 => ukr::<V, 5, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
                _ => ukr::<V, 6, NC>(kd, ap, st, bp, b_rs, cp, c_rs, add, alpha, e),
            }
            r0 += 6;
        }
    }
}

/// The depths where A's rows can be non-zero: a triangular A (causal attention's
/// probabilities P and their gradient dS, or their transposes) is multiplied only over
/// those, block of 6 rows by block. The rest of A must be exactly zero there (the
/// result is then the full product's; an inf or NaN in B's skipped rows is not read).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Depth {
    /// Every depth `0..k`.
    All,
    /// Row r is zero from depth `d + r + 1` on (lower-triangular: a causal P or dS,
    /// `d` the query index minus the key index of A's corner).
    Below(isize),
    /// Row r is zero below depth `r - d` (upper-triangular: their transposes, P^T and dS^T).
    From(isize),
}

impl Depth {
    /// The depths `k0..k1` (inside `0..k`, empty as `k0 == k1`) where rows `r0..r0 + rows` can be non-zero.
    #[inline(always)]
    pub(crate) fn range(self, r0: usize, rows: usize, k: usize) -> (usize, usize) {
        let clamp = |x: isize| x.clamp(0, k as isize) as usize;
        let (k0, k1) = match self {
            Depth::All => (0, k),
            Depth::Below(d) => (0, clamp(d + (r0 + rows) as isize)),
            Depth::From(d) => (clamp(r0 as isize - d), k),
        };
        (k0.min(k1), k1)
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
    /// Where A's rows can be non-zero (`Depth::All` for a dense A).
    pub(crate) depth: Depth,
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
                let Product { m, n, k, a, a_st, b, b_rs, b_c64, c, c_rs, add, alpha, ep, depth } = p;
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
                            $($nc => band::<$v, $nc>(m, k, a, a_st, bp, b_rs, cp, c_rs, add, alpha, e, depth),)*
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
                            depth: Depth::All,
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

    /// A triangular A (zero outside `depth`) times a B that is NaN wherever no row of
    /// a 6-row block needs it: equal to the plain product, so the skipped depths are
    /// the right ones and are never read. Also a causal score tile whose later column
    /// bands lie wholly past the diagonal (stored -inf).
    fn check_depth<T: Tiles>() {
        for &(m, n, k) in &[(64usize, 64usize, 64usize), (13, 32, 29), (5, 16, 40), (40, 16, 7)] {
            for d in [-9isize, -1, 0, 3, 20] {
                for depth in [Depth::Below(d), Depth::From(d)] {
                    let live = |r: usize, kk: usize| match depth {
                        Depth::Below(d) => (kk as isize) < d + r as isize + 1,
                        Depth::From(d) => kk as isize >= r as isize - d,
                        Depth::All => true,
                    };
                    let a: Vec<f32> = data(m * k, 5).iter().enumerate().map(|(i, &v)| if live(i / k, i % k) { v } else { 0.0 }).collect();
                    // B row kk is needed by a block of rows r0..r0 + 6 if any of them is live there.
                    let needed = |kk: usize| (0..m).any(|r| (r / 6 * 6..(r / 6 * 6 + 6).min(m)).any(|q| live(q, kk)));
                    let mut b = data(k * 64, 6);
                    for kk in 0..k {
                        if !needed(kk) {
                            b[kk * 64..(kk + 1) * 64].iter_mut().for_each(|v| *v = f32::NAN);
                        }
                    }
                    let c0 = data(m * n, 7);
                    let mut c = c0.clone();
                    // SAFETY: the caller checked the CPU has T's level; the buffers hold what `mm` reads and writes.
                    unsafe {
                        T::mm(Product {
                            m,
                            n,
                            k,
                            a: a.as_ptr(),
                            a_st: (k, 1),
                            b: b.as_ptr(),
                            b_rs: 64,
                            b_c64: 64 * k,
                            c: c.as_mut_ptr(),
                            c_rs: n,
                            add: true,
                            alpha: 1.0,
                            ep: Epi::NONE,
                            depth,
                        })
                    };
                    for r in 0..m {
                        for col in 0..n {
                            let dot: f64 = (0..k).filter(|&kk| live(r, kk)).map(|kk| a[r * k + kk] as f64 * b[kk * 64 + col] as f64).sum();
                            let (got, want) = (c[r * n + col], c0[r * n + col] as f64 + dot);
                            assert!((got as f64 - want).abs() < 1e-4, "{m}x{n}x{k} {depth:?} ({r}, {col}): {got} vs {want}");
                        }
                    }
                }
            }
        }
        // Score tile: 8 rows, 64 columns, diagonal at 2: columns past row 7's limit (10)
        // are -inf; the bands from column 16 on are wholly past it.
        let (m, n, k) = (8usize, 64usize, 9usize);
        let (a, b) = (data(m * k, 8), data(k * n, 9));
        let mut c = vec![0f32; m * n];
        // SAFETY: as above.
        unsafe {
            T::mm(Product {
                m,
                n,
                k,
                a: a.as_ptr(),
                a_st: (k, 1),
                b: b.as_ptr(),
                b_rs: n,
                b_c64: 64,
                c: c.as_mut_ptr(),
                c_rs: n,
                add: false,
                alpha: 1.0,
                ep: Epi { mask: std::ptr::null(), m_rs: 0, rmax: std::ptr::null_mut(), lim: n, diag: Some(2) },
                depth: Depth::All,
            })
        };
        for r in 0..m {
            for col in 0..n {
                let got = c[r * n + col];
                if col < r + 3 {
                    let dot: f64 = (0..k).map(|kk| a[r * k + kk] as f64 * b[kk * n + col] as f64).sum();
                    assert!((got as f64 - dot).abs() < 1e-4, "score ({r}, {col}): {got} vs {dot}");
                } else {
                    assert_eq!(got, f32::NEG_INFINITY, "score ({r}, {col}) past the diagonal");
                }
            }
        }
    }

    #[test]
    fn tiles_match_a_plain_product() {
        if crate::ops::cpu::has_avx2_fma() {
            check::<X8>();
            check_depth::<X8>();
        }
        if crate::ops::cpu::has_avx512() {
            check::<X16>();
            check_depth::<X16>();
        }
    }
}
