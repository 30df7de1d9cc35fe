//! Differentiable forms of the fused kernels, written with `ops`. A fused op's node
//! computes first-order gradients with its own backward kernel; under
//! `create_graph` it differentiates this form instead (`through`), so that the
//! gradient is recorded and can be differentiated again. Same math as the kernels
//! (PyTorch's formulas); only speed differs.
use crate::autograd::engine::{self, Options};
use crate::autograd::ops::*;
use crate::autograd::value::Value;
use candle_core::{DType, Result, Shape, Tensor};
use std::sync::Arc;

/// A differentiable form of an op over its tensor inputs.
pub type Composed = Arc<dyn Fn(&[Value]) -> Result<Value> + Send + Sync>;

/// Gradients of the inputs from `g`, by differentiating `f` (grad mode is on: the
/// engine runs nodes with `create_graph`, so the result is recorded).
pub fn through(f: &Composed, ins: &[Value], needs: &[bool], g: &Value) -> Result<Vec<Option<Value>>> {
    let y = f(ins)?;
    if y.data.dims() != g.data.dims() {
        candle_core::bail!("internal: a composed form gave shape {:?} for an op output of shape {:?}", y.data.dims(), g.data.dims());
    }
    let Some(edge) = y.edge() else { return Ok(vec![None; ins.len()]) };
    let pos: Vec<usize> = (0..ins.len()).filter(|&i| needs[i] && ins[i].requires_grad()).collect();
    let targets: Vec<Value> = pos.iter().map(|&i| ins[i].clone()).collect();
    let opts = Options { retain_graph: true, create_graph: true, accumulate: false };
    let got = engine::run(vec![(edge, g.clone())], &targets, &opts)?;
    let mut out = vec![None; ins.len()];
    for (i, gi) in pos.into_iter().zip(got) {
        out[i] = gi;
    }
    Ok(out)
}

/// A constant 0/1 mask from the data of `x`.
fn mask(x: &Value, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    f(&x.data)
}

fn zeros(x: &Value) -> Result<Value> {
    Ok(Value::plain(x.data.zeros_like()?))
}

/// `max(x, 0)`; NaN stays NaN and passes its gradient, as PyTorch's.
pub fn relu(x: &Value) -> Result<Value> {
    where_cond(&mask(x, |t| t.le(0.0))?, &zeros(x)?, x)
}

/// `x` clamped to `[lo, hi]`.
pub fn clamp(x: &Value, lo: f64, hi: f64) -> Result<Value> {
    let c = Value::plain(x.data.clamp(lo, hi)?);
    where_cond(&mask(x, |t| t.ge(lo)?.mul(&t.le(hi)?))?, x, &c)
}

/// `0.5 x (1 + erf(x / sqrt 2))`.
pub fn gelu_erf(x: &Value) -> Result<Value> {
    let e = erf(&affine(x, std::f64::consts::FRAC_1_SQRT_2, 0.0)?)?;
    mul(&affine(x, 0.5, 0.0)?, &affine(&e, 1.0, 1.0)?)
}

/// The tanh GELU: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_tanh(x: &Value) -> Result<Value> {
    let inner = affine(&add(x, &affine(&mul(&sqr(x)?, x)?, 0.044715, 0.0)?)?, (2.0 / std::f64::consts::PI).sqrt(), 0.0)?;
    mul(&affine(x, 0.5, 0.0)?, &affine(&tanh(&inner)?, 1.0, 1.0)?)
}

/// `log(1 + exp(beta x)) / beta`, linear above `threshold` (PyTorch's softplus).
pub fn softplus(x: &Value, beta: f64, threshold: f64) -> Result<Value> {
    let z = affine(x, beta, 0.0)?;
    let capped = where_cond(&mask(&z, |t| t.le(threshold))?, &z, &Value::plain(z.data.ones_like()?.affine(threshold, 0.0)?))?;
    let soft = affine(&log(&affine(&exp(&capped)?, 1.0, 1.0)?)?, 1.0 / beta, 0.0)?;
    where_cond(&mask(&z, |t| t.gt(threshold))?, x, &soft)
}

