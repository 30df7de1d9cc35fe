//! Fused optimizer steps (behind `_core._sgd_step`, `_core._adam_step`): one call per
//! parameter group and one pass per parameter that updates the parameter and its
//! state buffers in place. The Python optimizers otherwise run a dozen small tensor
//! ops per parameter, which dominates a training step of a small model.
//!
//! The arithmetic follows PyTorch's single-tensor CPU path (what `torch.optim` runs
//! on CPU by default) operation by operation: Python-side scalars are computed in
//! f64 and rounded once to the element type, as torch's CPU kernels do.
//!
//! The kernels write contiguous float32/float64 CPU storages in place (`plain`);
//! the bindings hand them float copies of any other tensors and write those back
//! (`bindings::optim`), so these are the only optimizer updates.
use super::float::Float;
use candle_core::{CpuStorage, DType, InplaceOp1, Layout, Result, Storage, Tensor};
use rayon::prelude::*;
use std::cell::RefCell;

/// Elements of a whole group from which its parameters are updated on several
/// threads (`bindings::optim::run_all`); below it the calling thread does all.
pub(crate) const PAR_MIN: usize = 1 << 18;

/// Elements from which one parameter is cut into chunks other threads can take. The
/// updates read and write each element once, from L2/L3 (a backward has just written
/// the gradients), so one thread leaves half the machine's bandwidth unused: SGD over
/// an LSTM LM's 1.05M parameters (eleven tensors of 0.8K-200K) took 455 us on one
/// thread. Low enough that a 160K-element weight splits, so the two threads end level.
pub(crate) const SPLIT_MIN: usize = 1 << 15;

/// SGD hyper-parameters of one group.
#[derive(Clone, Copy)]
pub(crate) struct Sgd {
    pub(crate) lr: f64,
    pub(crate) momentum: f64,
    pub(crate) dampening: f64,
    pub(crate) weight_decay: f64,
    pub(crate) nesterov: bool,
    pub(crate) maximize: bool,
}

/// Adam's hyper-parameters of one group, plus one parameter's step count.
#[derive(Clone, Copy)]
pub(crate) struct Adam {
    pub(crate) lr: f64,
    pub(crate) beta1: f64,
    pub(crate) beta2: f64,
    pub(crate) eps: f64,
    pub(crate) weight_decay: f64,
    pub(crate) maximize: bool,
    pub(crate) decoupled: bool,
    pub(crate) step: f64,
}

/// torch: `grad = -grad` (maximize), then `grad = grad.add(param, alpha=wd)`;
/// the momentum buffer `buf.mul_(momentum).add_(grad, alpha=1 - dampening)` (or
/// `clone(grad)` on its first step), nesterov `grad.add(buf, alpha=momentum)`, and
/// `param.add_(grad, alpha=-lr)`.
pub(crate) fn sgd_kernel<T: Float>(p: &mut [T], g: &[T], buf: Option<&mut [T]>, fresh: bool, h: &Sgd) {
    // One loop per (weight decay, momentum kind), each branch-free so it vectorizes;
    // maximize is an exact multiplication by -1.
    let l2 = h.weight_decay != 0.0;
    match (buf, l2) {
        (None, false) => sgd_loop::<T, false, 0>(p, g, &mut [], h),
        (None, true) => sgd_loop::<T, true, 0>(p, g, &mut [], h),
        (Some(b), false) if fresh => sgd_loop::<T, false, 1>(p, g, b, h),
        (Some(b), true) if fresh => sgd_loop::<T, true, 1>(p, g, b, h),
        (Some(b), false) => sgd_loop::<T, false, 2>(p, g, b, h),
        (Some(b), true) => sgd_loop::<T, true, 2>(p, g, b, h),
    }
}

/// `BUF`: 0 without momentum, 1 for a fresh buffer (it takes the gradient), 2 else.
pub(crate) fn sgd_loop<T: Float, const L2: bool, const BUF: u8>(p: &mut [T], g: &[T], b: &mut [T], h: &Sgd) {
    let (wd, mom, damp, neg_lr) = (T::of(h.weight_decay), T::of(h.momentum), T::of(1.0 - h.dampening), T::of(-h.lr));
    let sign = T::of(if h.maximize { -1.0 } else { 1.0 });
    let nesterov = h.nesterov;
    let n = p.len();
    let g = &g[..n];
    let b = if BUF > 0 { &mut b[..n] } else { b };
    for i in 0..n {
        let d = if L2 { g[i] * sign + wd * p[i] } else { g[i] * sign };
        let step = match BUF {
            0 => d,
            _ => {
                let nb = if BUF == 1 { d } else { b[i] * mom + damp * d };
                b[i] = nb;
                if nesterov {
                    d + mom * nb
                } else {
                    nb
                }
            }
        };
        p[i] += neg_lr * step;
    }
}

