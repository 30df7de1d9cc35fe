//! Which SIMD level this CPU runs: the one run-time detector every kernel asks.
//! The wheel is built for baseline x86-64; the AVX2 and AVX-512 variants are
//! compiled with `#[target_feature]` and chosen here, once per call site.
//!
//! `CANDLE_PY_MAX_ISA` (`sse4.2`, `avx2` or `avx512`, read once) caps the level, so
//! the plain and AVX2 variants can be tested on a CPU that has more. It covers our
//! kernels only: the `gemm` crate (Candle's CPU matmul) detects on its own.

use std::sync::OnceLock;

/// The compiled variant of a kernel to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Simd {
    Plain,
    /// AVX2 and FMA.
    #[allow(dead_code)]
    Avx2,
    /// AVX-512F together with AVX2 and FMA (the AVX-512 variants use all three).
    #[allow(dead_code)]
    Avx512,
}

/// The level to run: what the CPU supports, capped by `CANDLE_PY_MAX_ISA`.
pub(crate) fn simd_level() -> Simd {
    static LEVEL: OnceLock<Simd> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = std::env::var("CANDLE_PY_MAX_ISA").ok();
        detected().min(parse_cap(cap.as_deref()))
    })
}

/// The cap a `CANDLE_PY_MAX_ISA` value asks for; unset or empty means none.
fn parse_cap(value: Option<&str>) -> Simd {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("avx512") => Simd::Avx512,
        Some("avx2") => Simd::Avx2,
        Some("sse4.2" | "sse" | "plain") => Simd::Plain,
        Some(other) => {
            // A typo must not pass silently as "no cap": say so, then run uncapped.
            eprintln!("candle_py: ignoring CANDLE_PY_MAX_ISA={other:?} (expected sse4.2, avx2 or avx512)");
            Simd::Avx512
        }
    }
}

/// The best level this CPU supports (`std`'s detection is cached, so this is cheap).
fn detected() -> Simd {
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

/// Whether our F16C float16 conversions may run: at the AVX2 level or above (so
/// `CANDLE_PY_MAX_ISA=sse4.2` tests the fallback), on a CPU with F16C (every AVX2 CPU
/// has it; checked all the same). Asked once.
pub(crate) fn has_f16c() -> bool {
    static F16C: OnceLock<bool> = OnceLock::new();
    *F16C.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            has_avx2_fma() && std::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_values() {
        assert_eq!(parse_cap(None), Simd::Avx512);
        assert_eq!(parse_cap(Some("AVX2")), Simd::Avx2);
        assert_eq!(parse_cap(Some(" sse4.2 ")), Simd::Plain);
        assert_eq!(parse_cap(Some("avx512")), Simd::Avx512);
        assert_eq!(parse_cap(Some("avx3")), Simd::Avx512);
        // A cap never raises the level above what the CPU has.
        assert!(detected().min(parse_cap(Some("avx512"))) <= detected());
    }
}
