//! Python entry points of `layers::norm`: argument checks, GIL release, errors.
use crate::bindings::errors::shape_err;
use crate::bindings::tensor::PyTensor;
use crate::layers::norm::{batch_norm, layer_norm};
use pyo3::prelude::*;

/// `_layer_norm(x, weight, bias, d, eps)`: normalize over the last `d` elements.
#[pyfunction]
fn _layer_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: &Bound<'_, PyTensor>,
    d: usize,
    eps: f64,
) -> PyResult<PyTensor> {
    let (xt, dt) = x.get().t_dt();
    let (w, b) = (weight.get().t(), bias.get().t());
    if w.elem_count() != d || b.elem_count() != d || (d > 0 && xt.elem_count() % d != 0) {
        return Err(shape_err(
            "layer_norm",
            format!("weight {:?} / bias {:?} do not fit the last {d} elements of input {:?}", w.dims(), b.dims(), xt.dims()),
        ));
    }
    let out = crate::bindings::errors::detach_op(py, "layer_norm", || layer_norm(&xt, &w, &b, d, eps))?;
    Ok(PyTensor::wrap_dt(out, dt))
}

/// `_batch_norm(x, weight, bias, mean, var, batch_stats, eps) -> y` over dim 1 of (N, C, ...).
/// With `batch_stats` the gradient also flows through the statistics (training).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _batch_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: &Bound<'_, PyTensor>,
    mean: &Bound<'_, PyTensor>,
    var: &Bound<'_, PyTensor>,
    batch_stats: bool,
    eps: f64,
) -> PyResult<PyTensor> {
    let (xt, dt) = x.get().t_dt();
    if xt.rank() < 2 {
        return Err(shape_err("batch_norm", format!("expected (N, C, ...) input, got {:?}", xt.dims())));
    }
    let c = xt.dims()[1];
    let (w, b) = (weight.get().t(), bias.get().t());
    let (mt, vt) = (mean.get().t(), var.get().t());
    if mt.elem_count() != c || vt.elem_count() != c {
        return Err(shape_err("batch_norm", format!("statistics of {} channels for input {:?}", mt.elem_count(), xt.dims())));
    }
    let out = crate::bindings::errors::detach_op(py, "batch_norm", || batch_norm(&xt, &w, &b, &mt, &vt, batch_stats, eps))?;
    Ok(PyTensor::wrap_dt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_batch_norm, m)?)?;
    Ok(())
}
