//! Elementwise maps compiled for the CPU's vector width: the loop is written once
//! (`#[inline(always)]`) and instantiated inside `#[target_feature]` variants, so the
//! closure inlined into it (branch-free math from `approx`) vectorizes 8 or 16
//! lanes wide. The portable variant runs where neither AVX2 nor AVX-512 is present.
use crate::ops::cpu::{has_avx2_fma, has_avx512};
use crate::ops::parallel::{even_chunk, filled, for_chunks, par_ok};
use std::mem::MaybeUninit;

/// Elements per task (at most; `even_chunk` evens the threads' shares).
const CHUNK: usize = 1 << 14;

/// The loop of `map_fma`: `f(x, FMA)`. The flag is a constant parameter, not a
/// wrapping closure (`|x| f(x, true)`): LLVM inlines bottom-up, so a wrapper that had
/// taken in a large `f` (Mish: an exponential, a log and a tanh) was then too large to
/// inline into the `#[target_feature]` variant, and ran compiled without FMA, every
/// `mul_add` a call to libm's `fmaf` (Mish took 15x torch's time).
#[inline(always)]
fn run1<A: Copy, U, F: Fn(A, bool) -> U, const FMA: bool>(src: &[A], dst: &mut [MaybeUninit<U>], f: &F) {
    for (d, &x) in dst.iter_mut().zip(src) {
        d.write(f(x, FMA));
    }
}

/// The loop of `zip_map_fma`, as `run1`.
#[inline(always)]
fn run2<A: Copy, B: Copy, U, F: Fn(A, B, bool) -> U, const FMA: bool>(a: &[A], b: &[B], dst: &mut [MaybeUninit<U>], f: &F) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        d.write(f(x, y, FMA));
    }
}

/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run1_avx2<A: Copy, U, F: Fn(A, bool) -> U>(src: &[A], dst: &mut [MaybeUninit<U>], f: &F) {
    run1::<A, U, F, true>(src, dst, f)
}

