//! N-d convolution (1-, 2- and 3-d; plain and transposed, with groups): per
//! sample, an im2col gather and one GEMM per group; col2im for the adjoint.
//!
//! `ConvOp` is a Candle custom op with three kernels — the convolution, its
//! adjoint (= transposed convolution = gradient w.r.t. the image) and the weight
//! gradient — so each direction's backward is written from the other two and
//! computes only the gradients that are needed. Every shape is handled as 3-d
//! spatial (1-d and 2-d get leading size-1 axes).
use super::Elem;
use crate::dtype::DT;
use crate::errors::{DTypeError, OpResult, ShapeError};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use pyo3::prelude::*;
use rayon::prelude::*;

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

/// image (N, C, D, H, W) -> columns (C * K, N * L); rows are (channel, tap).
fn im2col<T: Elem>(x: &[T], g: &Geom) -> Vec<T> {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = g.n * l;
    let mut out = vec![T::ZERO; g.c * kv * nl];
    if nl == 0 {
        return out;
    }
    let sx = g.stride[2];
    out.par_chunks_mut(nl).enumerate().for_each(|(row, dst)| {
        let (ch, kk) = (row / kv, row % kv);
        let off = g.offsets(kk);
        for n in 0..g.n {
            let plane = &x[(n * g.c + ch) * iv..(n * g.c + ch + 1) * iv];
            let d = &mut dst[n * l..(n + 1) * l];
            for_rows(g, off, |dr, sr, x0, x1, xo| {
                let start = (sr as isize + (x0 * sx) as isize + xo) as usize;
                if sx == 1 {
                    d[dr + x0..dr + x1].copy_from_slice(&plane[start..start + (x1 - x0)]);
                } else {
                    for (j, v) in d[dr + x0..dr + x1].iter_mut().enumerate() {
                        *v = plane[start + j * sx];
                    }
                }
            });
        }
    });
    out
}

/// columns (C * K, N * L) -> image (N, C, D, H, W), summing overlaps (the adjoint of im2col).
fn col2im<T: Elem>(cols: &[T], g: &Geom) -> Vec<T> {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = g.n * l;
    let mut out = vec![T::ZERO; g.n * g.c * iv];
    if iv == 0 {
        return out;
    }
    let sx = g.stride[2];
    out.par_chunks_mut(iv).enumerate().for_each(|(p, plane)| {
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
    out
}

/// `dst (m x n) = lhs (m x k) @ rhs (k x n)` (`+ dst` when `acc`), row/col strides given.
#[allow(clippy::too_many_arguments)]
fn gemm<T: Elem>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
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
            dst[..m * n].iter_mut().for_each(|v| *v = T::ZERO);
        }
        return;
    }
    debug_assert!(dst.len() >= m * n);
    debug_assert!(lhs.len() > (m - 1) * lrs + (k - 1) * lcs);
    debug_assert!(rhs.len() > (k - 1) * rrs + (n - 1) * rcs);
    // SAFETY: the slices hold every element the strides reach (checked above in
    // debug builds; the callers derive the sizes from one geometry).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
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

