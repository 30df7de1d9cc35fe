//! candle_py's compiled core: module wiring only. Each area registers itself.
use pyo3::prelude::*;

mod alloc;
mod autograd;
mod creation;
mod device;
mod dtype;
mod errors;
mod indexing;
mod kernels;
mod layers;
mod math;
mod numpy_interop;
mod optim;
mod parallel;
mod random;
mod runtime;
mod safetensors_io;
mod shape_ops;
mod tensor;

#[global_allocator]
static HEAP: alloc::HugePageAlloc = alloc::HugePageAlloc;

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    runtime::configure();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    dtype::register(m)?;
    device::register(m)?;
    tensor::register(m)?;
    creation::register(m)?;
    numpy_interop::register(m)?;
    math::register(m)?;
    shape_ops::register(m)?;
    indexing::register(m)?;
    autograd::register(m)?;
    random::register(m)?;
    safetensors_io::register(m)?;
    layers::register(m)?;
    optim::register(m)?;
    Ok(())
}
