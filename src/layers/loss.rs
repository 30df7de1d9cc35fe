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
use crate::ops::parallel::{filled_plain, par_ok};
use crate::ops::reduce::max_slice;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use std::sync::{Arc, Mutex};

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
    pub(crate) fn w(&self, k: usize) -> f64 {
        self.weight.as_ref().map_or(1.0, |w| w[k])
    }
    /// Sum of the target weights of the counted rows: "mean"'s divisor.
    pub(crate) fn denom(&self) -> f64 {
        self.target.iter().flatten().map(|&t| self.w(t)).sum()
    }
}

/// Row `i`'s max and log of the sum of `exp(x - max)`: the max and the sum of
/// exponentials in the element type, 16 lanes at a time (f32's exp is
/// `approx::fast_exp`, its fused-multiply-add form in the AVX2 / AVX-512 variants), as
/// PyTorch's vectorized log-softmax; the lanes are summed in f64.
#[inline(always)]
fn row_stats<T: Float + Into<f64>, const FMA: bool>(row: &[T]) -> (f64, f64) {
    let max = max_slice(row);
    if max == T::NEG_INF || max.is_nan() {
        // All -inf (or a NaN): the f64 formula's own result (NaN or -inf), no shortcut.
        let mf: f64 = max.into();
        let sum: f64 = row.iter().map(|&v| (v.into() - mf).exp()).sum();
        return (mf, sum.ln());
    }
    let mut acc = [T::ZERO; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] += (c[k] - max).exp::<FMA>();
        }
    }
    for (k, &v) in tail.iter().enumerate() {
        acc[k] += (v - max).exp::<FMA>();
    }
    let sum: f64 = acc.iter().map(|&v| v.into()).sum();
    (max.into(), sum.ln())
}

/// Rows per parallel task.
pub(crate) fn rows_per_task(c: usize) -> usize {
    ((1 << 14) / c.max(1)).max(1)
}

/// Whether a pass over `elems` logits splits over threads: an exponential per element
/// costs about four plain passes, so from a quarter of the usual size on
/// (a (700, 1000) batch of word-LM logits, not a (32, 10) one).
fn par_rows(elems: usize) -> bool {
    par_ok(elems.saturating_mul(4))
}

/// Run `$body` (a generic function call with a `FMA` const) in the AVX-512 or AVX2
/// variant the CPU has, else the portable one.
macro_rules! simd_rows {
    ($avx512:ident, $avx2:ident, $portable:ident($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        if crate::ops::cpu::has_avx512() {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked just above).
            return unsafe { $avx512($($arg),*) };
        } else if crate::ops::cpu::has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            return unsafe { $avx2($($arg),*) };
        }
        $portable::<_, false>($($arg),*)
    }};
}

/// Forward rows `r0..r0 + loss.len()`: each row's loss and its `max + lse` (the
/// backward's shift: `p = exp(x - shift)`; NaN for an ignored row).
#[inline(always)]
fn fwd_rows<T: Float + Into<f64>, const FMA: bool>(x: &[T], s: &Spec, r0: usize, loss: &mut [f64], shift: &mut [f64]) {
    for (j, (l, sh)) in loss.iter_mut().zip(shift.iter_mut()).enumerate() {
        let i = r0 + j;
        if s.target[i].is_none() {
            (*l, *sh) = (0.0, f64::NAN);
            continue;
        }
        let row = &x[i * s.c..(i + 1) * s.c];
        let (max, lse) = row_stats::<T, FMA>(row);
        *sh = max + lse;
        *l = row_loss(row, i, s, max + lse);
    }
}

