//! Max, average and adaptive pooling over 1-, 2- and 3-d planes, with PyTorch's
//! window rules (padding, dilation, ceil_mode, count_include_pad,
//! divisor_override) and flat per-plane indices for `return_indices`.
//!
//! Every variant reduces to per-axis window tables: for each output position
//! along an axis, the list of valid input positions (and, for averages, that
//! axis's factor of the divisor). The kernels walk the product of the three
//! tables, one rayon task per block of (N, C) planes.
use super::{float_dispatch, Elem};
use crate::dtype::DT;
use crate::errors::{DTypeError, OpResult, ShapeError};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::sync::Arc;

/// One axis: output position `o` reads input positions `pos[offs[o]..offs[o + 1]]`.
#[derive(Debug, Default)]
struct Axis {
    offs: Vec<usize>,
    pos: Vec<usize>,
    factor: Vec<f64>,
}

impl Axis {
    fn trivial() -> Axis {
        Axis {
            offs: vec![0, 1],
            pos: vec![0],
            factor: vec![1.0],
        }
    }
    #[inline]
    fn window(&self, o: usize) -> &[usize] {
        &self.pos[self.offs[o]..self.offs[o + 1]]
    }
    fn push(&mut self, it: impl Iterator<Item = usize>, factor: f64) {
        if self.offs.is_empty() {
            self.offs.push(0);
        }
        self.pos.extend(it);
        self.offs.push(self.pos.len());
        self.factor.push(factor);
    }
}

#[derive(Debug)]
struct PoolGeom {
    planes: usize,
    ins: [usize; 3],
    outs: [usize; 3],
    axes: [Axis; 3],
    divisor: Option<f64>,
}

impl PoolGeom {
    fn ivol(&self) -> usize {
        self.ins.iter().product()
    }
    fn ovol(&self) -> usize {
        self.outs.iter().product()
    }
    /// Visit each output position with its flat index and the three windows.
    #[inline]
    fn each(&self, mut f: impl FnMut(usize, [usize; 3], &[usize], &[usize], &[usize])) {
        let [od, oh, ow] = self.outs;
        let mut o = 0;
        for z in 0..od {
            let wz = self.axes[0].window(z);
            for y in 0..oh {
                let wy = self.axes[1].window(y);
                for x in 0..ow {
                    f(o, [z, y, x], wz, wy, self.axes[2].window(x));
                    o += 1;
                }
            }
        }
    }
    fn divisor(&self, at: [usize; 3]) -> f64 {
        self.divisor
            .unwrap_or_else(|| self.axes[0].factor[at[0]] * self.axes[1].factor[at[1]] * self.axes[2].factor[at[2]])
    }
}

/// Planes per rayon task: enough work to be worth a task.
fn per_task(plane_work: usize) -> usize {
    ((1 << 14) / plane_work.max(1)).max(1)
}

/// Flat input index of the max of each window (NaN wins, as in PyTorch), or `usize::MAX` if empty.
#[inline]
fn argmax<T: Elem>(plane: &[T], h: usize, w: usize, wz: &[usize], wy: &[usize], wx: &[usize]) -> usize {
    let mut best = T::NEG_INF;
    let mut bi = usize::MAX;
    for &z in wz {
        for &y in wy {
            let base = (z * h + y) * w;
            for &x in wx {
                let v = plane[base + x];
                if bi == usize::MAX || v > best || v.is_nan() {
                    best = v;
                    bi = base + x;
                }
            }
        }
    }
    bi
}

fn max_fwd<T: Elem>(src: &[T], g: &PoolGeom) -> (Vec<T>, Vec<i64>) {
    let (iv, ov) = (g.ivol(), g.ovol());
    let [_, h, w] = g.ins;
    let mut out = vec![T::ZERO; g.planes * ov];
    let mut idx = vec![0i64; g.planes * ov];
    if ov == 0 || iv == 0 {
        return (out, idx);
    }
    let per = per_task(iv + ov);
    out.par_chunks_mut(per * ov)
        .zip(idx.par_chunks_mut(per * ov))
        .enumerate()
        .for_each(|(ci, (o, ix))| {
            for (p, (op, ip)) in o.chunks_mut(ov).zip(ix.chunks_mut(ov)).enumerate() {
                let plane = &src[(ci * per + p) * iv..(ci * per + p + 1) * iv];
                g.each(|k, _, wz, wy, wx| {
                    let bi = argmax(plane, h, w, wz, wy, wx);
                    if bi != usize::MAX {
                        op[k] = plane[bi];
                        ip[k] = bi as i64;
                    }
                });
            }
        });
    (out, idx)
}

