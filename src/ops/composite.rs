//! Elementwise ops that PyTorch runs as one pass and that were compositions of two to
//! five passes here: `clamp` with number bounds (a maximum, then a minimum),
//! `addcmul` / `addcdiv` (a scaling, a product, a sum), `lerp` (a difference, a product
//! and a sum; with a tensor weight both one-sided forms and a select), `nan_to_num`
//! (three masks and three selects) and the `isnan` / `isinf` / `isfinite` masks (a
//! comparison or two in Candle's element-at-a-time loops).
//!
//! Measured on an (8, 256, 384) float32 tensor with 2 threads (Zen 3), before, torch:
//! clamp(-0.5, 0.5) 170 / 56 us, addcmul 356 / 124, lerp with a tensor weight 2958 /
//! 109, nan_to_num 2262 / 84, isnan 1529 / 286.
//!
//! Each element formula is the composition's, rounding for rounding, so a result here
//! equals the general path's bit for bit (other dtypes, other devices and autograd
//! still take that path), and the in-place twins (`ops::assign`: `clamp_`, `addcmul_`,
//! `lerp_`) call the same element functions.
use super::broadcast::{nan_max, nan_min};
use super::float::Float;
use super::layout::Dense;
use super::simd_map::{map, zip3_map, zip_map};
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};

/// `clamp(x, lo, hi)` with number bounds (either may be absent): `min(max(x, lo), hi)`
/// with NaN propagating from `x` and from the bounds, as the maximum-then-minimum pass.
pub(crate) fn clamp_pass<T: Float>(v: &[T], lo: Option<f64>, hi: Option<f64>) -> Vec<T> {
    match (lo.map(T::of), hi.map(T::of)) {
        (Some(lo), Some(hi)) => map(v, move |x| nan_min(nan_max(x, lo), hi)),
        (Some(lo), None) => map(v, move |x| nan_max(x, lo)),
        (None, Some(hi)) => map(v, move |x| nan_min(x, hi)),
        (None, None) => v.to_vec(),
    }
}

/// `x + (y * value) * z` (`addcmul`) or `x + (y * value) / z` (`addcdiv`), the
/// composition's roundings (`value == 1` scales exactly, as `a + t1 * t2`).
#[inline(always)]
pub(crate) fn addc<T: Float>(x: T, y: T, z: T, value: T, divide: bool) -> T {
    if divide {
        x + (y * value) / z
    } else {
        x + (y * value) * z
    }
}

/// `d * m` as `affine(d, m, 0)` computes it (`binary::direct_affine`: a unit factor adds
/// zero instead, which turns -0.0 into 0.0).
#[inline(always)]
fn scale<T: Float>(d: T, m: T) -> T {
    if m == T::ONE {
        d + T::ZERO
    } else {
        d * m
    }
}

/// `Tensor.lerp`'s number-weight form for one element: `x + (e - x) * w` for
/// `|w| < 0.5`, else `e - (e - x) * (1 - w)` (exact at both ends). `w_small` is
/// `|w| < 0.5` and `m` the factor of the form it picks (`w` or `1 - w`).
#[inline(always)]
pub(crate) fn lerp_number<T: Float>(x: T, e: T, w_small: bool, m: T) -> T {
    if w_small {
        x + scale(e - x, m)
    } else {
        e - scale(e - x, m)
    }
}

/// The factor `lerp_number` multiplies by for weight `w`, and whether `|w| < 0.5`.
pub(crate) fn lerp_factor<T: Float>(w: f64) -> (bool, T) {
    if w.abs() < 0.5 {
        (true, T::of(w))
    } else {
        (false, T::of(1.0 - w))
    }
}

/// `Tensor.lerp` with a tensor weight, one element: the form PyTorch picks by `|w| < 0.5`
/// (a NaN weight takes the second, as the select of the two did).
#[inline(always)]
fn lerp_tensor<T: Float>(x: T, e: T, w: T) -> T {
    let d = e - x;
    if Float::abs(w) < T::of(0.5) {
        x + w * d
    } else {
        e - d * (T::ONE - w)
    }
}

