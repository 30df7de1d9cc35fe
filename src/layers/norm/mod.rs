//! Layer norm and batch norm as fused Candle ops with hand-written backward; group
//! norm through the layer-norm op, and RMS norm from Candle ops.
//!
//! Candle's fused layer_norm records no backward, and the same normalization
//! written with broadcast ops spends most of its backward in Candle's
//! single-threaded broadcast reductions (about 9x PyTorch). Here forward and
//! backward are each one parallel pass over rows (layer norm) or channels
//! (batch norm); statistics are accumulated in f64.
//!
//! The fused kernels are CPU code for f32/f64. Other devices and dtypes get
//! the same math from Candle ops (`*_ops` below), which run on every device
//! and carry Candle's backward.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Storage, Tensor};
use std::sync::Mutex;

/// The float types with hand-vectorized norm loops: the default methods say "none",
/// f32 overrides them with `f32_lanes` where the CPU has AVX2 or AVX-512.
pub(crate) trait Fl: Float {
    /// `batch_norm::grad_sums` through a hand-vectorized kernel where this dtype has
    /// one and the CPU runs it; None when the caller must run the generic loop.
    fn grad_sums_simd(_x: &[Self], _g: &[Self], _mean: f64) -> Option<(f64, f64)> {
        None
    }
    /// The layer-norm rows through a hand-vectorized kernel where this dtype has one
    /// and the CPU runs it; false when the caller must run the generic `ln_rows`.
    fn ln_rows_simd(_x: &[Self], _w: &[Self], _b: &[Self], _out: &mut [Self], _stats: &mut [(f64, f64)], _d: usize, _eps: f64) -> bool {
        false
    }
    /// `ln_bwd_rows` through a hand-vectorized kernel, as `ln_rows_simd`.
    fn ln_bwd_rows_simd(
        _xc: &[Self],
        _gc: &[Self],
        _ws: &[Self],
        _sc: &[(f64, f64)],
        _dxc: &mut [Self],
        _dw: &mut [f64],
        _db: &mut [f64],
        _d: usize,
    ) -> bool {
        false
    }
}
impl Fl for f32 {
    fn grad_sums_simd(x: &[f32], g: &[f32], mean: f64) -> Option<(f64, f64)> {
        f32_lanes::grad_sums_f32(x, g, mean)
    }
    fn ln_bwd_rows_simd(
        xc: &[f32],
        gc: &[f32],
        ws: &[f32],
        sc: &[(f64, f64)],
        dxc: &mut [f32],
        dw: &mut [f64],
        db: &mut [f64],
        d: usize,
    ) -> bool {
        f32_lanes::ln_bwd_rows_f32(f32_lanes::LnBwdRows { x: xc, g: gc, w: ws, stats: sc, dx: dxc, dw, db, d })
    }
    fn ln_rows_simd(x: &[f32], w: &[f32], b: &[f32], out: &mut [f32], stats: &mut [(f64, f64)], d: usize, eps: f64) -> bool {
        f32_lanes::ln_rows_f32(f32_lanes::LnRows { x, w, b, out, stats, d, eps })
    }
}
impl Fl for f64 {}

/// The contiguous data of a norm op's input (the entry points make them contiguous).
pub(crate) fn slice<'a, T>(v: &'a [T], l: &Layout) -> Result<&'a [T]> {
    crate::ops::storage::data(v, l, "norm")
}

