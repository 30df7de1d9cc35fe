//! Python entry points of `layers::pooling`: argument checks, GIL release, errors.
use crate::autograd::composed::Composed;
use crate::autograd::{custom, ops, Value};
use crate::bindings::args::{pad3, per_axis};
use crate::bindings::errors::{labelled_dtype_err, labelled_shape_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::layers::pooling::*;
use crate::ops::layout::Dense;
use candle_core::Shape;
use candle_core::{Device, Result, Tensor};
use pyo3::prelude::*;
use std::sync::{Arc, OnceLock};

/// The input, its dims and dtype, and its device (the result goes back there), after rank/dtype checks.
fn prepare(input: &Bound<'_, PyTensor>, nd: usize, op: &str) -> PyResult<(Value, Vec<usize>, DT, Device)> {
    let x = input.get();
    let dt = x.dt();
    if !matches!(dt, DT::F32 | DT::F64) {
        return Err(labelled_dtype_err(op, format!("expected a float32 or float64 input, got {}", dt.name())));
    }
    let t = x.v();
    let home = t.data.device().clone();
    let dims = t.data.dims().to_vec();
    if dims.len() != nd + 1 && dims.len() != nd + 2 {
        return Err(labelled_shape_err(op, format!("expected a {}-d or {}-d input, got shape {dims:?}", nd + 1, nd + 2)));
    }
    if dims[dims.len() - nd..].contains(&0) {
        return Err(labelled_shape_err(op, format!("expected non-empty spatial dims, got shape {dims:?}")));
    }
    Ok((t, dims, dt, home))
}

fn planes(dims: &[usize], nd: usize) -> usize {
    dims[..dims.len() - nd].iter().product()
}

/// PyTorch's pooling output size.
fn pool_out(n_in: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> i64 {
    let (n_in, k, s, p, d) = (n_in as i64, k as i64, s as i64, p as i64, d as i64);
    let num = n_in + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut out = num.div_euclid(s) + 1;
    if ceil && (out - 1) * s >= n_in + p {
        out -= 1;
    }
    out
}

/// Reshape a pooled (planes, D, H, W) result back to the input's leading dims, on `home`.
fn finish(y: Tensor, dims: &[usize], nd: usize, outs: [usize; 3], home: &Device) -> Result<Tensor> {
    let mut shape = dims[..dims.len() - nd].to_vec();
    shape.extend_from_slice(&outs[3 - nd..]);
    y.reshape(shape)?.to_device(home)
}

/// torch's name for the pooling node (1-D poolings run as 2-D ones there).
fn node_name(max: bool, adaptive: bool, nd: usize) -> &'static str {
    match (max, adaptive, nd == 3) {
        (true, true, true) => "AdaptiveMaxPool3DBackward0",
        (true, true, false) => "AdaptiveMaxPool2DBackward0",
        (true, false, true) => "MaxPool3DWithIndicesBackward0",
        (true, false, false) => "MaxPool2DWithIndicesBackward0",
        (false, true, true) => "AdaptiveAvgPool3DBackward0",
        (false, true, false) => "AdaptiveAvgPool2DBackward0",
        (false, false, true) => "AvgPool3DBackward0",
        (false, false, false) => "AvgPool2DBackward0",
    }
}

/// What every pooling result needs: the input (with its autograd side), its dims, dtype and device.
struct Pooled {
    /// The gathered-windows form for create_graph, where the windows are regular.
    composed: Option<Composed>,
    x: Value,
    dims: Vec<usize>,
    nd: usize,
    outs: [usize; 3],
    dt: DT,
    home: Device,
}

impl Pooled {
    /// The input as contiguous CPU planes (planes, D, H, W).
    fn planes(t: &Tensor, g: &PoolGeom) -> Result<Tensor> {
        t.to_device(&Device::Cpu)?.reshape((g.planes, g.ins[0], g.ins[1], g.ins[2]))?.dense()
    }

    /// The pooling node `op` over `x` (`g.result` set by `with_result`): the node's
    /// output is the result, so its `grad_fn` is the node, named as torch names it
    /// (`name`; a 1-D pooling, which torch runs as an unsqueezed 2-D one and squeezes,
    /// gets the 2-D name under a `SqueezeBackward1`, as in torch).
    fn fused(
        x: &Value,
        g: &PoolGeom,
        name: &'static str,
        op: custom::Op,
        composed: Option<Composed>,
        nd: usize,
        home: &Device,
    ) -> Result<Value> {
        let planes = Shape::from((g.planes, g.ins[0], g.ins[1], g.ins[2]));
        let xc = ops::contiguous(&ops::reshape(&ops::to_device(x, &Device::Cpu)?, &planes)?)?;
        let result = g.result.clone().unwrap_or_default();
        // The create_graph form computes on the planes: its result takes the same shape.
        let composed = composed.map(|f| -> Composed {
            let target = Shape::from(result.clone());
            Arc::new(move |v: &[Value]| ops::reshape(&f(v)?, &target))
        });
        let mut y = custom::apply_with(name, op, &[&xc], composed)?;
        if nd == 1 {
            y = ops::squeeze(&y, result.len() - 2)?;
        }
        ops::to_device(&y, home)
    }

    /// `g` reporting its forward result in the caller's (N, C, ...) shape (with the
    /// 2-D form's extra 1 for a 1-D pooling; see `fused`).
    fn with_result(&self, mut g: PoolGeom) -> Arc<PoolGeom> {
        let mut shape = self.dims[..self.dims.len() - self.nd].to_vec();
        if self.nd == 1 {
            shape.push(1);
        }
        shape.extend_from_slice(&self.outs[3 - self.nd..]);
        g.result = Some(shape);
        Arc::new(g)
    }

    /// Max pooling: the output in the graph, and the argmax indices when asked for.
    fn max(self, py: Python<'_>, g: PoolGeom, return_indices: bool, adaptive: bool, op: &str) -> PyResult<(PyTensor, Option<PyTensor>)> {
        let g = self.with_result(g);
        let Pooled { composed, x, dims, nd, outs, dt, home } = self;
        let (g2, dims2, home2) = (g.clone(), dims.clone(), home.clone());
        let y = crate::bindings::errors::detach(py, op, || {
            if ops::records(&[&x]) {
                // Keep the argmaxes for the backward (u32 plane offsets).
                let keep = (g.ivol() < u32::MAX as usize).then(|| Arc::new(OnceLock::new()));
                let op1 = custom::Op::one(MaxPool(g.clone(), keep));
                return Self::fused(&x, &g, node_name(true, adaptive, nd), op1, composed, nd, &home).op(op);
            }
            // Outside the graph: the forward kernel alone (no argmaxes kept).
            let p = Self::planes(&x.data, &g2).op(op)?;
            finish(p.apply_op1_no_bwd(&MaxPool(g2.clone(), None)).op(op)?, &dims2, nd, outs, &home2).map(Value::plain).op(op)
        })?;
        let idx = if return_indices {
            let i = crate::bindings::errors::detach(py, op, || {
                Self::planes(&x.data, &g)
                    .and_then(|p| p.apply_op1_no_bwd(&MaxPoolIdx(g.clone())))
                    .and_then(|i| finish(i, &dims, nd, outs, &home))
                    .op(op)
            })?;
            Some(PyTensor::wrap_dt(i, DT::I64))
        } else {
            None
        };
        Ok((PyTensor::wrap_vdt(y, dt), idx))
    }

    /// Average pooling (windows and divisors in `g`).
    fn avg(self, py: Python<'_>, g: PoolGeom, adaptive: bool, op: &str) -> PyResult<PyTensor> {
        let g = self.with_result(g);
        let Pooled { composed, x, dims, nd, outs, dt, home } = self;
        let y = crate::bindings::errors::detach(py, op, || {
            if ops::records(&[&x]) {
                let op1 = custom::Op::one(AvgPool(g.clone()));
                return Self::fused(&x, &g, node_name(false, adaptive, nd), op1, composed, nd, &home).op(op);
            }
            let p = Self::planes(&x.data, &g).op(op)?;
            finish(p.apply_op1_no_bwd(&AvgPool(g.clone())).op(op)?, &dims, nd, outs, &home).map(Value::plain).op(op)
        })?;
        Ok(PyTensor::wrap_vdt(y, dt))
    }
}

/// Per-axis (kernel, stride, padding, dilation, output size).
type Window = (usize, usize, usize, usize, usize);

/// Windowed pooling parameters shared by max and avg, checked as PyTorch checks them.
#[allow(clippy::too_many_arguments)]
fn windows(dims: &[usize], nd: usize, k: &[i64], s: &[i64], p: &[i64], d: &[i64], ceil: bool, op: &str) -> PyResult<Vec<Window>> {
    let k = per_axis(k, nd, "kernel_size", 1, op)?;
    let s = per_axis(s, nd, "stride", 1, op)?;
    let p = per_axis(p, nd, "padding", 0, op)?;
    let d = per_axis(d, nd, "dilation", 1, op)?;
    let ins = &dims[dims.len() - nd..];
    let mut out = Vec::with_capacity(nd);
    for a in 0..nd {
        if p[a] > k[a] / 2 {
            return Err(labelled_shape_err(
                op,
                format!("pad should be at most half of kernel size, but got padding={p:?} and kernel_size={k:?}"),
            ));
        }
        let o = pool_out(ins[a], k[a], s[a], p[a], d[a], ceil);
        if o < 1 {
            return Err(labelled_shape_err(op, format!(
                "kernel_size={k:?} (padding={p:?}, dilation={d:?}) is larger than the padded input: input shape {dims:?}, computed output size {o} in spatial dim {a}"
            )));
        }
        out.push((k[a], s[a], p[a], d[a], o as usize));
    }
    Ok(out)
}

fn axes3(mut v: Vec<Axis>) -> [Axis; 3] {
    while v.len() < 3 {
        v.insert(0, Axis::trivial());
    }
    let c = v.pop().unwrap_or_default();
    let b = v.pop().unwrap_or_default();
    let a = v.pop().unwrap_or_default();
    [a, b, c]
}

/// `_core._max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op)`:
/// returns the output, or (output, int64 indices into each input plane).
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op))]
#[allow(clippy::too_many_arguments)]
fn _max_pool<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyTensor>,
    kernel_size: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    ceil_mode: bool,
    return_indices: bool,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let nd = kernel_size.len();
    if !(1..=3).contains(&nd) {
        return Err(labelled_shape_err(op, format!("kernel_size must have 1, 2 or 3 values, got {kernel_size:?}")));
    }
    let (t, dims, dt, home) = prepare(input, nd, op)?;
    let win = windows(&dims, nd, &kernel_size, &stride, &padding, &dilation, ceil_mode, op)?;
    let ins = &dims[dims.len() - nd..];
    let axes: Vec<Axis> = win
        .iter()
        .zip(ins)
        .map(|(&(k, s, p, d, o), &n)| {
            let mut ax = Axis::default();
            for i in 0..o {
                // Taps start + j * d for j < k, cut to 0..n.
                let start = (i * s) as i64 - p as i64;
                let (d, n, k) = (d as i64, n as i64, k as i64);
                let j0 = if start < 0 { (-start + d - 1) / d } else { 0 };
                let j1 = if start >= n { 0 } else { ((n - 1 - start) / d + 1).min(k) };
                let count = (j1 - j0).max(0) as usize;
                let first = if count > 0 { (start + j0 * d) as usize } else { 0 };
                ax.push(Win { first, count, step: d as usize }, 1.0);
            }
            ax
        })
        .collect();
    let outs = pad3(&win.iter().map(|w| w.4).collect::<Vec<_>>(), 1);
    let g = PoolGeom::new(planes(&dims, nd), pad3(&dims[dims.len() - nd..], 1), outs, axes3(axes), None);
    let wins = win.clone();
    let composed: Composed = Arc::new(move |v: &[Value]| crate::autograd::composed::pool(&v[0], &wins, true, None));
    let (y, idx) = Pooled { composed: Some(composed), x: t, dims, nd, outs, dt, home }.max(py, g, return_indices, false, op)?;
    match idx {
        Some(i) => Ok((y, i).into_pyobject(py)?.into_any()),
        None => Ok(Bound::new(py, y)?.into_any()),
    }
}

