//! Arithmetic with PyTorch's type promotion and broadcasting, unary functions,
//! reductions, matmul and softmax.
use crate::dtype::{Category, DT};
use crate::errors::{dtype_err, runtime_err, shape_err, type_err, value_err, zero_div_err, OpResult};
use crate::kernels;
use crate::tensor::{cast, extract_operand, norm_dim, Operand, PyTensor, Scalar};
use candle_core::{DType, Tensor, D};
use pyo3::prelude::*;
use pyo3::types::{PyTuple};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
    Max,
    Min,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

impl Bin {
    fn name(self) -> &'static str {
        match self {
            Bin::Add => "add",
            Bin::Sub => "sub",
            Bin::Mul => "mul",
            Bin::Div => "div",
            Bin::FloorDiv => "floor_divide",
            Bin::Rem => "remainder",
            Bin::Pow => "pow",
            Bin::Max => "maximum",
            Bin::Min => "minimum",
            Bin::Eq => "eq",
            Bin::Ne => "ne",
            Bin::Lt => "lt",
            Bin::Le => "le",
            Bin::Gt => "gt",
            Bin::Ge => "ge",
            Bin::And => "logical_and",
            Bin::Or => "logical_or",
            Bin::Xor => "logical_xor",
        }
    }
    fn is_cmp(self) -> bool {
        matches!(self, Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge)
    }
}

