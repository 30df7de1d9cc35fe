//! N-d convolution (1-, 2- and 3-d; plain and transposed, with groups) as an
//! im2col gather, one batched GEMM per call, and col2im for the adjoint.
//!
//! `Im2col` and `Col2im` are Candle custom ops that are each other's backward,
//! so the whole graph (gather, Candle's matmul, reshapes, bias add) is
//! differentiable. Every shape is handled as 3-d spatial (1-d and 2-d get
//! leading size-1 axes).
use super::{float_dispatch, Elem};
use crate::dtype::DT;
use crate::errors::{dtype_err, OpResult, ShapeError};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
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
        let t = [kk / (self.k[1] * self.k[2]), (kk / self.k[2]) % self.k[1], kk % self.k[2]];
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
    let hi = if lim <= 0 { 0 } else { ((lim - 1) as usize / s + 1).min(n_out) };
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

struct Im2col(Geom);
struct Col2im(Geom);

impl CustomOp1 for Im2col {
    fn name(&self) -> &'static str {
        "im2col"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = &self.0;
        let out = float_dispatch!(s, l, "im2col", |v| im2col(v, g));
        let cg = g.c / g.groups;
        Ok((out, Shape::from((g.groups, cg * g.kvol(), g.n * g.ovol()))))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(Col2im(self.0.clone()))?))
    }
}

impl CustomOp1 for Col2im {
    fn name(&self) -> &'static str {
        "col2im"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = &self.0;
        let out = float_dispatch!(s, l, "col2im", |v| col2im(v, g));
        let [d, h, w] = g.ins;
        Ok((out, Shape::from((g.n, g.c, d, h, w))))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(Im2col(self.0.clone()))?))
    }
}

/// x (N, C, D, H, W), w (Cout, C/G, kd, kh, kw) -> (N, Cout, od, oh, ow).
fn conv_nd(x: &Tensor, w: &Tensor, g: Geom, cout: usize) -> Result<Tensor> {
    let (n, groups, l) = (g.n, g.groups, g.ovol());
    let [od, oh, ow] = g.outs;
    let kcols = g.c / groups * g.kvol();
    let cols = x.contiguous()?.apply_op1(Im2col(g))?; // (G, Cg*K, N*L)
    let wm = w.reshape((groups, cout / groups, kcols))?;
    let y = wm.matmul(&cols)?; // (G, Cout/G, N*L)
    let y = if n == 1 { y } else { y.reshape((groups * (cout / groups), n, l))?.transpose(0, 1)? };
    y.reshape((n, cout, od, oh, ow))
}

/// x (N, Cin, Di, Hi, Wi), w (Cin, Cout/G, kd, kh, kw) -> (N, Cout, *g.ins): the adjoint of
/// the convolution whose geometry `g` maps the output grid back onto x's grid.
fn conv_transpose_nd(x: &Tensor, w: &Tensor, g: Geom, cin: usize) -> Result<Tensor> {
    let (n, groups, l) = (g.n, g.groups, g.ovol());
    let cin_g = cin / groups;
    let kcols = g.c / groups * g.kvol();
    let xm = if n == 1 {
        x.reshape((groups, cin_g, l))?
    } else {
        x.reshape((n, cin, l))?.transpose(0, 1)?.reshape((groups, cin_g, n * l))?
    };
    let wm = w.reshape((groups, cin_g, kcols))?.transpose(1, 2)?; // (G, Cout/G*K, Cin/G)
    let cols = wm.matmul(&xm)?; // (G, Cout/G*K, N*L)
    cols.apply_op1(Col2im(g))
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
    let mut out = [if what == "padding" || what == "output_padding" { 0 } else { 1 }; 3];
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
                return Err(dtype_err(op, format!(
                    "expected float32 or float64 tensors of one dtype, got {name} of {} (input is {})",
                    t.dt().name(), dt.name()
                )));
            }
        }
    }
    let (x, w) = (x.t(), w.t());
    let b = b.map(|b| b.t());
    let nd = w.rank().saturating_sub(2);
    if !(1..=3).contains(&nd) {
        return Err(err(op, format!("expected a weight of rank 3, 4 or 5, got shape {:?}", w.dims())));
    }
    if x.rank() != nd + 2 {
        return Err(err(op, format!("expected a {}-d input (N, C, *spatial) for weight {:?}, got {:?}", nd + 2, w.dims(), x.dims())));
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
    if k.iter().any(|&v| v == 0) {
        return Err(err(op, format!("kernel size must be positive, got weight {wd:?}")));
    }
    let out = if !transposed {
        let cout = wd[0];
        if cin != wd[1] * groups {
            return Err(err(op, format!(
                "expected input with {} channels (weight {wd:?}, groups={groups}), got {xd:?}",
                wd[1] * groups
            )));
        }
        if cout % groups != 0 {
            return Err(err(op, format!("out_channels ({cout}) must be divisible by groups ({groups})")));
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
        let g = Geom { n, c: cin, groups, ins, outs, k, stride, pad: plo, dil };
        let y = py.detach(|| conv_nd(&x, &w, g, cout)).op(op)?;
        (y, cout, outs)
    } else {
        if wd[0] != cin {
            return Err(err(op, format!("expected input with {} channels (weight {wd:?}), got {xd:?}", wd[0])));
        }
        if cin % groups != 0 {
            return Err(err(op, format!("in_channels ({cin}) must be divisible by groups ({groups})")));
        }
        let cout = wd[1] * groups;
        let mut outs = [0; 3];
        for a in 0..3 {
            if opad[a] >= stride[a] && opad[a] >= dil[a] {
                return Err(err(op, format!(
                    "output padding must be smaller than either stride or dilation, got output_padding={output_padding:?}"
                )));
            }
            let o = (ins[a] as i64 - 1) * stride[a] as i64 - 2 * plo[a] as i64 + (dil[a] * (k[a] - 1)) as i64 + opad[a] as i64 + 1;
            if o <= 0 {
                return Err(err(op, format!("computed output size {o} is not positive for input {xd:?} and weight {wd:?}")));
            }
            outs[a] = o as usize;
        }
        if let Some(b) = &b {
            if b.dims() != [cout] {
                return Err(err(op, format!("expected bias of shape ({cout},), got {:?}", b.dims())));
            }
        }
        // The adjoint of a convolution from the output grid (outs) onto the input grid (ins).
        let g = Geom { n, c: cout, groups, ins: outs, outs: ins, k, stride, pad: plo, dil };
        let y = py.detach(|| conv_transpose_nd(&x, &w, g, cin)).op(op)?;
        (y, cout, outs)
    };
    let (y, cout, outs) = out;
    let y = match &b {
        Some(b) => y.broadcast_add(&b.reshape((1, cout, 1, 1, 1)).op(op)?).op(op)?,
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