/// The activations of `layers::pointwise::Act`, from `ops`.
pub(crate) fn act(x: &Value, a: crate::layers::pointwise::Act) -> Result<Value> {
    use crate::layers::pointwise::Act;
    match a {
        Act::Silu => mul(x, &sigmoid(x)?),
        Act::Mish => mul(x, &tanh(&softplus(x, 1.0, 20.0)?)?),
        Act::Hardsigmoid => affine(&clamp(&affine(x, 1.0, 3.0)?, 0.0, 6.0)?, 1.0 / 6.0, 0.0),
        Act::Hardswish => affine(&mul(x, &clamp(&affine(x, 1.0, 3.0)?, 0.0, 6.0)?)?, 1.0 / 6.0, 0.0),
        Act::Elu { alpha, scale, input_scale, .. } => {
            let neg_part = where_cond(&mask(x, |t| t.lt(0.0))?, x, &zeros(x)?)?;
            let neg = affine(&exp(&affine(&neg_part, input_scale, 0.0)?)?, alpha * scale, -alpha * scale)?;
            where_cond(&mask(x, |t| t.gt(0.0))?, &affine(x, scale, 0.0)?, &neg)
        }
        Act::Softplus { beta, threshold } => softplus(x, beta, threshold),
        Act::LeakyRelu { slope } => where_cond(&mask(x, |t| t.gt(0.0))?, x, &affine(x, slope, 0.0)?),
        Act::GeluTanh => gelu_tanh(x),
    }
}

/// Layer norm over the last `d` elements of each row; `w`, `b` hold `d` values.
pub fn layer_norm(x: &Value, w: &Value, b: &Value, d: usize, eps: f64) -> Result<Value> {
    let rows = x.data.elem_count() / d.max(1);
    let x2 = reshape(x, &Shape::from((rows, d)))?;
    let mean = affine(&sum_keepdim(&x2, &[1])?, 1.0 / d as f64, 0.0)?;
    let xc = sub(&x2, &mean)?;
    let var = affine(&sum_keepdim(&sqr(&xc)?, &[1])?, 1.0 / d as f64, 0.0)?;
    let y = div(&xc, &sqrt(&affine(&var, 1.0, eps)?)?)?;
    let y = add(&mul(&y, &reshape(w, &Shape::from((1, d)))?)?, &reshape(b, &Shape::from((1, d)))?)?;
    reshape(&y, x.data.shape())
}

/// Cross-entropy / NLL from log-probabilities (rows x C) with class targets, reduced:
/// `layers::loss::nll_rows`'s formula.
pub(crate) fn nll_rows(logp: &Value, s: &crate::layers::loss::Spec, weight: Option<&Tensor>, out: &[usize]) -> Result<Value> {
    use crate::layers::loss::Reduction;
    let (dev, dt) = (logp.data.device().clone(), logp.data.dtype());
    let offs: Vec<u32> = s.target.iter().enumerate().map(|(i, t)| (i * s.c + t.unwrap_or(0)) as u32).collect();
    let n = offs.len();
    let flat = reshape(logp, &Shape::from(s.n * s.c))?;
    let picked = index_select(&flat, &Tensor::from_vec(offs, n, &dev)?, 0)?;
    let wt: Vec<f64> = s.target.iter().map(|t| t.map_or(0.0, |t| s.weight.as_ref().map_or(1.0, |w| w[t]))).collect();
    let wt = Value::plain(Tensor::from_vec(wt, s.n, &dev)?.to_dtype(dt)?);
    let mut per = affine(&mul(&picked, &wt)?, -(1.0 - s.smoothing), 0.0)?;
    if s.smoothing > 0.0 {
        let weighted = match weight {
            Some(w) => mul(logp, &Value::plain(w.to_dtype(dt)?.reshape((1, s.c))?))?,
            None => logp.clone(),
        };
        let valid: Vec<f64> = s.target.iter().map(|t| if t.is_some() { 1.0 } else { 0.0 }).collect();
        let valid = Value::plain(Tensor::from_vec(valid, (s.n, 1), &dev)?.to_dtype(dt)?);
        let smooth = affine(&sum_keepdim(&mul(&weighted, &valid)?, &[1])?, -s.smoothing / s.c as f64, 0.0)?;
        per = add(&per, &reshape(&smooth, &Shape::from(s.n))?)?;
    }
    let total = |v: &Value| -> Result<Value> { reshape(&sum_keepdim(v, &[0])?, &Shape::from(())) };
    match s.reduction {
        Reduction::None => reshape(&per, &Shape::from(out.to_vec())),
        Reduction::Sum => total(&per),
        Reduction::Mean => {
            let denom: f64 = s.target.iter().flatten().map(|&t| s.weight.as_ref().map_or(1.0, |w| w[t])).sum();
            affine(&total(&per)?, 1.0 / denom, 0.0)
        }
    }
}

