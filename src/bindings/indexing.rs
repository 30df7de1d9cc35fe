//! `x[key]` and `x[key] = value`.
//!
//! Basic keys (ints, slices with positive steps, None, Ellipsis) are resolved
//! here: reads become narrow/squeeze views (steps too: `ops::step_view`),
//! writes go straight into the storage region the key names, so a write costs
//! time proportional to the region, not the tensor. Advanced keys (integer or
//! boolean tensors, lists, arrays) follow NumPy's rules, which PyTorch shares:
//! `ops::advanced_index` computes the element offsets and we gather or write them.
//!
//! Writes into a tensor that is part of the autograd graph are done
//! functionally (the tensor's value is replaced by a new one in the graph), so
//! gradients stay right; views taken before such a write keep the old values.
use crate::autograd::grad_enabled;
use crate::autograd::indexing::flat;
use crate::autograd::{ops, Value};
use crate::bindings::advanced_key::advanced_selection;
use crate::bindings::args::{cast, cast_v, extract_scalar};
use crate::bindings::errors::{index_err, runtime_err, shape_err, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::ops::advanced_index::row_major;
use crate::ops::layout::{strided_offsets, Dense};
use candle_core::{CpuStorage, DType, InplaceOp2, Layout, Shape, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PyInt, PyList, PySlice, PySliceMethods, PyTuple};

enum Item<'py> {
    Int(i64),
    Slice(Bound<'py, PySlice>),
    NewAxis,
    Ellipsis,
}

enum Dim {
    Keep { start: usize, len: usize, step: usize },
    Drop { index: usize },
    New,
}

/// Parse a key; `None` means it needs the advanced (NumPy-rules) path.
fn parse_basic<'py>(key: &Bound<'py, PyAny>) -> PyResult<Option<Vec<Item<'py>>>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(t) = key.cast::<PyTuple>() { t.iter().collect() } else { vec![key.clone()] };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        if it.is_none() {
            out.push(Item::NewAxis);
        } else if it.is_instance_of::<PyEllipsis>() {
            out.push(Item::Ellipsis);
        } else if let Ok(s) = it.cast::<PySlice>() {
            out.push(Item::Slice(s.clone()));
        } else if it.is_instance_of::<PyInt>() && !it.is_instance_of::<pyo3::types::PyBool>() {
            out.push(Item::Int(it.extract()?));
        } else if let Ok(t) = it.cast::<PyTensor>() {
            let t = t.get();
            if t.t().rank() == 0 && !t.dt().is_float() && !t.is_bool {
                out.push(Item::Int(t.t().to_dtype(DType::I64).and_then(|x| x.to_scalar::<i64>()).op("index")?));
            } else {
                return Ok(None);
            }
        } else if let Some(crate::bindings::args::Scalar::Int(i)) =
            extract_scalar(&it).filter(|_| !it.is_instance_of::<pyo3::types::PyBool>())
        {
            out.push(Item::Int(i));
        } else if it.is_instance_of::<pyo3::types::PyFloat>() || it.is_instance_of::<pyo3::types::PyString>() {
            return Err(index_err(
                "index",
                format!(
                    "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean tensors are valid indices (got {})",
                    it.get_type().name()?
                ),
            ));
        } else {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

fn resolve(items: Vec<Item<'_>>, dims: &[usize]) -> PyResult<Vec<Dim>> {
    let consumed = items.iter().filter(|i| matches!(i, Item::Int(_) | Item::Slice(_))).count();
    let ellipses = items.iter().filter(|i| matches!(i, Item::Ellipsis)).count();
    if ellipses > 1 {
        return Err(index_err("index", "an index can only have a single ellipsis ('...')"));
    }
    if consumed > dims.len() {
        return Err(index_err("index", format!("too many indices for tensor of dimension {}", dims.len())));
    }
    let mut out = Vec::new();
    let mut d = 0;
    for it in items {
        match it {
            Item::NewAxis => out.push(Dim::New),
            Item::Ellipsis => {
                for _ in 0..dims.len() - consumed {
                    out.push(Dim::Keep { start: 0, len: dims[d], step: 1 });
                    d += 1;
                }
            }
            Item::Int(i) => {
                let n = dims[d] as i64;
                if i >= n || i < -n {
                    return Err(index_err("index", format!("index {i} is out of bounds for dimension {d} with size {n}")));
                }
                out.push(Dim::Drop { index: if i < 0 { (i + n) as usize } else { i as usize } });
                d += 1;
            }
            Item::Slice(s) => {
                let ind = s.indices(dims[d] as isize)?;
                if ind.step <= 0 {
                    return Err(value_err("index", "step must be greater than zero"));
                }
                let len = ind.slicelength;
                let start = if len == 0 { 0 } else { ind.start as usize };
                out.push(Dim::Keep { start, len, step: ind.step as usize });
                d += 1;
            }
        }
    }
    while d < dims.len() {
        out.push(Dim::Keep { start: 0, len: dims[d], step: 1 });
        d += 1;
    }
    Ok(out)
}

fn read_basic(t: &Value, plan: &[Dim]) -> candle_core::Result<Value> {
    let mut x = t.clone();
    let mut d = 0;
    for p in plan {
        match *p {
            Dim::New => {
                x = ops::unsqueeze(&x, d)?;
                d += 1;
            }
            Dim::Drop { index } => {
                x = ops::select(&x, d, index)?;
            }
            Dim::Keep { start, len, step } => {
                // One index or none: a narrow, whatever the step.
                if step == 1 || len <= 1 {
                    if start != 0 || len != x.data.dims()[d] {
                        x = ops::narrow(&x, d, start, len)?;
                    }
                } else {
                    // The indices read: the view's backward scatters through them, and
                    // the copies below gather by them where no view can be made.
                    let idx: Vec<u32> = (0..len).map(|i| (start + i * step) as u32).collect();
                    let idx = Tensor::from_vec(idx, len, x.data.device())?;
                    if let Some(v) = ops::step_view(&x, d, start, len, step, &idx)? {
                        x = v;
                        d += 1;
                        continue;
                    }
                    if let Some(out) = crate::ops::layout::step_slice(&x.data, d, start, len, step) {
                        x = ops::index_selected(&x, &idx, d, out)?;
                        d += 1;
                        continue;
                    }
                    // Candle's index_select wants a contiguous (possibly offset) source.
                    if !x.data.is_contiguous() {
                        x = ops::force_contiguous(&x, "CloneBackward0")?;
                    }
                    x = ops::index_select(&x, &idx, d)?;
                }
                d += 1;
            }
        }
    }
    Ok(x)
}

/// `t` with the elements at row-major `offs` replaced by `src` (flattened), in the graph.
/// A repeated offset takes its last value (PyTorch's order on the CPU): each element is
/// written once, so the delta added below is right and `t`'s gradient there is 0.
pub(crate) fn put(t: &Value, offs: Vec<u32>, src: &Value) -> candle_core::Result<Value> {
    let mut last = std::collections::HashMap::with_capacity(offs.len());
    for (i, &o) in offs.iter().enumerate() {
        last.insert(o, i);
    }
    let (offs, src) = if last.len() == offs.len() {
        (offs, flat(src)?)
    } else {
        let keep: Vec<usize> = (0..offs.len()).filter(|&i| last[&offs[i]] == i).collect();
        let pos = Tensor::from_vec(keep.iter().map(|&i| i as u32).collect::<Vec<_>>(), keep.len(), t.data.device())?;
        (keep.iter().map(|&i| offs[i]).collect(), ops::index_select(&flat(src)?, &pos, 0)?)
    };
    let n = offs.len();
    let idx = Tensor::from_vec(offs, n, t.data.device())?;
    let f = flat(t)?;
    let old = ops::index_select(&f, &idx, 0)?;
    let delta = ops::sub(&src, &old)?;
    ops::reshape(&ops::index_add(&f, &idx, &delta, 0)?, t.data.shape())
}

/// The storage region (shape, strides, offset) a basic plan selects in `t`.
fn region(t: &Tensor, plan: &[Dim], strides: &[usize], offset: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let _ = t;
    let (mut shape, mut st, mut off) = (Vec::new(), Vec::new(), offset);
    let mut d = 0;
    for p in plan {
        match *p {
            Dim::New => {
                shape.push(1);
                st.push(0);
            }
            Dim::Drop { index } => {
                off += index * strides[d];
                d += 1;
            }
            Dim::Keep { start, len, step } => {
                off += start * strides[d];
                shape.push(len);
                st.push(strides[d] * step);
                d += 1;
            }
        }
    }
    (shape, st, off)
}

/// Write the elements of `src` (row-major, contiguous, `dst`'s dtype) into the storage
/// of the CPU tensor `dst` at its layout, outside the autograd graph and the version
/// counters (the caller keeps those).
pub(crate) fn write_region(dst: &Tensor, src: &Tensor, op: &str) -> PyResult<()> {
    let offs = strided_offsets(dst.dims(), dst.stride(), dst.layout().start_offset());
    crate::bindings::errors::guard(op, || dst.inplace_op2(src, &WriteOffsets { offsets: offs }).op(op))
}

/// Copy a contiguous source into given storage offsets of the destination.
struct WriteOffsets {
    offsets: Vec<usize>,
}

macro_rules! write_variants {
    ($dst:expr, $src:expr, $sl:expr, $offs:expr, $($v:ident),*) => {
        match ($dst, $src) {
            $( (CpuStorage::$v(d), CpuStorage::$v(s)) => {
                let s = &s[$sl.start_offset()..];
                for (i, &o) in $offs.iter().enumerate() { d[o] = s[i]; }
                Ok(())
            } )*
            _ => candle_core::bail!("index_put: source and destination dtypes differ"),
        }
    };
}

/// Copy a contiguous source over `len` contiguous destination elements from `start`.
struct WriteRange {
    start: usize,
    len: usize,
}

macro_rules! copy_variants {
    ($dst:expr, $src:expr, $sl:expr, $start:expr, $len:expr, $($v:ident),*) => {
        match ($dst, $src) {
            $( (CpuStorage::$v(d), CpuStorage::$v(s)) => {
                let s = &s[$sl.start_offset()..$sl.start_offset() + $len];
                crate::ops::parallel::par_copy(&mut d[$start..$start + $len], s);
                Ok(())
            } )*
            _ => candle_core::bail!("copy: source and destination dtypes differ"),
        }
    };
}

impl InplaceOp2 for WriteRange {
    fn name(&self) -> &'static str {
        "copy"
    }
    fn cpu_fwd(&self, dst: &mut CpuStorage, _dst_l: &Layout, src: &CpuStorage, sl: &Layout) -> candle_core::Result<()> {
        copy_variants!(dst, src, sl, self.start, self.len, U8, U32, I16, I32, I64, BF16, F16, F32, F64)
    }
}

