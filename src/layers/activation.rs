//! ReLU as one Candle custom op with a one-pass backward. Candle's own ReLU
//! backward builds `grad * (x >= 0)` from four ops (zeros, compare, cast, multiply),
//! each a pass and an allocation; in a small network's training step that costs
//! more than the layers around it. The mask is PyTorch's: the gradient flows where
//! the input is > 0 (Candle's `>=` differs at exact zeros).
use crate::parallel::{map, zip_map};
use super::Elem;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

struct Relu;
/// `(x, grad) -> grad * (x > 0)`.
struct ReluGrad;

fn relu_fwd<T: Elem>(x: &[T]) -> Vec<T> {
    // NaN stays NaN (`v < 0` is false), as torch.relu.
    map(x, |v| if v < T::ZERO { T::ZERO } else { v })
}

fn relu_bwd<T: Elem>(x: &[T], g: &[T]) -> Vec<T> {
    zip_map(x, g, |xv, gv| if xv > T::ZERO { gv } else { T::ZERO })
}

impl CustomOp1 for Relu {
    fn name(&self) -> &'static str {
        "relu"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = super::float_dispatch!(s, l, "relu", |v| relu_fwd(v));
        Ok((out, l.shape().clone()))
    }
    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(&grad.contiguous()?, &ReluGrad)?))
    }
}

impl CustomOp2 for ReluGrad {
    fn name(&self) -> &'static str {
        "relu_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => {
                CpuStorage::F32(relu_bwd(super::data(x, l1, "relu")?, super::data(g, l2, "relu")?))
            }
            (CpuStorage::F64(x), CpuStorage::F64(g)) => {
                CpuStorage::F64(relu_bwd(super::data(x, l1, "relu")?, super::data(g, l2, "relu")?))
            }
            _ => candle_core::bail!("relu: only float32 and float64 tensors of one dtype are supported"),
        };
        Ok((out, l1.shape().clone()))
    }
}

/// ReLU of `t`: the fused op for contiguous float32/float64 CPU tensors, Candle's
/// otherwise (other dtypes, devices and strided views keep their exact behaviour).
pub(crate) fn relu(t: &Tensor) -> Result<Tensor> {
    if t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64) && t.is_contiguous() {
        t.apply_op1(Relu)
    } else {
        t.relu()
    }
}
