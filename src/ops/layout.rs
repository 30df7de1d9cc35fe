//! Dense copies of strided CPU tensors: `contiguous()` of a transposed, sliced or
//! expanded view, and `clone()`.
//!
//! Why: Candle's strided copy computes a source index per element on one thread. A
//! transpose of a (512, 768) matrix that way reads one element per cache line and
//! took 24x PyTorch's time (49 ms for 8 such matrices); a plain copy ran at one
//! thread's speed (1.9x). Here dims laid out alike are merged first, then:
//! - an inner dim of stride 1 (or 0) copies (or fills) whole runs,
//! - a transpose (the inner dim strided, another dim of stride 1) goes tile by tile,
//!   so that each tile reads and writes whole cache lines,
//! - anything else gathers run by run (steps of 2 to 4 vectorized: `gather_step`),
//!
//! and the work splits over threads by `parallel`'s policy. `flip` is a copy of
//! the same kind, its rows read from their mirrored places.
use crate::ops::parallel::{filled, filled_plain, for_chunks, for_row_runs, par_ok, SyncPtr};
use candle_core::{CpuStorage, Device, Result, Storage, Tensor};
use half::{bf16, f16};
use std::mem::MaybeUninit;

/// The zero of each element type the copies handle, as a constant (converting 0.0
/// into a half type would go through the half crate's conversion code).
trait Zero {
    const ZERO: Self;
}
macro_rules! zero {
    ($($t:ty => $z:expr),*) => { $(impl Zero for $t { const ZERO: $t = $z; })* };
}
zero!(u8 => 0, u32 => 0, i16 => 0, i32 => 0, i64 => 0, f32 => 0.0, f64 => 0.0, f16 => f16::ZERO, bf16 => bf16::ZERO);

/// Elements per parallel task of `cat` (whole output rows).
const TASK: usize = 1 << 14;
/// Side of a transpose tile: 16 f32 fill one 64-byte cache line.
const TILE: usize = 16;

/// The address of a tensor's storage: equal for a tensor and its views (Candle keeps
/// the storage behind one lock per buffer).
pub(crate) fn storage_key(t: &Tensor) -> usize {
    let (s, _) = t.storage_and_layout();
    &*s as *const Storage as usize
}

/// `t` laid out densely: `t` itself when it already is, else a copy.
pub(crate) fn dense(t: &Tensor) -> Result<Tensor> {
    if t.is_contiguous() {
        return Ok(t.clone());
    }
    copy(t)
}

/// `.dense()` / `.dense_copy()` for `Tensor`: Candle's `contiguous()` / `copy()` with our copy kernel.
pub(crate) trait Dense {
    /// This tensor laid out densely (itself when it already is).
    fn dense(&self) -> Result<Tensor>;
    /// A dense copy in a buffer of its own (Candle's `copy` / `force_contiguous`).
    fn dense_copy(&self) -> Result<Tensor>;
}

impl Dense for Tensor {
    fn dense(&self) -> Result<Tensor> {
        dense(self)
    }
    fn dense_copy(&self) -> Result<Tensor> {
        copy(self)
    }
}

/// A dense copy of `t` in a buffer of its own (`clone()`; a gradient stored as `.grad`).
pub(crate) fn copy(t: &Tensor) -> Result<Tensor> {
    if !t.device().is_cpu() || t.elem_count() == 0 {
        return t.force_contiguous();
    }
    let l = t.layout();
    match gather(t, l.dims(), l.stride(), l.start_offset()) {
        Some(r) => r,
        None => t.force_contiguous(),
    }
}

/// `t`'s every `step`-th index of `dim` from `start` (`len` of them), densely: the
/// read of `x[:, a:b:step]` where `autograd::ops::step_view` makes no view. `None`
/// where another path must run (not a CPU tensor of a plain element type).
pub(crate) fn step_slice(t: &Tensor, dim: usize, start: usize, len: usize, step: usize) -> Option<Tensor> {
    if !t.device().is_cpu() {
        return None;
    }
    let l = t.layout();
    let (mut dims, mut strides) = (l.dims().to_vec(), l.stride().to_vec());
    let off = l.start_offset() + start * strides[dim];
    dims[dim] = len;
    strides[dim] *= step;
    gather(t, &dims, &strides, off)?.ok()
}

/// The view (`dims`, `strides`, `off`) of `t`'s CPU storage as a new dense tensor
/// (`strided`); `None` for a storage of another kind or element type.
fn gather(t: &Tensor, dims: &[usize], strides: &[usize], off: usize) -> Option<Result<Tensor>> {
    let (st, _) = t.storage_and_layout();
    macro_rules! each {
        ($($v:ident),*) => {
            match &*st {
                $(Storage::Cpu(CpuStorage::$v(s)) => Some(Tensor::from_vec(strided(s, dims, strides, off), dims, &Device::Cpu)),)*
                _ => None,
            }
        };
    }
    each!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)
}

