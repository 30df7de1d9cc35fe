//! Python entry point of the recurrent layers' time loop (`autograd::recurrent`):
//! argument checks, GIL release, errors.
use crate::autograd::recurrent::{scan, Inputs};
use crate::bindings::errors::{labelled_device_err, labelled_dtype_err, labelled_shape_err, mixed_devices, shape_str, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::layers::recurrent::Cell;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `_rnn_scan(mode, xp, h0, c0, weight_hh, bias_hh, reverse)`: one direction of one
/// layer over every step. `mode` is PyTorch's (`"LSTM"`, `"GRU"`, `"RNN_TANH"`,
/// `"RNN_RELU"`); `xp` (steps, batch, gates * hidden) is the input projection
/// `x W_ih^T + b_ih` of every step; `h0` (and for an LSTM `c0`) is (batch, hidden).
/// Returns every step's `h` (steps, batch, hidden), the last `h` and the last `c`
/// (None but for an LSTM).
#[pyfunction]
#[pyo3(signature = (mode, xp, h0, c0, weight_hh, bias_hh, reverse))]
#[allow(clippy::too_many_arguments)]
fn _rnn_scan(
    py: Python<'_>,
    mode: &str,
    xp: &Bound<'_, PyTensor>,
    h0: &Bound<'_, PyTensor>,
    c0: Option<&Bound<'_, PyTensor>>,
    weight_hh: &Bound<'_, PyTensor>,
    bias_hh: Option<&Bound<'_, PyTensor>>,
    reverse: bool,
) -> PyResult<(PyTensor, PyTensor, Option<PyTensor>)> {
    let cell = match mode {
        "LSTM" => Cell::Lstm,
        "GRU" => Cell::Gru,
        "RNN_TANH" => Cell::RnnTanh,
        "RNN_RELU" => Cell::RnnRelu,
        _ => return Err(PyValueError::new_err(format!("_rnn_scan: unknown mode {mode:?} (LSTM, GRU, RNN_TANH or RNN_RELU)"))),
    };
    let label = format!("[{}]", cell.layer());
    let (xv, dt) = xp.get().v_dt();
    let ins =
        Inputs { xp: xv, h0: h0.get().v(), c0: c0.map(|c| c.get().v()), w_hh: weight_hh.get().v(), b_hh: bias_hh.map(|b| b.get().v()) };
    let names = Inputs {
        xp: "input projection",
        h0: "h0",
        c0: ins.c0.as_ref().map(|_| "c0"),
        w_hh: "weight_hh",
        b_hh: ins.b_hh.as_ref().map(|_| "bias_hh"),
    };
    let present: Vec<(&str, &crate::autograd::Value)> = names.list().into_iter().copied().zip(ins.list()).collect();
    if !ins.xp.data.dtype().is_float() || present.iter().any(|(_, v)| v.data.dtype() != ins.xp.data.dtype()) {
        let name = |d| crate::dtype::DT::of_candle(d).map_or_else(|| format!("{d:?}"), |t| t.name().to_string());
        let got: Vec<String> = present.iter().map(|(n, v)| format!("{n} {}", name(v.data.dtype()))).collect();
        return Err(labelled_dtype_err(&label, format!("expected floating-point tensors of one dtype, got {}", got.join(", "))));
    }
    if let Some(m) = mixed_devices(present.iter().map(|(_, v)| &v.data)) {
        return Err(labelled_device_err(&label, m));
    }
    let xd = ins.xp.data.dims().to_vec();
    let hd = ins.h0.data.dims().to_vec();
    if hd.len() != 2 || hd[1] == 0 {
        return Err(labelled_shape_err(&label, format!("expected h0 of shape (batch, hidden), got {}", shape_str(&hd))));
    }
    let (b, h) = (hd[0], hd[1]);
    let gh = cell.gates() * h;
    if xd.len() != 3 || xd[1] != b || xd[2] != gh {
        return Err(labelled_shape_err(
            &label,
            format!("expected an input projection of shape (steps, {b}, {gh}) for h0 {}, got {}", shape_str(&hd), shape_str(&xd)),
        ));
    }
    if xd[0] == 0 {
        return Err(labelled_shape_err(&label, "expected a sequence of at least one step, got length 0"));
    }
    if ins.w_hh.data.dims() != [gh, h] {
        return Err(labelled_shape_err(
            &label,
            format!("expected weight_hh of shape [{gh}, {h}], got {}", shape_str(ins.w_hh.data.dims())),
        ));
    }
    if let Some(bv) = &ins.b_hh {
        if bv.data.dims() != [gh] {
            return Err(labelled_shape_err(&label, format!("expected bias_hh of shape [{gh}], got {}", shape_str(bv.data.dims()))));
        }
    }
    match (&ins.c0, cell) {
        (Some(c), Cell::Lstm) if c.data.dims() != hd.as_slice() => {
            return Err(labelled_shape_err(&label, format!("expected c0 of shape {}, got {}", shape_str(&hd), shape_str(c.data.dims()))));
        }
        (None, Cell::Lstm) => return Err(labelled_shape_err(&label, "an LSTM needs the initial cell state c0")),
        (Some(_), c) if c != Cell::Lstm => return Err(labelled_shape_err(&label, "only an LSTM has a cell state; got c0")),
        _ => {}
    }
    let s = crate::bindings::errors::detach(py, &label, || scan(cell, reverse, &ins).op(&label))?;
    Ok((PyTensor::wrap_vdt(s.out, dt), PyTensor::wrap_vdt(s.h_n, dt), s.c_n.map(|c| PyTensor::wrap_vdt(c, dt))))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_rnn_scan, m)?)?;
    Ok(())
}
