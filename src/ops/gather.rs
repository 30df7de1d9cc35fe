//! Row gathers and scatter offsets for the indexing ops (`index_select`, `scatter`)
//! on contiguous CPU data.

/// Rows `rows` (each `inner` elements) of each of `outer` blocks of `size` rows.
pub(crate) fn gather_rows<T: Copy + Send + Sync>(src: &[T], outer: usize, size: usize, inner: usize, rows: &[usize]) -> Vec<T> {
    let n = rows.len();
    let total = outer * n * inner;
    if total == 0 {
        return Vec::new();
    }
    let per = (16384 / inner).max(1);
    crate::ops::parallel::filled(total, |out| {
        crate::ops::parallel::for_chunks(out, per * inner, crate::ops::parallel::par_ok(total), |c, dst| {
            // Output row r is row rows[r % n] of block r / n: the two counters step along
            // (a division per row made a last-dim select, one element per row, 8x torch's time).
            let r0 = c * per;
            let (mut b, mut j) = (r0 / n, r0 % n);
            for o in dst.chunks_mut(inner) {
                let from = (b * size + rows[j]) * inner;
                for (o, &v) in o.iter_mut().zip(&src[from..from + inner]) {
                    o.write(v);
                }
                j += 1;
                if j == n {
                    (b, j) = (b + 1, 0);
                }
            }
        })
    })
}

/// `gather_rows`' backward: the input-shaped gradient (`outer` blocks of `size` rows of
/// `inner`) with each of `g`'s rows added at the row it was read from (`rows` may repeat:
/// the sums run in `g`'s order within each block). Blocks are independent, so they split
/// over threads; with few blocks the columns do.
pub(crate) fn scatter_add_rows<T: crate::ops::float::Float>(g: &[T], outer: usize, size: usize, inner: usize, rows: &[usize]) -> Vec<T> {
    let n = rows.len();
    let mut out = crate::ops::parallel::zeros::<T>(outer * size * inner);
    if out.is_empty() || n == 0 {
        return out;
    }
    let par = crate::ops::parallel::par_ok(g.len().max(out.len()));
    let threads = crate::ops::pool::num_threads().max(1);
    if outer >= 2 * threads || inner < 64 {
        let per = if par { outer.div_ceil(4 * threads).max(1) } else { outer };
        crate::ops::parallel::for_chunks(&mut out, per * size * inner, par, |c, dst| {
            for (k, blk) in dst.chunks_mut(size * inner).enumerate() {
                let b = c * per + k;
                for (j, &r) in rows.iter().enumerate() {
                    let src = &g[(b * n + j) * inner..(b * n + j + 1) * inner];
                    for (d, &v) in blk[r * inner..(r + 1) * inner].iter_mut().zip(src) {
                        *d += v;
                    }
                }
            }
        });
    } else {
        // Few blocks of long rows (a selection along dim 0): each thread takes a range
        // of columns of every row.
        let cols = inner.div_ceil(threads).next_multiple_of(16).min(inner);
        let ptr = crate::ops::parallel::SyncPtr(out.as_mut_ptr());
        crate::ops::parallel::for_tasks(inner.div_ceil(cols), par, |t| {
            let (c0, c1) = (t * cols, ((t + 1) * cols).min(inner));
            for b in 0..outer {
                for (j, &r) in rows.iter().enumerate() {
                    let at = (b * size + r) * inner;
                    // SAFETY: task t alone writes columns c0..c1 of every row, in bounds
                    // (r < size, b < outer); `out` outlives `for_tasks`.
                    let dst = unsafe { std::slice::from_raw_parts_mut(ptr.ptr().add(at + c0), c1 - c0) };
                    let src = &g[(b * n + j) * inner + c0..(b * n + j) * inner + c1];
                    for (d, &v) in dst.iter_mut().zip(src) {
                        *d += v;
                    }
                }
            }
        });
    }
    out
}

/// Row-major offsets into a contiguous tensor of shape `dims` written by `scatter`
/// along `d`: element `p` of the index (shape `idims`) goes to `p` with its
/// `d`-coordinate replaced by the index value.
pub(crate) fn scatter_offsets(iv: &[u32], idims: &[usize], dims: &[usize], d: usize) -> Vec<u32> {
    let rank = dims.len();
    let mut stride = vec![1usize; rank];
    for k in (0..rank.saturating_sub(1)).rev() {
        stride[k] = stride[k + 1] * dims[k + 1];
    }
    let mut pos = vec![0usize; rank];
    let mut out = Vec::with_capacity(iv.len());
    for &v in iv {
        let mut off = 0;
        for k in 0..rank {
            off += if k == d { v as usize } else { pos[k] } * stride[k];
        }
        out.push(off as u32);
        // next row-major position in the index's shape
        for k in (0..rank).rev() {
            pos[k] += 1;
            if pos[k] < idims[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gather then scatter-add against plain loops, repeated rows included, on both
    /// splits (many blocks; one block of long rows) and a last-dim select.
    #[test]
    fn rows_gather_and_scatter_add_match_loops() {
        let mut vals = crate::ops::test_stream(11);
        for (outer, size, inner, rows) in [
            (3usize, 5usize, 4usize, vec![4usize, 0, 0, 2]),
            (1, 6, 4000, vec![5, 1, 5, 0, 3]),
            (2, 7, 1, vec![6, 6, 0, 1, 2, 3, 4, 5]),
            (40, 9, 130, vec![8, 0, 8]),
        ] {
            let x = vals(outer * size * inner);
            let got = gather_rows(&x, outer, size, inner, &rows);
            let n = rows.len();
            let mut want = Vec::new();
            for b in 0..outer {
                for &r in &rows {
                    want.extend_from_slice(&x[(b * size + r) * inner..(b * size + r + 1) * inner]);
                }
            }
            assert_eq!(got, want, "gather {outer}x{size}x{inner}");
            let g = vals(outer * n * inner);
            let back = scatter_add_rows(&g, outer, size, inner, &rows);
            let mut want = vec![0.0f32; outer * size * inner];
            for b in 0..outer {
                for (j, &r) in rows.iter().enumerate() {
                    for k in 0..inner {
                        want[(b * size + r) * inner + k] += g[(b * n + j) * inner + k];
                    }
                }
            }
            assert_eq!(back, want, "scatter-add {outer}x{size}x{inner}");
        }
    }
}