/// `t` reversed along `dims` (distinct, in range), densely: each output row read from
/// its mirrored source row, backwards where the last dim flips. Candle's flip gathers
/// through an index tensor per dim on one thread: `x.flip(-1)` of 786K floats took
/// 4.8 ms, torch 0.05. Other devices go to Candle.
pub(crate) fn flip(t: &Tensor, dims: &[usize]) -> Result<Tensor> {
    if dims.iter().enumerate().any(|(i, k)| dims[..i].contains(k) || *k >= t.rank()) {
        candle_core::bail!("flip: dims {dims:?} repeat or are out of range for shape {:?}", t.dims());
    }
    if !t.device().is_cpu() || t.rank() == 0 || t.elem_count() == 0 {
        return t.flip(dims);
    }
    let t = t.dense()?;
    let l = t.layout();
    let d = l.dims().to_vec();
    // Row-major strides, negated along the flipped dims, which start at their far end.
    let mut s: Vec<isize> = l.stride().iter().map(|&x| x as isize).collect();
    let mut off = l.start_offset() as isize;
    for &k in dims {
        off += (d[k] as isize - 1) * s[k];
        s[k] = -s[k];
    }
    let (st, _) = t.storage_and_layout();
    macro_rules! each {
        ($($v:ident),*) => {
            match &*st {
                $(Storage::Cpu(CpuStorage::$v(v)) => Tensor::from_vec(mirrored(v, &d, &s, off), d.as_slice(), &Device::Cpu),)*
                _ => t.flip(dims),
            }
        };
    }
    each!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)
}

/// The elements of the view (`d`, `s`, `off`) of `src` whose strides may be negative
/// (a flip), in row-major order.
fn mirrored<T: Copy + Send + Sync>(src: &[T], d: &[usize], s: &[isize], off: isize) -> Vec<T> {
    let total: usize = d.iter().product();
    let r = d.len();
    let (n, sn) = (d[r - 1], s[r - 1]);
    // Every run of every task is written below (`filled`'s contract).
    filled(total, |out| {
        for_row_runs(out, n, par_ok(total), |row, col, piece| {
            let mut start = off;
            let mut o = row;
            for k in (0..r - 1).rev() {
                start += (o % d[k]) as isize * s[k];
                o /= d[k];
            }
            let start = start + col as isize * sn;
            let m = piece.len();
            match sn {
                1 => gather_step_in(piece, &src[start as usize..], 1),
                -1 => {
                    let last = start as usize;
                    for (p, &x) in piece.iter_mut().zip(src[last + 1 - m..=last].iter().rev()) {
                        p.write(x);
                    }
                }
                _ => {
                    for (j, p) in piece.iter_mut().enumerate() {
                        p.write(src[(start + j as isize * sn) as usize]);
                    }
                }
            }
        })
    })
}

/// `Tensor::cat` along `dim` for CPU tensors of one plain dtype: each output row (the
/// dims before `dim`) is its inputs' blocks side by side, rows split over threads.
/// Inputs are read where they lie, strided views whose blocks are runs included (a
/// dense copy of each first wrote every element twice: the gradient of a ViT's
/// `qkv[0], qkv[1], qkv[2]` joins three permuted views). Candle's cat copies on one
/// thread. Other devices and dtypes go to Candle.
pub(crate) fn cat(ts: &[&Tensor], dim: usize) -> Result<Tensor> {
    let first = ts.first().copied();
    let plain = first.is_some_and(|f| {
        f.device().is_cpu() && ts.iter().all(|t| t.device().is_cpu() && t.dtype() == f.dtype() && t.rank() == f.rank() && dim < t.rank())
    });
    if !plain {
        return Tensor::cat(ts, dim);
    }
    // A view whose blocks are not runs (a transpose: its last dim strided) is copied
    // densely first, by the tiled transpose; read in place, each row would gather one
    // element per cache line.
    let runs = |t: &Tensor| {
        let l = t.layout();
        merge(&l.dims()[dim..], &l.stride()[dim..]).1.last().is_some_and(|&s| s <= 1)
    };
    let ts: Vec<Tensor> = ts.iter().map(|t| if runs(t) { Ok((*t).clone()) } else { t.dense() }).collect::<Result<_>>()?;
    let f = &ts[0];
    let mut dims = f.dims().to_vec();
    for t in &ts[1..] {
        for (k, (&a, &b)) in f.dims().iter().zip(t.dims()).enumerate() {
            if k != dim && a != b {
                // Candle's error names the shapes.
                return Tensor::cat(&ts, dim);
            }
        }
    }
    dims[dim] = ts.iter().map(|t| t.dims()[dim]).sum();
    let outer: usize = dims[..dim].iter().product();
    let inner: usize = dims[dim + 1..].iter().product();
    let pieces: Vec<usize> = ts.iter().map(|t| t.dims()[dim] * inner).collect();
    let guards: Vec<_> = ts.iter().map(|t| t.storage_and_layout()).collect();
    macro_rules! each {
        ($($v:ident),*) => {
            match &*guards[0].0 {
                $(Storage::Cpu(CpuStorage::$v(_)) => {
                    let mut srcs = Vec::with_capacity(guards.len());
                    for (st, l) in &guards {
                        let Storage::Cpu(CpuStorage::$v(s)) = &**st else {
                            candle_core::bail!("cat: inputs of one dtype expected")
                        };
                        srcs.push(Some(Block::of(s, l.dims(), l.stride(), l.start_offset(), dim)));
                    }
                    Tensor::from_vec(cat_slices(&srcs, &pieces, outer, Zero::ZERO), dims, &Device::Cpu)
                })*
                _ => Tensor::cat(&ts, dim),
            }
        };
    }
    each!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)
}

