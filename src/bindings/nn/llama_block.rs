//! `_core._llama_decode_step`: the Python entry point of `layers::llama_block` (a
//! Llama block's decode step in one call, for `candle_py.models.llama`): argument
//! checks, GIL release, errors.
use crate::bindings::errors::{detach_op, device_err, dtype_err, runtime_err, shape_err, shape_str, value_err};
use crate::bindings::quantized::PyQTensor;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::layers::llama_block::{cache_dtype_ok, DecodeBlock};
use crate::ops::quantized::QWeight;
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
use std::sync::Arc;

const OP: &str = "llama decode block";

/// A float vector of `n` elements on the CPU, as f32.
fn float_vec(name: &str, t: &Bound<'_, PyTensor>, n: Option<usize>) -> PyResult<Vec<f32>> {
    let (x, dt) = t.get().t_dt();
    if !dt.is_float() || x.rank() != 1 || n.is_some_and(|n| x.dims()[0] != n) || !x.device().is_cpu() {
        let want = n.map_or("1-D".to_string(), |n| format!("[{n}]"));
        return Err(value_err(
            OP,
            format!("expected {name} a {want} float CPU tensor, got {} {} on {:?}", dt.name(), shape_str(x.dims()), x.device()),
        ));
    }
    x.to_dtype(DType::F32).and_then(|t| t.to_vec1::<f32>()).map_err(|e| runtime_err(OP, e))
}

/// The weights' (out, in) shapes, checked to be 2-D CPU weights taking `k` inputs.
fn weights(name: &str, ws: &[Bound<'_, PyQTensor>], k: usize) -> PyResult<(Vec<Arc<QWeight>>, Vec<usize>)> {
    let mut outs = Vec::new();
    let mut arcs = Vec::new();
    for w in ws {
        let w = w.get().w.clone();
        let dims = w.q.shape().dims().to_vec();
        if dims.len() != 2 || dims[1] != k {
            return Err(shape_err(OP, format!("expected {name} weights of shape [out, {k}], got {}", shape_str(&dims))));
        }
        if !w.q.device().is_cpu() {
            return Err(device_err(OP, format!("the decode block runs on the CPU; {name} is on {:?}", w.q.device())));
        }
        outs.push(dims[0]);
        arcs.push(w);
    }
    Ok((arcs, outs))
}

/// `_llama_decode_step(x, k_cache, v_cache, pos, attn_norm, ffn_norm, qkv, o, gate_up,
/// down, heads, kv_heads, eps, inv_freq)`: one decode step of a Llama block.
///
/// x (B, 1, hidden) float32 at position `pos` of each sequence; the caches (B,
/// kv_heads, capacity, head_dim), float32 or float16, contiguous, capacity > pos, get
/// this position's keys and values. The weights: the two RMSNorm weights (hidden,),
/// the q/k/v projections (one joined QTensor or three), the output projection,
/// gate/up (one joined or two), down; the RMSNorm epsilon and the rotary speeds
/// (head_dim / 2,). Returns the block's output (B, 1, hidden). No autograd: the
/// composed block is the differentiable form.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _llama_decode_step(
    py: Python<'_>,
    x: &Bound<'_, PyTensor>,
    k_cache: &Bound<'_, PyTensor>,
    v_cache: &Bound<'_, PyTensor>,
    pos: usize,
    attn_norm: &Bound<'_, PyTensor>,
    ffn_norm: &Bound<'_, PyTensor>,
    qkv: Vec<Bound<'_, PyQTensor>>,
    o: Bound<'_, PyQTensor>,
    gate_up: Vec<Bound<'_, PyQTensor>>,
    down: Bound<'_, PyQTensor>,
    heads: usize,
    kv_heads: usize,
    eps: f64,
    inv_freq: &Bound<'_, PyTensor>,
) -> PyResult<PyTensor> {
    let blk = block(attn_norm, ffn_norm, qkv, o, gate_up, down, heads, kv_heads, eps, inv_freq)?;
    let (xv, xdt) = x.get().v_dt();
    if xv.requires_grad() && crate::autograd::mode::grad_enabled() {
        return Err(runtime_err(OP, "the fused decode step has no backward; run it under no_grad or use the composed block"));
    }
    let xd = xv.data.dims().to_vec();
    if xdt != DT::F32 || xd.len() != 3 || xd[1] != 1 || xd[2] != blk.hidden || !xv.data.device().is_cpu() {
        return Err(shape_err(
            OP,
            format!("expected x a float32 CPU tensor of shape [B, 1, {}], got {} {}", blk.hidden, xdt.name(), shape_str(&xd)),
        ));
    }
    let b = xd[0];
    let (kc, vc) = (k_cache.get().t(), v_cache.get().t());
    let want = [b, blk.kv_heads, kc.dims().get(2).copied().unwrap_or(0), blk.head_dim];
    for (name, c) in [("k_cache", &kc), ("v_cache", &vc)] {
        if c.dims() != want || !c.is_contiguous() || c.layout().start_offset() != 0 || !matches!(c.device(), Device::Cpu) {
            return Err(shape_err(
                OP,
                format!(
                    "expected {name} a contiguous CPU tensor of shape [{b}, {}, capacity, {}], got {}",
                    blk.kv_heads,
                    blk.head_dim,
                    shape_str(c.dims())
                ),
            ));
        }
        if !cache_dtype_ok(c.dtype()) || c.dtype() != kc.dtype() {
            return Err(dtype_err(
                OP,
                format!("expected float32 or float16 caches of one dtype, got {:?} and {:?}", kc.dtype(), vc.dtype()),
            ));
        }
    }
    if pos >= want[2] {
        return Err(value_err(OP, format!("position {pos} is past the cache capacity {}", want[2])));
    }
    let shared = {
        let (ks, vs) = (kc.storage_and_layout().0, vc.storage_and_layout().0);
        std::ptr::eq(&*ks, &*vs)
    };
    if shared {
        return Err(value_err(OP, "k_cache and v_cache must not share storage"));
    }
    let xs = xv.data.clone();
    let out = detach_op(py, OP, move || {
        let x = xs.flatten_all()?.to_vec1::<f32>()?;
        let y = blk.step(&x, b, &kc, &vc, pos)?;
        Tensor::from_vec(y, (b, 1, blk.hidden), &Device::Cpu)
    })?;
    for c in [k_cache, v_cache] {
        c.get().v().bump_version();
    }
    Ok(PyTensor::wrap_fresh(out))
}

