//! Selection along a dim: `index_select`, `gather`, `scatter`, `scatter_add`, with
//! PyTorch's bounds checks and negative indices.
use crate::autograd::{ops, Value};
use crate::bindings::args::{cast_v, norm_dim};
use crate::bindings::errors::{dtype_err, index_err, shape_err, type_err, value_err, OpResult};
use crate::bindings::shape_ops::wrap_like;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::gather::{gather_rows, scatter_offsets};
use crate::ops::layout::Dense;
use candle_core::{DType, Shape, Tensor};
use pyo3::prelude::*;

/// A 0-d `me` and its index (0-d or 1-d) as 1-d tensors, plus the index's own dims.
fn as_1d<'py>(
    py: Python<'py>,
    me: &PyTensor,
    index: &Bound<'py, PyTensor>,
    op: &str,
) -> PyResult<(Bound<'py, PyTensor>, Bound<'py, PyTensor>, Vec<usize>)> {
    let it = index.get().t();
    if it.rank() > 1 {
        return Err(shape_err(op, format!("Index tensor must have the same number of dimensions as input tensor: {:?} vs []", it.dims())));
    }
    let one = Bound::new(py, wrap_like(me, ops::reshape(&me.v(), &Shape::from(vec![1])).op(op)?))?;
    let i1 = Bound::new(py, PyTensor::wrap_dt(it.flatten_all().op(op)?, index.get().dt()))?;
    Ok((one, i1, it.dims().to_vec()))
}

pub(crate) fn int_index(idx: &PyTensor, op: &str) -> PyResult<Tensor> {
    let dt = idx.dt();
    if dt.is_float() || dt == DT::Bool {
        return Err(dtype_err(op, format!("index must be an integer tensor, got {}", dt.name())));
    }
    Ok(idx.t())
}

/// Candle indexes with unsigned ints: check bounds, wrap negatives, cast to u32.
pub(crate) fn checked_index(idx: &Tensor, size: usize, op: &str) -> PyResult<Tensor> {
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

/// `index_select`'s value as one pass of row copies for contiguous CPU data, with the
/// rows read (negative indices resolved, bounds checked): Candle's op plus the bounds
/// check costs several passes over the index and a per-element copy. `None` where it
/// does not apply.
fn gather_dense(py: Python<'_>, t: &Tensor, idx: &Tensor, d: usize) -> PyResult<Option<(Tensor, Vec<usize>)>> {
    const OP: &str = "index_select";
    if !t.device().is_cpu() || !idx.device().is_cpu() || !t.is_contiguous() || idx.dtype() != DType::I64 {
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
                    let out = crate::bindings::errors::detach(py, OP, || Ok(gather_rows(src, outer, size, inner, &rows)))?;
                    (Tensor::from_vec(out, dims, &candle_core::Device::Cpu).op(OP)?, rows)
                })*
                _ => return Ok(None),
            }
        };
    }
    Ok(Some(go!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)))
}

/// `v` with the elements of `s` (row-major) written at the flat offsets `offs` of its
/// contiguous form, the last write to a place winning as in a sequential loop (built
/// from `index_add`/`where` rather than Candle's scatter, whose backward sends the
/// gradient to the overwritten places too). `scatter` and `index_copy` use it.
pub(crate) fn overwrite_at(v: &Value, s: &Value, offs: Vec<u32>) -> candle_core::Result<Value> {
    let t = &v.data;
    let dev = t.device();
    let dims = t.dims().to_vec();
    let flat = t.dense()?.flatten_all()?;
    let src_flat = s.data.dense()?.flatten_all()?;
    let n = flat.elem_count();
    let (kept_off, kept_pos, mask) = crate::ops::index_write::last_writers(&offs, n);
    let m = kept_off.len();
    let o = Tensor::from_vec(offs.clone(), offs.len(), dev)?;
    let sel = src_flat.index_select(&Tensor::from_vec(kept_pos, m, dev)?, 0)?;
    let written = flat.zeros_like()?.index_add(&Tensor::from_vec(kept_off, m, dev)?, &sel, 0)?;
    let mask = Tensor::from_vec(mask, n, dev)?;
    let out = mask.where_cond(&written, &flat)?.reshape(dims.as_slice())?;
    crate::autograd::indexing::scatter(v, s, out, o, Some(mask))
}

