//! Tests of the composed forms and the fused kernels' nodes through the engine: each
//! fused op's value and gradient against its composed form, and the attention math
//! backend against its definition and central differences.
use crate::autograd::composed::{nll_rows, sdpa_math};
use crate::autograd::custom::{apply, Op};
use crate::autograd::engine::grad;
use crate::autograd::Value;
use crate::layers::attention::MathCfg;
use crate::layers::loss::{CrossEntropy, Reduction, Spec};
use crate::layers::pointwise::{activation_kernel, Act, SELU_ALPHA, SELU_SCALE};
use candle_core::{DType, Device, Result, Tensor};
use std::sync::Arc;

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
    let grads = grad(&y, w, &leaves)?;
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

/// The fused op and the composed form agree in value and gradient (through our
/// engine), for every activation.
#[test]
fn fused_matches_composed() -> Result<()> {
    let xs: Vec<f64> = (0..161).map(|i| (i as f64 - 80.0) / 8.0 + 0.013).collect();
    let acts = [
        Act::Silu,
        Act::Mish,
        Act::Hardsigmoid,
        Act::Hardswish,
        Act::Elu { alpha: 1.3, scale: 1.0, input_scale: 1.0, grad_scale: 1.0 },
        Act::Elu { alpha: SELU_ALPHA, scale: SELU_SCALE, input_scale: 1.0, grad_scale: 1.0 },
        Act::Elu { alpha: 0.7, scale: 1.0, input_scale: 1.0 / 0.7, grad_scale: 1.0 / 0.7 },
        Act::Softplus { beta: 2.0, threshold: 5.0 },
        Act::LeakyRelu { slope: 0.1 },
        Act::GeluTanh,
    ];
    for act in acts {
        let run = |fused: bool| -> Result<(Vec<f64>, Vec<f64>)> {
            let x = Value::leaf(Tensor::from_vec(xs.clone(), xs.len(), &Device::Cpu)?);
            let y = if fused {
                apply("Act", Op::one(activation_kernel(&x.data, act).expect("f64 CPU")), &[&x])?
            } else {
                crate::autograd::composed::act(&x, act)?
            };
            let g = grad(&y, y.data.ones_like()?, std::slice::from_ref(&x))?;
            Ok((y.data.to_vec1()?, g[0].as_ref().expect("x takes part").data.to_vec1()?))
        };
        let (a, b) = (run(true)?, run(false)?);
        // 1e-7: the fused hard sigmoid's slope is PyTorch's float32 1/6 (exactly 1/6 in
        // the composed form); everything else agrees to rounding.
        for (i, (u, v)) in a.0.iter().zip(&b.0).chain(a.1.iter().zip(&b.1)).enumerate() {
            assert!((u - v).abs() < 1e-7 * (1.0 + v.abs()), "{act:?} at {i}: {u} vs {v}");
        }
    }
    Ok(())
}

/// The fused op and the composed form (`nll_rows` over `log_softmax`) give one
/// loss and one gradient, for every reduction, weights, ignored rows and smoothing.
#[test]
fn tensor_op_form_matches_fused_op() -> Result<()> {
    let (n, c) = (7, 5);
    let xs: Vec<f64> = (0..n * c).map(|i| ((i * 37 % 23) as f64 - 11.0) / 4.0).collect();
    let target = vec![Some(0), Some(4), Some(2), None, Some(1), Some(3), Some(4)];
    let w = [0.5, 1.5, 1.0, 2.0, 0.25];
    for (weight, smoothing) in [(false, 0.0), (true, 0.0), (false, 0.3), (true, 0.2)] {
        for reduction in [Reduction::None, Reduction::Sum, Reduction::Mean] {
            let spec = Arc::new(Spec { n, c, target: target.clone(), weight: weight.then(|| w.to_vec()), reduction, smoothing });
            let wt = Tensor::new(&w, &Device::Cpu)?;
            let run = |fused: bool| -> Result<(Vec<f64>, Vec<f64>)> {
                let x = Value::leaf(Tensor::from_vec(xs.clone(), (n, c), &Device::Cpu)?);
                let y = if fused {
                    apply("NllLoss", Op::one(CrossEntropy::new(spec.clone())), &[&x])?
                } else {
                    let logp = crate::autograd::ops::softmax(&x, 1, true)?;
                    nll_rows(&logp, &spec, weight.then_some(&wt), &[n])?
                };
                // Distinct upstream gradients per row for "none".
                let g = Tensor::arange(1.0, y.data.elem_count() as f64 + 1.0, &Device::Cpu)?.reshape(y.data.shape())?;
                let dx = grad(&y, g, std::slice::from_ref(&x))?;
                let dx = dx[0].as_ref().expect("x takes part").data.flatten_all()?.to_vec1()?;
                Ok((y.data.flatten_all()?.to_vec1()?, dx))
            };
            let (a, b) = (run(true)?, run(false)?);
            for (u, v) in a.0.iter().zip(&b.0).chain(a.1.iter().zip(&b.1)) {
                assert!((u - v).abs() < 1e-12, "weight={weight} ls={smoothing}: {u} vs {v}");
            }
            assert_eq!((a.0.len(), a.1.len()), (b.0.len(), b.1.len()));
        }
    }
    Ok(())
}
