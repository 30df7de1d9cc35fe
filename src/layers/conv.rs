//! N-d convolution (1-, 2- and 3-d; plain and transposed, with groups) as GEMMs over
//! chunks of the batch: one im2col gather of a chunk of samples into a (C*K, nb*L)
//! column matrix, one GEMM per group for the whole chunk, and a permute between that
//! channel-major layout and (N, C, *spatial); col2im for the adjoint.
//!
//! Why chunks rather than one sample at a time: small images (8x8 digits, batch 64)
//! would otherwise cost dozens of tiny GEMMs and thread hand-offs per layer; the
//! chunk is capped so the columns of large images stay a bounded buffer.
//!
//! `ConvOp` is a Candle custom op with three kernels — the convolution, its
//! adjoint (= transposed convolution = gradient w.r.t. the image) and the weight
//! gradient — so each direction's backward is written from the other two and
//! computes only the gradients that are needed. The bias, when there is one, is
//! added by the same pass that writes the output (the op is then a `CustomOp3`).
//! Every shape is handled as 3-d spatial (1-d and 2-d get leading size-1 axes). A
//! forward whose weight needs a gradient keeps its columns (bounded) for the weight
//! gradient, which also sums the bias gradient from the permuted upstream gradient.
//!
//! The threading policy (`par_ok`, `par_gemm`, `in_pool`, `for_chunks`) is
//! `crate::parallel`'s.
use super::Elem;
use crate::parallel::{filled, for_chunks, in_pool, par_gemm, par_ok};
use crate::dtype::DT;
use crate::errors::{DTypeError, OpResult, ShapeError};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

/// Elements of one chunk's column matrix we aim for (4 MiB of f32, so the columns
/// stay in cache between im2col and the GEMM); a chunk holds at least one sample.
const COLS_BUDGET: usize = 1 << 20;
/// Initialized elements seen as possibly-uninitialized ones (same layout), to read from.
fn as_uninit<T>(s: &[T]) -> &[MaybeUninit<T>] {
    // SAFETY: MaybeUninit<T> has T's layout, and initialized values are valid for it.
    unsafe { &*(s as *const [T] as *const [MaybeUninit<T>]) }
}

/// The same for a destination that stays initialized (only valid values are written).
fn as_uninit_mut<T>(s: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: as above; every writer in this file stores initialized values.
    unsafe { &mut *(s as *mut [T] as *mut [MaybeUninit<T>]) }
}

/// Where the windows of a (non-transposed) convolution fall.
/// `ins` are the spatial sizes of the image, `outs` of the output grid.
#[derive(Clone, Debug)]
pub(crate) struct Geom {
    pub n: usize,
    pub c: usize,
    pub groups: usize,
    pub ins: [usize; 3],
    pub outs: [usize; 3],
    pub k: [usize; 3],
    pub stride: [usize; 3],
    pub pad: [usize; 3],
    pub dil: [usize; 3],
}

impl Geom {
    fn kvol(&self) -> usize {
        self.k.iter().product()
    }
    fn ivol(&self) -> usize {
        self.ins.iter().product()
    }
    fn ovol(&self) -> usize {
        self.outs.iter().product()
    }
    /// Samples per chunk: as many as keep the chunk's columns within `COLS_BUDGET`.
    fn chunk(&self) -> usize {
        let per = (self.c * self.kvol() * self.ovol()).max(1);
        (COLS_BUDGET / per).clamp(1, self.n.max(1))
    }
    /// Offset of kernel tap `kk` (flat) along each axis, relative to `o * stride`.
    fn offsets(&self, kk: usize) -> [isize; 3] {
        let t = [
            kk / (self.k[1] * self.k[2]),
            (kk / self.k[2]) % self.k[1],
            kk % self.k[2],
        ];
        let mut o = [0isize; 3];
        for a in 0..3 {
            o[a] = (t[a] * self.dil[a]) as isize - self.pad[a] as isize;
        }
        o
    }
}

/// Output positions `o` in `0..n_out` with `0 <= o * s + off < n_in`, as a range.
#[inline]
fn valid_range(off: isize, s: usize, n_in: usize, n_out: usize) -> (usize, usize) {
    let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(s) };
    let lim = n_in as isize - off;
    let hi = if lim <= 0 {
        0
    } else {
        ((lim - 1) as usize / s + 1).min(n_out)
    };
    (lo.min(hi), hi)
}

/// Visit every (output row, input row, x-range) of one kernel tap: `f(dst_row_start,
/// src_row_start, x0, x1, xoff)`, rows being runs along the last axis.
#[inline]
fn for_rows(g: &Geom, off: [isize; 3], mut f: impl FnMut(usize, usize, usize, usize, isize)) {
    let [_, h, w] = g.ins;
    let [od, oh, ow] = g.outs;
    let (z0, z1) = valid_range(off[0], g.stride[0], g.ins[0], od);
    let (y0, y1) = valid_range(off[1], g.stride[1], h, oh);
    let (x0, x1) = valid_range(off[2], g.stride[2], w, ow);
    if x0 >= x1 {
        return;
    }
    for oz in z0..z1 {
        let iz = (oz * g.stride[0]) as isize + off[0];
        for oy in y0..y1 {
            let iy = (oy * g.stride[1]) as isize + off[1];
            f((oz * oh + oy) * ow, (iz as usize * h + iy as usize) * w, x0, x1, off[2]);
        }
    }
}

