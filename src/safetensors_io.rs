//! safetensors files in and out, with `safetensors.torch`'s names and semantics.
//!
//! Loading memory-maps the file and lets the `safetensors` crate validate the
//! header (lengths, offsets, dtype/shape byte counts) before any tensor is
//! built, so a corrupt or hostile file is a `ValueError`, not a crash or a huge
//! allocation. Saving writes a temporary file in the same folder and renames it
//! over the target, so an interrupted save never leaves a broken file behind.
use crate::device::device_arg;
use crate::dtype::DT;
use crate::errors::{value_err, OpResult};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, Device, Storage, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use safetensors::tensor::{Dtype as St, SafeTensors, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

fn dt_of(d: St) -> PyResult<DT> {
    Ok(match d {
        St::BOOL => DT::Bool,
        St::U8 => DT::U8,
        St::I16 => DT::I16,
        St::I32 => DT::I32,
        St::I64 => DT::I64,
        St::U32 => DT::U32,
        St::F16 => DT::F16,
        St::BF16 => DT::BF16,
        St::F32 => DT::F32,
        St::F64 => DT::F64,
        other => return Err(value_err("safetensors", format!("dtype {other:?} is not supported by candle_py"))),
    })
}

fn st_of(d: DT) -> St {
    match d {
        DT::Bool => St::BOOL,
        DT::U8 => St::U8,
        DT::I16 => St::I16,
        DT::I32 => St::I32,
        DT::I64 => St::I64,
        DT::U32 => St::U32,
        DT::F16 => St::F16,
        DT::BF16 => St::BF16,
        DT::F32 => St::F32,
        DT::F64 => St::F64,
    }
}

type Loaded = (Vec<(String, Tensor, DT)>, Option<HashMap<String, String>>);

/// Parse and copy every tensor out of a validated buffer (no GIL needed).
fn read_all(buf: &[u8], dev: &Device) -> PyResult<Loaded> {
    let st = SafeTensors::deserialize(buf).map_err(|e| value_err("safetensors", format!("invalid file: {e}")))?;
    let (_, meta) = SafeTensors::read_metadata(buf).map_err(|e| value_err("safetensors", format!("invalid header: {e}")))?;
    let mut names: Vec<&str> = st.names();
    names.sort_unstable();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let view = st.tensor(name).map_err(|e| value_err("safetensors", format!("tensor {name:?}: {e}")))?;
        let dt = dt_of(view.dtype())?;
        let t = Tensor::from_raw_buffer(view.data(), dt.candle(), view.shape(), dev).op("safetensors")?;
        out.push((name.to_string(), t, dt));
    }
    Ok((out, meta.metadata().clone()))
}

fn to_dict<'py>(py: Python<'py>, items: Vec<(String, Tensor, DT)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, t, dt) in items {
        d.set_item(name, Py::new(py, PyTensor::wrap_dt(t, dt))?)?;
    }
    Ok(d)
}

fn map_file(path: &str) -> PyResult<memmap2::Mmap> {
    let f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("safetensors: no such file: {path:?}")),
        _ => value_err("safetensors", format!("cannot open {path:?}: {e}")),
    })?;
    // SAFETY: the map is read-only and only read while this call holds it.
    unsafe { memmap2::Mmap::map(&f) }.map_err(|e| value_err("safetensors", format!("cannot map {path:?}: {e}")))
}

/// `load_file(path, device="cpu") -> dict[str, Tensor]` (memory-mapped read).
#[pyfunction]
#[pyo3(signature = (filename, device=None))]
fn load_file<'py>(py: Python<'py>, filename: std::path::PathBuf, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    let dev = device_arg(device)?;
    let path = filename.to_string_lossy().to_string();
    let map = map_file(&path)?;
    let (items, _) = py.detach(|| read_all(&map, &dev))?;
    to_dict(py, items)
}

/// `load(data: bytes) -> dict[str, Tensor]`.
#[pyfunction]
fn load<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let (items, _) = read_all(data, &Device::Cpu)?;
    to_dict(py, items)
}

/// The `__metadata__` string map of a file, or None.
#[pyfunction]
fn load_metadata(filename: std::path::PathBuf) -> PyResult<Option<HashMap<String, String>>> {
    let path = filename.to_string_lossy().to_string();
    let map = map_file(&path)?;
    let (_, meta) = SafeTensors::read_metadata(&map).map_err(|e| value_err("safetensors", format!("invalid header: {e}")))?;
    Ok(meta.metadata().clone())
}

