//! Elementwise ops written into a tensor's own storage: `add_`, `sub_`, `mul_`, `div_`,
//! `+=` and friends, the unary twins (`exp_`, `relu_`, `clamp_`, ...), `addcmul_`,
//! `addcdiv_` and `lerp_` outside autograd, and the engine's gradient sums. One pass
//! over the destination (read, compute, write back), no new buffer.
//!
//! Why: these ops were computed out of place into a fresh buffer and copied back, three
//! passes and an allocation where PyTorch makes one. On 2 threads, `g.add_(h)` took
//! 35 us on 65K floats (torch 7), 225 us on 400K (torch 26) and 899 us on 1.56M (torch
//! 270), so a word LM's plain SGD update (`p.data.add_(p.grad, alpha=-lr)` over 3.8M
//! parameters) took 4 ms against torch's 1 ms.
//!
//! The element formulas are those of the out-of-place ops, so `x.add_(y)` and `x + y`
//! agree bit for bit: `x + c`, `x - c`, `x * c`, `x / c` for a scalar `c` rounded to the
//! dtype first, and `x + y * alpha` (two roundings, as `x + y.mul(alpha)`). The unary
//! twins run `Fast`'s element formulas, `clamp_` `nan_max` / `nan_min` (the out-of-place
//! clamp's), `addcmul_` `x + (y * v) * z`, `addcdiv_` `x + (y * v) / z` and `lerp_`
//! the two-sided form of `Tensor.lerp` (all as the out-of-place compositions round).
use crate::ops::binary::Bin;
use crate::ops::broadcast::{nan_max, nan_min};
use crate::ops::composite::{addc, lerp_factor, lerp_number};
use crate::ops::float::Float;
use crate::ops::simd_map::{map_assign, zip3_assign, zip_assign};
use crate::ops::unary::Fast;
use candle_core::{CpuStorage, DType, InplaceOp1, InplaceOp2, InplaceOp3, Layout, Tensor};

