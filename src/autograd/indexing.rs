//! Differentiable gathers, scatters, flips, repeats, scans and selecting reductions,
//! with PyTorch's backward formulas written as recorded ops (so `create_graph`
//! differentiates them again). Index tensors are never differentiated.
use crate::autograd::mode::grad_enabled;
use crate::autograd::ops::{broadcast_as, cat, contiguous, index_add, index_select, mul, narrow, record, reshape, sum_keepdim};
use crate::autograd::value::Value;
use crate::ops::layout::Dense;
use candle_core::{DType, Result, Shape, Tensor};

fn c(v: Value) -> Option<Value> {
    Some(v)
}

fn zeros(shape: &Shape, like: &Value) -> Result<Value> {
    Ok(Value::plain(Tensor::zeros(shape, like.data.dtype(), like.data.device())?))
}

/// `x` flattened (a contiguous copy in the graph when it is not contiguous).
pub fn flat(x: &Value) -> Result<Value> {
    reshape(&contiguous(x)?, &Shape::from(x.data.elem_count()))
}

/// Zeros of `shape` with `g`'s elements added at the flat offsets `offs`: the backward
/// of every gather expressed as flat offsets.
fn put_add(shape: &Shape, offs: &Tensor, g: &Value) -> Result<Value> {
    let z = zeros(&Shape::from(shape.elem_count()), g)?;
    reshape(&index_add(&z, offs, &flat(g)?, 0)?, shape)
}

/// The elements of `x` at the flat offsets `offs`, shaped `shape`.
pub fn take(x: &Value, offs: &Tensor, shape: &Shape) -> Result<Value> {
    reshape(&index_select(&flat(x)?, offs, 0)?, shape)
}

/// The elements of `x` at the flat offsets `offs` (into its contiguous form), shaped
/// `shape`, as one node named `name` (`UnfoldBackward0`, `DiagonalBackward0`,
/// `MaskedSelectBackward0`: strided reads Candle cannot express as views).
pub fn take_as(x: &Value, offs: Tensor, shape: &Shape, name: &'static str) -> Result<Value> {
    let out = x.data.dense()?.flatten_all()?.index_select(&offs, 0)?.reshape(shape)?;
    let from = x.data.shape().clone();
    Ok(record(name, &[x], out, &[], false, move |_, g, _| Ok(vec![c(put_add(&from, &offs, g)?)])))
}

/// `torch.gather(x, d, index)`: `x` already narrowed to the index's extent on the other
/// dims; `offs` are the flat offsets into (contiguous) `x` of each index element.
pub fn gather(x: &Value, idx: &Tensor, d: usize, offs: Tensor) -> Result<Value> {
    let out = x.data.dense()?.gather(idx, d)?;
    let shape = x.data.shape().clone();
    Ok(record("GatherBackward0", &[x], out, &[], false, move |_, g, _| Ok(vec![c(put_add(&shape, &offs, g)?)])))
}

/// `x.scatter(d, index, src)` (`add`: `scatter_add`) with `out` already computed:
/// `offs` are the flat offsets written (one per element of the narrowed `src`) and
/// `written` the 0/1 mask of the places overwritten (plain scatter only).
pub fn scatter(x: &Value, src: &Value, out: Tensor, offs: Tensor, written: Option<Tensor>) -> Result<Value> {
    let name = if written.is_none() { "ScatterAddBackward0" } else { "ScatterBackward0" };
    let src_shape = src.data.shape().clone();
    Ok(record(name, &[x, src], out, &[], false, move |_, g, n| {
        let gx = match (&written, n[0]) {
            (_, false) => None,
            (None, true) => c(g.clone()),
            (Some(m), true) => {
                let z = Value::plain(g.data.zeros_like()?);
                c(crate::autograd::ops::where_cond(&m.reshape(g.data.shape())?, &z, g)?)
            }
        };
        let gs = if n[1] { c(take(g, &offs, &src_shape)?) } else { None };
        Ok(vec![gx, gs])
    }))
}

