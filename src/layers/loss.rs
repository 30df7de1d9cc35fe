//! Cross-entropy from logits with class-index targets as one op with a one-pass
//! backward (`_core._cross_entropy`). Built from tensor ops it is a dozen small ops
//! and graph nodes, which cost more than the layers of a small network; here it is
//! one pass over the logits forward and one backward.
//!
//! PyTorch's formulas: `logp = log_softmax(x)`, per row `nll = -w[t] * logp[t]` and,
//! with label smoothing `ls`, `smooth = -sum_c w[c] * logp[c]`, combined as
//! `(1 - ls) * nll + ls / C * smooth`; rows whose target is `ignore_index` count 0;
//! "mean" divides by the sum of `w[t]` over the counted rows.
use crate::ops::float::Float;
use crate::ops::parallel::{for_chunks, par_ok};
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Reduction {
    None,
    Sum,
    Mean,
}

/// What the loss needs besides the logits; shared by the op and its backward.
pub(crate) struct Spec {
    pub(crate) n: usize,
    pub(crate) c: usize,
    /// Target class per row, `None` for an ignored row.
    pub(crate) target: Vec<Option<usize>>,
    pub(crate) weight: Option<Vec<f64>>,
    pub(crate) reduction: Reduction,
    pub(crate) smoothing: f64,
}

impl Spec {
    fn w(&self, k: usize) -> f64 {
        self.weight.as_ref().map_or(1.0, |w| w[k])
    }
    /// Sum of the target weights of the counted rows: "mean"'s divisor.
    fn denom(&self) -> f64 {
        self.target.iter().flatten().map(|&t| self.w(t)).sum()
    }
}

/// Row `i`'s max and log of the sum of `exp(x - max)`.
pub(crate) fn row_stats<T: Float + Into<f64>>(row: &[T]) -> (f64, f64) {
    let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v.into()));
    let sum: f64 = row.iter().map(|&v| (v.into() - max).exp()).sum();
    (max, sum.ln())
}

/// Rows per parallel task.
pub(crate) fn rows_per_task(c: usize) -> usize {
    ((1 << 14) / c.max(1)).max(1)
}

pub(crate) fn forward<T: Float + Into<f64>>(x: &[T], s: &Spec) -> Vec<T> {
    let mut per = vec![0.0f64; s.n];
    let rows = rows_per_task(s.c);
    for_chunks(&mut per, rows, par_ok(x.len()), |ci, out| {
        for (j, o) in out.iter_mut().enumerate() {
            let i = ci * rows + j;
            *o = row_loss(&x[i * s.c..(i + 1) * s.c], i, s);
        }
    });
    match s.reduction {
        Reduction::None => per.into_iter().map(T::of).collect(),
        Reduction::Sum => vec![T::of(per.iter().sum())],
        Reduction::Mean => vec![T::of(per.iter().sum::<f64>() / s.denom())],
    }
}

/// Row `i`'s loss (0 for an ignored row).
pub(crate) fn row_loss<T: Float + Into<f64>>(row: &[T], i: usize, s: &Spec) -> f64 {
    let Some(t) = s.target[i] else { return 0.0 };
    let (max, lse) = row_stats(row);
    let logp = |k: usize| row[k].into() - max - lse;
    let mut loss = -s.w(t) * logp(t) * (1.0 - s.smoothing);
    if s.smoothing > 0.0 {
        let smooth: f64 = match &s.weight {
            Some(w) => -(0..s.c).map(|k| w[k] * logp(k)).sum::<f64>(),
            None => -(0..s.c).map(logp).sum::<f64>(),
        };
        loss += smooth * s.smoothing / s.c as f64;
    }
    loss
}

/// d loss / d x for upstream gradient `g` (one value, or one per row for "none"):
/// `scale * [(1 - ls) * w[t] * (p - onehot(t)) + ls / C * (p * sum(w) - w)]`.
pub(crate) fn backward<T: Float + Into<f64>>(x: &[T], g: &[T], s: &Spec) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    let wsum: f64 = s.weight.as_ref().map_or(s.c as f64, |w| w.iter().sum());
    let scale0 = match s.reduction {
        Reduction::Mean => g[0].into() / s.denom(),
        _ => g[0].into(),
    };
    let rows = rows_per_task(s.c);
    for_chunks(&mut out, rows * s.c, par_ok(x.len()), |ci, block| {
        for (j, d) in block.chunks_exact_mut(s.c).enumerate() {
            let i = ci * rows + j;
            let Some(t) = s.target[i] else { continue };
            let row = &x[i * s.c..(i + 1) * s.c];
            let scale = if s.reduction == Reduction::None { g[i].into() } else { scale0 };
            let (max, lse) = row_stats(row);
            let (wt, ls) = (s.w(t) * (1.0 - s.smoothing), s.smoothing);
            for (k, (dv, &xv)) in d.iter_mut().zip(row).enumerate() {
                let p = (xv.into() - max - lse).exp();
                let mut v = wt * (p - if k == t { 1.0 } else { 0.0 });
                if ls > 0.0 {
                    v += ls / s.c as f64 * (p * wsum - s.w(k));
                }
                *dv = T::of(scale * v);
            }
        }
    });
    out
}

pub(crate) struct CrossEntropy(pub(crate) Arc<Spec>);
pub(crate) struct CrossEntropyGrad(pub(crate) Arc<Spec>);

impl CustomOp1 for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }
    fn cpu_fwd(&self, st: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match st {
            CpuStorage::F32(v) => CpuStorage::F32(forward(crate::ops::storage::data(v, l, "cross_entropy")?, &self.0)),
            CpuStorage::F64(v) => CpuStorage::F64(forward(crate::ops::storage::data(v, l, "cross_entropy")?, &self.0)),
            _ => candle_core::bail!("cross_entropy: only float32 and float64 logits are supported"),
        };
        let shape = if self.0.reduction == Reduction::None { Shape::from(self.0.n) } else { Shape::from(()) };
        Ok((out, shape))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(&grad.contiguous()?, &CrossEntropyGrad(self.0.clone()))?))
    }
}

impl CustomOp2 for CrossEntropyGrad {
    fn name(&self) -> &'static str {
        "cross_entropy_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => CpuStorage::F32(backward(
                crate::ops::storage::data(x, l1, "cross_entropy")?,
                crate::ops::storage::data(g, l2, "cross_entropy")?,
                &self.0,
            )),
            (CpuStorage::F64(x), CpuStorage::F64(g)) => CpuStorage::F64(backward(
                crate::ops::storage::data(x, l1, "cross_entropy")?,
                crate::ops::storage::data(g, l2, "cross_entropy")?,
                &self.0,
            )),
            _ => candle_core::bail!("cross_entropy: only float32 and float64 logits are supported"),
        };
        Ok((out, l1.shape().clone()))
    }
}
