//! The elementwise activations beyond ReLU and exact GELU — SiLU, Mish, the ELU
//! family (ELU, SELU, CELU), softplus, hard sigmoid / hard swish, leaky ReLU and
//! tanh-approximated GELU — each one op with its own derivative, in PyTorch's
//! formulas (`aten/src/ATen/native/cpu/Activation.cpp`).
//!
//! On the CPU for float32/float64 an op is one parallel pass forward and one
//! backward; other dtypes and devices run the same formula from Candle's
//! differentiable ops.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::simd_map::{map_fma, zip_map_fma};
use crate::ops::storage::{data, float_dispatch};
use crate::ops::unary::sigmoid;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

/// An activation and its parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act {
    Silu,
    Mish,
    Hardsigmoid,
    Hardswish,
    /// `x > 0 ? scale * x : scale * alpha * expm1(input_scale * x)`: ELU
    /// (scale 1, input_scale 1), SELU (fixed alpha and scale), CELU (input_scale 1 / alpha).
    /// `grad_scale` is the input scale the derivative uses (PyTorch's CELU backward
    /// uses 1 / alpha with alpha rounded to float32).
    Elu {
        alpha: f64,
        scale: f64,
        input_scale: f64,
        grad_scale: f64,
    },
    /// `beta * x > threshold ? x : log1p(exp(beta * x)) / beta`.
    Softplus {
        beta: f64,
        threshold: f64,
    },
    LeakyRelu {
        slope: f64,
    },
    /// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
    GeluTanh,
}

/// SELU's constants (Klambauer et al.), as PyTorch.
pub(crate) const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
pub(crate) const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
const K_BETA: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
const K_KAPPA: f64 = 0.044715;

/// PyTorch's CPU kernels differ by dtype at NaN for some derivatives (float32 takes
/// the "positive" branch, float64 returns NaN); we follow each.
#[inline(always)]
fn nan_grad<T: Float>(g: T) -> T {
    if std::mem::size_of::<T>() == 8 {
        T::of(f64::NAN)
    } else {
        g
    }
}