#[pymethods]
impl PyTensor {
    fn index_select(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
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
        let v = if t.is_contiguous() { v } else { ops::force_contiguous(&v, "CloneBackward0").op("index_select")? };
        let tracked = ops::records(&[&v]);
        let out = match gather_dense(py, &v.data, &idx1, d)? {
            Some((out, _)) if !tracked => Value::plain(out),
            Some((out, rows)) => {
                // The row copy's value, with index_select's node (its backward adds the rows back).
                let n = rows.len();
                let u = Tensor::from_vec(rows.into_iter().map(|r| r as u32).collect::<Vec<_>>(), n, &candle_core::Device::Cpu)
                    .op("index_select")?;
                ops::index_selected(&v, &u, d, out).op("index_select")?
            }
            None => {
                let u = checked_index(&idx1, t.dims()[d], "index_select")?;
                crate::bindings::errors::detach_op(py, "index_select", || ops::index_select(&v, &u, d))?
            }
        };
        Ok(wrap_like(self, out))
    }

    fn gather(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        if t.rank() == 0 {
            // As PyTorch: a 0-d self is one element along dim 0 (the 1-d path
            // below indexes dims()[d], which a 0-d tensor lacks).
            norm_dim(dim, 0, "gather")?;
            let (one, i1, idims) = as_1d(py, self, index, "gather")?;
            let out = one.get().gather(py, 0, &i1)?;
            return Ok(wrap_like(self, ops::reshape(&out.v(), &Shape::from(idims)).op("gather")?));
        }
        let idx = int_index(index.get(), "gather")?;
        let d = norm_dim(dim, t.rank(), "gather")?;
        if idx.rank() != t.rank() {
            return Err(shape_err(
                "gather",
                format!("Index tensor must have the same number of dimensions as input tensor: {:?} vs {:?}", idx.dims(), t.dims()),
            ));
        }
        for (i, (&a, &b)) in idx.dims().iter().zip(t.dims()).enumerate() {
            if i != d && a > b {
                return Err(shape_err(
                    "gather",
                    format!(
                        "Size does not match at dimension {i} expected index {:?} to be smaller than self {:?} apart from dimension {d}",
                        idx.dims(),
                        t.dims()
                    ),
                ));
            }
        }
        // Candle's gather wants the non-gathered dims equal: narrow the source to the index.
        let mut src = v.clone();
        for (i, &n) in idx.dims().iter().enumerate() {
            if i != d && n < src.data.dims()[i] {
                src = ops::narrow(&src, i, 0, n).op("gather")?;
            }
        }
        let u = checked_index(&idx, t.dims()[d], "gather")?.dense().op("gather")?;
        let out = crate::bindings::errors::detach_op(py, "gather", || {
            let iv: Vec<u32> = u.flatten_all()?.to_vec1()?;
            let offs = crate::ops::gather::scatter_offsets(&iv, u.dims(), src.data.dims(), d);
            let offs = Tensor::from_vec(offs, iv.len(), src.data.device())?;
            crate::autograd::indexing::gather(&src, &u, d, offs)
        })?;
        Ok(wrap_like(self, out))
    }

