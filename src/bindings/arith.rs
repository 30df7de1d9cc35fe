//! Tensor arithmetic and comparison with PyTorch's type promotion and
//! broadcasting: the operators (`+`, `+=`, `__radd__`, ...), their method forms
//! (`add`, `add_`), and `matmul`. The elementwise math is `crate::ops::binary`'s.
use crate::autograd::{grad_enabled, ops, Value};
use crate::bindings::args::cast_v;
use crate::bindings::args::{cast, extract_scalar, Scalar};
use crate::bindings::errors::{detach_if, dtype_err, runtime_err, shape_err, type_err, zero_div_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::{Category, DT};
use crate::ops::binary::{direct_affine, direct_binary, int_floordiv, pow_int, pow_tensor, wrap_int, Bin};
use candle_core::{DType, Tensor};
use pyo3::prelude::*;

/// A tensor-or-scalar operand.
pub enum Operand {
    T(Value, DT),
    S(Scalar),
}

impl Operand {
    /// A tensor operand that takes part in autograd.
    fn tracked(&self) -> bool {
        matches!(self, Operand::T(v, _) if v.requires_grad())
    }
}

pub fn extract_operand(obj: &Bound<'_, PyAny>) -> PyResult<Option<Operand>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        let (v, dt) = t.get().v_dt();
        return Ok(Some(Operand::T(v, dt)));
    }
    if let Some(s) = extract_scalar(obj) {
        return Ok(Some(Operand::S(s)));
    }
    Ok(None)
}

/// PyTorch's result type for `tensor (op) operand`: Python scalars and 0-d
/// tensors only raise the category, never the width within a category.
pub fn result_dt(a: DT, a_zero_dim: bool, b: &Operand) -> DT {
    match b {
        Operand::S(s) => {
            let sd = s.dt();
            if sd.category() > a.category() {
                if sd.category() == Category::Float {
                    crate::bindings::dtype::default_float()
                } else {
                    sd
                }
            } else {
                a
            }
        }
        Operand::T(t, bd) => {
            let b_zero = t.data.rank() == 0;
            if a_zero_dim == b_zero {
                DT::promote(a, *bd)
            } else if a_zero_dim {
                if a.category() > bd.category() {
                    DT::promote(a, *bd)
                } else {
                    *bd
                }
            } else if bd.category() > a.category() {
                DT::promote(a, *bd)
            } else {
                a
            }
        }
    }
}

fn to_compute(t: &Tensor, from: DT, dt: DT) -> PyResult<Tensor> {
    // Bool is computed as U8 0/1.
    if dt == DT::Bool && from == DT::Bool {
        return Ok(t.clone());
    }
    cast(t, from, dt)
}

fn bcast(op: &str, a: &Tensor, b: &Tensor) -> PyResult<(Tensor, Tensor)> {
    if a.dims() == b.dims() {
        return Ok((a.clone(), b.clone()));
    }
    let shape = a
        .shape()
        .broadcast_shape_binary_op(b.shape(), "broadcast")
        .map_err(|_| shape_err(op, format!("shapes {:?} and {:?} cannot be broadcast together", a.dims(), b.dims())))?;
    Ok((a.broadcast_as(&shape).op(op)?, b.broadcast_as(&shape).op(op)?))
}

fn any_zero(t: &Tensor) -> PyResult<bool> {
    let z = t.zeros_like().op("div")?;
    let n = t.eq(&z).and_then(|m| m.to_dtype(DType::F32)).and_then(|m| m.sum_all()).and_then(|s| s.to_scalar::<f32>()).op("div")?;
    Ok(n > 0.0)
}

/// `a (op) b` with `a` a tensor and `b` any operand; `reflected` swaps the sides.
pub fn binary(a: &PyTensor, b: Operand, op: Bin, reflected: bool) -> PyResult<PyTensor> {
    let (av, adt) = a.v_dt();
    if op == Bin::Sub && (adt == DT::Bool || matches!(&b, Operand::T(_, DT::Bool))) {
        // PyTorch refuses `-` with a bool tensor on either side, whatever the other operand
        return Err(dtype_err("sub", "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."));
    }
    if grad_enabled() && (av.requires_grad() || b.tracked()) {
        return binary_tracked(av, adt, b, op, reflected);
    }
    binary_plain(av.data, adt, b, op, reflected)
}

/// The float arithmetic ops on two same-dtype tensors of one shape: the one
/// definition the plain path and the autograd fallback share.
fn float_arith(l: &Tensor, r: &Tensor, op: Bin) -> candle_core::Result<Tensor> {
    match op {
        Bin::Add => l.add(r),
        Bin::Sub => l.sub(r),
        Bin::Mul => l.mul(r),
        Bin::Div => l.div(r),
        Bin::FloorDiv => crate::ops::binary::float_floordiv_rem(l, r, false),
        Bin::Rem => crate::ops::binary::float_floordiv_rem(l, r, true),
        Bin::Pow => pow_tensor(l, r),
        Bin::Max => crate::ops::binary::nan_extreme(l, r, true),
        Bin::Min => crate::ops::binary::nan_extreme(l, r, false),
        _ => candle_core::bail!("{} is not an arithmetic op", op.name()),
    }
}

