//! Elementwise binary arithmetic on Candle tensors: the op enum, PyTorch's integer
//! semantics (floor division, wrap-around, integer powers), and the fast paths for
//! contiguous CPU float operands (one parallel pass instead of Candle's generic
//! dispatch; a backward for the tracked side only when the other is a constant).
use crate::ops::layout::Dense;
use crate::ops::simd_map::{map, zip_map, zip_map_fixup};
use crate::ops::storage::with_f32;
use candle_core::{DType, Tensor};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Pow,
    Max,
    Min,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

impl Bin {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Bin::Add => "add",
            Bin::Sub => "sub",
            Bin::Mul => "mul",
            Bin::Div => "div",
            Bin::FloorDiv => "floor_divide",
            Bin::Rem => "remainder",
            Bin::Pow => "pow",
            Bin::Max => "maximum",
            Bin::Min => "minimum",
            Bin::Eq => "eq",
            Bin::Ne => "ne",
            Bin::Lt => "lt",
            Bin::Le => "le",
            Bin::Gt => "gt",
            Bin::Ge => "ge",
            Bin::And => "logical_and",
            Bin::Or => "logical_or",
            Bin::Xor => "logical_xor",
            Bin::BitAnd => "bitwise_and",
            Bin::BitOr => "bitwise_or",
            Bin::BitXor => "bitwise_xor",
            Bin::Shl => "bitwise_left_shift",
            Bin::Shr => "bitwise_right_shift",
        }
    }
    /// The integer bitwise operators (`&`, `|`, `^`, `<<`, `>>`).
    pub(crate) fn bit_op(self) -> Option<crate::ops::bitwise::BitOp> {
        use crate::ops::bitwise::BitOp;
        match self {
            Bin::BitAnd => Some(BitOp::And),
            Bin::BitOr => Some(BitOp::Or),
            Bin::BitXor => Some(BitOp::Xor),
            Bin::Shl => Some(BitOp::Shl),
            Bin::Shr => Some(BitOp::Shr),
            _ => None,
        }
    }
    pub(crate) fn is_cmp(self) -> bool {
        matches!(self, Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge)
    }
}

/// Integer floor division, rounding toward negative infinity as Python does.
pub(crate) fn int_floordiv(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    let q = a.div(b)?;
    let r = a.sub(&q.mul(b)?)?;
    let zero = r.zeros_like()?;
    let rz = r.ne(&zero)?;
    let sign_diff = r.lt(&zero)?.ne(&b.lt(&zero)?)?;
    let adjust = rz.mul(&sign_diff)?.to_dtype(q.dtype())?;
    q.sub(&adjust)
}

/// f64 integer values to an integer dtype with two's-complement wrap-around
/// (as PyTorch and NumPy overflow), not Candle's saturating float cast.
pub(crate) fn wrap_int(x: &Tensor, to: DType) -> candle_core::Result<Tensor> {
    x.to_dtype(DType::I64)?.to_dtype(to)
}

/// Integer power by repeated squaring; keeps gradients for float inputs.
pub(crate) fn pow_int(x: &Tensor, n: i64) -> candle_core::Result<Tensor> {
    if n == 0 {
        return x.ones_like();
    }
    let float_cpu = x.device().is_cpu() && matches!(x.dtype(), candle_core::DType::F32 | candle_core::DType::F64);
    if n < 0 && !float_cpu {
        return pow_int(x, -n)?.recip();
    }
    if float_cpu && n == 2 {
        return crate::ops::unary::fast(x, crate::ops::unary::Fast::Sqr);
    }
    if float_cpu {
        // One parallel pass doing the same squarings and products per element.
        let x = x.dense()?;
        let (st, l) = x.storage_and_layout();
        let dev = candle_core::Device::Cpu;
        return match &*st {
            candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => {
                Tensor::from_vec(pow_map(crate::ops::storage::data(v, l, "pow")?, n), x.shape(), &dev)
            }
            candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => {
                Tensor::from_vec(pow_map(crate::ops::storage::data(v, l, "pow")?, n), x.shape(), &dev)
            }
            _ => candle_core::bail!("pow: expected a float32 or float64 CPU tensor"),
        };
    }
    let mut result: Option<Tensor> = None;
    let mut base = x.clone();
    let mut e = n;
    while e > 0 {
        if e & 1 == 1 {
            result = Some(match result {
                None => base.clone(),
                Some(r) => r.mul(&base)?,
            });
        }
        e >>= 1;
        if e > 0 {
            base = base.sqr()?;
        }
    }
    Ok(result.unwrap())
}

