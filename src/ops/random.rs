//! Seeded generators for everything random (`rand`, `randn`, `randint`, the
//! distributions, dropout masks, parameter init, DataLoader shuffling).
//!
//! A generator is a ChaCha12 stream plus the seed it started from; its whole
//! state (key, stream, word position, seed) serializes to `STATE_BYTES` bytes, so
//! `get_state`/`set_state` replay draws exactly. One process-wide generator is the
//! default (PyTorch's `default_generator`); `Generator` objects own their own.
//!
//! Candle's CPU generator cannot be seeded, so values are drawn here and the
//! finished buffer is handed to Candle.
use candle_core::{DType, Device, Result, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha12Rng;
use rand_distr::{Distribution, Poisson, StandardNormal};
use std::sync::{Arc, Mutex, OnceLock};

/// One generator's state: the stream and the seed it was last seeded with.
pub struct Gen {
    rng: ChaCha12Rng,
    seed: u64,
}

/// A generator shared between its Python object and the draws made with it.
pub type SharedGen = Arc<Mutex<Gen>>;

/// Bytes of a serialized state: key (32), stream (8), word position (16), seed (8).
pub const STATE_BYTES: usize = 64;

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen { rng: ChaCha12Rng::seed_from_u64(seed), seed }
    }

    /// Restart the stream from `seed`; the same seed gives the same draws.
    pub fn reseed(&mut self, seed: u64) {
        *self = Gen::new(seed);
    }

    /// The seed the stream was last started from.
    pub fn initial_seed(&self) -> u64 {
        self.seed
    }

    /// The whole state as bytes (`get_state`).
    pub fn state(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(STATE_BYTES);
        v.extend_from_slice(&self.rng.get_seed());
        v.extend_from_slice(&self.rng.get_stream().to_le_bytes());
        v.extend_from_slice(&self.rng.get_word_pos().to_le_bytes());
        v.extend_from_slice(&self.seed.to_le_bytes());
        v
    }

    /// Restore a state `state()` returned (`set_state`).
    pub fn set_state(&mut self, b: &[u8]) -> std::result::Result<(), String> {
        if b.len() != STATE_BYTES {
            return Err(format!("expected a generator state of {STATE_BYTES} bytes but found the input RNG state size to be {}", b.len()));
        }
        let key: [u8; 32] = b[0..32].try_into().map_err(|_| "bad key".to_string())?;
        let stream = u64::from_le_bytes(b[32..40].try_into().map_err(|_| "bad stream".to_string())?);
        let pos = u128::from_le_bytes(b[40..56].try_into().map_err(|_| "bad position".to_string())?);
        let seed = u64::from_le_bytes(b[56..64].try_into().map_err(|_| "bad seed".to_string())?);
        let mut rng = ChaCha12Rng::from_seed(key);
        rng.set_stream(stream);
        rng.set_word_pos(pos);
        *self = Gen { rng, seed };
        Ok(())
    }
}

/// A seed from the operating system (`Generator.seed()`, the start-up seed).
pub fn fresh_seed() -> u64 {
    rand::rng().random()
}

/// A new generator object, seeded like PyTorch's: with a fixed default seed.
pub fn new_shared(seed: u64) -> SharedGen {
    Arc::new(Mutex::new(Gen::new(seed)))
}

/// The process-wide default generator (seeded from the OS at start-up).
pub fn default_gen() -> &'static SharedGen {
    static G: OnceLock<SharedGen> = OnceLock::new();
    G.get_or_init(|| new_shared(fresh_seed()))
}

/// Run `f` on the stream of `g`, or of the default generator when `g` is None.
pub(crate) fn with_rng<T>(g: Option<&SharedGen>, f: impl FnOnce(&mut ChaCha12Rng) -> T) -> T {
    let g = g.unwrap_or_else(|| default_gen());
    let mut g = g.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g.rng)
}

/// `values` (f64 or f32 per `dtype`) as a tensor of `shape`, `dtype` on `dev`.
fn finish<T: candle_core::WithDType>(values: Vec<T>, shape: &[usize], dtype: DType, dev: &Device) -> Result<Tensor> {
    Tensor::from_vec(values, shape, &Device::Cpu).and_then(|t| t.to_dtype(dtype)).and_then(|t| t.to_device(dev))
}

