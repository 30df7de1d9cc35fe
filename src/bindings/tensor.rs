//! The `Tensor` class: a Candle tensor plus what PyTorch users expect around it
//! (a boolean dtype, a `.grad` slot, in-place replacement of the data).
//!
//! Methods live in one file per area (math.rs, shape_ops.rs, indexing.rs,
//! autograd.rs, numpy_interop.rs); this file holds the struct, conversions of
//! arguments, and the plain attributes.
use crate::autograd::Value;
use crate::bindings::args::{cast_v, check_alloc, norm_dim, opt_dtype};
use crate::bindings::device::{extract_device, PyDevice};
use crate::bindings::dtype::{extract_dtype, PyDType};
use crate::bindings::errors::{runtime_err, type_err, value_err, OpResult};
use crate::dtype::DT;
use crate::ops::layout::Dense;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyTuple};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// A strided region of a tensor: row-major shape, strides and offset.
pub type Region = (Vec<usize>, Vec<usize>, usize);

#[pyclass(name = "Tensor", module = "candle_py", subclass, frozen, weakref)]
pub struct PyTensor {
    /// The data with its autograd side. Replaceable so that in-place methods
    /// (`requires_grad_`, `x[i] = v` on a tensor in the autograd graph, `.data = ...`)
    /// can swap the value; the version counter stays with the object.
    inner: crate::bindings::views::Cell,
    /// Stored as U8 in Candle; shown as `bool` to Python.
    pub is_bool: bool,
    /// `.grad` of a tensor that does not require grad (PyTorch lets one be assigned).
    plain_grad: Mutex<Option<Value>>,
    /// For a view of a tensor in the autograd graph: its base and the region it covers
    /// (`bindings::views`), so that in-place writes reach the base and the view follows
    /// writes into the base.
    view_of: OnceLock<Arc<crate::bindings::views::ViewLink>>,
    /// For a sparse COO tensor: its indices and values (`bindings::sparse`), from which
    /// the value is built on first read.
    coo: OnceLock<crate::bindings::sparse::Coo>,
}

/// Candle slices storage from a view's start offset even when the view holds no
/// element, so an empty view past the end of its storage (`x[:, 1]` of a (0, 3)
/// tensor) panics in later ops: make it fresh.
fn fresh_if_empty_view(t: Tensor) -> Tensor {
    if t.layout().start_offset() != 0 && t.elem_count() == 0 {
        Tensor::zeros(t.shape(), t.dtype(), t.device()).unwrap_or(t)
    } else {
        t
    }
}

impl PyTensor {
    /// Wrap a result outside the autograd graph (integer results, creation, ops whose
    /// inputs need no grad).
    pub fn wrap(t: Tensor, is_bool: bool) -> PyTensor {
        Self::wrap_v(Value::plain(fresh_if_empty_view(t)), is_bool)
    }

    /// Wrap a result with its autograd side.
    pub fn wrap_v(mut v: Value, is_bool: bool) -> PyTensor {
        if v.data.layout().start_offset() != 0 && v.data.elem_count() == 0 {
            v.data = fresh_if_empty_view(v.data);
        }
        PyTensor { inner: Arc::new(RwLock::new(v)), is_bool, plain_grad: Mutex::new(None), view_of: OnceLock::new(), coo: OnceLock::new() }
    }

    pub fn wrap_dt(t: Tensor, dt: DT) -> PyTensor {
        Self::wrap(t, dt == DT::Bool)
    }

    pub fn wrap_vdt(v: Value, dt: DT) -> PyTensor {
        Self::wrap_v(v, dt == DT::Bool)
    }

    /// Wrap a tensor just made from a buffer (`Tensor::from_vec`): not in the graph,
    /// not a view, so none of `wrap`'s checks apply. The dispatch fast path uses it.
    pub fn wrap_fresh(t: Tensor) -> PyTensor {
        debug_assert!(t.layout().start_offset() == 0);
        PyTensor {
            inner: Arc::new(RwLock::new(Value::plain(t))),
            is_bool: false,
            plain_grad: Mutex::new(None),
            view_of: OnceLock::new(),
            coo: OnceLock::new(),
        }
    }

