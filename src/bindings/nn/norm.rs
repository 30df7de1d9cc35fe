//! Python entry points of `layers::norm`: argument checks, GIL release, errors.
use crate::autograd::{ops, Value};
use crate::bindings::errors::{shape_err, shape_str, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::layers::norm::{batch_norm, group_norm, layer_norm, rms_norm};
use candle_core::Shape;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;
use std::sync::Arc;

/// `_layer_norm(x, weight, bias, d, eps)`: normalize over the last `d` elements.
#[pyfunction]
fn _layer_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: &Bound<'_, PyTensor>,
    d: usize,
    eps: f64,
) -> PyResult<PyTensor> {
    let (xv, dt) = x.get().v_dt();
    let xt = xv.data.clone();
    let (wv, bv) = (weight.get().v(), bias.get().v());
    let (w, b) = (wv.data.clone(), bv.data.clone());
    if w.elem_count() != d || b.elem_count() != d || (d > 0 && xt.elem_count() % d != 0) {
        return Err(shape_err(
            "layer_norm",
            format!("weight {:?} / bias {:?} do not fit the last {d} elements of input {:?}", w.dims(), b.dims(), xt.dims()),
        ));
    }
    let k = crate::layers::norm::layer_norm_kernel(&xt, &w, &b, d, eps).map(crate::autograd::custom::Op::three);
    let out = crate::bindings::errors::detach_op(py, "layer_norm", || {
        let (wf, bf) = (ops::reshape(&wv, &Shape::from(d))?, ops::reshape(&bv, &Shape::from(d))?);
        crate::autograd::custom::fused_or(
            "NativeLayerNormBackward0",
            k,
            &[&xv, &wf, &bf],
            move |t| layer_norm(&t[0], &t[1], &t[2], d, eps),
            Arc::new(move |t: &[Value]| crate::autograd::composed::layer_norm(&t[0], &t[1], &t[2], d, eps)),
        )
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// `_batch_norm(x, weight, bias, mean, var, batch_stats, eps) -> y` over dim 1 of (N, C, ...).
/// With `batch_stats` the gradient also flows through the statistics (training).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _batch_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: &Bound<'_, PyTensor>,
    mean: &Bound<'_, PyTensor>,
    var: &Bound<'_, PyTensor>,
    batch_stats: bool,
    eps: f64,
) -> PyResult<PyTensor> {
    let (xt, dt) = x.get().t_dt();
    if xt.rank() < 2 {
        return Err(shape_err("batch_norm", format!("expected (N, C, ...) input, got {:?}", xt.dims())));
    }
    let c = xt.dims()[1];
    let (w, b) = (weight.get().t(), bias.get().t());
    let (mt, vt) = (mean.get().t(), var.get().t());
    let (xv, wv, bv) = (x.get().v(), weight.get().v(), bias.get().v());
    if mt.elem_count() != c || vt.elem_count() != c {
        return Err(shape_err("batch_norm", format!("statistics of {} channels for input {:?}", mt.elem_count(), xt.dims())));
    }
    let k = crate::layers::norm::batch_norm_kernel(&xt, &w, &b, &mt, &vt, batch_stats, eps)
        .op("batch_norm")?
        .map(crate::autograd::custom::Op::three);
    let (mc, vc) = (mt.clone(), vt.clone());
    let out = crate::bindings::errors::detach_op(py, "batch_norm", || {
        crate::autograd::custom::fused_or(
            "NativeBatchNormBackward0",
            k,
            &[&xv, &wv, &bv],
            move |t| batch_norm(&t[0], &t[1], &t[2], &mt, &vt, batch_stats, eps),
            Arc::new(move |t: &[Value]| crate::autograd::composed::batch_norm(&t[0], &t[1], &t[2], &mc, &vc, batch_stats, eps)),
        )
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// `_batch_norm_stats(x) -> (mean, var)`: per-channel mean and biased variance over
/// every dim but 1 of a CPU float32/float64 (N, C, ...) tensor, one pass; `None`
/// where the caller computes them from tensor ops (other devices and dtypes).
#[pyfunction]
fn _batch_norm_stats(py: Python<'_>, x: &Bound<'_, PyTensor>) -> PyResult<Option<(PyTensor, PyTensor)>> {
    use crate::ops::layout::Dense;
    let (xt, dt) = x.get().t_dt();
    if xt.rank() < 2 || !xt.device().is_cpu() || !matches!(dt, DT::F32 | DT::F64) {
        return Ok(None);
    }
    let (c, s) = (xt.dims()[1], xt.dims()[2..].iter().product::<usize>());
    let out = crate::bindings::errors::detach_op(py, "batch_norm", || {
        let d = xt.dense()?;
        let (st, l) = d.storage_and_layout();
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("batch_norm: expected a dense input") };
        let (mean, var) = match &*st {
            candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => crate::layers::norm::channel_moments(&v[a..b], c, s),
            candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => crate::layers::norm::channel_moments(&v[a..b], c, s),
            _ => candle_core::bail!("batch_norm: expected float32 or float64"),
        };
        let dev = candle_core::Device::Cpu;
        Ok((Tensor::from_vec(mean, c, &dev)?.to_dtype(dt.candle())?, Tensor::from_vec(var, c, &dev)?.to_dtype(dt.candle())?))
    })?;
    Ok(Some((PyTensor::wrap_dt(out.0, dt), PyTensor::wrap_dt(out.1, dt))))
}

/// `_group_norm(x, num_groups, weight=None, bias=None, eps=1e-5)` over (N, C, ...).
#[pyfunction]
#[pyo3(signature = (x, num_groups, weight=None, bias=None, eps=1e-5))]
fn _group_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    num_groups: i64,
    weight: Option<&Bound<'_, PyTensor>>,
    bias: Option<&Bound<'_, PyTensor>>,
    eps: f64,
) -> PyResult<PyTensor> {
    const OP: &str = "group_norm";
    let (xt, dt) = x.get().t_dt();
    crate::bindings::errors::require_float(OP, dt)?;
    if xt.rank() < 2 {
        return Err(shape_err(OP, format!("expected an input of at least 2 dims (N, C, ...), got {}", shape_str(xt.dims()))));
    }
    let c = xt.dims()[1];
    if num_groups <= 0 || c % num_groups as usize != 0 {
        return Err(shape_err(OP, format!("num_channels ({c}) must be divisible by num_groups ({num_groups})")));
    }
    let (w, b) = (weight.map(|w| w.get().t()), bias.map(|b| b.get().t()));
    let mut ins = vec![x.get().v()];
    ins.extend(weight.map(|w| w.get().v()));
    ins.extend(bias.map(|b| b.get().v()));
    let (has_w, has_b) = (w.is_some(), b.is_some());
    for (name, t) in [("weight", &w), ("bias", &b)] {
        if let Some(t) = t {
            if t.elem_count() != c {
                return Err(shape_err(
                    OP,
                    format!("expected {name} of {c} elements for input {}, got {}", shape_str(xt.dims()), shape_str(t.dims())),
                ));
            }
        }
    }
    let refs: Vec<&Value> = ins.iter().collect();
    let out = crate::bindings::errors::detach_op(py, OP, || {
        if !ops::records(&refs) {
            let t: Vec<&candle_core::Tensor> = refs.iter().map(|v| &v.data).collect();
            let w = has_w.then(|| t[1]);
            let b = has_b.then(|| t[if has_w { 2 } else { 1 }]);
            return group_norm(t[0], num_groups as usize, w, b, eps).map(Value::plain);
        }
        // In the graph on the CPU (float32/float64): the fused group-norm node, its
        // weight and bias ones and zeros when absent (they get no gradient).
        let x = &ins[0];
        let one = |fill: f64| -> candle_core::Result<Value> {
            Ok(Value::plain(candle_core::Tensor::full(fill, c, x.data.device())?.to_dtype(x.data.dtype())?))
        };
        let wv = if has_w { ops::to_dtype(&ins[1], x.data.dtype())? } else { one(1.0)? };
        let bv = if has_b { ops::to_dtype(&ins[if has_w { 2 } else { 1 }], x.data.dtype())? } else { one(0.0)? };
        if let Some(k) = crate::layers::norm::group_norm_kernel(&x.data, &wv.data, &bv.data, num_groups as usize, eps) {
            let composed: crate::autograd::composed::Composed = Arc::new(move |t: &[Value]| {
                let mut alt = vec![t[0].clone()];
                if has_w {
                    alt.push(t[1].clone());
                }
                if has_b {
                    alt.push(t[2].clone());
                }
                group_norm_composed(&alt, num_groups as usize, has_w, has_b, eps)
            });
            let cont = [ops::contiguous(x)?, wv, bv];
            return crate::autograd::custom::apply_with(
                "NativeGroupNormBackward0",
                crate::autograd::custom::Op::three(k),
                &[&cont[0], &cont[1], &cont[2]],
                Some(composed),
            );
        }
        group_norm_composed(&ins, num_groups as usize, has_w, has_b, eps)
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

/// Group norm from recorded ops: the layer-norm node on rows of (N * G, C / G *
/// spatial), then the per-channel scale and shift as arithmetic nodes. `ins` holds
/// the input, then the weight and bias where given.
fn group_norm_composed(ins: &[Value], num_groups: usize, has_w: bool, has_b: bool, eps: f64) -> candle_core::Result<Value> {
    {
        let x = &ins[0];
        let c = x.data.dims()[1];
        let dims = x.data.dims().to_vec();
        let mut y = if x.data.elem_count() == 0 {
            x.clone()
        } else {
            let d = x.data.elem_count() / (dims[0] * num_groups);
            let x2 = ops::reshape(x, &Shape::from((x.data.elem_count() / d, d)))?;
            let ones = Value::plain(candle_core::Tensor::ones(d, x.data.dtype(), x.data.device())?);
            let zeros = Value::plain(candle_core::Tensor::zeros(d, x.data.dtype(), x.data.device())?);
            let k =
                crate::layers::norm::layer_norm_kernel(&x2.data, &ones.data, &zeros.data, d, eps).map(crate::autograd::custom::Op::three);
            let ln = crate::autograd::custom::fused_or(
                "NativeGroupNormBackward0",
                k,
                &[&x2, &ones, &zeros],
                move |t| layer_norm(&t[0], &t[1], &t[2], d, eps),
                Arc::new(move |t: &[Value]| crate::autograd::composed::layer_norm(&t[0], &t[1], &t[2], d, eps)),
            )?;
            ops::reshape(&ln, &Shape::from(dims.clone()))?
        };
        let mut shape = vec![1; dims.len()];
        shape[1] = c;
        let per_channel = |v: &Value| ops::reshape(&ops::to_dtype(v, x.data.dtype())?, &Shape::from(shape.clone()));
        if has_w {
            y = ops::mul(&y, &per_channel(&ins[1])?)?;
        }
        if has_b {
            y = ops::add(&y, &per_channel(&ins[if has_w { 2 } else { 1 }])?)?;
        }
        Ok(y)
    }
}

/// `_rms_norm(x, d, weight=None, eps=None)`: over the last `d` elements; `eps` defaults
/// to the machine epsilon of the input's dtype (as PyTorch).
#[pyfunction]
#[pyo3(signature = (x, d, weight=None, eps=None))]
fn _rms_norm(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    d: usize,
    weight: Option<&Bound<'_, PyTensor>>,
    eps: Option<f64>,
) -> PyResult<PyTensor> {
    const OP: &str = "rms_norm";
    let (xt, dt) = x.get().t_dt();
    crate::bindings::errors::require_float(OP, dt)?;
    let w = weight.map(|w| w.get().t());
    let mut ins = vec![x.get().v()];
    ins.extend(weight.map(|w| w.get().v()));
    let has_w = w.is_some();
    if (d == 0 && xt.elem_count() > 0) || (d > 0 && xt.elem_count() % d != 0) || w.as_ref().is_some_and(|w| w.elem_count() != d) {
        let ws = w.as_ref().map_or(String::new(), |w| format!(" and weight {}", shape_str(w.dims())));
        return Err(shape_err(OP, format!("the last {d} elements of input {}{ws} do not fit", shape_str(xt.dims()))));
    }
    let eps = eps.unwrap_or(match xt.dtype() {
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        DType::F32 => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    });
    let refs: Vec<&Value> = ins.iter().collect();
    let composed: crate::autograd::composed::Composed =
        Arc::new(move |t: &[Value]| crate::autograd::composed::rms_norm(&t[0], d, has_w.then(|| &t[1]), eps));
    let out = crate::bindings::errors::detach_op(py, OP, || {
        // In the graph, the composed form's nodes are the backward.
        crate::autograd::custom::fused_or("RmsNormBackward0", None, &refs, move |t| rms_norm(&t[0], d, has_w.then(|| &t[1]), eps), composed)
    })?;
    Ok(PyTensor::wrap_vdt(out, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_group_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_rms_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_layer_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_batch_norm, m)?)?;
    m.add_function(wrap_pyfunction!(_batch_norm_stats, m)?)?;
    Ok(())
}
