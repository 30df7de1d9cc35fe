//! Which SIMD level this CPU runs: the one run-time detector every kernel asks.
//! The wheel is built for baseline x86-64; the AVX2 and AVX-512 variants are
//! compiled with `#[target_feature]` and chosen here, once per call site.

/// The compiled variant of a kernel to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Simd {
    Plain,
    /// AVX2 and FMA.
    #[allow(dead_code)]
    Avx2,
    /// AVX-512F together with AVX2 and FMA (the AVX-512 variants use all three).
    #[allow(dead_code)]
    Avx512,
}

/// The best level this CPU supports (`std`'s detection is cached, so this is cheap).
pub(crate) fn simd_level() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        let fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if fma && std::is_x86_feature_detected!("avx512f") {
            return Simd::Avx512;
        }
        if fma {
            return Simd::Avx2;
        }
    }
    Simd::Plain
}

/// Whether the AVX-512 variants (which also use AVX2 and FMA) may run.
pub(crate) fn has_avx512() -> bool {
    simd_level() == Simd::Avx512
}

/// Whether the AVX2+FMA variants may run.
pub(crate) fn has_avx2_fma() -> bool {
    simd_level() != Simd::Plain
}