/// d(input) of max pooling: each output's gradient goes to its window's argmax.
fn max_bwd<T: Elem>(src: &[T], grad: &[T], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let [_, h, w] = g.ins;
    let mut out = vec![T::ZERO; g.planes * iv];
    if ov == 0 || iv == 0 {
        return out;
    }
    let per = per_task(iv + ov);
    out.par_chunks_mut(per * iv).enumerate().for_each(|(ci, o)| {
        for (p, dst) in o.chunks_mut(iv).enumerate() {
            let pi = ci * per + p;
            let plane = &src[pi * iv..(pi + 1) * iv];
            let gp = &grad[pi * ov..(pi + 1) * ov];
            g.each(|k, _, wz, wy, wx| {
                let bi = argmax(plane, h, w, wz, wy, wx);
                if bi != usize::MAX {
                    dst[bi] += gp[k];
                }
            });
        }
    });
    out
}

/// Average pooling (`adjoint = false`) or its adjoint, which spreads each output's
/// gradient over its window (`adjoint = true`, input and output swap roles).
fn avg<T: Elem>(src: &[T], g: &PoolGeom, adjoint: bool) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let [_, h, w] = g.ins;
    let (sv, dv) = if adjoint { (ov, iv) } else { (iv, ov) };
    let mut out = vec![T::ZERO; g.planes * dv];
    if ov == 0 || iv == 0 {
        return out;
    }
    let per = per_task(iv + ov);
    out.par_chunks_mut(per * dv).enumerate().for_each(|(ci, o)| {
        for (p, dst) in o.chunks_mut(dv).enumerate() {
            let pi = ci * per + p;
            let s = &src[pi * sv..(pi + 1) * sv];
            g.each(|k, at, wz, wy, wx| {
                let div = T::from_f64(g.divisor(at));
                if adjoint {
                    let v = s[k] / div;
                    for &z in wz {
                        for &y in wy {
                            let base = (z * h + y) * w;
                            for &x in wx {
                                dst[base + x] += v;
                            }
                        }
                    }
                } else {
                    let mut acc = T::ZERO;
                    let run = contiguous(wx);
                    for &z in wz {
                        for &y in wy {
                            let base = (z * h + y) * w;
                            match run {
                                Some((x0, x1)) => acc += sum_run(&s[base + x0..base + x1]),
                                None => {
                                    for &x in wx {
                                        acc += s[base + x];
                                    }
                                }
                            }
                        }
                    }
                    dst[k] = acc / div;
                }
            });
        }
    });
    out
}

/// `Some((first, last + 1))` when a window is one run of consecutive positions.
#[inline]
fn contiguous(win: &[usize]) -> Option<(usize, usize)> {
    match (win.first(), win.last()) {
        (Some(&a), Some(&b)) if b + 1 - a == win.len() => Some((a, b + 1)),
        _ => None,
    }
}

/// Sum with 8 independent accumulators, so long runs vectorize.
#[inline]
fn sum_run<T: Elem>(v: &[T]) -> T {
    let mut acc = [T::ZERO; 8];
    let chunks = v.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            acc[j] += c[j];
        }
    }
    let mut t = T::ZERO;
    for &a in acc.iter().chain(rem) {
        t += a;
    }
    t
}

fn out_shape(g: &PoolGeom, of_input: bool) -> Shape {
    let s = if of_input { g.ins } else { g.outs };
    Shape::from((g.planes, s[0], s[1], s[2]))
}

struct MaxPool(Arc<PoolGeom>);
struct MaxPoolBwd(Arc<PoolGeom>);
struct MaxPoolIdx(Arc<PoolGeom>);
struct AvgPool(Arc<PoolGeom>);
struct AvgPoolAdj(Arc<PoolGeom>);

impl CustomOp1 for MaxPool {
    fn name(&self) -> &'static str {
        "max_pool"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "max_pool", |v| max_fwd(v, &self.0).0);
        Ok((out, out_shape(&self.0, false)))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = grad.contiguous()?;
        Ok(Some(
            arg.contiguous()?.apply_op2_no_bwd(&g, &MaxPoolBwd(self.0.clone()))?,
        ))
    }
}

