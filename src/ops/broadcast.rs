//! The four arithmetic ops over broadcast or strided CPU operands (a bias row, a
//! per-channel scale, an expanded scalar gradient, a transposed view): dims that
//! are laid out alike in both operands are merged, and the innermost dim runs as a
//! tight loop with each side either contiguous or a repeated value. Candle's
//! generic strided path computes an index per element and was the hottest frame of
//! the backward passes that broadcast (a sum's gradient times a tensor).
use crate::ops::binary::Bin;
use crate::ops::cpu::{has_avx2_fma, has_avx512};
use crate::ops::parallel::{filled, for_row_runs, par_ok};
use candle_core::{CpuStorage, Storage, Tensor};
use std::mem::MaybeUninit;

/// `l (op) r` broadcast to their common shape, for float32/float64 CPU tensors of
/// one dtype: the four arithmetic ops and `maximum`/`minimum` (NaN propagating, as
/// PyTorch) give the dtype, the six comparisons a 0/1 u8 tensor (Candle's bool);
/// `None` where another path must run.
pub(crate) fn broadcast_arith(l: &Tensor, r: &Tensor, op: Bin) -> Option<Tensor> {
    if !l.device().is_cpu() || !r.device().is_cpu() || l.dtype() != r.dtype() {
        return None;
    }
    let cmp = op.is_cmp();
    if !cmp && !matches!(op, Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Max | Bin::Min) {
        return None;
    }
    let shape = l.shape().broadcast_shape_binary_op(r.shape(), "broadcast").ok()?;
    let (lb, rb) = (l.broadcast_as(&shape).ok()?, r.broadcast_as(&shape).ok()?);
    let dims = shape.dims().to_vec();
    let (dims, sl, sr) = merge(&dims, lb.stride(), rb.stride());
    let (ol, or) = (lb.layout().start_offset(), rb.layout().start_offset());
    let (ls, _) = lb.storage_and_layout();
    let (rs, _) = rb.storage_and_layout();
    let plan = Plan { dims, sl, sr, ol, or };
    let dev = candle_core::Device::Cpu;
    macro_rules! go {
        ($a:expr, $b:expr) => {
            if cmp {
                Tensor::from_vec(plan.compare($a, $b, op), shape, &dev).ok()
            } else {
                Tensor::from_vec(plan.run($a, $b, op), shape, &dev).ok()
            }
        };
    }
    match (&*ls, &*rs) {
        (Storage::Cpu(CpuStorage::F32(a)), Storage::Cpu(CpuStorage::F32(b))) => go!(a, b),
        (Storage::Cpu(CpuStorage::F64(a)), Storage::Cpu(CpuStorage::F64(b))) => go!(a, b),
        _ => None,
    }
}

/// `maximum` as PyTorch: NaN from either side propagates; otherwise Candle's choice
/// (the first operand on ties).
#[inline(always)]
pub(crate) fn nan_max<T: crate::ops::float::Float>(x: T, y: T) -> T {
    if x.is_nan() || y.is_nan() {
        x + y
    } else if x < y {
        y
    } else {
        x
    }
}

/// `minimum` as PyTorch (see `nan_max`).
#[inline(always)]
pub(crate) fn nan_min<T: crate::ops::float::Float>(x: T, y: T) -> T {
    if x.is_nan() || y.is_nan() {
        x + y
    } else if x > y {
        y
    } else {
        x
    }
}

/// Drop size-1 dims and merge neighbours laid out alike in both operands
/// (outer stride = inner stride x inner size, zero strides included).
fn merge(dims: &[usize], sl: &[usize], sr: &[usize]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let (mut d, mut a, mut b): (Vec<usize>, Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new(), Vec::new());
    for i in (0..dims.len()).rev() {
        if dims[i] == 1 {
            continue;
        }
        if let (Some(&dn), Some(&an), Some(&bn)) = (d.last(), a.last(), b.last()) {
            if sl[i] == an * dn && sr[i] == bn * dn {
                *d.last_mut().expect("non-empty") *= dims[i];
                continue;
            }
        }
        d.push(dims[i]);
        a.push(sl[i]);
        b.push(sr[i]);
    }
    if d.is_empty() {
        return (vec![1], vec![1], vec![1]);
    }
    d.reverse();
    a.reverse();
    b.reverse();
    (d, a, b)
}

struct Plan {
    dims: Vec<usize>,
    sl: Vec<usize>,
    sr: Vec<usize>,
    ol: usize,
    or: usize,
}

