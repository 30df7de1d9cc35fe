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
//! - `recompute`: the generic node for compositions not yet given a formula: it
//!   re-runs the forward through Candle's backprop on copies of its inputs
pub mod composed;
pub mod custom;
pub mod engine;
pub mod mode;
pub mod node;
pub mod ops;
pub mod recompute;
pub mod value;

pub use mode::{grad_enabled, set_grad_enabled};
pub use node::{Edge, Node};
pub use value::Value;
