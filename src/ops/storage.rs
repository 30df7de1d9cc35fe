//! Typed access to the data of a Candle CPU storage, for the custom ops' kernels.
use candle_core::{Layout, Result};

/// The contiguous data of a storage (the callers make their inputs contiguous).
pub(crate) fn data<'a, T>(v: &'a [T], l: &Layout, op: &str) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{op}: expected a contiguous input"),
    }
}

/// `f` of the dense elements of a CPU float32 tensor (`t` must be contiguous: the
/// callers pass a `dense()` copy); an error naming `op` for any other tensor.
pub(crate) fn with_f32<R>(t: &candle_core::Tensor, op: &str, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let (st, l) = t.storage_and_layout();
    match &*st {
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => Ok(f(data(v, l, op)?)),
        _ => candle_core::bail!("{op}: expected a float32 CPU tensor"),
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