/// Copy a run; short ones (the rows of small images, up to 64 elements) as two
/// overlapping fixed-size moves instead of a `memcpy` call, which costs more than
/// the copy when there are hundreds of thousands of them.
#[inline(always)]
fn copy_run<T: Copy>(d: &mut [T], s: &[T]) {
    #[inline(always)]
    fn two<T: Copy, const K: usize>(d: &mut [T], s: &[T]) {
        // Fixed-size copies become a few vector moves (`copy_from_slice` would be an
        // out-of-line call, arrays a trip through the stack).
        let n = d.len();
        assert!(n >= K && s.len() >= n);
        // SAFETY: both copies stay inside `d` and `s` (checked), which are different
        // buffers; the two destination ranges may overlap, with the same values.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr(), K);
            std::ptr::copy_nonoverlapping(s.as_ptr().add(n - K), d.as_mut_ptr().add(n - K), K);
        }
    }
    let n = d.len();
    match n {
        0 => {}
        1 => d[0] = s[0],
        2..=3 => two::<T, 2>(d, s),
        4..=7 => two::<T, 4>(d, s),
        8..=15 => two::<T, 8>(d, s),
        16..=31 => two::<T, 16>(d, s),
        32..=64 => two::<T, 32>(d, s),
        _ => d.copy_from_slice(s),
    }
}

/// Fill a run with `v`; short runs (padding rows of small images) as two overlapping
/// fixed-size stores instead of a `memset` call.
#[inline(always)]
fn fill_run<T: Copy>(d: &mut [T], v: T) {
    #[inline(always)]
    fn two<T: Copy, const K: usize>(d: &mut [T], v: T) {
        let n = d.len();
        let d0: &mut [T; K] = (&mut d[..K]).try_into().unwrap();
        *d0 = [v; K];
        let d1: &mut [T; K] = (&mut d[n - K..]).try_into().unwrap();
        *d1 = [v; K];
    }
    match d.len() {
        0 => {}
        1 => d[0] = v,
        2..=3 => two::<T, 2>(d, v),
        4..=7 => two::<T, 4>(d, v),
        8..=15 => two::<T, 8>(d, v),
        16..=31 => two::<T, 16>(d, v),
        _ => d.fill(v),
    }
}

/// How one kernel tap moves a plane into its column row (the same for every sample
/// and channel). With unit x/y strides and output rows as long as the input's, each
/// output z-plane is one shifted span of the input plane: `copies` are those spans
/// (dst start, src start, length), clipped to the plane, `zeros` the positions inside
/// them whose column falls off a row end (padding), to be cleared, and `gaps` the
/// (start, length) runs of the row no span covers (padding rows and planes).
struct TapPlan {
    copies: Vec<(usize, usize, usize)>,
    zeros: Vec<usize>,
    gaps: Vec<(usize, usize)>,
}

fn span_geom(g: &Geom) -> bool {
    g.stride[1] == 1 && g.stride[2] == 1 && g.outs[2] == g.ins[2]
}

fn tap_plan(g: &Geom, off: [isize; 3]) -> TapPlan {
    let [_, h, w] = g.ins;
    let [od, oh, ow] = g.outs;
    let iv = g.ivol() as isize;
    let (z0, z1) = valid_range(off[0], g.stride[0], g.ins[0], od);
    let (y0, y1) = valid_range(off[1], 1, h, oh);
    let (x0, x1) = valid_range(off[2], 1, w, ow);
    let mut plan = TapPlan { copies: Vec::new(), zeros: Vec::new(), gaps: Vec::new() };
    if x0 >= x1 || y0 >= y1 {
        plan.gaps.push((0, g.ovol()));
        return plan;
    }
    for oz in z0..z1 {
        let iz = (oz * g.stride[0]) as isize + off[0];
        let ds = (oz * oh + y0) * ow;
        let ss = (iz * h as isize + y0 as isize + off[1]) * w as isize + off[2];
        let len = ((y1 - y0) * ow) as isize;
        // Only a padding column can fall outside the plane: clip to it.
        let (lo, hi) = ((-ss).max(0), (iv - ss).min(len));
        if lo >= hi {
            continue;
        }
        plan.copies.push((ds + lo as usize, (ss + lo) as usize, (hi - lo) as usize));
        for j in lo as usize..hi as usize {
            let x = j % ow;
            if x < x0 || x >= x1 {
                plan.zeros.push(ds + j);
            }
        }
    }
    // Copies run in increasing destination order: the gaps are what lies between.
    let mut at = 0;
    for &(ds, _, len) in &plan.copies {
        if ds > at {
            plan.gaps.push((at, ds - at));
        }
        at = ds + len;
    }
    if at < g.ovol() {
        plan.gaps.push((at, g.ovol() - at));
    }
    plan
}

