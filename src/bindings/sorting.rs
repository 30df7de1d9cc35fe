//! Sorting and selection (`sort`, `argsort`, `msort`, `topk`, `kthvalue`, `median`),
//! `nonzero` / `argwhere`, `unique` / `unique_consecutive`, `bincount`, and the scans
//! and log-sum-exp reductions (`cumprod`, `logsumexp`). The kernels are
//! `ops::sort`'s; this file converts arguments, checks them as PyTorch does, and
//! records the gradient of the selected values (to the selected elements).
use crate::autograd::{indexing, ops, Value};
use crate::bindings::args::{cast, cast_v, norm_dim, opt_dtype};
use crate::bindings::errors::{detach_op, dtype_err, index_err, runtime_err, OpResult};
use crate::bindings::formatting::pair_result;
use crate::bindings::reduce::reduce_dims;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::sort::{self, Pick};
use candle_core::{DType, Shape, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The selected values `out` of `x` (indices `idx`, same rank as `x`, along `d`) with
/// the gradient going to the selected elements (PyTorch's
/// `value_selecting_reduction_backward`); no node when nothing records.
fn selected(x: &Value, out: Tensor, idx: &Tensor, d: usize, name: &'static str) -> candle_core::Result<Value> {
    if ops::records(&[x]) && x.data.dtype().is_float() {
        indexing::select_along(x, out, idx, d, name)
    } else {
        Ok(Value::plain(out))
    }
}

/// `x` as a 1-d tensor of one element when it is 0-d (PyTorch treats a 0-d input of
/// the selection ops as one row of one element), in the graph.
fn at_least_1d(x: &Value) -> candle_core::Result<Value> {
    if x.data.rank() == 0 {
        ops::reshape(x, &Shape::from(1usize))
    } else {
        Ok(x.clone())
    }
}

fn scalar_like(v: Value, was_0d: bool) -> candle_core::Result<Value> {
    if was_0d && v.data.elem_count() == 1 {
        ops::reshape(&v, &Shape::from(()))
    } else {
        Ok(v)
    }
}

impl PyTensor {
    /// Sorted values (in the graph) and indices along `dim`.
    fn sorted(&self, py: Python<'_>, dim: i64, descending: bool, op: &str) -> PyResult<(Value, Tensor, DT)> {
        let (v, dt) = self.v_dt();
        let rank = v.data.rank();
        let d = norm_dim(dim, rank, op)?;
        let x = at_least_1d(&v).op(op)?;
        let xd = x.data.clone();
        let (vals, idx) = detach_op(py, op, || sort::sort(&xd, d, descending))?;
        let out = selected(&x, vals, &idx, d, "SortBackward0").and_then(|o| scalar_like(o, rank == 0)).op(op)?;
        let idx = if rank == 0 { idx.reshape(()).op(op)? } else { idx };
        Ok((out, idx, dt))
    }

    /// `kthvalue` / `median(dim)`: the pick along `dim` with its index.
    fn picked<'py>(
        &self,
        py: Python<'py>,
        dim: i64,
        keepdim: bool,
        pick: Pick,
        op: &str,
        name: &'static str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (v, dt) = self.v_dt();
        let rank = v.data.rank();
        let d = norm_dim(dim, rank, op)?;
        let x = at_least_1d(&v).op(op)?;
        let n = x.data.dims()[d];
        if let Pick::Kth(k) = pick {
            if k >= n {
                return Err(runtime_err(op, format!("selected number k out of range for dimension {d}")));
            }
        }
        if n == 0 {
            return Err(index_err(op, format!("Expected reduction dim {d} to have non-zero size.")));
        }
        let mut shape = x.data.dims().to_vec();
        if keepdim {
            shape[d] = 1;
        } else {
            shape.remove(d);
        }
        let (vals, idx) = if x.data.elem_count() == 0 {
            let mut kept = x.data.dims().to_vec();
            kept[d] = 1;
            (Tensor::zeros(kept.clone(), x.data.dtype(), x.data.device()).op(op)?, Tensor::zeros(kept, DType::I64, x.data.device()).op(op)?)
        } else {
            let xd = x.data.clone();
            detach_op(py, op, || sort::kth(&xd, d, pick))?
        };
        let raw = vals.reshape(shape.as_slice()).op(op)?;
        let mut out = selected(&x, raw, &idx, d, name).op(op)?;
        let mut idx = idx.reshape(shape.as_slice()).op(op)?;
        if rank == 0 {
            out = ops::reshape(&out, &Shape::from(())).op(op)?;
            idx = idx.reshape(()).op(op)?;
        }
        pair_result(py, op, PyTensor::wrap_vdt(out, dt), PyTensor::wrap_dt(idx, DT::I64))
    }

    /// `unique` / `unique_consecutive` with their optional outputs.
    fn unique_impl<'py>(
        &self,
        py: Python<'py>,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
        consecutive: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let op = if consecutive { "unique_consecutive" } else { "unique" };
        let (t, dt) = self.t_dt();
        let (vals, inv, counts) = match dim {
            None => detach_op(py, op, || sort::unique(&t, consecutive))?,
            Some(d) => {
                if t.rank() == 0 {
                    return Err(index_err(op, "dim is not allowed for a 0-d tensor"));
                }
                let d = norm_dim(d, t.rank(), op)?;
                detach_op(py, op, || sort::unique_dim(&t, d, consecutive))?
            }
        };
        let vals = Py::new(py, PyTensor::wrap_dt(vals, dt))?.into_any();
        if !return_inverse && !return_counts {
            return Ok(vals.into_bound(py));
        }
        let mut items = vec![vals];
        if return_inverse {
            items.push(Py::new(py, PyTensor::wrap_dt(inv, DT::I64))?.into_any());
        }
        if return_counts {
            items.push(Py::new(py, PyTensor::wrap_dt(counts, DT::I64))?.into_any());
        }
        Ok(PyTuple::new(py, items)?.into_any())
    }
}

