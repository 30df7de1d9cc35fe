//! `_core._sgd_step` / `_core._adam_step`: one call per parameter group; the
//! kernels and the in-place storage access are `crate::ops::optim`'s. These are the
//! only implementation of the updates: a parameter whose tensors the kernels cannot
//! update in place (another device, a half dtype, a strided view, shared storage)
//! is updated on contiguous float copies that are then written back in place.
use crate::bindings::errors::{detach_if, shape_str, value_err, OpResult};
use crate::bindings::indexing::overwrite;
use crate::bindings::tensor::PyTensor;
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::optim::{adam_kernel, apart, plain, scale_in_place, sgd_kernel, update, Adam, Sgd, PAR_MIN};
use crate::ops::optim_rules::{rule_kernel, AdamLike, NAdamMu, Rule};
use candle_core::{DType, Device, Result, Tensor};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::collections::HashMap;

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
        let ts = ts.iter().map(|t| t.to_device(&Device::Cpu)?.to_dtype(dt)?.dense_copy()).collect::<Result<Vec<_>>>()?;
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
    // Parameters run side by side when the group is large and no storage appears twice
    // (a repeated one would be updated twice at once, or two parameters' nested locks
    // could wait on each other).
    let all: Vec<&Tensor> = work.iter().flat_map(|w| w.ts.iter()).collect();
    let side_by_side = total >= PAR_MIN && apart(&all);
    detach_if(total, || {
        if side_by_side {
            work.par_iter().enumerate().try_for_each(|(i, w)| each(i, &w.ts, w.ts[0].dtype()))
        } else {
            work.iter().enumerate().try_for_each(|(i, w)| each(i, &w.ts, w.ts[0].dtype()))
        }
    })
    .op(OP)?;
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
        list.iter().try_for_each(written)?;
    }
    Ok(())
}