impl CustomOp2 for MaxPoolBwd {
    fn name(&self) -> &'static str {
        "max_pool_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(gr)) => CpuStorage::F32(max_bwd(
                super::data(x, l1, "max_pool")?,
                super::data(gr, l2, "max_pool")?,
                &self.0,
            )),
            (CpuStorage::F64(x), CpuStorage::F64(gr)) => CpuStorage::F64(max_bwd(
                super::data(x, l1, "max_pool")?,
                super::data(gr, l2, "max_pool")?,
                &self.0,
            )),
            _ => candle_core::bail!("max_pool: only float32 and float64 are supported"),
        };
        Ok((out, out_shape(&self.0, true)))
    }
}

impl CustomOp1 for MaxPoolIdx {
    fn name(&self) -> &'static str {
        "max_pool_indices"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let idx = match s {
            CpuStorage::F32(v) => max_fwd(super::data(v, l, "max_pool")?, &self.0).1,
            CpuStorage::F64(v) => max_fwd(super::data(v, l, "max_pool")?, &self.0).1,
            _ => candle_core::bail!("max_pool: only float32 and float64 are supported"),
        };
        Ok((CpuStorage::I64(idx), out_shape(&self.0, false)))
    }
}

impl CustomOp1 for AvgPool {
    fn name(&self) -> &'static str {
        "avg_pool"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "avg_pool", |v| avg(v, &self.0, false));
        Ok((out, out_shape(&self.0, false)))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(AvgPoolAdj(self.0.clone()))?))
    }
}

impl CustomOp1 for AvgPoolAdj {
    fn name(&self) -> &'static str {
        "avg_pool_backward"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "avg_pool", |v| avg(v, &self.0, true));
        Ok((out, out_shape(&self.0, true)))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1(AvgPool(self.0.clone()))?))
    }
}

fn err(op: &str, msg: String) -> PyErr {
    ShapeError::new_err(format!("{op} {msg}"))
}

/// The input as (planes, D, H, W) plus its original dims, after rank/dtype checks.
fn prepare(input: &Bound<'_, PyTensor>, nd: usize, op: &str) -> PyResult<(Tensor, Vec<usize>, DT)> {
    let x = input.get();
    let dt = x.dt();
    if !matches!(dt, DT::F32 | DT::F64) {
        return Err(DTypeError::new_err(format!(
            "{op} expected a float32 or float64 input, got {}",
            dt.name()
        )));
    }
    let t = x.t();
    let dims = t.dims().to_vec();
    if dims.len() != nd + 1 && dims.len() != nd + 2 {
        return Err(err(
            op,
            format!("expected a {}-d or {}-d input, got shape {dims:?}", nd + 1, nd + 2),
        ));
    }
    if dims[dims.len() - nd..].contains(&0) {
        return Err(err(op, format!("expected non-empty spatial dims, got shape {dims:?}")));
    }
    Ok((t, dims, dt))
}

fn ins3(dims: &[usize], nd: usize) -> [usize; 3] {
    let mut s = [1; 3];
    s[3 - nd..].copy_from_slice(&dims[dims.len() - nd..]);
    s
}

fn planes(dims: &[usize], nd: usize) -> usize {
    dims[..dims.len() - nd].iter().product()
}

