//! Max, average and adaptive pooling over 1-, 2- and 3-d planes, with PyTorch's
//! window rules (padding, dilation, ceil_mode, count_include_pad,
//! divisor_override) and flat per-plane indices for `return_indices`.
//!
//! Every variant reduces to per-axis window tables: for each output position
//! along an axis, its window as an arithmetic run of valid input positions (and,
//! for averages, that axis's factor of the divisor). The kernels walk the product
//! of the three tables plane by plane (blocks of planes over rayon's threads when
//! the pass is large).
//!
//! Max pooling compares branch-free (which element wins is unpredictable on real
//! data), 2x2 windows as a small tree, and a forward that will be differentiated
//! keeps its argmaxes so the backward is a scatter.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::parallel::{for_chunks, in_pool, par_ok};
use crate::ops::storage::float_dispatch;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use std::sync::{Arc, OnceLock};

mod max;

pub(crate) use max::*;

/// One window along one axis: input positions `first + j * step` for `j < count`
/// (already cut to the input; `count` may be 0). Every pooling window is such an
/// arithmetic run: dilation gives the step, padding and the input's ends cut it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Win {
    pub(crate) first: usize,
    pub(crate) count: usize,
    pub(crate) step: usize,
}

/// One axis: the window of each output position, and (for averages) that axis's
/// factor of the divisor.
#[derive(Debug, Default)]
pub(crate) struct Axis {
    win: Vec<Win>,
    factor: Vec<f64>,
}

impl Axis {
    pub(crate) fn trivial() -> Axis {
        Axis { win: vec![Win { first: 0, count: 1, step: 1 }], factor: vec![1.0] }
    }
    pub(crate) fn push(&mut self, w: Win, factor: f64) {
        self.win.push(w);
        self.factor.push(factor);
    }
    /// A window of consecutive positions `s..e`.
    pub(crate) fn push_range(&mut self, s: usize, e: usize, factor: f64) {
        self.push(Win { first: s, count: e.saturating_sub(s), step: 1 }, factor);
    }
}

#[derive(Debug)]
pub(crate) struct PoolGeom {
    pub(crate) planes: usize,
    pub(crate) ins: [usize; 3],
    pub(crate) outs: [usize; 3],
    pub(crate) axes: [Axis; 3],
    pub(crate) divisor: Option<f64>,
    /// For each (z, y) output row, the flat input offsets of its windows' rows:
    /// `rows[row_at[zy]..row_at[zy + 1]]` (made once; every plane walks them).
    pub(crate) rows: Vec<usize>,
    pub(crate) row_at: Vec<usize>,
    /// The shape the forward reports its result in, when not (planes, D', H', W'):
    /// the caller's own (batch, channels, ...) shape, so that the result is the
    /// pooling node's output itself (torch's `grad_fn`), not a reshape of it.
    pub(crate) result: Option<Vec<usize>>,
}

