//! Unary methods (`exp`, `floor`, `clamp`, ...) and `where`: integer inputs
//! compute in float32 where PyTorch does.
use crate::autograd::{composed, custom, ops, special, Value};
use crate::bindings::args::cast;
use crate::bindings::arith::Operand;
use crate::bindings::arith::{assign_inplace, binop_strict, number, operand, result_dt, write_direct};
use crate::bindings::errors::detach_if;
use crate::bindings::errors::{dtype_err, shape_err, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::assign::{unary_assign, Unary};
use crate::ops::binary::Bin;
use crate::ops::layout::Dense;
use crate::ops::unary::round_half_even;
use candle_core::Tensor;
use pyo3::prelude::*;
use std::sync::Arc;

/// Unary float functions: integer inputs compute in the default float dtype
/// (float32 unless `set_default_dtype` changed it), as in PyTorch.
pub(crate) fn float_input(a: &PyTensor) -> PyResult<(Value, DT)> {
    let (v, dt) = a.v_dt();
    if dt.is_float() {
        Ok((v, dt))
    } else {
        let f = crate::bindings::dtype::default_float();
        Ok((Value::plain(cast(&v.data, dt, f)?), f))
    }
}

/// Rows of `unary_float!` that PyTorch has no integer or bool kernel for (it raises
/// NotImplementedError); the others compute integers in the default float dtype.
const FLOAT_ONLY: &[&str] = &["frac"];

macro_rules! unary_float {
    ($($name:ident => $f:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            fn $name(&self) -> PyResult<PyTensor> {
                if FLOAT_ONLY.contains(&stringify!($name)) && !self.dt().is_float() {
                    return Err(dtype_err(stringify!($name), format!("\"{}\" is not implemented for {}", stringify!($name), self.dt().name())));
                }
                let (v, dt) = float_input(self)?;
                let f: fn(&Value) -> candle_core::Result<Value> = $f;
                let out = detach_if(v.data.elem_count(), || f(&v)).op(stringify!($name))?;
                Ok(PyTensor::wrap_vdt(out, dt))
            }
            )*
        }
    };
}

unary_float! {
    exp => ops::exp,
    log => ops::log,
    log2 => |t| ops::affine(&ops::log(t)?, 1.0 / std::f64::consts::LN_2, 0.0),
    log10 => |t| ops::affine(&ops::log(t)?, 1.0 / std::f64::consts::LN_10, 0.0),
    log1p => ops::log1p,
    expm1 => ops::expm1,
    sqrt => ops::sqrt,
    rsqrt => ops::rsqrt,
    sin => ops::sin,
    cos => ops::cos,
    tan => |t| ops::div(&ops::sin(t)?, &ops::cos(t)?),
    tanh => ops::tanh,
    sigmoid => ops::sigmoid,
    erf => ops::erf,
    reciprocal => ops::recip,
    frac => |t| crate::autograd::pointwise::frac(t, crate::ops::unary::trunc(&t.data).and_then(|w| t.data.sub(&w))?),
    atan => special::atan,
    asin => special::asin,
    acos => special::acos,
    sinh => special::sinh,
    cosh => special::cosh,
    asinh => special::asinh,
    acosh => special::acosh,
    atanh => special::atanh,
    arctan => special::atan,
    arcsin => special::asin,
    arccos => special::acos,
    arcsinh => special::asinh,
    arccosh => special::acosh,
    arctanh => special::atanh,
    exp2 => special::exp2,
    erfc => special::erfc,
    erfinv => special::erfinv,
    lgamma => special::lgamma,
    digamma => special::digamma,
}

