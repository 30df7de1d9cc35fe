//! Devices: `"cpu"`, `"cuda"`, `"cuda:N"`, `"metal"`, or `candle_py.device(...)`.
//!
//! Candle compares devices by identity, so each GPU device is created once and
//! cached: two tensors made on "cuda:0" must land on the same Candle device.
//!
//! `set_default_device` is PyTorch's: creation functions called without
//! `device=` put their result there (`CANDLE_PY_DEVICE=cuda pytest` relies on it).
use crate::bindings::errors::{device_err, OpResult};
use candle_core::{Device, DeviceLocation};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, RwLock};

/// Where creation functions put tensors when no device is named.
static DEFAULT: RwLock<DevKind> = RwLock::new(DevKind::Cpu);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DevKind {
    Cpu,
    Cuda(usize),
    Metal(usize),
}

#[pyclass(name = "device", module = "candle_py", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyDevice {
    pub kind: DevKind,
}

fn parse(spec: &str, index: Option<usize>) -> PyResult<DevKind> {
    let (name, idx) = match spec.split_once(':') {
        Some((n, i)) => {
            let i: usize = i.parse().map_err(|_| device_err("device", format!("invalid device index in {spec:?}")))?;
            (n, Some(i))
        }
        None => (spec, index),
    };
    match name {
        "cpu" => Ok(DevKind::Cpu),
        "cuda" => Ok(DevKind::Cuda(idx.unwrap_or(0))),
        "metal" | "mps" => Ok(DevKind::Metal(idx.unwrap_or(0))),
        _ => Err(device_err("device", format!("unknown device {spec:?}; expected 'cpu', 'cuda', 'cuda:N' or 'metal'"))),
    }
}

impl PyDevice {
    /// The Candle device, created once per kind and index.
    pub fn candle(&self) -> PyResult<Device> {
        static CACHE: OnceLock<Mutex<HashMap<DevKind, Device>>> = OnceLock::new();
        if self.kind == DevKind::Cpu {
            return Ok(Device::Cpu);
        }
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = cache.get(&self.kind) {
            return Ok(d.clone());
        }
        let d = match self.kind {
            // One stream per GPU shared by every thread, as PyTorch's default
            // stream: `new_cuda` would use CUDA's per-thread stream, and a
            // tensor made in one Python thread and read in another would then
            // race with the kernel that wrote it.
            DevKind::Cuda(i) => Device::new_cuda_with_stream(i),
            DevKind::Metal(i) => Device::new_metal(i),
            DevKind::Cpu => unreachable!(),
        }
        .map_err(|e| self.open_err(e))?;
        cache.insert(self.kind, d.clone());
        Ok(d)
    }

    /// A device that does not open is a `DeviceError`: a build without the
    /// feature says which one; a missing GPU or driver gets the driver's words.
    fn open_err(&self, e: candle_core::Error) -> PyErr {
        let err = crate::bindings::errors::candle_to_py("device", e);
        Python::attach(|py| {
            if err.is_instance_of::<crate::bindings::errors::DeviceError>(py) {
                return err;
            }
            let msg = err.value(py).to_string();
            device_err("device", format!("cannot open {}: {}", self.__str__(), msg.strip_prefix("device: ").unwrap_or(&msg)))
        })
    }

    pub fn of(d: &Device) -> PyDevice {
        let kind = match d.location() {
            DeviceLocation::Cpu => DevKind::Cpu,
            DeviceLocation::Cuda { gpu_id } => DevKind::Cuda(gpu_id),
            DeviceLocation::Metal { gpu_id } => DevKind::Metal(gpu_id),
        };
        PyDevice { kind }
    }
}

