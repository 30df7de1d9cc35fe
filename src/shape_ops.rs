//! Views and re-arrangements: reshape, transpose, permute, squeeze, expand,
//! narrow, split, index_select, gather, scatter, flip, repeat.
use crate::dtype::DT;
use crate::errors::{dtype_err, index_err, shape_err, type_err, value_err, OpResult};
use crate::tensor::{cast, norm_dim, shape_args, PyTensor};
use candle_core::{DType, Tensor};
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
        if known == 0 || numel % known != 0 {
            return Err(shape_err(op, format!("shape {req:?} is invalid for input of size {numel} (shape {from:?})")));
        }
        out[h] = numel / known;
    } else if known != numel {
        return Err(shape_err(op, format!("shape {req:?} is invalid for input of size {numel} (shape {from:?})")));
    }
    Ok(out)
}

fn no_zero_d(t: &Tensor, op: &str) -> PyResult<()> {
    if t.rank() == 0 {
        return Err(shape_err(op, format!("{op} expects at least a 1-dimensional tensor")));
    }
    Ok(())
}

fn wrap_like(me: &PyTensor, t: Tensor) -> PyTensor {
    PyTensor::wrap(t, me.is_bool)
}

/// A 0-d `me` and its index (0-d or 1-d) as 1-d tensors, plus the index's own dims.
fn as_1d<'py>(py: Python<'py>, me: &PyTensor, index: &Bound<'py, PyTensor>, op: &str) -> PyResult<(Bound<'py, PyTensor>, Bound<'py, PyTensor>, Vec<usize>)> {
    let it = index.get().t();
    if it.rank() > 1 {
        return Err(shape_err(op, format!("Index tensor must have the same number of dimensions as input tensor: {:?} vs []", it.dims())));
    }
    let one = Bound::new(py, wrap_like(me, me.t().reshape(1).op(op)?))?;
    let i1 = Bound::new(py, PyTensor::wrap_dt(it.flatten_all().op(op)?, index.get().dt()))?;
    Ok((one, i1, it.dims().to_vec()))
}

fn int_index(idx: &PyTensor, op: &str) -> PyResult<Tensor> {
    let dt = idx.dt();
    if dt.is_float() || dt == DT::Bool {
        return Err(dtype_err(op, format!("index must be an integer tensor, got {}", dt.name())));
    }
    Ok(idx.t())
}

/// Candle indexes with unsigned ints: check bounds, wrap negatives, cast to u32.
fn checked_index(idx: &Tensor, size: usize, op: &str) -> PyResult<Tensor> {
    let i64s = idx.to_dtype(DType::I64).op(op)?;
    if i64s.elem_count() == 0 {
        return i64s.to_dtype(DType::U32).op(op);
    }
    let flat = i64s.flatten_all().op(op)?;
    let lo = flat.min(0).and_then(|v| v.to_scalar::<i64>()).op(op)?;
    let hi = flat.max(0).and_then(|v| v.to_scalar::<i64>()).op(op)?;
    if hi >= size as i64 || lo < -(size as i64) {
        let bad = if hi >= size as i64 { hi } else { lo };
        return Err(index_err(op, format!("index {bad} is out of bounds for dimension with size {size}")));
    }
    let fixed = if lo < 0 {
        let neg = i64s.lt(0i64 as f64).and_then(|m| m.to_dtype(DType::I64)).op(op)?;
        i64s.add(&neg.affine(size as f64, 0.0).op(op)?).op(op)?
    } else {
        i64s
    };
    fixed.to_dtype(DType::U32).op(op)
}

