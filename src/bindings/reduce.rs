//! Reductions (`sum`, `mean`, `max`, `var`, `norm`, `prod`, ...) with `dim` and
//! `keepdim`, and softmax / log-softmax.
use crate::autograd::indexing;
use crate::autograd::{ops, Value};
use crate::bindings::args::{cast, cast_v, norm_dim};
use crate::bindings::arith::binop_strict;
use crate::bindings::errors::{dtype_err, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::bindings::unary::float_input;
use crate::dtype::DT;
use crate::ops::binary::Bin;
use crate::ops::layout::Dense;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;

/// Dims argument of a reduction: None (all), an int, or a sequence of ints.
pub fn reduce_dims(dim: Option<&Bound<'_, PyAny>>, rank: usize, op: &str) -> PyResult<Option<Vec<usize>>> {
    let Some(d) = dim.filter(|d| !d.is_none()) else { return Ok(None) };
    let raw: Vec<i64> = if let Ok(i) = d.extract::<i64>() {
        vec![i]
    } else {
        d.extract::<Vec<i64>>().map_err(|_| type_err(op, "dim must be an int or a tuple of ints"))?
    };
    let mut out = Vec::new();
    for r in raw {
        let n = norm_dim(r, rank, op)?;
        if out.contains(&n) {
            return Err(value_err(op, format!("dim {n} appears multiple times in the list of dims")));
        }
        out.push(n);
    }
    out.sort();
    if rank == 0 {
        // PyTorch accepts dim 0/-1 on a 0-d tensor and reduces over nothing.
        out.clear();
    }
    Ok(Some(out))
}

/// `reduce_dims` for the reductions, where PyTorch reads an empty list of dims
/// (`x.sum(())`) as every dim.
fn reduction_dims(dim: Option<&Bound<'_, PyAny>>, rank: usize, op: &str) -> PyResult<Option<Vec<usize>>> {
    Ok(reduce_dims(dim, rank, op)?.filter(|d| !d.is_empty()))
}

fn squeeze_dims(t: Tensor, dims: &[usize]) -> candle_core::Result<Tensor> {
    let mut t = t;
    for &d in dims.iter().rev() {
        t = t.squeeze(d)?;
    }
    Ok(t)
}

/// Sum over `dims` (all when None); uses the parallel kernel where it applies.
pub fn sum_dims(py: Python<'_>, t: &Value, dims: Option<&[usize]>, keepdim: bool) -> PyResult<Value> {
    let rank = t.data.rank();
    if rank == 0 {
        return Ok(t.clone());
    }
    let all: Vec<usize> = (0..rank).collect();
    let dims = dims.unwrap_or(&all);
    if dims.is_empty() {
        return Ok(t.clone());
    }
    crate::bindings::errors::detach_op(py, "sum", || ops::reduce_sum(t, dims, keepdim, None))
}

impl PyTensor {
    fn minmax<'py>(&self, py: Python<'py>, dim: Option<&Bound<'py, PyAny>>, keepdim: bool, is_max: bool) -> PyResult<Bound<'py, PyAny>> {
        let name = if is_max { "max" } else { "min" };
        if let Some(d) = dim {
            if d.cast::<PyTensor>().is_ok() {
                let r = binop_strict(self, d, if is_max { Bin::Max } else { Bin::Min })?;
                return Ok(Py::new(py, r)?.into_bound(py).into_any());
            }
        }
        let (v, dt) = self.v_dt();
        let t = v.data.clone();
        match dim.filter(|d| !d.is_none()) {
            None => {
                if t.elem_count() == 0 {
                    return Err(value_err(
                        name,
                        "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                    ));
                }
                let out = (|| {
                    let flat = t.flatten_all()?;
                    let o = crate::ops::sort::extreme(&flat, 0, is_max)?.0.squeeze(0)?;
                    if !ops::records(&[&v]) {
                        return Ok(Value::plain(o));
                    }
                    let kept = candle_core::Shape::from(vec![1usize; t.rank()]);
                    let all: Vec<usize> = (0..t.rank()).collect();
                    indexing::extreme_even(&v, o, &kept, &all, true, if is_max { "MaxBackward1" } else { "MinBackward1" })
                })()
                .op(name)?;
                Ok(Py::new(py, PyTensor::wrap_vdt(out, dt))?.into_bound(py).into_any())
            }
            Some(d) => {
                let d: i64 = d.extract().map_err(|_| type_err(name, "dim must be an int"))?;
                let d = norm_dim(d, t.rank(), name)?;
                if t.rank() == 0 {
                    let idx = Tensor::new(0i64, t.device()).op(name)?;
                    return crate::bindings::formatting::minmax_result(
                        py,
                        PyTensor::wrap_vdt(v.clone(), dt),
                        PyTensor::wrap_dt(idx, DT::I64),
                        is_max,
                    );
                }
                if t.dims()[d] == 0 {
                    return Err(value_err(name, format!("cannot compute {name} over an empty dimension {d} of shape {:?}", t.dims())));
                }
                let mut shape = t.dims().to_vec();
                if keepdim {
                    shape[d] = 1;
                } else {
                    shape.remove(d);
                }
                let (val, i) = if t.elem_count() == 0 {
                    (
                        Value::plain(Tensor::zeros(shape.clone(), t.dtype(), t.device()).op(name)?),
                        Tensor::zeros(shape, DType::I64, t.device()).op(name)?,
                    )
                } else {
                    // NaN propagates, with the index of the first NaN (Candle's kernels skip it).
                    let (raw, i) = crate::bindings::errors::detach_op(py, name, || crate::ops::sort::extreme(&t, d, is_max))?;
                    let raw = raw.reshape(shape.as_slice()).op(name)?;
                    let val = indexing::select_along(&v, raw, &i, d, if is_max { "MaxBackward0" } else { "MinBackward0" }).op(name)?;
                    (val, i.to_dtype(DType::I64).and_then(|i| i.reshape(shape.as_slice())).op(name)?)
                };
                crate::bindings::formatting::minmax_result(py, PyTensor::wrap_vdt(val, dt), PyTensor::wrap_dt(i, DT::I64), is_max)
            }
        }
    }

    fn argminmax(&self, dim: Option<i64>, keepdim: bool, is_max: bool) -> PyResult<PyTensor> {
        let name = if is_max { "argmax" } else { "argmin" };
        let t = self.t();
        if t.elem_count() == 0 {
            return Err(value_err(name, "Expected reduction dim to be specified for input.numel() == 0."));
        }
        let (t, d, shape_all) = match dim {
            None => (t.flatten_all().op(name)?, 0usize, true),
            Some(d) => {
                let d = norm_dim(d, t.rank(), name)?;
                if t.rank() == 0 {
                    (t.reshape(1).op(name)?, 0, true)
                } else {
                    (t.clone(), d, false)
                }
            }
        };
        let i = crate::ops::sort::extreme(&t, d, is_max).map(|r| r.1).op(name)?;
        let i = if shape_all {
            let i = i.squeeze(0).op(name)?;
            if keepdim {
                i.reshape(vec![1usize; self.t().rank()]).op(name)?
            } else {
                i
            }
        } else if keepdim {
            i
        } else {
            i.squeeze(d).op(name)?
        };
        Ok(PyTensor::wrap_dt(i, DT::I64))
    }

    fn var_impl(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, correction: f64, keepdim: bool, op: &str) -> PyResult<PyTensor> {
        let (t, dt) = float_input(self)?;
        let rank = t.data.rank();
        let dims = reduction_dims(dim, rank, op)?;
        let all: Vec<usize> = (0..rank).collect();
        let dl = dims.clone().unwrap_or(all);
        let n: usize = dl.iter().map(|&d| t.data.dims()[d]).product::<usize>().max(if rank == 0 { 1 } else { 0 });
        let mean = ops::affine(&sum_dims(py, &t, Some(&dl), true)?, 1.0 / n as f64, 0.0).op(op)?;
        let diff = ops::sub(&t, &mean).op(op)?;
        let ss = sum_dims(py, &ops::sqr(&diff).op(op)?, Some(&dl), keepdim)?;
        let denom = n as f64 - correction;
        let out = ops::affine(&ss, if denom <= 0.0 { f64::NAN } else { 1.0 / denom }, 0.0).op(op)?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
}

/// `v ** q` (q > 0, v >= 0) with the gradient at `v == 0` taken as 0, as PyTorch's norm
/// backward masks it (the plain power's derivative is infinite there for q < 1).
fn pow_zero_safe(v: &Value, q: f64) -> candle_core::Result<Value> {
    let zero = v.data.eq(0.0)?;
    let safe = ops::where_cond(&zero, &Value::plain(v.data.ones_like()?), v)?;
    let nonzero = Value::plain(zero.to_dtype(v.data.dtype())?.affine(-1.0, 1.0)?);
    ops::mul(&ops::powf(&safe, q)?, &nonzero)
}

/// PyTorch's `var(unbiased: bool)` overload: a bool where `dim` goes is `unbiased`.
fn unbiased_first<'a, 'py>(
    dim: Option<&'a Bound<'py, PyAny>>,
    unbiased: Option<bool>,
    op: &str,
) -> PyResult<(Option<&'a Bound<'py, PyAny>>, Option<bool>)> {
    match dim {
        Some(d) if d.is_instance_of::<pyo3::types::PyBool>() => {
            if unbiased.is_some() {
                return Err(type_err(op, "unbiased was given twice (a bool in place of dim, and unbiased=)"));
            }
            Ok((None, Some(d.extract::<bool>()?)))
        }
        _ => Ok((dim, unbiased)),
    }
}

fn correction_of(unbiased: Option<bool>, correction: Option<f64>) -> f64 {
    match (correction, unbiased) {
        (Some(c), _) => c,
        (None, Some(false)) => 0.0,
        _ => 1.0,
    }
}

#[pymethods]
impl PyTensor {
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn sum(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src_dt = self.dt();
        let dt = match crate::bindings::args::opt_dtype(dtype)? {
            Some(d) => d,
            None if src_dt.is_float() => src_dt,
            None => DT::I64,
        };
        let t = cast_v(&self.v(), src_dt, dt)?;
        let dims = reduction_dims(dim, t.data.rank(), "sum")?;
        let out = sum_dims(py, &t, dims.as_deref(), keepdim)?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn mean(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src_dt = self.dt();
        let dt = crate::bindings::args::opt_dtype(dtype)?.unwrap_or(src_dt);
        if !dt.is_float() {
            return Err(dtype_err(
                "mean",
                format!("could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", dt.name()),
            ));
        }
        let t = cast_v(&self.v(), src_dt, dt)?;
        let dims = reduction_dims(dim, t.data.rank(), "mean")?;
        let n: usize = match &dims {
            None => t.data.elem_count(),
            Some(d) => d.iter().map(|&i| t.data.dims()[i]).product(),
        };
        let scale = if n == 0 { f64::NAN } else { 1.0 / n as f64 };
        let rank = t.data.rank();
        let all: Vec<usize> = (0..rank).collect();
        let dl = dims.clone().unwrap_or(all);
        let out = if rank == 0 || dl.is_empty() {
            ops::affine(&t, scale, 0.0).op("mean")?
        } else {
            crate::bindings::errors::detach_op(py, "mean", || ops::reduce_sum(&t, &dl, keepdim, Some(scale)))?
        };
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    #[pyo3(signature = (dim=None, keepdim=false))]
    fn max<'py>(&self, py: Python<'py>, dim: Option<&Bound<'py, PyAny>>, keepdim: bool) -> PyResult<Bound<'py, PyAny>> {
        self.minmax(py, dim, keepdim, true)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn min<'py>(&self, py: Python<'py>, dim: Option<&Bound<'py, PyAny>>, keepdim: bool) -> PyResult<Bound<'py, PyAny>> {
        self.minmax(py, dim, keepdim, false)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amax(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<PyTensor> {
        self.amaxmin(py, dim, keepdim, true)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amin(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<PyTensor> {
        self.amaxmin(py, dim, keepdim, false)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        self.argminmax(dim, keepdim, true)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        self.argminmax(dim, keepdim, false)
    }
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn var(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<f64>,
    ) -> PyResult<PyTensor> {
        let (dim, unbiased) = unbiased_first(dim, unbiased, "var")?;
        self.var_impl(py, dim, correction_of(unbiased, correction), keepdim, "var")
    }
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn std(
        &self,
        py: Python<'_>,
        dim: Option<&Bound<'_, PyAny>>,
        unbiased: Option<bool>,
        keepdim: bool,
        correction: Option<f64>,
    ) -> PyResult<PyTensor> {
        let (dim, unbiased) = unbiased_first(dim, unbiased, "std")?;
        let v = self.var_impl(py, dim, correction_of(unbiased, correction), keepdim, "std")?;
        let dt = v.dt();
        Ok(PyTensor::wrap_vdt(ops::sqrt(&v.v()).op("std")?, dt))
    }
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumsum(&self, py: Python<'_>, dim: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src = self.dt();
        let dt = crate::bindings::args::opt_dtype(dtype)?.unwrap_or(if src.is_float() { src } else { DT::I64 });
        let t = self.v();
        if t.data.rank() == 0 {
            return Ok(PyTensor::wrap_vdt(cast_v(&t, src, dt)?, dt));
        }
        let d = norm_dim(dim, t.data.rank(), "cumsum")?;
        if !dt.is_float() {
            // Integers sum exactly in int64, then take the asked dtype.
            let x = cast(&t.data, src, DT::I64)?;
            let out = crate::bindings::errors::detach_op(py, "cumsum", || crate::ops::sort::scan_i64(&x, d, false))?;
            return Ok(PyTensor::wrap_dt(cast(&out, DT::I64, dt)?, dt));
        }
        let x = cast_v(&t, src, dt)?;
        let out = crate::bindings::errors::detach_op(py, "cumsum", || indexing::cumsum(&x, d))?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
    #[pyo3(signature = (dim, dtype=None))]
    fn softmax(&self, py: Python<'_>, dim: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        softmax_impl(py, self, dim, dtype, false)
    }
    #[pyo3(signature = (dim, dtype=None))]
    fn log_softmax(&self, py: Python<'_>, dim: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        softmax_impl(py, self, dim, dtype, true)
    }
    /// Product of all elements, or over `dim` (keepdim); ints and bools give int64.
    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn prod(&self, py: Python<'_>, dim: Option<i64>, keepdim: bool, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src = self.dt();
        // Inside autocast, prod runs in float32 (it is on PyTorch's autocast float32 list).
        let autocast = crate::bindings::autocast::lower_dtype(self.t().device()).is_some() && crate::bindings::autocast::eligible(src);
        let dt = crate::bindings::args::opt_dtype(dtype)?.unwrap_or(if autocast {
            DT::F32
        } else if src.is_float() {
            src
        } else {
            DT::I64
        });
        if matches!(dt, DT::F16 | DT::BF16) {
            // Multiply in f32 and round once at the end, as PyTorch's CPU kernel accumulates.
            let x = cast(&self.t(), src, DT::F32)?;
            let r = PyTensor::wrap_dt(x, DT::F32).prod(py, dim, keepdim, None)?;
            return Ok(PyTensor::wrap_dt(cast(&r.t(), DT::F32, dt)?, dt));
        }
        let t = cast_v(&self.v(), src, dt)?;
        let rank = t.data.rank();
        let out = match dim {
            None => crate::bindings::errors::detach_op(py, "prod", || {
                let flat = ops::reshape(&t, &candle_core::Shape::from(t.data.elem_count()))?;
                let shape = candle_core::Shape::from(if keepdim { vec![1usize; rank] } else { vec![] });
                indexing::prod(&flat, 0, &shape, "ProdBackward0")
            })?,
            Some(d) => {
                if rank == 0 {
                    norm_dim(d, 0, "prod")?;
                    t.clone()
                } else {
                    let d = norm_dim(d, rank, "prod")?;
                    let mut shape = t.data.dims().to_vec();
                    if keepdim {
                        shape[d] = 1;
                    } else {
                        shape.remove(d);
                    }
                    crate::bindings::errors::detach_op(py, "prod", || {
                        indexing::prod(&t, d, &candle_core::Shape::from(shape), "ProdBackward1")
                    })?
                }
            }
        };
        Ok(PyTensor::wrap_vdt(out, dt))
    }

    #[pyo3(signature = (dim=None, keepdim=false))]
    fn all(&self, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        self.anyall(dim, keepdim, false)
    }
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn any(&self, dim: Option<i64>, keepdim: bool) -> PyResult<PyTensor> {
        self.anyall(dim, keepdim, true)
    }
    #[pyo3(signature = (p=None, dim=None, keepdim=false))]
    fn norm(&self, py: Python<'_>, p: Option<f64>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<PyTensor> {
        if !self.dt().is_float() {
            return Err(dtype_err("norm", format!("Expected a floating point tensor as input. Got {}", self.dt().name())));
        }
        let (t, dt) = float_input(self)?;
        let p = p.unwrap_or(2.0);
        let dims = reduction_dims(dim, t.data.rank(), "norm")?;
        if p.is_infinite() {
            // max |x| (min |x| for -inf): the gradient is shared among the extreme elements.
            let a = crate::autograd::pointwise::abs(&t).op("norm")?;
            return PyTensor::wrap_vdt(a, dt).amaxmin(py, dim, keepdim, p > 0.0);
        }
        if p == 0.0 {
            // The count of nonzero elements. PyTorch's node gives the input no gradient
            // (its `.grad` stays None), so the node here returns none either.
            let nz = t.data.ne(0.0).and_then(|m| m.to_dtype(t.data.dtype())).op("norm")?;
            let count = sum_dims(py, &Value::plain(nz), dims.as_deref(), keepdim)?.data;
            let out = ops::record("LinalgVectorNormBackward0", &[&t], count, &[], false, |_, _, _| Ok(vec![None]));
            return Ok(PyTensor::wrap_vdt(out, dt));
        }
        let out = if p == 2.0 && t.data.rank() > 0 {
            let all: Vec<usize> = (0..t.data.rank()).collect();
            let dims = dims.unwrap_or(all);
            crate::bindings::errors::detach_op(py, "norm", || ops::norm2(&t, &dims, keepdim))?
        } else if p == 2.0 {
            pow_zero_safe(&sum_dims(py, &ops::sqr(&t).op("norm")?, dims.as_deref(), keepdim)?, 0.5).op("norm")?
        } else {
            let a = crate::autograd::pointwise::abs(&t).op("norm")?;
            if p == 1.0 {
                sum_dims(py, &a, dims.as_deref(), keepdim)?
            } else if p > 0.0 {
                pow_zero_safe(&sum_dims(py, &pow_zero_safe(&a, p).op("norm")?, dims.as_deref(), keepdim)?, 1.0 / p).op("norm")?
            } else {
                ops::powf(&sum_dims(py, &ops::powf(&a, p).op("norm")?, dims.as_deref(), keepdim)?, 1.0 / p).op("norm")?
            }
        };
        Ok(PyTensor::wrap_vdt(out, dt))
    }
}

impl PyTensor {
    fn amaxmin(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool, is_max: bool) -> PyResult<PyTensor> {
        let name = if is_max { "amax" } else { "amin" };
        let v = self.v();
        let t = v.data.clone();
        let dims = reduction_dims(dim, t.rank(), name)?.unwrap_or_else(|| (0..t.rank()).collect());
        if t.elem_count() != 0 && self.dt().is_float() && v.requires_grad() {
            let ds = dims.clone();
            let out = crate::bindings::errors::detach_op(py, name, || {
                let mut o = t.clone();
                for &d in ds.iter() {
                    o = crate::ops::reduce::extreme_values(&o, d, is_max)?;
                }
                let kept = o.shape().clone();
                let o = if keepdim { o } else { squeeze_dims(o, &ds)? };
                indexing::extreme_even(&v, o, &kept, &ds, false, if is_max { "AmaxBackward0" } else { "AminBackward0" })
            })?;
            return Ok(PyTensor::wrap_v(out, false));
        }
        let mut out = t.clone();
        for &d in dims.iter() {
            if out.dims()[d] == 0 {
                return Err(value_err(name, format!("cannot reduce over the empty dimension {d} of shape {:?}", t.dims())));
            }
            if out.elem_count() == 0 {
                // Another dim is empty: the result is empty too (Candle refuses empty reductions).
                let mut shape = out.dims().to_vec();
                shape[d] = 1;
                out = Tensor::zeros(shape, out.dtype(), out.device()).op(name)?;
                continue;
            }
            out = crate::bindings::errors::detach_op(py, name, || crate::ops::reduce::extreme_values(&out, d, is_max))?;
        }
        if !keepdim {
            out = squeeze_dims(out, &dims).op(name)?;
        }
        Ok(PyTensor::wrap_dt(out, self.dt()))
    }

    fn anyall(&self, dim: Option<i64>, keepdim: bool, any: bool) -> PyResult<PyTensor> {
        let name = if any { "any" } else { "all" };
        let t = self.t();
        if dim.is_none() && t.device().is_cpu() && t.dtype() == DType::U8 {
            // Bool tensors (masks) over all elements: one scan, no temporaries.
            let d = t.dense().op(name)?;
            let (st, l) = d.storage_and_layout();
            if let (candle_core::Storage::Cpu(candle_core::CpuStorage::U8(v)), Some((a, b))) = (&*st, l.contiguous_offsets()) {
                let v = &v[a..b];
                let hit = if any { v.iter().any(|&x| x != 0) } else { v.iter().all(|&x| x != 0) };
                return Ok(PyTensor::wrap_dt(Tensor::new(u8::from(hit), &candle_core::Device::Cpu).op(name)?, DT::Bool));
            }
        }
        // Counted in float64: exact for any size (float32 stops counting at 2^24).
        let nz = t.ne(&t.zeros_like().op(name)?).and_then(|m| m.to_dtype(DType::F64)).op(name)?;
        let out = match dim {
            None => {
                let s = nz.sum_all().op(name)?;
                if any { s.gt(0.0) } else { s.ge(t.elem_count() as f64) }.op(name)?
            }
            Some(d) => {
                let d = norm_dim(d, t.rank(), name)?;
                let n = if t.rank() == 0 { 1 } else { t.dims()[d] };
                let s = if t.rank() == 0 { nz.clone() } else { nz.sum_keepdim(d).op(name)? };
                let s = if any { s.gt(0.0) } else { s.ge(n as f64) }.op(name)?;
                if keepdim || t.rank() == 0 {
                    s
                } else {
                    s.squeeze(d).op(name)?
                }
            }
        };
        Ok(PyTensor::wrap_dt(out, DT::Bool))
    }
}

pub fn softmax_impl(py: Python<'_>, a: &PyTensor, dim: i64, dtype: Option<&Bound<'_, PyAny>>, log: bool) -> PyResult<PyTensor> {
    let name = if log { "log_softmax" } else { "softmax" };
    let src = a.dt();
    let requested = crate::bindings::args::opt_dtype(dtype)?;
    // As PyTorch: an integer input needs an explicit float `dtype` to compute in.
    // (PyTorch raises NotImplementedError; ours is DTypeError, a TypeError, since
    // NotImplementedError here means a missing feature, never bad input.)
    if requested.is_none() && !src.is_float() {
        return Err(crate::bindings::errors::dtype_err(
            name,
            format!("not implemented for {} tensors; pass a float dtype (dtype=float32) or convert first", src.name()),
        ));
    }
    let dt = requested.unwrap_or(src);
    if !dt.is_float() {
        return Err(dtype_err(name, "softmax needs a floating point dtype"));
    }
    let t = cast_v(&a.v(), src, dt)?;
    if t.data.rank() == 0 {
        let one = if log { t.data.zeros_like() } else { t.data.ones_like() }.op(name)?;
        let out =
            crate::autograd::pointwise::constant_pieces(&t, one, if log { "LogSoftmaxBackward0" } else { "SoftmaxBackward0" }).op(name)?;
        return Ok(PyTensor::wrap_vdt(out, dt));
    }
    let d = norm_dim(dim, t.data.rank(), name)?;
    let out = crate::bindings::errors::detach_op(py, name, || ops::softmax(&t, d, log))?;
    Ok(PyTensor::wrap_vdt(out, dt))
}
