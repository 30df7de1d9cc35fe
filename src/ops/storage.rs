//! Typed access to the data of a Candle CPU storage, for the custom ops' kernels.
use candle_core::{Layout, Result};

/// The contiguous data of a storage (the callers make their inputs contiguous).
pub(crate) fn data<'a, T>(v: &'a [T], l: &Layout, op: &str) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{op}: expected a contiguous input"),
    }
}

/// Run `$body` with `$v` bound to the f32 or f64 slice of a storage; the result
/// vector becomes a storage of the same dtype.
macro_rules! float_dispatch {
    ($s:expr, $l:expr, $op:expr, |$v:ident| $body:expr) => {
        match $s {
            candle_core::CpuStorage::F32(x) => {
                let $v = $crate::ops::storage::data(x, $l, $op)?;
                candle_core::CpuStorage::F32($body)
            }
            candle_core::CpuStorage::F64(x) => {
                let $v = $crate::ops::storage::data(x, $l, $op)?;
                candle_core::CpuStorage::F64($body)
            }
            _ => candle_core::bail!("{}: only float32 and float64 are supported", $op),
        }
    };
}
pub(crate) use float_dispatch;
