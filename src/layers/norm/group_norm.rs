//! Group norm over (N, C, S): the C / G channels of each group of each sample share
//! statistics; the per-channel scale and shift are folded into one pass forward, and
//! the backward computes dx, dw and db from per-(sample, channel) row sums.
use super::batch_norm::{dx_row_fast, grad_sums_fast, scale_shift_fast};
use super::layer_norm::moments;
use super::*;

pub(crate) struct GroupNorm {
    pub(crate) groups: usize,
    pub(crate) c: usize,
    pub(crate) s: usize,
    pub(crate) eps: f64,
    /// Per-(sample, group) (mean, rstd) from the forward, for the backward.
    pub(crate) stats: Mutex<Vec<(f64, f64)>>,
}

impl GroupNorm {
    fn forward<T: Fl>(&self, x: &[T], w: &[T], b: &[T]) -> Vec<T> {
        let (g, c, s) = (self.groups, self.c, self.s);
        let m = c / g * s;
        if m == 0 {
            return vec![T::ZERO; x.len()];
        }
        let mut stats = Vec::new();
        // Every group's rows are written whole by `scale_shift_fast`: no zero fill.
        let out = crate::ops::parallel::filled_plain(x.len(), |out| {
            let par = crate::ops::parallel::par_ok(x.len());
            stats = crate::ops::parallel::map_chunks(out, m, par, |ng, o| {
                let xg = &x[ng * m..(ng + 1) * m];
                let (mean, var) = moments_fast(xg);
                let rstd = 1.0 / (var + self.eps).sqrt();
                let c0 = (ng % g) * (c / g);
                for (k, (or, xr)) in o.chunks_mut(s.max(1)).zip(xg.chunks(s.max(1))).enumerate() {
                    scale_shift_fast(xr, or, mean, rstd * w[c0 + k].f(), b[c0 + k].f());
                }
                (mean, rstd)
            });
        });
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = stats;
        out
    }

    fn backward<T: Fl>(&self, x: &[T], w: &[T], gy: &[T]) -> (Vec<T>, Vec<T>, Vec<T>) {
        let (g, c, s) = (self.groups, self.c, self.s);
        let cg = c / g;
        let stats = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if s == 0 || cg == 0 {
            return (vec![T::ZERO; x.len()], vec![T::ZERO; c], vec![T::ZERO; c]);
        }
        let mf = (cg * s) as f64;
        // One task per (sample, group): its channels' row sums, then its dx rows,
        // while the group's x and g are still in this core's cache. Every row of
        // every group is written by `dx_row_fast`: no zero fill.
        let mut groups: Vec<Vec<(f64, f64)>> = Vec::new();
        let dx = crate::ops::parallel::filled_plain(x.len(), |dx| {
            let par = crate::ops::parallel::par_ok(x.len());
            groups = crate::ops::parallel::map_chunks(dx, cg * s, par, |ng, dg| {
                let (mean, rstd) = stats[ng];
                let c0 = (ng % g) * cg;
                let base = ng * cg * s;
                let row = |k: usize| base + k * s..base + (k + 1) * s;
                // Per channel: sum g and sum g * (x - mean) over the spatial row.
                let rows: Vec<(f64, f64)> = (0..cg).map(|k| grad_sums_fast(&x[row(k)], &gy[row(k)], mean)).collect();
                // Over the group: sum dxhat = sum w g, sum dxhat * xhat = rstd * sum w g (x - mean).
                let (mut s1, mut s2) = (0.0, 0.0);
                for (k, &(a, b)) in rows.iter().enumerate() {
                    s1 += w[c0 + k].f() * a;
                    s2 += w[c0 + k].f() * b * rstd;
                }
                let (m1, m2) = (s1 / mf, s2 / mf);
                for (k, dr) in dg.chunks_mut(s).enumerate() {
                    // rstd (w g - m1 - xhat m2) as a * g + b * (x - mean) + c.
                    let a = rstd * w[c0 + k].f();
                    let bx = -rstd * rstd * m2;
                    dx_row_fast(&x[row(k)], &gy[row(k)], dr, a, bx, mean, -rstd * m1);
                }
                rows
            });
        });
        let rows: Vec<(f64, f64)> = groups.into_iter().flatten().collect();
        let (mut dw, mut db) = (vec![0.0f64; c], vec![0.0f64; c]);
        for (nc, &(a, b)) in rows.iter().enumerate() {
            let ch = nc % c;
            let (_, rstd) = stats[(nc / c) * g + ch / cg];
            dw[ch] += b * rstd;
            db[ch] += a;
        }
        (dx, dw.into_iter().map(T::of).collect(), db.into_iter().map(T::of).collect())
    }
}

/// `moments` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn moments_avx512<T: Fl>(xg: &[T]) -> (f64, f64) {
    moments(xg)
}

/// `moments` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn moments_avx2<T: Fl>(xg: &[T]) -> (f64, f64) {
    moments(xg)
}

/// `moments` at the CPU's vector width.
fn moments_fast<T: Fl>(xg: &[T]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(m) = crate::ops::float::as_f32(xg).and_then(super::f32_lanes::moments_f32) {
            return m;
        }
        if crate::ops::cpu::has_avx512() {
            // SAFETY: checked just above.
            return unsafe { moments_avx512(xg) };
        }
        if crate::ops::cpu::has_avx2_fma() {
            // SAFETY: checked just above.
            return unsafe { moments_avx2(xg) };
        }
    }
    moments(xg)
}

norm_op3!(GroupNorm, "group_norm", |me, x, w, b| me.forward(x, w, b), |xs, ws, gs| me.backward(xs, ws, gs));
