//! GGUF files in and out: `_load_gguf` maps the file, validates its layout
//! (`gguf_header`), lets Candle's reader parse the metadata, then builds each tensor
//! straight from the mapped bytes (one copy, into Candle's block storage: Candle's
//! quantized tensors own their blocks, so a map cannot back them). `_save_gguf` writes
//! with Candle's writer into a temporary file renamed over the target.
use super::gguf_header::{self, TensorEntry};
use super::PyQTensor;
use crate::bindings::device::device_arg;
use crate::bindings::errors::{detach, dtype_err, shape_err, shape_str, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::quantized as q;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::Device;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::borrow::Cow;

/// One tensor from its validated byte range.
fn tensor_at(buf: &[u8], e: &TensorEntry, dev: &Device) -> candle_core::Result<QTensor> {
    let bytes = &buf[e.start..e.start + e.len];
    // Candle reads the bytes as blocks and asserts their alignment (4 bytes at most:
    // f32 fields); a file with a small `general.alignment` may place data anywhere,
    // and an empty slice may have any address: copy those to 8-aligned memory.
    let storage = if e.len > 0 && (bytes.as_ptr() as usize).is_multiple_of(8) {
        QStorage::from_data(Cow::Borrowed(bytes), dev, e.ty)?
    } else {
        let mut words = vec![0u64; e.len.div_ceil(8)];
        for (w, c) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut a = [0u8; 8];
            a[..c.len()].copy_from_slice(c);
            *w = u64::from_ne_bytes(a);
        }
        // SAFETY: `words` owns `e.len.div_ceil(8) * 8 >= e.len` initialized bytes, any
        // byte pattern is a valid u8, and the slice lives only within this call while
        // `words` is alive and not otherwise borrowed.
        let aligned = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, e.len) };
        QStorage::from_data(Cow::Borrowed(aligned), dev, e.ty)?
    };
    QTensor::new(storage, e.dims.clone())
}

type Loaded = (Vec<(String, QTensor)>, std::collections::HashMap<String, Value>);

fn read_all(buf: &[u8], dev: &Device, path: &str) -> PyResult<Loaded> {
    let op = "load_gguf";
    let bad = |msg: String| value_err(op, format!("{path}: {msg}"));
    let header = gguf_header::validate(buf).map_err(bad)?;
    // Candle parses the metadata; its view of the tensors must agree with ours.
    let content = gguf_file::Content::read(&mut std::io::Cursor::new(buf)).map_err(|e| bad(format!("invalid file: {e}")))?;
    let agrees = content.tensor_data_offset == header.data_offset
        && content.tensor_infos.len() == header.tensors.len()
        && header
            .tensors
            .iter()
            .all(|e| content.tensor_infos.get(&e.name).is_some_and(|i| i.ggml_dtype == e.ty && i.shape.dims() == e.dims.as_slice()));
    if !agrees {
        return Err(bad(format!("Candle's reader disagrees with the header check (GGUF version {})", header.version)));
    }
    let mut out = Vec::with_capacity(header.tensors.len());
    for e in &header.tensors {
        let t = tensor_at(buf, e, dev).op(op).map_err(|err| bad(format!("tensor {:?}: {err}", e.name)))?;
        out.push((e.name.clone(), t));
    }
    Ok((out, content.metadata))
}

fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::U8(x) => x.into_pyobject(py)?.into_any(),
        Value::I8(x) => x.into_pyobject(py)?.into_any(),
        Value::U16(x) => x.into_pyobject(py)?.into_any(),
        Value::I16(x) => x.into_pyobject(py)?.into_any(),
        Value::U32(x) => x.into_pyobject(py)?.into_any(),
        Value::I32(x) => x.into_pyobject(py)?.into_any(),
        Value::U64(x) => x.into_pyobject(py)?.into_any(),
        Value::I64(x) => x.into_pyobject(py)?.into_any(),
        Value::F32(x) => PyFloat::new(py, f64::from(*x)).into_any(),
        Value::F64(x) => PyFloat::new(py, *x).into_any(),
        Value::Bool(x) => PyBool::new(py, *x).to_owned().into_any(),
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(vs) => PyList::new(py, vs.iter().map(|v| value_to_py(py, v)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
    })
}