/// `atan2(y, x)` with PyTorch's promotion (integers compute in the default float dtype).
fn atan2_of(y: &PyTensor, other: &Bound<'_, PyAny>, op: &'static str) -> PyResult<PyTensor> {
    let Some(o @ Operand::T(..)) = operand(other)? else {
        return Err(type_err(op, format!("argument 'other' must be Tensor, not {}", other.get_type().name()?)));
    };
    let (yv, ydt) = y.v_dt();
    let dt = result_dt(ydt, yv.data.rank() == 0, &o);
    let dt = if dt.is_float() { dt } else { crate::bindings::dtype::default_float() };
    let Operand::T(xv, xdt) = o else { unreachable!("matched above") };
    crate::bindings::errors::same_device(op, [&yv.data, &xv.data])?;
    let (a, b) = (crate::bindings::args::cast_v(&yv, ydt, dt)?, crate::bindings::args::cast_v(&xv, xdt, dt)?);
    if a.data.shape().broadcast_shape_binary_op(b.data.shape(), op).is_err() {
        return Err(shape_err(
            op,
            format!(
                "the size of tensor a {:?} must match the size of tensor b {:?} at a non-singleton dimension",
                a.data.dims(),
                b.data.dims()
            ),
        ));
    }
    let n = a.data.elem_count().max(b.data.elem_count());
    let out = detach_if(n, || special::atan2(&a, &b)).op(op)?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

#[pymethods]
impl PyTensor {
    /// The angle of the point (other, self), elementwise with broadcasting: `atan2(self, other)`.
    fn atan2(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        atan2_of(self, other, "atan2")
    }
    /// Alias of `atan2`.
    fn arctan2(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        atan2_of(self, other, "arctan2")
    }
    /// The n-th derivative of `digamma` (n = 0 is digamma itself), elementwise.
    fn polygamma(&self, n: i64) -> PyResult<PyTensor> {
        if n < 0 {
            return Err(value_err("polygamma", format!("polygamma(n, x) does not support negative n, got n={n}")));
        }
        let (v, dt) = float_input(self)?;
        let out = detach_if(v.data.elem_count(), || special::polygamma(n as u32, &v)).op("polygamma")?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
}

macro_rules! unary_round {
    ($($name:ident, $node:literal => $f:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            /// Integer inputs are already whole: returned unchanged, keeping their dtype (as
            /// PyTorch); bools raise, as PyTorch has no kernel for them.
            fn $name(&self) -> PyResult<PyTensor> {
                let (v, dt) = self.v_dt();
                if dt == DT::Bool {
                    return Err(dtype_err(stringify!($name), format!("\"{}\" is not implemented for bool", stringify!($name))));
                }
                if !dt.is_float() {
                    return Ok(PyTensor::wrap_dt(v.data.dense_copy().op(stringify!($name))?, dt));
                }
                let f: fn(&Tensor) -> candle_core::Result<Tensor> = $f;
                let out = f(&v.data).and_then(|o| crate::autograd::pointwise::constant_pieces(&v, o, $node)).op(stringify!($name))?;
                Ok(PyTensor::wrap_vdt(out, dt))
            }
            )*
        }
    };
}

unary_round! {
    floor, "FloorBackward0" => |t| crate::ops::unary::fast(t, crate::ops::unary::Fast::Floor),
    ceil, "CeilBackward0" => |t| crate::ops::unary::fast(t, crate::ops::unary::Fast::Ceil),
    trunc, "TruncBackward0" => crate::ops::unary::trunc,
}

#[pymethods]
impl PyTensor {
    /// Round half to even; with `decimals`, to that many decimal places (negative: to
    /// tens, hundreds, ...), computed as PyTorch does: `round(x * 10**d) / 10**d` in the
    /// input's dtype (`round(x / 10**-d) * 10**-d` for d < 0). Integer inputs are
    /// returned unchanged without `decimals` and raise with it, as in PyTorch.
    #[pyo3(signature = (*, decimals=None))]
    fn round(&self, decimals: Option<i64>) -> PyResult<PyTensor> {
        let (v, dt) = self.v_dt();
        if dt == DT::Bool || (decimals.is_some() && !dt.is_float()) {
            return Err(dtype_err("round", format!("\"round\" is not implemented for {}", dt.name())));
        }
        if !dt.is_float() {
            return Ok(PyTensor::wrap_dt(v.data.dense_copy().op("round")?, dt));
        }
        let t = &v.data;
        let Some(d) = decimals else {
            let out = round_half_even(t).and_then(|o| crate::autograd::pointwise::constant_pieces(&v, o, "RoundBackward0")).op("round")?;
            return Ok(PyTensor::wrap_vdt(out, dt));
        };
        let out = (|| {
            let p = Tensor::new(10f64.powi(d.unsigned_abs().min(400) as i32), t.device())?.to_dtype(t.dtype())?;
            if d >= 0 {
                round_half_even(&t.broadcast_mul(&p)?)?.broadcast_div(&p)
            } else {
                round_half_even(&t.broadcast_div(&p)?)?.broadcast_mul(&p)
            }
        })()
        .and_then(|o| crate::autograd::pointwise::constant_pieces(&v, o, "RoundBackward1"))
        .op("round")?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
    /// Exact GELU, `x * Phi(x)`: the parallel kernel behind `F.gelu` / `nn.GELU`.
    fn _gelu(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let (v, dt) = float_input(self)?;
        let k = crate::layers::activation::gelu_kernel(&v.data).map(custom::Op::one);
        let out = crate::bindings::errors::detach_op(py, "gelu", || {
            custom::fused_or(
                "GeluBackward0",
                k,
                &[&v],
                |x| crate::layers::activation::gelu_erf(&x[0]),
                Arc::new(|x: &[Value]| composed::gelu_erf(&x[0])),
            )
        })?;
        Ok(PyTensor::wrap_vdt(out, dt))
    }
    fn relu(&self) -> PyResult<PyTensor> {
        let v = self.v();
        let k = crate::layers::activation::relu_kernel(&v.data).map(custom::Op::one);
        let out = custom::fused_or(
            "ReluBackward0",
            k,
            &[&v],
            |x| crate::layers::activation::relu(&x[0]),
            Arc::new(|x: &[Value]| composed::relu(&x[0])),
        );
        Ok(PyTensor::wrap_vdt(out.op("relu")?, self.dt()))
    }
    fn square(&self) -> PyResult<PyTensor> {
        let v = self.v();
        if self.dt().is_float() {
            return Ok(PyTensor::wrap_vdt(ops::sqr(&v).op("square")?, self.dt()));
        }
        // Candle has no integer sqr kernel.
        let t = v.data;
        Ok(PyTensor::wrap_dt(t.mul(&t).op("square")?, self.dt()))
    }
    fn sign(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if !self.dt().is_float() {
            let z = t.zeros_like().op("sign")?;
            let p = t.gt(&z).and_then(|p| p.to_dtype(t.dtype())).op("sign")?;
            let n = t.lt(&z).and_then(|n| n.to_dtype(t.dtype())).op("sign")?;
            return Ok(PyTensor::wrap_dt(p.sub(&n).op("sign")?, self.dt()));
        }
        // Piecewise constant: in the graph with a zero gradient, as PyTorch's SignBackward0.
        let v = self.v();
        let out = crate::ops::unary::fast(&t, crate::ops::unary::Fast::Sign)
            .and_then(|o| crate::autograd::pointwise::constant_pieces(&v, o, "SignBackward0"))
            .op("sign")?;
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }

    /// `clamp(min=None, max=None)`; bounds may be numbers or tensors.
    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let min = min.filter(|m| !m.is_none());
        let max = max.filter(|m| !m.is_none());
        if min.is_none() && max.is_none() {
            return Err(value_err("clamp", "At least one of 'min' or 'max' must not be None"));
        }
        let v = self.v();
        // Number bounds on a tensor in the graph: PyTorch's clamp gradient (0 at the bounds).
        if let Some((lo, hi)) = number_bounds(min, max).filter(|_| v.requires_grad() && crate::autograd::grad_enabled()) {
            let plain = PyTensor::wrap(v.data.detach(), self.is_bool);
            let out = clamp_by_extremes(plain, min, max)?.t();
            return Ok(PyTensor::wrap_v(crate::autograd::pointwise::clamp_scalar(&v, out, lo, hi).op("clamp")?, self.is_bool));
        }
        clamp_by_extremes(PyTensor::wrap_v(v, self.is_bool), min, max)
    }
    /// `F.hardtanh`'s clamp (also `relu6`): on a tensor in the graph, PyTorch's
    /// `HardtanhBackward0`, which passes the gradient strictly inside and at NaN.
    fn _hardtanh(&self, py: Python<'_>, min_val: f64, max_val: f64) -> PyResult<PyTensor> {
        let (lo, hi) = (pyo3::types::PyFloat::new(py, min_val), pyo3::types::PyFloat::new(py, max_val));
        let v = self.v();
        if !(v.requires_grad() && crate::autograd::grad_enabled()) {
            return self.clamp(Some(lo.as_any()), Some(hi.as_any()));
        }
        let out = clamp_by_extremes(PyTensor::wrap(v.data.detach(), self.is_bool), Some(lo.as_any()), Some(hi.as_any()))?.t();
        Ok(PyTensor::wrap_v(crate::autograd::pointwise::hardtanh(&v, out, min_val, max_val).op("hardtanh")?, self.is_bool))
    }
    /// `max(self, min)` elementwise (`clamp(min=min)`).
    fn clamp_min(&self, min: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.clamp(Some(min), None)
    }
    /// `min(self, max)` elementwise (`clamp(max=max)`).
    fn clamp_max(&self, max: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        self.clamp(None, Some(max))
    }
    #[pyo3(signature = (min=None, max=None))]
    fn clip(&self, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        self.clamp(min, max)
    }
    /// `clamp` written into this tensor in place; returns it.
    #[pyo3(signature = (min=None, max=None))]
    fn clamp_(slf: &Bound<'_, Self>, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
        clamp_inplace(slf, min, max, "clamp_")
    }
    /// `clip` written into this tensor in place; returns it.
    #[pyo3(signature = (min=None, max=None))]
    fn clip_(slf: &Bound<'_, Self>, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
        clamp_inplace(slf, min, max, "clip_")
    }
    /// `clamp_min` written into this tensor in place; returns it.
    fn clamp_min_(slf: &Bound<'_, Self>, min: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        clamp_inplace(slf, Some(min), None, "clamp_min_")
    }
    /// `clamp_max` written into this tensor in place; returns it.
    fn clamp_max_(slf: &Bound<'_, Self>, max: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        clamp_inplace(slf, None, Some(max), "clamp_max_")
    }

    fn masked_fill(&self, mask: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let m = mask.get();
        if !m.is_bool {
            return Err(dtype_err("masked_fill", format!("mask must be a bool tensor, got {}", m.dt().name())));
        }
        let v = match crate::bindings::args::extract_scalar(value) {
            Some(s) => Value::plain(s.tensor(self.dt(), self.t().device())?),
            None => match value.cast::<PyTensor>() {
                Ok(t) => {
                    let (tv, d) = t.get().v_dt();
                    if tv.data.rank() != 0 {
                        return Err(value_err("masked_fill", "value must be a number or a 0-d tensor"));
                    }
                    crate::bindings::args::cast_v(&tv, d, self.dt())?
                }
                Err(_) => {
                    let (t, d) = crate::bindings::creation::as_tensor_arg(value, "masked_fill")?;
                    if t.rank() != 0 {
                        return Err(value_err("masked_fill", "value must be a number or a 0-d tensor"));
                    }
                    Value::plain(cast(&t, d, self.dt())?)
                }
            },
        };
        let out = where_(&m.t(), &v, &self.v(), "masked_fill")?;
        if out.data.dims() != self.t().dims() {
            return Err(shape_err(
                "masked_fill",
                format!("mask of shape {:?} cannot broadcast to the tensor's shape {:?}", m.t().dims(), self.t().dims()),
            ));
        }
        Ok(PyTensor::wrap_vdt(out, self.dt()))
    }
    fn masked_fill_(slf: &Bound<'_, Self>, mask: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = slf.get().inplace_source().masked_fill(mask, value)?;
        assign_inplace(slf.get(), r, "masked_fill_")?;
        Ok(slf.clone().unbind())
    }
}

/// `where(cond, x, y)` with all three broadcast together.
pub fn where_(cond: &Tensor, x: &Value, y: &Value, op: &str) -> PyResult<Value> {
    let (xd, yd) = (&x.data, &y.data);
    let s1 = cond.shape().broadcast_shape_binary_op(xd.shape(), "where");
    let shape = s1.and_then(|s| s.broadcast_shape_binary_op(yd.shape(), "where")).map_err(|_| {
        shape_err(op, format!("shapes {:?}, {:?} and {:?} cannot be broadcast together", cond.dims(), xd.dims(), yd.dims()))
    })?;
    let c = cond.broadcast_as(&shape).op(op)?;
    let x = ops::broadcast_as(x, &shape).op(op)?;
    let y = ops::broadcast_as(y, &shape).op(op)?;
    ops::where_cond(&c, &x, &y).op(op)
}

/// `nonzero(t)`, or with `as_tuple` one int64 column per dim.
pub fn nonzero_impl<'py>(py: Python<'py>, t: &Tensor, as_tuple: bool) -> PyResult<Bound<'py, PyAny>> {
    let op = "nonzero";
    let src = if as_tuple && t.rank() == 0 { t.reshape(1).op(op)? } else { t.clone() };
    let c = crate::bindings::errors::detach_op(py, op, || crate::ops::sort::nonzero(&src))?;
    if !as_tuple {
        return Ok(Py::new(py, PyTensor::wrap_dt(c, crate::dtype::DT::I64))?.into_bound(py).into_any());
    }
    let cols = (0..src.rank())
        .map(|k| {
            let col = c.narrow(1, k, 1).and_then(|x| x.squeeze(1)).and_then(|x| x.dense()).op(op)?;
            Ok(Py::new(py, PyTensor::wrap_dt(col, DT::I64))?.into_any())
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(pyo3::types::PyTuple::new(py, cols)?.into_any())
}

/// `where(condition, input, other)`: `input` where `condition` holds, else `other`
/// (broadcast together); `where(condition)` alone is `nonzero(condition, as_tuple=True)`.
#[pyfunction]
#[pyo3(name = "where", signature = (condition, input=None, other=None))]
fn where_fn<'py>(
    py: Python<'py>,
    condition: &Bound<'py, PyTensor>,
    input: Option<&Bound<'py, PyAny>>,
    other: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (input, other) = match (input, other) {
        (None, None) => return nonzero_impl(py, &condition.get().t(), true),
        (Some(i), Some(o)) => (i, o),
        _ => return Err(type_err("where", "expected where(condition) or where(condition, input, other)")),
    };
    Ok(Py::new(py, where3(condition, input, other)?)?.into_bound(py).into_any())
}

