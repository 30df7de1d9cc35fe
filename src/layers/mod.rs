//! Convolution and pooling for `nn`: Candle custom ops with hand-written
//! backwards, multi-threaded with rayon, exposed as private `_core` functions
//! (`_conv`, `_max_pool`, `_avg_pool`, `_adaptive_pool`) that the Python layers call.
use candle_core::{CpuStorage, Layout, Result};
use pyo3::prelude::*;

pub(crate) mod activation;
mod attention;
mod conv;
pub(crate) mod linear;
mod loss;
mod norm;
mod pooling;

/// The float element types the kernels run on.
pub(crate) trait Elem:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::AddAssign
    + std::ops::Add<Output = Self>
    + std::ops::Div<Output = Self>
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    fn from_f64(v: f64) -> Self;
    fn is_nan(self) -> bool;
}
impl Elem for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}
impl Elem for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// The contiguous data of a storage (the callers make their inputs contiguous).
pub(crate) fn data<'a, T>(v: &'a [T], l: &Layout, op: &str) -> Result<&'a [T]> {
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{op}: expected a contiguous input"),
    }
}

/// Run `$body` with `$v` bound to the f32 or f64 slice of a storage.
macro_rules! float_dispatch {
    ($s:expr, $l:expr, $op:expr, |$v:ident| $body:expr) => {
        match $s {
            CpuStorage::F32(x) => {
                let $v = crate::layers::data(x, $l, $op)?;
                CpuStorage::F32($body)
            }
            CpuStorage::F64(x) => {
                let $v = crate::layers::data(x, $l, $op)?;
                CpuStorage::F64($body)
            }
            _ => candle_core::bail!("{}: only float32 and float64 are supported", $op),
        }
    };
}
pub(crate) use float_dispatch;

/// Unused import guard: `CpuStorage` is used by the macro at the call sites.
#[allow(dead_code)]
fn _storage_type(_: &CpuStorage) {}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    attention::register(m)?;
    conv::register(m)?;
    linear::register(m)?;
    norm::register(m)?;
    pooling::register(m)?;
    loss::register(m)?;
    Ok(())
}
