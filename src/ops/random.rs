//! One seeded generator for everything random (`rand`, `randn`, `randint`,
//! dropout masks, parameter init, DataLoader shuffling).
//!
//! Candle's CPU generator cannot be seeded, so values are drawn here and the
//! finished buffer is handed to Candle.
use candle_core::{DType, Device, Result, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use std::sync::{Mutex, OnceLock};

struct Gen {
    rng: StdRng,
    seed: u64,
}

fn gen() -> &'static Mutex<Gen> {
    static G: OnceLock<Mutex<Gen>> = OnceLock::new();
    G.get_or_init(|| {
        let seed: u64 = rand::rng().random();
        Mutex::new(Gen { rng: StdRng::seed_from_u64(seed), seed })
    })
}

pub(crate) fn with_rng<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
    let mut g = gen().lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g.rng)
}

pub(crate) fn uniform_tensor(shape: &[usize], dtype: DType, dev: &Device) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let t = if dtype == DType::F64 {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| r.random::<f64>()).collect::<Vec<f64>>()), shape, &Device::Cpu)
    } else {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| r.random::<f32>()).collect::<Vec<f32>>()), shape, &Device::Cpu)
    };
    t.and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev))
}

pub(crate) fn normal_tensor(shape: &[usize], dtype: DType, dev: &Device) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let t = if dtype == DType::F64 {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f64>>()), shape, &Device::Cpu)
    } else {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f32>>()), shape, &Device::Cpu)
    };
    t.and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev))
}

pub(crate) fn randint_tensor(low: i64, high: i64, shape: &[usize], dtype: DType, dev: &Device) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = with_rng(|r| (0..n).map(|_| r.random_range(low..high)).collect());
    Tensor::from_vec(v, shape, &Device::Cpu).and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev))
}

/// Reseed the generator; the same seed gives the same sequence of draws.
pub(crate) fn reseed(seed: u64) {
    let mut g = gen().lock().unwrap_or_else(|p| p.into_inner());
    *g = Gen { rng: StdRng::seed_from_u64(seed), seed };
}

/// The seed the generator was last seeded with.
pub(crate) fn seed() -> u64 {
    gen().lock().unwrap_or_else(|p| p.into_inner()).seed
}

/// A permutation of 0..n (DataLoader shuffling, `randperm`).
pub(crate) fn randperm(n: usize) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut v: Vec<usize> = (0..n).collect();
    with_rng(|r| v.shuffle(r));
    v
}