/// `index_select` as one pass of row copies, for contiguous CPU data that records
/// no graph (inference, `no_grad`): Candle's op plus the bounds check costs several
/// passes over the index and a per-element copy. `None` where it does not apply.
fn gather_untracked(py: Python<'_>, t: &Tensor, idx: &Tensor, d: usize) -> PyResult<Option<Tensor>> {
    const OP: &str = "index_select";
    let tracked = t.track_op() && crate::autograd::grad_enabled();
    if tracked || !t.device().is_cpu() || !idx.device().is_cpu() || !t.is_contiguous() || idx.dtype() != DType::I64 {
        return Ok(None);
    }
    let size = t.dims()[d];
    let raw = idx.to_vec1::<i64>().op(OP)?;
    let mut rows = Vec::with_capacity(raw.len());
    for &i in &raw {
        let j = if i < 0 { i + size as i64 } else { i };
        if j < 0 || j >= size as i64 {
            return Err(index_err(OP, format!("index {i} is out of bounds for dimension with size {size}")));
        }
        rows.push(j as usize);
    }
    let outer: usize = t.dims()[..d].iter().product();
    let inner: usize = t.dims()[d + 1..].iter().product();
    let mut dims = t.dims().to_vec();
    dims[d] = rows.len();
    let (st, l) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cs) = &*st else { return Ok(None) };
    let start = l.start_offset();
    macro_rules! go {
        ($($v:ident),*) => {
            match cs {
                $(candle_core::CpuStorage::$v(src) => {
                    let src = &src[start..];
                    let out = crate::errors::detach(py, OP, || Ok(gather_rows(src, outer, size, inner, &rows)))?;
                    Tensor::from_vec(out, dims, &candle_core::Device::Cpu).op(OP)?
                })*
                _ => return Ok(None),
            }
        };
    }
    Ok(Some(go!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)))
}

/// Rows `rows` (each `inner` elements) of each of `outer` blocks of `size` rows.
fn gather_rows<T: Copy + Send + Sync>(src: &[T], outer: usize, size: usize, inner: usize, rows: &[usize]) -> Vec<T> {
    let n = rows.len();
    let total = outer * n * inner;
    if total == 0 {
        return Vec::new();
    }
    let per = (16384 / inner).max(1);
    crate::parallel::filled(total, |out| {
        crate::parallel::for_chunks(out, per * inner, crate::parallel::par_ok(total), |c, dst| {
            for (k, o) in dst.chunks_mut(inner).enumerate() {
                let r = c * per + k;
                let from = ((r / n) * size + rows[r % n]) * inner;
                for (o, &v) in o.iter_mut().zip(&src[from..from + inner]) {
                    o.write(v);
                }
            }
        })
    })
}