/// `b ** n` (1 <= n < 64) by squaring, the products in `pow_int`'s order. The loop
/// has a fixed trip count over the exponent's bits, so it unrolls and the map around
/// it vectorizes (the extra squarings past the top bit are never used).
#[inline(always)]
fn powi_small<T: crate::ops::float::Float>(b: T, n: i64) -> T {
    let (mut r, mut base) = (T::ONE, b);
    for k in 0..6 {
        if (n >> k) & 1 == 1 {
            r *= base;
        }
        base = base * base;
    }
    r
}

/// `v ** n` elementwise for any n != 0 (a negative power is the reciprocal of the
/// positive one; from 2^6 on, libm's `powf`, as PyTorch for large integer powers).
/// The branches are taken once, outside the map, so that each closure's loop
/// vectorizes.
fn pow_map<T: crate::ops::float::Float>(v: &[T], n: i64) -> Vec<T> {
    match (n < 0, n.unsigned_abs() < 64) {
        (false, true) => map(v, move |b| powi_small(b, n)),
        (true, true) => map(v, move |b| T::ONE / powi_small(b, -n)),
        (_, false) => {
            let e = T::of(n as f64);
            map(v, move |b| b.powf(e))
        }
    }
}

/// `x ** y` for two float tensors of one dtype and shape: C's `pow` elementwise, whose
/// special values are PyTorch's (`1 ** nan` and `(-1) ** inf` are 1, `x ** 0` is 1, a
/// negative base to a fractional power NaN, `0 ** -1` inf). Half types compute in
/// float32 as PyTorch's kernels do; other devices' operands go through the CPU.
pub(crate) fn pow_tensor(x: &Tensor, y: &Tensor) -> candle_core::Result<Tensor> {
    let (dt, dev) = (x.dtype(), x.device().clone());
    let work = if dt == DType::F64 { DType::F64 } else { DType::F32 };
    let cpu = |t: &Tensor| t.to_dtype(work)?.flatten_all()?.to_device(&candle_core::Device::Cpu);
    let (a, b) = (cpu(x)?, cpu(y)?);
    let out = if work == DType::F64 {
        Tensor::from_vec(zip_map(&a.to_vec1::<f64>()?, &b.to_vec1::<f64>()?, f64::powf), x.dims(), &candle_core::Device::Cpu)?
    } else {
        Tensor::from_vec(zip_map(&a.to_vec1::<f32>()?, &b.to_vec1::<f32>()?, f32::powf), x.dims(), &candle_core::Device::Cpu)?
    };
    out.to_dtype(dt)?.to_device(&dev)
}

/// `a[i] (op) b[i]` for the four arithmetic ops, one parallel pass
/// (`direct_binary` and `OneSideTracked` share it).
pub(crate) fn arith<
    T: Copy + Send + Sync + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T> + std::ops::Div<Output = T>,
>(
    a: &[T],
    b: &[T],
    op: Bin,
) -> Vec<T> {
    match op {
        Bin::Add => zip_map(a, b, |x, y| x + y),
        Bin::Sub => zip_map(a, b, |x, y| x - y),
        Bin::Mul => zip_map(a, b, |x, y| x * y),
        _ => zip_map(a, b, |x, y| x / y),
    }
}

