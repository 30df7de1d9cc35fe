//! The forward: per (batch, query block) task, an online softmax over key tiles.
use super::microkernel::*;
use super::rows::*;
use super::*;
use crate::ops::float::as_f32;
use crate::ops::tiles::{Depth, Epi, NoTiles, Product, Tiles};
use crate::ops::vector::{axpy, dot};

/// Per-thread scratch of the forward.
pub(crate) struct FwdWs<T> {
    pub(crate) sc: Vec<T>,
    pub(crate) acc: Vec<T>,
    pub(crate) m: Vec<T>,
    pub(crate) l: Vec<T>,
    /// Row maxes of the current score tile, when the tile store computed them.
    pub(crate) m_blk: Vec<T>,
    /// The task's query rows, contiguous, for the tiles (`dense_rows`).
    pub(crate) qs: Vec<T>,
}

/// Query rows up to this many are multiplied with plain dot products and row updates
/// instead of GEMM calls: for a decode step (one query row per head) the `gemm` crate
/// packs every K and V tile first, which cost more than the products themselves
/// (a 9-head, 512-key step took 250 us, most of it packing).
pub(crate) const SMALL_H: usize = 4;

/// Multiply-adds (QK^T and PV together) below which the forward runs its tasks on
/// the spinning team instead of the rayon pool. A 9-head decode step over 512 cached
/// keys (~0.6 M) took 80-110 us split over the pool, most of it a worker's wake-up.
const TEAM_MACS: usize = 1 << 20;

/// `ops::vector::dot` for f32 with AVX2 FMAs: the generic loop compiles to 4-wide halves
/// plus shuffles, and the per-key dot product is most of a decode step's attention.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_f32_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (mut s0, mut s1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut i = 0;
    // SAFETY: every load reads 8 floats from index i (or i + 8) with i + 16 <= n
    // (resp. i + 8 <= n), inside both slices; the rest are register operations.
    let mut r = unsafe {
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), s1);
            i += 16;
        }
        if i + 8 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            i += 8;
        }
        let s = _mm256_add_ps(s0, s1);
        let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)))
    };
    while i < n {
        r += a[i] * b[i];
        i += 1;
    }
    r
}

/// `dot`, through `dot_f32_avx2` for f32 when `FMA`: the caller must pass it only on
/// CPUs that have AVX2 and FMA (the AVX2 / AVX-512 task variants, or a caller that
/// checked `has_avx2_fma`).
#[inline(always)]
pub(crate) fn dot_any<T: Float, const FMA: bool>(a: &[T], b: &[T]) -> T {
    #[cfg(target_arch = "x86_64")]
    if FMA {
        if let (Some(a32), Some(b32)) = (as_f32(a), as_f32(b)) {
            // SAFETY: FMA is true only on CPUs with AVX2 and FMA (the contract above: the
            // task variants run where `simd_level()` found them, other callers check
            // `has_avx2_fma`); T is f32 (`as_f32` said so), so
            // the result is read back at its own type.
            return unsafe {
                let r = dot_f32_avx2(a32, b32);
                *(&r as *const f32 as *const T)
            };
        }
    }
    dot(a, b)
}

