//! Differentiable ops on `Value`s: the forward on the data, and the backward formula
//! written with these same ops, so that a backward run with `create_graph` records
//! its own graph (second derivatives for free).
use crate::autograd::mode::grad_enabled;
use crate::autograd::node::{Edge, FnNode, Saved};
use crate::autograd::value::{new_version, Meta, Value, Version};
use crate::ops::layout::Dense;
use candle_core::{DType, Result, Shape, Tensor};
use std::sync::Arc;

/// Whether an op on these inputs records a node (grad mode on, some input requires grad).
pub fn records(inputs: &[&Value]) -> bool {
    grad_enabled() && inputs.iter().any(|v| v.meta.is_some())
}

/// Wrap `out` (computed from `inputs`) as a result, with a node when one is needed.
/// `saved` are the inputs' values the formula reads; `save_out` appends the result.
pub fn record<F>(name: &'static str, inputs: &[&Value], out: Tensor, saved: &[&Value], save_out: bool, formula: F) -> Value
where
    F: Fn(&[Value], &Value, &[bool]) -> Result<Vec<Option<Value>>> + Send + Sync + 'static,
{
    record_view(name, inputs, out, saved, save_out, None, formula)
}

/// `record` for a view: the result shares `version` (its base's counter).
pub fn record_view<F>(
    name: &'static str,
    inputs: &[&Value],
    out: Tensor,
    saved: &[&Value],
    save_out: bool,
    version: Option<Version>,
    formula: F,
) -> Value
where
    F: Fn(&[Value], &Value, &[bool]) -> Result<Vec<Option<Value>>> + Send + Sync + 'static,
{
    let version = version.unwrap_or_else(new_version);
    let out = out.detach();
    if !records(inputs) || !out.dtype().is_float() {
        return Value { data: out, meta: None, version };
    }
    let edges: Vec<Option<Edge>> = inputs.iter().map(|v| v.edge()).collect();
    let mut sv: Vec<Saved> = saved.iter().map(|v| Saved::input(v)).collect();
    let res = Value { data: out, meta: None, version };
    if save_out {
        sv.push(Saved::output(&res, 0));
    }
    let node = Arc::new(FnNode::new(name, edges, sv, Box::new(formula)));
    Value { meta: Some(Meta::non_leaf(node, 0)), ..res }
}

fn c(v: Value) -> Option<Value> {
    Some(v)
}

/// Sum `g` down to `shape` (undo a broadcast).
pub fn sum_to(g: &Value, shape: &Shape) -> Result<Value> {
    let gd = g.data.dims().to_vec();
    let sd = shape.dims();
    if gd == sd {
        return Ok(g.clone());
    }
    let lead = gd.len() - sd.len();
    let mut dims: Vec<usize> = (0..lead).collect();
    for (i, &s) in sd.iter().enumerate() {
        if s == 1 && gd[lead + i] != 1 {
            dims.push(lead + i);
        }
    }
    let s = if dims.is_empty() { g.clone() } else { sum_keepdim(g, &dims)? };
    reshape(&s, shape)
}

/// The four arithmetic ops whose formulas `record_binary` knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// Record `out = a (op) b` (already computed, broadcasting allowed): the gradients are
/// summed back to each operand's shape.
pub fn record_binary(op: Arith, a: &Value, b: &Value, out: Tensor) -> Value {
    let (sa, sb) = (a.data.shape().clone(), b.data.shape().clone());
    let (name, save): (&'static str, bool) = match op {
        Arith::Add => ("AddBackward0", false),
        Arith::Sub => ("SubBackward0", false),
        Arith::Mul => ("MulBackward0", true),
        Arith::Div => ("DivBackward0", true),
    };
    let saved: Vec<&Value> = if save { vec![a, b] } else { vec![] };
    record(name, &[a, b], out, &saved, false, move |s, g, n| {
        let (ga, gb) = match op {
            Arith::Add => (n[0].then(|| g.clone()), n[1].then(|| g.clone())),
            Arith::Sub => (n[0].then(|| g.clone()), if n[1] { c(neg(g)?) } else { None }),
            Arith::Mul => (if n[0] { c(mul(g, &s[1])?) } else { None }, if n[1] { c(mul(g, &s[0])?) } else { None }),
            Arith::Div => {
                let ga = div(g, &s[1])?;
                let gb = if n[1] { c(neg(&mul(&ga, &div(&s[0], &s[1])?)?)?) } else { None };
                (n[0].then_some(ga), gb)
            }
        };
        Ok(vec![ga.map(|g| sum_to(&g, &sa)).transpose()?, gb.map(|g| sum_to(&g, &sb)).transpose()?])
    })
}

/// `a (op) b` through our CPU kernels where they apply, else Candle's `slow`.
fn fast_or(a: &Value, b: &Value, op: crate::ops::binary::Bin, slow: fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if a.data.dtype() == b.data.dtype() {
        if let Some(t) = crate::ops::binary::direct_binary(&a.data, &b.data, op) {
            return Ok(t);
        }
    }
    slow(&a.data, &b.data)
}

pub fn add(a: &Value, b: &Value) -> Result<Value> {
    Ok(record_binary(Arith::Add, a, b, fast_or(a, b, crate::ops::binary::Bin::Add, |x, y| x.broadcast_add(y))?))
}
pub fn sub(a: &Value, b: &Value) -> Result<Value> {
    Ok(record_binary(Arith::Sub, a, b, fast_or(a, b, crate::ops::binary::Bin::Sub, |x, y| x.broadcast_sub(y))?))
}
pub fn mul(a: &Value, b: &Value) -> Result<Value> {
    Ok(record_binary(Arith::Mul, a, b, fast_or(a, b, crate::ops::binary::Bin::Mul, |x, y| x.broadcast_mul(y))?))
}
pub fn div(a: &Value, b: &Value) -> Result<Value> {
    Ok(record_binary(Arith::Div, a, b, fast_or(a, b, crate::ops::binary::Bin::Div, |x, y| x.broadcast_div(y))?))
}

pub fn neg(x: &Value) -> Result<Value> {
    Ok(record("NegBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Neg)?, &[], false, |_, g, _| {
        Ok(vec![c(neg(g)?)])
    }))
}