/// `binary` when an operand requires grad: float results get a node.
fn binary_tracked(av: Value, adt: DT, b: Operand, op: Bin, reflected: bool) -> PyResult<PyTensor> {
    let name = op.name();
    let mut dt = result_dt(adt, av.data.rank() == 0, &b);
    if op == Bin::Div && !dt.is_float() {
        dt = crate::bindings::dtype::default_float();
    }
    if !dt.is_float() || op.is_cmp() || matches!(op, Bin::And | Bin::Or | Bin::Xor) || op.bit_op().is_some() {
        let bp = match b {
            Operand::T(v, d) => Operand::T(v.detached(), d),
            s => s,
        };
        return binary_plain(av.data, adt, bp, op, reflected);
    }
    let dev = av.data.device().clone();
    let x = cast_v(&av, adt, dt)?;
    let n = x.data.elem_count();
    // Tensor (op) Python scalar: an affine map, or a power with a constant exponent.
    if let (Operand::S(s), false) = (&b, reflected && op == Bin::Pow) {
        let c = s.f64();
        if matches!(op, Bin::Add | Bin::Sub | Bin::Mul) {
            let (mul, add) = match (op, reflected) {
                (Bin::Add, _) => (1.0, c),
                (Bin::Sub, false) => (1.0, -c),
                (Bin::Sub, true) => (-1.0, c),
                _ => (c, 0.0),
            };
            return Ok(PyTensor::wrap_v(detach_if(n, || ops::affine(&x, mul, add)).op(name)?, false));
        }
        if op == Bin::Pow {
            return Ok(PyTensor::wrap_v(detach_if(n, || ops::powf(&x, c)).op(name)?, false));
        }
    }
    let y = match b {
        Operand::T(v, bdt) => {
            if !v.data.device().same_device(&dev) {
                return Err(crate::bindings::errors::device_err(
                    name,
                    format!(
                        "Expected all tensors to be on the same device, but found {:?} and {:?}",
                        dev.location(),
                        v.data.device().location()
                    ),
                ));
            }
            cast_v(&v, bdt, dt)?
        }
        Operand::S(s) => Value::plain(s.tensor(dt, &dev)?),
    };
    let (l, r) = if reflected { (y, x) } else { (x, y) };
    let (lt, rt) = bcast(name, &l.data, &r.data)?;
    let arith = match op {
        Bin::Add => Some(ops::Arith::Add),
        Bin::Sub => Some(ops::Arith::Sub),
        Bin::Mul => Some(ops::Arith::Mul),
        Bin::Div => Some(ops::Arith::Div),
        _ => None,
    };
    let out = match arith {
        Some(k) => {
            let raw = detach_if(lt.elem_count(), || direct_binary(&lt, &rt, op).map_or_else(|| float_arith(&lt, &rt, op), Ok)).op(name)?;
            ops::record_binary(k, &l, &r, raw)
        }
        None => {
            // Powers, floor division, remainder, maximum, minimum: PyTorch's formulas.
            use crate::autograd::pointwise::{binary, Binary};
            let kind = match op {
                Bin::Pow => Binary::Pow,
                Bin::Rem => Binary::Remainder,
                Bin::FloorDiv => Binary::FloorDivide,
                Bin::Max => Binary::Maximum,
                Bin::Min => Binary::Minimum,
                _ => return Err(type_err(name, "not an arithmetic op")),
            };
            let raw = detach_if(lt.elem_count(), || float_arith(&lt, &rt, op)).op(name)?;
            binary(kind, &l, &r, raw, pow_values).op(name)?
        }
    };
    Ok(PyTensor::wrap_v(out, false))
}

/// `a ** b` for two float values of one dtype, in the graph (the power's own formulas use it).
fn pow_values(a: &Value, b: &Value) -> candle_core::Result<Value> {
    let s = a.data.shape().broadcast_shape_binary_op(b.data.shape(), "pow")?;
    let raw = float_arith(&a.data.broadcast_as(&s)?, &b.data.broadcast_as(&s)?, Bin::Pow)?;
    crate::autograd::pointwise::binary(crate::autograd::pointwise::Binary::Pow, a, b, raw, pow_values)
}

