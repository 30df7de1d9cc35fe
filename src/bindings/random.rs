//! The Python face of the seeded generators (`crate::ops::random`): the
//! `Generator` class and `default_generator`, the random factories (`rand`,
//! `randn`, `randint`, `randperm`, `*_like`), the samplers (`multinomial`,
//! `bernoulli`, `poisson`) and the in-place fills (`uniform_`, `normal_`,
//! `random_`, `bernoulli_`, `exponential_`, `geometric_`, `cauchy_`, `log_normal_`).
//! Every one takes `generator=`; None draws from the default generator.
use crate::autograd::Value;
use crate::bindings::args::{check_alloc, nonneg_shape, opt_dtype};
use crate::bindings::creation::{like, shape_args, with_grad};
use crate::bindings::device::{device_arg, extract_device, DevKind, PyDevice};
use crate::bindings::errors::{dtype_err, runtime_err, type_err, value_err, OpResult};
use crate::bindings::indexing::overwrite;
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::random::{self, Fill, SharedGen};
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// PyTorch's seed for a new `Generator` (`c10::detail::default_rng_seed_val`).
const DEFAULT_SEED: u64 = 67280421310721;

/// `Generator(device='cpu')`: a pseudorandom number generator with its own state.
/// Draws happen on the CPU whatever `device` says, and the values are moved to the
/// result's device.
#[pyclass(name = "Generator", module = "candle_py", frozen)]
pub struct PyGenerator {
    pub inner: SharedGen,
    device: PyDevice,
}

/// A seed as PyTorch unpacks one: any int in [-2^63, 2^64 - 1], negatives taken
/// as their two's complement.
fn unpack_seed(seed: &Bound<'_, PyAny>) -> PyResult<u64> {
    let overflow = || value_err("manual_seed", "Overflow when unpacking long long");
    let s: i128 = match seed.extract::<i128>() {
        Ok(s) => s,
        Err(_) if seed.is_instance_of::<pyo3::types::PyInt>() => return Err(overflow()),
        Err(_) => return Err(type_err("manual_seed", format!("seed must be an int, got {}", seed.get_type().name()?))),
    };
    if s < i128::from(i64::MIN) || s > i128::from(u64::MAX) {
        return Err(overflow());
    }
    Ok(if s < 0 { s as i64 as u64 } else { s as u64 })
}

#[pymethods]
impl PyGenerator {
    #[new]
    #[pyo3(signature = (device=None))]
    fn new(device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let device = match device {
            Some(d) if !d.is_none() => extract_device(d, None)?,
            _ => PyDevice { kind: DevKind::Cpu },
        };
        // Open the device now, so a generator for an unbuilt backend fails here.
        device.candle()?;
        Ok(PyGenerator { inner: random::new_shared(DEFAULT_SEED), device })
    }

    /// Restart from `seed` (an int in [-2^63, 2^64 - 1]); returns the generator.
    fn manual_seed(slf: &Bound<'_, Self>, seed: &Bound<'_, PyAny>) -> PyResult<Py<Self>> {
        let s = unpack_seed(seed)?;
        slf.get().inner.lock().unwrap_or_else(|p| p.into_inner()).reseed(s);
        Ok(slf.clone().unbind())
    }