/// `x * mul + add`.
pub fn affine(x: &Value, mul: f64, add: f64) -> Result<Value> {
    let name = if add != 0.0 && mul == 1.0 { "AddBackward0" } else { "MulBackward0" };
    let out = match crate::ops::binary::direct_affine(&x.data, mul, add) {
        Some(o) => o,
        None => x.data.affine(mul, add)?,
    };
    Ok(record(name, &[x], out, &[], false, move |_, g, _| Ok(vec![c(affine(g, mul, 0.0)?)])))
}

pub fn exp(x: &Value) -> Result<Value> {
    Ok(record("ExpBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Exp)?, &[x], true, |s, g, _| {
        // Under create_graph the output is recomputed from the input so that it is differentiable.
        let y = if grad_enabled() { exp(&s[0])? } else { s[1].clone() };
        Ok(vec![c(mul(g, &y)?)])
    }))
}

pub fn log(x: &Value) -> Result<Value> {
    Ok(record("LogBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Log)?, &[x], false, |s, g, _| {
        Ok(vec![c(div(g, &s[0])?)])
    }))
}

/// `ln(1 + x)`; its derivative `1 / (1 + x)`, as PyTorch's `Log1PBackward0`.
pub fn log1p(x: &Value) -> Result<Value> {
    Ok(record("Log1PBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Log1p)?, &[x], false, |s, g, _| {
        Ok(vec![c(div(g, &affine(&s[0], 1.0, 1.0)?)?)])
    }))
}

/// `exp(x) - 1`; its derivative `exp(x)` read as `out + 1`, as PyTorch's `Expm1Backward0`.
pub fn expm1(x: &Value) -> Result<Value> {
    Ok(record("Expm1Backward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Expm1)?, &[x], true, |s, g, _| {
        // Under create_graph the output is recomputed from the input so that it is differentiable.
        let y = if grad_enabled() { expm1(&s[0])? } else { s[1].clone() };
        Ok(vec![c(mul(g, &affine(&y, 1.0, 1.0)?)?)])
    }))
}

/// `1 / sqrt(x)`; its derivative `-0.5 out^3`, as PyTorch's `RsqrtBackward0`.
pub fn rsqrt(x: &Value) -> Result<Value> {
    Ok(record("RsqrtBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Rsqrt)?, &[x], true, |s, g, _| {
        let y = if grad_enabled() { rsqrt(&s[0])? } else { s[1].clone() };
        Ok(vec![c(mul(g, &affine(&mul(&y, &sqr(&y)?)?, -0.5, 0.0)?)?)])
    }))
}

pub fn sqrt(x: &Value) -> Result<Value> {
    Ok(record("SqrtBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Sqrt)?, &[x], true, |s, g, _| {
        let y = if grad_enabled() { sqrt(&s[0])? } else { s[1].clone() };
        Ok(vec![c(div(g, &affine(&y, 2.0, 0.0)?)?)])
    }))
}

pub fn sqr(x: &Value) -> Result<Value> {
    Ok(record("PowBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Sqr)?, &[x], false, |s, g, _| {
        Ok(vec![c(mul(g, &affine(&s[0], 2.0, 0.0)?)?)])
    }))
}

