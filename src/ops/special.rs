//! Elementwise functions Candle lacks: inverse and hyperbolic trigonometry, `exp2`,
//! `erfc`, `erfinv`, the gamma family (`lgamma`, `digamma`, `polygamma`) and `atan2`.
//!
//! Each is a scalar function mapped over a CPU f32/f64 tensor (split over threads when
//! large); half types compute in f32 and round back, other devices through the CPU.
//! The gamma-family algorithms are the classic Cephes ones PyTorch also uses, run at
//! PyTorch's precision (digamma and trigamma in the input's own float type, so that
//! their values at the poles, `trigamma(-1.0)` for one, come out as PyTorch's; zeta in
//! f64), so results agree to rounding everywhere, edges included.
use crate::ops::approx::{atan2_in_range, fast_atan2};
use crate::ops::float::Float;
use crate::ops::simd_map::{map_weighted, zip_map_fixup, zip_map_weighted};
use crate::ops::storage::with_f32;
use candle_core::{DType, Device, Result, Tensor};
use std::f64::consts::PI;

/// The unary functions of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    Atan,
    Asin,
    Acos,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Exp2,
    Erfc,
    Erfinv,
    Lgamma,
    Digamma,
    /// `polygamma(n, x)`: the n-th derivative of digamma (n = 0 is digamma).
    Polygamma(u32),
}

impl Special {
    fn f64(self, x: f64) -> f64 {
        match self {
            Special::Atan => x.atan(),
            Special::Asin => x.asin(),
            Special::Acos => x.acos(),
            Special::Sinh => x.sinh(),
            Special::Cosh => x.cosh(),
            Special::Asinh => x.asinh(),
            Special::Acosh => x.acosh(),
            Special::Atanh => x.atanh(),
            Special::Exp2 => x.exp2(),
            Special::Erfc => libm::erfc(x),
            Special::Erfinv => erfinv(x),
            Special::Lgamma => libm::lgamma(x),
            Special::Digamma | Special::Polygamma(0) => digamma(x),
            Special::Polygamma(1) => trigamma(x),
            Special::Polygamma(n) => polygamma(n, x),
        }
    }

    fn f32(self, x: f32) -> f32 {
        match self {
            Special::Lgamma => libm::lgammaf(x),
            Special::Digamma | Special::Polygamma(0) => digamma(x),
            Special::Polygamma(1) => trigamma(x),
            _ => self.f64(x as f64) as f32,
        }
    }

    /// Simple passes per element an evaluation costs (when to split over threads).
    fn weight(self) -> usize {
        match self {
            Special::Polygamma(n) if n >= 2 => 64,
            Special::Digamma | Special::Polygamma(_) | Special::Erfinv | Special::Lgamma => 24,
            _ => 8,
        }
    }
}

/// The inverse error function: an initial rational estimate refined by two Newton
/// steps on `erf` (f64, so the result is exact to f32 rounding wherever erfinv is
/// well conditioned). `±1 -> ±inf`, `|y| > 1 -> NaN`.
pub(crate) fn erfinv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return f64::INFINITY.copysign(y);
    }
    if y == 0.0 {
        return y;
    }
    // Giles' single-precision estimate (w = -ln(1 - y^2)), then Newton.
    let w = -((1.0 - y) * (1.0 + y)).ln();
    let p = if w < 5.0 {
        let w = w - 2.5;
        let c = [
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ];
        c.iter().fold(0.0, |p, &k| p * w + k)
    } else {
        let w = w.sqrt() - 3.0;
        let c = [
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ];
        c.iter().fold(0.0, |p, &k| p * w + k)
    };
    let mut x = p * y;
    for _ in 0..2 {
        let e = libm::erf(x) - y;
        x -= e / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
    }
    x
}