/// `_load_gguf(path, device=None) -> (tensors, metadata)`, tensors in file order.
#[pyfunction]
#[pyo3(signature = (path, device=None))]
fn _load_gguf<'py>(py: Python<'py>, path: std::path::PathBuf, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device_arg(device)?;
    let shown = path.to_string_lossy().to_string();
    let map = crate::bindings::safetensors_io::map_file(&shown, "load_gguf")?;
    let (tensors, meta) = detach(py, "load_gguf", || read_all(&map, &dev, &shown))?;
    let td = PyDict::new(py);
    for (name, t) in tensors {
        td.set_item(name, Py::new(py, PyQTensor::new(t))?)?;
    }
    // Keys sorted: Candle's reader keeps them in a hash map, and a stable order reads better.
    let mut keys: Vec<&String> = meta.keys().collect();
    keys.sort_unstable();
    let md = PyDict::new(py);
    for k in keys {
        md.set_item(k, value_to_py(py, &meta[k])?)?;
    }
    PyTuple::new(py, [td.into_any(), md.into_any()])
}

/// The GGUF value for a Python one: bool, str, float (float32, as GGUF files hold
/// hyper-parameters), int (uint32 when it fits, as llama.cpp's counts, else int64,
/// else uint64), a NumPy scalar (its own type), or a list of one kind of these.
fn py_to_value(key: &str, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let op = "save_gguf";
    let bad = || {
        type_err(
            op,
            format!(
                "metadata {key:?}: cannot store a value of type {} in GGUF",
                obj.get_type().name().map_or("?".into(), |n| n.to_string())
            ),
        )
    };
    if let Ok(dt) = obj.getattr("dtype").and_then(|d| d.getattr("name")).and_then(|n| n.extract::<String>()) {
        if !obj.is_instance_of::<PyList>() && obj.hasattr("item")? && obj.getattr("ndim")?.extract::<usize>()? == 0 {
            let item = obj.call_method0("item")?;
            let out_of_range = |_| value_err(op, format!("metadata {key:?}: value out of range for {dt}"));
            return Ok(match dt.as_str() {
                "uint8" => Value::U8(item.extract().map_err(out_of_range)?),
                "int8" => Value::I8(item.extract().map_err(out_of_range)?),
                "uint16" => Value::U16(item.extract().map_err(out_of_range)?),
                "int16" => Value::I16(item.extract().map_err(out_of_range)?),
                "uint32" => Value::U32(item.extract().map_err(out_of_range)?),
                "int32" => Value::I32(item.extract().map_err(out_of_range)?),
                "uint64" => Value::U64(item.extract().map_err(out_of_range)?),
                "int64" => Value::I64(item.extract().map_err(out_of_range)?),
                "float32" => Value::F32(item.extract::<f64>()? as f32),
                "float64" => Value::F64(item.extract()?),
                "bool" => Value::Bool(item.extract()?),
                _ => return Err(bad()),
            });
        }
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return int_value(key, obj, None);
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Value::F32(obj.extract::<f64>()? as f32));
    }
    if obj.is_instance_of::<PyString>() {
        return Ok(Value::String(obj.extract()?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = obj.try_iter()?.collect::<PyResult<_>>()?;
        let plain_ints = items.iter().all(|i| i.is_instance_of::<PyInt>() && !i.is_instance_of::<PyBool>());
        // One element type per array: Python ints share the narrowest type all of them fit.
        let vs = if plain_ints && !items.is_empty() {
            let ty = items.iter().map(|i| int_value(key, i, None)).collect::<PyResult<Vec<_>>>()?.iter().map(rank).max().unwrap_or(0);
            items.iter().map(|i| int_value(key, i, Some(ty))).collect::<PyResult<Vec<_>>>()?
        } else {
            items.iter().map(|i| py_to_value(key, i)).collect::<PyResult<Vec<_>>>()?
        };
        if let Some(first) = vs.first() {
            if vs.iter().any(|v| v.value_type() != first.value_type()) {
                return Err(type_err(op, format!("metadata {key:?}: a GGUF array holds one type of value; this list mixes several")));
            }
        }
        return Ok(Value::Array(vs));
    }
    Err(bad())
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::U32(_) => 0,
        Value::I64(_) => 1,
        _ => 2,
    }
}

