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
//! An f32 3x3 stride-1 forward with 16+ channels on each side runs as Winograd
//! F(4x4, 3x3) (`winograd`: a quarter of the multiplies, as 36 GEMMs over transformed
//! tiles), and so does its input gradient; outputs that come out non-finite there are
//! recomputed by a direct method. An f32 1-D stride-1 forward with 2 to 7 taps and 16+
//! channels on each side runs as Winograd F(9 - r, r) over 8 points (`winograd1d`: 1.75x
//! to 2.5x fewer multiplies), and so does its input gradient. A strided f32 forward with
//! 16+ input and 32+ output channels runs as register tiles over a channels-last copy of
//! each sample (`fwd_cl`).
//! Other f32 forwards with rows of 8+ read the image in place (`direct`).
//! An f32 forward with output rows of 16+ positions runs as an implicit GEMM instead
//! (`implicit`: the columns are packed straight from the image, never materialised);
//! it keeps no columns, so its weight gradient gathers them itself. The adjoint of a
//! stride-1 convolution (the input gradient; a stride-1 transposed convolution) is a
//! convolution too, with the kernel flipped, and takes the same path when its rows are.
//! The f32 weight gradient with 16+ input channels per group is a register-blocked GEMM
//! over channels-last copies of the upstream gradient and the zero-padded image
//! (`wgrad_cl`, AVX2 or AVX-512, any stride); with fewer channels, a stride-1 convolution with
//! rows of 32+ takes a dot-product kernel reading both in place (`wgrad`). The adjoint
//! of a strided convolution with 16+ image channels (its input gradient, a strided
//! transposed convolution) adds register tiles into a channels-last image (`adj_cl`).
//! With fewer than 16 channels, any stride, the weight gradient multiplies small blocks
//! of columns on `ops::sgemm`, one sum per thread (`wgrad_cols`). Weights beyond L2
//! (`BIG_WEIGHT`: adjoints) or gradients beyond 4 MiB (`GEMM_GRAD`) take the im2col GEMM
//! on `ops::sgemm` instead of the register tiles, which stream the whole weight per run
//! of positions. Depthwise convolutions (one input channel per group) run as direct
//! loops over their planes in all three directions (`depthwise`), f32 and f64, and a
//! window as large as the image is three plain GEMMs (`dense`).
//!
//! The threading policy (`par_ok`, `par_gemm`, `in_pool`, `for_chunks`) is
//! `crate::ops::parallel`'s.

mod adj_cl;
mod dense;
mod depthwise;
mod direct;
mod fwd_cl;
mod im2col;
mod implicit;
mod passes;
mod wgrad;
mod wgrad_cl;
mod wgrad_cols;
mod winograd;
mod winograd1d;

use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::parallel::{filled, for_chunks, in_pool, par_gemm, par_ok};
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use passes::*;
use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

/// Elements of one chunk's column matrix we aim for (4 MiB of f32, so the columns
/// stay in cache between im2col and the GEMM); a chunk holds at least one sample.
pub(crate) const COLS_BUDGET: usize = 1 << 20;
/// Initialized elements seen as possibly-uninitialized ones (same layout), to read from.
pub(crate) fn as_uninit<T>(s: &[T]) -> &[MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has `T`'s size, alignment and layout, and initialized values
    // are valid for it; the shared slice allows no writes.
    unsafe { &*(s as *const [T] as *const [MaybeUninit<T>]) }
}

/// The same for a destination that stays initialized (only valid values are written).
pub(crate) fn as_uninit_mut<T>(s: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: same layout, as above. The slice stays initialized because its users
    // (`passes::conv_wgrad`'s GEMMs, `im2col::from_channel_major` in the implicit
    // forward) store initialized values, never `uninit()`.
    unsafe { &mut *(s as *mut [T] as *mut [MaybeUninit<T>]) }
}

