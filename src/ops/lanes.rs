//! One vector type per SIMD level behind one trait, so a kernel is written once over
//! `V: Lanes` and instantiated for AVX-512 (16 lanes) and AVX2 (8 lanes).
//!
//! Why: the convolution kernels were written for AVX-512 alone and every other CPU
//! fell back to the generic GEMM paths: on a 2-core Zen 3 (AVX2 only) a CIFAR ResNet's
//! training step took 1.5x torch's time. The kernel body is an `#[inline(always)]`
//! generic function called from one `#[target_feature]` wrapper per level; the
//! methods here are `#[inline(always)]` too, so after inlining every intrinsic sits in
//! a function compiled with its features (checked by disassembly: no calls remain).
//!
//! Every method is unsafe: it must run inside a function compiled with the level's
//! features, on a CPU that has them (`ops::cpu::simd_level`); loads and stores touch
//! `LANES` floats.
#![allow(clippy::missing_safety_doc)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// A vector of `LANES` f32 lanes.
pub(crate) trait Lanes: Copy {
    const LANES: usize;
    unsafe fn zero() -> Self;
    unsafe fn splat(x: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    unsafe fn add(self, o: Self) -> Self;
    unsafe fn sub(self, o: Self) -> Self;
    unsafe fn mul(self, o: Self) -> Self;
    /// `self * b + c`, one rounding.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    /// `c - self * b`, one rounding.
    unsafe fn fnmadd(self, b: Self, c: Self) -> Self;
    /// Whether no lane is NaN.
    unsafe fn ordered(self) -> bool;
}

/// 16 lanes: AVX-512F (with AVX2 and FMA).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct X16(__m512);

/// 8 lanes: AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct X8(__m256);

/// `impl Lanes` for a register wrapper from its intrinsics. Each body is one
/// intrinsic call, unsafe because of its `target_feature`: the trait's contract
/// (the caller runs with the level's features, pointers hold `LANES` floats) is what
/// makes it sound.
macro_rules! lanes {
    ($name:ident, $n:expr, $zero:ident, $set1:ident, $load:ident, $store:ident, $add:ident, $sub:ident, $mul:ident, $fmadd:ident, $fnmadd:ident, |$v:ident| $ordered:expr) => {
        #[cfg(target_arch = "x86_64")]
        impl Lanes for $name {
            const LANES: usize = $n;
            #[inline(always)]
            unsafe fn zero() -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $zero() })
            }
            #[inline(always)]
            unsafe fn splat(x: f32) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $set1(x) })
            }
            #[inline(always)]
            unsafe fn load(p: *const f32) -> Self {
                // SAFETY: the trait's contract (LANES readable floats at `p`).
                $name(unsafe { $load(p) })
            }
            #[inline(always)]
            unsafe fn store(self, p: *mut f32) {
                // SAFETY: the trait's contract (LANES writable floats at `p`).
                unsafe { $store(p, self.0) }
            }
            #[inline(always)]
            unsafe fn add(self, o: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $add(self.0, o.0) })
            }
            #[inline(always)]
            unsafe fn sub(self, o: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $sub(self.0, o.0) })
            }
            #[inline(always)]
            unsafe fn mul(self, o: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $mul(self.0, o.0) })
            }
            #[inline(always)]
            unsafe fn fmadd(self, b: Self, c: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $fmadd(self.0, b.0, c.0) })
            }
            #[inline(always)]
            unsafe fn fnmadd(self, b: Self, c: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $fnmadd(self.0, b.0, c.0) })
            }
            #[inline(always)]
            unsafe fn ordered(self) -> bool {
                let $v = self.0;
                // SAFETY: the trait's contract.
                unsafe { $ordered }
            }
        }
    };
}

lanes!(
    X16,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_mul_ps,
    _mm512_fmadd_ps,
    _mm512_fnmadd_ps,
    |v| _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v) == 0xFFFF
);
lanes!(
    X8,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_mul_ps,
    _mm256_fmadd_ps,
    _mm256_fnmadd_ps,
    |v| _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v)) == 0
);