/// `binary` outside autograd.
fn binary_plain(at: Tensor, adt: DT, b: Operand, op: Bin, reflected: bool) -> PyResult<PyTensor> {
    let name = op.name();
    // Hot path: same dtype and shape, plain arithmetic; no promotion or broadcast work.
    if let Operand::T(bv, bdt) = &b {
        let bt = &bv.data;
        if *bdt == adt && at.dims() == bt.dims() && adt.is_float() && matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div) {
            let (l, r) = if reflected { (bt, &at) } else { (&at, bt) };
            if let Some(out) = detach_if(l.elem_count(), || Ok(direct_binary(l, r, op))).op(name)? {
                return Ok(PyTensor::wrap_dt(out, adt));
            }
            let out = detach_if(l.elem_count(), || match op {
                Bin::Add => l.add(r),
                Bin::Sub => l.sub(r),
                Bin::Mul => l.mul(r),
                _ => l.div(r),
            })
            .op(name)?;
            return Ok(PyTensor::wrap_dt(out, adt));
        }
    }
    let mut dt = result_dt(adt, at.rank() == 0, &b);
    // True division of integers/bools computes in float32, as PyTorch: each operand is
    // converted from its own dtype (casting to the integer result type first would
    // wrap, e.g. a 0-d int64 -1 into uint8 255).
    if op == Bin::Div && !dt.is_float() {
        dt = crate::bindings::dtype::default_float();
    }
    let dev = at.device().clone();
    // Pow with a scalar exponent: special forms that stay exact and differentiable.
    if op == Bin::Pow && !reflected {
        if let Operand::S(s) = b {
            if adt.is_float() || matches!(s, Scalar::Int(_) | Scalar::Bool(_)) {
                let x = to_compute(&at, adt, dt)?;
                let int_exp = match s {
                    Scalar::Int(n) => Some(n),
                    Scalar::Bool(b) => Some(b as i64),
                    Scalar::Float(_) => None,
                };
                let out = match int_exp {
                    Some(n) => {
                        if n < 0 && !dt.is_float() {
                            return Err(runtime_err(name, "Integers to negative integer powers are not allowed."));
                        }
                        if !dt.is_float() {
                            let xf = x.to_dtype(DType::F64).op(name)?;
                            pow_int(&xf, n).and_then(|r| wrap_int(&r, dt.candle())).op(name)?
                        } else {
                            pow_int(&x, n).op(name)?
                        }
                    }
                    None => {
                        let e = s.f64();
                        if e == 0.5 {
                            crate::ops::unary::fast(&x, crate::ops::unary::Fast::Sqrt)
                        } else if e.fract() == 0.0 && e.abs() < 64.0 {
                            pow_int(&x, e as i64)
                        } else {
                            crate::ops::unary::powf(&x, e)
                        }
                        .op(name)?
                    }
                };
                return Ok(PyTensor::wrap_dt(out, dt));
            }
        }
    }
    // Float tensor (op) Python scalar as one affine map: exact (x*1 + c, x*c + 0),
    // differentiable, and no 0-d tensor or broadcast on the hot path.
    if let Operand::S(s) = b {
        if adt == dt && matches!(dt, DT::F32 | DT::F64) && matches!(op, Bin::Add | Bin::Sub | Bin::Mul) {
            let c = s.f64();
            let (mul, add) = match (op, reflected) {
                (Bin::Add, _) => (1.0, c),
                (Bin::Sub, false) => (1.0, -c),
                (Bin::Sub, true) => (-1.0, c),
                _ => (c, 0.0),
            };
            if let Some(out) = detach_if(at.elem_count(), || Ok(direct_affine(&at, mul, add))).op(name)? {
                return Ok(PyTensor::wrap_dt(out, dt));
            }
            let out = detach_if(at.elem_count(), || at.affine(mul, add)).op(name)?;
            return Ok(PyTensor::wrap_dt(out, dt));
        }
    }
    let bt = match &b {
        Operand::T(t, bdt) => {
            let t = &t.data;
            if !t.device().same_device(&dev) {
                return Err(crate::bindings::errors::device_err(
                    name,
                    format!(
                        "Expected all tensors to be on the same device, but found {:?} and {:?}",
                        dev.location(),
                        t.device().location()
                    ),
                ));
            }
            to_compute(t, *bdt, dt)?
        }
        Operand::S(s) => s.tensor(dt, &dev)?,
    };
    let at = to_compute(&at, adt, dt)?;
    let (l, r) = if reflected { (bt, at) } else { (at, bt) };
    let (l, r) = bcast(name, &l, &r)?;
    if dt == DT::Bool && matches!(op, Bin::Sub | Bin::Div | Bin::FloorDiv | Bin::Rem | Bin::Pow) && op != Bin::Div {
        return Err(type_err(name, "this operation is not supported on bool tensors; use logical ops or cast first"));
    }
    if let Some(bop) = op.bit_op() {
        if dt.is_float() {
            return Err(dtype_err(
                name,
                format!("not implemented for {} tensors; bitwise operators need integer or bool tensors", dt.name()),
            ));
        }
        if dt == DT::Bool {
            let out = match op {
                Bin::BitAnd => l.minimum(&r),
                Bin::BitOr => l.maximum(&r),
                Bin::BitXor => l.ne(&r),
                _ => return Err(dtype_err(name, "not implemented for bool tensors; shifts need integer tensors")),
            }
            .op(name)?;
            return Ok(PyTensor::wrap_dt(out, DT::Bool));
        }
        let out = detach_if(l.elem_count(), || crate::ops::bitwise::bitwise(&l, &r, bop)).op(name)?;
        return Ok(PyTensor::wrap_dt(out, dt));
    }
    // The logical ops read any dtype as truth values (nonzero is true) and give bool.
    let (l, r) = if matches!(op, Bin::And | Bin::Or | Bin::Xor) && dt != DT::Bool {
        let truth = |t: &Tensor| t.ne(&t.zeros_like()?);
        (truth(&l).op(name)?, truth(&r).op(name)?)
    } else {
        (l, r)
    };
    let simple: Option<fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>> = match op {
        Bin::Add if dt != DT::Bool => Some(|l, r| l.add(r)),
        Bin::Sub => Some(|l, r| l.sub(r)),
        Bin::Mul if dt != DT::Bool => Some(|l, r| l.mul(r)),
        Bin::Div if dt.is_float() => Some(|l, r| l.div(r)),
        Bin::Max => Some(|l, r| crate::ops::binary::nan_extreme(l, r, true)),
        Bin::Min => Some(|l, r| crate::ops::binary::nan_extreme(l, r, false)),
        _ => None,
    };
    if let Some(f) = simple {
        // Float arithmetic over broadcast operands: our merged-dims kernel (parallel,
        // vectorized); Candle's strided path is one thread computing an index per element.
        let direct = dt.is_float() && matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div);
        let out = detach_if(l.elem_count(), || match direct.then(|| direct_binary(&l, &r, op)).flatten() {
            Some(o) => Ok(o),
            None => f(&l, &r),
        })
        .op(name)?;
        return Ok(PyTensor::wrap_dt(out, dt));
    }
    // Float comparisons: one parallel pass over the broadcast operands (Candle's
    // computes an index per element on one thread).
    if op.is_cmp() && dt.is_float() {
        if let Some(out) = detach_if(l.elem_count(), || Ok(direct_binary(&l, &r, op))).op(name)? {
            return Ok(PyTensor::wrap_dt(out, DT::Bool));
        }
    }
    let out = match op {
        Bin::Add if dt == DT::Bool => l.maximum(&r),
        Bin::Mul if dt == DT::Bool => l.minimum(&r),
        Bin::Add => l.add(&r),
        Bin::Sub => l.sub(&r),
        Bin::Mul => l.mul(&r),
        // Float by now (integer division was promoted above); `simple` normally takes it.
        Bin::Div => l.div(&r),
        Bin::FloorDiv | Bin::Rem => {
            if dt.is_float() {
                float_arith(&l, &r, op)
            } else {
                if any_zero(&r)? {
                    return Err(zero_div_err(name));
                }
                let q = int_floordiv(&l, &r).op(name)?;
                if op == Bin::FloorDiv {
                    Ok(q)
                } else {
                    l.sub(&q.mul(&r).op(name)?)
                }
            }
        }
        Bin::Pow => {
            if dt.is_float() {
                pow_tensor(&l, &r)
            } else {
                l.to_dtype(DType::F64)
                    .and_then(|l| pow_tensor(&l, &r.to_dtype(DType::F64)?))
                    .and_then(|x| x.round())
                    .and_then(|x| wrap_int(&x, dt.candle()))
            }
        }
        Bin::Max => crate::ops::binary::nan_extreme(&l, &r, true),
        Bin::Min => crate::ops::binary::nan_extreme(&l, &r, false),
        Bin::Eq => l.eq(&r),
        Bin::Ne => l.ne(&r),
        Bin::Lt => l.lt(&r),
        Bin::Le => l.le(&r),
        Bin::Gt => l.gt(&r),
        Bin::Ge => l.ge(&r),
        Bin::And => l.minimum(&r),
        Bin::Or => l.maximum(&r),
        Bin::Xor => l.ne(&r),
        Bin::BitAnd | Bin::BitOr | Bin::BitXor | Bin::Shl | Bin::Shr => {
            Err(candle_core::Error::Msg("bitwise operators are computed above".into()))
        }
    }
    .op(name)?;
    let out_dt = if op.is_cmp() || matches!(op, Bin::And | Bin::Or | Bin::Xor) { DT::Bool } else { dt };
    Ok(PyTensor::wrap_dt(out, out_dt))
}