/// Cross-entropy against class probabilities `target` from log-probabilities `logp`
/// (same shape): `layers::loss::soft_target_loss`'s formula.
pub(crate) fn soft_target(
    logp: &Value,
    target: &Value,
    weight: Option<&Tensor>,
    class_dim: usize,
    smoothing: f64,
    reduction: crate::layers::loss::Reduction,
) -> Result<Value> {
    use crate::layers::loss::Reduction;
    let (c, dt) = (logp.data.dims()[class_dim], logp.data.dtype());
    let mut tgt = to_dtype(target, dt)?;
    if smoothing > 0.0 {
        tgt = affine(&tgt, 1.0 - smoothing, smoothing / c as f64)?;
    }
    let mut per = mul(logp, &tgt)?;
    if let Some(w) = weight {
        let mut shape = vec![1; logp.data.rank()];
        shape[class_dim] = c;
        per = mul(&per, &Value::plain(w.to_dtype(dt)?.reshape(shape)?))?;
    }
    let loss = neg(&reduce_sum(&per, &[class_dim], false, None)?)?;
    let all: Vec<usize> = (0..loss.data.rank()).collect();
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum if all.is_empty() => Ok(loss),
        Reduction::Sum => reduce_sum(&loss, &all, false, None),
        // An empty batch gives 0 / 0 = NaN, as torch.
        Reduction::Mean if all.is_empty() => Ok(loss),
        Reduction::Mean => reduce_sum(&loss, &all, false, Some(1.0 / loss.data.elem_count() as f64)),
    }
}

/// (N, C, d1, ...) -> (N * d1 * ..., C); (C,) -> (1, C): `layers::loss::class_rows`.
pub fn class_rows(x: &Value) -> Result<Value> {
    match x.data.rank() {
        1 => unsqueeze(x, 0),
        2 => Ok(x.clone()),
        r => {
            let c = x.data.dims()[1];
            let mut order: Vec<usize> = vec![0];
            order.extend(2..r);
            order.push(1);
            let p = contiguous(&permute(x, &order)?)?;
            reshape(&p, &Shape::from((x.data.elem_count() / c, c)))
        }
    }
}

