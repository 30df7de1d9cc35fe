//! NumPy's advanced indexing (PyTorch follows it): which elements a key with index
//! arrays selects, as row-major offsets into the source, and the result's shape.
//!
//! The key arrives parsed (by the bindings) into one entry per result-producing
//! item. The index arrays broadcast together to one shape `B`; if they sit next to
//! each other in the key, `B` replaces them in place, else it goes first, followed
//! by the dims of the slices and new axes in key order.

/// One parsed item of an advanced key.
pub(crate) enum Entry {
    /// A source dim read through a slice.
    Range { dim: usize, start: usize, step: usize, len: usize },
    /// A new axis of length 1 (`None`).
    New,
    /// An index array (an integer, an integer array, or one coordinate of a boolean
    /// mask's true elements) into source dim `dim`, already in `0..size`, of shape
    /// `shape`. `dim` is None for a 0-d boolean, which selects nothing from the source.
    Adv { dim: Option<usize>, idx: Vec<usize>, shape: Vec<usize> },
}

/// The broadcast of index shapes, right-aligned, or None if they do not broadcast.
fn broadcast(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1; rank];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            match (*o, d) {
                (a, b) if a == b => {}
                (1, b) => *o = b,
                (_, 1) => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// Row-major strides (in elements) of a contiguous tensor of shape `dims`.
pub(crate) fn row_major(dims: &[usize]) -> Vec<usize> {
    let mut rm = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        rm[k] = rm[k + 1] * dims[k + 1];
    }
    rm
}