impl InplaceOp2 for WriteOffsets {
    fn name(&self) -> &'static str {
        "index_put"
    }
    fn cpu_fwd(&self, dst: &mut CpuStorage, _dst_l: &Layout, src: &CpuStorage, sl: &Layout) -> candle_core::Result<()> {
        if !sl.is_contiguous() {
            candle_core::bail!("index_put: source must be contiguous");
        }
        write_variants!(dst, src, sl, self.offsets, U8, U32, I16, I32, I64, BF16, F16, F32, F64)
    }
}

/// Write `src` (already broadcast to the region's shape and cast) into the
/// region of `dst` at storage `offs`, or replace `dst` functionally when it is
/// in the autograd graph or not on the CPU.
fn write(dst: &PyTensor, src: Value, storage_offs: Vec<usize>, logical_offs: impl FnOnce() -> Vec<usize>, op: &str) -> PyResult<()> {
    let tv = dst.v();
    let t = tv.data.clone();
    let tracked = tv.requires_grad() && grad_enabled();
    if tracked && tv.is_leaf() {
        return Err(runtime_err(op, LEAF_INPLACE));
    }
    if tracked || src.requires_grad() && grad_enabled() || !t.device().is_cpu() {
        crate::bindings::bitcast::check_graph_write(&tv.version, op)?;
        let offs: Vec<u32> = logical_offs().into_iter().map(|o| o as u32).collect();
        let new = put(&tv, offs, &src).op(op)?;
        dst.replace_v(new);
        return dst.write_back(op);
    }
    let src = src.data.dense_copy().op(op)?;
    crate::bindings::errors::guard(op, || t.inplace_op2(&src, &WriteOffsets { offsets: storage_offs }).op(op))?;
    tv.bump_version();
    crate::bindings::bitcast::after_write(&tv.version)
}

