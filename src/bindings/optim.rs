//! `_core._sgd_step` / `_core._adam_step`: one call per parameter group; the
//! kernels and the in-place storage access are `crate::ops::optim`'s. These are the
//! only implementation of the updates: a parameter whose tensors the kernels cannot
//! update in place (another device, a half dtype, a strided view, shared storage)
//! is updated on contiguous float copies that are then written back in place.
use crate::bindings::errors::{detach_if, shape_str, value_err, OpResult};
use crate::bindings::indexing::overwrite;
use crate::bindings::tensor::PyTensor;
use crate::ops::float::Float;
use crate::ops::optim::{adam_kernel, plain, sgd_kernel, update, Adam, Sgd};
use candle_core::{DType, Device, Result, Tensor};
use pyo3::prelude::*;

type Tensors<'py> = Vec<Bound<'py, PyTensor>>;

const OP: &str = "optimizer.step";

/// One parameter's tensors `[param, grad, buffers...]` as the kernels see them: the
/// originals when they can be updated in place, else contiguous CPU copies in the
/// compute dtype (float64 for float64 parameters, float32 otherwise, so half types
/// round once per step, as torch's CPU kernels do).
struct Work {
    ts: Vec<Tensor>,
    copied: bool,
}

impl Work {
    fn new(ts: Vec<Tensor>) -> Result<Work> {
        let p = &ts[0];
        let n = p.elem_count();
        let refs: Vec<&Tensor> = ts.iter().collect();
        if matches!(p.dtype(), DType::F32 | DType::F64) && plain(&refs, p.dtype(), n) {
            return Ok(Work { ts, copied: false });
        }
        let dt = if p.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
        // `copy` gives each tensor a storage of its own, so none aliases another.
        let ts = ts.iter().map(|t| t.to_device(&Device::Cpu)?.to_dtype(dt)?.contiguous()?.copy()).collect::<Result<Vec<_>>>()?;
        Ok(Work { ts, copied: true })
    }
}

