//! The flash-attention backward: P recomputed per tile from the saved logsumexp;
//! tasks own disjoint key blocks (dK, dV) and private dQ chunks, summed after.
use super::microkernel::{dense_rows, panel_width, panels};
use super::rows::*;
use super::*;
use crate::ops::tiles::{Depth, Epi, NoTiles, Product, Tiles};

/// K^T and V^T in panels (`microkernel::panels`, one set per kv slice) for the
/// register-tiled float32 products (`Tiles`), which need both head dims a multiple of 16.
pub(crate) struct Transposed {
    pub(crate) kt: Vec<f32>,
    pub(crate) vt: Vec<f32>,
    pub(crate) sp: usize,
    pub(crate) pw: usize,
}

/// Keys per backward tile: `BK_B`, or `BK_B / 2` when causal. A causal key block
/// meets query blocks from its own start on, and the tiles astride the diagonal are
/// computed whole: at 64 keys they are a smaller share (a GPT's 256 tokens compute
/// 1.24x the causal scores instead of 1.5x). Backward of (4, 6, 256, 64) causal
/// 3.46-3.56 -> 3.04-3.15 ms, (8, 4, 128, 32) 0.96-1.02 -> 0.80-0.81, (1, 8, 1024, 64)
/// 13.1-13.4 -> 12.6-12.9; not causal, 64 keys were level at 256 tokens. (The
/// generic path still computes those tiles whole; the tiled products now skip most of
/// their masked half, and there 64 and 128 keys measured level.)
pub(crate) fn key_block(c: &Cfg) -> usize {
    if c.causal {
        BK_B / 2
    } else {
        BK_B
    }
}

/// Per-thread scratch of the backward.
pub(crate) struct BwdWs<T> {
    pub(crate) p: Vec<T>,
    pub(crate) pd: Vec<T>,
    pub(crate) dp: Vec<T>,
    /// The tile's query rows, output-gradient rows and key rows, contiguous, for the
    /// tiled products (`dense_rows`; empty without them).
    pub(crate) qs: Vec<T>,
    pub(crate) dos: Vec<T>,
    pub(crate) ks: Vec<T>,
}

pub(crate) struct BwdIo<'a, T> {
    pub(crate) x: Inputs<'a, T>,
    pub(crate) d_o: &'a [T],
    pub(crate) lse: &'a [T],
    pub(crate) delta: &'a [T],
    pub(crate) dq: SyncPtr<T>,
    pub(crate) dk: SyncPtr<T>,
    pub(crate) dv: SyncPtr<T>,
}