/// `_core._avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override, op)`.
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, op))]
#[allow(clippy::too_many_arguments)]
fn _avg_pool(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    kernel_size: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
    op: &str,
) -> PyResult<PyTensor> {
    let nd = kernel_size.len();
    if !(1..=3).contains(&nd) {
        return Err(labelled_shape_err(op, format!("kernel_size must have 1, 2 or 3 values, got {kernel_size:?}")));
    }
    if divisor_override == Some(0) {
        return Err(labelled_shape_err(op, "divisor must be not zero"));
    }
    let (t, dims, dt, home) = prepare(input, nd, op)?;
    let ones = vec![1i64; nd];
    let win = windows(&dims, nd, &kernel_size, &stride, &padding, &ones, ceil_mode, op)?;
    let ins = &dims[dims.len() - nd..];
    let mut factors: Vec<Vec<f64>> = Vec::with_capacity(nd);
    let axes: Vec<Axis> = win
        .iter()
        .zip(ins)
        .map(|(&(k, s, p, _, o), &n)| {
            let mut ax = Axis::default();
            let mut fs = Vec::with_capacity(o);
            for i in 0..o {
                let start = (i * s) as i64 - p as i64;
                let end = (start + k as i64).min((n + p) as i64);
                let pool = (end - start) as f64;
                let (vs, ve) = (start.max(0) as usize, end.min(n as i64).max(0) as usize);
                let ve = ve.max(vs);
                let f = if count_include_pad { pool } else { (ve - vs) as f64 };
                ax.push_range(vs, ve, f);
                fs.push(f);
            }
            factors.push(fs);
            ax
        })
        .collect();
    let outs = pad3(&win.iter().map(|w| w.4).collect::<Vec<_>>(), 1);
    // One divisor per output position: the product of the per-axis factors, or the override.
    let mut divisors = vec![1.0f64];
    for fs in &factors {
        divisors = divisors.iter().flat_map(|d| fs.iter().map(move |f| d * f)).collect();
    }
    if let Some(d) = divisor_override {
        divisors.iter_mut().for_each(|x| *x = d as f64);
    }
    let wins = win.clone();
    let composed: Composed = Arc::new(move |v: &[Value]| crate::autograd::composed::pool(&v[0], &wins, false, Some(&divisors)));
    let g = PoolGeom::new(planes(&dims, nd), pad3(&dims[dims.len() - nd..], 1), outs, axes3(axes), divisor_override.map(|d| d as f64));
    Pooled { composed: Some(composed), x: t, dims, nd, outs, dt, home }.avg(py, g, false, op)
}

