//! `_core._rope`: the Python entry point of `layers::rope` (argument checks, GIL
//! release, errors); differentiable through `autograd::composed::rope`.
use crate::autograd::Value;
use crate::bindings::errors::{require_float, shape_err, shape_str};
use crate::bindings::tensor::PyTensor;
use crate::layers::rope::rope;
use pyo3::prelude::*;
use std::sync::Arc;

/// `_rope(x, cos, sin, interleaved=False)`: x (B, H, T, D) with D even, cos and sin
/// (T, D/2). The result has x's dtype (the tables are cast to it).
#[pyfunction]
#[pyo3(signature = (x, cos, sin, interleaved=false))]
fn _rope(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    cos: &Bound<'_, PyTensor>,
    sin: &Bound<'_, PyTensor>,
    interleaved: bool,
) -> PyResult<PyTensor> {
    const OP: &str = "rotary_embedding";
    let (xv, dt) = x.get().v_dt();
    let (cv, cdt) = cos.get().v_dt();
    let (sv, sdt) = sin.get().v_dt();
    for d in [dt, cdt, sdt] {
        require_float(OP, d)?;
    }
    crate::bindings::errors::same_device(OP, [&xv.data, &cv.data, &sv.data])?;
    let xd = xv.data.dims().to_vec();
    let fits = xd.len() == 4 && xd[3] % 2 == 0 && [&cv, &sv].iter().all(|t| t.data.dims() == [xd[2], xd[3] / 2]);
    if !fits {
        return Err(shape_err(
            OP,
            format!(
                "expected x of shape [B, H, T, D] with D even and cos, sin of shape [T, D/2], got {}, {} and {}",
                shape_str(&xd),
                shape_str(cv.data.dims()),
                shape_str(sv.data.dims())
            ),
        ));
    }
    let composed: crate::autograd::composed::Composed =
        Arc::new(move |t: &[Value]| crate::autograd::composed::rope(&t[0], &t[1], &t[2], interleaved));
    let out = crate::bindings::errors::detach_op(py, OP, || {
        // In the graph, the composed form's nodes are the backward.
        crate::autograd::custom::fused_or(
            "RopeBackward0",
            None,
            &[&xv, &cv, &sv],
            move |t| rope(&t[0], &t[1], &t[2], interleaved),
            composed,
        )
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_rope, m)?)?;
    Ok(())
}