impl PoolGeom {
    pub(crate) fn new(planes: usize, ins: [usize; 3], outs: [usize; 3], axes: [Axis; 3], divisor: Option<f64>) -> PoolGeom {
        let [_, h, w] = ins;
        let (mut rows, mut row_at) = (Vec::new(), vec![0]);
        for wz in &axes[0].win {
            for wy in &axes[1].win {
                for a in 0..wz.count {
                    for b in 0..wy.count {
                        rows.push(((wz.first + a * wz.step) * h + wy.first + b * wy.step) * w);
                    }
                }
                row_at.push(rows.len());
            }
        }
        PoolGeom { planes, ins, outs, axes, divisor, rows, row_at, result: None }
    }
    pub(crate) fn ivol(&self) -> usize {
        self.ins.iter().product()
    }
    fn ovol(&self) -> usize {
        self.outs.iter().product()
    }
    /// Visit each output position (flat index `o`, per-axis position `at`) with the
    /// flat input offsets of its window's rows and its x-window.
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(usize, [usize; 3], &[usize], Win)) {
        let (ny, ax) = (self.axes[1].win.len(), &self.axes[2].win);
        let mut o = 0;
        for zy in 0..self.row_at.len() - 1 {
            let rows = &self.rows[self.row_at[zy]..self.row_at[zy + 1]];
            for (x, &wx) in ax.iter().enumerate() {
                f(o, [zy / ny, zy % ny, x], rows, wx);
                o += 1;
            }
        }
    }
    /// Whether every window is 2x2 of consecutive positions in one plane (MaxPool2d(2)
    /// and the like): `argmax2x2` applies.
    fn is_2x2(&self) -> bool {
        let full = |a: &Axis, c: usize| a.win.iter().all(|w| w.count == c && w.step == 1);
        full(&self.axes[0], 1) && full(&self.axes[1], 2) && full(&self.axes[2], 2)
    }
    /// Whether the 2x2 windows tile 2-d planes exactly (`tiled_2x2` applies), with
    /// flat indices over all `len` input elements within the SSE kernels' i32 range.
    fn is_tiled_2x2(&self, len: usize) -> bool {
        let [d, h, w] = self.ins;
        let [od, oh, ow] = self.outs;
        let at = |a: &Axis| a.win.iter().enumerate().all(|(o, win)| win.first == 2 * o);
        self.is_2x2()
            && d == 1
            && od == 1
            && h == 2 * oh
            && w == 2 * ow
            && at(&self.axes[1])
            && at(&self.axes[2])
            && len <= i32::MAX as usize
    }
    /// `f(o, a, b)` for each output `o` of a 2x2 geometry, its window's rows starting at
    /// flat offsets `a` and `b`.
    #[inline(always)]
    fn each_2x2(&self, mut f: impl FnMut(usize, usize, usize)) {
        let ax = &self.axes[2].win;
        let mut o = 0;
        for zy in 0..self.row_at.len() - 1 {
            let (r0, r1) = (self.rows[self.row_at[zy]], self.rows[self.row_at[zy] + 1]);
            for wx in ax {
                f(o, r0 + wx.first, r1 + wx.first);
                o += 1;
            }
        }
    }
    /// Whether the one output window covers each plane whole (global average pooling,
    /// `AdaptiveAvgPool2d(1)`): `avg` then sums / spreads whole planes.
    fn is_global(&self) -> bool {
        self.ovol() == 1
            && self
                .axes
                .iter()
                .zip(self.ins)
                .all(|(a, n)| a.win.len() == 1 && a.win[0].first == 0 && a.win[0].count == n && a.win[0].step == 1)
    }
    /// Whether average pooling should add each output row's window rows first
    /// (`avg_rows_summed`): when the windows span several rows and, together, most of
    /// each row's width (3-d and 3x3 windows), so the whole-row adds are not wasted.
    fn rows_first(&self) -> bool {
        let (w, ax) = (self.ins[2], &self.axes[2].win);
        let spans = self.rows.len() >= 2 * (self.row_at.len() - 1);
        spans && w > 0 && 2 * ax.iter().map(|x| x.count).sum::<usize>() >= w
    }
    pub(crate) fn divisor(&self, at: [usize; 3]) -> f64 {
        self.divisor.unwrap_or_else(|| self.axes[0].factor[at[0]] * self.axes[1].factor[at[1]] * self.axes[2].factor[at[2]])
    }
    /// Work of one pass, to decide on threads.
    pub(crate) fn work(&self) -> usize {
        self.planes * (self.ivol() + self.ovol())
    }
}

/// Planes per parallel task: enough work to be worth a task.
pub(crate) fn per_task(plane_work: usize) -> usize {
    ((1 << 14) / plane_work.max(1)).max(1)
}

