//! The one float trait every kernel is generic over: f32 and f64 (half types are
//! widened to f32 by the callers). It carries what the kernels need beyond
//! arithmetic: constants, the fast exp, conversions through f64, and the typed
//! view of a Candle CPU storage, so no kernel matches on `CpuStorage` by hand.
use super::approx::{fast_exp, fast_exp_nonpos};
use candle_core::CpuStorage;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A float element type the kernels run on.
pub(crate) trait Float:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Into<f64>
    + candle_core::WithDType
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    const INF: Self;
    /// `exp(x)`: branch-free and vectorizable for f32 (`approx::fast_exp`), libm's for
    /// f64. `FMA`: the caller is compiled with FMA enabled (see `approx::madd`).
    fn exp<const FMA: bool>(self) -> Self;
    /// `exp(x)` for `x <= 0` or `-inf` (exactly 0 there), with no branch.
    fn exp_nonpos<const FMA: bool>(self) -> Self;
    /// `ln(x)`: branch-free and vectorizable for f32 (`approx::fast_ln`), libm's for f64.
    fn ln(self) -> Self;
    /// `tanh(x)`: branch-free for f32 (`approx::fast_tanh`), libm's for f64.
    fn tanh<const FMA: bool>(self) -> Self;
    /// `exp(x) - 1` without the cancellation near 0: `approx::fast_expm1` for f32,
    /// libm's for f64.
    fn exp_m1<const FMA: bool>(self) -> Self;
    /// `ln(1 + x)` without losing small x: `approx::fast_log1p` for f32, libm's for f64.
    fn ln_1p<const FMA: bool>(self) -> Self;
    /// `ln(1 + exp(x))` (softplus): `approx::fast_log1p_exp` for f32; for f64 libm's
    /// `log1p(exp(x))`, as PyTorch computes it.
    fn log1p_exp<const FMA: bool>(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    /// Rounding to whole numbers (std's: one vector instruction where SSE4.1 or later is
    /// enabled, a libm call per element otherwise). `round_even`: halves to even.
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn trunc(self) -> Self;
    fn round_even(self) -> Self;
    /// `|x|`, clearing the sign bit (`abs(-0.0)` is 0.0).
    fn abs(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn is_nan(self) -> bool;
    /// The larger of two values (the first when they compare unordered).
    #[inline(always)]
    fn maximum(self, o: Self) -> Self {
        if self > o {
            self
        } else {
            o
        }
    }
    fn of(v: f64) -> Self;
    #[inline(always)]
    fn f(self) -> f64 {
        self.into()
    }
    /// This type's data in a CPU storage, or None for another dtype.
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
    fn storage(v: Vec<Self>) -> CpuStorage;
    /// `Some(f(row, m))` when `Self` is f32 (the same slice and value: no copy, no
    /// conversion), None otherwise: how a generic kernel calls an f32-only SIMD kernel
    /// (`exp_row_f32`) without an unsafe cast.
    fn via_f32(row: &mut [Self], m: Self, f: impl FnOnce(&mut [f32], f32) -> f32) -> Option<Self>;
}

impl Float for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    const INF: f32 = f32::INFINITY;
    #[inline(always)]
    fn exp<const FMA: bool>(self) -> f32 {
        fast_exp::<FMA>(self)
    }
    #[inline(always)]
    fn exp_nonpos<const FMA: bool>(self) -> f32 {
        fast_exp_nonpos::<FMA>(self)
    }
    #[inline(always)]
    fn ln(self) -> f32 {
        super::approx::fast_ln::<false>(self)
    }
    #[inline(always)]
    fn tanh<const FMA: bool>(self) -> f32 {
        super::approx::fast_tanh::<FMA>(self)
    }
    #[inline(always)]
    fn exp_m1<const FMA: bool>(self) -> f32 {
        super::approx::fast_expm1::<FMA>(self)
    }
    #[inline(always)]
    fn ln_1p<const FMA: bool>(self) -> f32 {
        super::approx::fast_log1p::<FMA>(self)
    }
    #[inline(always)]
    fn log1p_exp<const FMA: bool>(self) -> f32 {
        super::approx::fast_log1p_exp::<FMA>(self)
    }
    #[inline(always)]
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn sin(self) -> f32 {
        f32::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> f32 {
        f32::cos(self)
    }
    #[inline(always)]
    fn floor(self) -> f32 {
        f32::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> f32 {
        f32::ceil(self)
    }
    #[inline(always)]
    fn trunc(self) -> f32 {
        f32::trunc(self)
    }
    #[inline(always)]
    fn round_even(self) -> f32 {
        f32::round_ties_even(self)
    }
    #[inline(always)]
    fn abs(self) -> f32 {
        f32::abs(self)
    }
    #[inline(always)]
    fn powf(self, e: f32) -> f32 {
        f32::powf(self, e)
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn slice(s: &CpuStorage) -> Option<&[f32]> {
        match s {
            CpuStorage::F32(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [f32]> {
        match s {
            CpuStorage::F32(v) => Some(v),
            _ => None,
        }
    }
    fn storage(v: Vec<f32>) -> CpuStorage {
        CpuStorage::F32(v)
    }
    #[inline(always)]
    fn via_f32(row: &mut [f32], m: f32, f: impl FnOnce(&mut [f32], f32) -> f32) -> Option<f32> {
        Some(f(row, m))
    }
}

impl Float for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    const INF: f64 = f64::INFINITY;
    #[inline(always)]
    fn exp<const FMA: bool>(self) -> f64 {
        f64::exp(self)
    }
    #[inline(always)]
    fn exp_nonpos<const FMA: bool>(self) -> f64 {
        f64::exp(self)
    }
    #[inline(always)]
    fn ln(self) -> f64 {
        f64::ln(self)
    }
    #[inline(always)]
    fn tanh<const FMA: bool>(self) -> f64 {
        f64::tanh(self)
    }
    #[inline(always)]
    fn exp_m1<const FMA: bool>(self) -> f64 {
        f64::exp_m1(self)
    }
    #[inline(always)]
    fn ln_1p<const FMA: bool>(self) -> f64 {
        f64::ln_1p(self)
    }
    #[inline(always)]
    fn log1p_exp<const FMA: bool>(self) -> f64 {
        f64::ln_1p(f64::exp(self))
    }
    #[inline(always)]
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn sin(self) -> f64 {
        f64::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> f64 {
        f64::cos(self)
    }
    #[inline(always)]
    fn floor(self) -> f64 {
        f64::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> f64 {
        f64::ceil(self)
    }
    #[inline(always)]
    fn trunc(self) -> f64 {
        f64::trunc(self)
    }
    #[inline(always)]
    fn round_even(self) -> f64 {
        f64::round_ties_even(self)
    }
    #[inline(always)]
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    #[inline(always)]
    fn powf(self, e: f64) -> f64 {
        f64::powf(self, e)
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    fn slice(s: &CpuStorage) -> Option<&[f64]> {
        match s {
            CpuStorage::F64(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [f64]> {
        match s {
            CpuStorage::F64(v) => Some(v),
            _ => None,
        }
    }
    fn storage(v: Vec<f64>) -> CpuStorage {
        CpuStorage::F64(v)
    }
    #[inline(always)]
    fn via_f32(_: &mut [f64], _: f64, _: impl FnOnce(&mut [f32], f32) -> f32) -> Option<f64> {
        None
    }
}

/// `v` as a mutable `&mut [f32]` when `T` is f32, None otherwise (as `as_f32`).
pub(crate) fn as_f32_mut<T: Float>(v: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: `T` is f32 (same type id), so the slice is a slice of f32.
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut f32, v.len()) })
}

/// `v` as a `Vec<T>` when `T` is f32 (the same buffer, no copy), None otherwise: how an
/// f32-only path hands its result back to a generic kernel.
pub(crate) fn vec_from_f32<T: Float>(v: Vec<f32>) -> Option<Vec<T>> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return None;
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `T` is f32 (same type id), so the buffer's pointer, length and capacity
    // describe a valid `Vec<T>` from the same allocator; `v` is not dropped.
    Some(unsafe { Vec::from_raw_parts(v.as_mut_ptr() as *mut T, v.len(), v.capacity()) })
}

/// `v` viewed as f32 when `T` is f32 (the same slice, no copy), None otherwise: how a
/// generic kernel hands its data to an f32-only path (our GEMM, AVX-512 attention).
pub(crate) fn as_f32<T: Float>(v: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is f32 (same type id), so the slice is a slice of f32.
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len()) })
}