/// Which of a float's classes a mask marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Nan,
    Inf,
    Finite,
}

impl Class {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Class::Nan => "isnan",
            Class::Inf => "isinf",
            Class::Finite => "isfinite",
        }
    }
}

fn class_pass<T: Float>(v: &[T], c: Class) -> Vec<u8> {
    match c {
        // `x != x` only for NaN.
        #[allow(clippy::eq_op)]
        Class::Nan => map(v, |x: T| u8::from(x != x)),
        Class::Inf => map(v, |x: T| u8::from(Float::abs(x) == T::INF)),
        // False for NaN (unordered) and both infinities.
        Class::Finite => map(v, |x: T| u8::from(Float::abs(x) < T::INF)),
    }
}

/// `nan_to_num`'s replacement values, in the tensor's dtype.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NanToNum {
    pub nan: f64,
    pub posinf: f64,
    pub neginf: f64,
}

fn nan_to_num_pass<T: Float>(v: &[T], r: NanToNum) -> Vec<T> {
    let (nan, pos, neg) = (T::of(r.nan), T::of(r.posinf), T::of(r.neginf));
    // Three independent selects (an if-else chain did not vectorize: 880 us on 3.1M floats).
    #[allow(clippy::eq_op)]
    map(v, move |x: T| {
        let y = if x == T::INF { pos } else { x };
        let y = if x == T::NEG_INF { neg } else { y };
        if x != x {
            nan
        } else {
            y
        }
    })
}

/// The op's operands, all CPU float32 or all float64 of one shape: dense copies where
/// they were views. None where the one-pass form does not apply.
fn operands(ts: &[&Tensor]) -> Result<Option<Vec<Tensor>>> {
    let first = ts[0];
    let fits = ts.iter().all(|t| {
        t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64) && t.dtype() == first.dtype() && t.dims() == first.dims()
    });
    if !fits {
        return Ok(None);
    }
    ts.iter().map(|t| t.dense()).collect::<Result<Vec<_>>>().map(Some)
}

/// `clamp` with number bounds in one pass, or None (not a CPU float32/float64 tensor).
pub(crate) fn clamp(x: &Tensor, lo: Option<f64>, hi: Option<f64>) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x])? else { return Ok(None) };
    v[0].apply_op1_no_bwd(&ClampOp(lo, hi)).map(Some)
}

/// `clamp` with tensor bounds (`maximum` then `minimum`: NaN from any of the three) in
/// one pass, or None (operands not all CPU float32/float64 of one dtype and shape). Two
/// passes and a temporary took (8, 256, 384) float32 in 1.3-1.6x torch's time.
pub(crate) fn clamp_tensors(x: &Tensor, lo: &Tensor, hi: &Tensor) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x, lo, hi])? else { return Ok(None) };
    v[0].apply_op3_no_bwd(&v[1], &v[2], &Ternary::Clamp).map(Some)
}

/// The `isnan` / `isinf` / `isfinite` mask (u8, 1 where it holds) in one pass, or None
/// (not a CPU float32/float64 tensor).
pub(crate) fn classify(x: &Tensor, c: Class) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x])? else { return Ok(None) };
    v[0].apply_op1_no_bwd(&ClassOp(c)).map(Some)
}

/// `nan_to_num` in one pass, or None (not a CPU float32/float64 tensor).
pub(crate) fn nan_to_num(x: &Tensor, r: NanToNum) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x])? else { return Ok(None) };
    v[0].apply_op1_no_bwd(&NanToNumOp(r)).map(Some)
}

/// `addcmul` / `addcdiv` in one pass, or None (operands not all CPU float32/float64 of
/// one dtype and shape).
pub(crate) fn addcmul(x: &Tensor, t1: &Tensor, t2: &Tensor, value: f64, divide: bool) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x, t1, t2])? else { return Ok(None) };
    v[0].apply_op3_no_bwd(&v[1], &v[2], &Ternary::Addc { value, divide }).map(Some)
}