/// torch's Adam: `param.mul_(1 - lr * wd)` (decoupled) or `grad = grad.add(param,
/// alpha=wd)`; `exp_avg.lerp_(grad, 1 - beta1)`; `exp_avg_sq.mul_(beta2).addcmul_(grad,
/// grad, value=1 - beta2)`; amsgrad's running maximum; `denom = (v.sqrt() /
/// sqrt(bias_correction2)).add_(eps)`; `param.addcdiv_(exp_avg, denom, value=-lr /
/// bias_correction1)`.
pub(crate) fn adam_kernel<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], vmax: Option<&mut [T]>, h: &Adam) {
    let l2 = h.weight_decay != 0.0 && !h.decoupled;
    // The loops are instantiated per (L2 decay, amsgrad) so each is branch-free and
    // vectorizes; maximize and decoupled decay are exact multiplications by +-1 and 1.
    match (l2, vmax) {
        (false, None) => adam_loop::<T, false, false>(p, g, m, v, &mut [], h),
        (true, None) => adam_loop::<T, true, false>(p, g, m, v, &mut [], h),
        (false, Some(vm)) => adam_loop::<T, false, true>(p, g, m, v, vm, h),
        (true, Some(vm)) => adam_loop::<T, true, true>(p, g, m, v, vm, h),
    }
}

pub(crate) fn adam_loop<T: Float, const L2: bool, const AMS: bool>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    vmax: &mut [T],
    h: &Adam,
) {
    let bc1 = 1.0 - h.beta1.powf(h.step);
    let bc2_sqrt = (1.0 - h.beta2.powf(h.step)).sqrt();
    let w1 = 1.0 - h.beta1;
    let (w, small) = (T::of(w1), w1.abs() < 0.5);
    let one_minus_w = T::of(1.0) - w;
    let (b2, c2) = (T::of(h.beta2), T::of(1.0 - h.beta2));
    let (bc2s, eps, neg_step) = (T::of(bc2_sqrt), T::of(h.eps), T::of(-(h.lr / bc1)));
    let wd = T::of(h.weight_decay);
    let decay = T::of(if h.decoupled && h.weight_decay != 0.0 { 1.0 - h.lr * h.weight_decay } else { 1.0 });
    let sign = T::of(if h.maximize { -1.0 } else { 1.0 });
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    let vmax = if AMS { &mut vmax[..n] } else { vmax };
    for i in 0..n {
        let pv = p[i] * decay;
        let gv = if L2 { g[i] * sign + wd * pv } else { g[i] * sign };
        // lerp(self, end, w): torch picks the form by |w| for accuracy.
        let mv = if small { m[i] + w * (gv - m[i]) } else { gv - (gv - m[i]) * one_minus_w };
        let vv = v[i] * b2 + c2 * gv * gv;
        m[i] = mv;
        v[i] = vv;
        let vd = if AMS {
            // torch.maximum: the larger, or NaN if either is.
            let x = if vmax[i].is_nan() {
                vmax[i]
            } else if vv.is_nan() || vv > vmax[i] {
                vv
            } else {
                vmax[i]
            };
            vmax[i] = x;
            x
        } else {
            vv
        };
        let denom = vd.sqrt() / bc2s + eps;
        p[i] = pv + neg_step * mv / denom;
    }
}

/// An in-place Candle op that hands the storage to a closure.
/// The closure an `Inplace` op hands a storage to.
type StorageFn<'a> = dyn FnMut(&mut CpuStorage, &Layout) -> Result<()> + 'a;

pub(crate) struct Inplace<'a>(RefCell<&'a mut StorageFn<'a>>);

impl InplaceOp1 for Inplace<'_> {
    fn name(&self) -> &'static str {
        "optimizer_step"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, l: &Layout) -> Result<()> {
        (self.0.borrow_mut())(s, l)
    }
}

/// Call `f` with the storages of `ts` write-locked, in order (nested in-place ops; the
/// caller makes sure the storages are distinct, or the nested locks would deadlock).
pub(crate) fn with_storages(
    ts: &[Tensor],
    held: Vec<&mut CpuStorage>,
    f: &mut dyn FnMut(Vec<&mut CpuStorage>) -> Result<()>,
) -> Result<()> {
    let Some((first, rest)) = ts.split_first() else {
        return f(held);
    };
    let mut held = Some(held);
    let mut step = |s: &mut CpuStorage, _: &Layout| -> Result<()> {
        let mut h: Vec<&mut CpuStorage> = held.take().expect("an in-place op runs once");
        h.push(s);
        with_storages(rest, h, f)
    };
    first.inplace_op1(&Inplace(RefCell::new(&mut step)))
}

/// The address of a tensor's storage, to tell shared storages apart.
pub(crate) fn storage_addr(t: &Tensor) -> usize {
    let (s, _) = t.storage_and_layout();
    std::ptr::from_ref::<Storage>(&*s) as usize
}