/// Run `f(g, par)` for every group: in parallel over groups when there are enough of
/// them to fill the threads, else one after another with a multi-threaded GEMM.
fn per_group<T: Elem>(
    out: &mut [T],
    chunk: usize,
    groups: usize,
    f: impl Fn(usize, &mut [T], gemm::Parallelism) + Sync,
) {
    let threads = rayon::current_num_threads();
    if groups >= threads && groups > 1 {
        out.par_chunks_mut(chunk)
            .take(groups)
            .enumerate()
            .for_each(|(g, o)| f(g, o, gemm::Parallelism::None));
    } else {
        let par = if threads > 1 {
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
/// channels, or input channels for a transposed conv), `kc` = image channels per group * taps.
fn dims(g: &Geom, w_rows: usize) -> (usize, usize, usize, Geom) {
    let one = Geom { n: 1, ..g.clone() };
    (w_rows / g.groups, g.c / g.groups * g.kvol(), g.ovol(), one)
}

/// a (N, G*mg, L) = W_g (mg x kc) @ im2col(img_n)_g: a plain convolution.
fn conv_fwd<T: Elem>(img: &[T], w: &[T], g: &Geom, w_rows: usize) -> Vec<T> {
    let (mg, kc, l, one) = dims(g, w_rows);
    let iv = g.c * g.ivol();
    let mut out = vec![T::ZERO; g.n * g.groups * mg * l];
    if l == 0 {
        return out;
    }
    for (n, o) in out.chunks_mut(g.groups * mg * l).enumerate() {
        let cols = im2col(&img[n * iv..(n + 1) * iv], &one);
        per_group(o, mg * l, g.groups, |gi, dst, par| {
            gemm(
                (mg, l, kc),
                dst,
                false,
                &w[gi * mg * kc..],
                (kc, 1),
                &cols[gi * kc * l..],
                (l, 1),
                par,
            )
        });
    }
    out
}

/// img (N, C, *ins) = col2im(W_g^T (kc x mg) @ a_n_g): the adjoint of `conv_fwd`.
fn conv_adj<T: Elem>(a: &[T], w: &[T], g: &Geom, w_rows: usize) -> Vec<T> {
    let (mg, kc, l, one) = dims(g, w_rows);
    let iv = g.c * g.ivol();
    let mut out = vec![T::ZERO; g.n * iv];
    let mut cols = vec![T::ZERO; g.groups * kc * l];
    if l == 0 || iv == 0 {
        return out;
    }
    for (n, o) in out.chunks_mut(iv).enumerate() {
        let an = &a[n * g.groups * mg * l..];
        per_group(&mut cols, kc * l, g.groups, |gi, dst, par| {
            gemm(
                (kc, l, mg),
                dst,
                false,
                &w[gi * mg * kc..],
                (1, kc),
                &an[gi * mg * l..],
                (l, 1),
                par,
            )
        });
        o.copy_from_slice(&col2im(&cols, &one));
    }
    out
}

/// dW (G*mg, kc) = sum_n a_n_g (mg x L) @ im2col(img_n)_g^T.
fn conv_wgrad<T: Elem>(a: &[T], img: &[T], g: &Geom, w_rows: usize) -> Vec<T> {
    let (mg, kc, l, one) = dims(g, w_rows);
    let iv = g.c * g.ivol();
    let mut out = vec![T::ZERO; g.groups * mg * kc];
    if l == 0 {
        return out;
    }
    for n in 0..g.n {
        let cols = im2col(&img[n * iv..(n + 1) * iv], &one);
        let an = &a[n * g.groups * mg * l..];
        per_group(&mut out, mg * kc, g.groups, |gi, dst, par| {
            gemm(
                (mg, kc, l),
                dst,
                n > 0,
                &an[gi * mg * l..],
                (l, 1),
                &cols[gi * kc * l..],
                (1, l),
                par,
            )
        });
    }
    out
}

/// Which kernel a `ConvOp` runs forward: `Fwd(img, w) -> a` or `Adj(a, w) -> img`.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Fwd,
    Adj,
    /// `(a, img) -> dW`, only used inside backward passes.
    WGrad,
}

/// One convolution kernel as a Candle op. `w_rows` is the weight's first dim.
struct ConvOp {
    g: Geom,
    w_rows: usize,
    kind: Kind,
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
    fn with(&self, kind: Kind) -> ConvOp {
        ConvOp {
            g: self.g.clone(),
            w_rows: self.w_rows,
            kind,
        }
    }
}

impl CustomOp2 for ConvOp {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Fwd => "conv",
            Kind::Adj => "conv_transpose",
            Kind::WGrad => "conv_weight_grad",
        }
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        fn run<T: Elem>(op: &ConvOp, a: &[T], b: &[T]) -> Vec<T> {
            match op.kind {
                Kind::Fwd => conv_fwd(a, b, &op.g, op.w_rows),
                Kind::Adj => conv_adj(a, b, &op.g, op.w_rows),
                Kind::WGrad => conv_wgrad(a, b, &op.g, op.w_rows),
            }
        }
        let name = self.name();
        let out = match (s1, s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => {
                CpuStorage::F32(run(self, super::data(a, l1, name)?, super::data(b, l2, name)?))
            }
            (CpuStorage::F64(a), CpuStorage::F64(b)) => {
                CpuStorage::F64(run(self, super::data(a, l1, name)?, super::data(b, l2, name)?))
            }
            _ => candle_core::bail!("{name}: only float32 and float64 tensors of one dtype are supported"),
        };
        Ok((out, self.out_shape()))
    }
    fn bwd(&self, x: &Tensor, w: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let (dx, other) = match self.kind {
            // y = conv(img, w): d img = adj(grad, w), dW = wgrad(grad, img).
            Kind::Fwd => (Kind::Adj, (&grad, x)),
            // img = adj(a, w): d a = conv(grad, w), dW = wgrad(a, grad).
            Kind::Adj => (Kind::Fwd, (x, &grad)),
            Kind::WGrad => candle_core::bail!("conv: second-order gradients are not supported"),
        };
        let gx = if x.track_op() {
            Some(grad.apply_op2_no_bwd(&w.contiguous()?, &self.with(dx))?)
        } else {
            None
        };
        let gw = if w.track_op() {
            let dw = other
                .0
                .contiguous()?
                .apply_op2_no_bwd(&other.1.contiguous()?, &self.with(Kind::WGrad))?;
            Some(dw.reshape(w.shape())?)
        } else {
            None
        };
        Ok((gx, gw))
    }
}