/// Scaled dot-product attention from products and softmax (PyTorch's math backend):
/// `q` (..., L, E), `k` (..., S, E), `v` (..., S, Ev), batch dims broadcast; `mask` is
/// additive (broadcast to (..., L, S)); `causal` masks the upper triangle.
pub fn sdpa(q: &Value, k: &Value, v: &Value, mask: Option<&Tensor>, causal: bool, scale: f64) -> Result<Value> {
    let r = k.data.rank();
    let scores = affine(&matmul(q, &transpose(k, r - 2, r - 1)?)?, scale, 0.0)?;
    let (l, s) = (q.data.dims()[q.data.rank() - 2], k.data.dims()[r - 2]);
    let mut scores = scores;
    if causal {
        let m: Vec<f32> = (0..l * s).map(|i| if i % s > i / s { f32::NEG_INFINITY } else { 0.0 }).collect();
        let m = Tensor::from_vec(m, (l, s), q.data.device())?.to_dtype(q.data.dtype())?;
        scores = add(&scores, &Value::plain(m))?;
    }
    if let Some(m) = mask {
        scores = add(&scores, &Value::plain(m.to_dtype(q.data.dtype())?))?;
    }
    let p = softmax(&scores, scores.data.rank() - 1, false)?;
    matmul(&p, v)
}

/// Sliding windows of a padded (N, C, *S) input as gathered columns (N, C, O, K): the
/// element offsets of every output position `o` and kernel tap `t` (row-major over the
/// padded spatial dims), given per spatial axis as (output size, stride, kernel, dilation).
pub fn unfold(x: &Value, axes: &[(usize, usize, usize, usize)]) -> Result<Value> {
    let dims = x.data.dims().to_vec();
    let (n, c) = (dims[0], dims[1]);
    let sp = &dims[2..];
    let p: usize = sp.iter().product();
    let o: usize = axes.iter().map(|a| a.0).product();
    let kk: usize = axes.iter().map(|a| a.2).product();
    let mut idx = Vec::with_capacity(o * kk);
    let strides: Vec<usize> = (0..sp.len()).map(|i| sp[i + 1..].iter().product()).collect();
    for oi in 0..o {
        for ti in 0..kk {
            let (mut orem, mut trem, mut off) = (oi, ti, 0usize);
            for a in (0..axes.len()).rev() {
                let (os, st, k, dl) = axes[a];
                let (oa, ta) = (orem % os, trem % k);
                orem /= os;
                trem /= k;
                off += (oa * st + ta * dl) * strides[a];
            }
            idx.push(off as u32);
        }
    }
    let idx = Tensor::from_vec(idx, o * kk, x.data.device())?;
    let flat = reshape(&contiguous(x)?, &Shape::from((n * c, p)))?;
    let cols = index_select(&flat, &idx, 1)?;
    reshape(&cols, &Shape::from((n, c, o, kk)))
}

/// `x` padded with `value` by `lo`/`hi` along each spatial dim (from dim 2).
pub fn pad_spatial(x: &Value, lo: &[usize], hi: &[usize], value: f64) -> Result<Value> {
    let mut cur = x.clone();
    for a in 0..lo.len() {
        let d = 2 + a;
        if lo[a] == 0 && hi[a] == 0 {
            continue;
        }
        if value == 0.0 {
            cur = pad_zeros(&cur, d, lo[a], hi[a])?;
        } else {
            let mut sh = cur.data.dims().to_vec();
            let side = |k: usize, sh: &mut Vec<usize>| -> Result<Value> {
                sh[d] = k;
                Ok(Value::plain(Tensor::full(value, sh.as_slice(), cur.data.device())?.to_dtype(cur.data.dtype())?))
            };
            let (l, h) = (side(lo[a], &mut sh)?, side(hi[a], &mut sh)?);
            cur = cat(&[l, cur.clone(), h], d)?;
        }
    }
    Ok(cur)
}