    /// Seed from the operating system's entropy and return that seed.
    fn seed(&self) -> u64 {
        let s = random::fresh_seed();
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).reseed(s);
        s
    }

    /// The seed the generator was last seeded with.
    fn initial_seed(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).initial_seed()
    }

    /// The state as a uint8 tensor; `set_state` of it replays the same draws.
    fn get_state(&self) -> PyResult<PyTensor> {
        let bytes = self.inner.lock().unwrap_or_else(|p| p.into_inner()).state();
        let n = bytes.len();
        Ok(PyTensor::wrap_dt(Tensor::from_vec(bytes, n, &Device::Cpu).op("get_state")?, DT::U8))
    }

    /// Restore a state `get_state` returned; returns the generator.
    fn set_state(slf: &Bound<'_, Self>, new_state: &Bound<'_, PyAny>) -> PyResult<Py<Self>> {
        let t = new_state.cast::<PyTensor>().map_err(|_| type_err("set_state", "expected a torch.ByteTensor"))?;
        let t = t.get();
        if t.dt() != DT::U8 {
            return Err(type_err("set_state", format!("RNG state must be a torch.ByteTensor, got {}", t.dt().name())));
        }
        let bytes: Vec<u8> = t.t().flatten_all().and_then(|x| x.to_device(&Device::Cpu)).and_then(|x| x.to_vec1()).op("set_state")?;
        slf.get().inner.lock().unwrap_or_else(|p| p.into_inner()).set_state(&bytes).map_err(|m| runtime_err("set_state", m))?;
        Ok(slf.clone().unbind())
    }

    /// The device the generator was made for.
    #[getter]
    fn device(&self) -> PyDevice {
        self.device
    }

    fn __repr__(&self) -> String {
        format!("<candle_py.Generator object (initial_seed={})>", self.initial_seed())
    }
}

/// The shared state behind an optional `generator=` argument (None: the default).
type GenArg<'py> = Option<Bound<'py, PyGenerator>>;

fn gen_of(g: &GenArg<'_>) -> Option<SharedGen> {
    g.as_ref().map(|g| g.get().inner.clone())
}

/// A permutation of 0..n (DataLoader shuffling, samplers, `random_split`).
#[pyfunction]
#[pyo3(signature = (n, generator=None))]
pub fn _randperm_list(n: usize, generator: GenArg<'_>) -> Vec<usize> {
    random::randperm(n, gen_of(&generator).as_ref())
}

/// `dt` if it is a float dtype; the random float factories refuse the others.
fn float_only(dt: DT, op: &str) -> PyResult<DT> {
    if !dt.is_float() {
        return Err(dtype_err(op, format!("expected a floating point dtype, got {}", dt.name())));
    }
    Ok(dt)
}

/// PyTorch's "not implemented for 'Long'" refusal of a sampler on a dtype: a
/// DTypeError here, as for every dtype refusal of the project (NotImplementedError
/// means "not done yet" in candle_py).
fn not_for(op: &str, dt: DT) -> PyErr {
    dtype_err(op, format!("expected a floating point input, got {}", dt.name()))
}

/// Uniform draws in [0, 1) or, with `normal`, standard normal ones, as `dt` on `dev`.
fn draw(shape: &[usize], dt: DT, dev: &Device, normal: bool, g: Option<&SharedGen>) -> PyResult<PyTensor> {
    let t = if normal {
        random::normal_tensor(shape, dt.candle(), dev, g).op("randn")?
    } else {
        random::uniform_tensor(shape, dt.candle(), dev, g).op("rand")?
    };
    Ok(PyTensor::wrap_dt(t, dt))
}

/// `rand(*size)` / `randn(*size)`: float32 unless `dtype` names another float dtype.
fn sized(
    size: &Bound<'_, PyTuple>,
    generator: &GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    normal: bool,
) -> PyResult<PyTensor> {
    let op = if normal { "randn" } else { "rand" };
    let shape = nonneg_shape(&shape_args(size, op)?, op)?;
    let dt = float_only(opt_dtype(dtype)?.unwrap_or_else(crate::bindings::dtype::default_float), op)?;
    check_alloc(shape.iter().product(), 8, op)?;
    with_grad(draw(&shape, dt, &device_arg(device)?, normal, gen_of(generator).as_ref())?, requires_grad)
}

/// `rand_like(input)` / `randn_like(input)`: the template's shape, dtype and device
/// unless overridden.
fn shaped_like(
    input: &Bound<'_, PyTensor>,
    generator: &GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
    normal: bool,
) -> PyResult<PyTensor> {
    let (s, dt, dev) = like(input, dtype, device)?;
    let dt = float_only(dt, if normal { "randn_like" } else { "rand_like" })?;
    with_grad(draw(&s, dt, &dev, normal, gen_of(generator).as_ref())?, requires_grad)
}