/// PyTorch's result type for `tensor (op) operand`: Python scalars and 0-d
/// tensors only raise the category, never the width within a category.
pub fn result_dt(a: DT, a_zero_dim: bool, b: &Operand) -> DT {
    match b {
        Operand::S(s) => {
            let sd = s.dt();
            if sd.category() > a.category() {
                if sd.category() == Category::Float { DT::F32 } else { sd }
            } else {
                a
            }
        }
        Operand::T(t, bd) => {
            let b_zero = t.rank() == 0;
            if a_zero_dim == b_zero {
                DT::promote(a, *bd)
            } else if a_zero_dim {
                if a.category() > bd.category() { DT::promote(a, *bd) } else { *bd }
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
    let shape = a.shape().broadcast_shape_binary_op(b.shape(), "broadcast").map_err(|_| {
        shape_err(op, format!("shapes {:?} and {:?} cannot be broadcast together", a.dims(), b.dims()))
    })?;
    Ok((a.broadcast_as(&shape).op(op)?, b.broadcast_as(&shape).op(op)?))
}

fn any_zero(t: &Tensor) -> PyResult<bool> {
    let z = t.zeros_like().op("div")?;
    let n = t.eq(&z).and_then(|m| m.to_dtype(DType::F32)).and_then(|m| m.sum_all()).and_then(|s| s.to_scalar::<f32>()).op("div")?;
    Ok(n > 0.0)
}

/// Integer floor division, rounding toward negative infinity as Python does.
fn int_floordiv(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let q = a.div(b)?;
    let r = a.sub(&q.mul(b)?)?;
    let zero = r.zeros_like()?;
    let rz = r.ne(&zero)?;
    let sign_diff = r.lt(&zero)?.ne(&b.lt(&zero)?)?;
    let adjust = rz.mul(&sign_diff)?.to_dtype(q.dtype())?;
    q.sub(&adjust)
}

/// f64 integer values to an integer dtype with two's-complement wrap-around
/// (as PyTorch and NumPy overflow), not Candle's saturating float cast.
fn wrap_int(x: &Tensor, dt: DT) -> candle_core::Result<Tensor> {
    x.to_dtype(DType::I64)?.to_dtype(dt.candle())
}

/// Integer power by repeated squaring; keeps gradients for float inputs.
fn pow_int(x: &Tensor, n: i64) -> candle_core::Result<Tensor> {
    if n == 0 {
        return x.ones_like();
    }
    if n < 0 {
        return pow_int(x, -n)?.recip();
    }
    let mut result: Option<Tensor> = None;
    let mut base = x.clone();
    let mut e = n;
    while e > 0 {
        if e & 1 == 1 {
            result = Some(match result {
                None => base.clone(),
                Some(r) => r.mul(&base)?,
            });
        }
        e >>= 1;
        if e > 0 {
            base = base.sqr()?;
        }
    }
    Ok(result.unwrap())
}

/// Elementwise `x ** y` (same shapes, float dtype) with PyTorch's values: negative
/// bases with integral exponents keep their sign, `x ** 0 == 1`, negative bases with
/// fractional exponents give NaN. Built from differentiable ops: |x|^y = exp(y ln|x|).
fn pow_tensor(x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    let mag = y.mul(&x.abs()?.log()?)?.exp()?;
    let neg = x.lt(&x.zeros_like()?)?;
    let fractional = y.floor()?.ne(y)?;
    let half = y.affine(0.5, 0.0)?;
    let odd = half.floor()?.ne(&half)?;
    // sign = 1 - 2 * (negative base and odd exponent)
    let flip = neg.mul(&odd)?.to_dtype(x.dtype())?;
    let signed = mag.mul(&flip.affine(-2.0, 1.0)?)?;
    let nan = Tensor::full(f64::NAN, (), x.device())?.to_dtype(x.dtype())?.broadcast_as(x.shape())?;
    let one = x.ones_like()?;
    let bad = neg.mul(&fractional)?;
    let out = bad.where_cond(&nan, &signed)?;
    y.eq(&y.zeros_like()?)?.where_cond(&one, &out)
}

/// `a (op) b` with `a` a tensor and `b` any operand; `reflected` swaps the sides.
pub fn binary(a: &PyTensor, b: Operand, op: Bin, reflected: bool) -> PyResult<PyTensor> {
    let name = op.name();
    let (at, adt) = a.t_dt();
    // Hot path: same dtype and shape, plain arithmetic; no promotion or broadcast work.
    if let Operand::T(bt, bdt) = &b {
        if *bdt == adt && at.dims() == bt.dims() && adt.is_float() && matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div) {
            let (l, r) = if reflected { (bt, &at) } else { (&at, bt) };
            if let Some(out) = maybe_detach(l.elem_count(), || Ok(direct_binary(l, r, op))).op(name)? {
                return Ok(PyTensor::wrap_dt(out, adt));
            }
            if let Some(out) = maybe_detach(l.elem_count(), || one_side_tracked(l, r, op).transpose()).op(name)? {
                return Ok(PyTensor::wrap_dt(out, adt));
            }
            let out = maybe_detach(l.elem_count(), || match op {
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
        dt = DT::F32;
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
                            pow_int(&xf, n).and_then(|r| wrap_int(&r, dt)).op(name)?
                        } else {
                            pow_int(&x, n).op(name)?
                        }
                    }
                    None => {
                        let e = s.f64();
                        if e == 0.5 { x.sqrt() } else if e.fract() == 0.0 && e.abs() < 64.0 { pow_int(&x, e as i64) } else { x.powf(e) }.op(name)?
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
            if let Some(out) = maybe_detach(at.elem_count(), || Ok(direct_affine(&at, mul, add))).op(name)? {
                return Ok(PyTensor::wrap_dt(out, dt));
            }
            let out = maybe_detach(at.elem_count(), || at.affine(mul, add)).op(name)?;
            return Ok(PyTensor::wrap_dt(out, dt));
        }
    }
    let bt = match &b {
        Operand::T(t, bdt) => {
            if !t.device().same_device(&dev) {
                return Err(crate::errors::device_err(
                    name,
                    format!("Expected all tensors to be on the same device, but found {:?} and {:?}", dev.location(), t.device().location()),
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
    if matches!(op, Bin::And | Bin::Or | Bin::Xor) && dt != DT::Bool {
        return Err(dtype_err(name, format!("bitwise operations are only supported on bool tensors here, got {}", dt.name())));
    }
    let simple: Option<fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>> = match op {
        Bin::Add if dt != DT::Bool => Some(|l, r| l.add(r)),
        Bin::Sub => Some(|l, r| l.sub(r)),
        Bin::Mul if dt != DT::Bool => Some(|l, r| l.mul(r)),
        Bin::Div if dt.is_float() => Some(|l, r| l.div(r)),
        Bin::Max => Some(|l, r| l.maximum(r)),
        Bin::Min => Some(|l, r| l.minimum(r)),
        _ => None,
    };
    if let Some(f) = simple {
        let out = maybe_detach(l.elem_count(), || f(&l, &r)).op(name)?;
        let out = if dt.is_float() { out } else { out.detach() };
        return Ok(PyTensor::wrap_dt(out, dt));
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
                let q = l.div(&r).and_then(|q| q.floor()).op(name)?;
                if op == Bin::FloorDiv { Ok(q) } else { l.sub(&q.mul(&r).op(name)?) }
            } else {
                if any_zero(&r)? {
                    return Err(zero_div_err(name));
                }
                let q = int_floordiv(&l, &r).op(name)?;
                if op == Bin::FloorDiv { Ok(q) } else { l.sub(&q.mul(&r).op(name)?) }
            }
        }
        Bin::Pow => {
            if dt.is_float() {
                pow_tensor(&l, &r)
            } else {
                l.to_dtype(DType::F64).and_then(|l| pow_tensor(&l, &r.to_dtype(DType::F64)?)).and_then(|x| x.round()).and_then(|x| wrap_int(&x, dt))
            }
        }
        Bin::Max => l.maximum(&r),
        Bin::Min => l.minimum(&r),
        Bin::Eq => l.eq(&r),
        Bin::Ne => l.ne(&r),
        Bin::Lt => l.lt(&r),
        Bin::Le => l.le(&r),
        Bin::Gt => l.gt(&r),
        Bin::Ge => l.ge(&r),
        Bin::And => l.minimum(&r),
        Bin::Or => l.maximum(&r),
        Bin::Xor => l.ne(&r),
    }
    .op(name)?;
    let out_dt = if op.is_cmp() { DT::Bool } else { dt };
    // Non-float results have no gradient: keep them out of the graph.
    let out = if out_dt.is_float() { out } else { out.detach() };
    Ok(PyTensor::wrap_dt(out, out_dt))
}

/// `a[i] (op) b[i]` for the four arithmetic ops, one parallel pass
/// (`direct_binary` and `OneSideTracked` share it).
fn arith<T: Copy + Send + Sync + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T> + std::ops::Div<Output = T>>(a: &[T], b: &[T], op: Bin) -> Vec<T> {
    match op {
        Bin::Add => crate::parallel::zip_map(a, b, |x, y| x + y),
        Bin::Sub => crate::parallel::zip_map(a, b, |x, y| x - y),
        Bin::Mul => crate::parallel::zip_map(a, b, |x, y| x * y),
        _ => crate::parallel::zip_map(a, b, |x, y| x / y),
    }
}

/// Contiguous CPU operands outside autograd: one tight vectorized loop into a
/// new buffer, skipping Candle's generic dispatch (which dominates small ops),
/// and split over rayon's pool for large ones (`crate::parallel`'s policy). Candle's own parallel path runs on
/// a second thread pool beside rayon's; on 2 cores the two pools' spinning
/// workers starve each other, so large elementwise work stays on one pool.
fn direct_binary(l: &Tensor, r: &Tensor, op: Bin) -> Option<Tensor> {
    // `contiguous_offsets` below rejects strided views.
    if l.track_op() || r.track_op() || !l.device().is_cpu() {
        return None;
    }
    let n = l.elem_count();
    let (la, _) = l.layout().contiguous_offsets()?;
    let (ra, _) = r.layout().contiguous_offsets()?;
    let (ls, _) = l.storage_and_layout();
    let (rs, _) = r.storage_and_layout();
    let shape = l.shape().clone();
    match (&*ls, &*rs) {
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(a)), candle_core::Storage::Cpu(candle_core::CpuStorage::F32(b))) => {
            Tensor::from_vec(arith(&a[la..la + n], &b[ra..ra + n], op), shape, &candle_core::Device::Cpu).ok()
        }
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F64(a)), candle_core::Storage::Cpu(candle_core::CpuStorage::F64(b))) => {
            Tensor::from_vec(arith(&a[la..la + n], &b[ra..ra + n], op), shape, &candle_core::Device::Cpu).ok()
        }
        _ => None,
    }
}

/// `a (op) b` where exactly one side is in the autograd graph (a loss weight, a
/// mask, a target): Candle's `Mul` backward differentiates both operands, each
/// gradient costing a product plus a zero fill and an add over the whole tensor,
/// even for the side nobody asked about. This op computes the forward in one
/// parallel pass and, in the backward, only the tracked side's gradient. `None`
/// where it does not apply (both or neither side tracked, strided, not CPU f32/f64).
pub(crate) fn one_side_tracked(l: &Tensor, r: &Tensor, op: Bin) -> Option<candle_core::Result<Tensor>> {
    if l.track_op() == r.track_op() || !l.device().is_cpu() || !matches!(l.dtype(), DType::F32 | DType::F64) {
        return None;
    }
    l.layout().contiguous_offsets()?;
    r.layout().contiguous_offsets()?;
    Some(l.apply_op2(r, OneSideTracked { op, left: l.track_op() }))
}

struct OneSideTracked {
    op: Bin,
    /// Whether the left operand is the tracked one.
    left: bool,
}

impl candle_core::CustomOp2 for OneSideTracked {
    fn name(&self) -> &'static str {
        self.op.name()
    }
    fn cpu_fwd(&self, s1: &candle_core::CpuStorage, l1: &candle_core::Layout, s2: &candle_core::CpuStorage, l2: &candle_core::Layout) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        use candle_core::CpuStorage as C;
        let (Some((a0, a1)), Some((b0, b1))) = (l1.contiguous_offsets(), l2.contiguous_offsets()) else {
            candle_core::bail!("{}: expected contiguous operands", self.op.name())
        };
        let out = match (s1, s2) {
            (C::F32(a), C::F32(b)) => C::F32(arith(&a[a0..a1], &b[b0..b1], self.op)),
            (C::F64(a), C::F64(b)) => C::F64(arith(&a[a0..a1], &b[b0..b1], self.op)),
            _ => candle_core::bail!("{}: expected float32 or float64 operands of one dtype", self.op.name()),
        };
        Ok((out, l1.shape().clone()))
    }
    fn bwd(&self, l: &Tensor, r: &Tensor, res: &Tensor, g: &Tensor) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        // d/dl and d/dr of l (op) r, for the tracked side only.
        let d = match (self.op, self.left) {
            (Bin::Add, _) | (Bin::Sub, true) => g.clone(),
            (Bin::Sub, false) => g.neg()?,
            (Bin::Mul, true) => g.mul(r)?,
            (Bin::Mul, false) => g.mul(l)?,
            (Bin::Div, true) => g.div(r)?,
            // d(l / r)/dr = -l / r^2 = -(l / r) / r
            (_, false) => g.mul(res)?.div(r)?.neg()?,
            (_, true) => candle_core::bail!("{}: no backward", self.op.name()),
        };
        Ok(if self.left { (Some(d), None) } else { (None, Some(d)) })
    }
}