/// Convolution of an already padded (N, Cin, *S) input with (Cout, Cin / groups, *K)
/// weights, from gathered windows and a product per group.
pub fn conv(xp: &Value, w: &Value, b: Option<&Value>, stride: &[usize], dil: &[usize], groups: usize, outs: &[usize]) -> Result<Value> {
    let xd = xp.data.dims().to_vec();
    let wd = w.data.dims().to_vec();
    let (n, cin, cout) = (xd[0], xd[1], wd[0]);
    let ks = &wd[2..];
    let axes: Vec<_> = (0..ks.len()).map(|a| (outs[a], stride[a], ks[a], dil[a])).collect();
    let cols = unfold(xp, &axes)?; // (N, Cin, O, K)
    let (o, kk) = (cols.data.dims()[2], cols.data.dims()[3]);
    let cg = cin / groups;
    // (N, G, Cg, O, K) -> (N, G, O, Cg * K)
    let cols = reshape(&cols, &Shape::from(vec![n, groups, cg, o, kk]))?;
    let cols = reshape(&contiguous(&permute(&cols, &[0, 1, 3, 2, 4])?)?, &Shape::from(vec![n, groups, o, cg * kk]))?;
    let wg = reshape(w, &Shape::from(vec![1, groups, cout / groups, cg * kk]))?;
    let y = matmul(&cols, &transpose(&wg, 2, 3)?)?; // (N, G, O, Cout/G)
    let y = contiguous(&permute(&y, &[0, 1, 3, 2])?)?; // (N, G, Cout/G, O)
    let mut shape = vec![n, cout];
    shape.extend_from_slice(outs);
    let mut y = reshape(&y, &Shape::from(shape))?;
    if let Some(b) = b {
        let mut bs = vec![1, cout];
        bs.extend(std::iter::repeat_n(1, outs.len()));
        y = add(&y, &reshape(b, &Shape::from(bs))?)?;
    }
    Ok(y)
}

/// Max over the last dim; the gradient goes to the first maximum of each row.
pub fn max_last(x: &Value) -> Result<Value> {
    let r = x.data.rank();
    let k = x.data.dims()[r - 1];
    let rows = x.data.elem_count() / k.max(1);
    let arg = x.data.argmax_keepdim(r - 1)?.to_dtype(DType::U32)?.flatten_all()?;
    let base = Tensor::arange(0u32, rows as u32, x.data.device())?.affine(k as f64, 0.0)?;
    let idx = arg.add(&base)?;
    let flat = reshape(&contiguous(x)?, &Shape::from(x.data.elem_count()))?;
    let picked = index_select(&flat, &idx, 0)?;
    reshape(&picked, &Shape::from(x.data.dims()[..r - 1].to_vec()))
}

/// Each head of `x` (..., H, S, E) repeated `g` times in place: (..., H * g, S, E), as
/// grouped-query attention shares one key/value head among `g` query heads.
pub fn repeat_heads(x: &Value, g: usize) -> Result<Value> {
    let d = x.data.dims().to_vec();
    let r = d.len();
    let mut wide = d[..r - 2].to_vec();
    wide.push(g);
    wide.extend_from_slice(&d[r - 2..]);
    let e = broadcast_as(&unsqueeze(x, r - 2)?, &Shape::from(wide))?;
    let mut out = d[..r - 3].to_vec();
    out.push(d[r - 3] * g);
    out.extend_from_slice(&d[r - 2..]);
    reshape(&contiguous(&e)?, &Shape::from(out))
}

