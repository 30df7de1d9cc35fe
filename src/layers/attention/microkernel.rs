//! The products of the attention kernel beyond `ops::gemm` (which serves any
//! float type): for float32 with AVX2 or AVX-512, a register-tiled micro-kernel
//! written once over `ops::lanes` (`Tiles`), reading pre-packed K^T panels and
//! padded V, with the mask add and row max fused into the score tile's store (`Epi`).
//! The `gemm` crate packs both operands of every tile it is given: at the tiles of an
//! attention (64 x 64 x 64 and the like) that packing and its dispatch were ~15% of
//! the AVX2 backward (`perf`), and the causal cut could not be fused into it.
use super::*;
use crate::ops::lanes::Lanes;

/// K transposed into (d x 64) panels (sp keys, a multiple of 64) and V padded to (s, dvp) per kv slice, with sp and dvp
/// rounded up to 16 lanes, for the f32 micro-kernel (no per-tile packing).
pub(crate) struct Packed {
    pub(crate) kt: Vec<f32>,
    pub(crate) vp: Vec<f32>,
    pub(crate) sp: usize,
    /// Keys per K^T panel: 64, or all of them (rounded to 16) when fewer.
    pub(crate) pw: usize,
    pub(crate) dvp: usize,
}

/// The keys per panel of a sequence of `s` keys and the padded key count:
/// panels of 64, or one of `s` rounded up to 16 when shorter.
pub(crate) fn panel_width(s: usize) -> (usize, usize) {
    let pw = s.div_ceil(16).clamp(1, 4) * 16;
    (pw, s.div_ceil(pw) * pw)
}

/// The rows of each slice (`slices[u]` its start in `src`, `s` rows of `d` elements
/// `rs` apart) transposed into (d x pw) panels of `pw` rows each (`panel_width(s)`),
/// zero past the last row: `slices.len() * d * sp` floats, with the level's vector
/// transposes (`simd`, the CPU's level).
pub(crate) fn panels(src: &[f32], slices: &[usize], rs: usize, s: usize, d: usize, simd: Simd) -> Vec<f32> {
    let (pw, sp) = panel_width(s);
    let nk = slices.len();
    // Panel p holds [d][pw] contiguous, so the micro-kernel streams it (a plain
    // (d, s) transpose would alias in L1). Each panel row is written left to right
    // (reading the rows, which sit in L1, with a stride); columns past the last row
    // are zeroed, nothing else is.
    crate::ops::parallel::filled(nk * d * sp, |kt| {
        crate::ops::parallel::for_chunks(kt, d * sp, crate::ops::parallel::par_ok(nk * d * sp), |u, dst| {
            let src = &src[slices[u]..];
            for (pi, panel) in dst.chunks_mut(d * pw).enumerate() {
                let j0 = pi * pw;
                let keys = s.min(j0 + pw) - j0;
                let inside = keys > 0 && (j0 + keys - 1) * rs + d <= src.len();
                #[cfg(target_arch = "x86_64")]
                if inside && matches!(simd, Simd::Avx2) {
                    // SAFETY: `simd` says the CPU has AVX2; the check above keeps every read
                    // element ((j0 + jj) * rs + dd, jj < keys, dd < d) inside `src`; `panel`
                    // is d rows of pw >= keys floats, all written.
                    unsafe { transpose_panel8(src.as_ptr().add(j0 * rs), rs, keys, d, pw, panel.as_mut_ptr() as *mut f32) };
                    continue;
                }
                if inside && matches!(simd, Simd::Avx512) && pw * rs <= i32::MAX as usize {
                    // SAFETY: `simd` says the CPU has AVX-512F; the check above keeps
                    // every gathered element ((j0 + jj) * rs + dd, jj < keys, dd < d)
                    // inside `src` and the gather's i32 offsets (< pw * rs) from
                    // overflowing; `panel` is d rows of pw (a multiple of 16) floats, all written.
                    unsafe { transpose_panel(src.as_ptr().add(j0 * rs), rs, keys, d, pw, panel.as_mut_ptr() as *mut f32) };
                    continue;
                }
                for (dd, prow) in panel.chunks_mut(pw).enumerate() {
                    for (jj, o) in prow[..keys].iter_mut().enumerate() {
                        o.write(src[(j0 + jj) * rs + dd]);
                    }
                    for o in prow[keys..].iter_mut() {
                        o.write(0.0);
                    }
                }
            }
        })
    })
}

/// Where the tiles read `rows` rows of `width` elements `rs` apart from `src`: in
/// place when they are contiguous (`rs == width`), else copied into `dst` first.
/// Q, K and V split from one projection are views with rows 3 d apart (a GPT's
/// 1152 floats): rows that far apart share few L1 sets, and the tiles' operands
/// thrashed there (the tiled attention ran slower than the `gemm` crate's, which
/// packs, on exactly those views).
///
/// # Safety
/// `src` must be readable at `r * rs + c` for r < rows, c < width, and `dst` hold
/// `rows * width` elements.
#[inline(always)]
pub(crate) unsafe fn dense_rows<T: Copy>(src: *const T, rs: usize, rows: usize, width: usize, dst: &mut [T]) -> (*const T, usize) {
    if rs == width {
        return (src, rs);
    }
    for (r, row) in dst[..rows * width].chunks_exact_mut(width).enumerate() {
        // SAFETY: row r's `width` elements at `src + r * rs` are readable (the caller's).
        row.copy_from_slice(unsafe { std::slice::from_raw_parts(src.add(r * rs), width) });
    }
    (dst.as_ptr(), width)
}