/// `x * mul + add` for a contiguous CPU tensor outside autograd, as Candle's
/// affine computes it (same formula, same rounding), in one vectorized pass.
fn direct_affine(x: &Tensor, mul: f64, add: f64) -> Option<Tensor> {
    let n = x.elem_count();
    if x.track_op() || !x.device().is_cpu() {
        return None;
    }
    let (a, _) = x.layout().contiguous_offsets()?;
    let (st, _) = x.storage_and_layout();
    let shape = x.dims().to_vec();
    let dev = candle_core::Device::Cpu;
    match &*st {
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => {
            let (m, c) = (mul as f32, add as f32);
            Tensor::from_vec(crate::parallel::map(&v[a..a + n], |x| x * m + c), shape, &dev).ok()
        }
        candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => Tensor::from_vec(crate::parallel::map(&v[a..a + n], |x| x * mul + add), shape, &dev).ok(),
        _ => None,
    }
}

/// Run `f` with the GIL released when the tensor is large enough for that to
/// pay off; a panic inside comes back as an error (see `errors::detach_if`).
pub fn maybe_detach<T: Send>(n: usize, f: impl FnOnce() -> candle_core::Result<T> + Send) -> candle_core::Result<T> {
    crate::errors::detach_if(n, f)
}

fn operand(other: &Bound<'_, PyAny>) -> PyResult<Option<Operand>> {
    if let Some(o) = extract_operand(other)? {
        return Ok(Some(o));
    }
    // NumPy arrays and lists on the other side become tensors.
    if other.cast::<numpy::PyUntypedArray>().is_ok() || other.is_instance_of::<pyo3::types::PyList>() {
        let t = crate::creation::tensor_from_data(other, None, None)?;
        let dt = t.dt();
        return Ok(Some(Operand::T(t.t(), dt)));
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
    let bt: &Tensor = gb.as_deref().unwrap_or(&ga);
    let (l, r) = if reflected { (bt, &*ga) } else { (&*ga, bt) };
    if l.dtype() != r.dtype() || l.dims() != r.dims() || l.elem_count() >= crate::errors::DETACH_ELEMS {
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
fn binop_strict(a: &PyTensor, other: &Bound<'_, PyAny>, op: Bin) -> PyResult<PyTensor> {
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
    let nt = new.t();
    if nt.dims() != cur.dims() {
        return Err(shape_err(op, format!("output with shape {:?} doesn't match the broadcast shape {:?}", cur.dims(), nt.dims())));
    }
    let (ndt, adt) = (new.dt(), a.dt());
    if ndt.category() > adt.category() {
        return Err(dtype_err(op, format!("result type {} can't be cast to the desired output type {}", ndt.name(), adt.name())));
    }
    let nt = cast(&nt, ndt, adt)?;
    crate::indexing::overwrite(a, nt, op)
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
                let r = binop_strict(self, other, $op)?;
                assign_inplace(self, r, stringify!($inplace))
            }
            fn $method(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
                binop_strict(self, other, $op)
            }
            fn $method_(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
                let r = binop_strict(slf.get(), other, $op)?;
                assign_inplace(slf.get(), r, stringify!($method_))?;
                Ok(slf.clone().unbind())
            }
        }
    };
}

