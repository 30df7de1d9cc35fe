//! Graph nodes: the `Node` trait, edges, saved tensors checked against their version
//! counter, the accumulator at each leaf, and the closure node most ops use.
use crate::autograd::value::{lock, Meta, Value};
use crate::ops::layout::Dense;
use candle_core::{Error, Result};
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A gradient hook: may return a replacement gradient.
pub type Hook = Arc<dyn Fn(&Value) -> Result<Option<Value>> + Send + Sync>;

/// Where a gradient goes: output `nr` of `node`.
#[derive(Clone)]
pub struct Edge {
    pub node: Arc<dyn Node>,
    pub nr: usize,
}

static SEQ: AtomicU64 = AtomicU64::new(0);
static HOOK_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for a removable hook handle.
pub fn next_hook_id() -> u64 {
    HOOK_ID.fetch_add(1, Ordering::Relaxed)
}

/// What every node has: its edges (one per differentiable input), its creation order
/// (the engine runs later nodes first, as PyTorch), and the hooks registered on it.
pub struct NodeBase {
    pub next: Vec<Option<Edge>>,
    pub num_outputs: usize,
    pub seq: u64,
    /// Tensor hooks of non-leaf outputs: (handle id, output nr, hook).
    pub pre_hooks: Mutex<Vec<(u64, usize, Hook)>>,
    /// Non-leaf outputs whose `.grad` is kept (`retain_grad()`).
    pub retains: Mutex<Vec<(usize, Weak<Meta>)>>,
    /// Set once the node ran without `retain_graph`: its saved tensors are gone.
    pub released: AtomicBool,
}

impl NodeBase {
    pub fn new(next: Vec<Option<Edge>>, num_outputs: usize) -> NodeBase {
        NodeBase {
            next,
            num_outputs,
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
            pre_hooks: Mutex::new(Vec::new()),
            retains: Mutex::new(Vec::new()),
            released: AtomicBool::new(false),
        }
    }
}

pub trait Node: Send + Sync + 'static {
    /// PyTorch's class name of the node (`AddBackward0`, `MmBackward0`, ...).
    fn name(&self) -> String;
    fn base(&self) -> &NodeBase;
    /// Gradients of the inputs (one per edge) from those of the outputs (None: zero).
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>>;
    /// Free the saved tensors (after a backward without `retain_graph`).
    fn release(&self) {}
    /// Whether every gradient `apply` returns is a new buffer or a view of a gradient
    /// it was given (never a tensor held elsewhere): the engine then knows which
    /// gradients nothing else references, and a leaf takes those without a copy.
    /// False for nodes running user code (`autograd.Function`).
    fn fresh_outputs(&self) -> bool {
        true
    }

    fn as_any(&self) -> &dyn Any;
}

/// The key the engine uses for a node: its address.
pub fn node_key(n: &Arc<dyn Node>) -> usize {
    Arc::as_ptr(n) as *const () as usize
}

/// Torch's message for a second backward through freed buffers.
pub fn freed_err() -> Error {
    Error::Msg(
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). \
         Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True \
         if you need to backward through the graph a second time or if you need to access saved tensors after calling backward."
            .into(),
    )
}

/// A tensor saved for backward and the version it had then.
pub struct Saved {
    value: Value,
    version: u32,
    /// Output `nr` of the node that saved it, when it saved its own output.
    output_of: Option<usize>,
}

impl Saved {
    pub fn input(v: &Value) -> Saved {
        Saved { value: v.clone(), version: v.version_now(), output_of: None }
    }
    /// An output of the saving node: kept without its autograd side (no cycle).
    pub fn output(v: &Value, nr: usize) -> Saved {
        Saved { value: v.detached(), version: v.version_now(), output_of: Some(nr) }
    }
    /// The saved value; an error in PyTorch's words if it was modified in place since.
    pub fn unpack(&self, node: &str) -> Result<Value> {
        let now = self.value.version_now();
        if now != self.version {
            let what = match self.output_of {
                Some(nr) => format!("output {nr} of {node}"),
                None => format!("an input of {node}"),
            };
            return Err(Error::Msg(format!(
                "one of the variables needed for gradient computation has been modified by an inplace operation: \
                 [{:?} {:?}], which is {what}, is at version {now}; expected version {} instead. Hint: the backtrace further above \
                 shows the operation that failed to compute its gradient. The variable in question was changed in there or anywhere later. Good luck!",
                self.value.data.dtype(),
                self.value.data.dims(),
                self.version
            )));
        }
        Ok(self.value.clone())
    }
}

/// The saved tensors of a one-output node, checked against in-place changes; the
/// node's incoming gradient; or None when no gradient reached the node (then every
/// input gets None). Shared by the closure and fused nodes.
pub fn unpack(saved: &Mutex<Option<Vec<Saved>>>, name: &str, grads: Vec<Option<Value>>) -> Result<Option<(Vec<Value>, Value)>> {
    let Some(g) = grads.into_iter().next().flatten() else { return Ok(None) };
    let s = lock(saved);
    let Some(s) = s.as_ref() else { return Err(freed_err()) };
    Ok(Some((s.iter().map(|s| s.unpack(name)).collect::<Result<Vec<_>>>()?, g)))
}