impl Act {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Act::Silu => "silu",
            Act::Mish => "mish",
            Act::Hardsigmoid => "hardsigmoid",
            Act::Hardswish => "hardswish",
            Act::Elu { .. } => "elu",
            Act::Softplus { .. } => "softplus",
            Act::LeakyRelu { .. } => "leaky_relu",
            Act::GeluTanh => "gelu",
        }
    }

    /// `f(x)`; `FMA`: the exponential and tanh polynomials fused (inside the FMA-enabled
    /// loop variants of `simd_map`).
    #[inline(always)]
    fn f<T: Float, const FMA: bool>(self, x: T) -> T {
        let (three, six) = (T::of(3.0), T::of(6.0));
        match self {
            Act::Silu => x / (T::ONE + (-x).exp::<FMA>()),
            Act::Mish => x * x.log1p_exp::<FMA>().tanh::<FMA>(),
            // clamp(x + 3, 0, 6) / 6, NaN kept.
            Act::Hardsigmoid => clamp06(x + three) / six,
            Act::Hardswish => x * clamp06(x + three) / six,
            Act::Elu { alpha, scale, input_scale, .. } => {
                if x > T::ZERO {
                    x * T::of(scale)
                } else {
                    (x * T::of(input_scale)).exp_m1::<FMA>() * T::of(alpha * scale)
                }
            }
            Act::Softplus { beta, threshold } => {
                let z = x * T::of(beta);
                if z > T::of(threshold) {
                    x
                } else {
                    z.log1p_exp::<FMA>() / T::of(beta)
                }
            }
            Act::LeakyRelu { slope } => {
                if x > T::ZERO {
                    x
                } else {
                    x * T::of(slope)
                }
            }
            Act::GeluTanh => {
                let (beta, kappa, half) = (T::of(K_BETA), T::of(K_KAPPA), T::of(0.5));
                half * x * (T::ONE + (beta * (x + kappa * x * x * x)).tanh::<FMA>())
            }
        }
    }

    /// `g * f'(x)`.
    #[inline(always)]
    fn df<T: Float, const FMA: bool>(self, x: T, g: T) -> T {
        let three = T::of(3.0);
        match self {
            Act::Silu => {
                let s = sigmoid::<T, FMA>(x);
                g * s * (T::ONE + x * (T::ONE - s))
            }
            Act::Mish => {
                let (s, t) = (sigmoid::<T, FMA>(x), x.log1p_exp::<FMA>().tanh::<FMA>());
                g * (t + x * s * (T::ONE - t * t))
            }
            Act::Hardsigmoid => {
                if x > -three && x < three {
                    // PyTorch's constant is a float32 1/6, for float64 too.
                    g * T::of(f64::from(1.0f32 / 6.0))
                } else {
                    T::ZERO
                }
            }
            Act::Hardswish => {
                if x.is_nan() {
                    nan_grad(g)
                } else if x <= -three {
                    T::ZERO
                } else if x < three {
                    g * (x / three + T::of(0.5))
                } else {
                    g
                }
            }
            Act::Elu { alpha, scale, grad_scale, .. } => {
                if x.is_nan() {
                    nan_grad(g * T::of(scale))
                } else if x > T::ZERO {
                    g * T::of(scale)
                } else {
                    g * T::of(alpha * scale * grad_scale) * (x * T::of(grad_scale)).exp::<FMA>()
                }
            }
            Act::Softplus { beta, threshold } => {
                let z = x * T::of(beta);
                if z > T::of(threshold) {
                    g
                } else {
                    let e = z.exp::<FMA>();
                    g * (e / (e + T::ONE))
                }
            }
            Act::LeakyRelu { slope } => {
                if x > T::ZERO {
                    g
                } else {
                    g * T::of(slope)
                }
            }
            Act::GeluTanh => {
                // In the element type, as PyTorch: x^2 overflows float32 for |x| > ~1.8e19,
                // and its derivative is then 0 * inf = NaN there too.
                let (beta, kappa, half) = (T::of(K_BETA), T::of(K_KAPPA), T::of(0.5));
                let x_sq = x * x;
                let inner = beta * (x + kappa * x_sq * x);
                let t = inner.tanh::<FMA>();
                let left = half * x;
                let left_derivative = half * (T::ONE + t);
                let right_derivative = left * (T::ONE - t * t) * beta * (T::ONE + T::of(3.0) * kappa * x_sq);
                g * (left_derivative + right_derivative)
            }
        }
    }

    /// The same function from Candle's differentiable ops: other devices and dtypes.
    fn composed(self, x: &Tensor) -> Result<Tensor> {
        let pos = || x.gt(0.0);
        match self {
            Act::Silu => x.mul(&candle_nn::ops::sigmoid(x)?),
            Act::Mish => x.mul(&softplus_ops(x, 1.0, 20.0)?.tanh()?),
            Act::Hardsigmoid => x.affine(1.0, 3.0)?.clamp(0.0, 6.0)?.affine(1.0 / 6.0, 0.0),
            Act::Hardswish => x.mul(&x.affine(1.0, 3.0)?.clamp(0.0, 6.0)?)?.affine(1.0 / 6.0, 0.0),
            Act::Elu { alpha, scale, input_scale, .. } => {
                let neg = x.minimum(0.0)?.affine(input_scale, 0.0)?.exp()?.affine(alpha * scale, -alpha * scale)?;
                pos()?.where_cond(&x.affine(scale, 0.0)?, &neg)
            }
            Act::Softplus { beta, threshold } => softplus_ops(x, beta, threshold),
            Act::LeakyRelu { slope } => pos()?.where_cond(x, &x.affine(slope, 0.0)?),
            // PyTorch's formula from differentiable ops (Candle's `gelu` differs in its backward).
            Act::GeluTanh => {
                let inner = x.add(&x.sqr()?.mul(x)?.affine(K_KAPPA, 0.0)?)?.affine(K_BETA, 0.0)?;
                x.affine(0.5, 0.0)?.mul(&inner.tanh()?.affine(1.0, 1.0)?)
            }
        }
    }
}

#[inline(always)]
fn clamp06<T: Float>(v: T) -> T {
    if v < T::ZERO {
        T::ZERO
    } else if v > T::of(6.0) {
        T::of(6.0)
    } else {
        v
    }
}