/// Run `f` on the typed data of three contiguous CPU tensors (x, w, g) of one
/// float dtype, and wrap its three result vectors as tensors shaped like x, w, w.
macro_rules! with_slices {
    ($x:expr, $w:expr, $g:expr, |$xs:ident, $ws:ident, $gs:ident| $body:expr) => {{
        let (x, w, g) = ($x.dense()?, $w.dense()?, $g.dense()?);
        let (sx, lx) = x.storage_and_layout();
        let (sw, lw) = w.storage_and_layout();
        let (sg, lg) = g.storage_and_layout();
        let dev = candle_core::Device::Cpu;
        match (&*sx, &*sw, &*sg) {
            (Storage::Cpu(CpuStorage::F32(a)), Storage::Cpu(CpuStorage::F32(b)), Storage::Cpu(CpuStorage::F32(c))) => {
                let ($xs, $ws, $gs) = (slice(a, lx)?, slice(b, lw)?, slice(c, lg)?);
                let (dx, dw, db) = $body;
                (Tensor::from_vec(dx, x.dims(), &dev)?, Tensor::from_vec(dw, w.dims(), &dev)?, Tensor::from_vec(db, w.dims(), &dev)?)
            }
            (Storage::Cpu(CpuStorage::F64(a)), Storage::Cpu(CpuStorage::F64(b)), Storage::Cpu(CpuStorage::F64(c))) => {
                let ($xs, $ws, $gs) = (slice(a, lx)?, slice(b, lw)?, slice(c, lg)?);
                let (dx, dw, db) = $body;
                (Tensor::from_vec(dx, x.dims(), &dev)?, Tensor::from_vec(dw, w.dims(), &dev)?, Tensor::from_vec(db, w.dims(), &dev)?)
            }
            _ => candle_core::bail!("norm backward: expected float32 or float64 CPU tensors of one dtype"),
        }
    }};
}

/// The `CustomOp3` of a norm over (input, weight, bias), f32 or f64 CPU slices: the
/// forward expression gives the output `Vec`, the backward one `(dx, dw, db)`.
macro_rules! norm_op3 {
    ($ty:ty, $name:literal, |$me:ident, $x:ident, $w:ident, $b:ident| $fwd:expr, |$xs:ident, $ws:ident, $gs:ident| $bwd:expr) => {
        impl CustomOp3 for $ty {
            fn name(&self) -> &'static str {
                $name
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
                let $me = self;
                let st = match (s1, s2, s3) {
                    (CpuStorage::F32(x), CpuStorage::F32(w), CpuStorage::F32(b)) => {
                        let ($x, $w, $b) = (slice(x, l1)?, slice(w, l2)?, slice(b, l3)?);
                        CpuStorage::F32($fwd)
                    }
                    (CpuStorage::F64(x), CpuStorage::F64(w), CpuStorage::F64(b)) => {
                        let ($x, $w, $b) = (slice(x, l1)?, slice(w, l2)?, slice(b, l3)?);
                        CpuStorage::F64($fwd)
                    }
                    _ => candle_core::bail!(concat!($name, ": input, weight and bias must all be float32 or all float64")),
                };
                Ok((st, l1.shape().clone()))
            }
            fn bwd(
                &self,
                x: &Tensor,
                w: &Tensor,
                _b: &Tensor,
                _res: &Tensor,
                g: &Tensor,
            ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
                let $me = self;
                let (dx, dw, db) = with_slices!(x, w, g, |$xs, $ws, $gs| $bwd);
                Ok((Some(dx), Some(dw), Some(db)))
            }
        }
    };
}

mod batch_norm;
mod f32_lanes;
mod group_norm;
mod layer_norm;

pub(crate) use batch_norm::{channel_moments, BatchNorm};
pub(crate) use group_norm::GroupNorm;
pub(crate) use layer_norm::LayerNorm;

/// The fused kernels take CPU tensors of one dtype, f32 or f64.
pub(crate) fn fused(ts: &[&Tensor]) -> bool {
    let dt = ts[0].dtype();
    matches!(dt, DType::F32 | DType::F64) && ts.iter().all(|t| t.device().is_cpu() && t.dtype() == dt)
}

/// Layer norm over rows of `d` from Candle ops (any device; mixed devices fail in Candle).
pub(crate) fn layer_norm_ops(x: &Tensor, w: &Tensor, b: &Tensor, d: usize, eps: f64) -> Result<Tensor> {
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (odt, x) = (x.dtype(), &wide(x)?);
    let rows = x.reshape(((), d))?;
    let mean = rows.mean_keepdim(1)?;
    let xc = rows.broadcast_sub(&mean)?;
    let rstd = (xc.sqr()?.mean_keepdim(1)? + eps)?.sqrt()?.recip()?;
    let (w, b) = (w.reshape((1, d))?.to_dtype(x.dtype())?, b.reshape((1, d))?.to_dtype(x.dtype())?);
    xc.broadcast_mul(&rstd)?.broadcast_mul(&w)?.broadcast_add(&b)?.reshape(x.shape())?.to_dtype(odt)
}