/// Reverse the order along `dims`.
pub fn flip(x: &Value, dims: &[usize]) -> Result<Value> {
    let out = if dims.is_empty() { x.data.dense_copy()? } else { crate::ops::layout::flip(&x.data, dims)? };
    let dims = dims.to_vec();
    Ok(record("FlipBackward0", &[x], out, &[], false, move |_, g, _| Ok(vec![c(flip(g, &dims)?)])))
}

/// Tile `x` `reps` times along each dim (`x` already has `reps.len()` dims).
pub fn repeat(x: &Value, reps: &[usize]) -> Result<Value> {
    let out = x.data.repeat(reps.to_vec())?;
    let (shape, reps) = (x.data.dims().to_vec(), reps.to_vec());
    Ok(record("RepeatBackward0", &[x], out, &[], false, move |_, g, _| {
        // Output dim i is (reps[i], shape[i]) row-major: sum over the reps axes.
        let split: Vec<usize> = reps.iter().zip(&shape).flat_map(|(&r, &s)| [r, s]).collect();
        let axes: Vec<usize> = (0..reps.len()).map(|i| 2 * i).collect();
        let s = sum_keepdim(&reshape(&contiguous(g)?, &Shape::from(split))?, &axes)?;
        Ok(vec![c(reshape(&s, &Shape::from(shape.clone()))?)])
    }))
}

/// Running sum along `d` (a float tensor; NaN propagates from where it appears on);
/// the gradient is the running sum from the other end.
pub fn cumsum(x: &Value, d: usize) -> Result<Value> {
    let out = crate::ops::sort::scan(&x.data, d, crate::ops::sort::Scan::Sum)?;
    Ok(record("CumsumBackward0", &[x], out, &[], false, move |_, g, _| Ok(vec![c(flip(&cumsum(&flip(g, &[d])?, d)?, &[d])?)])))
}

/// Running product along `d` (a float tensor). The gradient is exact with zeros
/// (`ops::sort::cumprod_backward`); under `create_graph` it is built from recorded ops
/// as `revcumsum(grad * out) / x`, which needs an input without zeros.
pub fn cumprod(x: &Value, d: usize) -> Result<Value> {
    let out = crate::ops::sort::scan(&x.data, d, crate::ops::sort::Scan::Prod)?;
    Ok(record("CumprodBackward0", &[x], out, &[x], false, move |s, g, _| {
        let x = &s[0];
        if grad_enabled() && (x.requires_grad() || g.requires_grad()) {
            if x.data.eq(0.0)?.to_dtype(DType::F32)?.sum_all()?.to_scalar::<f32>()? > 0.0 {
                candle_core::bail!("create_graph=True: the double backward of cumprod with zeros in the input is not implemented");
            }
            // The output again, recorded, so the formula differentiates through it too.
            let gy = crate::autograd::ops::mul(g, &cumprod(x, d)?)?;
            let rev = flip(&cumsum(&flip(&gy, &[d])?, d)?, &[d])?;
            return Ok(vec![c(crate::autograd::ops::div(&rev, x)?)]);
        }
        Ok(vec![c(Value::plain(crate::ops::sort::cumprod_backward(&x.data, &g.data, d)?))])
    }))
}

/// `log(cumsum(exp(x)))` along `d` (a float tensor), computed stably; the gradient is
/// `ops::sort::logcumsumexp_backward`'s (first order only).
pub fn logcumsumexp(x: &Value, d: usize) -> Result<Value> {
    let out = crate::ops::sort::scan(&x.data, d, crate::ops::sort::Scan::LogSumExp)?;
    Ok(record("LogcumsumexpBackward0", &[x], out, &[x], true, move |s, g, _| {
        if grad_enabled() && (s[0].requires_grad() || g.requires_grad()) {
            candle_core::bail!("create_graph=True: the double backward of logcumsumexp is not implemented");
        }
        Ok(vec![c(Value::plain(crate::ops::sort::logcumsumexp_backward(&s[0].data, &s[1].data, &g.data, d)?))])
    }))
}