pub(crate) fn uniform_tensor(shape: &[usize], dtype: DType, dev: &Device, g: Option<&SharedGen>) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    if dtype == DType::F64 {
        finish(with_rng(g, |r| (0..n).map(|_| r.random::<f64>()).collect::<Vec<f64>>()), shape, dtype, dev)
    } else {
        finish(with_rng(g, |r| (0..n).map(|_| r.random::<f32>()).collect::<Vec<f32>>()), shape, dtype, dev)
    }
}

pub(crate) fn normal_tensor(shape: &[usize], dtype: DType, dev: &Device, g: Option<&SharedGen>) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    if dtype == DType::F64 {
        finish(with_rng(g, |r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f64>>()), shape, dtype, dev)
    } else {
        finish(with_rng(g, |r| (0..n).map(|_| StandardNormal.sample(r)).collect::<Vec<f32>>()), shape, dtype, dev)
    }
}

/// Integers uniform in `[low, high]` (both inclusive, so a full-range `random_`
/// can ask for `i64::MAX`).
pub(crate) fn randint_tensor(
    low: i64,
    high_incl: i64,
    shape: &[usize],
    dtype: DType,
    dev: &Device,
    g: Option<&SharedGen>,
) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = with_rng(g, |r| (0..n).map(|_| r.random_range(low..=high_incl)).collect());
    finish(v, shape, dtype, dev)
}

/// A permutation of 0..n (DataLoader shuffling, `randperm`).
pub(crate) fn randperm(n: usize, g: Option<&SharedGen>) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut v: Vec<usize> = (0..n).collect();
    with_rng(g, |r| v.shuffle(r));
    v
}

/// The continuous and discrete fills of PyTorch's in-place samplers, each an
/// inverse-CDF map of one uniform draw per element.
#[derive(Clone, Copy, Debug)]
pub enum Fill {
    /// `exponential_(lambd)`: -ln(1 - u) / lambd.
    Exponential { lambd: f64 },
    /// `geometric_(p)`: trials up to the first success, in {1, 2, ...}.
    Geometric { p: f64 },
    /// `cauchy_(median, sigma)`: median + sigma tan(pi (u - 1/2)).
    Cauchy { median: f64, sigma: f64 },
    /// `log_normal_(mean, std)`: exp(mean + std z).
    LogNormal { mean: f64, std: f64 },
    /// `bernoulli_(p)` with one scalar p: 1 where u < p.
    Bernoulli { p: f64 },
}

/// `n` draws of `fill`, as f64 (every sampler's values fit f64 exactly enough to
/// be cast to the tensor's dtype afterwards).
pub(crate) fn fill_values(fill: Fill, n: usize, g: Option<&SharedGen>) -> Vec<f64> {
    with_rng(g, |r| {
        (0..n)
            .map(|_| match fill {
                Fill::Exponential { lambd } => -(1.0 - r.random::<f64>()).ln() / lambd,
                Fill::Geometric { p } => ((1.0 - r.random::<f64>()).ln() / (1.0 - p).ln()).ceil().max(1.0),
                Fill::Cauchy { median, sigma } => median + sigma * (std::f64::consts::PI * (r.random::<f64>() - 0.5)).tan(),
                Fill::LogNormal { mean, std } => {
                    let z: f64 = StandardNormal.sample(r);
                    (mean + std * z).exp()
                }
                Fill::Bernoulli { p } => f64::from(u8::from(r.random::<f64>() < p)),
            })
            .collect()
    })
}

/// One Bernoulli draw per probability: 1 where u < p. Every p must lie in [0, 1]
/// (NaN included in the refusal), as PyTorch checks.
pub(crate) fn bernoulli(probs: &[f64], g: Option<&SharedGen>) -> std::result::Result<Vec<f64>, String> {
    if probs.iter().any(|p| !(0.0..=1.0).contains(p)) {
        return Err("Expected p_in >= 0 && p_in <= 1 to be true, but got false.".into());
    }
    Ok(with_rng(g, |r| probs.iter().map(|&p| f64::from(u8::from(r.random::<f64>() < p))).collect()))
}