dunder!(__add__, __radd__, __iadd__, add, add_, Bin::Add);
dunder!(__sub__, __rsub__, __isub__, sub, sub_, Bin::Sub);
dunder!(__mul__, __rmul__, __imul__, mul, mul_, Bin::Mul);
dunder!(__truediv__, __rtruediv__, __itruediv__, div, div_, Bin::Div);
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
        let r = binop_strict(self, other, Bin::Pow)?;
        assign_inplace(self, r, "__ipow__")
    }
    fn pow(&self, exponent: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        binop_strict(self, exponent, Bin::Pow)
    }
    fn pow_(slf: &Bound<'_, Self>, exponent: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = binop_strict(slf.get(), exponent, Bin::Pow)?;
        assign_inplace(slf.get(), r, "pow_")?;
        Ok(slf.clone().unbind())
    }
}
dunder!(__and__, __rand__, __iand__, logical_and, logical_and_, Bin::And);
dunder!(__or__, __ror__, __ior__, logical_or, logical_or_, Bin::Or);
dunder!(__xor__, __rxor__, __ixor__, logical_xor, logical_xor_, Bin::Xor);

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
            None => match op {
                // `t == None` is False, as for any Python object.
                C::Eq => Ok(false.into_pyobject(py)?.to_owned().into_any().unbind()),
                C::Ne => Ok(true.into_pyobject(py)?.to_owned().into_any().unbind()),
                _ => Ok(py.NotImplemented()),
            },
        }
    }
    fn eq(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Eq) }
    fn ne(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Ne) }
    fn lt(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Lt) }
    fn le(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Le) }
    fn gt(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Gt) }
    fn ge(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Ge) }
    fn maximum(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Max) }
    fn minimum(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Min) }
    fn true_divide(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Div) }
    fn subtract(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Sub) }
    fn multiply(&self, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> { binop_strict(self, other, Bin::Mul) }

    fn equal(&self, other: &Bound<'_, PyTensor>) -> PyResult<bool> {
        let (a, b) = (self.t(), other.get().t());
        if a.dims() != b.dims() {
            return Ok(false);
        }
        let r = binary(self, Operand::T(b, other.get().dt()), Bin::Ne, false)?;
        Ok(r.t().to_dtype(DType::F32).and_then(|x| x.sum_all()).and_then(|x| x.to_scalar::<f32>()).op("equal")? == 0.0)
    }

    fn __neg__(&self) -> PyResult<PyTensor> {
        if self.is_bool {
            return Err(type_err("neg", "negation, the `-` operator, on a bool tensor is not supported; use `~` or logical_not()"));
        }
        let t = self.t();
        // Candle has no integer neg kernel: 0 - x (wrapping for unsigned types, as PyTorch).
        let out = if !self.dt().is_float() { t.zeros_like().and_then(|z| z.sub(&t)) } else { t.neg() }.op("neg")?;
        Ok(PyTensor::wrap(out, false))
    }
    fn neg(&self) -> PyResult<PyTensor> {
        self.__neg__()
    }
    fn __pos__(slf: &Bound<'_, Self>) -> Py<PyTensor> {
        slf.clone().unbind()
    }
    fn __abs__(&self) -> PyResult<PyTensor> {
        self.abs()
    }
    fn __invert__(&self) -> PyResult<PyTensor> {
        self.logical_not()
    }
    fn logical_not(&self) -> PyResult<PyTensor> {
        let t = self.t();
        let out = t.eq(&t.zeros_like().op("logical_not")?).op("logical_not")?;
        Ok(PyTensor::wrap(out, true))
    }
    fn abs(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if matches!(self.dt(), DT::Bool | DT::U8 | DT::U32) {
            return Ok(PyTensor::wrap(t, self.is_bool));
        }
        Ok(PyTensor::wrap(t.abs().op("abs")?, false))
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
        matmul(py, self, mat2.get())
    }
    fn dot(&self, py: Python<'_>, other: &Bound<'_, PyTensor>) -> PyResult<PyTensor> {
        if self.t().rank() != 1 || other.get().t().rank() != 1 {
            return Err(shape_err("dot", format!("1D tensors expected, but got {:?} and {:?}", self.t().dims(), other.get().t().dims())));
        }
        matmul(py, self, other.get())
    }
}

