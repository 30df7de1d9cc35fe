//! Data movement of the convolution: the per-row window plans, im2col and its
//! adjoint col2im, and the permutes between channel-major columns and (N, C, ...).
use super::*;

/// Output positions `o` in `0..n_out` with `0 <= o * s + off < n_in`, as a range.
#[inline]
pub(crate) fn valid_range(off: isize, s: usize, n_in: usize, n_out: usize) -> (usize, usize) {
    let lo = if off >= 0 { 0 } else { ((-off) as usize).div_ceil(s) };
    let lim = n_in as isize - off;
    let hi = if lim <= 0 { 0 } else { ((lim - 1) as usize / s + 1).min(n_out) };
    (lo.min(hi), hi)
}

/// Visit every (output row, input row, x-range) of one kernel tap: `f(dst_row_start,
/// src_row_start, x0, x1, xoff)`, rows being runs along the last axis.
#[inline]
pub(crate) fn for_rows(g: &Geom, off: [isize; 3], mut f: impl FnMut(usize, usize, usize, usize, isize)) {
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

/// Copy a run; short ones (the rows of small images, up to 64 elements) as two
/// overlapping fixed-size moves instead of a `memcpy` call, which costs more than
/// the copy when there are hundreds of thousands of them.
#[inline(always)]
pub(crate) fn copy_run<T: Copy>(d: &mut [T], s: &[T]) {
    #[inline(always)]
    fn two<T: Copy, const K: usize>(d: &mut [T], s: &[T]) {
        // Fixed-size copies become a few vector moves (`copy_from_slice` would be an
        // out-of-line call, arrays a trip through the stack).
        let n = d.len();
        assert!(n >= K && s.len() >= n);
        // SAFETY: both copies stay inside `d` and `s` (K <= n <= s.len(), checked), which
        // are different buffers (`d` is borrowed mutably); the two destination ranges may
        // overlap each other, with the same values, but each copy's own ranges do not.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), d.as_mut_ptr(), K);
            std::ptr::copy_nonoverlapping(s.as_ptr().add(n - K), d.as_mut_ptr().add(n - K), K);
        }
    }
    let n = d.len();
    match n {
        0 => {}
        1 => d[0] = s[0],
        2..=3 => two::<T, 2>(d, s),
        4..=7 => two::<T, 4>(d, s),
        8..=15 => two::<T, 8>(d, s),
        16..=31 => two::<T, 16>(d, s),
        32..=64 => two::<T, 32>(d, s),
        _ => d.copy_from_slice(s),
    }
}

/// Fill a run with `v`; short runs (padding rows of small images) as two overlapping
/// fixed-size stores instead of a `memset` call.
#[inline(always)]
pub(crate) fn fill_run<T: Copy>(d: &mut [T], v: T) {
    #[inline(always)]
    fn two<T: Copy, const K: usize>(d: &mut [T], v: T) {
        let n = d.len();
        let d0: &mut [T; K] = (&mut d[..K]).try_into().unwrap();
        *d0 = [v; K];
        let d1: &mut [T; K] = (&mut d[n - K..]).try_into().unwrap();
        *d1 = [v; K];
    }
    match d.len() {
        0 => {}
        1 => d[0] = v,
        2..=3 => two::<T, 2>(d, v),
        4..=7 => two::<T, 4>(d, v),
        8..=15 => two::<T, 8>(d, v),
        16..=31 => two::<T, 16>(d, v),
        _ => d.fill(v),
    }
}

/// How one kernel tap moves a plane into its column row (the same for every sample
/// and channel). With unit x/y strides and output rows as long as the input's, each
/// output z-plane is one shifted span of the input plane: `copies` are those spans
/// (dst start, src start, length), clipped to the plane, `zeros` the positions inside
/// them whose column falls off a row end (padding), to be cleared, and `gaps` the
/// (start, length) runs of the row no span covers (padding rows and planes).
pub(crate) struct TapPlan {
    pub(crate) copies: Vec<(usize, usize, usize)>,
    pub(crate) zeros: Vec<usize>,
    pub(crate) gaps: Vec<(usize, usize)>,
}