/// The right-hand side of an in-place op.
#[derive(Clone, Copy)]
pub(crate) enum Rhs<'a> {
    /// A Python number (or a value read from one).
    Scalar(f64),
    /// A tensor of the destination's dtype and shape.
    Tensor(&'a Tensor),
    /// `tensor * alpha` (`add_` / `sub_` with `alpha`).
    Scaled(&'a Tensor, f64),
}

/// `dst = dst (op) rhs` in `dst`'s storage, for `op` one of the four arithmetic ops. It
/// applies to a contiguous CPU float32/float64 `dst` (any start offset) and a tensor
/// operand of the same dtype and shape, contiguous, in another storage or exactly
/// `dst` itself (`x.add_(x)`). `Ok(false)`: not those, nothing written; the caller takes
/// the general path. Autograd is the caller's business: this writes values only.
pub(crate) fn arith_assign(dst: &Tensor, op: Bin, rhs: Rhs) -> candle_core::Result<bool> {
    if !matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div)
        || !dst.device().is_cpu()
        || !matches!(dst.dtype(), DType::F32 | DType::F64)
        || dst.layout().contiguous_offsets().is_none()
    {
        return Ok(false);
    }
    let (src, alpha) = match rhs {
        Rhs::Scalar(c) => {
            dst.inplace_op1(&ScalarAssign { op, c })?;
            return Ok(true);
        }
        Rhs::Tensor(t) => (t, None),
        Rhs::Scaled(t, a) => (t, Some(a)),
    };
    if alpha.is_some() && !matches!(op, Bin::Add | Bin::Sub) {
        return Ok(false);
    }
    let fits =
        src.device().is_cpu() && src.dtype() == dst.dtype() && src.dims() == dst.dims() && src.layout().contiguous_offsets().is_some();
    if !fits {
        return Ok(false);
    }
    let c = TensorAssign { op, alpha };
    if crate::ops::layout::storage_key(src) != crate::ops::layout::storage_key(dst) {
        dst.inplace_op2(src, &c)?;
    } else if src.layout().start_offset() == dst.layout().start_offset() {
        // One storage cannot be locked for writing and reading at once: `x (op) x`
        // reads each element where it writes it.
        dst.inplace_op1(&SelfAssign(c))?;
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// `dst += src` for two CPU tensors of one float dtype and shape, each densely laid out
/// (any start offset), in distinct storages. `Ok(false)`: not those, nothing written.
/// The engine's gradient sums go here when it holds the only reference to the first
/// (as PyTorch's accumulation adds into a buffer it owns).
pub(crate) fn add_assign(dst: &Tensor, src: &Tensor) -> candle_core::Result<bool> {
    if crate::ops::layout::storage_key(src) == crate::ops::layout::storage_key(dst) {
        return Ok(false);
    }
    arith_assign(dst, Bin::Add, Rhs::Tensor(src))
}

/// Every element of `dst` set to `value` (`fill_`, `zero_`): a contiguous CPU float32 /
/// float64 tensor, or any dtype for a zero (all-zero bits are zero in each). `Ok(false)`:
/// not those, nothing written.
pub(crate) fn fill_assign(dst: &Tensor, value: f64) -> candle_core::Result<bool> {
    let float = matches!(dst.dtype(), DType::F32 | DType::F64);
    if !dst.device().is_cpu() || dst.layout().contiguous_offsets().is_none() || !(float || value == 0.0) {
        return Ok(false);
    }
    dst.inplace_op1(&Fill(value))?;
    Ok(true)
}

/// A unary function applied in place.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Unary {
    /// One of `ops::unary`'s vectorized functions.
    Fast(Fast),
    /// `clamp(min, max)` with number bounds (either may be absent).
    Clamp(Option<f64>, Option<f64>),
}

/// `x = f(x)` in `dst`'s storage for a dense CPU float32/float64 `dst`. `Ok(false)`: not
/// those, nothing written.
pub(crate) fn unary_assign(dst: &Tensor, f: Unary) -> candle_core::Result<bool> {
    if !dense_float(dst) {
        return Ok(false);
    }
    dst.inplace_op1(&UnaryAssign(f))?;
    Ok(true)
}

/// `dst += value * t1 * t2` (`addcmul_`) or `dst += value * t1 / t2` (`addcdiv_`), for
/// `t1`, `t2` of `dst`'s dtype and shape, dense, each in a storage other than `dst`'s.
/// `Ok(false)`: not those, nothing written.
pub(crate) fn addc_assign(dst: &Tensor, t1: &Tensor, t2: &Tensor, value: f64, divide: bool) -> candle_core::Result<bool> {
    if !dense_float(dst) || !operand_fits(dst, t1) || !operand_fits(dst, t2) {
        return Ok(false);
    }
    // `t1` and `t2` may share a storage (`v.addcmul_(g, g)`): Candle reads it twice.
    dst.inplace_op3(t1, t2, &Addc { value, divide })?;
    Ok(true)
}

/// `dst = lerp(dst, end, weight)` for a number `weight` and an `end` of `dst`'s dtype and
/// shape, dense, in another storage. `Ok(false)`: not those, nothing written.
pub(crate) fn lerp_assign(dst: &Tensor, end: &Tensor, weight: f64) -> candle_core::Result<bool> {
    if !dense_float(dst) || !operand_fits(dst, end) {
        return Ok(false);
    }
    dst.inplace_op2(end, &Lerp(weight))?;
    Ok(true)
}

/// A contiguous (any start offset) CPU float32/float64 tensor.
fn dense_float(t: &Tensor) -> bool {
    t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64) && t.layout().contiguous_offsets().is_some()
}

/// `src` can be read beside `dst`: a dense CPU tensor of its dtype and shape in another storage.
fn operand_fits(dst: &Tensor, src: &Tensor) -> bool {
    dense_float(src)
        && src.dtype() == dst.dtype()
        && src.dims() == dst.dims()
        && crate::ops::layout::storage_key(src) != crate::ops::layout::storage_key(dst)
}

struct UnaryAssign(Unary);