    /// Out-of-place scatter: `out[index[i][j]][j] = src[i][j]` (dim 0), or with
    /// `reduce="add"` / `"multiply"` summed / multiplied into self.
    #[pyo3(signature = (dim, index, src=None, value=None, *, reduce=None))]
    fn scatter(
        &self,
        py: Python<'_>,
        dim: i64,
        index: &Bound<'_, PyTensor>,
        src: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        reduce: Option<&str>,
    ) -> PyResult<PyTensor> {
        let v = self.v();
        let t = v.data.clone();
        if t.rank() == 0 {
            norm_dim(dim, 0, "scatter")?; // a 0-d self is one element along dim 0, as in PyTorch
            let (one, i1, _) = as_1d(py, self, index, "scatter")?;
            let s1 = match src.map(|s| s.cast::<PyTensor>()) {
                Some(Ok(s)) => {
                    let sv = s.get().v();
                    let n = sv.data.elem_count();
                    Some(
                        Bound::new(py, PyTensor::wrap_vdt(ops::reshape(&sv, &Shape::from(vec![n])).op("scatter")?, s.get().dt()))?
                            .into_any(),
                    )
                }
                _ => src.cloned(),
            };
            let out = one.get().scatter(py, 0, &i1, s1.as_ref(), value, reduce)?;
            return Ok(wrap_like(self, ops::reshape(&out.v(), &Shape::from(())).op("scatter")?));
        }
        let d = norm_dim(dim, t.rank(), "scatter")?;
        let idx = int_index(index.get(), "scatter")?;
        let srcv = src.or(value).ok_or_else(|| type_err("scatter", "expected src or value"))?;
        let s = match srcv.cast::<PyTensor>() {
            Ok(s) => {
                let st = cast_v(&s.get().v(), s.get().dt(), self.dt())?;
                if src.is_none() && st.data.rank() == 0 {
                    // `value` given as a 0-d tensor: a number, as PyTorch reads it.
                    ops::broadcast_as(&st, idx.shape()).op("scatter")?
                } else if st.data.rank() != idx.rank() {
                    return Err(shape_err(
                        "scatter",
                        format!(
                            "Index tensor must have the same number of dimensions as src tensor: {:?} vs {:?}",
                            idx.dims(),
                            st.data.dims()
                        ),
                    ));
                } else {
                    st
                }
            }
            Err(_) => {
                let sc =
                    crate::bindings::args::extract_scalar(srcv).ok_or_else(|| type_err("scatter", "src must be a Tensor or a number"))?;
                Value::plain(sc.tensor(self.dt(), t.device())?.broadcast_as(idx.dims()).op("scatter")?)
            }
        };
        let s = {
            let mut s = s;
            for (i, &n) in idx.dims().iter().enumerate() {
                if n < s.data.dims()[i] {
                    s = ops::narrow(&s, i, 0, n).op("scatter")?;
                }
            }
            s
        };
        if idx.elem_count() == 0 {
            // Nothing to write (Candle rejects an empty index): a copy in the graph.
            return Ok(wrap_like(self, ops::force_contiguous(&v, "ScatterBackward0").op("scatter")?));
        }
        if reduce == Some("multiply") {
            // PyTorch's legacy `reduce="multiply"`: products into self, which is
            // `scatter_reduce(..., "prod", include_self=True)` on the same source.
            let src_t = Bound::new(py, PyTensor::wrap_vdt(s, self.dt()))?;
            return self.scatter_reduce(py, dim, index, &src_t, "prod", true);
        }
        if reduce.is_some_and(|r| r != "add") {
            return Err(value_err("scatter", format!("reduce must be None, 'add' or 'multiply', got {:?}", reduce.unwrap_or_default())));
        }
        let u = checked_index(&idx, t.dims()[d], "scatter")?;
        let iv: Vec<u32> = u.flatten_all().and_then(|x| x.to_vec1::<u32>()).op("scatter")?;
        let offs = scatter_offsets(&iv, idx.dims(), t.dims(), d);
        let add = reduce.is_some();
        // Built from index_add / where_cond on the flattened tensor rather than Candle's
        // scatter, whose backward sends the gradient to the overwritten places of self
        // and fails for an index smaller than self (PyTorch allows both).
        let dims = t.dims().to_vec();
        let out = crate::bindings::errors::detach_op(py, "scatter", || {
            if !add {
                return overwrite_at(&v, &s, offs.clone());
            }
            let dev = t.device();
            let flat = t.dense()?.flatten_all()?;
            let src_flat = s.data.dense()?.flatten_all()?;
            let o = Tensor::from_vec(offs.clone(), iv.len(), dev)?;
            let out = flat.index_add(&o, &src_flat, 0)?.reshape(dims.as_slice())?;
            crate::autograd::indexing::scatter(&v, &s, out, o, None)
        })?;
        Ok(wrap_like(self, out))
    }

    fn scatter_add(&self, py: Python<'_>, dim: i64, index: &Bound<'_, PyTensor>, src: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.scatter(py, dim, index, Some(src), None, Some("add"))
    }
}