/// PyTorch's refusal of an in-place change to a leaf that requires grad.
pub(crate) const LEAF_INPLACE: &str = "a leaf Variable that requires grad is being used in an in-place operation.";

/// `value` as a tensor of `dst`'s dtype broadcast to `shape`.
fn value_tensor(dst: &PyTensor, value: &Bound<'_, PyAny>, shape: &[usize], op: &str) -> PyResult<Value> {
    let dt = dst.dt();
    let dev = dst.t().device().clone();
    let v = match extract_scalar(value) {
        Some(s) => Value::plain(s.tensor(dt, &dev)?),
        None => match value.cast::<PyTensor>() {
            Ok(t) => {
                let (tv, vd) = t.get().v_dt();
                ops::to_device(&cast_v(&tv, vd, dt)?, &dev).op(op)?
            }
            Err(_) => {
                let (v, vd) = crate::bindings::creation::as_tensor_arg(value, op)?;
                Value::plain(cast(&v, vd, dt)?.to_device(&dev).op(op)?)
            }
        },
    };
    // A source may carry extra leading 1-dims, as PyTorch allows.
    let mut v = v;
    while v.data.rank() > shape.len() && v.data.dims()[0] == 1 {
        v = ops::squeeze(&v, 0).op(op)?;
    }
    if v.data.shape().broadcast_shape_binary_op(&Shape::from(shape), "setitem").map(|s| s.dims() != shape).unwrap_or(true) {
        return Err(shape_err(
            op,
            format!("shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {shape:?}", v.data.dims()),
        ));
    }
    ops::broadcast_as(&v, &Shape::from(shape)).op(op)
}

