//! Offsets and reductions for the ops that write along a dim or read a strided region
//! (`index_copy`, `index_fill`, `index_add`, `scatter_reduce`, `repeat_interleave`,
//! `unfold`, `diagonal`): pure index arithmetic over row-major shapes, no PyO3.

/// Row-major strides of a contiguous tensor of shape `dims`.
pub(crate) fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * dims[k + 1];
    }
    st
}

/// For a source of shape `src_dims` written into a tensor of shape `dims` along `d` at
/// the positions `idx` (one per source slice along `d`): each source element's
/// coordinate along `d` replaced by its index value, as a scatter index of the
/// source's shape (`index_copy`/`index_add`/`index_fill` as scatters).
pub(crate) fn expand_index(idx: &[u32], src_dims: &[usize], d: usize) -> Vec<u32> {
    let n: usize = src_dims.iter().product();
    let inner: usize = src_dims[d + 1..].iter().product();
    let len = src_dims[d];
    (0..n).map(|p| idx[(p / inner) % len]).collect()
}

/// The region `unfold(d, size, step)` reads in a contiguous tensor of shape `dims`:
/// dim `d` becomes `(dims[d] - size) / step + 1` windows, and a last dim of `size`.
pub(crate) fn unfold_region(dims: &[usize], d: usize, size: usize, step: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let st = contiguous_strides(dims);
    let (mut shape, mut strides) = (dims.to_vec(), st.clone());
    shape[d] = (dims[d] - size) / step + 1;
    strides[d] = st[d] * step;
    shape.push(size);
    strides.push(st[d]);
    (shape, strides, 0)
}

/// The region of the diagonal `offset` of dims `d1`, `d2` in a contiguous tensor of
/// shape `dims`: the other dims in order, then the diagonal (possibly empty).
pub(crate) fn diagonal_region(dims: &[usize], offset: i64, d1: usize, d2: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let st = contiguous_strides(dims);
    let (r, c) = (dims[d1] as i64, dims[d2] as i64);
    let len = if offset >= 0 { (r).min(c - offset) } else { (r + offset).min(c) }.max(0) as usize;
    let start = if len == 0 {
        0
    } else if offset >= 0 {
        offset as usize * st[d2]
    } else {
        (-offset) as usize * st[d1]
    };
    let (mut shape, mut strides) = (Vec::new(), Vec::new());
    for k in 0..dims.len() {
        if k != d1 && k != d2 {
            shape.push(dims[k]);
            strides.push(st[k]);
        }
    }
    shape.push(len);
    strides.push(st[d1] + st[d2]);
    (shape, strides, start)
}

/// The source index of each output row of `repeat_interleave`: `i` repeated `reps[i]` times.
pub(crate) fn repeat_index(reps: &[usize]) -> Vec<u32> {
    reps.iter().enumerate().flat_map(|(i, &r)| std::iter::repeat_n(i as u32, r)).collect()
}

/// For writes at the flat offsets `offs` into `n` places, the last write to each place
/// (as a sequential loop leaves it): the places written, the position in `offs` of the
/// write that stays, and a 0/1 mask of the places written.
pub(crate) fn last_writers(offs: &[u32], n: usize) -> (Vec<u32>, Vec<u32>, Vec<u8>) {
    let mut writer = vec![u32::MAX; n];
    for (k, &o) in offs.iter().enumerate() {
        writer[o as usize] = k as u32;
    }
    let (mut kept_off, mut kept_pos, mut mask) = (Vec::new(), Vec::new(), vec![0u8; n]);
    for (o, &k) in writer.iter().enumerate() {
        if k != u32::MAX {
            kept_off.push(o as u32);
            kept_pos.push(k);
            mask[o] = 1;
        }
    }
    (kept_off, kept_pos, mask)
}

/// `scatter_reduce`'s reductions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Reduce {
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

impl Reduce {
    pub(crate) fn parse(s: &str) -> Option<Reduce> {
        Some(match s {
            "sum" => Reduce::Sum,
            "prod" => Reduce::Prod,
            "mean" => Reduce::Mean,
            "amax" => Reduce::Amax,
            "amin" => Reduce::Amin,
            _ => return None,
        })
    }
}

/// `scatter_reduce` over flat values: `base` (self, row-major), `src` values written at
/// `offs`. Returns the result and, per place, how many values were reduced into it
/// (self counts one when `include_self`; places no source reaches keep self and count 0).
/// `int`: the values are integers, so `mean` rounds down as PyTorch's integer division.
/// NaN propagates through `amax`/`amin` as in PyTorch.
pub(crate) fn scatter_reduce(base: &[f64], src: &[f64], offs: &[u32], how: Reduce, include_self: bool, int: bool) -> (Vec<f64>, Vec<f64>) {
    let n = base.len();
    let mut count = vec![0f64; n];
    for &o in offs {
        count[o as usize] += 1.0;
    }
    let mut out = base.to_vec();
    let mut started = vec![include_self; n];
    for (&o, &v) in offs.iter().zip(src) {
        let o = o as usize;
        if !started[o] {
            out[o] = v;
            started[o] = true;
            continue;
        }
        let cur = out[o];
        out[o] = match how {
            Reduce::Sum | Reduce::Mean => cur + v,
            Reduce::Prod => cur * v,
            Reduce::Amax => {
                if cur.is_nan() || v.is_nan() {
                    f64::NAN
                } else {
                    cur.max(v)
                }
            }
            Reduce::Amin => {
                if cur.is_nan() || v.is_nan() {
                    f64::NAN
                } else {
                    cur.min(v)
                }
            }
        };
    }
    for o in 0..n {
        if count[o] > 0.0 && include_self {
            count[o] += 1.0;
        }
        if how == Reduce::Mean && count[o] > 0.0 {
            out[o] = if int { (out[o] / count[o]).floor() } else { out[o] / count[o] };
        }
    }
    (out, count)
}