/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run1_avx512<A: Copy, U, F: Fn(A, bool) -> U>(src: &[A], dst: &mut [MaybeUninit<U>], f: &F) {
    run1::<A, U, F, true>(src, dst, f)
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run2_avx2<A: Copy, B: Copy, U, F: Fn(A, B, bool) -> U>(a: &[A], b: &[B], dst: &mut [MaybeUninit<U>], f: &F) {
    run2::<A, B, U, F, true>(a, b, dst, f)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run2_avx512<A: Copy, B: Copy, U, F: Fn(A, B, bool) -> U>(a: &[A], b: &[B], dst: &mut [MaybeUninit<U>], f: &F) {
    run2::<A, B, U, F, true>(a, b, dst, f)
}

/// `f(a[i])` for every i, vectorized and split over threads for large inputs.
pub(crate) fn map<A: Copy + Sync, U: Copy + Send, F: Fn(A) -> U + Sync + Send>(a: &[A], f: F) -> Vec<U> {
    map_weighted(a, 1, f)
}

/// `map` for an `f` costing about `weight` simple passes per element (see `zip_map_weighted`).
pub(crate) fn map_weighted<A: Copy + Sync, U: Copy + Send, F: Fn(A) -> U + Sync + Send>(a: &[A], weight: usize, f: F) -> Vec<U> {
    map_fma_weighted(
        a,
        weight,
        #[inline(always)]
        move |x, _| f(x),
    )
}

/// `map` for an `f` with a fused form: `f(x, true)` runs in the variants compiled with
/// FMA (AVX2, AVX-512), `f(x, false)` in the portable one. The flag is a constant in
/// each, so `f` can pick `approx`'s `FMA = true` polynomials (half the instructions:
/// SiLU's exponential) at no branch.
pub(crate) fn map_fma<A: Copy + Sync, U: Copy + Send, F: Fn(A, bool) -> U + Sync + Send>(a: &[A], f: F) -> Vec<U> {
    map_fma_weighted(a, 1, f)
}

/// `map_fma` for an `f` costing about `weight` simple passes per element.
pub(crate) fn map_fma_weighted<A: Copy + Sync, U: Copy + Send, F: Fn(A, bool) -> U + Sync + Send>(a: &[A], weight: usize, f: F) -> Vec<U> {
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    filled(a.len(), |out| {
        let par = par_ok(a.len().saturating_mul(weight));
        let size = even_chunk(a.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| {
            let src = &a[i * size..];
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` is `has_avx512()`.
                return unsafe { run1_avx512(src, dst, &f) };
            } else if simd {
                // SAFETY: `simd` is `has_avx2_fma()`.
                return unsafe { run1_avx2(src, dst, &f) };
            }
            let _ = (wide, simd);
            run1::<A, U, F, false>(src, dst, &f)
        })
    })
}

/// `f(a[i], b[i])` for every i (`a` and `b` of one length), as `map`.
pub(crate) fn zip_map<A: Copy + Sync, B: Copy + Sync, U: Copy + Send, F: Fn(A, B) -> U + Sync + Send>(a: &[A], b: &[B], f: F) -> Vec<U> {
    zip_map_weighted(a, b, 1, f)
}

/// `zip_map` for an `f` costing about `weight` simple passes per element (libm calls):
/// the pass splits over threads from `1 / weight` of the usual size on.
pub(crate) fn zip_map_weighted<A: Copy + Sync, B: Copy + Sync, U: Copy + Send, F: Fn(A, B) -> U + Sync + Send>(
    a: &[A],
    b: &[B],
    weight: usize,
    f: F,
) -> Vec<U> {
    zip_map_fma_weighted(
        a,
        b,
        weight,
        #[inline(always)]
        move |x, y, _| f(x, y),
    )
}

/// `zip_map` with the fused-form flag of `map_fma`.
pub(crate) fn zip_map_fma<A: Copy + Sync, B: Copy + Sync, U: Copy + Send, F: Fn(A, B, bool) -> U + Sync + Send>(
    a: &[A],
    b: &[B],
    f: F,
) -> Vec<U> {
    zip_map_fma_weighted(a, b, 1, f)
}

fn zip_map_fma_weighted<A: Copy + Sync, B: Copy + Sync, U: Copy + Send, F: Fn(A, B, bool) -> U + Sync + Send>(
    a: &[A],
    b: &[B],
    weight: usize,
    f: F,
) -> Vec<U> {
    debug_assert_eq!(a.len(), b.len());
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    filled(a.len(), |out| {
        let par = par_ok(a.len().saturating_mul(weight));
        let size = even_chunk(a.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| {
            let (x, y) = (&a[i * size..], &b[i * size..]);
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` is `has_avx512()`.
                return unsafe { run2_avx512(x, y, dst, &f) };
            } else if simd {
                // SAFETY: `simd` is `has_avx2_fma()`.
                return unsafe { run2_avx2(x, y, dst, &f) };
            }
            let _ = (wide, simd);
            run2::<A, B, U, F, false>(x, y, dst, &f)
        })
    })
}

/// The loop of `map_fma_assign_weighted`, with `run1`'s constant flag.
#[inline(always)]
fn run1i<T: Copy, F: Fn(T, bool) -> T, const FMA: bool>(dst: &mut [T], f: &F) {
    for d in dst.iter_mut() {
        *d = f(*d, FMA);
    }
}

#[inline(always)]
fn run2i<T: Copy, B: Copy, F: Fn(T, B) -> T>(dst: &mut [T], b: &[B], f: &F) {
    for (d, &y) in dst.iter_mut().zip(b) {
        *d = f(*d, y);
    }
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run1i_avx2<T: Copy, F: Fn(T, bool) -> T>(dst: &mut [T], f: &F) {
    run1i::<T, F, true>(dst, f)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run1i_avx512<T: Copy, F: Fn(T, bool) -> T>(dst: &mut [T], f: &F) {
    run1i::<T, F, true>(dst, f)
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run2i_avx2<T: Copy, B: Copy, F: Fn(T, B) -> T>(dst: &mut [T], b: &[B], f: &F) {
    run2i(dst, b, f)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run2i_avx512<T: Copy, B: Copy, F: Fn(T, B) -> T>(dst: &mut [T], b: &[B], f: &F) {
    run2i(dst, b, f)
}

/// `a[i] = f(a[i])` for every i, in place: `map` without the new buffer.
pub(crate) fn map_assign<T: Copy + Send + Sync, F: Fn(T) -> T + Sync + Send>(a: &mut [T], f: F) {
    map_fma_assign_weighted(
        a,
        1,
        #[inline(always)]
        move |x, _| f(x),
    )
}

/// `map_assign` with `map_fma`'s fused-form flag, for an `f` costing about `weight`
/// simple passes per element: `map_fma_weighted` without the new buffer.
pub(crate) fn map_fma_assign_weighted<T: Copy + Send + Sync, F: Fn(T, bool) -> T + Sync + Send>(a: &mut [T], weight: usize, f: F) {
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    let par = par_ok(a.len().saturating_mul(weight));
    let size = even_chunk(a.len(), CHUNK, 64, par);
    for_chunks(a, size, par, |_, dst| {
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`.
            return unsafe { run1i_avx512(dst, &f) };
        } else if simd {
            // SAFETY: `simd` is `has_avx2_fma()`.
            return unsafe { run1i_avx2(dst, &f) };
        }
        let _ = (wide, simd);
        run1i::<T, F, false>(dst, &f)
    })
}

/// `a[i] = f(a[i], b[i])` for every i (`a` and `b` of one length), in place: `zip_map`
/// without the new buffer.
pub(crate) fn zip_assign<T: Copy + Send + Sync, B: Copy + Sync, F: Fn(T, B) -> T + Sync + Send>(a: &mut [T], b: &[B], f: F) {
    assert_eq!(a.len(), b.len(), "zip_assign: operands of different lengths");
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    let par = par_ok(a.len());
    let size = even_chunk(a.len(), CHUNK, 64, par);
    for_chunks(a, size, par, |i, dst| zip_assign_on(dst, &b[i * size..], &f, (wide, simd)))
}

/// `zip_assign` on the calling thread, for a kernel that already runs one block per
/// thread (linear's bias rows); `a` no longer than `b`.
pub(crate) fn zip_assign_here<T: Copy, B: Copy, F: Fn(T, B) -> T>(a: &mut [T], b: &[B], f: F) {
    zip_assign_on(a, b, &f, (has_avx512(), has_avx2_fma()))
}

/// One chunk of `zip_assign`, in the widest variant the levels `(wide, simd)` allow.
#[inline(always)]
fn zip_assign_on<T: Copy, B: Copy, F: Fn(T, B) -> T>(dst: &mut [T], src: &[B], f: &F, (wide, simd): (bool, bool)) {
    #[cfg(target_arch = "x86_64")]
    if wide {
        // SAFETY: `wide` is `has_avx512()`.
        return unsafe { run2i_avx512(dst, src, f) };
    } else if simd {
        // SAFETY: `simd` is `has_avx2_fma()`.
        return unsafe { run2i_avx2(dst, src, f) };
    }
    let _ = (wide, simd);
    run2i(dst, src, f)
}

#[inline(always)]
fn run3i<T: Copy, F: Fn(T, T, T) -> T>(dst: &mut [T], b: &[T], c: &[T], f: &F) {
    for ((d, &y), &z) in dst.iter_mut().zip(b).zip(c) {
        *d = f(*d, y, z);
    }
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run3i_avx2<T: Copy, F: Fn(T, T, T) -> T>(dst: &mut [T], b: &[T], c: &[T], f: &F) {
    run3i(dst, b, c, f)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run3i_avx512<T: Copy, F: Fn(T, T, T) -> T>(dst: &mut [T], b: &[T], c: &[T], f: &F) {
    run3i(dst, b, c, f)
}

/// `a[i] = f(a[i], b[i], c[i])` for every i (all three of one length), in place
/// (`addcmul_`'s pass).
pub(crate) fn zip3_assign<T: Copy + Send + Sync, F: Fn(T, T, T) -> T + Sync + Send>(a: &mut [T], b: &[T], c: &[T], f: F) {
    assert!(a.len() == b.len() && a.len() == c.len(), "zip3_assign: operands of different lengths");
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    let par = par_ok(a.len());
    let size = even_chunk(a.len(), CHUNK, 64, par);
    for_chunks(a, size, par, |i, dst| {
        let (y, z) = (&b[i * size..], &c[i * size..]);
        #[cfg(target_arch = "x86_64")]
        if wide {
            // SAFETY: `wide` is `has_avx512()`.
            return unsafe { run3i_avx512(dst, y, z, &f) };
        } else if simd {
            // SAFETY: `simd` is `has_avx2_fma()`.
            return unsafe { run3i_avx2(dst, y, z, &f) };
        }
        let _ = (wide, simd);
        run3i(dst, y, z, &f)
    })
}

#[inline(always)]
fn run3<A: Copy, B: Copy, C: Copy, U, F: Fn(A, B, C) -> U>(a: &[A], b: &[B], c: &[C], dst: &mut [MaybeUninit<U>], f: &F) {
    for (((d, &x), &y), &z) in dst.iter_mut().zip(a).zip(b).zip(c) {
        d.write(f(x, y, z));
    }
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run3_avx2<A: Copy, B: Copy, C: Copy, U, F: Fn(A, B, C) -> U>(a: &[A], b: &[B], c: &[C], dst: &mut [MaybeUninit<U>], f: &F) {
    run3(a, b, c, dst, f)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run3_avx512<A: Copy, B: Copy, C: Copy, U, F: Fn(A, B, C) -> U>(a: &[A], b: &[B], c: &[C], dst: &mut [MaybeUninit<U>], f: &F) {
    run3(a, b, c, dst, f)
}

/// `f(a[i], b[i], c[i])` for every i (all three of one length) into a new buffer, as
/// `map` (`addcmul`'s and a tensor-weighted `lerp`'s pass).
pub(crate) fn zip3_map<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, U: Copy + Send, F: Fn(A, B, C) -> U + Sync + Send>(
    a: &[A],
    b: &[B],
    c: &[C],
    f: F,
) -> Vec<U> {
    assert!(a.len() == b.len() && a.len() == c.len(), "zip3_map: operands of different lengths");
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    filled(a.len(), |out| {
        let par = par_ok(a.len());
        let size = even_chunk(a.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| {
            let (x, y, z) = (&a[i * size..], &b[i * size..], &c[i * size..]);
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` is `has_avx512()`.
                return unsafe { run3_avx512(x, y, z, dst, &f) };
            } else if simd {
                // SAFETY: `simd` is `has_avx2_fma()`.
                return unsafe { run3_avx2(x, y, z, dst, &f) };
            }
            let _ = (wide, simd);
            run3(x, y, z, dst, &f)
        })
    })
}

/// One chunk of `zip_map_fixup`'s vector pass: `dst[i] = fast(a[i], b)` with `b` the
/// operand's element `i` (or its one value when `SCALAR`), and whether any element is
/// `bad` (an `|`-fold, which vectorizes with the pass).
#[inline(always)]
fn run_fixup<const SCALAR: bool, F: Fn(f32, f32) -> f32, P: Fn(f32, f32) -> bool>(
    a: &[f32],
    b: &[f32],
    dst: &mut [MaybeUninit<f32>],
    fast: &F,
    bad: &P,
) -> bool {
    let mut any = false;
    if SCALAR {
        let y = b[0];
        for (d, &x) in dst.iter_mut().zip(a) {
            d.write(fast(x, y));
            any |= bad(x, y);
        }
    } else {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            d.write(fast(x, y));
            any |= bad(x, y);
        }
    }
    any
}

/// # Safety
/// As `run1_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_fixup_avx2<const SCALAR: bool, F: Fn(f32, f32) -> f32, P: Fn(f32, f32) -> bool>(
    a: &[f32],
    b: &[f32],
    dst: &mut [MaybeUninit<f32>],
    fast: &F,
    bad: &P,
) -> bool {
    run_fixup::<SCALAR, F, P>(a, b, dst, fast, bad)
}

