//! Python entry points of `layers::attention`: argument checks, GIL release, errors.
use crate::autograd::{custom, ops, Value};
use crate::bindings::errors::{dtype_err, shape_err, shape_str, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::layers::attention::*;
use crate::ops::layout::Dense;
use candle_core::{DType, Device, Result, Tensor};
use pyo3::prelude::*;
use std::sync::Mutex;

/// `_core._sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)`.
#[pyfunction]
#[pyo3(signature = (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=false, scale=None, enable_gqa=false))]
#[allow(clippy::too_many_arguments)]
fn _sdpa(
    py: Python<'_>,
    query: &Bound<'_, PyTensor>,
    key: &Bound<'_, PyTensor>,
    value: &Bound<'_, PyTensor>,
    attn_mask: Option<&Bound<'_, PyTensor>>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> PyResult<PyTensor> {
    let (qv, qdt) = query.get().v_dt();
    let (kv, kdt) = key.get().v_dt();
    let (vv, vdt) = value.get().v_dt();
    let (q, k, v) = (qv.data.clone(), kv.data.clone(), vv.data.clone());
    let (qd, kd, vd) = (q.dims().to_vec(), k.dims().to_vec(), v.dims().to_vec());
    if !matches!(qdt, DT::F16 | DT::BF16 | DT::F32 | DT::F64) || qdt != kdt || qdt != vdt {
        return Err(dtype_err(
            OP,
            format!(
                "expected query, key and value of one float dtype, got {}, {} and {} (shapes {}, {}, {})",
                qdt.name(),
                kdt.name(),
                vdt.name(),
                shape_str(&qd),
                shape_str(&kd),
                shape_str(&vd)
            ),
        ));
    }
    let mask_t = attn_mask.map(|m| m.get().t());
    crate::bindings::errors::same_device(OP, [&q, &k, &v].into_iter().chain(mask_t.as_ref()))?;
    if qd.len() < 2 || kd.len() < 2 || vd.len() < 2 {
        return Err(shape_err(
            OP,
            format!(
                "expected query, key and value of at least 2 dims, got shapes {}, {}, {}",
                shape_str(&qd),
                shape_str(&kd),
                shape_str(&vd)
            ),
        ));
    }
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(value_err(OP, format!("dropout_p must be in [0, 1], got {dropout_p}")));
    }
    if is_causal && attn_mask.is_some() {
        let md = mask_t.as_ref().map(|m| shape_str(m.dims())).unwrap_or_default();
        return Err(value_err(OP, format!("attn_mask must not be given together with is_causal=True (got attn_mask of shape {md})")));
    }
    let (l, d) = (qd[qd.len() - 2], qd[qd.len() - 1]);
    let (s, dk_) = (kd[kd.len() - 2], kd[kd.len() - 1]);
    let (sv, dv) = (vd[vd.len() - 2], vd[vd.len() - 1]);
    if d != dk_ {
        return Err(shape_err(
            OP,
            format!("query {} and key {} must have the same last dim (embedding size)", shape_str(&qd), shape_str(&kd)),
        ));
    }
    if s != sv {
        return Err(shape_err(
            OP,
            format!("key {} and value {} must have the same sequence length (dim -2)", shape_str(&kd), shape_str(&vd)),
        ));
    }
    let (qb, kb, vb) = (&qd[..qd.len() - 2], &kd[..kd.len() - 2], &vd[..vd.len() - 2]);
    let rank = qb.len().max(kb.len()).max(vb.len());
    let (qb, mut kb2, mut vb2) = (pad_left(qb, rank), pad_left(kb, rank), pad_left(vb, rank));
    // Grouped heads: kv head h // (Hq / Hkv) serves query head h.
    let (mut kg, mut vg) = (1, 1);
    let gqa = enable_gqa && qd.len() >= 3 && kd.len() >= 3 && vd.len() >= 3;
    if gqa {
        let hq = qb[rank - 1];
        for (name, xb, g, xd) in [("key", &mut kb2, &mut kg, &kd), ("value", &mut vb2, &mut vg, &vd)] {
            let hk = xb[rank - 1];
            if hk == 0 || hq % hk != 0 {
                return Err(shape_err(
                    OP,
                    format!(
                        "with enable_gqa the number of query heads must be a multiple of the {name} heads, got query {} and {name} {}",
                        shape_str(&qd),
                        shape_str(xd)
                    ),
                ));
            }
            if hk != hq && hk != 1 {
                *g = hq / hk;
            }
        }
    }
    // The output batch dims: broadcast of q's, k's and v's (grouped heads count as Hq).
    let mut ob = vec![1; rank];
    for a in 0..rank {
        let dims = [
            qb[a],
            if gqa && a + 1 == rank && kg > 1 { qb[a] } else { kb2[a] },
            if gqa && a + 1 == rank && vg > 1 { qb[a] } else { vb2[a] },
        ];
        let mut o = 1;
        for &x in &dims {
            if x != 1 {
                if o != 1 && o != x {
                    return Err(shape_err(
                        OP,
                        format!(
                            "the batch dims of query {}, key {} and value {} do not broadcast",
                            shape_str(&qd),
                            shape_str(&kd),
                            shape_str(&vd)
                        ),
                    ));
                }
                o = x;
            }
        }
        ob[a] = if dims.contains(&0) { 0 } else { o };
    }
    let n: usize = ob.iter().product();
    // The mask: bool (True takes part) or additive float, broadcast to (ob..., l, s).
    let mut m_rs = 0;
    let mut m_cs = 0;
    let mut m_off = Vec::new();
    let cdt = if qdt == DT::F64 { DType::F64 } else { DType::F32 };
    let mask = match attn_mask {
        None => None,
        Some(m) => {
            let (mt, mdt) = m.get().t_dt();
            let md = mt.dims().to_vec();
            if !(mdt == DT::Bool || mdt == DT::F32 || mdt == qdt) {
                return Err(dtype_err(
                    OP,
                    format!("expected attn_mask of dtype bool, float32 or the query's ({}), got {}", qdt.name(), mdt.name()),
                ));
            }
            let full_rank = rank + 2;
            let (ml, ms) = if md.len() >= 2 { (md[md.len() - 2], md[md.len() - 1]) } else { (0, 0) };
            let fits = md.len() >= 2 && md.len() <= full_rank && (ml == l || ml == 1) && (ms == s || ms == 1) && {
                let mb = pad_left(&md[..md.len() - 2], rank);
                mb.iter().zip(&ob).all(|(&x, &o)| x == 1 || x == o)
            };
            if !fits {
                let mut target = ob.clone();
                target.extend([l, s]);
                return Err(shape_err(
                    OP,
                    format!("attn_mask of shape {} does not broadcast to the attention shape {}", shape_str(&md), shape_str(&target)),
                ));
            }
            let mb = pad_left(&md[..md.len() - 2], rank);
            m_off = offsets(&ob, &mb, &bcast_strides(&mb, ml * ms), 1);
            m_rs = if ml == 1 { 0 } else { ms };
            m_cs = if ms == 1 { 0 } else { 1 };
            let mt = mt.to_device(&Device::Cpu).op(OP)?;
            let add = if mdt == DT::Bool {
                let bits = mt.flatten_all().and_then(|t| t.to_vec1::<u8>()).op(OP)?;
                if cdt == DType::F64 {
                    let vals: Vec<f64> = bits.iter().map(|&b| if b != 0 { 0.0 } else { f64::NEG_INFINITY }).collect();
                    Tensor::from_vec(vals, md.as_slice(), &Device::Cpu).op(OP)?
                } else {
                    let vals: Vec<f32> = bits.iter().map(|&b| if b != 0 { 0.0 } else { f32::NEG_INFINITY }).collect();
                    Tensor::from_vec(vals, md.as_slice(), &Device::Cpu).op(OP)?
                }
            } else {
                mt.to_dtype(cdt).and_then(|t| t.dense()).op(OP)?
            };
            Some(add.detach())
        }
    };
    // Off the CPU: PyTorch's math backend from device ops (the fused kernel is CPU code).
    if !q.device().is_cpu() {
        let cfg = MathCfg { causal: is_causal, scale: scale.unwrap_or(1.0 / (d as f64).sqrt()), gqa, dropout: dropout_p };
        let y = crate::bindings::errors::detach_op(py, OP, || crate::autograd::composed::sdpa_math(&qv, &kv, &vv, mask.as_ref(), &cfg))?;
        return Ok(PyTensor::wrap_vdt(y, qdt));
    }
    // Inputs the forward reads in place (transposed head views need no copy); the
    // rest get a contiguous copy in the compute dtype.
    let (qs, ks, vs) = (in_place(&q, cdt, rank), in_place(&k, cdt, rank), in_place(&v, cdt, rank));
    // An input read in place as the transposed view of (..., L, H, D) (heads D apart,
    // rows at least H * D apart) gets its gradient in that order too: the caller's
    // transpose backward is then contiguous, and the gradient of a fused QKV projection
    // is one concatenation instead of three transposing copies first.
    let token_major = |x: &Option<(Vec<usize>, usize)>, xb: &[usize], width: usize, dims: &[usize]| {
        x.as_ref()
            .is_some_and(|(st, rs)| rank > 0 && dims.len() >= 3 && xb[rank - 1] > 1 && st[rank - 1] == width && *rs >= xb[rank - 1] * width)
    };
    let grad_tm = [token_major(&qs, &qb, d, &qd), token_major(&ks, &kb2, d, &kd), token_major(&vs, &vb2, dv, &vd)];
    // Batch strides and row stride of a gradient: contiguous, or (..., rows, H, width).
    let grad_layout = |xb: &[usize], rows: usize, width: usize, tm: bool| {
        if !tm {
            return (bcast_strides(xb, rows * width), width);
        }
        let h = xb[rank - 1];
        let mut st = vec![0; rank];
        st[rank - 1] = width;
        let mut acc = rows * h * width;
        for a in (0..rank - 1).rev() {
            st[a] = if xb[a] == 1 { 0 } else { acc };
            acc *= xb[a];
        }
        (st, h * width)
    };
    let cont_q = grad_layout(&qb, l, d, grad_tm[0]);
    let cont_k = grad_layout(&kb2, s, d, grad_tm[1]);
    let cont_v = grad_layout(&vb2, s, dv, grad_tm[2]);
    let heads = if rank > 0 { ob[rank - 1] } else { 1 };
    // A query read as the transposed view of (..., L, H, d) gets its output in that
    // order too, so the caller's `transpose(1, 2).reshape(...)` costs no copy. Rows
    // may be longer than H * d: q as one part of a fused (..., L, 3 * H * d) projection.
    let interleave =
        qs.as_ref().is_some_and(|(st, rs)| rank > 0 && heads > 1 && qb[rank - 1] == heads && st[rank - 1] == d && *rs >= heads * d);
    let build = |(qst, q_rs): &(Vec<usize>, usize), (kst, k_rs): &(Vec<usize>, usize), (vst, v_rs): &(Vec<usize>, usize), il: bool| {
        let q_off = offsets(&ob, &qb, qst, 1);
        let k_off = offsets(&ob, &kb2, kst, kg);
        let v_off = offsets(&ob, &vb2, vst, vg);
        let (o_off, o_rs) = if il {
            ((0..n).map(|i| (i / heads) * l * heads * dv + (i % heads) * dv).collect(), heads * dv)
        } else {
            ((0..n).map(|i| i * l * dv).collect(), dv)
        };
        let (k_slices, k_idx) = slices(&k_off);
        let (v_slices, v_idx) = slices(&v_off);
        Geo {
            n,
            l,
            s,
            d,
            dv,
            q_inj: injective(&q_off),
            k_inj: injective(&k_off),
            v_inj: injective(&v_off),
            q_off,
            k_off,
            v_off,
            m_off: m_off.clone(),
            m_rs,
            m_cs,
            q_len: q.elem_count(),
            k_len: k.elem_count(),
            v_len: v.elem_count(),
            q_rs: *q_rs,
            k_rs: *k_rs,
            v_rs: *v_rs,
            o_rs,
            o_off,
            k_slices,
            k_idx,
            v_slices,
            v_idx,
        }
    };
    let geo_c = build(&cont_q, &cont_k, &cont_v, false);
    let strided = qs.is_some() || ks.is_some() || vs.is_some();
    let (geo, geo_c) = if strided {
        let pick = |x: &Option<(Vec<usize>, usize)>, c: &(Vec<usize>, usize)| x.clone().unwrap_or_else(|| c.clone());
        (build(&pick(&qs, &cont_q), &pick(&ks, &cont_k), &pick(&vs, &cont_v), interleave), Some(geo_c))
    } else {
        (geo_c, None)
    };
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let seed = if dropout_p > 0.0 {
        use rand::Rng;
        crate::ops::random::with_rng(None, |r| r.random::<u64>())
    } else {
        0
    };
    let needs_grad = ops::records(&[&qv, &kv, &vv]);
    let cfg = Cfg { causal: is_causal, scale, dropout: dropout_p, seed, lse: needs_grad };
    let mut out_shape = ob.clone();
    if interleave {
        out_shape.insert(rank - 1, l);
    } else {
        out_shape.push(l);
    }
    out_shape.push(dv);
    let dev = q.device().clone();
    // The math-backend form for create_graph (no dropout: its mask cannot be replayed).
    let composed: Option<crate::autograd::composed::Composed> = (dropout_p == 0.0).then(|| {
        let mask = mask.clone();
        let f: crate::autograd::composed::Composed = std::sync::Arc::new(move |t: &[Value]| {
            let (q, mut k, mut v) = (t[0].clone(), t[1].clone(), t[2].clone());
            for (x, g) in [(&mut k, kg), (&mut v, vg)] {
                if g > 1 {
                    *x = crate::autograd::composed::repeat_heads(x, g)?;
                }
            }
            let y = crate::autograd::composed::sdpa(&q, &k, &v, mask.as_ref(), is_causal, scale)?;
            if interleave {
                ops::contiguous(&ops::transpose(&y, rank - 1, rank)?)
            } else {
                Ok(y)
            }
        });
        f
    });
    let op = Sdpa { geo, geo_c, grad_tm, cfg, mask, out_shape, lse: Mutex::new(None) };
    // Released GIL, on the active pool (`ops::pool`: ours after set_num_threads or a fork).
    let y = py
        .detach(|| {
            crate::bindings::errors::on_pool(|| -> Result<Value> {
                let prep = |t: &Value, direct: bool| -> Result<Value> {
                    if direct {
                        Ok(t.clone())
                    } else {
                        ops::contiguous(&ops::to_dtype(&ops::to_device(t, &Device::Cpu)?, cdt)?)
                    }
                };
                let (q, k, v) = (prep(&qv, qs.is_some())?, prep(&kv, ks.is_some())?, prep(&vv, vs.is_some())?);
                let mut y = custom::apply_with(
                    "ScaledDotProductFlashAttentionForCpuBackward0",
                    custom::Op::three(op).reading_result(),
                    &[&q, &k, &v],
                    composed,
                )?;
                if interleave {
                    y = ops::transpose(&y, rank - 1, rank)?;
                }
                ops::to_device(&ops::to_dtype(&y, qdt.candle())?, &dev)
            })
        })
        .op(OP)?;
    Ok(PyTensor::wrap_vdt(y, qdt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sdpa, m)?)?;
    Ok(())
}