/// Windowed pooling over the last `axes.len()` dims from gathered windows: per axis
/// (kernel, stride, padding, dilation, output size); `max`, or the average with one
/// divisor per output position (row-major over the outputs).
pub(crate) fn pool(x: &Value, axes: &[(usize, usize, usize, usize, usize)], max: bool, divisors: Option<&[f64]>) -> Result<Value> {
    let dims = x.data.dims().to_vec();
    let nd = axes.len();
    let sp = &dims[dims.len() - nd..];
    let planes: usize = dims[..dims.len() - nd].iter().product();
    let mut shape = vec![1, planes];
    shape.extend_from_slice(sp);
    let x3 = reshape(&contiguous(x)?, &Shape::from(shape))?;
    let lo: Vec<usize> = axes.iter().map(|a| a.2).collect();
    // Ceil-mode windows may run past the padded end: pad far enough for every tap.
    let hi: Vec<usize> =
        axes.iter().zip(sp).map(|(&(k, s, p, d, o), &n)| ((o - 1) * s + (k - 1) * d + 1).saturating_sub(n + p).max(p)).collect();
    let fill = if max { f64::NEG_INFINITY } else { 0.0 };
    let xp = pad_spatial(&x3, &lo, &hi, fill)?;
    let cols = unfold(&xp, &axes.iter().map(|&(k, s, _, d, o)| (o, s, k, d)).collect::<Vec<_>>())?;
    let o: usize = axes.iter().map(|a| a.4).product();
    let y = if max {
        max_last(&cols)?
    } else {
        let s = sum_keepdim(&cols, &[3])?;
        let inv: Vec<f64> = divisors.unwrap_or(&[]).iter().map(|d| 1.0 / d).collect();
        let inv = Tensor::from_vec(inv, (1, 1, o, 1), x.data.device())?.to_dtype(x.data.dtype())?;
        mul(&s, &Value::plain(inv))?
    };
    let mut out = dims[..dims.len() - nd].to_vec();
    out.extend(axes.iter().map(|a| a.4));
    reshape(&y, &Shape::from(out))
}

/// Batch norm over dim 1 of (N, C, ...): with `batch_stats` the batch's own mean and
/// (biased) variance, differentiated through; else the given running statistics.
pub fn batch_norm(x: &Value, w: &Value, b: &Value, mean: &Tensor, var: &Tensor, batch_stats: bool, eps: f64) -> Result<Value> {
    let d = x.data.dims().to_vec();
    let (n, c) = (d[0], d[1]);
    let s: usize = d[2..].iter().product();
    let x3 = reshape(&contiguous(x)?, &Shape::from((n, c, s)))?;
    let (xc, v) = if batch_stats {
        let m = affine(&sum_keepdim(&x3, &[0, 2])?, 1.0 / (n * s) as f64, 0.0)?;
        let xc = sub(&x3, &m)?;
        let v = affine(&sum_keepdim(&sqr(&xc)?, &[0, 2])?, 1.0 / (n * s) as f64, 0.0)?;
        (xc, v)
    } else {
        let dt = x.data.dtype();
        let m = Value::plain(mean.reshape((1, c, 1))?.to_dtype(dt)?);
        (sub(&x3, &m)?, Value::plain(var.reshape((1, c, 1))?.to_dtype(dt)?))
    };
    let y = div(&xc, &sqrt(&affine(&v, 1.0, eps)?)?)?;
    let y = add(&mul(&y, &reshape(w, &Shape::from((1, c, 1)))?)?, &reshape(b, &Shape::from((1, c, 1)))?)?;
    reshape(&y, x.data.shape())
}

/// `|x|` whose derivative is `sign(x)` (0 at 0, as PyTorch's).
fn abs_v(x: &Value) -> Result<Value> {
    mul(x, &Value::plain(x.data.sign()?))
}

