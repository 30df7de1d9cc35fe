//! The three convolution passes (forward, adjoint, weight gradient) as GEMMs over
//! chunks of the batch, one per group, with the columns a forward keeps for the
//! weight gradient.
use super::im2col::*;
use super::*;
use crate::ops::gemm::{gemm_slices, Parallelism};

/// Run `f(g, dst_g, par)` for every group's `chunk` of `out`: in parallel over groups
/// when there are enough of them to fill the threads, else one after another with a
/// multi-threaded GEMM when the GEMM (`work` multiply-adds per group) is big enough.
pub(crate) fn per_group<U: Send>(
    out: &mut [U],
    chunk: usize,
    groups: usize,
    work: usize,
    f: impl Fn(usize, &mut [U], Parallelism) + Sync + Send,
) {
    let threads = rayon::current_num_threads();
    if groups >= threads && groups > 1 && (par_gemm(work * groups) || par_ok(chunk * groups)) {
        let used = (chunk * groups).min(out.len());
        crate::ops::parallel::for_chunks(&mut out[..used], chunk, true, |g, o| f(g, o, Parallelism::None));
    } else {
        // gemm splits only above its own size threshold.
        let par = if par_gemm(work) { Parallelism::Rayon(threads) } else { Parallelism::None };
        for (g, o) in out.chunks_mut(chunk).take(groups).enumerate() {
            f(g, o, par);
        }
    }
}

/// Sizes of one convolution seen as GEMMs: `mg` rows of the weight per group (output
/// channels, or input channels for a transposed conv), `kc` = image channels per group
/// * taps, and `l` output positions per sample.
pub(crate) fn dims(g: &Geom, w_rows: usize) -> (usize, usize, usize) {
    (w_rows / g.groups, g.c / g.groups * g.kvol(), g.ovol())
}

/// Columns kept from a forward for the weight gradient (at most this many elements:
/// PyTorch's slow convolution keeps them too, but memory stays bounded).
pub(crate) const KEEP_COLS_MAX: usize = 1 << 22;

/// A buffer a forward or a weight-gradient kernel hands back to the backward.
pub(crate) enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// The element types a `Buf` holds.
pub(crate) trait Keep: Float {
    fn wrap(v: Vec<Self>) -> Buf;
    fn view(b: &Buf) -> Option<&[Self]>;
    /// The slice as f32 when `Self` is f32 (the implicit-GEMM and direct paths are f32 only).
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
    /// An f32 result back as `Self`, when `Self` is f32.
    fn from_f32_vec(v: Vec<f32>) -> Option<Vec<Self>>;
}
impl Keep for f32 {
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
    fn from_f32_vec(v: Vec<f32>) -> Option<Vec<f32>> {
        Some(v)
    }
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
    fn as_f32(_: &[f64]) -> Option<&[f32]> {
        None
    }
    fn from_f32_vec(_: Vec<f32>) -> Option<Vec<f64>> {
        None
    }
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
    pub(crate) fn tensor(self, shape: &Shape, device: &candle_core::Device) -> Result<Tensor> {
        match self {
            Buf::F32(v) => Tensor::from_vec(v, shape, device),
            Buf::F64(v) => Tensor::from_vec(v, shape, device),
        }
    }
}

/// a (N, G*mg, L) = W_g (mg x kc) @ im2col(img)_g (+ bias): a plain convolution. With
/// `keep`, a batch that is one chunk leaves its columns there for the weight gradient.
pub(crate) fn conv_fwd<T: Keep>(img: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize, keep: Option<&OnceLock<Buf>>) -> Vec<T> {
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
                    gemm_slices((mg, nl, kc), dst, false, &w[gi * mg * kc..], (kc, 1), &cols[gi * kc * nl..], (nl, 1), par)
                })
            };
            if nb == 1 {
                // One sample: the channel-major result is the output itself.
                gemms(o);
                if let Some(b) = bias {
                    // SAFETY: `MaybeUninit<T>` has `T`'s layout, and the GEMMs (one per group,
                    // each writing all of its mg x l block; groups * mg * l = o.len()) have
                    // initialized all of `o`.
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
pub(crate) fn conv_adj<T: Float>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
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
                gemm_slices((kc, nl, mg), dst, false, &w[gi * mg * kc..], (1, kc), &ap[gi * mg * nl..], (nl, 1), par)
            })
        });
        col2im(&mut cols, g, nb, o);
    }
    out
}

/// dW (G*mg, kc) = sum over chunks of a_g (mg x nb*L) @ im2col(img)_g^T. `kept` are the
/// forward's columns of the whole batch, if it kept them; with `bias_sink` the rows of
/// `a` are also summed there (the bias gradient, from the permuted copy at hand).
pub(crate) fn conv_wgrad<T: Keep>(
    a: &[T],
    img: &[T],
    g: &Geom,
    w_rows: usize,
    kept: Option<&[T]>,
    bias_sink: Option<&OnceLock<Buf>>,
) -> Vec<T> {
    let (mg, kc, l) = dims(g, w_rows);
    let (iv, rows) = (g.c * g.ivol(), g.groups * mg);
    // The GEMMs compute dW^T (kc x mg per group), transposed into `out` at the end: the
    // `gemm` crate runs cols (kc x nl) @ a^T 1.5-3x faster than a @ cols^T, whose
    // short left side and column-major right side is its slow case (measured with
    // AVX-512: 32 x 288 x 3072 at 43 GFLOP/s, transposed 136; 128 x 1152 x 2048: 206
    // and 315).
    let mut out_t = vec![T::ZERO; g.groups * mg * kc];
    let mut bias = vec![T::ZERO; rows];
    if l == 0 || g.n == 0 {
        if let Some(sink) = bias_sink {
            let _ = sink.set(T::wrap(bias));
        }
        return out_t;
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
        per_group(as_uninit_mut(&mut out_t), mg * kc, g.groups, mg * kc * nl, |gi, dst, par| {
            gemm_slices((kc, mg, nl), dst, n0 > 0, &cols[gi * kc * nl..], (nl, 1), &ap[gi * mg * nl..], (1, nl), par)
        });
        if bias_sink.is_some() {
            for (b, row) in bias.iter_mut().zip(ap.chunks_exact(nl)) {
                *b += crate::ops::reduce::sum_slice(row);
            }
        }
    }
    if let Some(sink) = bias_sink {
        let _ = sink.set(T::wrap(bias));
    }
    let mut out = vec![T::ZERO; g.groups * mg * kc];
    for (o, t) in out.chunks_exact_mut(mg * kc).zip(out_t.chunks_exact(mg * kc)) {
        for (r, row) in o.chunks_exact_mut(kc).enumerate() {
            for (k, v) in row.iter_mut().enumerate() {
                *v = t[k * mg + r];
            }
        }
    }
    out
}
