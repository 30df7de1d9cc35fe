//! Python entry points of `layers::linear`: argument checks, GIL release, errors.
use crate::bindings::errors::{dtype_err, shape_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::layers::linear::*;
use candle_core::{Result, Tensor};
use pyo3::prelude::*;

/// `_linear(input, weight, bias=None)`: `input @ weight.T + bias` over the last dim.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None))]
fn _linear(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    let (x, dt) = input.get().t_dt();
    let (w, wdt) = weight.get().t_dt();
    let b = bias.map(|b| b.get().t_dt());
    if !dt.is_float() || wdt != dt || b.as_ref().is_some_and(|(_, bdt)| *bdt != dt) {
        let bd = b.as_ref().map_or(String::new(), |(_, d)| format!(", bias {}", d.name()));
        return Err(dtype_err(
            OP,
            format!("expected floating-point tensors of one dtype, got input {}, weight {}{bd}", dt.name(), wdt.name()),
        ));
    }
    if w.rank() != 2 || x.rank() == 0 || x.dims()[x.rank() - 1] != w.dims()[1] {
        return Err(shape_err(
            OP,
            format!(
                "input shape {:?} does not fit weight shape {:?} (expects input (..., {}) and weight (out_features, in_features))",
                x.dims(),
                w.dims(),
                w.dims().get(1).copied().unwrap_or(0)
            ),
        ));
    }
    let n = w.dims()[0];
    if let Some((bt, _)) = &b {
        if bt.dims() != [n] {
            return Err(shape_err(OP, format!("bias shape {:?} does not fit weight shape {:?} (expects ({n},))", bt.dims(), w.dims())));
        }
    }
    if !x.device().same_device(w.device()) || b.as_ref().is_some_and(|(bt, _)| !bt.device().same_device(x.device())) {
        return Err(crate::bindings::errors::device_err(
            OP,
            format!("input, weight and bias must be on one device, got {:?} and {:?}", x.device().location(), w.device().location()),
        ));
    }
    let lead = x.dims()[..x.rank() - 1].to_vec();
    let k = w.dims()[1];
    let m: usize = lead.iter().product();
    let mut shape = lead.clone();
    shape.push(n);
    let run = || -> Result<Tensor> { linear2d(&x.reshape((m, k))?, &w, b.as_ref().map(|(t, _)| t))?.reshape(shape) };
    let out = crate::bindings::errors::detach(py, OP, || run().op(OP))?;
    Ok(PyTensor::wrap_dt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_linear, m)?)?;
    Ok(())
}