    /// The current value, borrowed under the read lock (no clone: two atomics fewer
    /// than `t()`, which matters on the per-op dispatch path).
    #[inline]
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Value> {
        if let Some(l) = self.view_of.get() {
            crate::bindings::views::sync(&self.inner, l);
        } else if let Some(c) = self.coo.get() {
            crate::bindings::sparse::sync(&self.inner, c);
        }
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The data (outside the graph: for values only, never for a differentiable result).
    #[inline]
    pub fn t(&self) -> Tensor {
        self.read().data.clone()
    }

    /// The data with its autograd side.
    #[inline]
    pub fn v(&self) -> Value {
        self.read().clone()
    }

    /// The data, its autograd side and the Python-level dtype, under one lock.
    #[inline]
    pub fn v_dt(&self) -> (Value, DT) {
        let g = self.read();
        (g.clone(), self.dt_of(&g.data))
    }

    /// Replace the value, keeping this tensor's version counter (and bumping it: an
    /// in-place change, which invalidates saved copies of the old value).
    pub fn replace_v(&self, mut v: Value) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.bump_version();
        v.version = g.version.clone();
        *g = v;
    }

    /// The same data and autograd side under a fresh version counter: what an in-place
    /// op computes its replacement from. The op's own nodes then keep a snapshot the
    /// write does not invalidate (PyTorch's `original_self`), while tensors saved
    /// earlier by other ops still see the write.
    pub fn inplace_source(&self) -> PyTensor {
        let mut v = self.v();
        v.version = crate::autograd::value::new_version();
        PyTensor::wrap_v(v, self.is_bool)
    }

    /// Remember that this tensor is the view of `base` over `region` (row-major shape,
    /// strides and offset over the base's elements).
    pub fn set_view_of(&self, base: &PyTensor, region: Region) {
        let seen = base.read().version_now();
        let _ = self.view_of.set(crate::bindings::views::ViewLink::new(base.inner.clone(), base.view_of.get().cloned(), region, seen));
    }

    /// Give this fresh tensor its sparse parts (once).
    pub fn set_coo(&self, c: crate::bindings::sparse::Coo) -> Result<(), crate::bindings::sparse::Coo> {
        self.coo.set(c)
    }

    /// Whether this tensor has sparse parts.
    pub fn is_sparse_coo(&self) -> bool {
        self.coo.get().is_some()
    }

    /// Whether this tensor is a view of another one in the autograd graph.
    pub fn is_graph_view(&self) -> bool {
        self.view_of.get().is_some()
    }

    /// Link this result of a view op on `base` to it when it is a view in the graph.
    pub fn link_view_of(&self, base: &PyTensor) {
        let v = self.inner.read().unwrap_or_else(|p| p.into_inner()).clone();
        if !v.requires_grad() {
            return;
        }
        if let Some(l) = crate::bindings::views::link_for(&base.inner, base.view_of.get(), &v.data) {
            let _ = self.view_of.set(l);
        }
    }

    /// After an in-place replacement of this view's value, write the new value into its
    /// base (and the base's base), as PyTorch's in-place ops on views change the base.
    pub fn write_back(&self, op: &str) -> PyResult<()> {
        let Some(l) = self.view_of.get() else { return Ok(()) };
        let v = self.inner.read().unwrap_or_else(|p| p.into_inner()).clone();
        crate::bindings::views::write_back(&v, l, op)
    }

    /// Replace the data, keeping the autograd side (`.data = ...`, `detach_()` callers set it).
    pub fn replace(&self, t: Tensor) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.data = t.detach();
        g.bump_version();
    }

    /// Set the autograd side (None: out of the graph).
    pub fn set_meta(&self, meta: Option<Arc<crate::autograd::value::Meta>>) {
        self.inner.write().unwrap_or_else(|p| p.into_inner()).meta = meta;
    }

    /// `.grad` of a tensor outside the graph.
    pub fn plain_grad(&self) -> std::sync::MutexGuard<'_, Option<Value>> {
        self.plain_grad.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Candle tensor and the Python-level dtype, read under one lock.
    #[inline]
    pub fn t_dt(&self) -> (Tensor, DT) {
        let g = self.read();
        (g.data.clone(), self.dt_of(&g.data))
    }

    /// The Python-level dtype, read under the lock without cloning the tensor (hot path).
    pub fn dt(&self) -> DT {
        self.dt_of(&self.read().data)
    }

    #[inline]
    fn dt_of(&self, t: &Tensor) -> DT {
        // Every Candle dtype we create maps back; f32 is a safe fallback.
        if self.is_bool {
            DT::Bool
        } else {
            DT::of_candle(t.dtype()).unwrap_or(DT::F32)
        }
    }
}