/// The row-major offsets into a source of shape `dims` that `entries` select, and
/// the selection's shape; Err with NumPy's message when the index shapes do not broadcast.
pub(crate) fn select(dims: &[usize], entries: &[Entry]) -> Result<(Vec<usize>, Vec<usize>), String> {
    let adv: Vec<usize> = entries.iter().enumerate().filter(|(_, e)| matches!(e, Entry::Adv { .. })).map(|(i, _)| i).collect();
    let shapes: Vec<&[usize]> = adv
        .iter()
        .map(|&i| match &entries[i] {
            Entry::Adv { shape, .. } => shape.as_slice(),
            _ => unreachable!("adv lists Adv entries"),
        })
        .collect();
    let b = broadcast(&shapes).ok_or_else(|| {
        let listed: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
        format!("shape mismatch: indexing arrays could not be broadcast together with shapes {}", listed.join(", "))
    })?;
    let adjacent = adv.windows(2).all(|w| w[1] == w[0] + 1);
    let first = adv.first().copied().unwrap_or(0);
    // The result's axes: basic ones (entry index) and the block of broadcast axes.
    enum Axis {
        Basic(usize),
        Block,
    }
    let mut axes = Vec::new();
    if !adjacent {
        axes.push(Axis::Block);
    }
    for (i, e) in entries.iter().enumerate() {
        match e {
            Entry::Adv { .. } if adjacent && i == first => axes.push(Axis::Block),
            Entry::Adv { .. } => {}
            _ => axes.push(Axis::Basic(i)),
        }
    }
    let mut shape = Vec::new();
    for a in &axes {
        match a {
            Axis::Block => shape.extend_from_slice(&b),
            Axis::Basic(i) => shape.push(match &entries[*i] {
                Entry::Range { len, .. } => *len,
                _ => 1,
            }),
        }
    }
    let rm = row_major(dims);
    // Per index array: its source stride and its strides over B (0 where broadcast).
    let bstrides: Vec<(usize, &[usize], Vec<usize>)> = adv
        .iter()
        .filter_map(|&i| match &entries[i] {
            Entry::Adv { dim: Some(d), idx, shape } => {
                let own = row_major(shape);
                let off = b.len() - shape.len();
                let st = (0..b.len()).map(|k| if k < off || shape[k - off] == 1 { 0 } else { own[k - off] }).collect();
                Some((rm[*d], idx.as_slice(), st))
            }
            _ => None,
        })
        .collect();
    // Trailing axes that read whole trailing source dims in order form one contiguous
    // run per outer position (x[idx], x[mask]): offsets are pushed a run at a time.
    let mut tail = 0;
    for a in axes.iter().rev() {
        match a {
            Axis::Basic(i) => match &entries[*i] {
                Entry::Range { dim, start: 0, step: 1, len } if *dim + tail + 1 == dims.len() && *len == dims[*dim] => tail += 1,
                _ => break,
            },
            Axis::Block => break,
        }
    }
    let outer = shape.len() - tail;
    let run: usize = shape[outer..].iter().product();
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut pos = vec![0usize; shape.len()];
    for _ in 0..shape[..outer].iter().product::<usize>() {
        if run == 0 {
            break;
        }
        let (mut off, mut ax) = (0usize, 0usize);
        for a in &axes {
            match a {
                Axis::Basic(i) => {
                    if let Entry::Range { dim, start, step, .. } = &entries[*i] {
                        off += (start + pos[ax] * step) * rm[*dim];
                    }
                    ax += 1;
                }
                Axis::Block => {
                    let bpos = &pos[ax..ax + b.len()];
                    for (stride, idx, st) in &bstrides {
                        let j: usize = bpos.iter().zip(st).map(|(p, s)| p * s).sum();
                        off += idx[j] * stride;
                    }
                    ax += b.len();
                }
            }
        }
        out.extend(off..off + run);
        // Odometer over the outer part of the result shape.
        for k in (0..outer).rev() {
            pos[k] += 1;
            if pos[k] < shape[k] {
                break;
            }
            pos[k] = 0;
        }
    }
    Ok((out, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adv(dim: usize, idx: &[usize], shape: &[usize]) -> Entry {
        Entry::Adv { dim: Some(dim), idx: idx.to_vec(), shape: shape.to_vec() }
    }
    fn all(dim: usize, len: usize) -> Entry {
        Entry::Range { dim, start: 0, step: 1, len }
    }

    #[test]
    fn numpy_placement_rules() {
        // x of shape (2, 3, 4); offsets are row-major: 12 * i + 4 * j + k.
        let dims = [2, 3, 4];
        // x[:, [2, 0]] -> (2, 2, 4), the block in place.
        let (o, s) = select(&dims, &[all(0, 2), adv(1, &[2, 0], &[2]), all(2, 4)]).unwrap();
        assert_eq!(s, vec![2, 2, 4]);
        assert_eq!(&o[..6], &[8, 9, 10, 11, 0, 1]);
        // x[[1, 0], :, [3, 1]] -> separated: block first, (2, 3).
        let (o, s) = select(&dims, &[adv(0, &[1, 0], &[2]), all(1, 3), adv(2, &[3, 1], &[2])]).unwrap();
        assert_eq!(s, vec![2, 3]);
        assert_eq!(o, vec![15, 19, 23, 1, 5, 9]);
        // x[[[0], [1]], [0, 2]] broadcasts (2, 1) with (2,) to (2, 2), then the last dim.
        let (o, s) = select(&dims, &[adv(0, &[0, 1], &[2, 1]), adv(1, &[0, 2], &[2]), all(2, 4)]).unwrap();
        assert_eq!(s, vec![2, 2, 4]);
        assert_eq!((o[0], o[4], o[8], o[12]), (0, 8, 12, 20));
        // A new axis and a stepped slice around the block.
        let (o, s) =
            select(&dims, &[Entry::New, adv(0, &[1], &[1]), Entry::Range { dim: 1, start: 0, step: 2, len: 2 }, all(2, 4)]).unwrap();
        assert_eq!(s, vec![1, 1, 2, 4]);
        assert_eq!(&o[4..], &[20, 21, 22, 23]);
        // Shapes that do not broadcast.
        let e = select(&dims, &[adv(0, &[0, 1], &[2]), adv(1, &[0, 1, 2], &[3])]).unwrap_err();
        assert!(e.contains("[2], [3]"), "{e}");
        // A tail that is not the whole trailing dim (a stepped slice) is walked per element.
        let (o, s) = select(&dims, &[adv(0, &[1, 0], &[2]), all(1, 3), Entry::Range { dim: 2, start: 1, step: 2, len: 2 }]).unwrap();
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(&o[..4], &[13, 15, 17, 19]);
        // Empty index arrays select nothing.
        let (o, s) = select(&dims, &[adv(0, &[], &[0])]).unwrap();
        assert_eq!((o.len(), s), (0, vec![0]));
    }
}
