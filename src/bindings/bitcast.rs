//! `Tensor.view(dtype)`: the same bytes read as another dtype, sharing writes both ways.
//!
//! PyTorch's result aliases its base's storage. A Candle storage is typed (a `Vec<f32>`
//! cannot also be a `Vec<i32>`), so here the view gets a storage of its own holding the
//! base's bytes, and an alias record ties the two storages together: every in-place
//! write that ends in a storage (`indexing::write`/`overwrite`, the optimizers' updates)
//! reports the version counter it bumped to `after_write`, which copies the written
//! side's bytes into the other storage and bumps the other side's counter. Counters
//! belong to storages (every view of a storage shares its counter), so a write through
//! any view of either side reaches the other side and every view of it, as in PyTorch.
//!
//! The autograd graph replaces values instead of writing storages (so that saved
//! values stay intact); an in-place op in the graph on a tensor that has such an alias
//! is refused (`check_graph_write`) rather than leaving the alias stale.
use crate::autograd::value::Version;
use crate::bindings::errors::{runtime_err, value_err, OpResult};
use crate::bindings::safetensors_io::bytes_of;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use candle_core::{Device, Tensor};
use pyo3::PyResult;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Two storages holding the same bytes: the base's region and the view.
struct Alias {
    base: Tensor,
    view: Tensor,
    base_version: Weak<std::sync::atomic::AtomicU32>,
    /// The alias lives as long as some tensor shares the view's storage (they all hold
    /// this counter).
    view_version: Weak<std::sync::atomic::AtomicU32>,
}

static ALIASES: Mutex<Vec<Alias>> = Mutex::new(Vec::new());
/// `ALIASES.len()`, read without the lock on every in-place write.
static COUNT: AtomicUsize = AtomicUsize::new(0);

fn aliases() -> std::sync::MutexGuard<'static, Vec<Alias>> {
    ALIASES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Drop the aliases whose view is gone.
fn prune(list: &mut Vec<Alias>) {
    list.retain(|a| a.view_version.strong_count() > 0 && a.base_version.strong_count() > 0);
    COUNT.store(list.len(), Ordering::Release);
}

fn ptr(v: &Version) -> *const std::sync::atomic::AtomicU32 {
    Arc::as_ptr(v)
}

/// The elements of `t` (any layout) as a contiguous CPU tensor of `dt` with `dims`.
fn reinterpret(t: &Tensor, from: DT, to: DT, dims: &[usize]) -> PyResult<Tensor> {
    let bytes = bytes_of(t, from.itemsize())?;
    Tensor::from_raw_buffer(&bytes, to.candle(), dims, &Device::Cpu).op("view")
}

/// The shape `dims` of a `from` tensor takes when read as `to`, with PyTorch's rules
/// and messages for element sizes that differ.
fn view_dims(dims: &[usize], strides: &[usize], from: DT, to: DT) -> PyResult<Vec<usize>> {
    let (a, b) = (from.itemsize(), to.itemsize());
    if a == b {
        return Ok(dims.to_vec());
    }
    let what = format!("to view {} as {} (different element sizes)", from.name(), to.name());
    let Some(&last) = dims.last() else {
        return Err(value_err("view", format!("self.dim() cannot be 0 {what}")));
    };
    if strides.last() != Some(&1) && last > 1 {
        return Err(value_err("view", format!("self.stride(-1) must be 1 {what}, but got {}", strides[strides.len() - 1])));
    }
    let mut out = dims.to_vec();
    let n = out.len() - 1;
    if b < a {
        out[n] = last * (a / b);
    } else {
        if last * a % b != 0 {
            return Err(value_err("view", format!("self.size(-1) must be divisible by {} {what}, but got {last}", b / a)));
        }
        out[n] = last * a / b;
    }
    Ok(out)
}

/// `me.view(to)`: the bytes of `me` read as `to`, aliased to `me` for later writes.
pub fn view_dtype(me: &PyTensor, to: DT) -> PyResult<PyTensor> {
    let (v, from) = me.v_dt();
    let base = v.data.clone();
    let dims = view_dims(base.dims(), base.stride(), from, to)?;
    if !base.device().is_cpu() {
        return Err(crate::bindings::errors::device_err("view", "view(dtype) of a tensor off the CPU is not supported; use .cpu() first"));
    }
    if from == to {
        let out = PyTensor::wrap_vdt(v.detached(), to);
        return Ok(out);
    }
    let data = reinterpret(&base, from, to, &dims)?;
    // Not differentiable (PyTorch's view(dtype) is not either): a plain tensor.
    let out = PyTensor::wrap_dt(data.clone(), to);
    let view_version = out.read().version.clone();
    let mut list = aliases();
    prune(&mut list);
    list.push(Alias { base, view: data, base_version: Arc::downgrade(&v.version), view_version: Arc::downgrade(&view_version) });
    COUNT.store(list.len(), Ordering::Release);
    Ok(out)
}

/// Copy the bytes of `src` into the storage of `dst` (same byte count, any layouts).
fn copy_bytes(src: &Tensor, dst: &Tensor) -> PyResult<()> {
    let (sf, df) = (dt_of(src)?, dt_of(dst)?);
    let data = reinterpret(src, sf, df, dst.dims())?;
    crate::bindings::indexing::write_region(dst, &data, "view")
}

fn dt_of(t: &Tensor) -> PyResult<DT> {
    DT::of_candle(t.dtype()).ok_or_else(|| value_err("view", format!("unsupported dtype {:?}", t.dtype())))
}

/// After an in-place write that bumped `version`: carry the written bytes to every
/// storage aliased to the written one (and on from those), bumping their counters.
pub fn after_write(version: &Version) -> PyResult<()> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mut list = aliases();
    prune(&mut list);
    let mut done = vec![ptr(version)];
    let mut todo = vec![ptr(version)];
    while let Some(p) = todo.pop() {
        for a in list.iter() {
            let (Some(bv), Some(vv)) = (a.base_version.upgrade(), a.view_version.upgrade()) else { continue };
            let (src, dst, dst_v) = if ptr(&bv) == p {
                (&a.base, &a.view, vv)
            } else if ptr(&vv) == p {
                (&a.view, &a.base, bv)
            } else {
                continue;
            };
            if done.contains(&ptr(&dst_v)) {
                continue;
            }
            copy_bytes(src, dst)?;
            dst_v.fetch_add(1, Ordering::Relaxed);
            done.push(ptr(&dst_v));
            todo.push(ptr(&dst_v));
        }
    }
    Ok(())
}

/// Refuse an in-place op in the autograd graph on a tensor whose storage has a
/// view(dtype) alias: the graph would replace its value and leave the alias stale.
pub fn check_graph_write(version: &Version, op: &str) -> PyResult<()> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let list = aliases();
    let p = ptr(version);
    let hit = list
        .iter()
        .any(|a| a.base_version.upgrade().is_some_and(|v| ptr(&v) == p) || a.view_version.upgrade().is_some_and(|v| ptr(&v) == p));
    if hit {
        return Err(runtime_err(
            op,
            "an in-place op recorded by autograd on a tensor that shares its bytes with a view(dtype) result is not supported; \
             do the write under torch.no_grad() or on a clone",
        ));
    }
    Ok(())
}
