//! The `Tensor` class: a Candle tensor plus what PyTorch users expect around it
//! (a boolean dtype, a `.grad` slot, in-place replacement of the data).
//!
//! Methods live in one file per area (math.rs, shape_ops.rs, indexing.rs,
//! autograd.rs, numpy_interop.rs); this file holds the struct, conversions of
//! arguments, and the plain attributes.
use crate::autograd::{self, GradSlot};
use crate::device::{extract_device, PyDevice};
use crate::dtype::{extract_dtype, PyDType, DT};
use crate::errors::{runtime_err, type_err, value_err, OpResult};
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};
use std::sync::{Arc, OnceLock, RwLock};

#[pyclass(name = "Tensor", module = "candle_py", subclass, frozen, weakref)]
pub struct PyTensor {
    /// Replaceable so that in-place methods (`requires_grad_`, `x[i] = v` on a
    /// tensor in the autograd graph, `.data = ...`) can swap the value.
    inner: RwLock<Tensor>,
    /// Stored as U8 in Candle; shown as `bool` to Python.
    pub is_bool: bool,
    /// Shared by every Python object that wraps the same leaf tensor; made on
    /// first use for other tensors (most never need one).
    grad: OnceLock<Arc<GradSlot>>,
}

impl PyTensor {
    /// Wrap a fresh Candle result. Outside grad mode the result is cut from the graph.
    pub fn wrap(t: Tensor, is_bool: bool) -> PyTensor {
        let t = if t.track_op() && !t.is_variable() && !autograd::grad_enabled() { t.detach() } else { t };
        // Candle slices storage from a view's start offset even when the view
        // holds no element, so an empty view past the end of its storage
        // (`x[:, 1]` of a (0, 3) tensor) panics in later ops: make it fresh.
        let t = if t.layout().start_offset() != 0 && t.elem_count() == 0 {
            Tensor::zeros(t.shape(), t.dtype(), t.device()).unwrap_or(t)
        } else {
            t
        };
        let grad = OnceLock::new();
        if t.is_variable() {
            let _ = grad.set(autograd::slot_for(&t));
        }
        PyTensor { inner: RwLock::new(t), is_bool, grad }
    }

    pub fn wrap_dt(t: Tensor, dt: DT) -> PyTensor {
        Self::wrap(t, dt == DT::Bool)
    }

    /// Wrap a tensor just made from a buffer (`Tensor::from_vec`): not in the graph,
    /// not a view, so none of `wrap`'s checks apply. The dispatch fast path uses it.
    pub fn wrap_fresh(t: Tensor) -> PyTensor {
        debug_assert!(!t.track_op() && t.layout().start_offset() == 0);
        PyTensor { inner: RwLock::new(t), is_bool: false, grad: OnceLock::new() }
    }

    /// The current value, borrowed under the read lock (no clone: two atomics fewer
    /// than `t()`, which matters on the per-op dispatch path).
    #[inline]
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Tensor> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    pub fn t(&self) -> Tensor {
        self.read().clone()
    }

    pub fn replace(&self, t: Tensor) {
        if t.is_variable() {
            autograd::rebind_slot(&t, self.slot());
        }
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = t;
    }

    /// This tensor's `.grad` slot, created on first use.
    pub fn slot(&self) -> &Arc<GradSlot> {
        self.grad.get_or_init(|| Arc::new(std::sync::Mutex::new(None)))
    }

    /// The `.grad` slot if one was ever made (None means no gradient).
    pub fn slot_if_any(&self) -> Option<&Arc<GradSlot>> {
        self.grad.get()
    }

    /// The Candle tensor and the Python-level dtype, read under one lock.
    #[inline]
    pub fn t_dt(&self) -> (Tensor, DT) {
        let g = self.read();
        (g.clone(), self.dt_of(&g))
    }

    /// The Python-level dtype, read under the lock without cloning the tensor (hot path).
    pub fn dt(&self) -> DT {
        self.dt_of(&self.read())
    }

