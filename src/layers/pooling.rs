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
use crate::parallel::{for_chunks, in_pool, par_ok};
use super::{float_dispatch, Elem};
use crate::dtype::DT;
use crate::errors::{DTypeError, OpResult, ShapeError};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use pyo3::prelude::*;
use std::sync::{Arc, OnceLock};

/// One window along one axis: input positions `first + j * step` for `j < count`
/// (already cut to the input; `count` may be 0). Every pooling window is such an
/// arithmetic run: dilation gives the step, padding and the input's ends cut it.
#[derive(Clone, Copy, Debug)]
struct Win {
    first: usize,
    count: usize,
    step: usize,
}

/// One axis: the window of each output position, and (for averages) that axis's
/// factor of the divisor.
#[derive(Debug, Default)]
struct Axis {
    win: Vec<Win>,
    factor: Vec<f64>,
}

impl Axis {
    fn trivial() -> Axis {
        Axis {
            win: vec![Win { first: 0, count: 1, step: 1 }],
            factor: vec![1.0],
        }
    }
    fn push(&mut self, w: Win, factor: f64) {
        self.win.push(w);
        self.factor.push(factor);
    }
    /// A window of consecutive positions `s..e`.
    fn push_range(&mut self, s: usize, e: usize, factor: f64) {
        self.push(Win { first: s, count: e.saturating_sub(s), step: 1 }, factor);
    }
}

#[derive(Debug)]
struct PoolGeom {
    planes: usize,
    ins: [usize; 3],
    outs: [usize; 3],
    axes: [Axis; 3],
    divisor: Option<f64>,
    /// For each (z, y) output row, the flat input offsets of its windows' rows:
    /// `rows[row_at[zy]..row_at[zy + 1]]` (made once; every plane walks them).
    rows: Vec<usize>,
    row_at: Vec<usize>,
}

impl PoolGeom {
    fn new(planes: usize, ins: [usize; 3], outs: [usize; 3], axes: [Axis; 3], divisor: Option<f64>) -> PoolGeom {
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
        PoolGeom { planes, ins, outs, axes, divisor, rows, row_at }
    }
    fn ivol(&self) -> usize {
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
        self.is_2x2() && d == 1 && od == 1 && h == 2 * oh && w == 2 * ow && at(&self.axes[1]) && at(&self.axes[2])
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
    fn divisor(&self, at: [usize; 3]) -> f64 {
        self.divisor
            .unwrap_or_else(|| self.axes[0].factor[at[0]] * self.axes[1].factor[at[1]] * self.axes[2].factor[at[2]])
    }
    /// Work of one pass, to decide on threads.
    fn work(&self) -> usize {
        self.planes * (self.ivol() + self.ovol())
    }
}

/// Planes per parallel task: enough work to be worth a task.
fn per_task(plane_work: usize) -> usize {
    ((1 << 14) / plane_work.max(1)).max(1)
}

/// Float types with a branch-free window argmax. On real data which element of a
/// window wins is unpredictable, and LLVM turns scalar selects in this loop back into
/// branches (x86 cmov conversion) whose mispredictions cost more than the rest of max
/// pooling; SSE2 compare-and-blend (baseline on x86-64) keeps it branch-free.
trait Pick: Elem {
    /// Flat input index of the max of a window (NaN wins, the last NaN as in PyTorch),
    /// or `usize::MAX` if the window is empty.
    fn argmax(plane: &[Self], rows: &[usize], wx: Win) -> usize;
    /// The same for the 2x2 window `a, a + 1, b, b + 1` (in that order), as a tree of
    /// three comparisons instead of a chain of four.
    fn argmax2x2(plane: &[Self], a: usize, b: usize) -> usize;
}

/// Which of two window elements wins, `y` following `x` in visiting order: `y` when it
/// is larger or NaN. Comparing the winners of consecutive runs gives the winner of the
/// whole run, so windows can be reduced as trees.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn later_wins<T: Elem>(x: T, y: T) -> bool {
    (y > x) | y.is_nan()
}

