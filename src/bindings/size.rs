//! The class of shapes: `Tensor.shape` and `Tensor.size()` return `candle_py.Size`,
//! a `tuple` subclass (PyTorch's `torch.Size`) defined in Python (`candle_py/_size.py`).
//!
//! The package imports `_core`, never the reverse, so the package hands the class to
//! the core at import (`_core._set_size_type`); before that, shapes are plain tuples.
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

/// `(tuple.__new__, Size)`: shapes are made by calling `tuple.__new__(Size, dims)`
/// directly, skipping `Size.__new__`'s argument checks (dims are ints already).
static SIZE: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// `_core._set_size_type(cls)`: shapes are `cls` instances from now on (set once, by the package).
#[pyfunction]
fn _set_size_type(py: Python<'_>, cls: Bound<'_, PyAny>) -> PyResult<()> {
    let tuple = py.get_type::<PyTuple>();
    let ok = cls.cast::<PyType>().is_ok_and(|t| t.is_subclass(&tuple).unwrap_or(false));
    if !ok {
        return Err(crate::bindings::errors::type_err("_set_size_type", "expected a subclass of tuple"));
    }
    // A second registration (a reloaded package) keeps the first class.
    let _ = SIZE.set(py, (tuple.getattr("__new__")?.unbind(), cls.unbind()));
    Ok(())
}

/// A shape as the registered `Size` class (a plain tuple before the package registers it).
pub(crate) fn size_tuple<'py>(py: Python<'py>, dims: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    let t = PyTuple::new(py, dims)?;
    match SIZE.get(py) {
        Some((new, cls)) => new.bind(py).call1((cls.bind(py), t)),
        None => Ok(t.into_any()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_size_type, m)?)?;
    Ok(())
}