fn check_params(v: &[i64], nd: usize, what: &str, min: i64, op: &str) -> PyResult<Vec<usize>> {
    if v.len() != nd {
        return Err(err(op, format!("expected {what} with {nd} values, got {v:?}")));
    }
    if v.iter().any(|&x| x < min) {
        return Err(err(op, format!("{what} must be >= {min}, got {v:?}")));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

/// PyTorch's pooling output size.
fn pool_out(n_in: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> i64 {
    let (n_in, k, s, p, d) = (n_in as i64, k as i64, s as i64, p as i64, d as i64);
    let num = n_in + 2 * p - d * (k - 1) - 1 + if ceil { s - 1 } else { 0 };
    let mut out = num.div_euclid(s) + 1;
    if ceil && (out - 1) * s >= n_in + p {
        out -= 1;
    }
    out
}

/// Run a pooling op on (planes, D, H, W) and reshape back to the input's leading dims.
fn finish(y: Tensor, dims: &[usize], nd: usize, outs: [usize; 3], op: &str) -> PyResult<Tensor> {
    let mut shape = dims[..dims.len() - nd].to_vec();
    shape.extend_from_slice(&outs[3 - nd..]);
    y.reshape(shape).op(op)
}

/// Per-axis (kernel, stride, padding, dilation, output size).
type Window = (usize, usize, usize, usize, usize);

/// Windowed pooling parameters shared by max and avg, checked as PyTorch checks them.
#[allow(clippy::too_many_arguments)]
fn windows(
    dims: &[usize],
    nd: usize,
    k: &[i64],
    s: &[i64],
    p: &[i64],
    d: &[i64],
    ceil: bool,
    op: &str,
) -> PyResult<Vec<Window>> {
    let k = check_params(k, nd, "kernel_size", 1, op)?;
    let s = check_params(s, nd, "stride", 1, op)?;
    let p = check_params(p, nd, "padding", 0, op)?;
    let d = check_params(d, nd, "dilation", 1, op)?;
    let ins = &dims[dims.len() - nd..];
    let mut out = Vec::with_capacity(nd);
    for a in 0..nd {
        if p[a] > k[a] / 2 {
            return Err(err(
                op,
                format!("pad should be at most half of kernel size, but got padding={p:?} and kernel_size={k:?}"),
            ));
        }
        let o = pool_out(ins[a], k[a], s[a], p[a], d[a], ceil);
        if o < 1 {
            return Err(err(op, format!(
                "kernel_size={k:?} (padding={p:?}, dilation={d:?}) is larger than the padded input: input shape {dims:?}, computed output size {o} in spatial dim {a}"
            )));
        }
        out.push((k[a], s[a], p[a], d[a], o as usize));
    }
    Ok(out)
}

fn axes3(mut v: Vec<Axis>) -> [Axis; 3] {
    while v.len() < 3 {
        v.insert(0, Axis::trivial());
    }
    let c = v.pop().unwrap_or_default();
    let b = v.pop().unwrap_or_default();
    let a = v.pop().unwrap_or_default();
    [a, b, c]
}

fn outs3(o: &[usize]) -> [usize; 3] {
    let mut s = [1; 3];
    s[3 - o.len()..].copy_from_slice(o);
    s
}

fn run_max(
    py: Python<'_>,
    t: &Tensor,
    g: PoolGeom,
    return_indices: bool,
    op: &str,
) -> PyResult<(Tensor, Option<Tensor>)> {
    let g = Arc::new(g);
    let x = t.reshape((g.planes, g.ins[0], g.ins[1], g.ins[2])).op(op)?;
    py.detach(|| {
        let x = x.contiguous()?;
        let y = x.apply_op1(MaxPool(g.clone()))?;
        let idx = if return_indices {
            Some(x.detach().apply_op1_no_bwd(&MaxPoolIdx(g.clone()))?)
        } else {
            None
        };
        Ok((y, idx))
    })
    .op(op)
}

/// `_core._max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op)`:
/// returns the output, or (output, int64 indices into each input plane).
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op))]
#[allow(clippy::too_many_arguments)]
fn _max_pool<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyTensor>,
    kernel_size: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    ceil_mode: bool,
    return_indices: bool,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let nd = kernel_size.len();
    if !(1..=3).contains(&nd) {
        return Err(err(
            op,
            format!("kernel_size must have 1, 2 or 3 values, got {kernel_size:?}"),
        ));
    }
    let (t, dims, dt) = prepare(input, nd, op)?;
    let win = windows(&dims, nd, &kernel_size, &stride, &padding, &dilation, ceil_mode, op)?;
    let ins = &dims[dims.len() - nd..];
    let axes: Vec<Axis> = win
        .iter()
        .zip(ins)
        .map(|(&(k, s, p, d, o), &n)| {
            let mut ax = Axis::default();
            for i in 0..o {
                let start = (i * s) as i64 - p as i64;
                ax.push(
                    (0..k)
                        .map(|j| start + (j * d) as i64)
                        .filter(|&q| q >= 0 && q < n as i64)
                        .map(|q| q as usize),
                    1.0,
                );
            }
            ax
        })
        .collect();
    let outs = outs3(&win.iter().map(|w| w.4).collect::<Vec<_>>());
    let g = PoolGeom {
        planes: planes(&dims, nd),
        ins: ins3(&dims, nd),
        outs,
        axes: axes3(axes),
        divisor: None,
    };
    let (y, idx) = run_max(py, &t, g, return_indices, op)?;
    let y = PyTensor::wrap_dt(finish(y, &dims, nd, outs, op)?, dt);
    match idx {
        Some(i) => {
            let i = PyTensor::wrap_dt(finish(i, &dims, nd, outs, op)?, DT::I64);
            Ok((y, i).into_pyobject(py)?.into_any())
        }
        None => Ok(Bound::new(py, y)?.into_any()),
    }
}

