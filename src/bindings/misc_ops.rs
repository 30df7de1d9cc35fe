//! Tensor methods PyTorch has around selection, writes along a dim and strided reads:
//! `select`, `unfold`, `diagonal`/`diag`/`diag_embed`/`trace`, `repeat_interleave`,
//! `masked_select`/`masked_scatter`, `index_add`/`index_copy`/`index_fill` (and in-place forms),
//! `scatter_`/`scatter_add_`/`scatter_reduce`, `lerp`, `roll`/`rot90`/`fliplr`/`flipud`,
//! the `new_*` constructors, `type_as`, `data_ptr`, `where`, the comparison aliases,
//! `__contains__`/`__reversed__`, the sparse layout's entry points (`to_sparse`, `layout`),
//! and `pin_memory`, which raises naming why.
//!
//! The index arithmetic is `ops::index_write`; the results are built from the
//! differentiable ops of `autograd` (gathers as flat-offset takes, writes as
//! `index_add`/`where`), so gradients flow as PyTorch's.
use crate::autograd::{ops, Value};
use crate::bindings::args::{cast_v, extract_scalar, norm_dim};
use crate::bindings::errors::{dtype_err, index_err, runtime_err, shape_err, type_err, value_err, OpResult};
use crate::bindings::select::{checked_index, int_index};
use crate::bindings::shape_ops::wrap_like;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::index_write as iw;
use crate::ops::layout::Dense;
use candle_core::{DType, Shape, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// Refuse a result of `dims` the machine cannot hold, or whose flat offsets (u32, as
/// Candle's index ops take them) would overflow, before anything is allocated.
fn check_out(dims: &[usize], itemsize: usize, op: &str) -> PyResult<()> {
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| runtime_err(op, format!("can't allocate memory: a result of shape {dims:?} overflows")))?;
    crate::bindings::args::check_alloc(n, itemsize, op)?;
    if n > u32::MAX as usize {
        return Err(runtime_err(
            op,
            format!("a result of shape {dims:?} has more than {} elements, which this op does not support", u32::MAX),
        ));
    }
    Ok(())
}

/// The elements of `v` (made contiguous) at the strided `region`, shaped as it.
fn take_region(v: &Value, region: &(Vec<usize>, Vec<usize>, usize), name: &'static str, op: &str) -> PyResult<Value> {
    let (shape, st, off) = region;
    let offs: Vec<u32> = crate::ops::layout::strided_offsets(shape, st, *off).into_iter().map(|o| o as u32).collect();
    take_offsets(v, offs, shape, name, op)
}

fn take_offsets(v: &Value, offs: Vec<u32>, shape: &[usize], name: &'static str, op: &str) -> PyResult<Value> {
    let n = offs.len();
    if n == 0 {
        // Candle refuses an empty index: an empty result, still in the graph.
        let flat = crate::autograd::indexing::flat(v).op(op)?;
        return ops::reshape(&ops::narrow(&flat, 0, 0, 0).op(op)?, &Shape::from(shape.to_vec())).op(op);
    }
    let idx = Tensor::from_vec(offs, n, v.data.device()).op(op)?;
    crate::autograd::indexing::take_as(v, idx, &Shape::from(shape.to_vec()), name).op(op)
}

/// Zeros of `shape` with the elements of `src` (row-major) added at the flat `offs`.
fn put_offsets(src: &Value, offs: Vec<u32>, shape: &[usize], op: &str) -> PyResult<Value> {
    let total: usize = shape.iter().product();
    let z = Value::plain(Tensor::zeros(total, src.data.dtype(), src.data.device()).op(op)?);
    if offs.is_empty() {
        return ops::reshape(&z, &Shape::from(shape.to_vec())).op(op);
    }
    let n = offs.len();
    let idx = Tensor::from_vec(offs, n, src.data.device()).op(op)?;
    let flat = crate::autograd::indexing::flat(src).op(op)?;
    ops::reshape(&ops::index_add(&z, &idx, &flat, 0).op(op)?, &Shape::from(shape.to_vec())).op(op)
}

/// Call a Tensor method through Python (methods defined in other binding files).
fn call<'py>(obj: &Bound<'py, PyAny>, name: &str, args: impl pyo3::call::PyCallArgs<'py>) -> PyResult<Bound<'py, PyAny>> {
    obj.call_method1(name, args)
}

/// Refuse negative indices, as PyTorch's `index_add`/`index_copy`/`scatter_reduce` do
/// (`index_fill` and the selections wrap them).
fn no_negative(idx: &Tensor, size: usize, op: &str) -> PyResult<()> {
    if idx.elem_count() == 0 {
        return Ok(());
    }
    let lo = idx.flatten_all().and_then(|x| x.to_dtype(DType::I64)).and_then(|x| x.min(0)).and_then(|x| x.to_scalar::<i64>()).op(op)?;
    if lo < 0 {
        return Err(index_err(op, format!("index {lo} is out of bounds for dimension with size {size}")));
    }
    Ok(())
}

/// A 1-d (or 0-d) integer index for the `index_*` ops, bounds-checked against `size`
/// (negative entries wrap when `wrap`, else they are out of bounds).
fn index_1d(index: &PyTensor, size: usize, wrap: bool, op: &str) -> PyResult<Vec<u32>> {
    let idx = int_index(index, op)?;
    if idx.rank() > 1 {
        return Err(shape_err(op, format!("Index is supposed to be a vector, got shape {:?}", idx.dims())));
    }
    if !wrap {
        no_negative(&idx, size, op)?;
    }
    let u = checked_index(&idx.flatten_all().op(op)?, size, op)?;
    u.to_vec1::<u32>().op(op)
}

/// Self (0-d read as 1-d), the normalized dim, the source (same dtype and slice
/// shapes as PyTorch requires) and the bounds-checked index of an `index_*` op.
fn index_args(me: &PyTensor, dim: i64, index: &PyTensor, source: Option<&PyTensor>, op: &str) -> PyResult<(Value, usize, Vec<u32>)> {
    let v = me.v();
    let rank = v.data.rank();
    let d = norm_dim(dim, rank, op)?;
    let dims: Vec<usize> = if rank == 0 { vec![1] } else { v.data.dims().to_vec() };
    let idx = index_1d(index, dims[d], source.is_none(), op)?;
    if let Some(s) = source {
        if s.dt() != me.dt() {
            return Err(dtype_err(op, format!("self ({}) and source ({}) must have the same scalar type", me.dt().name(), s.dt().name())));
        }
        let sd = s.t().dims().to_vec();
        let sd1: Vec<usize> = if sd.is_empty() { vec![1] } else { sd.clone() };
        let fits = sd1.len() == dims.len() && sd1.iter().zip(&dims).enumerate().all(|(k, (&a, &b))| k == d || a == b);
        if !fits {
            return Err(shape_err(
                op,
                format!(
                    "source of shape {sd:?} does not fit self of shape {:?}: the slice shapes must match apart from dim {d}",
                    v.data.dims()
                ),
            ));
        }
        if sd1[d] != idx.len() {
            return Err(shape_err(
                op,
                format!("Number of indices ({}) should be equal to source.size(dim) ({}), for dim={d}", idx.len(), sd1[d]),
            ));
        }
    }
    Ok((ops::reshape(&v, &Shape::from(dims)).op(op)?, d, idx))
}