/// PyTorch's `matmul`: 1-D operands are promoted and squeezed back, batch dims broadcast.
pub fn matmul(py: Python<'_>, a: &PyTensor, b: &PyTensor) -> PyResult<PyTensor> {
    let (at, bt) = (a.t(), b.t());
    let dt = DT::promote(a.dt(), b.dt());
    if at.rank() == 0 || bt.rank() == 0 {
        return Err(shape_err("matmul", format!("both arguments need at least 1 dimension, got {:?} and {:?}", at.dims(), bt.dims())));
    }
    let (ra, rb) = (at.rank(), bt.rank());
    let ka = at.dims()[ra - 1];
    let kb = if rb == 1 { bt.dims()[0] } else { bt.dims()[rb - 2] };
    if ka != kb {
        return Err(shape_err(
            "matmul",
            format!("mat1 and mat2 shapes cannot be multiplied ({:?} and {:?})", at.dims(), bt.dims()),
        ));
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
    let l = cast(&at, a.dt(), cdt)?;
    let r = cast(&bt, b.dt(), cdt)?;
    let l = if ra == 1 { l.unsqueeze(0).op("matmul")? } else { l };
    let r = if rb == 1 { r.unsqueeze(1).op("matmul")? } else { r };
    let run = |l: &Tensor, r: &Tensor| if l.rank() == 2 && r.rank() == 2 { crate::layers::linear::matmul2d(l, r) } else { l.broadcast_matmul(r) };
    let mut out = crate::errors::detach_op(py, "matmul", || match run(&l, &r) {
        // Candle's gemm takes transposed matrices but not every batch striding
        // (e.g. heads split with transpose(1, 2)): retry on contiguous copies.
        Err(_) if !l.is_contiguous() || !r.is_contiguous() => run(&l.contiguous()?, &r.contiguous()?),
        res => res,
    })?;
    if rb == 1 {
        out = out.squeeze(D::Minus1).op("matmul")?;
    }
    if ra == 1 {
        let d = if rb == 1 { 0 } else { out.rank() - 2 };
        out = out.squeeze(d).op("matmul")?;
    }
    let out = cast(&out, cdt, dt)?;
    Ok(PyTensor::wrap_dt(out, dt))
}

/// Unary float functions: integer inputs compute in float32, as in PyTorch.
fn float_input(a: &PyTensor) -> PyResult<(Tensor, DT)> {
    let dt = a.dt();
    if dt.is_float() {
        Ok((a.t(), dt))
    } else {
        Ok((cast(&a.t(), dt, DT::F32)?, DT::F32))
    }
}

macro_rules! unary_float {
    ($($name:ident => $f:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            fn $name(&self) -> PyResult<PyTensor> {
                let (t, dt) = float_input(self)?;
                let f: fn(&Tensor) -> candle_core::Result<Tensor> = $f;
                let out = maybe_detach(t.elem_count(), || f(&t)).op(stringify!($name))?;
                Ok(PyTensor::wrap_dt(out, dt))
            }
            )*
        }
    };
}

fn round_half_even(x: &Tensor) -> candle_core::Result<Tensor> {
    let r = x.round()?;
    let tie = r.sub(x)?.abs()?.eq(0.5)?;
    let half = r.affine(0.5, 0.0)?;
    let odd = half.floor()?.ne(&half)?;
    let fix = tie.mul(&odd)?.to_dtype(x.dtype())?.mul(&x.sign()?)?;
    r.sub(&fix)
}

unary_float! {
    exp => |t| t.exp(),
    log => |t| t.log(),
    log2 => |t| t.log().and_then(|l| l.affine(1.0 / std::f64::consts::LN_2, 0.0)),
    log10 => |t| t.log().and_then(|l| l.affine(1.0 / std::f64::consts::LN_10, 0.0)),
    log1p => |t| t.affine(1.0, 1.0).and_then(|x| x.log()),
    expm1 => |t| t.exp().and_then(|x| x.affine(1.0, -1.0)),
    sqrt => |t| t.sqrt(),
    rsqrt => |t| t.sqrt().and_then(|x| x.recip()),
    sin => |t| t.sin(),
    cos => |t| t.cos(),
    tan => |t| t.sin().and_then(|s| s.div(&t.cos()?)),
    tanh => |t| t.tanh(),
    sigmoid => |t| candle_nn::ops::sigmoid(t),
    erf => |t| t.erf(),
    reciprocal => |t| t.recip(),
    frac => |t| t.sub(&t.sign()?.mul(&t.abs()?.floor()?)?),
}

macro_rules! unary_round {
    ($($name:ident => $f:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            /// Integer inputs are already whole: returned unchanged, keeping their dtype (as PyTorch).
            fn $name(&self) -> PyResult<PyTensor> {
                let dt = self.dt();
                if !dt.is_float() {
                    return Ok(PyTensor::wrap_dt(self.t().copy().op(stringify!($name))?, dt));
                }
                let f: fn(&Tensor) -> candle_core::Result<Tensor> = $f;
                Ok(PyTensor::wrap_dt(f(&self.t()).op(stringify!($name))?, dt))
            }
            )*
        }
    };
}

unary_round! {
    floor => |t| t.floor(),
    ceil => |t| t.ceil(),
    round => round_half_even,
    trunc => |t| t.sign().and_then(|s| s.mul(&t.abs()?.floor()?)),
}

#[pymethods]
impl PyTensor {
    /// Exact GELU, `x * Phi(x)`: the parallel kernel behind `F.gelu` / `nn.GELU`.
    fn _gelu(&self, py: Python<'_>) -> PyResult<PyTensor> {
        let (t, dt) = float_input(self)?;
        let out = crate::errors::detach_op(py, "gelu", || kernels::gelu_erf(&t))?;
        Ok(PyTensor::wrap_dt(out, dt))
    }
    fn relu(&self) -> PyResult<PyTensor> {
        let t = self.t();
        Ok(PyTensor::wrap_dt(crate::layers::activation::relu(&t).op("relu")?, self.dt()))
    }
    fn square(&self) -> PyResult<PyTensor> {
        let t = self.t();
        // Candle has no integer sqr kernel.
        let out = if self.dt().is_float() { t.sqr() } else { t.mul(&t) }.op("square")?;
        Ok(PyTensor::wrap_dt(out, self.dt()))
    }
    fn sign(&self) -> PyResult<PyTensor> {
        let t = self.t();
        if !self.dt().is_float() {
            let z = t.zeros_like().op("sign")?;
            let p = t.gt(&z).and_then(|p| p.to_dtype(t.dtype())).op("sign")?;
            let n = t.lt(&z).and_then(|n| n.to_dtype(t.dtype())).op("sign")?;
            return Ok(PyTensor::wrap_dt(p.sub(&n).op("sign")?, self.dt()));
        }
        Ok(PyTensor::wrap_dt(t.sign().op("sign")?, self.dt()))
    }