/// The window's flat input indices, in PyTorch's visiting order (rows, then x).
#[inline(always)]
fn window_indices(plane_len: usize, rows: &[usize], wx: Win) -> Option<impl Iterator<Item = usize> + Clone + '_> {
    if rows.is_empty() || wx.count == 0 {
        return None;
    }
    let last = rows.iter().max().copied().unwrap_or(0) + wx.first + (wx.count - 1) * wx.step;
    assert!(last < plane_len, "pooling window outside its plane");
    Some(rows.iter().flat_map(move |&r| (0..wx.count).map(move |j| r + wx.first + j * wx.step)))
}

#[cfg(target_arch = "x86_64")]
impl Pick for f32 {
    #[inline(always)]
    fn argmax(plane: &[f32], rows: &[usize], wx: Win) -> usize {
        use std::arch::x86_64::*;
        let Some(idx) = window_indices(plane.len(), rows, wx) else { return usize::MAX };
        if plane.len() > i32::MAX as usize {
            return argmax_plain(plane, idx);
        }
        // SAFETY: SSE2 is part of x86-64; every index was checked against the plane.
        unsafe {
            let mut best = _mm_set_ss(f32::NEG_INFINITY);
            let mut bi = _mm_setzero_si128();
            let mut first = true;
            for i in idx {
                let v = _mm_load_ss(plane.as_ptr().add(i));
                let take = _mm_or_ps(_mm_cmplt_ss(best, v), _mm_cmpunord_ss(v, v));
                best = _mm_or_ps(_mm_and_ps(take, v), _mm_andnot_ps(take, best));
                let t = _mm_castps_si128(take);
                let iv = _mm_cvtsi32_si128(i as i32);
                // The first element is the answer when the whole window is -inf.
                bi = if first { iv } else { _mm_or_si128(_mm_and_si128(t, iv), _mm_andnot_si128(t, bi)) };
                first = false;
            }
            _mm_cvtsi128_si32(bi) as u32 as usize
        }
    }
    #[inline(always)]
    fn argmax2x2(plane: &[f32], a: usize, b: usize) -> usize {
        use std::arch::x86_64::*;
        assert!(a + 1 < b && b + 1 < plane.len() && plane.len() <= i32::MAX as usize);
        // SAFETY: SSE2 is part of x86-64; a, a + 1, b, b + 1 are inside the plane.
        unsafe {
            let ld = |i: usize| _mm_load_ss(plane.as_ptr().add(i));
            let ix = |i: usize| _mm_cvtsi32_si128(i as i32);
            // `y` (later) wins over `x` when larger or NaN: mask of all ones.
            let later = |x: __m128, y: __m128| _mm_or_ps(_mm_cmplt_ss(x, y), _mm_cmpunord_ss(y, y));
            let pick = |m: __m128, y: __m128, x: __m128| _mm_or_ps(_mm_and_ps(m, y), _mm_andnot_ps(m, x));
            let picki = |m: __m128, y: __m128i, x: __m128i| {
                let m = _mm_castps_si128(m);
                _mm_or_si128(_mm_and_si128(m, y), _mm_andnot_si128(m, x))
            };
            let (p0, p1, q0, q1) = (ld(a), ld(a + 1), ld(b), ld(b + 1));
            let (m1, m2) = (later(p0, p1), later(q0, q1));
            let (v1, i1) = (pick(m1, p1, p0), picki(m1, ix(a + 1), ix(a)));
            let (v2, i2) = (pick(m2, q1, q0), picki(m2, ix(b + 1), ix(b)));
            _mm_cvtsi128_si32(picki(later(v1, v2), i2, i1)) as u32 as usize
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Pick for f64 {
    #[inline(always)]
    fn argmax(plane: &[f64], rows: &[usize], wx: Win) -> usize {
        use std::arch::x86_64::*;
        let Some(idx) = window_indices(plane.len(), rows, wx) else { return usize::MAX };
        // SAFETY: SSE2 is part of x86-64; every index was checked against the plane.
        unsafe {
            let mut best = _mm_set_sd(f64::NEG_INFINITY);
            let mut bi = _mm_setzero_si128();
            let mut first = true;
            for i in idx {
                let v = _mm_load_sd(plane.as_ptr().add(i));
                let take = _mm_or_pd(_mm_cmplt_sd(best, v), _mm_cmpunord_sd(v, v));
                best = _mm_or_pd(_mm_and_pd(take, v), _mm_andnot_pd(take, best));
                let t = _mm_castpd_si128(take);
                let iv = _mm_cvtsi64_si128(i as i64);
                bi = if first { iv } else { _mm_or_si128(_mm_and_si128(t, iv), _mm_andnot_si128(t, bi)) };
                first = false;
            }
            _mm_cvtsi128_si64(bi) as usize
        }
    }
    #[inline(always)]
    fn argmax2x2(plane: &[f64], a: usize, b: usize) -> usize {
        use std::arch::x86_64::*;
        assert!(a + 1 < b && b + 1 < plane.len());
        // SAFETY: SSE2 is part of x86-64; a, a + 1, b, b + 1 are inside the plane.
        unsafe {
            let ld = |i: usize| _mm_load_sd(plane.as_ptr().add(i));
            let ix = |i: usize| _mm_cvtsi64_si128(i as i64);
            let later = |x: __m128d, y: __m128d| _mm_or_pd(_mm_cmplt_sd(x, y), _mm_cmpunord_sd(y, y));
            let pick = |m: __m128d, y: __m128d, x: __m128d| _mm_or_pd(_mm_and_pd(m, y), _mm_andnot_pd(m, x));
            let picki = |m: __m128d, y: __m128i, x: __m128i| {
                let m = _mm_castpd_si128(m);
                _mm_or_si128(_mm_and_si128(m, y), _mm_andnot_si128(m, x))
            };
            let (p0, p1, q0, q1) = (ld(a), ld(a + 1), ld(b), ld(b + 1));
            let (m1, m2) = (later(p0, p1), later(q0, q1));
            let (v1, i1) = (pick(m1, p1, p0), picki(m1, ix(a + 1), ix(a)));
            let (v2, i2) = (pick(m2, q1, q0), picki(m2, ix(b + 1), ix(b)));
            _mm_cvtsi128_si64(picki(later(v1, v2), i2, i1)) as usize
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl Pick for f32 {
    fn argmax(plane: &[f32], rows: &[usize], wx: Win) -> usize {
        window_indices(plane.len(), rows, wx).map_or(usize::MAX, |idx| argmax_plain(plane, idx))
    }
    fn argmax2x2(plane: &[f32], a: usize, b: usize) -> usize {
        argmax2x2_sel(plane, a, b)
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl Pick for f64 {
    fn argmax(plane: &[f64], rows: &[usize], wx: Win) -> usize {
        window_indices(plane.len(), rows, wx).map_or(usize::MAX, |idx| argmax_plain(plane, idx))
    }
    fn argmax2x2(plane: &[f64], a: usize, b: usize) -> usize {
        argmax2x2_sel(plane, a, b)
    }
}

/// The portable argmax over a non-empty window.
fn argmax_plain<T: Elem>(plane: &[T], idx: impl Iterator<Item = usize> + Clone) -> usize {
    // From -inf at the first index: that index when the whole window is -inf.
    let Some(mut bi) = idx.clone().next() else { return usize::MAX };
    let mut best = T::NEG_INF;
    for i in idx {
        let v = plane[i];
        if v > best || v.is_nan() {
            best = v;
            bi = i;
        }
    }
    bi
}

/// The portable 2x2 tree: the two pairs' winners are independent, so the short
/// chains overlap.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn argmax2x2_sel<T: Elem>(plane: &[T], a: usize, b: usize) -> usize {
    let (p, q) = (&plane[a..a + 2], &plane[b..b + 2]);
    let i = a + later_wins(p[0], p[1]) as usize;
    let j = b + later_wins(q[0], q[1]) as usize;
    // b >= a + 2 > i (the next row), so j - i does not wrap.
    i + later_wins(plane[i], plane[j]) as usize * (j - i)
}

#[inline(always)]
fn argmax<T: Pick>(plane: &[T], rows: &[usize], wx: Win) -> usize {
    T::argmax(plane, rows, wx)
}

/// `f(plane index, plane's input, plane's output)` for every plane, in blocks over
/// rayon's threads when the pass is big enough.
fn planes_do<T: Elem, U: Send>(
    g: &PoolGeom,
    src: &[T],
    sv: usize,
    out: &mut [U],
    dv: usize,
    f: impl Fn(&[T], &mut [U]) + Sync + Send,
) {
    let per = per_task(g.ivol() + g.ovol());
    let run = |ci: usize, o: &mut [U]| {
        for (p, dst) in o.chunks_mut(dv).enumerate() {
            let pi = ci * per + p;
            f(&src[pi * sv..(pi + 1) * sv], dst);
        }
    };
    for_chunks(out, per * dv, par_ok(g.work()), run);
}

/// Each output's `at(argmax)` (`at(usize::MAX)` for an empty window).
/// 2x2 windows tiling 2-d planes of even height and width (MaxPool2d(2) without
/// padding): the planes stack into one tall image, so the loop runs over all output
/// rows at once instead of paying per-plane overhead on small planes.
/// Each output is `f(i, p)` of its argmax `i` (flat over all planes) in plane `p`.
fn tiled_2x2<T: Pick, U: Send>(src: &[T], g: &PoolGeom, out: &mut [U], f: impl Fn(usize, usize) -> U + Sync + Send) {
    let [_, _, w] = g.ins;
    let [_, oh, ow] = g.outs;
    let rows_per_task = ((1 << 14) / (2 * w).max(1)).max(1);
    for_chunks(out, rows_per_task * ow, par_ok(g.work()), |ci, o| {
        for (j, orow) in o.chunks_mut(ow).enumerate() {
            let r = ci * rows_per_task + j; // output row over all planes
            let (p, a0) = (r / oh, r * 2 * w); // rows 2r and 2r + 1 of the tall image
            for (x, d) in orow.iter_mut().enumerate() {
                let i = T::argmax2x2(src, a0 + 2 * x, a0 + w + 2 * x);
                *d = f(i, p);
            }
        }
    });
}

fn argmaxes<T: Pick, I: Copy + Send + Default>(src: &[T], g: &PoolGeom, at: impl Fn(usize) -> I + Sync + Send) -> Vec<I> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut idx = vec![I::default(); g.planes * ov];
    if ov == 0 || iv == 0 {
        return idx;
    }
    if g.is_tiled_2x2(src.len()) {
        tiled_2x2(src, g, &mut idx, |i, p| at(i - p * iv));
        return idx;
    }
    let quad = g.is_2x2();
    planes_do(g, src, iv, &mut idx, ov, |plane, ip| {
        if quad {
            assert!(plane.len() >= g.ivol());
            g.each_2x2(|k, a, b| ip[k] = at(T::argmax2x2(plane, a, b)));
        } else {
            g.each(|k, _, rows, wx| ip[k] = at(argmax(plane, rows, wx)));
        }
    });
    idx
}

fn max_fwd<T: Pick>(src: &[T], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut out = vec![T::ZERO; g.planes * ov];
    if ov == 0 || iv == 0 {
        return out;
    }
    if g.is_tiled_2x2(src.len()) {
        tiled_2x2(src, g, &mut out, |i, _| src[i]);
        return out;
    }
    let quad = g.is_2x2();
    planes_do(g, src, iv, &mut out, ov, |plane, op| {
        if quad {
            g.each_2x2(|k, a, b| op[k] = plane[T::argmax2x2(plane, a, b)]);
            return;
        }
        g.each(|k, _, rows, wx| {
            let bi = argmax(plane, rows, wx);
            if bi != usize::MAX {
                op[k] = plane[bi];
            }
        });
    });
    out
}

/// The forward of a max pool that will be differentiated: the outputs, and their
/// argmaxes kept for the backward (`u32::MAX` marks an empty window).
fn max_fwd_keep<T: Pick>(src: &[T], g: &PoolGeom, keep: &OnceLock<Vec<u32>>) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let idx = argmaxes(src, g, |i| if i == usize::MAX { u32::MAX } else { i as u32 });
    let mut out = vec![T::ZERO; g.planes * ov];
    if ov > 0 && iv > 0 {
        for_chunks(&mut out, ov, par_ok(g.planes * ov), |p, op| {
            for (o, &i) in op.iter_mut().zip(&idx[p * ov..(p + 1) * ov]) {
                if i != u32::MAX {
                    *o = src[p * iv + i as usize];
                }
            }
        });
    }
    let _ = keep.set(idx);
    out
}

fn max_idx<T: Pick>(src: &[T], g: &PoolGeom) -> Vec<i64> {
    argmaxes(src, g, |i| if i == usize::MAX { 0 } else { i as i64 })
}

/// d(input) of max pooling from kept argmaxes: a scatter of each output's gradient.
fn max_scatter<T: Elem>(grad: &[T], idx: &[u32], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut out = vec![T::ZERO; g.planes * iv];
    if ov == 0 || iv == 0 {
        return out;
    }
    for_chunks(&mut out, iv, par_ok(g.work()), |p, dst| {
        for (&gv, &i) in grad[p * ov..(p + 1) * ov].iter().zip(&idx[p * ov..(p + 1) * ov]) {
            if i != u32::MAX {
                dst[i as usize] += gv;
            }
        }
    });
    out
}

/// d(input) of max pooling: each output's gradient goes to its window's argmax.
fn max_bwd<T: Pick>(src: &[T], grad: &[T], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut out = vec![T::ZERO; g.planes * iv];
    if ov == 0 || iv == 0 {
        return out;
    }
    // Input and gradient planes travel together: zip them as one source.
    let per = per_task(iv + ov);
    let run = |ci: usize, o: &mut [T]| {
        for (p, dst) in o.chunks_mut(iv).enumerate() {
            let pi = ci * per + p;
            let plane = &src[pi * iv..(pi + 1) * iv];
            let gp = &grad[pi * ov..(pi + 1) * ov];
            g.each(|k, _, rows, wx| {
                let bi = argmax(plane, rows, wx);
                if bi != usize::MAX {
                    dst[bi] += gp[k];
                }
            });
        }
    };
    for_chunks(&mut out, per * iv, par_ok(g.work()), run);
    out
}

/// Average pooling (`adjoint = false`) or its adjoint, which spreads each output's
/// gradient over its window (`adjoint = true`, input and output swap roles).
fn avg<T: Elem>(src: &[T], g: &PoolGeom, adjoint: bool) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let (sv, dv) = if adjoint { (ov, iv) } else { (iv, ov) };
    let mut out = vec![T::ZERO; g.planes * dv];
    if ov == 0 || iv == 0 {
        return out;
    }
    let w = g.ins[2];
    planes_do(g, src, sv, &mut out, dv, |s, dst| {
        g.each(|k, at, rows, wx| {
            let div = T::from_f64(g.divisor(at));
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

/// Sum with 8 independent accumulators, so long runs vectorize.
#[inline]
fn sum_run<T: Elem>(v: &[T]) -> T {
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

fn out_shape(g: &PoolGeom, of_input: bool) -> Shape {
    let s = if of_input { g.ins } else { g.outs };
    Shape::from((g.planes, s[0], s[1], s[2]))
}

/// Argmaxes kept by a forward that will be differentiated.
type Kept = Arc<OnceLock<Vec<u32>>>;

/// Max pooling; with `Some(kept)` the forward keeps its argmaxes and the backward is a
/// scatter (`MaxPoolScatter`), else the backward finds them again (`MaxPoolBwd`).
struct MaxPool(Arc<PoolGeom>, Option<Kept>);
struct MaxPoolBwd(Arc<PoolGeom>);
struct MaxPoolScatter(Arc<PoolGeom>, Kept);
struct MaxPoolIdx(Arc<PoolGeom>);
struct AvgPool(Arc<PoolGeom>);
struct AvgPoolAdj(Arc<PoolGeom>);

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
        let g = grad.contiguous()?;
        if let Some(kept) = self.1.as_ref().filter(|k| k.get().is_some()) {
            return Ok(Some(g.apply_op1_no_bwd(&MaxPoolScatter(self.0.clone(), kept.clone()))?));
        }
        Ok(Some(
            arg.contiguous()?.apply_op2_no_bwd(&g, &MaxPoolBwd(self.0.clone()))?,
        ))
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
                let (x, gr) = (super::data(x, l1, "max_pool")?, super::data(gr, l2, "max_pool")?);
                CpuStorage::F32(in_pool(par_ok(self.0.work()), || max_bwd(x, gr, &self.0)))
            }
            (CpuStorage::F64(x), CpuStorage::F64(gr)) => {
                let (x, gr) = (super::data(x, l1, "max_pool")?, super::data(gr, l2, "max_pool")?);
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
            CpuStorage::F32(v) => max_idx(super::data(v, l, "max_pool")?, &self.0),
            CpuStorage::F64(v) => max_idx(super::data(v, l, "max_pool")?, &self.0),
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
        Ok(Some(grad.contiguous()?.apply_op1(AvgPoolAdj(self.0.clone()))?))
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
    crate::errors::detach(py, op, || {
        let run = || -> Result<(Tensor, Option<Tensor>)> {
            let x = x.contiguous()?;
            // Keep the argmaxes when a backward will need them (u32 plane offsets).
            let keep = (x.track_op() && g.ivol() < u32::MAX as usize).then(|| Arc::new(OnceLock::new()));
            let y = x.apply_op1(MaxPool(g.clone(), keep))?;
            let idx = if return_indices {
                Some(x.detach().apply_op1_no_bwd(&MaxPoolIdx(g.clone()))?)
            } else {
                None
            };
            Ok((y, idx))
        };
        run().op(op)
    })
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
                // Taps start + j * d for j < k, cut to 0..n.
                let start = (i * s) as i64 - p as i64;
                let (d, n, k) = (d as i64, n as i64, k as i64);
                let j0 = if start < 0 { (-start + d - 1) / d } else { 0 };
                let j1 = if start >= n { 0 } else { ((n - 1 - start) / d + 1).min(k) };
                let count = (j1 - j0).max(0) as usize;
                let first = if count > 0 { (start + j0 * d) as usize } else { 0 };
                ax.push(Win { first, count, step: d as usize }, 1.0);
            }
            ax
        })
        .collect();
    let outs = outs3(&win.iter().map(|w| w.4).collect::<Vec<_>>());
    let g = PoolGeom::new(planes(&dims, nd), ins3(&dims, nd), outs, axes3(axes), None);
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
                ax.push_range(vs, ve, f);
            }
            ax
        })
        .collect();
    let outs = outs3(&win.iter().map(|w| w.4).collect::<Vec<_>>());
    let g = Arc::new(PoolGeom::new(planes(&dims, nd), ins3(&dims, nd), outs, axes3(axes), divisor_override.map(|d| d as f64)));
    let x = t.reshape((g.planes, g.ins[0], g.ins[1], g.ins[2])).op(op)?;
    let y = crate::errors::detach(py, op, || x.contiguous().and_then(|x| x.apply_op1(AvgPool(g.clone()))).op(op))?;
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
                ax.push_range(s, e, (e - s) as f64);
            }
            ax
        })
        .collect();
    let outs = outs3(&os);
    let g = PoolGeom::new(planes(&dims, nd), ins3(&dims, nd), outs, axes3(axes), None);
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
    let y = crate::errors::detach(py, op, || x.contiguous().and_then(|x| x.apply_op1(AvgPool(g.clone()))).op(op))?;
    Ok(Bound::new(py, PyTensor::wrap_dt(finish(y, &dims, nd, outs, op)?, dt))?.into_any())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_max_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_avg_pool, m)?)?;
    m.add_function(wrap_pyfunction!(_adaptive_pool, m)?)?;
    Ok(())
}
