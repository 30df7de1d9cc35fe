//! PyTorch's "math" attention backend from tensor ops, for tensors off the CPU
//! (the fused kernel is CPU code): `softmax(Q K^T * scale + mask) V` with the fused
//! kernel's semantics — additive mask (bool masks arrive as 0 / -inf), top-left
//! causal mask, grouped kv heads, and zeros for rows whose keys are all masked.
//! Written with autograd's recorded ops, so it is differentiable (twice, too).
use crate::autograd::composed::repeat_heads;
use crate::autograd::ops::{add, affine, matmul, mul, softmax, to_dtype, transpose, where_cond};
use crate::autograd::Value;
use candle_core::{DType, Result, Tensor};

/// The attention settings besides the tensors.
pub(crate) struct MathCfg {
    pub(crate) causal: bool,
    pub(crate) scale: f64,
    /// Grouped-query attention: query heads (dim -3) share key / value heads.
    pub(crate) gqa: bool,
    pub(crate) dropout: f64,
}

/// Attention from products and softmax: grouped key/value heads repeated, a row whose
/// keys are all masked gives zeros (no NaN), dropout with a fresh mask; half types
/// computed in float32. Recorded when an input requires grad.
pub(crate) fn sdpa_math(q: &Value, k: &Value, v: &Value, mask: Option<&Tensor>, cfg: &MathCfg) -> Result<Value> {
    let dt = q.data.dtype();
    let cdt = if dt == DType::F64 { DType::F64 } else { DType::F32 };
    let (q, mut k, mut v) = (to_dtype(q, cdt)?, to_dtype(k, cdt)?, to_dtype(v, cdt)?);
    if cfg.gqa && q.data.rank() >= 3 && k.data.rank() >= 3 && v.data.rank() >= 3 {
        let (hq, hk) = (q.data.dims()[q.data.rank() - 3], k.data.dims()[k.data.rank() - 3]);
        if hk != hq && hk != 1 {
            k = repeat_heads(&k, hq / hk)?;
            v = repeat_heads(&v, hq / hk)?;
        }
    }
    let r = k.data.rank();
    let (l, s) = (q.data.dims()[q.data.rank() - 2], k.data.dims()[r - 2]);
    let mut scores = matmul(&affine(&q, cfg.scale, 0.0)?, &transpose(&k, r - 2, r - 1)?)?;
    if cfg.causal {
        let tri: Vec<f32> = (0..l * s).map(|i| if i % s > i / s { f32::NEG_INFINITY } else { 0.0 }).collect();
        scores = add(&scores, &Value::plain(Tensor::from_vec(tri, (l, s), q.data.device())?.to_dtype(cdt)?))?;
    }
    if let Some(m) = mask {
        scores = add(&scores, &Value::plain(m.to_device(q.data.device())?.to_dtype(cdt)?))?;
    }
    let last = scores.data.rank() - 1;
    let live = scores.data.max_keepdim(last)?.gt(f64::NEG_INFINITY)?.broadcast_as(scores.data.shape())?;
    let scores = where_cond(&live, &scores, &Value::plain(scores.data.zeros_like()?))?;
    let mut probs = mul(&softmax(&scores, last, false)?, &Value::plain(live.to_dtype(cdt)?))?;
    if cfg.dropout > 0.0 {
        let keep = crate::ops::random::uniform_tensor(probs.data.dims(), cdt, probs.data.device())?.ge(cfg.dropout)?.to_dtype(cdt)?;
        probs = mul(&probs, &Value::plain(keep.affine(1.0 / (1.0 - cfg.dropout), 0.0)?))?;
    }
    to_dtype(&matmul(&probs, &v)?, dt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Attention by its definition, one (batch, head, row) at a time in f64.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        mask: Option<&[bool]>,
        b: usize,
        hq: usize,
        hk: usize,
        l: usize,
        s: usize,
        d: usize,
        causal: bool,
    ) -> Vec<f64> {
        let scale = 1.0 / (d as f64).sqrt();
        let mut out = vec![0.0; b * hq * l * d];
        for bi in 0..b {
            for h in 0..hq {
                let kh = h / (hq / hk);
                for i in 0..l {
                    let qi = &q[((bi * hq + h) * l + i) * d..][..d];
                    let allowed = |j: usize| !(causal && j > i) && mask.is_none_or(|m| m[i * s + j]);
                    let sc: Vec<f64> = (0..s)
                        .map(|j| {
                            let kj = &k[((bi * hk + kh) * s + j) * d..][..d];
                            if allowed(j) {
                                scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>()
                            } else {
                                f64::NEG_INFINITY
                            }
                        })
                        .collect();
                    let max = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    if max == f64::NEG_INFINITY {
                        continue; // every key masked: zeros
                    }
                    let z: f64 = sc.iter().map(|x| (x - max).exp()).sum();
                    for (j, x) in sc.iter().enumerate() {
                        let p = (x - max).exp() / z;
                        for c in 0..d {
                            out[((bi * hq + h) * l + i) * d + c] += p * v[((bi * hk + kh) * s + j) * d + c];
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn math_path_matches_the_definition() -> Result<()> {
        let (b, l, s, d) = (2, 5, 6, 4);
        let data = |n: usize, seed: usize| -> Vec<f64> { (0..n).map(|i| (((i + seed) * 7919 % 101) as f64 - 50.0) / 40.0).collect() };
        // Row 1 has every key masked: it must come out as zeros.
        let bools: Vec<bool> = (0..l * s).map(|i| i / s != 1 && (i % 3 != 0 || i % s == 0)).collect();
        for (hq, hk, causal, masked) in
            [(2, 2, false, false), (2, 2, true, false), (4, 2, false, true), (4, 1, true, true), (3, 3, false, true)]
        {
            let (qv, kv, vv) = (data(b * hq * l * d, 1), data(b * hk * s * d, 2), data(b * hk * s * d, 3));
            let dev = Device::Cpu;
            let q = Tensor::from_vec(qv.clone(), (b, hq, l, d), &dev)?;
            let k = Tensor::from_vec(kv.clone(), (b, hk, s, d), &dev)?;
            let v = Tensor::from_vec(vv.clone(), (b, hk, s, d), &dev)?;
            let add: Vec<f64> = bools.iter().map(|&t| if t { 0.0 } else { f64::NEG_INFINITY }).collect();
            let add = Tensor::from_vec(add, (l, s), &dev)?;
            let cfg = MathCfg { causal, scale: 1.0 / (d as f64).sqrt(), gqa: true, dropout: 0.0 };
            let (q, k, v) = (Value::plain(q), Value::plain(k), Value::plain(v));
            let got: Vec<f64> = sdpa_math(&q, &k, &v, masked.then_some(&add), &cfg)?.data.flatten_all()?.to_vec1()?;
            let want = reference(&qv, &kv, &vv, masked.then_some(bools.as_slice()), b, hq, hk, l, s, d, causal);
            for (x, y) in got.iter().zip(&want) {
                assert!((x - y).abs() < 1e-12, "hq={hq} hk={hk} causal={causal} masked={masked}: {x} vs {y}");
            }
            assert_eq!(got.len(), want.len());
        }
        Ok(())
    }

    /// Gradients (through our engine) against central differences, with a
    /// causal mask, grouped heads and a row whose keys are all masked; half types keep their dtype.
    #[test]
    fn math_path_gradients_match_finite_differences() -> Result<()> {
        let dev = Device::Cpu;
        let (l, s, d) = (3, 4, 2);
        let vals = |n: usize, seed: usize| -> Vec<f64> { (0..n).map(|i| (((i + seed) * 7919 % 53) as f64 - 26.0) / 20.0).collect() };
        let bools: Vec<f64> = (0..l * s).map(|i| if i / s != 1 && (i / s == 2 || i % 2 == 0) { 0.0 } else { f64::NEG_INFINITY }).collect();
        let mask = Tensor::from_vec(bools, (l, s), &dev)?;
        let cfg = MathCfg { causal: false, scale: 0.7, gqa: true, dropout: 0.0 };
        let shapes = [(1, 2, l, d), (1, 1, s, d), (1, 1, s, d)];
        let inputs: Vec<Vec<f64>> = shapes.iter().enumerate().map(|(i, sh)| vals(sh.0 * sh.1 * sh.2 * sh.3, i + 1)).collect();
        let loss = |xs: &[Vec<f64>]| -> Result<f64> {
            let t: Vec<Tensor> = xs.iter().zip(&shapes).map(|(x, sh)| Tensor::from_vec(x.clone(), *sh, &dev)).collect::<Result<_>>()?;
            let t: Vec<Value> = t.into_iter().map(Value::plain).collect();
            let y = sdpa_math(&t[0], &t[1], &t[2], Some(&mask), &cfg)?.data;
            let w = Tensor::arange(1.0, y.elem_count() as f64 + 1.0, &dev)?.reshape(y.shape())?;
            y.mul(&w)?.sum_all()?.to_scalar::<f64>()
        };
        let leaves: Vec<Value> =
            inputs.iter().zip(&shapes).map(|(x, sh)| Tensor::from_vec(x.clone(), *sh, &dev).map(Value::leaf)).collect::<Result<_>>()?;
        let y = sdpa_math(&leaves[0], &leaves[1], &leaves[2], Some(&mask), &cfg)?;
        let w = Tensor::arange(1.0, y.data.elem_count() as f64 + 1.0, &dev)?.reshape(y.data.shape())?;
        let grads = crate::autograd::engine::grad(&y, w, &leaves)?;
        // Row 1 of each head has every key masked: zeros out.
        let rows: Vec<f64> = y.data.narrow(2, 1, 1)?.flatten_all()?.to_vec1()?;
        assert!(rows.iter().all(|&v| v == 0.0));
        for (which, gv) in grads.iter().enumerate() {
            let g: Vec<f64> = gv.as_ref().expect("takes part").data.flatten_all()?.to_vec1()?;
            assert!(g.iter().all(|v| v.is_finite()));
            for (j, gj) in g.iter().enumerate() {
                let h = 1e-6;
                let mut up = inputs.clone();
                up[which][j] += h;
                let mut down = inputs.clone();
                down[which][j] -= h;
                let fd = (loss(&up)? - loss(&down)?) / (2.0 * h);
                assert!((fd - gj).abs() < 1e-6 * (1.0 + fd.abs()), "input {which} element {j}: {gj} vs {fd}");
            }
        }
        let halves: Vec<Value> = leaves.iter().map(|l| l.data.to_dtype(DType::F16).map(Value::plain)).collect::<Result<_>>()?;
        let half = sdpa_math(&halves[0], &halves[1], &halves[2], Some(&mask), &cfg)?.data;
        assert_eq!(half.dtype(), DType::F16);
        let (a, b): (Vec<f64>, Vec<f64>) = (half.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?, y.data.flatten_all()?.to_vec1()?);
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 5e-3 * (1.0 + y.abs())));
        Ok(())
    }
}
