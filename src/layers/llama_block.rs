//! One decode step of a pre-norm Llama decoder block with quantized projections, in
//! one call: `x + attn(rms(x))`, then `x + mlp(rms(x))`, for one new position per
//! sequence.
//!
//! Why fused: in a decode step every op is small (a 576-wide row), so composing the
//! block from ~25 tensor ops made Python and per-op costs (allocation, dispatch,
//! argument checks) a quarter of the step. Here the step works on plain slices:
//! RMSNorm, the quantized projections (`QWeight::matmul_rows`, our kernels), the
//! rotary embedding of the position (adjacent pairs: GGUF's permuted Q/K rows), the
//! cache write, `attention::decode` over the cache (float32 or float16), SwiGLU and
//! both residual adds. The composed block (`models.llama` in Python) stays the
//! reference and the path for prefill, gradients and hooks; the tests compare them.

use super::attention::decode::{decode_attention, DecodeGeo};
use crate::ops::float::Float;
use crate::ops::quantized::QWeight;
use candle_core::{CpuStorage, DType, Device, Result, Storage, Tensor};
use half::f16;
use std::sync::Arc;

/// A block's weights and shapes.
pub(crate) struct DecodeBlock {
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) eps: f32,
    pub(crate) attn_norm: Vec<f32>,
    pub(crate) ffn_norm: Vec<f32>,
    /// q, k and v: one weight with their rows joined, or three.
    pub(crate) qkv: Vec<Arc<QWeight>>,
    pub(crate) o: Arc<QWeight>,
    /// gate and up: one joined weight, or two.
    pub(crate) gate_up: Vec<Arc<QWeight>>,
    pub(crate) down: Arc<QWeight>,
    /// Per-pair angular speeds of the rotary embedding (head_dim / 2).
    pub(crate) inv_freq: Vec<f32>,
}

impl DecodeBlock {
    /// `x` (b, hidden) at position `pos` of every sequence -> the block's output (b,
    /// hidden). Writes the position's keys and values into the caches `kc`, `vc`
    /// ((b, kv_heads, capacity, head_dim), contiguous, float32 or float16, on the CPU;
    /// the binding checks all of this) at `pos`, and attends positions 0..=pos.
    pub(crate) fn step(&self, x: &[f32], b: usize, kc: &Tensor, vc: &Tensor, pos: usize) -> Result<Vec<f32>> {
        let (h, d) = (self.hidden, self.head_dim);
        if b == 0 {
            return Ok(Vec::new()); // no sequences: nothing to write or attend
        }
        let (nq, nkv) = (self.heads * d, self.kv_heads * d);
        let normed = rms_norm(x, &self.attn_norm, self.eps);
        let qkv = project(&self.qkv, &normed, b)?;
        let (mut q, mut k, mut v) = (Vec::with_capacity(b * nq), Vec::with_capacity(b * nkv), Vec::with_capacity(b * nkv));
        for row in qkv.chunks_exact(nq + 2 * nkv) {
            q.extend_from_slice(&row[..nq]);
            k.extend_from_slice(&row[nq..nq + nkv]);
            v.extend_from_slice(&row[nq + nkv..]);
        }
        let angles: Vec<(f32, f32)> = self.inv_freq.iter().map(|&f| ((pos as f32 * f).cos(), (pos as f32 * f).sin())).collect();
        self.rotate(&mut q, &angles);
        self.rotate(&mut k, &angles);
        // (b, kv_heads, 1, d) rows into the caches at `pos`.
        let shape = (b, self.kv_heads, 1, d);
        kc.slice_set(&Tensor::from_vec(k, shape, &Device::Cpu)?.to_dtype(kc.dtype())?, 2, pos)?;
        vc.slice_set(&Tensor::from_vec(v, shape, &Device::Cpu)?.to_dtype(vc.dtype())?, 2, pos)?;
        let cap = kc.dims()[2];
        let g = DecodeGeo { b, hq: self.heads, hkv: self.kv_heads, d, cap, len: pos + 1 };
        let scale = 1.0 / (d as f32).sqrt();
        let att = {
            let (ks, kl) = kc.storage_and_layout();
            let (vs, vl) = vc.storage_and_layout();
            match (&*ks, &*vs) {
                (Storage::Cpu(CpuStorage::F32(k)), Storage::Cpu(CpuStorage::F32(v))) => {
                    decode_attention(g, &q, &k[kl.start_offset()..], &v[vl.start_offset()..], scale)
                }
                (Storage::Cpu(CpuStorage::F16(k)), Storage::Cpu(CpuStorage::F16(v))) => {
                    decode_attention::<f16>(g, &q, &k[kl.start_offset()..], &v[vl.start_offset()..], scale)
                }
                _ => candle_core::bail!("llama decode block: the key and value caches must be float32 or float16 CPU tensors of one dtype"),
            }
        };
        let mut y = self.o.matmul_rows(&att, b)?;
        add_into(&mut y, x);
        let normed = rms_norm(&y, &self.ffn_norm, self.eps);
        let gu = project(&self.gate_up, &normed, b)?;
        let inter = gu.len() / b / 2;
        let mut act = Vec::with_capacity(b * inter);
        for row in gu.chunks_exact(2 * inter) {
            let (gate, up) = row.split_at(inter);
            act.extend(gate.iter().zip(up).map(|(&g, &u)| g / (1.0 + Float::exp::<false>(-g)) * u));
        }
        let mut out = self.down.matmul_rows(&act, b)?;
        add_into(&mut out, &y);
        debug_assert_eq!(out.len(), b * h);
        Ok(out)
    }