pub fn recip(x: &Value) -> Result<Value> {
    Ok(record("ReciprocalBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Recip)?, &[x], true, |s, g, _| {
        let y = if grad_enabled() { recip(&s[0])? } else { s[1].clone() };
        Ok(vec![c(neg(&mul(g, &sqr(&y)?)?)?)])
    }))
}

pub fn tanh(x: &Value) -> Result<Value> {
    Ok(record("TanhBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Tanh)?, &[x], true, |s, g, _| {
        if !grad_enabled() {
            if let Some(gx) = crate::ops::unary::fused_grad(&s[1].data, &g.data, crate::ops::unary::Fast::Tanh) {
                return Ok(vec![c(Value::plain(gx))]);
            }
        }
        let y = if grad_enabled() { tanh(&s[0])? } else { s[1].clone() };
        // g * (1 - y^2)
        Ok(vec![c(mul(g, &affine(&sqr(&y)?, -1.0, 1.0)?)?)])
    }))
}

pub fn sin(x: &Value) -> Result<Value> {
    Ok(record("SinBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Sin)?, &[x], false, |s, g, _| {
        Ok(vec![c(mul(g, &cos(&s[0])?)?)])
    }))
}

pub fn cos(x: &Value) -> Result<Value> {
    Ok(record("CosBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Cos)?, &[x], false, |s, g, _| {
        Ok(vec![c(neg(&mul(g, &sin(&s[0])?)?)?)])
    }))
}

/// `x ** e` for a float exponent.
pub fn powf(x: &Value, e: f64) -> Result<Value> {
    Ok(record("PowBackward0", &[x], crate::ops::unary::powf(&x.data, e)?, &[x], false, move |s, g, _| {
        Ok(vec![c(mul(g, &affine(&powf(&s[0], e - 1.0)?, e, 0.0)?)?)])
    }))
}

/// The product of two operands of rank >= 2: 2-D float products through the linear
/// kernel, batched float ones through `ops::bmm` (any strides, broadcast batches),
/// other dtypes and devices through Candle's matmul, whose gemm takes transposed
/// matrices but not every batch striding (e.g. heads split with transpose(1, 2)):
/// such operands are retried there as contiguous copies.
fn mm_raw(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if (a.rank() > 2 || b.rank() > 2) && crate::ops::bmm::takes(a, b) {
        let (ra, rb) = (a.rank(), b.rank());
        if rb == 2 && ra > 2 && a.is_contiguous() && a.dims()[ra - 1] > 0 {
            // (batch..., m, k) @ (k, n) with a dense left operand: one product over all
            // the rows (one GEMM of batch * m rows splits better than many of m).
            let k = a.dims()[ra - 1];
            let y = crate::layers::linear::matmul2d(&a.reshape((a.elem_count() / k, k))?, b)?;
            let mut dims = a.dims()[..ra - 1].to_vec();
            dims.push(b.dims()[1]);
            return y.reshape(dims);
        }
        return crate::ops::bmm::batched(a, b);
    }
    let run =
        |l: &Tensor, r: &Tensor| if l.rank() == 2 && r.rank() == 2 { crate::layers::linear::matmul2d(l, r) } else { l.broadcast_matmul(r) };
    match run(a, b) {
        Err(_) if !a.is_contiguous() || !b.is_contiguous() => run(&a.dense()?, &b.dense()?),
        res => res,
    }
}

/// Matrix product of operands of rank >= 2 whose batch dimensions broadcast.
pub fn matmul(a: &Value, b: &Value) -> Result<Value> {
    let out = mm_raw(&a.data, &b.data)?;
    let name = if a.data.rank() == 2 && b.data.rank() == 2 { "MmBackward0" } else { "BmmBackward0" };
    let (sa, sb) = (a.data.shape().clone(), b.data.shape().clone());
    Ok(record(name, &[a, b], out, &[a, b], false, move |s, g, n| {
        let t = |v: &Value| transpose(v, v.data.rank() - 2, v.data.rank() - 1);
        Ok(vec![
            if n[0] { c(sum_to(&matmul(g, &t(&s[1])?)?, &sa)?) } else { None },
            if n[1] { c(sum_to(&matmul(&t(&s[0])?, g)?, &sb)?) } else { None },
        ])
    }))
}