    /// `clamp(min=None, max=None)`; bounds may be numbers or tensors.
    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let min = min.filter(|m| !m.is_none());
        let max = max.filter(|m| !m.is_none());
        if min.is_none() && max.is_none() {
            return Err(value_err("clamp", "At least one of 'min' or 'max' must not be None"));
        }
        let mut cur = PyTensor::wrap_dt(self.t(), self.dt());
        if let Some(m) = min {
            cur = binop_strict(&cur, m, Bin::Max)?;
        }
        if let Some(m) = max {
            cur = binop_strict(&cur, m, Bin::Min)?;
        }
        Ok(cur)
    }
    #[pyo3(signature = (min=None, max=None))]
    fn clip(&self, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        self.clamp(min, max)
    }
    #[pyo3(signature = (min=None, max=None))]
    fn clamp_(slf: &Bound<'_, Self>, min: Option<&Bound<'_, PyAny>>, max: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyTensor>> {
        let r = slf.get().clamp(min, max)?;
        assign_inplace(slf.get(), r, "clamp_")?;
        Ok(slf.clone().unbind())
    }

    fn masked_fill(&self, mask: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let m = mask.get();
        if !m.is_bool {
            return Err(dtype_err("masked_fill", format!("mask must be a bool tensor, got {}", m.dt().name())));
        }
        let v = match crate::tensor::extract_scalar(value) {
            Some(s) => s.tensor(self.dt(), self.t().device())?,
            None => {
                let (t, d) = crate::tensor::as_tensor(value, "masked_fill")?;
                if t.rank() != 0 {
                    return Err(value_err("masked_fill", "value must be a number or a 0-d tensor"));
                }
                cast(&t, d, self.dt())?
            }
        };
        let out = where_(&m.t(), &v, &self.t(), "masked_fill")?;
        if out.dims() != self.t().dims() {
            return Err(shape_err("masked_fill", format!("mask of shape {:?} cannot broadcast to the tensor's shape {:?}", m.t().dims(), self.t().dims())));
        }
        Ok(PyTensor::wrap_dt(out, self.dt()))
    }
    fn masked_fill_(slf: &Bound<'_, Self>, mask: &Bound<'_, PyTensor>, value: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        let r = slf.get().masked_fill(mask, value)?;
        assign_inplace(slf.get(), r, "masked_fill_")?;
        Ok(slf.clone().unbind())
    }
}

/// `where(cond, x, y)` with all three broadcast together.
pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor, op: &str) -> PyResult<Tensor> {
    let s1 = cond.shape().broadcast_shape_binary_op(x.shape(), "where");
    let shape = s1
        .and_then(|s| s.broadcast_shape_binary_op(y.shape(), "where"))
        .map_err(|_| shape_err(op, format!("shapes {:?}, {:?} and {:?} cannot be broadcast together", cond.dims(), x.dims(), y.dims())))?;
    let c = cond.broadcast_as(&shape).op(op)?;
    let x = x.broadcast_as(&shape).op(op)?;
    let y = y.broadcast_as(&shape).op(op)?;
    c.where_cond(&x, &y).op(op)
}

#[pyfunction]
#[pyo3(name = "where", signature = (condition, input, other))]
fn where_fn(condition: &Bound<'_, PyTensor>, input: &Bound<'_, PyAny>, other: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let c = condition.get();
    if !c.is_bool {
        return Err(dtype_err("where", format!("condition must be a bool tensor, got {}", c.dt().name())));
    }
    let dev = c.t().device().clone();
    let a = operand(input)?.ok_or_else(|| type_err("where", "input must be a Tensor or a number"))?;
    let b = operand(other)?.ok_or_else(|| type_err("where", "other must be a Tensor or a number"))?;
    let dt = match (&a, &b) {
        (Operand::T(t, ad), bo) => result_dt(*ad, t.rank() == 0, bo),
        (Operand::S(s), Operand::T(t, bd)) => result_dt(*bd, t.rank() == 0, &Operand::S(*s)),
        (Operand::S(x), Operand::S(y)) => {
            let (x, y) = (x.dt(), y.dt());
            let p = DT::promote(x, y);
            if p == DT::I64 || p == DT::Bool { p } else { DT::F32 }
        }
    };
    let conv = |o: Operand| -> PyResult<Tensor> {
        match o {
            Operand::T(t, d) => cast(&t, d, dt),
            Operand::S(s) => s.tensor(dt, &dev),
        }
    };
    let out = where_(&c.t(), &conv(a)?, &conv(b)?, "where")?;
    Ok(PyTensor::wrap_dt(out, dt))
}

