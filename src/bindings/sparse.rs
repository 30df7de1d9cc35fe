//! Sparse COO tensors (`torch.sparse_coo_tensor`, `Tensor.to_sparse`): the indices and
//! values a sparse tensor is made of, held beside its `Tensor` object.
//!
//! A sparse tensor is an instance of `candle_py._sparse.SparseTensor`, a Python subclass
//! of `Tensor`. Its sparse-aware operations (products with dense matrices, sums,
//! softmax, coalescing, conversions) read only the indices and values. Any other op
//! reads the tensor's value like a dense tensor's: that value is built here from the
//! indices and values on first need (with a gradient back to the values) and rebuilt
//! after the values change. Such an op so gives PyTorch's numbers in the dense layout
//! (PyTorch raises for most of them) and costs the dense memory only when used.
use crate::autograd::ops::{index_select, record, reshape};
use crate::autograd::Value;
use crate::bindings::errors::{dtype_err, runtime_err, shape_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::ops::layout::Dense;
use candle_core::{Result, Shape, Tensor};
use pyo3::prelude::*;
use std::sync::{Mutex, RwLock};

/// The parts of a sparse COO tensor.
pub struct Coo {
    /// The values tensor, (nnz, *dense dims); shared with `SparseTensor._values()`.
    values: Py<PyTensor>,
    /// Row-major offsets of each entry over the sparse dims (I64, nnz).
    lin: Tensor,
    /// The full shape: sparse dims, then the values' dense dims.
    shape: Vec<usize>,
    sparse_dim: usize,
    /// (version, autograd side) of the values the dense value was built from.
    seen: Mutex<Option<(u32, usize)>>,
}

/// Which state of the values a dense value was built from: their version counter and
/// their autograd side (`requires_grad_` swaps it without a write).
fn state(v: &Value) -> (u32, usize) {
    (v.version_now(), v.meta.as_ref().map_or(0, |m| std::sync::Arc::as_ptr(m) as usize))
}

/// Bring the dense value in `cell` up to date with the values of `c`.
pub fn sync(cell: &RwLock<Value>, c: &Coo) {
    let v = c.values.get().v();
    let now = state(&v);
    let mut seen = c.seen.lock().unwrap_or_else(|p| p.into_inner());
    if *seen == Some(now) {
        return;
    }
    // The parts were checked when the tensor was made, so building the value cannot
    // fail on them; an allocation failure leaves the old value (the op then reports it).
    if let Ok(dense) = to_dense(&v, c) {
        let mut g = cell.write().unwrap_or_else(|p| p.into_inner());
        let version = g.version.clone();
        *g = Value { version, ..dense };
        *seen = Some(now);
    }
}

/// Zeros of the full shape with each entry's values added at its offset (duplicates of
/// an uncoalesced tensor add up, as in PyTorch); the gradient gathers back per entry.
fn to_dense(v: &Value, c: &Coo) -> Result<Value> {
    let rows: usize = c.shape[..c.sparse_dim].iter().product();
    let mut flat = vec![rows];
    flat.extend_from_slice(&c.shape[c.sparse_dim..]);
    let flat = Shape::from(flat);
    let z = Tensor::zeros(&flat, v.data.dtype(), v.data.device())?;
    let out = z.index_add(&c.lin, &v.data.dense()?, 0)?.reshape(c.shape.as_slice())?;
    let lin = c.lin.clone();
    Ok(record("ToDenseBackward0", &[v], out, &[], false, move |_, g, _| Ok(vec![Some(index_select(&reshape(g, &flat)?, &lin, 0)?)])))
}

/// Check `indices` (int64, (sparse_dim, nnz)) and `values` ((nnz, *dense dims)) against
/// `size` as PyTorch's `sparse_coo_tensor` does, and return each entry's row-major
/// offset over the sparse dims.
fn offsets(indices: &Tensor, idt: DT, values: &Tensor, size: &[usize]) -> PyResult<Vec<i64>> {
    const OP: &str = "sparse_coo_tensor";
    if idt != DT::I64 {
        return Err(dtype_err(OP, format!("indices must be an int64 tensor, got {}", idt.name())));
    }
    if indices.rank() != 2 {
        return Err(shape_err(OP, format!("indices must be sparse_dim x nnz, but got: {:?}", indices.dims())));
    }
    let (sd, nnz) = indices.dims2().op(OP)?;
    if values.rank() == 0 || values.dims()[0] != nnz {
        let got = values.dims().first().copied().unwrap_or(0);
        return Err(shape_err(
            OP,
            format!("indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from values: {got}"),
        ));
    }
    let dd = values.rank() - 1;
    if size.len() != sd + dd {
        return Err(shape_err(OP, format!("number of dimensions must be sparse_dim ({sd}) + dense_dim ({dd}), but got {}", size.len())));
    }
    if values.dims()[1..] != size[sd..] {
        return Err(shape_err(
            OP,
            format!("values has incorrect size, expected {:?}, got {:?}", [&[nnz], &size[sd..]].concat(), values.dims()),
        ));
    }
    let idx: Vec<i64> = indices.dense().op(OP)?.flatten_all().op(OP)?.to_vec1().op(OP)?;
    let mut lin = vec![0i64; nnz];
    for d in 0..sd {
        for (e, o) in lin.iter_mut().enumerate() {
            let i = idx[d * nnz + e];
            if i < 0 {
                return Err(runtime_err(OP, format!("found negative index {i} for dim {d}")));
            }
            if i as usize >= size[d] {
                return Err(runtime_err(
                    OP,
                    format!("size is inconsistent with indices: for dim {d}, size is {} but found index {i}", size[d]),
                ));
            }
            *o = *o * size[d] as i64 + i;
        }
    }
    Ok(lin)
}

/// Make `obj` (a fresh `SparseTensor` of the values' dtype) the sparse tensor of
/// `indices`, `values` and `size`; its dense value is built on first read.
#[pyfunction]
fn _sparse_attach(
    obj: &Bound<'_, PyTensor>,
    indices: &Bound<'_, PyTensor>,
    values: &Bound<'_, PyTensor>,
    size: Vec<usize>,
) -> PyResult<()> {
    let (it, idt) = indices.get().t_dt();
    let vt = values.get().t();
    let lin = offsets(&it, idt, &vt, &size)?;
    if !it.device().same_device(vt.device()) {
        return Err(runtime_err("sparse_coo_tensor", "indices and values must be on the same device"));
    }
    let lin = Tensor::from_vec(lin, vt.dims()[0], vt.device()).op("sparse_coo_tensor")?;
    let coo = Coo { values: values.clone().unbind(), lin, sparse_dim: it.dims()[0], shape: size, seen: Mutex::new(None) };
    obj.get().set_coo(coo).map_err(|_| runtime_err("sparse_coo_tensor", "this tensor already has sparse parts"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sparse_attach, m)?)?;
    Ok(())
}