/// Product along `d`, the result shaped `out_shape` (the kept shape, or it with `d`
/// dropped, or a 0-d for the product of all). The gradient of each element is the
/// product of the others (exact with zeros): one scan for a plain backward; under
/// `create_graph` built from products of the other slices, so it differentiates again.
pub fn prod(x: &Value, d: usize, out_shape: &Shape, name: &'static str) -> Result<Value> {
    let kept_out = crate::ops::reduce::prod_keepdim(&x.data, d)?;
    let kept = kept_out.shape().clone();
    let out = kept_out.reshape(out_shape)?;
    let shape = x.data.shape().clone();
    Ok(record(name, &[x], out, &[x], false, move |s, g, _| {
        let others = if grad_enabled() && s[0].requires_grad() {
            others_product(&s[0], d)?
        } else {
            Value::plain(crate::ops::reduce::prod_others(&s[0].data, d)?)
        };
        Ok(vec![c(mul(&broadcast_as(&reshape(g, &kept)?, &shape)?, &others)?)])
    }))
}

/// For each element, the product of the others along `d`, from recorded ops.
fn others_product(x: &Value, d: usize) -> Result<Value> {
    let n = x.data.dims()[d];
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        let rest: Vec<Value> =
            [narrow(x, d, 0, i)?, narrow(x, d, i + 1, n - i - 1)?].into_iter().filter(|p| p.data.dims()[d] > 0).collect();
        parts.push(match rest.len() {
            0 => {
                let mut sh = x.data.dims().to_vec();
                sh[d] = 1;
                Value::plain(Tensor::ones(sh, x.data.dtype(), x.data.device())?)
            }
            _ => {
                let joined = cat(&rest, d)?;
                let mut kept = joined.data.dims().to_vec();
                kept[d] = 1;
                prod(&joined, d, &Shape::from(kept), "ProdBackward1")?
            }
        });
    }
    cat(&parts, d)
}

/// The values of `max(dim)`/`min(dim)`: `out` (shaped as asked) and the indices `arg`
/// (kept dims): the gradient goes to the selected element only, as PyTorch's.
pub fn select_along(x: &Value, out: Tensor, arg: &Tensor, d: usize, name: &'static str) -> Result<Value> {
    let iv: Vec<u32> = arg.flatten_all()?.to_dtype(DType::U32)?.to_vec1()?;
    let offs = crate::ops::gather::scatter_offsets(&iv, arg.dims(), x.data.dims(), d);
    let offs = Tensor::from_vec(offs, iv.len(), x.data.device())?;
    let shape = x.data.shape().clone();
    Ok(record(name, &[x], out, &[], false, move |_, g, _| Ok(vec![c(put_add(&shape, &offs, g)?)])))
}

/// `amax`/`amin` or the full `max()`/`min()`/`median()`: `out` (reduced over `dims`, kept
/// as size 1 in `kept`) given; the gradient is shared evenly among the elements equal to
/// it. `nan_shares`: a NaN result shares it among the NaN elements (PyTorch's
/// `evenly_distribute_backward` for the full reductions); without it a NaN result
/// gives NaN gradients (`amax`/`amin`'s formula divides by a zero count).
pub fn extreme_even(x: &Value, out: Tensor, kept: &Shape, dims: &[usize], nan_shares: bool, name: &'static str) -> Result<Value> {
    let o = out.reshape(kept)?;
    let mut hit = x.data.broadcast_eq(&o)?;
    if nan_shares {
        let both_nan = x.data.ne(&x.data)?.broadcast_mul(&o.ne(&o)?)?;
        hit = hit.maximum(&both_nan)?;
    }
    let hit = hit.to_dtype(x.data.dtype())?;
    let count = crate::ops::reduce::sum_keepdim(&hit, dims)?;
    let share = Value::plain(hit.broadcast_div(&count)?);
    let (kept, shape) = (kept.clone(), x.data.shape().clone());
    Ok(record(name, &[x], out, &[], false, move |_, g, _| Ok(vec![c(mul(&broadcast_as(&reshape(g, &kept)?, &shape)?, &share)?)])))
}

