//! NumPy in and out.
//!
//! Import is one memcpy from the array's buffer into Candle storage (the GIL is
//! released for large arrays). Export is zero-copy for contiguous CPU tensors:
//! the array points into Candle's storage and its base object owns a clone of
//! the tensor, so the memory lives as long as the array does.
use crate::bindings::errors::{dtype_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::layout::Dense;
use candle_core::{CpuStorage, DType, Device, Storage, Tensor};
use numpy::npyffi::{self, npy_intp, NpyTypes, PY_ARRAY_API};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// Owns the tensor whose storage an exported NumPy array points into.
#[pyclass(frozen, module = "candle_py._core")]
struct StorageOwner {
    _t: Tensor,
}

fn dt_of_numpy(name: &str) -> PyResult<DT> {
    DT::from_name(name).ok_or_else(|| {
        dtype_err(
            "from_numpy",
            format!("numpy dtype {name} is not supported (supported: bool, uint8, int16, int32, int64, uint32, float16, bfloat16, float32, float64)"),
        )
    })
}

/// Above this size the copy is split across threads: page faults on the fresh
/// buffer and the memcpy then run in parallel.
const PAR_COPY_BYTES: usize = 1 << 20;

/// One parallel copy of typed elements into a new vector.
fn par_copy<T: Copy + Send + Sync>(src: &[T]) -> Vec<T> {
    use rayon::prelude::*;
    let mut v: Vec<T> = Vec::with_capacity(src.len());
    let chunk = (src.len() / rayon::current_num_threads().max(1) / 4).max(1 << 14);
    v.spare_capacity_mut().par_chunks_mut(chunk).zip(src.par_chunks(chunk)).for_each(|(d, s)| {
        // SAFETY: `MaybeUninit<T>` has `T`'s layout; `d` and `s` are the chunks at one index
        // of equal-size chunkings of the spare capacity (>= src.len()) and of `src`, so
        // d.len() >= s.len(); the new buffer cannot overlap `src`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr() as *mut T, s.len()) };
    });
    // SAFETY: the capacity is at least src.len(), and the chunks of `src` cover
    // 0..src.len(), each copied into the same range of the spare capacity above.
    unsafe { v.set_len(src.len()) };
    v
}

fn typed<T>(bytes: &[u8]) -> &[T] {
    // SAFETY: `par_import`'s caller checked the address is a multiple of the itemsize,
    // which is `T`'s alignment for every type used here; the length is rounded down to
    // whole `T`s; every bit pattern is a valid value of these integer and float types.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / std::mem::size_of::<T>()) }
}

fn par_import(bytes: &[u8], dt: DT, shape: &[usize]) -> candle_core::Result<Tensor> {
    let dev = &Device::Cpu;
    match dt {
        DT::Bool | DT::U8 => Tensor::from_vec(par_copy::<u8>(bytes), shape, dev),
        DT::I16 => Tensor::from_vec(par_copy::<i16>(typed(bytes)), shape, dev),
        DT::I32 => Tensor::from_vec(par_copy::<i32>(typed(bytes)), shape, dev),
        DT::I64 => Tensor::from_vec(par_copy::<i64>(typed(bytes)), shape, dev),
        DT::U32 => Tensor::from_vec(par_copy::<u32>(typed(bytes)), shape, dev),
        DT::F16 => Tensor::from_vec(par_copy::<half::f16>(typed(bytes)), shape, dev),
        DT::BF16 => Tensor::from_vec(par_copy::<half::bf16>(typed(bytes)), shape, dev),
        DT::F32 => Tensor::from_vec(par_copy::<f32>(typed(bytes)), shape, dev),
        DT::F64 => Tensor::from_vec(par_copy::<f64>(typed(bytes)), shape, dev),
    }
}

/// Copy a NumPy array (any rank, any layout) into a new CPU tensor.
pub fn from_numpy_array(arr: &Bound<'_, PyUntypedArray>) -> PyResult<PyTensor> {
    let py = arr.py();
    let name: String = arr.dtype().getattr("name")?.extract()?;
    let dt = dt_of_numpy(&name)?;
    let mut arr = arr.clone();
    let native: bool = arr.dtype().getattr("isnative")?.extract()?;
    if !arr.is_c_contiguous() || !native {
        let np = py.import("numpy")?;
        let d = arr.dtype().call_method1("newbyteorder", ("=",))?;
        arr = np.call_method1("ascontiguousarray", (&arr, d))?.cast_into::<PyUntypedArray>()?;
    }
    let shape: Vec<usize> = arr.shape().to_vec();
    let nbytes = shape.iter().product::<usize>() * dt.itemsize();
    // SAFETY: `arr` is a live ndarray (a Bound reference, under the GIL), so its
    // `PyArrayObject` may be read; we only read its data pointer.
    let ptr = unsafe { (*arr.as_array_ptr()).fields.data as usize };
    let load = move || {
        let bytes: &[u8] = if nbytes == 0 {
            &[]
        } else {
            // SAFETY: `arr` is C-contiguous in native order (made so above), so its data is
            // the `nbytes` = elements * itemsize bytes at `ptr`; `arr` stays referenced on
            // this frame until the copy is done, so the buffer outlives `bytes`.
            unsafe { std::slice::from_raw_parts(ptr as *const u8, nbytes) }
        };
        if nbytes >= PAR_COPY_BYTES && ptr % dt.itemsize() == 0 {
            return par_import(bytes, dt, &shape);
        }
        Tensor::from_raw_buffer(bytes, dt.candle(), &shape, &Device::Cpu)
    };
    // `arr` stays referenced on this frame, so the buffer outlives the copy.
    let t = if nbytes > (1 << 16) {
        crate::bindings::errors::detach_op(py, "from_numpy", load)?
    } else {
        crate::bindings::errors::guard("from_numpy", || load().op("from_numpy"))?
    };
    Ok(PyTensor::wrap_dt(t, dt))
}

fn storage_ptr(s: &CpuStorage) -> *const u8 {
    match s {
        CpuStorage::U8(v) => v.as_ptr(),
        CpuStorage::U32(v) => v.as_ptr() as *const u8,
        CpuStorage::I16(v) => v.as_ptr() as *const u8,
        CpuStorage::I32(v) => v.as_ptr() as *const u8,
        CpuStorage::I64(v) => v.as_ptr() as *const u8,
        CpuStorage::BF16(v) => v.as_ptr() as *const u8,
        CpuStorage::F16(v) => v.as_ptr() as *const u8,
        CpuStorage::F32(v) => v.as_ptr() as *const u8,
        CpuStorage::F64(v) => v.as_ptr() as *const u8,
        _ => std::ptr::null(),
    }
}

fn npy_type(dt: DT) -> NpyTypes_ {
    match dt {
        DT::Bool => npyffi::NPY_TYPES::NPY_BOOL,
        DT::U8 => npyffi::NPY_TYPES::NPY_UBYTE,
        DT::I16 => npyffi::NPY_TYPES::NPY_SHORT,
        DT::I32 => npyffi::NPY_TYPES::NPY_INT,
        DT::I64 => npyffi::NPY_TYPES::NPY_LONGLONG,
        DT::U32 => npyffi::NPY_TYPES::NPY_UINT,
        DT::F16 => npyffi::NPY_TYPES::NPY_HALF,
        DT::BF16 => npyffi::NPY_TYPES::NPY_USHORT, // viewed as ml_dtypes.bfloat16 afterwards
        DT::F32 => npyffi::NPY_TYPES::NPY_FLOAT,
        DT::F64 => npyffi::NPY_TYPES::NPY_DOUBLE,
    }
}
type NpyTypes_ = npyffi::NPY_TYPES;

/// A NumPy array over the tensor's memory (copying first only if the tensor is
/// strided or not on the CPU). `writeable=false` gives the read-only view `numpy()` returns.
pub fn to_numpy<'py>(slf: &Bound<'py, PyTensor>, writeable: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let me = slf.get();
    let dt = me.dt();
    let mut t = me.t().detach();
    if !t.device().is_cpu() {
        t = crate::bindings::errors::detach_op(py, "numpy", || t.to_device(&Device::Cpu))?;
    }
    if t.layout().contiguous_offsets().is_none() {
        crate::bindings::args::check_alloc(t.elem_count(), dt.itemsize(), "numpy")?;
        t = crate::bindings::errors::detach_op(py, "numpy", || t.dense())?;
    }
    let (start, _) = t.layout().contiguous_offsets().expect("contiguous after contiguous()");
    let data = {
        let (storage, _) = t.storage_and_layout();
        match &*storage {
            Storage::Cpu(cs) => storage_ptr(cs),
            _ => std::ptr::null(),
        }
    };
    if data.is_null() {
        return Err(dtype_err("numpy", format!("dtype {:?} cannot be exported to NumPy", t.dtype())));
    }
    let item = dt.itemsize();
    // SAFETY: `data` is the start of `t`'s CPU storage, and `t` is contiguous from element
    // `start` of it, so `start * item` bytes is inside (or one past, if empty) that buffer.
    let data = unsafe { data.add(start * item) } as *mut std::ffi::c_void;
    let mut dims: Vec<npy_intp> = t.dims().iter().map(|&d| d as npy_intp).collect();
    let mut strides: Vec<npy_intp> = t.stride().iter().map(|&s| (s * item) as npy_intp).collect();
    let owner = Py::new(py, StorageOwner { _t: t.clone() })?;
    let flags = if writeable { npyffi::NPY_ARRAY_WRITEABLE } else { 0 };
    // SAFETY: we hold the GIL (`py`). `PyArray_NewFromDescr` steals the new `descr`
    // reference; `dims` / `strides` hold `ndim` entries, `t`'s shape and its byte strides,
    // which from `data` reach only `t`'s elements. The memory outlives the array:
    // `PyArray_SetBaseObject` makes `owner` (holding a clone of `t`, so its storage) the
    // array's base, stealing the reference `into_ptr` gives. `ptr` is a new, non-null,
    // owned reference, handed to `Bound::from_owned_ptr`.
    let arr = unsafe {
        let descr = PY_ARRAY_API.PyArray_DescrFromType(py, npy_type(dt) as i32);
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            descr,
            dims.len() as i32,
            dims.as_mut_ptr(),
            strides.as_mut_ptr(),
            data,
            flags,
            std::ptr::null_mut(),
        );
        if ptr.is_null() {
            return Err(PyErr::fetch(py));
        }
        if PY_ARRAY_API.PyArray_SetBaseObject(py, ptr as *mut npyffi::PyArrayObject, owner.into_ptr()) < 0 {
            return Err(PyErr::fetch(py));
        }
        Bound::from_owned_ptr(py, ptr)
    };
    if dt == DT::BF16 {
        let ml = py.import("ml_dtypes").map_err(|_| {
            dtype_err("numpy", "exporting bfloat16 needs the ml_dtypes package (pip install ml-dtypes), or convert first with .float()")
        })?;
        return arr.call_method1("view", (ml.getattr("bfloat16")?,));
    }
    Ok(arr)
}