/// image chunk (nb, C, D, H, W) -> columns (C * K, nb * L); rows are (channel, tap).
/// Writes every element of `cols` (padding as zeros).
fn im2col<T: Elem>(x: &[T], g: &Geom, nb: usize, cols: &mut [MaybeUninit<T>]) {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = nb * l;
    let sx = g.stride[2];
    let par = par_ok(cols.len());
    let zero = MaybeUninit::new(T::ZERO);
    let plans: Option<Vec<TapPlan>> = span_geom(g).then(|| (0..kv).map(|kk| tap_plan(g, g.offsets(kk))).collect());
    let x = as_uninit(x);
    for_chunks(cols, nl, par, |row, dst| {
        let (ch, kk) = (row / kv, row % kv);
        if let Some(plans) = &plans {
            let plan = &plans[kk];
            for (n, d) in dst.chunks_exact_mut(l).enumerate() {
                let plane = &x[(n * g.c + ch) * iv..(n * g.c + ch + 1) * iv];
                for &(ds, ss, len) in &plan.copies {
                    copy_run(&mut d[ds..ds + len], &plane[ss..ss + len]);
                }
                for &z in &plan.zeros {
                    d[z] = zero;
                }
                for &(at, len) in &plan.gaps {
                    fill_run(&mut d[at..at + len], zero);
                }
            }
            return;
        }
        // Rows: padding taps are skipped, so the row starts zeroed.
        dst.fill(zero);
        let off = g.offsets(kk);
        for n in 0..nb {
            let plane = &x[(n * g.c + ch) * iv..(n * g.c + ch + 1) * iv];
            let d = &mut dst[n * l..(n + 1) * l];
            for_rows(g, off, |dr, sr, x0, x1, xo| {
                let start = (sr as isize + (x0 * sx) as isize + xo) as usize;
                if sx == 1 {
                    copy_run(&mut d[dr + x0..dr + x1], &plane[start..start + (x1 - x0)]);
                } else {
                    for (j, v) in d[dr + x0..dr + x1].iter_mut().enumerate() {
                        *v = plane[start + j * sx];
                    }
                }
            });
        }
    });
}

/// columns (C * K, nb * L) -> image chunk (nb, C, D, H, W): adds every column entry
/// onto its pixel (the adjoint of im2col); `out` holds zeros or the bias. On the
/// span path the padding entries of `cols` are cleared first, so whole spans add.
fn col2im<T: Elem>(cols: &mut [T], g: &Geom, nb: usize, out: &mut [T]) {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = nb * l;
    let sx = g.stride[2];
    let par = par_ok(cols.len());
    if span_geom(g) {
        let plans: Vec<TapPlan> = (0..kv).map(|kk| tap_plan(g, g.offsets(kk))).collect();
        for_chunks(cols, nl, par, |row, src| {
            let plan = &plans[row % kv];
            for s in src.chunks_exact_mut(l) {
                for &z in &plan.zeros {
                    s[z] = T::ZERO;
                }
            }
        });
        let cols = &*cols;
        for_chunks(out, iv, par, |p, plane| {
            let (n, ch) = (p / g.c, p % g.c);
            for (kk, plan) in plans.iter().enumerate() {
                let src = &cols[(ch * kv + kk) * nl + n * l..(ch * kv + kk) * nl + (n + 1) * l];
                for &(ds, ss, len) in &plan.copies {
                    for (d, &v) in plane[ss..ss + len].iter_mut().zip(&src[ds..ds + len]) {
                        *d += v;
                    }
                }
            }
        });
        return;
    }
    let cols = &*cols;
    for_chunks(out, iv, par, |p, plane| {
        let (n, ch) = (p / g.c, p % g.c);
        for kk in 0..kv {
            let src = &cols[(ch * kv + kk) * nl + n * l..(ch * kv + kk) * nl + (n + 1) * l];
            let off = g.offsets(kk);
            for_rows(g, off, |dr, sr, x0, x1, xo| {
                let start = (sr as isize + (x0 * sx) as isize + xo) as usize;
                let s = &src[dr + x0..dr + x1];
                if sx == 1 {
                    for (d, &v) in plane[start..start + s.len()].iter_mut().zip(s) {
                        *d += v;
                    }
                } else {
                    for (j, &v) in s.iter().enumerate() {
                        plane[start + j * sx] += v;
                    }
                }
            });
        }
    });
}

/// a (nb, R, L) as (R, nb * L), the layout one GEMM over the chunk reads: `a` itself
/// for one sample, else a permuted copy.
fn channel_major<T: Elem>(a: &[T], nb: usize, r: usize, l: usize) -> Cow<'_, [T]> {
    if nb == 1 {
        Cow::Borrowed(a)
    } else {
        Cow::Owned(to_channel_major(a, nb, r, l))
    }
}

fn to_channel_major<T: Elem>(a: &[T], nb: usize, r: usize, l: usize) -> Vec<T> {
    let a = as_uninit(a);
    // Every (row, sample) run of the output is copied.
    filled(r * nb * l, |out| {
        let par = par_ok(out.len());
        for_chunks(out, nb * l, par, |ri, row| {
            for n in 0..nb {
                copy_run(&mut row[n * l..(n + 1) * l], &a[(n * r + ri) * l..(n * r + ri + 1) * l]);
            }
        });
    })
}