impl Plan {
    fn run<T: crate::ops::float::Float>(&self, a: &[T], b: &[T], op: Bin) -> Vec<T> {
        match op {
            Bin::Add => self.run_with(a, b, |x, y| x + y),
            Bin::Sub => self.run_with(a, b, |x, y| x - y),
            Bin::Mul => self.run_with(a, b, |x, y| x * y),
            Bin::Max => self.run_with(a, b, nan_max),
            Bin::Min => self.run_with(a, b, nan_min),
            _ => self.run_with(a, b, |x, y| x / y),
        }
    }

    /// A comparison (`op.is_cmp()`) as 0/1 bytes.
    fn compare<T: crate::ops::float::Float>(&self, a: &[T], b: &[T], op: Bin) -> Vec<u8> {
        match op {
            Bin::Eq => self.run_with(a, b, |x, y| u8::from(x == y)),
            Bin::Ne => self.run_with(a, b, |x, y| u8::from(x != y)),
            Bin::Lt => self.run_with(a, b, |x, y| u8::from(x < y)),
            Bin::Le => self.run_with(a, b, |x, y| u8::from(x <= y)),
            Bin::Gt => self.run_with(a, b, |x, y| u8::from(x > y)),
            _ => self.run_with(a, b, |x, y| u8::from(x >= y)),
        }
    }

    fn run_with<T: Copy + Sync, U: Copy + Send, F: Fn(T, T) -> U + Sync + Send + Copy>(&self, a: &[T], b: &[T], f: F) -> Vec<U> {
        let r = self.dims.len();
        let n = *self.dims.last().expect("at least one dim");
        let (il, ir) = (self.sl[r - 1], self.sr[r - 1]);
        let total: usize = self.dims.iter().product();
        let (wide, simd) = (has_avx512(), has_avx2_fma());
        filled(total, |out| {
            for_row_runs(out, n, par_ok(total), |row, col, piece| {
                let (pl, pr) = self.row_start(row);
                let at = Row { pl: pl + col * il, pr: pr + col * ir, il, ir };
                #[cfg(target_arch = "x86_64")]
                if wide {
                    // SAFETY: `wide` is `has_avx512()`.
                    return unsafe { inner_avx512(piece, a, b, at, &f) };
                } else if simd {
                    // SAFETY: `simd` is `has_avx2_fma()`.
                    return unsafe { inner_avx2(piece, a, b, at, &f) };
                }
                let _ = (wide, simd);
                inner(piece, a, b, at, &f);
            })
        })
    }

    /// Where row `row` (of the merged shape, last dim excluded) starts in each operand.
    fn row_start(&self, row: usize) -> (usize, usize) {
        let (mut pl, mut pr) = (self.ol, self.or);
        let mut o = row;
        for d in (0..self.dims.len() - 1).rev() {
            let i = o % self.dims[d];
            o /= self.dims[d];
            pl += i * self.sl[d];
            pr += i * self.sr[d];
        }
        (pl, pr)
    }
}

/// A run of one row: its start in each operand and each operand's stride along it.
#[derive(Clone, Copy)]
struct Row {
    pl: usize,
    pr: usize,
    il: usize,
    ir: usize,
}

/// One run: each side contiguous (stride 1), a repeated value (stride 0), or strided.
#[inline(always)]
fn inner<T: Copy, U: Copy, F: Fn(T, T) -> U>(row: &mut [MaybeUninit<U>], a: &[T], b: &[T], at: Row, f: &F) {
    let n = row.len();
    let Row { pl, pr, il, ir } = at;
    match (il, ir) {
        (1, 1) => {
            for ((d, &x), &y) in row.iter_mut().zip(&a[pl..pl + n]).zip(&b[pr..pr + n]) {
                d.write(f(x, y));
            }
        }
        (1, 0) => {
            let y = b[pr];
            for (d, &x) in row.iter_mut().zip(&a[pl..pl + n]) {
                d.write(f(x, y));
            }
        }
        (0, 1) => {
            let x = a[pl];
            for (d, &y) in row.iter_mut().zip(&b[pr..pr + n]) {
                d.write(f(x, y));
            }
        }
        (0, 0) => {
            let v = f(a[pl], b[pr]);
            for d in row.iter_mut() {
                d.write(v);
            }
        }
        // Strided sides (a stepped slice `x[..., ::2]`, a transposed view): iterators
        // rather than indices, so there is no bounds check per element and LLVM can
        // vectorize the even/odd loads of a step of 2.
        (s, 1) => {
            for ((d, &x), &y) in row.iter_mut().zip(a[pl..].iter().step_by(s)).zip(&b[pr..pr + n]) {
                d.write(f(x, y));
            }
        }
        (1, s) => {
            for ((d, &x), &y) in row.iter_mut().zip(&a[pl..pl + n]).zip(b[pr..].iter().step_by(s)) {
                d.write(f(x, y));
            }
        }
        (s, 0) => {
            let y = b[pr];
            for (d, &x) in row.iter_mut().zip(a[pl..].iter().step_by(s)) {
                d.write(f(x, y));
            }
        }
        (0, s) => {
            let x = a[pl];
            for (d, &y) in row.iter_mut().zip(b[pr..].iter().step_by(s)) {
                d.write(f(x, y));
            }
        }
        (s, t) => {
            for ((d, &x), &y) in row.iter_mut().zip(a[pl..].iter().step_by(s)).zip(b[pr..].iter().step_by(t)) {
                d.write(f(x, y));
            }
        }
    }
}