/// `_core._avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
/// divisor_override, op)`.
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, op))]
#[allow(clippy::too_many_arguments)]
fn _avg_pool(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    kernel_size: Vec<i64>,
    stride: Vec<i64>,
    padding: Vec<i64>,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Option<i64>,
    op: &str,
) -> PyResult<PyTensor> {
    let nd = kernel_size.len();
    if !(1..=3).contains(&nd) {
        return Err(err(
            op,
            format!("kernel_size must have 1, 2 or 3 values, got {kernel_size:?}"),
        ));
    }
    if divisor_override == Some(0) {
        return Err(err(op, "divisor must be not zero".into()));
    }
    let (t, dims, dt) = prepare(input, nd, op)?;
    let ones = vec![1i64; nd];
    let win = windows(&dims, nd, &kernel_size, &stride, &padding, &ones, ceil_mode, op)?;
    let ins = &dims[dims.len() - nd..];
    let axes: Vec<Axis> = win
        .iter()
        .zip(ins)
        .map(|(&(k, s, p, _, o), &n)| {
            let mut ax = Axis::default();
            for i in 0..o {
                let start = (i * s) as i64 - p as i64;
                let end = (start + k as i64).min((n + p) as i64);
                let pool = (end - start) as f64;
                let (vs, ve) = (start.max(0) as usize, end.min(n as i64).max(0) as usize);
                let ve = ve.max(vs);
                let f = if count_include_pad { pool } else { (ve - vs) as f64 };
                ax.push(vs..ve, f);
            }
            ax
        })
        .collect();
    let outs = outs3(&win.iter().map(|w| w.4).collect::<Vec<_>>());
    let g = Arc::new(PoolGeom {
        planes: planes(&dims, nd),
        ins: ins3(&dims, nd),
        outs,
        axes: axes3(axes),
        divisor: divisor_override.map(|d| d as f64),
    });
    let x = t.reshape((g.planes, g.ins[0], g.ins[1], g.ins[2])).op(op)?;
    let y = py.detach(|| x.contiguous()?.apply_op1(AvgPool(g.clone()))).op(op)?;
    Ok(PyTensor::wrap_dt(finish(y, &dims, nd, outs, op)?, dt))
}

/// `_core._adaptive_pool(input, output_size, is_max, return_indices, op)`: PyTorch's
/// adaptive windows `[floor(i * In / Out), ceil((i + 1) * In / Out))`.
#[pyfunction]
#[pyo3(signature = (input, output_size, is_max, return_indices, op))]
fn _adaptive_pool<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyTensor>,
    output_size: Vec<i64>,
    is_max: bool,
    return_indices: bool,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let nd = output_size.len();
    if !(1..=3).contains(&nd) {
        return Err(err(
            op,
            format!("output_size must have 1, 2 or 3 values, got {output_size:?}"),
        ));
    }
    let (t, dims, dt) = prepare(input, nd, op)?;
    let os = check_params(&output_size, nd, "output_size", 1, op)?;
    let ins = &dims[dims.len() - nd..];
    let axes: Vec<Axis> = os
        .iter()
        .zip(ins)
        .map(|(&o, &n)| {
            let mut ax = Axis::default();
            for i in 0..o {
                let (s, e) = (i * n / o, ((i + 1) * n).div_ceil(o));
                ax.push(s..e, (e - s) as f64);
            }
            ax
        })
        .collect();
    let outs = outs3(&os);
    let g = PoolGeom {
        planes: planes(&dims, nd),
        ins: ins3(&dims, nd),
        outs,
        axes: axes3(axes),
        divisor: None,
    };
    if is_max {
        let (y, idx) = run_max(py, &t, g, return_indices, op)?;
        let y = PyTensor::wrap_dt(finish(y, &dims, nd, outs, op)?, dt);
        return match idx {
            Some(i) => {
                let i = PyTensor::wrap_dt(finish(i, &dims, nd, outs, op)?, DT::I64);
                Ok((y, i).into_pyobject(py)?.into_any())
            }
            None => Ok(Bound::new(py, y)?.into_any()),
        };
    }
    let g = Arc::new(g);
    let x = t.reshape((g.planes, g.ins[0], g.ins[1], g.ins[2])).op(op)?;
    let y = py.detach(|| x.contiguous()?.apply_op1(AvgPool(g.clone()))).op(op)?;
    Ok(Bound::new(py, PyTensor::wrap_dt(finish(y, &dims, nd, outs, op)?, dt))?.into_any())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_max_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_avg_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_adaptive_pool, m)?)?;
    Ok(())
}