/// (R, nb * L) -> out (nb, R, L), adding `bias[r]` when given; writes all of `out`.
fn from_channel_major<T: Elem>(src: &[T], nb: usize, r: usize, l: usize, bias: Option<&[T]>, out: &mut [MaybeUninit<T>]) {
    let par = par_ok(out.len());
    for_chunks(out, r * l, par, |n, o| {
        for ri in 0..r {
            let s = &src[ri * nb * l + n * l..ri * nb * l + (n + 1) * l];
            let d = &mut o[ri * l..(ri + 1) * l];
            match bias {
                Some(b) => {
                    let v = b[ri];
                    for (d, &s) in d.iter_mut().zip(s) {
                        *d = MaybeUninit::new(s + v);
                    }
                }
                None => copy_run(d, as_uninit(s)),
            }
        }
    });
}

/// `dst (m x n) = lhs (m x k) @ rhs (k x n)` (`+ dst` when `acc`, which needs `dst`
/// initialized), row/col strides given. Writes all of `dst[..m * n]`.
#[allow(clippy::too_many_arguments)]
fn gemm<T: Elem>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [MaybeUninit<T>],
    acc: bool,
    lhs: &[T],
    (lrs, lcs): (usize, usize),
    rhs: &[T],
    (rrs, rcs): (usize, usize),
    par: gemm::Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            dst[..m * n].fill(MaybeUninit::new(T::ZERO));
        }
        return;
    }
    assert!(dst.len() >= m * n);
    assert!(lhs.len() > (m - 1) * lrs + (k - 1) * lcs);
    assert!(rhs.len() > (k - 1) * rrs + (n - 1) * rcs);
    // SAFETY: the slices hold every element the strides reach (checked above); without
    // `acc` gemm writes the destination without reading it.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr() as *mut T,
            1,
            n as isize,
            acc,
            lhs.as_ptr(),
            lcs as isize,
            lrs as isize,
            rhs.as_ptr(),
            rcs as isize,
            rrs as isize,
            if acc { T::ONE } else { T::ZERO },
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Run `f(g, dst_g, par)` for every group's `chunk` of `out`: in parallel over groups
/// when there are enough of them to fill the threads, else one after another with a
/// multi-threaded GEMM when the GEMM (`work` multiply-adds per group) is big enough.
fn per_group<U: Send>(
    out: &mut [U],
    chunk: usize,
    groups: usize,
    work: usize,
    f: impl Fn(usize, &mut [U], gemm::Parallelism) + Sync + Send,
) {
    let threads = rayon::current_num_threads();
    if groups >= threads && groups > 1 && (par_gemm(work * groups) || par_ok(chunk * groups)) {
        out.par_chunks_mut(chunk)
            .take(groups)
            .enumerate()
            .for_each(|(g, o)| f(g, o, gemm::Parallelism::None));
    } else {
        // gemm splits only above its own size threshold.
        let par = if par_gemm(work) {
            gemm::Parallelism::Rayon(threads)
        } else {
            gemm::Parallelism::None
        };
        for (g, o) in out.chunks_mut(chunk).take(groups).enumerate() {
            f(g, o, par);
        }
    }
}

/// Sizes of one convolution seen as GEMMs: `mg` rows of the weight per group (output
/// channels, or input channels for a transposed conv), `kc` = image channels per group
/// * taps, and `l` output positions per sample.
fn dims(g: &Geom, w_rows: usize) -> (usize, usize, usize) {
    (w_rows / g.groups, g.c / g.groups * g.kvol(), g.ovol())
}

/// Columns kept from a forward for the weight gradient (at most this many elements:
/// PyTorch's slow convolution keeps them too, but memory stays bounded).
const KEEP_COLS_MAX: usize = 1 << 22;

/// A buffer a forward or a weight-gradient kernel hands back to the backward.
enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// The element types a `Buf` holds.
trait Keep: Elem {
    fn wrap(v: Vec<Self>) -> Buf;
    fn view(b: &Buf) -> Option<&[Self]>;
}
impl Keep for f32 {
    fn wrap(v: Vec<f32>) -> Buf {
        Buf::F32(v)
    }
    fn view(b: &Buf) -> Option<&[f32]> {
        match b {
            Buf::F32(v) => Some(v),
            Buf::F64(_) => None,
        }
    }
}
impl Keep for f64 {
    fn wrap(v: Vec<f64>) -> Buf {
        Buf::F64(v)
    }
    fn view(b: &Buf) -> Option<&[f64]> {
        match b {
            Buf::F64(v) => Some(v),
            Buf::F32(_) => None,
        }
    }
}

impl Buf {
    fn tensor(self, shape: &Shape, device: &candle_core::Device) -> Result<Tensor> {
        match self {
            Buf::F32(v) => Tensor::from_vec(v, shape, device),
            Buf::F64(v) => Tensor::from_vec(v, shape, device),
        }
    }
}