pub(crate) fn operand(other: &Bound<'_, PyAny>) -> PyResult<Option<Operand>> {
    if let Some(o) = extract_operand(other)? {
        return Ok(Some(o));
    }
    // NumPy arrays and lists on the other side become tensors.
    if other.cast::<numpy::PyUntypedArray>().is_ok() || other.is_instance_of::<pyo3::types::PyList>() {
        let t = crate::bindings::creation::tensor_from_data(other, None, None)?;
        let dt = t.dt();
        return Ok(Some(Operand::T(t.v(), dt)));
    }
    Ok(None)
}

/// `a (op) b` for two small same-shape float tensors outside autograd, the commonest
/// case in eager code: both values are read under their locks (no clones, no dtype
/// promotion, no broadcast, no GIL release) and the result is wrapped as fresh. `None`
/// sends everything else to `binary`. Dispatch cost is what this saves (~100 ns).
fn small_same_shape(a: &PyTensor, other: &Bound<'_, PyAny>, op: Bin, reflected: bool) -> Option<PyTensor> {
    if !matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div) {
        return None;
    }
    let b = other.cast::<PyTensor>().ok()?.get();
    if a.is_bool || b.is_bool {
        return None;
    }
    let ga = a.read();
    // `x + x`: one guard (a second read lock on one RwLock from one thread may deadlock).
    let gb = if std::ptr::eq(a, b) { None } else { Some(b.read()) };
    let bv: &Value = gb.as_deref().unwrap_or(&ga);
    if ga.requires_grad() || bv.requires_grad() {
        return None;
    }
    let (l, r) = if reflected { (&bv.data, &ga.data) } else { (&ga.data, &bv.data) };
    if l.dtype() != r.dtype() || l.dims() != r.dims() || l.elem_count() >= crate::bindings::errors::DETACH_ELEMS {
        return None;
    }
    direct_binary(l, r, op).map(PyTensor::wrap_fresh)
}

fn binop(py: Python<'_>, a: &PyTensor, other: &Bound<'_, PyAny>, op: Bin, reflected: bool) -> PyResult<Py<PyAny>> {
    if let Some(out) = small_same_shape(a, other, op, reflected) {
        return Ok(Py::new(py, out)?.into_any());
    }
    match operand(other)? {
        Some(b) => Ok(Py::new(py, binary(a, b, op, reflected)?)?.into_any()),
        None => Ok(py.NotImplemented()),
    }
}

/// Functional form: errors (instead of NotImplemented) for unsupported operands.
pub(crate) fn binop_strict(a: &PyTensor, other: &Bound<'_, PyAny>, op: Bin) -> PyResult<PyTensor> {
    if let Some(out) = small_same_shape(a, other, op, false) {
        return Ok(out);
    }
    match operand(other)? {
        Some(b) => binary(a, b, op, false),
        None => Err(type_err(op.name(), format!("unsupported operand type {}", other.get_type().name()?))),
    }
}

/// Write `new` into `a` in place (PyTorch's `add_`, `+=`, ...): the result keeps `a`'s dtype and shape.
pub fn assign_inplace(a: &PyTensor, new: PyTensor, op: &str) -> PyResult<()> {
    let cur = a.t();
    let nv = new.v();
    if nv.data.dims() != cur.dims() {
        return Err(shape_err(op, format!("output with shape {:?} doesn't match the broadcast shape {:?}", cur.dims(), nv.data.dims())));
    }
    let (ndt, adt) = (new.dt(), a.dt());
    if ndt.category() > adt.category() {
        return Err(dtype_err(op, format!("result type {} can't be cast to the desired output type {}", ndt.name(), adt.name())));
    }
    let nv = cast_v(&nv, ndt, adt)?;
    crate::bindings::indexing::overwrite(a, nv, op)
}

