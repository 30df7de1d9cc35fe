//! Batch norm over dim 1: per-channel statistics in f64, one parallel pass over
//! channels forward and one backward.
use super::*;

/// Channels of a (N, C, S) view: y = (x - mean_c) * rstd_c * w_c + b_c with the
/// statistics given (batch statistics in training, running ones in eval).
pub(crate) struct BatchNorm {
    pub(crate) c: usize,
    pub(crate) s: usize,
    pub(crate) mean: Vec<f64>,
    pub(crate) rstd: Vec<f64>,
    /// Statistics came from this batch (their gradient flows), or are constants.
    pub(crate) batch_stats: bool,
}

pub(crate) fn bn_forward<T: Fl>(x: &[T], w: &[T], b: &[T], op: &BatchNorm) -> Vec<T> {
    let mut out = vec![T::of(0.0); x.len()];
    let (c, s) = (op.c, op.s);
    if s == 0 {
        return out;
    }
    out.par_chunks_mut(s).zip(x.par_chunks(s)).enumerate().for_each(|(nc, (o, xr))| {
        let ch = nc % c;
        let (m, r, wv, bv) = (op.mean[ch], op.rstd[ch], w[ch].f(), b[ch].f());
        for (ov, xv) in o.iter_mut().zip(xr) {
            *ov = T::of((xv.f() - m) * r * wv + bv);
        }
    });
    out
}

impl CustomOp3 for BatchNorm {
    fn name(&self) -> &'static str {
        "batch_norm"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let st = match (s1, s2, s3) {
            (CpuStorage::F32(x), CpuStorage::F32(w), CpuStorage::F32(b)) => {
                CpuStorage::F32(bn_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self))
            }
            (CpuStorage::F64(x), CpuStorage::F64(w), CpuStorage::F64(b)) => {
                CpuStorage::F64(bn_forward(slice(x, l1)?, slice(w, l2)?, slice(b, l3)?, self))
            }
            _ => candle_core::bail!("batch_norm: input, weight and bias must all be float32 or all float64"),
        };
        Ok((st, l1.shape().clone()))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dx, dw, db) = with_slices!(x, w, g, |xs, ws, gs| bn_backward(xs, ws, gs, self));
        Ok((Some(dx), Some(dw), Some(db)))
    }
}

pub(crate) fn bn_backward<T: Fl>(xs: &[T], ws: &[T], gs: &[T], op: &BatchNorm) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (c, s) = (op.c, op.s);
    let n = xs.len().checked_div(c * s).unwrap_or(0);
    let m = (n * s) as f64;
    // Per-channel sums of g and g * x_hat.
    let sums: Vec<(f64, f64)> = (0..c)
        .into_par_iter()
        .map(|ch| {
            let (mut sg, mut sgx) = (0.0, 0.0);
            let (mean, rstd) = (op.mean[ch], op.rstd[ch]);
            for i in 0..n {
                let base = (i * c + ch) * s;
                for k in 0..s {
                    let gv = gs[base + k].f();
                    sg += gv;
                    sgx += gv * (xs[base + k].f() - mean) * rstd;
                }
            }
            (sg, sgx)
        })
        .collect();
    let mut dx = vec![T::of(0.0); xs.len()];
    if s > 0 {
        dx.par_chunks_mut(s).enumerate().for_each(|(nc, dr)| {
            let ch = nc % c;
            let base = nc * s;
            let (mean, r, wv, (sg, sgx)) = (op.mean[ch], op.rstd[ch], ws[ch].f(), sums[ch]);
            for k in 0..s {
                let gv = gs[base + k].f();
                dr[k] = T::of(if op.batch_stats {
                    let xh = (xs[base + k].f() - mean) * r;
                    wv * r * (gv - sg / m - xh * sgx / m)
                } else {
                    wv * r * gv
                });
            }
        });
    }
    (dx, sums.iter().map(|p| T::of(p.1)).collect(), sums.iter().map(|p| T::of(p.0)).collect())
}