/// One forward task: query rows `i0..i1` of batch entry `n`, all key blocks.
///
/// # Safety
/// `g` must describe `x`: for every entry, the q / k / v rows it addresses (offsets,
/// row strides, d or dv elements each; the mask's rows and columns through `m_rs` /
/// `m_cs`) lie inside `x.q`, `x.k`, `x.v` and `x.mask`. `i0 < i1 <= min(i0 + q_block_max(BQ), l)`.
/// `out` must point to an output where row `i` of entry `n` is the `dv` elements at
/// `o_off[n] + i * o_rs`, and when `c.lse`, `lse` to `n * l` elements; rows `i0..i1`
/// of entry `n` (of both) must be writable and accessed by no other task meanwhile.
/// `ws` must hold `h * bk` scores (h = i1 - i0, bk = `BK.min(s)` rounded up to 16), with `pk` `h * d` query elements,
/// `h * dv` accumulators (`h * pk.dvp` with `pk`) and `h` of each row statistic. `pk` must be
/// `None` unless `T` is f32 and the CPU has the features of `M` (a SIMD level, not
/// `NoTiles`), and then be `pack(g, x.k, x.v, _)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fwd_task<T: Float, const FMA: bool, M: Tiles>(
    g: &Geo,
    c: &Cfg,
    x: &Inputs<T>,
    pk: Option<&Packed>,
    n: usize,
    i0: usize,
    i1: usize,
    out: SyncPtr<T>,
    lse: SyncPtr<T>,
    ws: &mut FwdWs<T>,
) {
    let (l, s, d, dv) = (g.l, g.s, g.d, g.dv);
    let h = i1 - i0;
    let scale = T::of(c.scale);
    let drop = c.drop_params().map(|(t, inv)| (t, T::of(inv)));
    let fast = fast_exp::<T>();
    let FwdWs { sc, acc, m, l: lsum, m_blk, qs } = ws;
    let acc_rs = pk.map_or(dv, |p| p.dvp);
    acc[..h * acc_rs].iter_mut().for_each(|a| *a = T::ZERO);
    m[..h].iter_mut().for_each(|a| *a = T::NEG_INF);
    lsum[..h].iter_mut().for_each(|a| *a = T::ZERO);
    // SAFETY: i0 < l, so row i0 of entry n's Q is inside `x.q` (`g` describes `x`).
    let qp = unsafe { x.q.as_ptr().add(g.q_off[n] + i0 * g.q_rs) };
    // The tiles read the query rows contiguous (`dense_rows`).
    // SAFETY: rows i0..i1 of entry n (d elements, q_rs apart) are inside `x.q`; `qs`
    // holds h * d elements with `pk` (the caller's contract).
    let (qt, qt_rs) = if pk.is_some() { unsafe { dense_rows(qp, g.q_rs, h, d, qs) } } else { (qp, g.q_rs) };
    // Causal rows i attend keys j <= i: the block needs keys below i1.
    let s_end = if c.causal { s.min(i1) } else { s };
    let mut j0 = 0;
    while j0 < s_end {
        let w = BK.min(s_end - j0);
        // SAFETY: j0 < s_end <= s, so row j0 of entry n's V is inside `x.v`.
        let vp = unsafe { x.v.as_ptr().add(g.v_off[n] + j0 * g.v_rs) };
        let mut fused = false;
        // S = scale * Q K^T (h x w), rows of stride sc_rs.
        let sc_rs = match pk {
            // SAFETY: `pk` is Some only for f32 on a CPU with `M`'s level (the caller's
            // contract), so the pointer casts to f32 are identities and `M::mm` may run. `kt` is entry
            // n's K^T from key j0 (j0 is a multiple of 64, and j0 + wp <= sp); the Q rows
            // i0..i1 are inside `x.q`; the h x wp tile fits `sc` (wp <= bk); the
            // mask tile (rows i0..i1, columns j0 + col for col <= wp - 16 < w, unit column
            // stride when fused) is inside `x.mask`, lanes past `lim` unread; `m_blk`
            // holds h row maxes.
            Some(p) => unsafe {
                let wp = w.div_ceil(16) * 16;
                let kt = p.kt.as_ptr().add(g.k_idx[n] * d * p.sp + j0 * d);
                // Fuse the mask add, the causal cut, the -inf of padded columns and
                // the row max into the tile store when the mask is a plain row slice.
                fused = x.mask.is_none() || g.m_cs == 1;
                let ep = if fused {
                    m_blk[..h].iter_mut().for_each(|a| *a = T::NEG_INF);
                    Epi {
                        mask: x.mask.map_or(std::ptr::null(), |mk| mk.as_ptr().add(g.m_off[n] + i0 * g.m_rs + j0) as *const f32),
                        m_rs: g.m_rs,
                        rmax: m_blk.as_mut_ptr() as *mut f32,
                        lim: w,
                        diag: c.causal.then_some(i0 as isize - j0 as isize),
                    }
                } else {
                    Epi::NONE
                };
                M::mm(Product {
                    m: h,
                    n: wp,
                    k: d,
                    a: qt as *const f32,
                    a_st: (qt_rs, 1),
                    b: kt,
                    b_rs: p.pw,
                    b_c64: d * p.pw,
                    c: sc.as_mut_ptr() as *mut f32,
                    c_rs: wp,
                    add: false,
                    alpha: c.scale as f32,
                    ep,
                    depth: Depth::All,
                });
                wp
            },
            // SAFETY: as for the GEMM below: key rows j0..j0 + w of entry n (d elements
            // each, k_rs apart) are inside `x.k`, the Q rows i0..i1 (q_rs apart) inside
            // `x.q`, and the h x w tile fits `sc`.
            None if h <= SMALL_H => unsafe {
                let kp = x.k.as_ptr().add(g.k_off[n] + j0 * g.k_rs);
                for r in 0..h {
                    let qr = std::slice::from_raw_parts(qp.add(r * g.q_rs), d);
                    let row = &mut sc[r * w..(r + 1) * w];
                    let mut jj = 0;
                    while jj < w {
                        row[jj] = scale * dot_any::<T, FMA>(qr, std::slice::from_raw_parts(kp.add(jj * g.k_rs), d));
                        jj += 1;
                    }
                }
                w
            },
            // SAFETY: key rows j0..j0 + w of entry n are inside `x.k` (K^T read at row
            // stride 1, column stride k_rs), the Q rows i0..i1 inside `x.q`, and the h x w
            // tile fits `sc` (w <= bk), a scratch buffer disjoint from the inputs.
            None => unsafe {
                let kp = x.k.as_ptr().add(g.k_off[n] + j0 * g.k_rs);
                gemm(
                    (h, w, d),
                    sc.as_mut_ptr(),
                    w as isize,
                    false,
                    (qp, g.q_rs as isize, 1),
                    (kp, 1, g.k_rs as isize),
                    scale,
                    Parallelism::None,
                );
                w
            },
        };
        for r in 0..h {
            let i = i0 + r;
            // A fused tile's row is -inf from its limit to the padded width (a multiple
            // of 16), so the exp runs over whole vectors.
            let row = &mut sc[r * sc_rs..r * sc_rs + if fused { sc_rs } else { w }];
            let lim = if c.causal { (i + 1).saturating_sub(j0).min(w) } else { w };
            let bmax = if fused {
                m_blk[r]
            } else {
                let mrow = x.mask.map(|mk| &mk[g.m_off[n] + i * g.m_rs + j0 * g.m_cs..]);
                prep_row(row, mrow, g.m_cs, lim)
            };
            let m_new = fmax(m[r], bmax);
            if m_new == T::NEG_INF {
                row.iter_mut().for_each(|p| *p = T::ZERO);
                continue;
            }
            let ps = exp_row_fast::<T, FMA>(row, m_new, fast);
            if m[r] != m_new {
                let alpha = if m[r] == T::NEG_INF { T::ZERO } else { (m[r] - m_new).exp::<FMA>() };
                lsum[r] *= alpha;
                for a in acc[r * acc_rs..r * acc_rs + dv].iter_mut() {
                    *a *= alpha;
                }
                m[r] = m_new;
            }
            lsum[r] += ps;
            if let Some((thr, inv)) = drop {
                let base = ((n * l + i) * s + j0) as u64;
                for (jj, p) in row[..w].iter_mut().enumerate() {
                    *p *= keep_factor(c.seed, base + jj as u64, thr, inv);
                }
            }
        }
        // acc += P V (h x dv).
        // SAFETY: P is the h x w tile of `sc` (rows sc_rs apart); V's rows j0..j0 + w of
        // entry n are inside `x.v` (dv = dvp floats each when `p.vp` is empty), or inside
        // `p.vp` (rows of dvp floats per kv slice); `acc` holds h rows of dvp (or
        // dv) floats and is disjoint from both. With `pk`, T is f32 on a CPU with `M`'s level.
        unsafe {
            match pk {
                Some(p) => {
                    let (vpp, v_rs) = if p.vp.is_empty() {
                        (vp as *const f32, g.v_rs)
                    } else {
                        (p.vp.as_ptr().add(g.v_idx[n] * s * p.dvp + j0 * p.dvp), p.dvp)
                    };
                    M::mm(Product {
                        m: h,
                        n: p.dvp,
                        k: w,
                        a: sc.as_ptr() as *const f32,
                        a_st: (sc_rs, 1),
                        b: vpp,
                        b_rs: v_rs,
                        b_c64: 64,
                        c: acc.as_mut_ptr() as *mut f32,
                        c_rs: p.dvp,
                        add: true,
                        alpha: 1.0,
                        ep: Epi::NONE,
                        // Causal: P is zero past each row's diagonal (exp(-inf) is
                        // exactly 0), so V's rows there are not read.
                        depth: if c.causal { Depth::Below(i0 as isize - j0 as isize) } else { Depth::All },
                    });
                }
                None if h <= SMALL_H => {
                    for r in 0..h {
                        let ar = &mut acc[r * acc_rs..r * acc_rs + dv];
                        let row = &sc[r * w..(r + 1) * w];
                        let mut jj = 0;
                        while jj < w {
                            axpy(ar, row[jj], std::slice::from_raw_parts(vp.add(jj * g.v_rs), dv));
                            jj += 1;
                        }
                    }
                }
                None => gemm(
                    (h, dv, w),
                    acc.as_mut_ptr(),
                    dv as isize,
                    true,
                    (sc.as_ptr(), w as isize, 1),
                    (vp, g.v_rs as isize, 1),
                    T::ONE,
                    Parallelism::None,
                ),
            }
        }
        j0 += w;
    }
    // SAFETY: rows i0..i1 of entry n's output (dv elements at o_off[n] + i * o_rs) and
    // elements n * l + i0..n * l + i1 of `lse` (written only when `c.lse`) are inside
    // `out` / `lse`, writable, and touched by no other task (the caller's contract).
    unsafe {
        let o = out.0.add(g.o_off[n] + i0 * g.o_rs);
        for r in 0..h {
            let ls = lsum[r];
            let dst = std::slice::from_raw_parts_mut(o.add(r * g.o_rs), dv);
            if ls == T::ZERO {
                dst.iter_mut().for_each(|v| *v = T::ZERO);
                if c.lse {
                    *lse.0.add(n * l + i0 + r) = T::INF;
                }
            } else {
                let inv = T::ONE / ls;
                for (v, &a) in dst.iter_mut().zip(&acc[r * acc_rs..r * acc_rs + dv]) {
                    *v = a * inv;
                }
                if c.lse {
                    *lse.0.add(n * l + i0 + r) = m[r] + ls.ln();
                }
            }
        }
    }
}

