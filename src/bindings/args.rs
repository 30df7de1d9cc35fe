//! Conversion and checking of Python arguments shared by every binding: scalars
//! and operands as PyTorch classifies them, dims, shapes, dtypes, casts.
use crate::bindings::dtype::extract_dtype;
use crate::bindings::errors::{labelled_shape_err, runtime_err, value_err, OpResult};
use crate::dtype::DT;
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

/// A Python scalar argument, classified as PyTorch classifies it for promotion.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn dt(self) -> DT {
        match self {
            Scalar::Bool(_) => DT::Bool,
            Scalar::Int(_) => DT::I64,
            Scalar::Float(_) => crate::bindings::dtype::default_float(),
        }
    }
    pub fn f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    /// A 0-d Candle tensor of `dt` holding this value.
    pub fn tensor(self, dt: DT, dev: &Device) -> PyResult<Tensor> {
        let t = match (self, dt.candle()) {
            (Scalar::Int(i), DType::I64) => Tensor::new(i, dev),
            (s, DType::F64) => Tensor::new(s.f64(), dev),
            (Scalar::Int(i), d) if !dt.is_float() => Tensor::new(i, dev).and_then(|t| t.to_dtype(d)),
            (s, d) => Tensor::new(s.f64(), dev).and_then(|t| t.to_dtype(d)),
        };
        t.op("scalar")
    }
}

pub fn extract_scalar(obj: &Bound<'_, PyAny>) -> Option<Scalar> {
    if obj.is_instance_of::<PyBool>() {
        return obj.extract::<bool>().ok().map(Scalar::Bool);
    }
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().ok().map(Scalar::Int);
    }
    if obj.is_instance_of::<PyFloat>() {
        return obj.extract::<f64>().ok().map(Scalar::Float);
    }
    // NumPy scalars: np.bool_, np.integer, np.floating.
    let ty = obj.get_type();
    let module = ty.module().ok()?;
    if module.to_cow().ok()? != "numpy" {
        return None;
    }
    let kind: String = obj.getattr("dtype").ok()?.getattr("kind").ok()?.extract().ok()?;
    match kind.as_str() {
        "b" => obj.extract::<bool>().ok().map(Scalar::Bool),
        "i" | "u" => obj.extract::<i64>().ok().map(Scalar::Int),
        "f" => obj.extract::<f64>().ok().map(Scalar::Float),
        _ => None,
    }
}

/// Normalize a possibly negative dim for a tensor of `rank` dims.
pub fn norm_dim(dim: i64, rank: usize, op: &str) -> PyResult<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(crate::bindings::errors::index_err(
            op,
            format!("Dimension out of range (expected to be in range of [{}, {}], but got {dim})", -r, r - 1),
        ));
    }
    Ok(d as usize)
}

pub fn nonneg_shape(v: &[i64], op: &str) -> PyResult<Vec<usize>> {
    let mut out = Vec::with_capacity(v.len());
    let mut total: usize = 1;
    // An empty tensor allocates nothing: its other dims need only fit in int64.
    let limit = if v.contains(&0) { i64::MAX as usize } else { 1usize << 40 };
    for &d in v {
        if d < 0 {
            return Err(value_err(op, format!("negative dimension {d} in size {v:?}")));
        }
        total = total
            .checked_mul((d as usize).max(1))
            .filter(|t| *t <= limit)
            .ok_or_else(|| value_err(op, format!("size {v:?} is too large")))?;
        out.push(d as usize);
    }
    Ok(out)
}

/// Refuse an allocation the machine cannot make, before Candle tries it: a failed
/// allocation inside Rust aborts the process. Large requests are probed with a
/// fallible reservation (untouched pages cost nothing); small ones pass through.
pub fn check_alloc(elems: usize, itemsize: usize, op: &str) -> PyResult<()> {
    let bytes = elems
        .checked_mul(itemsize)
        .ok_or_else(|| runtime_err(op, format!("can't allocate memory: {elems} elements of {itemsize} bytes overflow")))?;
    if bytes < (1 << 28) {
        return Ok(());
    }
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(bytes).map_err(|_| runtime_err(op, format!("can't allocate memory: you tried to allocate {bytes} bytes")))?;
    Ok(())
}

pub fn opt_dtype(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DT>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => extract_dtype(o).map(Some),
    }
}

/// Cast keeping the bool flag right (bool means values 0/1 in U8).
pub fn cast(t: &Tensor, from: DT, to: DT) -> PyResult<Tensor> {
    if from == to {
        return Ok(t.clone());
    }
    check_alloc(t.elem_count(), to.itemsize().max(from.itemsize()), "to")?;
    if to == DT::Bool {
        let z = t.zeros_like().op("to")?;
        return t.ne(&z).op("to");
    }
    crate::ops::cast::to_dtype(t, to.candle()).op("to")
}

/// `cast` inside the autograd graph: float-to-float conversions carry the gradient.
pub fn cast_v(v: &crate::autograd::Value, from: DT, to: DT) -> PyResult<crate::autograd::Value> {
    if from == to {
        return Ok(v.clone());
    }
    if from.is_float() && to.is_float() {
        check_alloc(v.data.elem_count(), to.itemsize().max(from.itemsize()), "to")?;
        return crate::autograd::ops::to_dtype(v, to.candle()).op("to");
    }
    Ok(crate::autograd::Value::plain(cast(&v.data, from, to)?))
}

/// One value per spatial axis (`kernel_size`, `stride`, `padding`, ...), as the
/// conv and pooling layers pass them: exactly `nd` values, each at least `min`.
/// `label` is the layer's (`"[Conv2d]"`, `"max_pool2d:"`).
pub fn per_axis(v: &[i64], nd: usize, what: &str, min: i64, label: &str) -> PyResult<Vec<usize>> {
    if v.len() != nd {
        return Err(labelled_shape_err(label, format!("expected {what} with {nd} values, got {v:?}")));
    }
    if v.iter().any(|&x| x < min) {
        return Err(labelled_shape_err(label, format!("{what} must be >= {min}, got {v:?}")));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// Up to three per-axis values right-aligned into (D, H, W), `fill` in front: the
/// kernels treat 1-d and 2-d inputs as 3-d with leading unit axes.
pub fn pad3<T: Copy>(v: &[T], fill: T) -> [T; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}