/// A new dimension of size 1 at `dim` (a view, whatever the strides).
pub fn unsqueeze(x: &Value, dim: usize) -> Result<Value> {
    let out = x.data.unsqueeze(dim)?;
    Ok(record_view("UnsqueezeBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(squeeze(g, dim)?)])))
}

/// Remove dimension `dim` of size 1 (a view; other sizes are left as they are).
pub fn squeeze(x: &Value, dim: usize) -> Result<Value> {
    if x.data.dims()[dim] != 1 {
        return Ok(x.clone());
    }
    let out = x.data.squeeze(dim)?;
    Ok(record_view("SqueezeBackward1", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(unsqueeze(g, dim)?)])))
}

/// Sum over `dims`, keeping them as size 1.
pub fn sum_keepdim(x: &Value, dims: &[usize]) -> Result<Value> {
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return Ok(x.clone());
    }
    let out = crate::ops::reduce::sum_keepdim(&x.data, &sorted)?;
    let shape = x.data.shape().clone();
    Ok(record("SumBackward1", &[x], out, &[], false, move |_, g, _| Ok(vec![c(broadcast_as(g, &shape)?)])))
}

pub fn broadcast_as(x: &Value, shape: &Shape) -> Result<Value> {
    if x.data.shape() == shape {
        return Ok(x.clone());
    }
    let out = x.data.broadcast_as(shape)?;
    let from = x.data.shape().clone();
    Ok(record_view("ExpandBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(sum_to(g, &from)?)])))
}

pub fn reshape(x: &Value, shape: &Shape) -> Result<Value> {
    if x.data.shape() == shape {
        return Ok(x.clone());
    }
    // A strided input is copied by our kernel (Candle's reshape copies per element).
    let out = x.data.dense()?.reshape(shape)?;
    let from = x.data.shape().clone();
    let version = out.is_contiguous().then(|| x.version.clone()).filter(|_| x.data.is_contiguous());
    Ok(record_view("ViewBackward0", &[x], out, &[], false, version, move |_, g, _| Ok(vec![c(reshape(g, &from)?)])))
}

/// `x` seen as `dims` without a copy, where `x` is strided and each of its dims of size
/// over 1 splits into consecutive dims of `dims` (size-1 dims anywhere): the heads view
/// `q.view(B, L, H, D)` of one part of a fused projection, say. As PyTorch's `view` and
/// `reshape`, the result shares `x`'s storage, so in-place writes through either reach
/// both; `reshape` copied it before, and `view` then wrote into a copy. Built from
/// Candle's views (squeeze, `unfold` to split a dim, permute, unsqueeze). None where the
/// new shape merges dims of `x` (PyTorch's view can merge dims whose strides chain;
/// those still take the copy) or a dim is too long for `unfold`'s float arithmetic.
pub fn view_split(x: &Value, dims: &[usize]) -> Result<Option<Value>> {
    let t = &x.data;
    if t.elem_count() == 0 || t.elem_count() != dims.iter().product::<usize>() {
        return Ok(None);
    }
    let old: Vec<usize> = t.dims().iter().copied().filter(|&d| d > 1).collect();
    let new: Vec<usize> = dims.iter().copied().filter(|&d| d > 1).collect();
    // The new dims each old one splits into.
    let mut groups: Vec<&[usize]> = Vec::with_capacity(old.len());
    let mut j = 0;
    for &d in &old {
        let (start, mut p) = (j, 1);
        while p < d && j < new.len() {
            p *= new[j];
            j += 1;
        }
        // `unfold` computes the split dim's new size in f32.
        if p != d || d >= 1 << 24 {
            return Ok(None);
        }
        groups.push(&new[start..j]);
    }
    let mut v = t.clone();
    for i in (0..t.rank()).rev() {
        if t.dims()[i] == 1 {
            v = v.squeeze(i)?;
        }
    }
    // Old dim i keeps its group's first size; `unfold` appends each further one at the end
    // (size `rest`, the old stride), splitting it again for the next.
    let mut order = Vec::with_capacity(new.len());
    let mut next = old.len();
    for (i, g) in groups.iter().enumerate() {
        order.push(i);
        let (mut cur, mut rest) = (i, g[1..].iter().product::<usize>());
        for &e in &g[1..] {
            v = v.unfold(cur, rest, rest)?;
            order.push(next);
            (cur, next, rest) = (next, next + 1, rest / e);
        }
    }
    let mut v = v.permute(order)?;
    for (k, &d) in dims.iter().enumerate() {
        if d == 1 {
            v = v.unsqueeze(k)?;
        }
    }
    if v.dims() != dims {
        return Ok(None);
    }
    let from = t.shape().clone();
    Ok(Some(record_view("ViewBackward0", &[x], v, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(reshape(g, &from)?)]))))
}