/// A backward formula: (saved tensors, gradient of the output, which inputs need one).
pub type Formula = Box<dyn Fn(&[Value], &Value, &[bool]) -> Result<Vec<Option<Value>>> + Send + Sync>;

/// The node of a one-output op whose backward is a formula over saved tensors.
pub struct FnNode {
    name: &'static str,
    base: NodeBase,
    saved: Mutex<Option<Vec<Saved>>>,
    formula: Formula,
}

impl FnNode {
    pub fn new(name: &'static str, next: Vec<Option<Edge>>, saved: Vec<Saved>, formula: Formula) -> FnNode {
        FnNode { name, base: NodeBase::new(next, 1), saved: Mutex::new(Some(saved)), formula }
    }
}

impl Node for FnNode {
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn base(&self) -> &NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let n = self.base.next.len();
        let Some((saved, g)) = unpack(&self.saved, self.name, grads)? else { return Ok(vec![None; n]) };
        let needs: Vec<bool> = self.base.next.iter().map(|e| e.is_some()).collect();
        let out = (self.formula)(&saved, &g, &needs)?;
        debug_assert_eq!(out.len(), n, "{}: formula returned {} gradients for {n} inputs", self.name, out.len());
        Ok(out)
    }
    fn release(&self) {
        // Nothing saved: nothing to free, and a second backward stays possible (as PyTorch).
        let mut s = lock(&self.saved);
        if s.as_ref().is_some_and(|v| !v.is_empty()) {
            *s = None;
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The end of every path to a leaf: runs the leaf's hooks, then adds the gradient into
/// its `.grad` (the first one is stored as is, later ones are summed).
pub struct AccumulateGrad {
    base: NodeBase,
    pub leaf: Weak<Meta>,
}

impl AccumulateGrad {
    pub fn new(leaf: Weak<Meta>) -> AccumulateGrad {
        AccumulateGrad { base: NodeBase::new(Vec::new(), 1), leaf }
    }

    /// Run the leaf's hooks on `g` (each may replace it).
    pub fn hooked(&self, mut g: Value) -> Result<Value> {
        if let Some(m) = self.leaf.upgrade() {
            let hooks: Vec<Hook> = lock(&m.hooks).iter().map(|(_, h)| h.clone()).collect();
            for h in hooks {
                if let Some(n) = h(&g)? {
                    g = n;
                }
            }
        }
        Ok(g)
    }
}

/// Sum `g` into the `.grad` slot of `m` (moved in when empty).
pub fn accumulate_into(m: &Meta, g: Value) -> Result<()> {
    accumulate_owned(m, g, false)
}

/// `accumulate_into` for a gradient the engine knows nothing else references
/// (`owned`): a dense one is stored as is, as PyTorch steals a gradient whose only
/// reference is the engine's.
pub fn accumulate_owned(m: &Meta, g: Value, owned: bool) -> Result<()> {
    let mut slot = lock(&m.grad);
    let new = match slot.take() {
        None => {
            // A gradient may share storage with another input's (add's backward hands
            // one tensor to both sides) or with the caller's `gradient`, and `.grad` is
            // written in place later (`zero_()`, clipping): own the storage.
            if g.meta.is_none() && !(owned && g.data.is_contiguous()) {
                Value::plain(g.data.dense_copy()?)
            } else {
                g
            }
        }
        Some(old) => crate::autograd::ops::add(&old, &g)?,
    };
    *slot = Some(new);
    Ok(())
}

impl Node for AccumulateGrad {
    fn name(&self) -> String {
        "AccumulateGrad".into()
    }
    fn base(&self) -> &NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        self.apply_owned(grads, false)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl AccumulateGrad {
    /// `apply`, told whether the engine holds the only reference to the gradient.
    pub fn apply_owned(&self, grads: Vec<Option<Value>>, owned: bool) -> Result<Vec<Option<Value>>> {
        let Some(g) = grads.into_iter().next().flatten() else { return Ok(Vec::new()) };
        let Some(m) = self.leaf.upgrade() else { return Ok(Vec::new()) };
        // A hook sees the gradient (and may keep it): then it is not ours to take.
        let owned = owned && lock(&m.hooks).is_empty();
        let g = self.hooked(g)?;
        accumulate_owned(&m, g, owned)?;
        let post: Vec<Hook> = lock(&m.post_hooks).iter().map(|(_, h)| h.clone()).collect();
        if !post.is_empty() {
            let grad = lock(&m.grad).clone();
            if let Some(grad) = grad {
                for h in post {
                    h(&grad)?;
                }
            }
        }
        Ok(Vec::new())
    }
}