/// A Python int as uint32 (rank 0), int64 (1) or uint64 (2): the narrowest that
/// holds it, or at least `min`.
fn int_value(key: &str, obj: &Bound<'_, PyAny>, min: Option<u8>) -> PyResult<Value> {
    let min = min.unwrap_or(0);
    if min == 0 {
        if let Ok(v) = obj.extract::<u32>() {
            return Ok(Value::U32(v));
        }
    }
    if min <= 1 {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::I64(v));
        }
    }
    match obj.extract::<u64>() {
        Ok(v) => Ok(Value::U64(v)),
        Err(_) => Err(value_err("save_gguf", format!("metadata {key:?}: the integer {obj} fits none of GGUF's integer types"))),
    }
}

/// A dict value as a QTensor: a QTensor as is, a float tensor as GGUF's f32/f16/bf16.
fn as_qtensor(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<std::sync::Arc<QTensor>> {
    let op = "save_gguf";
    if let Ok(qt) = obj.cast::<PyQTensor>() {
        return Ok(qt.get().w.q.clone());
    }
    let Ok(t) = obj.cast::<PyTensor>() else {
        return Err(type_err(op, format!("value for {name:?} is a {}, expected a QTensor or a Tensor", obj.get_type().name()?)));
    };
    let (t, dt) = t.get().t_dt();
    let ty = match dt {
        DT::F32 => GgmlDType::F32,
        DT::F16 => GgmlDType::F16,
        DT::BF16 => GgmlDType::BF16,
        other => {
            let msg = format!(
                "tensor {name:?} has dtype {}; GGUF (as Candle reads it) holds float32, float16, bfloat16 or quantized tensors: convert it first",
                other.name()
            );
            return Err(dtype_err(op, msg));
        }
    };
    if t.rank() == 0 {
        return Err(shape_err(op, format!("tensor {name:?} is 0-d; GGUF tensors have 1 to 4 dimensions (reshape it to [1])")));
    }
    let q = crate::bindings::errors::detach_op(py, op, || q::quantize(&t, ty))?;
    Ok(std::sync::Arc::new(q))
}

/// `_save_gguf(path, tensors, metadata)`: GGUF version 2 (Candle's writer), data
/// aligned to 32 bytes, written atomically.
#[pyfunction]
fn _save_gguf(py: Python<'_>, path: std::path::PathBuf, tensors: &Bound<'_, PyDict>, metadata: &Bound<'_, PyDict>) -> PyResult<()> {
    let op = "save_gguf";
    let mut ts = Vec::with_capacity(tensors.len());
    for (k, v) in tensors.iter() {
        let name: String = k.extract().map_err(|_| type_err(op, "tensor names must be str"))?;
        let t = as_qtensor(py, &name, &v)?;
        if t.shape().rank() > 4 {
            return Err(shape_err(
                op,
                format!("tensor {name:?} has shape {}; GGUF tensors have at most 4 dimensions", shape_str(t.shape().dims())),
            ));
        }
        ts.push((name, t));
    }
    let mut md = Vec::with_capacity(metadata.len());
    for (k, v) in metadata.iter() {
        let key: String = k.extract().map_err(|_| type_err(op, "metadata keys must be str"))?;
        let val = py_to_value(&key, &v)?;
        // Candle's writer always pads to 32 bytes: another alignment would misplace every tensor.
        if key == "general.alignment" && !matches!(val, Value::U32(32)) {
            return Err(value_err(op, "metadata \"general.alignment\" must be 32 (the writer aligns tensor data to 32 bytes)"));
        }
        md.push((key, val));
    }
    let shown = path.display().to_string();
    detach(py, op, || {
        let mdr: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let tsr: Vec<(&str, &QTensor)> = ts.iter().map(|(k, t)| (k.as_str(), t.as_ref())).collect();
        crate::bindings::safetensors_io::write_atomic_with(&path, |f| {
            let mut w = std::io::BufWriter::new(f);
            gguf_file::write(&mut w, &mdr, &tsr).map_err(std::io::Error::other)?;
            w.into_inner().map_err(|e| e.into_error()).map(|_| ())
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => pyo3::exceptions::PyFileNotFoundError::new_err(format!("{op}: {shown}: {e}")),
            _ => pyo3::exceptions::PyOSError::new_err(format!("{op}: {shown}: {e}")),
        })
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_load_gguf, m)?)?;
    m.add_function(wrap_pyfunction!(_save_gguf, m)?)?;
    Ok(())
}
