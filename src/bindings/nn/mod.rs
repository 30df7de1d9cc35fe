//! Python entry points of the nn layer kernels (`_core._conv`, `_sdpa`, ...), called
//! by `candle_py.nn.functional`.
use crate::bindings::errors::{labelled_device_err, mixed_devices, OpResult};
use candle_core::{Device, Tensor};
use pyo3::prelude::*;

mod activation;
mod attention;
mod conv;
mod linear;
mod loss;
mod norm;
mod pooling;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    activation::register(m)?;
    attention::register(m)?;
    conv::register(m)?;
    linear::register(m)?;
    norm::register(m)?;
    pooling::register(m)?;
    loss::register(m)?;
    Ok(())
}

/// The CPU kernels (convolution, pooling) take tensors of any one device: those
/// elsewhere are copied to the CPU for the kernel and the result is copied back
/// with `to_device` (both differentiable, so gradients reach the device tensors).
/// Correct, but it pays two transfers and CPU speed. Returns the tensors' device.
pub(crate) fn on_cpu(label: &str, ts: &mut [&mut Tensor]) -> PyResult<Device> {
    if let Some(m) = mixed_devices(ts.iter().map(|t| &**t)) {
        return Err(labelled_device_err(label, m));
    }
    let home = ts.first().map_or(Device::Cpu, |t| t.device().clone());
    if !home.is_cpu() {
        for t in ts.iter_mut() {
            **t = t.to_device(&Device::Cpu).op(label)?;
        }
    }
    Ok(home)
}