/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn fwd_rows_avx512<T: Float + Into<f64>>(x: &[T], s: &Spec, r0: usize, loss: &mut [f64], shift: &mut [f64]) {
    fwd_rows::<T, true>(x, s, r0, loss, shift)
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fwd_rows_avx2<T: Float + Into<f64>>(x: &[T], s: &Spec, r0: usize, loss: &mut [f64], shift: &mut [f64]) {
    fwd_rows::<T, true>(x, s, r0, loss, shift)
}

fn fwd_rows_best<T: Float + Into<f64>>(x: &[T], s: &Spec, r0: usize, loss: &mut [f64], shift: &mut [f64]) {
    simd_rows!(fwd_rows_avx512, fwd_rows_avx2, fwd_rows(x, s, r0, loss, shift))
}

/// The loss (per row for "none", else reduced) and each row's `max + lse`.
pub(crate) fn forward<T: Float + Into<f64>>(x: &[T], s: &Spec) -> (Vec<T>, Vec<f64>) {
    let mut per = vec![0.0f64; s.n];
    let mut shift = vec![0.0f64; s.n];
    let rows = rows_per_task(s.c);
    if par_rows(x.len()) {
        crate::ops::parallel::for_chunks2(&mut per, rows, &mut shift, rows, true, |ci, l, sh| fwd_rows_best(x, s, ci * rows, l, sh));
    } else {
        fwd_rows_best(x, s, 0, &mut per, &mut shift);
    }
    let loss = match s.reduction {
        Reduction::None => per.into_iter().map(T::of).collect(),
        Reduction::Sum => vec![T::of(per.iter().sum())],
        Reduction::Mean => vec![T::of(per.iter().sum::<f64>() / s.denom())],
    };
    (loss, shift)
}

/// Row `i`'s loss (0 for an ignored row), given its `max + lse`.
pub(crate) fn row_loss<T: Float + Into<f64>>(row: &[T], i: usize, s: &Spec, shift: f64) -> f64 {
    let Some(t) = s.target[i] else { return 0.0 };
    let logp = |k: usize| row[k].into() - shift;
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

/// The backward's constants: "mean"'s scale and the class weights' sum.
struct BwdScale {
    scale0: f64,
    wsum: f64,
}

/// Backward rows `r0..`, one row of `s.c` per chunk of `out`, each written whole:
/// `scale * [(1 - ls) * w[t] * (p - onehot(t)) + ls / C * (p * sum(w) - w)]`.
#[inline(always)]
fn bwd_rows<T: Float + Into<f64>, const FMA: bool>(x: &[T], g: &[T], s: &Spec, shift: &[f64], k: &BwdScale, r0: usize, out: &mut [T]) {
    for (j, d) in out.chunks_exact_mut(s.c).enumerate() {
        let i = r0 + j;
        let Some(t) = s.target[i] else {
            d.iter_mut().for_each(|v| *v = T::ZERO);
            continue;
        };
        let row = &x[i * s.c..(i + 1) * s.c];
        let scale = if s.reduction == Reduction::None { g[i].into() } else { k.scale0 };
        let (wt, ls, sh) = (s.w(t) * (1.0 - s.smoothing), s.smoothing, shift[i]);
        if ls == 0.0 {
            // scale * wt * (p - onehot(t)), p = exp(x - shift) in the element type.
            let (f, shift_t) = (T::of(scale * wt), T::of(sh));
            for (dv, &xv) in d.iter_mut().zip(row) {
                *dv = f * (xv - shift_t).exp::<FMA>();
            }
            d[t] = T::of(scale * wt * ((row[t].into() - sh).exp() - 1.0));
            continue;
        }
        for (c, (dv, &xv)) in d.iter_mut().zip(row).enumerate() {
            let p = (xv.into() - sh).exp();
            let v = wt * (p - if c == t { 1.0 } else { 0.0 }) + ls / s.c as f64 * (p * k.wsum - s.w(c));
            *dv = T::of(scale * v);
        }
    }
}

/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn bwd_rows_avx512<T: Float + Into<f64>>(x: &[T], g: &[T], s: &Spec, shift: &[f64], k: &BwdScale, r0: usize, out: &mut [T]) {
    bwd_rows::<T, true>(x, g, s, shift, k, r0, out)
}

/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn bwd_rows_avx2<T: Float + Into<f64>>(x: &[T], g: &[T], s: &Spec, shift: &[f64], k: &BwdScale, r0: usize, out: &mut [T]) {
    bwd_rows::<T, true>(x, g, s, shift, k, r0, out)
}

fn bwd_rows_best<T: Float + Into<f64>>(x: &[T], g: &[T], s: &Spec, shift: &[f64], k: &BwdScale, r0: usize, out: &mut [T]) {
    simd_rows!(bwd_rows_avx512, bwd_rows_avx2, bwd_rows(x, g, s, shift, k, r0, out))
}

/// d loss / d x for upstream gradient `g` (one value, or one per row for "none"), from
/// the forward's per-row shifts (`None`: computed again).
pub(crate) fn backward<T: Float + Into<f64>>(x: &[T], g: &[T], s: &Spec, shift: Option<&[f64]>) -> Vec<T> {
    let fresh;
    let shift = match shift {
        Some(sh) if sh.len() == s.n => sh,
        _ => {
            fresh = forward(x, s).1;
            &fresh[..]
        }
    };
    let k = BwdScale {
        scale0: match s.reduction {
            Reduction::Mean => g[0].into() / s.denom(),
            _ => g[0].into(),
        },
        wsum: s.weight.as_ref().map_or(s.c as f64, |w| w.iter().sum()),
    };
    let rows = rows_per_task(s.c);
    // Every row is written whole (ignored ones as zeros): no zero fill first.
    filled_plain(x.len(), |out| {
        if s.c == 0 {
            return;
        }
        if par_rows(x.len()) {
            crate::ops::parallel::for_chunks(out, rows * s.c, true, |ci, block| bwd_rows_best(x, g, s, shift, &k, ci * rows, block));
        } else {
            bwd_rows_best(x, g, s, shift, &k, 0, out);
        }
    })
}

/// The fused cross-entropy op; keeps the forward's per-row `max + lse` for its backward.
pub(crate) struct CrossEntropy {
    spec: Arc<Spec>,
    shift: Mutex<Option<Arc<Vec<f64>>>>,
}

impl CrossEntropy {
    pub(crate) fn new(spec: Arc<Spec>) -> Self {
        CrossEntropy { spec, shift: Mutex::new(None) }
    }
}

pub(crate) struct CrossEntropyGrad(Arc<Spec>, Option<Arc<Vec<f64>>>);

impl CustomOp1 for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }
    fn cpu_fwd(&self, st: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (out, shift) = match st {
            CpuStorage::F32(v) => {
                let (o, sh) = forward(crate::ops::storage::data(v, l, "cross_entropy")?, &self.spec);
                (CpuStorage::F32(o), sh)
            }
            CpuStorage::F64(v) => {
                let (o, sh) = forward(crate::ops::storage::data(v, l, "cross_entropy")?, &self.spec);
                (CpuStorage::F64(o), sh)
            }
            _ => candle_core::bail!("cross_entropy: only float32 and float64 logits are supported"),
        };
        *self.shift.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(shift));
        let shape = if self.spec.reduction == Reduction::None { Shape::from(self.spec.n) } else { Shape::from(()) };
        Ok((out, shape))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let shift = self.shift.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(Some(x.apply_op2_no_bwd(&grad.dense()?, &CrossEntropyGrad(self.spec.clone(), shift))?))
    }
}

impl CustomOp2 for CrossEntropyGrad {
    fn name(&self) -> &'static str {
        "cross_entropy_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let shift = self.1.as_deref().map(|v| &v[..]);
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => CpuStorage::F32(backward(
                crate::ops::storage::data(x, l1, "cross_entropy")?,
                crate::ops::storage::data(g, l2, "cross_entropy")?,
                &self.0,
                shift,
            )),
            (CpuStorage::F64(x), CpuStorage::F64(g)) => CpuStorage::F64(backward(
                crate::ops::storage::data(x, l1, "cross_entropy")?,
                crate::ops::storage::data(g, l2, "cross_entropy")?,
                &self.0,
                shift,
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