/// One Poisson draw per rate; rates must be non-negative and not NaN.
pub(crate) fn poisson(rates: &[f64], g: Option<&SharedGen>) -> std::result::Result<Vec<f64>, String> {
    if rates.iter().any(|l| l.is_nan() || *l < 0.0) {
        return Err("invalid Poisson rate, expected rate to be non-negative".into());
    }
    with_rng(g, |r| {
        rates
            .iter()
            .map(|&l| {
                if l == 0.0 {
                    return Ok(0.0);
                }
                if l.is_infinite() {
                    return Ok(l);
                }
                Poisson::new(l).map(|d| d.sample(r)).map_err(|e| format!("invalid Poisson rate {l}: {e}"))
            })
            .collect()
    })
}

/// `n` category indices per row of `probs` (`rows` x `cats`, row-major), drawn
/// with or without replacement in proportion to the (unnormalized) weights.
/// Refuses what PyTorch refuses: weights that are negative, infinite or NaN, and
/// a row whose sum is not positive. Without replacement, once a row's categories
/// of positive weight are used up the zero-weight ones follow in index order
/// (PyTorch returns them too rather than failing).
pub(crate) fn multinomial(
    probs: &[f64],
    rows: usize,
    cats: usize,
    n: usize,
    replacement: bool,
    g: Option<&SharedGen>,
) -> std::result::Result<Vec<i64>, String> {
    if probs.iter().any(|p| !p.is_finite() || *p < 0.0) {
        return Err("probability tensor contains either `inf`, `nan` or element < 0".into());
    }
    for row in probs.chunks(cats.max(1)).take(rows) {
        let sum: f64 = row.iter().sum();
        if sum <= 0.0 {
            return Err("invalid multinomial distribution (sum of probabilities <= 0)".into());
        }
    }
    let mut out = Vec::with_capacity(rows * n);
    with_rng(g, |r| {
        for row in probs.chunks(cats.max(1)).take(rows) {
            if replacement {
                // Inverse CDF over the running sums; a draw lands on a category
                // of positive weight only (`partition_point` skips zero-width ones).
                let mut cdf = Vec::with_capacity(cats);
                let mut acc = 0.0;
                for p in row {
                    acc += p;
                    cdf.push(acc);
                }
                for _ in 0..n {
                    let u = r.random::<f64>() * acc;
                    let i = cdf.partition_point(|c| *c <= u).min(cats - 1);
                    // Rounding can leave `u` on a zero-weight tail; step back to the
                    // last category that has weight.
                    let i = (0..=i).rev().find(|&j| row[j] > 0.0).unwrap_or(i);
                    out.push(i as i64);
                }
            } else {
                // Efraimidis-Spirakis: the n smallest keys -ln(u) / w are a weighted
                // sample without replacement, in draw order.
                let mut keys: Vec<(f64, usize)> = row
                    .iter()
                    .enumerate()
                    .map(|(i, &w)| {
                        let e = -(1.0 - r.random::<f64>()).ln();
                        (if w > 0.0 { e / w } else { f64::INFINITY }, i)
                    })
                    .collect();
                keys.sort_by(|a, b| a.0.total_cmp(&b.0));
                out.extend(keys.iter().take(n).map(|(_, i)| *i as i64));
            }
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_roundtrip_replays_draws() {
        let g = new_shared(7);
        let _ = uniform_tensor(&[5], DType::F32, &Device::Cpu, Some(&g)).unwrap();
        let st = g.lock().unwrap().state();
        let a = fill_values(Fill::Exponential { lambd: 1.0 }, 4, Some(&g));
        g.lock().unwrap().set_state(&st).unwrap();
        let b = fill_values(Fill::Exponential { lambd: 1.0 }, 4, Some(&g));
        assert_eq!(a, b);
        assert_eq!(g.lock().unwrap().initial_seed(), 7);
    }

    #[test]
    fn multinomial_skips_zero_weights() {
        let g = new_shared(1);
        let v = multinomial(&[0.0, 1.0, 0.0, 1.0], 1, 4, 2, false, Some(&g)).unwrap();
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, vec![1, 3]);
        let w = multinomial(&[0.0, 1.0, 0.0], 1, 3, 50, true, Some(&g)).unwrap();
        assert!(w.iter().all(|&i| i == 1));
        assert_eq!(multinomial(&[0.0, 1.0], 1, 2, 2, false, Some(&g)).unwrap(), vec![1, 0]);
        assert!(multinomial(&[0.0, 0.0], 1, 2, 1, true, Some(&g)).is_err());
    }
}
