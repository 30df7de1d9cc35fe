//! The elementwise losses — MSE, L1, smooth L1, binary cross-entropy (on
//! probabilities and on logits), KL divergence — with PyTorch's formulas and
//! reductions, built from Candle's differentiable ops so they run on every device.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
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

/// Binary cross-entropy on probabilities as one fused op: the loss of each element
/// (`-(y ln x + (1 - y) ln(1 - x))`, each log clamped at -100, as PyTorch) in one
/// parallel pass, reduced (sum, mean) or not; the backward is PyTorch's
/// `g (x - y) / max(x (1 - x), 1e-12)`, one pass. For CPU float32/float64 inputs of
/// one shape with no weight and a target that needs no gradient (`bce_kernel`).
pub(crate) struct BceFused {
    pub(crate) reduce: Reduce,
}

/// The per-element loss, in the input's type (`Float::ln`: vectorized for f32, libm's
/// for f64).
#[inline(always)]
fn bce_elem<T: Float>(x: T, y: T) -> T {
    let floor = T::of(-100.0);
    let lp = x.ln();
    let lp = if lp > floor { lp } else { floor };
    let l1 = (T::ONE - x).ln();
    let l1 = if l1 > floor { l1 } else { floor };
    -(y * lp + (T::ONE - y) * l1)
}

/// `bce_elem` over a run. Its own loop (not a closure handed to a generic map): the
/// per-element code with its two logs is too large for the compiler to inline into
/// another function's vector loop, and called once per element it ran scalar.
#[inline(always)]
fn bce_loop<T: Float>(x: &[T], y: &[T], o: &mut [T]) {
    for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
        *o = bce_elem(x, y);
    }
}

/// `bce_loop` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn bce_loop_avx512<T: Float>(x: &[T], y: &[T], o: &mut [T]) {
    bce_loop(x, y, o)
}

/// `bce_loop` compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn bce_loop_avx2<T: Float>(x: &[T], y: &[T], o: &mut [T]) {
    bce_loop(x, y, o)
}