/// a (N, G*mg, L) = W_g (mg x kc) @ im2col(img)_g (+ bias): a plain convolution. With
/// `keep`, a batch that is one chunk leaves its columns there for the weight gradient.
fn conv_fwd<T: Keep>(img: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize, keep: Option<&OnceLock<Buf>>) -> Vec<T> {
    let (mg, kc, l) = dims(g, w_rows);
    let (iv, rows) = (g.c * g.ivol(), g.groups * mg);
    let total = g.n * rows * l;
    if l == 0 || total == 0 {
        return vec![T::ZERO; total];
    }
    let per = g.chunk();
    // Every chunk's permute writes its part of the output.
    filled(total, |out| {
        for (ci, o) in out.chunks_mut(per * rows * l).enumerate() {
            let (n0, nb) = (ci * per, o.len() / (rows * l));
            let nl = nb * l;
            // im2col and the GEMMs each write their whole output.
            let cols = filled(g.c * g.kvol() * nl, |c| im2col(&img[n0 * iv..(n0 + nb) * iv], g, nb, c));
            let gemms = |a: &mut [MaybeUninit<T>]| {
                per_group(a, mg * nl, g.groups, mg * nl * kc, |gi, dst, par| {
                    gemm((mg, nl, kc), dst, false, &w[gi * mg * kc..], (kc, 1), &cols[gi * kc * nl..], (nl, 1), par)
                })
            };
            if nb == 1 {
                // One sample: the channel-major result is the output itself.
                gemms(o);
                if let Some(b) = bias {
                    // SAFETY: the GEMMs wrote all of `o`.
                    let o = unsafe { &mut *(o as *mut [MaybeUninit<T>] as *mut [T]) };
                    for_chunks(o, l, par_ok(o.len()), |r, row| row.iter_mut().for_each(|v| *v += b[r]));
                }
            } else {
                let a = filled(rows * nl, gemms);
                from_channel_major(&a, nb, rows, l, bias, o);
            }
            if let Some(keep) = keep.filter(|_| nb == g.n && cols.len() <= KEEP_COLS_MAX) {
                let _ = keep.set(T::wrap(cols));
            }
        }
    })
}

/// img (N, C, *ins) = col2im(W_g^T (kc x mg) @ a_g) (+ bias): the adjoint of `conv_fwd`.
fn conv_adj<T: Elem>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
    let (mg, kc, l) = dims(g, w_rows);
    let (iv, rows) = (g.ivol(), g.groups * mg);
    let mut out = vec![T::ZERO; g.n * g.c * iv];
    if let Some(b) = bias {
        for_chunks(&mut out, iv, par_ok(g.n * g.c * iv), |p, plane| plane.fill(b[p % g.c]));
    }
    if l == 0 || out.is_empty() {
        return out;
    }
    let per = g.chunk();
    for (ci, o) in out.chunks_mut(per * g.c * iv).enumerate() {
        let (n0, nb) = (ci * per, o.len() / (g.c * iv));
        let nl = nb * l;
        let ap = channel_major(&a[n0 * rows * l..(n0 + nb) * rows * l], nb, rows, l);
        let mut cols = filled(g.groups * kc * nl, |c| {
            per_group(c, kc * nl, g.groups, kc * nl * mg, |gi, dst, par| {
                gemm((kc, nl, mg), dst, false, &w[gi * mg * kc..], (1, kc), &ap[gi * mg * nl..], (nl, 1), par)
            })
        });
        col2im(&mut cols, g, nb, o);
    }
    out
}

/// dW (G*mg, kc) = sum over chunks of a_g (mg x nb*L) @ im2col(img)_g^T. `kept` are the
/// forward's columns of the whole batch, if it kept them; with `bias_sink` the rows of
/// `a` are also summed there (the bias gradient, from the permuted copy at hand).
fn conv_wgrad<T: Keep>(
    a: &[T],
    img: &[T],
    g: &Geom,
    w_rows: usize,
    kept: Option<&[T]>,
    bias_sink: Option<&OnceLock<Buf>>,
) -> Vec<T> {
    let (mg, kc, l) = dims(g, w_rows);
    let (iv, rows) = (g.c * g.ivol(), g.groups * mg);
    let mut out = vec![T::ZERO; g.groups * mg * kc];
    let mut bias = vec![T::ZERO; rows];
    if l == 0 || g.n == 0 {
        if let Some(sink) = bias_sink {
            let _ = sink.set(T::wrap(bias));
        }
        return out;
    }
    let per = g.chunk();
    for n0 in (0..g.n).step_by(per) {
        let nb = per.min(g.n - n0);
        let nl = nb * l;
        let ap = channel_major(&a[n0 * rows * l..(n0 + nb) * rows * l], nb, rows, l);
        let mine;
        let cols: &[T] = match kept.filter(|k| nb == g.n && k.len() == g.c * g.kvol() * nl) {
            Some(k) => k,
            None => {
                mine = filled(g.c * g.kvol() * nl, |c| im2col(&img[n0 * iv..(n0 + nb) * iv], g, nb, c));
                &mine
            }
        };
        per_group(as_uninit_mut(&mut out), mg * kc, g.groups, mg * kc * nl, |gi, dst, par| {
            gemm((mg, kc, nl), dst, n0 > 0, &ap[gi * mg * nl..], (nl, 1), &cols[gi * kc * nl..], (1, nl), par)
        });
        if bias_sink.is_some() {
            for (b, row) in bias.iter_mut().zip(ap.chunks_exact(nl)) {
                *b += sum8(row);
            }
        }
    }
    if let Some(sink) = bias_sink {
        let _ = sink.set(T::wrap(bias));
    }
    out
}

/// Sum with 8 independent accumulators, so the loop vectorizes.
fn sum8<T: Elem>(v: &[T]) -> T {
    let mut acc = [T::ZERO; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    acc.iter().chain(rest).fold(T::ZERO, |s, &x| s + x)
}

/// Which kernel a `ConvOp` runs forward: `Fwd(img, w) -> a` or `Adj(a, w) -> img`.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Fwd,
    Adj,
    /// `(a, img) -> dW`, only used inside backward passes.
    WGrad,
}

