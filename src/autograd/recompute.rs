//! The node for compositions not yet given their own formula (transitional).
//!
//! The forward runs once on plain tensors. Its backward re-runs the same forward on
//! copies of the inputs that Candle tracks, and takes the gradients from Candle's
//! backprop of that one op. Correct for any composition, but it repeats the forward
//! and cannot record a second-order graph: ops move to `ops` formulas or to
//! `custom` nodes as they get their own backward.
use crate::autograd::composed::{through, Composed};
use crate::autograd::mode::grad_enabled;
use crate::autograd::node::{unpack, Edge, Node, NodeBase, Saved};
use crate::autograd::ops::records;
use crate::autograd::value::{lock, Meta, Value};
use candle_core::{CpuStorage, CustomOp1, Error, Layout, Result, Shape, Tensor, Var};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// A forward over plain tensors, re-run by the backward on tracked copies.
pub type Forward = Arc<dyn Fn(&[Tensor]) -> Result<Tensor> + Send + Sync>;

/// `apply` for a closure: the form the bindings use.
pub fn via(name: &str, inputs: &[&Value], f: impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static) -> Result<Value> {
    via_with(name, inputs, f, None)
}

/// `via` with the op's differentiable form, which `create_graph` differentiates.
pub fn via_with(
    name: &str,
    inputs: &[&Value],
    f: impl Fn(&[Tensor]) -> Result<Tensor> + Send + Sync + 'static,
    composed: Option<Composed>,
) -> Result<Value> {
    if !records(inputs) {
        let ts: Vec<Tensor> = inputs.iter().map(|v| v.data.clone()).collect();
        return Ok(Value::plain(f(&ts)?));
    }
    apply(name, inputs, Arc::new(f), composed)
}

/// PyTorch's node name for an op: `masked_fill` -> `MaskedFillBackward0`.
fn node_name(op: &str) -> String {
    let mut s: String = op
        .split(['_', '.', ' '])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect();
    s.push_str("Backward0");
    s
}

/// Compute `f(inputs)`; record a node when a gradient is needed.
pub fn apply(name: &str, inputs: &[&Value], f: Forward, composed: Option<Composed>) -> Result<Value> {
    let ts: Vec<Tensor> = inputs.iter().map(|v| v.data.clone()).collect();
    let out = f(&ts)?.detach();
    if !records(inputs) || !out.dtype().is_float() {
        return Ok(Value::plain(out));
    }
    let edges: Vec<Option<Edge>> = inputs.iter().map(|v| v.edge()).collect();
    let saved = inputs.iter().map(|v| Saved::input(v)).collect();
    let node = Arc::new(Recompute { name: node_name(name), base: NodeBase::new(edges, 1), saved: Mutex::new(Some(saved)), f, composed });
    Ok(Value { meta: Some(Meta::non_leaf(node, 0)), ..Value::plain(out) })
}

struct Recompute {
    name: String,
    base: NodeBase,
    saved: Mutex<Option<Vec<Saved>>>,
    f: Forward,
    composed: Option<Composed>,
}

/// The root of the one-op backward: its gradient with respect to `out` is `g`.
struct Seed(Tensor);

impl CustomOp1 for Seed {
    fn name(&self) -> &'static str {
        "seed"
    }
    fn cpu_fwd(&self, _s: &CpuStorage, _l: &Layout) -> Result<(CpuStorage, Shape)> {
        Ok((CpuStorage::F32(vec![0.0]), Shape::from(())))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, _grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(self.0.clone()))
    }
}

impl Node for Recompute {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn base(&self) -> &NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let n = self.base.next.len();
        let Some((ins, g)) = unpack(&self.saved, &self.name, grads)? else { return Ok(vec![None; n]) };
        let needs: Vec<bool> = self.base.next.iter().map(|e| e.is_some()).collect();
        if grad_enabled() && (g.requires_grad() || ins.iter().any(|v| v.requires_grad())) {
            if let Some(f) = &self.composed {
                return through(f, &ins, &needs, &g);
            }
            return Err(Error::Msg(format!(
                "create_graph=True: {} has no double-backward formula yet; its gradient cannot be differentiated again",
                self.name
            )));
        }
        let tracked: Vec<Tensor> = ins
            .iter()
            .zip(&needs)
            .map(|(v, &need)| if need { Var::from_tensor(&v.data).map(|v| v.into_inner()) } else { Ok(v.data.clone()) })
            .collect::<Result<_>>()?;
        let out = (self.f)(&tracked)?;
        let g = g.data.to_dtype(out.dtype())?;
        let root = if out.device().is_cpu() { out.apply_op1(Seed(g))? } else { out.mul(&g)?.sum_all()? };
        let store = root.backward()?;
        Ok(tracked.iter().zip(&needs).map(|(t, &need)| if need { store.get(t).map(|g| Value::plain(g.detach())) } else { None }).collect())
    }
    fn release(&self) {
        *lock(&self.saved) = None;
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
