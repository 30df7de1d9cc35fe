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
            for (k, o) in dst.chunks_mut(inner).enumerate() {
                let r = c * per + k;
                let from = ((r / n) * size + rows[r % n]) * inner;
                for (o, &v) in o.iter_mut().zip(&src[from..from + inner]) {
                    o.write(v);
                }
            }
        })
    })
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
