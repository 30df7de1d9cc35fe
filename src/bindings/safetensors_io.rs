//! safetensors files in and out, with `safetensors.torch`'s names and semantics.
//!
//! Loading memory-maps the file and validates the header (`header.rs`: lengths,
//! offsets, dtype/shape byte counts, duplicate names, overflowing shapes)
//! before any tensor is built, so a corrupt or hostile file is a `ValueError`
//! naming the problem, not a crash or a huge allocation. Saving writes a
//! temporary file in the same folder and renames it over the target, so an
//! interrupted save never leaves a broken file behind.
use crate::bindings::device::device_arg;
use crate::bindings::errors::{detach, guard, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::layout::Dense;
use candle_core::{CpuStorage, Device, Storage, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use safetensors::tensor::{Dtype as St, SafeTensors, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;

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

mod header;

type Loaded = (Vec<(String, Tensor, DT)>, Option<HashMap<String, String>>);

/// Validate the layout (`header::validate`), then copy every tensor out of
/// the buffer (no GIL needed). `op` and `what` (the file) prefix messages.
fn read_all(buf: &[u8], dev: &Device, op: &str, what: &str) -> PyResult<Loaded> {
    let bad = |msg: String| value_err(op, format!("{what}{msg}"));
    let mut entries = header::validate(buf).map_err(bad)?;
    // Second line of defence: the crate's own checks must agree.
    let st = SafeTensors::deserialize(buf).map_err(|e| bad(format!("invalid file: {e}")))?;
    let (_, meta) = SafeTensors::read_metadata(buf).map_err(|e| bad(format!("invalid header: {e}")))?;
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let view = st.tensor(&e.name).map_err(|err| bad(format!("tensor {:?}: {err}", e.name)))?;
        let t = Tensor::from_raw_buffer(view.data(), e.dt.candle(), &e.shape, dev).op(op)?;
        out.push((e.name, t, e.dt));
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

pub(crate) fn map_file(path: &str, op: &str) -> PyResult<memmap2::Mmap> {
    let f = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("{op}: no such file: {path:?}")),
        _ => value_err(op, format!("cannot open {path:?}: {e}")),
    })?;
    // SAFETY: the map is read-only and only read while this call holds it.
    // (A file truncated by another process while mapped is outside our control.)
    unsafe { memmap2::Mmap::map(&f) }.map_err(|e| value_err(op, format!("cannot map {path:?}: {e}")))
}

/// `load_file(path, device="cpu") -> dict[str, Tensor]` (memory-mapped read).
#[pyfunction]
#[pyo3(signature = (filename, device=None))]
fn load_file<'py>(py: Python<'py>, filename: std::path::PathBuf, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    let dev = device_arg(device)?;
    let path = filename.to_string_lossy().to_string();
    let map = map_file(&path, "load_file")?;
    let what = format!("{path}: ");
    let (items, _) = detach(py, "load_file", || read_all(&map, &dev, "load_file", &what))?;
    to_dict(py, items)
}

/// `load(data: bytes) -> dict[str, Tensor]`.
#[pyfunction]
fn load<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let (items, _) = guard("load", || read_all(data, &Device::Cpu, "load", ""))?;
    to_dict(py, items)
}

