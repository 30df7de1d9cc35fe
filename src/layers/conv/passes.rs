//! The three convolution passes (forward, adjoint, weight gradient) as GEMMs over
//! chunks of the batch, one per group, with the columns a forward keeps for the
//! weight gradient.
use super::im2col::*;
use super::*;
use crate::ops::gemm::{gemm_slices, Parallelism};
use crate::ops::sgemm::{sgemm_with, takes, Mat};

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
    /// The mutable slice as f32 when `Self` is f32.
    fn as_f32_mut(s: &mut [Self]) -> Option<&mut [f32]>;
}
impl Keep for f32 {
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
    fn from_f32_vec(v: Vec<f32>) -> Option<Vec<f32>> {
        Some(v)
    }
    fn as_f32_mut(s: &mut [f32]) -> Option<&mut [f32]> {
        Some(s)
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
    fn as_f32_mut(_: &mut [f64]) -> Option<&mut [f32]> {
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
pub(crate) fn conv_adj<T: Keep>(a: &[T], w: &[T], bias: Option<&[T]>, g: &Geom, w_rows: usize) -> Vec<T> {
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
    // f32 weights beyond L2 (`BIG_WEIGHT`) multiply on `ops::sgemm`, which reads the
    // transposed weight as it lies: a 256 -> 512 channel 4 x 4 layer's adjoint (batch 16)
    // 9.6 -> 6.8 ms (torch 5.8); smaller ones measured 5% faster on the `gemm` crate.
    let big = big_weight(g, w_rows);
    for (ci, o) in out.chunks_mut(per * g.c * iv).enumerate() {
        let (n0, nb) = (ci * per, o.len() / (g.c * iv));
        let nl = nb * l;
        let sgemm_adj = big && takes(kc, nl);
        let ap = channel_major(&a[n0 * rows * l..(n0 + nb) * rows * l], nb, rows, l);
        let mut cols = filled(g.groups * kc * nl, |c| match (T::as_f32(w), T::as_f32(&ap)) {
            (Some(w32), Some(ap32)) if sgemm_adj => {
                let threads = if par_gemm(kc * nl * mg) { rayon::current_num_threads() } else { 1 };
                for gi in 0..g.groups {
                    let lhs = Mat::new(w32[gi * mg * kc..].as_ptr(), 1, kc as isize);
                    let rhs = Mat::new(ap32[gi * mg * nl..].as_ptr(), nl as isize, 1);
                    let dst = c[gi * kc * nl..].as_mut_ptr() as *mut f32;
                    // SAFETY: `takes(kc, nl)` (`sgemm_adj`); `dst` is the group's kc rows of
                    // nl floats in `c` (written unread); `lhs` is the transpose of the group's
                    // mg x kc weight block, `rhs` its mg rows of `ap` (nl floats each), both
                    // inside their buffers, which nothing writes during the call.
                    unsafe { sgemm_with((kc, nl, mg), dst, nl as isize, false, lhs, &rhs, 1.0, threads) };
                }
            }
            _ => per_group(c, kc * nl, g.groups, kc * nl * mg, |gi, dst, par| {
                gemm_slices((kc, nl, mg), dst, false, &w[gi * mg * kc..], (1, kc), &ap[gi * mg * nl..], (nl, 1), par)
            }),
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
    // On the `gemm` crate the GEMMs compute dW^T (kc x mg per group), transposed into
    // `out` at the end: it runs cols (kc x nl) @ a^T 1.5-3x faster than a @ cols^T, whose
    // short left side and column-major right side is its slow case (measured with
    // AVX-512: 32 x 288 x 3072 at 43 GFLOP/s, transposed 136; 128 x 1152 x 2048: 206
    // and 315). f32 on a CPU `ops::sgemm` serves (`direct`) computes dW = a (mg x nl) @
    // cols^T straight into the weight's layout instead: its packing reads both operands
    // as they lie, and the transpose, an 8 MB strided pass for a 256 -> 512 channel
    // 4 x 4 layer, took a fifth of that layer's weight gradient.
    let direct = T::as_f32(img).is_some() && takes(mg, kc);
    let mut acc = vec![T::ZERO; g.groups * mg * kc];
    let mut bias = vec![T::ZERO; rows];
    if l == 0 || g.n == 0 {
        if let Some(sink) = bias_sink {
            let _ = sink.set(T::wrap(bias));
        }
        return acc;
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
        match (T::as_f32(cols), T::as_f32(&ap), T::as_f32_mut(&mut acc)) {
            (Some(cols), Some(ap), Some(acc)) if direct => {
                let threads = if par_gemm(mg * kc * nl) { rayon::current_num_threads() } else { 1 };
                for gi in 0..g.groups {
                    let lhs = Mat::new(ap[gi * mg * nl..].as_ptr(), nl as isize, 1);
                    let rhs = Mat::new(cols[gi * kc * nl..].as_ptr(), 1, nl as isize);
                    // SAFETY: `takes(mg, kc)` (`direct`); the destination is the group's mg x kc
                    // block of `acc` (initialized); `lhs` is the group's mg rows of `ap` (nl
                    // floats each), `rhs` the transpose of its kc rows of `cols`, both inside
                    // their buffers, which nothing writes during the call.
                    unsafe { sgemm_with((mg, kc, nl), acc[gi * mg * kc..].as_mut_ptr(), kc as isize, n0 > 0, lhs, &rhs, 1.0, threads) };
                }
            }
            _ => per_group(as_uninit_mut(&mut acc), mg * kc, g.groups, mg * kc * nl, |gi, dst, par| {
                gemm_slices((kc, mg, nl), dst, n0 > 0, &cols[gi * kc * nl..], (nl, 1), &ap[gi * mg * nl..], (1, nl), par)
            }),
        }
        if bias_sink.is_some() {
            for (b, row) in bias.iter_mut().zip(ap.chunks_exact(nl)) {
                *b += crate::ops::reduce::sum_slice(row);
            }
        }
    }
    if let Some(sink) = bias_sink {
        let _ = sink.set(T::wrap(bias));
    }
    if direct {
        return acc;
    }
    from_transposed(&acc, mg, kc)
}

/// Per group, a transposed weight gradient dW^T (kc x mg) back in the weight's layout
/// (mg x kc), for the kernels that multiply in the transposed order.
pub(crate) fn from_transposed<T: Float>(t: &[T], mg: usize, kc: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; t.len()];
    for (o, t) in out.chunks_exact_mut((mg * kc).max(1)).zip(t.chunks_exact((mg * kc).max(1))) {
        for (r, row) in o.chunks_exact_mut(kc.max(1)).enumerate() {
            for (k, v) in row.iter_mut().enumerate() {
                *v = t[k * mg + r];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (output position, tap, input position) of one sample's windows under `g`
    /// (taps falling into the padding skipped), by the definition.
    fn windows(g: &Geom) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for p in 0..g.ovol() {
            let o = [p / (g.outs[1] * g.outs[2]), (p / g.outs[2]) % g.outs[1], p % g.outs[2]];
            for t in 0..g.kvol() {
                let off = g.offsets(t);
                let at: [isize; 3] = std::array::from_fn(|a| (o[a] * g.stride[a]) as isize + off[a]);
                if (0..3).all(|a| at[a] >= 0 && (at[a] as usize) < g.ins[a]) {
                    out.push((p, t, (at[0] as usize * g.ins[1] + at[1] as usize) * g.ins[2] + at[2] as usize));
                }
            }
        }
        out
    }

    /// The adjoint and the weight gradient of weights past `BIG_WEIGHT` and `GEMM_GRAD`
    /// (their `ops::sgemm` branches) equal the definition's sums.
    #[test]
    fn big_weights_match_the_definition() {
        // 2 samples of 40 channels at 8 x 8 -> 1640 channels at 4 x 4 (4 x 4 windows,
        // stride 2): a weight of 1,049,600 floats, over both thresholds.
        let (n, c, rows) = (2, 40, 1640);
        let g = Geom::for_test(n, c, 1, [1, 8, 8], [1, 4, 4], [1, 2, 2], [0, 1, 1], [1, 1, 1]);
        let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
        assert!(rows * c * kv > GEMM_GRAD && GEMM_GRAD > BIG_WEIGHT);
        let w = crate::ops::test_values(rows * c * kv, 5);
        let a = crate::ops::test_values(n * rows * l, 6);
        let img = crate::ops::test_values(n * c * iv, 7);
        let win = windows(&g);
        let (mut adj, mut dw) = (vec![0f64; n * c * iv], vec![0f64; rows * c * kv]);
        for s in 0..n {
            for o in 0..rows {
                for &(p, t, i) in &win {
                    let av = a[(s * rows + o) * l + p] as f64;
                    for ch in 0..c {
                        adj[(s * c + ch) * iv + i] += av * w[(o * c + ch) * kv + t] as f64;
                        dw[(o * c + ch) * kv + t] += av * img[(s * c + ch) * iv + i] as f64;
                    }
                }
            }
        }
        let want = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
        let got = super::super::on_two_threads(|| conv_adj(&a, &w, None, &g, rows));
        super::super::assert_close(&got, &want(adj), "adjoint");
        let got = super::super::on_two_threads(|| conv_wgrad(&a, &img, &g, rows, None, None));
        super::super::assert_close(&got, &want(dw), "weight gradient");
    }
}