/// CPU operands of one float dtype (contiguous ones, else `broadcast::broadcast_arith`,
/// which also takes max/min and the comparisons): one tight vectorized loop into a
/// new buffer, skipping Candle's generic dispatch (which dominates small ops),
/// and split over rayon's pool for large ones (`crate::ops::parallel`'s policy). Candle's own parallel path runs on
/// a second thread pool beside rayon's; on 2 cores the two pools' spinning
/// workers starve each other, so large elementwise work stays on one pool.
pub(crate) fn direct_binary(l: &Tensor, r: &Tensor, op: Bin) -> Option<Tensor> {
    if !l.device().is_cpu() {
        return None;
    }
    // Comparisons (u8 results) and NaN-propagating max/min: the merged-dims kernel,
    // whatever the layouts.
    if op.is_cmp() || matches!(op, Bin::Max | Bin::Min) {
        return crate::ops::broadcast::broadcast_arith(l, r, op);
    }
    // Broadcast or strided operands: the merged-dims kernel.
    let (Some((la, _)), Some((ra, _))) = (l.layout().contiguous_offsets(), r.layout().contiguous_offsets()) else {
        return crate::ops::broadcast::broadcast_arith(l, r, op);
    };
    if l.dims() != r.dims() {
        return crate::ops::broadcast::broadcast_arith(l, r, op);
    }
    let n = l.elem_count();
    let (ls, _) = l.storage_and_layout();
    let (rs, _) = r.storage_and_layout();
    let shape = l.shape().clone();
    match (&*ls, &*rs) {
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(a)), candle_core::Storage::Cpu(candle_core::CpuStorage::F32(b))) => {
            Tensor::from_vec(arith(&a[la..la + n], &b[ra..ra + n], op), shape, &candle_core::Device::Cpu).ok()
        }
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F64(a)), candle_core::Storage::Cpu(candle_core::CpuStorage::F64(b))) => {
            Tensor::from_vec(arith(&a[la..la + n], &b[ra..ra + n], op), shape, &candle_core::Device::Cpu).ok()
        }
        _ => None,
    }
}

/// `x * mul + add` for a CPU float32/float64 tensor, as Candle's affine computes it
/// (same formula, same rounding), in one vectorized pass; a strided view is read in
/// place (Candle's strided affine ran one element at a time: `x[..., ::2] * 0.5` on
/// (8, 256, 384) took 1.0 ms, torch 0.23).
pub(crate) fn direct_affine(x: &Tensor, mul: f64, add: f64) -> Option<Tensor> {
    let n = x.elem_count();
    if !x.device().is_cpu() {
        return None;
    }
    let l = x.layout();
    let (st, _) = x.storage_and_layout();
    let shape = x.dims().to_vec();
    let dev = candle_core::Device::Cpu;
    /// The affine map over `v`'s part that `l` addresses: one pass over a
    /// contiguous range, else the strided reader.
    fn run<T: crate::ops::float::Float>(v: &[T], l: &candle_core::Layout, n: usize, m: T, c: T) -> Vec<T> {
        match l.contiguous_offsets() {
            Some((a, _)) => affine_map(&v[a..a + n], m, c),
            None => {
                use crate::ops::broadcast::map_strided;
                let (d, s, o) = (l.dims(), l.stride(), l.start_offset());
                if m == T::ONE {
                    map_strided(v, d, s, o, move |x| x + c)
                } else if c == T::ZERO {
                    map_strided(v, d, s, o, move |x| x * m)
                } else {
                    map_strided(v, d, s, o, move |x| x * m + c)
                }
            }
        }
    }
    match &*st {
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => {
            Tensor::from_vec(run(v, l, n, mul as f32, add as f32), shape, &dev).ok()
        }
        candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => Tensor::from_vec(run(v, l, n, mul, add), shape, &dev).ok(),
        _ => None,
    }
}

/// `x * m + c` elementwise; a shift alone is `x + c` and a scale alone `x * m`, so that
/// `-0.0 * 2` stays -0.0 (adding a zero would make it +0.0) as in PyTorch.
fn affine_map<T: crate::ops::float::Float>(v: &[T], m: T, c: T) -> Vec<T> {
    if m == T::ONE {
        map(v, move |x| x + c)
    } else if c == T::ZERO {
        map(v, move |x| x * m)
    } else {
        map(v, move |x| x * m + c)
    }
}

