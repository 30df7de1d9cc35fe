//! The one place where Rust errors become Python exceptions.
//!
//! Every fallible call in the bindings goes through [`OpResult::op`] (for Candle
//! errors) or one of the `*_err` constructors below, so the mapping from failure
//! kind to Python exception class lives here and nowhere else. Messages are
//! `"<op>: <what went wrong>"`, one line, never a Rust backtrace.
use candle_core::Error as CErr;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyIndexError, PyRuntimeError, PyTypeError, PyValueError, PyZeroDivisionError,
};
use pyo3::prelude::*;

// candle_py's own exceptions subclass the builtins that API.md promises, so
// `except ValueError` keeps working for users who never heard of ShapeError.
create_exception!(candle_py, ShapeError, PyValueError, "Shapes do not fit the operation.");
create_exception!(candle_py, DTypeError, PyTypeError, "A dtype the operation does not accept.");
create_exception!(candle_py, DeviceError, PyRuntimeError, "A device that is missing, unbuilt or mismatched.");
create_exception!(candle_py, BackendError, PyRuntimeError, "A failure inside the Candle backend.");

pub fn value_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{op}: {msg}"))
}
pub fn shape_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    ShapeError::new_err(format!("{op}: {msg}"))
}
pub fn type_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    PyTypeError::new_err(format!("{op}: {msg}"))
}
pub fn dtype_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    DTypeError::new_err(format!("{op}: {msg}"))
}
pub fn index_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    PyIndexError::new_err(format!("{op}: {msg}"))
}
pub fn device_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    DeviceError::new_err(format!("{op}: {msg}"))
}
pub fn runtime_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("{op}: {msg}"))
}
pub fn zero_div_err(op: &str) -> PyErr {
    PyZeroDivisionError::new_err(format!("{op}: integer division by zero"))
}

/// Strip Candle's wrappers (backtraces, context) down to the error that says what happened.
fn innermost(e: &CErr) -> &CErr {
    match e {
        CErr::WithBacktrace { inner, .. } => innermost(inner),
        CErr::Context { inner, .. } => innermost(inner),
        CErr::WithPath { inner, .. } => innermost(inner),
        other => other,
    }
}

/// Map one Candle error to the Python exception a user expects.
pub fn candle_to_py(op: &str, e: CErr) -> PyErr {
    let inner = innermost(&e);
    let msg = inner.to_string();
    let msg = msg.lines().next().unwrap_or("").to_string();
    match inner {
        CErr::UnexpectedDType { .. }
        | CErr::DTypeMismatchBinaryOp { .. }
        | CErr::UnsupportedDTypeForOp(..)
        | CErr::UnsupportedSafeTensorDtype(..) => dtype_err(op, msg),
        CErr::DimOutOfRange { .. } | CErr::InvalidIndex { .. } => index_err(op, msg),
        CErr::DuplicateDimIndex { .. }
        | CErr::UnexpectedNumberOfDims { .. }
        | CErr::UnexpectedShape { .. }
        | CErr::ShapeMismatch { .. }
        | CErr::ShapeMismatchBinaryOp { .. }
        | CErr::ShapeMismatchCat { .. }
        | CErr::ShapeMismatchSplit { .. }
        | CErr::OnlySingleDimension { .. }
        | CErr::NarrowInvalidArgs { .. }
        | CErr::Conv1dInvalidArgs { .. }
        | CErr::BroadcastIncompatibleShapes { .. }
        | CErr::MatMulUnexpectedStriding(..) => shape_err(op, msg),
        CErr::EmptyTensor { .. }
        | CErr::OpRequiresAtLeastOneTensor { .. }
        | CErr::OpRequiresAtLeastTwoTensors { .. } => value_err(op, msg),
        CErr::DeviceMismatchBinaryOp { .. } => device_err(op, msg),
        CErr::NotCompiledWithCudaSupport => device_err(
            op,
            "CUDA was requested but this candle_py build lacks the `cuda` feature \
             (rebuild with `maturin build --release --features cuda`)",
        ),
        CErr::NotCompiledWithMetalSupport => device_err(
            op,
            "Metal was requested but this candle_py build lacks the `metal` feature \
             (rebuild with `maturin build --release --features metal`)",
        ),
        CErr::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            pyo3::exceptions::PyFileNotFoundError::new_err(format!("{op}: {msg}"))
        }
        CErr::SafeTensor(_) | CErr::Io(_) | CErr::CannotFindTensor { .. } => value_err(op, msg),
        CErr::BackwardNotSupported { .. } => runtime_err(op, msg),
        _ => BackendError::new_err(format!("{op}: {msg}")),
    }
}

/// `.op("name")?` turns a Candle result into a Python result with the op named.
pub trait OpResult<T> {
    fn op(self, name: &str) -> PyResult<T>;
}

impl<T> OpResult<T> for candle_core::Result<T> {
    #[inline]
    fn op(self, name: &str) -> PyResult<T> {
        self.map_err(|e| candle_to_py(name, e))
    }
}

/// Run Rust work that may panic inside a dependency; a panic becomes a
/// `BackendError` naming the op instead of a `PanicException` or an abort.
pub fn guard<T>(op: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(panic_err(op, payload)),
    }
}

/// Release the GIL around heavy work and turn a panic inside it into a
/// `BackendError` naming the op. Every long-running entry point uses this, so a
/// bug in a kernel or a dependency never surfaces as pyo3's `PanicException`.
pub fn detach<T: Send>(
    py: Python<'_>,
    op: &str,
    f: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
    // The closure runs without the GIL; the PyErr it may build is only
    // materialised as a Python object once the GIL is back.
    let r = py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    match r {
        Ok(r) => r,
        Err(payload) => Err(panic_err(op, payload)),
    }
}

fn panic_err(op: &str, payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    BackendError::new_err(format!("{op}: internal error in the backend: {what}"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("DTypeError", py.get_type::<DTypeError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("BackendError", py.get_type::<BackendError>())?;
    Ok(())
}