/// Cephes' psi: reflection for x < 0, the recurrence up to 10, then the asymptotic
/// series. Poles: `±0 -> ∓inf`, negative integers (and -inf) -> NaN.
pub(crate) fn digamma<T: Float>(x: T) -> T {
    let (xf, zero, one) = (x.f(), T::of(0.0), T::of(1.0));
    if x == zero {
        return T::of(f64::INFINITY.copysign(-xf));
    }
    if x < zero {
        if xf == xf.trunc() {
            return T::of(f64::NAN);
        }
        let r = xf - xf.trunc();
        let pi_over_tan = T::of(PI / (PI * r).tan());
        return digamma(one - x) - pi_over_tan;
    }
    let mut x = x;
    let mut result = zero;
    while x < T::of(10.0) {
        result -= one / x;
        x += one;
    }
    if x == T::of(10.0) {
        return result + T::of(2.251_752_589_066_721);
    }
    let a = [
        8.333_333_333_333_333e-2,
        -2.109_279_609_279_609_3e-2,
        7.575_757_575_757_576e-3,
        -4.166_666_666_666_667e-3,
        3.968_253_968_253_968e-3,
        -8.333_333_333_333_333e-3,
        8.333_333_333_333_333e-2,
    ];
    let mut y = zero;
    if x < T::of(1.0e17) {
        let z = one / (x * x);
        y = z * a.iter().fold(zero, |p, &k| p * z + T::of(k));
    }
    result + x.ln() - T::of(0.5) / x - y
}

/// Trigamma, `polygamma(1, x)`: reflection below 1/2, six steps of the recurrence, then
/// the asymptotic series. In the input's float type: `sin(pi * x)` at a negative
/// integer is then PyTorch's tiny nonzero value, and so is the large finite result.
pub(crate) fn trigamma<T: Float>(x: T) -> T {
    let one = T::of(1.0);
    let pi = T::of(PI);
    let mut x = x;
    let mut sign = one;
    let mut result = T::of(0.0);
    if x < T::of(0.5) {
        sign = T::of(-1.0);
        let s = (pi * x).sin();
        result -= pi * pi / (s * s);
        x = one - x;
    }
    for _ in 0..6 {
        result += one / (x * x);
        x += one;
    }
    let ixx = one / (x * x);
    let tail = one + one / (T::of(2.0) * x) + ixx * (T::of(1.0 / 6.0) - ixx * (T::of(1.0 / 30.0) - ixx * T::of(1.0 / 42.0)));
    sign * (result + tail / x)
}

/// Hurwitz zeta `sum_k (k + q)^-x` (Cephes: direct terms, then Euler-Maclaurin).
pub(crate) fn zeta(x: f64, q: f64) -> f64 {
    const MACHEP: f64 = 1.110_223_024_625_156_5e-16;
    const A: [f64; 12] = [
        12.0,
        -720.0,
        30240.0,
        -1209600.0,
        47900160.0,
        -1.892_437_580_318_379_2e9,
        7.472_424_96e10,
        -2.950_130_727_918_164e12,
        1.164_678_281_435_006_7e14,
        -4.597_978_722_407_473e15,
        1.815_210_540_194_354_7e17,
        -7.166_165_256_175_667e18,
    ];
    if x == 1.0 {
        return f64::INFINITY;
    }
    if x < 1.0 {
        return f64::NAN;
    }
    if q <= 0.0 {
        if q == q.floor() {
            return f64::INFINITY;
        }
        if x != x.floor() {
            return f64::NAN;
        }
    }
    let mut s = q.powf(-x);
    let mut a = q;
    let mut b = 0.0;
    let mut i = 0;
    while i < 9 || a <= 9.0 {
        i += 1;
        a += 1.0;
        b = a.powf(-x);
        s += b;
        if -MACHEP * s < b && b < MACHEP * s {
            return s;
        }
    }
    let w = a;
    s += b * w / (x - 1.0);
    s -= 0.5 * b;
    let mut a = 1.0;
    let mut k = 0.0;
    for coef in A {
        a *= x + k;
        b /= w;
        let t = a * b / coef;
        s += t;
        if (t / s).abs() < MACHEP {
            return s;
        }
        k += 1.0;
        a *= x + k;
        b /= w;
        k += 1.0;
    }
    s
}

/// `polygamma(n, x)` for n >= 2: `(-1)^(n+1) n! zeta(n + 1, x)`.
fn polygamma(n: u32, x: f64) -> f64 {
    let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
    sign * libm::lgamma(n as f64 + 1.0).exp() * zeta(n as f64 + 1.0, x)
}