fn unary_pass<T: Float>(v: &mut [T], f: Unary) {
    match f {
        Unary::Fast(f) => f.run_assign(v),
        Unary::Clamp(Some(lo), Some(hi)) => {
            let (lo, hi) = (T::of(lo), T::of(hi));
            map_assign(v, move |x| nan_min(nan_max(x, lo), hi))
        }
        Unary::Clamp(Some(lo), None) => map_assign(v, move |x| nan_max(x, T::of(lo))),
        Unary::Clamp(None, Some(hi)) => map_assign(v, move |x| nan_min(x, T::of(hi))),
        Unary::Clamp(None, None) => {}
    }
}

impl InplaceOp1 for UnaryAssign {
    fn name(&self) -> &'static str {
        "unary_assign"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> candle_core::Result<()> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("{:?}: expected a dense tensor", self.0) };
        match s {
            CpuStorage::F32(v) => unary_pass(&mut v[a..b], self.0),
            CpuStorage::F64(v) => unary_pass(&mut v[a..b], self.0),
            _ => candle_core::bail!("{:?}: expected a float32 or float64 tensor", self.0),
        }
        Ok(())
    }
}

/// `x + (y * value) * z` or `x + (y * value) / z` in place.
struct Addc {
    value: f64,
    divide: bool,
}

fn addc_pass<T: Float>(d: &mut [T], y: &[T], z: &[T], value: f64, divide: bool) {
    let v = T::of(value);
    if divide {
        zip3_assign(d, y, z, move |x, y, z| addc(x, y, z, v, true))
    } else {
        zip3_assign(d, y, z, move |x, y, z| addc(x, y, z, v, false))
    }
}

impl InplaceOp3 for Addc {
    fn name(&self) -> &'static str {
        if self.divide {
            "addcdiv_"
        } else {
            "addcmul_"
        }
    }
    fn cpu_fwd(
        &self,
        d: &mut CpuStorage,
        dl: &Layout,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<()> {
        let (Some((d0, d1)), Some((a0, a1)), Some((b0, b1))) = (dl.contiguous_offsets(), l1.contiguous_offsets(), l2.contiguous_offsets())
        else {
            candle_core::bail!("{}: expected dense operands", self.name())
        };
        match (d, s1, s2) {
            (CpuStorage::F32(d), CpuStorage::F32(y), CpuStorage::F32(z)) => {
                addc_pass(&mut d[d0..d1], &y[a0..a1], &z[b0..b1], self.value, self.divide)
            }
            (CpuStorage::F64(d), CpuStorage::F64(y), CpuStorage::F64(z)) => {
                addc_pass(&mut d[d0..d1], &y[a0..a1], &z[b0..b1], self.value, self.divide)
            }
            _ => candle_core::bail!("{}: expected float32 or float64 operands of one dtype", self.name()),
        }
        Ok(())
    }
}

/// `lerp(x, end, weight)` in place.
struct Lerp(f64);

/// `Tensor.lerp`'s number-weight form, element by element (`composite::lerp_number`).
fn lerp_pass<T: Float>(d: &mut [T], e: &[T], w: f64) {
    let (small, m) = lerp_factor::<T>(w);
    if small {
        zip_assign(d, e, move |x, e| lerp_number(x, e, true, m))
    } else {
        zip_assign(d, e, move |x, e| lerp_number(x, e, false, m))
    }
}

impl InplaceOp2 for Lerp {
    fn name(&self) -> &'static str {
        "lerp_"
    }
    fn cpu_fwd(&self, d: &mut CpuStorage, dl: &Layout, s: &CpuStorage, sl: &Layout) -> candle_core::Result<()> {
        let (Some((d0, d1)), Some((s0, s1))) = (dl.contiguous_offsets(), sl.contiguous_offsets()) else {
            candle_core::bail!("lerp_: expected dense operands")
        };
        match (d, s) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => lerp_pass(&mut a[d0..d1], &b[s0..s1], self.0),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => lerp_pass(&mut a[d0..d1], &b[s0..s1], self.0),
            _ => candle_core::bail!("lerp_: expected float32 or float64 operands of one dtype"),
        }
        Ok(())
    }
}

/// Every element set to one value.
struct Fill(f64);

