//! Making tensors: from Python data and NumPy, and PyTorch's factory functions.
use crate::autograd::Value;
use crate::bindings::args::{cast, check_alloc, extract_scalar, nonneg_shape, opt_dtype, Scalar};
use crate::bindings::device::device_arg;
use crate::bindings::errors::{dtype_err, type_err, value_err, OpResult};
use crate::bindings::numpy_interop::from_numpy_array;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::layout::Dense;
use candle_core::{DType, Device, Tensor};
use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt, PyList, PySequence, PyString, PyTuple};

/// Shapes given PyTorch's ways: `f(2, 3)`, `f((2, 3))`, `f([2, 3])`.
/// The size of a creation function given positionally (`zeros(2, 3)`, `zeros((2, 3))`)
/// or as PyTorch's keyword (`zeros(size=(2, 3))`), as the one tuple `shape_args` reads.
pub(crate) fn size_kw<'py>(args: &Bound<'py, PyTuple>, size: Option<&Bound<'py, PyAny>>, op: &str) -> PyResult<Bound<'py, PyTuple>> {
    match size.filter(|s| !s.is_none()) {
        None => Ok(args.clone()),
        Some(_) if !args.is_empty() => Err(type_err(op, "got multiple values for argument 'size'")),
        Some(s) => PyTuple::new(args.py(), [s]),
    }
}

pub fn shape_args(args: &Bound<'_, PyTuple>, op: &str) -> PyResult<Vec<i64>> {
    let items: Bound<'_, PyAny> =
        if args.len() == 1 && !args.get_item(0)?.is_instance_of::<PyInt>() { args.get_item(0)? } else { args.clone().into_any() };
    let mut out = Vec::new();
    for it in items.try_iter().map_err(|_| type_err(op, "size must be ints or a sequence of ints"))? {
        let it = it?;
        if let Ok(t) = it.cast::<PyTensor>() {
            let v = t.get().t().to_dtype(DType::I64).and_then(|x| x.to_scalar::<i64>()).op(op)?;
            out.push(v);
            continue;
        }
        if it.is_instance_of::<PyFloat>() {
            return Err(type_err(op, format!("size must contain ints, got float {}", it)));
        }
        if it.is_instance_of::<PyInt>() && it.extract::<i64>().is_err() {
            // A Python int past i64: a size no tensor can have, not a type mistake.
            return Err(crate::bindings::errors::value_err(op, format!("size {it} is too large (sizes must fit in int64)")));
        }
        out.push(it.extract::<i64>().map_err(|_| {
            type_err(op, format!("size must contain ints, got {}", it.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
        })?);
    }
    Ok(out)
}

/// Cast and place a new tensor; no `device=` means the default device.
fn finish(t: PyTensor, dtype: Option<DT>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let mut cur = t.t();
    let from = t.dt();
    let dev = device_arg(device)?;
    if !cur.device().same_device(&dev) {
        cur = cur.to_device(&dev).op("tensor")?;
    }
    let to = dtype.unwrap_or(from);
    let cur = cast(&cur, from, to)?;
    Ok(PyTensor::wrap_dt(cur, to))
}

/// `candle_py.tensor` semantics: always a new tensor that owns its data.
pub fn tensor_from_data(data: &Bound<'_, PyAny>, dtype: Option<DT>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let py = data.py();
    if let Ok(t) = data.cast::<PyTensor>() {
        let me = t.get();
        let copy = crate::ops::layout::copy(&me.t()).op("tensor")?;
        return finish(PyTensor::wrap(copy, me.is_bool), dtype, device);
    }
    if let Ok(a) = data.cast::<PyUntypedArray>() {
        return finish(from_numpy_array(a)?, dtype, device);
    }
    // NumPy scalars keep their dtype (torch.tensor(np.float64(1)) is float64).
    let np = py.import("numpy")?;
    if data.is_instance(&np.getattr("generic")?)? {
        let a = np.call_method1("asarray", (data,))?;
        return finish(from_numpy_array(a.cast::<PyUntypedArray>()?)?, dtype, device);
    }
    if let Some(s) = extract_scalar(data) {
        // A Python float asked for as float64 is kept exact, not rounded through float32.
        let dt = if dtype == Some(DT::F64) && s.dt().is_float() { DT::F64 } else { s.dt() };
        let t = s.tensor(dt, &Device::Cpu)?;
        return finish(PyTensor::wrap_dt(t, dt), dtype, device);
    }
    if data.is_none() || data.is_instance_of::<PyString>() {
        return Err(type_err("tensor", format!("cannot make a tensor from {}", data.get_type().name()?)));
    }
    if data.hasattr("__dlpack__")? && !data.is_instance_of::<PyList>() {
        let a = np.call_method1("from_dlpack", (data,))?;
        return finish(from_numpy_array(a.cast::<PyUntypedArray>()?)?, dtype, device);
    }
    if data.hasattr("__array__")? || data.hasattr("__array_interface__")? {
        let a = np.call_method1("asarray", (data,))?;
        return finish(from_numpy_array(a.cast::<PyUntypedArray>()?)?, dtype, device);
    }
    if data.cast::<PySequence>().is_err() {
        return Err(type_err("tensor", format!("cannot make a tensor from {}", data.get_type().name()?)));
    }
    // Nested sequences: NumPy walks them in C; we then apply PyTorch's dtype rules.
    let a = np.call_method1("array", (data,)).map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
            value_err("tensor", format!("nested sequence has inconsistent lengths (ragged): {}", e.value(py)))
        } else {
            e
        }
    })?;
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    let default = crate::bindings::dtype::default_float();
    // Python floats get the default float dtype (float32 unless changed), as in torch;
    // NumPy holds them as float64, kept so when float64 is what we make.
    let dtype = if kind == "f" { dtype.or(Some(default)) } else { dtype };
    let a = match kind.as_str() {
        "f" if dtype == Some(DT::F64) => a,
        "f" => a.call_method1("astype", ("float32",))?,
        "i" | "u" => a.call_method1("astype", ("int64",))?,
        "b" => a,
        _ => {
            return Err(type_err(
                "tensor",
                format!("cannot make a tensor from a sequence of {} (expected numbers or bools)", a.getattr("dtype")?.str()?),
            ))
        }
    };
    finish(from_numpy_array(a.cast::<PyUntypedArray>()?)?, dtype, device)
}