/// A fill value (a number or a 0-d tensor) as a value of `dt`.
fn fill_value(value: &Bound<'_, PyAny>, dt: DT, dev: &candle_core::Device, op: &str) -> PyResult<Value> {
    if let Some(s) = extract_scalar(value) {
        return Ok(Value::plain(s.tensor(dt, dev)?));
    }
    match value.cast::<PyTensor>() {
        Ok(t) => {
            let (tv, d) = t.get().v_dt();
            if tv.data.rank() != 0 {
                return Err(value_err(
                    op,
                    format!("only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).", tv.data.rank()),
                ));
            }
            cast_v(&tv, d, dt)
        }
        Err(_) => Err(type_err(op, "value must be a number or a 0-d tensor")),
    }
}

/// The output's dims for `me` (0-d results stay 0-d).
fn back_to(me: &PyTensor, v: Value, op: &str) -> PyResult<PyTensor> {
    let dims = me.t().dims().to_vec();
    Ok(PyTensor::wrap_vdt(ops::reshape(&v, &Shape::from(dims)).op(op)?, me.dt()))
}

fn inplace<'py>(slf: &Bound<'py, PyTensor>, out: PyTensor, op: &str) -> PyResult<Py<PyTensor>> {
    crate::bindings::arith::assign_inplace(slf.get(), out, op)?;
    Ok(slf.clone().unbind())
}

/// Roll `v` by `s` places along `d` (elements pushed past the end come back at the start).
fn roll_dim(v: &Value, d: usize, shift: i64) -> candle_core::Result<Value> {
    let n = v.data.dims()[d];
    if n == 0 {
        return Ok(v.clone());
    }
    let s = shift.rem_euclid(n as i64) as usize;
    if s == 0 {
        return Ok(v.clone());
    }
    ops::cat(&[ops::narrow(v, d, n - s, s)?, ops::narrow(v, d, 0, n - s)?], d)
}

fn ints(obj: &Bound<'_, PyAny>, op: &str, what: &str) -> PyResult<Vec<i64>> {
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(vec![i]);
    }
    obj.extract::<Vec<i64>>().map_err(|_| type_err(op, format!("{what} must be an int or a sequence of ints")))
}

#[pymethods]
impl PyTensor {
    /// `self[..., index, ...]` along `dim`, that dim removed: a view.
    fn select(&self, dim: i64, index: i64) -> PyResult<PyTensor> {
        let v = self.v();
        let r = v.data.rank();
        if r == 0 {
            return Err(index_err("select", "select() cannot be applied to a 0-dim tensor."));
        }
        let d = norm_dim(dim, r, "select")?;
        let n = v.data.dims()[d] as i64;
        if index < -n || index >= n {
            return Err(index_err("select", format!("index {index} out of range for tensor of size {:?} at dimension {d}", v.data.dims())));
        }
        let i = if index < 0 { index + n } else { index } as usize;
        Ok(wrap_like(self, ops::select(&v, d, i).op("select")?))
    }