/// One backward task: batch entry `n`, key blocks `c, c + stride, ...`; dK and dV
/// of those blocks are owned by the task, dQ goes to `dq_base` (exclusive to the task).
/// Inputs are read where the forward read them (`g`'s offsets and row strides); the
/// gradients are written as contiguous rows of d / dv elements.
///
/// # Safety
/// `g` must be the geometry of `io`: entry `n`'s q / k / v rows (d or dv elements
/// each, at `q_off + i * q_rs` / `k_off + j * k_rs` / `v_off + j * v_rs`) lie inside
/// `io.x`, its mask rows and columns inside `io.x.mask`, its output-gradient rows
/// (dv elements at `o_off + i * o_rs`) inside `io.d_o`, and `io.lse`, `io.delta` hold
/// `n * l` elements. `dq_base` must point to `l` rows of `d` elements, `dk_base` /
/// `dv_base` to `s` rows of `d` / `dv` elements, rows `grs[0]` / `grs[1]` / `grs[2]`
/// apart, readable and writable; no other task may
/// access the `dq_base` rows, nor the rows of key blocks `chunk, chunk + stride, ...`
/// (`key_block(c)` keys each) of `dk_base` / `dv_base`, while this runs. Each of `ws`'s
/// buffers `p`, `pd`, `dp` must hold `q_block_max(BQ_B) * BK_B` elements, and with `pk`
/// `qs`, `dos`, `ks` `q_block_max(BQ_B) * d`, `q_block_max(BQ_B) * dv`, `BK_B * d`. `pk` must be `None` unless
/// `T` is f32, d and dv are multiples of 16 and the CPU has the features of `M` (a SIMD
/// level, not `NoTiles`), and then hold the panels of `io.x.k` / `io.x.v` (`transposed`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn bwd_task<T: Float, const FMA: bool, M: Tiles>(
    g: &Geo,
    c: &Cfg,
    io: &BwdIo<T>,
    pk: Option<&Transposed>,
    n: usize,
    chunk: usize,
    stride: usize,
    dq_base: *mut T,
    dk_base: *mut T,
    dv_base: *mut T,
    grs: [usize; 3],
    ws: &mut BwdWs<T>,
) {
    let (l, s, d, dvn) = (g.l, g.s, g.d, g.dv);
    let [dq_rs, dk_rs, dv_rs] = grs;
    let (q_rs, k_rs, v_rs, o_rs) = (g.q_rs as isize, g.k_rs as isize, g.v_rs as isize, g.o_rs as isize);
    let x = &io.x;
    let scale = T::of(c.scale);
    let fast = fast_exp::<T>();
    let drop = c.drop_params().map(|(t, inv)| (t, T::of(inv)));
    let bk = key_block(c);
    let nkb = s.div_ceil(bk);
    let BwdWs { p, pd, dp, qs, dos, ks } = ws;
    let mut kb = chunk;
    while kb < nkb {
        let j0 = kb * bk;
        let w = bk.min(s - j0);
        // SAFETY: j0 < s: key row j0 of entry n is inside `x.k` / `x.v` (`g` describes
        // them), and inside the s rows of `dk_base` / `dv_base`.
        let (kp, vp, dkp, dvp) = unsafe {
            (
                x.k.as_ptr().add(g.k_off[n] + j0 * g.k_rs),
                x.v.as_ptr().add(g.v_off[n] + j0 * g.v_rs),
                dk_base.add(j0 * dk_rs),
                dv_base.add(j0 * dv_rs),
            )
        };
        // SAFETY: the w key rows at `kp` (d elements, k_rs apart) are inside `x.k`; `ks`
        // holds BK_B * d >= w * d elements with `pk` (the caller's contract).
        let (kt, kt_rs) = if pk.is_some() { unsafe { dense_rows(kp, g.k_rs, w, d, ks) } } else { (kp, g.k_rs) };
        let mut i0 = if c.causal { (j0 / BQ_B) * BQ_B } else { 0 };
        while i0 < l {
            // As `q_blocks`: a remainder under BQ_B / 2 joins the block before it.
            let rest = l - i0;
            let h = if rest < BQ_B + BQ_B / 2 { rest } else { BQ_B };
            // SAFETY: i0 < l: query row i0 of entry n is inside `x.q`, and its
            // output-gradient row inside `d_o` (`g` describes both).
            let (qp, dop) = unsafe { (x.q.as_ptr().add(g.q_off[n] + i0 * g.q_rs), io.d_o.as_ptr().add(g.o_off[n] + i0 * g.o_rs)) };
            // SAFETY: the h query rows (d elements, q_rs apart) and output-gradient rows
            // (dv, o_rs apart) are inside `x.q` / `d_o`; `qs` / `dos` hold
            // q_block_max(BQ_B) * d / dv >= h rows with `pk` (the caller's contract).
            let ((qt, qt_rs), (dot, dot_rs)) = if pk.is_some() {
                unsafe { (dense_rows(qp, g.q_rs, h, d, qs), dense_rows(dop, g.o_rs, h, dvn, dos)) }
            } else {
                ((qp, g.q_rs), (dop, g.o_rs))
            };
            // Tile rows are `tr` apart: w, or w rounded up to 16 for the tiled products
            // (the K^T / V^T panels are zero past the last key, so the extra columns are 0).
            let tr = if pk.is_some() { w.div_ceil(16) * 16 } else { w };
            // Causal: row r of this tile sees keys below `diag + r + 1`. The tiled products
            // skip score tiles wholly past that diagonal (stored -inf: `prep_row` cuts there
            // anyway) and multiply P and dS, which are zero past it, only over the depths
            // before it (`Depth`): a tile astride the diagonal costs about half.
            let diag = c.causal.then_some(i0 as isize - j0 as isize);
            let (below, from) = diag.map_or((Depth::All, Depth::All), |d| (Depth::Below(d), Depth::From(d)));
            let cut = Epi { mask: std::ptr::null(), m_rs: 0, rmax: std::ptr::null_mut(), lim: w, diag };
            // The keys query row i sees in this tile.
            let row_lim = |i: usize| if c.causal { (i + 1).saturating_sub(j0).min(w) } else { w };
            // SAFETY: S = Q K^T reads the h query rows at `qp` and the w key rows at `kp`
            // (inside `x.q` / `x.k`; with `pk`, key j0's column of entry n's K^T panels,
            // j0 a multiple of the panel width or 0, tr <= sp - j0 columns), and writes the
            // h x tr tile into `p` (q_block_max(BQ_B) x BK_B scratch, tr <= BK_B, disjoint
            // from the inputs). With `pk`, T is f32 on a CPU with `M`'s level.
            unsafe {
                match pk {
                    Some(t) => M::mm(Product {
                        m: h,
                        n: tr,
                        k: d,
                        a: qt as *const f32,
                        a_st: (qt_rs, 1),
                        b: t.kt.as_ptr().add(g.k_idx[n] * d * t.sp + j0 * d),
                        b_rs: t.pw,
                        b_c64: d * t.pw,
                        c: p.as_mut_ptr() as *mut f32,
                        c_rs: tr,
                        add: false,
                        alpha: c.scale as f32,
                        ep: cut,
                        depth: Depth::All,
                    }),
                    None => gemm((h, w, d), p.as_mut_ptr(), w as isize, false, (qp, q_rs, 1), (kp, 1, k_rs), scale, Parallelism::None),
                }
            }
            for r in 0..h {
                let i = i0 + r;
                let row = &mut p[r * tr..r * tr + w];
                let lse_i = io.lse[n * l + i];
                if lse_i == T::INF {
                    row.iter_mut().for_each(|v| *v = T::ZERO);
                    continue;
                }
                let lim = row_lim(i);
                let mrow = x.mask.map(|mk| &mk[g.m_off[n] + i * g.m_rs + j0 * g.m_cs..]);
                prep_row(row, mrow, g.m_cs, lim);
                exp_row_fast::<T, FMA>(row, lse_i, fast);
            }
            // dP = dO V^T (h x w).
            // SAFETY: h rows of dO (inside `d_o`) times the w rows of V (inside `x.v`; with
            // `pk`, entry n's V^T panels from key j0, as K^T above), transposed, into the
            // h x tr tile of the scratch `dp`.
            unsafe {
                match pk {
                    Some(t) => M::mm(Product {
                        m: h,
                        n: tr,
                        k: dvn,
                        a: dot as *const f32,
                        a_st: (dot_rs, 1),
                        b: t.vt.as_ptr().add(g.v_idx[n] * dvn * t.sp + j0 * dvn),
                        b_rs: t.pw,
                        b_c64: dvn * t.pw,
                        c: dp.as_mut_ptr() as *mut f32,
                        c_rs: tr,
                        add: false,
                        alpha: 1.0,
                        ep: cut,
                        depth: Depth::All,
                    }),
                    None => gemm((h, w, dvn), dp.as_mut_ptr(), w as isize, false, (dop, o_rs, 1), (vp, 1, v_rs), T::ONE, Parallelism::None),
                }
            }
            for r in 0..h {
                let i = i0 + r;
                let di = io.delta[n * l + i];
                // Past the causal limit P is 0 and dP may be -inf (the tiles' cut): dS is 0.
                let lim = row_lim(i);
                let prow = &p[r * tr..r * tr + lim];
                let dprow = &mut dp[r * tr..r * tr + w];
                dprow[lim..].iter_mut().for_each(|v| *v = T::ZERO);
                if let Some((thr, inv)) = drop {
                    let pdrow = &mut pd[r * tr..r * tr + w];
                    pdrow[lim..].iter_mut().for_each(|v| *v = T::ZERO);
                    let base = ((n * l + i) * s + j0) as u64;
                    for jj in 0..lim {
                        let f = keep_factor(c.seed, base + jj as u64, thr, inv);
                        pdrow[jj] = prow[jj] * f;
                        dprow[jj] = prow[jj] * (dprow[jj] * f - di);
                    }
                } else {
                    for (dpv, &pv) in dprow.iter_mut().zip(prow) {
                        *dpv = pv * (*dpv - di);
                    }
                }
            }
            let pk_ptr = if drop.is_some() { pd.as_ptr() } else { p.as_ptr() };
            // dV_j += P^T dO ; dK_j += scale dS^T Q ; dQ_i += scale dS K.
            // SAFETY: the sources are the h x w scratch tiles and the input rows above; dV
            // and dK get this task's key rows j0..j0 + w (inside `dk_base` / `dv_base`,
            // owned by the task), dQ the query rows i0..i0 + h of `dq_base` (i0 + h <= l,
            // exclusive to the task). Outputs and sources are distinct buffers. The tiled
            // products read P and dS transposed in place (A's stride along k is tr).
            unsafe {
                if pk.is_some() {
                    let (pa, dsa) = (pk_ptr as *const f32, dp.as_ptr() as *const f32);
                    M::mm(Product {
                        m: w,
                        n: dvn,
                        k: h,
                        a: pa,
                        a_st: (1, tr),
                        b: dot as *const f32,
                        b_rs: dot_rs,
                        b_c64: 64,
                        c: dvp as *mut f32,
                        c_rs: dv_rs,
                        add: true,
                        alpha: 1.0,
                        ep: Epi::NONE,
                        depth: from,
                    });
                    M::mm(Product {
                        m: w,
                        n: d,
                        k: h,
                        a: dsa,
                        a_st: (1, tr),
                        b: qt as *const f32,
                        b_rs: qt_rs,
                        b_c64: 64,
                        c: dkp as *mut f32,
                        c_rs: dk_rs,
                        add: true,
                        alpha: c.scale as f32,
                        ep: Epi::NONE,
                        depth: from,
                    });
                    let dqp = dq_base.add(i0 * dq_rs) as *mut f32;
                    M::mm(Product {
                        m: h,
                        n: d,
                        k: w,
                        a: dsa,
                        a_st: (tr, 1),
                        b: kt as *const f32,
                        b_rs: kt_rs,
                        b_c64: 64,
                        c: dqp,
                        c_rs: dq_rs,
                        add: true,
                        alpha: c.scale as f32,
                        ep: Epi::NONE,
                        depth: below,
                    });
                    i0 += h;
                    continue;
                }
                let pk = pk_ptr;
                gemm((w, dvn, h), dvp, dv_rs as isize, true, (pk, 1, w as isize), (dop, o_rs, 1), T::ONE, Parallelism::None);
                gemm((w, d, h), dkp, dk_rs as isize, true, (dp.as_ptr(), 1, w as isize), (qp, q_rs, 1), scale, Parallelism::None);
                gemm(
                    (h, d, w),
                    dq_base.add(i0 * dq_rs),
                    dq_rs as isize,
                    true,
                    (dp.as_ptr(), w as isize, 1),
                    (kp, k_rs, 1),
                    scale,
                    Parallelism::None,
                );
            }
            i0 += h;
        }
        kb += stride;
    }
}

