//! The four arithmetic ops over broadcast or strided CPU operands (a bias row, a
//! per-channel scale, an expanded scalar gradient, a stepped slice): dims that are
//! laid out alike in both operands are merged, and the innermost dim runs as a tight
//! loop with each side contiguous, a repeated value, or strided (read a block at a
//! time into a dense buffer); a transposed view is copied densely first. Candle's
//! generic strided path computes an index per element and was the hottest frame of
//! the backward passes that broadcast (a sum's gradient times a tensor).
use crate::ops::binary::Bin;
use crate::ops::cpu::{has_avx2_fma, has_avx512};
use crate::ops::layout::Dense;
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
    // Transposed views are copied densely first (tile by tile; see `layout::is_transpose`),
    // once when both sides are the same view (`x + x`).
    let transposed = |t: &Tensor| !t.is_contiguous() && crate::ops::layout::is_transpose(t.dims(), t.stride());
    let (l, r) = match (transposed(l), transposed(r)) {
        (false, false) => (l.clone(), r.clone()),
        (true, true) if l.layout() == r.layout() && crate::ops::layout::storage_key(l) == crate::ops::layout::storage_key(r) => {
            let d = l.dense().ok()?;
            (d.clone(), d)
        }
        (a, b) => (if a { l.dense().ok()? } else { l.clone() }, if b { r.dense().ok()? } else { r.clone() }),
    };
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

/// `f(x)` for every element of a float32/float64 CPU view at any strides (a stepped
/// slice, a transposed or expanded view), into a dense result: the view's runs read
/// as `broadcast_arith` reads an operand, so no dense copy is made first, except of a
/// transposed view (as there).
pub(crate) fn map_strided<T: crate::ops::float::Float>(
    src: &[T],
    dims: &[usize],
    strides: &[usize],
    off: usize,
    f: impl Fn(T) -> T + Sync + Send + Copy,
) -> Vec<T> {
    if crate::ops::layout::is_transpose(dims, strides) {
        return crate::ops::simd_map::map(&crate::ops::layout::strided(src, dims, strides, off), f);
    }
    let zeros = vec![0; dims.len()];
    let (dims, sl, sr) = merge(dims, strides, &zeros);
    let plan = Plan { dims, sl, sr, ol: off, or: 0 };
    plan.run_with(src, &[T::ZERO], move |x, _| f(x))
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
    if at.il <= 1 && at.ir <= 1 {
        return dense_run(row, a, b, at, f);
    }
    // Strided sides (a stepped slice `x[..., ::2]`, a transposed view) are read a block
    // at a time into dense buffers (`gather_step_in`: steps 2 to 4 vectorized), then the
    // block runs as a contiguous one. Element by element through an iterator with the
    // step in a register, `x[..., ::2] * c` on (8, 256, 384) took 245 us (torch 246).
    const BLOCK: usize = 256;
    let mut ba = [MaybeUninit::<T>::uninit(); BLOCK];
    let mut bb = [MaybeUninit::<T>::uninit(); BLOCK];
    let Row { pl, pr, il, ir } = at;
    for (k, out) in row.chunks_mut(BLOCK).enumerate() {
        let m = out.len();
        let (x, xl, xi) = dense_side(&mut ba[..m], a, pl + k * BLOCK * il, il);
        let (y, yr, yi) = dense_side(&mut bb[..m], b, pr + k * BLOCK * ir, ir);
        dense_run(out, x, y, Row { pl: xl, pr: yr, il: xi, ir: yi }, f);
    }
}

/// One operand of a block of `buf.len()` elements from `start` at stride `step`: the
/// operand itself where it is contiguous or repeated (`step` <= 1), else gathered into
/// `buf`. Returns (elements, start, stride) for `dense_run`.
#[inline(always)]
fn dense_side<'a, T: Copy>(buf: &'a mut [MaybeUninit<T>], src: &'a [T], start: usize, step: usize) -> (&'a [T], usize, usize) {
    if step <= 1 {
        return (src, start, step);
    }
    crate::ops::layout::gather_step_in(buf, &src[start..], step);
    // SAFETY: `gather_step_in` wrote every element of `buf`; `MaybeUninit<T>` has `T`'s
    // layout.
    (unsafe { &*(buf as *const [MaybeUninit<T>] as *const [T]) }, 0, 1)
}

/// A run whose sides are each contiguous (stride 1) or a repeated value (stride 0).
#[inline(always)]
fn dense_run<T: Copy, U: Copy, F: Fn(T, T) -> U>(row: &mut [MaybeUninit<U>], a: &[T], b: &[T], at: Row, f: &F) {
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
        _ => {
            let v = f(a[pl], b[pr]);
            for d in row.iter_mut() {
                d.write(v);
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

    /// `map_strided` over stepped, transposed, narrowed and expanded views equals
    /// Candle's affine on them.
    #[test]
    fn map_strided_reads_every_view_kind() -> candle_core::Result<()> {
        let dev = Device::Cpu;
        let long = Tensor::arange(0f64, 6600.0, &dev)?.reshape((2, 3, 1100))?.affine(0.01, -3.0)?;
        let views = [
            long.narrow(2, 1, 1099)?.unfold(2, 1, 2)?.squeeze(3)?,
            long.unfold(2, 1, 3)?.squeeze(3)?,
            long.unfold(2, 1, 6)?.squeeze(3)?,
            long.transpose(0, 2)?,
            long.narrow(2, 5, 7)?,
            Tensor::new(1.5f64, &dev)?.broadcast_as((4, 300))?,
        ];
        for v in views {
            let (st, l) = v.storage_and_layout();
            let candle_core::Storage::Cpu(CpuStorage::F64(src)) = &*st else { panic!("f64 CPU") };
            let got = map_strided(src, l.dims(), l.stride(), l.start_offset(), |x| x * 3.0 - 1.0);
            let want = v.affine(3.0, -1.0)?.flatten_all()?.to_vec1::<f64>()?;
            assert_eq!(got, want, "{:?} {:?}", l.dims(), l.stride());
        }
        Ok(())
    }

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
        // Stepped views whose runs span several of `inner`'s blocks and end part-way
        // through one (the rows merge into one run of 3300 / s), every step kind.
        // No element is 0, so `x / x` has no NaN (which the equality below would reject).
        let long = Tensor::arange(0f32, 6600.0, &dev)?.reshape((2, 3, 1100))?.affine(0.01, -3.005)?;
        let step = |s: usize, from: usize| long.narrow(2, from, 1100 - from)?.unfold(2, 1, s)?.squeeze(3);
        let cases = cases.into_iter().chain([
            (step(2, 0)?, step(2, 1)?),
            (step(3, 0)?, Tensor::new(0.7f32, &dev)?),
            (Tensor::new(0.7f32, &dev)?, step(4, 0)?),
            (step(5, 0)?, step(5, 2)?.contiguous()?.affine(1.0, 0.25)?),
            (step(2, 0)?.contiguous()?, step(2, 1)?),
            (long.transpose(1, 2)?, long.transpose(1, 2)?.contiguous()?),
            (step(9, 1)?, Tensor::arange(0f32, 3.0, &dev)?.reshape((3, 1))?),
        ]);
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