pub(crate) fn with_grad(t: PyTensor, requires_grad: bool) -> PyResult<PyTensor> {
    if requires_grad {
        t.set_requires_grad(true)?;
    }
    Ok(t)
}

/// Accept a Tensor, or anything `candle_py.tensor` accepts (lists, arrays, scalars).
pub fn as_tensor_arg(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<(Tensor, DT)> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = t.get();
        return Ok((t.t(), t.dt()));
    }
    let made = crate::bindings::creation::tensor_from_data(obj, None, None).map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyTypeError>(obj.py()) {
            type_err(op, format!("expected a Tensor, got {}", obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
        } else {
            e
        }
    })?;
    let dt = made.dt();
    Ok((made.t(), dt))
}

#[pyfunction]
#[pyo3(signature = (data, *, dtype=None, device=None, requires_grad=false, pin_memory=false))]
fn tensor(
    data: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    pin_memory: bool,
) -> PyResult<PyTensor> {
    let _ = pin_memory;
    with_grad(tensor_from_data(data, opt_dtype(dtype)?, device)?, requires_grad)
}

#[pyfunction]
#[pyo3(signature = (data, dtype=None, device=None))]
fn as_tensor(data: &Bound<'_, PyAny>, dtype: Option<&Bound<'_, PyAny>>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    if let Ok(t) = data.cast::<PyTensor>() {
        let obj = t.clone().into_any();
        let obj = match dtype {
            Some(d) if !d.is_none() => obj.call_method1("to", (d,))?,
            _ => obj,
        };
        let obj = match device {
            Some(d) if !d.is_none() => obj.call_method1("to", (d,))?,
            _ => obj,
        };
        return Ok(obj.unbind());
    }
    Ok(Py::new(data.py(), tensor_from_data(data, opt_dtype(dtype)?, device)?)?.into_any())
}