#[pymethods]
impl PyDevice {
    #[new]
    #[pyo3(signature = (spec, index=None))]
    fn new(spec: &Bound<'_, PyAny>, index: Option<i64>) -> PyResult<Self> {
        let index = match index {
            Some(i) if i < 0 => return Err(device_err("device", format!("device index must not be negative, got {i}"))),
            Some(i) => Some(i as usize),
            None => None,
        };
        extract_device(spec, index)
    }
    #[getter]
    fn r#type(&self) -> &'static str {
        match self.kind {
            DevKind::Cpu => "cpu",
            DevKind::Cuda(_) => "cuda",
            DevKind::Metal(_) => "metal",
        }
    }
    #[getter]
    fn index(&self) -> Option<usize> {
        match self.kind {
            DevKind::Cpu => None,
            DevKind::Cuda(i) | DevKind::Metal(i) => Some(i),
        }
    }
    fn __str__(&self) -> String {
        match self.kind {
            DevKind::Cpu => "cpu".into(),
            DevKind::Cuda(i) => format!("cuda:{i}"),
            DevKind::Metal(i) => format!("metal:{i}"),
        }
    }
    fn __repr__(&self) -> String {
        match self.index() {
            None => format!("device(type='{}')", self.r#type()),
            Some(i) => format!("device(type='{}', index={i})", self.r#type()),
        }
    }
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (String,))> {
        let t = py.get_type::<PyDevice>().into_any().unbind();
        Ok((t, (self.__str__(),)))
    }
}

pub fn extract_device(obj: &Bound<'_, PyAny>, index: Option<usize>) -> PyResult<PyDevice> {
    if let Ok(d) = obj.cast::<PyDevice>() {
        return Ok(*d.get());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(PyDevice { kind: parse(&s.to_cow()?, index)? });
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() && !obj.is_instance_of::<pyo3::types::PyBool>() {
        return match obj.extract::<i64>() {
            Ok(i) if i >= 0 => Ok(PyDevice { kind: DevKind::Cuda(i as usize) }),
            _ => Err(device_err("device", format!("device index must be a non-negative int, got {obj}"))),
        };
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "device: expected a device or a string like 'cpu' or 'cuda:0', got {}",
        obj.get_type().name()?
    )))
}

/// The default device (`set_default_device`), CPU unless changed.
pub fn default_device() -> PyResult<Device> {
    let kind = *DEFAULT.read().unwrap_or_else(|p| p.into_inner());
    PyDevice { kind }.candle()
}

/// Optional device argument: None means the default device.
pub fn device_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    match obj {
        Some(o) if !o.is_none() => extract_device(o, None)?.candle(),
        _ => default_device(),
    }
}

/// `set_default_device(device)`: None resets to CPU. The device is opened
/// here, so a missing GPU or feature fails now rather than at the next `zeros`.
#[pyfunction]
fn set_default_device(device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let d = match device {
        Some(o) if !o.is_none() => extract_device(o, None)?,
        _ => PyDevice { kind: DevKind::Cpu },
    };
    d.candle()?;
    *DEFAULT.write().unwrap_or_else(|p| p.into_inner()) = d.kind;
    Ok(())
}

#[pyfunction]
fn get_default_device() -> PyDevice {
    PyDevice { kind: *DEFAULT.read().unwrap_or_else(|p| p.into_inner()) }
}

/// Wait for the work queued on a GPU (timing GPU code needs it); no-op on CPU.
#[pyfunction]
#[pyo3(signature = (device=None))]
fn synchronize(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let d = device_arg(device)?;
    crate::bindings::errors::detach(py, "synchronize", || d.synchronize().op("synchronize"))
}

/// Whether this build has the `cuda` / `metal` feature (a GPU may still be missing).
#[pyfunction]
fn cuda_is_built() -> bool {
    cfg!(feature = "cuda")
}

#[pyfunction]
fn metal_is_built() -> bool {
    cfg!(feature = "metal")
}

/// Opening device 0 through the cache, so asking twice costs nothing.
#[pyfunction]
fn cuda_is_available() -> bool {
    cfg!(feature = "cuda") && PyDevice { kind: DevKind::Cuda(0) }.candle().is_ok()
}

#[cfg(feature = "cuda")]
#[pyfunction]
fn cuda_device_count() -> usize {
    // The driver's count, without opening a context on each GPU.
    use candle_core::cuda_backend::cudarc::driver::CudaContext;
    CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)
}

#[cfg(not(feature = "cuda"))]
#[pyfunction]
fn cuda_device_count() -> usize {
    0
}

#[pyfunction]
fn metal_is_available() -> bool {
    cfg!(feature = "metal") && PyDevice { kind: DevKind::Metal(0) }.candle().is_ok()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(cuda_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(metal_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_is_built, m)?)?;
    m.add_function(wrap_pyfunction!(metal_is_built, m)?)?;
    m.add_function(wrap_pyfunction!(set_default_device, m)?)?;
    m.add_function(wrap_pyfunction!(get_default_device, m)?)?;
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    Ok(())
}
