//! Elementwise unary functions Candle lacks: compositions of its differentiable
//! ops, and custom ops with their backward where a fused pass pays.
use super::float::{as_f32, as_f32_mut, vec_from_f32, Float};
use super::simd_map::{map, map_fma_assign_weighted, map_fma_weighted, map_weighted, zip_map, zip_map_fma};
use super::storage::{data, float_dispatch};
use crate::ops::layout::Dense;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Result, Shape, Tensor};

/// Round half to even (banker's rounding), as PyTorch's `round`.
pub(crate) fn round_half_even(x: &Tensor) -> Result<Tensor> {
    fast(x, Fast::Round)
}

/// Round toward zero, keeping the sign of zeros and NaN.
pub(crate) fn trunc(x: &Tensor) -> Result<Tensor> {
    fast(x, Fast::Trunc)
}

/// `round_half_even` from Candle's ops (other devices, other dtypes).
fn round_half_even_candle(x: &Tensor) -> Result<Tensor> {
    let r = x.round()?;
    let tie = r.sub(x)?.abs()?.eq(0.5)?;
    let half = r.affine(0.5, 0.0)?;
    let odd = half.floor()?.ne(&half)?;
    let fix = tie.mul(&odd)?.to_dtype(x.dtype())?.mul(&x.sign()?)?;
    r.sub(&fix)
}

/// `trunc` from Candle's ops (other devices, other dtypes).
fn trunc_candle(x: &Tensor) -> Result<Tensor> {
    // floor above zero, ceil below: keeps the sign of zeros (`trunc(-0.5)` is -0.0)
    // and NaN, where `sign(x) * floor(|x|)` gives +0.0 for -0.0.
    x.ge(&x.zeros_like()?)?.where_cond(&x.floor()?, &x.ceil()?)
}

/// `log(sigmoid(x))` without overflow, as PyTorch computes it:
/// `min(x, 0) - log1p(exp(-|x|))`. Its derivative is `sigmoid(-x)`, written
/// `1 / (1 + e^x)` for `x < 0` and `e^-x / (1 + e^-x)` otherwise, so that neither
/// branch overflows.
struct LogSigmoid;
/// `(x, grad) -> grad * sigmoid(-x)`.
struct LogSigmoidGrad;

#[inline(always)]
fn logsigmoid_of<T: Float, const FMA: bool>(x: T) -> T {
    // `x < 0`, not `min`: a NaN input stays NaN through the log1p term either way.
    let lo = if x < T::ZERO { x } else { T::ZERO };
    let z = (T::ZERO - abs(x)).exp::<FMA>();
    lo - z.ln_1p::<FMA>()
}

#[inline(always)]
fn logsigmoid_grad_of<T: Float, const FMA: bool>(x: T, g: T) -> T {
    let z = (T::ZERO - abs(x)).exp::<FMA>();
    let d = if x < T::ZERO { T::ONE / (T::ONE + z) } else { z / (T::ONE + z) };
    g * d
}

#[inline(always)]
fn abs<T: Float>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO - x
    } else {
        x
    }
}

impl CustomOp1 for LogSigmoid {
    fn name(&self) -> &'static str {
        "logsigmoid"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "logsigmoid", |v| map_fma_weighted(
            v,
            8,
            #[inline(always)]
            |x, fma| if fma { logsigmoid_of::<_, true>(x) } else { logsigmoid_of::<_, false>(x) }
        ));
        Ok((out, l.shape().clone()))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(arg.detach().apply_op2_no_bwd(&grad.dense()?, &LogSigmoidGrad)?))
    }
}

/// `g * sigmoid(-x)` for every element, at the CPU's level.
fn logsigmoid_grad<T: Float>(x: &[T], g: &[T]) -> Vec<T> {
    zip_map_fma(
        x,
        g,
        #[inline(always)]
        |x, g, fma| if fma { logsigmoid_grad_of::<_, true>(x, g) } else { logsigmoid_grad_of::<_, false>(x, g) },
    )
}

impl CustomOp2 for LogSigmoidGrad {
    fn name(&self) -> &'static str {
        "logsigmoid_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(g)) => {
                CpuStorage::F32(logsigmoid_grad(data(x, l1, "logsigmoid")?, data(g, l2, "logsigmoid")?))
            }
            (CpuStorage::F64(x), CpuStorage::F64(g)) => {
                CpuStorage::F64(logsigmoid_grad(data(x, l1, "logsigmoid")?, data(g, l2, "logsigmoid")?))
            }
            _ => candle_core::bail!("logsigmoid: expected float32 or float64 operands of one dtype"),
        };
        Ok((out, l1.shape().clone()))
    }
}