/// The in-place fast path (`ops::assign`): `a (op)= other` (times `alpha`) written into
/// `a`'s own storage when `a` is a dense CPU float tensor outside autograd and `other` a
/// Python number or a tensor of `a`'s dtype and shape, also outside autograd. The values
/// are those of the general path (compute out of place, write back), which takes
/// everything else: `Ok(false)`, nothing written.
fn assign_direct(a: &PyTensor, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>, op: Bin, name: &str) -> PyResult<bool> {
    if a.is_bool {
        return Ok(false);
    }
    let alpha = match alpha {
        Some(al) if !al.is_none() => match extract_scalar(al) {
            Some(Scalar::Float(f)) => Some(f),
            Some(Scalar::Int(i)) => Some(i as f64),
            _ => return Ok(false),
        },
        _ => None,
    };
    let other_v = match other.cast::<PyTensor>() {
        Ok(b) => {
            let b = b.get();
            if b.is_bool || b.is_sparse_coo() || b.dt() != a.dt() {
                return Ok(false);
            }
            let bv = b.v();
            if bv.requires_grad() && grad_enabled() {
                return Ok(false);
            }
            Some(bv)
        }
        Err(_) => None,
    };
    let rhs = match (&other_v, alpha) {
        (Some(bv), None) => crate::ops::assign::Rhs::Tensor(&bv.data),
        (Some(bv), Some(al)) => crate::ops::assign::Rhs::Scaled(&bv.data, al),
        (None, None) => match extract_scalar(other) {
            Some(s) => crate::ops::assign::Rhs::Scalar(s.f64()),
            None => return Ok(false),
        },
        (None, Some(_)) => return Ok(false),
    };
    write_direct(a, name, |t| crate::ops::assign::arith_assign(t, op, rhs))
}

/// Run `f`, a direct write into `a`'s storage that answers whether it applied, when `a`
/// is a dense tensor outside autograd (not sparse, not requiring grad in grad mode);
/// when it did, the tensor's version counter moves on and its bit-cast aliases see the
/// write, as after any in-place op. `Ok(false)`: nothing written.
pub(crate) fn write_direct(a: &PyTensor, name: &str, f: impl FnOnce(&Tensor) -> candle_core::Result<bool> + Send) -> PyResult<bool> {
    let av = a.v();
    if a.is_sparse_coo() || (av.requires_grad() && grad_enabled()) {
        return Ok(false);
    }
    if !detach_if(av.data.elem_count(), || f(&av.data)).op(name)? {
        return Ok(false);
    }
    av.bump_version();
    crate::bindings::bitcast::after_write(&av.version)?;
    Ok(true)
}

/// A Python int or float (not a bool) as f64: the number operands the direct in-place
/// paths take (`clamp_`'s bounds, `lerp_`'s weight, `addcmul_`'s value).
pub(crate) fn number(obj: &Bound<'_, PyAny>) -> Option<f64> {
    match extract_scalar(obj)? {
        Scalar::Float(f) => Some(f),
        Scalar::Int(i) => Some(i as f64),
        Scalar::Bool(_) => None,
    }
}

/// `t`'s data when it can be read by a direct in-place write into a tensor of dtype
/// `dt`: that dtype, not bool or sparse, and outside autograd (a tensor that requires
/// grad in grad mode needs the general path's graph).
pub(crate) fn plain_operand(t: &PyTensor, dt: DT) -> Option<Tensor> {
    let v = t.v();
    let tracked = v.requires_grad() && grad_enabled();
    (!(t.is_bool || t.is_sparse_coo() || t.dt() != dt || tracked)).then_some(v.data)
}

macro_rules! dunder {
    ($fwd:ident, $rev:ident, $inplace:ident, $method:ident, $method_:ident, $op:expr) => {
        #[pymethods]
        impl PyTensor {
            fn $fwd(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                binop(py, self, other, $op, false)
            }
            fn $rev(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                binop(py, self, other, $op, true)
            }
            fn $inplace(&self, other: &Bound<'_, PyAny>) -> PyResult<()> {
                if assign_direct(self, other, None, $op, stringify!($inplace))? {
                    return Ok(());
                }
                let r = binop_strict(&self.inplace_source(), other, $op)?;
                assign_inplace(self, r, stringify!($inplace))
            }
            fn $method(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                binop_strict(self, other, $op)
            }
            fn $method_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                if assign_direct(slf.get(), other, None, $op, stringify!($method_))? {
                    return Ok(slf.clone().unbind());
                }
                let r = binop_strict(&slf.get().inplace_source(), other, $op)?;
                assign_inplace(slf.get(), r, stringify!($method_))?;
                Ok(slf.clone().unbind())
            }
        }
    };
}

macro_rules! dunder_ops {
    ($fwd:ident, $rev:ident, $inplace:ident, $op:expr) => {
        #[pymethods]
        impl PyTensor {
            fn $fwd(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                binop(py, self, other, $op, false)
            }
            fn $rev(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                binop(py, self, other, $op, true)
            }
            fn $inplace(&self, other: &Bound<'_, PyAny>) -> PyResult<()> {
                if assign_direct(self, other, None, $op, stringify!($inplace))? {
                    return Ok(());
                }
                let r = binop_strict(&self.inplace_source(), other, $op)?;
                assign_inplace(self, r, stringify!($inplace))
            }
        }
    };
}