    /// This tensor cast to `other`'s dtype (and moved to its device).
    fn type_as<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyTensor>) -> PyResult<Bound<'py, PyAny>> {
        let kw = PyDict::new(slf.py());
        kw.set_item("dtype", other.getattr("dtype")?)?;
        kw.set_item("device", other.getattr("device")?)?;
        slf.call_method("to", (), Some(&kw))
    }

    /// Zeros of `size`, with this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false, layout=None, pin_memory=false))]
    fn new_zeros<'py>(
        slf: &Bound<'py, Self>,
        size: &Bound<'py, PyTuple>,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
        layout: Option<&Bound<'py, PyAny>>,
        pin_memory: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        new_like(slf, "zeros", size.clone(), dtype, device, requires_grad, layout, pin_memory, "new_zeros")
    }

    /// Ones of `size`, with this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false, layout=None, pin_memory=false))]
    fn new_ones<'py>(
        slf: &Bound<'py, Self>,
        size: &Bound<'py, PyTuple>,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
        layout: Option<&Bound<'py, PyAny>>,
        pin_memory: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        new_like(slf, "ones", size.clone(), dtype, device, requires_grad, layout, pin_memory, "new_ones")
    }

    /// An uninitialised tensor of `size` (zeros here, as `empty`), this tensor's dtype and device unless given.
    #[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false, layout=None, pin_memory=false))]
    fn new_empty<'py>(
        slf: &Bound<'py, Self>,
        size: &Bound<'py, PyTuple>,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
        layout: Option<&Bound<'py, PyAny>>,
        pin_memory: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        new_like(slf, "empty", size.clone(), dtype, device, requires_grad, layout, pin_memory, "new_empty")
    }

    /// `fill_value` everywhere in a tensor of `size`, this tensor's dtype and device unless given.
    #[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false, layout=None, pin_memory=false))]
    #[allow(clippy::too_many_arguments)]
    fn new_full<'py>(
        slf: &Bound<'py, Self>,
        size: &Bound<'py, PyAny>,
        fill_value: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
        layout: Option<&Bound<'py, PyAny>>,
        pin_memory: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        new_like(slf, "full", PyTuple::new(slf.py(), [size, fill_value])?, dtype, device, requires_grad, layout, pin_memory, "new_full")
    }

    /// A new tensor (a copy) of `data`, this tensor's dtype and device unless given.
    #[pyo3(signature = (data, *, dtype=None, device=None, requires_grad=false, layout=None, pin_memory=false))]
    #[allow(clippy::too_many_arguments)]
    fn new_tensor<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
        requires_grad: bool,
        layout: Option<&Bound<'py, PyAny>>,
        pin_memory: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        new_like(slf, "tensor", PyTuple::new(slf.py(), [data])?, dtype, device, requires_grad, layout, pin_memory, "new_tensor")
    }

    /// The address of the first element (host memory; CPU tensors only). 0 for an empty tensor.
    fn data_ptr(&self) -> PyResult<usize> {
        let t = self.t();
        if t.elem_count() == 0 {
            return Ok(0);
        }
        let (st, l) = t.storage_and_layout();
        let candle_core::Storage::Cpu(cs) = &*st else {
            return Err(runtime_err("data_ptr", "only CPU tensors have a host address here; move the tensor to the CPU first"));
        };
        use candle_core::CpuStorage as C;
        let base = match cs {
            C::U8(v) => v.as_ptr() as usize,
            C::U32(v) => v.as_ptr() as usize,
            C::I16(v) => v.as_ptr() as usize,
            C::I32(v) => v.as_ptr() as usize,
            C::I64(v) => v.as_ptr() as usize,
            C::BF16(v) => v.as_ptr() as usize,
            C::F16(v) => v.as_ptr() as usize,
            C::F32(v) => v.as_ptr() as usize,
            C::F64(v) => v.as_ptr() as usize,
            _ => return Err(runtime_err("data_ptr", format!("no host address for dtype {:?}", t.dtype()))),
        };
        Ok(base + l.start_offset() * t.dtype().size_in_bytes())
    }

    /// Every window of `size` elements along `dimension`, `step` apart, as a new last dim.
    fn unfold(&self, dimension: i64, size: i64, step: i64) -> PyResult<PyTensor> {
        const OP: &str = "unfold";
        let v = self.v();
        let zero_d = v.data.rank() == 0;
        let v1 = if zero_d { ops::reshape(&v, &Shape::from(vec![1])).op(OP)? } else { v };
        let d = norm_dim(dimension, v1.data.rank(), OP)?;
        let n = v1.data.dims()[d];
        if step <= 0 {
            return Err(value_err(OP, format!("step is {step} but must be > 0")));
        }
        if size < 0 {
            return Err(value_err(OP, format!("size is {size} but must be >= 0")));
        }
        if size as usize > n {
            return Err(shape_err(
                OP,
                format!("maximum size for tensor at dimension {d} is {n} but size is {size} (shape {:?})", v1.data.dims()),
            ));
        }
        let region = iw::unfold_region(v1.data.dims(), d, size as usize, step as usize);
        check_out(&region.0, self.dt().itemsize(), OP)?;
        let mut out = take_region(&v1, &region, "UnfoldBackward0", OP)?;
        if zero_d {
            out = ops::reshape(&out, &Shape::from(vec![size as usize])).op(OP)?;
        }
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// The diagonal `offset` of dims `dim1`, `dim2`, as a new last dim (a copy here).
    #[pyo3(signature = (offset=0, dim1=0, dim2=1))]
    fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> PyResult<PyTensor> {
        const OP: &str = "diagonal";
        let v = self.v();
        let r = v.data.rank();
        if r < 2 {
            return Err(shape_err(
                OP,
                format!("diagonal dimensions requires ndim larger than 1, got a {r}-d tensor of shape {:?}", v.data.dims()),
            ));
        }
        let (a, b) = (norm_dim(dim1, r, OP)?, norm_dim(dim2, r, OP)?);
        if a == b {
            return Err(value_err(OP, format!("diagonal dimensions cannot be identical {dim1}, {dim2}")));
        }
        let c = ops::contiguous(&v).op(OP)?;
        let region = iw::diagonal_region(c.data.dims(), offset, a, b);
        Ok(PyTensor::wrap_vdt(take_region(&c, &region, "DiagonalBackward0", OP)?, self.dt()))
    }

    /// A 1-d input as the `diagonal`-th diagonal of a square matrix; a 2-d input's diagonal.
    #[pyo3(signature = (diagonal=0))]
    fn diag(&self, diagonal: i64) -> PyResult<PyTensor> {
        const OP: &str = "diag";
        let v = self.v();
        match v.data.rank() {
            1 => {
                let n = v.data.dims()[0];
                let m = n
                    .checked_add(diagonal.unsigned_abs() as usize)
                    .ok_or_else(|| value_err(OP, format!("diagonal {diagonal} is too large")))?;
                check_out(&[m, m], self.dt().itemsize(), OP)?;
                let region = iw::diagonal_region(&[m, m], diagonal, 0, 1);
                let offs = crate::ops::layout::strided_offsets(&region.0, &region.1, region.2).into_iter().map(|o| o as u32).collect();
                Ok(PyTensor::wrap_vdt(put_offsets(&v, offs, &[m, m], OP)?, self.dt()))
            }
            2 => self.diagonal(diagonal, 0, 1),
            r => Err(shape_err(OP, format!("Supports 1D or 2D tensors. Got {r}D (shape {:?})", v.data.dims()))),
        }
    }

    /// The last dim of the input placed on the `offset` diagonal of dims `dim1`, `dim2` of a new tensor.
    #[pyo3(signature = (offset=0, dim1=-2, dim2=-1))]
    fn diag_embed(&self, offset: i64, dim1: i64, dim2: i64) -> PyResult<PyTensor> {
        const OP: &str = "diag_embed";
        let v = self.v();
        let r = v.data.rank();
        if r == 0 {
            return Err(shape_err(OP, "expected a tensor with at least 1 dimension, got shape []"));
        }
        let (a, b) = (norm_dim(dim1, r + 1, OP)?, norm_dim(dim2, r + 1, OP)?);
        if a == b {
            return Err(value_err(OP, format!("diagonal dimensions cannot be identical {dim1}, {dim2}")));
        }
        let dims = v.data.dims();
        let m = dims[r - 1]
            .checked_add(offset.unsigned_abs() as usize)
            .ok_or_else(|| value_err(OP, format!("offset {offset} is too large")))?;
        let mut others = dims[..r - 1].iter();
        let out_dims: Vec<usize> = (0..=r).map(|k| if k == a || k == b { m } else { *others.next().unwrap_or(&0) }).collect();
        check_out(&out_dims, self.dt().itemsize(), OP)?;
        let region = iw::diagonal_region(&out_dims, offset, a, b);
        let offs = crate::ops::layout::strided_offsets(&region.0, &region.1, region.2).into_iter().map(|o| o as u32).collect();
        Ok(PyTensor::wrap_vdt(put_offsets(&v, offs, &out_dims, OP)?, self.dt()))
    }

    /// The sum of the main diagonal of a matrix (integers sum to int64, as `sum`).
    fn trace<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let r = slf.get().t().rank();
        if r != 2 {
            return Err(shape_err("trace", format!("expected a matrix, but got tensor with dim {r} (shape {:?})", slf.get().t().dims())));
        }
        let d = Bound::new(slf.py(), slf.get().diagonal(0, 0, 1)?)?;
        d.call_method0("sum")
    }

    /// Each element (of the flattened input when `dim` is None) repeated `repeats` times along `dim`.
    #[pyo3(signature = (repeats, dim=None, *, output_size=None))]
    fn repeat_interleave(&self, repeats: &Bound<'_, PyAny>, dim: Option<i64>, output_size: Option<i64>) -> PyResult<PyTensor> {
        const OP: &str = "repeat_interleave";
        let v = self.v();
        let (v, d) = match dim {
            None => (crate::autograd::indexing::flat(&v).op(OP)?, 0),
            Some(dim) if v.data.rank() == 0 => {
                norm_dim(dim, 0, OP)?;
                (ops::reshape(&v, &Shape::from(vec![1])).op(OP)?, 0)
            }
            Some(dim) => {
                let d = norm_dim(dim, v.data.rank(), OP)?;
                (v, d)
            }
        };
        let n = v.data.dims()[d];
        let reps: Vec<i64> = match repeats.cast::<PyTensor>() {
            Ok(t) => {
                let t = t.get();
                if t.dt().is_float() || t.dt() == DT::Bool {
                    return Err(dtype_err(OP, format!("repeats must be an integer tensor, got {}", t.dt().name())));
                }
                let rt = t.t();
                if rt.rank() > 1 {
                    return Err(shape_err(OP, format!("repeats must be 0-dim or 1-dim tensor, got shape {:?}", rt.dims())));
                }
                let r = rt.flatten_all().and_then(|x| x.to_dtype(DType::I64)).and_then(|x| x.to_vec1::<i64>()).op(OP)?;
                if r.len() == 1 {
                    vec![r[0]; n]
                } else if r.len() != n {
                    return Err(shape_err(
                        OP,
                        format!(
                            "repeats must have the same size as input along dim, but got repeats.size(0) = {} and input.size({d}) = {n}",
                            r.len()
                        ),
                    ));
                } else {
                    r
                }
            }
            Err(_) => {
                let r: i64 = repeats.extract().map_err(|_| type_err(OP, "repeats must be an int or an integer tensor"))?;
                vec![r; n]
            }
        };
        if reps.iter().any(|&r| r < 0) {
            return Err(value_err(OP, "repeats can not be negative"));
        }
        let reps: Vec<usize> = reps.into_iter().map(|r| r as usize).collect();
        let total = reps
            .iter()
            .try_fold(0usize, |a, &r| a.checked_add(r))
            .ok_or_else(|| runtime_err(OP, "can't allocate memory: the repeats sum past the largest size"))?;
        let mut out_dims = v.data.dims().to_vec();
        out_dims[d] = total;
        check_out(&out_dims, self.dt().itemsize(), OP)?;
        if let Some(o) = output_size {
            if o != total as i64 {
                return Err(value_err(OP, format!("Invalid output_size, expected {total} but got {o}")));
            }
        }
        let out = if total == 0 {
            ops::narrow(&ops::contiguous(&v).op(OP)?, d, 0, 0).op(OP)?
        } else {
            let idx = Tensor::from_vec(iw::repeat_index(&reps), total, v.data.device()).op(OP)?;
            ops::index_select(&v, &idx, d).op(OP)?
        };
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// The elements where the (broadcast) boolean `mask` is True, as a 1-d tensor.
    fn masked_select(&self, mask: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        const OP: &str = "masked_select";
        let m = mask.get();
        if !m.is_bool {
            return Err(dtype_err(OP, format!("expected BoolTensor for mask, got {}", m.dt().name())));
        }
        let (v, mt) = (self.v(), m.t());
        let shape = v.data.shape().broadcast_shape_binary_op(mt.shape(), OP).map_err(|_| {
            shape_err(OP, format!("the shapes of the mask {:?} and the input {:?} cannot be broadcast together", mt.dims(), v.data.dims()))
        })?;
        let vb = ops::broadcast_as(&v, &shape).op(OP)?;
        let mv: Vec<u8> = mt.broadcast_as(&shape).and_then(|x| x.flatten_all()).and_then(|x| x.to_vec1::<u8>()).op(OP)?;
        let offs: Vec<u32> = mv.iter().enumerate().filter(|(_, &b)| b != 0).map(|(i, _)| i as u32).collect();
        let k = offs.len();
        Ok(PyTensor::wrap_vdt(take_offsets(&vb, offs, &[k], "MaskedSelectBackward0", OP)?, self.dt()))
    }

    /// `self` with `alpha * source` added at the slices `index` along `dim`.
    #[pyo3(signature = (dim, index, source, *, alpha=None))]
    fn index_add(
        &self,
        dim: i64,
        index: &Bound<'_, PyTensor>,
        source: &Bound<'_, PyTensor>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTensor> {
        const OP: &str = "index_add";
        let (v, d, idx) = index_args(self, dim, index.get(), Some(source.get()), OP)?;
        let mut src = source.get().v();
        if src.data.rank() == 0 {
            src = ops::reshape(&src, &Shape::from(vec![1])).op(OP)?;
        }
        if let Some(a) = alpha {
            let s = extract_scalar(a).ok_or_else(|| type_err(OP, "alpha must be a number"))?;
            if !self.dt().is_float() && matches!(s, crate::bindings::args::Scalar::Float(_)) {
                return Err(dtype_err(OP, "For integral input tensors, argument alpha must not be a floating point number."));
            }
            if s.f64() != 1.0 {
                let at = Value::plain(s.tensor(self.dt(), src.data.device())?);
                src = ops::mul(&src, &at).op(OP)?;
            }
        }
        if idx.is_empty() {
            return back_to(self, ops::force_contiguous(&v, "IndexAddBackward0").op(OP)?, OP);
        }
        let n = idx.len();
        let u = Tensor::from_vec(idx, n, v.data.device()).op(OP)?;
        back_to(self, ops::index_add(&ops::contiguous(&v).op(OP)?, &u, &src, d).op(OP)?, OP)
    }

    /// In-place `index_add`.
    #[pyo3(signature = (dim, index, source, *, alpha=None))]
    fn index_add_(
        slf: &Bound<'_, Self>,
        dim: i64,
        index: &Bound<'_, PyTensor>,
        source: &Bound<'_, PyTensor>,
        alpha: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyTensor>> {
        let out = slf.get().inplace_source().index_add(dim, index, source, alpha)?;
        inplace(slf, out, "index_add_")
    }

    /// `self` with the slices `index` along `dim` replaced by those of `source`.
    fn index_copy(&self, dim: i64, index: &Bound<'_, PyTensor>, source: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        const OP: &str = "index_copy";
        let (v, d, idx) = index_args(self, dim, index.get(), Some(source.get()), OP)?;
        let mut src = source.get().v();
        if src.data.rank() == 0 {
            src = ops::reshape(&src, &Shape::from(vec![1])).op(OP)?;
        }
        if idx.is_empty() {
            return back_to(self, ops::force_contiguous(&v, "IndexCopyBackward0").op(OP)?, OP);
        }
        let sd = src.data.dims().to_vec();
        let iv = iw::expand_index(&idx, &sd, d);
        let offs = crate::ops::gather::scatter_offsets(&iv, &sd, v.data.dims(), d);
        let out = crate::bindings::select::overwrite_at(&v, &src, offs).op(OP)?;
        back_to(self, out, OP)
    }

    /// In-place `index_copy`.
    fn index_copy_(slf: &Bound<'_, Self>, dim: i64, index: &Bound<'_, PyTensor>, source: &Bound<'_, PyTensor>) -> PyResult<Py<PyTensor>> {
        let out = slf.get().inplace_source().index_copy(dim, index, source)?;
        inplace(slf, out, "index_copy_")
    }

    /// `self` with the slices `index` along `dim` set to `value` (a number or a 0-d tensor).
    fn index_fill(&self, dim: i64, index: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        const OP: &str = "index_fill";
        let (v, d, idx) = index_args(self, dim, index.get(), None, OP)?;
        let fill = fill_value(value, self.dt(), v.data.device(), OP)?;
        let mut sd = v.data.dims().to_vec();
        sd[d] = idx.len();
        let iv = iw::expand_index(&idx, &sd, d);
        let offs = crate::ops::gather::scatter_offsets(&iv, &sd, v.data.dims(), d);
        let mut mask = vec![0u8; v.data.elem_count()];
        for o in offs {
            mask[o as usize] = 1;
        }
        let m = Tensor::from_vec(mask, v.data.shape(), v.data.device()).op(OP)?;
        let fill = ops::broadcast_as(&fill, v.data.shape()).op(OP)?;
        back_to(self, ops::where_cond(&m, &fill, &v).op(OP)?, OP)
    }

    /// In-place `index_fill`.
    fn index_fill_(slf: &Bound<'_, Self>, dim: i64, index: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let out = slf.get().inplace_source().index_fill(dim, index, value)?;
        inplace(slf, out, "index_fill_")
    }

    /// In-place `scatter` (`src` a tensor or a number, or `value=`; `reduce="add"`).
    #[pyo3(signature = (dim, index, src=None, value=None, *, reduce=None))]
    fn scatter_<'py>(
        slf: &Bound<'py, Self>,
        dim: i64,
        index: &Bound<'py, PyTensor>,
        src: Option<&Bound<'py, PyAny>>,
        value: Option<&Bound<'py, PyAny>>,
        reduce: Option<&str>,
    ) -> PyResult<Py<PyTensor>> {
        let py = slf.py();
        let source = Bound::new(py, slf.get().inplace_source())?;
        let kw = PyDict::new(py);
        kw.set_item("src", src)?;
        kw.set_item("value", value)?;
        kw.set_item("reduce", reduce)?;
        let out = source.call_method("scatter", (dim, index), Some(&kw))?;
        let out: PyTensor = PyTensor::wrap_vdt(out.cast::<PyTensor>()?.get().v(), slf.get().dt());
        inplace(slf, out, "scatter_")
    }

    /// In-place `scatter_add`.
    fn scatter_add_<'py>(
        slf: &Bound<'py, Self>,
        dim: i64,
        index: &Bound<'py, PyTensor>,
        src: &Bound<'py, PyAny>,
    ) -> PyResult<Py<PyTensor>> {
        let source = Bound::new(slf.py(), slf.get().inplace_source())?;
        let out = call(source.as_any(), "scatter_add", (dim, index, src))?;
        let out = PyTensor::wrap_vdt(out.cast::<PyTensor>()?.get().v(), slf.get().dt());
        inplace(slf, out, "scatter_add_")
    }

    /// `src` reduced into `self` at `index` along `dim` with `reduce` ("sum", "prod",
    /// "mean", "amax", "amin"); `include_self=False` leaves self's value out where a
    /// source value arrives.
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    pub(crate) fn scatter_reduce(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &Bound<'_, PyTensor>,
        src: &Bound<'_, PyTensor>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<PyTensor> {
        const OP: &str = "scatter_reduce";
        let how = iw::Reduce::parse(reduce)
            .ok_or_else(|| value_err(OP, format!("reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")))?;
        let v = self.v();
        let zero_d = v.data.rank() == 0;
        let v1 = if zero_d { ops::reshape(&v, &Shape::from(vec![1])).op(OP)? } else { v };
        let d = norm_dim(dim, v1.data.rank(), OP)?;
        if src.get().dt() != self.dt() {
            return Err(dtype_err(
                OP,
                format!("Expected self.dtype to be equal to src.dtype, got {} and {}", self.dt().name(), src.get().dt().name()),
            ));
        }
        let it = int_index(index.get(), OP)?;
        let it = if it.rank() == 0 { it.reshape(1).op(OP)? } else { it };
        let mut s = src.get().v();
        if s.data.rank() == 0 {
            s = ops::reshape(&s, &Shape::from(vec![1])).op(OP)?;
        }
        let (idims, sdims, xdims) = (it.dims().to_vec(), s.data.dims().to_vec(), v1.data.dims().to_vec());
        if idims.len() != xdims.len() || sdims.len() != xdims.len() {
            return Err(shape_err(
                OP,
                format!("Index tensor must have the same number of dimensions as self and src: {idims:?}, {xdims:?}, {sdims:?}"),
            ));
        }
        for k in 0..xdims.len() {
            if idims[k] > sdims[k] || (k != d && idims[k] > xdims[k]) {
                return Err(shape_err(
                    OP,
                    format!("Size does not match at dimension {k}: index {idims:?} must be no larger than src {sdims:?} and, apart from dim {d}, self {xdims:?}"),
                ));
            }
        }
        for (k, &n) in idims.iter().enumerate() {
            if n < s.data.dims()[k] {
                s = ops::narrow(&s, k, 0, n).op(OP)?;
            }
        }
        no_negative(&it, xdims[d], OP)?;
        let u = checked_index(&it, xdims[d], OP)?;
        let iv: Vec<u32> = u.flatten_all().and_then(|x| x.to_vec1::<u32>()).op(OP)?;
        let offs = crate::ops::gather::scatter_offsets(&iv, &idims, &xdims, d);
        let f64s = |t: &Tensor| t.flatten_all().and_then(|x| x.to_dtype(DType::F64)).and_then(|x| x.to_vec1::<f64>());
        let (base, sv) = (f64s(&v1.data).op(OP)?, f64s(&s.data).op(OP)?);
        let int = !self.dt().is_float();
        let (out, count) = crate::bindings::errors::detach(py, OP, || Ok(iw::scatter_reduce(&base, &sv, &offs, how, include_self, int)))?;
        let dev = v1.data.device().clone();
        let dt = v1.data.dtype();
        let to_t = |x: Vec<f64>, shape: &[usize]| Tensor::from_vec(x, shape, &dev).and_then(|t| t.to_dtype(dt));
        let out_t = to_t(out.clone(), &xdims).op(OP)?;
        let res = if ops::records(&[&v1, &s]) && dt.is_float() {
            let (sw, srw) = iw::scatter_reduce_weights(&base, &sv, &offs, &out, &count, how, include_self);
            let (sw, srw) = (to_t(sw, &xdims).op(OP)?, to_t(srw, s.data.dims()).op(OP)?);
            let n = offs.len();
            let o = Tensor::from_vec(offs, n, &dev).op(OP)?;
            crate::autograd::indexing::weighted_scatter(&v1, &s, out_t, o, sw, srw, "ScatterReduceBackward0").op(OP)?
        } else {
            Value::plain(out_t)
        };
        back_to(self, res, OP)
    }

    /// In-place `scatter_reduce`.
    #[pyo3(signature = (dim, index, src, reduce, *, include_self=true))]
    fn scatter_reduce_(
        slf: &Bound<'_, Self>,
        dim: i64,
        index: &Bound<'_, PyTensor>,
        src: &Bound<'_, PyTensor>,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<Py<PyTensor>> {
        let out = slf.get().inplace_source().scatter_reduce(slf.py(), dim, index, src, reduce, include_self)?;
        inplace(slf, out, "scatter_reduce_")
    }

    /// `self` with the places where the (broadcast) boolean `mask` is True filled, in
    /// row-major order, by the leading elements of `source`.
    fn masked_scatter(&self, mask: &Bound<'_, PyTensor>, source: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        const OP: &str = "masked_scatter";
        let m = mask.get();
        if !m.is_bool {
            return Err(dtype_err(OP, format!("expected BoolTensor for mask, got {}", m.dt().name())));
        }
        let src = source.get();
        if src.dt() != self.dt() {
            return Err(dtype_err(
                OP,
                format!("expected self and source to have same dtypes but got {} and {}", self.dt().name(), src.dt().name()),
            ));
        }
        let (v, mt) = (self.v(), m.t());
        let mb = mt.broadcast_as(v.data.shape()).map_err(|_| {
            shape_err(OP, format!("the mask of shape {:?} cannot be broadcast to the tensor's shape {:?}", mt.dims(), v.data.dims()))
        })?;
        let mv: Vec<u8> = mb.flatten_all().and_then(|x| x.to_vec1::<u8>()).op(OP)?;
        let offs: Vec<u32> = mv.iter().enumerate().filter(|(_, &b)| b != 0).map(|(i, _)| i as u32).collect();
        let k = offs.len();
        let sv = src.v();
        if sv.data.elem_count() < k {
            return Err(shape_err(
                OP,
                format!(
                    "Number of elements of source < number of ones in mask: source of shape {:?} has {} elements, the mask {k} ones",
                    sv.data.dims(),
                    sv.data.elem_count()
                ),
            ));
        }
        if k == 0 {
            return Ok(PyTensor::wrap_vdt(ops::force_contiguous(&v, "MaskedScatterBackward0").op(OP)?, self.dt()));
        }
        let taken = ops::narrow(&crate::autograd::indexing::flat(&sv).op(OP)?, 0, 0, k).op(OP)?;
        let out = crate::bindings::select::overwrite_at(&v, &taken, offs).op(OP)?;
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// In-place `masked_scatter`.
    fn masked_scatter_(slf: &Bound<'_, Self>, mask: &Bound<'_, PyTensor>, source: &Bound<'_, PyTensor>) -> PyResult<Py<PyTensor>> {
        let out = slf.get().inplace_source().masked_scatter(mask, source)?;
        inplace(slf, out, "masked_scatter_")
    }

    /// `self + weight * (end - self)` (PyTorch's form, exact at both ends); `weight` a number or a tensor.
    fn lerp(&self, end: &Bound<'_, PyTensor>, weight: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        const OP: &str = "lerp";
        let dt = self.dt();
        crate::bindings::errors::require_float(OP, dt)?;
        let e = end.get();
        if e.dt() != dt {
            return Err(dtype_err(OP, format!("expected dtype {} for `end` but got dtype {}", dt.name(), e.dt().name())));
        }
        let (a, b) = (self.v(), e.v());
        let shape = |x: &Tensor, y: &Tensor| {
            x.shape()
                .broadcast_shape_binary_op(y.shape(), OP)
                .map_err(|_| shape_err(OP, format!("the shapes {:?} and {:?} cannot be broadcast together", x.dims(), y.dims())))
        };
        shape(&a.data, &b.data)?;
        // Outside autograd, operands of one shape: one pass (`ops::composite`), the
        // values of the composition below.
        let tracked = |v: &Value| v.requires_grad() && crate::autograd::grad_enabled();
        let number = extract_scalar(weight).map(|w| w.f64());
        if !tracked(&a) && !tracked(&b) {
            let fused = match number {
                Some(w) => crate::ops::composite::lerp(&a.data, &b.data, w).op(OP)?,
                None => match weight.cast::<PyTensor>() {
                    Ok(wt) if wt.get().dt() == dt && !tracked(&wt.get().v()) => {
                        crate::ops::composite::lerp_weighted(&a.data, &b.data, &wt.get().t()).op(OP)?
                    }
                    _ => None,
                },
            };
            if let Some(out) = fused {
                return Ok(PyTensor::wrap_dt(out, dt));
            }
        }
        let diff = ops::sub(&b, &a).op(OP)?;
        let out = match number {
            Some(w) => {
                if w.abs() < 0.5 {
                    ops::add(&a, &ops::affine(&diff, w, 0.0).op(OP)?).op(OP)?
                } else {
                    ops::sub(&b, &ops::affine(&diff, 1.0 - w, 0.0).op(OP)?).op(OP)?
                }
            }
            None => {
                let wt = weight.cast::<PyTensor>().map_err(|_| type_err(OP, "weight must be a number or a Tensor"))?.get();
                if wt.dt() != dt {
                    return Err(dtype_err(OP, format!("expected dtype {} for `weight` but got dtype {}", dt.name(), wt.dt().name())));
                }
                let w = wt.v();
                let full = shape(&diff.data, &w.data)?;
                let lo = ops::add(&a, &ops::mul(&w, &diff).op(OP)?).op(OP)?;
                let one_minus = ops::affine(&w, -1.0, 1.0).op(OP)?;
                let hi = ops::sub(&b, &ops::mul(&diff, &one_minus).op(OP)?).op(OP)?;
                let small = w.data.abs().and_then(|x| x.lt(0.5)).and_then(|m| m.broadcast_as(&full)).op(OP)?;
                let lo = ops::broadcast_as(&lo, &full).op(OP)?;
                let hi = ops::broadcast_as(&hi, &full).op(OP)?;
                ops::where_cond(&small.dense().op(OP)?, &lo, &hi).op(OP)?
            }
        };
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    /// `addcmul_` / `addcdiv_`'s direct path (`ops::assign::addc_assign`): this tensor
    /// `+= value * tensor1 * tensor2` (or `/ tensor2` when `divide`) in its own storage,
    /// for operands of its dtype and shape outside autograd. False: not those, nothing
    /// written (the Python method then takes the general path).
    fn _addc_direct(
        &self,
        tensor1: &Bound<'_, PyAny>,
        tensor2: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        divide: bool,
    ) -> PyResult<bool> {
        use crate::bindings::arith::{number, plain_operand};
        let (Ok(t1), Ok(t2), Some(v)) = (tensor1.cast::<PyTensor>(), tensor2.cast::<PyTensor>(), number(value)) else {
            return Ok(false);
        };
        let dt = self.dt();
        let (Some(a), Some(b)) = (plain_operand(t1.get(), dt), plain_operand(t2.get(), dt)) else { return Ok(false) };
        let name = if divide { "addcdiv_" } else { "addcmul_" };
        crate::bindings::arith::write_direct(self, name, |t| crate::ops::assign::addc_assign(t, &a, &b, v, divide))
    }

    /// `addcmul` / `addcdiv` out of place in one pass (`ops::composite::addcmul`): `self
    /// + value * tensor1 * tensor2` (or `/ tensor2` when `divide`) for operands of this
    /// tensor's dtype and shape outside autograd, None otherwise (the Python function then
    /// composes it, with the same values).
    fn _addc_out(
        &self,
        tensor1: &Bound<'_, PyAny>,
        tensor2: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        divide: bool,
    ) -> PyResult<Option<PyTensor>> {
        use crate::bindings::arith::{number, plain_operand};
        let (Ok(t1), Ok(t2), Some(v)) = (tensor1.cast::<PyTensor>(), tensor2.cast::<PyTensor>(), number(value)) else {
            return Ok(None);
        };
        let dt = self.dt();
        let me = self.v();
        if !dt.is_float() || self.is_sparse_coo() || (me.requires_grad() && crate::autograd::grad_enabled()) {
            return Ok(None);
        }
        let (Some(a), Some(b)) = (plain_operand(t1.get(), dt), plain_operand(t2.get(), dt)) else { return Ok(None) };
        let name = if divide { "addcdiv" } else { "addcmul" };
        Ok(crate::ops::composite::addcmul(&me.data, &a, &b, v, divide).op(name)?.map(|t| PyTensor::wrap_dt(t, dt)))
    }

    /// `nan_to_num` in one pass (`ops::composite::nan_to_num`) with the replacements
    /// given (the Python function resolves the defaults) for a float32/float64 CPU
    /// tensor outside autograd; None otherwise (the Python function then composes it).
    fn _nan_to_num_out(&self, nan: f64, posinf: f64, neginf: f64) -> PyResult<Option<PyTensor>> {
        let (dt, me) = (self.dt(), self.v());
        if !dt.is_float() || self.is_sparse_coo() || (me.requires_grad() && crate::autograd::grad_enabled()) {
            return Ok(None);
        }
        let r = crate::ops::composite::NanToNum { nan, posinf, neginf };
        Ok(crate::ops::composite::nan_to_num(&me.data, r).op("nan_to_num")?.map(|t| PyTensor::wrap_dt(t, dt)))
    }

    /// In-place `lerp`: directly in this tensor's storage (`ops::assign::lerp_assign`)
    /// for a number weight and an `end` of its dtype and shape, both outside autograd.
    fn lerp_(slf: &Bound<'_, Self>, end: &Bound<'_, PyTensor>, weight: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        if let (Some(w), Some(e)) = (crate::bindings::arith::number(weight), crate::bindings::arith::plain_operand(end.get(), me.dt())) {
            if me.dt().is_float() && crate::bindings::arith::write_direct(me, "lerp_", |t| crate::ops::assign::lerp_assign(t, &e, w))? {
                return Ok(slf.clone().unbind());
            }
        }
        let out = me.inplace_source().lerp(end, weight)?;
        inplace(slf, out, "lerp_")
    }

    /// `where(condition, self, other)`.
    #[pyo3(name = "where")]
    fn where_method<'py>(slf: &Bound<'py, Self>, condition: &Bound<'py, PyTensor>, other: &Bound<'py, PyAny>) -> PyResult<PyTensor> {
        crate::bindings::unary::where3(condition, slf.as_any(), other)
    }

    /// Alias of `lt`.
    fn less<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call(slf.as_any(), "lt", (other,))
    }
    /// Alias of `le`.
    fn less_equal<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call(slf.as_any(), "le", (other,))
    }
    /// Alias of `gt`.
    fn greater<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call(slf.as_any(), "gt", (other,))
    }
    /// Alias of `ge`.
    fn greater_equal<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call(slf.as_any(), "ge", (other,))
    }
    /// Alias of `ne`.
    fn not_equal<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        call(slf.as_any(), "ne", (other,))
    }

    /// `element in self`: whether any element equals `element` (a number or a tensor, broadcast).
    fn __contains__(slf: &Bound<'_, Self>, element: &Bound<'_, PyAny>) -> PyResult<bool> {
        if extract_scalar(element).is_none() && element.cast::<PyTensor>().is_err() {
            let name = element.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            return Err(type_err(
                "__contains__",
                format!("Tensor.__contains__ only supports Tensor or scalar, but you passed in a {name}."),
            ));
        }
        let hit = call(slf.as_any(), "eq", (element,))?.call_method0("any")?;
        hit.extract::<bool>().or_else(|_| hit.call_method0("item")?.extract::<bool>())
    }

    /// The tensor flipped along dim 0 (a 0-d tensor is returned as it is), as PyTorch's `reversed(t)`.
    fn __reversed__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let me = slf.get();
        if me.t().rank() == 0 {
            return Ok(slf.clone().into_any().unbind());
        }
        Ok(Py::new(slf.py(), me.flip_dims(&[0], "__reversed__")?)?.into_any())
    }

    /// Flip the columns (dim 1); at least 2-d.
    fn fliplr(&self) -> PyResult<PyTensor> {
        if self.t().rank() < 2 {
            return Err(shape_err("fliplr", format!("Input must be >= 2-d, got shape {:?}", self.t().dims())));
        }
        self.flip_dims(&[1], "fliplr")
    }

    /// Flip the rows (dim 0); at least 1-d.
    fn flipud(&self) -> PyResult<PyTensor> {
        if self.t().rank() < 1 {
            return Err(shape_err("flipud", "Input must be >= 1-d, got shape []"));
        }
        self.flip_dims(&[0], "flipud")
    }

    /// Shift the elements `shifts` places along `dims` (of the flattened tensor when `dims` is None), wrapping around.
    #[pyo3(signature = (shifts, dims=None))]
    fn roll(&self, shifts: &Bound<'_, PyAny>, dims: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        const OP: &str = "roll";
        let v = self.v();
        let sh = ints(shifts, OP, "shifts")?;
        let out = match dims {
            None => {
                if sh.len() != 1 {
                    return Err(value_err(OP, format!("shifts and dimensions must align. shifts: {}, dims:0", sh.len())));
                }
                let flat = crate::autograd::indexing::flat(&v).op(OP)?;
                ops::reshape(&roll_dim(&flat, 0, sh[0]).op(OP)?, v.data.shape()).op(OP)?
            }
            Some(ds) => {
                let ds = ints(ds, OP, "dims")?;
                if ds.len() != sh.len() {
                    return Err(value_err(OP, format!("shifts and dimensions must align. shifts: {}, dims:{}", sh.len(), ds.len())));
                }
                let mut cur = v;
                for (&s, &d) in sh.iter().zip(&ds) {
                    let d = norm_dim(d, cur.data.rank(), OP)?;
                    if cur.data.rank() == 0 {
                        continue;
                    }
                    cur = roll_dim(&cur, d, s).op(OP)?;
                }
                ops::contiguous(&cur).op(OP)?
            }
        };
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// Rotate by 90 degrees `k` times in the plane of `dims` (from the first towards the second).
    #[pyo3(signature = (k=1, dims=None))]
    fn rot90(&self, k: i64, dims: Option<Vec<i64>>) -> PyResult<PyTensor> {
        const OP: &str = "rot90";
        let dims = dims.unwrap_or_else(|| vec![0, 1]);
        let r = self.t().rank();
        if dims.len() != 2 {
            return Err(value_err(OP, format!("expected total rotation dims == 2, but got dims = {}", dims.len())));
        }
        if r < 2 {
            return Err(shape_err(OP, format!("expected total dims >= 2, but got total dims = {r} (shape {:?})", self.t().dims())));
        }
        let (a, b) = (norm_dim(dims[0], r, OP)?, norm_dim(dims[1], r, OP)?);
        if a == b {
            return Err(value_err(OP, format!("expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")));
        }
        let v = self.v();
        let out = match k.rem_euclid(4) {
            1 => ops::transpose(&crate::autograd::indexing::flip(&v, &[b]).op(OP)?, a, b).op(OP)?,
            2 => crate::autograd::indexing::flip(&v, &[a, b]).op(OP)?,
            3 => ops::transpose(&crate::autograd::indexing::flip(&v, &[a]).op(OP)?, a, b).op(OP)?,
            _ => ops::force_contiguous(&v, "CloneBackward0").op(OP)?,
        };
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// This tensor in the sparse COO layout (`candle_py._sparse.to_sparse`: its nonzero
    /// entries over the first `sparse_dim` dims, composed of our ops).
    #[pyo3(signature = (*args, **kwargs))]
    fn to_sparse<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let f = slf.py().import("candle_py._sparse")?.getattr("to_sparse")?;
        let mut all = vec![slf.clone().into_any()];
        all.extend(args.iter());
        f.call(PyTuple::new(slf.py(), all)?, kwargs)
    }
    /// The memory layout: `torch.strided` (`torch.sparse_coo` for a `SparseTensor`).
    #[getter]
    fn layout<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let name = if slf.get().is_sparse_coo() { "sparse_coo" } else { "strided" };
        slf.py().import("candle_py._sparse")?.getattr(name)
    }

    /// Not available: there is no accelerator whose transfers pinned host memory would speed up.
    #[pyo3(signature = (device=None))]
    fn pin_memory(&self, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let _ = device;
        Err(runtime_err("pin_memory", "cannot pin memory: candle_py has no page-locked host allocator and no CUDA driver is in use"))
    }

    /// Always False: candle_py never pins host memory.
    #[pyo3(signature = (device=None))]
    fn is_pinned(&self, device: Option<&Bound<'_, PyAny>>) -> bool {
        let _ = device;
        false
    }
}

