//! The `candle_py.dtype` class and the conversion of Python dtype-likes to `DT`.
use crate::bindings::errors::dtype_err;
use crate::dtype::{ALL, DT};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::atomic::{AtomicU8, Ordering};

/// The default floating point dtype (`set_default_dtype`), as its index in `ALL`;
/// float32 unless changed. Process-wide, as in PyTorch (not per thread).
static DEFAULT_FLOAT: AtomicU8 = AtomicU8::new(F32_INDEX);
const F32_INDEX: u8 = 8;

/// The dtype PyTorch gives a Python float and every float-by-default creation
/// (`zeros`, `rand`, `tensor([1.5])`, `arange(1.)`, int/int division): float32
/// unless `set_default_dtype` changed it.
#[inline]
pub fn default_float() -> DT {
    ALL[DEFAULT_FLOAT.load(Ordering::Relaxed) as usize]
}

/// `set_default_dtype(d)`: only floating point dtypes, as PyTorch.
#[pyfunction]
fn set_default_dtype(d: &Bound<'_, PyAny>) -> PyResult<()> {
    let dt = extract_dtype(d)?;
    if !dt.is_float() {
        return Err(crate::bindings::errors::type_err(
            "set_default_dtype",
            format!("only floating-point types are supported as the default type, got {}", dt.name()),
        ));
    }
    let i = ALL.iter().position(|&x| x == dt).map_or(F32_INDEX, |i| i as u8);
    DEFAULT_FLOAT.store(i, Ordering::Relaxed);
    Ok(())
}

/// `get_default_dtype()`: the dtype of new float tensors (float32 unless changed).
#[pyfunction]
fn get_default_dtype() -> PyDType {
    PyDType { dt: default_float() }
}

/// `candle_py.dtype`: one immutable object per dtype (`cp.float32`, ...).
#[pyclass(name = "dtype", module = "candle_py", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyDType {
    pub dt: DT,
}

#[pymethods]
impl PyDType {
    fn __repr__(&self) -> String {
        format!("candle_py.{}", self.dt.name())
    }
    fn __str__(&self) -> String {
        self.__repr__()
    }
    #[getter]
    fn is_floating_point(&self) -> bool {
        self.dt.is_float()
    }
    /// Always False: complex dtypes are `candle_py.ComplexDType` objects.
    #[getter]
    fn is_complex(&self) -> bool {
        false
    }
    /// The real dtype of this real dtype: itself.
    fn to_real(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    #[getter]
    fn is_signed(&self) -> bool {
        matches!(self.dt, DT::I16 | DT::I32 | DT::I64) || self.dt.is_float()
    }
    #[getter]
    fn itemsize(&self) -> usize {
        self.dt.itemsize()
    }
    #[getter]
    fn name(&self) -> &'static str {
        self.dt.name()
    }
    /// Pickled by name: the dtype objects are module globals (`candle_py.float32`, ...),
    /// so pickle stores a reference to the global and unpickling returns the same object.
    fn __reduce__(&self) -> &'static str {
        self.dt.name()
    }
}

/// Accept `cp.float32`, `"float32"`, `numpy.float32`, `np.dtype("f4")`, `float`, `int`, `bool`.
pub fn extract_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DT> {
    if let Ok(d) = obj.cast::<PyDType>() {
        return Ok(d.get().dt);
    }
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        let s = &s.to_cow()?;
        return DT::from_name(s).ok_or_else(|| dtype_err("dtype", format!("unknown dtype name {s:?}")));
    }
    let builtins = py.import("builtins")?;
    if obj.is(&builtins.getattr("float")?) {
        return Ok(DT::F32);
    }
    if obj.is(&builtins.getattr("int")?) {
        return Ok(DT::I64);
    }
    if obj.is(&builtins.getattr("bool")?) {
        return Ok(DT::Bool);
    }
    // numpy types and dtypes; ml_dtypes.bfloat16 reports the name "bfloat16".
    let np = py.import("numpy")?;
    match np.getattr("dtype")?.call1((obj,)) {
        Ok(d) => {
            let name: String = d.getattr("name")?.extract()?;
            DT::from_name(&name).ok_or_else(|| dtype_err("dtype", format!("numpy dtype {name} has no candle_py equivalent")))
        }
        Err(_) => {
            // One short line, whatever the object (a tensor's repr spans many).
            let r = obj.repr()?.to_string();
            let r = if r.contains('\n') || r.len() > 80 { format!("an object of type {}", obj.get_type().name()?) } else { r };
            Err(dtype_err("dtype", format!("cannot interpret {r} as a dtype")))
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDType>()?;
    m.add_function(wrap_pyfunction!(set_default_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(get_default_dtype, m)?)?;
    for dt in ALL {
        m.add(dt.name(), PyDType { dt })?;
    }
    Ok(())
}