    #[inline]
    fn dt_of(&self, t: &Tensor) -> DT {
        // Every Candle dtype we create maps back; f32 is a safe fallback.
        if self.is_bool { DT::Bool } else { DT::of_candle(t.dtype()).unwrap_or(DT::F32) }
    }
}

/// A Python scalar argument, classified as PyTorch classifies it for promotion.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn dt(self) -> DT {
        match self {
            Scalar::Bool(_) => DT::Bool,
            Scalar::Int(_) => DT::I64,
            Scalar::Float(_) => DT::F32,
        }
    }
    pub fn f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    /// A 0-d Candle tensor of `dt` holding this value.
    pub fn tensor(self, dt: DT, dev: &Device) -> PyResult<Tensor> {
        let t = match (self, dt.candle()) {
            (Scalar::Int(i), DType::I64) => Tensor::new(i, dev),
            (s, DType::F64) => Tensor::new(s.f64(), dev),
            (Scalar::Int(i), d) if !dt.is_float() => Tensor::new(i, dev).and_then(|t| t.to_dtype(d)),
            (s, d) => Tensor::new(s.f64(), dev).and_then(|t| t.to_dtype(d)),
        };
        t.op("scalar")
    }
}

pub fn extract_scalar(obj: &Bound<'_, PyAny>) -> Option<Scalar> {
    if obj.is_instance_of::<PyBool>() {
        return obj.extract::<bool>().ok().map(Scalar::Bool);
    }
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().ok().map(Scalar::Int);
    }
    if obj.is_instance_of::<PyFloat>() {
        return obj.extract::<f64>().ok().map(Scalar::Float);
    }
    // NumPy scalars: np.bool_, np.integer, np.floating.
    let ty = obj.get_type();
    let module = ty.module().ok()?;
    if module.to_cow().ok()? != "numpy" {
        return None;
    }
    let kind: String = obj.getattr("dtype").ok()?.getattr("kind").ok()?.extract().ok()?;
    match kind.as_str() {
        "b" => obj.extract::<bool>().ok().map(Scalar::Bool),
        "i" | "u" => obj.extract::<i64>().ok().map(Scalar::Int),
        "f" => obj.extract::<f64>().ok().map(Scalar::Float),
        _ => None,
    }
}

/// A tensor-or-scalar operand.
pub enum Operand {
    T(Tensor, DT),
    S(Scalar),
}

pub fn extract_operand(obj: &Bound<'_, PyAny>) -> PyResult<Option<Operand>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let (t, dt) = t.get().t_dt();
        return Ok(Some(Operand::T(t, dt)));
    }
    if let Some(s) = extract_scalar(obj) {
        return Ok(Some(Operand::S(s)));
    }
    Ok(None)
}

/// Accept a Tensor, or anything `candle_py.tensor` accepts (lists, arrays, scalars).
pub fn as_tensor(obj: &Bound<'_, PyAny>, op: &str) -> PyResult<(Tensor, DT)> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let t = t.get();
        return Ok((t.t(), t.dt()));
    }
    let made = crate::creation::tensor_from_data(obj, None, None).map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyTypeError>(obj.py()) {
            type_err(op, format!("expected a Tensor, got {}", obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
        } else {
            e
        }
    })?;
    let dt = made.dt();
    Ok((made.t(), dt))
}

/// Normalize a possibly negative dim for a tensor of `rank` dims.
pub fn norm_dim(dim: i64, rank: usize, op: &str) -> PyResult<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(crate::errors::index_err(
            op,
            format!("Dimension out of range (expected to be in range of [{}, {}], but got {dim})", -r, r - 1),
        ));
    }
    Ok(d as usize)
}

/// `size(dim)`/`stride(dim)` of a 0-d tensor: there is no dimension to name.
fn no_dims_check(rank: usize, dim: i64, op: &str) -> PyResult<()> {
    if rank == 0 {
        return Err(crate::errors::index_err(op, format!("dimension specified as {dim} but tensor has no dimensions")));
    }
    Ok(())
}