/// `lerp(x, end, weight)` for a number weight in one pass, or None.
pub(crate) fn lerp(x: &Tensor, end: &Tensor, weight: f64) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x, end])? else { return Ok(None) };
    v[0].apply_op2_no_bwd(&v[1], &LerpOp(weight)).map(Some)
}

/// `lerp(x, end, weight)` for a tensor weight (of the same shape) in one pass, or None.
pub(crate) fn lerp_weighted(x: &Tensor, end: &Tensor, weight: &Tensor) -> Result<Option<Tensor>> {
    let Some(v) = operands(&[x, end, weight])? else { return Ok(None) };
    v[0].apply_op3_no_bwd(&v[1], &v[2], &Ternary::Lerp).map(Some)
}

struct ClampOp(Option<f64>, Option<f64>);

impl CustomOp1 for ClampOp {
    fn name(&self) -> &'static str {
        "clamp"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = super::storage::float_dispatch!(s, l, "clamp", |v| clamp_pass(v, self.0, self.1));
        Ok((out, l.shape().clone()))
    }
}

struct ClassOp(Class);

impl CustomOp1 for ClassOp {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let name = self.0.name();
        let out = match s {
            CpuStorage::F32(v) => class_pass(super::storage::data(v, l, name)?, self.0),
            CpuStorage::F64(v) => class_pass(super::storage::data(v, l, name)?, self.0),
            _ => candle_core::bail!("{name}: expected a float32 or float64 tensor"),
        };
        Ok((CpuStorage::U8(out), l.shape().clone()))
    }
}

struct NanToNumOp(NanToNum);

impl CustomOp1 for NanToNumOp {
    fn name(&self) -> &'static str {
        "nan_to_num"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = super::storage::float_dispatch!(s, l, "nan_to_num", |v| nan_to_num_pass(v, self.0));
        Ok((out, l.shape().clone()))
    }
}

/// The slices of three same-dtype storages, dense, or an error naming `op`.
macro_rules! three {
    ($op:expr, ($s1:expr, $l1:expr), ($s2:expr, $l2:expr), ($s3:expr, $l3:expr), |$a:ident, $b:ident, $c:ident| $body:expr) => {
        match ($s1, $s2, $s3) {
            (CpuStorage::F32(x), CpuStorage::F32(y), CpuStorage::F32(z)) => {
                let ($a, $b, $c) =
                    (super::storage::data(x, $l1, $op)?, super::storage::data(y, $l2, $op)?, super::storage::data(z, $l3, $op)?);
                CpuStorage::F32($body)
            }
            (CpuStorage::F64(x), CpuStorage::F64(y), CpuStorage::F64(z)) => {
                let ($a, $b, $c) =
                    (super::storage::data(x, $l1, $op)?, super::storage::data(y, $l2, $op)?, super::storage::data(z, $l3, $op)?);
                CpuStorage::F64($body)
            }
            _ => candle_core::bail!("{}: expected float32 or float64 operands of one dtype", $op),
        }
    };
}

fn addc_pass<T: Float>(x: &[T], y: &[T], z: &[T], value: f64, divide: bool) -> Vec<T> {
    let v = T::of(value);
    if divide {
        zip3_map(x, y, z, move |x, y, z| addc(x, y, z, v, true))
    } else {
        zip3_map(x, y, z, move |x, y, z| addc(x, y, z, v, false))
    }
}

struct LerpOp(f64);

fn lerp_pass<T: Float>(x: &[T], e: &[T], w: f64) -> Vec<T> {
    let (small, m) = lerp_factor::<T>(w);
    if small {
        zip_map(x, e, move |x, e| lerp_number(x, e, true, m))
    } else {
        zip_map(x, e, move |x, e| lerp_number(x, e, false, m))
    }
}