/// `log(sigmoid(x))`, differentiable: one parallel pass each way for contiguous
/// f32/f64 on the CPU; elsewhere the same formula from Candle's ops (which carry
/// their own backward; log1p is `log(1 + z)` there, exact to f32 rounding).
pub(crate) fn logsigmoid(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64) {
        return x.dense()?.apply_op1(LogSigmoid);
    }
    let lo = x.minimum(&x.zeros_like()?)?;
    lo.sub(&(x.abs()?.neg()?.exp()? + 1.0)?.log()?)
}

/// Elementwise functions with a parallel CPU pass, vectorized where the math is
/// (f32 exp/tanh/sigmoid/erf/ln/sin/cos through `approx`'s branch-free forms; neg, abs,
/// square, sqrt, reciprocal as plain arithmetic; the roundings one instruction each),
/// one libm call per element for f64 log, sin and cos (the same calls as Candle's, so
/// the same results), which Candle runs on one thread one scalar call at a time. Candle's floor
/// called libm's `floorf` per element on one thread: 6.3 ms for 786K floats, torch
/// 0.05 ms; its erf (a series per element) 12 ms, torch 0.7.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fast {
    Exp,
    Tanh,
    Sigmoid,
    Neg,
    Abs,
    Sqr,
    Sqrt,
    Recip,
    Relu,
    Log,
    Sin,
    Cos,
    Floor,
    Ceil,
    Trunc,
    /// Halves to even, as PyTorch's `round`.
    Round,
    /// float32 only (`approx::fast_erf`); float64 takes Candle's erf (`fast` checks).
    Erf,
    /// `(x > 0) - (x < 0)`: 0 for both zeros and NaN, as PyTorch's CPU `sign`.
    Sign,
    /// `ln(1 + x)`, accurate for small x (`Float::ln_1p`).
    Log1p,
    /// `exp(x) - 1`, accurate for small x (`Float::exp_m1`).
    Expm1,
    /// `1 / sqrt(x)`, a division as PyTorch's (not the approximate instruction).
    Rsqrt,
}

struct FastOp(Fast);

#[inline(always)]
fn fexp<T: Float>(x: T) -> T {
    Float::exp::<false>(x)
}
#[inline(always)]
fn ftanh<T: Float>(x: T) -> T {
    Float::tanh::<false>(x)
}
#[inline(always)]
fn fsigmoid<T: Float>(x: T) -> T {
    sigmoid::<T, false>(x)
}

/// `1 / (1 + exp(-x))`; `FMA`: the exponential's polynomial fused (for callers compiled
/// with FMA: the activations' and recurrent gates' vector loops), half its instructions.
#[inline(always)]
pub(crate) fn sigmoid<T: Float, const FMA: bool>(x: T) -> T {
    T::ONE / (T::ONE + Float::exp::<FMA>(-x))
}