/// One input of `cat_slices`: a view whose dims before the cat dim index the output
/// rows and whose dims from it on make one block per row, each side merged where laid
/// out as one (`merge`).
struct Block<'a, T> {
    s: &'a [T],
    off: usize,
    /// The row dims and strides (merged); empty for a single row.
    rows: (Vec<usize>, Vec<usize>),
    /// The block dims and strides (merged).
    block: (Vec<usize>, Vec<usize>),
    /// Rows follow each other densely and blocks are dense: row `o` is
    /// `s[off + o * len..][..len]`.
    dense: bool,
}

impl<'a, T: Copy> Block<'a, T> {
    /// The view (`dims`, `strides`, `off`) of `s`, its rows the indices of `dims[..dim]`.
    fn of(s: &'a [T], dims: &[usize], strides: &[usize], off: usize, dim: usize) -> Self {
        let len: usize = dims[dim..].iter().product();
        let rows = if dims[..dim].iter().all(|&d| d == 1) { (Vec::new(), Vec::new()) } else { merge(&dims[..dim], &strides[..dim]) };
        let block = merge(&dims[dim..], &strides[dim..]);
        let dense = block.1 == [1] && (rows.0.is_empty() || (rows.0.len() == 1 && rows.1[0] == len));
        Block { s, off, rows, block, dense }
    }

    /// A dense block: `len` elements from `off` (`of`'s `dense` layout).
    fn contiguous(s: &'a [T], off: usize, len: usize) -> Self {
        Block { s, off, rows: (Vec::new(), Vec::new()), block: (vec![len], vec![1]), dense: true }
    }

    /// Row `o`'s block, in row-major order, into `dst` (its length).
    #[inline]
    fn copy_row(&self, o: usize, dst: &mut [T]) {
        if dst.is_empty() {
            return;
        }
        if self.dense {
            let a = self.off + o * dst.len();
            dst.copy_from_slice(&self.s[a..a + dst.len()]);
            return;
        }
        let base = self.off + offset_of(&self.rows.0, &self.rows.1, o);
        let (bd, bs) = (&self.block.0, &self.block.1);
        let r = bd.len();
        let (n, sn) = (bd[r - 1], bs[r - 1]);
        for (row, piece) in dst.chunks_mut(n).enumerate() {
            let start = base + row_start(bd, bs, row);
            match sn {
                1 => piece.copy_from_slice(&self.s[start..start + n]),
                0 => piece.fill(self.s[start]),
                _ => {
                    for (j, v) in piece.iter_mut().enumerate() {
                        *v = self.s[start + j * sn];
                    }
                }
            }
        }
    }
}

