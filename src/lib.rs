//! candle_py's compiled core: module wiring only.
//!
//! Three layers, dependencies pointing one way (ARCHITECTURE.md):
//! - `bindings`: the Python surface (PyO3): the `Tensor` class, argument conversion,
//!   validation, GIL release, error mapping; each area registers itself.
//! - `layers`: pure compute for the nn layer families, forward and backward.
//! - `ops`: pure compute for the tensor math (elementwise, reductions, GEMM, writes,
//!   random, optimizer updates) and the pieces every kernel shares.
//!
//! `layers` and `ops` know nothing of Python; `dtype` is the one core type they share
//! with the bindings.
#![deny(unsafe_op_in_unsafe_fn)]

mod alloc;
pub mod autograd;
mod bindings;
mod dtype;
pub mod layers;
pub mod ops;
mod runtime;

#[global_allocator]
static HEAP: alloc::HugePageAlloc = alloc::HugePageAlloc;

#[pyo3::pymodule(gil_used = false)]
fn _core(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    runtime::configure();
    bindings::register(m)
}