/// Checks that every list holds one tensor per parameter of the parameter's shape,
/// runs `each(tensors, dtype)` for every parameter (GIL released when the step is
/// large), and writes the copies back into the parameters and buffers they came from.
fn run_all(lists: &[(&str, &[Bound<'_, PyTensor>])], each: impl Fn(usize, &[Tensor], DType) -> Result<()> + Send + Sync) -> PyResult<()> {
    let params = lists[0].1;
    let mut work = Vec::with_capacity(params.len());
    for (i, p) in params.iter().enumerate() {
        let pdims = p.get().t().dims().to_vec();
        let mut ts = Vec::with_capacity(lists.len());
        for (name, list) in lists {
            let t = list.get(i).ok_or_else(|| value_err(OP, format!("expected {} {name}, got {}", params.len(), list.len())))?.get().t();
            if t.dims() != pdims.as_slice() {
                return Err(crate::bindings::errors::shape_err(
                    OP,
                    format!("{name} {i} has shape {} but its parameter has {}", shape_str(t.dims()), shape_str(&pdims)),
                ));
            }
            ts.push(t);
        }
        work.push(Work::new(ts).op(OP)?);
    }
    let total: usize = work.iter().map(|w| w.ts[0].elem_count()).sum();
    detach_if(total, || work.iter().enumerate().try_for_each(|(i, w)| each(i, &w.ts, w.ts[0].dtype()))).op(OP)?;
    for (i, w) in work.iter().enumerate().filter(|(_, w)| w.copied) {
        // Every list but the gradient (position 1) was updated.
        for (k, (_, list)) in lists.iter().enumerate().filter(|(k, _)| *k != 1) {
            let dst = list[i].get();
            let orig = dst.t();
            let back = w.ts[k].to_dtype(orig.dtype()).and_then(|t| t.to_device(orig.device())).op(OP)?;
            overwrite(dst, crate::autograd::Value::plain(back), OP)?;
        }
    }
    // In-place updates: saved copies of these tensors are now stale.
    for (_, list) in lists.iter().enumerate().filter(|(k, _)| *k != 1).map(|(_, l)| l) {
        for t in list.iter() {
            t.get().read().bump_version();
        }
    }
    Ok(())
}

/// Runs `kernel` on one parameter's tensors `[p, g, bufs...]` in their dtype.
fn dispatch(
    ts: &[Tensor],
    dt: DType,
    f32k: &crate::ops::optim::UpdateFn<'_, f32>,
    f64k: &crate::ops::optim::UpdateFn<'_, f64>,
) -> Result<()> {
    match dt {
        DType::F32 => update::<f32>(&ts[0], &ts[1], &ts[2..], f32k),
        _ => update::<f64>(&ts[0], &ts[1], &ts[2..], f64k),
    }
}

/// `_core._sgd_step(params, grads, bufs, fresh, lr, momentum, dampening, weight_decay,
/// nesterov, maximize)`: PyTorch's SGD step for one parameter group, in place.
/// `bufs` are the momentum buffers (ignored without momentum); `fresh[i]` marks a
/// buffer made for this step, which takes the gradient as it is (torch's `clone`).
#[pyfunction]
#[pyo3(signature = (params, grads, bufs, fresh, lr, momentum, dampening, weight_decay, nesterov, maximize))]
#[allow(clippy::too_many_arguments)]
fn _sgd_step(
    params: Tensors<'_>,
    grads: Tensors<'_>,
    bufs: Tensors<'_>,
    fresh: Vec<bool>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    maximize: bool,
) -> PyResult<()> {
    let h = Sgd { lr, momentum, dampening, weight_decay, nesterov, maximize };
    let mut lists: Vec<(&str, &[Bound<'_, PyTensor>])> = vec![("params", &params), ("grads", &grads)];
    if momentum != 0.0 {
        if fresh.len() != params.len() {
            return Err(value_err(OP, format!("expected {} fresh flags, got {}", params.len(), fresh.len())));
        }
        lists.push(("momentum buffers", &bufs));
    }
    run_all(&lists, |i, ts, dt| {
        let fr = fresh.get(i).copied().unwrap_or(false);
        dispatch(ts, dt, &|p, g, b| sgd_kernel(p, g, b.first_mut().map(|x| &mut **x), fr, &h), &|p, g, b| {
            sgd_kernel(p, g, b.first_mut().map(|x| &mut **x), fr, &h)
        })
    })
}

/// `_core._adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr,
/// beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled)`: PyTorch's
/// Adam / AdamW step for one parameter group, in place. `steps[i]` is parameter i's
/// step count after this step; `max_exp_avg_sqs` is ignored without amsgrad.
#[pyfunction]
#[pyo3(signature = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled))]
#[allow(clippy::too_many_arguments)]
fn _adam_step(
    params: Tensors<'_>,
    grads: Tensors<'_>,
    exp_avgs: Tensors<'_>,
    exp_avg_sqs: Tensors<'_>,
    max_exp_avg_sqs: Tensors<'_>,
    steps: Vec<f64>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    amsgrad: bool,
    maximize: bool,
    decoupled: bool,
) -> PyResult<()> {
    if steps.len() != params.len() {
        return Err(value_err(OP, format!("expected {} step counts, got {}", params.len(), steps.len())));
    }
    let mut lists: Vec<(&str, &[Bound<'_, PyTensor>])> =
        vec![("params", &params), ("grads", &grads), ("exp_avgs", &exp_avgs), ("exp_avg_sqs", &exp_avg_sqs)];
    if amsgrad {
        lists.push(("max_exp_avg_sqs", &max_exp_avg_sqs));
    }
    let base = Adam { lr, beta1, beta2, eps, weight_decay, maximize, decoupled, step: 0.0 };
    fn k<T: Float>(p: &mut [T], g: &[T], b: &mut [&mut [T]], h: &Adam) {
        let (m, rest) = b.split_first_mut().expect("exp_avg");
        let (v, rest) = rest.split_first_mut().expect("exp_avg_sq");
        adam_kernel(p, g, m, v, rest.first_mut().map(|x| &mut **x), h);
    }
    run_all(&lists, |i, ts, dt| {
        let h = Adam { step: steps[i], ..base };
        dispatch(ts, dt, &|p, g, b| k(p, g, b, &h), &|p, g, b| k(p, g, b, &h))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sgd_step, m)?)?;
    m.add_function(wrap_pyfunction!(_adam_step, m)?)?;
    Ok(())
}