/// `$go!(weight, |x, fma| f(x))` for the function `$f` over elements of type `$T`:
/// each element formula written once, for `Fast::run` and `Fast::run_assign`.
/// `weight`: about how many simple passes an element costs (the polynomial maps several:
/// threads from 32K elements on; libm calls more). `fma`: the AVX2 / AVX-512 variants
/// (the same results on both) take the fused polynomials, half the instructions; the
/// portable variant (CPUs without FMA) multiplies and adds.
macro_rules! fast_elem {
    ($f:expr, $T:ty, $go:ident) => {
        match $f {
            Fast::Exp => $go!(8, |x: $T, fma: bool| if fma { Float::exp::<true>(x) } else { fexp(x) }),
            Fast::Tanh => $go!(8, |x: $T, fma: bool| if fma { Float::tanh::<true>(x) } else { ftanh(x) }),
            Fast::Sigmoid => $go!(8, |x: $T, fma: bool| if fma { sigmoid::<$T, true>(x) } else { fsigmoid(x) }),
            Fast::Neg => $go!(1, |x: $T, _: bool| -x),
            Fast::Abs => $go!(1, |x: $T, _: bool| Float::abs(x)),
            Fast::Sqr => $go!(1, |x: $T, _: bool| x * x),
            Fast::Sqrt => $go!(1, |x: $T, _: bool| x.sqrt()),
            Fast::Recip => $go!(1, |x: $T, _: bool| <$T>::ONE / x),
            // NaN stays NaN (`x < 0` is false), as torch.relu.
            Fast::Relu => $go!(1, |x: $T, _: bool| if x < <$T>::ZERO { <$T>::ZERO } else { x }),
            Fast::Log => $go!(8, |x: $T, _: bool| x.ln()),
            Fast::Log1p => $go!(8, |x: $T, fma: bool| if fma { x.ln_1p::<true>() } else { x.ln_1p::<false>() }),
            Fast::Expm1 => $go!(8, |x: $T, fma: bool| if fma { x.exp_m1::<true>() } else { x.exp_m1::<false>() }),
            Fast::Rsqrt => $go!(2, |x: $T, _: bool| <$T>::ONE / x.sqrt()),
            Fast::Sin => $go!(16, |x: $T, _: bool| x.sin()),
            Fast::Cos => $go!(16, |x: $T, _: bool| x.cos()),
            Fast::Floor => $go!(1, |x: $T, _: bool| x.floor()),
            Fast::Ceil => $go!(1, |x: $T, _: bool| x.ceil()),
            Fast::Trunc => $go!(1, |x: $T, _: bool| x.trunc()),
            Fast::Round => $go!(1, |x: $T, _: bool| x.round_even()),
            // Only reached for f32 (`fast` sends f64 to Candle's erf).
            Fast::Sign => $go!(1, |x: $T, _: bool| {
                let (p, n) = (if x > <$T>::ZERO { <$T>::ONE } else { <$T>::ZERO }, if x < <$T>::ZERO { <$T>::ONE } else { <$T>::ZERO });
                p - n
            }),
            Fast::Erf => $go!(8, |x: $T, fma: bool| <$T>::of(f64::from(if fma {
                crate::ops::approx::fast_erf::<true>(x.f() as f32)
            } else {
                crate::ops::approx::fast_erf::<false>(x.f() as f32)
            }))),
        }
    };
}

impl Fast {
    fn name(self) -> &'static str {
        match self {
            Fast::Exp => "exp",
            Fast::Tanh => "tanh",
            Fast::Sigmoid => "sigmoid",
            Fast::Neg => "neg",
            Fast::Abs => "abs",
            Fast::Sqr => "square",
            Fast::Sqrt => "sqrt",
            Fast::Recip => "reciprocal",
            Fast::Relu => "relu",
            Fast::Log => "log",
            Fast::Sin => "sin",
            Fast::Cos => "cos",
            Fast::Floor => "floor",
            Fast::Ceil => "ceil",
            Fast::Trunc => "trunc",
            Fast::Round => "round",
            Fast::Erf => "erf",
            Fast::Sign => "sign",
            Fast::Log1p => "log1p",
            Fast::Expm1 => "expm1",
            Fast::Rsqrt => "rsqrt",
        }
    }

    /// `f(x)` for every element, into a new buffer.
    pub(crate) fn run<T: Float>(self, v: &[T]) -> Vec<T> {
        if let (Fast::Sin | Fast::Cos, Some(x)) = (self, as_f32(v)) {
            let out = crate::ops::parallel::filled_plain(x.len(), |out| trig::sin_cos(x, out, matches!(self, Fast::Cos)));
            if let Some(out) = vec_from_f32(out) {
                return out;
            }
        }
        macro_rules! go {
            ($w:expr, $f:expr) => {
                map_fma_weighted(
                    v,
                    $w,
                    #[inline(always)]
                    $f,
                )
            };
        }
        fast_elem!(self, T, go)
    }

    /// `x = f(x)` for every element, in place (`exp_`, `relu_`, ... outside autograd):
    /// the element formulas of `run`, so both give the same bits.
    pub(crate) fn run_assign<T: Float>(self, v: &mut [T]) {
        if let Fast::Sin | Fast::Cos = self {
            if let Some(x) = as_f32_mut(v) {
                return trig::sin_cos_assign(x, matches!(self, Fast::Cos));
            }
        }
        macro_rules! go {
            ($w:expr, $f:expr) => {
                map_fma_assign_weighted(
                    v,
                    $w,
                    #[inline(always)]
                    $f,
                )
            };
        }
        fast_elem!(self, T, go)
    }
}