/// The elementwise losses of `layers::loss_elementwise::point_loss`, from `ops`.
pub(crate) fn point_loss(
    kind: crate::layers::loss_elementwise::PointLoss,
    x: &Value,
    target: &Value,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduce: crate::layers::loss_elementwise::Reduce,
) -> Result<Value> {
    use crate::layers::loss_elementwise::{PointLoss, Reduce};
    let dt = x.data.dtype();
    let y = to_dtype(target, dt)?;
    let floor = |v: &Value| -> Result<Value> {
        let c = Value::plain(v.data.ones_like()?.affine(-100.0, 0.0)?);
        where_cond(&v.data.gt(-100.0)?, v, &c)
    };
    let mut loss = match kind {
        PointLoss::Mse => sqr(&sub(x, &y)?)?,
        PointLoss::L1 => abs_v(&sub(x, &y)?)?,
        PointLoss::SmoothL1 { beta } => {
            let d = abs_v(&sub(x, &y)?)?;
            if beta == 0.0 {
                d
            } else {
                where_cond(&d.data.lt(beta)?, &affine(&sqr(&d)?, 0.5 / beta, 0.0)?, &affine(&d, 1.0, -0.5 * beta)?)?
            }
        }
        PointLoss::Bce => {
            let log_p = floor(&log(x)?)?;
            let log_1p = floor(&log(&affine(x, -1.0, 1.0)?)?)?;
            neg(&add(&mul(&y, &log_p)?, &mul(&affine(&y, -1.0, 1.0)?, &log_1p)?)?)?
        }
        PointLoss::BceWithLogits => {
            let log_term = add(&log(&affine(&exp(&neg(&abs_v(x)?)?)?, 1.0, 1.0)?)?, &relu(&neg(x)?)?)?;
            let coef = match pos_weight {
                Some(pw) => affine(&mul(&y, &Value::plain(pw.to_dtype(dt)?.affine(1.0, -1.0)?))?, 1.0, 1.0)?,
                None => Value::plain(y.data.ones_like()?),
            };
            add(&mul(&affine(&y, -1.0, 1.0)?, x)?, &mul(&coef, &log_term)?)?
        }
        PointLoss::KlDiv { log_target: true } => mul(&exp(&y)?, &sub(&y, x)?)?,
        PointLoss::KlDiv { log_target: false } => {
            let pos = y.data.gt(0.0)?;
            let safe = where_cond(&pos, &y, &Value::plain(y.data.ones_like()?))?;
            where_cond(&pos, &mul(&y, &sub(&log(&safe)?, x)?)?, &Value::plain(y.data.zeros_like()?))?
        }
    };
    if let Some(w) = weight {
        loss = mul(&loss, &Value::plain(w.to_dtype(dt)?))?;
    }
    let all: Vec<usize> = (0..loss.data.rank()).collect();
    let n = loss.data.elem_count();
    match reduce {
        Reduce::None => Ok(loss),
        // A 0-d loss is its own sum, mean and batch mean.
        _ if all.is_empty() => Ok(loss),
        Reduce::Sum => reduce_sum(&loss, &all, false, None),
        Reduce::Mean => reduce_sum(&loss, &all, false, Some(if n == 0 { f64::NAN } else { 1.0 / n as f64 })),
        Reduce::BatchMean => {
            let b = if x.data.rank() == 0 { 1 } else { x.data.dims()[0] };
            reduce_sum(&loss, &all, false, Some(1.0 / b as f64))
        }
    }
}

/// RMS norm over rows of the last `d` elements, then scaled by `w` (`d` elements):
/// `layers::norm::rms_norm`'s formula.
pub fn rms_norm(x: &Value, d: usize, w: Option<&Value>, eps: f64) -> Result<Value> {
    if x.data.elem_count() == 0 {
        return Ok(x.clone());
    }
    let rows = reshape(x, &Shape::from((x.data.elem_count() / d, d)))?;
    let ms = reduce_sum(&sqr(&rows)?, &[1], true, Some(1.0 / d as f64))?;
    let mut y = mul(&rows, &recip(&sqrt(&affine(&ms, 1.0, eps)?)?)?)?;
    if let Some(w) = w {
        y = mul(&y, &reshape(&to_dtype(w, x.data.dtype())?, &Shape::from((1, d)))?)?;
    }
    reshape(&y, x.data.shape())
}