/// Overwrite all of `dst` with `src` (same shape and dtype): the in-place ops' common end.
pub fn overwrite(dst: &PyTensor, src: Value, op: &str) -> PyResult<()> {
    let tv = dst.v();
    let t = tv.data.clone();
    let (dst_tracked, src_tracked) = (tv.requires_grad() && grad_enabled(), src.requires_grad() && grad_enabled());
    if dst_tracked && tv.is_leaf() {
        return Err(runtime_err(op, LEAF_INPLACE));
    }
    // Fast path (optimizer updates, zero_, fill_): a contiguous CPU tensor outside
    // the graph is overwritten with one memcpy instead of per-element offsets.
    let same = src.data.dims() == t.dims() && src.data.dtype() == t.dtype();
    if !dst_tracked && !src_tracked && t.device().is_cpu() && t.is_contiguous() && same {
        // A copy only where needed: the write locks the destination's storage while it
        // reads the source's, so one storage on both sides needs the source copied.
        let src = if src.data.is_contiguous() && crate::ops::layout::storage_key(&src.data) != crate::ops::layout::storage_key(&t) {
            src.data
        } else {
            src.data.dense_copy().op(op)?
        };
        let start = t.layout().start_offset();
        let n = t.elem_count();
        crate::bindings::errors::detach_if(n, || t.inplace_op2(&src, &WriteRange { start, len: n })).op(op)?;
        tv.bump_version();
        return crate::bindings::bitcast::after_write(&tv.version);
    }
    // In the graph, overwriting every element is a replacement: the new value is `src`
    // with its own history, and the old value gets no gradient (as torch's `copy_`).
    if (dst_tracked || src_tracked) && same {
        crate::bindings::bitcast::check_graph_write(&tv.version, op)?;
        dst.replace_v(src);
        return dst.write_back(op);
    }
    let (strides, start) = (t.stride().to_vec(), t.layout().start_offset());
    let dims = t.dims().to_vec();
    let storage_offs = if dst_tracked || !t.device().is_cpu() { Vec::new() } else { strided_offsets(&dims, &strides, start) };
    let n = t.elem_count();
    write(dst, src, storage_offs, || (0..n).collect(), op)
}

#[pymethods]
impl PyTensor {
    fn __getitem__(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let v = me.v();
        if let Some(items) = parse_basic(key)? {
            let plan = resolve(items, v.data.dims())?;
            let out = crate::bindings::errors::detach_op(py, "index", || read_basic(&v, &plan))?;
            let tracked = out.requires_grad();
            let view = PyTensor::wrap_v(out, me.is_bool);
            if tracked {
                // A view in the graph: an in-place write into it must reach this tensor.
                let dims = v.data.dims().to_vec();
                view.set_view_of(me, region(&v.data, &plan, &row_major(&dims), 0));
            }
            return Ok(Py::new(py, view)?.into_any());
        }
        // Advanced key: NumPy's rules give the row-major offsets; a differentiable gather reads them.
        let (offs, shape) = advanced_selection(key, v.data.dims())?;
        let out = crate::bindings::errors::detach_op(py, "index", || {
            let idx = Tensor::from_vec(offs.iter().map(|&o| o as i64).collect::<Vec<_>>(), offs.len(), v.data.device())?;
            let src = if v.data.is_contiguous() { v.clone() } else { ops::force_contiguous(&v, "CloneBackward0")? };
            ops::reshape(&ops::index_select(&flat(&src)?, &idx, 0)?, &Shape::from(shape))
        })?;
        Ok(Py::new(py, PyTensor::wrap_v(out, me.is_bool))?.into_any())
    }