/// `self (op) alpha * other` (`add`/`sub` with PyTorch's `alpha`): the scaling is an
/// ordinary multiplication, so promotion and gradients are those of `*`.
fn scaled(a: &PyTensor, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>, op: Bin) -> PyResult<PyTensor> {
    let alpha = match alpha {
        Some(al) if !al.is_none() => al,
        _ => return binop_strict(a, other, op),
    };
    let is_float = |o: &Bound<'_, PyAny>| match o.cast::<PyTensor>() {
        Ok(t) => t.get().dt().is_float(),
        Err(_) => o.is_instance_of::<pyo3::types::PyFloat>(),
    };
    if alpha.is_instance_of::<pyo3::types::PyFloat>() && !a.dt().is_float() && !is_float(other) {
        return Err(runtime_err(op.name(), "For integral input tensors, argument alpha must not be a floating point number."));
    }
    // Python scalars and tensors scale with `*`; lists and arrays become tensors first
    // (a list times an int would repeat it).
    let other = if other.cast::<PyTensor>().is_ok() || extract_scalar(other).is_some() {
        other.clone()
    } else {
        Bound::new(other.py(), crate::bindings::creation::tensor_from_data(other, None, None)?)?.into_any()
    };
    binop_strict(a, &other.mul(alpha)?, op)
}

/// The operator methods. PyO3's number-protocol trampolines for `#[pymethods]` that
/// come from a `macro_rules!` expansion call its own unsafe fns without an `unsafe`
/// block, which `unsafe_op_in_unsafe_fn` flags; there is no unsafe code of ours here.
#[allow(unsafe_op_in_unsafe_fn)]
mod operators {
    use super::*;

    dunder_ops!(__add__, __radd__, __iadd__, Bin::Add);
    dunder_ops!(__sub__, __rsub__, __isub__, Bin::Sub);
    dunder!(__mul__, __rmul__, __imul__, mul, mul_, Bin::Mul);
    dunder_ops!(__truediv__, __rtruediv__, __itruediv__, Bin::Div);
    #[pymethods]
    impl PyTensor {
        /// `self + alpha * other`.
        #[pyo3(signature = (other, *, alpha=None))]
        fn add(&self, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
            scaled(self, other, alpha, Bin::Add)
        }
        /// `self += alpha * other`, in place.
        #[pyo3(signature = (other, *, alpha=None))]
        fn add_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
            if assign_direct(slf.get(), other, alpha, Bin::Add, "add_")? {
                return Ok(slf.clone().unbind());
            }
            let r = scaled(&slf.get().inplace_source(), other, alpha, Bin::Add)?;
            assign_inplace(slf.get(), r, "add_")?;
            Ok(slf.clone().unbind())
        }
        /// `self - alpha * other`.
        #[pyo3(signature = (other, *, alpha=None))]
        fn sub(&self, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
            scaled(self, other, alpha, Bin::Sub)
        }
        /// `self -= alpha * other`, in place.
        #[pyo3(signature = (other, *, alpha=None))]
        fn sub_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
            if assign_direct(slf.get(), other, alpha, Bin::Sub, "sub_")? {
                return Ok(slf.clone().unbind());
            }
            let r = scaled(&slf.get().inplace_source(), other, alpha, Bin::Sub)?;
            assign_inplace(slf.get(), r, "sub_")?;
            Ok(slf.clone().unbind())
        }
        /// Division; `rounding_mode` is None (true division), "floor" or "trunc".
        #[pyo3(signature = (other, *, rounding_mode=None))]
        fn div(&self, other: &Bound<'_, PyAny>, rounding_mode: Option<&str>) -> PyResult<PyTensor> {
            self.divide(other, rounding_mode)
        }
        /// `div` in place.
        #[pyo3(signature = (other, *, rounding_mode=None))]
        fn div_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>, rounding_mode: Option<&str>) -> PyResult<Py<PyTensor>> {
            if rounding_mode.is_none() && assign_direct(slf.get(), other, None, Bin::Div, "div_")? {
                return Ok(slf.clone().unbind());
            }
            let r = slf.get().inplace_source().divide(other, rounding_mode)?;
            assign_inplace(slf.get(), r, "div_")?;
            Ok(slf.clone().unbind())
        }
    }
    dunder!(__floordiv__, __rfloordiv__, __ifloordiv__, floor_divide, floor_divide_, Bin::FloorDiv);
    dunder!(__mod__, __rmod__, __imod__, remainder, remainder_, Bin::Rem);
    #[pymethods]
    impl PyTensor {
        fn __pow__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, modulo: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
            let _ = modulo;
            binop(py, self, other, Bin::Pow, false)
        }
        fn __rpow__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, modulo: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
            let _ = modulo;
            binop(py, self, other, Bin::Pow, true)
        }
        fn __ipow__(&self, other: &Bound<'_, PyAny>, modulo: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
            let _ = modulo;
            let r = binop_strict(&self.inplace_source(), other, Bin::Pow)?;
            assign_inplace(self, r, "__ipow__")
        }
        fn pow(&self, exponent: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
            binop_strict(self, exponent, Bin::Pow)
        }
        fn pow_(slf: &Bound<'_, Self>, exponent: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
            let r = binop_strict(&slf.get().inplace_source(), exponent, Bin::Pow)?;
            assign_inplace(slf.get(), r, "pow_")?;
            Ok(slf.clone().unbind())
        }
    }
    dunder!(__and__, __rand__, __iand__, bitwise_and, bitwise_and_, Bin::BitAnd);
    dunder!(__or__, __ror__, __ior__, bitwise_or, bitwise_or_, Bin::BitOr);
    dunder!(__xor__, __rxor__, __ixor__, bitwise_xor, bitwise_xor_, Bin::BitXor);
    dunder!(__lshift__, __rlshift__, __ilshift__, bitwise_left_shift, bitwise_left_shift_, Bin::Shl);
    dunder!(__rshift__, __rrshift__, __irshift__, bitwise_right_shift, bitwise_right_shift_, Bin::Shr);
}