/// `x.view(x.shape)` as the user wrote it: a new view node (PyTorch's `ViewBackward0`), so
/// the result of a leaf is not itself a leaf. Internal callers use `reshape`, which
/// returns `x` unchanged for its own shape.
pub fn view_same_shape(x: &Value) -> Result<Value> {
    if !x.requires_grad() {
        return Ok(x.clone());
    }
    Ok(record_view("ViewBackward0", &[x], x.data.clone(), &[], false, Some(x.version.clone()), |_, g, _| Ok(vec![c(g.clone())])))
}

pub fn transpose(x: &Value, d0: usize, d1: usize) -> Result<Value> {
    if d0 == d1 {
        return Ok(x.clone());
    }
    let out = x.data.transpose(d0, d1)?;
    Ok(record_view("TransposeBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(transpose(g, d0, d1)?)])))
}

/// The permutation that undoes `dims` (`inv[dims[i]] = i`).
pub(crate) fn inverse_permutation(dims: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate() {
        inv[d] = i;
    }
    inv
}

pub fn permute(x: &Value, dims: &[usize]) -> Result<Value> {
    let out = x.data.permute(dims.to_vec())?;
    let inv = inverse_permutation(dims);
    Ok(record_view("PermuteBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| Ok(vec![c(permute(g, &inv)?)])))
}

pub fn narrow(x: &Value, dim: usize, start: usize, len: usize) -> Result<Value> {
    let out = x.data.narrow(dim, start, len)?;
    let size = x.data.dims()[dim];
    let order = memory_order(&x.data);
    Ok(record_view("SliceBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| {
        Ok(vec![c(slice_grad(g, dim, start, size, order.as_deref())?)])
    }))
}

/// The order of `t`'s dims in memory, outermost first, when its layout is a dense
/// one with the dims permuted (a permuted view of a contiguous tensor); `None` when it
/// is contiguous or not dense. A slice's gradient is laid out in this order
/// (`engine::join`), so the permute backward that follows gets a contiguous tensor.
fn memory_order(t: &Tensor) -> Option<Vec<usize>> {
    if t.is_contiguous() || t.elem_count() == 0 {
        return None;
    }
    let (dims, strides) = (t.dims(), t.stride());
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by(|&a, &b| strides[b].cmp(&strides[a]).then(a.cmp(&b)));
    let mut acc = 1;
    for &k in order.iter().rev() {
        if dims[k] > 1 && strides[k] != acc {
            return None;
        }
        acc *= dims[k];
    }
    Some(order)
}

/// The gradient of a slice (`narrow` / `select` backward): `g` (the slice's part, at
/// `start` along `dim`) padded with zeros to `size`. In a backward that records
/// nothing the engine takes `g` itself as a piece of its input's gradient
/// (`engine::defer_piece`) and joins the pieces of one tensor in one pass: a ViT's
/// `qkv[0], qkv[1], qkv[2]` made three full-size padded gradients and summed them.
fn slice_grad(g: &Value, dim: usize, start: usize, size: usize, order: Option<&[usize]>) -> Result<Value> {
    let len = g.data.dims()[dim];
    // A slice of the whole extent is the gradient itself: nothing to pad or join
    // (joining it as a lone piece would only copy it).
    if len < size && !grad_enabled() && crate::autograd::engine::defer_piece(&g.data, dim, start, size, order) {
        return Ok(g.clone());
    }
    pad_zeros(g, dim, start, size - start - len)
}

/// Zeros added before and after along `dim`.
pub fn pad_zeros(x: &Value, dim: usize, left: usize, right: usize) -> Result<Value> {
    if left == 0 && right == 0 {
        return Ok(x.clone());
    }
    let out = crate::ops::layout::pad_zeros(&x.data, dim, left, right)?;
    let len = x.data.dims()[dim];
    Ok(record("ConstantPadNdBackward0", &[x], out, &[], false, move |_, g, _| Ok(vec![c(narrow(g, dim, left, len)?)])))
}

pub fn cat(xs: &[Value], dim: usize) -> Result<Value> {
    let ts: Vec<&Tensor> = xs.iter().map(|v| &v.data).collect();
    let out = crate::ops::layout::cat(&ts, dim)?;
    let sizes: Vec<usize> = xs.iter().map(|v| v.data.dims()[dim]).collect();
    let refs: Vec<&Value> = xs.iter().collect();
    Ok(record("CatBackward0", &refs, out, &[], false, move |_, g, n| {
        let mut off = 0;
        let mut res = Vec::with_capacity(sizes.len());
        for (i, &s) in sizes.iter().enumerate() {
            res.push(if n[i] { c(narrow(g, dim, off, s)?) } else { None });
            off += s;
        }
        Ok(res)
    }))
}

/// Rows of `x` along `dim` picked by the integer tensor `idx` (not differentiated).
pub fn index_select(x: &Value, idx: &Tensor, dim: usize) -> Result<Value> {
    // Candle's kernel reads contiguous sources only (gradients are often broadcasts).
    let out = if x.data.is_contiguous() { x.data.index_select(idx, dim)? } else { x.data.dense()?.index_select(idx, dim)? };
    index_selected(x, idx, dim, out)
}

/// `index_select`'s node over an `out` the caller computed (`x[:, ::2]` gathered by
/// strides, where `step_view` cannot make a view).
pub fn index_selected(x: &Value, idx: &Tensor, dim: usize, out: Tensor) -> Result<Value> {
    Ok(record("IndexSelectBackward0", &[x], out, &[], false, scatter_back(idx.clone(), x.data.shape().clone(), dim)))
}

/// The backward of reading the rows `idx` of `dim` from a tensor of `shape`: each row of
/// the gradient added back where it was read, into zeros.
fn scatter_back(
    idx: Tensor,
    shape: Shape,
    dim: usize,
) -> impl Fn(&[Value], &Value, &[bool]) -> Result<Vec<Option<Value>>> + Send + Sync + 'static {
    move |_, g, _| {
        // Under create_graph the gradient must be recorded: the differentiable index_add.
        if !(grad_enabled() && g.requires_grad()) {
            if let Some(gx) = index_select_grad(&g.data, &idx, &shape, dim)? {
                return Ok(vec![c(Value::plain(gx))]);
            }
        }
        let z = Value::plain(Tensor::zeros(&shape, g.data.dtype(), g.data.device())?);
        Ok(vec![c(index_add(&z, &idx, g, dim)?)])
    }
}

/// `x[..., start::step]` along `dim` (`len` indices, `step > 1`; `idx` holds them, for
/// the backward's scatter) as a view sharing `x`'s storage, as PyTorch's basic slicing
/// is: writes through it (`x[:, ::2].zero_()`) reach `x`. Candle's `unfold` with
/// windows of one element `step` apart gives the strides. None where `len < 2` (a plain
/// narrow covers it) or the dim is too long for `unfold`'s float arithmetic.
pub fn step_view(x: &Value, dim: usize, start: usize, len: usize, step: usize, idx: &Tensor) -> Result<Option<Value>> {
    let span = match len {
        0 | 1 => return Ok(None),
        _ => (len - 1) * step + 1,
    };
    if span >= 1 << 24 {
        return Ok(None);
    }
    let out = x.data.narrow(dim, start, span)?.unfold(dim, 1, step)?.squeeze(x.data.rank())?;
    if out.dims()[dim] != len {
        return Ok(None);
    }
    let formula = scatter_back(idx.clone(), x.data.shape().clone(), dim);
    Ok(Some(record_view("SliceBackward0", &[x], out, &[], false, Some(x.version.clone()), formula)))
}

/// `index_select`'s gradient for a contiguous CPU float32/float64 `g`: one pass adding
/// each row back where it was read (`ops::gather::scatter_add_rows`); Candle's
/// `index_add` into zeros took a reflection pad's backward to 10x torch's time.
fn index_select_grad(g: &Tensor, idx: &Tensor, shape: &Shape, dim: usize) -> Result<Option<Tensor>> {
    if !g.device().is_cpu() || !g.is_contiguous() || !matches!(g.dtype(), DType::F32 | DType::F64) {
        return Ok(None);
    }
    let dims = shape.dims();
    let (outer, size, inner) = (dims[..dim].iter().product(), dims[dim], dims[dim + 1..].iter().product());
    let rows: Vec<usize> = idx.to_dtype(DType::I64)?.flatten_all()?.to_vec1::<i64>()?.into_iter().map(|r| r as usize).collect();
    if rows.iter().any(|&r| r >= size) {
        return Ok(None);
    }
    let (st, l) = g.storage_and_layout();
    let candle_core::Storage::Cpu(cs) = &*st else { return Ok(None) };
    let start = l.start_offset();
    let out = match cs {
        candle_core::CpuStorage::F32(v) => Tensor::from_vec(
            crate::ops::gather::scatter_add_rows(&v[start..start + g.elem_count()], outer, size, inner, &rows),
            shape,
            &candle_core::Device::Cpu,
        )?,
        candle_core::CpuStorage::F64(v) => Tensor::from_vec(
            crate::ops::gather::scatter_add_rows(&v[start..start + g.elem_count()], outer, size, inner, &rows),
            shape,
            &candle_core::Device::Cpu,
        )?,
        _ => return Ok(None),
    };
    Ok(Some(out))
}

/// `base` with the rows of `src` added at `idx` along `dim`.
pub fn index_add(base: &Value, idx: &Tensor, src: &Value, dim: usize) -> Result<Value> {
    let out = base.data.dense()?.index_add(idx, &src.data.dense()?, dim)?;
    let idx = idx.clone();
    Ok(record("IndexAddBackward0", &[base, src], out, &[], false, move |_, g, n| {
        Ok(vec![n[0].then(|| g.clone()), if n[1] { c(index_select(g, &idx, dim)?) } else { None }])
    }))
}

/// Convert the dtype; the gradient converts back.
pub fn to_dtype(x: &Value, dt: DType) -> Result<Value> {
    if x.data.dtype() == dt {
        return Ok(x.clone());
    }
    let from = x.data.dtype();
    let out = crate::ops::cast::to_dtype(&x.data, dt)?;
    if !from.is_float() {
        return Ok(Value::plain(out));
    }
    Ok(record("ToCopyBackward0", &[x], out, &[], false, move |_, g, _| Ok(vec![c(to_dtype(g, from)?)])))
}

/// `where(mask, a, b)` with `mask` a 0/1 tensor of the same shape.
pub fn where_cond(mask: &Tensor, a: &Value, b: &Value) -> Result<Value> {
    let out = mask.where_cond(&a.data, &b.data)?;
    let m = mask.clone();
    Ok(record("WhereBackward0", &[a, b], out, &[], false, move |_, g, n| {
        let z = Value::plain(g.data.zeros_like()?);
        Ok(vec![if n[0] { c(where_cond(&m, g, &z)?) } else { None }, if n[1] { c(where_cond(&m, &z, g)?) } else { None }])
    }))
}

/// Move to another device; the gradient moves back.
pub fn to_device(x: &Value, dev: &candle_core::Device) -> Result<Value> {
    if x.data.device().same_device(dev) {
        return Ok(x.clone());
    }
    let from = x.data.device().clone();
    Ok(record("ToCopyBackward0", &[x], x.data.to_device(dev)?, &[], false, move |_, g, _| Ok(vec![c(to_device(g, &from)?)])))
}

/// A contiguous copy with its own storage, in the graph (`clone()`, `contiguous()`).
pub fn force_contiguous(x: &Value, name: &'static str) -> Result<Value> {
    Ok(record(name, &[x], x.data.dense_copy()?, &[], false, |_, g, _| Ok(vec![Some(g.clone())])))
}

/// Index `i` of dimension `dim`, that dimension removed (a view; one node, named as
/// PyTorch's for `x[i]` and `x.select(dim, i)`).
pub fn select(x: &Value, dim: usize, i: usize) -> Result<Value> {
    let out = x.data.narrow(dim, i, 1)?.squeeze(dim)?;
    let size = x.data.dims()[dim];
    let order = memory_order(&x.data);
    Ok(record_view("SelectBackward0", &[x], out, &[], false, Some(x.version.clone()), move |_, g, _| {
        Ok(vec![c(slice_grad(&unsqueeze(g, dim)?, dim, i, size, order.as_deref())?)])
    }))
}

pub fn sigmoid(x: &Value) -> Result<Value> {
    let out = crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Sigmoid)?;
    Ok(record("SigmoidBackward0", &[x], out, &[x], true, |s, g, _| {
        if !grad_enabled() {
            if let Some(gx) = crate::ops::unary::fused_grad(&s[1].data, &g.data, crate::ops::unary::Fast::Sigmoid) {
                return Ok(vec![c(Value::plain(gx))]);
            }
        }
        let y = if grad_enabled() { sigmoid(&s[0])? } else { s[1].clone() };
        // g * y * (1 - y)
        Ok(vec![c(mul(g, &mul(&y, &affine(&y, -1.0, 1.0)?)?)?)])
    }))
}

/// Softmax (or log-softmax) over `dim`, with the backward of either from the output.
pub fn softmax(x: &Value, dim: usize, log: bool) -> Result<Value> {
    let out = crate::ops::softmax::softmax(&x.data, dim, log)?;
    let name = if log { "LogSoftmaxBackward0" } else { "SoftmaxBackward0" };
    Ok(record(name, &[x], out, &[x], true, move |s, g, _| {
        if !grad_enabled() && dim + 1 == s[1].data.rank() {
            if let Some(gx) = crate::ops::softmax::softmax_backward_last(&s[1].data, &g.data, log) {
                return Ok(vec![c(Value::plain(gx))]);
            }
        }
        let y = if grad_enabled() { softmax(&s[0], dim, log)? } else { s[1].clone() };
        let gx = if log {
            // g - softmax * sum(g)
            sub(g, &mul(&exp(&y)?, &sum_keepdim(g, &[dim])?)?)?
        } else {
            // y * (g - sum(g * y))
            mul(&y, &sub(g, &sum_keepdim(&mul(g, &y)?, &[dim])?)?)?
        };
        Ok(vec![c(gx)])
    }))
}

/// `x @ w.T + b` for 2-D `x` (the fused kernel); the backward is two products and a sum.
pub fn linear(x: &Value, w: &Value, b: Option<&Value>) -> Result<Value> {
    let out = crate::layers::linear::linear2d(&x.data, &w.data, b.map(|b| &b.data))?;
    let n = w.data.dims()[0];
    let (name, inputs): (&'static str, Vec<&Value>) = match b {
        Some(b) => ("AddmmBackward0", vec![x, w, b]),
        None => ("MmBackward0", vec![x, w]),
    };
    Ok(record(name, &inputs, out, &[x, w], false, move |s, g, need| {
        Ok(vec![if need[0] { c(matmul(g, &s[1])?) } else { None }, if need[1] { c(matmul(&transpose(g, 0, 1)?, &s[0])?) } else { None }]
            .into_iter()
            .chain(
                need.get(2)
                    .map(|&nb| if nb { sum_keepdim(g, &[0]).and_then(|s| reshape(&s, &Shape::from(n))).map(Some) } else { Ok(None) })
                    .transpose()?,
            )
            .collect())
    }))
}

/// `x` itself when contiguous, else a contiguous copy in the graph.
pub fn contiguous(x: &Value) -> Result<Value> {
    if x.data.is_contiguous() {
        return Ok(x.clone());
    }
    force_contiguous(x, "CloneBackward0")
}

/// The error function; its derivative is `2 / sqrt(pi) * exp(-x^2)`.
pub fn erf(x: &Value) -> Result<Value> {
    Ok(record("ErfBackward0", &[x], crate::ops::unary::fast(&x.data, crate::ops::unary::Fast::Erf)?, &[x], false, |s, g, _| {
        let d = affine(&exp(&affine(&sqr(&s[0])?, -1.0, 0.0)?)?, std::f64::consts::FRAC_2_SQRT_PI, 0.0)?;
        Ok(vec![c(mul(g, &d)?)])
    }))
}

/// The 2-norm over `dims` (sorted, non-empty), dropped unless `keepdim`: the sum of
/// the squares in one pass over `x` (`ops::reduce::sum_squares_keepdim`), then its
/// root. The backward is PyTorch's `x * (g / norm)`, zero where the norm is zero.
pub fn norm2(x: &Value, dims: &[usize], keepdim: bool) -> Result<Value> {
    let raw = crate::ops::reduce::sum_squares_keepdim(&x.data, dims)?.sqrt()?;
    let kept = raw.shape().clone();
    let out = if keepdim {
        raw
    } else {
        let shape: Vec<usize> = x.data.dims().iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &d)| d).collect();
        raw.reshape(shape)?
    };
    Ok(record("LinalgVectorNormBackward0", &[x], out, &[x], true, move |s, g, _| {
        let norm = reshape(&s[1], &kept)?;
        let q = div(&reshape(g, &kept)?, &norm)?;
        let q = where_cond(&norm.data.eq(0.0)?, &Value::plain(q.data.zeros_like()?), &q)?;
        Ok(vec![c(mul(&s[0], &q)?)])
    }))
}