/// Row-major offsets into a contiguous tensor of shape `dims` written by `scatter`
/// along `d`: element `p` of the index (shape `idims`) goes to `p` with its
/// `d`-coordinate replaced by the index value.
fn scatter_offsets(iv: &[u32], idims: &[usize], dims: &[usize], d: usize) -> Vec<u32> {
    let rank = dims.len();
    let mut stride = vec![1usize; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        stride[k] = stride[k + 1] * dims[k + 1];
    }
    let mut pos = vec![0usize; rank];
    let mut out = Vec::with_capacity(iv.len());
    for &v in iv {
        let mut off = 0;
        for k in 0..rank {
            off += if k == d { v as usize } else { pos[k] } * stride[k];
        }
        out.push(off as u32);
        // next row-major position in the index's shape
        for k in (0..rank).rev() {
            pos[k] += 1;
            if pos[k] < idims[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    out
}

#[pymethods]
impl PyTensor {
    #[pyo3(signature = (*shape))]
    fn reshape(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let t = self.t();
        let req = shape_args(shape, "reshape")?;
        let s = infer_shape(&req, t.elem_count(), t.dims(), "reshape")?;
        let out = crate::errors::detach_op(py, "reshape", || t.reshape(s))?;
        Ok(wrap_like(self, out))
    }
    /// `view` reshapes too; Candle copies when the input is not contiguous.
    #[pyo3(signature = (*shape))]
    fn view(&self, py: Python<'_>, shape: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        if shape.len() == 1 {
            let a = shape.get_item(0)?;
            if a.cast::<crate::dtype::PyDType>().is_ok() {
                return Err(type_err("view", "view(dtype) is not supported; use .to(dtype)"));
            }
        }
        self.reshape(py, shape)
    }
    fn reshape_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let dims = PyTuple::new(py, other.get().t().dims())?;
        self.reshape(py, &dims)
    }
    fn view_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        self.reshape_as(py, other)
    }

    #[pyo3(name = "t")]
    fn t_py(&self) -> PyResult<PyTensor> {
        let t = self.t();
        match t.rank() {
            0 | 1 => Ok(wrap_like(self, t)),
            2 => Ok(wrap_like(self, t.t().op("t")?)),
            r => Err(shape_err("t", format!("t() expects a tensor with <= 2 dimensions, but self is {r}D"))),
        }
    }
    #[getter(T)]
    fn big_t(&self) -> PyResult<PyTensor> {
        let t = self.t();
        let dims: Vec<usize> = (0..t.rank()).rev().collect();
        Ok(wrap_like(self, t.permute(dims).op("T")?))
    }
    #[getter(mT)]
    fn m_t(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if t.rank() < 2 {
            return Err(shape_err("mT", "tensor.mT is only supported on matrices or batches of matrices"));
        }
        Ok(wrap_like(self, t.transpose(t.rank() - 2, t.rank() - 1).op("mT")?))
    }
    fn transpose(&self, dim0: i64, dim1: i64) -> PyResult<PyTensor> {
        let t = self.t();
        if t.rank() == 0 {
            return Ok(wrap_like(self, t));
        }
        let a = norm_dim(dim0, t.rank(), "transpose")?;
        let b = norm_dim(dim1, t.rank(), "transpose")?;
        Ok(wrap_like(self, t.transpose(a, b).op("transpose")?))
    }
    fn swapaxes(&self, axis0: i64, axis1: i64) -> PyResult<PyTensor> {
        self.transpose(axis0, axis1)
    }
    #[pyo3(signature = (*dims))]
    fn permute(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let t = self.t();
        let req = shape_args(dims, "permute")?;
        if req.len() != t.rank() {
            return Err(shape_err("permute", format!("number of dims don't match in permute: got {} for a tensor of shape {:?}", req.len(), t.dims())));
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
            return Ok(wrap_like(self, t));
        }
        Ok(wrap_like(self, t.permute(d).op("permute")?))
    }
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let t = self.t();
        let dims = crate::math::reduce_dims(dim, t.rank(), "squeeze")?;
        let dims: Vec<usize> = match dims {
            None => (0..t.rank()).filter(|&i| t.dims()[i] == 1).collect(),
            Some(d) => d.into_iter().filter(|&i| t.rank() > 0 && t.dims()[i] == 1).collect(),
        };
        let mut out = t;
        for &d in dims.iter().rev() {
            out = out.squeeze(d).op("squeeze")?;
        }
        Ok(wrap_like(self, out))
    }
    fn unsqueeze(&self, dim: i64) -> PyResult<PyTensor> {
        let t = self.t();
        let d = norm_dim(dim, t.rank() + 1, "unsqueeze")?;
        Ok(wrap_like(self, t.unsqueeze(d).op("unsqueeze")?))
    }
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: i64, end_dim: i64) -> PyResult<PyTensor> {
        let t = self.t();
        if t.rank() == 0 {
            return Ok(wrap_like(self, t.reshape(1).op("flatten")?));
        }
        let a = norm_dim(start_dim, t.rank(), "flatten")?;
        let b = norm_dim(end_dim, t.rank(), "flatten")?;
        if a > b {
            return Err(value_err("flatten", "start_dim cannot come after end_dim"));
        }
        let mut shape: Vec<usize> = t.dims()[..a].to_vec();
        shape.push(t.dims()[a..=b].iter().product());
        shape.extend_from_slice(&t.dims()[b + 1..]);
        Ok(wrap_like(self, t.reshape(shape).op("flatten")?))
    }
    fn unflatten(&self, dim: i64, sizes: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let t = self.t();
        let d = norm_dim(dim, t.rank(), "unflatten")?;
        let req: Vec<i64> = sizes.extract().map_err(|_| type_err("unflatten", "sizes must be a sequence of ints"))?;
        let inner = infer_shape(&req, t.dims()[d], t.dims(), "unflatten")?;
        let mut shape = t.dims()[..d].to_vec();
        shape.extend(inner);
        shape.extend_from_slice(&t.dims()[d + 1..]);
        Ok(wrap_like(self, t.reshape(shape).op("unflatten")?))
    }
    fn ravel(&self) -> PyResult<PyTensor> {
        self.flatten(0, -1)
    }
    #[pyo3(signature = (*sizes))]
    fn expand(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let t = self.t();
        let req = shape_args(sizes, "expand")?;
        if req.len() < t.rank() {
            return Err(shape_err("expand", format!("the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})", req.len(), t.rank())));
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
        Ok(wrap_like(self, t.broadcast_as(shape).op("expand")?))
    }
    fn expand_as(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        self.expand(&PyTuple::new(py, other.get().t().dims())?)
    }
    fn broadcast_to(&self, py: Python<'_>, size: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.expand(&PyTuple::new(py, [size])?)
    }
    fn narrow(&self, dim: i64, start: i64, length: i64) -> PyResult<PyTensor> {
        let t = self.t();
        let d = norm_dim(dim, t.rank(), "narrow")?;
        let size = t.dims()[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || length < 0 || s + length > size {
            return Err(index_err("narrow", format!("start ({start}) + length ({length}) exceeds dimension size ({size})")));
        }
        Ok(wrap_like(self, t.narrow(d, s as usize, length as usize).op("narrow")?))
    }
    #[pyo3(signature = (chunks, dim=0))]
    fn chunk(&self, py: Python<'_>, chunks: i64, dim: i64) -> PyResult<Py<PyTuple>> {
        if chunks <= 0 {
            return Err(value_err("chunk", format!("chunk expects `chunks` to be greater than 0, got: {chunks}")));
        }
        let t = self.t();
        no_zero_d(&t, "chunk")?;
        let d = norm_dim(dim, t.rank(), "chunk")?;
        let size = t.dims()[d];
        let step = size.div_ceil(chunks as usize).max(if size == 0 { 0 } else { 1 });
        let sizes: Vec<usize> = if step == 0 { vec![0] } else { (0..size).step_by(step).map(|s| step.min(size - s)).collect() };
        self.split_sizes(py, &sizes, d, "chunk")
    }
    #[pyo3(signature = (split_size_or_sections, dim=0))]
    fn split(&self, py: Python<'_>, split_size_or_sections: &Bound<'_, PyAny>, dim: i64) -> PyResult<Py<PyTuple>> {
        let t = self.t();
        no_zero_d(&t, "split")?;
        let d = norm_dim(dim, t.rank(), "split")?;
        let size = t.dims()[d];
        let sizes: Vec<usize> = if let Ok(n) = split_size_or_sections.extract::<i64>() {
            if n <= 0 {
                return Err(value_err("split", format!("split_size must be positive, got {n}")));
            }
            let n = n as usize;
            if size == 0 { vec![0] } else { (0..size).step_by(n).map(|s| n.min(size - s)).collect() }
        } else {
            let v: Vec<i64> = split_size_or_sections.extract().map_err(|_| type_err("split", "split_size_or_sections must be an int or a list of ints"))?;
            if v.iter().any(|&x| x < 0) || v.iter().sum::<i64>() != size as i64 {
                return Err(value_err("split", format!("split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), but got split_sizes={v:?}")));
            }
            v.into_iter().map(|x| x as usize).collect()
        };
        self.split_sizes(py, &sizes, d, "split")
    }
    #[pyo3(signature = (dim=0))]
    fn unbind(&self, py: Python<'_>, dim: i64) -> PyResult<Py<PyTuple>> {
        let t = self.t();
        no_zero_d(&t, "unbind")?;
        let d = norm_dim(dim, t.rank(), "unbind")?;
        let mut out = Vec::new();
        for i in 0..t.dims()[d] {
            out.push(Py::new(py, wrap_like(self, t.narrow(d, i, 1).and_then(|x| x.squeeze(d)).op("unbind")?))?);
        }
        Ok(PyTuple::new(py, out)?.unbind())
    }

    fn index_select(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let t = self.t();
        let idx = int_index(index.get(), "index_select")?;
        if idx.rank() > 1 {
            return Err(shape_err("index_select", format!("index must be 0-D or 1-D, got shape {:?}", idx.dims())));
        }
        if t.rank() == 0 {
            return Err(shape_err("index_select", "cannot index a 0-d tensor"));
        }
        let d = norm_dim(dim, t.rank(), "index_select")?;
        let idx1 = idx.flatten_all().op("index_select")?;
        // Candle's index_select (and the row copy) read contiguous sources only.
        let t = if t.is_contiguous() { t } else { t.contiguous().op("index_select")? };
        let out = match gather_untracked(py, &t, &idx1, d)? {
            Some(out) => out,
            None => {
                let u = checked_index(&idx1, t.dims()[d], "index_select")?;
                crate::errors::detach_op(py, "index_select", || t.index_select(&u, d))?
            }
        };
        let out = if idx.rank() == 0 { out.squeeze(d).and_then(|o| o.unsqueeze(d)).op("index_select")? } else { out };
        Ok(wrap_like(self, out))
    }
    fn gather(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let t = self.t();
        if t.rank() == 0 {
            // As PyTorch: a 0-d self is one element along dim 0 (the 1-d path
            // below indexes dims()[d], which a 0-d tensor lacks).
            norm_dim(dim, 0, "gather")?;
            let (one, i1, idims) = as_1d(py, self, index, "gather")?;
            let out = one.get().gather(py, 0, &i1)?;
            return Ok(wrap_like(self, out.t().reshape(idims).op("gather")?));
        }
        let idx = int_index(index.get(), "gather")?;
        let d = norm_dim(dim, t.rank(), "gather")?;
        if idx.rank() != t.rank() {
            return Err(shape_err("gather", format!("Index tensor must have the same number of dimensions as input tensor: {:?} vs {:?}", idx.dims(), t.dims())));
        }
        for (i, (&a, &b)) in idx.dims().iter().zip(t.dims()).enumerate() {
            if i != d && a > b {
                return Err(shape_err("gather", format!("Size does not match at dimension {i} expected index {:?} to be smaller than self {:?} apart from dimension {d}", idx.dims(), t.dims())));
            }
        }
        // Candle's gather wants the non-gathered dims equal: narrow the source to the index.
        let mut src = t.clone();
        for (i, &n) in idx.dims().iter().enumerate() {
            if i != d && n < src.dims()[i] {
                src = src.narrow(i, 0, n).op("gather")?;
            }
        }
        let u = checked_index(&idx, t.dims()[d], "gather")?;
        let out = crate::errors::detach_op(py, "gather", || src.contiguous()?.gather(&u.contiguous()?, d))?;
        Ok(wrap_like(self, out))
    }
    /// Out-of-place scatter: `out[index[i][j]][j] = src[i][j]` (dim 0), or `reduce="add"`.
    #[pyo3(signature = (dim, index, src=None, value=None, *, reduce=None))]
    fn scatter(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>, src: Option<&Bound<'_, PyAny>>, value: Option<&Bound<'_, PyAny>>, reduce: Option<&str>) -> PyResult<PyTensor> {
        let t = self.t();
        if t.rank() == 0 {
            norm_dim(dim, 0, "scatter")?; // a 0-d self is one element along dim 0, as in PyTorch
            let (one, i1, _) = as_1d(py, self, index, "scatter")?;
            let s1 = match src.map(|s| s.cast::<PyTensor>()) {
                Some(Ok(s)) => Some(Bound::new(py, PyTensor::wrap_dt(s.get().t().flatten_all().op("scatter")?, s.get().dt()))?.into_any()),
                _ => src.cloned(),
            };
            let out = one.get().scatter(py, 0, &i1, s1.as_ref(), value, reduce)?;
            return Ok(wrap_like(self, out.t().reshape(()).op("scatter")?));
        }
        let d = norm_dim(dim, t.rank(), "scatter")?;
        let idx = int_index(index.get(), "scatter")?;
        let srcv = src.or(value).ok_or_else(|| type_err("scatter", "expected src or value"))?;
        let s = match srcv.cast::<PyTensor>() {
            Ok(s) => {
                let st = cast(&s.get().t(), s.get().dt(), self.dt())?;
                if src.is_none() && st.rank() == 0 {
                    // `value` given as a 0-d tensor: a number, as PyTorch reads it.
                    st.broadcast_as(idx.dims()).op("scatter")?
                } else if st.rank() != idx.rank() {
                    return Err(shape_err("scatter", format!("Index tensor must have the same number of dimensions as src tensor: {:?} vs {:?}", idx.dims(), st.dims())));
                } else {
                    st
                }
            }
            Err(_) => {
                let sc = crate::tensor::extract_scalar(srcv).ok_or_else(|| type_err("scatter", "src must be a Tensor or a number"))?;
                sc.tensor(self.dt(), t.device())?.broadcast_as(idx.dims()).op("scatter")?
            }
        };
        let s = {
            let mut s = s;
            for (i, &n) in idx.dims().iter().enumerate() {
                if n < s.dims()[i] {
                    s = s.narrow(i, 0, n).op("scatter")?;
                }
            }
            s.contiguous().op("scatter")?
        };
        let base = t.contiguous().op("scatter")?;
        if idx.elem_count() == 0 {
            // Nothing to write (Candle rejects an empty index): a copy in the graph.
            return Ok(wrap_like(self, base.force_contiguous().op("scatter")?));
        }
        if reduce.is_some_and(|r| r != "add") {
            return Err(value_err("scatter", format!("reduce must be None or 'add', got {:?}", reduce.unwrap_or_default())));
        }
        let u = checked_index(&idx, t.dims()[d], "scatter")?;
        let iv: Vec<u32> = u.flatten_all().and_then(|x| x.to_vec1::<u32>()).op("scatter")?;
        let offs = scatter_offsets(&iv, idx.dims(), t.dims(), d);
        let add = reduce.is_some();
        // Built from index_add / where_cond on the flattened tensor rather than Candle's
        // scatter, whose backward sends the gradient to the overwritten places of self
        // and fails for an index smaller than self (PyTorch allows both).
        let out = crate::errors::detach_op(py, "scatter", || -> candle_core::Result<Tensor> {
                let dev = base.device();
                let flat = base.flatten_all()?;
                let src_flat = s.flatten_all()?;
                if add {
                    let o = Tensor::from_vec(offs, iv.len(), dev)?;
                    return flat.index_add(&o, &src_flat, 0)?.reshape(t.dims());
                }
                // The last write to a place wins, as in a sequential loop.
                let n = flat.elem_count();
                let mut writer = vec![u32::MAX; n];
                for (k, &o) in offs.iter().enumerate() {
                    writer[o as usize] = k as u32;
                }
                let (mut kept_off, mut kept_pos, mut mask) = (Vec::new(), Vec::new(), vec![0u8; n]);
                for (o, &k) in writer.iter().enumerate() {
                    if k != u32::MAX {
                        kept_off.push(o as u32);
                        kept_pos.push(k);
                        mask[o] = 1;
                    }
                }
                let m = kept_off.len();
                let sel = src_flat.index_select(&Tensor::from_vec(kept_pos, m, dev)?, 0)?;
                let written = flat.zeros_like()?.index_add(&Tensor::from_vec(kept_off, m, dev)?, &sel, 0)?;
                Tensor::from_vec(mask, n, dev)?.where_cond(&written, &flat)?.reshape(t.dims())
            })?;
        Ok(wrap_like(self, out))
    }
    fn scatter_add(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>, src: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.scatter(py, dim, index, Some(src), None, Some("add"))
    }
    #[pyo3(signature = (*dims))]
    fn flip(&self, dims: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let t = self.t();
        let req = shape_args(dims, "flip")?;
        let d: Vec<usize> = req.iter().map(|&x| norm_dim(x, t.rank(), "flip")).collect::<PyResult<_>>()?;
        Ok(wrap_like(self, t.flip(&d).op("flip")?))
    }
    #[pyo3(signature = (*sizes))]
    fn repeat(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<PyTensor> {
        let t = self.t();
        let req = shape_args(sizes, "repeat")?;
        if req.len() < t.rank() {
            return Err(shape_err("repeat", "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
        }
        let reps = crate::tensor::nonneg_shape(&req, "repeat")?;
        let mut x = t.clone();
        while x.rank() < reps.len() {
            x = x.unsqueeze(0).op("repeat")?;
        }
        // Check the result size first: Candle would try to build it piece by piece.
        let mut out_dims = Vec::with_capacity(reps.len());
        for (&d, &r) in x.dims().iter().zip(&reps) {
            out_dims.push(d.checked_mul(r).ok_or_else(|| value_err("repeat", format!("result size overflows: {:?} x {reps:?}", x.dims())))?);
        }
        let total = out_dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
        match total {
            Some(0) => return Ok(wrap_like(self, Tensor::zeros(out_dims, x.dtype(), x.device()).op("repeat")?)),
            Some(n) => crate::tensor::check_alloc(n, x.dtype().size_in_bytes(), "repeat")?,
            None => return Err(value_err("repeat", format!("result shape {out_dims:?} is too large"))),
        }
        Ok(wrap_like(self, x.repeat(reps).op("repeat")?))
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
        let t = self.t();
        let mut out = Vec::new();
        let mut start = 0;
        for &s in sizes {
            out.push(Py::new(py, wrap_like(self, t.narrow(d, start, s).op(op)?))?);
            start += s;
        }
        Ok(PyTuple::new(py, out)?.unbind())
    }

    fn tri(&self, k: i64, lower: bool) -> PyResult<PyTensor> {
        let t = self.t();
        let name = if lower { "tril" } else { "triu" };
        if t.rank() < 2 {
            return Err(shape_err(name, format!("input tensor must have at least 2 dimensions, got {:?}", t.dims())));
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
        let z = t.zeros_like().op(name)?;
        let out = crate::math::where_(&mask, &t, &z, name)?;
        Ok(wrap_like(self, out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = PyList::empty(m.py());
    Ok(())
}
