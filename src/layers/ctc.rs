//! Connectionist temporal classification loss (Graves et al. 2006), as PyTorch's
//! `ctc_loss`: the forward (alpha) recursion over the blank-extended target in log
//! space gives each sample's negative log-likelihood; the backward runs the beta
//! recursion too and forms the gradient with respect to the log-probabilities,
//! `exp(lp) - exp(log sum_{s: l'_s = c} alpha_t(s) beta_t(s) + nll - lp)`.
//! One sample per rayon task; the recursions run in f64 whatever the input dtype.
use super::super::ops::storage::data;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

/// The op on log-probabilities (T, N, C): per-sample negative log-likelihoods (N,).
pub(crate) struct CtcLoss {
    /// Each sample's target labels (without blanks).
    pub targets: Vec<Vec<usize>>,
    /// Each sample's number of valid time steps (at most T).
    pub input_lengths: Vec<usize>,
    pub blank: usize,
    /// Infinite losses (impossible alignments) give 0 and a zero gradient.
    pub zero_infinity: bool,
}

#[inline]
fn lse2(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp()).ln()
}

#[inline]
fn lse3(a: f64, b: f64, c: f64) -> f64 {
    let m = a.max(b).max(c);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + ((a - m).exp() + (b - m).exp() + (c - m).exp()).ln()
}

/// One sample's view of the (T, N, C) log-probabilities.
struct Sample<'a> {
    lp: &'a [f64],
    n: usize,
    batch: usize,
    classes: usize,
}

impl Sample<'_> {
    #[inline]
    fn at(&self, t: usize, c: usize) -> f64 {
        self.lp[(t * self.batch + self.n) * self.classes + c]
    }
}

/// The blank-extended target `l'`: blank, l1, blank, l2, ..., blank.
fn extended(target: &[usize], blank: usize) -> Vec<usize> {
    let mut e = vec![blank; 2 * target.len() + 1];
    for (i, &l) in target.iter().enumerate() {
        e[2 * i + 1] = l;
    }
    e
}

/// log alpha, (T_n x S') row-major, and the negative log-likelihood.
fn alphas(x: &Sample<'_>, ext: &[usize], steps: usize) -> (Vec<f64>, f64) {
    let s_len = ext.len();
    let mut a = vec![f64::NEG_INFINITY; steps * s_len];
    if steps == 0 {
        // No frames: only the empty target has an alignment (PyTorch's convention).
        return (a, if s_len == 1 { 0.0 } else { f64::INFINITY });
    }
    a[0] = x.at(0, ext[0]);
    if s_len > 1 {
        a[1] = x.at(0, ext[1]);
    }
    for t in 1..steps {
        let (prev, cur) = a.split_at_mut(t * s_len);
        let prev = &prev[(t - 1) * s_len..];
        for s in 0..s_len {
            let one = if s >= 1 { prev[s - 1] } else { f64::NEG_INFINITY };
            // Skipping a blank is allowed between two different labels.
            let two = if s >= 2 && ext[s] != x_blank(ext) && ext[s] != ext[s - 2] { prev[s - 2] } else { f64::NEG_INFINITY };
            cur[s] = lse3(prev[s], one, two) + x.at(t, ext[s]);
        }
    }
    let last = &a[(steps - 1) * s_len..];
    let ll = if s_len > 1 { lse2(last[s_len - 1], last[s_len - 2]) } else { last[0] };
    (a, -ll)
}

#[inline]
fn x_blank(ext: &[usize]) -> usize {
    ext[0]
}

/// log beta, (T_n x S') row-major.
fn betas(x: &Sample<'_>, ext: &[usize], steps: usize) -> Vec<f64> {
    let s_len = ext.len();
    let mut b = vec![f64::NEG_INFINITY; steps * s_len];
    if steps == 0 {
        return b;
    }
    let t0 = steps - 1;
    b[t0 * s_len + s_len - 1] = x.at(t0, ext[s_len - 1]);
    if s_len > 1 {
        b[t0 * s_len + s_len - 2] = x.at(t0, ext[s_len - 2]);
    }
    for t in (0..t0).rev() {
        let (cur, next) = b.split_at_mut((t + 1) * s_len);
        let cur = &mut cur[t * s_len..];
        for s in 0..s_len {
            let one = if s + 1 < s_len { next[s + 1] } else { f64::NEG_INFINITY };
            let two = if s + 2 < s_len && ext[s] != x_blank(ext) && ext[s + 2] != ext[s] { next[s + 2] } else { f64::NEG_INFINITY };
            cur[s] = lse3(next[s], one, two) + x.at(t, ext[s]);
        }
    }
    b
}

impl CtcLoss {
    fn dims(&self, l: &Layout) -> Result<(usize, usize, usize)> {
        match l.dims() {
            [t, n, c] if *n == self.targets.len() => Ok((*t, *n, *c)),
            d => candle_core::bail!("ctc_loss: expected log_probs (T, {}, C), got {d:?}", self.targets.len()),
        }
    }