/// Shapes given PyTorch's ways: `f(2, 3)`, `f((2, 3))`, `f([2, 3])`.
pub fn shape_args(args: &Bound<'_, PyTuple>, op: &str) -> PyResult<Vec<i64>> {
    let items: Bound<'_, PyAny> = if args.len() == 1 && !args.get_item(0)?.is_instance_of::<PyInt>() {
        args.get_item(0)?
    } else {
        args.clone().into_any()
    };
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
            return Err(crate::errors::value_err(op, format!("size {it} is too large (sizes must fit in int64)")));
        }
        out.push(it.extract::<i64>().map_err(|_| type_err(op, format!("size must contain ints, got {}", it.get_type().name().map(|n| n.to_string()).unwrap_or_default())))?);
    }
    Ok(out)
}

pub fn nonneg_shape(v: &[i64], op: &str) -> PyResult<Vec<usize>> {
    let mut out = Vec::with_capacity(v.len());
    let mut total: usize = 1;
    // An empty tensor allocates nothing: its other dims need only fit in int64.
    let limit = if v.contains(&0) { i64::MAX as usize } else { 1usize << 40 };
    for &d in v {
        if d < 0 {
            return Err(value_err(op, format!("negative dimension {d} in size {v:?}")));
        }
        total = total
            .checked_mul((d as usize).max(1))
            .filter(|t| *t <= limit)
            .ok_or_else(|| value_err(op, format!("size {v:?} is too large")))?;
        out.push(d as usize);
    }
    Ok(out)
}

/// Refuse an allocation the machine cannot make, before Candle tries it: a failed
/// allocation inside Rust aborts the process. Large requests are probed with a
/// fallible reservation (untouched pages cost nothing); small ones pass through.
pub fn check_alloc(elems: usize, itemsize: usize, op: &str) -> PyResult<()> {
    let bytes = elems
        .checked_mul(itemsize)
        .ok_or_else(|| runtime_err(op, format!("can't allocate memory: {elems} elements of {itemsize} bytes overflow")))?;
    if bytes < (1 << 28) {
        return Ok(());
    }
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(bytes)
        .map_err(|_| runtime_err(op, format!("can't allocate memory: you tried to allocate {bytes} bytes")))?;
    Ok(())
}

pub fn opt_dtype(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DT>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => extract_dtype(o).map(Some),
    }
}

/// Cast keeping the bool flag right (bool means values 0/1 in U8).
pub fn cast(t: &Tensor, from: DT, to: DT) -> PyResult<Tensor> {
    if from == to {
        return Ok(t.clone());
    }
    check_alloc(t.elem_count(), to.itemsize().max(from.itemsize()), "to")?;
    if to == DT::Bool {
        let z = t.zeros_like().op("to")?;
        return t.ne(&z).op("to");
    }
    t.to_dtype(to.candle()).op("to")
}