#[pyfunction]
#[pyo3(name = "rand", signature = (*args, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
fn rand_fn(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    sized(&crate::bindings::creation::size_kw(args, size, "rand")?, &generator, dtype, device, requires_grad, false)
}

#[pyfunction]
#[pyo3(signature = (*args, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
fn randn(
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    sized(&crate::bindings::creation::size_kw(args, size, "randn")?, &generator, dtype, device, requires_grad, true)
}

#[pyfunction]
#[pyo3(signature = (input, *, generator=None, dtype=None, device=None, requires_grad=false))]
fn rand_like(
    input: &Bound<'_, PyTensor>,
    generator: GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    shaped_like(input, &generator, dtype, device, requires_grad, false)
}

#[pyfunction]
#[pyo3(signature = (input, *, generator=None, dtype=None, device=None, requires_grad=false))]
fn randn_like(
    input: &Bound<'_, PyTensor>,
    generator: GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    shaped_like(input, &generator, dtype, device, requires_grad, true)
}

/// `randint(high, size)` or `randint(low, high, size)`, values in [low, high).
#[pyfunction]
#[pyo3(signature = (*args, generator=None, dtype=None, device=None, requires_grad=false))]
fn randint(
    args: &Bound<'_, PyTuple>,
    generator: GenArg<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let (low, high, size) = match args.len() {
        2 => (0i64, args.get_item(0)?.extract::<i64>()?, args.get_item(1)?),
        3 => (args.get_item(0)?.extract::<i64>()?, args.get_item(1)?.extract::<i64>()?, args.get_item(2)?),
        _ => return Err(type_err("randint", "expected randint(high, size) or randint(low, high, size)")),
    };
    if low >= high {
        // PyTorch draws randint with random_, and reports the range in its terms.
        return Err(runtime_err("randint", format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")));
    }
    let shape = nonneg_shape(&shape_args(&PyTuple::new(args.py(), [size])?, "randint")?, "randint")?;
    let dt = opt_dtype(dtype)?.unwrap_or(DT::I64);
    check_alloc(shape.iter().product(), 16, "randint")?;
    let g = gen_of(&generator);
    let t = random::randint_tensor(low, high - 1, &shape, dt.candle(), &device_arg(device)?, g.as_ref()).op("randint")?;
    with_grad(PyTensor::wrap_dt(t, dt), requires_grad)
}

#[pyfunction]
#[pyo3(signature = (n, *, generator=None, dtype=None, device=None))]
fn randperm(n: i64, generator: GenArg<'_>, dtype: Option<&Bound<'_, PyAny>>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyTensor> {
    let n = nonneg_shape(&[n], "randperm")?[0];
    check_alloc(n, 24, "randperm")?;
    let v: Vec<i64> = random::randperm(n, gen_of(&generator).as_ref()).into_iter().map(|x| x as i64).collect();
    let dt = opt_dtype(dtype)?.unwrap_or(DT::I64);
    let t = Tensor::from_vec(v, n, &Device::Cpu).and_then(|t| t.to_dtype(dt.candle())).op("randperm")?;
    let t = t.to_device(&device_arg(device)?).op("randperm")?;
    Ok(PyTensor::wrap_dt(t, dt))
}

/// A tensor's values as f64, row-major (the samplers read their parameters so).
fn values_f64(t: &Tensor, op: &str) -> PyResult<Vec<f64>> {
    t.to_dtype(DType::F64).and_then(|x| x.flatten_all()).and_then(|x| x.to_device(&Device::Cpu)).and_then(|x| x.to_vec1()).op(op)
}

/// f64 `values` as a tensor of `shape` and `dt` on `dev`.
fn from_values(values: Vec<f64>, shape: &[usize], dt: DT, dev: &Device, op: &str) -> PyResult<PyTensor> {
    let t = Tensor::from_vec(values, shape, &Device::Cpu).and_then(|t| t.to_dtype(dt.candle())).and_then(|t| t.to_device(dev)).op(op)?;
    Ok(PyTensor::wrap_dt(t, dt))
}

/// `multinomial(input, num_samples, replacement=False, *, generator=None)`: per row
/// of a 1-D or 2-D tensor of non-negative weights, `num_samples` category indices
/// (int64).
#[pyfunction]
#[pyo3(signature = (input, num_samples, replacement=false, *, generator=None))]
fn multinomial(input: &Bound<'_, PyTensor>, num_samples: i64, replacement: bool, generator: GenArg<'_>) -> PyResult<PyTensor> {
    const OP: &str = "multinomial";
    let me = input.get();
    let t = me.t();
    if !me.dt().is_float() {
        return Err(runtime_err(OP, format!("multinomial only supports floating-point dtypes for input, got: {}", me.dt().name())));
    }
    let dims = t.dims().to_vec();
    if dims.is_empty() || dims.len() > 2 {
        return Err(runtime_err(OP, format!("prob_dist must be 1 or 2 dim, got shape {:?}", dims)));
    }
    if num_samples <= 0 {
        return Err(runtime_err(OP, format!("cannot sample n_sample <= 0 samples (num_samples={num_samples})")));
    }
    let n = num_samples as usize;
    let cats = *dims.last().unwrap_or(&0);
    if !replacement && n > cats {
        return Err(runtime_err(OP, format!("cannot sample n_sample > prob_dist.size(-1) samples without replacement ({n} > {cats})")));
    }
    if cats > 1 << 24 {
        return Err(runtime_err(OP, format!("number of categories cannot exceed 2^24, got {cats}")));
    }
    let rows = if dims.len() == 2 { dims[0] } else { 1 };
    if rows > 0 && cats == 0 {
        return Err(runtime_err(OP, "invalid multinomial distribution (sum of probabilities <= 0)"));
    }
    check_alloc(rows.saturating_mul(n), 8, OP)?;
    let probs = values_f64(&t, OP)?;
    let g = gen_of(&generator);
    let out = random::multinomial(&probs, rows, cats, n, replacement, g.as_ref()).map_err(|m| runtime_err(OP, m))?;
    let shape: Vec<usize> = if dims.len() == 2 { vec![rows, n] } else { vec![n] };
    let r = Tensor::from_vec(out, shape, &Device::Cpu).and_then(|r| r.to_device(t.device())).op(OP)?;
    Ok(PyTensor::wrap_dt(r, DT::I64))
}

/// `bernoulli(input, p=None, *, generator=None)`: 0/1 draws with probabilities
/// `input` (or the scalar `p` for every element), in `input`'s dtype.
#[pyfunction]
#[pyo3(signature = (input, p=None, *, generator=None))]
fn bernoulli(input: &Bound<'_, PyTensor>, p: Option<f64>, generator: GenArg<'_>) -> PyResult<PyTensor> {
    const OP: &str = "bernoulli";
    let me = input.get();
    let (t, dt) = (me.t(), me.dt());
    let g = gen_of(&generator);
    let values = match p {
        Some(p) => {
            check_p01(p, "bernoulli_")?;
            random::fill_values(Fill::Bernoulli { p }, t.elem_count(), g.as_ref())
        }
        None => {
            if !dt.is_float() {
                return Err(not_for(OP, dt));
            }
            random::bernoulli(&values_f64(&t, OP)?, g.as_ref()).map_err(|m| runtime_err(OP, m))?
        }
    };
    from_values(values, t.dims(), dt, t.device(), OP)
}

/// `poisson(input, generator=None)`: one Poisson draw per non-negative rate.
#[pyfunction]
#[pyo3(signature = (input, generator=None))]
fn poisson(input: &Bound<'_, PyTensor>, generator: GenArg<'_>) -> PyResult<PyTensor> {
    const OP: &str = "poisson";
    let me = input.get();
    let (t, dt) = (me.t(), me.dt());
    if !dt.is_float() {
        return Err(not_for(OP, dt));
    }
    let g = gen_of(&generator);
    let values = random::poisson(&values_f64(&t, OP)?, g.as_ref()).map_err(|m| runtime_err(OP, m))?;
    from_values(values, t.dims(), dt, t.device(), OP)
}

fn check_p01(p: f64, op: &str) -> PyResult<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(runtime_err(op, format!("{op} expects p to be in [0, 1], but got p={p}")));
    }
    Ok(())
}

/// The exclusive-range bounds `random_` may use for a dtype: integers the dtype
/// holds, or for floats the integers it represents exactly ([0, 2^mantissa]).
fn dtype_range(dt: DT) -> (i64, i64) {
    match dt {
        DT::Bool => (0, 1),
        DT::U8 => (0, 255),
        DT::I16 => (i64::from(i16::MIN), i64::from(i16::MAX)),
        DT::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        DT::U32 => (0, i64::from(u32::MAX)),
        DT::I64 => (i64::MIN, i64::MAX),
        DT::F16 => (-(1 << 11), 1 << 11),
        DT::BF16 => (-(1 << 8), 1 << 8),
        DT::F32 => (-(1 << 24), 1 << 24),
        DT::F64 => (-(1 << 53), 1 << 53),
    }
}

impl PyTensor {
    /// Overwrite `slf` with `r` (already of its shape and dtype) and return it.
    fn refill(slf: &Bound<'_, Self>, r: Tensor, op: &str) -> PyResult<Py<PyTensor>> {
        overwrite(slf.get(), Value::plain(r), op)?;
        Ok(slf.clone().unbind())
    }

    /// Overwrite `slf` with f64 `values` cast to its dtype.
    fn refill_values(slf: &Bound<'_, Self>, values: Vec<f64>, op: &str) -> PyResult<Py<PyTensor>> {
        let t = slf.get().t();
        let r = Tensor::from_vec(values, t.dims(), &Device::Cpu)
            .and_then(|r| r.to_dtype(t.dtype()))
            .and_then(|r| r.to_device(t.device()))
            .op(op)?;
        Self::refill(slf, r, op)
    }

    /// The continuous samplers refuse integer tensors, as PyTorch does.
    fn float_fill(slf: &Bound<'_, Self>, op: &str, fill: Fill, g: &GenArg<'_>) -> PyResult<Py<PyTensor>> {
        let dt = slf.get().dt();
        if !dt.is_float() {
            return Err(runtime_err(
                op,
                format!("{op} samples a continuous distribution: dtype must be a floating point but you specified {}", dt.name()),
            ));
        }
        let n = slf.get().t().elem_count();
        Self::refill_values(slf, random::fill_values(fill, n, gen_of(g).as_ref()), op)
    }
}

#[pymethods]
impl PyTensor {
    /// `x.multinomial(num_samples, replacement=False, *, generator=None)`.
    #[pyo3(name = "multinomial", signature = (num_samples, replacement=false, *, generator=None))]
    fn multinomial_method(slf: &Bound<'_, Self>, num_samples: i64, replacement: bool, generator: GenArg<'_>) -> PyResult<PyTensor> {
        multinomial(slf, num_samples, replacement, generator)
    }

    /// `x.bernoulli(p=None, *, generator=None)`: 0/1 draws with probabilities `x`
    /// (or the scalar `p`).
    #[pyo3(name = "bernoulli", signature = (p=None, *, generator=None))]
    fn bernoulli_method(slf: &Bound<'_, Self>, p: Option<f64>, generator: GenArg<'_>) -> PyResult<PyTensor> {
        bernoulli(slf, p, generator)
    }

    /// Fill with draws from N(mean, std^2).
    #[pyo3(signature = (mean=0.0, std=1.0, *, generator=None))]
    fn normal_(slf: &Bound<'_, Self>, mean: f64, std: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        if !me.dt().is_float() {
            return Err(not_for("normal_", me.dt()));
        }
        if std < 0.0 {
            return Err(runtime_err("normal_", format!("normal expects std >= 0.0, but found std {std}")));
        }
        let t = me.t();
        let g = gen_of(&generator);
        let r = random::normal_tensor(t.dims(), t.dtype(), t.device(), g.as_ref()).and_then(|r| r.affine(std, mean)).op("normal_")?;
        Self::refill(slf, r, "normal_")
    }

    /// Fill with draws from the continuous uniform distribution on [from, to).
    #[pyo3(signature = (from=0.0, to=1.0, *, generator=None))]
    fn uniform_(slf: &Bound<'_, Self>, from: f64, to: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        let me = slf.get();
        if !me.dt().is_float() {
            return Err(not_for("uniform_", me.dt()));
        }
        if from > to {
            return Err(runtime_err("uniform_", format!("uniform_ expects to return a [from, to) range, but found from={from} > to={to}")));
        }
        let t = me.t();
        let g = gen_of(&generator);
        let r =
            random::uniform_tensor(t.dims(), t.dtype(), t.device(), g.as_ref()).and_then(|r| r.affine(to - from, from)).op("uniform_")?;
        Self::refill(slf, r, "uniform_")
    }

    /// `random_()`, `random_(to)`, `random_(from, to)`: integers uniform on
    /// [from, to - 1]; without `to`, up to the largest value the dtype holds
    /// (2^mantissa for floats).
    #[pyo3(signature = (*args, generator=None, **kwargs))]
    fn random_(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        generator: GenArg<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyTensor>> {
        const OP: &str = "random_";
        let dt = slf.get().dt();
        let opt_int = |o: Option<Bound<'_, PyAny>>| -> PyResult<Option<i64>> {
            match o {
                Some(o) if !o.is_none() => Ok(Some(o.extract::<i64>()?)),
                _ => Ok(None),
            }
        };
        let (mut from, mut to) = match args.len() {
            0 => (None, None),
            1 => (None, opt_int(Some(args.get_item(0)?))?),
            2 => (opt_int(Some(args.get_item(0)?))?, opt_int(Some(args.get_item(1)?))?),
            n => return Err(type_err(OP, format!("random_() takes at most 2 positional arguments ({n} given)"))),
        };
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                match k.extract::<String>()?.as_str() {
                    "from" => from = opt_int(Some(v))?,
                    "to" => to = opt_int(Some(v))?,
                    other => return Err(type_err(OP, format!("random_() got an unexpected keyword argument '{other}'"))),
                }
            }
        }
        let from = from.unwrap_or(0);
        let (lo, hi) = dtype_range(dt);
        let high_incl = match to {
            Some(to) => {
                if from >= to {
                    return Err(runtime_err(OP, format!("random_ expects 'from' to be less than 'to', but got from={from} >= to={to}")));
                }
                if !dt.is_float() && (to - 1 > hi || to - 1 < lo) {
                    return Err(runtime_err(OP, format!("to - 1 is out of bounds for {}", dt.name())));
                }
                to - 1
            }
            None => hi,
        };
        if !dt.is_float() && (from < lo || from > hi) {
            return Err(runtime_err(OP, format!("from is out of bounds for {}", dt.name())));
        }
        if from > high_incl {
            return Err(runtime_err(
                OP,
                format!("random_ expects 'from' to be less than 'to', but got from={from} >= to={}", high_incl + 1),
            ));
        }
        let t = slf.get().t();
        check_alloc(t.elem_count(), 8, OP)?;
        let g = gen_of(&generator);
        let r = random::randint_tensor(from, high_incl, t.dims(), t.dtype(), t.device(), g.as_ref()).op(OP)?;
        Self::refill(slf, r, OP)
    }

    /// Fill with 0/1 draws: 1 with probability `p`, a float or a tensor of
    /// probabilities broadcast to this tensor's shape.
    #[pyo3(signature = (p=None, *, generator=None))]
    fn bernoulli_(slf: &Bound<'_, Self>, p: Option<&Bound<'_, PyAny>>, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        const OP: &str = "bernoulli_";
        let t = slf.get().t();
        let g = gen_of(&generator);
        let values = match p {
            Some(p) if p.is_instance_of::<PyTensor>() => {
                let pt = p.cast::<PyTensor>()?.get().t();
                let pt = pt.broadcast_as(t.dims()).op(OP)?;
                random::bernoulli(&values_f64(&pt, OP)?, g.as_ref()).map_err(|m| runtime_err(OP, m))?
            }
            other => {
                let p = match other {
                    Some(p) if !p.is_none() => p.extract::<f64>()?,
                    _ => 0.5,
                };
                check_p01(p, OP)?;
                random::fill_values(Fill::Bernoulli { p }, t.elem_count(), g.as_ref())
            }
        };
        Self::refill_values(slf, values, OP)
    }

    /// Fill with draws from the exponential distribution of rate `lambd`.
    #[pyo3(signature = (lambd=1.0, *, generator=None))]
    fn exponential_(slf: &Bound<'_, Self>, lambd: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        if lambd.is_nan() || lambd <= 0.0 {
            return Err(runtime_err("exponential_", format!("exponential_ expects lambda > 0.0, but found lambda={lambd}")));
        }
        Self::float_fill(slf, "exponential_", Fill::Exponential { lambd }, &generator)
    }

    /// Fill with the number of Bernoulli(p) trials up to the first success (>= 1).
    #[pyo3(signature = (p, *, generator=None))]
    fn geometric_(slf: &Bound<'_, Self>, p: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        const OP: &str = "geometric_";
        if !(p > 0.0 && p < 1.0) {
            return Err(runtime_err(OP, format!("geometric_ expects p to be in (0, 1), but got p={p}")));
        }
        let n = slf.get().t().elem_count();
        Self::refill_values(slf, random::fill_values(Fill::Geometric { p }, n, gen_of(&generator).as_ref()), OP)
    }

    /// Fill with draws from the Cauchy distribution.
    #[pyo3(signature = (median=0.0, sigma=1.0, *, generator=None))]
    fn cauchy_(slf: &Bound<'_, Self>, median: f64, sigma: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        if sigma.is_nan() || sigma <= 0.0 {
            return Err(runtime_err("cauchy_", format!("cauchy_ expects sigma > 0.0, but found sigma={sigma}")));
        }
        Self::float_fill(slf, "cauchy_", Fill::Cauchy { median, sigma }, &generator)
    }

    /// Fill with exp(N(mean, std^2)) draws.
    #[pyo3(signature = (mean=1.0, std=2.0, *, generator=None))]
    fn log_normal_(slf: &Bound<'_, Self>, mean: f64, std: f64, generator: GenArg<'_>) -> PyResult<Py<PyTensor>> {
        if std.is_nan() || std <= 0.0 {
            return Err(runtime_err("log_normal_", format!("log_normal_ expects std > 0.0, but found std={std}")));
        }
        Self::float_fill(slf, "log_normal_", Fill::LogNormal { mean, std }, &generator)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGenerator>()?;
    // The default generator shares the process-wide state every draw without
    // `generator=` uses, so seeding it seeds them all.
    let default = PyGenerator { inner: random::default_gen().clone(), device: PyDevice { kind: DevKind::Cpu } };
    m.add("default_generator", Py::new(m.py(), default)?)?;
    m.add_function(wrap_pyfunction!(_randperm_list, m)?)?;
    m.add_function(wrap_pyfunction!(rand_fn, m)?)?;
    m.add_function(wrap_pyfunction!(randn, m)?)?;
    m.add_function(wrap_pyfunction!(rand_like, m)?)?;
    m.add_function(wrap_pyfunction!(randn_like, m)?)?;
    m.add_function(wrap_pyfunction!(randint, m)?)?;
    m.add_function(wrap_pyfunction!(randperm, m)?)?;
    m.add_function(wrap_pyfunction!(multinomial, m)?)?;
    m.add_function(wrap_pyfunction!(bernoulli, m)?)?;
    m.add_function(wrap_pyfunction!(poisson, m)?)?;
    Ok(())
}
