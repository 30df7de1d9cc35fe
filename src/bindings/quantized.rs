//! Quantized tensors (`candle_py.quantized`): the `QTensor` class over Candle's
//! quantized storage, quantizing, `x @ W^T` and row lookups with a quantized
//! weight, and GGUF files (`gguf_io.rs`, validated first by `gguf_header.rs`).
//!
//! A `QTensor` is immutable: its storage sits behind an `Arc` that layers, state
//! dicts and Python handles share, so weights stay quantized (one copy) however
//! many modules hold them; device moves make new objects.
use crate::autograd::{ops, Value};
use crate::bindings::device::{device_arg, PyDevice};
use crate::bindings::errors::{
    detach_op, device_str, dtype_err, index_err, labelled_device_err, labelled_dtype_err, labelled_shape_err, shape_err, shape_str,
    value_err,
};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::quantized::{self as q, QWeight};
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device, Shape, Tensor};
use pyo3::prelude::*;
use std::sync::Arc;

mod gguf_header;
mod gguf_io;

/// A tensor in one of GGML's block formats (`q4k`, `q8_0`, ...) or a plain float type.
#[pyclass(name = "QTensor", module = "candle_py.quantized", frozen)]
pub struct PyQTensor {
    pub w: Arc<QWeight>,
}

impl PyQTensor {
    pub fn new(q: candle_core::quantized::QTensor) -> PyQTensor {
        PyQTensor { w: Arc::new(QWeight::new(q)) }
    }
    fn ty(&self) -> GgmlDType {
        self.w.q.dtype()
    }
    fn dims(&self) -> &[usize] {
        self.w.q.shape().dims()
    }
}

/// The type for a name, or a ValueError listing the names.
pub fn parse_type(op: &str, name: &str) -> PyResult<GgmlDType> {
    q::parse_type(name).ok_or_else(|| {
        let names: Vec<&str> = q::TYPES.iter().map(|(_, n)| *n).collect();
        value_err(op, format!("unknown quantized dtype {name:?}; expected one of {}", names.join(", ")))
    })
}

#[pymethods]
impl PyQTensor {
    /// The GGML type's name: "q4k", "q8_0", "f16", ...
    #[getter]
    fn dtype(&self) -> &'static str {
        q::type_name(self.ty())
    }
    /// The shape of the float tensor it stands for.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::bindings::size::size_tuple(py, self.dims())
    }
    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.dims().len()
    }
    /// Elements per block of the type (32 for q4_0..q8_1, 256 for the k-quants, 1 for floats).
    #[getter]
    fn block_size(&self) -> usize {
        self.ty().block_size()
    }
    /// Bytes of quantized storage.
    #[getter]
    fn nbytes(&self) -> usize {
        self.w.q.storage_size_in_bytes()
    }
    /// Where the blocks live.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::of(&self.w.q.device())
    }
    /// The element count of the float tensor it stands for.
    fn numel(&self) -> usize {
        self.dims().iter().product()
    }
    /// The shape (as `Tensor.size()`).
    fn size<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.shape(py)
    }
    /// The float32 tensor the blocks encode (on `device`, default: this tensor's).
    #[pyo3(signature = (device=None))]
    fn dequantize(&self, py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let dev = match device {
            Some(d) if !d.is_none() => device_arg(Some(d))?,
            _ => self.w.q.device(),
        };
        let w = self.w.clone();
        let t = detach_op(py, "dequantize", || w.q.dequantize(&dev))?;
        Ok(PyTensor::wrap_dt(t, DT::F32))
    }
    /// The same blocks on `device` (this object when already there).
    fn to(slf: &Bound<'_, Self>, py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<Py<PyQTensor>> {
        let dev = device_arg(Some(device))?;
        let w = slf.get().w.clone();
        if w.q.device().same_device(&dev) {
            return Ok(slf.clone().unbind());
        }
        let moved = detach_op(py, "QTensor.to", || q::to_device(&w.q, &dev))?;
        Py::new(py, PyQTensor { w: Arc::new(QWeight::from_arc(moved)) })
    }
    /// The same blocks on the CPU.
    fn cpu(slf: &Bound<'_, Self>, py: Python<'_>) -> PyResult<Py<PyQTensor>> {
        Self::to(slf, py, &pyo3::types::PyString::new(py, "cpu").into_any())
    }
    /// `QTensor(shape=[N, K], dtype=q4k, nbytes=..., device='cpu')`.
    fn __repr__(&self) -> String {
        format!(
            "QTensor(shape={}, dtype={}, nbytes={}, device='{}')",
            shape_str(self.dims()),
            self.dtype(),
            self.nbytes(),
            device_str(&self.w.q.device())
        )
    }
    /// Pickling (and so copies to other processes): the type, shape, raw blocks and
    /// device; `_qtensor_from_bytes` rebuilds the same blocks.
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (&'static str, Vec<usize>, Bound<'py, pyo3::types::PyBytes>, String))> {
        let f = py.import("candle_py._core")?.getattr("_qtensor_from_bytes")?;
        let w = self.w.clone();
        let bytes = detach_op(py, "QTensor.__reduce__", move || {
            let cpu = if w.q.device().is_cpu() { w.q.clone() } else { q::to_device(&w.q, &Device::Cpu)? };
            Ok(cpu.data()?.into_owned())
        })?;
        let data = pyo3::types::PyBytes::new(py, &bytes);
        Ok((f, (self.dtype(), self.dims().to_vec(), data, device_str(&self.w.q.device()))))
    }
    // Immutable, so a copy may share the storage (as tuples do).
    fn __copy__(slf: &Bound<'_, Self>) -> Py<PyQTensor> {
        slf.clone().unbind()
    }
    fn __deepcopy__(slf: &Bound<'_, Self>, _memo: &Bound<'_, PyAny>) -> Py<PyQTensor> {
        slf.clone().unbind()
    }
}

