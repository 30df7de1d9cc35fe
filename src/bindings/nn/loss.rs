//! Python entry points of `layers::loss`: `F.cross_entropy` and `F.nll_loss` call
//! these and nothing else. Argument checks and errors are here; the math is the
//! fused one-pass op for CPU logits and `layers::loss`'s tensor-op form elsewhere.
use crate::autograd::{composed, custom, ops, Value};
use crate::bindings::errors::{detach_op, dtype_err, index_err, shape_err, shape_str, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::layers::loss::*;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;
use std::sync::Arc;

fn reduction_of(op: &str, r: &str) -> PyResult<Reduction> {
    match r {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        _ => Err(value_err(op, format!("reduction must be 'mean', 'sum' or 'none', got '{r}'"))),
    }
}

/// The class weights as a float tensor of shape [C] (host copy for the kernels too).
fn class_weight(op: &str, weight: Option<&Bound<'_, PyTensor>>, c: usize) -> PyResult<Option<(Tensor, Vec<f64>)>> {
    let Some(w) = weight else { return Ok(None) };
    let w = w.get().t();
    if w.dims() != [c] {
        return Err(shape_err(
            op,
            format!(
                "weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {}",
                shape_str(w.dims())
            ),
        ));
    }
    let host = w.to_dtype(DType::F64).and_then(|w| w.to_vec1::<f64>()).op(op)?;
    Ok(Some((w, host)))
}

/// Row targets from an integer `target` for `rows` predictions of `c` classes:
/// `None` where the target is `ignore_index`; out-of-range classes raise IndexError.
fn class_targets(op: &str, input: &[usize], target: &PyTensor, rows: usize, c: usize, ignore_index: i64) -> PyResult<Vec<Option<usize>>> {
    let t = target.t();
    if t.dtype().is_float() || target.is_bool {
        return Err(type_err(op, format!("expected target of an integer dtype (class indices), got {}", target.dt().name())));
    }
    if t.elem_count() != rows {
        return Err(shape_err(
            op,
            format!("expected target of {rows} elements for input {}, got {}", shape_str(input), shape_str(t.dims())),
        ));
    }
    let ti = t.flatten_all().and_then(|t| t.to_dtype(DType::I64)).and_then(|t| t.to_vec1::<i64>()).op(op)?;
    ti.into_iter()
        .map(|v| match v {
            v if v == ignore_index => Ok(None),
            v if v < 0 || v as usize >= c => Err(index_err(op, format!("target {v} is out of bounds for {c} classes"))),
            v => Ok(Some(v as usize)),
        })
        .collect()
}

/// Rows and classes of `x` (class dim 1, or 0 for a 1-D input) and the shape of "none"'s result.
fn rows_of(op: &str, x: &Tensor) -> PyResult<(usize, usize, Vec<usize>)> {
    let d = x.dims();
    match d.len() {
        0 => Err(shape_err(op, "expected an input of at least 1 dimension (C,), got a 0-d tensor")),
        1 => Ok((1, d[0], vec![])),
        _ => {
            let c = d[1];
            let mut out = vec![d[0]];
            out.extend_from_slice(&d[2..]);
            Ok((out.iter().product(), c, out))
        }
    }
}

/// The loss spec for class-index targets (checked) and the class weights as a tensor.
fn index_spec(
    op: &str,
    x: &Tensor,
    (rows, c): (usize, usize),
    target: &PyTensor,
    weight: Option<(Tensor, Vec<f64>)>,
    ignore_index: i64,
    reduction: Reduction,
    smoothing: f64,
) -> PyResult<(Spec, Option<Tensor>)> {
    let targets = class_targets(op, x.dims(), target, rows, c, ignore_index)?;
    let (w_t, w_host) = weight.map_or((None, None), |(t, h)| (Some(t), Some(h)));
    Ok((Spec { n: rows, c, target: targets, weight: w_host, reduction, smoothing }, w_t))
}

/// `_core._cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)`:
/// `F.cross_entropy` from logits (N, C, d1, ...) or (C,), with class indices or class
/// probabilities (float, the input's shape) as target.
#[pyfunction]
#[pyo3(signature = (input, target, weight, ignore_index, reduction, label_smoothing))]
fn _cross_entropy(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    target: &Bound<'_, PyTensor>,
    weight: Option<&Bound<'_, PyTensor>>,
    ignore_index: i64,
    reduction: &str,
    label_smoothing: f64,
) -> PyResult<PyTensor> {
    const OP: &str = "cross_entropy";
    let (xv, dt) = input.get().v_dt();
    let x = xv.data.clone();
    if !dt.is_float() {
        return Err(dtype_err(OP, format!("expected floating point logits, got {}", dt.name())));
    }
    let reduction = reduction_of(OP, reduction)?;
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(value_err(OP, format!("label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")));
    }
    let (rows, c, out) = rows_of(OP, &x)?;
    let weight = class_weight(OP, weight, c)?;
    let tg = target.get();
    if tg.dt().is_float() {
        let t = tg.t();
        if t.dims() != x.dims() {
            return Err(shape_err(
                OP,
                format!("target size {} must be the same as input size {}", shape_str(t.dims()), shape_str(x.dims())),
            ));
        }
        let class_dim = usize::from(x.rank() > 1);
        let tv = tg.v();
        let w = weight.map(|w| w.0);
        let wc = w.clone();
        let composed: composed::Composed = Arc::new(move |a: &[Value]| {
            composed::soft_target(&ops::softmax(&a[0], class_dim, true)?, &a[1], wc.as_ref(), class_dim, label_smoothing, reduction)
        });
        let y = detach_op(py, OP, || {
            custom::fused_or(
                "SoftTargetCrossEntropyBackward0",
                None,
                &[&xv, &tv],
                move |a| {
                    let logp = crate::ops::softmax::softmax(&a[0], class_dim, true)?;
                    soft_target_loss(&logp, &a[1], w.as_ref(), class_dim, label_smoothing, reduction)
                },
                composed,
            )
        })?;
        return Ok(PyTensor::wrap_vdt(y, dt));
    }
    let (spec, w_t) = index_spec(OP, &x, (rows, c), tg, weight, ignore_index, reduction, label_smoothing)?;
    let spec = Arc::new(spec);
    let composed = {
        let (spec, w_t, out) = (spec.clone(), w_t.clone(), out.clone());
        Arc::new(move |a: &[Value]| -> candle_core::Result<Value> {
            let logp = ops::softmax(&composed::class_rows(&a[0])?, 1, true)?;
            composed::nll_rows(&logp, &spec, w_t.as_ref(), &out)
        })
    };
    let y = detach_op(py, OP, || {
        if x.device().is_cpu() {
            // CPU: the fused one-pass op (half types computed in float32, as torch's opmath).
            let x2 = composed::class_rows(&xv)?;
            let wide = if matches!(x.dtype(), DType::F32 | DType::F64) { x2 } else { ops::to_dtype(&x2, DType::F32)? };
            let y = custom::apply_with(
                "NllLossBackward0",
                custom::Op::one(CrossEntropy::new(spec.clone())),
                &[&ops::contiguous(&wide)?],
                Some(composed),
            )?;
            let y = ops::to_dtype(&y, x.dtype())?;
            return if reduction == Reduction::None { ops::reshape(&y, &candle_core::Shape::from(out.clone())) } else { Ok(y) };
        }
        // Off the CPU: log_softmax and the gather-based loss, as device ops.
        custom::fused_or(
            "NllLossBackward0",
            None,
            &[&xv],
            move |a| {
                let logp = crate::ops::softmax::softmax(&class_rows(&a[0])?, 1, true)?;
                nll_rows(&logp, &spec, w_t.as_ref(), &out)
            },
            composed,
        )
    })?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

/// `_core._nll_loss(input, target, weight, ignore_index, reduction)`: `F.nll_loss` from
/// log-probabilities (N, C, d1, ...) or (C,) and class indices.
#[pyfunction]
#[pyo3(signature = (input, target, weight, ignore_index, reduction))]
fn _nll_loss(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    target: &Bound<'_, PyTensor>,
    weight: Option<&Bound<'_, PyTensor>>,
    ignore_index: i64,
    reduction: &str,
) -> PyResult<PyTensor> {
    const OP: &str = "nll_loss";
    let (xv, dt) = input.get().v_dt();
    let x = xv.data.clone();
    if !dt.is_float() {
        return Err(dtype_err(OP, format!("expected floating point log-probabilities, got {}", dt.name())));
    }
    let reduction = reduction_of(OP, reduction)?;
    let (rows, c, out) = rows_of(OP, &x)?;
    let weight = class_weight(OP, weight, c)?;
    let (spec, w_t) = index_spec(OP, &x, (rows, c), target.get(), weight, ignore_index, reduction, 0.0)?;
    let spec = Arc::new(spec);
    let composed = {
        let (spec, w_t, out) = (spec.clone(), w_t.clone(), out.clone());
        Arc::new(move |a: &[Value]| composed::nll_rows(&composed::class_rows(&a[0])?, &spec, w_t.as_ref(), &out))
    };
    let y = detach_op(py, OP, || {
        if x.device().is_cpu() {
            // CPU: the fused op (`layers::nll`; half types in float32, as torch's opmath).
            let x2 = composed::class_rows(&xv)?;
            let wide = if matches!(x.dtype(), DType::F32 | DType::F64) { x2 } else { ops::to_dtype(&x2, DType::F32)? };
            let none = reduction == Reduction::None;
            let y = custom::apply_with(
                "NllLossBackward0",
                custom::Op::one(crate::layers::nll::Nll(spec.clone())),
                &[&ops::contiguous(&wide)?],
                Some(composed),
            )?;
            let y = ops::to_dtype(&y, x.dtype())?;
            return if none { ops::reshape(&y, &candle_core::Shape::from(out.clone())) } else { Ok(y) };
        }
        custom::fused_or(
            "NllLossBackward0",
            None,
            &[&xv],
            move |a| class_rows(&a[0]).and_then(|x2| nll_rows(&x2, &spec, w_t.as_ref(), &out)),
            composed,
        )
    })?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

/// `_core._point_loss(op, input, target, reduction, weight=None, pos_weight=None, beta=1.0,
/// log_target=False)`: the elementwise losses of `layers::loss_elementwise` — `op` is
/// mse_loss, l1_loss, smooth_l1_loss (beta), binary_cross_entropy,
/// binary_cross_entropy_with_logits (pos_weight) or kl_div (log_target; reduction
/// may be "batchmean"). `weight` rescales each element's loss.
#[pyfunction]
#[pyo3(signature = (op, input, target, reduction, weight=None, pos_weight=None, beta=1.0, log_target=false))]
#[allow(clippy::too_many_arguments)]
fn _point_loss(
    py: Python<'_>,
    op: &str,
    input: &Bound<'_, PyTensor>,
    target: &Bound<'_, PyTensor>,
    reduction: &str,
    weight: Option<&Bound<'_, PyTensor>>,
    pos_weight: Option<&Bound<'_, PyTensor>>,
    beta: f64,
    log_target: bool,
) -> PyResult<PyTensor> {
    use crate::layers::loss_elementwise::{point_loss, PointLoss, Reduce};
    let kind = match op {
        "mse_loss" => PointLoss::Mse,
        "l1_loss" => PointLoss::L1,
        "smooth_l1_loss" if beta < 0.0 => return Err(value_err(op, format!("beta must be non-negative, got {beta}"))),
        "smooth_l1_loss" => PointLoss::SmoothL1 { beta },
        "binary_cross_entropy" => PointLoss::Bce,
        "binary_cross_entropy_with_logits" => PointLoss::BceWithLogits,
        "kl_div" => PointLoss::KlDiv { log_target },
        _ => return Err(value_err("_point_loss", format!("unknown loss {op:?}"))),
    };
    let op = kind.name();
    let reduce = match (reduction, kind) {
        ("none", _) => Reduce::None,
        ("sum", _) => Reduce::Sum,
        ("mean", _) => Reduce::Mean,
        ("batchmean", PointLoss::KlDiv { .. }) => Reduce::BatchMean,
        _ => return Err(value_err(op, format!("reduction must be 'mean', 'sum' or 'none', got '{reduction}'"))),
    };
    let (xv, dt) = input.get().v_dt();
    let tv = target.get().v();
    let (x, t) = (xv.data.clone(), tv.data.clone());
    crate::bindings::errors::require_float(op, dt)?;
    if t.dims() != x.dims() {
        return Err(shape_err(op, format!("target size {} must be the same as input size {}", shape_str(t.dims()), shape_str(x.dims()))));
    }
    let (w, pw) = (weight.map(|w| w.get().t()), pos_weight.map(|w| w.get().t()));
    crate::bindings::errors::same_device(op, [&x, &t].into_iter().chain(w.as_ref()).chain(pw.as_ref()))?;
    let (wc, pwc) = (w.clone(), pw.clone());
    let composed: composed::Composed =
        Arc::new(move |a: &[Value]| composed::point_loss(kind, &a[0], &a[1], wc.as_ref(), pwc.as_ref(), reduce));
    // BCE on the CPU: one fused op (forward and backward) when the target needs no
    // gradient (the fused backward gives the input's only).
    let kernel = match kind {
        PointLoss::Bce if !tv.requires_grad() => {
            crate::layers::loss_elementwise::bce_kernel(&x, &t, w.is_some(), reduce).map(custom::Op::two)
        }
        _ => None,
    };
    let name = if kernel.is_some() { "BinaryCrossEntropyBackward0" } else { "PointLossBackward0" };
    let y = detach_op(py, op, || {
        // In the graph, the composed form's nodes are the backward.
        custom::fused_or(name, kernel, &[&xv, &tv], move |a| point_loss(kind, &a[0], &a[1], w.as_ref(), pw.as_ref(), reduce), composed)
    })?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

/// `_core._ctc_loss(log_probs, targets, input_lengths, blank, zero_infinity)`: each
/// sample's CTC negative log-likelihood (N,) from log-probabilities (T, N, C);
/// `targets[n]` is sample n's label list. `F.ctc_loss` reduces it.
#[pyfunction]
#[pyo3(signature = (log_probs, targets, input_lengths, blank, zero_infinity))]
fn _ctc_loss(
    py: Python<'_>,
    log_probs: &Bound<'_, PyTensor>,
    targets: Vec<Vec<i64>>,
    input_lengths: Vec<i64>,
    blank: i64,
    zero_infinity: bool,
) -> PyResult<PyTensor> {
    const OP: &str = "ctc_loss";
    let (xv, dt) = log_probs.get().v_dt();
    if !matches!(dt.candle(), DType::F32 | DType::F64) {
        return Err(dtype_err(OP, format!("expected float32 or float64 log_probs, got {}", dt.name())));
    }
    if !xv.data.device().is_cpu() {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "{OP}: only CPU tensors are supported; move log_probs to the CPU (device {:?})",
            xv.data.device().location()
        )));
    }
    let (steps, batch, classes) = match xv.data.dims() {
        [t, n, c] => (*t, *n, *c),
        d => return Err(shape_err(OP, format!("expected log_probs of shape (T, N, C), got {}", shape_str(d)))),
    };
    if targets.len() != batch || input_lengths.len() != batch {
        return Err(shape_err(
            OP,
            format!(
                "expected {batch} targets and input lengths for log_probs of shape {}, got {} and {}",
                shape_str(xv.data.dims()),
                targets.len(),
                input_lengths.len()
            ),
        ));
    }
    if blank < 0 || blank as usize >= classes {
        return Err(value_err(OP, format!("blank must be in label range [0, {classes}), got {blank}")));
    }
    let mut lengths = Vec::with_capacity(batch);
    for (n, &len) in input_lengths.iter().enumerate() {
        if len < 0 || len as usize > steps {
            return Err(value_err(OP, format!("Expected input_lengths to have value at most {steps}, but got value {len} (sample {n})")));
        }
        lengths.push(len as usize);
    }
    let mut labels = Vec::with_capacity(batch);
    for (n, tgt) in targets.iter().enumerate() {
        let mut row = Vec::with_capacity(tgt.len());
        for &l in tgt {
            if l < 0 || l as usize >= classes || l == blank {
                return Err(index_err(
                    OP,
                    format!("target label {l} of sample {n} is out of range [0, {classes}) or equal to blank ({blank})"),
                ));
            }
            row.push(l as usize);
        }
        labels.push(row);
    }
    let op = crate::layers::ctc::CtcLoss { targets: labels, input_lengths: lengths, blank: blank as usize, zero_infinity };
    // The recursion has no composed form: double backward through it raises.
    let y = detach_op(py, OP, || custom::apply("CtcLossBackward0", custom::Op::one(op), &[&ops::contiguous(&xv)?]))?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_ctc_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_point_loss, m)?)?;
    m.add_function(wrap_pyfunction!(_cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(_nll_loss, m)?)?;
    Ok(())
}