fn softplus_ops(x: &Tensor, beta: f64, threshold: f64) -> Result<Tensor> {
    let z = x.affine(beta, 0.0)?;
    let soft = z.minimum(threshold)?.exp()?.affine(1.0, 1.0)?.log()?.affine(1.0 / beta, 0.0)?;
    z.gt(threshold)?.where_cond(x, &soft)
}

struct Fwd(Act);
/// `(x, grad) -> grad * f'(x)`.
struct Bwd(Act);

macro_rules! per_variant {
    // Match the activation once, outside the loop, and hand `$run` the variant as a
    // constructor expression, so that inside each loop the variant is a constant
    // (the match in `f`/`df` folds away and the loop vectorizes).
    ($act:expr, $run:ident ( $($args:tt)* )) => {
        match $act {
            Act::Silu => $run!($($args)*; Act::Silu),
            Act::Mish => $run!($($args)*; Act::Mish),
            Act::Hardsigmoid => $run!($($args)*; Act::Hardsigmoid),
            Act::Hardswish => $run!($($args)*; Act::Hardswish),
            Act::Elu { alpha, scale, input_scale, grad_scale } => $run!($($args)*; Act::Elu { alpha, scale, input_scale, grad_scale }),
            Act::Softplus { beta, threshold } => $run!($($args)*; Act::Softplus { beta, threshold }),
            Act::LeakyRelu { slope } => $run!($($args)*; Act::LeakyRelu { slope }),
            Act::GeluTanh => $run!($($args)*; Act::GeluTanh),
        }
    };
}

macro_rules! fwd_loop {
    ($v:expr; $a:expr) => {
        // Inlined into `simd_map`'s per-level loops (see `simd_map::run1`).
        map_fma(
            $v,
            #[inline(always)]
            move |x, fma| if fma { $a.f::<_, true>(x) } else { $a.f::<_, false>(x) },
        )
    };
}

macro_rules! bwd_loop {
    ($x:expr, $g:expr; $a:expr) => {
        zip_map_fma(
            $x,
            $g,
            #[inline(always)]
            move |x, g, fma| if fma { $a.df::<_, true>(x, g) } else { $a.df::<_, false>(x, g) },
        )
    };
}

impl CustomOp1 for Fwd {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let act = self.0;
        let out = float_dispatch!(s, l, act.name(), |v| per_variant!(act, fwd_loop(v)));
        Ok((out, l.shape().clone()))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(arg.detach().apply_op2_no_bwd(&grad.dense()?, &Bwd(self.0))?))
    }
}

impl CustomOp2 for Bwd {
    fn name(&self) -> &'static str {
        "activation_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (act, op) = (self.0, self.0.name());
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => {
                let (x, g) = (data(x, l1, op)?, data(g, l2, op)?);
                CpuStorage::F32(per_variant!(act, bwd_loop(x, g)))
            }
            (CpuStorage::F64(x), CpuStorage::F64(g)) => {
                let (x, g) = (data(x, l1, op)?, data(g, l2, op)?);
                CpuStorage::F64(per_variant!(act, bwd_loop(x, g)))
            }
            _ => candle_core::bail!("{op}: expected float32 or float64 operands of one dtype"),
        };
        Ok((out, l1.shape().clone()))
    }
}

/// The fused kernel of `act` where it applies (float32/float64 CPU tensors, made contiguous by the caller).
pub(crate) fn activation_kernel(x: &Tensor, act: Act) -> Option<impl CustomOp1 + Send + Sync + 'static> {
    (x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64)).then_some(Fwd(act))
}

/// `act(x)`, differentiable: the fused pass for float32/float64 CPU tensors, the
/// Candle-ops formula elsewhere (half types computed in float32, as PyTorch's opmath).
pub(crate) fn activation(x: &Tensor, act: Act) -> Result<Tensor> {
    match (x.device().is_cpu(), x.dtype()) {
        (true, DType::F32 | DType::F64) => x.dense()?.apply_op1(Fwd(act)),
        (_, DType::F16 | DType::BF16) => act.composed(&x.to_dtype(DType::F32)?)?.to_dtype(x.dtype()),
        _ => act.composed(x),
    }
}
