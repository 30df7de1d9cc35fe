//! Differentiable elementwise ops beyond `ops`' arithmetic: absolute value, the
//! rounding family, `frac`, `logsigmoid`, and the binary ops with PyTorch's formulas
//! (tensor powers, remainder, floor division, maximum/minimum). Outputs are computed
//! by the caller's kernels; only the formulas live here.
use crate::autograd::ops::{affine, log, mul, neg, record, sigmoid, sum_to, where_cond};
use crate::autograd::value::Value;
use candle_core::{Result, Shape, Tensor};

fn c(v: Value) -> Option<Value> {
    Some(v)
}

/// `|x|`: the gradient is `g * sign(x)` (0 at 0, as PyTorch).
pub fn abs(x: &Value) -> Result<Value> {
    Ok(record("AbsBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Abs)?, &[x], false, |s, g, _| {
        Ok(vec![c(mul(g, &Value::plain(s[0].data.sign()?))?)])
    }))
}

/// A piecewise-constant op (`floor`, `ceil`, `round`, `trunc`, `sign`) whose output is
/// `out`: its gradient is zero everywhere.
pub fn constant_pieces(x: &Value, out: Tensor, name: &'static str) -> Result<Value> {
    Ok(record(name, &[x], out, &[], false, |_, g, _| Ok(vec![c(Value::plain(g.data.zeros_like()?))])))
}

/// `x - trunc(x)` given as `out`: the gradient passes unchanged.
pub fn frac(x: &Value, out: Tensor) -> Result<Value> {
    Ok(record("FracBackward0", &[x], out, &[], false, |_, g, _| Ok(vec![c(g.clone())])))
}

/// `log(sigmoid(x))` given as `out`: the gradient is `g * sigmoid(-x)`.
pub fn logsigmoid(x: &Value, out: Tensor) -> Result<Value> {
    Ok(record("LogSigmoidBackward0", &[x], out, &[x], false, |s, g, _| Ok(vec![c(mul(g, &sigmoid(&neg(&s[0])?)?)?)])))
}

/// `x` clamped to number bounds, given as `out`: PyTorch's `ClampBackward1` (and
/// `ClampMinBackward0`/`ClampMaxBackward0`) passes the gradient only strictly inside
/// the bounds, so it is 0 at a bound and at NaN.
pub fn clamp_scalar(x: &Value, out: Tensor, lo: Option<f64>, hi: Option<f64>) -> Result<Value> {
    let name = match (lo, hi) {
        (Some(_), Some(_)) => "ClampBackward1",
        (Some(_), None) => "ClampMinBackward0",
        _ => "ClampMaxBackward0",
    };
    clamp_grad_inside(name, x, out, lo, hi, false)
}

/// `hardtanh(x, lo, hi)` given as `out`: PyTorch's `HardtanhBackward0` passes the
/// gradient strictly inside the bounds and, unlike clamp's, at NaN.
pub fn hardtanh(x: &Value, out: Tensor, lo: f64, hi: f64) -> Result<Value> {
    clamp_grad_inside("HardtanhBackward0", x, out, Some(lo), Some(hi), true)
}

/// The gradient of a clamp, passed where `lo < x < hi` (a missing bound always holds),
/// and at NaN when `nan_passes` (there every comparison is false).
fn clamp_grad_inside(name: &'static str, x: &Value, out: Tensor, lo: Option<f64>, hi: Option<f64>, nan_passes: bool) -> Result<Value> {
    Ok(record(name, &[x], out, &[x], false, move |s, g, _| {
        let t = &s[0].data;
        // 1 where an element leaves the open interval, as u8 (NaN compares false)
        let mut outside = t.ne(t)?.zeros_like()?;
        if let Some(lo) = lo {
            outside = outside.maximum(&t.le(lo)?)?;
        }
        if let Some(hi) = hi {
            outside = outside.maximum(&t.ge(hi)?)?;
        }
        if !nan_passes {
            outside = outside.maximum(&t.ne(t)?)?;
        }
        // A select, not a product with the mask: a NaN or infinite incoming gradient
        // gives 0 outside, as PyTorch's `(x <= lo || x >= hi) ? 0 : grad`.
        let zeros = Value::plain(g.data.zeros_like()?);
        Ok(vec![c(where_cond(&outside.eq(0u8)?, g, &zeros)?)])
    }))
}