/// Dims argument of a reduction: None (all), an int, or a sequence of ints.
pub fn reduce_dims(dim: Option<&Bound<'_, PyAny>>, rank: usize, op: &str) -> PyResult<Option<Vec<usize>>> {
    let Some(d) = dim.filter(|d| !d.is_none()) else { return Ok(None) };
    let raw: Vec<i64> = if let Ok(i) = d.extract::<i64>() { vec![i] } else { d.extract::<Vec<i64>>().map_err(|_| type_err(op, "dim must be an int or a tuple of ints"))? };
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

fn squeeze_dims(t: Tensor, dims: &[usize]) -> candle_core::Result<Tensor> {
    let mut t = t;
    for &d in dims.iter().rev() {
        t = t.squeeze(d)?;
    }
    Ok(t)
}

/// Sum over `dims` (all when None); uses the parallel kernel where it applies.
pub fn sum_dims(py: Python<'_>, t: &Tensor, dims: Option<&[usize]>, keepdim: bool) -> PyResult<Tensor> {
    if t.rank() == 0 {
        return Ok(t.clone());
    }
    let all: Vec<usize> = (0..t.rank()).collect();
    let dims = dims.unwrap_or(&all);
    if dims.is_empty() {
        return Ok(t.clone());
    }
    let out = crate::errors::detach_op(py, "sum", || kernels::sum_keepdim(t, dims))?;
    if keepdim { Ok(out) } else { squeeze_dims(out, dims).op("sum") }
}

fn minmax_tuple<'py>(py: Python<'py>, values: PyTensor, indices: PyTensor, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let f = py.import("candle_py._tensor_helpers")?.getattr(if name == "max" { "_max_result" } else { "_min_result" })?;
    f.call1((Py::new(py, values)?, Py::new(py, indices)?))
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
        let t = self.t();
        let dt = self.dt();
        let cdt = if dt == DT::Bool { DT::U8 } else { dt };
        let _ = cdt;
        match dim.filter(|d| !d.is_none()) {
            None => {
                if t.elem_count() == 0 {
                    return Err(value_err(name, "Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."));
                }
                let flat = t.flatten_all().op(name)?;
                let v = if is_max { flat.max_keepdim(0) } else { flat.min_keepdim(0) }.and_then(|v| v.squeeze(0)).op(name)?;
                Ok(Py::new(py, PyTensor::wrap_dt(v, dt))?.into_bound(py).into_any())
            }
            Some(d) => {
                let d: i64 = d.extract().map_err(|_| type_err(name, "dim must be an int"))?;
                let d = norm_dim(d, t.rank(), name)?;
                if t.rank() == 0 {
                    let idx = Tensor::new(0i64, t.device()).op(name)?;
                    return minmax_tuple(py, PyTensor::wrap_dt(t.clone(), dt), PyTensor::wrap_dt(idx, DT::I64), name);
                }
                if t.dims()[d] == 0 {
                    return Err(value_err(name, format!("cannot compute {name} over an empty dimension {d} of shape {:?}", t.dims())));
                }
                let (v, i) = if t.elem_count() == 0 {
                    let mut shape = t.dims().to_vec();
                    shape[d] = 1;
                    (Tensor::zeros(shape.clone(), t.dtype(), t.device()).op(name)?, Tensor::zeros(shape, DType::I64, t.device()).op(name)?)
                } else {
                    let v = if is_max { t.max_keepdim(d) } else { t.min_keepdim(d) }.op(name)?;
                    let i = if is_max { t.argmax_keepdim(d) } else { t.argmin_keepdim(d) }.and_then(|i| i.to_dtype(DType::I64)).op(name)?;
                    (v, i)
                };
                let (v, i) = if keepdim { (v, i) } else { (v.squeeze(d).op(name)?, i.squeeze(d).op(name)?) };
                minmax_tuple(py, PyTensor::wrap_dt(v, dt), PyTensor::wrap_dt(i, DT::I64), name)
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
                if t.rank() == 0 { (t.reshape(1).op(name)?, 0, true) } else { (t.clone(), d, false) }
            }
        };
        let i = if is_max { t.argmax_keepdim(d) } else { t.argmin_keepdim(d) }.and_then(|i| i.to_dtype(DType::I64)).op(name)?;
        let i = if shape_all {
            let i = i.squeeze(0).op(name)?;
            if keepdim { i.reshape(vec![1usize; self.t().rank()]).op(name)? } else { i }
        } else if keepdim {
            i
        } else {
            i.squeeze(d).op(name)?
        };
        Ok(PyTensor::wrap_dt(i, DT::I64))
    }

    fn var_impl(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, correction: f64, keepdim: bool, op: &str) -> PyResult<PyTensor> {
        let (t, dt) = float_input(self)?;
        let dims = reduce_dims(dim, t.rank(), op)?;
        let all: Vec<usize> = (0..t.rank()).collect();
        let dl = dims.clone().unwrap_or(all);
        let n: usize = dl.iter().map(|&d| t.dims()[d]).product::<usize>().max(if t.rank() == 0 { 1 } else { 0 });
        let mean = sum_dims(py, &t, Some(&dl), true)?.affine(1.0 / n as f64, 0.0).op(op)?;
        let diff = t.broadcast_sub(&mean).op(op)?;
        let ss = sum_dims(py, &diff.sqr().op(op)?, Some(&dl), keepdim)?;
        let denom = n as f64 - correction;
        let out = if denom <= 0.0 { ss.affine(f64::NAN, 0.0).op(op)? } else { ss.affine(1.0 / denom, 0.0).op(op)? };
        Ok(PyTensor::wrap_dt(out, dt))
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
        let dt = match crate::tensor::opt_dtype(dtype)? {
            Some(d) => d,
            None if src_dt.is_float() => src_dt,
            None => DT::I64,
        };
        let t = cast(&self.t(), src_dt, dt)?;
        let dims = reduce_dims(dim, t.rank(), "sum")?;
        let out = sum_dims(py, &t, dims.as_deref(), keepdim)?;
        Ok(PyTensor::wrap_dt(out, dt))
    }

    #[pyo3(signature = (dim=None, keepdim=false, *, dtype=None))]
    fn mean(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src_dt = self.dt();
        let dt = crate::tensor::opt_dtype(dtype)?.unwrap_or(src_dt);
        if !dt.is_float() {
            return Err(dtype_err("mean", format!("could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", dt.name())));
        }
        let t = cast(&self.t(), src_dt, dt)?;
        let dims = reduce_dims(dim, t.rank(), "mean")?;
        let n: usize = match &dims {
            None => t.elem_count(),
            Some(d) => d.iter().map(|&i| t.dims()[i]).product(),
        };
        let s = sum_dims(py, &t, dims.as_deref(), keepdim)?;
        let out = s.affine(if n == 0 { f64::NAN } else { 1.0 / n as f64 }, 0.0).op("mean")?;
        Ok(PyTensor::wrap_dt(out, dt))
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
    fn var(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, unbiased: Option<bool>, keepdim: bool, correction: Option<f64>) -> PyResult<PyTensor> {
        self.var_impl(py, dim, correction_of(unbiased, correction), keepdim, "var")
    }
    #[pyo3(signature = (dim=None, unbiased=None, keepdim=false, *, correction=None))]
    fn std(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, unbiased: Option<bool>, keepdim: bool, correction: Option<f64>) -> PyResult<PyTensor> {
        let v = self.var_impl(py, dim, correction_of(unbiased, correction), keepdim, "std")?;
        let dt = v.dt();
        Ok(PyTensor::wrap_dt(v.t().sqrt().op("std")?, dt))
    }
    #[pyo3(signature = (dim, *, dtype=None))]
    fn cumsum(&self, py: Python<'_>, dim: i64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
        let src = self.dt();
        let dt = crate::tensor::opt_dtype(dtype)?.unwrap_or(if src.is_float() { src } else { DT::I64 });
        let t = self.t();
        if t.rank() == 0 {
            return Ok(PyTensor::wrap_dt(cast(&t, src, dt)?, dt));
        }
        let d = norm_dim(dim, t.rank(), "cumsum")?;
        // Candle's cumsum is a matmul: exact for floats, so integers go through f64.
        let cdt = if dt.is_float() { dt } else { DT::F64 };
        let x = cast(&t, src, cdt)?;
        let out = crate::errors::detach_op(py, "cumsum", || x.cumsum(d))?;
        let out = if cdt != dt { out.round().op("cumsum")? } else { out };
        Ok(PyTensor::wrap_dt(cast(&out, cdt, dt)?, dt))
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
        let dt = crate::tensor::opt_dtype(dtype)?.unwrap_or(if src.is_float() { src } else { DT::I64 });
        if matches!(dt, DT::F16 | DT::BF16) {
            // Multiply in f32 and round once at the end, as PyTorch's CPU kernel accumulates.
            let x = cast(&self.t(), src, DT::F32)?;
            let r = PyTensor::wrap_dt(x, DT::F32).prod(py, dim, keepdim, None)?;
            return Ok(PyTensor::wrap_dt(cast(&r.t(), DT::F32, dt)?, dt));
        }
        let t = cast(&self.t(), src, dt)?;
        let out = match dim {
            None => {
                let flat = t.flatten_all().op("prod")?;
                let p = crate::errors::detach_op(py, "prod", || kernels::prod_keepdim(&flat, 0))?;
                if keepdim { p.reshape(vec![1usize; t.rank()]).op("prod")? } else { p.squeeze(0).op("prod")? }
            }
            Some(d) => {
                if t.rank() == 0 {
                    norm_dim(d, 0, "prod")?;
                    t.clone()
                } else {
                    let d = norm_dim(d, t.rank(), "prod")?;
                    let p = crate::errors::detach_op(py, "prod", || kernels::prod_keepdim(&t, d))?;
                    if keepdim { p } else { p.squeeze(d).op("prod")? }
                }
            }
        };
        Ok(PyTensor::wrap_dt(out, dt))
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
        let (t, dt) = float_input(self)?;
        let p = p.unwrap_or(2.0);
        let dims = reduce_dims(dim, t.rank(), "norm")?;
        let out = if p == 2.0 {
            sum_dims(py, &t.sqr().op("norm")?, dims.as_deref(), keepdim)?.sqrt().op("norm")?
        } else if p == 1.0 {
            sum_dims(py, &t.abs().op("norm")?, dims.as_deref(), keepdim)?
        } else {
            sum_dims(py, &t.abs().and_then(|a| a.powf(p)).op("norm")?, dims.as_deref(), keepdim)?.powf(1.0 / p).op("norm")?
        };
        Ok(PyTensor::wrap_dt(out, dt))
    }
}