/// # Safety
/// As `run1_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_fixup_avx512<const SCALAR: bool, F: Fn(f32, f32) -> f32, P: Fn(f32, f32) -> bool>(
    a: &[f32],
    b: &[f32],
    dst: &mut [MaybeUninit<f32>],
    fast: &F,
    bad: &P,
) -> bool {
    run_fixup::<SCALAR, F, P>(a, b, dst, fast, bad)
}

/// `f(a[i], b[i])` for float32 operands where `f` has a branch-free vector form `fast`
/// that some arguments fall outside of (`bad`: zeros, infinities, NaN, ranges where
/// its reduction loses accuracy) and an exact scalar form `exact` (libm's): each chunk
/// runs `fast` in a vector loop, and only where the loop saw a `bad` pair does a second
/// look replace those elements with `exact`'s values. Without AVX2 + FMA (`fast` may
/// use fused forms) every element takes `exact`. `b` is as long as `a`, or holds one
/// value that pairs with every element (a number operand, not broadcast to a buffer).
/// `weight`: about how many simple passes `fast` costs per element (see
/// `zip_map_weighted`). Each element's value depends on its operands alone, so a
/// tensor and its slices agree bit for bit.
pub(crate) fn zip_map_fixup<F, P, E>(a: &[f32], b: &[f32], weight: usize, fast: F, bad: P, exact: E) -> Vec<f32>
where
    F: Fn(f32, f32) -> f32 + Sync + Send,
    P: Fn(f32, f32) -> bool + Sync + Send,
    E: Fn(f32, f32) -> f32 + Sync + Send,
{
    let scalar = b.len() == 1 && a.len() != 1;
    assert!(scalar || a.len() == b.len(), "zip_map_fixup: operands of different lengths");
    let (wide, simd) = (has_avx512(), has_avx2_fma());
    filled(a.len(), |out| {
        let par = par_ok(a.len().saturating_mul(weight));
        let size = even_chunk(a.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| {
            let x = &a[i * size..][..dst.len()];
            let y = if scalar { b } else { &b[i * size..][..dst.len()] };
            let at = |j: usize| if scalar { y[0] } else { y[j] };
            #[cfg(target_arch = "x86_64")]
            if simd {
                // SAFETY: each variant runs where its features were detected (`wide` is
                // `has_avx512()`, `simd` is `has_avx2_fma()`).
                let any = unsafe {
                    match (wide, scalar) {
                        (true, true) => run_fixup_avx512::<true, F, P>(x, y, dst, &fast, &bad),
                        (true, false) => run_fixup_avx512::<false, F, P>(x, y, dst, &fast, &bad),
                        (false, true) => run_fixup_avx2::<true, F, P>(x, y, dst, &fast, &bad),
                        (false, false) => run_fixup_avx2::<false, F, P>(x, y, dst, &fast, &bad),
                    }
                };
                if any {
                    for (j, d) in dst.iter_mut().enumerate() {
                        if bad(x[j], at(j)) {
                            d.write(exact(x[j], at(j)));
                        }
                    }
                }
                return;
            }
            let _ = (wide, &fast, &bad);
            for (j, d) in dst.iter_mut().enumerate() {
                d.write(exact(x[j], at(j)));
            }
        })
    })
}