/// `maximum` / `minimum` of two tensors of one shape with PyTorch's NaN rule: a NaN in
/// either operand gives NaN (Candle's comparison-based kernels return the other one).
pub fn nan_extreme(l: &Tensor, r: &Tensor, is_max: bool) -> candle_core::Result<Tensor> {
    if let Some(t) = direct_binary(l, r, if is_max { Bin::Max } else { Bin::Min }) {
        return Ok(t);
    }
    let m = if is_max { l.maximum(r)? } else { l.minimum(r)? };
    if !l.dtype().is_float() {
        return Ok(m);
    }
    // `l + r` is NaN exactly where one of them is.
    let nan = l.ne(l)?.maximum(&r.ne(r)?)?;
    nan.where_cond(&l.add(r)?, &m)
}

macro_rules! floor_rem {
    ($t:ty, $floordiv:ident, $rem:ident, $floor_of:ident, $rem_of:ident) => {
        /// PyTorch's float floor division: computed from `fmod` so that infinities,
        /// signed zeros and NaN come out as PyTorch's (`inf // 2` is NaN, `2 // -inf`
        /// is -1, a zero quotient keeps the sign of `a / b`); `a / 0` is `a / b`.
        fn $floordiv(a: $t, b: $t) -> $t {
            if b == 0.0 {
                return a / b;
            }
            $floor_of(a, b, a % b) // Rust's float `%` is C's fmod
        }
        /// `$floordiv` for `b != 0` given `m = fmod(a, b)`, without branches (selects).
        #[inline(always)]
        fn $floor_of(a: $t, b: $t, m: $t) -> $t {
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div != 0.0 {
                let f = div.floor();
                if div - f > 0.5 {
                    f + 1.0
                } else {
                    f
                }
            } else {
                (0.0 as $t).copysign(a / b)
            }
        }
        /// PyTorch's float remainder: `fmod` moved onto the divisor's side
        /// (`-5 % inf` is inf, `-0.0 % 2` stays -0.0).
        fn $rem(a: $t, b: $t) -> $t {
            $rem_of(b, a % b)
        }
        /// `$rem` given `m = fmod(a, b)`.
        #[inline(always)]
        fn $rem_of(b: $t, m: $t) -> $t {
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                m + b
            } else {
                m
            }
        }
    };
}
floor_rem!(f32, floordiv_f32, rem_f32, floor_of_f32, rem_of_f32);
floor_rem!(f64, floordiv_f64, rem_f64, floor_of_f64, rem_of_f64);

/// `fmod(a, b)` of float32 operands through f64, without branches: the quotient's
/// integer part `q = trunc(a / b)` is exact while `fmod_in_range` holds (|a / b| < 2^27:
/// a quotient that is not an integer lies at least 2^-24 from one, the f64 quotient's
/// rounding is at most 2^-26 there), `q b` is exact (27 + 24 bits) and so is `a - q b`
/// (fmod's value is an f32); the result carries `a`'s sign, zeros included, as fmod's.
/// libm's `fmodf` is a loop of integer steps per element, this a division and a
/// rounding in vector lanes: `x // 0.3` on an (8, 256, 384) tensor with 2 threads
/// (Zen 3) took 14.7 ms, now 0.64 (torch 1.33); `x % 0.3` 11.4 ms, now 0.43 (0.91).
#[inline(always)]
fn fmod_f32(a: f32, b: f32) -> f32 {
    let (x, y) = (a as f64, b as f64);
    let q = (x / y).trunc();
    ((x - q * y) as f32).copysign(a)
}

/// Whether `fmod_f32` takes (a, b): false for a zero or infinite divisor (`0 * inf`
/// would make NaN of `fmod(a, inf) = a`), an infinite dividend, NaN and quotients of
/// 2^27 or more (libm's exact loop takes those).
#[inline(always)]
fn fmod_in_range(a: f32, b: f32) -> bool {
    ((a as f64) / (b as f64)).abs() < 134_217_728.0 && b.abs() < f32::INFINITY
}

