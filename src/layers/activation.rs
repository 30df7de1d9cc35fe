//! Activations as Candle custom ops with their backward: ReLU and exact GELU.
//!
//! ReLU as one Candle custom op with a one-pass backward. Candle's own ReLU
//! backward builds `grad * (x >= 0)` from four ops (zeros, compare, cast, multiply),
//! each a pass and an allocation; in a small network's training step that costs
//! more than the layers around it. The mask is PyTorch's: the gradient flows where
//! the input is > 0 (Candle's `>=` differs at exact zeros).
use crate::ops::approx::{fast_erf, fast_exp};
use crate::ops::cpu::{has_avx2_fma, has_avx512};
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::parallel::{filled_plain, for_chunks, par_ok};
use crate::ops::reduce::GRAIN;
use crate::ops::simd_map::{zip_map, zip_map_fma};
use crate::ops::storage::float_dispatch;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

struct Relu;
/// `(x, grad) -> grad * !(x <= 0)`.
struct ReluGrad;

fn relu_fwd<T: Float>(x: &[T]) -> Vec<T> {
    crate::ops::unary::Fast::Relu.run(x)
}

fn relu_bwd<T: Float>(x: &[T], g: &[T]) -> Vec<T> {
    // PyTorch's threshold_backward: 0 where x <= 0, so the gradient passes at NaN.
    zip_map(x, g, |xv, gv| if xv <= T::ZERO { T::ZERO } else { gv })
}

impl CustomOp1 for Relu {
    fn name(&self) -> &'static str {
        "relu"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "relu", |v| relu_fwd(v));
        Ok((out, l.shape().clone()))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(&grad.dense()?, &ReluGrad)?))
    }
}

impl CustomOp2 for ReluGrad {
    fn name(&self) -> &'static str {
        "relu_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => {
                CpuStorage::F32(relu_bwd(crate::ops::storage::data(x, l1, "relu")?, crate::ops::storage::data(g, l2, "relu")?))
            }
            (CpuStorage::F64(x), CpuStorage::F64(g)) => {
                CpuStorage::F64(relu_bwd(crate::ops::storage::data(x, l1, "relu")?, crate::ops::storage::data(g, l2, "relu")?))
            }
            _ => candle_core::bail!("relu: only float32 and float64 tensors of one dtype are supported"),
        };
        Ok((out, l1.shape().clone()))
    }
}

/// The fused ReLU kernel where it applies (float32/float64 CPU tensors, made contiguous
/// by the caller: `custom::fused_or`).
pub(crate) fn relu_kernel(t: &Tensor) -> Option<impl CustomOp1 + Send + Sync + 'static> {
    (t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64)).then_some(Relu)
}

/// ReLU of `t`: the fused op for float32/float64 CPU tensors (strided views copied
/// densely first), Candle's otherwise (other dtypes and devices keep their exact behaviour).
pub(crate) fn relu(t: &Tensor) -> Result<Tensor> {
    if t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64) {
        t.dense()?.apply_op1(Relu)
    } else {
        t.relu()
    }
}

// ---- GELU (exact erf form) ---------------------------------------------------

const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
const INV_SQRT_2PI: f32 = 0.398_942_3;

#[inline(always)]
fn gelu_chunk<const FMA: bool>(src: &[f32], dst: &mut [f32], grad: bool) {
    if grad {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = gelu_derivative::<FMA>(x);
        }
    } else {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = 0.5 * x * (1.0 + fast_erf::<FMA>(x * SQRT_HALF));
        }
    }
}

/// `gelu_chunk` for AVX-512: the forward 16 lanes at a time, the rest (and the
/// derivative) through `gelu_chunk::<true>`.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gelu_chunk_avx512(src: &[f32], dst: &mut [f32], grad: bool) {
    use std::arch::x86_64::*;
    if grad {
        return gelu_chunk::<true>(src, dst, grad);
    }
    // The forward as `fast_erf` computes it, with the one division replaced by a
    // reciprocal estimate and a Newton step (relative error ~1e-8): a 16-lane
    // division would take most of the time.
    let n = src.len().min(dst.len()) / 16 * 16;
    let c = |v: f32| _mm512_set1_ps(v);
    let (lo, hi, sh, half, one, two) = (c(-4.0), c(4.0), c(SQRT_HALF), c(0.5), c(1.0), c(2.0));
    let mut i = 0;
    while i < n {
        // SAFETY: i + 16 <= n <= src.len(), so the 16 lanes read are inside `src`.
        let x = unsafe { _mm512_loadu_ps(src.as_ptr().add(i)) };
        let z = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x, sh), lo), hi);
        let z2 = _mm512_mul_ps(z, z);
        let mut p = c(-2.726_142_3e-10);
        for k in [2.770_681_4e-8, -2.101_024e-6, -5.692_506_4e-5, -7.349_906_3e-4, -2.954_600_1e-3, -1.609_603_3e-2] {
            p = _mm512_fmadd_ps(p, z2, c(k));
        }
        let mut q = c(-1.456_607_2e-5);
        for k in [-2.133_740_6e-4, -1.682_827e-3, -7.373_329e-3, -1.426_473_9e-2] {
            q = _mm512_fmadd_ps(q, z2, c(k));
        }
        let r = _mm512_rcp14_ps(q);
        let r = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, two));
        let erf = _mm512_mul_ps(_mm512_mul_ps(z, p), r);
        // Exactly +-1 where z was clamped (see fast_erf): z is +-4 there.
        let erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(z), hi), erf, _mm512_mul_ps(z, c(0.25)));
        let y = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, erf));
        // SAFETY: i + 16 <= n <= dst.len(), so the 16 lanes written are inside `dst`.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add(i), y) };
        i += 16;
    }
    gelu_chunk::<true>(&src[n..], &mut dst[n..], grad)
}