fn filled(shape: &[usize], value: Scalar, dt: DT, dev: &Device) -> PyResult<Tensor> {
    let s = value.tensor(dt, &Device::Cpu)?;
    s.to_device(dev).and_then(|s| s.broadcast_as(shape)).and_then(|s| s.dense()).op("full")
}

fn make_full(
    args: &Bound<'_, PyTuple>,
    value: Scalar,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    op: &str,
) -> PyResult<PyTensor> {
    let shape = nonneg_shape(&shape_args(args, op)?, op)?;
    let dt = opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float);
    let dev = device_arg(device)?;
    check_alloc(shape.iter().product(), dt.itemsize(), op)?;
    let t = match value {
        Scalar::Int(0) => Tensor::zeros(shape.as_slice(), dt.candle(), &dev).op(op)?,
        Scalar::Int(1) => Tensor::ones(shape.as_slice(), dt.candle(), &dev).op(op)?,
        v => filled(&shape, v, dt, &dev)?,
    };
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (*args, size=None, dtype=None, device=None, requires_grad=false))]
fn zeros(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    make_full(&size_kw(args, size, "zeros")?, Scalar::Int(0), dtype, device, requires_grad, "zeros")
}

#[pyfunction]
#[pyo3(signature = (*args, size=None, dtype=None, device=None, requires_grad=false))]
fn ones(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    make_full(&size_kw(args, size, "ones")?, Scalar::Int(1), dtype, device, requires_grad, "ones")
}

/// `empty` gives zeros: Candle has no uninitialised public allocation, and zeros are safe.
#[pyfunction]
#[pyo3(signature = (*args, size=None, dtype=None, device=None, requires_grad=false))]
fn empty(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    make_full(&size_kw(args, size, "empty")?, Scalar::Int(0), dtype, device, requires_grad, "empty")
}

fn scalar_arg(v: &Bound<'_, PyAny>, op: &str) -> PyResult<Scalar> {
    if let Ok(t) = v.cast::<PyTensor>() {
        let t = t.get();
        if t.t().elem_count() == 1 {
            let f = t.t().flatten_all().and_then(|x| x.to_dtype(DType::F64)).and_then(|x| x.to_vec1::<f64>()).op(op)?[0];
            return Ok(match t.dt() {
                DT::Bool => Scalar::Bool(f != 0.0),
                d if d.is_float() => Scalar::Float(f),
                _ => Scalar::Int(f as i64),
            });
        }
    }
    extract_scalar(v)
        .ok_or_else(|| type_err(op, format!("expected a number, got {}", v.get_type().name().map(|n| n.to_string()).unwrap_or_default())))
}

#[pyfunction]
#[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false))]
fn full(
    size: &Bound<'_, PyAny>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let v = scalar_arg(fill_value, "full")?;
    let dt = opt_dtype(dtype)?.unwrap_or(v.dt());
    let shape = nonneg_shape(&shape_args(&PyTuple::new(size.py(), [size])?, "full")?, "full")?;
    check_alloc(shape.iter().product(), dt.itemsize(), "full")?;
    let t = filled(&shape, v, dt, &device_arg(device)?)?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

/// Resolve `*_like` arguments: the template's shape, dtype and device unless overridden.
pub(crate) fn like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<usize>, DT, Device)> {
    let me = input.get();
    let t = me.t();
    let dt = opt_dtype(dtype)?.unwrap_or(me.dt());
    let dev = match device {
        Some(d) if !d.is_none() => device_arg(Some(d))?,
        _ => t.device().clone(),
    };
    Ok((t.dims().to_vec(), dt, dev))
}

