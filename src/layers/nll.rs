//! `F.nll_loss` (log-probabilities and class-index targets) as one op on the CPU: the
//! forward picks each row's target entry, the backward writes each row of the gradient
//! whole (zeros and `-scale * w[t]` at the target) in one parallel pass.
//!
//! Why: built from tensor ops (`layers::loss::nll_rows`: a gather over the flattened
//! input, products, a sum) its backward scattered into a zero tensor the size of the
//! input: on a word LM's (700, 7792) log-probabilities `nll_loss` forward + backward took
//! 9-10.5 ms against torch's 2.6-3.8, more than the log-softmax before it.
//!
//! The formulas are `layers::loss`'s (PyTorch's): per row `-w[t] * logp[t]`, 0 for an
//! ignored row, "mean" divided by the sum of `w[t]` over the counted rows.
use crate::layers::loss::{row_loss, rows_per_task, Reduction, Spec};
use crate::ops::float::Float;
use crate::ops::parallel::{filled_plain, for_chunks, par_ok};
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use std::sync::Arc;

/// The fused NLL op over (rows, C) log-probabilities.
pub(crate) struct Nll(pub(crate) Arc<Spec>);

/// Its backward: the upstream gradient (one value, or one per row for "none") to the
/// (rows, C) input gradient.
struct NllGrad(Arc<Spec>);

/// The loss (per row for "none", else reduced), each row's loss summed in f64.
fn forward<T: Float + Into<f64>>(x: &[T], s: &Spec) -> Vec<T> {
    let per = (0..s.n).map(|i| row_loss(&x[i * s.c..(i + 1) * s.c], i, s, 0.0));
    match s.reduction {
        Reduction::None => per.map(T::of).collect(),
        Reduction::Sum => vec![T::of(per.sum())],
        Reduction::Mean => vec![T::of(per.sum::<f64>() / s.denom())],
    }
}

/// d loss / d logp: per counted row `-scale * [(1 - ls) * w[t] * onehot(t) + ls / C * w]`,
/// zeros for an ignored row; `scale` is the upstream gradient (over "mean"'s divisor).
fn backward<T: Float + Into<f64>>(g: &[T], s: &Spec) -> Vec<T> {
    let scale0 = match s.reduction {
        Reduction::Mean => g[0].into() / s.denom(),
        Reduction::Sum => g[0].into(),
        Reduction::None => 0.0,
    };
    let rows = rows_per_task(s.c);
    filled_plain(s.n * s.c, |out| {
        if s.c == 0 {
            return;
        }
        for_chunks(out, rows * s.c, par_ok(out.len()), |ci, block| {
            for (j, d) in block.chunks_exact_mut(s.c).enumerate() {
                let i = ci * rows + j;
                d.fill(T::ZERO);
                let Some(t) = s.target[i] else { continue };
                let scale = if s.reduction == Reduction::None { g[i].into() } else { scale0 };
                let ls = s.smoothing;
                if ls > 0.0 {
                    for (c, v) in d.iter_mut().enumerate() {
                        *v = T::of(-scale * ls / s.c as f64 * s.w(c));
                    }
                }
                d[t] = T::of(-scale * ((1.0 - ls) * s.w(t) + ls / s.c as f64 * s.w(t)));
            }
        })
    })
}

impl CustomOp1 for Nll {
    fn name(&self) -> &'static str {
        "nll_loss"
    }
    fn cpu_fwd(&self, st: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match st {
            CpuStorage::F32(v) => CpuStorage::F32(forward(crate::ops::storage::data(v, l, "nll_loss")?, &self.0)),
            CpuStorage::F64(v) => CpuStorage::F64(forward(crate::ops::storage::data(v, l, "nll_loss")?, &self.0)),
            _ => candle_core::bail!("nll_loss: only float32 and float64 log-probabilities are supported"),
        };
        let shape = if self.0.reduction == Reduction::None { Shape::from(self.0.n) } else { Shape::from(()) };
        Ok((out, shape))
    }
    fn bwd(&self, _x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&NllGrad(self.0.clone()))?))
    }
}

impl CustomOp1 for NllGrad {
    fn name(&self) -> &'static str {
        "nll_loss_backward"
    }
    fn cpu_fwd(&self, st: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match st {
            CpuStorage::F32(g) => CpuStorage::F32(backward(crate::ops::storage::data(g, l, "nll_loss")?, &self.0)),
            CpuStorage::F64(g) => CpuStorage::F64(backward(crate::ops::storage::data(g, l, "nll_loss")?, &self.0)),
            _ => candle_core::bail!("nll_loss: only float32 and float64 gradients are supported"),
        };
        Ok((out, Shape::from((self.0.n, self.0.c))))
    }
}