#[pymethods]
impl PyTensor {
    /// `(values, indices)` sorted along `dim` (NaN is the largest value). Every sort is
    /// stable, so `stable=True` and `stable=False` both give the stable order.
    #[pyo3(signature = (dim=-1, descending=false, stable=false))]
    fn sort<'py>(&self, py: Python<'py>, dim: i64, descending: bool, stable: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        let _always_stable = stable;
        let (out, idx, dt) = self.sorted(py, dim, descending, "sort")?;
        pair_result(py, "sort", PyTensor::wrap_vdt(out, dt), PyTensor::wrap_dt(idx, DT::I64))
    }

    /// The indices that sort the tensor along `dim` (stable, NaN last ascending).
    #[pyo3(signature = (dim=-1, descending=false, stable=false))]
    fn argsort(&self, py: Python<'_>, dim: i64, descending: bool, stable: Option<bool>) -> PyResult<PyTensor> {
        let _always_stable = stable;
        let (_, idx, _) = self.sorted(py, dim, descending, "argsort")?;
        Ok(PyTensor::wrap_dt(idx, DT::I64))
    }

    /// The values sorted along the first dim (`sort(0).values`).
    fn msort(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let (out, _, dt) = self.sorted(py, 0, false, "msort")?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    /// `(values, indices)` of the `k` largest (`largest=False`: smallest) elements along
    /// `dim`, in order (NaN counts as the largest); the result is sorted either way.
    #[pyo3(signature = (k, dim=-1, largest=true, sorted=true))]
    fn topk<'py>(&self, py: Python<'py>, k: i64, dim: i64, largest: bool, sorted: bool) -> PyResult<Bound<'py, PyAny>> {
        let _sorted_anyway = sorted;
        let op = "topk";
        let (v, dt) = self.v_dt();
        let rank = v.data.rank();
        let d = norm_dim(dim, rank, op)?;
        let x = at_least_1d(&v).op(op)?;
        let n = x.data.dims()[d];
        if k < 0 || k as usize > n {
            return Err(runtime_err(op, format!("selected index k out of range (k = {k}, dimension {d} has size {n})")));
        }
        let xd = x.data.clone();
        let (vals, idx) = detach_op(py, op, || sort::topk(&xd, k as usize, d, largest))?;
        let out = selected(&x, vals, &idx, d, "TopkBackward0").and_then(|o| scalar_like(o, rank == 0)).op(op)?;
        let idx = if rank == 0 && k == 1 { idx.reshape(()).op(op)? } else { idx };
        pair_result(py, op, PyTensor::wrap_vdt(out, dt), PyTensor::wrap_dt(idx, DT::I64))
    }

    /// `(values, indices)` of the `k`-th smallest element (1-based) along `dim`.
    #[pyo3(signature = (k, dim=-1, keepdim=false))]
    fn kthvalue<'py>(&self, py: Python<'py>, k: i64, dim: i64, keepdim: bool) -> PyResult<Bound<'py, PyAny>> {
        if k < 1 {
            let d = norm_dim(dim, self.t().rank(), "kthvalue")?;
            return Err(runtime_err("kthvalue", format!("selected number k out of range for dimension {d}")));
        }
        self.picked(py, dim, keepdim, Pick::Kth(k as usize - 1), "kthvalue", "KthvalueBackward0")
    }

    /// The lower median of all elements (NaN if any is NaN); with `dim`, `(values,
    /// indices)` of the lower median along it (a row holding NaN gives its first NaN).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn median<'py>(&self, py: Python<'py>, dim: Option<i64>, keepdim: bool) -> PyResult<Bound<'py, PyAny>> {
        let op = "median";
        if let Some(d) = dim {
            return self.picked(py, d, keepdim, Pick::Median, op, "MedianBackward1");
        }
        let (v, dt) = self.v_dt();
        let n = v.data.elem_count();
        if n == 0 {
            if !dt.is_float() {
                return Err(runtime_err(op, format!("median() of an empty {} tensor is undefined", dt.name())));
            }
            let nan = Tensor::new(f64::NAN, v.data.device()).and_then(|t| t.to_dtype(v.data.dtype())).op(op)?;
            return Ok(Py::new(py, PyTensor::wrap_dt(nan, dt))?.into_bound(py).into_any());
        }
        let flat = indexing::flat(&v).op(op)?;
        let fd = flat.data.clone();
        let (vals, _) = detach_op(py, op, || sort::kth(&fd, 0, Pick::Median))?;
        let out = vals.reshape(()).op(op)?;
        let out = if ops::records(&[&v]) && dt.is_float() {
            let kept = Shape::from(vec![1usize; v.data.rank()]);
            let all: Vec<usize> = (0..v.data.rank()).collect();
            indexing::extreme_even(&v, out, &kept, &all, true, "MedianBackward0").op(op)?
        } else {
            Value::plain(out)
        };
        Ok(Py::new(py, PyTensor::wrap_vdt(out, dt))?.into_bound(py).into_any())
    }

    /// `(values, indices)` of the most frequent value along `dim` (the smallest of those
    /// tied, at its last position).
    #[pyo3(signature = (dim=-1, keepdim=false))]
    fn mode<'py>(&self, py: Python<'py>, dim: i64, keepdim: bool) -> PyResult<Bound<'py, PyAny>> {
        self.picked(py, dim, keepdim, Pick::Mode, "mode", "ModeBackward0")
    }

    /// Coordinates of the nonzero elements, `(count, ndim)` int64; `as_tuple=True`: one
    /// 1-d tensor per dim (a 0-d input counts as 1-d).
    #[pyo3(signature = (*, as_tuple=false))]
    fn nonzero<'py>(&self, py: Python<'py>, as_tuple: bool) -> PyResult<Bound<'py, PyAny>> {
        crate::bindings::unary::nonzero_impl(py, &self.t(), as_tuple)
    }

    /// `nonzero()` (the `(count, ndim)` coordinates), as `torch.argwhere`.
    fn argwhere(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let t = self.t();
        let c = detach_op(py, "argwhere", || sort::nonzero(&t))?;
        Ok(PyTensor::wrap_dt(c, DT::I64))
    }

    /// The distinct elements in ascending order (NaNs stay distinct, last); with
    /// `return_inverse` / `return_counts` also where each element went and how many
    /// each holds; `dim`: distinct slices along it. The result is sorted whatever
    /// `sorted` says, as PyTorch's CPU kernel sorts.
    #[pyo3(signature = (sorted=true, return_inverse=false, return_counts=false, dim=None))]
    fn unique<'py>(
        &self,
        py: Python<'py>,
        sorted: bool,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _sorted_anyway = sorted;
        self.unique_impl(py, return_inverse, return_counts, dim, false)
    }

    /// Collapse each run of equal consecutive elements (or slices along `dim`) to one.
    #[pyo3(signature = (return_inverse=false, return_counts=false, dim=None))]
    fn unique_consecutive<'py>(
        &self,
        py: Python<'py>,
        return_inverse: bool,
        return_counts: bool,
        dim: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.unique_impl(py, return_inverse, return_counts, dim, true)
    }

    /// Count of each value of a 1-d non-negative integer tensor (`weights`: their sum).
    #[pyo3(signature = (weights=None, minlength=0))]
    fn bincount(&self, py: Python<'_>, weights: Option<&PyTensor>, minlength: i64) -> PyResult<PyTensor> {
        let op = "bincount";
        let (t, dt) = self.t_dt();
        if dt.is_float() || dt == DT::Bool {
            return Err(dtype_err(op, format!("bincount only supports 1-d non-negative integral inputs, got {}", dt.name())));
        }
        if t.rank() != 1 {
            return Err(runtime_err(op, format!("bincount only supports 1-d non-negative integral inputs, got shape {:?}", t.dims())));
        }
        if minlength < 0 {
            return Err(runtime_err(op, "minlength should be >= 0"));
        }
        if t.elem_count() > 0 {
            let lo: i64 = t.to_dtype(DType::I64).and_then(|x| x.min(0)).and_then(|m| m.to_scalar()).op(op)?;
            if lo < 0 {
                return Err(runtime_err(op, "bincount only supports 1-d non-negative integral inputs."));
            }
        }
        let (w, out_dt) = match weights {
            None => (None, DT::I64),
            Some(w) => {
                let (wt, wdt) = w.t_dt();
                if wt.dims() != t.dims() {
                    return Err(runtime_err(
                        op,
                        format!("weights should be 1-d and have the same length as input, got {:?} and {:?}", wt.dims(), t.dims()),
                    ));
                }
                // PyTorch's rule: float32 weights give float32 counts, any other give float64.
                (Some(cast(&wt, wdt, DT::F64)?), if wdt == DT::F32 { DT::F32 } else { DT::F64 })
            }
        };
        let out = detach_op(py, op, || sort::bincount(&t, w.as_ref(), minlength as usize))?;
        Ok(PyTensor::wrap_dt(cast(&out, DT::of_candle(out.dtype()).unwrap_or(DT::F64), out_dt)?, out_dt))
    }

    /// Running product along `dim`; integers and bools give int64 (or `dtype`).
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumprod(&self, py: Python<'_>, dim: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let op = "cumprod";
        let (v, src) = self.v_dt();
        let dt = opt_dtype(dtype)?.unwrap_or(if src.is_float() { src } else { DT::I64 });
        let d = norm_dim(dim, v.data.rank(), op)?;
        let x = cast_v(&v, src, dt)?;
        if x.data.rank() == 0 {
            return Ok(PyTensor::wrap_vdt(if dt.is_float() { ops::affine(&x, 1.0, 0.0).op(op)? } else { x }, dt));
        }
        if !dt.is_float() {
            let xd = x.data.clone();
            let out = detach_op(py, op, || sort::scan_i64(&xd, d, true))?;
            return Ok(PyTensor::wrap_dt(cast(&out, DT::I64, dt)?, dt));
        }
        let out = detach_op(py, op, || indexing::cumprod(&x, d))?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    /// `log(cumsum(exp(input), dim))`, computed stably (float inputs only, as PyTorch).
    #[pyo3(signature = (dim))]
    fn logcumsumexp(&self, py: Python<'_>, dim: i64) -> PyResult<PyTensor> {
        let op = "logcumsumexp";
        let (v, dt) = self.v_dt();
        crate::bindings::errors::require_float(op, dt)?;
        let d = norm_dim(dim, v.data.rank(), op)?;
        if v.data.rank() == 0 {
            return Ok(PyTensor::wrap_vdt(ops::affine(&v, 1.0, 0.0).op(op)?, dt));
        }
        let out = detach_op(py, op, || indexing::logcumsumexp(&v, d))?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    /// `log(sum(exp(input), dim))`, computed stably (the maximum is taken out first;
    /// infinite maxima as PyTorch: `+inf` rows give `+inf`, all `-inf` rows `-inf`).
    #[pyo3(signature = (dim, keepdim=false))]
    fn logsumexp(&self, py: Python<'_>, dim: &Bound<'_, PyAny>, keepdim: bool) -> PyResult<PyTensor> {
        let op = "logsumexp";
        let (v, src) = self.v_dt();
        let dt = if src.is_float() { src } else { DT::F32 };
        let x = cast_v(&v, src, dt)?;
        let rank = x.data.rank();
        let dims = reduce_dims(Some(dim), rank, op)?.unwrap_or_default();
        let out = detach_op(py, op, || logsumexp(&x, &dims, keepdim))?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
}

/// `logsumexp` over `dims` (sorted; empty: elementwise identity) from recorded ops, so
/// the gradient (the softmax) comes from the graph.
fn logsumexp(x: &Value, dims: &[usize], keepdim: bool) -> candle_core::Result<Value> {
    let mut kept_shape = x.data.dims().to_vec();
    for &d in dims {
        kept_shape[d] = 1;
    }
    if dims.iter().any(|&d| x.data.dims()[d] == 0) {
        // log(0) over an empty reduction, as PyTorch.
        let mut s = kept_shape.clone();
        if !keepdim {
            s = s.iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &n)| n).collect();
        }
        return Ok(Value::plain(Tensor::full(f64::NEG_INFINITY, s, x.data.device())?.to_dtype(x.data.dtype())?));
    }
    let mut m = x.data.detach();
    if x.data.elem_count() > 0 {
        for &d in dims {
            m = sort::extreme(&m, d, true)?.0;
        }
    }
    // An infinite maximum is taken out as 0, so inf - inf never makes a NaN.
    let inf = m.abs()?.ge(f64::INFINITY)?;
    let m = Value::plain(inf.where_cond(&m.zeros_like()?, &m)?);
    let shifted = ops::sub(x, &ops::broadcast_as(&m, x.data.shape())?)?;
    let s = if dims.is_empty() { ops::exp(&shifted)? } else { ops::reduce_sum(&ops::exp(&shifted)?, dims, true, None)? };
    let out = ops::add(&ops::log(&s)?, &m)?;
    if keepdim {
        return Ok(out);
    }
    let shape: Vec<usize> = x.data.dims().iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &n)| n).collect();
    ops::reshape(&out, &Shape::from(shape))
}