#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, device=None, requires_grad=false))]
fn zeros_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, dt, dev) = like(input, dtype, device)?;
    with_grad(PyTensor::wrap_dt(Tensor::zeros(s, dt.candle(), &dev).op("zeros_like")?, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, device=None, requires_grad=false))]
fn empty_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    zeros_like(input, dtype, device, requires_grad)
}

#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, device=None, requires_grad=false))]
fn ones_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, dt, dev) = like(input, dtype, device)?;
    with_grad(PyTensor::wrap_dt(Tensor::ones(s, dt.candle(), &dev).op("ones_like")?, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (input, fill_value, *, dtype=None, device=None, requires_grad=false))]
fn full_like(
    input: &Bound<'_, PyTensor>,
    fill_value: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, dt, dev) = like(input, dtype, device)?;
    let v = scalar_arg(fill_value, "full_like")?;
    with_grad(PyTensor::wrap_dt(filled(&s, v, dt, &dev)?, dt), requires_grad)
}

/// `arange(end)`, `arange(start, end, step=1)`; int64 when every bound is an int, else float32.
#[pyfunction]
#[pyo3(signature = (start, end=None, step=None, *, dtype=None, device=None, requires_grad=false))]
fn arange(
    start: &Bound<'_, PyAny>,
    end: Option<&Bound<'_, PyAny>>,
    step: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (s, e) = match end {
        Some(e) if !e.is_none() => (scalar_arg(start, "arange")?, scalar_arg(e, "arange")?),
        _ => (Scalar::Int(0), scalar_arg(start, "arange")?),
    };
    let st = match step {
        Some(x) if !x.is_none() => scalar_arg(x, "arange")?,
        _ => Scalar::Int(1),
    };
    let all_int = [s, e, st].iter().all(|v| !matches!(v, Scalar::Float(_)));
    let dt = opt_dtype(dtype)?.unwrap_or(if all_int { DT::I64 } else { crate::bindings::dtype::default_float() });
    let (a, b, c) = (s.f64(), e.f64(), st.f64());
    if c == 0.0 || !a.is_finite() || !b.is_finite() || !c.is_finite() {
        return Err(value_err("arange", "step must be nonzero and bounds finite"));
    }
    if (b - a) * c < 0.0 {
        return Err(value_err("arange", "upper bound and larger bound inconsistent with step sign"));
    }
    let n = ((b - a) / c).ceil().max(0.0);
    if n > (1u64 << 40) as f64 {
        return Err(value_err("arange", "too many elements"));
    }
    let n = n as usize;
    check_alloc(n, 16, "arange")?;
    let t = if all_int && !dt.is_float() {
        let (a, c) = (
            match s {
                Scalar::Int(i) => i,
                x => x.f64() as i64,
            },
            match st {
                Scalar::Int(i) => i,
                x => x.f64() as i64,
            },
        );
        Tensor::from_vec((0..n as i64).map(|i| a + i * c).collect::<Vec<i64>>(), n, &Device::Cpu)
    } else {
        Tensor::from_vec((0..n).map(|i| a + i as f64 * c).collect::<Vec<f64>>(), n, &Device::Cpu)
    }
    .op("arange")?;
    let from =
        DT::of_candle(t.dtype()).ok_or_else(|| dtype_err("dtype", format!("Candle dtype {:?} has no candle_py equivalent", t.dtype())))?;
    let t = cast(&t, from, dt)?.to_device(&device_arg(device)?).op("arange")?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

/// `linspace(start, end, steps)`: evenly spaced, both ends included (PyTorch's
/// symmetric formula, so the last value is exactly `end`).
#[pyfunction]
#[pyo3(signature = (start, end, steps, *, dtype=None, device=None, requires_grad=false))]
fn linspace(
    start: &Bound<'_, PyAny>,
    end: &Bound<'_, PyAny>,
    steps: i64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    if steps < 0 {
        return Err(value_err("linspace", format!("number of steps must be non-negative, got {steps}")));
    }
    let (a, b) = (scalar_arg(start, "linspace")?.f64(), scalar_arg(end, "linspace")?.f64());
    let n = nonneg_shape(&[steps], "linspace")?[0];
    check_alloc(n, 16, "linspace")?;
    let step = if n > 1 { (b - a) / (n - 1) as f64 } else { 0.0 };
    let half = n / 2;
    let v: Vec<f64> = (0..n).map(|i| if i < half || n == 1 { a + step * i as f64 } else { b - step * (n - 1 - i) as f64 }).collect();
    let dt = opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float);
    let t = Tensor::from_vec(v, n, &Device::Cpu).op("linspace")?;
    let t = if dt.is_float() { cast(&t, DT::F64, dt)? } else { cast(&t.floor().op("linspace")?, DT::F64, dt)? };
    let t = t.to_device(&device_arg(device)?).op("linspace")?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (n, m=None, *, dtype=None, device=None, requires_grad=false))]
