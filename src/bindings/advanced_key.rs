//! Parsing of advanced indexing keys (integer or boolean tensors, lists, NumPy
//! arrays, Python bools) into `ops::advanced_index` entries; the selection itself
//! is computed there.
use crate::bindings::args::{extract_scalar, Scalar};
use crate::bindings::errors::{index_err, value_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::ops::advanced_index::{row_major, select, Entry};
use candle_core::DType;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyEllipsis, PySlice, PySliceMethods, PyTuple};

const OP: &str = "index";

/// An item of the key before dims are assigned.
enum Raw<'py> {
    Int(i64),
    Slice(Bound<'py, PySlice>),
    NewAxis,
    Ellipsis,
    /// Integer index values and their shape.
    Ints(Vec<i64>, Vec<usize>),
    /// A boolean mask and its shape (0-d for a Python bool).
    Mask(Vec<bool>, Vec<usize>),
}

fn not_integer() -> PyErr {
    index_err(OP, "tensors used as indices must be long, int, byte or bool tensors")
}

/// An array-like item (list, tuple inside the key, NumPy array) through NumPy.
fn array_item<'py>(it: &Bound<'py, PyAny>) -> PyResult<Raw<'py>> {
    let np = it.py().import("numpy")?;
    let a = np.call_method1("asarray", (it,))?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    let kind: String = a.getattr("dtype")?.getattr("kind")?.extract()?;
    let size: usize = a.getattr("size")?.extract()?;
    match kind.as_str() {
        "b" => Ok(Raw::Mask(a.call_method0("ravel")?.call_method0("tolist")?.extract()?, shape)),
        // An empty list is an empty integer index, as in PyTorch.
        "i" | "u" => Ok(Raw::Ints(a.call_method1("astype", ("int64",))?.call_method0("ravel")?.call_method0("tolist")?.extract()?, shape)),
        _ if size == 0 => Ok(Raw::Ints(Vec::new(), shape)),
        _ => Err(not_integer()),
    }
}

fn raw_item<'py>(it: &Bound<'py, PyAny>) -> PyResult<Raw<'py>> {
    if it.is_none() {
        return Ok(Raw::NewAxis);
    }
    if it.is_instance_of::<PyEllipsis>() {
        return Ok(Raw::Ellipsis);
    }
    if let Ok(s) = it.cast::<PySlice>() {
        return Ok(Raw::Slice(s.clone()));
    }
    if it.is_instance_of::<PyBool>() {
        return Ok(Raw::Mask(vec![it.extract()?], vec![]));
    }
    if let Ok(t) = it.cast::<PyTensor>() {
        let t = t.get();
        let x = t.t();
        let shape = x.dims().to_vec();
        if t.is_bool {
            let v = x.flatten_all().and_then(|x| x.to_dtype(DType::U8)).and_then(|x| x.to_vec1::<u8>()).op(OP)?;
            return Ok(Raw::Mask(v.into_iter().map(|b| b != 0).collect(), shape));
        }
        if t.dt().is_float() {
            return Err(not_integer());
        }
        let v = x.flatten_all().and_then(|x| x.to_dtype(DType::I64)).and_then(|x| x.to_vec1::<i64>()).op(OP)?;
        return Ok(Raw::Ints(v, shape));
    }
    if let Some(Scalar::Int(i)) = extract_scalar(it) {
        return Ok(Raw::Int(i));
    }
    array_item(it)
}

/// How many source dims an item consumes.
fn consumes(r: &Raw<'_>) -> usize {
    match r {
        Raw::Int(_) | Raw::Slice(_) | Raw::Ints(..) => 1,
        Raw::Mask(_, shape) => shape.len(),
        Raw::NewAxis | Raw::Ellipsis => 0,
    }
}

/// Index values into a dim of size `n`, negatives counted from the end.
fn in_bounds(v: &[i64], d: usize, n: usize) -> PyResult<Vec<usize>> {
    v.iter()
        .map(|&i| {
            let k = if i < 0 { i + n as i64 } else { i };
            if k < 0 || k >= n as i64 {
                Err(index_err(OP, format!("index {i} is out of bounds for dimension {d} with size {n}")))
            } else {
                Ok(k as usize)
            }
        })
        .collect()
}

/// The row-major offsets `key` selects in a tensor of shape `dims`, and their shape.
pub(crate) fn advanced_selection(key: &Bound<'_, PyAny>, dims: &[usize]) -> PyResult<(Vec<usize>, Vec<usize>)> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = key.cast::<PyTuple>() { t.iter().collect() } else { vec![key.clone()] };
    let raws = items.iter().map(raw_item).collect::<PyResult<Vec<_>>>()?;
    if raws.iter().filter(|r| matches!(r, Raw::Ellipsis)).count() > 1 {
        return Err(index_err(OP, "an index can only have a single ellipsis ('...')"));
    }
    let used: usize = raws.iter().map(consumes).sum();
    if used > dims.len() {
        return Err(index_err(OP, format!("too many indices for tensor of dimension {}", dims.len())));
    }
    let mut entries = Vec::new();
    let mut d = 0;
    let full = |d: usize| Entry::Range { dim: d, start: 0, step: 1, len: dims[d] };
    for r in raws {
        match r {
            Raw::NewAxis => entries.push(Entry::New),
            Raw::Ellipsis => {
                for _ in 0..dims.len() - used {
                    entries.push(full(d));
                    d += 1;
                }
            }
            Raw::Slice(s) => {
                let ind = s.indices(dims[d] as isize)?;
                if ind.step <= 0 {
                    return Err(value_err(OP, "step must be greater than zero"));
                }
                let len = ind.slicelength;
                entries.push(Entry::Range { dim: d, start: if len == 0 { 0 } else { ind.start as usize }, step: ind.step as usize, len });
                d += 1;
            }
            // Next to index arrays an integer is a 0-d index array (NumPy's rule).
            Raw::Int(i) => {
                entries.push(Entry::Adv { dim: Some(d), idx: in_bounds(&[i], d, dims[d])?, shape: vec![] });
                d += 1;
            }
            Raw::Ints(v, shape) => {
                entries.push(Entry::Adv { dim: Some(d), idx: in_bounds(&v, d, dims[d])?, shape });
                d += 1;
            }
            Raw::Mask(m, shape) => {
                let count = m.iter().filter(|&&b| b).count();
                if shape.is_empty() {
                    // A Python bool: a new axis of length 1 (True) or 0 (False).
                    entries.push(Entry::Adv { dim: None, idx: vec![0; count], shape: vec![count] });
                    continue;
                }
                for (k, &n) in shape.iter().enumerate() {
                    if dims[d + k] != n {
                        return Err(index_err(
                            OP,
                            format!(
                                "the shape of the mask {} at index {k} does not match the shape of the indexed tensor {}",
                                crate::bindings::errors::shape_str(&shape),
                                crate::bindings::errors::shape_str(dims)
                            ),
                        ));
                    }
                }
                // One coordinate array per mask dim: the true elements' positions.
                let rm = row_major(&shape);
                let trues: Vec<usize> = m.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
                for k in 0..shape.len() {
                    let idx = trues.iter().map(|&f| f / rm[k] % shape[k]).collect();
                    entries.push(Entry::Adv { dim: Some(d + k), idx, shape: vec![count] });
                }
                d += shape.len();
            }
        }
    }
    while d < dims.len() {
        entries.push(full(d));
        d += 1;
    }
    select(dims, &entries).map_err(|m| index_err(OP, m))
}