/// PyTorch refuses to hand the data of a tensor that requires grad to NumPy (the
/// array would silently leave the graph): `detach()` first, or `numpy(force=True)`.
fn refuse_grad(t: &PyTensor, force: bool, op: &str) -> PyResult<()> {
    if !force && t.v().requires_grad() {
        return Err(crate::bindings::errors::runtime_err(
            op,
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.",
        ));
    }
    Ok(())
}

#[pymethods]
impl PyTensor {
    /// A read-only NumPy view of the data (zero-copy when contiguous on the CPU).
    #[pyo3(signature = (*, force=false))]
    /// `force=True` exports a tensor that requires grad (as `detach().numpy()`).
    fn numpy<'py>(slf: &Bound<'py, Self>, force: bool) -> PyResult<Bound<'py, PyAny>> {
        refuse_grad(slf.get(), force, "numpy")?;
        to_numpy(slf, false)
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(slf: &Bound<'py, Self>, dtype: Option<&Bound<'py, PyAny>>, copy: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        // `np.asarray(t)` stays lenient (PyTorch refuses it too): library code and
        // users' NumPy comparisons pass tensors in the graph; `numpy()` is strict.
        let mut a = to_numpy(slf, false)?;
        if let Some(d) = dtype {
            if !d.is_none() {
                a = a.call_method1("astype", (d,))?;
            }
        }
        if copy == Some(true) {
            a = a.call_method0("copy")?;
        }
        Ok(a)
    }

    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, dl_device);
        if !slf.get().t().device().is_cpu() {
            return Err(crate::bindings::errors::device_err(
                "__dlpack__",
                "DLPack export is only supported for CPU tensors; call .cpu() first",
            ));
        }
        let mut a = to_numpy(slf, true)?;
        if copy == Some(true) {
            a = a.call_method0("copy")?;
        }
        let kw = pyo3::types::PyDict::new(slf.py());
        if let Some(m) = max_version {
            kw.set_item("max_version", m)?;
        }
        // NumPy's BufferError (a dtype the requested DLPack version lacks) is a
        // TypeError here, the documented exception for an unsupported dtype.
        a.call_method("__dlpack__", (), Some(&kw)).map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyBufferError>(slf.py()) {
                crate::bindings::errors::type_err("__dlpack__", e.value(slf.py()).to_string())
            } else {
                e
            }
        })
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0) // kDLCPU, device 0
    }
}

