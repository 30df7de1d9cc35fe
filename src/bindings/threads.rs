//! `set_num_threads` / `get_num_threads` and their inter-op twins (the policy and
//! the pool are `ops::pool`'s; the Python wrappers validate the arguments), and the
//! SIMD level the CPU kernels run (`backends.cpu.get_cpu_capability`).
use crate::ops::cpu::{simd_level, Simd};
use crate::ops::pool;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[pyfunction]
fn _set_num_threads(n: usize) {
    pool::set_num_threads(n);
}

#[pyfunction]
fn _get_num_threads() -> usize {
    pool::num_threads()
}

/// candle_py runs no inter-op pool (no `torch.jit.fork`-style tasks): the value is
/// kept so that it reads back as set, as torch's does.
static INTEROP: AtomicUsize = AtomicUsize::new(0);

#[pyfunction]
fn _set_num_interop_threads(n: usize) {
    INTEROP.store(n, Ordering::Relaxed);
}

#[pyfunction]
fn _get_num_interop_threads() -> usize {
    match INTEROP.load(Ordering::Relaxed) {
        0 => pool::default_threads(),
        n => n,
    }
}

/// The kernels' level in PyTorch's words (`torch.backends.cpu.get_cpu_capability()`),
/// after `CANDLE_PY_MAX_ISA`'s cap: tests use it to prove the cap took effect.
#[pyfunction]
fn _cpu_capability() -> &'static str {
    match simd_level() {
        Simd::Plain => "DEFAULT",
        Simd::Avx2 => "AVX2",
        Simd::Avx512 => "AVX512",
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_set_num_interop_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_get_num_interop_threads, m)?)?;
    m.add_function(wrap_pyfunction!(_cpu_capability, m)?)?;
    Ok(())
}
