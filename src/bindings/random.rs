//! The Python face of the seeded generator (`crate::ops::random`): seeding, and the
//! random factories (`rand`, `randn`, `randint`, `randperm`, `*_like`).
use crate::bindings::args::{check_alloc, nonneg_shape, opt_dtype};
use crate::bindings::creation::{like, shape_args, with_grad};
use crate::bindings::device::device_arg;
use crate::bindings::errors::{dtype_err, type_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::random;
use candle_core::{Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// `manual_seed(s)`: reseed; the same seed gives the same sequence of draws.
#[pyfunction]
pub fn manual_seed(seed: i128) -> u64 {
    let s = seed as u64;
    random::reseed(s);
    s
}

/// The seed of the last `manual_seed` (or the random one drawn at start-up).
#[pyfunction]
fn initial_seed() -> u64 {
    random::seed()
}

/// A permutation of 0..n (DataLoader shuffling).
#[pyfunction]
pub fn _randperm_list(n: usize) -> Vec<usize> {
    random::randperm(n)
}

/// `dt` if it is a float dtype; the random float factories refuse the others.
fn float_only(dt: DT, op: &str) -> PyResult<DT> {
    if !dt.is_float() {
        return Err(dtype_err(op, format!("expected a floating point dtype, got {}", dt.name())));
    }
    Ok(dt)
}

/// Uniform draws in [0, 1) or, with `normal`, standard normal ones, as `dt` on `dev`.
fn draw(shape: &[usize], dt: DT, dev: &Device, normal: bool) -> PyResult<PyTensor> {
    let t = if normal {
        random::normal_tensor(shape, dt.candle(), dev).op("randn")?
    } else {
        random::uniform_tensor(shape, dt.candle(), dev).op("rand")?
    };
    Ok(PyTensor::wrap_dt(t, dt))
}

/// `rand(*size)` / `randn(*size)`: float32 unless `dtype` names another float dtype.
fn sized(
    size: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    normal: bool,
) -> PyResult<PyTensor> {
    let op = if normal { "randn" } else { "rand" };
    let shape = nonneg_shape(&shape_args(size, op)?, op)?;
    let dt = float_only(opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float), op)?;
    check_alloc(shape.iter().product(), 8, op)?;
    with_grad(draw(&shape, dt, &device_arg(device)?, normal)?, requires_grad)
}

/// `rand_like(input)` / `randn_like(input)`: the template's shape, dtype and device
/// unless overridden.
fn shaped_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    normal: bool,
) -> PyResult<PyTensor> {
    let (s, dt, dev) = like(input, dtype, device)?;
    let dt = float_only(dt, if normal { "randn_like" } else { "rand_like" })?;
    with_grad(draw(&s, dt, &dev, normal)?, requires_grad)
}

#[pyfunction]
#[pyo3(name = "rand", signature = (*args, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
fn rand_fn(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let _ = generator;
    let op = if false { "randn" } else { "rand" };
    sized(&crate::bindings::creation::size_kw(args, size, op)?, dtype, device, requires_grad, false)
}

#[pyfunction]
#[pyo3(signature = (*args, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
fn randn(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let _ = generator;
    let op = if true { "randn" } else { "rand" };
    sized(&crate::bindings::creation::size_kw(args, size, op)?, dtype, device, requires_grad, true)
}

#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, device=None, requires_grad=false))]
fn rand_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    shaped_like(input, dtype, device, requires_grad, false)
}

#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, device=None, requires_grad=false))]
fn randn_like(
    input: &Bound<'_, PyTensor>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    shaped_like(input, dtype, device, requires_grad, true)
}

/// `randint(high, size)` or `randint(low, high, size)`, values in [low, high).
#[pyfunction]
#[pyo3(signature = (*args, generator=None, dtype=None, device=None, requires_grad=false))]
fn randint(
    args: &Bound<'_, PyTuple>,
    generator: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let _ = generator;
    let (low, high, size) = match args.len() {
        2 => (0i64, args.get_item(0)?.extract::<i64>()?, args.get_item(1)?),
        3 => (args.get_item(0)?.extract::<i64>()?, args.get_item(1)?.extract::<i64>()?, args.get_item(2)?),
        _ => return Err(type_err("randint", "expected randint(high, size) or randint(low, high, size)")),
    };
    if low >= high {
        return Err(value_err("randint", format!("low ({low}) must be smaller than high ({high})")));
    }
    let shape = nonneg_shape(&shape_args(&PyTuple::new(args.py(), [size])?, "randint")?, "randint")?;
    let dt = opt_dtype(dtype)?.unwrap_or(DT::I64);
    check_alloc(shape.iter().product(), 16, "randint")?;
    let t = random::randint_tensor(low, high, &shape, dt.candle(), &device_arg(device)?).op("randint")?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (n, *, dtype=None, device=None))]
fn randperm(n: i64, dtype: Option<&Bound<'_, PyAny>>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let n = nonneg_shape(&[n], "randperm")?[0];
    check_alloc(n, 24, "randperm")?;
    let v: Vec<i64> = random::randperm(n).into_iter().map(|x| x as i64).collect();
    let dt = opt_dtype(dtype)?.unwrap_or(DT::I64);
    let t = Tensor::from_vec(v, n, &Device::Cpu).and_then(|t| t.to_dtype(dt.candle())).op("randperm")?;
    let t = t.to_device(&device_arg(device)?).op("randperm")?;
    Ok(PyTensor::wrap_dt(t, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(initial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(_randperm_list, m)?)?;
    m.add_function(wrap_pyfunction!(rand_fn, m)?)?;
    m.add_function(wrap_pyfunction!(randn, m)?)?;
    m.add_function(wrap_pyfunction!(rand_like, m)?)?;
    m.add_function(wrap_pyfunction!(randn_like, m)?)?;
    m.add_function(wrap_pyfunction!(randint, m)?)?;
    m.add_function(wrap_pyfunction!(randperm, m)?)?;
    Ok(())
}