/// Average pooling (`adjoint = false`) or its adjoint, which spreads each output's
/// gradient over its window (`adjoint = true`, input and output swap roles).
pub(crate) fn avg<T: Float>(src: &[T], g: &PoolGeom, adjoint: bool) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    if iv > 0 && g.is_global() {
        let div = T::of(g.divisor([0, 0, 0]));
        if adjoint {
            // Each plane filled with its gradient / divisor: no zero fill, no adds.
            return crate::ops::parallel::filled_plain(g.planes * iv, |dst| {
                crate::ops::parallel::for_chunks(dst, iv, crate::ops::parallel::par_ok(g.planes * iv), |p, d| d.fill(src[p] / div))
            });
        }
        let mut out = vec![T::ZERO; g.planes];
        crate::ops::reduce::row_sums_fast(&src[..g.planes * iv], &mut out, iv);
        out.iter_mut().for_each(|v| *v /= div);
        return out;
    }
    let (sv, dv) = if adjoint { (ov, iv) } else { (iv, ov) };
    let mut out = crate::ops::parallel::zeros(g.planes * dv);
    if ov == 0 || iv == 0 {
        return out;
    }
    let w = g.ins[2];
    if g.rows_first() {
        planes_do(g, src, sv, &mut out, dv, |s, dst| {
            let mut line = vec![T::ZERO; w];
            if adjoint {
                avg_rows_spread(g, s, dst, &mut line);
            } else {
                avg_rows_summed(g, s, dst, &mut line);
            }
        });
        return out;
    }
    planes_do(g, src, sv, &mut out, dv, |s, dst| {
        g.each(|k, at, rows, wx| {
            let div = T::of(g.divisor(at));
            // Whole consecutive rows (global pooling, AdaptiveAvgPool2d(1)): one run.
            let run = (wx.first == 0 && wx.count == w && wx.step == 1 && !rows.is_empty())
                .then(|| (rows[0], rows.len() * w))
                .filter(|&(r0, _)| rows.iter().enumerate().all(|(i, &r)| r == r0 + i * w));
            if let Some((r0, len)) = run {
                if adjoint {
                    let v = s[k] / div;
                    dst[r0..r0 + len].iter_mut().for_each(|d| *d += v);
                } else {
                    dst[k] = sum_run(&s[r0..r0 + len]) / div;
                }
                return;
            }
            if adjoint {
                let v = s[k] / div;
                for &r in rows {
                    let base = r + wx.first;
                    for j in 0..wx.count {
                        dst[base + j * wx.step] += v;
                    }
                }
            } else {
                let mut acc = T::ZERO;
                for &r in rows {
                    let base = r + wx.first;
                    if wx.step == 1 {
                        acc += sum_run(&s[base..base + wx.count]);
                    } else {
                        for j in 0..wx.count {
                            acc += s[base + j * wx.step];
                        }
                    }
                }
                dst[k] = acc / div;
            }
        });
    });
    out
}

/// Average pooling of one plane, each output row's window rows added first into
/// `line` (whole input rows, vector adds), then each x-window summed from `line`:
/// `rows * W + windows` adds per output row instead of `rows * windows`.
fn avg_rows_summed<T: Float>(g: &PoolGeom, s: &[T], dst: &mut [T], line: &mut [T]) {
    let (ny, ax, w) = (g.axes[1].win.len(), &g.axes[2].win, g.ins[2]);
    for zy in 0..g.row_at.len() - 1 {
        let rows = &g.rows[g.row_at[zy]..g.row_at[zy + 1]];
        let sum: &[T] = match rows {
            [] => {
                line.fill(T::ZERO);
                line
            }
            [r] => &s[*r..*r + w],
            [r, rest @ ..] => {
                line.copy_from_slice(&s[*r..*r + w]);
                for &r in rest {
                    line.iter_mut().zip(&s[r..r + w]).for_each(|(a, &b)| *a += b);
                }
                line
            }
        };
        let o0 = zy * ax.len();
        for (x, wx) in ax.iter().enumerate() {
            let acc = (0..wx.count).fold(T::ZERO, |a, j| a + sum[wx.first + j * wx.step]);
            dst[o0 + x] = acc / T::of(g.divisor([zy / ny, zy % ny, x]));
        }
    }
}

/// The adjoint of `avg_rows_summed`: each output row's gradients spread over `line`
/// by their x-windows, then `line` added into each of the window rows.
fn avg_rows_spread<T: Float>(g: &PoolGeom, s: &[T], dst: &mut [T], line: &mut [T]) {
    let (ny, ax, w) = (g.axes[1].win.len(), &g.axes[2].win, g.ins[2]);
    for zy in 0..g.row_at.len() - 1 {
        let rows = &g.rows[g.row_at[zy]..g.row_at[zy + 1]];
        if rows.is_empty() {
            continue;
        }
        line.fill(T::ZERO);
        let o0 = zy * ax.len();
        for (x, wx) in ax.iter().enumerate() {
            let v = s[o0 + x] / T::of(g.divisor([zy / ny, zy % ny, x]));
            for j in 0..wx.count {
                line[wx.first + j * wx.step] += v;
            }
        }
        for &r in rows {
            dst[r..r + w].iter_mut().zip(&*line).for_each(|(d, &v)| *d += v);
        }
    }
}

