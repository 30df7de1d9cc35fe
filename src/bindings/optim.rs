//! `_core._sgd_step` / `_core._adam_step`: one call per parameter group; the
//! kernels and the in-place storage access are `crate::ops::optim`'s.
use crate::bindings::tensor::PyTensor;
use crate::ops::float::Float;
use crate::ops::optim::{adam_kernel, plain, sgd_kernel, update, Adam, Sgd};
use candle_core::{DType, Result, Tensor};
use pyo3::prelude::*;

type Tensors<'py> = Vec<Bound<'py, PyTensor>>;

fn tensors(v: &[Bound<'_, PyTensor>]) -> Vec<Tensor> {
    v.iter().map(|t| t.get().t()).collect()
}

/// Checks every parameter's tensors, then runs `each(i, dtype)` for every parameter
/// with the GIL released when the step is large.
fn run_all(py: Python<'_>, groups: &[Vec<Tensor>], each: impl Fn(usize, DType) -> Result<()> + Send + Sync) -> PyResult<bool> {
    let n_params = groups[0].len();
    if groups.iter().any(|g| g.len() != n_params) {
        return Ok(false);
    }
    let mut total = 0;
    for i in 0..n_params {
        let p = &groups[0][i];
        if !matches!(p.dtype(), DType::F32 | DType::F64) {
            return Ok(false);
        }
        let ts: Vec<&Tensor> = groups.iter().map(|g| &g[i]).collect();
        if !plain(&ts, p.dtype(), p.elem_count()) {
            return Ok(false);
        }
        total += p.elem_count();
    }
    let go = || -> PyResult<bool> {
        use crate::bindings::errors::OpResult;
        for (i, p) in groups[0].iter().enumerate() {
            each(i, p.dtype()).op("optimizer.step")?;
        }
        Ok(true)
    };
    if total >= crate::bindings::errors::DETACH_ELEMS {
        crate::bindings::errors::detach(py, "optimizer.step", go)
    } else {
        go()
    }
}

/// `_core._sgd_step(params, grads, bufs, fresh, lr, momentum, dampening, weight_decay,
/// nesterov, maximize) -> bool`: PyTorch's SGD step for one parameter group, in place.
/// `bufs` are the momentum buffers (empty list without momentum); `fresh[i]` marks a
/// buffer made for this step, which takes the gradient as it is (torch's `clone`).
#[pyfunction]
#[pyo3(signature = (params, grads, bufs, fresh, lr, momentum, dampening, weight_decay, nesterov, maximize))]
#[allow(clippy::too_many_arguments)]
fn _sgd_step(
    py: Python<'_>,
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
) -> PyResult<bool> {
    let h = Sgd { lr, momentum, dampening, weight_decay, nesterov, maximize };
    let mut groups = vec![tensors(&params), tensors(&grads)];
    if momentum != 0.0 {
        if fresh.len() != params.len() {
            return Ok(false);
        }
        groups.push(tensors(&bufs));
    }
    let gs = &groups;
    run_all(py, gs, |i, dt| {
        let (p, g, b) = (&gs[0][i], &gs[1][i], &gs[2..].iter().map(|v| v[i].clone()).collect::<Vec<_>>());
        let fr = fresh.get(i).copied().unwrap_or(false);
        match dt {
            DType::F32 => update::<f32>(p, g, b, &|p, g, b| sgd_kernel(p, g, b.first_mut().map(|x| &mut **x), fr, &h)),
            _ => update::<f64>(p, g, b, &|p, g, b| sgd_kernel(p, g, b.first_mut().map(|x| &mut **x), fr, &h)),
        }
    })
}

/// `_core._adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr,
/// beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled) -> bool`: PyTorch's
/// Adam / AdamW step for one parameter group, in place. `steps[i]` is parameter i's
/// step count after this step; `max_exp_avg_sqs` is empty without amsgrad.
#[pyfunction]
#[pyo3(signature = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled))]
#[allow(clippy::too_many_arguments)]
fn _adam_step(
    py: Python<'_>,
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
) -> PyResult<bool> {
    if steps.len() != params.len() {
        return Ok(false);
    }
    let mut groups = vec![tensors(&params), tensors(&grads), tensors(&exp_avgs), tensors(&exp_avg_sqs)];
    if amsgrad {
        groups.push(tensors(&max_exp_avg_sqs));
    }
    let gs = &groups;
    let base = Adam { lr, beta1, beta2, eps, weight_decay, maximize, decoupled, step: 0.0 };
    run_all(py, gs, |i, dt| {
        let h = Adam { step: steps[i], ..base };
        let (p, g) = (&gs[0][i], &gs[1][i]);
        let b: Vec<Tensor> = gs[2..].iter().map(|v| v[i].clone()).collect();
        fn k<T: Float>(p: &mut [T], g: &[T], b: &mut [&mut [T]], h: &Adam) {
            let (m, rest) = b.split_first_mut().expect("exp_avg");
            let (v, rest) = rest.split_first_mut().expect("exp_avg_sq");
            adam_kernel(p, g, m, v, rest.first_mut().map(|x| &mut **x), h);
        }
        match dt {
            DType::F32 => update::<f32>(p, g, &b, &|p, g, b| k(p, g, b, &h)),
            _ => update::<f64>(p, g, &b, &|p, g, b| k(p, g, b, &h)),
        }
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sgd_step, m)?)?;
    m.add_function(wrap_pyfunction!(_adam_step, m)?)?;
    Ok(())
}