/// `split`/`chunk`/`unbind`'s pieces of `x` along `d` (sizes summing to its length):
/// views sharing its version counter, made by one node with an output per piece, whose
/// backward is one `cat` of the pieces' gradients (zeros for pieces without one),
/// where a node per piece would pad each gradient to the full size and sum them.
/// `squeeze`: the pieces (all of size 1) lose dim `d`, as `unbind`'s.
pub fn split(x: &Value, d: usize, sizes: &[usize], squeeze: bool, name: &'static str) -> Result<Vec<Value>> {
    let mut start = 0;
    let mut datas = Vec::with_capacity(sizes.len());
    for &s in sizes {
        let piece = x.data.narrow(d, start, s)?;
        datas.push(if squeeze { piece.squeeze(d)? } else { piece }.detach());
        start += s;
    }
    if !crate::autograd::ops::records(&[x]) || !x.data.dtype().is_float() {
        return Ok(datas.into_iter().map(|t| Value { data: t, meta: None, version: x.version.clone() }).collect());
    }
    let node = std::sync::Arc::new(SplitNode {
        name,
        base: crate::autograd::node::NodeBase::new(vec![x.edge()], sizes.len()),
        d,
        shape: x.data.dims().to_vec(),
        sizes: sizes.to_vec(),
        squeeze,
    });
    Ok(datas
        .into_iter()
        .enumerate()
        .map(|(i, t)| Value { data: t, meta: Some(crate::autograd::value::Meta::non_leaf(node.clone(), i)), version: x.version.clone() })
        .collect())
}

struct SplitNode {
    name: &'static str,
    base: crate::autograd::node::NodeBase,
    d: usize,
    shape: Vec<usize>,
    sizes: Vec<usize>,
    squeeze: bool,
}

impl crate::autograd::node::Node for SplitNode {
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn base(&self) -> &crate::autograd::node::NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let Some(like) = grads.iter().flatten().next().cloned() else { return Ok(vec![None]) };
        let parts = grads
            .into_iter()
            .zip(&self.sizes)
            .map(|(g, &s)| match g {
                Some(g) if self.squeeze => crate::autograd::ops::unsqueeze(&g, self.d),
                Some(g) => Ok(g),
                None => {
                    let mut sh = self.shape.clone();
                    sh[self.d] = s;
                    zeros(&Shape::from(sh), &like)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![Some(cat(&parts, self.d)?)])
    }
    fn release(&self) {}
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A write of `src` into `x` at the flat offsets `offs` whose gradients are weighted:
/// `x` gets `g * self_w`, each element of `src` `g[its offset] * src_w` (the weights
/// computed from the forward values: `scatter_reduce`'s means, shared extremes and
/// products of the others). `out` is already computed.
pub fn weighted_scatter(
    x: &Value,
    src: &Value,
    out: Tensor,
    offs: Tensor,
    self_w: Tensor,
    src_w: Tensor,
    name: &'static str,
) -> Result<Value> {
    let src_shape = src.data.shape().clone();
    let (sw, srw) = (Value::plain(self_w), Value::plain(src_w));
    Ok(record(name, &[x, src], out, &[], false, move |_, g, n| {
        let gx = if n[0] { c(mul(g, &sw)?) } else { None };
        let gs = if n[1] { c(mul(&take(g, &offs, &src_shape)?, &srw)?) } else { None };
        Ok(vec![gx, gs])
    }))
}