fn fill_pass<T: Copy + Send + Sync>(v: &mut [T], x: T) {
    map_assign(v, move |_| x)
}

impl InplaceOp1 for Fill {
    fn name(&self) -> &'static str {
        "fill_"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> candle_core::Result<()> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("fill_: expected a dense tensor") };
        let zero = self.0 == 0.0;
        match s {
            CpuStorage::F32(v) => fill_pass(&mut v[a..b], self.0 as f32),
            CpuStorage::F64(v) => fill_pass(&mut v[a..b], self.0),
            CpuStorage::U8(v) if zero => fill_pass(&mut v[a..b], 0),
            CpuStorage::U32(v) if zero => fill_pass(&mut v[a..b], 0),
            CpuStorage::I16(v) if zero => fill_pass(&mut v[a..b], 0),
            CpuStorage::I32(v) if zero => fill_pass(&mut v[a..b], 0),
            CpuStorage::I64(v) if zero => fill_pass(&mut v[a..b], 0),
            CpuStorage::BF16(v) if zero => fill_pass(&mut v[a..b], half::bf16::ZERO),
            CpuStorage::F16(v) if zero => fill_pass(&mut v[a..b], half::f16::ZERO),
            _ => candle_core::bail!("fill_: no direct fill of this dtype with {}", self.0),
        }
        Ok(())
    }
}

/// `x (op) c` in place.
struct ScalarAssign {
    op: Bin,
    c: f64,
}

fn scalar_pass<T: Float>(v: &mut [T], op: Bin, c: f64) {
    let c = T::of(c);
    match op {
        Bin::Add => map_assign(v, move |x| x + c),
        Bin::Sub => map_assign(v, move |x| x - c),
        Bin::Mul => map_assign(v, move |x| x * c),
        _ => map_assign(v, move |x| x / c),
    }
}

impl InplaceOp1 for ScalarAssign {
    fn name(&self) -> &'static str {
        "arith_assign"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> candle_core::Result<()> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("{}_: expected a dense tensor", self.op.name()) };
        match s {
            CpuStorage::F32(v) => scalar_pass(&mut v[a..b], self.op, self.c),
            CpuStorage::F64(v) => scalar_pass(&mut v[a..b], self.op, self.c),
            _ => candle_core::bail!("{}_: expected a float32 or float64 tensor", self.op.name()),
        }
        Ok(())
    }
}

/// `x (op) y` (or `x (op) y * alpha`) in place.
#[derive(Clone, Copy)]
struct TensorAssign {
    op: Bin,
    alpha: Option<f64>,
}

fn tensor_pass<T: Float>(d: &mut [T], s: &[T], op: Bin, alpha: Option<f64>) {
    match (op, alpha.map(T::of)) {
        (Bin::Add, Some(a)) => zip_assign(d, s, move |x, y| x + y * a),
        (Bin::Sub, Some(a)) => zip_assign(d, s, move |x, y| x - y * a),
        (Bin::Add, None) => zip_assign(d, s, |x, y| x + y),
        (Bin::Sub, None) => zip_assign(d, s, |x, y| x - y),
        (Bin::Mul, _) => zip_assign(d, s, |x, y| x * y),
        _ => zip_assign(d, s, |x, y| x / y),
    }
}

impl InplaceOp2 for TensorAssign {
    fn name(&self) -> &'static str {
        "arith_assign"
    }
    fn cpu_fwd(&self, d: &mut CpuStorage, dl: &Layout, s: &CpuStorage, sl: &Layout) -> candle_core::Result<()> {
        let (Some((d0, d1)), Some((s0, s1))) = (dl.contiguous_offsets(), sl.contiguous_offsets()) else {
            candle_core::bail!("{}_: expected dense operands", self.op.name())
        };
        match (d, s) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => tensor_pass(&mut a[d0..d1], &b[s0..s1], self.op, self.alpha),
            (CpuStorage::F64(a), CpuStorage::F64(b)) => tensor_pass(&mut a[d0..d1], &b[s0..s1], self.op, self.alpha),
            _ => candle_core::bail!("{}_: expected float32 or float64 operands of one dtype", self.op.name()),
        }
        Ok(())
    }
}