/// One convolution kernel as a Candle op. `w_rows` is the weight's first dim. Applied
/// as a `CustomOp2` (no bias) or a `CustomOp3` whose third input is the bias.
struct ConvOp {
    g: Geom,
    w_rows: usize,
    kind: Kind,
    /// A `Fwd` whose weight needs a gradient keeps its columns in `cols` (shared with the
    /// ops its backward makes, which read them).
    keep_cols: bool,
    cols: Arc<OnceLock<Buf>>,
    /// A `WGrad` that also sums the bias gradient, for one backward call.
    bias_sink: Option<Arc<OnceLock<Buf>>>,
}

impl ConvOp {
    fn out_shape(&self) -> Shape {
        let g = &self.g;
        match self.kind {
            Kind::Fwd => Shape::from((g.n, self.w_rows / g.groups * g.groups, g.outs[0], g.outs[1], g.outs[2])),
            Kind::Adj => Shape::from((g.n, g.c, g.ins[0], g.ins[1], g.ins[2])),
            Kind::WGrad => Shape::from((self.w_rows, g.c / g.groups * g.kvol())),
        }
    }
    fn new(g: Geom, w_rows: usize, kind: Kind, keep_cols: bool) -> ConvOp {
        ConvOp { g, w_rows, kind, keep_cols, cols: Arc::new(OnceLock::new()), bias_sink: None }
    }
    fn with(&self, kind: Kind) -> ConvOp {
        ConvOp {
            g: self.g.clone(),
            w_rows: self.w_rows,
            kind,
            keep_cols: false,
            cols: self.cols.clone(),
            bias_sink: None,
        }
    }
    fn op_name(&self) -> &'static str {
        match self.kind {
            Kind::Fwd => "conv",
            Kind::Adj => "conv_transpose",
            Kind::WGrad => "conv_weight_grad",
        }
    }
    /// Whether the op is big enough for threads: its GEMMs' multiply-adds, or the
    /// columns it moves (depthwise convolutions are mostly the latter).
    fn parallel(&self) -> bool {
        let (mg, kc, l) = dims(&self.g, self.w_rows);
        let g = &self.g;
        par_gemm(g.n * g.groups * mg * kc * l) || par_ok(g.n * g.c * g.kvol() * l)
    }
    fn run<T: Keep>(&self, a: &[T], b: &[T], bias: Option<&[T]>) -> Vec<T> {
        let keep = self.keep_cols.then_some(&*self.cols);
        let kept = self.cols.get().and_then(T::view);
        in_pool(self.parallel(), || match self.kind {
            Kind::Fwd => conv_fwd(a, b, bias, &self.g, self.w_rows, keep),
            Kind::Adj => conv_adj(a, b, bias, &self.g, self.w_rows),
            Kind::WGrad => conv_wgrad(a, b, &self.g, self.w_rows, kept, self.bias_sink.as_deref()),
        })
    }
    fn fwd(
        &self,
        (s1, l1): (&CpuStorage, &Layout),
        (s2, l2): (&CpuStorage, &Layout),
        bias: Option<(&CpuStorage, &Layout)>,
    ) -> Result<(CpuStorage, Shape)> {
        let name = self.op_name();
        let out = match (s1, s2, bias) {
            (CpuStorage::F32(a), CpuStorage::F32(b), None) => {
                CpuStorage::F32(self.run(super::data(a, l1, name)?, super::data(b, l2, name)?, None))
            }
            (CpuStorage::F32(a), CpuStorage::F32(b), Some((CpuStorage::F32(c), l3))) => CpuStorage::F32(self.run(
                super::data(a, l1, name)?,
                super::data(b, l2, name)?,
                Some(super::data(c, l3, name)?),
            )),
            (CpuStorage::F64(a), CpuStorage::F64(b), None) => {
                CpuStorage::F64(self.run(super::data(a, l1, name)?, super::data(b, l2, name)?, None))
            }
            (CpuStorage::F64(a), CpuStorage::F64(b), Some((CpuStorage::F64(c), l3))) => CpuStorage::F64(self.run(
                super::data(a, l1, name)?,
                super::data(b, l2, name)?,
                Some(super::data(c, l3, name)?),
            )),
            _ => candle_core::bail!("{name}: only float32 and float64 tensors of one dtype are supported"),
        };
        Ok((out, self.out_shape()))
    }
    /// Gradients of the image-side input and of the weight, and (with `bias_sink`, for a
    /// `Fwd` whose weight needs one) the bias gradient summed along the way.
    fn grads(
        &self,
        x: &Tensor,
        w: &Tensor,
        grad: &Tensor,
        bias_sink: Option<Arc<OnceLock<Buf>>>,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (dx, other) = match self.kind {
            // y = conv(img, w): d img = adj(grad, w), dW = wgrad(grad, img).
            Kind::Fwd => (Kind::Adj, (grad, x)),
            // img = adj(a, w): d a = conv(grad, w), dW = wgrad(a, grad).
            Kind::Adj => (Kind::Fwd, (x, grad)),
            Kind::WGrad => candle_core::bail!("conv: second-order gradients are not supported"),
        };
        let gx = if x.track_op() {
            Some(grad.apply_op2_no_bwd(&w.contiguous()?, &self.with(dx))?)
        } else {
            None
        };
        let gw = if w.track_op() {
            let mut op = self.with(Kind::WGrad);
            // The weight gradient's `a` is the upstream gradient only for a plain convolution.
            op.bias_sink = bias_sink.filter(|_| self.kind == Kind::Fwd);
            let dw = other.0.contiguous()?.apply_op2_no_bwd(&other.1.contiguous()?, &op)?;
            Some(dw.reshape(w.shape())?)
        } else {
            None
        };
        Ok((gx, gw))
    }
}

