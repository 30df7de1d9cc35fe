//! The one place where Rust errors become Python exceptions.
//!
//! Every fallible call in the bindings goes through [`OpResult::op`] (for Candle
//! errors) or one of the `*_err` constructors below, so the mapping from failure
//! kind to Python exception class lives here and nowhere else. Messages are
//! `"<op>: <what went wrong>"`, one line, never a Rust backtrace.
use candle_core::Error as CErr;
use pyo3::create_exception;
use pyo3::exceptions::{PyIndexError, PyRuntimeError, PyTypeError, PyValueError, PyZeroDivisionError};
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
/// DTypeError `op: expected a floating point input, got <dtype>` unless `dt` is a float dtype.
pub fn require_float(op: &str, dt: crate::dtype::DT) -> PyResult<()> {
    if dt.is_float() {
        Ok(())
    } else {
        Err(dtype_err(op, format!("expected a floating point input, got {}", dt.name())))
    }
}
pub fn runtime_err(op: &str, msg: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(format!("{op}: {msg}"))
}
/// Errors whose label carries its own punctuation: a layer (`"[Conv2d]"`, MLX's style)
/// or a functional name with its colon (`"conv2d:"`), as the Python layers pass them.
pub fn labelled_shape_err(label: &str, msg: impl std::fmt::Display) -> PyErr {
    ShapeError::new_err(format!("{label} {msg}"))
}
pub fn labelled_device_err(label: &str, msg: impl std::fmt::Display) -> PyErr {
    DeviceError::new_err(format!("{label} {msg}"))
}
pub fn labelled_dtype_err(label: &str, msg: impl std::fmt::Display) -> PyErr {
    DTypeError::new_err(format!("{label} {msg}"))
}
pub fn zero_div_err(op: &str) -> PyErr {
    PyZeroDivisionError::new_err(format!("{op}: integer division by zero"))
}

/// A shape as every message prints it, from Rust and from Python: `[2, 3]`, `[8]`, `[]`.
pub fn shape_str(dims: &[usize]) -> String {
    format!("{dims:?}")
}

/// A device as PyTorch prints it: `cpu`, `cuda:0`, `metal:0`.
pub fn device_str(d: &candle_core::Device) -> String {
    match d.location() {
        candle_core::DeviceLocation::Cpu => "cpu".to_string(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// The message for tensors on several devices (`expected all tensors on one device,
/// got cpu and cuda:0`), or None when they share one.
pub fn mixed_devices<'a>(ts: impl IntoIterator<Item = &'a candle_core::Tensor>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for t in ts {
        let d = device_str(t.device());
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    (seen.len() > 1).then(|| format!("expected all tensors on one device, got {}", seen.join(" and ")))
}

/// DeviceError (`op: expected all tensors on one device, ...`) unless every tensor is on one device.
pub fn same_device<'a>(op: &str, ts: impl IntoIterator<Item = &'a candle_core::Tensor>) -> PyResult<()> {
    mixed_devices(ts).map_or(Ok(()), |m| Err(device_err(op, m)))
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

const PY_ERR_MARK: &str = "a Python callback raised an exception";

thread_local! {
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// Carry an exception raised by Python code that Rust called (a hook, a custom
/// Function's backward) through a Candle error: `candle_to_py` gives it back
/// unchanged. The engine runs on the calling thread, so a thread-local holds it.
pub fn py_to_candle(e: PyErr) -> CErr {
    PENDING.with(|p| *p.borrow_mut() = Some(e));
    CErr::Msg(PY_ERR_MARK.into())
}

/// Map one Candle error to the Python exception a user expects.
pub fn candle_to_py(op: &str, e: CErr) -> PyErr {
    let inner = innermost(&e);
    let msg = inner.to_string();
    if msg == PY_ERR_MARK {
        if let Some(e) = PENDING.with(|p| p.take()) {
            return e;
        }
    }
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
        CErr::EmptyTensor { .. } | CErr::OpRequiresAtLeastOneTensor { .. } | CErr::OpRequiresAtLeastTwoTensors { .. } => value_err(op, msg),
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
        CErr::Io(io) if io.kind() == std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("{op}: {msg}")),
        CErr::SafeTensor(_) | CErr::Io(_) | CErr::CannotFindTensor { .. } => value_err(op, msg),
        CErr::BackwardNotSupported { .. } => runtime_err(op, msg),
        // The autograd engine's own errors (freed graph, modified saved tensor, no
        // second-order formula) are RuntimeErrors, as in PyTorch.
        CErr::Msg(_) if crate::autograd::engine::is_engine_msg(&msg) => runtime_err(op, msg),
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

/// Run `f` on the active thread pool (`ops::pool`: ours after `set_num_threads` or in
/// a forked child; on the default path a plain call), carrying this thread's state
/// there and back: grad and inference mode and autocast (read when ops record their
/// graph nodes and pick dtypes) go with `f`, and an exception a Python callback
/// raised inside it (`PENDING`) comes back.
pub(crate) fn on_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if !crate::ops::pool::is_active() {
        return f();
    }
    let modes = crate::autograd::mode::snapshot();
    let cast = crate::bindings::autocast::snapshot();
    let (out, pending) = crate::ops::pool::install(move || {
        let (m0, c0) = (crate::autograd::mode::restore(modes), crate::bindings::autocast::restore(cast));
        let out = f();
        let pending = PENDING.with(|p| p.borrow_mut().take());
        crate::autograd::mode::restore(m0);
        crate::bindings::autocast::restore(c0);
        (out, pending)
    });
    if pending.is_some() {
        PENDING.with(|p| *p.borrow_mut() = pending);
    }
    out
}

/// Release the GIL around heavy work and turn a panic inside it into a
/// `BackendError` naming the op. Every long-running entry point uses this, so a
/// bug in a kernel or a dependency never surfaces as pyo3's `PanicException`.
pub fn detach<T: Send>(py: Python<'_>, op: &str, f: impl FnOnce() -> PyResult<T> + Send) -> PyResult<T> {
    // The closure runs without the GIL; the PyErr it may build is only
    // materialised as a Python object once the GIL is back.
    let r = py.detach(|| on_pool(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))));
    match r {
        Ok(r) => r,
        Err(payload) => Err(panic_err(op, payload)),
    }
}

/// `detach` for Candle work: `detach_op(py, "cat", || Tensor::cat(..))?`
/// maps the Candle error (or a panic) to the exception for op `op`.
pub fn detach_op<T: Send>(py: Python<'_>, op: &str, f: impl FnOnce() -> candle_core::Result<T> + Send) -> PyResult<T> {
    detach(py, op, || f().op(op))
}

/// Elements from which releasing the GIL around an op pays for its cost (~100 ns).
pub const DETACH_ELEMS: usize = 1 << 15;

/// `detach` for helpers that return Candle results: the GIL is released only
/// when `n` elements make it pay, and a panic comes back as a Candle error that
/// `.op(name)` then maps to `BackendError` (`candle_to_py`'s catch-all arm).
pub fn detach_if<T: Send>(n: usize, f: impl FnOnce() -> candle_core::Result<T> + Send) -> candle_core::Result<T> {
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|p| Err(CErr::Msg(format!("internal error in the backend: {}", panic_text(&p)))))
    };
    if n >= DETACH_ELEMS {
        Python::attach(|py| py.detach(|| on_pool(run)))
    } else {
        run()
    }
}