    fn __setitem__(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let me = slf.get();
        let t = me.t();
        let (strides, start) = (t.stride().to_vec(), t.layout().start_offset());
        let dims = t.dims().to_vec();
        if let Some(items) = parse_basic(key)? {
            let plan = resolve(items, &dims)?;
            let (shape, st, off) = region(&t, &plan, &strides, start);
            let src = value_tensor(me, value, &shape, "setitem")?;
            let storage = strided_offsets(&shape, &st, off);
            let rm = row_major(&dims);
            return write(
                me,
                src,
                storage,
                || {
                    let (s2, st2, o2) = region(&t, &plan, &rm, 0);
                    strided_offsets(&s2, &st2, o2)
                },
                "setitem",
            );
        }
        // Advanced key: NumPy's rules give the logical (row-major) offsets and the region's shape.
        let (logical, shape) = advanced_selection(key, &dims)?;
        let src = value_tensor(me, value, &shape, "setitem")?;
        let rm = row_major(&dims);
        let storage: Vec<usize> = logical
            .iter()
            .map(|&l| {
                let mut rem = l;
                let mut o = start;
                for k in 0..dims.len() {
                    let i = rem / rm[k];
                    rem %= rm[k];
                    o += i * strides[k];
                }
                o
            })
            .collect();
        write(me, src, storage, || logical, "setitem")
    }

    /// `del x[key]` is not a tensor operation (PyTorch raises TypeError too).
    fn __delitem__(&self, _key: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(type_err("delitem", "Tensor does not support item deletion"))
    }

    /// Candle's `slice_assign`: a new tensor with `ranges` replaced by `src`; `self` unchanged.
    fn slice_assign(&self, ranges: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let py = ranges.py();
        let t = self.t();
        let list: Vec<Bound<'_, PyAny>> = ranges
            .try_iter()
            .map_err(|_| type_err("slice_assign", "ranges must be a list of slices or ranges"))?
            .collect::<PyResult<_>>()?;
        if list.len() > t.rank() {
            return Err(index_err("slice_assign", format!("got {} ranges for a tensor of dimension {}", list.len(), t.rank())));
        }
        let mut items = Vec::new();
        for r in list {
            if let Ok(s) = r.cast::<PySlice>() {
                items.push(Item::Slice(s.clone()));
            } else if r.get_type().name()? == "range" {
                let (a, b, c): (isize, isize, isize) =
                    (r.getattr("start")?.extract()?, r.getattr("stop")?.extract()?, r.getattr("step")?.extract()?);
                items.push(Item::Slice(PySlice::new(py, a, b, c)));
            } else {
                return Err(type_err("slice_assign", "ranges must hold slices or ranges"));
            }
        }
        let dims = t.dims().to_vec();
        let plan = resolve(items, &dims)?;
        let rm = row_major(&dims);
        let (shape, st, off) = region(&t, &plan, &rm, 0);
        let (s, sd) = match src.cast::<PyTensor>() {
            Ok(p) => p.get().v_dt(),
            Err(_) => {
                let (s, sd) = crate::bindings::creation::as_tensor_arg(src, "slice_assign")?;
                (Value::plain(s), sd)
            }
        };
        if s.data.dims() != shape.as_slice() {
            return Err(shape_err("slice_assign", format!("src has shape {:?} but the region has shape {shape:?}", s.data.dims())));
        }
        let s = cast_v(&s, sd, self.dt())?;
        let logical: Vec<u32> = strided_offsets(&shape, &st, off).into_iter().map(|o| o as u32).collect();
        let tv = self.v();
        let tv = if tv.data.is_contiguous() { tv } else { ops::force_contiguous(&tv, "CloneBackward0").op("slice_assign")? };
        let new = crate::bindings::errors::detach_op(py, "slice_assign", || put(&tv, logical, &s))?;
        Ok(PyTensor::wrap_v(new, self.is_bool))
    }

    fn copy_(slf: &Bound<'_, Self>, src: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        let dims = me.t().dims().to_vec();
        let v = value_tensor(me, src, &dims, "copy_")?;
        overwrite(me, v, "copy_")?;
        Ok(slf.clone().unbind())
    }
    fn fill_(slf: &Bound<'_, Self>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        if let Some(s) = crate::bindings::args::extract_scalar(value) {
            if crate::bindings::arith::write_direct(slf.get(), "fill_", |t| crate::ops::assign::fill_assign(t, s.f64()))? {
                return Ok(slf.clone().unbind());
            }
        }
        Self::copy_(slf, value)
    }
    fn zero_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        if crate::bindings::arith::write_direct(me, "zero_", |t| crate::ops::assign::fill_assign(t, 0.0))? {
            return Ok(slf.clone().unbind());
        }
        let z = me.t().zeros_like().op("zero_")?;
        overwrite(me, Value::plain(z), "zero_")?;
        Ok(slf.clone().unbind())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = PyList::empty(m.py());
    Ok(())
}