/// `t` with `left` and `right` zeros added along `dim` (Candle's `pad_with_zeros`, which
/// builds zero tensors and concatenates on one thread); zeros are written, not copied.
pub(crate) fn pad_zeros(t: &Tensor, dim: usize, left: usize, right: usize) -> Result<Tensor> {
    if !t.device().is_cpu() {
        return t.pad_with_zeros(dim, left, right);
    }
    let x = t.dense()?;
    let mut dims = x.dims().to_vec();
    let outer: usize = dims[..dim].iter().product();
    let inner: usize = dims[dim + 1..].iter().product();
    let pieces = [left * inner, dims[dim] * inner, right * inner];
    dims[dim] += left + right;
    let (st, l) = x.storage_and_layout();
    let Some((a, _)) = l.contiguous_offsets() else { candle_core::bail!("pad: expected a dense input") };
    macro_rules! each {
        ($($v:ident),*) => {
            match &*st {
                $(Storage::Cpu(CpuStorage::$v(s)) => {
                    Tensor::from_vec(cat_slices(&[None, Some(Block::contiguous(s, a, pieces[1])), None], &pieces, outer, Zero::ZERO), dims, &Device::Cpu)
                })*
                _ => {
                    drop(st);
                    t.pad_with_zeros(dim, left, right)
                }
            }
        };
    }
    each!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)
}

/// `tril` (`lower`) or `triu` of a CPU tensor of a plain dtype with diagonal offset `k`:
/// each row of each matrix (the last two dims) is a copy of its kept run and a fill of
/// zeros, rows split over threads. The general form (a mask built element by element,
/// a tensor of zeros and a select) took 486 us on an (8, 256, 384) float32 tensor,
/// torch 262. None for other devices and dtypes; the input has at least two dims.
pub(crate) fn triangle(t: &Tensor, k: i64, lower: bool) -> Result<Option<Tensor>> {
    if !t.device().is_cpu() || t.rank() < 2 {
        return Ok(None);
    }
    let x = t.dense()?;
    let dims = x.dims().to_vec();
    let (n, m) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let (st, l) = x.storage_and_layout();
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("tril: expected a dense input") };
    macro_rules! each {
        ($($v:ident),*) => {
            match &*st {
                $(Storage::Cpu(CpuStorage::$v(s)) => Tensor::from_vec(tri_rows(&s[a..b], (n, m), k, lower, Zero::ZERO), dims, &Device::Cpu).map(Some),)*
                _ => Ok(None),
            }
        };
    }
    each!(U8, U32, I16, I32, I64, BF16, F16, F32, F64)
}

/// `triangle`'s rows: `v` holds matrices of `n` rows of `m`; row `i` keeps columns
/// `j - i <= k` (`lower`) or `j - i >= k`, the rest `zero`.
fn tri_rows<T: Copy + Send + Sync>(v: &[T], (n, m): (usize, usize), k: i64, lower: bool, zero: T) -> Vec<T> {
    if v.is_empty() || m == 0 {
        return Vec::new();
    }
    let rows_per = (TASK / m).max(1);
    // Every output row is written whole: its kept run and its zeros cover it.
    filled_plain(v.len(), |out| {
        for_chunks(out, rows_per * m, par_ok(v.len()), |c, dst| {
            for (q, row) in dst.chunks_mut(m).enumerate() {
                let r = c * rows_per + q;
                let (i, src) = ((r % n) as i64, &v[r * m..(r + 1) * m]);
                if lower {
                    let keep = (i + k + 1).clamp(0, m as i64) as usize;
                    row[..keep].copy_from_slice(&src[..keep]);
                    row[keep..].fill(zero);
                } else {
                    let zeros = (i + k).clamp(0, m as i64) as usize;
                    row[..zeros].fill(zero);
                    row[zeros..].copy_from_slice(&src[zeros..]);
                }
            }
        })
    })
}

/// Rows of `outer` output rows, each the concatenation of `pieces[i]` elements of
/// input `i`'s matching row (`None`: that many `zero`s).
fn cat_slices<T: Copy + Send + Sync>(srcs: &[Option<Block<T>>], pieces: &[usize], outer: usize, zero: T) -> Vec<T> {
    let row: usize = pieces.iter().sum();
    let total = row * outer;
    if total == 0 {
        return Vec::new();
    }
    if outer < 4 && row >= 8 * TASK {
        // A few long rows (`stack` along dim 0: one row holding every input whole): one
        // task a row ran the copy on one thread (338 us for two (8, 256, 384) float32
        // tensors, torch 190), so each dense piece is copied by all of them.
        return filled_plain(total, |out| out.chunks_mut(row).enumerate().for_each(|(o, r)| write_row(srcs, pieces, o, r, zero, true)));
    }
    let rows_per = (TASK / row).max(1);
    // Every output row is written whole (its pieces cover it).
    filled_plain(total, |out| {
        for_chunks(out, rows_per * row, par_ok(total), |c, dst| {
            for (k, r) in dst.chunks_mut(row).enumerate() {
                write_row(srcs, pieces, c * rows_per + k, r, zero, false);
            }
        })
    })
}