#[pyfunction]
pub fn from_numpy(arr: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let a = arr.cast::<PyUntypedArray>().map_err(|_| {
        crate::bindings::errors::type_err(
            "from_numpy",
            format!("expected np.ndarray, got {}", arr.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
        )
    })?;
    from_numpy_array(a)
}

/// Methods that go through a NumPy array: `tolist`, pickling.
#[pymethods]
impl PyTensor {
    fn tolist<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let me = slf.get();
        let arr = if matches!(me.dt(), DT::F16 | DT::BF16) {
            let f = PyTensor::wrap(me.t().to_dtype(DType::F32).op("tolist")?, false);
            crate::bindings::numpy_interop::to_numpy(&Bound::new(slf.py(), f)?, false)?
        } else {
            crate::bindings::numpy_interop::to_numpy(slf, false)?
        };
        arr.call_method0("tolist")
    }

    /// Unpickling: the tensor of `array` (a copy), in dtype `dtype_name`, a leaf that
    /// requires grad if `requires_grad`.
    #[classmethod]
    fn _rebuild(
        _cls: &Bound<'_, pyo3::types::PyType>,
        array: &Bound<'_, PyAny>,
        dtype_name: &str,
        requires_grad: bool,
    ) -> PyResult<PyTensor> {
        let dt = DT::from_name(dtype_name)
            .ok_or_else(|| crate::bindings::errors::value_err("Tensor._rebuild", format!("unknown dtype {dtype_name:?}")))?;
        let arr = if dt == DT::Bool { array.call_method1("astype", ("bool",))? } else { array.clone() };
        let t = from_numpy(&arr)?;
        let t = if t.dt() == dt { t } else { PyTensor::wrap_dt(crate::bindings::args::cast(&t.t(), t.dt(), dt)?, dt) };
        if requires_grad {
            t.set_requires_grad(true)?;
        }
        Ok(t)
    }

    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let py = slf.py();
        // Rebuilt by `Tensor._rebuild` (a plain Tensor, as before, for subclasses too).
        let f = py.get_type::<PyTensor>().getattr("_rebuild")?;
        let arr = crate::bindings::numpy_interop::to_numpy(slf, false)?.call_method0("copy")?;
        let me = slf.get();
        let args = PyTuple::new(
            py,
            [
                arr.into_any(),
                me.dt().name().into_pyobject(py)?.into_any(),
                // As torch: the copy is a leaf that requires grad if this tensor does.
                me.read().requires_grad().into_pyobject(py)?.to_owned().into_any(),
            ],
        )?;
        Ok((f.unbind(), args.into_any().unbind()))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StorageOwner>()?;
    m.add_function(wrap_pyfunction!(from_numpy, m)?)?;
    let _ = DType::F32;
    Ok(())
}