#[pymethods]
impl PyTensor {
    #[new]
    #[pyo3(signature = (data=None, *, dtype=None, device=None, requires_grad=false))]
    fn py_new(
        data: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<Self> {
        let t = match data {
            None => PyTensor::wrap(Tensor::zeros(0, DType::F32, &crate::device::default_device()?).op("Tensor")?, false),
            Some(d) => crate::creation::tensor_from_data(d, opt_dtype(dtype)?, device)?,
        };
        if requires_grad {
            t.set_requires_grad(true)?;
        }
        Ok(t)
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t().dims())
    }
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType { dt: self.dt() }
    }
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice::of(self.t().device())
    }
    #[getter]
    fn ndim(&self) -> usize {
        self.t().rank()
    }
    #[getter]
    fn is_cuda(&self) -> bool {
        self.t().device().is_cuda()
    }
    fn dim(&self) -> usize {
        self.t().rank()
    }
    fn numel(&self) -> usize {
        self.t().elem_count()
    }
    fn nelement(&self) -> usize {
        self.t().elem_count()
    }
    fn element_size(&self) -> usize {
        self.dt().itemsize()
    }
    fn is_floating_point(&self) -> bool {
        self.dt().is_float()
    }
    fn is_contiguous(&self) -> bool {
        self.t().is_contiguous()
    }
    #[pyo3(signature = (dim=None))]
    fn size<'py>(&self, py: Python<'py>, dim: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.t();
        match dim {
            None => Ok(PyTuple::new(py, t.dims())?.into_any()),
            Some(d) => {
                no_dims_check(t.rank(), d, "size")?;
                let d = norm_dim(d, t.rank(), "size")?;
                Ok(t.dims()[d].into_pyobject(py)?.into_any())
            }
        }
    }
    #[pyo3(signature = (dim=None))]
    fn stride<'py>(&self, py: Python<'py>, dim: Option<i64>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.t();
        let s = t.stride().to_vec();
        match dim {
            None => Ok(PyTuple::new(py, s)?.into_any()),
            Some(d) => Ok(s[{
                no_dims_check(t.rank(), d, "stride")?;
                norm_dim(d, t.rank(), "stride")?
            }].into_pyobject(py)?.into_any()),
        }
    }

    fn __len__(&self) -> PyResult<usize> {
        let t = self.t();
        if t.rank() == 0 {
            return Err(type_err("len", "len() of a 0-d tensor"));
        }
        Ok(t.dims()[0])
    }

    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        slf.as_ptr() as isize
    }

    fn __bool__(&self) -> PyResult<bool> {
        let t = self.t();
        if t.elem_count() != 1 {
            return Err(runtime_err(
                "bool",
                format!("Boolean value of Tensor with {} values is ambiguous", t.elem_count()),
            ));
        }
        Ok(t.flatten_all().and_then(|x| x.to_dtype(DType::F64)).and_then(|x| x.to_vec1::<f64>()).op("bool")?[0] != 0.0)
    }

    fn __float__(&self) -> PyResult<f64> {
        let t = self.single("float")?;
        t.to_dtype(DType::F64).and_then(|x| x.to_scalar::<f64>()).op("float")
    }

    fn __int__(&self) -> PyResult<i64> {
        let t = self.single("int")?;
        if self.dt().is_float() {
            let f = t.to_dtype(DType::F64).and_then(|x| x.to_scalar::<f64>()).op("int")?;
            if !f.is_finite() {
                return Err(value_err("int", format!("cannot convert {f} to integer")));
            }
            return Ok(f.trunc() as i64);
        }
        t.to_dtype(DType::I64).and_then(|x| x.to_scalar::<i64>()).op("int")
    }

    fn __index__(&self) -> PyResult<i64> {
        if self.dt().is_float() || self.t().elem_count() != 1 {
            return Err(type_err("index", "only integer tensors of a single element can be converted to an index"));
        }
        self.__int__()
    }

    /// The Python number held by a one-element tensor.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = self.single("item")?;
        let dt = self.dt();
        Ok(match dt {
            DT::Bool => (t.to_dtype(DType::U8).and_then(|x| x.to_scalar::<u8>()).op("item")? != 0).into_pyobject(py)?.to_owned().into_any(),
            d if d.is_float() => t.to_dtype(DType::F64).and_then(|x| x.to_scalar::<f64>()).op("item")?.into_pyobject(py)?.into_any(),
            _ => t.to_dtype(DType::I64).and_then(|x| x.to_scalar::<i64>()).op("item")?.into_pyobject(py)?.into_any(),
        })
    }

    fn tolist<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        let arr = if matches!(me.dt(), DT::F16 | DT::BF16) {
            let f = PyTensor::wrap(me.t().to_dtype(DType::F32).op("tolist")?, false);
            crate::numpy_interop::to_numpy(&Bound::new(slf.py(), f)?, false)?
        } else {
            crate::numpy_interop::to_numpy(slf, false)?
        };
        arr.call_method0("tolist")
    }

    /// `to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other_tensor)`, keyword forms too.
    #[pyo3(signature = (*args, dtype=None, device=None, non_blocking=false, copy=false))]
    fn to(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        non_blocking: bool,
        copy: bool,
    ) -> PyResult<Py<PyTensor>> {
        let _ = non_blocking;
        let py = slf.py();
        let mut want_dt = opt_dtype(dtype)?;
        let mut want_dev = match device {
            Some(d) if !d.is_none() => Some(extract_device(d, None)?),
            _ => None,
        };
        for a in args.iter() {
            if let Ok(o) = a.cast::<PyTensor>() {
                want_dt = Some(o.get().dt());
                want_dev = Some(PyDevice::of(o.get().t().device()));
            } else if a.cast::<PyDType>().is_ok() {
                want_dt = Some(extract_dtype(&a)?);
            } else if let Ok(d) = extract_device(&a, None) {
                want_dev = Some(d);
            } else {
                want_dt = Some(extract_dtype(&a)?);
            }
        }
        let me = slf.get();
        let mut t = me.t();
        let from = me.dt();
        let mut changed = false;
        if let Some(d) = want_dev {
            let dev = d.candle()?;
            if !t.device().same_device(&dev) {
                t = crate::errors::detach_op(py, "to", || t.to_device(&dev))?;
                changed = true;
            }
        }
        let to_dt = want_dt.unwrap_or(from);
        if to_dt != from {
            t = cast(&t, from, to_dt)?;
            changed = true;
        }
        if !changed && !copy {
            return Ok(slf.clone().unbind());
        }
        if !changed {
            t = t.copy().op("to")?;
        }
        Py::new(py, PyTensor::wrap_dt(t, to_dt))
    }

    fn float(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::F32)
    }
    fn double(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::F64)
    }
    fn half(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::F16)
    }
    fn bfloat16(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::BF16)
    }
    fn long(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::I64)
    }
    fn int(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::I32)
    }
    fn bool(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::Bool)
    }
    fn byte(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        Self::to_dt(slf, DT::U8)
    }
    #[pyo3(signature = (dtype=None))]
    fn r#type(slf: &Bound<'_, Self>, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        match dtype {
            None => Ok(format!("candle_py.{}", slf.get().dt().name()).into_pyobject(slf.py())?.into_any().unbind()),
            Some(d) => Ok(Self::to_dt(slf, extract_dtype(d)?)?.into_any()),
        }
    }

    fn cpu(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let dev = PyDevice { kind: crate::device::DevKind::Cpu };
        Self::to_device(slf, dev)
    }
    /// `cuda(device=None)`: an index (negative means the current one, 0), a string or a device.
    #[pyo3(signature = (device=None, non_blocking=false))]
    fn cuda(slf: &Bound<'_, Self>, device: Option<&Bound<'_, PyAny>>, non_blocking: bool) -> PyResult<Py<PyTensor>> {
        let _ = non_blocking;
        let dev = match device {
            None => PyDevice { kind: crate::device::DevKind::Cuda(0) },
            Some(d) if d.is_none() => PyDevice { kind: crate::device::DevKind::Cuda(0) },
            Some(d) => match d.extract::<i64>() {
                Ok(i) if !d.is_instance_of::<PyBool>() => PyDevice { kind: crate::device::DevKind::Cuda(i.max(0) as usize) },
                _ => extract_device(d, None)?,
            },
        };
        if !matches!(dev.kind, crate::device::DevKind::Cuda(_)) {
            return Err(crate::errors::device_err("cuda", format!("invalid CUDA device {}", d_str(&dev))));
        }
        Self::to_device(slf, dev)
    }

    fn contiguous(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        let t = me.t();
        if t.is_contiguous() {
            return Ok(slf.clone().unbind());
        }
        check_alloc(t.elem_count(), me.dt().itemsize(), "contiguous")?;
        let out = crate::errors::detach_op(slf.py(), "contiguous", || t.contiguous())?;
        Py::new(slf.py(), PyTensor::wrap(out, me.is_bool))
    }

    /// A copy with its own storage, in the graph (gradients flow back), as in PyTorch.
    #[pyo3(signature = (*, memory_format=None))]
    fn clone(&self, py: Python<'_>, memory_format: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let _ = memory_format;
        let t = self.t();
        check_alloc(t.elem_count(), self.dt().itemsize(), "clone")?;
        // `copy()` records no backward; `force_contiguous` does (as a Copy op).
        let out = crate::errors::detach_op(py, "clone", || t.force_contiguous())?;
        Ok(PyTensor::wrap(out, self.is_bool))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<PyTensor> {
        self.clone(py, None)
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let t = self.t();
        let out = crate::errors::detach_op(py, "deepcopy", || t.copy())?;
        let r = PyTensor::wrap(out, self.is_bool);
        if self.t().is_variable() {
            r.set_requires_grad(true)?;
        }
        Ok(r)
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let py = slf.py();
        let f = py.import("candle_py._tensor_helpers")?.getattr("_rebuild")?;
        let arr = crate::numpy_interop::to_numpy(slf, false)?.call_method0("copy")?;
        let me = slf.get();
        let args = PyTuple::new(py, [arr.into_any(), me.dt().name().into_pyobject(py)?.into_any(), me.t().is_variable().into_pyobject(py)?.to_owned().into_any()])?;
        Ok((f.unbind(), args.into_any().unbind()))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        py.import("candle_py._format")?.getattr("tensor_repr")?.call1((slf,))?.extract()
    }

    fn __str__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Self::__repr__(slf)
    }

    fn __format__(slf: &Bound<'_, Self>, spec: &str) -> PyResult<String> {
        if slf.get().t().rank() == 0 && !spec.is_empty() {
            let v = slf.get().item(slf.py())?;
            return v.call_method1("__format__", (spec,))?.extract();
        }
        Self::__repr__(slf)
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let me = slf.get();
        let t = me.t();
        if t.rank() == 0 {
            return Err(type_err("iter", "iteration over a 0-d tensor"));
        }
        let n = t.dims()[0];
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            let row = t.get(i).op("iter")?;
            items.push(Py::new(slf.py(), PyTensor::wrap(row, me.is_bool))?);
        }
        Ok(pyo3::types::PyList::new(slf.py(), items)?.try_iter()?.into_any().unbind())
    }

    #[classattr]
    fn __array_priority__() -> f64 {
        1000.0
    }

    /// The underlying data, outside the autograd graph; assigning replaces the value.
    #[getter]
    fn data(&self) -> PyTensor {
        PyTensor::wrap(self.t().detach(), self.is_bool)
    }
    #[setter]
    fn set_data(&self, value: &Bound<'_, PyTensor>) -> PyResult<()> {
        let v = value.get().t().detach();
        let cur = self.t();
        let new = if cur.is_variable() {
            // Keep it a leaf that requires grad, with its accumulated .grad.
            candle_core::Var::from_tensor(&v).op("data")?.into_inner()
        } else {
            v
        };
        self.replace(new);
        Ok(())
    }
}

fn d_str(d: &PyDevice) -> String {
    format!("{:?}", d.kind)
}

impl PyTensor {
    fn single(&self, op: &str) -> PyResult<Tensor> {
        let t = self.t();
        if t.elem_count() != 1 {
            return Err(value_err(op, format!("only one element tensors can be converted to Python scalars, got shape {:?}", t.dims())));
        }
        t.flatten_all().and_then(|x| x.get(0)).op(op)
    }

    pub fn to_dt(slf: &Bound<'_, Self>, dt: DT) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        if me.dt() == dt {
            return Ok(slf.clone().unbind());
        }
        let t = me.t();
        let out = cast(&t, me.dt(), dt)?;
        Py::new(slf.py(), PyTensor::wrap_dt(out, dt))
    }

    fn to_device(slf: &Bound<'_, Self>, dev: PyDevice) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        let d = dev.candle()?;
        let t = me.t();
        if t.device().same_device(&d) {
            return Ok(slf.clone().unbind());
        }
        let out = crate::errors::detach_op(slf.py(), "to", || t.to_device(&d))?;
        Py::new(slf.py(), PyTensor::wrap(out, me.is_bool))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensor>()?;
    Ok(())
}