impl CustomOp1 for FastOp {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, self.name(), |v| self.0.run(v));
        Ok((out, l.shape().clone()))
    }
}

/// `x ** e` elementwise for a float exponent: `x * x` for 2 (exact, as PyTorch's
/// square), else libm's `powf` per element (Candle's call), in parallel.
pub(crate) fn powf(x: &Tensor, e: f64) -> Result<Tensor> {
    if e == 2.0 {
        return fast(x, Fast::Sqr);
    }
    if x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64) {
        let x = x.dense()?;
        let (st, l) = x.storage_and_layout();
        let dev = candle_core::Device::Cpu;
        return match &*st {
            candle_core::Storage::Cpu(CpuStorage::F32(v)) => Tensor::from_vec(pow_slice(data(v, l, "pow")?, e as f32), x.shape(), &dev),
            candle_core::Storage::Cpu(CpuStorage::F64(v)) => Tensor::from_vec(pow_slice(data(v, l, "pow")?, e), x.shape(), &dev),
            _ => candle_core::bail!("pow: expected a float32 or float64 CPU tensor"),
        };
    }
    x.powf(e)
}

/// `x ** e` elementwise with PyTorch's special exponents (its CPU pow kernel): 3 as
/// `x * x * x`, -2 as `1 / (x * x)`, 0.5 / -0.5 as `sqrt` / `1 / sqrt`, -1 as `1 / x`;
/// the same values as torch's to the bit, and no libm call (GPT-2's tanh GELU writes
/// `torch.pow(x, 3.0)`: libm's `powf` was a fifth of makemore's training step).
fn pow_slice<T: Float>(v: &[T], e: T) -> Vec<T> {
    let f = e.f();
    if f == 3.0 {
        map(v, |b: T| b * b * b)
    } else if f == -2.0 {
        map(v, |b: T| T::ONE / (b * b))
    } else if f == 0.5 {
        map(v, |b: T| b.sqrt())
    } else if f == -0.5 {
        map(v, |b: T| T::ONE / b.sqrt())
    } else if f == -1.0 {
        map(v, |b: T| T::ONE / b)
    } else {
        map_weighted(v, 16, move |b: T| b.powf(e))
    }
}

/// `f(x)` elementwise: the parallel pass for float32/float64 on the CPU, Candle's op elsewhere.
pub(crate) fn fast(x: &Tensor, f: Fast) -> Result<Tensor> {
    if x.device().is_cpu() && (x.dtype() == DType::F32 || (x.dtype() == DType::F64 && !matches!(f, Fast::Erf))) {
        return x.dense()?.apply_op1_no_bwd(&FastOp(f));
    }
    match f {
        Fast::Exp => x.exp(),
        Fast::Tanh => x.tanh(),
        Fast::Sigmoid => candle_nn::ops::sigmoid(x),
        Fast::Neg => x.neg(),
        Fast::Abs => x.abs(),
        Fast::Sqr => x.sqr(),
        Fast::Sqrt => x.sqrt(),
        Fast::Recip => x.recip(),
        Fast::Relu => x.relu(),
        Fast::Log => x.log(),
        Fast::Sin => x.sin(),
        Fast::Cos => x.cos(),
        Fast::Floor => x.floor(),
        Fast::Ceil => x.ceil(),
        Fast::Trunc => trunc_candle(x),
        Fast::Round => round_half_even_candle(x),
        Fast::Erf => x.erf(),
        Fast::Sign => x.sign(),
        Fast::Log1p => x.affine(1.0, 1.0)?.log(),
        Fast::Expm1 => x.exp()?.affine(1.0, -1.0),
        Fast::Rsqrt => x.sqrt()?.recip(),
    }
}