/// `inner` compiled for AVX2 (8 lanes).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn inner_avx2<T: Copy, U: Copy, F: Fn(T, T) -> U>(row: &mut [MaybeUninit<U>], a: &[T], b: &[T], at: Row, f: &F) {
    inner(row, a, b, at, f)
}

/// `inner` compiled for AVX-512 (16 lanes).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn inner_avx512<T: Copy, U: Copy, F: Fn(T, T) -> U>(row: &mut [MaybeUninit<U>], a: &[T], b: &[T], at: Row, f: &F) {
    inner(row, a, b, at, f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Every broadcast and stride pattern against Candle's own broadcast ops.
    #[test]
    fn matches_candle_broadcast() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let a = Tensor::arange(0f32, 24.0, &dev)?.reshape((2, 3, 4))?.affine(0.37, -2.0)?;
        let cases: Vec<(Tensor, Tensor)> = vec![
            (a.clone(), Tensor::arange(1f32, 5.0, &dev)?),
            (a.clone(), Tensor::arange(1f32, 4.0, &dev)?.reshape((3, 1))?),
            (Tensor::new(2.5f32, &dev)?, a.clone()),
            (a.transpose(0, 2)?, a.transpose(0, 2)?.affine(0.5, 1.0)?.contiguous()?),
            (a.narrow(2, 1, 2)?, a.narrow(2, 0, 2)?),
            (Tensor::arange(1f32, 3.0, &dev)?.reshape((2, 1, 1))?, a.clone()),
            (Tensor::new(3f32, &dev)?.broadcast_as((2, 3, 4))?, a.clone()),
            // Stepped views (`x[..., ::2]`: inner stride 2), against each kind of side.
            (a.unfold(2, 1, 2)?.squeeze(3)?, a.narrow(2, 0, 2)?.contiguous()?),
            (a.narrow(2, 0, 2)?.contiguous()?, a.unfold(2, 1, 2)?.squeeze(3)?),
            (a.unfold(2, 1, 2)?.squeeze(3)?, Tensor::arange(1f32, 4.0, &dev)?.reshape((3, 1))?),
            (Tensor::arange(1f32, 4.0, &dev)?.reshape((3, 1))?, a.unfold(2, 1, 3)?.squeeze(3)?),
            (a.unfold(2, 1, 2)?.squeeze(3)?, a.narrow(2, 1, 3)?.unfold(2, 1, 2)?.squeeze(3)?),
            (Tensor::new(2f32, &dev)?.broadcast_as((2, 3))?, Tensor::new(-1.5f32, &dev)?),
        ];
        for (l, r) in cases {
            for op in [Bin::Add, Bin::Sub, Bin::Mul, Bin::Div] {
                let got = broadcast_arith(&l, &r, op).expect("f32 CPU");
                let want = match op {
                    Bin::Add => l.broadcast_add(&r)?,
                    Bin::Sub => l.broadcast_sub(&r)?,
                    Bin::Mul => l.broadcast_mul(&r)?,
                    _ => l.broadcast_div(&r)?,
                };
                assert_eq!(got.dims(), want.dims());
                assert_eq!(got.flatten_all()?.to_vec1::<f32>()?, want.flatten_all()?.to_vec1::<f32>()?, "{op:?}");
            }
        }
        Ok(())
    }
}