/// `_qtensor_from_bytes(dtype, shape, data, device)`: a QTensor of GGML type `dtype`
/// from its raw blocks (what `QTensor.__reduce__` gives pickle); the byte count must
/// be the shape's.
#[pyfunction]
fn _qtensor_from_bytes(py: Python<'_>, dtype: &str, shape: Vec<usize>, data: &[u8], device: &Bound<'_, PyAny>) -> PyResult<PyQTensor> {
    const OP: &str = "QTensor";
    let t = parse_type(OP, dtype)?;
    let dev = device_arg(Some(device))?;
    let n: usize = shape.iter().product();
    let last = shape.last().copied().unwrap_or(0);
    if shape.is_empty() || !last.is_multiple_of(t.block_size()) || n / t.block_size() * t.type_size() != data.len() {
        return Err(shape_err(
            OP,
            format!(
                "{} bytes do not hold a {} tensor of shape {} (blocks of {} elements, {} bytes)",
                data.len(),
                q::type_name(t),
                shape_str(&shape),
                t.block_size(),
                t.type_size()
            ),
        ));
    }
    let bytes = data.to_vec();
    let out = detach_op(py, OP, move || {
        let storage = candle_core::quantized::QStorage::from_data(std::borrow::Cow::Owned(bytes), &Device::Cpu, t)?;
        let qt = Arc::new(candle_core::quantized::QTensor::new(storage, shape)?);
        if dev.is_cpu() {
            Ok(qt)
        } else {
            q::to_device(&qt, &dev)
        }
    })?;
    Ok(PyQTensor { w: Arc::new(QWeight::from_arc(out)) })
}

/// `_qtype(name) -> (name, block_size, type_size)`: a dtype name resolved (aliases
/// such as "Q4_K" accepted), with its block's element count and byte size.
#[pyfunction]
fn _qtype(name: &str) -> PyResult<(&'static str, usize, usize)> {
    let t = parse_type("quantized dtype", name)?;
    Ok((q::type_name(t), t.block_size(), t.type_size()))
}

/// `_qtypes()`: every dtype name Candle stores, in GGML's order.
#[pyfunction]
fn _qtypes() -> Vec<&'static str> {
    q::TYPES.iter().map(|(_, n)| *n).collect()
}

/// `_quantize(input, dtype) -> QTensor`: the float tensor in blocks of `dtype`.
#[pyfunction]
fn _quantize(py: Python<'_>, input: &Bound<'_, PyTensor>, dtype: &str) -> PyResult<PyQTensor> {
    let op = "quantize";
    let ty = parse_type(op, dtype)?;
    let (t, dt) = input.get().t_dt();
    if !dt.is_float() {
        return Err(dtype_err(op, format!("expected a floating point tensor, got {} of shape {}", dt.name(), shape_str(t.dims()))));
    }
    let bs = ty.block_size();
    match t.dims().last() {
        None => return Err(shape_err(op, format!("cannot quantize a 0-d tensor to {dtype}: it needs at least one dimension"))),
        Some(&k) if k % bs != 0 => {
            return Err(shape_err(
                op,
                format!(
                    "{} tensor of shape {}: the last dim {k} must be a multiple of {}'s block size {bs}",
                    dt.name(),
                    shape_str(t.dims()),
                    q::type_name(ty)
                ),
            ))
        }
        _ => {}
    }
    let qt = detach_op(py, op, || q::quantize(&t, ty))?;
    Ok(PyQTensor::new(qt))
}

