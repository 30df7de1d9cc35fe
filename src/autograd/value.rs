//! `Value`: a Candle tensor (never tracked by Candle) with what autograd needs to know
//! about it: whether it requires grad, the node that made it, its `.grad`, and the
//! version counter its storage shares with its views.
use crate::autograd::node::{AccumulateGrad, Edge, Hook, Node};
use candle_core::Tensor;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Counts the in-place writes to a storage; shared by a tensor and its views.
pub type Version = Arc<AtomicU32>;

pub fn new_version() -> Version {
    Arc::new(AtomicU32::new(0))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The autograd side of a tensor that requires grad (a leaf) or was computed from one.
pub struct Meta {
    /// The node that made this tensor and which of its outputs it is; `None` for a leaf.
    pub grad_fn: Option<(Arc<dyn Node>, usize)>,
    /// `.grad`: accumulated for leaves; for non-leaves only after `retain_grad()`.
    pub grad: Mutex<Option<Value>>,
    /// A leaf's accumulator node, shared by every graph that uses the leaf while any is alive.
    acc: Mutex<Weak<AccumulateGrad>>,
    /// Hooks on a leaf's gradient (run before it is accumulated), with their handle ids.
    pub hooks: Mutex<Vec<(u64, Hook)>>,
    /// Hooks run after a leaf's gradient was accumulated (they receive the leaf).
    pub post_hooks: Mutex<Vec<(u64, Hook)>>,
    pub retains_grad: AtomicBool,
}

impl Meta {
    pub fn leaf() -> Arc<Meta> {
        Arc::new(Meta {
            grad_fn: None,
            grad: Mutex::new(None),
            acc: Mutex::new(Weak::new()),
            hooks: Mutex::new(Vec::new()),
            post_hooks: Mutex::new(Vec::new()),
            retains_grad: AtomicBool::new(false),
        })
    }

    pub fn non_leaf(node: Arc<dyn Node>, nr: usize) -> Arc<Meta> {
        Arc::new(Meta {
            grad_fn: Some((node, nr)),
            grad: Mutex::new(None),
            acc: Mutex::new(Weak::new()),
            hooks: Mutex::new(Vec::new()),
            post_hooks: Mutex::new(Vec::new()),
            retains_grad: AtomicBool::new(false),
        })
    }

    /// The leaf's accumulator node (made on first use, then shared while alive).
    pub fn accumulator(self: &Arc<Self>) -> Arc<AccumulateGrad> {
        let mut w = lock(&self.acc);
        if let Some(a) = w.upgrade() {
            return a;
        }
        let a = Arc::new(AccumulateGrad::new(Arc::downgrade(self)));
        *w = Arc::downgrade(&a);
        a
    }
}

/// A tensor as autograd sees it. Cloning is cheap (reference counts).
#[derive(Clone)]
pub struct Value {
    /// The data; never tracked by Candle's own graph.
    pub data: Tensor,
    /// `None` for a tensor that neither requires grad nor was computed from one.
    pub meta: Option<Arc<Meta>>,
    pub version: Version,
}

impl Value {
    /// A tensor outside the graph, with a fresh version counter.
    pub fn plain(data: Tensor) -> Value {
        Value { data: data.detach(), meta: None, version: new_version() }
    }

    /// A new leaf that requires grad.
    pub fn leaf(data: Tensor) -> Value {
        Value { data: data.detach(), meta: Some(Meta::leaf()), version: new_version() }
    }

    /// The same data and version counter, outside the graph (`detach()`).
    pub fn detached(&self) -> Value {
        Value { data: self.data.clone(), meta: None, version: self.version.clone() }
    }

    pub fn requires_grad(&self) -> bool {
        self.meta.is_some()
    }

    pub fn is_leaf(&self) -> bool {
        self.meta.as_ref().is_none_or(|m| m.grad_fn.is_none())
    }

    pub fn grad_fn(&self) -> Option<(Arc<dyn Node>, usize)> {
        self.meta.as_ref().and_then(|m| m.grad_fn.clone())
    }

    /// Where this tensor's gradient goes: its node's output, or its leaf accumulator.
    pub fn edge(&self) -> Option<Edge> {
        let m = self.meta.as_ref()?;
        Some(match &m.grad_fn {
            Some((n, nr)) => Edge { node: n.clone(), nr: *nr },
            None => Edge { node: m.accumulator() as Arc<dyn Node>, nr: 0 },
        })
    }

    pub fn bump_version(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
    }

    pub fn version_now(&self) -> u32 {
        self.version.load(Ordering::Relaxed)
    }
}
