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
    /// A lane mask in the form the level's masked loads take (AVX-512: a mask register;
    /// AVX2: a vector whose lanes' sign bits select), for kernels that build their
    /// masks once and load with them many times.
    type Mask: Copy + Send + Sync;
    /// The mask of bits 0..LANES of `bits` (lane i where bit i is set).
    unsafe fn mask(bits: u32) -> Self::Mask;
    /// Lane i from `p + i` where `m` selects lane i, else 0; the unselected lanes'
    /// addresses are neither read nor faulted on.
    unsafe fn load_mask(p: *const f32, m: Self::Mask) -> Self;
    /// `self` with lane i replaced by `p + i` where `m` selects lane i; the unselected
    /// lanes' addresses are neither read nor faulted on.
    unsafe fn merge_mask(self, p: *const f32, m: Self::Mask) -> Self;
    /// `load_mask` with the mask of `bits`.
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, bits: u32) -> Self {
        // SAFETY: the trait's contract.
        unsafe { Self::load_mask(p, Self::mask(bits)) }
    }
    /// Lane i to `p + i` where bit i of `mask` is set; the others are not touched.
    unsafe fn store_masked(self, p: *mut f32, mask: u32);
    /// The even lanes of `lo` then those of `hi` (lane j is lane 2j of the pair): the
    /// inputs of a stride-2 window, loaded as two whole vectors.
    unsafe fn evens(lo: Self, hi: Self) -> Self;
    /// The sum of the lanes.
    unsafe fn sum(self) -> f32;
    /// The sum of the lanes in f64: widened, then added halves onto halves. (Stored and
    /// added one by one, the lanes made a chain of 16 dependent adds per row, over half
    /// of `sum(-1)`'s time on rows of 384.)
    unsafe fn sum_f64(self) -> f64;
    /// The lane-wise maximum (`o`'s lane where either is NaN, as `maxps`).
    unsafe fn max(self, o: Self) -> Self;
    /// The largest lane.
    unsafe fn max_lane(self) -> f32;
    /// `o`'s lane where `m` selects it, else `self`'s.
    unsafe fn blend(self, o: Self, m: Self::Mask) -> Self;
}

/// 16 lanes: AVX-512F (with AVX2 and FMA).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct X16(__m512);

/// 8 lanes: AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct X8(__m256);

/// `Some(f::<V>(args))` with `V` the vector type of the CPU's SIMD level (`X16` with
/// AVX-512, `X8` with AVX2), None without AVX2 or off x86-64: the one place a kernel
/// written over `V: Lanes` is given its level. `f` is a generic function whose bound (a
/// trait over `Lanes`, implemented per level) holds the `#[target_feature]` wrappers.
macro_rules! at_cpu_lanes {
    ($f:ident($($arg:expr),* $(,)?)) => {{
        #[cfg(target_arch = "x86_64")]
        let r = match $crate::ops::cpu::simd_level() {
            $crate::ops::cpu::Simd::Avx512 => Some($f::<$crate::ops::lanes::X16>($($arg),*)),
            $crate::ops::cpu::Simd::Avx2 => Some($f::<$crate::ops::lanes::X8>($($arg),*)),
            $crate::ops::cpu::Simd::Plain => None,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let r = None;
        r
    }};
}
pub(crate) use at_cpu_lanes;

/// A kernel body written once over `V: Lanes`, given its SIMD level by `Features::run`.
///
/// `body` must be `#[inline(always)]`: it is inlined, with the `Lanes` methods it
/// calls, into the level's `#[target_feature]` function, where the intrinsics can be
/// inlined too. (Without that they stay out of line in code compiled without the
/// features, which tools/avx_audit.py rejects.) The kernel's fields are its arguments.
pub(crate) trait Kernel {
    type Out;
    /// # Safety
    /// The CPU has `V`'s features, and the kernel's own contract holds.
    unsafe fn body<V: Lanes>(self) -> Self::Out;
}

/// A level that runs a `Kernel` inside a function compiled with its features: one
/// wrapper per level for every kernel (`lanes_avx512`, `lanes_avx2`, generic over the
/// kernel), so the kernels themselves carry no `#[target_feature]` copies.
pub(crate) trait Features: Lanes {
    /// `k.body::<Self>()`, compiled with the level's features.
    ///
    /// # Safety
    /// The CPU has the level's features, and the kernel's own contract holds.
    unsafe fn run<K: Kernel>(k: K) -> K::Out;
}

/// `Some(k.body::<V>())` with `V` the CPU's level (`X16` with AVX-512, `X8` with AVX2),
/// None without AVX2 or off x86-64: a kernel's one dispatch.
///
/// # Safety
/// The kernel's own contract holds (the level's is checked here).
pub(crate) unsafe fn run_at_cpu<K: Kernel>(k: K) -> Option<K::Out> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::cpu::{simd_level, Simd};
        // SAFETY: `simd_level` found the level's features on this CPU; the kernel's
        // contract is the caller's.
        match simd_level() {
            Simd::Avx512 => Some(unsafe { X16::run(k) }),
            Simd::Avx2 => Some(unsafe { X8::run(k) }),
            Simd::Plain => None,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = k;
        None
    }
}