/// Half-precision inputs are normalized in f32, as PyTorch does.
pub(crate) fn wide(x: &Tensor) -> Result<Tensor> {
    match x.dtype() {
        DType::F16 | DType::BF16 => x.to_dtype(DType::F32),
        _ => Ok(x.clone()),
    }
}

/// Batch norm over dim 1 from Candle ops. With `batch_stats` the statistics are
/// recomputed from `x` inside the graph, so the gradient flows through them.
pub(crate) fn batch_norm_ops(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    batch_stats: bool,
    eps: f64,
) -> Result<Tensor> {
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let (odt, x) = (x.dtype(), &wide(x)?);
    let c = x.dims()[1];
    let x3 = x.reshape((x.dims()[0], c, ()))?;
    let (xc, v) = if batch_stats {
        let xc = x3.broadcast_sub(&x3.mean_keepdim(2)?.mean_keepdim(0)?)?;
        let v = xc.sqr()?.mean_keepdim(2)?.mean_keepdim(0)?;
        (xc, v)
    } else {
        let m = mean.detach().reshape((1, c, 1))?.to_dtype(x.dtype())?;
        (x3.broadcast_sub(&m)?, var.detach().reshape((1, c, 1))?.to_dtype(x.dtype())?)
    };
    let rstd = (v + eps)?.sqrt()?.recip()?;
    let (w, b) = (w.reshape((1, c, 1))?.to_dtype(x.dtype())?, b.reshape((1, c, 1))?.to_dtype(x.dtype())?);
    xc.broadcast_mul(&rstd)?.broadcast_mul(&w)?.broadcast_add(&b)?.reshape(x.shape())?.to_dtype(odt)
}

/// The fused layer-norm kernel where it applies (CPU f32/f64; inputs made contiguous
/// and `w`, `b` flattened by the caller).
pub(crate) fn layer_norm_kernel(x: &Tensor, w: &Tensor, b: &Tensor, d: usize, eps: f64) -> Option<impl CustomOp3 + Send + Sync + 'static> {
    fused(&[x, w, b]).then(|| LayerNorm { d, eps, stats: Mutex::new(Vec::new()) })
}

/// Layer norm over rows of the last `d` elements (`w`, `b` hold `d` each): the fused
/// op for CPU f32/f64, Candle's ops (any device, half types in f32) otherwise.
pub(crate) fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, d: usize, eps: f64) -> Result<Tensor> {
    if !fused(&[x, w, b]) {
        return layer_norm_ops(x, w, b, d, eps);
    }
    let op = LayerNorm { d, eps, stats: Mutex::new(Vec::new()) };
    x.dense()?.apply_op3(&w.flatten_all()?.dense()?, &b.flatten_all()?.dense()?, op)
}

/// The fused batch-norm kernel where it applies (CPU f32/f64; inputs made contiguous
/// by the caller), with the per-channel statistics it normalizes by.
pub(crate) fn batch_norm_kernel(
    x: &Tensor,
    w: &Tensor,
    b: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    batch_stats: bool,
    eps: f64,
) -> Result<Option<impl CustomOp3 + Send + Sync + 'static>> {
    if !fused(&[x, w, b]) {
        return Ok(None);
    }
    let (c, s) = (x.dims()[1], x.dims()[2..].iter().product());
    let stats = |t: &Tensor| t.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>();
    let (mean, var) = (stats(mean)?, stats(var)?);
    let rstd = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
    Ok(Some(BatchNorm { c, s, mean, rstd, batch_stats }))
}