/// `bwd_task` compiled for AVX-512 (with the tiled f32 products when `pk` is given).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA, and `bwd_task`'s contract must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn bwd_task_avx512<T: Float>(
    g: &Geo,
    c: &Cfg,
    io: &BwdIo<T>,
    pk: Option<&Transposed>,
    n: usize,
    chunk: usize,
    stride: usize,
    dq: *mut T,
    dk: *mut T,
    dv: *mut T,
    grs: [usize; 3],
    ws: &mut BwdWs<T>,
) {
    // SAFETY: the caller upholds `bwd_task`'s contract (and the CPU features `pk` needs).
    unsafe { bwd_task::<T, true, crate::ops::lanes::X16>(g, c, io, pk, n, chunk, stride, dq, dk, dv, grs, ws) }
}

/// `bwd_task` compiled for AVX2+FMA (with the tiled f32 products when `pk` is given).
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `bwd_task`'s contract must hold.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn bwd_task_avx2<T: Float>(
    g: &Geo,
    c: &Cfg,
    io: &BwdIo<T>,
    pk: Option<&Transposed>,
    n: usize,
    chunk: usize,
    stride: usize,
    dq: *mut T,
    dk: *mut T,
    dv: *mut T,
    grs: [usize; 3],
    ws: &mut BwdWs<T>,
) {
    // SAFETY: the caller upholds `bwd_task`'s contract (and the CPU features `pk` needs).
    unsafe { bwd_task::<T, true, crate::ops::lanes::X8>(g, c, io, pk, n, chunk, stride, dq, dk, dv, grs, ws) }
}

