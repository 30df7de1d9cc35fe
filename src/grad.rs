//! The `.grad` slots of leaf tensors and the per-thread grad mode: the state the
//! Python autograd surface keeps beside Candle's graph (no PyO3 here).
//!
//! Each leaf's `.grad` lives in a `GradSlot`; a registry maps the leaf's Candle id
//! to its slot (weakly), so every Python wrapper of that leaf shares the slot. Grad
//! mode is per thread, as in PyTorch.
use candle_core::{Tensor, TensorId};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub(crate) type GradSlot = Mutex<Option<Tensor>>;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

pub(crate) fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Set this thread's grad mode; returns the previous one.
pub(crate) fn set_grad_enabled(mode: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(mode))
}

struct Registry {
    slots: HashMap<TensorId, Weak<GradSlot>>,
    /// Size after the last sweep of dead entries; sweeping again at twice that keeps it amortized O(1).
    swept_at: usize,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Registry { slots: HashMap::new(), swept_at: 0 }))
}

fn lock() -> std::sync::MutexGuard<'static, Registry> {
    registry().lock().unwrap_or_else(|p| p.into_inner())
}

fn insert(reg: &mut Registry, id: TensorId, slot: &Arc<GradSlot>) {
    reg.slots.insert(id, Arc::downgrade(slot));
    if reg.slots.len() > 2 * reg.swept_at + 1024 {
        reg.slots.retain(|_, w| w.strong_count() > 0);
        reg.swept_at = reg.slots.len();
    }
}

/// The grad slot for a tensor about to be wrapped: shared for leaves, fresh otherwise.
pub(crate) fn slot_for(t: &Tensor) -> Arc<GradSlot> {
    if !t.is_variable() {
        return Arc::new(Mutex::new(None));
    }
    let mut reg = lock();
    if let Some(s) = reg.slots.get(&t.id()).and_then(|w| w.upgrade()) {
        return s;
    }
    let s = Arc::new(Mutex::new(None));
    insert(&mut reg, t.id(), &s);
    s
}

/// A wrapper now holds `t`: if `t` is a leaf, route its gradients to `slot`.
pub(crate) fn rebind_slot(t: &Tensor, slot: &Arc<GradSlot>) {
    if t.is_variable() {
        insert(&mut lock(), t.id(), slot);
    }
}

pub(crate) fn slot_of(id: &TensorId) -> Option<Arc<GradSlot>> {
    lock().slots.get(id).and_then(|w| w.upgrade())
}

pub(crate) fn set_slot(slot: &GradSlot, v: Option<Tensor>) {
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = v;
}

pub(crate) fn get_slot(slot: &GradSlot) -> Option<Tensor> {
    slot.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