/// Output row `o` of `cat_slices` into `r`: each input's row `o` (or zeros) side by
/// side; `spread`: dense pieces are copied over all threads (`parallel::par_copy`).
fn write_row<T: Copy + Send + Sync>(srcs: &[Option<Block<T>>], pieces: &[usize], o: usize, r: &mut [T], zero: T, spread: bool) {
    let mut at = 0;
    for (src, &p) in srcs.iter().zip(pieces) {
        match src {
            Some(b) if spread && b.dense => super::parallel::par_copy(&mut r[at..at + p], &b.s[b.off + o * p..][..p]),
            Some(b) => b.copy_row(o, &mut r[at..at + p]),
            None => r[at..at + p].fill(zero),
        }
        at += p;
    }
}

/// Every offset of a strided region, in row-major order of the region.
pub(crate) fn strided_offsets(shape: &[usize], strides: &[usize], offset: usize) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut idx = vec![0usize; shape.len()];
    let mut cur = offset;
    for _ in 0..n {
        out.push(cur);
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            cur += strides[k];
            if idx[k] < shape[k] {
                break;
            }
            cur -= strides[k] * shape[k];
            idx[k] = 0;
        }
    }
    out
}

/// The elements of the view (`dims`, `strides`, `off`) of `src`, in row-major order.
pub(crate) fn strided<T: Copy + Send + Sync>(src: &[T], dims: &[usize], strides: &[usize], off: usize) -> Vec<T> {
    let total: usize = dims.iter().product();
    if total == 0 {
        return Vec::new();
    }
    let (d, s) = merge(dims, strides);
    let r = d.len();
    let (n, sn) = (d[r - 1], s[r - 1]);
    // The transpose case: the source's stride-1 dim is not the last one.
    if sn > 1 && n >= TILE {
        if let Some(k) = (0..r - 1).find(|&k| s[k] == 1 && d[k] >= TILE) {
            return tiled(src, &d, &s, off, k);
        }
    }
    // Every run of every task is written below (`filled`'s contract).
    let level = crate::ops::cpu::simd_level();
    filled(total, |out| {
        for_row_runs(out, n, par_ok(total), |row, col, piece| {
            let start = off + row_start(&d, &s, row) + col * sn;
            match sn {
                0 => piece.fill(MaybeUninit::new(src[start])),
                _ => gather_step(piece, &src[start..], sn, level),
            }
        })
    })
}

/// `dst[j] = src[j * step]` for every `j` of `dst`: a run of a strided view read
/// densely. `src` holds at least `(dst.len() - 1) * step + 1` elements; `level` is
/// `simd_level()` (asked once per op, not per run).
///
/// Why the cases: with the step in a register the loop read one element at a time
/// (about 3 cycles each: `x[..., ::2]` of a (8, 256, 384) tensor copied in 168 us,
/// torch 129); with steps 2 to 4 as constants LLVM vectorizes them as interleaved
/// loads (a rotary embedding's even and odd halves are steps of 2).
#[inline]
pub(crate) fn gather_step<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T], step: usize, level: crate::ops::cpu::Simd) {
    #[cfg(target_arch = "x86_64")]
    match level {
        // SAFETY: `level` is `simd_level()` (the callers' contract): the CPU has it.
        crate::ops::cpu::Simd::Avx512 => return unsafe { gather_step_avx512(dst, src, step) },
        // SAFETY: as above.
        crate::ops::cpu::Simd::Avx2 => return unsafe { gather_step_avx2(dst, src, step) },
        crate::ops::cpu::Simd::Plain => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = level;
    gather_step_in(dst, src, step)
}

/// `gather_step` compiled for AVX-512 (16-lane shuffles).
///
/// # Safety
/// The CPU must support AVX-512F (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gather_step_avx512<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T], step: usize) {
    gather_step_in(dst, src, step)
}

/// `gather_step` compiled for AVX2 (8-lane shuffles; CPUs without AVX-512 ran the
/// baseline build).
///
/// # Safety
/// The CPU must support AVX2 (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gather_step_avx2<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T], step: usize) {
    gather_step_in(dst, src, step)
}

/// `gather_step`'s loops; inlined into each caller's instruction set.
#[inline(always)]
pub(crate) fn gather_step_in<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T], step: usize) {
    #[inline(always)]
    fn fixed<T: Copy, const S: usize>(dst: &mut [MaybeUninit<T>], src: &[T]) {
        let Some(last) = dst.len().checked_sub(1) else { return };
        // Whole groups of `S` for all but the last element, which may end the source.
        for (d, g) in dst[..last].iter_mut().zip(src[..last * S].chunks_exact(S)) {
            d.write(g[0]);
        }
        dst[last].write(src[last * S]);
    }
    match step {
        1 => {
            let n = dst.len();
            for (d, &x) in dst.iter_mut().zip(&src[..n]) {
                d.write(x);
            }
        }
        2 => fixed::<T, 2>(dst, src),
        3 => fixed::<T, 3>(dst, src),
        4 => fixed::<T, 4>(dst, src),
        _ => {
            for (d, &x) in dst.iter_mut().zip(src.iter().step_by(step)) {
                d.write(x);
            }
        }
    }
}