/// K^T panels and V copied to contiguous rows of `dvp` columns (zero past dv), unless
/// its rows already are (`dv` a multiple of 16, rows `dv` apart).
pub(crate) fn pack(g: &Geo, k: &[f32], v: &[f32], simd: Simd) -> Packed {
    let (s, d, dv) = (g.s, g.d, g.dv);
    let dvp = dv.div_ceil(16) * 16;
    let nv = g.v_slices.len();
    let v_rs = g.v_rs;
    let (pw, sp) = panel_width(s);
    let kt = panels(k, &g.k_slices, g.k_rs, s, d, simd);
    let vp = if dvp == dv && v_rs == dv {
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

/// `transpose_panel` for AVX2, by 8 x 8 blocks (8 row loads, 24 shuffles, 8 stores):
/// one strided scalar read per element made these transposes 6% of a GPT-size
/// attention's forward and backward.
///
/// # Safety
/// The CPU must support AVX2. `src` must be readable at `j * rs + dd` for every row
/// `j < keys` and `dd < d`; `dst` must point to `d * pw` writable floats, `pw >= keys`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transpose_panel8(src: *const f32, rs: usize, keys: usize, d: usize, pw: usize, dst: *mut f32) {
    use std::arch::x86_64::*;
    let (kb, db) = (keys / 8 * 8, d / 8 * 8);
    // SAFETY: every read is element (j, dd) with j < keys, dd < d, and every write is
    // panel row dd < d, column j < pw: the caller's bounds.
    unsafe {
        let mut j = 0;
        while j < kb {
            let mut dd = 0;
            while dd < db {
                let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add((j + i) * rs + dd)));
                let t: [__m256; 8] = std::array::from_fn(|i| {
                    let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
                    if i % 2 == 0 {
                        _mm256_unpacklo_ps(a, b)
                    } else {
                        _mm256_unpackhi_ps(a, b)
                    }
                });
                // u[4h + q]: quarter q (keys 2 pairs) of half h (rows 0-3 or 4-7).
                let u: [__m256; 8] = std::array::from_fn(|i| {
                    let (h, q) = (i / 4, i % 4);
                    let (a, b) = (t[4 * h + q / 2], t[4 * h + q / 2 + 2]);
                    if q % 2 == 0 {
                        _mm256_shuffle_ps::<0x44>(a, b)
                    } else {
                        _mm256_shuffle_ps::<0xEE>(a, b)
                    }
                });
                for q in 0..4 {
                    _mm256_storeu_ps(dst.add((dd + q) * pw + j), _mm256_permute2f128_ps::<0x20>(u[q], u[4 + q]));
                    _mm256_storeu_ps(dst.add((dd + q + 4) * pw + j), _mm256_permute2f128_ps::<0x31>(u[q], u[4 + q]));
                }
                dd += 8;
            }
            for dd in db..d {
                for i in 0..8 {
                    *dst.add(dd * pw + j + i) = *src.add((j + i) * rs + dd);
                }
            }
            j += 8;
        }
        for dd in 0..d {
            for jj in kb..keys {
                *dst.add(dd * pw + jj) = *src.add(jj * rs + dd);
            }
            for jj in keys..pw {
                *dst.add(dd * pw + jj) = 0.0;
            }
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

    /// `panels` equals the plain transpose with zero padding, for each level this CPU
    /// has (and the scalar loop), over key counts around the 8-key blocks and panels.
    #[test]
    fn panels_are_the_transpose() {
        let mut levels = vec![Simd::Plain];
        if crate::ops::cpu::has_avx2_fma() {
            levels.push(Simd::Avx2);
        }
        if crate::ops::cpu::has_avx512() {
            levels.push(Simd::Avx512);
        }
        for &(s, d, rs) in &[(5usize, 3usize, 3usize), (37, 16, 20), (100, 64, 64), (133, 21, 50)] {
            let slices = [0, 7];
            let src = data(7 + s * rs, 5);
            let (pw, sp) = panel_width(s);
            for &simd in &levels {
                let got = panels(&src, &slices, rs, s, d, simd);
                assert_eq!(got.len(), 2 * d * sp);
                for (u, &base) in slices.iter().enumerate() {
                    for j in 0..sp {
                        for dd in 0..d {
                            let want = if j < s { src[base + j * rs + dd] } else { 0.0 };
                            assert_eq!(
                                got[u * d * sp + j / pw * d * pw + dd * pw + j % pw],
                                want,
                                "{simd:?} s={s} d={d} slice {u} key {j} dim {dd}"
                            );
                        }
                    }
                }
            }
        }
    }
}