/// float32 `l // r` (`rem`: `l % r`) for dense `a` and `b` as long as `a` or holding
/// one number: `fmod_f32` and the element formulas in vector lanes, the scalar
/// functions for the pairs it does not take (`simd_map::zip_map_fixup`).
fn floordiv_rem_f32(a: &[f32], b: &[f32], rem: bool) -> Vec<f32> {
    let bad = |x: f32, y: f32| !fmod_in_range(x, y);
    if rem {
        zip_map_fixup(a, b, 4, |x, y| rem_of_f32(y, fmod_f32(x, y)), bad, rem_f32)
    } else {
        zip_map_fixup(a, b, 4, |x, y| floor_of_f32(x, y, fmod_f32(x, y)), bad, floordiv_f32)
    }
}

/// The number a CPU float32 tensor was broadcast from (every stride 0), read as one
/// value instead of densified into a buffer of copies; None for any other tensor.
fn broadcast_number(t: &Tensor) -> Option<f32> {
    let (st, l) = t.storage_and_layout();
    match &*st {
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) if t.elem_count() > 0 && l.stride().iter().all(|&s| s == 0) => {
            Some(v[l.start_offset()])
        }
        _ => None,
    }
}

/// `l // r` (or `l % r` when `rem`) for two float tensors of one dtype and shape, with
/// PyTorch's special values. Half types compute in float32 as PyTorch's kernels do;
/// other devices' operands are computed on the CPU and copied back.
pub(crate) fn float_floordiv_rem(l: &Tensor, r: &Tensor, rem: bool) -> candle_core::Result<Tensor> {
    let (dt, dev) = (l.dtype(), l.device().clone());
    if dt == DType::F32 && dev.is_cpu() && r.dtype() == DType::F32 && r.device().is_cpu() && l.elem_count() > 1 {
        let name = if rem { "remainder" } else { "floor_divide" };
        let out = with_f32(&l.dense()?, name, |av| match broadcast_number(r) {
            Some(y) => Ok(floordiv_rem_f32(av, &[y], rem)),
            None => with_f32(&r.dense()?, name, |bv| floordiv_rem_f32(av, bv, rem)),
        })??;
        return Tensor::from_vec(out, l.dims(), &dev);
    }
    let work = if dt == DType::F64 { DType::F64 } else { DType::F32 };
    let cpu = |t: &Tensor| t.to_dtype(work)?.flatten_all()?.to_device(&candle_core::Device::Cpu);
    let (a, b) = (cpu(l)?, cpu(r)?);
    let out = if work == DType::F64 {
        let f = if rem { rem_f64 } else { floordiv_f64 };
        Tensor::from_vec(zip_map(&a.to_vec1::<f64>()?, &b.to_vec1::<f64>()?, f), l.dims(), &candle_core::Device::Cpu)?
    } else {
        let f = if rem { rem_f32 } else { floordiv_f32 };
        Tensor::from_vec(zip_map(&a.to_vec1::<f32>()?, &b.to_vec1::<f32>()?, f), l.dims(), &candle_core::Device::Cpu)?
    };
    out.to_dtype(dt)?.to_device(&dev)
}

#[cfg(test)]
mod floor_rem_tests {
    use super::*;

    #[test]
    fn special_values_match_pytorch() {
        let inf = f64::INFINITY;
        assert!(floordiv_f64(inf, 2.0).is_nan());
        assert_eq!(floordiv_f64(2.0, -inf), -1.0);
        assert_eq!(floordiv_f64(-5.0, 2.0), -3.0);
        assert!(floordiv_f64(-0.0, 2.0).is_sign_negative());
        assert_eq!(rem_f64(-5.0, inf), inf);
        assert!(rem_f64(-0.0, 2.0).is_sign_negative());
        assert_eq!(rem_f64(-5.0, 3.0), 1.0);
    }
}