/// Whether every tensor is a contiguous CPU tensor of `dtype` with `n` elements, at
/// offset 0, and no two share storage.
pub(crate) fn plain(ts: &[&Tensor], dtype: DType, n: usize) -> bool {
    let ok = ts.iter().all(|t| {
        t.device().is_cpu() && t.dtype() == dtype && t.elem_count() == n && t.layout().is_contiguous() && t.layout().start_offset() == 0
    });
    ok && apart(ts)
}

/// Whether no two of `ts` share a storage.
pub(crate) fn apart(ts: &[&Tensor]) -> bool {
    let mut addrs: Vec<usize> = ts.iter().map(|t| storage_addr(t)).collect();
    addrs.sort_unstable();
    addrs.windows(2).all(|w| w[0] != w[1])
}

/// Elements per chunk when `n` elements are cut for the pool's threads: four chunks
/// a thread, none under `SPLIT_MIN / 4`.
fn chunk_len(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4).max(SPLIT_MIN / 4)
}

pub(crate) fn slice_mut<T: Float>(s: &mut CpuStorage, n: usize) -> &mut [T] {
    &mut T::slice_mut(s).expect("checked by plain()")[..n]
}

/// Multiply a plain (see `plain`) tensor by `c` in place, as `t.mul_(c)` does once `c`
/// is rounded to the element type; in chunks for the pool's threads from `SPLIT_MIN`
/// elements.
pub(crate) fn scale_in_place<T: Float>(t: &Tensor, c: T) -> Result<()> {
    let n = t.elem_count();
    let chunk = chunk_len(n);
    with_storages(std::slice::from_ref(t), Vec::new(), &mut |mut ss| {
        let v = slice_mut::<T>(ss.pop().expect("one storage"), n);
        if n >= SPLIT_MIN {
            v.par_chunks_mut(chunk).for_each(|part| part.iter_mut().for_each(|x| *x *= c));
        } else {
            v.iter_mut().for_each(|x| *x *= c);
        }
        Ok(())
    })
}

/// A per-parameter update: `(param, grad, state buffers)`.
pub(crate) type UpdateFn<'a, T> = dyn Fn(&mut [T], &[T], &mut [&mut [T]]) + Sync + 'a;

/// Run `kernel(param, grad, buffers)` on one parameter: the parameter and buffers
/// write-locked, the gradient read-locked; cut into chunks for the pool's threads
/// from `SPLIT_MIN` elements (inside a group's parallel loop those chunks are what
/// the idle thread steals).
pub(crate) fn update<T: Float + 'static>(p: &Tensor, g: &Tensor, bufs: &[Tensor], kernel: &UpdateFn<'_, T>) -> Result<()> {
    let n = p.elem_count();
    let (gs, _) = g.storage_and_layout();
    let gv: &[T] = match &*gs {
        Storage::Cpu(s) => T::slice(s).map(|v| &v[..n]),
        _ => None,
    }
    .ok_or_else(|| candle_core::Error::Msg("optimizer: gradient of another dtype".into()))?;
    let mut all = vec![p.clone()];
    all.extend(bufs.iter().cloned());
    with_storages(&all, Vec::new(), &mut |mut ss| {
        let mut views: Vec<&mut [T]> = ss.iter_mut().map(|s| slice_mut::<T>(s, n)).collect();
        let (pv, rest) = views.split_first_mut().expect("the parameter is first");
        if n >= SPLIT_MIN && rayon::current_num_threads() > 1 {
            let chunk = chunk_len(n);
            // One task per chunk index, each re-slicing every buffer at that chunk.
            let ptrs: Vec<usize> = rest.iter_mut().map(|b| b.as_mut_ptr() as usize).collect();
            let pp = pv.as_mut_ptr() as usize;
            (0..n.div_ceil(chunk)).into_par_iter().for_each(|c| {
                let (a, b) = (c * chunk, ((c + 1) * chunk).min(n));
                // SAFETY: chunks [a, b) are disjoint across tasks, and every buffer holds
                // n elements and stays locked until the parallel loop has finished.
                let pc = unsafe { std::slice::from_raw_parts_mut((pp as *mut T).add(a), b - a) };
                let mut bc: Vec<&mut [T]> = ptrs
                    .iter()
                    // SAFETY: as for `pc`: a <= b <= n and each buffer holds n elements; chunks
                    // are disjoint across tasks, and the buffers are disjoint (they come from
                    // coexisting `&mut` views of distinct storages), so no two slices overlap.
                    .map(|&q| unsafe { std::slice::from_raw_parts_mut((q as *mut T).add(a), b - a) })
                    .collect();
                kernel(pc, &gv[a..b], &mut bc);
            });
        } else {
            kernel(pv, gv, rest);
        }
        Ok(())
    })
}
