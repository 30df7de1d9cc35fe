//! Devices: `"cpu"`, `"cuda"`, `"cuda:N"`, `"metal"`, or `candle_py.device(...)`.
//!
//! Candle compares devices by identity, so each GPU device is created once and
//! cached: two tensors made on "cuda:0" must land on the same Candle device.
use crate::errors::{device_err, OpResult};
use candle_core::{Device, DeviceLocation};
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

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
            let i: usize = i
                .parse()
                .map_err(|_| device_err("device", format!("invalid device index in {spec:?}")))?;
            (n, Some(i))
        }
        None => (spec, index),
    };
    match name {
        "cpu" => Ok(DevKind::Cpu),
        "cuda" => Ok(DevKind::Cuda(idx.unwrap_or(0))),
        "metal" | "mps" => Ok(DevKind::Metal(idx.unwrap_or(0))),
        _ => Err(device_err(
            "device",
            format!("unknown device {spec:?}; expected 'cpu', 'cuda', 'cuda:N' or 'metal'"),
        )),
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
            DevKind::Cuda(i) => Device::new_cuda(i).op("device")?,
            DevKind::Metal(i) => Device::new_metal(i).op("device")?,
            DevKind::Cpu => unreachable!(),
        };
        cache.insert(self.kind, d.clone());
        Ok(d)
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

/// Optional device argument: None means CPU.
pub fn device_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Device> {
    match obj {
        None => Ok(Device::Cpu),
        Some(o) if o.is_none() => Ok(Device::Cpu),
        Some(o) => extract_device(o, None)?.candle(),
    }
}

#[pyfunction]
fn cuda_is_available() -> bool {
    cfg!(feature = "cuda") && Device::new_cuda(0).is_ok()
}

#[pyfunction]
fn cuda_device_count() -> usize {
    if !cfg!(feature = "cuda") {
        return 0;
    }
    (0..64).take_while(|i| Device::new_cuda(*i).is_ok()).count()
}

#[pyfunction]
fn metal_is_available() -> bool {
    cfg!(feature = "metal") && Device::new_metal(0).is_ok()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(cuda_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_count, m)?)?;
    m.add_function(wrap_pyfunction!(metal_is_available, m)?)?;
    Ok(())
}
