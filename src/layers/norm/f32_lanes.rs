//! The f32 inner loops of the norms, written once over `ops::lanes` (AVX-512 and
//! AVX2): layer norm's rows forward and backward, group norm's moments, batch and
//! group norm's gradient sums. They compute in f32 lanes, as PyTorch's vectorized
//! float kernels do, and fold their sums in f64.
//!
//! Why: the generic loops (`layer_norm::ln_rows`, `ln_bwd_rows`, `batch_norm::
//! grad_sums`) widen every value to f64 or keep their accumulator arrays half in
//! memory; these kernels existed for AVX-512 alone, so on an AVX2 CPU a ViT's
//! LayerNorm(192) forward+backward on 2080 rows took 1.9x torch's time.
use crate::ops::lanes::{fold, run_at_cpu, tail_mask, Kernel, Lanes};

/// Rows of layer norm's f32 partial `dw` / `db` sums between their folds into the f64
/// totals: few enough that f32 rounding stays at PyTorch's level, many enough that
/// the fold is a small part of the pass.
const FOLD_ROWS: usize = 32;

/// Mean and biased variance of the `d` floats at `p`: the sum, then the sum of squared
/// deviations from the (f32) mean, both in f32 lanes.
///
/// # Safety
/// As `fold`.
#[inline(always)]
unsafe fn moments_at<V: Lanes>(p: *const f32, d: usize) -> (f64, f64) {
    // SAFETY: the caller's.
    unsafe {
        let mean = fold::<V, false>(p, d, V::zero()) / d as f64;
        let var = fold::<V, true>(p, d, V::splat(mean as f32)) / d as f64;
        (mean, var)
    }
}

/// Layer norm's rows forward: `out = (x - mean) * rstd * w + b` per row of `d`, and
/// each row's (mean, rstd) into `stats` (one entry per row).
pub(super) struct LnRows<'a> {
    pub(super) x: &'a [f32],
    pub(super) w: &'a [f32],
    pub(super) b: &'a [f32],
    pub(super) out: &'a mut [f32],
    pub(super) stats: &'a mut [(f64, f64)],
    pub(super) d: usize,
    pub(super) eps: f64,
}

impl Kernel for LnRows<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let LnRows { x, w, b, out, stats, d, eps } = self;
        let rows = stats.len();
        assert!(x.len() >= rows * d && out.len() >= rows * d && w.len() >= d && b.len() >= d, "layer_norm: row buffers");
        let (l, full) = (V::LANES, d / V::LANES * V::LANES);
        // SAFETY: row r of `x` / `out` spans d floats from r * d (asserted); the whole
        // vectors run at i + l <= full <= d, the masked ones read and write only the
        // tail; `w` and `b` hold d floats; the caller's level.
        unsafe {
            let tail = tail_mask::<V>(d);
            let (wp, bp) = (w.as_ptr(), b.as_ptr());
            for (r, st) in stats.iter_mut().enumerate() {
                let (xr, o) = (x.as_ptr().add(r * d), out.as_mut_ptr().add(r * d));
                let (mean, var) = moments_at::<V>(xr, d);
                let rstd = 1.0 / (var + eps).sqrt();
                let (mv, rs) = (V::splat(mean as f32), V::splat(rstd as f32));
                let mut i = 0;
                while i < full {
                    let y = V::load(xr.add(i)).sub(mv).mul(rs).fmadd(V::load(wp.add(i)), V::load(bp.add(i)));
                    y.store(o.add(i));
                    i += l;
                }
                if d > full {
                    let (x, w, b) = (V::load_mask(xr.add(full), tail), V::load_mask(wp.add(full), tail), V::load_mask(bp.add(full), tail));
                    x.sub(mv).mul(rs).fmadd(w, b).store_masked(o.add(full), (1u32 << (d - full)) - 1);
                }
                *st = (mean, rstd);
            }
        }
    }
}

/// Layer norm's rows backward: `dx` per row, and the rows' sums of `g * xhat` and `g`
/// added into `dw` and `db` (f64, `d` each).
pub(super) struct LnBwdRows<'a> {
    pub(super) x: &'a [f32],
    pub(super) g: &'a [f32],
    pub(super) w: &'a [f32],
    pub(super) stats: &'a [(f64, f64)],
    pub(super) dx: &'a mut [f32],
    pub(super) dw: &'a mut [f64],
    pub(super) db: &'a mut [f64],
    pub(super) d: usize,
}

