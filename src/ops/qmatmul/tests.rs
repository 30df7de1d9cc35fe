use super::*;
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

const TYPES: [GgmlDType; 5] = [GgmlDType::Q4_0, GgmlDType::Q4_1, GgmlDType::Q8_0, GgmlDType::Q4K, GgmlDType::Q6K];

/// Deterministic values in [-1, 1) with some large ones (a cheap LCG: no rand in tests).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            if i % 97 == 0 {
                v * 8.0
            } else {
                v
            }
        })
        .collect()
}

fn setup(t: GgmlDType, m: usize, n: usize, k: usize) -> (QTensor, Packed, Vec<f32>) {
    let w = Tensor::from_vec(values(n * k, 1 + n as u64), (n, k), &Device::Cpu).unwrap();
    let q = QTensor::quantize(&w, t).unwrap();
    let p = Packed::new(t, &q.data().unwrap(), n, k).unwrap();
    (q, p, values(m * k, 7 + m as u64))
}

fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0f32, |s, v| s.max(v.abs())).max(1e-6);
    a.iter().zip(b).fold(0f32, |e, (x, y)| e.max((x - y).abs())) / scale
}

#[test]
fn matches_candle_and_scalar_equals_simd() {
    for t in TYPES {
        let ks: &[usize] = if t.block_size() == 256 { &[256, 512] } else { &[32, 96, 576] };
        for &k in ks {
            for (m, n) in [(1, 13), (3, 8), (17, 21), (512, 19)] {
                let (q, p, x) = setup(t, m, n, k);
                let ours = p.matmul(&x, m, true);
                let scalar = p.matmul(&x, m, false);
                assert_eq!(ours, scalar, "{t:?} m={m} n={n} k={k}: scalar and AVX2 differ");
                let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).unwrap();
                let theirs = QMatMul::from_qtensor(q).unwrap().forward(&xt).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
                // Same integer sums, float sums in another order (and q4_1's min term fused).
                let err = max_rel(&ours, &theirs);
                assert!(err < 2e-6, "{t:?} m={m} n={n} k={k}: {err} from Candle");
            }
        }
    }
}

#[test]
fn non_finite_inputs_give_nan_rows() {
    for t in TYPES {
        let (m, n, k) = (3, 9, 256);
        let (_, p, mut x) = setup(t, m, n, k);
        x[k + 5] = f32::NAN;
        x[2 * k + 200] = f32::INFINITY;
        for simd in [true, false] {
            let y = p.matmul(&x, m, simd);
            assert!(y[..n].iter().all(|v| v.is_finite()), "{t:?}");
            assert!(y[n..].iter().all(|v| v.is_nan()), "{t:?}");
        }
    }
}

#[test]
fn rejects_wrong_sizes_and_types() {
    assert!(Packed::new(GgmlDType::Q4_0, &[0; 18], 1, 32).is_some());
    assert!(Packed::new(GgmlDType::Q4_0, &[0; 17], 1, 32).is_none());
    assert!(Packed::new(GgmlDType::Q4K, &[0; 144], 1, 32).is_none());
    assert!(Packed::new(GgmlDType::Q5_0, &[0; 22], 1, 32).is_none());
}

#[test]
fn k_quants_read_the_tensor_s_own_bytes() {
    // Their layout is GGML's, so `Packed::of` keeps no second copy of the weight.
    for t in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q4_1] {
        let (n, k) = (21, 512);
        let w = Tensor::from_vec(values(n * k, 3), (n, k), &Device::Cpu).unwrap();
        let q = std::sync::Arc::new(QTensor::quantize(&w, t).unwrap());
        let shared = Packed::of(&q, n, k).unwrap();
        let copied = Packed::new(t, &q.data().unwrap(), n, k).unwrap();
        if let Weights::K(p) = &shared.w {
            assert_eq!(p.raw().as_ptr(), q.data().unwrap().as_ptr());
        } else {
            assert_eq!(t, GgmlDType::Q4_1);
        }
        let x = values(3 * k, 5);
        assert_eq!(shared.matmul(&x, 3, true), copied.matmul(&x, 3, true));
    }
}
