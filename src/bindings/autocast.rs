//! Autocast state (`torch.autocast`): per thread and per device type, whether
//! autocast is on and its lower-precision dtype, as in PyTorch.
//!
//! The state lives here, in the core, because `matmul` (and so `@`, `mm`, `bmm`)
//! is a Tensor method that must see it; the functional layer (`F.linear`,
//! `F.conv*`, `F.prelu`, `F.scaled_dot_product_attention`, the losses) reads the
//! same state through `_core._autocast_state` and casts in Python. The context
//! manager itself is Python's (`candle_py/amp/autocast_mode.py`).
use crate::bindings::dtype::{extract_dtype, PyDType};
use crate::bindings::errors::runtime_err;
use crate::dtype::DT;
use candle_core::Device;
use pyo3::prelude::*;
use std::cell::Cell;

/// The device types autocast keeps a state for (PyTorch's names).
const KINDS: [&str; 3] = ["cpu", "cuda", "mps"];

thread_local! {
    /// Per device type: `Some(dtype)` while autocast is on, else `None`.
    static STATE: Cell<[Option<DT>; 3]> = const { Cell::new([None; 3]) };
    /// Per device type: the dtype autocast uses when switched on (PyTorch's defaults).
    static DTYPE: Cell<[DT; 3]> = const { Cell::new([DT::BF16, DT::F16, DT::F16]) };
}

/// This thread's autocast state (on/off and dtype per device type), to carry onto
/// another thread (`restore`).
pub(crate) fn snapshot() -> ([Option<DT>; 3], [DT; 3]) {
    (STATE.with(|s| s.get()), DTYPE.with(|d| d.get()))
}

/// Set this thread's autocast state as `snapshot` gave it; returns the previous one.
pub(crate) fn restore(state: ([Option<DT>; 3], [DT; 3])) -> ([Option<DT>; 3], [DT; 3]) {
    let prev = snapshot();
    STATE.with(|s| s.set(state.0));
    DTYPE.with(|d| d.set(state.1));
    prev
}

fn kind_index(device_type: &str) -> PyResult<usize> {
    KINDS.iter().position(|k| *k == device_type).ok_or_else(|| {
        runtime_err("autocast", format!("unsupported device type {device_type:?}: candle_py's autocast knows 'cpu', 'cuda' and 'mps'"))
    })
}

/// The autocast dtype for tensors on `dev`, when autocast is on for its device type.
#[inline]
pub fn lower_dtype(dev: &Device) -> Option<DT> {
    let i = match dev {
        Device::Cpu => 0,
        Device::Cuda(_) => 1,
        Device::Metal(_) => 2,
    };
    STATE.with(|s| s.get()[i])
}

/// Whether autocast casts a tensor of dtype `dt`: floats other than float64 (PyTorch's
/// `is_eligible`); integer and float64 tensors are left alone.
#[inline]
pub fn eligible(dt: DT) -> bool {
    dt.is_float() && dt != DT::F64
}

/// `_autocast_dtype_of(tensor)`: the dtype autocast casts this tensor to — its
/// device's autocast dtype when autocast is on there and the tensor is eligible —
/// else None. One call per operand for the functional layer's casts.
#[pyfunction]
fn _autocast_dtype_of(t: &Bound<'_, crate::bindings::tensor::PyTensor>) -> Option<PyDType> {
    let me = t.get();
    let dt = me.dt();
    match lower_dtype(me.t().device()) {
        Some(low) if eligible(dt) => Some(PyDType { dt: low }),
        _ => None,
    }
}

/// `_autocast_state(device_type) -> (enabled, dtype)`.
#[pyfunction]
fn _autocast_state(device_type: &str) -> PyResult<(bool, PyDType)> {
    let i = kind_index(device_type)?;
    let on = STATE.with(|s| s.get()[i]).is_some();
    Ok((on, PyDType { dt: DTYPE.with(|d| d.get()[i]) }))
}

/// `_set_autocast_state(device_type, enabled, dtype)`: this thread's autocast for one
/// device type; the dtype must be a floating point dtype.
#[pyfunction]
fn _set_autocast_state(device_type: &str, enabled: bool, dtype: &Bound<'_, PyAny>) -> PyResult<()> {
    let i = kind_index(device_type)?;
    let dt = extract_dtype(dtype)?;
    if !dt.is_float() {
        return Err(crate::bindings::errors::dtype_err("autocast", format!("autocast needs a floating point dtype, got {}", dt.name())));
    }
    DTYPE.with(|d| {
        let mut v = d.get();
        v[i] = dt;
        d.set(v)
    });
    STATE.with(|s| {
        let mut v = s.get();
        v[i] = if enabled { Some(dt) } else { None };
        s.set(v)
    });
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_autocast_state, m)?)?;
    m.add_function(wrap_pyfunction!(_autocast_dtype_of, m)?)?;
    m.add_function(wrap_pyfunction!(_set_autocast_state, m)?)?;
    Ok(())
}