/// y (N, C, S) + b (C,) per channel, with the bias gradient summed by the fast kernels.
struct BiasAdd;

impl CustomOp2 for BiasAdd {
    fn name(&self) -> &'static str {
        "bias_add"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        fn run<T: Elem>(y: &[T], b: &[T], s: usize) -> Vec<T> {
            let mut out = y.to_vec();
            if s > 0 {
                let c = b.len();
                out.par_chunks_mut(s).enumerate().for_each(|(p, row)| {
                    let v = b[p % c];
                    row.iter_mut().for_each(|x| *x += v);
                });
            }
            out
        }
        let s = l1.dims()[2];
        let out = match (s1, s2) {
            (CpuStorage::F32(a), CpuStorage::F32(b)) => {
                CpuStorage::F32(run(super::data(a, l1, "bias")?, super::data(b, l2, "bias")?, s))
            }
            (CpuStorage::F64(a), CpuStorage::F64(b)) => {
                CpuStorage::F64(run(super::data(a, l1, "bias")?, super::data(b, l2, "bias")?, s))
            }
            _ => candle_core::bail!("bias: only float32 and float64 tensors of one dtype are supported"),
        };
        Ok((out, l1.shape().clone()))
    }
    fn bwd(&self, y: &Tensor, b: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let gy = if y.track_op() { Some(grad.clone()) } else { None };
        let gb = if b.track_op() {
            Some(crate::kernels::sum_keepdim(grad, &[0, 2])?.reshape(b.shape())?)
        } else {
            None
        };
        Ok((gy, gb))
    }
}

fn add_bias(y: &Tensor, b: &Tensor) -> Result<Tensor> {
    let d = y.dims().to_vec();
    let s: usize = d[2..].iter().product();
    y.reshape((d[0], d[1], s))?
        .contiguous()?
        .apply_op2(&b.contiguous()?, BiasAdd)?
        .reshape(d)
}

/// x (N, C, D, H, W), w (Cout, C/G, kd, kh, kw) -> (N, Cout, od, oh, ow).
fn conv_nd(x: &Tensor, w: &Tensor, g: Geom, cout: usize) -> Result<Tensor> {
    let [d, h, wi] = g.ins;
    let x5 = x.reshape((g.n, g.c, d, h, wi))?.contiguous()?;
    x5.apply_op2(
        &w.contiguous()?,
        ConvOp {
            g,
            w_rows: cout,
            kind: Kind::Fwd,
        },
    )
}

/// x (N, Cin, Di, Hi, Wi), w (Cin, Cout/G, kd, kh, kw) -> (N, Cout, *g.ins): the adjoint of
/// the convolution whose geometry `g` maps the output grid back onto x's grid.
fn conv_transpose_nd(x: &Tensor, w: &Tensor, g: Geom, cin: usize) -> Result<Tensor> {
    let [d, h, wi] = g.outs;
    let x5 = x.reshape((g.n, cin, d, h, wi))?.contiguous()?;
    x5.apply_op2(
        &w.contiguous()?,
        ConvOp {
            g,
            w_rows: cin,
            kind: Kind::Adj,
        },
    )
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
        let y = py.detach(|| conv_nd(&x, &w, g, cout)).op(op)?;
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
        let y = py.detach(|| conv_transpose_nd(&x, &w, g, cin)).op(op)?;
        (y, cout, outs)
    };
    let (y, cout, outs) = out;
    let y = match &b {
        Some(b) => py.detach(|| add_bias(&y, b)).op(op)?,
        None => y,
    };
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&outs[3 - nd..]);
    let y = y.reshape(shape).op(op)?;
    Ok(PyTensor::wrap_dt(y, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_conv, m)?)?;
    Ok(())
}