fn eye(
    n: i64,
    m: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let m = m.unwrap_or(n);
    let shape = nonneg_shape(&[n, m], "eye")?;
    check_alloc(shape[0] * shape[1], 4 + opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float).itemsize(), "eye")?;
    let dt = opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float);
    let mut v = vec![0f32; shape[0] * shape[1]];
    for i in 0..shape[0].min(shape[1]) {
        v[i * shape[1] + i] = 1.0;
    }
    let t = Tensor::from_vec(v, (shape[0], shape[1]), &Device::Cpu).op("eye")?;
    let t = cast(&t, DT::F32, dt)?.to_device(&device_arg(device)?).op("eye")?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

/// Tensors of a list, cast to their promoted dtype (PyTorch promotes in cat/stack).
pub fn promoted(tensors: &Bound<'_, PyAny>, op: &str) -> PyResult<(Vec<Value>, DT)> {
    let mut ts = Vec::new();
    for it in tensors.try_iter().map_err(|_| type_err(op, "expected a sequence of Tensors"))? {
        let it = it?;
        let t = it.cast::<PyTensor>().map_err(|_| {
            type_err(
                op,
                format!("expected a sequence of Tensors, found {}", it.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
            )
        })?;
        ts.push(t.get().v_dt());
    }
    if ts.is_empty() {
        return Err(value_err(op, "expected a non-empty list of Tensors"));
    }
    let dt = ts.iter().map(|x| x.1).reduce(DT::promote).unwrap();
    let ts = ts.iter().map(|(t, d)| crate::bindings::args::cast_v(t, *d, dt)).collect::<PyResult<Vec<_>>>()?;
    Ok((ts, dt))
}

#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
fn cat(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: i64) -> PyResult<PyTensor> {
    let (ts, dt) = promoted(tensors, "cat")?;
    let dev = ts[0].data.device().clone();
    // PyTorch skips 1-D empty tensors in cat (legacy behaviour users rely on).
    let ts: Vec<Value> =
        if ts.len() > 1 { ts.into_iter().filter(|t| !(t.data.rank() == 1 && t.data.dims()[0] == 0)).collect() } else { ts };
    if ts.is_empty() {
        return Ok(PyTensor::wrap_dt(Tensor::zeros(0, dt.candle(), &dev).op("cat")?, dt));
    }
    let rank = ts[0].data.rank();
    if rank == 0 {
        return Err(value_err("cat", "zero-dimensional tensor cannot be concatenated"));
    }
    let d = crate::bindings::args::norm_dim(dim, rank, "cat")?;
    for t in &ts {
        if t.data.rank() != rank {
            return Err(crate::bindings::errors::shape_err(
                "cat",
                format!("Tensors must have same number of dimensions: got {} and {}", rank, t.data.rank()),
            ));
        }
    }
    let out = crate::bindings::errors::detach_op(py, "cat", || crate::autograd::ops::cat(&ts, d))?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
fn stack(py: Python<'_>, tensors: &Bound<'_, PyAny>, dim: i64) -> PyResult<PyTensor> {
    let (ts, dt) = promoted(tensors, "stack")?;
    let rank = ts[0].data.rank();
    let d = crate::bindings::args::norm_dim(dim, rank + 1, "stack")?;
    for t in &ts {
        if t.data.dims() != ts[0].data.dims() {
            return Err(crate::bindings::errors::shape_err(
                "stack",
                format!("stack expects each tensor to be equal size, but got {:?} and {:?}", ts[0].data.dims(), t.data.dims()),
            ));
        }
    }
    let out = crate::bindings::errors::detach_op(py, "stack", || {
        let us = ts.iter().map(|t| crate::autograd::ops::unsqueeze(t, d)).collect::<candle_core::Result<Vec<_>>>()?;
        crate::autograd::ops::cat(&us, d)
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// `Tensor(data, dtype=..., device=..., requires_grad=...)`: the constructor.
#[pymethods]
impl PyTensor {
    /// PyTorch's legacy constructor: `Tensor(data)` copies data as float32 (a Tensor
    /// argument keeps its dtype, which `nn.Parameter` relies on), `Tensor(2, 3)` is a
    /// 2x3 float32 tensor (zeros: Candle has no uninitialised allocation), `Tensor()`
    /// is empty. `dtype` overrides float32.
    #[new]
    #[pyo3(signature = (*args, dtype=None, device=None, requires_grad=false))]
    fn py_new(
        args: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<Self> {
        let dt = opt_dtype(dtype)?;
        let is_int = |a: &Bound<'_, PyAny>| a.is_instance_of::<PyInt>() && !a.is_instance_of::<pyo3::types::PyBool>();
        let sizes = !args.is_empty() && args.iter().all(|a| is_int(&a));
        let t = if args.is_empty() || sizes {
            // `Tensor()` is empty (shape [0]), not 0-d.
            let shape = if args.is_empty() { vec![0] } else { nonneg_shape(&shape_args(args, "Tensor")?, "Tensor")? };
            let dt = dt.unwrap_or(DT::F32);
            check_alloc(shape.iter().product(), dt.candle().size_in_bytes(), "Tensor")?;
            PyTensor::wrap_dt(Tensor::zeros(shape, dt.candle(), &device_arg(device)?).op("Tensor")?, dt)
        } else if args.len() == 1 {
            let d = args.get_item(0)?;
            if d.is_instance_of::<PyFloat>() || d.is_instance_of::<pyo3::types::PyBool>() {
                return Err(type_err("Tensor", format!("new(): data must be a sequence (got {})", d.get_type().name()?)));
            }
            let dt = if d.cast::<PyTensor>().is_ok() { dt } else { Some(dt.unwrap_or(DT::F32)) };
            crate::bindings::creation::tensor_from_data(&d, dt, device)?
        } else {
            return Err(type_err("Tensor", "expected data (a sequence, array or Tensor) or sizes (ints), got several non-int arguments"));
        };
        if requires_grad {
            t.set_requires_grad(true)?;
        }
        Ok(t)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tensor, m)?)?;
    m.add_function(wrap_pyfunction!(as_tensor, m)?)?;
    m.add_function(wrap_pyfunction!(zeros, m)?)?;
    m.add_function(wrap_pyfunction!(ones, m)?)?;
    m.add_function(wrap_pyfunction!(empty, m)?)?;
    m.add_function(wrap_pyfunction!(full, m)?)?;
    m.add_function(wrap_pyfunction!(zeros_like, m)?)?;
    m.add_function(wrap_pyfunction!(ones_like, m)?)?;
    m.add_function(wrap_pyfunction!(empty_like, m)?)?;
    m.add_function(wrap_pyfunction!(full_like, m)?)?;
    m.add_function(wrap_pyfunction!(arange, m)?)?;
    m.add_function(wrap_pyfunction!(linspace, m)?)?;
    m.add_function(wrap_pyfunction!(eye, m)?)?;
    m.add_function(wrap_pyfunction!(cat, m)?)?;
    m.add_function(wrap_pyfunction!(stack, m)?)?;
    let _ = PyList::empty(m.py());
    Ok(())
}