/// Whether `strided` copies this view as a transpose (tile by tile): its innermost
/// dim strided, another of at least a tile's length contiguous. Kernels that read
/// runs along the last dim (elementwise arithmetic) read such a view one element per
/// cache line: they take a dense copy first (x * 2 of a transposed (8, 384, 256)
/// view read in place took 531 us, torch 57).
pub(crate) fn is_transpose(dims: &[usize], strides: &[usize]) -> bool {
    let (d, s) = merge(dims, strides);
    let r = d.len();
    s[r - 1] > 1 && d[r - 1] >= TILE && (0..r - 1).any(|k| s[k] == 1 && d[k] >= TILE)
}

/// Drop size-1 dims and merge neighbours that are laid out as one (outer stride =
/// inner stride x inner size). Never empty: a 0-d view is one dim of size 1.
fn merge(dims: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let (mut d, mut s): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for i in (0..dims.len()).rev() {
        if dims[i] == 1 {
            continue;
        }
        if let (Some(&dn), Some(&sn)) = (d.last(), s.last()) {
            if strides[i] == sn * dn {
                *d.last_mut().expect("non-empty") *= dims[i];
                continue;
            }
        }
        d.push(dims[i]);
        s.push(strides[i]);
    }
    if d.is_empty() {
        return (vec![1], vec![1]);
    }
    d.reverse();
    s.reverse();
    (d, s)
}

/// The source offset of row `row` (a row: the last dim) of the merged view.
#[inline]
fn row_start(d: &[usize], s: &[usize], row: usize) -> usize {
    offset_of(&d[..d.len() - 1], &s[..s.len() - 1], row)
}

/// The offset of element `i` (in row-major order) of the view (`d`, `s`).
#[inline]
fn offset_of(d: &[usize], s: &[usize], i: usize) -> usize {
    let mut o = i;
    let mut p = 0;
    for k in (0..d.len()).rev() {
        p += (o % d[k]) * s[k];
        o /= d[k];
    }
    p
}

/// The transpose copy: dim `k` has source stride 1, the last dim a larger one. Each
/// task writes one strip of `TILE` indices of dim `k` for one index of the other
/// dims, TILE x TILE tiles at a time, so reads and writes both touch whole lines.
fn tiled<T: Copy + Send + Sync>(src: &[T], d: &[usize], s: &[usize], off: usize, k: usize) -> Vec<T> {
    let r = d.len();
    let total: usize = d.iter().product();
    let (n, sn) = (d[r - 1], s[r - 1]);
    // Row-major strides of the output.
    let mut ds = vec![1usize; r];
    for i in (0..r - 1).rev() {
        ds[i] = ds[i + 1] * d[i + 1];
    }
    let outer: Vec<usize> = (0..r - 1).filter(|&i| i != k).collect();
    // 4-byte elements (f32, i32, u32) go through `transpose8x8` where the CPU has AVX:
    // one element at a time with a strided read each, `contiguous()` of a transposed
    // (8, 384, 256) float32 view took 472 us (torch 304).
    let words = std::mem::size_of::<T>() == 4 && crate::ops::cpu::has_avx2_fma();
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
    let n_outer: usize = outer.iter().map(|&i| d[i]).product();
    let strips = d[k].div_ceil(TILE);
    let mut out: Vec<T> = Vec::with_capacity(total);
    let dst = SyncPtr(out.as_mut_ptr());
    let task = |t: usize| {
        let (mut o, strip) = (t / strips, t % strips);
        let (mut so, mut dof) = (off, 0);
        for &i in outer.iter().rev() {
            so += (o % d[i]) * s[i];
            dof += (o % d[i]) * ds[i];
            o /= d[i];
        }
        let (i0, i1) = (strip * TILE, ((strip + 1) * TILE).min(d[k]));
        for j0 in (0..n).step_by(TILE) {
            let j1 = (j0 + TILE).min(n);
            #[cfg(target_arch = "x86_64")]
            if words && i1 - i0 == TILE && j1 - j0 == TILE {
                // Four 8 x 8 blocks through registers: source rows are the `j`s (`sn`
                // apart, the `i`s contiguous), output rows the `i`s.
                for (bi, bj) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
                    let (si, di) = (so + i0 + bi + (j0 + bj) * sn, dof + (i0 + bi) * ds[k] + j0 + bj);
                    assert!(si + 7 + 7 * sn < src.len());
                    // SAFETY: `words`: 4-byte plain elements on an AVX CPU, moved as f32
                    // bits; the block's last source element is in bounds (asserted) and
                    // its output rows are this task's (as below), inside `total`.
                    unsafe { transpose8x8(src.as_ptr().add(si).cast(), sn as isize, dst.ptr().add(di).cast(), ds[k]) };
                }
                continue;
            }
            for i in i0..i1 {
                let (si, di) = (so + i, dof + i * ds[k]);
                for j in j0..j1 {
                    // SAFETY: `di + j` < total (each index below its dim's size) and this
                    // task alone writes the output rows of its strip (i0..i1) for its
                    // outer index; the buffer has capacity `total`.
                    unsafe { dst.ptr().add(di + j).write(src[si + j * sn]) };
                }
            }
        }
    };
    let tasks = n_outer * strips;
    super::parallel::for_tasks(tasks, par_ok(total), task);
    // SAFETY: the tasks cover every (outer, k, last) index once, so all `total`
    // elements are written.
    unsafe { out.set_len(total) };
    out
}

