//! PyTorch's "math" attention backend from tensor ops, for tensors off the CPU
//! (the fused kernel is CPU code): `softmax(Q K^T * scale + mask) V` with the fused
//! kernel's semantics — additive mask (bool masks arrive as 0 / -inf), top-left
//! causal mask, grouped kv heads, and zeros for rows whose keys are all masked.
//! Differentiable through the tensor ops' own backward.
use candle_core::{DType, Result, Tensor, D};

/// The attention settings besides the tensors.
pub(crate) struct MathCfg {
    pub(crate) causal: bool,
    pub(crate) scale: f64,
    /// Grouped-query attention: query heads (dim -3) share key / value heads.
    pub(crate) gqa: bool,
    pub(crate) dropout: f64,
}

/// Grouped heads: kv head `h / (Hq / Hkv)` serves query head `h`, by repeating each kv head.
fn repeat_heads(x: &Tensor, hq: usize) -> Result<Tensor> {
    let r = x.rank();
    let hk = x.dims()[r - 3];
    if hk == hq || hk == 1 {
        return Ok(x.clone());
    }
    let mut wide = x.dims().to_vec();
    wide.insert(r - 2, hq / hk);
    let mut merged = x.dims().to_vec();
    merged[r - 3] = hq;
    x.unsqueeze(r - 2)?.broadcast_as(wide)?.reshape(merged)
}

/// Attention over (..., L, D) x (..., S, D) x (..., S, Dv) with broadcast batch dims;
/// `mask` is additive, in the compute dtype, broadcastable to (..., L, S). Half types
/// compute in float32 and return their dtype, as the fused kernel does.
pub(crate) fn sdpa_math(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>, cfg: &MathCfg) -> Result<Tensor> {
    let dt = q.dtype();
    let cdt = if dt == DType::F64 { DType::F64 } else { DType::F32 };
    let (q, mut k, mut v) = (q.to_dtype(cdt)?, k.to_dtype(cdt)?, v.to_dtype(cdt)?);
    if cfg.gqa && q.rank() >= 3 && k.rank() >= 3 && v.rank() >= 3 {
        let hq = q.dims()[q.rank() - 3];
        k = repeat_heads(&k, hq)?;
        v = repeat_heads(&v, hq)?;
    }
    let (l, s) = (q.dims()[q.rank() - 2], k.dims()[k.rank() - 2]);
    let mut scores = q.affine(cfg.scale, 0.0)?.broadcast_matmul(&k.transpose(D::Minus2, D::Minus1)?)?;
    if cfg.causal {
        let tri: Vec<f32> = (0..l * s).map(|i| if i % s > i / s { f32::NEG_INFINITY } else { 0.0 }).collect();
        let tri = Tensor::from_vec(tri, (l, s), q.device())?.to_dtype(cdt)?;
        scores = scores.broadcast_add(&tri)?;
    }
    if let Some(m) = mask {
        scores = scores.broadcast_add(&m.to_device(q.device())?.to_dtype(cdt)?)?;
    }
    // A row whose keys are all masked (max -inf) is softmaxed as zeros and then
    // zeroed, so that neither the value nor the gradient becomes NaN.
    let live = scores.max_keepdim(D::Minus1)?.gt(f64::NEG_INFINITY)?.broadcast_as(scores.shape())?;
    let scores = live.where_cond(&scores, &scores.zeros_like()?)?;
    let live = live.to_dtype(cdt)?;
    let mut probs = crate::ops::softmax::softmax(&scores, scores.rank() - 1, false)?.mul(&live)?;
    if cfg.dropout > 0.0 {
        let keep = crate::ops::random::uniform_tensor(probs.dims(), cdt, probs.device())?.ge(cfg.dropout)?.to_dtype(cdt)?;
        probs = probs.mul(&keep)?.affine(1.0 / (1.0 - cfg.dropout), 0.0)?;
    }
    probs.broadcast_matmul(&v)?.to_dtype(dt)
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
            let got: Vec<f64> = sdpa_math(&q, &k, &v, masked.then_some(&add), &cfg)?.flatten_all()?.to_vec1()?;
            let want = reference(&qv, &kv, &vv, masked.then_some(bools.as_slice()), b, hq, hk, l, s, d, causal);
            for (x, y) in got.iter().zip(&want) {
                assert!((x - y).abs() < 1e-12, "hq={hq} hk={hk} causal={causal} masked={masked}: {x} vs {y}");
            }
            assert_eq!(got.len(), want.len());
        }
        Ok(())
    }

    /// Gradients (through the tensor ops' backward) against central differences, with a
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
            let y = sdpa_math(&t[0], &t[1], &t[2], Some(&mask), &cfg)?;
            let w = Tensor::arange(1.0, y.elem_count() as f64 + 1.0, &dev)?.reshape(y.shape())?;
            y.mul(&w)?.sum_all()?.to_scalar::<f64>()
        };
        let vars: Vec<candle_core::Var> =
            inputs.iter().zip(&shapes).map(|(x, sh)| candle_core::Var::from_vec(x.clone(), *sh, &dev)).collect::<Result<_>>()?;
        let y = sdpa_math(vars[0].as_tensor(), vars[1].as_tensor(), vars[2].as_tensor(), Some(&mask), &cfg)?;
        let w = Tensor::arange(1.0, y.elem_count() as f64 + 1.0, &dev)?.reshape(y.shape())?;
        let grads = y.mul(&w)?.sum_all()?.backward()?;
        // Row 1 of each head has every key masked: zeros out.
        let rows: Vec<f64> = y.narrow(2, 1, 1)?.flatten_all()?.to_vec1()?;
        assert!(rows.iter().all(|&v| v == 0.0));
        for (which, var) in vars.iter().enumerate() {
            let g: Vec<f64> = grads.get(var.as_tensor()).expect("takes part").flatten_all()?.to_vec1()?;
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
        let half =
            sdpa_math(&vars[0].to_dtype(DType::F16)?, &vars[1].to_dtype(DType::F16)?, &vars[2].to_dtype(DType::F16)?, Some(&mask), &cfg)?;
        assert_eq!(half.dtype(), DType::F16);
        let (a, b): (Vec<f64>, Vec<f64>) = (half.to_dtype(DType::F64)?.flatten_all()?.to_vec1()?, y.flatten_all()?.to_vec1()?);
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 5e-3 * (1.0 + y.abs())));
        Ok(())
    }
}