#[cfg(target_arch = "x86_64")]
impl Features for X16 {
    #[inline(always)]
    unsafe fn run<K: Kernel>(k: K) -> K::Out {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn lanes_avx512<K: Kernel>(k: K) -> K::Out {
            // SAFETY: the caller's; this function has the level's features.
            unsafe { k.body::<X16>() }
        }
        // SAFETY: the caller's (the CPU has AVX-512F, AVX2 and FMA).
        unsafe { lanes_avx512(k) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Features for X8 {
    #[inline(always)]
    unsafe fn run<K: Kernel>(k: K) -> K::Out {
        #[target_feature(enable = "avx2,fma")]
        unsafe fn lanes_avx2<K: Kernel>(k: K) -> K::Out {
            // SAFETY: the caller's; this function has the level's features.
            unsafe { k.body::<X8>() }
        }
        // SAFETY: the caller's (the CPU has AVX2 and FMA).
        unsafe { lanes_avx2(k) }
    }
}

// ---- row folds over a level's vectors ----------------------------------------

/// The mask of the last `d % LANES` lanes of a run of `d` floats.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
pub(crate) unsafe fn tail_mask<V: Lanes>(d: usize) -> V::Mask {
    // SAFETY: the caller's level.
    unsafe { V::mask((1u32 << (d % V::LANES)) - 1) }
}

/// `acc + v`, or with `SQ` `acc + (v - mv)^2`.
///
/// # Safety
/// The CPU has `V`'s features.
#[inline(always)]
unsafe fn acc_step<V: Lanes, const SQ: bool>(acc: V, v: V, mv: V) -> V {
    // SAFETY: the caller's level.
    unsafe {
        if SQ {
            let c = v.sub(mv);
            c.fmadd(c, acc)
        } else {
            acc.add(v)
        }
    }
}

/// The sum over the `d` floats at `p` (`SQ`: of their squared deviations from `mv`'s
/// lanes) in 4 accumulators (so the adds do not wait on each other), folded in f64:
/// the row sums (`ops::reduce`) and the norms' statistics (`layers::norm`).
/// A generic flag, not a closure: closures are not compiled with the caller's
/// features and may stay out of line (tools/avx_audit.py).
///
/// # Safety
/// The CPU has `V`'s features; `p` points to `d` readable floats.
#[inline(always)]
pub(crate) unsafe fn fold<V: Lanes, const SQ: bool>(p: *const f32, d: usize, mv: V) -> f64 {
    let (l, full) = (V::LANES, d / V::LANES);
    // SAFETY: the whole vectors end at full * l <= d; the masked load reads only the
    // tail's d - full * l floats; the caller's level.
    unsafe {
        let mut a = [V::zero(); 4];
        let mut v = 0;
        while v + 4 <= full {
            for (k, acc) in a.iter_mut().enumerate() {
                *acc = acc_step::<V, SQ>(*acc, V::load(p.add((v + k) * l)), mv);
            }
            v += 4;
        }
        for (k, w) in (v..full).enumerate() {
            a[k] = acc_step::<V, SQ>(a[k], V::load(p.add(w * l)), mv);
        }
        if !d.is_multiple_of(l) {
            // The tail's missing lanes hold 0 (a sum) or the mean (zero deviation).
            let pad = if SQ { mv } else { V::zero() };
            a[3] = acc_step::<V, SQ>(a[3], pad.merge_mask(p.add(full * l), tail_mask::<V>(d)), mv);
        }
        a[0].add(a[1]).add(a[2].add(a[3])).sum_f64()
    }
}

/// `impl Lanes` for a register wrapper from its intrinsics. Each body is one
/// intrinsic call, unsafe because of its `target_feature`: the trait's contract
/// (the caller runs with the level's features, pointers hold `LANES` floats) is what
/// makes it sound.
macro_rules! lanes {
    ($name:ident, $n:expr, $zero:ident, $set1:ident, $load:ident, $store:ident, $add:ident, $sub:ident, $mul:ident, $fmadd:ident, $fnmadd:ident, |$v:ident| $ordered:expr,
     mask: $mask:ty, |$mb:ident| $make_mask:expr, load_mask: |$lp:ident, $lm:ident| $load_mask:expr, merge_mask: |$mv:ident, $mp:ident, $mm:ident| $merge_mask:expr,
     store_masked: |$sv:ident, $sp:ident, $sm:ident| $store_masked:expr, evens: |$elo:ident, $ehi:ident| $evens:expr, sum: |$rv:ident| $sum:expr,
     sum_f64: |$dv:ident| $sum_f64:expr,
     $max:ident, max_lane: |$xv:ident| $max_lane:expr, blend: |$ba:ident, $bb:ident, $bm:ident| $blend:expr) => {
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
            type Mask = $mask;
            #[inline(always)]
            unsafe fn mask(bits: u32) -> $mask {
                let $mb = bits;
                // SAFETY: the trait's contract. (AVX-512's mask is a plain integer cast.)
                #[allow(unused_unsafe)]
                unsafe {
                    $make_mask
                }
            }
            #[inline(always)]
            unsafe fn load_mask(p: *const f32, m: $mask) -> Self {
                let ($lp, $lm) = (p, m);
                // SAFETY: the trait's contract (the selected lanes are readable).
                $name(unsafe { $load_mask })
            }
            #[inline(always)]
            unsafe fn merge_mask(self, p: *const f32, m: $mask) -> Self {
                let ($mv, $mp, $mm) = (self.0, p, m);
                // SAFETY: the trait's contract (the selected lanes are readable).
                $name(unsafe { $merge_mask })
            }
            #[inline(always)]
            unsafe fn store_masked(self, p: *mut f32, mask: u32) {
                let ($sv, $sp, $sm) = (self.0, p, mask);
                // SAFETY: the trait's contract (the selected lanes are writable).
                unsafe { $store_masked }
            }
            #[inline(always)]
            unsafe fn evens(lo: Self, hi: Self) -> Self {
                let ($elo, $ehi) = (lo.0, hi.0);
                // SAFETY: the trait's contract.
                $name(unsafe { $evens })
            }
            #[inline(always)]
            unsafe fn sum(self) -> f32 {
                let $rv = self.0;
                // SAFETY: the trait's contract.
                unsafe { $sum }
            }
            #[inline(always)]
            unsafe fn sum_f64(self) -> f64 {
                let $dv = self.0;
                // SAFETY: the trait's contract.
                unsafe { $sum_f64 }
            }
            #[inline(always)]
            unsafe fn max(self, o: Self) -> Self {
                // SAFETY: the trait's contract.
                $name(unsafe { $max(self.0, o.0) })
            }
            #[inline(always)]
            unsafe fn max_lane(self) -> f32 {
                let $xv = self.0;
                // SAFETY: the trait's contract.
                unsafe { $max_lane }
            }
            #[inline(always)]
            unsafe fn blend(self, o: Self, m: $mask) -> Self {
                let ($ba, $bb, $bm) = (self.0, o.0, m);
                // SAFETY: the trait's contract.
                $name(unsafe { $blend })
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
    |v| _mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v) == 0xFFFF,
    mask: __mmask16, |b| b as __mmask16,
    load_mask: |p, m| _mm512_maskz_loadu_ps(m, p),
    merge_mask: |v, p, m| _mm512_mask_loadu_ps(v, m, p),
    store_masked: |v, p, m| _mm512_mask_storeu_ps(p, m as __mmask16, v),
    evens: |lo, hi| _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi),
    sum: |v| _mm512_reduce_add_ps(v),
    sum_f64: |v| {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
        _mm512_reduce_add_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), _mm512_cvtps_pd(hi)))
    },
    _mm512_max_ps,
    max_lane: |v| _mm512_reduce_max_ps(v),
    blend: |a, b, m| _mm512_mask_blend_ps(m, a, b)
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
    |v| _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v)) == 0,
    mask: __m256i, |b| lane_mask8(b),
    load_mask: |p, m| _mm256_maskload_ps(p, m),
    merge_mask: |v, p, m| _mm256_blendv_ps(v, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m)),
    store_masked: |v, p, m| store_masked8(v, p, m),
    // Within each 128-bit half [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the middle
    // 64-bit pairs swapped.
    evens: |lo, hi| {
        let t = _mm256_castps_pd(_mm256_shuffle_ps::<0b10_00_10_00>(lo, hi));
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(t))
    },
    sum: |v| {
        let s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)))
    },
    sum_f64: |v| {
        let s4 = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
        let s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd::<1>(s4));
        _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)))
    },
    _mm256_max_ps,
    max_lane: |v| {
        let m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)))
    },
    blend: |a, b, m| _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m))
);