/// Sum with 8 independent accumulators, so long runs vectorize.
#[inline]
pub(crate) fn sum_run<T: Float>(v: &[T]) -> T {
    if v.len() <= 4 {
        return v.iter().fold(T::ZERO, |a, &b| a + b);
    }
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

pub(crate) fn out_shape(g: &PoolGeom, of_input: bool) -> Shape {
    if let (false, Some(r)) = (of_input, &g.result) {
        return Shape::from(r.clone());
    }
    let s = if of_input { g.ins } else { g.outs };
    Shape::from((g.planes, s[0], s[1], s[2]))
}

/// Argmaxes kept by a forward that will be differentiated.
pub(crate) type Kept = Arc<OnceLock<Vec<u32>>>;

/// Max pooling; with `Some(kept)` the forward keeps its argmaxes and the backward is a
/// scatter (`MaxPoolScatter`), else the backward finds them again (`MaxPoolBwd`).
pub(crate) struct MaxPool(pub(crate) Arc<PoolGeom>, pub(crate) Option<Kept>);
pub(crate) struct MaxPoolBwd(pub(crate) Arc<PoolGeom>);
pub(crate) struct MaxPoolScatter(pub(crate) Arc<PoolGeom>, pub(crate) Kept);
pub(crate) struct MaxPoolIdx(pub(crate) Arc<PoolGeom>);
pub(crate) struct AvgPool(pub(crate) Arc<PoolGeom>);
pub(crate) struct AvgPoolAdj(pub(crate) Arc<PoolGeom>);

impl CustomOp1 for MaxPool {
    fn name(&self) -> &'static str {
        "max_pool"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let g = &self.0;
        let out = match &self.1 {
            Some(keep) => float_dispatch!(s, l, "max_pool", |v| in_pool(par_ok(g.work()), || max_fwd_keep(v, g, keep))),
            None => float_dispatch!(s, l, "max_pool", |v| in_pool(par_ok(g.work()), || max_fwd(v, g))),
        };
        Ok((out, out_shape(g, false)))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let g = grad.dense()?;
        if let Some(kept) = self.1.as_ref().filter(|k| k.get().is_some()) {
            return Ok(Some(g.apply_op1_no_bwd(&MaxPoolScatter(self.0.clone(), kept.clone()))?));
        }
        Ok(Some(arg.dense()?.apply_op2_no_bwd(&g, &MaxPoolBwd(self.0.clone()))?))
    }
}

impl CustomOp1 for MaxPoolScatter {
    fn name(&self) -> &'static str {
        "max_pool_backward"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let (g, idx) = (&self.0, self.1.get().map(|v| v.as_slice()).unwrap_or_default());
        let out = float_dispatch!(s, l, "max_pool", |v| in_pool(par_ok(g.work()), || max_scatter(v, idx, g)));
        Ok((out, out_shape(g, true)))
    }
}

impl CustomOp2 for MaxPoolBwd {
    fn name(&self) -> &'static str {
        "max_pool_backward"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = match (s1, s2) {
            (CpuStorage::F32(x), CpuStorage::F32(gr)) => {
                let (x, gr) = (crate::ops::storage::data(x, l1, "max_pool")?, crate::ops::storage::data(gr, l2, "max_pool")?);
                CpuStorage::F32(in_pool(par_ok(self.0.work()), || max_bwd(x, gr, &self.0)))
            }
            (CpuStorage::F64(x), CpuStorage::F64(gr)) => {
                let (x, gr) = (crate::ops::storage::data(x, l1, "max_pool")?, crate::ops::storage::data(gr, l2, "max_pool")?);
                CpuStorage::F64(in_pool(par_ok(self.0.work()), || max_bwd(x, gr, &self.0)))
            }
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
            CpuStorage::F32(v) => max_idx(crate::ops::storage::data(v, l, "max_pool")?, &self.0),
            CpuStorage::F64(v) => max_idx(crate::ops::storage::data(v, l, "max_pool")?, &self.0),
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
        let out = float_dispatch!(s, l, "avg_pool", |v| in_pool(par_ok(self.0.work()), || avg(v, &self.0, false)));
        Ok((out, out_shape(&self.0, false)))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.dense()?.apply_op1(AvgPoolAdj(self.0.clone()))?))
    }
}

impl CustomOp1 for AvgPoolAdj {
    fn name(&self) -> &'static str {
        "avg_pool_backward"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let out = float_dispatch!(s, l, "avg_pool", |v| in_pool(par_ok(self.0.work()), || avg(v, &self.0, true)));
        Ok((out, out_shape(&self.0, true)))
    }
    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(grad.dense()?.apply_op1(AvgPool(self.0.clone()))?))
    }
}