/// K^T and V^T panels for the tiled products where they apply: float32, both head
/// dims multiples of 16 (whole vectors of both levels), AVX2 or AVX-512.
fn transposed<T: Float>(g: &Geo, x: &Inputs<T>, simd: Simd) -> Option<Transposed> {
    let fits =
        std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && g.d.is_multiple_of(16) && g.dv.is_multiple_of(16) && g.n * g.l > 0;
    if !fits || !matches!(simd, Simd::Avx512 | Simd::Avx2) {
        return None;
    }
    // SAFETY: T is f32 (the TypeId check above), so these are the same slices, same
    // length, viewed at their own type.
    let (k, v) = unsafe {
        (
            std::slice::from_raw_parts(x.k.as_ptr() as *const f32, x.k.len()),
            std::slice::from_raw_parts(x.v.as_ptr() as *const f32, x.v.len()),
        )
    };
    let (pw, sp) = panel_width(g.s);
    Some(Transposed { kt: panels(k, &g.k_slices, g.k_rs, g.s, g.d), vt: panels(v, &g.v_slices, g.v_rs, g.s, g.dv), sp, pw })
}

/// The `l` rows of `width` elements of each entry `n` (at `off[n] + i * rs` in `src`)
/// as one contiguous `n x l x width` buffer.
fn rows_dense<T: Float>(src: &[T], off: &[usize], rs: usize, l: usize, width: usize) -> Vec<T> {
    let len = off.len() * l * width;
    // Every element is written: entry n's chunk holds its l rows of `width`.
    crate::ops::parallel::filled_plain(len, |out| {
        crate::ops::parallel::for_chunks(out, l * width, crate::ops::parallel::par_ok(len), |n, dst| {
            for (i, row) in dst.chunks_exact_mut(width).enumerate() {
                let at = off[n] + i * rs;
                row.copy_from_slice(&src[at..at + width]);
            }
        });
    })
}