    /// The rotary embedding with `angles` (cos, sin per pair) on rows of heads of
    /// `head_dim`, adjacent elements paired (Candle's `rope_i`, which the composed
    /// block runs).
    fn rotate(&self, x: &mut [f32], angles: &[(f32, f32)]) {
        for head in x.chunks_exact_mut(self.head_dim) {
            for (pair, &(cos, sin)) in head.chunks_exact_mut(2).zip(angles) {
                let (a, b) = (pair[0], pair[1]);
                pair[0] = a * cos - b * sin;
                pair[1] = a * sin + b * cos;
            }
        }
    }
}

/// The projections `ws` of the `b` rows of `x`, each row's outputs side by side (as
/// one weight with their rows joined gives them).
fn project(ws: &[Arc<QWeight>], x: &[f32], b: usize) -> Result<Vec<f32>> {
    if let [w] = ws {
        return w.matmul_rows(x, b);
    }
    let parts = ws.iter().map(|w| w.matmul_rows(x, b)).collect::<Result<Vec<_>>>()?;
    let width: usize = parts.iter().map(|p| p.len() / b).sum();
    let mut out = Vec::with_capacity(b * width);
    for r in 0..b {
        for p in &parts {
            let n = p.len() / b;
            out.extend_from_slice(&p[r * n..(r + 1) * n]);
        }
    }
    Ok(out)
}

/// `x / sqrt(mean(x^2) + eps) * w` over rows of `w.len()` elements, with the float
/// steps of the composed `layers::norm::rms_norm` (a sequential sum, the mean as a
/// product with 1/n): the activations are then quantized to 8 bits, where a one-ulp
/// difference can flip a rounding.
fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    let scale = (1.0 / w.len() as f64) as f32;
    for row in x.chunks_exact(w.len()) {
        let mut ss = 0f32;
        for &v in row {
            ss += v * v;
        }
        let inv = 1.0 / (ss * scale + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(&v, &g)| v * inv * g));
    }
    out
}

fn add_into(acc: &mut [f32], x: &[f32]) {
    for (a, &b) in acc.iter_mut().zip(x) {
        *a += b;
    }
}

/// Whether `t`'s dtype can hold a decode cache here.
pub(crate) fn cache_dtype_ok(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16)
}