/// `gelu_chunk` compiled for AVX2+FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gelu_chunk_avx2(src: &[f32], dst: &mut [f32], grad: bool) {
    gelu_chunk::<true>(src, dst, grad)
}

fn gelu_map(src: &[f32], grad: bool) -> Vec<f32> {
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    // Every chunk is written in full by `gelu_chunk*` before anything reads it.
    filled_plain(src.len(), |out: &mut [f32]| {
        for_chunks(out, GRAIN, par_ok(src.len()), |i, d| {
            let s = &src[i * GRAIN..i * GRAIN + d.len()];
            #[cfg(target_arch = "x86_64")]
            {
                if wide {
                    // SAFETY: `wide` is `has_avx512()`: the CPU supports AVX-512F, AVX2 and FMA.
                    unsafe { gelu_chunk_avx512(s, d, grad) };
                    return;
                }
                if simd {
                    // SAFETY: `simd` is `has_avx2_fma()`: the CPU supports AVX2 and FMA.
                    unsafe { gelu_chunk_avx2(s, d, grad) };
                    return;
                }
            }
            let _ = (wide, simd);
            gelu_chunk::<false>(s, d, grad);
        })
    })
}

/// Exact (erf) GELU on f32, forward or its derivative.
struct Gelu {
    derivative: bool,
}

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "gelu"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("gelu: expected a contiguous input") };
        match s {
            CpuStorage::F32(v) => Ok((CpuStorage::F32(gelu_map(&v[a..b], self.derivative)), l.shape().clone())),
            _ => candle_core::bail!("gelu: fast path supports f32"),
        }
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(arg.detach().dense()?.apply_op2_no_bwd(&grad_res.dense()?, &GeluGrad)?))
    }
}

/// `(x, g) -> g * gelu'(x)` in one pass (no derivative tensor, no second multiply pass).
struct GeluGrad;

impl CustomOp2 for GeluGrad {
    fn name(&self) -> &'static str {
        "gelu_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let (Some((a, b)), Some((c, d))) = (l1.contiguous_offsets(), l2.contiguous_offsets()) else {
            candle_core::bail!("gelu_backward: expected contiguous operands")
        };
        match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => {
                // The AVX2 / AVX-512 variants take the fused-multiply-add polynomials, as the forward.
                let out =
                    zip_map_fma(
                        &x[a..b],
                        &g[c..d],
                        |x, g, fma| if fma { g * gelu_derivative::<true>(x) } else { g * gelu_derivative::<false>(x) },
                    );
                Ok((CpuStorage::F32(out), l1.shape().clone()))
            }
            _ => candle_core::bail!("gelu_backward: fast path supports f32"),
        }
    }
}

/// d/dx [x * Phi(x)] = Phi(x) + x * phi(x).
#[inline(always)]
fn gelu_derivative<const FMA: bool>(x: f32) -> f32 {
    0.5 * (1.0 + fast_erf::<FMA>(x * SQRT_HALF)) + x * INV_SQRT_2PI * fast_exp::<FMA>(-0.5 * x * x)
}

/// The fused exact-GELU kernel where it applies (float32 CPU tensors, made contiguous by the caller).
pub(crate) fn gelu_kernel(t: &Tensor) -> Option<impl CustomOp1 + Send + Sync + 'static> {
    (t.device().is_cpu() && t.dtype() == DType::F32).then_some(Gelu { derivative: false })
}

/// GELU with the exact erf form; the fast kernel for f32 on the CPU, Candle's
/// own `gelu_erf` (one kernel on every device, with its backward) elsewhere.
pub fn gelu_erf(t: &Tensor) -> Result<Tensor> {
    if t.device().is_cpu() && t.dtype() == DType::F32 {
        return t.dense()?.apply_op1(Gelu { derivative: false });
    }
    t.gelu_erf()
}
