//! The Python-side pieces the core's results use: the tensor formatter and the
//! `(values, indices)` result types of `max` / `min` / `sort` / `topk` / ...
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
static PAIR_TYPES: PyOnceLock<Vec<Py<PyAny>>> = PyOnceLock::new();

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

/// The `(values, indices)` result types, as PyTorch's `torch.return_types.<name>`.
const PAIRS: [&str; 7] = ["max", "min", "sort", "topk", "kthvalue", "median", "mode"];

/// `max` / `min` with a dim: the named tuple `(values, indices)`, typed `max` or `min`.
pub(crate) fn minmax_result<'py>(py: Python<'py>, values: PyTensor, indices: PyTensor, is_max: bool) -> PyResult<Bound<'py, PyAny>> {
    pair_result(py, if is_max { "max" } else { "min" }, values, indices)
}

/// The named tuple `(values, indices)` of type `name` (one of `PAIRS`), unpackable and
/// with `.values` / `.indices`, as `torch.return_types.<name>`.
pub(crate) fn pair_result<'py>(py: Python<'py>, name: &str, values: PyTensor, indices: PyTensor) -> PyResult<Bound<'py, PyAny>> {
    let types = PAIR_TYPES.get_or_try_init(py, || -> PyResult<_> {
        let namedtuple = py.import("collections")?.getattr("namedtuple")?;
        let kw = PyDict::new(py);
        kw.set_item("module", "candle_py.return_types")?;
        PAIRS.iter().map(|n| Ok(namedtuple.call((*n, ("values", "indices")), Some(&kw))?.unbind())).collect::<PyResult<Vec<_>>>()
    })?;
    let i = PAIRS.iter().position(|n| *n == name).ok_or_else(|| crate::bindings::errors::runtime_err(name, "no result type"))?;
    types[i].bind(py).call1((Py::new(py, values)?, Py::new(py, indices)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_formatter, m)?)?;
    Ok(())
}