pub(crate) fn span_geom(g: &Geom) -> bool {
    g.stride[1] == 1 && g.stride[2] == 1 && g.outs[2] == g.ins[2]
}

pub(crate) fn tap_plan(g: &Geom, off: [isize; 3]) -> TapPlan {
    let [_, h, w] = g.ins;
    let [od, oh, ow] = g.outs;
    let iv = g.ivol() as isize;
    let (z0, z1) = valid_range(off[0], g.stride[0], g.ins[0], od);
    let (y0, y1) = valid_range(off[1], 1, h, oh);
    let (x0, x1) = valid_range(off[2], 1, w, ow);
    let mut plan = TapPlan { copies: Vec::new(), zeros: Vec::new(), gaps: Vec::new() };
    if x0 >= x1 || y0 >= y1 {
        plan.gaps.push((0, g.ovol()));
        return plan;
    }
    for oz in z0..z1 {
        let iz = (oz * g.stride[0]) as isize + off[0];
        let ds = (oz * oh + y0) * ow;
        let ss = (iz * h as isize + y0 as isize + off[1]) * w as isize + off[2];
        let len = ((y1 - y0) * ow) as isize;
        // Only a padding column can fall outside the plane: clip to it.
        let (lo, hi) = ((-ss).max(0), (iv - ss).min(len));
        if lo >= hi {
            continue;
        }
        plan.copies.push((ds + lo as usize, (ss + lo) as usize, (hi - lo) as usize));
        for j in lo as usize..hi as usize {
            let x = j % ow;
            if x < x0 || x >= x1 {
                plan.zeros.push(ds + j);
            }
        }
    }
    // Copies run in increasing destination order: the gaps are what lies between.
    let mut at = 0;
    for &(ds, _, len) in &plan.copies {
        if ds > at {
            plan.gaps.push((at, ds - at));
        }
        at = ds + len;
    }
    if at < g.ovol() {
        plan.gaps.push((at, g.ovol() - at));
    }
    plan
}

/// image chunk (nb, C, D, H, W) -> columns (C * K, nb * L); rows are (channel, tap).
/// Writes every element of `cols` (padding as zeros).
pub(crate) fn im2col<T: Float>(x: &[T], g: &Geom, nb: usize, cols: &mut [MaybeUninit<T>]) {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = nb * l;
    let sx = g.stride[2];
    let par = par_ok(cols.len());
    let zero = MaybeUninit::new(T::ZERO);
    let plans: Option<Vec<TapPlan>> = span_geom(g).then(|| (0..kv).map(|kk| tap_plan(g, g.offsets(kk))).collect());
    let x = as_uninit(x);
    for_chunks(cols, nl, par, |row, dst| {
        let (ch, kk) = (row / kv, row % kv);
        if let Some(plans) = &plans {
            let plan = &plans[kk];
            for (n, d) in dst.chunks_exact_mut(l).enumerate() {
                let plane = &x[(n * g.c + ch) * iv..(n * g.c + ch + 1) * iv];
                for &(ds, ss, len) in &plan.copies {
                    copy_run(&mut d[ds..ds + len], &plane[ss..ss + len]);
                }
                for &z in &plan.zeros {
                    d[z] = zero;
                }
                for &(at, len) in &plan.gaps {
                    fill_run(&mut d[at..at + len], zero);
                }
            }
            return;
        }
        // Rows: padding taps are skipped, so the row starts zeroed.
        dst.fill(zero);
        let off = g.offsets(kk);
        for n in 0..nb {
            let plane = &x[(n * g.c + ch) * iv..(n * g.c + ch + 1) * iv];
            let d = &mut dst[n * l..(n + 1) * l];
            for_rows(g, off, |dr, sr, x0, x1, xo| {
                let start = (sr as isize + (x0 * sx) as isize + xo) as usize;
                if sx == 1 {
                    copy_run(&mut d[dr + x0..dr + x1], &plane[start..start + (x1 - x0)]);
                } else {
                    for (j, v) in d[dr + x0..dr + x1].iter_mut().enumerate() {
                        *v = plane[start + j * sx];
                    }
                }
            });
        }
    });
}