impl PyTensor {
    fn amaxmin(&self, py: Python<'_>, dim: Option<&Bound<'_, PyAny>>, keepdim: bool, is_max: bool) -> PyResult<PyTensor> {
        let name = if is_max { "amax" } else { "amin" };
        let t = self.t();
        let dims = reduce_dims(dim, t.rank(), name)?.unwrap_or_else(|| (0..t.rank()).collect());
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
            out = crate::errors::detach_op(py, name, || if is_max { out.max_keepdim(d) } else { out.min_keepdim(d) })?;
        }
        if !keepdim {
            out = squeeze_dims(out, &dims).op(name)?;
        }
        Ok(PyTensor::wrap_dt(out, self.dt()))
    }

    fn anyall(&self, dim: Option<i64>, keepdim: bool, any: bool) -> PyResult<PyTensor> {
        let name = if any { "any" } else { "all" };
        let t = self.t();
        let nz = t.ne(&t.zeros_like().op(name)?).and_then(|m| m.to_dtype(DType::F32)).op(name)?;
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
                if keepdim || t.rank() == 0 { s } else { s.squeeze(d).op(name)? }
            }
        };
        Ok(PyTensor::wrap_dt(out, DT::Bool))
    }
}

pub fn softmax_impl(py: Python<'_>, a: &PyTensor, dim: i64, dtype: Option<&Bound<'_, PyAny>>, log: bool) -> PyResult<PyTensor> {
    let name = if log { "log_softmax" } else { "softmax" };
    let src = a.dt();
    let dt = crate::tensor::opt_dtype(dtype)?.unwrap_or(if src.is_float() { src } else { DT::F32 });
    if !dt.is_float() {
        return Err(dtype_err(name, "softmax needs a floating point dtype"));
    }
    let t = cast(&a.t(), src, dt)?;
    if t.rank() == 0 {
        let out = if log { t.zeros_like() } else { t.ones_like() }.op(name)?;
        return Ok(PyTensor::wrap_dt(out, dt));
    }
    let d = norm_dim(dim, t.rank(), name)?;
    let out = crate::errors::detach_op(py, name, || kernels::softmax(&t, d, log))?;
    Ok(PyTensor::wrap_dt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(where_fn, m)?)?;
    let _ = PyTuple::empty(m.py());
    Ok(())
}
