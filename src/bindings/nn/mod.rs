//! Python entry points of the nn layer kernels (`_core._conv`, `_sdpa`, ...), called
//! by `candle_py.nn.functional`.
use pyo3::prelude::*;

mod attention;
mod conv;
mod linear;
mod loss;
mod norm;
mod pooling;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    attention::register(m)?;
    conv::register(m)?;
    linear::register(m)?;
    norm::register(m)?;
    pooling::register(m)?;
    loss::register(m)?;
    Ok(())
}