/// The weight-gradient kernels' split: samples `0..n` in contiguous ranges over the
/// threads when `par`, each range summed by `f(range, dw, db)` into buffers of its own
/// (`dw_len` and `db_len` zeros), which are then added up.
pub(crate) fn sum_over_samples(
    n: usize,
    par: bool,
    (dw_len, db_len): (usize, usize),
    f: impl Fn((usize, usize), &mut [f32], &mut [f32]) + Sync,
) -> (Vec<f32>, Vec<f32>) {
    let threads = if par { rayon::current_num_threads().min(n).max(1) } else { 1 };
    let per = n.div_ceil(threads);
    let parts: Vec<(Vec<f32>, Vec<f32>)> = crate::ops::parallel::map_indices(threads, threads > 1, |t| {
        let (mut dw, mut db) = (vec![0f32; dw_len], vec![0f32; db_len]);
        let range = (t * per, ((t + 1) * per).min(n));
        if range.0 < range.1 {
            f(range, &mut dw, &mut db);
        }
        (dw, db)
    });
    let mut it = parts.into_iter();
    let (mut dw, mut db) = it.next().expect("at least one thread");
    for (w2, b2) in it {
        dw.iter_mut().zip(&w2).for_each(|(x, y)| *x += y);
        db.iter_mut().zip(&b2).for_each(|(x, y)| *x += y);
    }
    (dw, db)
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
    /// Every tap's offset (`offsets`), in tap order.
    fn tap_offsets(&self) -> Vec<[isize; 3]> {
        (0..self.kvol()).map(|t| self.offsets(t)).collect()
    }
    /// Offset of kernel tap `kk` (flat) along each axis, relative to `o * stride`.
    fn offsets(&self, kk: usize) -> [isize; 3] {
        let t = [kk / (self.k[1] * self.k[2]), (kk / self.k[2]) % self.k[1], kk % self.k[2]];
        let mut o = [0isize; 3];
        for a in 0..3 {
            o[a] = (t[a] * self.dil[a]) as isize - self.pad[a] as isize;
        }
        o
    }
}

/// Weight gradients of more than this many floats (4 MiB) take the im2col GEMM
/// (`passes::conv_wgrad`, whose `ops::sgemm` product splits the gradient over the
/// threads and writes each element once). The other kernels keep a gradient per thread
/// and add into all of it once per chunk of positions (`wgrad_cl`: ~20 positions with
/// 256 channels), so a gradient beyond L2 streams from L3 at every chunk. Batch 16,
/// ms (torch): a 256 -> 512 channel 4 x 4 stride-2 layer at 8 x 8 (8 MB) 13-15 -> 6.2-6.9
/// (7-9); 128 -> 256 at 16 x 16 (2 MB) ran 6.4-7.5 either way, 64 -> 128 at 32 x 32
/// 5.6 with `wgrad_cl`, 8.8 with the GEMM.
const GEMM_GRAD: usize = 1 << 20;

/// Whether the weight gradient of `g` takes the im2col GEMM for its size (`GEMM_GRAD`).
fn gemm_grad(g: &Geom, w_rows: usize) -> bool {
    let (mg, kc, _) = dims(g, w_rows);
    g.groups * mg * kc > GEMM_GRAD && crate::ops::sgemm::takes(mg, kc)
}

/// Weights of more than this many floats (1 MiB, a core's L2) do not fit the register
/// tiles of `adj_cl`, which stream the whole weight once per run of 12 positions: the
/// adjoint of such a strided convolution takes the im2col GEMM on `ops::sgemm` (see
/// `passes::conv_adj`). Batch 16, ms (torch): the adjoint of 128 -> 256 channels at
/// 16 x 16, 4 x 4 stride 2 (2 MB), 7.7 -> 6.5 (5.4-5.8); 64 -> 128 at 32 x 32 (512 KB)
/// stays faster on `adj_cl` (6.8 against 7.3).
pub(crate) const BIG_WEIGHT: usize = 1 << 18;

/// Whether the weight of `g` is beyond `BIG_WEIGHT`.
pub(crate) fn big_weight(g: &Geom, w_rows: usize) -> bool {
    let (mg, kc, _) = dims(g, w_rows);
    g.groups * mg * kc > BIG_WEIGHT
}