/// After an in-place write by a kernel here: bump `t`'s version (saved copies of it are
/// stale) and carry the bytes to its aliased storages.
fn written(t: &Bound<'_, PyTensor>) -> PyResult<()> {
    let version = t.get().read().version.clone();
    version.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    crate::bindings::bitcast::after_write(&version)
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

/// The hyper-parameters of `_optim_step`: every name the rule needs must be given
/// and no other (a misspelt or unused option is an error, not ignored).
struct Hyper {
    kind: String,
    map: HashMap<String, f64>,
    used: std::cell::RefCell<Vec<String>>,
}

impl Hyper {
    fn get(&self, k: &str) -> PyResult<f64> {
        self.used.borrow_mut().push(k.to_string());
        self.map.get(k).copied().ok_or_else(|| value_err(OP, format!("{}: missing hyper-parameter '{k}'", self.kind)))
    }
    fn flag(&self, k: &str) -> PyResult<bool> {
        Ok(self.get(k)? != 0.0)
    }
    fn check_all_used(&self) -> PyResult<()> {
        let used = self.used.borrow();
        let mut extra: Vec<&String> = self.map.keys().filter(|k| !used.contains(k)).collect();
        extra.sort();
        match extra.first() {
            Some(k) => Err(value_err(OP, format!("{}: unknown hyper-parameter '{k}'", self.kind))),
            None => Ok(()),
        }
    }
    fn adam_like(&self, step: f64) -> PyResult<AdamLike> {
        Ok(AdamLike {
            lr: self.get("lr")?,
            beta1: self.get("beta1")?,
            beta2: self.get("beta2")?,
            eps: self.get("eps")?,
            weight_decay: self.get("weight_decay")?,
            decoupled: self.flag("decoupled_weight_decay")?,
            maximize: self.flag("maximize")?,
            step,
        })
    }
    /// The rule for one parameter at its step count `step` (after this step); for
    /// NAdam `prev_mu` is its `mu_product` before this step.
    fn rule(&self, step: f64, prev_mu: f64) -> PyResult<Rule> {
        let k = self.kind.as_str();
        let rule = match k {
            "rmsprop" => Rule::RmsProp {
                lr: self.get("lr")?,
                alpha: self.get("alpha")?,
                eps: self.get("eps")?,
                weight_decay: self.get("weight_decay")?,
                momentum: self.get("momentum")?,
                centered: self.flag("centered")?,
                maximize: self.flag("maximize")?,
            },
            "adagrad" => Rule::Adagrad {
                lr: self.get("lr")?,
                lr_decay: self.get("lr_decay")?,
                eps: self.get("eps")?,
                weight_decay: self.get("weight_decay")?,
                maximize: self.flag("maximize")?,
                step,
            },
            "adadelta" => Rule::Adadelta {
                lr: self.get("lr")?,
                rho: self.get("rho")?,
                eps: self.get("eps")?,
                weight_decay: self.get("weight_decay")?,
                maximize: self.flag("maximize")?,
            },
            "adamax" => Rule::Adamax {
                lr: self.get("lr")?,
                beta1: self.get("beta1")?,
                beta2: self.get("beta2")?,
                eps: self.get("eps")?,
                weight_decay: self.get("weight_decay")?,
                maximize: self.flag("maximize")?,
                step,
            },
            "nadam" => {
                let h = self.adam_like(step)?;
                Rule::NAdam(h, NAdamMu::at(h.beta1, self.get("momentum_decay")?, step, prev_mu))
            }
            "radam" => Rule::RAdam(self.adam_like(step)?),
            _ => {
                return Err(value_err(OP, format!("unknown optimizer '{k}' (expected rmsprop, adagrad, adadelta, adamax, nadam or radam)")))
            }
        };
        Ok(rule)
    }
}

/// `_core._optim_step(kind, params, grads, buffers, steps, mu_products, hyper)`: one
/// parameter group's step of RMSprop / Adagrad / Adadelta / Adamax / NAdam / RAdam
/// (`kind`, lower case), in place. `buffers` holds one list per state buffer, in the
/// order the rule takes them (e.g. RMSprop: `square_avg`, then `grad_avg` when
/// centered, then `momentum_buffer` when momentum > 0); `steps[i]` is parameter i's
/// step count after this step; `mu_products` (NAdam only, else empty) are the
/// parameters' `mu_product` before this step. `hyper` maps torch's option names
/// (`betas` split into `beta1`/`beta2`; booleans as 0/1) to values. Returns NAdam's
/// new `mu_product`s (empty for the others).
#[pyfunction]
#[pyo3(signature = (kind, params, grads, buffers, steps, mu_products, hyper))]
fn _optim_step(
    kind: &str,
    params: Tensors<'_>,
    grads: Tensors<'_>,
    buffers: Vec<Tensors<'_>>,
    steps: Vec<f64>,
    mu_products: Vec<f64>,
    hyper: HashMap<String, f64>,
) -> PyResult<Vec<f64>> {
    let h = Hyper { kind: kind.to_string(), map: hyper, used: Default::default() };
    if steps.len() != params.len() {
        return Err(value_err(OP, format!("expected {} step counts, got {}", params.len(), steps.len())));
    }
    let nadam = kind == "nadam";
    if nadam && mu_products.len() != params.len() {
        return Err(value_err(OP, format!("expected {} mu_products, got {}", params.len(), mu_products.len())));
    }
    if !nadam && !mu_products.is_empty() {
        return Err(value_err(OP, format!("{kind}: mu_products are NAdam's only, got {}", mu_products.len())));
    }
    let rules =
        steps.iter().enumerate().map(|(i, &s)| h.rule(s, if nadam { mu_products[i] } else { 1.0 })).collect::<PyResult<Vec<Rule>>>()?;
    if rules.is_empty() {
        h.rule(1.0, 1.0)?; // validates the hyper-parameters of an empty group too
    }
    h.check_all_used()?;
    let names = rules.first().map(|r| r.buffer_names()).unwrap_or_default();
    if buffers.len() != names.len() && !rules.is_empty() {
        return Err(value_err(
            OP,
            format!("{kind}: expected {} state buffer lists ({}), got {}", names.len(), names.join(", "), buffers.len()),
        ));
    }
    let mut lists: Vec<(&str, &[Bound<'_, PyTensor>])> = vec![("params", &params), ("grads", &grads)];
    for (name, list) in names.iter().zip(buffers.iter()) {
        lists.push((name, list));
    }
    run_all(&lists, |i, ts, dt| {
        let r = &rules[i];
        dispatch(ts, dt, &|p, g, b| rule_kernel(r, p, g, b), &|p, g, b| rule_kernel(r, p, g, b))
    })?;
    Ok(rules
        .iter()
        .filter_map(|r| match r {
            Rule::NAdam(_, mu) => Some(mu.mu_product),
            _ => None,
        })
        .collect())
}

/// `_total_norm(tensors, p) -> Tensor | None`: the p-norm (finite p > 0) of all the
/// tensors' elements together, a 0-d float32 tensor (float64 if any tensor is):
/// `clip_grad_norm_`'s total norm in one pass per tensor, no temporaries. `None`
/// where the caller computes it from tensor ops (a tensor off the CPU or of a half
/// dtype).
#[pyfunction]
fn _total_norm(py: Python<'_>, tensors: Vec<PyRef<'_, PyTensor>>, p: f64) -> PyResult<Option<PyTensor>> {
    if !(p.is_finite() && p > 0.0) {
        return Err(value_err("clip_grad_norm_", format!("norm_type must be finite and positive here, got {p}")));
    }
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.t()).collect();
    if ts.iter().any(|t| !t.device().is_cpu() || !matches!(t.dtype(), DType::F32 | DType::F64)) {
        return Ok(None);
    }
    // float64 when any gradient is, as torch's stack of the per-tensor norms promotes.
    let wide = ts.iter().any(|t| t.dtype() == DType::F64);
    let total = crate::bindings::errors::detach_op(py, "clip_grad_norm_", || {
        let mut s = 0.0f64;
        for t in &ts {
            let d = t.dense()?;
            let (st, l) = d.storage_and_layout();
            let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("clip_grad_norm_: expected a dense tensor") };
            s += match &*st {
                candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => crate::ops::reduce::pow_sum(&v[a..b], p),
                candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => crate::ops::reduce::pow_sum(&v[a..b], p),
                _ => candle_core::bail!("clip_grad_norm_: expected float32 or float64"),
            };
        }
        let n = if p == 2.0 { s.sqrt() } else { s.powf(1.0 / p) };
        if wide {
            Tensor::new(n, &Device::Cpu)
        } else {
            Tensor::new(n as f32, &Device::Cpu)
        }
    })?;
    Ok(Some(PyTensor::wrap_dt(total, if wide { crate::dtype::DT::F64 } else { crate::dtype::DT::F32 })))
}

/// `_scale_(tensors, coef) -> bool`: every tensor multiplied by `coef` in place, as
/// `t.mul_(coef)` (the factor rounded to the tensor's dtype), the tensors side by side
/// and large ones in chunks: `clip_grad_norm_`'s scaling, which one `mul_` after
/// another ran on one thread (428 us for an LSTM LM's 1.05M gradients). False, with
/// nothing touched, where a tensor is off the CPU, not float32/float64, not contiguous
/// from offset 0, or shares its storage: the caller then scales them one by one.
#[pyfunction]
fn _scale_(tensors: Vec<Bound<'_, PyTensor>>, coef: f64) -> PyResult<bool> {
    let ts: Vec<Tensor> = tensors.iter().map(|t| t.get().t()).collect();
    let each_plain = ts.iter().all(|t| matches!(t.dtype(), DType::F32 | DType::F64) && plain(&[t], t.dtype(), t.elem_count()));
    let refs: Vec<&Tensor> = ts.iter().collect();
    if !each_plain || !apart(&refs) {
        return Ok(false);
    }
    let total: usize = ts.iter().map(|t| t.elem_count()).sum();
    detach_if(total, || {
        ts.par_iter().try_for_each(|t| match t.dtype() {
            DType::F32 => scale_in_place(t, coef as f32),
            _ => scale_in_place(t, coef),
        })
    })
    .op("clip_grad_norm_")?;
    tensors.iter().try_for_each(written)?;
    Ok(true)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_scale_, m)?)?;
    m.add_function(wrap_pyfunction!(_total_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_sgd_step, m)?)?;
    m.add_function(wrap_pyfunction!(_adam_step, m)?)?;
    m.add_function(wrap_pyfunction!(_optim_step, m)?)?;
    Ok(())
}