/// Copy the 8 x 8 block of 4-byte elements at `src` (rows `rs` apart, unit column
/// stride) to `dst` transposed, its rows `ds` apart: `dst[p * ds + r] = src[r * rs + p]`.
/// Bits are moved as f32 lanes (no arithmetic), so i32 and u32 pass unchanged.
///
/// # Safety
/// The CPU has AVX; `src` holds 8 rows of 8 readable elements `rs` apart; `dst` 8 rows
/// of 8 writable ones `ds` apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) unsafe fn transpose8x8(src: *const f32, rs: isize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the caller's 8 source rows and 8 destination rows.
    unsafe {
        let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.offset(i as isize * rs)));
        // Pairs of rows interleaved, then quads, then the 128-bit halves swapped.
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for q in 0..4 {
            _mm256_storeu_ps(dst.add(q * ds), _mm256_permute2f128_ps::<0x20>(u[q], u[q + 4]));
            _mm256_storeu_ps(dst.add((q + 4) * ds), _mm256_permute2f128_ps::<0x31>(u[q], u[q + 4]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every layout kind (copies, fills, gathers, transposes, odd sizes) equals Candle's own copy.
    #[test]
    fn matches_candle_contiguous() -> Result<()> {
        let dev = Device::Cpu;
        let a = Tensor::arange(0f32, (3 * 37 * 41) as f32, &dev)?.reshape((3, 37, 41))?;
        let cases: Vec<Tensor> = vec![
            a.clone(),
            a.transpose(1, 2)?,
            a.transpose(0, 2)?,
            a.permute((2, 0, 1))?,
            a.narrow(2, 3, 30)?,
            a.narrow(1, 1, 20)?.transpose(1, 2)?,
            a.i((.., .., 5))?,
            Tensor::arange(0f32, 41.0, &dev)?.broadcast_as((3, 37, 41))?,
            Tensor::new(2.5f32, &dev)?.broadcast_as((4, 5))?,
            a.reshape((3 * 37, 41))?.t()?,
            Tensor::arange(0i64, 12, &dev)?.reshape((3, 4))?.t()?,
            Tensor::arange(0u8, 200, &dev)?.reshape((10, 20))?.t()?.narrow(0, 2, 16)?,
            Tensor::new(7f64, &dev)?,
        ];
        for t in cases {
            let got = copy(&t)?;
            let want = t.force_contiguous()?;
            assert_eq!(got.dims(), want.dims());
            assert!(got.is_contiguous());
            let eq = got.eq(&want)?.flatten_all()?.to_dtype(candle_core::DType::U32)?.sum_all()?.to_scalar::<u32>()?;
            assert_eq!(eq as usize, t.elem_count(), "{:?} {:?}", t.dims(), t.stride());
        }
        // Large enough to split over threads, both the tiles and the runs.
        let big = Tensor::arange(0f32, (8 * 300 * 200) as f32, &dev)?.reshape((8, 300, 200))?;
        // Stepped runs (`gather_step`'s constant steps 2 to 4 and the general one) of
        // every length mod the vector width, split over threads, and other dtypes.
        let stepped = (2..=6).map(|s| big.narrow(2, 1, 199)?.unfold(2, 1, s)?.squeeze(3));
        let stepped: Vec<Tensor> =
            stepped.chain((1..=17).map(|n| big.narrow(2, 0, 2 * n)?.unfold(2, 1, 2)?.squeeze(3))).collect::<Result<_>>()?;
        for t in stepped.iter().chain([
            &big.to_dtype(candle_core::DType::U8)?.unfold(2, 1, 3)?.squeeze(3)?,
            &big.to_dtype(candle_core::DType::F64)?.unfold(1, 1, 2)?.squeeze(3)?,
        ]) {
            let got = copy(t)?.flatten_all()?.to_dtype(candle_core::DType::F64)?.to_vec1::<f64>()?;
            assert_eq!(
                got,
                t.force_contiguous()?.flatten_all()?.to_dtype(candle_core::DType::F64)?.to_vec1::<f64>()?,
                "{:?} {:?}",
                t.dims(),
                t.stride()
            );
        }
        for t in [big.transpose(1, 2)?, big.narrow(2, 1, 150)?, big.transpose(0, 1)?] {
            let got = copy(&t)?.flatten_all()?.to_vec1::<f32>()?;
            assert_eq!(got, t.force_contiguous()?.flatten_all()?.to_vec1::<f32>()?);
        }
        Ok(())
    }

    /// Concatenation along every dim, of views and of odd sizes, equals Candle's.
    #[test]
    fn cat_matches_candle() -> Result<()> {
        let dev = Device::Cpu;
        let a = Tensor::arange(0f32, 60.0, &dev)?.reshape((3, 4, 5))?;
        let b = Tensor::arange(100f32, 148.0, &dev)?.reshape((3, 4, 4))?;
        for dim in 0..3 {
            let other = a.affine(2.0, 1.0)?;
            assert_eq!(
                cat(&[&a, &other], dim)?.flatten_all()?.to_vec1::<f32>()?,
                Tensor::cat(&[&a, &other], dim)?.flatten_all()?.to_vec1::<f32>()?
            );
        }
        let bt = b.transpose(0, 1)?.transpose(0, 1)?.narrow(2, 1, 3)?;
        let want = Tensor::cat(&[&a, &bt, &a.narrow(2, 0, 1)?], 2)?;
        assert_eq!(cat(&[&a, &bt, &a.narrow(2, 0, 1)?], 2)?.flatten_all()?.to_vec1::<f32>()?, want.flatten_all()?.to_vec1::<f32>()?);
        let big = Tensor::arange(0i64, 3 * 200 * 300, &dev)?.reshape((3, 200, 300))?;
        let want = Tensor::cat(&[&big, &big.narrow(2, 0, 7)?], 2)?;
        assert_eq!(cat(&[&big, &big.narrow(2, 0, 7)?], 2)?.flatten_all()?.to_vec1::<i64>()?, want.flatten_all()?.to_vec1::<i64>()?);
        assert!(cat(&[&a, &b], 0).is_err());
        // Views: permuted with the last dim in place (rows gathered by strides) and
        // transposed (copied densely first), broadcast (stride 0), stepped, size-1 and
        // empty pieces, along each dim.
        let p = Tensor::arange(0f32, 60.0, &dev)?.reshape((5, 4, 3))?.permute((2, 1, 0))?;
        let views = [
            a.affine(1.0, 1000.0)?,
            p.clone(),
            Tensor::arange(0f32, 60.0, &dev)?.reshape((4, 3, 5))?.permute((1, 0, 2))?,
            Tensor::arange(0f32, 5.0, &dev)?.broadcast_as((3, 4, 5))?,
            Tensor::arange(0f32, 120.0, &dev)?.reshape((3, 4, 10))?.i((.., .., 1..10))?.unfold(2, 1, 2)?.squeeze(3)?,
        ];
        for dim in 0..3 {
            let refs: Vec<&Tensor> = views.iter().collect();
            let want = Tensor::cat(&refs, dim)?.flatten_all()?.to_vec1::<f32>()?;
            assert_eq!(cat(&refs, dim)?.flatten_all()?.to_vec1::<f32>()?, want, "dim {dim}");
            let one = p.narrow(dim, 1, 1)?;
            let none = p.narrow(dim, 0, 0)?;
            let want = Tensor::cat(&[&p, &one, &none], dim)?.flatten_all()?.to_vec1::<f32>()?;
            assert_eq!(cat(&[&p, &one, &none], dim)?.flatten_all()?.to_vec1::<f32>()?, want, "dim {dim}");
        }
        for dim in 0..3 {
            let want = a.pad_with_zeros(dim, 2, 1)?.flatten_all()?.to_vec1::<f32>()?;
            assert_eq!(pad_zeros(&a.transpose(0, 2)?.transpose(0, 2)?, dim, 2, 1)?.flatten_all()?.to_vec1::<f32>()?, want);
        }
        Ok(())
    }

    use candle_core::IndexOp;
}