/// The block's weights, checked against each other.
#[allow(clippy::too_many_arguments)]
fn block(
    attn_norm: &Bound<'_, PyTensor>,
    ffn_norm: &Bound<'_, PyTensor>,
    qkv: Vec<Bound<'_, PyQTensor>>,
    o: Bound<'_, PyQTensor>,
    gate_up: Vec<Bound<'_, PyQTensor>>,
    down: Bound<'_, PyQTensor>,
    heads: usize,
    kv_heads: usize,
    eps: f64,
    inv_freq: &Bound<'_, PyTensor>,
) -> PyResult<DecodeBlock> {
    let attn_norm = float_vec("attn_norm", attn_norm, None)?;
    let hidden = attn_norm.len();
    let ffn_norm = float_vec("ffn_norm", ffn_norm, Some(hidden))?;
    let inv_freq = float_vec("inv_freq", inv_freq, None)?;
    let head_dim = 2 * inv_freq.len();
    if heads == 0 || kv_heads == 0 || !heads.is_multiple_of(kv_heads) || head_dim == 0 {
        return Err(value_err(
            OP,
            format!("expected heads a multiple of kv_heads and a non-empty head, got {heads}, {kv_heads}, head_dim {head_dim}"),
        ));
    }
    let (qkv, outs) = weights("qkv", &qkv, hidden)?;
    let want = (heads + 2 * kv_heads) * head_dim;
    let split_ok = outs.len() == 1 || outs == [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim];
    if !matches!(outs.len(), 1 | 3) || outs.iter().sum::<usize>() != want || !split_ok {
        return Err(shape_err(
            OP,
            format!("expected q, k, v weights with {want} outputs in all (heads {heads}, kv heads {kv_heads}, head_dim {head_dim}), got {outs:?}"),
        ));
    }
    let (o, o_out) = weights("o", &[o], heads * head_dim)?;
    if o_out != [hidden] {
        return Err(shape_err(OP, format!("expected the output projection to give {hidden} features, got {}", o_out[0])));
    }
    let (gate_up, gu) = weights("gate_up", &gate_up, hidden)?;
    let total: usize = gu.iter().sum();
    if !matches!(gu.len(), 1 | 2) || !total.is_multiple_of(2) || (gu.len() == 2 && gu[0] != gu[1]) {
        return Err(shape_err(OP, format!("expected gate and up weights of equal outputs, got {gu:?}")));
    }
    let (down, d_out) = weights("down", &[down], total / 2)?;
    if d_out != [hidden] {
        return Err(shape_err(OP, format!("expected the down projection to give {hidden} features, got {}", d_out[0])));
    }
    Ok(DecodeBlock {
        hidden,
        heads,
        kv_heads,
        head_dim,
        eps: eps as f32,
        attn_norm,
        ffn_norm,
        qkv,
        o: o.into_iter().next().expect("one weight"),
        gate_up,
        down: down.into_iter().next().expect("one weight"),
        inv_freq,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_llama_decode_step, m)?)?;
    Ok(())
}