/// The gradient of `f` from its output `y` and the upstream `g` in one vectorized pass
/// (contiguous CPU f32/f64 of one shape): tanh `g * (1 - y^2)`, sigmoid
/// `g * y * (1 - y)`, exp `g * y`. `None` where it does not apply.
pub(crate) fn fused_grad(y: &Tensor, g: &Tensor, f: Fast) -> Option<Tensor> {
    if !matches!(f, Fast::Tanh | Fast::Sigmoid | Fast::Exp) || !y.device().is_cpu() || y.dims() != g.dims() || y.dtype() != g.dtype() {
        return None;
    }
    let (Some((ya, yb)), Some((ga, gb))) = (y.layout().contiguous_offsets(), g.layout().contiguous_offsets()) else { return None };
    let (ys, _) = y.storage_and_layout();
    let (gs, _) = g.storage_and_layout();
    fn run<T: Float>(y: &[T], g: &[T], f: Fast) -> Vec<T> {
        match f {
            Fast::Tanh => zip_map(y, g, |y, g| g * (T::ONE - y * y)),
            Fast::Sigmoid => zip_map(y, g, |y, g| g * y * (T::ONE - y)),
            Fast::Exp => zip_map(y, g, |y, g| g * y),
            _ => unreachable!("fused_grad: only tanh, sigmoid and exp (checked on entry)"),
        }
    }
    let dev = candle_core::Device::Cpu;
    match (&*ys, &*gs) {
        (candle_core::Storage::Cpu(CpuStorage::F32(yv)), candle_core::Storage::Cpu(CpuStorage::F32(gv))) => {
            Tensor::from_vec(run(&yv[ya..yb], &gv[ga..gb], f), y.shape(), &dev).ok()
        }
        (candle_core::Storage::Cpu(CpuStorage::F64(yv)), candle_core::Storage::Cpu(CpuStorage::F64(gv))) => {
            Tensor::from_vec(run(&yv[ya..yb], &gv[ga..gb], f), y.shape(), &dev).ok()
        }
        _ => None,
    }
}

/// float32 sine and cosine: `approx::fast_sin_cos` in vector loops where the CPU has
/// FMA, libm's `sinf` / `cosf` for the elements past `approx::TRIG_LIMIT` and on CPUs
/// without FMA. Each element's value depends on that element alone (the outliers are
/// found and fixed chunk by chunk), so `sin` and `sin_`, and a tensor and its slices,
/// agree bit for bit.
mod trig {
    use crate::ops::approx::{fast_sin_cos, TRIG_LIMIT};
    use crate::ops::cpu::{has_avx2_fma, has_avx512};
    use crate::ops::parallel::{even_chunk, for_chunks, par_ok};

    /// Elements per task (at most).
    const CHUNK: usize = 1 << 14;

    fn libm(x: f32, cos: bool) -> f32 {
        if cos {
            x.cos()
        } else {
            x.sin()
        }
    }

    /// `out[i] = sin(x[i])` (or cos), `out` as long as `x`.
    pub(super) fn sin_cos(x: &[f32], out: &mut [f32], cos: bool) {
        let par = par_ok(x.len().saturating_mul(4));
        let size = even_chunk(x.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| chunk(Some(&x[i * size..][..dst.len()]), dst, cos))
    }

    /// `x[i] = sin(x[i])` (or cos) in place.
    pub(super) fn sin_cos_assign(x: &mut [f32], cos: bool) {
        let par = par_ok(x.len().saturating_mul(4));
        let size = even_chunk(x.len(), CHUNK, 64, par);
        for_chunks(x, size, par, |_, c| chunk(None, c, cos))
    }

    /// The arguments the vector form does not take (libm's values for them).
    #[inline(always)]
    fn big(x: f32) -> bool {
        x.abs() > TRIG_LIMIT && x.is_finite()
    }