/// `_core._adaptive_pool(input, output_size, is_max, return_indices, op)`: PyTorch's
/// adaptive windows `[floor(i * In / Out), ceil((i + 1) * In / Out))`.
#[pyfunction]
#[pyo3(signature = (input, output_size, is_max, return_indices, op))]
fn _adaptive_pool<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyTensor>,
    output_size: Vec<i64>,
    is_max: bool,
    return_indices: bool,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let nd = output_size.len();
    if !(1..=3).contains(&nd) {
        return Err(labelled_shape_err(op, format!("output_size must have 1, 2 or 3 values, got {output_size:?}")));
    }
    let (t, dims, dt, home) = prepare(input, nd, op)?;
    let os = per_axis(&output_size, nd, "output_size", 1, op)?;
    // a huge output_size must raise, not abort the process on allocation
    let planes_out = dims[..dims.len() - nd].iter().chain(&os).try_fold(1usize, |a, &d| a.checked_mul(d)).unwrap_or(usize::MAX);
    crate::bindings::args::check_alloc(planes_out, dt.itemsize() * if return_indices { 3 } else { 1 }, op)?;
    let ins = &dims[dims.len() - nd..];
    let axes: Vec<Axis> = os
        .iter()
        .zip(ins)
        .map(|(&o, &n)| {
            let mut ax = Axis::default();
            for i in 0..o {
                let (s, e) = (i * n / o, ((i + 1) * n).div_ceil(o));
                ax.push_range(s, e, (e - s) as f64);
            }
            ax
        })
        .collect();
    let outs = pad3(&os, 1);
    let g = PoolGeom::new(planes(&dims, nd), pad3(&dims[dims.len() - nd..], 1), outs, axes3(axes), None);
    // Adaptive windows are irregular: no gathered-windows form (create_graph raises).
    let p = Pooled { composed: None, x: t, dims, nd, outs, dt, home };
    if is_max {
        let (y, idx) = p.max(py, g, return_indices, true, op)?;
        return match idx {
            Some(i) => Ok((y, i).into_pyobject(py)?.into_any()),
            None => Ok(Bound::new(py, y)?.into_any()),
        };
    }
    Ok(Bound::new(py, p.avg(py, g, true, op)?)?.into_any())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_max_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_avg_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_adaptive_pool, m)?)?;
    Ok(())
}
