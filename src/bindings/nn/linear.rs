//! Python entry points of `layers::linear`: argument checks, GIL release, errors.
use crate::autograd::{ops, Value};
use crate::bindings::errors::{labelled_dtype_err, labelled_shape_err, shape_str, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::layers::linear::OP;
use candle_core::{Result, Shape};
use pyo3::prelude::*;

/// `_linear(input, weight, bias=None, op="linear:")`: `input @ weight.T + bias` over the
/// last dim; the one check of its arguments, errors labelled `op` (`"[Linear]"` from the layer).
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None, op="linear:"))]
fn _linear(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    op: &str,
) -> PyResult<PyTensor> {
    let (xv, dt) = input.get().v_dt();
    let (wv, wdt) = weight.get().v_dt();
    let bv = bias.map(|b| b.get().v());
    let (x, w) = (xv.data.clone(), wv.data.clone());
    let b = bias.map(|b| b.get().t_dt());
    if !dt.is_float() || wdt != dt || b.as_ref().is_some_and(|(_, bdt)| *bdt != dt) {
        let bd = b.as_ref().map_or(String::new(), |(_, d)| format!(", bias {}", d.name()));
        return Err(labelled_dtype_err(
            op,
            format!("expected floating-point tensors of one dtype, got input {}, weight {}{bd}", dt.name(), wdt.name()),
        ));
    }
    if w.rank() != 2 || x.rank() == 0 || x.dims()[x.rank() - 1] != w.dims()[1] {
        let k = w.dims().get(1).map_or("in_features".to_string(), |k| k.to_string());
        return Err(labelled_shape_err(
            op,
            format!(
                "expected input with last dimension {k} for weight {} (out_features, in_features), got shape {}",
                shape_str(w.dims()),
                shape_str(x.dims())
            ),
        ));
    }
    let n = w.dims()[0];
    if let Some((bt, _)) = &b {
        if bt.dims() != [n] {
            return Err(labelled_shape_err(
                op,
                format!("bias shape {} does not fit weight shape {} (expects [{n}])", shape_str(bt.dims()), shape_str(w.dims())),
            ));
        }
    }
    if let Some(m) = crate::bindings::errors::mixed_devices([&x, &w].into_iter().chain(b.as_ref().map(|(t, _)| t))) {
        return Err(crate::bindings::errors::labelled_device_err(op, m));
    }
    let lead = x.dims()[..x.rank() - 1].to_vec();
    let k = w.dims()[1];
    let m: usize = lead.iter().product();
    let mut shape = lead.clone();
    shape.push(n);
    let run = || -> Result<Value> {
        let x2 = ops::reshape(&xv, &Shape::from((m, k)))?;
        ops::reshape(&ops::linear(&x2, &wv, bv.as_ref())?, &Shape::from(shape))
    };
    let out = crate::bindings::errors::detach(py, OP, || run().op(OP))?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_linear, m)?)?;
    Ok(())
}
