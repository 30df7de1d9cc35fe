//! The Python surface of `_core`: one file per API area, each with a `register`.
//! Everything PyO3 lives here; the math is in `crate::ops` and `crate::layers`.
use pyo3::prelude::*;

pub(crate) mod advanced_key;
pub(crate) mod args;
pub(crate) mod arith;
pub(crate) mod autocast;
pub(crate) mod autograd;
pub(crate) mod bitcast;
pub(crate) mod compare;
pub(crate) mod creation;
pub(crate) mod device;
pub(crate) mod dtype;
pub(crate) mod errors;
pub(crate) mod formatting;
pub(crate) mod grad_fn;
pub(crate) mod indexing;
pub(crate) mod inplace;
pub(crate) mod linalg;
pub(crate) mod misc_ops;
pub(crate) mod nn;
pub(crate) mod numpy_interop;
pub(crate) mod optim;
pub(crate) mod quantized;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod safetensors_io;
pub(crate) mod select;
pub(crate) mod shape_ops;
pub(crate) mod size;
pub(crate) mod sorting;
pub(crate) mod sparse;
pub(crate) mod tensor;
pub(crate) mod threads;
pub(crate) mod torch_format;
pub(crate) mod unary;
pub(crate) mod views;

/// Add every class, function and constant of `_core` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    dtype::register(m)?;
    device::register(m)?;
    size::register(m)?;
    autocast::register(m)?;
    tensor::register(m)?;
    formatting::register(m)?;
    creation::register(m)?;
    numpy_interop::register(m)?;
    unary::register(m)?;
    shape_ops::register(m)?;
    indexing::register(m)?;
    autograd::register(m)?;
    grad_fn::register(m)?;
    random::register(m)?;
    safetensors_io::register(m)?;
    quantized::register(m)?;
    torch_format::register(m)?;
    sparse::register(m)?;
    linalg::register(m)?;
    threads::register(m)?;
    nn::register(m)?;
    optim::register(m)?;
    Ok(())
}