/// `_qlinear(input, weight, bias=None, op="linear:")`: `input @ weight^T + bias` with a
/// quantized (N, K) weight; input (..., K) of a float dtype, the result in that dtype.
/// Differentiable in `input` and `bias` (the weight is constant).
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None, op="linear:"))]
fn _qlinear(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyQTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    op: &str,
) -> PyResult<PyTensor> {
    let (xv, dt) = input.get().v_dt();
    let w = weight.get().w.clone();
    let b = bias.map(|b| b.get().v_dt());
    let bad_dt = b.as_ref().is_some_and(|(_, d)| *d != dt);
    if !dt.is_float() || bad_dt {
        let bd = b.as_ref().map_or(String::new(), |(_, d)| format!(", bias {}", d.name()));
        let msg = format!("expected a floating-point input and a bias of its dtype, got input {}{bd}", dt.name());
        return Err(labelled_dtype_err(op, msg));
    }
    let wd = w.q.shape().dims().to_vec();
    let x = &xv.data;
    if wd.len() != 2 || x.rank() == 0 || x.dims()[x.rank() - 1] != wd[1] {
        let k = wd.get(1).map_or("in_features".to_string(), |k| k.to_string());
        let msg = format!(
            "expected input with last dimension {k} for the {} weight {} (out_features, in_features), got shape {}",
            q::type_name(w.q.dtype()),
            shape_str(&wd),
            shape_str(x.dims())
        );
        return Err(labelled_shape_err(op, msg));
    }
    if let Some((bv, _)) = &b {
        if bv.data.dims() != [wd[0]] {
            let msg =
                format!("bias shape {} does not fit weight shape {} (expects [{}])", shape_str(bv.data.dims()), shape_str(&wd), wd[0]);
            return Err(labelled_shape_err(op, msg));
        }
    }
    let wdev = w.q.device();
    for t in std::iter::once(x).chain(b.as_ref().map(|(v, _)| &v.data)) {
        if !t.device().same_device(&wdev) {
            let msg = format!("expected input, weight and bias on one device, got {} and {}", device_str(t.device()), device_str(&wdev));
            return Err(labelled_device_err(op, msg));
        }
    }
    let name = "quantized linear";
    let out = detach_op(py, name, || {
        let y = w.matmul_t(&xv.data)?;
        let (xshape, wg) = (xv.data.shape().clone(), w.clone());
        let y = ops::record("QuantizedLinearBackward0", &[&xv], y, &[], false, move |_, g, _| Ok(vec![Some(grad_input(&wg, g, &xshape)?)]));
        match &b {
            Some((bv, _)) => ops::add(&y, bv),
            None => Ok(y),
        }
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// `_qcat(tensors) -> QTensor`: QTensors of one dtype and device whose shapes agree
/// past dim 0, joined along dim 0 (their bytes one after another: no requantizing).
#[pyfunction]
fn _qcat(py: Python<'_>, tensors: Vec<Bound<'_, PyQTensor>>) -> PyResult<PyQTensor> {
    let op = "quantized.cat";
    let parts: Vec<Arc<candle_core::quantized::QTensor>> = tensors.iter().map(|t| t.get().w.q.clone()).collect();
    let Some(first) = parts.first() else {
        return Err(value_err(op, "expected a non-empty list of QTensors"));
    };
    let describe =
        || parts.iter().map(|p| format!("{} {}", q::type_name(p.dtype()), shape_str(p.shape().dims()))).collect::<Vec<_>>().join(", ");
    if first.shape().rank() == 0
        || parts.iter().any(|p| p.shape().rank() != first.shape().rank() || p.shape().dims()[1..] != first.shape().dims()[1..])
    {
        return Err(shape_err(op, format!("expected tensors of at least 1 dim whose shapes agree except in dim 0, got {}", describe())));
    }
    if parts.iter().any(|p| p.dtype() != first.dtype()) {
        return Err(dtype_err(op, format!("expected tensors of one dtype, got {}", describe())));
    }
    let dev = first.device();
    if let Some(p) = parts.iter().find(|p| !p.device().same_device(&dev)) {
        let msg = format!("expected tensors on one device, got {} and {}", device_str(&dev), device_str(&p.device()));
        return Err(labelled_device_err(op, msg));
    }
    let out = detach_op(py, op, || q::cat0(&parts))?;
    Ok(PyQTensor::new(out))
}

/// `_qmatmul(input, weight, kernel) -> Tensor`: `input @ weight.T` without autograd,
/// with the kernels named: `"auto"` (what `quantized.matmul` runs), `"portable"`
/// (ours without SIMD) or `"candle"` (Candle's QMatMul). Private: the tests compare
/// the kernels and `benches/bench_qmatmul.py` times them.
#[pyfunction]
fn _qmatmul(py: Python<'_>, input: &Bound<'_, PyTensor>, weight: &Bound<'_, PyQTensor>, kernel: &str) -> PyResult<PyTensor> {
    let op = "_qmatmul";
    let (x, dt) = input.get().t_dt();
    let w = weight.get().w.clone();
    let kernel = match kernel {
        "auto" => q::Kernel::Auto,
        "portable" => q::Kernel::Portable,
        "candle" => q::Kernel::Candle,
        _ => return Err(value_err(op, format!("unknown kernel \"{kernel}\"; expected auto, portable or candle"))),
    };
    let wd = w.q.shape().dims().to_vec();
    if !dt.is_float() || wd.len() != 2 || x.rank() == 0 || x.dims()[x.rank() - 1] != wd[1] || !x.device().same_device(&w.q.device()) {
        let msg = format!(
            "expected a float input of shape (..., {}) on the weight's device, got shape {}",
            wd.get(1).unwrap_or(&0),
            shape_str(x.dims())
        );
        return Err(shape_err(op, msg));
    }
    let y = detach_op(py, op, || w.matmul_t_with(&x, kernel))?;
    Ok(PyTensor::wrap_dt(y, dt))
}

/// `g @ W` reshaped to the input's shape: the input's gradient, from a float copy
/// of the weight made for this call (keeping one would undo what the format saves).
fn grad_input(w: &QWeight, g: &Value, xshape: &Shape) -> candle_core::Result<Value> {
    let wd = Value::plain(w.q.dequantize(&w.q.device())?.to_dtype(g.data.dtype())?);
    let (n, k) = wd.data.dims2()?;
    let m = xshape.elem_count() / k.max(1);
    let g2 = ops::reshape(g, &Shape::from((m, n)))?;
    ops::reshape(&ops::matmul(&g2, &wd)?, xshape)
}

/// `_qembedding(input, weight) -> Tensor`: rows of a quantized (V, K) weight picked by
/// the integer tensor `input`, as float32 of shape (*input.shape, K).
#[pyfunction]
fn _qembedding(py: Python<'_>, input: &Bound<'_, PyTensor>, weight: &Bound<'_, PyQTensor>) -> PyResult<PyTensor> {
    let op = "embedding";
    let (ids, dt) = input.get().t_dt();
    let w = weight.get().w.clone();
    if dt.is_float() || dt == DT::Bool {
        return Err(dtype_err(op, format!("indices must be an integer tensor, got {} of shape {}", dt.name(), shape_str(ids.dims()))));
    }
    let wd = w.q.shape().dims().to_vec();
    if wd.len() != 2 {
        return Err(shape_err(op, format!("expected a 2-D (num_embeddings, embedding_dim) weight, got shape {}", shape_str(&wd))));
    }
    let rows = wd[0];
    let flat = detach_op(py, op, || ids.to_dtype(DType::I64)?.flatten_all()?.to_vec1::<i64>())?;
    if let Some(bad) = flat.iter().find(|&&i| i < 0 || i as u64 >= rows as u64) {
        return Err(index_err(
            op,
            format!("index {bad} is out of range for {rows} rows (weight {}, input {})", shape_str(&wd), shape_str(ids.dims())),
        ));
    }
    let dev = w.q.device();
    let dims = ids.dims().to_vec();
    let out = detach_op(py, op, || {
        let idx: Vec<u32> = flat.iter().map(|&i| i as u32).collect();
        let idx = Tensor::from_vec(idx, dims, &Device::Cpu)?.to_device(&dev)?;
        w.embedding(&idx)
    })?;
    Ok(PyTensor::wrap_dt(out, DT::F32))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyQTensor>()?;
    m.add_function(wrap_pyfunction!(_qtype, m)?)?;
    m.add_function(wrap_pyfunction!(_qtensor_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_qcat, m)?)?;
    m.add_function(wrap_pyfunction!(_qtypes, m)?)?;
    m.add_function(wrap_pyfunction!(_quantize, m)?)?;
    m.add_function(wrap_pyfunction!(_qlinear, m)?)?;
    m.add_function(wrap_pyfunction!(_qembedding, m)?)?;
    m.add_function(wrap_pyfunction!(_qmatmul, m)?)?;
    gguf_io::register(m)?;
    Ok(())
}