impl CustomOp2 for ConvOp {
    fn name(&self) -> &'static str {
        self.op_name()
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        self.fwd((s1, l1), (s2, l2), None)
    }
    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        self.grads(x, w, &grad.contiguous()?, None)
    }
}

impl CustomOp3 for ConvOp {
    fn name(&self) -> &'static str {
        self.op_name()
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        self.fwd((s1, l1), (s2, l2), Some((s3, l3)))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let sink = b.track_op().then(|| Arc::new(OnceLock::new()));
        let (gx, gw) = self.grads(x, w, &grad, sink.clone())?;
        let summed = sink.and_then(|s| Arc::try_unwrap(s).ok()).and_then(|s| s.into_inner());
        let gb = match summed {
            Some(buf) => Some(buf.tensor(b.shape(), b.device())?),
            None if b.track_op() => {
                let d = grad.dims();
                let per_channel = grad.reshape((d[0], d[1], d[2] * d[3] * d[4]))?;
                Some(crate::kernels::sum_keepdim(&per_channel, &[0, 2])?.reshape(b.shape())?)
            }
            None => None,
        };
        Ok((gx, gw, gb))
    }
}

/// Apply `op` to the 5-d image-side input and the weight, with the bias if any.
fn apply(x5: &Tensor, w: &Tensor, b: Option<&Tensor>, op: ConvOp) -> Result<Tensor> {
    let w = w.contiguous()?;
    match b {
        Some(b) => x5.apply_op3(&w, &b.contiguous()?, op),
        None => x5.apply_op2(&w, op),
    }
}

/// x (N, C, D, H, W), w (Cout, C/G, kd, kh, kw) -> (N, Cout, od, oh, ow).
fn conv_nd(x: &Tensor, w: &Tensor, b: Option<&Tensor>, g: Geom, cout: usize) -> Result<Tensor> {
    let [d, h, wi] = g.ins;
    let x5 = x.reshape((g.n, g.c, d, h, wi))?.contiguous()?;
    let keep = w.track_op() && crate::autograd::grad_enabled();
    apply(&x5, w, b, ConvOp::new(g, cout, Kind::Fwd, keep))
}

/// x (N, Cin, Di, Hi, Wi), w (Cin, Cout/G, kd, kh, kw) -> (N, Cout, *g.ins): the adjoint of
/// the convolution whose geometry `g` maps the output grid back onto x's grid.
fn conv_transpose_nd(x: &Tensor, w: &Tensor, b: Option<&Tensor>, g: Geom, cin: usize) -> Result<Tensor> {
    let [d, h, wi] = g.outs;
    let x5 = x.reshape((g.n, cin, d, h, wi))?.contiguous()?;
    apply(&x5, w, b, ConvOp::new(g, cin, Kind::Adj, false))
}

fn err(op: &str, msg: String) -> PyErr {
    ShapeError::new_err(format!("{op} {msg}"))
}

fn per_axis(v: &[i64], nd: usize, what: &str, op: &str, min: i64) -> PyResult<[usize; 3]> {
    if v.len() != nd {
        return Err(err(op, format!("expected {what} with {nd} values, got {v:?}")));
    }
    if v.iter().any(|&x| x < min) {
        return Err(err(op, format!("{what} must be >= {min}, got {v:?}")));
    }
    let mut out = [if what == "padding" || what == "output_padding" {
        0
    } else {
        1
    }; 3];
    for (i, &x) in v.iter().enumerate() {
        out[3 - nd + i] = x as usize;
    }
    Ok(out)
}

fn pad3(v: &[usize]) -> [usize; 3] {
    let mut o = [1; 3];
    let nd = v.len();
    o[3 - nd..].copy_from_slice(v);
    o
}