/// Add `full` (n entries of `rows` contiguous rows of `width` elements) into `dst`, entry
/// n's rows at `off[n] + i * rs`, in parallel over distinct targets.
pub(crate) fn scatter_add<T: Float>(dst: &mut [T], full: &[T], off: &[usize], (rows, width, rs): (usize, usize, usize)) {
    let block = rows * width;
    if block == 0 {
        return;
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (n, &o) in off.iter().enumerate() {
        groups.entry(o).or_default().push(n);
    }
    let dp = SyncPtr(dst.as_mut_ptr());
    let groups: Vec<(usize, Vec<usize>)> = groups.into_iter().collect();
    crate::ops::parallel::for_tasks(groups.len(), true, |i| {
        let (o, ns) = (groups[i].0, &groups[i].1);
        for &n in ns {
            for (i, src) in full[n * block..(n + 1) * block].chunks_exact(width).enumerate() {
                // SAFETY: each group has its own offset `o`. The offsets are `Geo`'s starts of
                // an input's per-entry rows inside `dst` (the input's size), row i at
                // `o + i * rs`, and distinct entries' rows are disjoint (the layout of a
                // tensor without overlap): tasks get non-overlapping slices of the buffer
                // borrowed mutably above.
                let tgt = unsafe { std::slice::from_raw_parts_mut(dp.ptr().add(o + i * rs), width) };
                for (a, &b) in tgt.iter_mut().zip(src) {
                    *a += b;
                }
            }
        }
    });
}

/// Gradients of q, k, v (each the size of its input). `g` says where the inputs' rows
/// and the output's and its gradient's rows are (`o` and `d_o` share the output's
/// stored layout); `gc` is where the gradients go: each input's contiguous geometry,
/// or for a transposed head view its (..., L, H, D) order (`gc`'s row strides).
pub(crate) fn backward<T: Float>(g: &Geo, gc: &Geo, c: &Cfg, x: Inputs<T>, o: &[T], d_o: &[T], lse: &[T]) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (n_, l, s, d, dvn) = (g.n, g.l, g.s, g.d, g.dv);
    // delta_i = rowsum(dO * O), with vector partial sums (a running sum was one chain
    // of dependent adds per row: 0.2-0.4 ms of a ViT's or GPT's attention backward).
    let mut delta = vec![T::ZERO; n_ * l];
    if dvn > 0 {
        let fma = crate::ops::cpu::has_avx2_fma();
        crate::ops::parallel::for_chunks(&mut delta, 1024, true, |ci, dch| {
            for (k, dd) in dch.iter_mut().enumerate() {
                let row = ci * 1024 + k;
                let at = g.o_off[row / l] + (row % l) * g.o_rs;
                let (a, b) = (&o[at..at + dvn], &d_o[at..at + dvn]);
                *dd = if fma { super::forward::dot_any::<T, true>(a, b) } else { crate::ops::vector::dot(a, b) };
            }
        });
    }
    let simd = simd_level();
    let packed = transposed(g, &x, simd);
    // The tiled products read query and output-gradient rows contiguous. Where they are
    // not (heads read in place from a fused projection, the output stored (B, L, H, Dv)),
    // they are copied here once, not per tile: every query block meets all the key
    // blocks before it, so a causal GPT's 256 tokens in 64-key blocks copied each query
    // and output-gradient row up to four times (2.5 on average), a non-causal ViT's 65
    // twice (64 keys and 1).
    let dense_q = packed.is_some() && g.q_rs != d && d > 0;
    let dense_o = packed.is_some() && g.o_rs != dvn && dvn > 0;
    let q_rows = if dense_q { rows_dense(x.q, &g.q_off, g.q_rs, l, d) } else { Vec::new() };
    let o_rows = if dense_o { rows_dense(d_o, &g.o_off, g.o_rs, l, dvn) } else { Vec::new() };
    let g_dense;
    let g = if dense_q || dense_o {
        let mut gd = g.clone();
        if dense_q {
            (gd.q_off, gd.q_rs) = ((0..n_).map(|n| n * l * d).collect(), d);
        }
        if dense_o {
            (gd.o_off, gd.o_rs) = ((0..n_).map(|n| n * l * dvn).collect(), dvn);
        }
        g_dense = gd;
        &g_dense
    } else {
        g
    };
    let x = if dense_q { Inputs { q: &q_rows, ..x } } else { x };
    let d_o = if dense_o { &o_rows[..] } else { d_o };
    let threads = crate::ops::pool::num_threads().max(1);
    let nkb = s.div_ceil(key_block(c)).max(1);
    // Key-block chunks per batch entry: enough tasks to fill the threads.
    let chunks = threads.div_ceil(n_.max(1)).min(nkb).max(1);
    // Targets: in place when an input has no broadcasting, else full-size then reduced.
    let mut dq_in = crate::ops::parallel::zeros(gc.q_len);
    let mut dk_in = crate::ops::parallel::zeros(gc.k_len);
    let mut dv_in = crate::ops::parallel::zeros(gc.v_len);
    let mut dq_full = if gc.q_inj && chunks == 1 { Vec::new() } else { vec![T::ZERO; n_ * chunks * l * d] };
    let mut dk_full = if gc.k_inj { Vec::new() } else { vec![T::ZERO; n_ * s * d] };
    let mut dv_full = if gc.v_inj { Vec::new() } else { vec![T::ZERO; n_ * s * dvn] };
    let io = BwdIo {
        x,
        d_o,
        lse,
        delta: &delta,
        dq: SyncPtr(if dq_full.is_empty() { dq_in.as_mut_ptr() } else { dq_full.as_mut_ptr() }),
        dk: SyncPtr(if dk_full.is_empty() { dk_in.as_mut_ptr() } else { dk_full.as_mut_ptr() }),
        dv: SyncPtr(if dv_full.is_empty() { dv_in.as_mut_ptr() } else { dv_full.as_mut_ptr() }),
    };
    let (q_direct, k_direct, v_direct) = (dq_full.is_empty(), dk_full.is_empty(), dv_full.is_empty());
    let pk = packed.as_ref();
    let io_ref = &io;
    crate::ops::parallel::for_tasks_init(
        n_ * chunks,
        true,
        || {
            let n = q_block_max(BQ_B) * BK_B;
            let rows = |w: usize| if pk.is_some() { vec![T::ZERO; w] } else { Vec::new() };
            BwdWs {
                p: vec![T::ZERO; n],
                pd: vec![T::ZERO; n],
                dp: vec![T::ZERO; n],
                qs: rows(q_block_max(BQ_B) * d),
                dos: rows(q_block_max(BQ_B) * dvn),
                ks: rows(BK_B * d),
            }
        },
        |ws, t| {
            let (n, ch) = (t / chunks, t % chunks);
            // SAFETY: `g` is the geometry of `io`, `gc` the contiguous one of the outputs, and `ws` holds q_block_max(BQ_B) x BK_B per
            // buffer. Each task owns its key blocks of dk/dv: chunk `ch` of entry n, inside
            // entry n's slice (`gc`'s `k_off` / `v_off` distinct when direct, else its own
            // s x d block of the full buffer); dq is entry n's slice (direct: one chunk, and
            // distinct `q_off`) or its own l x d block. Each arm runs where `simd_level()`
            // found its features; `pk` is Some only for f32 with d, dv multiples of 16 on
            // AVX2 or AVX-512, made from `io.x` (`transposed`).
            unsafe {
                let dq = if q_direct { io_ref.dq.ptr().add(gc.q_off[n]) } else { io_ref.dq.ptr().add((n * chunks + ch) * l * d) };
                let dk = if k_direct { io_ref.dk.ptr().add(gc.k_off[n]) } else { io_ref.dk.ptr().add(n * s * d) };
                let dv = if v_direct { io_ref.dv.ptr().add(gc.v_off[n]) } else { io_ref.dv.ptr().add(n * s * dvn) };
                let grs = [if q_direct { gc.q_rs } else { d }, if k_direct { gc.k_rs } else { d }, if v_direct { gc.v_rs } else { dvn }];
                match simd {
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx512 => bwd_task_avx512(g, c, io_ref, pk, n, ch, chunks, dq, dk, dv, grs, ws),
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx2 => bwd_task_avx2(g, c, io_ref, pk, n, ch, chunks, dq, dk, dv, grs, ws),
                    _ => bwd_task::<T, false, NoTiles>(g, c, io_ref, None, n, ch, chunks, dq, dk, dv, grs, ws),
                }
            }
        },
    );
    if !dq_full.is_empty() {
        // Sum the chunks of each n into the first, then into the input's layout.
        if chunks > 1 {
            crate::ops::parallel::for_chunks(&mut dq_full, chunks * l * d, true, |_, blk| {
                let (first, rest) = blk.split_at_mut(l * d);
                for part in rest.chunks(l * d) {
                    for (a, &b) in first.iter_mut().zip(part) {
                        *a += b;
                    }
                }
            });
        }
        let offs: Vec<usize> = (0..n_).map(|n| gc.q_off[n]).collect();
        let firsts: Vec<T> = if chunks > 1 {
            dq_full.chunks(chunks * l * d).flat_map(|b| b[..l * d].iter().copied()).collect()
        } else {
            std::mem::take(&mut dq_full)
        };
        scatter_add(&mut dq_in, &firsts, &offs, (l, d, gc.q_rs));
    }
    if !dk_full.is_empty() {
        scatter_add(&mut dk_in, &dk_full, &gc.k_off, (s, d, gc.k_rs));
    }
    if !dv_full.is_empty() {
        scatter_add(&mut dv_in, &dv_full, &gc.v_off, (s, dvn, gc.v_rs));
    }
    (dq_in, dk_in, dv_in)
}