/// Every element's loss, vectorized, split over threads from 32K elements on (two
/// logs per element cost several memory passes' time).
fn bce_values<T: Float>(x: &[T], y: &[T]) -> Vec<T> {
    use crate::ops::parallel::{filled_plain, for_chunks, par_ok};
    const CHUNK: usize = 1 << 14;
    let (wide, simd) = (crate::ops::cpu::has_avx512(), crate::ops::cpu::has_avx2_fma());
    // Each chunk is written whole by `bce_loop`.
    filled_plain(x.len(), |out| {
        for_chunks(out, CHUNK, par_ok(8 * x.len()), |c, o| {
            let (xs, ys) = (&x[c * CHUNK..c * CHUNK + o.len()], &y[c * CHUNK..c * CHUNK + o.len()]);
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` is `has_avx512()`.
                return unsafe { bce_loop_avx512(xs, ys, o) };
            } else if simd {
                // SAFETY: `simd` is `has_avx2_fma()`.
                return unsafe { bce_loop_avx2(xs, ys, o) };
            }
            let _ = (wide, simd);
            bce_loop(xs, ys, o)
        })
    })
}

impl BceFused {
    /// The loss of each element (`Reduce::None`), or their sum or mean as one value.
    fn run<T: Float>(&self, x: &[T], y: &[T]) -> Vec<T> {
        let loss = bce_values(x, y);
        if self.reduce == Reduce::None {
            return loss;
        }
        let s = crate::ops::reduce::sum_all_slice(&loss);
        let n = loss.len();
        let v = match (self.reduce, n) {
            (Reduce::Mean, 0) => T::of(f64::NAN),
            (Reduce::Mean, _) => s / T::of(n as f64),
            _ => s,
        };
        vec![v]
    }
}

impl candle_core::CustomOp2 for BceFused {
    fn name(&self) -> &'static str {
        "binary_cross_entropy"
    }
    fn cpu_fwd(
        &self,
        s1: &candle_core::CpuStorage,
        l1: &candle_core::Layout,
        s2: &candle_core::CpuStorage,
        l2: &candle_core::Layout,
    ) -> Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use crate::ops::storage::data;
        use candle_core::CpuStorage as C;
        let shape = if self.reduce == Reduce::None { l1.shape().clone() } else { candle_core::Shape::from(()) };
        let out = match (s1, s2) {
            (C::F32(x), C::F32(y)) => C::F32(self.run(data(x, l1, "binary_cross_entropy")?, data(y, l2, "binary_cross_entropy")?)),
            (C::F64(x), C::F64(y)) => C::F64(self.run(data(x, l1, "binary_cross_entropy")?, data(y, l2, "binary_cross_entropy")?)),
            _ => candle_core::bail!("binary_cross_entropy: expected float32 or float64 operands of one dtype"),
        };
        Ok((out, shape))
    }
    fn bwd(&self, x: &Tensor, y: &Tensor, _res: &Tensor, g: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let n = x.elem_count();
        let scale = if self.reduce == Reduce::Mean { 1.0 / n.max(1) as f64 } else { 1.0 };
        let g = if self.reduce == Reduce::None { g.dense()? } else { g.affine(scale, 0.0)?.broadcast_as(x.shape())?.dense()? };
        let x = x.dense()?;
        let y = y.dense()?;
        let (xs, lx) = x.storage_and_layout();
        let (ys, ly) = y.storage_and_layout();
        let (gs, lg) = g.storage_and_layout();
        fn grad<T: Float>(x: &[T], y: &[T], g: &[T]) -> Vec<T> {
            use crate::ops::parallel::{filled_plain, for_chunks, par_ok};
            const CHUNK: usize = 1 << 14;
            let eps = T::of(1e-12);
            // Every element of every chunk is written.
            filled_plain(x.len(), |out| {
                for_chunks(out, CHUNK, par_ok(4 * x.len()), |c, o| {
                    let lo = c * CHUNK;
                    for (k, v) in o.iter_mut().enumerate() {
                        let (x, y, g) = (x[lo + k], y[lo + k], g[lo + k]);
                        let d = x * (T::ONE - x);
                        *v = g * (x - y) / if d > eps { d } else { eps };
                    }
                })
            })
        }
        use crate::ops::storage::data;
        use candle_core::{CpuStorage as C, Storage as S};
        let dev = candle_core::Device::Cpu;
        let gx = match (&*xs, &*ys, &*gs) {
            (S::Cpu(C::F32(a)), S::Cpu(C::F32(b)), S::Cpu(C::F32(c))) => {
                Tensor::from_vec(grad(data(a, lx, "bce")?, data(b, ly, "bce")?, data(c, lg, "bce")?), x.shape(), &dev)?
            }
            (S::Cpu(C::F64(a)), S::Cpu(C::F64(b)), S::Cpu(C::F64(c))) => {
                Tensor::from_vec(grad(data(a, lx, "bce")?, data(b, ly, "bce")?, data(c, lg, "bce")?), x.shape(), &dev)?
            }
            _ => candle_core::bail!("binary_cross_entropy: backward expects float32 or float64 CPU tensors"),
        };
        Ok((Some(gx), None))
    }
}

/// The fused BCE op where it applies: CPU float32/float64 input and target of one
/// shape and dtype, no weight, a reduction other than batchmean.
pub(crate) fn bce_kernel(x: &Tensor, y: &Tensor, weight: bool, reduce: Reduce) -> Option<BceFused> {
    let ok = x.device().is_cpu()
        && y.device().is_cpu()
        && matches!(x.dtype(), candle_core::DType::F32 | candle_core::DType::F64)
        && x.dtype() == y.dtype()
        && x.dims() == y.dims()
        && !weight
        && reduce != Reduce::BatchMean;
    ok.then_some(BceFused { reduce })
}
