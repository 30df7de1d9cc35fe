//! The elementwise losses — MSE, L1, smooth L1, binary cross-entropy (on
//! probabilities and on logits), KL divergence — with PyTorch's formulas and
//! reductions, built from Candle's differentiable ops so they run on every device.
use candle_core::{Result, Tensor};

/// A loss of `input` against a target of its shape.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PointLoss {
    Mse,
    L1,
    /// `0.5 * d^2 / beta` where `|d| < beta`, `|d| - 0.5 * beta` elsewhere.
    SmoothL1 {
        beta: f64,
    },
    /// On probabilities, the logs clamped at -100 (as PyTorch).
    Bce,
    /// On logits, in the overflow-free form.
    BceWithLogits,
    /// `target * (log(target) - input)` (0 where target is 0), or with a log target
    /// `exp(target) * (target - input)`.
    KlDiv {
        log_target: bool,
    },
}

/// How the per-element losses are reduced; `BatchMean` (KL divergence) divides the
/// sum by the batch size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Reduce {
    None,
    Sum,
    Mean,
    BatchMean,
}

impl PointLoss {
    pub(crate) fn name(self) -> &'static str {
        match self {
            PointLoss::Mse => "mse_loss",
            PointLoss::L1 => "l1_loss",
            PointLoss::SmoothL1 { .. } => "smooth_l1_loss",
            PointLoss::Bce => "binary_cross_entropy",
            PointLoss::BceWithLogits => "binary_cross_entropy_with_logits",
            PointLoss::KlDiv { .. } => "kl_div",
        }
    }
}

/// The loss, reduced. `weight` rescales each element's loss (broadcast);
/// `pos_weight` weighs the positive term of `BceWithLogits` (broadcast over the last dim).
pub(crate) fn point_loss(
    kind: PointLoss,
    x: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduce: Reduce,
) -> Result<Tensor> {
    let dt = x.dtype();
    let y = target.to_dtype(dt)?;
    let mut loss = match kind {
        PointLoss::Mse => x.sub(&y)?.sqr()?,
        PointLoss::L1 => x.sub(&y)?.abs()?,
        PointLoss::SmoothL1 { beta } => {
            let d = x.sub(&y)?.abs()?;
            if beta == 0.0 {
                d
            } else {
                d.lt(beta)?.where_cond(&d.sqr()?.affine(0.5 / beta, 0.0)?, &d.affine(1.0, -0.5 * beta)?)?
            }
        }
        PointLoss::Bce => {
            let log_p = x.log()?.maximum(-100.0)?;
            let log_1p = x.affine(-1.0, 1.0)?.log()?.maximum(-100.0)?;
            y.mul(&log_p)?.add(&y.affine(-1.0, 1.0)?.mul(&log_1p)?)?.neg()?
        }
        PointLoss::BceWithLogits => {
            // (1 - y) * x + (1 + (pw - 1) * y) * (log1p(exp(-|x|)) + max(-x, 0))
            let log_term = x.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?.add(&x.neg()?.relu()?)?;
            let coef = match pos_weight {
                Some(pw) => y.broadcast_mul(&pw.to_dtype(dt)?.affine(1.0, -1.0)?)?.affine(1.0, 1.0)?,
                None => y.ones_like()?,
            };
            y.affine(-1.0, 1.0)?.mul(x)?.add(&coef.mul(&log_term)?)?
        }
        PointLoss::KlDiv { log_target: true } => y.exp()?.mul(&y.sub(x)?)?,
        PointLoss::KlDiv { log_target: false } => {
            let pos = y.gt(0.0)?;
            let safe = pos.where_cond(&y, &y.ones_like()?)?;
            pos.where_cond(&y.mul(&safe.log()?.sub(x)?)?, &y.zeros_like()?)?
        }
    };
    if let Some(w) = weight {
        loss = loss.broadcast_mul(&w.to_dtype(dt)?)?;
    }
    match reduce {
        Reduce::None => Ok(loss),
        Reduce::Sum => loss.sum_all(),
        Reduce::Mean => loss.mean_all(),
        Reduce::BatchMean => {
            let n = if x.rank() == 0 { 1 } else { x.dims()[0] };
            loss.sum_all()?.affine(1.0 / n as f64, 0.0)
        }
    }
}