/// Which kernel a `ConvOp` runs forward: `Fwd(img, w) -> a` or `Adj(a, w) -> img`.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Fwd,
    Adj,
    /// `(a, img) -> dW`, only used inside backward passes.
    WGrad,
}

/// One convolution kernel as a Candle op. `w_rows` is the weight's first dim. Applied
/// as a `CustomOp2` (no bias) or a `CustomOp3` whose third input is the bias.
pub(crate) struct ConvOp {
    pub(crate) g: Geom,
    pub(crate) w_rows: usize,
    pub(crate) kind: Kind,
    /// A `Fwd` whose weight needs a gradient keeps its columns in `cols` (shared with the
    /// ops its backward makes, which read them).
    pub(crate) keep_cols: bool,
    pub(crate) cols: Arc<OnceLock<Buf>>,
    /// A `WGrad` that also sums the bias gradient, for one backward call.
    pub(crate) bias_sink: Option<Arc<OnceLock<Buf>>>,
    /// Which of (input, weight, bias) the backward computes; None: those Candle tracks.
    pub(crate) needs: Option<[bool; 3]>,
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
        ConvOp { g, w_rows, kind, keep_cols, cols: Arc::new(OnceLock::new()), bias_sink: None, needs: None }
    }
    fn with(&self, kind: Kind) -> ConvOp {
        ConvOp { g: self.g.clone(), w_rows: self.w_rows, kind, keep_cols: false, cols: self.cols.clone(), bias_sink: None, needs: None }
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
    /// A weight-gradient kernel's result: the gradient, with its bias sums handed to
    /// `bias_sink` (kernels compute them only when there is one).
    fn sink_bias<T: Keep>(&self, (dw, db): (Vec<T>, Option<Vec<T>>)) -> Vec<T> {
        if let (Some(sink), Some(db)) = (self.bias_sink.as_deref(), db) {
            let _ = sink.set(T::wrap(db));
        }
        dw
    }
    fn run<T: Keep>(&self, a: &[T], b: &[T], bias: Option<&[T]>) -> Vec<T> {
        let keep = self.keep_cols.then_some(&*self.cols);
        let kept = self.cols.get().and_then(T::view);
        let par = self.parallel();
        if dense::applies(&self.g) {
            return in_pool(par, || match self.kind {
                Kind::Fwd => dense::forward(a, b, bias, &self.g, self.w_rows),
                Kind::Adj => dense::adjoint(a, b, bias, &self.g, self.w_rows),
                Kind::WGrad => self.sink_bias(dense::weight_grad(a, b, &self.g, self.w_rows, self.bias_sink.is_some())),
            });
        }
        if depthwise::applies(&self.g) {
            return in_pool(par, || match self.kind {
                Kind::Fwd => depthwise::forward(a, b, bias, &self.g, self.w_rows),
                Kind::Adj => depthwise::adjoint(a, b, bias, &self.g, self.w_rows),
                Kind::WGrad => self.sink_bias(depthwise::weight_grad(a, b, &self.g, self.w_rows, self.bias_sink.is_some())),
            });
        }
        if let (Some(a), Some(b)) = (T::as_f32(a), T::as_f32(b)) {
            let bias = bias.map(|v| T::as_f32(v).expect("bias has the operands' dtype"));
            let out = match self.kind {
                // Where an output is not finite, the im2col path below (a direct sum).
                Kind::Fwd if winograd::applies(&self.g, self.w_rows) => {
                    in_pool(par, || winograd::conv_fwd_winograd(a, b, bias, &self.g, self.w_rows, par))
                }
                Kind::Fwd if winograd1d::applies(&self.g, self.w_rows) => {
                    in_pool(par, || winograd1d::conv_fwd_winograd1d(a, b, bias, &self.g, self.w_rows, par))
                }
                Kind::Fwd if fwd_cl::applies(&self.g, self.w_rows, par) => {
                    Some(in_pool(par, || fwd_cl::conv_fwd_cl(a, b, bias, &self.g, self.w_rows, par)))
                }
                Kind::Fwd if direct::applies(&self.g, self.w_rows) => {
                    Some(in_pool(par, || direct::conv_fwd_direct(a, b, bias, &self.g, self.w_rows, par)))
                }
                Kind::Fwd if implicit::applies(&self.g, self.w_rows) => {
                    Some(in_pool(par, || implicit::conv_fwd_implicit(a, b, bias, &self.g, self.w_rows, par)))
                }
                Kind::Adj if adj_cl::applies(&self.g, par) && !big_weight(&self.g, self.w_rows) => {
                    Some(in_pool(par, || adj_cl::conv_adj_cl(a, b, bias, &self.g, self.w_rows, par)))
                }
                Kind::Adj => implicit::adjoint(&self.g, self.w_rows)
                    .map(|adj| in_pool(par, || implicit::conv_adj_implicit(a, b, bias, &self.g, &adj, self.w_rows, par))),
                Kind::WGrad
                    if !gemm_grad(&self.g, self.w_rows)
                        && (wgrad_cl::applies(&self.g, par) || wgrad::applies(&self.g) || wgrad_cols::applies(&self.g, self.w_rows)) =>
                {
                    let bias = self.bias_sink.is_some();
                    Some(self.sink_bias(in_pool(par, || {
                        if wgrad_cl::applies(&self.g, par) {
                            wgrad_cl::conv_wgrad_cl(a, b, &self.g, self.w_rows, par, bias)
                        } else if wgrad::applies(&self.g) {
                            wgrad::conv_wgrad_direct(a, b, &self.g, self.w_rows, par, bias)
                        } else {
                            wgrad_cols::conv_wgrad_cols(a, b, &self.g, self.w_rows, par, bias)
                        }
                    })))
                }
                _ => None,
            };
            if let Some(out) = out {
                return T::from_f32_vec(out).expect("T is f32 here");
            }
        }
        in_pool(par, || match self.kind {
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
                CpuStorage::F32(self.run(crate::ops::storage::data(a, l1, name)?, crate::ops::storage::data(b, l2, name)?, None))
            }
            (CpuStorage::F32(a), CpuStorage::F32(b), Some((CpuStorage::F32(c), l3))) => CpuStorage::F32(self.run(
                crate::ops::storage::data(a, l1, name)?,
                crate::ops::storage::data(b, l2, name)?,
                Some(crate::ops::storage::data(c, l3, name)?),
            )),
            (CpuStorage::F64(a), CpuStorage::F64(b), None) => {
                CpuStorage::F64(self.run(crate::ops::storage::data(a, l1, name)?, crate::ops::storage::data(b, l2, name)?, None))
            }
            (CpuStorage::F64(a), CpuStorage::F64(b), Some((CpuStorage::F64(c), l3))) => CpuStorage::F64(self.run(
                crate::ops::storage::data(a, l1, name)?,
                crate::ops::storage::data(b, l2, name)?,
                Some(crate::ops::storage::data(c, l3, name)?),
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
        // Only the engine's fused node (`conv_kernel`) is differentiated; it says which
        // gradients its inputs need.
        let Some([need_x, need_w, _]) = self.needs else {
            candle_core::bail!("conv: backward of a convolution the autograd engine did not record")
        };
        let gx = if need_x { Some(grad.apply_op2_no_bwd(&w.dense()?, &self.with(dx))?) } else { None };
        let gw = if need_w {
            let mut op = self.with(Kind::WGrad);
            // The weight gradient's `a` is the upstream gradient only for a plain convolution.
            op.bias_sink = bias_sink.filter(|_| self.kind == Kind::Fwd);
            let dw = other.0.dense()?.apply_op2_no_bwd(&other.1.dense()?, &op)?;
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
        self.grads(x, w, &grad.dense()?, None)
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
        let grad = grad.dense()?;
        let Some([_, _, need_b]) = self.needs else {
            candle_core::bail!("conv: backward of a convolution the autograd engine did not record")
        };
        let sink = need_b.then(|| Arc::new(OnceLock::new()));
        let (gx, gw) = self.grads(x, w, &grad, sink.clone())?;
        let summed = sink.and_then(|s| Arc::try_unwrap(s).ok()).and_then(|s| s.into_inner());
        let gb = match summed {
            Some(buf) => Some(buf.tensor(b.shape(), b.device())?),
            None if need_b => {
                let d = grad.dims();
                let per_channel = grad.reshape((d[0], d[1], d[2] * d[3] * d[4]))?;
                Some(crate::ops::reduce::sum_keepdim(&per_channel, &[0, 2])?.reshape(b.shape())?)
            }
            None => None,
        };
        Ok((gx, gw, gb))
    }
}

/// The kernel of a convolution (`transposed`: its adjoint) for the autograd engine's
/// fused node: the backward computes the gradients `needs` names (input, weight,
/// bias), and a forward whose weight needs one keeps its columns for it.
pub(crate) fn conv_kernel(g: Geom, rows: usize, transposed: bool, needs: [bool; 3]) -> ConvOp {
    let kind = if transposed { Kind::Adj } else { Kind::Fwd };
    let mut op = ConvOp::new(g, rows, kind, !transposed && needs[1]);
    op.needs = Some(needs);
    op
}

/// Apply `op` to the 5-d image-side input and the weight, with the bias if any.
pub(crate) fn apply(x5: &Tensor, w: &Tensor, b: Option<&Tensor>, op: ConvOp) -> Result<Tensor> {
    let w = w.dense()?;
    match b {
        Some(b) => x5.apply_op3(&w, &b.dense()?, op),
        None => x5.apply_op2(&w, op),
    }
}

/// x (N, C, D, H, W), w (Cout, C/G, kd, kh, kw) -> (N, Cout, od, oh, ow), outside the
/// graph (no columns kept: nothing will differentiate it).
pub(crate) fn conv_nd(x: &Tensor, w: &Tensor, b: Option<&Tensor>, g: Geom, cout: usize) -> Result<Tensor> {
    let [d, h, wi] = g.ins;
    let x5 = x.reshape((g.n, g.c, d, h, wi))?.dense()?;
    apply(&x5, w, b, ConvOp::new(g, cout, Kind::Fwd, false))
}

/// x (N, Cin, Di, Hi, Wi), w (Cin, Cout/G, kd, kh, kw) -> (N, Cout, *g.ins): the adjoint of
/// the convolution whose geometry `g` maps the output grid back onto x's grid.
pub(crate) fn conv_transpose_nd(x: &Tensor, w: &Tensor, b: Option<&Tensor>, g: Geom, cin: usize) -> Result<Tensor> {
    let [d, h, wi] = g.outs;
    let x5 = x.reshape((g.n, cin, d, h, wi))?.dense()?;
    apply(&x5, w, b, ConvOp::new(g, cin, Kind::Adj, false))
}

#[cfg(test)]
impl Geom {
    /// A geometry for the kernels' tests, its output grid computed from the input's
    /// as PyTorch's (`(in + 2 pad - dil (k - 1) - 1) / stride + 1` per axis).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn for_test(
        n: usize,
        c: usize,
        groups: usize,
        ins: [usize; 3],
        k: [usize; 3],
        stride: [usize; 3],
        pad: [usize; 3],
        dil: [usize; 3],
    ) -> Geom {
        let outs = std::array::from_fn(|a| (ins[a] + 2 * pad[a] - dil[a] * (k[a] - 1) - 1) / stride[a] + 1);
        Geom { n, c, groups, ins, outs, k, stride, pad, dil }
    }
}

/// `f` run on a pool of two threads (the fast paths' tests split over them).
#[cfg(test)]
pub(crate) fn on_two_threads<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool of two threads").install(f)
}

/// The weight-gradient fast paths' test: on operands for `g` made from `seed`,
/// `kernel(a, img, par)` (on two threads, with and without splitting) gives the im2col
/// path's weight gradient and bias sums.
#[cfg(test)]
pub(crate) fn check_wgrad(
    g: &Geom,
    w_rows: usize,
    seed: u64,
    kernel: impl Fn(&[f32], &[f32], bool) -> (Vec<f32>, Option<Vec<f32>>) + Sync,
) {
    let a = crate::ops::test_values(g.n * w_rows * g.ovol(), seed);
    let img = crate::ops::test_values(g.n * g.c * g.ivol(), seed + 1);
    let sink = OnceLock::new();
    let want = passes::conv_wgrad(&a, &img, g, w_rows, None, Some(&sink));
    let Some(Buf::F32(want_b)) = sink.get() else { panic!("the im2col path's bias sums") };
    for par in [false, true] {
        let (got, got_b) = on_two_threads(|| kernel(&a, &img, par));
        assert_close(&got, &want, &format!("{g:?} par={par}"));
        assert_close(&got_b.expect("bias sums"), want_b, &format!("{g:?} par={par} bias"));
    }
}

/// A Winograd forward (`winograd`, `winograd1d`) at one SIMD level: the output, or
/// None where an output is not finite.
#[cfg(test)]
pub(crate) type WinogradRun = fn(&[f32], &[f32], Option<&[f32]>, &Geom, usize, bool) -> Option<Vec<f32>>;

/// Those of `avx2` and `avx512` (a Winograd kernel's per-level forwards) whose level
/// this CPU has, named.
#[cfg(test)]
pub(crate) fn winograd_levels(avx2: WinogradRun, avx512: WinogradRun) -> Vec<(&'static str, WinogradRun)> {
    let mut out = Vec::new();
    if crate::ops::cpu::has_avx2_fma() {
        out.push(("avx2", avx2));
    }
    if crate::ops::cpu::has_avx512() {
        out.push(("avx512", avx512));
    }
    out
}

/// The Winograd kernels' accuracy test: on operands for `g` (`co` output channels) made
/// from `seed`, with and without a bias and threads, every level's output equals the
/// materialised-columns path in float64 (itself checked against PyTorch's fixtures) to
/// 1e-4.
#[cfg(test)]
pub(crate) fn check_against_float64(g: &Geom, co: usize, seed: u64, levels: &[(&'static str, WinogradRun)]) {
    let img: Vec<f32> = crate::ops::test_values(g.n * g.c * g.ivol(), seed);
    let wt: Vec<f32> = crate::ops::test_values(co * g.c * g.kvol(), seed + 1);
    let bias: Vec<f32> = crate::ops::test_values(co, seed + 2);
    let to64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    for b in [None, Some(&bias[..])] {
        let want: Vec<f32> = conv_fwd(&to64(&img), &to64(&wt), b.map(to64).as_deref(), g, co, None).into_iter().map(|x| x as f32).collect();
        for par in [false, true] {
            for &(level, run) in levels {
                let got = on_two_threads(|| run(&img, &wt, b, g, co, par)).expect("finite");
                assert_close(&got, &want, &format!("{level} {g:?} co={co} bias={} par={par}", b.is_some()));
            }
        }
    }
}

/// The Winograd kernels' fallback test: finite operands for `g` (`co` output channels)
/// give an output at every level; an infinite or NaN value in the image or the weight
/// gives None, so the caller runs a direct method (the transforms subtract, and would
/// turn some of the direct sum's infinities into NaN).
#[cfg(test)]
pub(crate) fn check_non_finite_fallback(g: &Geom, co: usize, levels: &[(&'static str, WinogradRun)]) {
    let (ilen, wlen) = (g.n * g.c * g.ivol(), co * g.c * g.kvol());
    let img: Vec<f32> = crate::ops::test_values(ilen, 5);
    let wt: Vec<f32> = crate::ops::test_values(wlen, 6);
    for &(level, run) in levels {
        assert!(run(&img, &wt, None, g, co, false).is_some(), "{level}");
    }
    for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        let mut x = img.clone();
        x[ilen - 10] = bad;
        let mut w = wt.clone();
        w[3] = bad;
        for &(level, run) in levels {
            assert!(run(&x, &wt, None, g, co, false).is_none(), "{level}: {bad} in the image");
            assert!(run(&img, &w, None, g, co, false).is_none(), "{level}: {bad} in the weight");
        }
    }
}

/// The fast paths' tests: `got` equals `want` (the im2col path) within 1e-4 relative,
/// element by element; `what` names the case.
#[cfg(test)]
pub(crate) fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{what} at {i}: {x} vs {y}");
    }
}