/// Batch norm over dim 1 of (N, C, ...) with the given per-channel statistics (with
/// `batch_stats` the gradient also flows through them): the fused op for CPU f32/f64,
/// Candle's ops otherwise.
pub(crate) fn batch_norm(x: &Tensor, w: &Tensor, b: &Tensor, mean: &Tensor, var: &Tensor, batch_stats: bool, eps: f64) -> Result<Tensor> {
    match batch_norm_kernel(x, w, b, mean, var, batch_stats, eps)? {
        Some(op) => x.dense()?.apply_op3(&w.dense()?, &b.dense()?, op),
        None => batch_norm_ops(x, w, b, mean, var, batch_stats, eps),
    }
}

/// The fused group-norm op for (N, C, ...) CPU tensors of float32/float64 (`w`, `b` of C).
pub(crate) fn group_norm_kernel(x: &Tensor, w: &Tensor, b: &Tensor, groups: usize, eps: f64) -> Option<GroupNorm> {
    if !fused(&[x, w, b]) || x.rank() < 2 || x.elem_count() == 0 || groups == 0 {
        return None;
    }
    let c = x.dims()[1];
    Some(GroupNorm { groups, c, s: x.elem_count() / (x.dims()[0] * c), eps, stats: Mutex::new(Vec::new()) })
}

/// Group norm over (N, C, ...): the C / G channels of each group of each sample are
/// normalized together — the layer-norm op on rows of (N * G, C / G * spatial) —
/// then scaled and shifted per channel by `w` and `b` (C each).
pub(crate) fn group_norm(x: &Tensor, groups: usize, w: Option<&Tensor>, b: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let c = dims[1];
    let (wf, bf) = (w.map(|w| w.to_dtype(x.dtype())).transpose()?, b.map(|b| b.to_dtype(x.dtype())).transpose()?);
    let (ones, zeros) = (Tensor::ones(c, x.dtype(), x.device())?, Tensor::zeros(c, x.dtype(), x.device())?);
    let (wk, bk) = (wf.as_ref().unwrap_or(&ones), bf.as_ref().unwrap_or(&zeros));
    if let Some(k) = group_norm_kernel(x, wk, bk, groups, eps) {
        return x.dense()?.apply_op3_no_bwd(&wk.dense()?, &bk.dense()?, &k);
    }
    let mut y = if x.elem_count() == 0 {
        x.clone()
    } else {
        let d = x.elem_count() / (dims[0] * groups);
        let (ones, zeros) = (Tensor::ones(d, x.dtype(), x.device())?, Tensor::zeros(d, x.dtype(), x.device())?);
        layer_norm(&x.reshape(((), d))?, &ones, &zeros, d, eps)?.reshape(dims.as_slice())?
    };
    let mut shape = vec![1; dims.len()];
    shape[1] = c;
    if let Some(w) = w {
        let w = w.to_dtype(x.dtype())?.reshape(shape.as_slice())?;
        y = crate::ops::binary::direct_binary(&y, &w, crate::ops::binary::Bin::Mul).map_or_else(|| y.broadcast_mul(&w), Ok)?;
    }
    if let Some(b) = b {
        let b = b.to_dtype(x.dtype())?.reshape(shape.as_slice())?;
        y = crate::ops::binary::direct_binary(&y, &b, crate::ops::binary::Bin::Add).map_or_else(|| y.broadcast_add(&b), Ok)?;
    }
    Ok(y)
}

/// RMS norm over rows of the last `d` elements: `x / sqrt(mean(x^2) + eps)`, then
/// scaled by `w` (`d` elements) — PyTorch's composite formula, in the input dtype.
pub(crate) fn rms_norm(x: &Tensor, d: usize, w: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    if x.elem_count() == 0 {
        return Ok(x.clone());
    }
    let rows = x.reshape(((), d))?;
    let inv = rows.sqr()?.mean_keepdim(1)?.affine(1.0, eps)?.sqrt()?.recip()?;
    let mut y = rows.broadcast_mul(&inv)?;
    if let Some(w) = w {
        y = y.broadcast_mul(&w.to_dtype(x.dtype())?.reshape((1, d))?)?;
    }
    y.reshape(x.shape())
}
