//! Tensor methods PyTorch users call that are compositions of other ops: the
//! predicates `isnan`, `isinf`, `isfinite`, `isclose`, `allclose`; `fmod` and
//! `divide(rounding_mode=...)`; the aliases `negative` and `absolute`. Each is
//! defined once, here; the `torch.*` function forms in Python forward to them.
use crate::bindings::args::cast;
use crate::bindings::arith::{binary, binop_strict, Operand};
use crate::bindings::errors::{device_err, shape_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::binary::Bin;
use crate::ops::composite::Class;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;

/// A 0/1 Candle result as a bool tensor.
fn mask(t: Tensor) -> PyTensor {
    PyTensor::wrap_dt(t, DT::Bool)
}

/// The class mask of a float32/float64 CPU tensor in one pass (`ops::composite`), or
/// None for the comparisons' general path.
fn classify(x: &PyTensor, c: Class) -> PyResult<Option<PyTensor>> {
    if !x.dt().is_float() || x.is_sparse_coo() {
        return Ok(None);
    }
    Ok(crate::ops::composite::classify(&x.t(), c).op(c.name())?.map(mask))
}

/// `x / y` rounded toward zero, in `x`'s dtype when `x` is integral (PyTorch's
/// `div(rounding_mode="trunc")`).
fn div_trunc(x: &PyTensor, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let q = binop_strict(x, other, Bin::Div)?;
    let (qt, qdt) = q.t_dt();
    let qt = crate::ops::unary::trunc(&qt).op("div")?;
    let dt = x.dt();
    if dt.is_float() {
        Ok(PyTensor::wrap_dt(qt, qdt))
    } else {
        Ok(PyTensor::wrap_dt(cast(&qt, qdt, dt)?, dt))
    }
}

/// `isclose`'s comparison in float64 over the broadcast shapes of `a` and `b`.
fn close(a: &Tensor, b: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> candle_core::Result<Tensor> {
    let diff = a.broadcast_sub(b)?.abs()?;
    let bound = b.abs()?.affine(rtol, atol)?;
    let within = diff.broadcast_le(&bound)?;
    // Equal values (equal infinities included, where the difference is NaN) are close.
    let mut out = within.broadcast_maximum(&a.broadcast_eq(b)?)?;
    if equal_nan {
        let both_nan = a.ne(a)?.broadcast_minimum(&b.ne(b)?)?;
        out = out.broadcast_maximum(&both_nan)?;
    }
    Ok(out)
}

#[pymethods]
impl PyTensor {
    /// True where the value is NaN.
    fn isnan(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if let Some(m) = classify(self, Class::Nan)? {
            return Ok(m);
        }
        Ok(mask(t.ne(&t).op("isnan")?))
    }

    /// True where the value is +inf or -inf.
    fn isinf(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if let Some(m) = classify(self, Class::Inf)? {
            return Ok(m);
        }
        if !self.dt().is_float() {
            return Ok(mask(t.ne(&t).op("isinf")?));
        }
        Ok(mask(t.abs().and_then(|a| a.eq(f64::INFINITY)).op("isinf")?))
    }

    /// True where the value is neither NaN nor infinite.
    fn isfinite(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if let Some(m) = classify(self, Class::Finite)? {
            return Ok(m);
        }
        let eq = t.eq(&t).op("isfinite")?;
        if !self.dt().is_float() {
            return Ok(mask(eq));
        }
        let finite = t.abs().and_then(|a| a.ne(f64::INFINITY)).and_then(|f| f.minimum(&eq)).op("isfinite")?;
        Ok(mask(finite))
    }

    /// `|self - other| <= atol + rtol * |other|` elementwise (or equal, or both NaN
    /// with `equal_nan`), compared in float64 over the broadcast shape.
    #[pyo3(signature = (other, rtol=1e-05, atol=1e-08, equal_nan=false))]
    fn isclose(&self, other: &Bound<'_, PyAny>, rtol: f64, atol: f64, equal_nan: bool) -> PyResult<PyTensor> {
        let (a, adt) = self.t_dt();
        let (b, bdt) = match other.cast::<PyTensor>() {
            Ok(o) => o.get().t_dt(),
            Err(_) => {
                let made = crate::bindings::creation::tensor_from_data(other, Some(adt), None)?;
                let (t, dt) = made.t_dt();
                (t.to_device(a.device()).op("isclose")?, dt)
            }
        };
        if !a.device().same_device(b.device()) {
            return Err(device_err(
                "isclose",
                format!(
                    "Expected all tensors to be on the same device, but found {:?} and {:?}",
                    a.device().location(),
                    b.device().location()
                ),
            ));
        }
        if a.shape().broadcast_shape_binary_op(b.shape(), "isclose").is_err() {
            return Err(shape_err("isclose", format!("shapes {:?} and {:?} cannot be broadcast together", a.dims(), b.dims())));
        }
        let (a, b) = (cast(&a, adt, DT::F64)?, cast(&b, bdt, DT::F64)?);
        Ok(mask(close(&a, &b, rtol, atol, equal_nan).op("isclose")?))
    }

    /// True when every element `isclose` (an empty comparison is True).
    #[pyo3(signature = (other, rtol=1e-05, atol=1e-08, equal_nan=false))]
    fn allclose(&self, other: &Bound<'_, PyAny>, rtol: f64, atol: f64, equal_nan: bool) -> PyResult<bool> {
        let c = self.isclose(other, rtol, atol, equal_nan)?.t();
        let n = c.to_dtype(DType::I64).and_then(|x| x.sum_all()).and_then(|s| s.to_scalar::<i64>()).op("allclose")?;
        Ok(n as usize == c.elem_count())
    }

    /// The remainder of `self / other` with the sign of `self` (C's fmod):
    /// `self - trunc(self / other) * other`.
    fn fmod(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let q = div_trunc(self, other)?;
        let qo = binop_strict(&q, other, Bin::Mul)?;
        let (v, dt) = qo.v_dt();
        binary(self, Operand::T(v, dt), Bin::Sub, false)
    }

    /// Division; `rounding_mode` is None (true division), "floor" or "trunc".
    #[pyo3(signature = (other, *, rounding_mode=None))]
    pub(crate) fn divide(&self, other: &Bound<'_, PyAny>, rounding_mode: Option<&str>) -> PyResult<PyTensor> {
        match rounding_mode {
            None => binop_strict(self, other, Bin::Div),
            Some("floor") => binop_strict(self, other, Bin::FloorDiv),
            Some("trunc") => div_trunc(self, other),
            Some(m) => Err(value_err("div", format!("rounding_mode must be None, 'floor' or 'trunc', got {m:?}"))),
        }
    }

    /// `-self` (an alias of `neg`).
    fn negative(&self) -> PyResult<PyTensor> {
        self.neg()
    }

    /// `|self|` (an alias of `abs`).
    fn absolute(&self) -> PyResult<PyTensor> {
        self.abs()
    }
}