/// A tensor's bytes in row-major order, with the dtype the file should record.
struct Entry {
    dtype: St,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Entry {
    fn dtype(&self) -> St {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn bytes_of(t: &Tensor, item: usize) -> PyResult<Vec<u8>> {
    let t = t.to_device(&Device::Cpu).and_then(|t| t.contiguous()).op("save")?;
    let (start, end) = t.layout().contiguous_offsets().expect("contiguous");
    let (storage, _) = t.storage_and_layout();
    macro_rules! raw {
        ($v:expr) => {{
            let s = &$v[start..end];
            // SAFETY: plain-old-data element slices viewed as bytes.
            unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, s.len() * item) }.to_vec()
        }};
    }
    Ok(match &*storage {
        Storage::Cpu(cs) => match cs {
            CpuStorage::U8(v) => raw!(v),
            CpuStorage::U32(v) => raw!(v),
            CpuStorage::I16(v) => raw!(v),
            CpuStorage::I32(v) => raw!(v),
            CpuStorage::I64(v) => raw!(v),
            CpuStorage::BF16(v) => raw!(v),
            CpuStorage::F16(v) => raw!(v),
            CpuStorage::F32(v) => raw!(v),
            CpuStorage::F64(v) => raw!(v),
            _ => return Err(value_err("save", "unsupported dtype")),
        },
        _ => return Err(value_err("save", "tensor did not move to the CPU")),
    })
}

fn entries(tensors: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Entry)>> {
    let mut out = Vec::with_capacity(tensors.len());
    for (k, v) in tensors.iter() {
        let name: String = k.extract().map_err(|_| crate::errors::type_err("save", "tensor names must be str"))?;
        let t = v.cast::<PyTensor>().map_err(|_| crate::errors::type_err("save", format!("value for {name:?} is not a Tensor")))?;
        let t = t.get();
        let dt = t.dt();
        let tt = t.t();
        out.push((name, Entry { dtype: st_of(dt), shape: tt.dims().to_vec(), data: bytes_of(&tt, dt.itemsize())? }));
    }
    Ok(out)
}

fn serialize(py: Python<'_>, tensors: &Bound<'_, PyDict>, metadata: Option<HashMap<String, String>>) -> PyResult<Vec<u8>> {
    let items = entries(tensors)?;
    py.detach(|| safetensors::tensor::serialize(items.iter().map(|(n, e)| (n.as_str(), e)), metadata))
        .map_err(|e| value_err("save", format!("cannot serialize: {e}")))
}

/// `save(tensors, metadata=None) -> bytes`.
#[pyfunction]
#[pyo3(signature = (tensors, metadata=None))]
fn save<'py>(py: Python<'py>, tensors: &Bound<'py, PyDict>, metadata: Option<HashMap<String, String>>) -> PyResult<Bound<'py, PyBytes>> {
    let buf = serialize(py, tensors, metadata)?;
    Ok(PyBytes::new(py, &buf))
}

/// Write `data` to `path` atomically: temporary file in the same folder, fsync, rename.
pub fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// `save_file(tensors, filename, metadata=None)`, atomic.
#[pyfunction]
#[pyo3(signature = (tensors, filename, metadata=None))]
fn save_file(py: Python<'_>, tensors: &Bound<'_, PyDict>, filename: std::path::PathBuf, metadata: Option<HashMap<String, String>>) -> PyResult<()> {
    let buf = serialize(py, tensors, metadata)?;
    py.detach(|| write_atomic(&filename, &buf)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("save_file: {}: {e}", filename.display())),
        _ => pyo3::exceptions::PyOSError::new_err(format!("save_file: {}: {e}", filename.display())),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let st = PyModule::new(m.py(), "safetensors")?;
    st.add_function(wrap_pyfunction!(load_file, &st)?)?;
    st.add_function(wrap_pyfunction!(load, &st)?)?;
    st.add_function(wrap_pyfunction!(load_metadata, &st)?)?;
    st.add_function(wrap_pyfunction!(save, &st)?)?;
    st.add_function(wrap_pyfunction!(save_file, &st)?)?;
    m.add_submodule(&st)?;
    Ok(())
}