#[pymethods]
impl PyTensor {
    fn __richcmp__(&self, py: Python<'_>, other: &Bound<'_, PyAny>, op: pyo3::basic::CompareOp) -> PyResult<Py<PyAny>> {
        use pyo3::basic::CompareOp as C;
        let b = match op {
            C::Eq => Bin::Eq,
            C::Ne => Bin::Ne,
            C::Lt => Bin::Lt,
            C::Le => Bin::Le,
            C::Gt => Bin::Gt,
            C::Ge => Bin::Ge,
        };
        match operand(other)? {
            Some(o) => Ok(Py::new(py, binary(self, o, b, false)?)?.into_any()),
            // Python then asks `other` (a complex tensor compares itself with a real one)
            // and falls back to identity: `t == None` is False, as for any Python object.
            None => Ok(py.NotImplemented()),
        }
    }
    fn eq(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Eq)
    }
    fn ne(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Ne)
    }
    fn lt(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Lt)
    }
    fn le(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Le)
    }
    fn gt(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Gt)
    }
    fn ge(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Ge)
    }
    fn maximum(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Max)
    }
    fn minimum(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Min)
    }
    fn true_divide(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Div)
    }
    /// `self - alpha * other` (an alias of `sub`).
    #[pyo3(signature = (other, *, alpha=None))]
    fn subtract(&self, other: &Bound<'_, PyAny>, alpha: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        scaled(self, other, alpha, Bin::Sub)
    }
    fn multiply(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Mul)
    }

    fn equal(&self, other: &Bound<'_, PyTensor>) -> PyResult<bool> {
        let (a, b) = (self.t(), other.get().t());
        if a.dims() != b.dims() {
            return Ok(false);
        }
        let r = binary(self, Operand::T(Value::plain(b), other.get().dt()), Bin::Ne, false)?;
        Ok(r.t().to_dtype(DType::F32).and_then(|x| x.sum_all()).and_then(|x| x.to_scalar::<f32>()).op("equal")? == 0.0)
    }

    fn __neg__(&self) -> PyResult<PyTensor> {
        if self.is_bool {
            return Err(type_err("neg", "negation, the `-` operator, on a bool tensor is not supported; use `~` or logical_not()"));
        }
        let v = self.v();
        if self.dt().is_float() {
            return Ok(PyTensor::wrap_v(ops::neg(&v).op("neg")?, false));
        }
        // Candle has no integer neg kernel: 0 - x (wrapping for unsigned types, as PyTorch).
        let t = v.data;
        Ok(PyTensor::wrap(t.zeros_like().and_then(|z| z.sub(&t)).op("neg")?, false))
    }
    pub(crate) fn neg(&self) -> PyResult<PyTensor> {
        self.__neg__()
    }
    fn __pos__(slf: &Bound<'_, Self>) -> Py<PyTensor> {
        slf.clone().unbind()
    }
    fn __abs__(&self) -> PyResult<PyTensor> {
        self.abs()
    }
    fn __invert__(&self) -> PyResult<PyTensor> {
        self.bitwise_not()
    }
    /// `~self`: bitwise not of an integer tensor, logical not of a bool tensor.
    pub(crate) fn bitwise_not(&self) -> PyResult<PyTensor> {
        let dt = self.dt();
        if dt == DT::Bool {
            return self.logical_not();
        }
        if dt.is_float() {
            return Err(dtype_err(
                "bitwise_not",
                format!("~ (operator.invert) is only implemented on integer and bool tensors, got {}", dt.name()),
            ));
        }
        let t = self.t();
        let out = detach_if(t.elem_count(), || crate::ops::bitwise::bitwise_not(&t)).op("bitwise_not")?;
        Ok(PyTensor::wrap_dt(out, dt))
    }
    /// Truth values (nonzero is true) of both sides combined; a bool tensor.
    fn logical_and(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::And)
    }
    fn logical_or(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Or)
    }
    fn logical_xor(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, other, Bin::Xor)
    }
    fn logical_and_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = binop_strict(&slf.get().inplace_source(), other, Bin::And)?;
        assign_inplace(slf.get(), r, "logical_and_")?;
        Ok(slf.clone().unbind())
    }
    fn logical_or_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = binop_strict(&slf.get().inplace_source(), other, Bin::Or)?;
        assign_inplace(slf.get(), r, "logical_or_")?;
        Ok(slf.clone().unbind())
    }
    fn logical_xor_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = binop_strict(&slf.get().inplace_source(), other, Bin::Xor)?;
        assign_inplace(slf.get(), r, "logical_xor_")?;
        Ok(slf.clone().unbind())
    }
    fn logical_not(&self) -> PyResult<PyTensor> {
        let t = self.t();
        let out = t.eq(&t.zeros_like().op("logical_not")?).op("logical_not")?;
        Ok(PyTensor::wrap(out, true))
    }
    pub(crate) fn abs(&self) -> PyResult<PyTensor> {
        let v = self.v();
        if self.dt() == DT::Bool {
            return Err(crate::bindings::errors::dtype_err("abs", "\"abs\" is not implemented for bool"));
        }
        if matches!(self.dt(), DT::U8 | DT::U32) {
            return Ok(PyTensor::wrap(v.data, false));
        }
        Ok(PyTensor::wrap_v(crate::autograd::pointwise::abs(&v).op("abs")?, false))
    }

    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match other.cast::<PyTensor>() {
            Ok(o) => Ok(Py::new(py, matmul(py, self, o.get())?)?.into_any()),
            Err(_) => Ok(py.NotImplemented()),
        }
    }
    fn __rmatmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match other.cast::<PyTensor>() {
            Ok(o) => Ok(Py::new(py, matmul(py, o.get(), self)?)?.into_any()),
            Err(_) => Ok(py.NotImplemented()),
        }
    }
    fn matmul(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        matmul(py, self, other.get())
    }
    fn mm(&self, py: Python<'_>, mat2: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        if self.t().rank() != 2 || mat2.get().t().rank() != 2 {
            return Err(shape_err("mm", format!("expected 2-D tensors, got {:?} and {:?}", self.t().dims(), mat2.get().t().dims())));
        }
        matmul(py, self, mat2.get())
    }
    fn bmm(&self, py: Python<'_>, mat2: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        if self.t().rank() != 3 || mat2.get().t().rank() != 3 {
            return Err(shape_err("bmm", format!("expected 3-D tensors, got {:?} and {:?}", self.t().dims(), mat2.get().t().dims())));
        }
        // No broadcasting of the batch dim (that is `matmul`'s), as PyTorch.
        let (a, b) = (self.t().dims().to_vec(), mat2.get().t().dims().to_vec());
        if a[0] != b[0] || a[2] != b[1] {
            return Err(shape_err(
                "bmm",
                format!(
                    "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}] (shapes {a:?} and {b:?})",
                    a[0], a[2], b[0], b[1]
                ),
            ));
        }
        matmul(py, self, mat2.get())
    }
    fn dot(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        if self.t().rank() != 1 || other.get().t().rank() != 1 {
            return Err(shape_err("dot", format!("1D tensors expected, but got {:?} and {:?}", self.t().dims(), other.get().t().dims())));
        }
        matmul_ac(py, self, other.get(), false)
    }
}

