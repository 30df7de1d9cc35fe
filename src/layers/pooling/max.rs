//! Max pooling: the branch-free window argmax (a 2x2 tree where it applies), the
//! forward that keeps its argmaxes, and the backward scatter.
use super::*;

/// Float types with a branch-free window argmax. On real data which element of a
/// window wins is unpredictable, and LLVM turns scalar selects in this loop back into
/// branches (x86 cmov conversion) whose mispredictions cost more than the rest of max
/// pooling; SSE2 compare-and-blend (baseline on x86-64) keeps it branch-free.
pub(crate) trait Pick: Float {
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
pub(crate) fn later_wins<T: Float>(x: T, y: T) -> bool {
    (y > x) | y.is_nan()
}

/// The window's flat input indices, in PyTorch's visiting order (rows, then x).
#[inline(always)]
pub(crate) fn window_indices(plane_len: usize, rows: &[usize], wx: Win) -> Option<impl Iterator<Item = usize> + Clone + '_> {
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
        // SAFETY: SSE2 is part of x86-64; `window_indices` asserted that the largest index
        // is < plane.len(), so every `_mm_load_sd`/`_mm_load_ss` reads inside `plane`.
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
        // SAFETY: SSE2 is part of x86-64; the assert above gives a < a + 1 < b < b + 1 <
        // plane.len(), so the four loads read inside `plane`.
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
        // SAFETY: SSE2 is part of x86-64; `window_indices` asserted that the largest index
        // is < plane.len(), so every `_mm_load_sd`/`_mm_load_ss` reads inside `plane`.
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
        // SAFETY: SSE2 is part of x86-64; the assert above gives a < a + 1 < b < b + 1 <
        // plane.len(), so the four loads read inside `plane`.
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
pub(crate) fn argmax_plain<T: Float>(plane: &[T], idx: impl Iterator<Item = usize> + Clone) -> usize {
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
pub(crate) fn argmax2x2_sel<T: Float>(plane: &[T], a: usize, b: usize) -> usize {
    let (p, q) = (&plane[a..a + 2], &plane[b..b + 2]);
    let i = a + later_wins(p[0], p[1]) as usize;
    let j = b + later_wins(q[0], q[1]) as usize;
    // b >= a + 2 > i (the next row), so j - i does not wrap.
    i + later_wins(plane[i], plane[j]) as usize * (j - i)
}

#[inline(always)]
pub(crate) fn argmax<T: Pick>(plane: &[T], rows: &[usize], wx: Win) -> usize {
    T::argmax(plane, rows, wx)
}

/// `f(plane index, plane's input, plane's output)` for every plane, in blocks over
/// rayon's threads when the pass is big enough.
pub(crate) fn planes_do<T: Float, U: Send>(
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
pub(crate) fn tiled_2x2<T: Pick, U: Send>(src: &[T], g: &PoolGeom, out: &mut [U], f: impl Fn(usize, usize) -> U + Sync + Send) {
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

pub(crate) fn argmaxes<T: Pick, I: Copy + Send + Default>(src: &[T], g: &PoolGeom, at: impl Fn(usize) -> I + Sync + Send) -> Vec<I> {
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

pub(crate) fn max_fwd<T: Pick>(src: &[T], g: &PoolGeom) -> Vec<T> {
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
pub(crate) fn max_fwd_keep<T: Pick>(src: &[T], g: &PoolGeom, keep: &OnceLock<Vec<u32>>) -> Vec<T> {
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

pub(crate) fn max_idx<T: Pick>(src: &[T], g: &PoolGeom) -> Vec<i64> {
    argmaxes(src, g, |i| if i == usize::MAX { 0 } else { i as i64 })
}

/// d(input) of max pooling from kept argmaxes: a scatter of each output's gradient.
pub(crate) fn max_scatter<T: Float>(grad: &[T], idx: &[u32], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut out = crate::ops::parallel::zeros(g.planes * iv);
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
pub(crate) fn max_bwd<T: Pick>(src: &[T], grad: &[T], g: &PoolGeom) -> Vec<T> {
    let (iv, ov) = (g.ivol(), g.ovol());
    let mut out = crate::ops::parallel::zeros(g.planes * iv);
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