/// Sum over `dims` (sorted, non-empty), dropped unless `keepdim`; a mean when `scale`
/// is given (the sum times `scale`). One node, named as PyTorch's.
pub fn reduce_sum(x: &Value, dims: &[usize], keepdim: bool, scale: Option<f64>) -> Result<Value> {
    let raw = crate::ops::reduce::sum_keepdim(&x.data, dims)?;
    let raw = match scale {
        Some(s) => raw.affine(s, 0.0)?,
        None => raw,
    };
    let kept = raw.shape().clone();
    let out = if keepdim {
        raw
    } else {
        let shape: Vec<usize> = x.data.dims().iter().enumerate().filter(|(i, _)| !dims.contains(i)).map(|(_, &d)| d).collect();
        raw.reshape(shape)?
    };
    let all = dims.len() == x.data.rank() && !keepdim;
    let name = match (scale.is_some(), all) {
        (false, true) => "SumBackward0",
        (false, false) => "SumBackward1",
        (true, true) => "MeanBackward0",
        (true, false) => "MeanBackward1",
    };
    let shape = x.data.shape().clone();
    Ok(record(name, &[x], out, &[], false, move |_, g, _| {
        let g = broadcast_as(&reshape(g, &kept)?, &shape)?;
        Ok(vec![c(match scale {
            Some(s) => affine(&g, s, 0.0)?,
            None => g,
        })])
    }))
}
