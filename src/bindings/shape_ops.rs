//! Views and re-arrangements: reshape, transpose, permute, squeeze, expand,
//! narrow, split, flip, repeat, tril/triu (selection by index is `select.rs`).
use crate::autograd::{ops, Value};
use crate::bindings::args::norm_dim;
use crate::bindings::creation::shape_args;
use crate::bindings::errors::{index_err, shape_err, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use candle_core::{Shape, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// Resolve a requested shape with at most one -1 against `numel`.
pub fn infer_shape(req: &[i64], numel: usize, from: &[usize], op: &str) -> PyResult<Vec<usize>> {
    let mut hole = None;
    let mut known: usize = 1;
    for (i, &d) in req.iter().enumerate() {
        if d == -1 {
            if hole.is_some() {
                return Err(value_err(op, "only one dimension can be inferred"));
            }
            hole = Some(i);
        } else if d < 0 {
            return Err(value_err(op, format!("invalid shape dimension {d}")));
        } else {
            known = known.saturating_mul(d as usize);
        }
    }
    let mut out: Vec<usize> = req.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(h) = hole {
        if known == 0 || !numel.is_multiple_of(known) {
            return Err(shape_err(op, format!("shape {req:?} is invalid for input of size {numel} (shape {from:?})")));
        }
        out[h] = numel / known;
    } else if known != numel {
        return Err(shape_err(op, format!("shape {req:?} is invalid for input of size {numel} (shape {from:?})")));
    }
    Ok(out)
}

/// PyTorch's rule for `view`: the strides that lay `new` over a tensor of shape `old`
/// with strides `stride` without moving data, or `None` when some dimension of `new`
/// would span two chunks of `old` that are not contiguous with each other. Dimensions
/// are grouped into chunks that are contiguous among themselves; each chunk must be
/// matched by whole dimensions of `new`.
pub(crate) fn view_strides(old: &[usize], stride: &[usize], new: &[usize]) -> Option<Vec<usize>> {
    let numel: usize = old.iter().product();
    let mut out = vec![0usize; new.len()];
    if old.is_empty() {
        return Some(vec![1; new.len()]);
    }
    if numel == 0 {
        // Any view of an empty tensor is valid: contiguous strides.
        let mut acc = 1;
        for (o, &d) in out.iter_mut().zip(new).rev() {
            *o = acc;
            acc *= d.max(1);
        }
        return Some(out);
    }
    let mut view_d = new.len() as isize - 1;
    let mut chunk_base = *stride.last()?;
    let (mut tensor_numel, mut view_numel) = (1usize, 1usize);
    for td in (0..old.len()).rev() {
        tensor_numel *= old[td];
        let chunk_ends = td == 0 || (old[td - 1] != 1 && stride[td - 1] != tensor_numel * chunk_base);
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || new[view_d as usize] == 1) {
                out[view_d as usize] = view_numel * chunk_base;
                view_numel *= new[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if td > 0 {
                chunk_base = stride[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    (view_d == -1).then_some(out)
}

fn no_zero_d(t: &Tensor, op: &str) -> PyResult<()> {
    if t.rank() == 0 {
        return Err(shape_err(op, format!("{op} expects at least a 1-dimensional tensor")));
    }
    Ok(())
}

/// A result of `me`'s shape or selection op, linked to `me` when it is a view in the
/// graph (`bindings::views`).
pub(crate) fn wrap_like(me: &PyTensor, v: Value) -> PyTensor {
    let out = PyTensor::wrap_v(v, me.is_bool);
    out.link_view_of(me);
    out
}

/// `v` reshaped to `dims` (a view where the layout allows, as `view`/`reshape`; its own
/// shape gives a new view node, as in PyTorch).
fn to_shape(v: &Value, dims: Vec<usize>) -> candle_core::Result<Value> {
    if v.data.dims() == dims.as_slice() {
        return ops::view_same_shape(v);
    }
    if !v.data.is_contiguous() {
        if let Some(view) = ops::view_split(v, &dims)? {
            return Ok(view);
        }
    }
    ops::reshape(v, &Shape::from(dims))
}

#[pymethods]
impl PyTensor {
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let req = shape_args(shape, "reshape")?;
        let s = infer_shape(&req, t.elem_count(), t.dims(), "reshape")?;
        let out = crate::bindings::errors::detach_op(py, "reshape", || to_shape(&v, s))?;
        Ok(wrap_like(self, out))
    }
    /// `view` reshapes where PyTorch's `view` can: when the new shape can be laid over
    /// the existing strides (`view_strides`); otherwise it raises as PyTorch does.
    /// `view(dtype)` reads the bytes as another dtype (`bindings::bitcast`).
    #[pyo3(signature = (*shape))]
    fn view(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        if shape.len() == 1 {
            let a = shape.get_item(0)?;
            if let Ok(d) = a.cast::<crate::bindings::dtype::PyDType>() {
                let to = d.get().dt;
                return crate::bindings::errors::detach(py, "view", || crate::bindings::bitcast::view_dtype(self, to));
            }
        }
        let t = self.t();
        let req = shape_args(shape, "view")?;
        let s = infer_shape(&req, t.elem_count(), t.dims(), "view")?;
        if view_strides(t.dims(), t.stride(), &s).is_none() {
            return Err(crate::bindings::errors::runtime_err(
                "view",
                format!(
                    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead. (shape {:?}, strides {:?}, requested {s:?})",
                    t.dims(),
                    t.stride()
                ),
            ));
        }
        self.reshape(py, shape)
    }
    fn reshape_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let dims = PyTuple::new(py, other.get().t().dims())?;
        self.reshape(py, &dims)
    }
    fn view_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let dims = PyTuple::new(py, other.get().t().dims())?;
        self.view(py, &dims)
    }

    #[pyo3(name = "t")]
    fn t_py(&self) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        match t.rank() {
            0 | 1 => Ok(wrap_like(self, v)),
            2 => Ok(wrap_like(self, ops::transpose(&v, 0, 1).op("t")?)),
            r => Err(shape_err("t", format!("t() expects a tensor with <= 2 dimensions, but self is {r}D"))),
        }
    }
    #[getter(T)]
    fn big_t(&self) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let dims: Vec<usize> = (0..t.rank()).rev().collect();
        Ok(wrap_like(self, ops::permute(&v, &dims).op("T")?))
    }
    #[getter(mT)]
    fn m_t(&self) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        if t.rank() < 2 {
            return Err(shape_err("mT", "tensor.mT is only supported on matrices or batches of matrices"));
        }
        Ok(wrap_like(self, ops::transpose(&v, t.rank() - 2, t.rank() - 1).op("mT")?))
    }
    fn transpose(&self, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        if t.rank() == 0 {
            return Ok(wrap_like(self, v));
        }
        let a = norm_dim(dim0, t.rank(), "transpose")?;
        let b = norm_dim(dim1, t.rank(), "transpose")?;
        Ok(wrap_like(self, ops::transpose(&v, a, b).op("transpose")?))
    }
    fn swapaxes(&self, axis0: i64, axis1: i64) -> PyResult<PyTensor> {
        self.transpose(axis0, axis1)
    }
    fn swapdims(&self, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        self.transpose(dim0, dim1)
    }
    // The in-place view ops: the tensor itself becomes the view (same storage).
    fn t_(slf: &Bound<'_, Self>) -> PyResult<Py<PyTensor>> {
        let out = slf.get().t_py()?;
        become_view(slf, out, "t_")
    }
    fn transpose_(slf: &Bound<'_, Self>, dim0: i64, dim1: i64) -> PyResult<Py<PyTensor>> {
        let out = slf.get().transpose(dim0, dim1)?;
        become_view(slf, out, "transpose_")
    }
    fn swapaxes_(slf: &Bound<'_, Self>, axis0: i64, axis1: i64) -> PyResult<Py<PyTensor>> {
        let out = slf.get().transpose(axis0, axis1)?;
        become_view(slf, out, "swapaxes_")
    }
    fn swapdims_(slf: &Bound<'_, Self>, dim0: i64, dim1: i64) -> PyResult<Py<PyTensor>> {
        let out = slf.get().transpose(dim0, dim1)?;
        become_view(slf, out, "swapdims_")
    }
    #[pyo3(signature = (dim=None))]
    fn squeeze_(slf: &Bound<'_, Self>, dim: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
        let out = slf.get().squeeze(dim)?;
        become_view(slf, out, "squeeze_")
    }
    fn unsqueeze_(slf: &Bound<'_, Self>, dim: i64) -> PyResult<Py<PyTensor>> {
        let out = slf.get().unsqueeze(dim)?;
        become_view(slf, out, "unsqueeze_")
    }
    #[pyo3(signature = (*dims))]
    fn permute(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let req = shape_args(dims, "permute")?;
        if req.len() != t.rank() {
            return Err(shape_err(
                "permute",
                format!("number of dims don't match in permute: got {} for a tensor of shape {:?}", req.len(), t.dims()),
            ));
        }
        let mut seen = vec![false; t.rank()];
        let mut d = Vec::new();
        for r in req {
            let n = norm_dim(r, t.rank(), "permute")?;
            if seen[n] {
                return Err(value_err("permute", "repeated dim in permute"));
            }
            seen[n] = true;
            d.push(n);
        }
        if t.rank() == 0 {
            return Ok(wrap_like(self, v));
        }
        Ok(wrap_like(self, ops::permute(&v, &d).op("permute")?))
    }
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let dims = crate::bindings::reduce::reduce_dims(dim, t.rank(), "squeeze")?;
        let dims: Vec<usize> = match dims {
            None => (0..t.rank()).filter(|&i| t.dims()[i] == 1).collect(),
            Some(d) => d.into_iter().filter(|&i| t.rank() > 0 && t.dims()[i] == 1).collect(),
        };
        let mut out = v;
        for &d in dims.iter().rev() {
            out = ops::squeeze(&out, d).op("squeeze")?;
        }
        Ok(wrap_like(self, out))
    }
    fn unsqueeze(&self, dim: i64) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let d = norm_dim(dim, t.rank() + 1, "unsqueeze")?;
        Ok(wrap_like(self, ops::unsqueeze(&v, d).op("unsqueeze")?))
    }
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: i64, end_dim: i64) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        if t.rank() == 0 {
            return Ok(wrap_like(self, to_shape(&v, vec![1]).op("flatten")?));
        }
        let a = norm_dim(start_dim, t.rank(), "flatten")?;
        let b = norm_dim(end_dim, t.rank(), "flatten")?;
        if a > b {
            return Err(value_err("flatten", "start_dim cannot come after end_dim"));
        }
        let mut shape: Vec<usize> = t.dims()[..a].to_vec();
        shape.push(t.dims()[a..=b].iter().product());
        shape.extend_from_slice(&t.dims()[b + 1..]);
        Ok(wrap_like(self, to_shape(&v, shape).op("flatten")?))
    }
    fn unflatten(&self, dim: i64, sizes: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let d = norm_dim(dim, t.rank(), "unflatten")?;
        let req: Vec<i64> = sizes.extract().map_err(|_| type_err("unflatten", "sizes must be a sequence of ints"))?;
        let inner = infer_shape(&req, t.dims()[d], t.dims(), "unflatten")?;
        let mut shape = t.dims()[..d].to_vec();
        shape.extend(inner);
        shape.extend_from_slice(&t.dims()[d + 1..]);
        Ok(wrap_like(self, to_shape(&v, shape).op("unflatten")?))
    }
    fn ravel(&self) -> PyResult<PyTensor> {
        self.flatten(0, -1)
    }
    #[pyo3(signature = (*sizes))]
    fn expand(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let req = shape_args(sizes, "expand")?;
        if req.len() < t.rank() {
            return Err(shape_err(
                "expand",
                format!(
                    "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
                    req.len(),
                    t.rank()
                ),
            ));
        }
        let off = req.len() - t.rank();
        let mut shape = Vec::with_capacity(req.len());
        for (i, &r) in req.iter().enumerate() {
            let cur = if i >= off { Some(t.dims()[i - off]) } else { None };
            let s = match (r, cur) {
                (-1, Some(c)) => c,
                (-1, None) => return Err(value_err("expand", "-1 is not allowed in a leading, non-existing dimension")),
                (r, _) if r < 0 => return Err(value_err("expand", format!("invalid size {r}"))),
                (r, Some(c)) if c != 1 && c as i64 != r => {
                    return Err(shape_err("expand", format!("the expanded size of the tensor ({r}) must match the existing size ({c}) at non-singleton dimension {i}. Target sizes: {req:?}. Tensor sizes: {:?}", t.dims())))
                }
                (r, _) => r as usize,
            };
            shape.push(s);
        }
        Ok(wrap_like(self, ops::broadcast_as(&v, &Shape::from(shape)).op("expand")?))
    }
    fn expand_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        self.expand(&PyTuple::new(py, other.get().t().dims())?)
    }
    fn broadcast_to(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.expand(&PyTuple::new(py, [size])?)
    }
    fn narrow(&self, dim: i64, start: i64, length: i64) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let d = norm_dim(dim, t.rank(), "narrow")?;
        let size = t.dims()[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || length < 0 || s + length > size {
            return Err(index_err("narrow", format!("start ({start}) + length ({length}) exceeds dimension size ({size})")));
        }
        Ok(wrap_like(self, ops::narrow(&v, d, s as usize, length as usize).op("narrow")?))
    }
    #[pyo3(signature = (chunks, dim=0))]
    fn chunk(&self, py: Python<'_>, chunks: i64, dim: i64) -> PyResult<Py<PyTuple>> {
        if chunks <= 0 {
            return Err(value_err("chunk", format!("chunk expects `chunks` to be greater than 0, got: {chunks}")));
        }
        let v = self.v();
        let t = v.data.clone();
        no_zero_d(&t, "chunk")?;
        let d = norm_dim(dim, t.rank(), "chunk")?;
        let size = t.dims()[d];
        let step = size.div_ceil(chunks as usize).max(if size == 0 { 0 } else { 1 });
        let sizes: Vec<usize> = if step == 0 { vec![0] } else { (0..size).step_by(step).map(|s| step.min(size - s)).collect() };
        self.split_sizes(py, &sizes, d, "chunk")
    }
    #[pyo3(signature = (split_size_or_sections, dim=0))]
    fn split(&self, py: Python<'_>, split_size_or_sections: &Bound<'_, PyAny>, dim: i64) -> PyResult<Py<PyTuple>> {
        let v = self.v();
        let t = v.data.clone();
        no_zero_d(&t, "split")?;
        let d = norm_dim(dim, t.rank(), "split")?;
        let size = t.dims()[d];
        let sizes: Vec<usize> = if let Ok(n) = split_size_or_sections.extract::<i64>() {
            if n <= 0 {
                return Err(value_err("split", format!("split_size must be positive, got {n}")));
            }
            let n = n as usize;
            if size == 0 {
                vec![0]
            } else {
                (0..size).step_by(n).map(|s| n.min(size - s)).collect()
            }
        } else {
            let v: Vec<i64> = split_size_or_sections
                .extract()
                .map_err(|_| type_err("split", "split_size_or_sections must be an int or a list of ints"))?;
            if v.iter().any(|&x| x < 0) || v.iter().sum::<i64>() != size as i64 {
                return Err(value_err("split", format!("split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), but got split_sizes={v:?}")));
            }
            v.into_iter().map(|x| x as usize).collect()
        };
        self.split_sizes(py, &sizes, d, "split")
    }
    #[pyo3(signature = (dim=0))]
    fn unbind(&self, py: Python<'_>, dim: i64) -> PyResult<Py<PyTuple>> {
        let v = self.v();
        let t = v.data.clone();
        no_zero_d(&t, "unbind")?;
        let d = norm_dim(dim, t.rank(), "unbind")?;
        let mut out = Vec::new();
        // One node for all the pieces: its backward stacks their gradients once.
        for piece in crate::autograd::indexing::split(&v, d, &vec![1; t.dims()[d]], true, "UnbindBackward0").op("unbind")? {
            out.push(Py::new(py, wrap_like(self, piece))?);
        }
        Ok(PyTuple::new(py, out)?.unbind())
    }

    #[pyo3(signature = (*dims))]
    fn flip(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let req = shape_args(dims, "flip")?;
        let d: Vec<usize> = req.iter().map(|&x| norm_dim(x, t.rank(), "flip")).collect::<PyResult<_>>()?;
        if let Some(k) = d.iter().enumerate().find_map(|(i, k)| d[..i].contains(k).then_some(k)) {
            return Err(crate::bindings::errors::runtime_err("flip", format!("dim {k} appears multiple times in the list of dims")));
        }
        Ok(wrap_like(self, crate::autograd::indexing::flip(&v, &d).op("flip")?))
    }
    #[pyo3(signature = (*sizes))]
    fn repeat(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let req = shape_args(sizes, "repeat")?;
        if req.len() < t.rank() {
            return Err(shape_err("repeat", "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
        }
        let reps = crate::bindings::args::nonneg_shape(&req, "repeat")?;
        let mut xv = v.clone();
        while xv.data.rank() < reps.len() {
            xv = ops::unsqueeze(&xv, 0).op("repeat")?;
        }
        let x = xv.data.clone();
        // Check the result size first: Candle would try to build it piece by piece.
        let mut out_dims = Vec::with_capacity(reps.len());
        for (&d, &r) in x.dims().iter().zip(&reps) {
            out_dims
                .push(d.checked_mul(r).ok_or_else(|| value_err("repeat", format!("result size overflows: {:?} x {reps:?}", x.dims())))?);
        }
        let total = out_dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
        match total {
            Some(0) => return Ok(wrap_like(self, Value::plain(Tensor::zeros(out_dims, x.dtype(), x.device()).op("repeat")?))),
            Some(n) => crate::bindings::args::check_alloc(n, x.dtype().size_in_bytes(), "repeat")?,
            None => return Err(value_err("repeat", format!("result shape {out_dims:?} is too large"))),
        }
        Ok(wrap_like(self, crate::autograd::indexing::repeat(&xv, &reps).op("repeat")?))
    }
    #[pyo3(signature = (diagonal=0))]
    fn tril(&self, diagonal: i64) -> PyResult<PyTensor> {
        self.tri(diagonal, true)
    }
    #[pyo3(signature = (diagonal=0))]
    fn triu(&self, diagonal: i64) -> PyResult<PyTensor> {
        self.tri(diagonal, false)
    }
}

impl PyTensor {
    fn split_sizes(&self, py: Python<'_>, sizes: &[usize], d: usize, op: &str) -> PyResult<Py<PyTuple>> {
        let v = self.v();
        let mut out = Vec::new();
        for piece in crate::autograd::indexing::split(&v, d, sizes, false, "SplitBackward0").op(op)? {
            out.push(Py::new(py, wrap_like(self, piece))?);
        }
        Ok(PyTuple::new(py, out)?.unbind())
    }

    fn tri(&self, k: i64, lower: bool) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        let name = if lower { "tril" } else { "triu" };
        if t.rank() < 2 {
            return Err(shape_err(name, format!("input tensor must have at least 2 dimensions, got {:?}", t.dims())));
        }
        if !(crate::autograd::grad_enabled() && v.requires_grad()) {
            // Outside the graph: each row a copy and a fill (`ops::layout::triangle`).
            if let Some(out) = crate::bindings::errors::detach_if(t.elem_count(), || crate::ops::layout::triangle(&t, k, lower)).op(name)? {
                return Ok(wrap_like(self, Value::plain(out)));
            }
        }
        let (n, m) = (t.dims()[t.rank() - 2], t.dims()[t.rank() - 1]);
        let mut mask = vec![0u8; n * m];
        for i in 0..n {
            for j in 0..m {
                let keep = if lower { (j as i64) - (i as i64) <= k } else { (j as i64) - (i as i64) >= k };
                mask[i * m + j] = keep as u8;
            }
        }
        let mask = Tensor::from_vec(mask, (n, m), t.device()).op(name)?;
        let z = Value::plain(t.zeros_like().op(name)?);
        let out = crate::bindings::unary::where_(&mask, &v, &z, name)?;
        Ok(wrap_like(self, out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = PyList::empty(m.py());
    Ok(())
}

/// Make `slf` the view `out` of its own value (`t_`, `transpose_`, `squeeze_`, ...):
/// the storage stays shared with every other view of it, the version counter is kept
/// and bumped (as PyTorch's in-place ops), and in the graph the tensor's history
/// becomes the view's. As in PyTorch, a leaf that requires grad refuses.
fn become_view(slf: &Bound<'_, PyTensor>, out: PyTensor, op: &str) -> PyResult<Py<PyTensor>> {
    let me = slf.get();
    let cur = me.v();
    if cur.requires_grad() && crate::autograd::grad_enabled() {
        if cur.is_leaf() {
            return Err(crate::bindings::errors::runtime_err(op, crate::bindings::indexing::LEAF_INPLACE));
        }
        if me.is_graph_view() {
            // Its link to the base records the old shape; the write-back and re-derive
            // paths would read the base through it.
            return Err(crate::bindings::errors::runtime_err(
                op,
                format!("changing the shape of a view of another tensor in place is not supported in the autograd graph; use the out-of-place {}()", op.trim_end_matches('_')),
            ));
        }
        me.replace_v(out.v());
    } else {
        // Outside the graph (or under no_grad): new data, the same autograd side (a
        // leaf that requires grad stays one).
        me.replace(out.t());
    }
    Ok(slf.clone().unbind())
}