fn panic_text(payload: &Box<dyn std::any::Any + Send>) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    // One line: the exception message must stay short whatever the payload.
    what.lines().next().unwrap_or("").chars().take(300).collect()
}

fn panic_err(op: &str, payload: Box<dyn std::any::Any + Send>) -> PyErr {
    BackendError::new_err(format!("{op}: internal error in the backend: {}", panic_text(&payload)))
}

/// A Candle custom op whose CPU kernel panics (for `_debug_panic("op")`).
struct PanicOp;
impl candle_core::CustomOp1 for PanicOp {
    fn name(&self) -> &'static str {
        "panic"
    }
    fn cpu_fwd(
        &self,
        _: &candle_core::CpuStorage,
        _: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        panic!("deliberate panic inside a tensor op's kernel")
    }
}

/// `_core._debug_panic(where)`: panic on purpose, so tests can check that a
/// panic becomes `BackendError` and the interpreter lives on. `where` is
/// "thread" (the calling thread, GIL released), "rayon" (a rayon worker),
/// "op" (a Candle custom op, through `.op()`), or "guard" (GIL held).
#[pyfunction]
fn _debug_panic(py: Python<'_>, r#where: &str) -> PyResult<()> {
    let op = "_debug_panic";
    match r#where {
        "thread" => detach(py, op, || -> PyResult<()> { panic!("deliberate panic in the calling thread") }),
        "rayon" => detach(py, op, || {
            use rayon::prelude::*;
            let s: u64 =
                (0..1024u64).into_par_iter().map(|i| if i == 777 { panic!("deliberate panic in a rayon worker") } else { i }).sum();
            Ok(s).map(|_| ())
        }),
        "op" => {
            let t = candle_core::Tensor::zeros(4, candle_core::DType::F32, &candle_core::Device::Cpu).op(op)?;
            detach_if(1 << 20, || t.apply_op1_no_bwd(&PanicOp)).op(op).map(|_| ())
        }
        "guard" => guard(op, || -> PyResult<()> { panic!("deliberate panic with the GIL held") }),
        other => Err(value_err(op, format!("where must be 'thread', 'rayon', 'op' or 'guard', got {other:?}"))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("DTypeError", py.get_type::<DTypeError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("BackendError", py.get_type::<BackendError>())?;
    m.add_function(wrap_pyfunction!(_debug_panic, m)?)?;
    Ok(())
}