/// The weights of `scatter_reduce`'s backward: the gradient of self is `g * self_w`
/// and that of each source element `g[its place] * src_w`, as PyTorch's formulas:
/// sum 1; mean `1 / count`; amax/amin shared evenly among the values equal to the
/// result; prod the product of the others (exact with zeros). With `include_self`
/// false, self gets nothing where a source value reached it.
pub(crate) fn scatter_reduce_weights(
    base: &[f64],
    src: &[f64],
    offs: &[u32],
    out: &[f64],
    count: &[f64],
    how: Reduce,
    include_self: bool,
) -> (Vec<f64>, Vec<f64>) {
    let n = base.len();
    let reached = |o: usize| count[o] > 0.0;
    let mut self_w: Vec<f64> = (0..n).map(|o| if reached(o) && !include_self { 0.0 } else { 1.0 }).collect();
    let mut src_w = vec![1.0; offs.len()];
    match how {
        Reduce::Sum => {}
        Reduce::Mean => {
            for o in 0..n {
                if reached(o) && include_self {
                    self_w[o] = 1.0 / count[o];
                }
            }
            for (w, &o) in src_w.iter_mut().zip(offs) {
                *w = 1.0 / count[o as usize];
            }
        }
        Reduce::Amax | Reduce::Amin => {
            let mut hits = vec![0f64; n];
            for o in 0..n {
                if reached(o) && include_self && base[o] == out[o] {
                    hits[o] += 1.0;
                }
            }
            for (&v, &o) in src.iter().zip(offs) {
                if v == out[o as usize] {
                    hits[o as usize] += 1.0;
                }
            }
            for o in 0..n {
                if reached(o) && include_self {
                    self_w[o] = if base[o] == out[o] { 1.0 } else { 0.0 } / hits[o];
                }
            }
            for ((w, &v), &o) in src_w.iter_mut().zip(src).zip(offs) {
                *w = if v == out[o as usize] { 1.0 } else { 0.0 } / hits[o as usize];
            }
        }
        Reduce::Prod => {
            // Per place: the product of the non-zero values reduced into it and how many were zero.
            let (mut nz, mut zeros) = (vec![1f64; n], vec![0usize; n]);
            let mut take = |o: usize, v: f64| {
                if v == 0.0 {
                    zeros[o] += 1;
                } else {
                    nz[o] *= v;
                }
            };
            for (o, &b) in base.iter().enumerate() {
                if reached(o) && include_self {
                    take(o, b);
                }
            }
            for (&v, &o) in src.iter().zip(offs) {
                take(o as usize, v);
            }
            let others = |o: usize, v: f64| match (v == 0.0, zeros[o]) {
                (true, 1) => nz[o],
                (true, _) => 0.0,
                (false, 0) => nz[o] / v,
                (false, _) => 0.0,
            };
            for o in 0..n {
                if reached(o) && include_self {
                    self_w[o] = others(o, base[o]);
                }
            }
            for ((w, &v), &o) in src_w.iter_mut().zip(src).zip(offs) {
                *w = others(o as usize, v);
            }
        }
    }
    (self_w, src_w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagonal_of_a_wide_matrix() {
        // 2x3, offset 1: elements (0,1), (1,2) at 1 and 5.
        let (shape, st, off) = diagonal_region(&[2, 3], 1, 0, 1);
        assert_eq!((shape, st, off), (vec![2], vec![4], 1));
        let (shape, _, _) = diagonal_region(&[2, 3], -2, 0, 1);
        assert_eq!(shape, vec![0]);
    }

    #[test]
    fn unfold_windows() {
        let (shape, st, off) = unfold_region(&[7], 0, 2, 3);
        assert_eq!((shape, st, off), (vec![2, 2], vec![3, 1], 0));
    }

    #[test]
    fn reduce_mean_counts_self() {
        let (out, count) = scatter_reduce(&[7.0, 8.0, 9.0], &[2.0, 3.0, 4.0], &[0, 0, 1], Reduce::Mean, true, true);
        assert_eq!(out, vec![4.0, 6.0, 9.0]);
        assert_eq!(count, vec![3.0, 2.0, 0.0]);
        let (out, _) = scatter_reduce(&[7.0, 8.0, 9.0], &[2.0, 3.0, 4.0], &[0, 0, 1], Reduce::Amax, false, false);
        assert_eq!(out, vec![3.0, 4.0, 9.0]);
    }

    #[test]
    fn repeat_and_last_writer() {
        assert_eq!(repeat_index(&[1, 0, 2]), vec![0, 2, 2]);
        let (off, pos, mask) = last_writers(&[1, 1, 0], 3);
        assert_eq!((off, pos, mask), (vec![0, 1], vec![2, 1], vec![1, 1, 0]));
    }
}
