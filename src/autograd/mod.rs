//! candle-py's autograd engine, on PyTorch's design (no PyO3 here).
//!
//! Forward ops compute on plain Candle tensors (Candle never records a graph). A
//! result that needs a gradient holds a node (`grad_fn`): its saved tensors with the
//! version they had when saved, and one edge per input, to the input's node or to the
//! accumulator of a leaf. `engine::run` walks the graph in dependency order,
//! accumulates each leaf's gradient, and frees saved tensors once their node has run
//! unless the graph is retained. Backward formulas are written with the same
//! differentiable ops as the forward (`ops`), so with `create_graph` the gradient is
//! itself recorded and can be differentiated again.
//!
//! - `value`: `Value` (a tensor with its autograd metadata and version counter)
//! - `mode`: the per-thread grad mode
//! - `node`: the `Node` trait, edges, saved values, leaf accumulators, hooks
//! - `engine`: the backward pass
//! - `ops`: differentiable ops with their backward formulas
//! - `custom`: nodes for our fused kernels (a Candle `CustomOp`'s own `bwd`)
//! - `pointwise`: formulas of the other elementwise ops (abs, rounding, powers, ...)
//! - `indexing`: gathers, scatters, flips, repeats, scans and selecting reductions
//! - `recurrent`: one node for all the steps of a recurrent layer's direction
//! - `composed`: differentiable forms of the fused ops, for `create_graph` and for
//!   the dtypes and devices their kernels do not cover
pub mod composed;
pub mod custom;
pub mod engine;
pub mod indexing;
pub mod mode;
pub mod node;
pub mod ops;
pub mod pointwise;
pub mod recurrent;
pub mod special;
pub mod value;

#[cfg(test)]
mod tests;

pub use mode::{grad_enabled, set_grad_enabled};
pub use node::{Edge, Node};
pub use value::Value;