/// `fwd_task` compiled for AVX-512 (with the packed f32 kernel when `pk` is given).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA, and `fwd_task`'s contract must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fwd_task_avx512<T: Float>(
    g: &Geo,
    c: &Cfg,
    x: &Inputs<T>,
    pk: Option<&Packed>,
    n: usize,
    i0: usize,
    i1: usize,
    out: SyncPtr<T>,
    lse: SyncPtr<T>,
    ws: &mut FwdWs<T>,
) {
    // SAFETY: the caller upholds `fwd_task`'s contract (and the CPU features `pk` needs).
    unsafe { fwd_task::<T, true, crate::ops::lanes::X16>(g, c, x, pk, n, i0, i1, out, lse, ws) }
}

/// `fwd_task` compiled for AVX2+FMA (with the packed f32 kernel when `pk` is given).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `fwd_task`'s contract must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn fwd_task_avx2<T: Float>(
    g: &Geo,
    c: &Cfg,
    x: &Inputs<T>,
    pk: Option<&Packed>,
    n: usize,
    i0: usize,
    i1: usize,
    out: SyncPtr<T>,
    lse: SyncPtr<T>,
    ws: &mut FwdWs<T>,
) {
    // SAFETY: the caller upholds `fwd_task`'s contract (and the CPU features `pk` needs).
    unsafe { fwd_task::<T, true, crate::ops::lanes::X8>(g, c, x, pk, n, i0, i1, out, lse, ws) }
}