    /// Per-sample negative log-likelihoods from the f64 log-probabilities.
    pub(crate) fn nll(&self, lp: &[f64], dims: (usize, usize, usize)) -> Vec<f64> {
        let (_, batch, classes) = dims;
        (0..batch)
            .into_par_iter()
            .map(|n| {
                let x = Sample { lp, n, batch, classes };
                let ext = extended(&self.targets[n], self.blank);
                let (_, nll) = alphas(&x, &ext, self.input_lengths[n]);
                if self.zero_infinity && nll == f64::INFINITY {
                    0.0
                } else {
                    nll
                }
            })
            .collect()
    }

    /// The gradient with respect to the (T, N, C) log-probabilities, given the
    /// gradient `gout` of each sample's loss.
    pub(crate) fn grad(&self, lp: &[f64], dims: (usize, usize, usize), gout: &[f64]) -> Vec<f64> {
        let (steps_max, batch, classes) = dims;
        let per: Vec<Vec<f64>> = (0..batch)
            .into_par_iter()
            .map(|n| {
                let x = Sample { lp, n, batch, classes };
                let steps = self.input_lengths[n];
                let ext = extended(&self.targets[n], self.blank);
                let s_len = ext.len();
                let (a, nll) = alphas(&x, &ext, steps);
                let mut g = vec![0.0; steps_max * classes];
                if self.zero_infinity && nll == f64::INFINITY {
                    return g;
                }
                let b = betas(&x, &ext, steps);
                let mut acc = vec![f64::NEG_INFINITY; classes];
                for t in 0..steps {
                    acc.iter_mut().for_each(|v| *v = f64::NEG_INFINITY);
                    for s in 0..s_len {
                        let c = ext[s];
                        acc[c] = lse2(acc[c], a[t * s_len + s] + b[t * s_len + s]);
                    }
                    for c in 0..classes {
                        let l = x.at(t, c);
                        g[t * classes + c] = (l.exp() - (acc[c] + nll - l).exp()) * gout[n];
                    }
                }
                g
            })
            .collect();
        let mut out = vec![0.0; steps_max * batch * classes];
        for (n, g) in per.iter().enumerate() {
            for t in 0..steps_max {
                let dst = (t * batch + n) * classes;
                out[dst..dst + classes].copy_from_slice(&g[t * classes..(t + 1) * classes]);
            }
        }
        out
    }
}

fn widen(s: &CpuStorage, l: &Layout) -> Result<Vec<f64>> {
    match s {
        CpuStorage::F32(v) => Ok(data(v, l, "ctc_loss")?.iter().map(|&x| x as f64).collect()),
        CpuStorage::F64(v) => Ok(data(v, l, "ctc_loss")?.to_vec()),
        _ => candle_core::bail!("ctc_loss: expected float32 or float64 log_probs"),
    }
}

impl CustomOp1 for CtcLoss {
    fn name(&self) -> &'static str {
        "ctc_loss"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let dims = self.dims(l)?;
        let nll = self.nll(&widen(s, l)?, dims);
        let out = match s {
            CpuStorage::F32(_) => CpuStorage::F32(nll.iter().map(|&v| v as f32).collect()),
            _ => CpuStorage::F64(nll),
        };
        Ok((out, Shape::from(dims.1)))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let dims = arg.dims3()?;
        let lp = arg.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        let gout = grad.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        let g = self.grad(&lp, dims, &gout);
        Ok(Some(Tensor::from_vec(g, dims, arg.device())?.to_dtype(arg.dtype())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One frame, one class besides blank: P(target "1") is p(1) at the only frame.
    #[test]
    fn single_frame_single_label() {
        let op = CtcLoss { targets: vec![vec![1]], input_lengths: vec![1], blank: 0, zero_infinity: false };
        let lp = [0.25f64.ln(), 0.75f64.ln()];
        let nll = op.nll(&lp, (1, 1, 2));
        assert!((nll[0] - (-(0.75f64).ln())).abs() < 1e-12);
        // d(-log p1)/d lp = softmax-free form: exp(lp) - [c == 1].
        let g = op.grad(&lp, (1, 1, 2), &[1.0]);
        assert!((g[0] - 0.25).abs() < 1e-12 && (g[1] - (0.75 - 1.0)).abs() < 1e-12);
    }

    /// A repeated label needs a blank between: with two frames "11" is impossible.
    #[test]
    fn repeated_label_needs_blank() {
        let op = CtcLoss { targets: vec![vec![1, 1]], input_lengths: vec![2], blank: 0, zero_infinity: false };
        let lp = [0.5f64.ln(); 4];
        assert_eq!(op.nll(&lp, (2, 1, 2))[0], f64::INFINITY);
        let zi = CtcLoss { zero_infinity: true, ..op };
        assert_eq!(zi.nll(&lp, (2, 1, 2))[0], 0.0);
        assert!(zi.grad(&lp, (2, 1, 2), &[1.0]).iter().all(|&g| g == 0.0));
    }
}