/// `maskstore` of the lanes in bits 0..8 of `mask` without `maskstore`: a full mask is
/// a plain store, others go lane by lane through a spill. AMD's Zen cores microcode
/// the masked store (tens of cycles each): it was half of a depthwise convolution's
/// time on a Zen 3, storing every row's last vector.
///
/// # Safety
/// The CPU has AVX2; the selected lanes at `p` are writable.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn store_masked8(v: __m256, p: *mut f32, mask: u32) {
    // SAFETY: the caller's (AVX2; the selected lanes are writable).
    unsafe {
        if mask & 0xff == 0xff {
            _mm256_storeu_ps(p, v);
            return;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), v);
        for (i, &x) in lanes.iter().enumerate() {
            if mask >> i & 1 == 1 {
                *p.add(i) = x;
            }
        }
    }
}

/// The AVX2 lane mask of bits 0..8 of `mask`: lane i all ones where bit i is set (what
/// `maskload` / `maskstore` read).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lane_mask8(mask: u32) -> __m256i {
    // SAFETY: the caller's (AVX2).
    unsafe {
        let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(mask as i32), bits), bits)
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Masked loads and stores touch only the selected lanes (a store leaves the others'
    /// memory as it was; a load reads them as 0, a merging load keeps them), `sum` adds
    /// every lane, `ordered` tells NaN lanes apart and `evens` gathers lanes 0, 2, 4...
    /// of a pair, for each level this CPU has.
    fn check<V: Lanes>() {
        let n = V::LANES;
        let src: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
        let pair: Vec<f32> = (0..2 * n).map(|i| i as f32).collect();
        let mut got = vec![0f32; n];
        // SAFETY: the caller checked the CPU has V's features; `pair` holds 2n floats.
        unsafe { V::evens(V::load(pair.as_ptr()), V::load(pair.as_ptr().add(n))).store(got.as_mut_ptr()) };
        assert_eq!(got, (0..n).map(|j| (2 * j) as f32).collect::<Vec<_>>());
        for mask in [0u32, 1, 0b101, (1 << n) - 1, (1 << (n - 1)) - 1, 1 << (n - 1)] {
            // SAFETY: the caller checked the CPU has V's features; the buffers hold n floats.
            unsafe {
                let v = V::load_masked(src.as_ptr(), mask);
                let mut out = vec![-1f32; n];
                v.store(out.as_mut_ptr());
                let mut partial = vec![-1f32; n];
                V::load(src.as_ptr()).store_masked(partial.as_mut_ptr(), mask);
                for i in 0..n {
                    let on = mask >> i & 1 == 1;
                    assert_eq!(out[i], if on { src[i] } else { 0.0 }, "load mask {mask:b} lane {i}");
                    assert_eq!(partial[i], if on { src[i] } else { -1.0 }, "store mask {mask:b} lane {i}");
                }
                assert_eq!(V::load(src.as_ptr()).sum(), (n * (n + 1) / 2) as f32);
                assert!(V::load(src.as_ptr()).ordered());
                let mut bad = src.clone();
                bad[n - 1] = f32::NAN;
                assert!(!V::load(bad.as_ptr()).ordered());
                assert_eq!(V::splat(2.0).fnmadd(V::splat(3.0), V::splat(10.0)).sum(), 4.0 * n as f32);
                let blended = V::splat(-2.0).blend(V::load(src.as_ptr()), V::mask(mask));
                blended.store(out.as_mut_ptr());
                for (i, &x) in out.iter().enumerate() {
                    assert_eq!(x, if mask >> i & 1 == 1 { src[i] } else { -2.0 }, "blend mask {mask:b} lane {i}");
                }
                let mut peak = src.clone();
                peak[mask as usize % n] = 100.0;
                assert_eq!(V::load(peak.as_ptr()).max_lane(), 100.0);
                V::load(src.as_ptr()).max(V::splat(n as f32 / 2.0)).store(out.as_mut_ptr());
                assert_eq!(out, src.iter().map(|&x| x.max(n as f32 / 2.0)).collect::<Vec<_>>());
                let merged = V::splat(-2.0).merge_mask(src.as_ptr(), V::mask(mask));
                merged.store(out.as_mut_ptr());
                for (i, &x) in out.iter().enumerate() {
                    assert_eq!(x, if mask >> i & 1 == 1 { src[i] } else { -2.0 }, "merge mask {mask:b} lane {i}");
                }
            }
        }
    }

    #[test]
    fn lanes_of_each_level() {
        if crate::ops::cpu::has_avx2_fma() {
            check::<X8>();
        }
        if crate::ops::cpu::has_avx512() {
            check::<X16>();
        }
    }
}