/// Attention from products and softmax: grouped key/value heads repeated, a row whose
/// keys are all masked gives zeros (no NaN), dropout with a fresh mask; half types
/// computed in float32. Recorded when an input requires grad.
pub(crate) fn sdpa_math(q: &Value, k: &Value, v: &Value, mask: Option<&Tensor>, cfg: &crate::layers::attention::MathCfg) -> Result<Value> {
    let dt = q.data.dtype();
    let cdt = if dt == DType::F64 { DType::F64 } else { DType::F32 };
    let (q, mut k, mut v) = (to_dtype(q, cdt)?, to_dtype(k, cdt)?, to_dtype(v, cdt)?);
    if cfg.gqa && q.data.rank() >= 3 && k.data.rank() >= 3 && v.data.rank() >= 3 {
        let (hq, hk) = (q.data.dims()[q.data.rank() - 3], k.data.dims()[k.data.rank() - 3]);
        if hk != hq && hk != 1 {
            k = repeat_heads(&k, hq / hk)?;
            v = repeat_heads(&v, hq / hk)?;
        }
    }
    let r = k.data.rank();
    let (l, s) = (q.data.dims()[q.data.rank() - 2], k.data.dims()[r - 2]);
    let mut scores = matmul(&affine(&q, cfg.scale, 0.0)?, &transpose(&k, r - 2, r - 1)?)?;
    if cfg.causal {
        let tri: Vec<f32> = (0..l * s).map(|i| if i % s > i / s { f32::NEG_INFINITY } else { 0.0 }).collect();
        scores = add(&scores, &Value::plain(Tensor::from_vec(tri, (l, s), q.data.device())?.to_dtype(cdt)?))?;
    }
    if let Some(m) = mask {
        scores = add(&scores, &Value::plain(m.to_device(q.data.device())?.to_dtype(cdt)?))?;
    }
    let last = scores.data.rank() - 1;
    let live = scores.data.max_keepdim(last)?.gt(f64::NEG_INFINITY)?.broadcast_as(scores.data.shape())?;
    let scores = where_cond(&live, &scores, &Value::plain(scores.data.zeros_like()?))?;
    let mut probs = mul(&softmax(&scores, last, false)?, &Value::plain(live.to_dtype(cdt)?))?;
    if cfg.dropout > 0.0 {
        let keep = crate::ops::random::uniform_tensor(probs.data.dims(), cdt, probs.data.device(), None)?.ge(cfg.dropout)?.to_dtype(cdt)?;
        probs = mul(&probs, &Value::plain(keep.affine(1.0 / (1.0 - cfg.dropout), 0.0)?))?;
    }
    to_dtype(&matmul(&probs, &v)?, dt)
}

/// `layers::rope::rope`'s formula: x (B, H, T, D), tables (T, D/2); pair `(a, b)`
/// becomes `(a cos - b sin, a sin + b cos)`, adjacent elements when `interleaved`,
/// else the two halves of the last dim.
pub fn rope(x: &Value, cos: &Value, sin: &Value, interleaved: bool) -> Result<Value> {
    let dims = x.data.dims().to_vec();
    let (b, h, t, d) = (dims[0], dims[1], dims[2], dims[3]);
    let (cos, sin) = (to_dtype(cos, x.data.dtype())?, to_dtype(sin, x.data.dtype())?);
    let rotate = |a: &Value, bb: &Value, c: &Value, s: &Value| -> Result<(Value, Value)> {
        Ok((sub(&mul(a, c)?, &mul(bb, s)?)?, add(&mul(a, s)?, &mul(bb, c)?)?))
    };
    if interleaved {
        let pairs = reshape(x, &Shape::from((b, h, t, d / 2, 2)))?;
        let (c, s) = (reshape(&cos, &Shape::from((t, d / 2, 1)))?, reshape(&sin, &Shape::from((t, d / 2, 1)))?);
        let (ya, yb) = rotate(&narrow(&pairs, 4, 0, 1)?, &narrow(&pairs, 4, 1, 1)?, &c, &s)?;
        reshape(&cat(&[ya, yb], 4)?, x.data.shape())
    } else {
        let (ya, yb) = rotate(&narrow(x, 3, 0, d / 2)?, &narrow(x, 3, d / 2, d / 2)?, &cos, &sin)?;
        cat(&[ya, yb], 3)
    }
}