    /// One chunk: `c = f(src)`, or `c = f(c)` in place without `src`.
    ///
    /// Everything that reads the chunk runs in the dispatched loops: `chunk` itself is
    /// compiled for the baseline, where the scan for large arguments ran 4 lanes at a
    /// time and took 30% of a sine's samples (and a copy of the input into the output
    /// first, 14%).
    fn chunk(src: Option<&[f32]>, c: &mut [f32], cos: bool) {
        #[cfg(target_arch = "x86_64")]
        if has_avx2_fma() {
            let wide = has_avx512();
            // In place, the rare large arguments' libm values are kept before the pass
            // overwrites them; with a separate source they are fixed from it after.
            // SAFETY (this block and the next): each variant runs only where its
            // features were detected.
            let big_in_place = src.is_none()
                && unsafe {
                    if wide {
                        scan_avx512(c)
                    } else {
                        scan_avx2(c)
                    }
                };
            let keep: Vec<(usize, f32)> = if big_in_place {
                c.iter().enumerate().filter(|&(_, &x)| big(x)).map(|(i, &x)| (i, libm(x, cos))).collect()
            } else {
                Vec::new()
            };
            let any = unsafe {
                match (wide, cos) {
                    (true, false) => pass_avx512::<false>(src, c),
                    (true, true) => pass_avx512::<true>(src, c),
                    (false, false) => pass_avx2::<false>(src, c),
                    (false, true) => pass_avx2::<true>(src, c),
                }
            };
            if let (true, Some(s)) = (any, src) {
                for (d, &x) in c.iter_mut().zip(s) {
                    if big(x) {
                        *d = libm(x, cos);
                    }
                }
            }
            for (i, y) in keep {
                c[i] = y;
            }
            return;
        }
        match src {
            Some(s) => c.iter_mut().zip(s).for_each(|(d, &x)| *d = libm(x, cos)),
            None => c.iter_mut().for_each(|x| *x = libm(*x, cos)),
        }
    }

    /// The vector pass; with `src`, also whether any of its elements is `big` (one
    /// `|`-fold in the same loop), else false.
    #[inline(always)]
    fn pass<const COS: bool>(src: Option<&[f32]>, c: &mut [f32]) -> bool {
        match src {
            Some(s) => {
                let mut any = false;
                for (d, &x) in c.iter_mut().zip(s) {
                    any |= big(x);
                    *d = fast_sin_cos::<COS>(x);
                }
                any
            }
            None => {
                for x in c.iter_mut() {
                    *x = fast_sin_cos::<COS>(*x);
                }
                false
            }
        }
    }

    #[inline(always)]
    fn scan(c: &[f32]) -> bool {
        c.iter().fold(false, |a, &x| a | big(x))
    }

    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pass_avx2<const COS: bool>(src: Option<&[f32]>, c: &mut [f32]) -> bool {
        pass::<COS>(src, c)
    }

    /// # Safety
    /// The CPU has AVX-512F, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn pass_avx512<const COS: bool>(src: Option<&[f32]>, c: &mut [f32]) -> bool {
        pass::<COS>(src, c)
    }

    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn scan_avx2(c: &[f32]) -> bool {
        scan(c)
    }

    /// # Safety
    /// The CPU has AVX-512F, AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn scan_avx512(c: &[f32]) -> bool {
        scan(c)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Against f64 sine and cosine: within 2 ulp of the rounded value (1e-7 relative
        /// or absolute near the zeros) over the vector range, libm's own past it, NaN
        /// for NaN and the infinities, -0.0 kept by sine.
        #[test]
        fn sin_and_cos_match_f64_over_the_range() {
            let mut x: Vec<f32> = crate::ops::test_values(40_000, 3).iter().map(|v| v * 2.0e3).collect();
            x.extend(crate::ops::test_values(5_000, 4).iter().map(|v| v * 8.0));
            x.extend([
                0.0,
                -0.0,
                1e-30,
                -1e-30,
                std::f32::consts::PI,
                std::f32::consts::FRAC_PI_2,
                99_999.99,
                -TRIG_LIMIT,
                2.0e5,
                -3.0e7,
                1.0e30,
            ]);
            x.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
            for cos in [false, true] {
                let mut out = vec![0.0; x.len()];
                sin_cos(&x, &mut out, cos);
                let mut inplace = x.clone();
                sin_cos_assign(&mut inplace, cos);
                for (i, (&xi, &yi)) in x.iter().zip(&out).enumerate() {
                    assert_eq!(yi.to_bits(), inplace[i].to_bits(), "sin_cos vs sin_cos_assign at {xi}");
                    let want = if cos { (xi as f64).cos() } else { (xi as f64).sin() };
                    if !xi.is_finite() {
                        assert!(yi.is_nan(), "{xi} -> {yi}");
                        continue;
                    }
                    if xi.abs() > TRIG_LIMIT {
                        assert_eq!(yi, libm(xi, cos));
                        continue;
                    }
                    let err = (yi as f64 - want).abs();
                    assert!(err <= 2.4e-7 * want.abs().max(1e-7), "cos={cos} x={xi}: {yi} vs {want}");
                }
                if !cos {
                    assert!(out[x.len() - 13].is_sign_negative(), "sin(-0.0) keeps its sign");
                }
            }
        }
    }
}