/// `_core._conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, transposed,
/// output_padding, op)`: N-d convolution (or transposed convolution) with PyTorch's
/// semantics. `pad_hi` (extra padding at the end, for "same") is used by plain
/// convolution only; `op` prefixes error messages (a layer name like "[Conv2d]").
#[pyfunction]
#[pyo3(signature = (input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, transposed, output_padding, op))]
#[allow(clippy::too_many_arguments)]
fn _conv(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    stride: Vec<i64>,
    pad_lo: Vec<i64>,
    pad_hi: Vec<i64>,
    dilation: Vec<i64>,
    groups: i64,
    transposed: bool,
    output_padding: Vec<i64>,
    op: &str,
) -> PyResult<PyTensor> {
    let (x, w) = (input.get(), weight.get());
    let b = bias.map(|b| b.get());
    let dt = x.dt();
    for (name, t) in [("input", Some(x)), ("weight", Some(w)), ("bias", b)] {
        if let Some(t) = t {
            if !matches!(t.dt(), DT::F32 | DT::F64) || t.dt() != dt {
                return Err(DTypeError::new_err(format!(
                    "{op} expected float32 or float64 tensors of one dtype, got {name} of {} (input is {})",
                    t.dt().name(),
                    dt.name()
                )));
            }
        }
    }
    let (x, w) = (x.t(), w.t());
    let b = b.map(|b| b.t());
    let nd = w.rank().saturating_sub(2);
    if !(1..=3).contains(&nd) {
        return Err(err(
            op,
            format!("expected a weight of rank 3, 4 or 5, got shape {:?}", w.dims()),
        ));
    }
    if x.rank() != nd + 2 {
        return Err(err(
            op,
            format!(
                "expected a {}-d input (N, C, *spatial) for weight {:?}, got {:?}",
                nd + 2,
                w.dims(),
                x.dims()
            ),
        ));
    }
    if groups < 1 {
        return Err(err(op, format!("groups must be positive, got {groups}")));
    }
    let groups = groups as usize;
    let stride = per_axis(&stride, nd, "stride", op, 1)?;
    let dil = per_axis(&dilation, nd, "dilation", op, 1)?;
    let plo = per_axis(&pad_lo, nd, "padding", op, 0)?;
    let phi = per_axis(&pad_hi, nd, "padding", op, 0)?;
    let opad = per_axis(&output_padding, nd, "output_padding", op, 0)?;
    let (xd, wd) = (x.dims().to_vec(), w.dims().to_vec());
    let (n, cin) = (xd[0], xd[1]);
    let k = pad3(&wd[2..]);
    let ins = pad3(&xd[2..]);
    if k.contains(&0) {
        return Err(err(op, format!("kernel size must be positive, got weight {wd:?}")));
    }
    let out = if !transposed {
        let cout = wd[0];
        if cin != wd[1] * groups {
            return Err(err(
                op,
                format!(
                    "expected input with {} channels (weight {wd:?}, groups={groups}), got {xd:?}",
                    wd[1] * groups
                ),
            ));
        }
        if cout % groups != 0 {
            return Err(err(
                op,
                format!("out_channels ({cout}) must be divisible by groups ({groups})"),
            ));
        }
        let mut outs = [0; 3];
        for a in 0..3 {
            let padded = (ins[a] + plo[a] + phi[a]) as i64;
            let span = (dil[a] * (k[a] - 1) + 1) as i64;
            if padded < span {
                return Err(err(op, format!(
                    "kernel size {:?} (dilated to {}) is larger than the padded input size {} in spatial dim {} (input {xd:?})",
                    &wd[2..], span, padded, a + nd - 3
                )));
            }
            outs[a] = ((padded - span) / stride[a] as i64 + 1) as usize;
        }
        if let Some(b) = &b {
            if b.dims() != [cout] {
                return Err(err(op, format!("expected bias of shape ({cout},), got {:?}", b.dims())));
            }
        }
        let g = Geom {
            n,
            c: cin,
            groups,
            ins,
            outs,
            k,
            stride,
            pad: plo,
            dil,
        };
        let y = crate::errors::detach(py, op, || conv_nd(&x, &w, b.as_ref(), g, cout).op(op))?;
        (y, cout, outs)
    } else {
        if wd[0] != cin {
            return Err(err(
                op,
                format!("expected input with {} channels (weight {wd:?}), got {xd:?}", wd[0]),
            ));
        }
        if cin % groups != 0 {
            return Err(err(
                op,
                format!("in_channels ({cin}) must be divisible by groups ({groups})"),
            ));
        }
        let cout = wd[1] * groups;
        let mut outs = [0; 3];
        for a in 0..3 {
            if opad[a] >= stride[a] && opad[a] >= dil[a] {
                return Err(err(op, format!(
                    "output padding must be smaller than either stride or dilation, got output_padding={output_padding:?}"
                )));
            }
            let o = (ins[a] as i64 - 1) * stride[a] as i64 - 2 * plo[a] as i64
                + (dil[a] * (k[a] - 1)) as i64
                + opad[a] as i64
                + 1;
            if o <= 0 {
                return Err(err(
                    op,
                    format!("computed output size {o} is not positive for input {xd:?} and weight {wd:?}"),
                ));
            }
            outs[a] = o as usize;
        }
        if let Some(b) = &b {
            if b.dims() != [cout] {
                return Err(err(op, format!("expected bias of shape ({cout},), got {:?}", b.dims())));
            }
        }
        // The adjoint of a convolution from the output grid (outs) onto the input grid (ins).
        let g = Geom {
            n,
            c: cout,
            groups,
            ins: outs,
            outs: ins,
            k,
            stride,
            pad: plo,
            dil,
        };
        let y = crate::errors::detach(py, op, || conv_transpose_nd(&x, &w, b.as_ref(), g, cin).op(op))?;
        (y, cout, outs)
    };
    let (y, cout, outs) = out;
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&outs[3 - nd..]);
    let y = y.reshape(shape).op(op)?;
    Ok(PyTensor::wrap_dt(y, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_conv, m)?)?;
    Ok(())
}
