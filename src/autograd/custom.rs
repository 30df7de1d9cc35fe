//! Nodes for our fused kernels: a Candle `CustomOp` computes the forward, and its own
//! `bwd` (our backward kernel) the gradients, called directly on the saved tensors.
//! Under `create_graph` the node differentiates the op's composed form
//! (`autograd::composed`) instead, or raises where it has none.
use crate::autograd::composed::{through, Composed};
use crate::autograd::mode::grad_enabled;
use crate::autograd::node::{unpack, Edge, Node, NodeBase, Saved};
use crate::autograd::ops::records;
use crate::autograd::value::{lock, Meta, Value};
use crate::ops::layout::Dense;
use candle_core::{CustomOp1, CustomOp2, CustomOp3, DType, Error, Result, Tensor};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// A fused op of one, two or three tensor arguments.
#[derive(Clone)]
pub enum Op {
    One(Arc<Box<dyn CustomOp1 + Send + Sync>>),
    Two(Arc<Box<dyn CustomOp2 + Send + Sync>>),
    Three(Arc<Box<dyn CustomOp3 + Send + Sync>>),
    /// An op whose backward reads its result (attention's output). Only these save it:
    /// the others' `bwd` ignores the result, so their node neither keeps the output
    /// alive nor refuses an in-place write to it (PyTorch saves a batch norm's input
    /// and statistics, not its output, so `bn -> ReLU(inplace=True)` trains).
    ReadsResult(Box<Op>),
}

impl Op {
    pub fn one(op: impl CustomOp1 + Send + Sync + 'static) -> Op {
        Op::One(Arc::new(Box::new(op)))
    }
    pub fn two(op: impl CustomOp2 + Send + Sync + 'static) -> Op {
        Op::Two(Arc::new(Box::new(op)))
    }
    pub fn three(op: impl CustomOp3 + Send + Sync + 'static) -> Op {
        Op::Three(Arc::new(Box::new(op)))
    }
    /// `self`, marked as reading its result in the backward.
    pub fn reading_result(self) -> Op {
        Op::ReadsResult(Box::new(self))
    }
    fn reads_result(&self) -> bool {
        matches!(self, Op::ReadsResult(_))
    }

    fn forward(&self, a: &[Tensor]) -> Result<Tensor> {
        match self {
            Op::One(o) => a[0].apply_op1_arc(o.clone()),
            Op::Two(o) => a[0].apply_op2_arc(&a[1], o.clone()),
            Op::Three(o) => a[0].apply_op3_arc(&a[1], &a[2], o.clone()),
            Op::ReadsResult(o) => o.forward(a),
        }
    }

    fn backward(&self, a: &[Tensor], res: &Tensor, g: &Tensor) -> Result<Vec<Option<Tensor>>> {
        Ok(match self {
            Op::One(o) => vec![o.bwd(&a[0], res, g)?],
            Op::Two(o) => {
                let (x, y) = o.bwd(&a[0], &a[1], res, g)?;
                vec![x, y]
            }
            Op::Three(o) => {
                let (x, y, z) = o.bwd(&a[0], &a[1], &a[2], res, g)?;
                vec![x, y, z]
            }
            Op::ReadsResult(o) => o.backward(a, res, g)?,
        })
    }
}

/// The fused node when a `kernel` applies (inputs made contiguous); else, in the graph,
/// the composed form itself (its nodes are the backward), half types computed in
/// float32 and rounded back (PyTorch's opmath); outside the graph `f` on the data.
/// `composed` serves `create_graph` in every case.
pub fn fused_or(
    name: &'static str,
    kernel: Option<Op>,
    inputs: &[&Value],
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    composed: Composed,
) -> Result<Value> {
    if let Some(op) = kernel {
        let cont = inputs.iter().map(|v| crate::autograd::ops::contiguous(v)).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Value> = cont.iter().collect();
        return apply_with(name, op, &refs, Some(composed));
    }
    if !records(inputs) {
        let ts: Vec<Tensor> = inputs.iter().map(|v| v.data.clone()).collect();
        return Ok(Value::plain(f(&ts)?));
    }
    let half = |v: &Value| matches!(v.data.dtype(), DType::F16 | DType::BF16);
    let wide = inputs
        .iter()
        .map(|v| if half(v) { crate::autograd::ops::to_dtype(v, DType::F32) } else { Ok((*v).clone()) })
        .collect::<Result<Vec<_>>>()?;
    let y = composed(&wide)?;
    crate::autograd::ops::to_dtype(&y, inputs[0].data.dtype())
}

/// Apply `op` to `inputs` (as many as the op takes, contiguous where the kernel needs it).
pub fn apply(name: &'static str, op: Op, inputs: &[&Value]) -> Result<Value> {
    apply_with(name, op, inputs, None)
}

/// `apply` with the op's differentiable form, which `create_graph` differentiates.
pub fn apply_with(name: &'static str, op: Op, inputs: &[&Value], composed: Option<Composed>) -> Result<Value> {
    let ts: Vec<Tensor> = inputs.iter().map(|v| v.data.clone()).collect();
    let out = op.forward(&ts)?.detach();
    if !records(inputs) || !out.dtype().is_float() {
        return Ok(Value::plain(out));
    }
    let edges: Vec<Option<Edge>> = inputs.iter().map(|v| v.edge()).collect();
    let res = Value::plain(out);
    let mut saved: Vec<Saved> = inputs.iter().map(|v| Saved::input(v)).collect();
    let reads = op.reads_result();
    if reads {
        saved.push(Saved::output(&res, 0));
    }
    let node = Arc::new(Fused { name, base: NodeBase::new(edges, 1), saved: Mutex::new(Some(saved)), op, composed, reads });
    Ok(Value { meta: Some(Meta::non_leaf(node, 0)), ..res })
}

struct Fused {
    name: &'static str,
    base: NodeBase,
    saved: Mutex<Option<Vec<Saved>>>,
    op: Op,
    composed: Option<Composed>,
    /// The result was saved (last), for an op that reads it.
    reads: bool,
}

impl Node for Fused {
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn base(&self) -> &NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let n = self.base.next.len();
        let Some((mut vals, g)) = unpack(&self.saved, self.name, grads)? else { return Ok(vec![None; n]) };
        let res = if self.reads { vals.pop() } else { None };
        if grad_enabled() && (g.requires_grad() || vals.iter().any(|v| v.requires_grad())) {
            if let Some(f) = &self.composed {
                let needs: Vec<bool> = self.base.next.iter().map(|e| e.is_some()).collect();
                return through(f, &vals, &needs, &g);
            }
            return Err(Error::Msg(format!(
                "create_graph=True: {} has no double-backward formula yet; its gradient cannot be differentiated again",
                self.name
            )));
        }
        let ts: Vec<Tensor> = vals.iter().map(|v| v.data.clone()).collect();
        let g_dense = g.data.dense()?;
        // An op that does not read its result is handed the gradient in its place (same
        // shape and dtype; its `bwd` ignores the argument).
        let gs = self.op.backward(&ts, res.as_ref().map_or(&g_dense, |r| &r.data), &g_dense)?;
        Ok(gs.into_iter().zip(&self.base.next).map(|(g, e)| if e.is_some() { g.map(|g| Value::plain(g.detach())) } else { None }).collect())
    }
    fn release(&self) {
        *lock(&self.saved) = None;
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