/// columns (C * K, nb * L) -> image chunk (nb, C, D, H, W): adds every column entry
/// onto its pixel (the adjoint of im2col); `out` holds zeros or the bias. On the
/// span path the padding entries of `cols` are cleared first, so whole spans add.
pub(crate) fn col2im<T: Float>(cols: &mut [T], g: &Geom, nb: usize, out: &mut [T]) {
    let (kv, l, iv) = (g.kvol(), g.ovol(), g.ivol());
    let nl = nb * l;
    let sx = g.stride[2];
    let par = par_ok(cols.len());
    if span_geom(g) {
        let plans: Vec<TapPlan> = (0..kv).map(|kk| tap_plan(g, g.offsets(kk))).collect();
        for_chunks(cols, nl, par, |row, src| {
            let plan = &plans[row % kv];
            for s in src.chunks_exact_mut(l) {
                for &z in &plan.zeros {
                    s[z] = T::ZERO;
                }
            }
        });
        let cols = &*cols;
        for_chunks(out, iv, par, |p, plane| {
            let (n, ch) = (p / g.c, p % g.c);
            for (kk, plan) in plans.iter().enumerate() {
                let src = &cols[(ch * kv + kk) * nl + n * l..(ch * kv + kk) * nl + (n + 1) * l];
                for &(ds, ss, len) in &plan.copies {
                    for (d, &v) in plane[ss..ss + len].iter_mut().zip(&src[ds..ds + len]) {
                        *d += v;
                    }
                }
            }
        });
        return;
    }
    let cols = &*cols;
    for_chunks(out, iv, par, |p, plane| {
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
}

/// a (nb, R, L) as (R, nb * L), the layout one GEMM over the chunk reads: `a` itself
/// for one sample, else a permuted copy.
pub(crate) fn channel_major<T: Float>(a: &[T], nb: usize, r: usize, l: usize) -> Cow<'_, [T]> {
    if nb == 1 {
        Cow::Borrowed(a)
    } else {
        Cow::Owned(to_channel_major(a, nb, r, l))
    }
}

pub(crate) fn to_channel_major<T: Float>(a: &[T], nb: usize, r: usize, l: usize) -> Vec<T> {
    let a = as_uninit(a);
    // Every (row, sample) run of the output is copied.
    filled(r * nb * l, |out| {
        let par = par_ok(out.len());
        for_chunks(out, nb * l, par, |ri, row| {
            for n in 0..nb {
                copy_run(&mut row[n * l..(n + 1) * l], &a[(n * r + ri) * l..(n * r + ri + 1) * l]);
            }
        });
    })
}

/// (R, nb * L) -> out (nb, R, L), adding `bias[r]` when given; writes all of `out`.
pub(crate) fn from_channel_major<T: Float>(src: &[T], nb: usize, r: usize, l: usize, bias: Option<&[T]>, out: &mut [MaybeUninit<T>]) {
    let par = par_ok(out.len());
    for_chunks(out, r * l, par, |n, o| {
        for ri in 0..r {
            let s = &src[ri * nb * l + n * l..ri * nb * l + (n + 1) * l];
            let d = &mut o[ri * l..(ri + 1) * l];
            match bias {
                Some(b) => {
                    let v = b[ri];
                    for (d, &s) in d.iter_mut().zip(s) {
                        *d = MaybeUninit::new(s + v);
                    }
                }
                None => copy_run(d, as_uninit(s)),
            }
        }
    });
}
