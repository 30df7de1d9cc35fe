//! The Python-side pieces the core's results use: the tensor formatter and the
//! `(values, indices)` result types of `max` / `min`.
//!
//! The package imports `_core`, never the reverse: printing is ergonomics, kept in
//! Python (`candle_py/_format.py`), and the package hands its formatter to the core
//! at import (`_core._set_formatter`). The result types are plain named tuples made
//! here, as PyTorch's `torch.return_types.max`.
use crate::bindings::tensor::PyTensor;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

static FORMATTER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static MINMAX: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// `_core._set_formatter(f)`: `repr(tensor)` calls `f(tensor)` from now on (set once, by the package).
#[pyfunction]
fn _set_formatter(py: Python<'_>, f: Bound<'_, PyAny>) -> PyResult<()> {
    if !f.is_callable() {
        return Err(crate::bindings::errors::type_err("_set_formatter", "expected a callable"));
    }
    // A second registration (a reloaded package) keeps the first formatter.
    let _ = FORMATTER.set(py, f.unbind());
    Ok(())
}

/// The tensor's repr: the registered formatter's, or a one-line summary without one.
pub(crate) fn repr(slf: &Bound<'_, PyTensor>) -> PyResult<String> {
    let py = slf.py();
    match FORMATTER.get(py) {
        Some(f) => f.call1(py, (slf,))?.extract(py),
        None => {
            let me = slf.get();
            Ok(format!("tensor(<shape {}, {}>)", crate::bindings::errors::shape_str(me.t().dims()), me.dt().name()))
        }
    }
}

/// `max` / `min` with a dim: the named tuple `(values, indices)`, typed `max` or `min`.
pub(crate) fn minmax_result<'py>(py: Python<'py>, values: PyTensor, indices: PyTensor, is_max: bool) -> PyResult<Bound<'py, PyAny>> {
    let (mx, mn) = MINMAX.get_or_try_init(py, || -> PyResult<_> {
        let namedtuple = py.import("collections")?.getattr("namedtuple")?;
        let kw = PyDict::new(py);
        kw.set_item("module", "candle_py.return_types")?;
        let make = |name: &str| -> PyResult<Py<PyAny>> { Ok(namedtuple.call((name, ("values", "indices")), Some(&kw))?.unbind()) };
        Ok((make("max")?, make("min")?))
    })?;
    let ty = if is_max { mx } else { mn };
    ty.bind(py).call1((Py::new(py, values)?, Py::new(py, indices)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_formatter, m)?)?;
    Ok(())
}
