//! Python entry points of `layers::loss`: argument checks, GIL release, errors.
use crate::bindings::tensor::PyTensor;
use crate::layers::loss::*;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;
use std::sync::Arc;

/// `_core._cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)`:
/// the loss for (N, C) float32/float64 CPU logits and N integer class indices, or
/// None where this kernel does not apply (other shapes, dtypes or devices, bad
/// targets, an unknown reduction): the Python implementation then computes the loss
/// or raises its error.
#[pyfunction]
#[pyo3(signature = (input, target, weight, ignore_index, reduction, label_smoothing))]
fn _cross_entropy(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    target: &Bound<'_, PyTensor>,
    weight: Option<&Bound<'_, PyTensor>>,
    ignore_index: i64,
    reduction: &str,
    label_smoothing: f64,
) -> PyResult<Option<PyTensor>> {
    let (x, dt) = input.get().t_dt();
    let t = target.get().t();
    let reduction = match reduction {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        _ => return Ok(None),
    };
    let plain = |v: &Tensor| v.device().is_cpu() && v.is_contiguous();
    if x.rank() != 2 || !matches!(x.dtype(), DType::F32 | DType::F64) || !plain(&x) || t.rank() != 1 || !plain(&t) {
        return Ok(None);
    }
    let (n, c) = (x.dims()[0], x.dims()[1]);
    if t.dims()[0] != n || c == 0 || !(0.0..=1.0).contains(&label_smoothing) {
        return Ok(None);
    }
    if t.dtype().is_float() || target.get().is_bool {
        return Ok(None);
    }
    let Ok(ti) = t.to_dtype(DType::I64).and_then(|t| t.to_vec1::<i64>()) else { return Ok(None) };
    let mut tg = Vec::with_capacity(n);
    for &v in &ti {
        if v == ignore_index {
            tg.push(None);
        } else if v < 0 || v as usize >= c {
            return Ok(None);
        } else {
            tg.push(Some(v as usize));
        }
    }
    let weight = match weight {
        None => None,
        Some(w) => {
            let w = w.get().t();
            if w.dims() != [c] || w.dtype() != x.dtype() || !w.device().is_cpu() {
                return Ok(None);
            }
            match w.to_dtype(DType::F64).and_then(|w| w.to_vec1::<f64>()) {
                Ok(v) => Some(v),
                Err(_) => return Ok(None),
            }
        }
    };
    let spec = Arc::new(Spec { n, c, target: tg, weight, reduction, smoothing: label_smoothing });
    let y = crate::bindings::errors::detach(py, "cross_entropy", || {
        use crate::bindings::errors::OpResult;
        x.apply_op1(CrossEntropy(spec)).op("cross_entropy")
    })?;
    Ok(Some(PyTensor::wrap_dt(y, dt)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_cross_entropy, m)?)?;
    Ok(())
}