impl Kernel for LnBwdRows<'_> {
    type Out = ();
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) {
        let LnBwdRows { x, g, w, stats, dx, dw, db, d } = self;
        let n = stats.len() * d;
        assert!(x.len() >= n && g.len() >= n && dx.len() >= n && w.len() >= d && dw.len() >= d && db.len() >= d, "layer_norm: row buffers");
        let (l, full) = (V::LANES, d / V::LANES * V::LANES);
        let tail_bits = (1u32 << (d - full)) - 1;
        // f32 partials of dw / db, folded into the f64 totals every FOLD_ROWS rows.
        let (mut pw, mut pb) = (vec![0f32; d], vec![0f32; d]);
        // SAFETY: row r of `x` / `g` / `dx` spans d floats from r * d (asserted); the
        // whole vectors run at i + l <= full <= d, the masked ones touch only the tail;
        // `w`, `pw`, `pb` hold d floats; the caller's level.
        unsafe {
            let tail = tail_mask::<V>(d);
            let (wp, pwp, pbp) = (w.as_ptr(), pw.as_mut_ptr(), pb.as_mut_ptr());
            for (r, &(mean, rstd)) in stats.iter().enumerate() {
                let (xr, gr, o) = (x.as_ptr().add(r * d), g.as_ptr().add(r * d), dx.as_mut_ptr().add(r * d));
                let (mv, rv) = (V::splat(mean as f32), V::splat(rstd as f32));
                // Sums of g * w and g * w * xhat in two accumulators each; the dw / db
                // partials updated on the way.
                let (mut s1, mut s2) = ([V::zero(); 2], [V::zero(); 2]);
                let mut i = 0;
                while i + 2 * l <= full {
                    for k in 0..2 {
                        let j = i + k * l;
                        let (xh, gw) = bwd_step::<V>((xr, gr, wp, pwp, pbp), j, None, (mv, rv));
                        s1[k] = s1[k].add(gw);
                        s2[k] = gw.fmadd(xh, s2[k]);
                    }
                    i += 2 * l;
                }
                if i < full {
                    let (xh, gw) = bwd_step::<V>((xr, gr, wp, pwp, pbp), i, None, (mv, rv));
                    s1[0] = s1[0].add(gw);
                    s2[0] = gw.fmadd(xh, s2[0]);
                }
                if d > full {
                    let (xh, gw) = bwd_step::<V>((xr, gr, wp, pwp, pbp), full, Some((tail, tail_bits)), (mv, rv));
                    s1[1] = s1[1].add(gw);
                    s2[1] = gw.fmadd(xh, s2[1]);
                }
                let m1 = V::splat((s1[0].add(s1[1]).sum_f64() / d as f64) as f32);
                let m2 = V::splat((s2[0].add(s2[1]).sum_f64() / d as f64) as f32);
                // dx = rstd * (g * w - m1 - xhat * m2).
                let mut i = 0;
                while i < full {
                    let (x, g, w) = (V::load(xr.add(i)), V::load(gr.add(i)), V::load(wp.add(i)));
                    x.sub(mv).mul(rv).fnmadd(m2, g.mul(w).sub(m1)).mul(rv).store(o.add(i));
                    i += l;
                }
                if d > full {
                    let (x, g, w) = (V::load_mask(xr.add(full), tail), V::load_mask(gr.add(full), tail), V::load_mask(wp.add(full), tail));
                    x.sub(mv).mul(rv).fnmadd(m2, g.mul(w).sub(m1)).mul(rv).store_masked(o.add(full), tail_bits);
                }
                if (r + 1) % FOLD_ROWS == 0 || r + 1 == stats.len() {
                    for j in 0..d {
                        dw[j] += std::mem::take(&mut pw[j]) as f64;
                        db[j] += std::mem::take(&mut pb[j]) as f64;
                    }
                }
            }
        }
    }
}

/// The vector at `p`, or with a mask its selected lanes (the others 0).
///
/// # Safety
/// The CPU has `V`'s features; `p` holds `LANES` floats (the selected ones with a mask).
#[inline(always)]
unsafe fn load_at<V: Lanes>(p: *const f32, mask: Option<V::Mask>) -> V {
    // SAFETY: the caller's.
    unsafe {
        match mask {
            Some(m) => V::load_mask(p, m),
            None => V::load(p),
        }
    }
}

/// One vector of a layer-norm backward row at `i` (`(x, g, w, dw partial, db partial)`
/// pointers; `mask`: the tail's, whose lanes past the row load as zeros, so add
/// nothing): `(xhat, g * w)`, with `g * xhat` and `g` added into the partials.
///
/// # Safety
/// The CPU has `V`'s features; the pointers hold `i + LANES` floats (only the masked
/// lanes with `mask`).
#[inline(always)]
unsafe fn bwd_step<V: Lanes>(
    (x, g, w, pw, pb): (*const f32, *const f32, *const f32, *mut f32, *mut f32),
    i: usize,
    mask: Option<(V::Mask, u32)>,
    (mv, rv): (V, V),
) -> (V, V) {
    // SAFETY: the caller's.
    unsafe {
        let m = mask.map(|(m, _)| m);
        let (xv, gv, wv) = (load_at::<V>(x.add(i), m), load_at::<V>(g.add(i), m), load_at::<V>(w.add(i), m));
        let (pwv, pbv) = (load_at::<V>(pw.add(i), m), load_at::<V>(pb.add(i), m));
        let xh = xv.sub(mv).mul(rv);
        let (nw, nb) = (gv.fmadd(xh, pwv), pbv.add(gv));
        match mask {
            Some((_, bits)) => {
                nw.store_masked(pw.add(i), bits);
                nb.store_masked(pb.add(i), bits);
            }
            None => {
                nw.store(pw.add(i));
                nb.store(pb.add(i));
            }
        }
        (xh, gv.mul(wv))
    }
}

