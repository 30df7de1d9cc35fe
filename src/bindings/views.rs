//! Views of tensors in the autograd graph, kept consistent with their base as PyTorch's.
//!
//! Outside the graph a view shares its base's storage, so in-place writes reach both.
//! In the graph an in-place op replaces the value instead (the old one may be saved for
//! a backward), so a view records where it came from: the base's value cell and the
//! region it covers there (row-major shape, strides, offset over the base's elements).
//! An in-place write into the view is then written into the base (and on up the chain,
//! `write_back`), and a view whose base changed since it was derived is re-derived
//! from the base when next read (`sync`), so siblings and the base's other views see
//! the write too. The gradients follow from the recorded writes and reads.
use crate::autograd::{grad_enabled, Value};
use crate::bindings::errors::{runtime_err, OpResult};
use crate::bindings::tensor::Region;
use candle_core::{Shape, Tensor};
use pyo3::PyResult;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

/// A value cell shared by a tensor object and the views that point at it.
pub type Cell = Arc<RwLock<Value>>;

fn read(c: &Cell) -> Value {
    c.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Where a view in the graph came from.
pub struct ViewLink {
    base: Cell,
    base_link: Option<Arc<ViewLink>>,
    region: Region,
    /// The base's version when this view's value was last derived from or written into it.
    seen: AtomicU32,
}

impl ViewLink {
    pub fn new(base: Cell, base_link: Option<Arc<ViewLink>>, region: Region, seen: u32) -> Arc<ViewLink> {
        Arc::new(ViewLink { base, base_link, region, seen: AtomicU32::new(seen) })
    }

    /// The base's current value (itself first brought up to date with its own base).
    fn base_value(&self) -> Value {
        if let Some(bl) = &self.base_link {
            sync(&self.base, bl);
        }
        read(&self.base)
    }

    fn offsets(&self) -> Vec<u32> {
        let (shape, st, off) = &self.region;
        crate::ops::layout::strided_offsets(shape, st, *off).into_iter().map(|o| o as u32).collect()
    }
}

/// Re-derive the view in `cell` from its base when the base changed since.
pub fn sync(cell: &RwLock<Value>, l: &ViewLink) {
    let bv = l.base_value();
    let now = bv.version_now();
    if now == l.seen.load(Ordering::Acquire) {
        return;
    }
    let shape = Shape::from(l.region.0.clone());
    let fresh = (|| -> candle_core::Result<Value> {
        let offs = l.offsets();
        if offs.iter().any(|&o| o as usize >= bv.data.elem_count()) {
            candle_core::bail!("the base changed shape");
        }
        let idx = Tensor::from_vec(offs, shape.elem_count(), bv.data.device())?;
        crate::autograd::indexing::take(&bv, &idx, &shape)
    })();
    // A base that no longer holds the region (its data was reassigned) leaves the view as it is.
    if let Ok(new) = fresh {
        let mut g = cell.write().unwrap_or_else(|p| p.into_inner());
        let version = g.version.clone();
        *g = Value { version, ..new };
    }
    l.seen.store(now, Ordering::Release);
}

/// Write the view's new value `v` into its base, then the base's into its own base.
pub fn write_back(v: &Value, l: &ViewLink, op: &str) -> PyResult<()> {
    let bv = l.base_value();
    if bv.is_leaf() && bv.requires_grad() && grad_enabled() {
        return Err(runtime_err(op, "a view of a leaf Variable that requires grad is being used in an in-place operation."));
    }
    let new = crate::bindings::indexing::put(&bv, l.offsets(), v).op(op)?;
    let newb = {
        let mut g = l.base.write().unwrap_or_else(|p| p.into_inner());
        g.bump_version();
        let version = g.version.clone();
        *g = Value { version, ..new };
        g.clone()
    };
    if let Some(bl) = &l.base_link {
        write_back(&newb, bl, op)?;
    }
    l.seen.store(read(&l.base).version_now(), Ordering::Release);
    Ok(())
}

/// Whether two tensors read the same storage.
fn same_storage(a: &Tensor, b: &Tensor) -> bool {
    let (sa, _) = a.storage_and_layout();
    let pa = &*sa as *const candle_core::Storage;
    drop(sa);
    let (sb, _) = b.storage_and_layout();
    std::ptr::eq(pa, &*sb as *const candle_core::Storage)
}

/// The link for `child`, a result of a view op on the tensor (`cell`, `link`): the
/// nearest of it and its bases whose data is contiguous and holds the child's
/// elements (a non-contiguous view's region is taken in its own base). `None` when the child is not a view (a copy) or overlaps itself.
pub fn link_for(cell: &Cell, link: Option<&Arc<ViewLink>>, child: &Tensor) -> Option<Arc<ViewLink>> {
    if child.dims().iter().zip(child.stride()).any(|(&d, &s)| d > 1 && s == 0) {
        return None;
    }
    let (mut cell, mut link) = (cell.clone(), link.cloned());
    loop {
        let bv = read(&cell);
        let (start, cs) = (bv.data.layout().start_offset(), child.layout().start_offset());
        if bv.data.is_contiguous() && cs >= start && same_storage(&bv.data, child) {
            let region = (child.dims().to_vec(), child.stride().to_vec(), cs - start);
            return Some(ViewLink::new(cell, link, region, bv.version_now()));
        }
        let next = link?;
        cell = next.base.clone();
        link = next.base_link.clone();
    }
}