/// The forward over all (batch, query block) tasks: output (n, l, dv) and logsumexp (n, l).
pub(crate) fn forward<T: Float>(g: &Geo, c: &Cfg, x: &Inputs<T>) -> (Vec<T>, Vec<T>) {
    // Every row of `out` (and of `lse` when kept) is written by exactly one task below.
    let mut out: Vec<T> = Vec::with_capacity(g.n * g.l * g.dv);
    let mut lse: Vec<T> = Vec::with_capacity(if c.lse { g.n * g.l } else { 0 });
    let nqb = q_blocks(g.l, BQ);
    let (op, lp) = (SyncPtr(out.as_mut_ptr()), SyncPtr(lse.as_mut_ptr()));
    let simd = simd_level();
    // The register-tiled f32 path (AVX2, AVX-512): K and V repacked once per call.
    let packed =
        if matches!(simd, Simd::Avx512 | Simd::Avx2) && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && g.n * g.l > 0 {
            // SAFETY: T is f32 (the TypeId check just above), so these are the same slices,
            // same length, viewed at their own type.
            let (k, v) = unsafe {
                (
                    std::slice::from_raw_parts(x.k.as_ptr() as *const f32, x.k.len()),
                    std::slice::from_raw_parts(x.v.as_ptr() as *const f32, x.v.len()),
                )
            };
            Some(pack(g, k, v))
        } else {
            None
        };
    let pk = packed.as_ref();
    let bk = BK.min(g.s.max(1)).div_ceil(16) * 16;
    let accw = g.dv.div_ceil(16) * 16;
    let tasks = g.n * nqb;
    // A task has at most min(q_block_max(BQ), l) query rows (one for a decode step).
    let rows = q_block_max(BQ).min(g.l.max(1));
    let new_ws = || FwdWs {
        sc: vec![T::ZERO; rows * bk],
        acc: vec![T::ZERO; rows * accw],
        m: vec![T::ZERO; rows],
        l: vec![T::ZERO; rows],
        m_blk: vec![T::ZERO; rows],
        qs: if pk.is_some() { vec![T::ZERO; rows * g.d] } else { Vec::new() },
    };
    let run = |ws: &mut FwdWs<T>, t: usize| {
        let (n, qb) = (t / nqb, t % nqb);
        let (i0, i1) = q_block(qb, nqb, g.l, BQ);
        // SAFETY: task t writes only rows i0..i1 (fewer than BQ + BQ / 2; blocks are
        // disjoint) of entry n of `out` / `lse`,
        // whose capacities are n * l * dv and n * l; `g` describes `x`; `ws` has
        // min(q_block_max(BQ), l) >= i1 - i0 rows of bk scores and accw accumulators; `pk` is Some
        // only for f32 on AVX2 or AVX-512 (built from `x` above); each arm runs where
        // `simd_level()` found its features.
        unsafe {
            match simd {
                #[cfg(target_arch = "x86_64")]
                Simd::Avx512 => fwd_task_avx512(g, c, x, pk, n, i0, i1, op, lp, ws),
                #[cfg(target_arch = "x86_64")]
                Simd::Avx2 => fwd_task_avx2(g, c, x, pk, n, i0, i1, op, lp, ws),
                _ => fwd_task::<T, false, NoTiles>(g, c, x, None, n, i0, i1, op, lp, ws),
            }
        }
    };
    let work = g.n * g.l * g.s * (g.d + g.dv);
    if work < TEAM_MACS {
        // Little work in all (a decode step: one query row per head): on the spinning
        // team (`ops::team`), whose threads are awake between the calls of a decode
        // loop, where a rayon worker would first have to be woken.
        crate::ops::team::for_each(tasks, &|t| run(&mut new_ws(), t));
    } else {
        // Tasks claimed one at a time, scratch made once per thread.
        crate::ops::parallel::for_tasks_init(tasks, true, new_ws, run);
    }
    // SAFETY: the capacities are n * l * dv and n * l; the tasks (n, qb) cover every row
    // of every entry, each wrote its rows of `out` in full (and of `lse` when kept), and
    // `o_off` / `o_rs` lay those rows over the whole n * l * dv output.
    unsafe {
        out.set_len(g.n * g.l * g.dv);
        if c.lse {
            lse.set_len(g.n * g.l);
        }
    }
    (out, lse)
}