/// `x` on the CPU in a float type our maps take (half types widen to f32).
fn cpu_float(x: &Tensor) -> Result<(Tensor, DType, Device)> {
    let (dt, dev) = (x.dtype(), x.device().clone());
    let x = if dev.is_cpu() { x.clone() } else { x.to_device(&Device::Cpu)? };
    let x = match dt {
        DType::F32 | DType::F64 => x,
        _ => x.to_dtype(DType::F32)?,
    };
    Ok((x.contiguous()?, dt, dev))
}

fn back(out: Tensor, dt: DType, dev: &Device) -> Result<Tensor> {
    let out = if out.dtype() == dt { out } else { out.to_dtype(dt)? };
    if dev.is_cpu() {
        Ok(out)
    } else {
        out.to_device(dev)
    }
}

/// `f` applied to every element of the float tensor `x`.
pub(crate) fn apply(x: &Tensor, f: Special) -> Result<Tensor> {
    let (xc, dt, dev) = cpu_float(x)?;
    let out = match xc.dtype() {
        DType::F64 => {
            let v = xc.flatten_all()?.to_vec1::<f64>()?;
            Tensor::from_vec(map_weighted(&v, f.weight(), |a| f.f64(a)), xc.shape(), &Device::Cpu)?
        }
        _ => {
            let v = xc.flatten_all()?.to_vec1::<f32>()?;
            Tensor::from_vec(map_weighted(&v, f.weight(), |a| f.f32(a)), xc.shape(), &Device::Cpu)?
        }
    };
    back(out, dt, &dev)
}

/// `atan2(y, x)` of two float tensors of one shape and dtype (the caller broadcasts):
/// the angle of the point (x, y), with IEEE signed zeros and infinities.
pub(crate) fn atan2(y: &Tensor, x: &Tensor) -> Result<Tensor> {
    let (yc, dt, dev) = cpu_float(y)?;
    let (xc, _, _) = cpu_float(x)?;
    let out = match yc.dtype() {
        DType::F64 => {
            let (a, b) = (yc.flatten_all()?.to_vec1::<f64>()?, xc.flatten_all()?.to_vec1::<f64>()?);
            Tensor::from_vec(zip_map_weighted(&a, &b, 8, |p, q| p.atan2(q)), yc.shape(), &Device::Cpu)?
        }
        _ => {
            let exact = |p: f32, q: f32| (p as f64).atan2(q as f64) as f32;
            let bad = |p: f32, q: f32| !atan2_in_range(p, q);
            let out = with_f32(&yc, "atan2", |a| with_f32(&xc, "atan2", |b| zip_map_fixup(a, b, 4, fast_atan2, bad, exact)))??;
            Tensor::from_vec(out, yc.shape(), &Device::Cpu)?
        }
    };
    back(out, dt, &dev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_family_known_values() {
        let euler = 0.577_215_664_901_532_9;
        assert!((digamma(1.0f64) + euler).abs() < 1e-15);
        // The asymptotic tail after six steps is good to ~1e-9 (PyTorch's value, to the bit).
        assert!((trigamma(1.0f64) - PI * PI / 6.0).abs() < 1e-8);
        assert!((polygamma(2, 1.0) + 2.0 * 1.202_056_903_159_594).abs() < 1e-12);
        assert!((zeta(2.0, 1.0) - PI * PI / 6.0).abs() < 1e-14);
        assert!(digamma(-2.0f64).is_nan() && digamma(0.0f64) == f64::NEG_INFINITY && digamma(-0.0f64) == f64::INFINITY);
    }

    #[test]
    fn erfinv_inverts_erf() {
        for &y in &[-0.99, -0.5, -1e-6, 1e-6, 0.3, 0.9, 0.999] {
            assert!((libm::erf(erfinv(y)) - y).abs() < 1e-15, "{y}");
        }
        assert_eq!(erfinv(1.0), f64::INFINITY);
        assert!(erfinv(1.5).is_nan());
    }
}
