//! Cross-entropy from logits with class-index targets as one op with a one-pass
//! backward (`_core._cross_entropy` on the CPU), and the same loss from tensor ops
//! (`nll_rows`, `soft_target_loss`) for other devices and for `F.nll_loss`. Built
//! from tensor ops it is a dozen small ops
//! and graph nodes, which cost more than the layers of a small network; here it is
//! one pass over the logits forward and one backward.
//!
//! PyTorch's formulas: `logp = log_softmax(x)`, per row `nll = -w[t] * logp[t]` and,
//! with label smoothing `ls`, `smooth = -sum_c w[c] * logp[c]`, combined as
//! `(1 - ls) * nll + ls / C * smooth`; rows whose target is `ignore_index` count 0;
//! "mean" divides by the sum of `w[t]` over the counted rows.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
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
/// The max and the sum of exponentials run in the element type, 8 lanes at a time
/// (AVX2 where the CPU has it; f32's exp is `approx::fast_exp`), as PyTorch's
/// vectorized log-softmax; libm's f64 exp per element took most of the loss's time.
pub(crate) fn row_stats<T: Float + Into<f64>>(row: &[T]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if crate::ops::cpu::has_avx2_fma() {
        // SAFETY: checked just above.
        return unsafe { row_stats_avx2(row) };
    }
    row_stats_lanes(row)
}

/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_stats_avx2<T: Float + Into<f64>>(row: &[T]) -> (f64, f64) {
    row_stats_lanes(row)
}