/// PyTorch's `matmul`: 1-D operands are promoted and squeezed back, batch dims broadcast.
pub fn matmul(py: Python<'_>, a: &PyTensor, b: &PyTensor) -> PyResult<PyTensor> {
    matmul_ac(py, a, b, true)
}

/// `matmul`; with `autocast`, float operands are first cast to the autocast dtype when
/// autocast is on for their device, as PyTorch's autocast does for matmul/mm/bmm
/// (its "lower precision" list; `dot` is not on it).
fn matmul_ac(py: Python<'_>, a: &PyTensor, b: &PyTensor, autocast: bool) -> PyResult<PyTensor> {
    let (mut av, mut adt, mut bv, mut bdt) = (a.v(), a.dt(), b.v(), b.dt());
    let low = if autocast { crate::bindings::autocast::lower_dtype(av.data.device()) } else { None };
    if let Some(low) = low {
        use crate::bindings::autocast::eligible;
        if eligible(adt) {
            (av, adt) = (cast_v(&av, adt, low)?, low);
        }
        if eligible(bdt) {
            (bv, bdt) = (cast_v(&bv, bdt, low)?, low);
        }
    }
    let op = if autocast { "matmul" } else { "dot" };
    if adt != bdt {
        // As PyTorch, which does not promote between the operands of a product.
        return Err(crate::bindings::errors::dtype_err(
            op,
            format!("expected both operands to have the same dtype, but got: {} != {}", adt.name(), bdt.name()),
        ));
    }
    let (at, bt) = (&av.data, &bv.data);
    let dt = adt;
    if at.rank() == 0 || bt.rank() == 0 {
        return Err(shape_err("matmul", format!("both arguments need at least 1 dimension, got {:?} and {:?}", at.dims(), bt.dims())));
    }
    let (ra, rb) = (at.rank(), bt.rank());
    let ka = at.dims()[ra - 1];
    let kb = if rb == 1 { bt.dims()[0] } else { bt.dims()[rb - 2] };
    if ka != kb {
        return Err(shape_err("matmul", format!("mat1 and mat2 shapes cannot be multiplied ({:?} and {:?})", at.dims(), bt.dims())));
    }
    // Name both full shapes here; Candle's own message shows only the batch dims.
    let (ba, bb) = (&at.dims()[..ra.saturating_sub(2)], &bt.dims()[..rb.saturating_sub(2)]);
    if ba.iter().rev().zip(bb.iter().rev()).any(|(x, y)| x != y && *x != 1 && *y != 1) {
        return Err(shape_err(
            "matmul",
            format!("batch dimensions {ba:?} and {bb:?} cannot be broadcast (shapes {:?} and {:?})", at.dims(), bt.dims()),
        ));
    }
    // Candle's gemm is for floats; integers go through f64 (exact below 2^53).
    let cdt = if dt.is_float() { dt } else { DT::F64 };
    let l = cast_v(&av, adt, cdt)?;
    let r = cast_v(&bv, bdt, cdt)?;
    let mut out = crate::bindings::errors::detach_op(py, "matmul", || {
        let l = if ra == 1 { ops::unsqueeze(&l, 0)? } else { l };
        let r = if rb == 1 { ops::unsqueeze(&r, 1)? } else { r };
        ops::matmul(&l, &r)
    })?;
    if rb == 1 {
        out = ops::squeeze(&out, out.data.rank() - 1).op("matmul")?;
    }
    if ra == 1 {
        let d = if rb == 1 { 0 } else { out.data.rank() - 2 };
        out = ops::squeeze(&out, d).op("matmul")?;
    }
    let out = cast_v(&out, cdt, dt)?;
    Ok(PyTensor::wrap_vdt(out, dt))
}
