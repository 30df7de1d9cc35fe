//! Python entry points of the nn layer kernels (`_core._conv`, `_sdpa`, ...), called
//! by `candle_py.nn.functional`.
use crate::bindings::errors::{labelled_device_err, mixed_devices};
use candle_core::{Device, Tensor};
use pyo3::prelude::*;

mod activation;
mod attention;
mod conv;
mod linear;
mod llama_block;
mod loss;
mod norm;
mod pooling;
mod recurrent;
mod resample;
mod rope;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    activation::register(m)?;
    attention::register(m)?;
    conv::register(m)?;
    linear::register(m)?;
    llama_block::register(m)?;
    norm::register(m)?;
    pooling::register(m)?;
    recurrent::register(m)?;
    resample::register(m)?;
    rope::register(m)?;
    loss::register(m)?;
    Ok(())
}

/// The CPU kernels (convolution) take tensors of any one device: the op copies those
/// elsewhere to the CPU for the kernel and the result back (`autograd::ops::to_device`,
/// differentiable both ways). This checks they share one device and returns it.
pub(crate) fn home_device(label: &str, ts: &[&Tensor]) -> PyResult<Device> {
    if let Some(m) = mixed_devices(ts.iter().copied()) {
        return Err(labelled_device_err(label, m));
    }
    Ok(ts.first().map_or(Device::Cpu, |t| t.device().clone()))
}