#[inline(always)]
fn row_stats_lanes<T: Float + Into<f64>>(row: &[T]) -> (f64, f64) {
    const L: usize = 8;
    let n8 = row.len() / L * L;
    let mut m = [T::NEG_INF; L];
    for c in row[..n8].chunks_exact(L) {
        for l in 0..L {
            m[l] = m[l].maximum(c[l]);
        }
    }
    let max = m.iter().chain(&row[n8..]).fold(T::NEG_INF, |a, &b| a.maximum(b));
    if max == T::NEG_INF || max.is_nan() {
        // All -inf (or a NaN): the f64 formula's own result (NaN or -inf), no shortcut.
        let mf: f64 = max.into();
        let sum: f64 = row.iter().map(|&v| (v.into() - mf).exp()).sum();
        return (mf, sum.ln());
    }
    let mut acc = [T::ZERO; L];
    for c in row[..n8].chunks_exact(L) {
        for l in 0..L {
            acc[l] += (c[l] - max).exp::<false>();
        }
    }
    let sum = acc.iter().map(|&v| v.into()).sum::<f64>() + row[n8..].iter().map(|&v| (v - max).exp::<false>().into()).sum::<f64>();
    (max.into(), sum.ln())
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

/// `d = k * exp(x - shift)` over a row (AVX2 where the CPU has it).
fn probs_scaled<T: Float>(x: &[T], d: &mut [T], shift: T, k: T) {
    #[inline(always)]
    fn run<T: Float>(x: &[T], d: &mut [T], shift: T, k: T) {
        for (dv, &xv) in d.iter_mut().zip(x) {
            *dv = k * (xv - shift).exp::<false>();
        }
    }
    /// # Safety
    /// The CPU must support AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2<T: Float>(x: &[T], d: &mut [T], shift: T, k: T) {
        run(x, d, shift, k)
    }
    #[cfg(target_arch = "x86_64")]
    if crate::ops::cpu::has_avx2_fma() {
        // SAFETY: checked just above.
        return unsafe { run_avx2(x, d, shift, k) };
    }
    run(x, d, shift, k)
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
            if ls == 0.0 {
                // scale * wt * (p - onehot(t)), p = exp(x - max - lse) in the element type.
                probs_scaled(row, d, T::of(max + lse), T::of(scale * wt));
                d[t] = T::of(scale * wt * ((row[t].into() - max - lse).exp() - 1.0));
                continue;
            }
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
        Ok(Some(x.apply_op2_no_bwd(&grad.dense()?, &CrossEntropyGrad(self.0.clone()))?))
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

/// (N, C, d1, ...) -> (N * d1 * ..., C); (C,) -> (1, C); (N, C) unchanged: the class
/// dimension last, one row per prediction (differentiable).
pub(crate) fn class_rows(x: &Tensor) -> Result<Tensor> {
    match x.rank() {
        1 => x.unsqueeze(0),
        2 => Ok(x.clone()),
        r => {
            let c = x.dims()[1];
            let mut order: Vec<usize> = vec![0];
            order.extend(2..r);
            order.push(1);
            x.permute(order)?.reshape(((), c))
        }
    }
}

/// The loss from log-probabilities `logp` (rows x C) with class-index targets, built
/// from tensor ops so that it runs on every device and dtype: per row
/// `-(1 - ls) * w[t] * logp[t] - ls / C * sum_c w[c] * logp[c]` (0 for ignored rows),
/// reduced as the fused op does. `out` is the shape of "none"'s result.
pub(crate) fn nll_rows(logp: &Tensor, s: &Spec, weight: Option<&Tensor>, out: &[usize]) -> Result<Tensor> {
    let (dev, dt) = (logp.device(), logp.dtype());
    let idx: Vec<u32> = s.target.iter().map(|t| t.unwrap_or(0) as u32).collect();
    let idx = Tensor::from_vec(idx, (s.n, 1), dev)?;
    let wt: Vec<f64> = s.target.iter().map(|t| t.map_or(0.0, |t| s.w(t))).collect();
    let wt = Tensor::from_vec(wt, s.n, dev)?.to_dtype(dt)?;
    let picked = logp.gather(&idx, 1)?.squeeze(1)?;
    let mut per = picked.mul(&wt)?.affine(-(1.0 - s.smoothing), 0.0)?;
    if s.smoothing > 0.0 {
        let weighted = match weight {
            Some(w) => logp.broadcast_mul(&w.to_dtype(dt)?.reshape((1, s.c))?)?,
            None => logp.clone(),
        };
        let valid: Vec<f64> = s.target.iter().map(|t| if t.is_some() { 1.0 } else { 0.0 }).collect();
        let valid = Tensor::from_vec(valid, s.n, dev)?.to_dtype(dt)?;
        let smooth = weighted.sum(1)?.mul(&valid)?.affine(-s.smoothing / s.c as f64, 0.0)?;
        per = per.add(&smooth)?;
    }
    match s.reduction {
        Reduction::None => per.reshape(out),
        Reduction::Sum => per.sum_all(),
        Reduction::Mean => per.sum_all()?.affine(1.0 / s.denom(), 0.0),
    }
}

/// Cross-entropy against class probabilities `target` (the input's shape): per
/// prediction `-sum_c w[c] * logp[c] * t[c]` over the class dim, targets smoothed to
/// `t * (1 - ls) + ls / C`; "mean" divides by the number of predictions.
pub(crate) fn soft_target_loss(
    logp: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    class_dim: usize,
    smoothing: f64,
    reduction: Reduction,
) -> Result<Tensor> {
    let (c, dt) = (logp.dims()[class_dim], logp.dtype());
    let mut tgt = target.to_dtype(dt)?;
    if smoothing > 0.0 {
        tgt = tgt.affine(1.0 - smoothing, smoothing / c as f64)?;
    }
    let mut per = logp.mul(&tgt)?;
    if let Some(w) = weight {
        let mut shape = vec![1; logp.rank()];
        shape[class_dim] = c;
        per = per.broadcast_mul(&w.to_dtype(dt)?.reshape(shape)?)?;
    }
    let loss = per.sum(class_dim)?.neg()?;
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum => loss.sum_all(),
        Reduction::Mean => {
            // An empty batch gives 0 / 0 = NaN, as torch.
            loss.sum_all()?.affine(1.0 / loss.elem_count() as f64, 0.0)
        }
    }
}