pub(crate) fn where3(condition: &Bound<'_, PyTensor>, input: &Bound<'_, PyAny>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let c = condition.get();
    if !c.is_bool {
        return Err(dtype_err("where", format!("condition must be a bool tensor, got {}", c.dt().name())));
    }
    let dev = c.t().device().clone();
    let a = operand(input)?.ok_or_else(|| type_err("where", "input must be a Tensor or a number"))?;
    let b = operand(other)?.ok_or_else(|| type_err("where", "other must be a Tensor or a number"))?;
    let dt = match (&a, &b) {
        (Operand::T(t, ad), bo) => result_dt(*ad, t.data.rank() == 0, bo),
        (Operand::S(s), Operand::T(t, bd)) => result_dt(*bd, t.data.rank() == 0, &Operand::S(*s)),
        (Operand::S(x), Operand::S(y)) => {
            let (x, y) = (x.dt(), y.dt());
            let p = DT::promote(x, y);
            if p == DT::I64 || p == DT::Bool {
                p
            } else {
                crate::bindings::dtype::default_float()
            }
        }
    };
    let conv = |o: Operand| -> PyResult<Value> {
        match o {
            Operand::T(t, d) => crate::bindings::args::cast_v(&t, d, dt),
            Operand::S(s) => Ok(Value::plain(s.tensor(dt, &dev)?)),
        }
    };
    let out = where_(&c.t(), &conv(a)?, &conv(b)?, "where")?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// Elementwise float functions that PyTorch has as `nn.functional` functions and not
/// as Tensor methods: each row becomes `_core.<name>(input)` with the row's docstring,
/// and `tools/gen_surface.py` writes its stub, its `F.<name>` and its layer class
/// (`layer <Class>`) from the same row: the op is named here only.
/// Non-float inputs are refused, as PyTorch's kernels refuse them; the GIL is
/// released for large inputs. The math and the gradient are the `ops` function's.
macro_rules! functional_unary {
    ($($(#[doc = $doc:literal])* $name:ident => $f:path, grad $grad:path, layer $layer:ident;)*) => {
        $(
            $(#[doc = $doc])*
            #[pyfunction]
            fn $name(input: &PyTensor) -> PyResult<PyTensor> {
                let (v, dt) = input.v_dt();
                crate::bindings::errors::require_float(stringify!($name), dt)?;
                let out = detach_if(v.data.elem_count(), || $f(&v.data)).and_then(|o| $grad(&v, o)).op(stringify!($name))?;
                Ok(PyTensor::wrap_vdt(out, dt))
            }
        )*
        fn register_functional(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_function(wrap_pyfunction!($name, m)?)?;)*
            Ok(())
        }
    };
}

functional_unary! {
    /// `log(sigmoid(input))`, elementwise, computed without overflow as
    /// `min(input, 0) - log1p(exp(-|input|))`; float inputs only, as in PyTorch.
    logsigmoid => crate::ops::unary::logsigmoid, grad crate::autograd::pointwise::logsigmoid, layer LogSigmoid;
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(where_fn, m)?)?;
    register_functional(m)?;
    Ok(())
}

/// `clamp` as `maximum(x, min)` then `minimum(_, max)`: NaN-propagating, with PyTorch's
/// type promotion and, for tensor bounds, its gradient (split at ties).
/// `clamp(min, max)` written into `slf` (the in-place clamps): directly in its storage
/// (`ops::assign::unary_assign`) for number bounds on a dense CPU float tensor outside
/// autograd, else computed from an alias and written back.
fn clamp_inplace(
    slf: &Bound<'_, PyTensor>,
    min: Option<&Bound<'_, PyAny>>,
    max: Option<&Bound<'_, PyAny>>,
    op: &str,
) -> PyResult<Py<PyTensor>> {
    let (min, max) = (min.filter(|m| !m.is_none()), max.filter(|m| !m.is_none()));
    if let Some((lo, hi)) = number_bounds(min, max).filter(|_| min.is_some() || max.is_some()) {
        let f = Unary::Clamp(lo, hi);
        if write_direct(slf.get(), op, |t| unary_assign(t, f))? {
            return Ok(slf.clone().unbind());
        }
    }
    let r = slf.get().inplace_source().clamp(min, max)?;
    assign_inplace(slf.get(), r, op)?;
    Ok(slf.clone().unbind())
}

/// Clamp's bounds as numbers, each None where absent: Some when every bound given is
/// a Python or NumPy int or float (`arith::number`), None when one is a tensor or a
/// bool (those take the maximum-then-minimum with PyTorch's type promotion).
fn number_bounds(min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> Option<(Option<f64>, Option<f64>)> {
    let read = |b: Option<&Bound<'_, PyAny>>| match b {
        None => Some(None),
        Some(b) => number(b).map(Some),
    };
    Some((read(min)?, read(max)?))
}

fn clamp_by_extremes(x: PyTensor, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    // Number bounds on a float32/float64 CPU tensor outside autograd: one pass
    // (`ops::composite::clamp`) with the values of the maximum-then-minimum below.
    let tracked = |t: &PyTensor| t.v().requires_grad() && crate::autograd::grad_enabled();
    let plain = |t: &PyTensor| !t.is_sparse_coo() && !tracked(t);
    if x.dt().is_float() && plain(&x) {
        if let Some((lo, hi)) = number_bounds(min, max) {
            if let Some(out) = crate::ops::composite::clamp(&x.t(), lo, hi).op("clamp")? {
                return Ok(PyTensor::wrap_dt(out, x.dt()));
            }
        }
        // Tensor bounds of the input's dtype and shape, nothing in the graph: one pass.
        let (lo, hi) = (min.and_then(|b| b.cast::<PyTensor>().ok()), max.and_then(|b| b.cast::<PyTensor>().ok()));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let (lo, hi) = (lo.get(), hi.get());
            if [lo, hi].iter().all(|t| t.dt() == x.dt() && plain(t)) {
                if let Some(out) = crate::ops::composite::clamp_tensors(&x.t(), &lo.t(), &hi.t()).op("clamp")? {
                    return Ok(PyTensor::wrap_dt(out, x.dt()));
                }
            }
        }
    }
    let mut cur = x;
    if let Some(m) = min {
        cur = binop_strict(&cur, m, Bin::Max)?;
    }
    if let Some(m) = max {
        cur = binop_strict(&cur, m, Bin::Min)?;
    }
    Ok(cur)
}
