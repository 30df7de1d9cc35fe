//! The factorization kernels of `candle_py.linalg` (`ops::linalg`) for Python: batches
//! of matrices in, plain tensors out (no graph: `linalg.py` records the gradients).
//! Shapes, dtypes and broadcasting are checked there; the math runs in float64 without
//! the GIL and comes back in the input's dtype.
use crate::bindings::errors::{detach_op, value_err};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use candle_core::{DType, Tensor};
use pyo3::prelude::*;

/// (data as f64, its candle dtype, n, count) of a (..., n, m) tensor.
fn matrices(t: &PyTensor, op: &str) -> PyResult<(Tensor, DType, Vec<usize>)> {
    let x = t.t();
    if x.rank() < 2 {
        return Err(value_err(op, format!("expected a tensor of at least 2 dims (..., rows, cols), got shape {:?}", x.dims())));
    }
    Ok((x.clone(), x.dtype(), x.dims().to_vec()))
}

fn as_f64(x: &Tensor) -> candle_core::Result<Vec<f64>> {
    x.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()
}

fn back(v: Vec<f64>, dims: &[usize], dt: DType, dev: &candle_core::Device) -> candle_core::Result<Tensor> {
    Tensor::from_vec(v, dims, dev)?.to_dtype(dt)
}

/// `(LU, pivots, info)` of the square matrices `a` (..., n, n): LAPACK getrf's outputs
/// (pivots 1-based, int32; info int32 per matrix, k > 0 for a zero pivot U[k-1, k-1]).
#[pyfunction]
fn _linalg_lu(py: Python<'_>, a: &Bound<'_, PyTensor>) -> PyResult<(PyTensor, PyTensor, PyTensor)> {
    let (x, dt, dims) = matrices(a.get(), "linalg.lu_factor")?;
    let n = dims[dims.len() - 1];
    let batch = &dims[..dims.len() - 2];
    let (lu, piv, info) = detach_op(py, "linalg.lu_factor", || {
        let (lu, piv, info) = crate::ops::linalg::lu_batch(&as_f64(&x)?, n, batch.iter().product());
        let mut pdims = batch.to_vec();
        pdims.push(n);
        Ok((back(lu, &dims, dt, x.device())?, Tensor::from_vec(piv, pdims, x.device())?, Tensor::from_vec(info, batch, x.device())?))
    })?;
    Ok((PyTensor::wrap(lu, false), PyTensor::wrap_dt(piv, DT::I32), PyTensor::wrap_dt(info, DT::I32)))
}

/// `X` solving `A X = B` (`A^T X = B` when `trans`) from `lu_factor`'s `lu`, `pivots`
/// (..., n) and `b` (..., n, k), batch dims equal.
#[pyfunction]
fn _linalg_lu_solve(
    py: Python<'_>,
    lu: &Bound<'_, PyTensor>,
    pivots: &Bound<'_, PyTensor>,
    b: &Bound<'_, PyTensor>,
    trans: bool,
) -> PyResult<PyTensor> {
    let (a, _, adims) = matrices(lu.get(), "linalg.lu_solve")?;
    let (bx, dt, bdims) = matrices(b.get(), "linalg.lu_solve")?;
    let n = adims[adims.len() - 1];
    let k = bdims[bdims.len() - 1];
    let p = pivots.get().t();
    let out = detach_op(py, "linalg.lu_solve", || {
        let piv = p.to_dtype(DType::I64)?.flatten_all()?.to_vec1::<i64>()?.into_iter().map(|v| v as i32).collect::<Vec<_>>();
        let x = crate::ops::linalg::lu_solve_batch(&as_f64(&a)?, &piv, n, &as_f64(&bx)?, k, trans);
        back(x, &bdims, dt, bx.device())
    })?;
    Ok(PyTensor::wrap(out, false))
}

/// `(L, info)`: the lower Cholesky factors of `a` (..., n, n), info int32 per matrix
/// (k > 0: the leading minor of order k is not positive-definite).
#[pyfunction]
fn _linalg_cholesky(py: Python<'_>, a: &Bound<'_, PyTensor>) -> PyResult<(PyTensor, PyTensor)> {
    let (x, dt, dims) = matrices(a.get(), "linalg.cholesky")?;
    let n = dims[dims.len() - 1];
    let (l, info) = detach_op(py, "linalg.cholesky", || {
        let (l, info) = crate::ops::linalg::cholesky_batch(&as_f64(&x)?, n, dims[..dims.len() - 2].iter().product());
        Ok((back(l, &dims, dt, x.device())?, Tensor::from_vec(info, &dims[..dims.len() - 2], x.device())?))
    })?;
    Ok((PyTensor::wrap(l, false), PyTensor::wrap_dt(info, DT::I32)))
}

/// `X` solving `T X = B` for the upper or lower triangle `T` of `t` (..., n, n), unit
/// diagonal when `unit`; `b` (..., n, k) with equal batch dims.
#[pyfunction]
fn _linalg_triangular(py: Python<'_>, t: &Bound<'_, PyTensor>, b: &Bound<'_, PyTensor>, upper: bool, unit: bool) -> PyResult<PyTensor> {
    let (a, _, adims) = matrices(t.get(), "linalg.solve_triangular")?;
    let (bx, dt, bdims) = matrices(b.get(), "linalg.solve_triangular")?;
    let n = adims[adims.len() - 1];
    let k = bdims[bdims.len() - 1];
    let out = detach_op(py, "linalg.solve_triangular", || {
        let x = crate::ops::linalg::triangular_batch(&as_f64(&a)?, n, &as_f64(&bx)?, k, upper, unit);
        back(x, &bdims, dt, bx.device())
    })?;
    Ok(PyTensor::wrap(out, false))
}

/// `(Q, R)` of the matrices `a` (..., m, n): Q (..., m, kq), R (..., kq, n), kq = m
/// when `complete`, else min(m, n) (`ops::linalg::qr_batch`, LAPACK's signs).
#[pyfunction]
fn _linalg_qr(py: Python<'_>, a: &Bound<'_, PyTensor>, complete: bool) -> PyResult<(PyTensor, PyTensor)> {
    let (x, dt, dims) = matrices(a.get(), "linalg.qr")?;
    let (m, n) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let batch = &dims[..dims.len() - 2];
    let kq = if complete { m } else { m.min(n) };
    let (q, r) = detach_op(py, "linalg.qr", || {
        let (q, r) = crate::ops::linalg::qr_batch(&as_f64(&x)?, m, n, batch.iter().product(), complete);
        let (mut qd, mut rd) = (batch.to_vec(), batch.to_vec());
        qd.extend([m, kq]);
        rd.extend([kq, n]);
        Ok((back(q, &qd, dt, x.device())?, back(r, &rd, dt, x.device())?))
    })?;
    Ok((PyTensor::wrap(q, false), PyTensor::wrap(r, false)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_linalg_qr, m)?)?;
    m.add_function(wrap_pyfunction!(_linalg_lu, m)?)?;
    m.add_function(wrap_pyfunction!(_linalg_lu_solve, m)?)?;
    m.add_function(wrap_pyfunction!(_linalg_cholesky, m)?)?;
    m.add_function(wrap_pyfunction!(_linalg_triangular, m)?)?;
    Ok(())
}