/// The binary ops other than + - * / whose gradients `binary` records.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Binary {
    Pow,
    Remainder,
    FloorDivide,
    Maximum,
    Minimum,
}

/// Record `out = a (op) b` (broadcasting allowed; `out` computed by the caller), with
/// PyTorch's formulas; the gradients are summed back to each operand's shape.
/// `pow_fn` computes `a ** b` again for the power's formulas (recorded, for create_graph).
pub fn binary(op: Binary, a: &Value, b: &Value, out: Tensor, pow_fn: fn(&Value, &Value) -> Result<Value>) -> Result<Value> {
    let (sa, sb) = (a.data.shape().clone(), b.data.shape().clone());
    let name = match op {
        Binary::Pow => "PowBackward1",
        Binary::Remainder => "RemainderBackward0",
        Binary::FloorDivide => "FloorDivideBackward0",
        Binary::Maximum => "MaximumBackward0",
        Binary::Minimum => "MinimumBackward0",
    };
    let shape = out.shape().clone();
    Ok(record(name, &[a, b], out, &[a, b], false, move |s, g, n| {
        let (a, b) = (&s[0], &s[1]);
        let (ga, gb) = match op {
            Binary::Pow => {
                // d/da = b * a^(b-1); d/db = a^b * ln(a), taken as 0 where a == 0 and b >= 0.
                let ga = if n[0] { c(mul(g, &mul(b, &pow_fn(a, &affine(b, 1.0, -1.0)?)?)?)?) } else { None };
                let gb = if n[1] {
                    let full = mul(g, &mul(&pow_fn(a, b)?, &log(a)?)?)?;
                    let (ab, bb) = (a.data.broadcast_as(&shape)?, b.data.broadcast_as(&shape)?);
                    let zero_base = ab.eq(0.0)?.mul(&bb.ge(0.0)?)?;
                    c(where_cond(&zero_base, &Value::plain(full.data.zeros_like()?), &full)?)
                } else {
                    None
                };
                (ga, gb)
            }
            Binary::Remainder => {
                // a - floor(a / b) * b: d/da = 1, d/db = -floor(a / b).
                let q = Value::plain(a.data.broadcast_div(&b.data)?.floor()?);
                (n[0].then(|| g.clone()), if n[1] { c(neg(&mul(g, &q)?)?) } else { None })
            }
            // As PyTorch, which defines no derivative for it.
            Binary::FloorDivide => candle_core::bail!("derivative for floor_divide is not implemented"),
            Binary::Maximum | Binary::Minimum => {
                // PyTorch's masks: an operand gets the gradient unless it loses the
                // comparison, half of it on ties; where a NaN is involved nothing
                // compares, so both operands get all of it.
                let (ab, bb) = (a.data.broadcast_as(&shape)?, b.data.broadcast_as(&shape)?);
                let (a_loses, b_loses) = if op == Binary::Maximum { (ab.lt(&bb)?, ab.gt(&bb)?) } else { (ab.gt(&bb)?, ab.lt(&bb)?) };
                let dt = g.data.dtype();
                let ties = ab.eq(&bb)?.to_dtype(dt)?.affine(0.5, 0.0)?;
                let wa = Value::plain(a_loses.to_dtype(dt)?.add(&ties)?.affine(-1.0, 1.0)?);
                let wb = Value::plain(b_loses.to_dtype(dt)?.add(&ties)?.affine(-1.0, 1.0)?);
                let ga = if n[0] { c(mul(g, &wa)?) } else { None };
                let gb = if n[1] { c(mul(g, &wb)?) } else { None };
                (ga, gb)
            }
        };
        let back = |v: Option<Value>, to: &Shape| v.map(|v| sum_to(&v, to)).transpose();
        Ok(vec![back(ga, &sa)?, back(gb, &sb)?])
    }))
}