impl CustomOp2 for LerpOp {
    fn name(&self) -> &'static str {
        "lerp"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(e)) => {
                CpuStorage::F32(lerp_pass(super::storage::data(x, l1, "lerp")?, super::storage::data(e, l2, "lerp")?, self.0))
            }
            (CpuStorage::F64(x), CpuStorage::F64(e)) => {
                CpuStorage::F64(lerp_pass(super::storage::data(x, l1, "lerp")?, super::storage::data(e, l2, "lerp")?, self.0))
            }
            _ => candle_core::bail!("lerp: expected float32 or float64 operands of one dtype"),
        };
        Ok((out, l1.shape().clone()))
    }
}

/// The one-pass ternary ops over three same-shape operands (`operands`).
enum Ternary {
    /// `addcmul` (`divide` false) or `addcdiv`.
    Addc { value: f64, divide: bool },
    /// `lerp` with a tensor weight.
    Lerp,
    /// `clamp` with tensor bounds.
    Clamp,
}

impl CustomOp3 for Ternary {
    fn name(&self) -> &'static str {
        match self {
            Ternary::Addc { divide: false, .. } => "addcmul",
            Ternary::Addc { divide: true, .. } => "addcdiv",
            Ternary::Lerp => "lerp",
            Ternary::Clamp => "clamp",
        }
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let out = three!(self.name(), (s1, l1), (s2, l2), (s3, l3), |x, y, z| match *self {
            Ternary::Addc { value, divide } => addc_pass(x, y, z, value, divide),
            Ternary::Lerp => zip3_map(x, y, z, lerp_tensor),
            Ternary::Clamp => zip3_map(x, y, z, |x, lo, hi| nan_min(nan_max(x, lo), hi)),
        });
        Ok((out, l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_replacements_cover_the_special_values() {
        let v = [0.0f32, -0.0, 1.5, -2.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE];
        assert_eq!(class_pass(&v, Class::Nan), [0, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(class_pass(&v, Class::Inf), [0, 0, 0, 0, 0, 1, 1, 0, 0]);
        assert_eq!(class_pass(&v, Class::Finite), [1, 1, 1, 1, 0, 0, 0, 1, 1]);
        let r = nan_to_num_pass(&v, NanToNum { nan: 7.0, posinf: 8.0, neginf: -9.0 });
        assert_eq!(r, [0.0, -0.0, 1.5, -2.0, 7.0, 8.0, -9.0, f32::MAX, f32::MIN_POSITIVE]);
        assert!(r[1].is_sign_negative());
    }

    #[test]
    fn clamp_propagates_nan_from_the_input_and_the_bounds() {
        let v = [-1.0f64, 0.25, 3.0, f64::NAN];
        assert_eq!(clamp_pass(&v, Some(0.0), Some(1.0))[..3], [0.0, 0.25, 1.0]);
        assert!(clamp_pass(&v, Some(0.0), Some(1.0))[3].is_nan());
        assert!(clamp_pass(&v, Some(f64::NAN), None).iter().all(|x| x.is_nan()));
        // lo > hi: every element becomes hi, as min(max(x, lo), hi).
        assert_eq!(clamp_pass(&v[..3], Some(2.0), Some(1.0)), [1.0, 1.0, 1.0]);
    }

    #[test]
    fn lerp_is_exact_at_both_ends_and_picks_the_form_by_weight() {
        let (x, e) = ([1.0f32, -3.0, 0.1], [5.0f32, 7.0, 0.3]);
        for (w, want) in [(0.0, x), (1.0, e)] {
            let (s, m) = lerp_factor::<f32>(w);
            let got: Vec<f32> = x.iter().zip(&e).map(|(&a, &b)| lerp_number(a, b, s, m)).collect();
            assert_eq!(got, want);
            let wt = vec![w as f32; 3];
            assert_eq!(zip3_map(&x, &e, &wt, lerp_tensor), want);
        }
        assert!(lerp_tensor(1.0f32, 2.0, f32::NAN).is_nan());
        assert_eq!(addc(1.0f32, 2.0, 4.0, 0.5, false), 5.0);
        assert_eq!(addc(1.0f32, 2.0, 4.0, 0.5, true), 1.25);
    }
}
