//! Differentiable forms of `ops::special` (inverse/hyperbolic trigonometry, `exp2`,
//! `erfc`, `erfinv`, the gamma family, `atan2`), with PyTorch's node names and
//! formulas, written with recorded ops so that `create_graph` differentiates them again.
use crate::autograd::mode::grad_enabled;
use crate::autograd::ops::{affine, exp, mul, neg, recip, record, sqr, sqrt, sum_to};
use crate::autograd::Value;
use crate::ops::special::{apply, Special};
use candle_core::Result;
use std::f64::consts::{FRAC_2_SQRT_PI, LN_2, PI};

fn c(v: Value) -> Option<Value> {
    Some(v)
}

/// `f` of `x` recorded under `name`, its gradient `g * d(x, y)` (`y` the result,
/// recomputed under create_graph so that it is differentiable).
fn unary(x: &Value, f: Special, name: &'static str, d: fn(&Value, &Value) -> Result<Value>) -> Result<Value> {
    Ok(record(name, &[x], apply(&x.data, f)?, &[x], true, move |s, g, _| {
        let y = if grad_enabled() { unary(&s[0], f, name, d)? } else { s[1].clone() };
        Ok(vec![c(mul(g, &d(&s[0], &y)?)?)])
    }))
}

/// `1 - x^2`.
fn one_minus_sq(x: &Value) -> Result<Value> {
    affine(&sqr(x)?, -1.0, 1.0)
}

pub fn atan(x: &Value) -> Result<Value> {
    unary(x, Special::Atan, "AtanBackward0", |x, _| recip(&affine(&sqr(x)?, 1.0, 1.0)?))
}
pub fn asin(x: &Value) -> Result<Value> {
    unary(x, Special::Asin, "AsinBackward0", |x, _| recip(&sqrt(&one_minus_sq(x)?)?))
}
pub fn acos(x: &Value) -> Result<Value> {
    unary(x, Special::Acos, "AcosBackward0", |x, _| neg(&recip(&sqrt(&one_minus_sq(x)?)?)?))
}
pub fn sinh(x: &Value) -> Result<Value> {
    unary(x, Special::Sinh, "SinhBackward0", |x, _| cosh(x))
}
pub fn cosh(x: &Value) -> Result<Value> {
    unary(x, Special::Cosh, "CoshBackward0", |x, _| sinh(x))
}
pub fn asinh(x: &Value) -> Result<Value> {
    unary(x, Special::Asinh, "AsinhBackward0", |x, _| recip(&sqrt(&affine(&sqr(x)?, 1.0, 1.0)?)?))
}
pub fn acosh(x: &Value) -> Result<Value> {
    unary(x, Special::Acosh, "AcoshBackward0", |x, _| recip(&sqrt(&affine(&sqr(x)?, 1.0, -1.0)?)?))
}
pub fn atanh(x: &Value) -> Result<Value> {
    unary(x, Special::Atanh, "AtanhBackward0", |x, _| recip(&one_minus_sq(x)?))
}
pub fn exp2(x: &Value) -> Result<Value> {
    unary(x, Special::Exp2, "Exp2Backward0", |_, y| affine(y, LN_2, 0.0))
}
pub fn erfc(x: &Value) -> Result<Value> {
    unary(x, Special::Erfc, "ErfcBackward0", |x, _| affine(&exp(&affine(&sqr(x)?, -1.0, 0.0)?)?, -FRAC_2_SQRT_PI, 0.0))
}
pub fn erfinv(x: &Value) -> Result<Value> {
    unary(x, Special::Erfinv, "ErfinvBackward0", |_, y| affine(&exp(&sqr(y)?)?, PI.sqrt() / 2.0, 0.0))
}
pub fn lgamma(x: &Value) -> Result<Value> {
    unary(x, Special::Lgamma, "LgammaBackward0", |x, _| digamma(x))
}
pub fn digamma(x: &Value) -> Result<Value> {
    unary(x, Special::Digamma, "DigammaBackward0", |x, _| polygamma(1, x))
}

/// `polygamma(n, x)`; its derivative is `polygamma(n + 1, x)`.
pub fn polygamma(n: u32, x: &Value) -> Result<Value> {
    Ok(record("PolygammaBackward0", &[x], apply(&x.data, Special::Polygamma(n))?, &[x], false, move |s, g, _| {
        Ok(vec![c(mul(g, &polygamma(n + 1, &s[0])?)?)])
    }))
}

/// `atan2(y, x)` of operands already cast to one float dtype (broadcasting allowed):
/// d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2) (0 at the origin), summed back to each shape.
pub fn atan2(y: &Value, x: &Value) -> Result<Value> {
    let shape = y.data.shape().broadcast_shape_binary_op(x.data.shape(), "atan2")?;
    let out = crate::ops::special::atan2(&y.data.broadcast_as(&shape)?, &x.data.broadcast_as(&shape)?)?;
    let (sy, sx) = (y.data.shape().clone(), x.data.shape().clone());
    Ok(record("Atan2Backward0", &[y, x], out, &[y, x], false, move |s, g, n| {
        let (y, x) = (&s[0], &s[1]);
        // PyTorch's: zero at the origin, where the angle has no derivative.
        let den = crate::autograd::ops::add(&sqr(y)?, &sqr(x)?)?;
        let r = recip(&den)?;
        let r = crate::autograd::ops::where_cond(&den.data.eq(0.0)?, &Value::plain(r.data.zeros_like()?), &r)?;
        let gy = if n[0] { c(sum_to(&mul(g, &mul(x, &r)?)?, &sy)?) } else { None };
        let gx = if n[1] { c(sum_to(&mul(g, &neg(&mul(y, &r)?)?)?, &sx)?) } else { None };
        Ok(vec![gy, gx])
    }))
}
