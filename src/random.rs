//! One seeded generator for everything random (`rand`, `randn`, `randint`,
//! dropout masks, parameter init, DataLoader shuffling).
//!
//! Candle's CPU generator cannot be seeded, so values are drawn here and the
//! finished buffer is handed to Candle.
use crate::errors::OpResult;
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
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

pub fn with_rng<T>(f: impl FnOnce(&mut StdRng) -> T) -> T {
    let mut g = gen().lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g.rng)
}

pub fn uniform_tensor(shape: &[usize], dtype: DType, dev: &Device) -> PyResult<Tensor> {
    let n: usize = shape.iter().product();
    let t = if dtype == DType::F64 {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| r.random::<f64>()).collect::<Vec<f64>>()), shape, &Device::Cpu)
    } else {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| r.random::<f32>()).collect::<Vec<f32>>()), shape, &Device::Cpu)
    };
    t.and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev)).op("rand")
}

pub fn normal_tensor(shape: &[usize], dtype: DType, dev: &Device) -> PyResult<Tensor> {
    let n: usize = shape.iter().product();
    let t = if dtype == DType::F64 {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f64>>()), shape, &Device::Cpu)
    } else {
        Tensor::from_vec(with_rng(|r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f32>>()), shape, &Device::Cpu)
    };
    t.and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev)).op("randn")
}

pub fn randint_tensor(low: i64, high: i64, shape: &[usize], dtype: DType, dev: &Device) -> PyResult<Tensor> {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = with_rng(|r| (0..n).map(|_| r.random_range(low..high)).collect());
    Tensor::from_vec(v, shape, &Device::Cpu)
        .and_then(|t| t.to_dtype(dtype))
        .and_then(|t| t.to_device(dev))
        .op("randint")
}

/// `manual_seed(s)`: reseed; the same seed gives the same sequence of draws.
#[pyfunction]
pub fn manual_seed(seed: i128) -> u64 {
    let s = seed as u64;
    let mut g = gen().lock().unwrap_or_else(|p| p.into_inner());
    *g = Gen { rng: StdRng::seed_from_u64(s), seed: s };
    s
}

#[pyfunction]
fn initial_seed() -> u64 {
    gen().lock().unwrap_or_else(|p| p.into_inner()).seed
}

/// A permutation of 0..n (DataLoader shuffling, `randperm`).
#[pyfunction]
pub fn _randperm_list(n: usize) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut v: Vec<usize> = (0..n).collect();
    with_rng(|r| v.shuffle(r));
    v
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(initial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(_randperm_list, m)?)?;
    Ok(())
}