/// Mean and biased variance of a long f32 run (a group-norm group) in one pass over
/// memory: each block of 4096 (in L1 after its first read) gets its own two-pass
/// moments, and the blocks are merged in f64 by Chan's formula. (Two passes over the
/// whole group read it twice from L2/L3: GroupNorm(8, 64) on 8x64x56x56 ran its
/// forward in 1.08-1.14x torch's time so, 0.88-0.99x with one, on AVX-512.)
struct Moments<'a>(&'a [f32]);

impl Kernel for Moments<'_> {
    type Out = (f64, f64);
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) -> (f64, f64) {
        let (mut n, mut mean, mut m2) = (0.0f64, 0.0f64, 0.0f64);
        for blk in self.0.chunks(4096) {
            // SAFETY: `blk` holds its len() floats; the caller's level.
            let (mb, vb) = unsafe { moments_at::<V>(blk.as_ptr(), blk.len()) };
            let (nb, tot) = (blk.len() as f64, n + blk.len() as f64);
            let delta = mb - mean;
            mean += delta * nb / tot;
            m2 += vb * nb + delta * delta * n * nb / tot;
            n = tot;
        }
        (mean, m2 / n.max(1.0))
    }
}

/// `Moments` at the CPU's level; None without AVX2.
pub(super) fn moments_f32(x: &[f32]) -> Option<(f64, f64)> {
    // SAFETY: `Moments` has no contract beyond the level.
    unsafe { run_at_cpu(Moments(x)) }
}

/// Sums of `g` and of `g * (x - mean)` over a run (a batch-norm or group-norm channel
/// row), 4 accumulators of each.
struct GradSums<'a>(&'a [f32], &'a [f32], f64);

impl Kernel for GradSums<'_> {
    type Out = (f64, f64);
    #[inline(always)]
    unsafe fn body<V: Lanes>(self) -> (f64, f64) {
        let GradSums(x, g, mean) = self;
        assert!(g.len() >= x.len(), "grad_sums: g shorter than x");
        let (l, m) = (V::LANES, mean as f32);
        let n = x.len() / (4 * l) * (4 * l);
        // SAFETY: every vector load reads at i + k * l + l <= n <= x.len() <= g.len();
        // the caller's level.
        let (sa, sb) = unsafe {
            let (xp, gp, mv) = (x.as_ptr(), g.as_ptr(), V::splat(m));
            let (mut a, mut b) = ([V::zero(); 4], [V::zero(); 4]);
            let mut i = 0;
            while i < n {
                for k in 0..4 {
                    let gv = V::load(gp.add(i + k * l));
                    a[k] = a[k].add(gv);
                    b[k] = gv.fmadd(V::load(xp.add(i + k * l)).sub(mv), b[k]);
                }
                i += 4 * l;
            }
            (a[0].add(a[1]).add(a[2].add(a[3])).sum_f64(), b[0].add(b[1]).add(b[2].add(b[3])).sum_f64())
        };
        let (mut sa, mut sb) = (sa, sb);
        for (&xv, &gv) in x[n..].iter().zip(&g[n..]) {
            sa += gv as f64;
            sb += (gv * (xv - m)) as f64;
        }
        (sa, sb)
    }
}

/// `GradSums` at the CPU's level; None without AVX2.
pub(super) fn grad_sums_f32(x: &[f32], g: &[f32], mean: f64) -> Option<(f64, f64)> {
    // SAFETY: `GradSums` checks its lengths (assert).
    unsafe { run_at_cpu(GradSums(x, g, mean)) }
}

/// `LnRows` at the CPU's level; false without AVX2.
pub(super) fn ln_rows_f32(k: LnRows<'_>) -> bool {
    // SAFETY: `LnRows` checks its lengths (assert).
    unsafe { run_at_cpu(k) }.is_some()
}

/// `LnBwdRows` at the CPU's level; false without AVX2.
pub(super) fn ln_bwd_rows_f32(k: LnBwdRows<'_>) -> bool {
    // SAFETY: `LnBwdRows` checks its lengths (assert).
    unsafe { run_at_cpu(k) }.is_some()
}