/// The `__metadata__` string map of a file, or None.
#[pyfunction]
fn load_metadata(filename: std::path::PathBuf) -> PyResult<Option<HashMap<String, String>>> {
    let path = filename.to_string_lossy().to_string();
    let map = map_file(&path, "load_metadata")?;
    let bad = |msg: String| value_err("load_metadata", format!("{path}: {msg}"));
    header::validate(&map).map_err(bad)?;
    let (_, meta) = SafeTensors::read_metadata(&map).map_err(|e| bad(format!("invalid header: {e}")))?;
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

pub(crate) fn bytes_of(t: &Tensor, item: usize) -> PyResult<Vec<u8>> {
    let t = t.to_device(&Device::Cpu).and_then(|t| t.dense()).op("save")?;
    let (start, end) = t.layout().contiguous_offsets().expect("contiguous");
    let (storage, _) = t.storage_and_layout();
    // An empty view may carry an offset past its (empty) storage: no bytes.
    let (start, end) = if t.elem_count() == 0 { (0, 0) } else { (start, end) };
    macro_rules! raw {
        ($v:expr) => {{
            let s = $v.get(start..end).ok_or_else(|| value_err("save", "tensor storage is smaller than its layout"))?;
            assert_eq!(std::mem::size_of_val(s), s.len() * item, "save: itemsize of the storage");
            // SAFETY: `s` is a slice of plain-old-data elements (integers, floats: no padding,
            // every byte initialized) of `item` bytes each (asserted), so its
            // `s.len() * item` bytes are readable as `u8` for as long as `s` is borrowed.
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

/// The dict's tensors, checked under the GIL; their bytes are copied later, without it.
fn collect(tensors: &Bound<'_, PyDict>, op: &str) -> PyResult<Vec<(String, Tensor, DT)>> {
    let mut out = Vec::with_capacity(tensors.len());
    for (k, v) in tensors.iter() {
        let name: String = k.extract().map_err(|_| crate::bindings::errors::type_err(op, "tensor names must be str"))?;
        let t = v.cast::<PyTensor>().map_err(|_| crate::bindings::errors::type_err(op, format!("value for {name:?} is not a Tensor")))?;
        let (t, dt) = t.get().t_dt();
        out.push((name, t, dt));
    }
    Ok(out)
}

fn serialize(py: Python<'_>, tensors: &Bound<'_, PyDict>, metadata: Option<HashMap<String, String>>, op: &str) -> PyResult<Vec<u8>> {
    let items = collect(tensors, op)?;
    detach(py, op, || {
        let mut entries = Vec::with_capacity(items.len());
        for (name, t, dt) in &items {
            entries.push((name.as_str(), Entry { dtype: st_of(*dt), shape: t.dims().to_vec(), data: bytes_of(t, dt.itemsize())? }));
        }
        safetensors::tensor::serialize(entries.iter().map(|(n, e)| (*n, e)), metadata)
            .map_err(|e| value_err(op, format!("cannot serialize: {e}")))
    })
}

/// `save(tensors, metadata=None) -> bytes`.
#[pyfunction]
#[pyo3(signature = (tensors, metadata=None))]
fn save<'py>(py: Python<'py>, tensors: &Bound<'py, PyDict>, metadata: Option<HashMap<String, String>>) -> PyResult<Bound<'py, PyBytes>> {
    let buf = serialize(py, tensors, metadata, "save")?;
    Ok(PyBytes::new(py, &buf))
}

/// Write `data` to `path` atomically (`write_atomic_with`).
pub fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(data))
}

/// Write `path` atomically through `write`: a fresh temporary file in the same
/// folder, fsync, rename over `path`, fsync the folder. A writer killed at any
/// point leaves `path` as it was (at worst a stray `.NAME.PID.N.tmp` behind).
pub fn write_atomic_with(path: &std::path::Path, write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>) -> std::io::Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    // Unique per call, so two threads saving to one target never share a temporary file.
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let res = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        write(&mut f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return res;
    }
    // Make the rename itself durable; not every filesystem allows opening a folder.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `save_file(tensors, filename, metadata=None)`, atomic.
#[pyfunction]
#[pyo3(signature = (tensors, filename, metadata=None))]
fn save_file(
    py: Python<'_>,
    tensors: &Bound<'_, PyDict>,
    filename: std::path::PathBuf,
    metadata: Option<HashMap<String, String>>,
) -> PyResult<()> {
    let buf = serialize(py, tensors, metadata, "save_file")?;
    let shown = filename.display().to_string();
    detach(py, "save_file", || {
        write_atomic(&filename, &buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("save_file: {shown}: {e}")),
            _ => pyo3::exceptions::PyOSError::new_err(format!("save_file: {shown}: {e}")),
        })
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