/// `x (op) x` in place (the operand is the destination itself).
struct SelfAssign(TensorAssign);

// `x - x` and `x / x` are meant: NaN for an infinite or NaN `x`, as the out-of-place op.
#[allow(clippy::eq_op)]
fn self_pass<T: Float>(v: &mut [T], op: Bin, alpha: Option<f64>) {
    match (op, alpha.map(T::of)) {
        (Bin::Add, Some(a)) => map_assign(v, move |x| x + x * a),
        (Bin::Sub, Some(a)) => map_assign(v, move |x| x - x * a),
        (Bin::Add, None) => map_assign(v, |x| x + x),
        (Bin::Sub, None) => map_assign(v, |x| x - x),
        (Bin::Mul, _) => map_assign(v, |x| x * x),
        _ => map_assign(v, |x| x / x),
    }
}

impl InplaceOp1 for SelfAssign {
    fn name(&self) -> &'static str {
        "arith_assign"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> candle_core::Result<()> {
        let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("{}_: expected a dense tensor", self.0.op.name()) };
        match s {
            CpuStorage::F32(v) => self_pass(&mut v[a..b], self.0.op, self.0.alpha),
            CpuStorage::F64(v) => self_pass(&mut v[a..b], self.0.op, self.0.alpha),
            _ => candle_core::bail!("{}_: expected a float32 or float64 tensor", self.0.op.name()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v, v.len(), &Device::Cpu).unwrap()
    }