/// `size(dim)`/`stride(dim)` of a 0-d tensor: there is no dimension to name.
fn no_dims_check(rank: usize, dim: i64, op: &str) -> PyResult<()> {
    if rank == 0 {
        return Err(crate::bindings::errors::index_err(op, format!("dimension specified as {dim} but tensor has no dimensions")));
    }
    Ok(())
}

#[pymethods]
impl PyTensor {
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::bindings::size::size_tuple(py, self.t().dims())
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
    /// Whether this is a sparse COO tensor (`SparseTensor`).
    #[getter]
    fn is_sparse(&self) -> bool {
        self.is_sparse_coo()
    }
    #[getter]
    fn is_cuda(&self) -> bool {
        self.t().device().is_cuda()
    }
    /// Whether the tensor lives on Apple's GPU (the `metal` feature's device).
    #[getter]
    fn is_mps(&self) -> bool {
        self.t().device().is_metal()
    }
    /// `is_conj()`: False (no tensor here carries a lazy conjugation bit).
    fn is_conj(&self) -> bool {
        false
    }
    /// `is_neg()`: False (no tensor here carries a lazy negation bit).
    fn is_neg(&self) -> bool {
        false
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
            None => crate::bindings::size::size_tuple(py, t.dims()),
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
            }]
            .into_pyobject(py)?
            .into_any()),
        }
    }

    /// The offset of the first element in the storage, in elements.
    fn storage_offset(&self) -> usize {
        self.read().data.layout().start_offset()
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
            return Err(runtime_err("bool", format!("Boolean value of Tensor with {} values is ambiguous", t.elem_count())));
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
        let mut t = me.v();
        let from = me.dt();
        let mut changed = false;
        if let Some(d) = want_dev {
            let dev = d.candle()?;
            if !t.data.device().same_device(&dev) {
                t = crate::bindings::errors::detach_op(py, "to", || crate::autograd::ops::to_device(&t, &dev))?;
                changed = true;
            }
        }
        let to_dt = want_dt.unwrap_or(from);
        if to_dt != from {
            t = cast_v(&t, from, to_dt)?;
            changed = true;
        }
        if !changed && !copy {
            return Ok(slf.clone().unbind());
        }
        if !changed {
            t = crate::autograd::ops::force_contiguous(&t, "CloneBackward0").op("to")?;
        }
        Py::new(py, PyTensor::wrap_vdt(t, to_dt))
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
    /// PyTorch's legacy type name (`'torch.FloatTensor'`, `'torch.cuda.LongTensor'`) with
    /// no argument; with a dtype or such a name, the tensor converted to it.
    #[pyo3(signature = (dtype=None, non_blocking=false))]
    fn r#type(slf: &Bound<'_, Self>, dtype: Option<&Bound<'_, PyAny>>, non_blocking: bool) -> PyResult<Py<PyAny>> {
        let _ = non_blocking; // copies here are synchronous: nothing to overlap
        let me = slf.get();
        match dtype.filter(|d| !d.is_none()) {
            None => {
                let dev = if me.t().device().is_cpu() { "" } else { "cuda." };
                let name = format!("torch.{dev}{}", legacy_type_name(me.dt()));
                Ok(name.into_pyobject(slf.py())?.into_any().unbind())
            }
            Some(d) => {
                if let Ok(s) = d.extract::<String>() {
                    // Only the CPU names: `torch.cuda.FloatTensor` would also move the tensor.
                    let bare = s.trim_start_matches("torch.");
                    if let Some(dt) = crate::dtype::ALL.iter().copied().find(|&dt| legacy_type_name(dt) == bare) {
                        return Ok(Self::to_dt(slf, dt)?.into_any());
                    }
                }
                Ok(Self::to_dt(slf, extract_dtype(d)?)?.into_any())
            }
        }
    }

    fn cpu(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let dev = PyDevice { kind: crate::bindings::device::DevKind::Cpu };
        Self::to_device(slf, dev)
    }
    /// `cuda(device=None)`: an index (negative means the current one, 0), a string or a device.
    #[pyo3(signature = (device=None, non_blocking=false))]
    fn cuda(slf: &Bound<'_, Self>, device: Option<&Bound<'_, PyAny>>, non_blocking: bool) -> PyResult<Py<PyTensor>> {
        let _ = non_blocking;
        let dev = match device {
            None => PyDevice { kind: crate::bindings::device::DevKind::Cuda(0) },
            Some(d) if d.is_none() => PyDevice { kind: crate::bindings::device::DevKind::Cuda(0) },
            Some(d) => match d.extract::<i64>() {
                Ok(i) if !d.is_instance_of::<PyBool>() => PyDevice { kind: crate::bindings::device::DevKind::Cuda(i.max(0) as usize) },
                _ => extract_device(d, None)?,
            },
        };
        if !matches!(dev.kind, crate::bindings::device::DevKind::Cuda(_)) {
            return Err(crate::bindings::errors::device_err("cuda", format!("invalid CUDA device {}", d_str(&dev))));
        }
        Self::to_device(slf, dev)
    }

    fn contiguous(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        let t = me.v();
        if t.data.is_contiguous() {
            return Ok(slf.clone().unbind());
        }
        check_alloc(t.data.elem_count(), me.dt().itemsize(), "contiguous")?;
        let out =
            crate::bindings::errors::detach_op(slf.py(), "contiguous", || crate::autograd::ops::force_contiguous(&t, "CloneBackward0"))?;
        Py::new(slf.py(), PyTensor::wrap_v(out, me.is_bool))
    }

    /// A copy with its own storage, in the graph (gradients flow back), as in PyTorch.
    #[pyo3(signature = (*, memory_format=None))]
    fn clone(&self, py: Python<'_>, memory_format: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let _ = memory_format;
        let t = self.v();
        check_alloc(t.data.elem_count(), self.dt().itemsize(), "clone")?;
        let out = crate::bindings::errors::detach_op(py, "clone", || crate::autograd::ops::force_contiguous(&t, "CloneBackward0"))?;
        Ok(PyTensor::wrap_v(out, self.is_bool))
    }

    /// An alias of this tensor's data and autograd side under a fresh version
    /// counter: in-place forms computed in Python (`F.relu(x, inplace=True)`) compute
    /// the new value from it, then write it back with `copy_`.
    fn _inplace_source(&self) -> PyTensor {
        self.inplace_source()
    }

    /// `copy.copy`: as torch's (which rebuilds from the same storage), a new leaf
    /// sharing this tensor's data (in-place writes show in both), requiring grad when
    /// this one does.
    fn __copy__(&self) -> PyResult<PyTensor> {
        let v = self.read();
        let r = PyTensor::wrap_v(v.detached(), self.is_bool);
        if v.requires_grad() {
            r.set_requires_grad(true)?;
        }
        Ok(r)
    }

    /// `copy.deepcopy`: a new leaf with its own copy of the data and of `.grad`,
    /// requiring grad when this one does. As in torch, only leaves can be deep-copied
    /// while they require grad (a copy of a graph's inner tensor would cut it loose).
    fn __deepcopy__(&self, py: Python<'_>, memo: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let v = self.v();
        if v.requires_grad() && !v.is_leaf() {
            return Err(crate::bindings::errors::runtime_err(
                "deepcopy",
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the moment. \
                 If you were attempting to deepcopy a module, this may be because of a weight_norm usage.",
            ));
        }
        let out = crate::bindings::errors::detach_op(py, "deepcopy", || v.data.dense_copy())?;
        let r = PyTensor::wrap(out, self.is_bool);
        if v.requires_grad() {
            r.set_requires_grad(true)?;
        }
        if let Some(g) = self.grad() {
            let g = Py::new(py, g)?;
            let copied = py.import("copy")?.call_method1("deepcopy", (g, memo))?;
            r.set_grad(Some(copied.cast::<PyTensor>()?))?;
        }
        Ok(r)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        crate::bindings::formatting::repr(slf)
    }

    fn __str__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Self::__repr__(slf)
    }

    /// As PyTorch: a 0-d tensor formats as its Python scalar (`f"{t}"` is `'7.0'`,
    /// `f"{t:.3f}"` works); other tensors print their repr and take no format spec.
    fn __format__(slf: &Bound<'_, Self>, spec: &str) -> PyResult<String> {
        if slf.get().t().rank() == 0 {
            let v = slf.get().item(slf.py())?;
            return v.call_method1("__format__", (spec,))?.extract();
        }
        if !spec.is_empty() {
            return Err(type_err(
                "format",
                format!("unsupported format string {spec:?} passed to Tensor.__format__ (shape {:?})", slf.get().t().dims()),
            ));
        }
        Self::__repr__(slf)
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let me = slf.get();
        let t = me.v();
        if t.data.rank() == 0 {
            return Err(type_err("iter", "iteration over a 0-d tensor"));
        }
        let n = t.data.dims()[0];
        let mut items = Vec::with_capacity(n);
        for i in 0..n {
            let row = crate::autograd::ops::select(&t, 0, i).op("iter")?;
            items.push(Py::new(slf.py(), PyTensor::wrap_v(row, me.is_bool))?);
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
        PyTensor::wrap_v(self.read().detached(), self.is_bool)
    }
    /// Assigning replaces the data; a leaf that requires grad stays one, with its `.grad`.
    #[setter]
    fn set_data(&self, value: &Bound<'_, PyTensor>) -> PyResult<()> {
        let v = value.get().t();
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.data = v;
        g.version = crate::autograd::value::new_version();
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
        let out = cast_v(&me.v(), me.dt(), dt)?;
        Py::new(slf.py(), PyTensor::wrap_vdt(out, dt))
    }

    fn to_device(slf: &Bound<'_, Self>, dev: PyDevice) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        let d = dev.candle()?;
        let t = me.v();
        if t.data.device().same_device(&d) {
            return Ok(slf.clone().unbind());
        }
        let out = crate::bindings::errors::detach_op(slf.py(), "to", || crate::autograd::ops::to_device(&t, &d))?;
        Py::new(slf.py(), PyTensor::wrap_v(out, me.is_bool))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensor>()?;
    Ok(())
}

/// PyTorch's legacy tensor type name of a dtype (`FloatTensor`, `LongTensor`, ...).
fn legacy_type_name(dt: DT) -> &'static str {
    match dt {
        DT::Bool => "BoolTensor",
        DT::U8 => "ByteTensor",
        DT::I16 => "ShortTensor",
        DT::I32 => "IntTensor",
        DT::I64 => "LongTensor",
        DT::U32 => "UInt32Tensor",
        DT::F16 => "HalfTensor",
        DT::BF16 => "BFloat16Tensor",
        DT::F32 => "FloatTensor",
        DT::F64 => "DoubleTensor",
    }
}

/// PyTorch's device-kind and layout flags that are always False here (no XPU, meta,
/// MKL-DNN, Vulkan, IPU, MTIA, MAIA or XLA tensors; quantized tensors are `QTensor`s,
/// not Tensors; no nested or CSR tensors): code that tests them (`input.is_xpu` in
/// pytorch/examples' DCGAN) runs unchanged.
macro_rules! false_flags {
    ($($name:ident),*) => {
        #[pymethods]
        impl PyTensor {
            $(
            #[doc = concat!("`", stringify!($name), "`: always False here.")]
            #[getter]
            fn $name(&self) -> bool {
                false
            }
            )*
        }
    };
}

false_flags!(is_xpu, is_meta, is_mkldnn, is_quantized, is_vulkan, is_ipu, is_mtia, is_maia, is_xla, is_nested, is_sparse_csr);