impl PyTensor {
    fn flip_dims(&self, dims: &[usize], op: &str) -> PyResult<PyTensor> {
        Ok(PyTensor::wrap_vdt(crate::autograd::indexing::flip(&self.v(), dims).op(op)?, self.dt()))
    }
}

/// `new_zeros`/`new_ones`/`new_empty`/`new_full`/`new_tensor`: the creation function
/// `func` of `_core` with this tensor's dtype and device as the defaults.
#[allow(clippy::too_many_arguments)]
fn new_like<'py>(
    slf: &Bound<'py, PyTensor>,
    func: &str,
    args: Bound<'py, PyTuple>,
    dtype: Option<&Bound<'py, PyAny>>,
    device: Option<&Bound<'py, PyAny>>,
    requires_grad: bool,
    layout: Option<&Bound<'py, PyAny>>,
    pin_memory: bool,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    if layout.is_some_and(|l| !l.is_none()) {
        return Err(runtime_err(op, "layout= other than None is not supported (candle_py has dense tensors only)"));
    }
    if pin_memory {
        return Err(runtime_err(op, "cannot pin memory: candle_py has no page-locked host allocator"));
    }
    let kw = PyDict::new(py);
    match dtype {
        Some(d) if !d.is_none() => kw.set_item("dtype", d)?,
        _ => kw.set_item("dtype", slf.getattr("dtype")?)?,
    }
    match device {
        Some(d) if !d.is_none() => kw.set_item("device", d)?,
        _ => kw.set_item("device", slf.getattr("device")?)?,
    }
    kw.set_item("requires_grad", requires_grad)?;
    let core = py.import("candle_py._core")?;
    let f = core.getattr(func)?;
    f.call(args, Some(&kw))
}
