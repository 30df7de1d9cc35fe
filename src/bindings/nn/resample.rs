//! `_core._pad_index` and `_core._interpolate`: the Python entry points of
//! `layers::resample` (`F.pad`'s reflect / replicate / circular modes and
//! `F.interpolate`'s nearest, nearest-exact, linear and cubic modes), differentiable to
//! any order: the backward is the resampling's adjoint op, whose own backward is the
//! forward again. They answer None where the kernel does not apply (a tensor off the
//! CPU or of an integer dtype, a negative padding); `F.pad` / `F.interpolate` then take
//! their index_select path. Argument checks are the Python functions'.
use crate::autograd::{ops, Value};
use crate::bindings::errors::detach_op;
use crate::bindings::tensor::PyTensor;
use crate::layers::resample::{Axis, PadMode, Resample, Spec};
use candle_core::{DType, Shape};
use pyo3::prelude::*;
use std::sync::Arc;

/// The grad_fn names of a resampling and of its backward (as PyTorch's where it has one).
type Names = (&'static str, &'static str);

macro_rules! names {
    ($s:literal) => {
        (concat!($s, "Backward0"), concat!($s, "BackwardBackward0"))
    };
}

/// `v` resampled by `spec` (`grad`: its adjoint, from an output gradient), recorded so
/// that its gradient is the other one.
fn apply(v: &Value, spec: &Arc<Spec>, grad: bool, names: Names) -> candle_core::Result<Value> {
    let dims = v.data.dims();
    let lead = dims.len() - spec.sizes.len();
    let mut shape = dims[..lead].to_vec();
    if grad {
        shape.extend(&spec.sizes);
    } else {
        shape.extend(spec.axes.iter().zip(&spec.sizes).map(|(a, &s)| a.out_size(s)));
    }
    let op = Resample { spec: spec.clone(), grad, shape: Shape::from(shape) };
    let x = ops::contiguous(v)?;
    let out = x.data.apply_op1_no_bwd(&op)?;
    let s = spec.clone();
    let name = if grad { names.1 } else { names.0 };
    Ok(ops::record(name, &[v], out, &[], false, move |_, g, _| Ok(vec![Some(apply(g, &s, !grad, names)?)])))
}

/// Runs `spec` on `input` when the kernel applies (a CPU float tensor; half types in
/// float32 and back, as PyTorch's opmath), else None.
fn resample(py: Python<'_>, input: &PyTensor, sizes_from: usize, axes: Vec<Axis>, names: Names, op: &str) -> PyResult<Option<PyTensor>> {
    let (v, dt) = input.v_dt();
    let dims = v.data.dims().to_vec();
    if !v.data.device().is_cpu() || !dt.is_float() || axes.is_empty() || axes.len() > 3 || dims.len() < sizes_from + axes.len() {
        return Ok(None);
    }
    let sizes = dims[dims.len() - axes.len()..].to_vec();
    if axes.iter().zip(&sizes).any(|(a, &s)| !a.fits(s)) {
        return Ok(None);
    }
    let planes = dims[..dims.len() - axes.len()].iter().product();
    let spec = Arc::new(Spec { planes, sizes, axes });
    let out = detach_op(py, op, || {
        let wide = matches!(v.data.dtype(), DType::F16 | DType::BF16);
        let x = if wide { ops::to_dtype(&v, DType::F32)? } else { v.clone() };
        let y = apply(&x, &spec, false, names)?;
        if wide {
            ops::to_dtype(&y, v.data.dtype())
        } else {
            Ok(y)
        }
    })?;
    Ok(Some(PyTensor::wrap_vdt(out, dt)))
}

/// `_pad_index(input, pad, mode)`: `F.pad` in "reflect", "replicate" or "circular"
/// mode (`pad` as PyTorch's: last dim first, at most 3 dims, none negative).
#[pyfunction]
fn _pad_index(py: Python<'_>, input: &Bound<'_, PyTensor>, pad: Vec<i64>, mode: &str) -> PyResult<Option<PyTensor>> {
    let pm = match mode {
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        _ => return Ok(None),
    };
    if !pad.len().is_multiple_of(2) || pad.iter().any(|&p| p < 0) {
        return Ok(None);
    }
    let d = pad.len() / 2;
    // `pad` lists the last dim first; the axes run first dim to last.
    let axes: Vec<Axis> = (0..d).rev().map(|i| Axis::Pad { left: pad[2 * i] as usize, right: pad[2 * i + 1] as usize, mode: pm }).collect();
    let names = match (pm, d) {
        (PadMode::Reflect, 1) => names!("ReflectionPad1D"),
        (PadMode::Reflect, 2) => names!("ReflectionPad2D"),
        (PadMode::Reflect, _) => names!("ReflectionPad3D"),
        (PadMode::Replicate, 1) => names!("ReplicationPad1D"),
        (PadMode::Replicate, 2) => names!("ReplicationPad2D"),
        (PadMode::Replicate, _) => names!("ReplicationPad3D"),
        (PadMode::Circular, 1) => names!("CircularPad1D"),
        (PadMode::Circular, 2) => names!("CircularPad2D"),
        (PadMode::Circular, _) => names!("CircularPad3D"),
    };
    resample(py, input.get(), 0, axes, names, "pad")
}

/// `_interpolate(input, sizes, scales, mode, align_corners)`: `F.interpolate` of an
/// (N, C, ...) input to `sizes` (one per spatial dim) in mode "nearest",
/// "nearest-exact", "linear" (any of linear / bilinear / trilinear) or "cubic"; `scales`
/// holds the user's scale factors when the sizes came from them (used for the source
/// coordinates, as PyTorch), else None.
#[pyfunction]
fn _interpolate(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    sizes: Vec<usize>,
    scales: Option<Vec<f64>>,
    mode: &str,
    align_corners: bool,
) -> PyResult<Option<PyTensor>> {
    let d = sizes.len();
    if scales.as_ref().is_some_and(|s| s.len() != d) || !(1..=3).contains(&d) {
        return Ok(None);
    }
    let axes: Vec<Axis> = (0..d)
        .map(|i| {
            let (out, scale) = (sizes[i], scales.as_ref().map(|s| s[i]));
            match mode {
                "nearest" => Some(Axis::Nearest { out, scale, exact: false }),
                "nearest-exact" => Some(Axis::Nearest { out, scale, exact: true }),
                "linear" => Some(Axis::Linear { out, scale, align_corners }),
                "cubic" => Some(Axis::Cubic { out, scale, align_corners }),
                _ => None,
            }
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    let names = match (mode, d) {
        ("nearest", 1) => names!("UpsampleNearest1D"),
        ("nearest", 2) => names!("UpsampleNearest2D"),
        ("nearest", _) => names!("UpsampleNearest3D"),
        ("nearest-exact", 1) => names!("UpsampleNearestExact1D"),
        ("nearest-exact", 2) => names!("UpsampleNearestExact2D"),
        ("nearest-exact", _) => names!("UpsampleNearestExact3D"),
        ("linear", 1) => names!("UpsampleLinear1D"),
        ("linear", 2) => names!("UpsampleBilinear2D"),
        ("linear", _) => names!("UpsampleTrilinear3D"),
        _ => names!("UpsampleBicubic2D"),
    };
    resample(py, input.get(), 2, axes, names, "interpolate")
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_pad_index, m)?)?;
    m.add_function(wrap_pyfunction!(_interpolate, m)?)?;
    Ok(())
}