    /// Every op and operand kind against the out-of-place formulas, on a length that
    /// splits over threads and leaves a vector tail, and on a view with a start offset.
    #[test]
    fn assign_matches_the_out_of_place_formulas() {
        let mut vals = crate::ops::test_stream(7);
        let n = (1 << 16) + 13;
        let (xv, yv) = (vals(n), vals(n).iter().map(|v| v + 0.75).collect::<Vec<_>>());
        type Case = (Bin, fn(f32, f32) -> f32);
        let cases: [Case; 4] = [(Bin::Add, |x, y| x + y), (Bin::Sub, |x, y| x - y), (Bin::Mul, |x, y| x * y), (Bin::Div, |x, y| x / y)];
        for (op, f) in cases {
            let (x, y) = (t(&xv), t(&yv));
            assert!(arith_assign(&x, op, Rhs::Tensor(&y)).unwrap());
            let want: Vec<f32> = xv.iter().zip(&yv).map(|(&a, &b)| f(a, b)).collect();
            assert_eq!(x.to_vec1::<f32>().unwrap(), want, "{op:?} tensor");
            let x = t(&xv);
            assert!(arith_assign(&x, op, Rhs::Scalar(0.1)).unwrap());
            let want: Vec<f32> = xv.iter().map(|&a| f(a, 0.1f64 as f32)).collect();
            assert_eq!(x.to_vec1::<f32>().unwrap(), want, "{op:?} scalar");
            let x = t(&xv);
            assert!(arith_assign(&x, op, Rhs::Tensor(&x.clone())).unwrap());
            let want: Vec<f32> = xv.iter().map(|&a| f(a, a)).collect();
            assert_eq!(x.to_vec1::<f32>().unwrap(), want, "{op:?} self");
        }
        let (x, y) = (t(&xv), t(&yv));
        assert!(arith_assign(&x, Bin::Sub, Rhs::Scaled(&y, -20.0)).unwrap());
        let want: Vec<f32> = xv.iter().zip(&yv).map(|(&a, &b)| a - b * -20.0).collect();
        assert_eq!(x.to_vec1::<f32>().unwrap(), want, "scaled");
        // A row of a matrix: only that row changes.
        let m = Tensor::from_slice(&xv[..30], (3, 10), &Device::Cpu).unwrap();
        let row = m.get(1).unwrap();
        assert!(arith_assign(&row, Bin::Mul, Rhs::Scalar(2.0)).unwrap());
        let got = m.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&xv[..30]).enumerate() {
            assert_eq!(g, if (10..20).contains(&i) { w * 2.0 } else { w }, "element {i}");
        }
    }

    #[test]
    fn fill_sets_every_element_of_the_view_only() {
        let m = Tensor::from_slice(&[1.0f32; 12], (3, 4), &Device::Cpu).unwrap();
        assert!(fill_assign(&m.get(1).unwrap(), 0.1).unwrap());
        let got = m.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let want: Vec<f32> = (0..12).map(|i| if (4..8).contains(&i) { 0.1f64 as f32 } else { 1.0 }).collect();
        assert_eq!(got, want);
        let ints = Tensor::new(&[3i64, 4, 5], &Device::Cpu).unwrap();
        assert!(!fill_assign(&ints, 2.0).unwrap(), "a non-zero integer fill is the general path's");
        assert!(fill_assign(&ints, 0.0).unwrap());
        assert_eq!(ints.to_vec1::<i64>().unwrap(), [0, 0, 0]);
        let big = Tensor::zeros((1 << 17) + 3, DType::F64, &Device::Cpu).unwrap();
        assert!(fill_assign(&big, -2.5).unwrap());
        assert!(big.to_vec1::<f64>().unwrap().iter().all(|&x| x == -2.5));
    }

    /// What the fast path must leave to the general one: other dtypes, shapes, layouts.
    #[test]
    fn assign_declines_what_it_cannot_do() {
        let x = t(&[1.0, 2.0, 3.0, 4.0]);
        let ints = Tensor::new(&[1i64, 2, 3, 4], &Device::Cpu).unwrap();
        assert!(!arith_assign(&ints, Bin::Add, Rhs::Scalar(1.0)).unwrap());
        assert!(!arith_assign(&x, Bin::Add, Rhs::Tensor(&t(&[1.0, 2.0]))).unwrap());
        assert!(!arith_assign(&x, Bin::Add, Rhs::Tensor(&x.to_dtype(DType::F64).unwrap())).unwrap());
        assert!(!arith_assign(&x, Bin::Pow, Rhs::Scalar(2.0)).unwrap());
        assert!(!arith_assign(&x, Bin::Mul, Rhs::Scaled(&x, 2.0)).unwrap());
        let m = x.reshape((2, 2)).unwrap();
        assert!(!arith_assign(&m.t().unwrap(), Bin::Add, Rhs::Scalar(1.0)).unwrap());
        assert!(!arith_assign(&m, Bin::Add, Rhs::Tensor(&m.t().unwrap())).unwrap());
        // Overlapping parts of one storage (not the same elements): declined.
        let (a, b) = (x.narrow(0, 0, 2).unwrap(), x.narrow(0, 1, 2).unwrap());
        assert!(!arith_assign(&a, Bin::Add, Rhs::Tensor(&b)).unwrap());
        // The unary, addc and lerp passes: integer and strided destinations, operands in
        // the destination's storage, of another dtype or shape.
        assert!(!unary_assign(&ints, Unary::Fast(Fast::Relu)).unwrap());
        assert!(!unary_assign(&m.t().unwrap(), Unary::Clamp(Some(0.0), None)).unwrap());
        let y = t(&[5.0, 6.0, 7.0, 8.0]);
        assert!(!addc_assign(&x, &x, &y, 1.0, false).unwrap());
        assert!(!addc_assign(&x, &y, &y.to_dtype(DType::F64).unwrap(), 1.0, true).unwrap());
        assert!(!lerp_assign(&a, &b, 0.5).unwrap());
        assert!(!lerp_assign(&x, &t(&[1.0, 2.0]), 0.5).unwrap());
        assert_eq!(x.to_vec1::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        // What they do take: one operand read twice (`v.addcmul_(g, g)`), a row view.
        assert!(addc_assign(&x, &y, &y, 0.5, false).unwrap());
        assert_eq!(x.to_vec1::<f32>().unwrap(), [13.5, 20.0, 27.5, 36.0]);
        assert!(lerp_assign(&m.get(1).unwrap(), &t(&[0.0, 0.0]), 0.75).unwrap());
        assert_eq!(x.to_vec1::<f32>().unwrap(), [13.5, 20.0, 6.875, 9.0]);
    }
}
