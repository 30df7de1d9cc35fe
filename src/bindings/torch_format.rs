//! The two byte-level steps of PyTorch's checkpoint format (`cp.save` / `cp.load`,
//! python/candle_py/serialization.py): a tensor's elements as one contiguous
//! little-endian record, and a tensor rebuilt from a storage record at PyTorch's
//! (offset, size, stride). The archive and the pickle around them are Python's.
//!
//! Rebuilding validates the view against the record before touching it (a hostile
//! file may claim any offset, size or stride), then gathers whole elements by byte
//! copies, so one path serves every dtype, bfloat16 included.
use crate::bindings::device::device_arg;
use crate::bindings::dtype::extract_dtype;
use crate::bindings::errors::{detach, value_err, OpResult};
use crate::bindings::safetensors_io::bytes_of;
use crate::bindings::tensor::PyTensor;
use candle_core::Tensor;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

const OP: &str = "load";

/// The elements of `t` in row-major order as little-endian bytes (a copy; the GIL
/// is released while copying).
#[pyfunction]
fn _storage_bytes<'py>(py: Python<'py>, t: PyRef<'py, PyTensor>) -> PyResult<Bound<'py, PyBytes>> {
    let (t, dt) = t.t_dt();
    let buf = detach(py, "save", || bytes_of(&t, dt.itemsize()))?;
    Ok(PyBytes::new(py, &buf))
}

/// Byte offset of every element of the view, in row-major order, or why the view
/// does not fit in `numel` elements.
fn element_offsets(numel: usize, offset: usize, size: &[usize], stride: &[isize]) -> Result<Vec<usize>, String> {
    if size.len() != stride.len() {
        return Err(format!("size {size:?} and stride {stride:?} have different lengths"));
    }
    let count = size.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| format!("size {size:?} overflows"))?;
    if count == 0 {
        return Ok(Vec::new());
    }
    // The furthest element the view reaches must lie inside the storage.
    let mut last = offset;
    for (&d, &s) in size.iter().zip(stride) {
        if s < 0 {
            return Err(format!("negative stride {stride:?}"));
        }
        let reach = (d - 1).checked_mul(s as usize).and_then(|r| last.checked_add(r));
        last = reach.ok_or_else(|| format!("size {size:?} with stride {stride:?} overflows"))?;
    }
    if last >= numel {
        return Err(format!(
            "a view of size {size:?}, stride {stride:?} at offset {offset} reaches element {last} of a storage of {numel} elements"
        ));
    }
    // Every stride is non-negative (checked above).
    let stride: Vec<usize> = stride.iter().map(|&s| s as usize).collect();
    Ok(crate::ops::layout::strided_offsets(size, &stride, offset))
}

/// A new tensor holding the view (`offset`, `size`, `stride`, in elements) of the
/// storage record `data` (the bytes of a `bytes` object: little-endian elements of `dtype`, `numel` of them), on
/// `device`. Raises ValueError when the record is shorter than `numel` elements or
/// the view reaches outside it.
#[pyfunction]
#[pyo3(signature = (data, dtype, numel, offset, size, stride, device=None))]
#[allow(clippy::too_many_arguments)]
fn _tensor_from_storage(
    py: Python<'_>,
    data: &[u8],
    dtype: &Bound<'_, PyAny>,
    numel: usize,
    offset: usize,
    size: Vec<usize>,
    stride: Vec<isize>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let dt = extract_dtype(dtype)?;
    let dev = device_arg(device)?;
    let item = dt.itemsize();
    let need = numel.checked_mul(item).ok_or_else(|| value_err(OP, format!("storage of {numel} elements overflows")))?;
    if data.len() < need {
        return Err(value_err(OP, format!("storage record holds {} bytes, {need} needed for {numel} {dt:?} elements", data.len())));
    }
    let offsets = element_offsets(numel, offset, &size, &stride).map_err(|m| value_err(OP, m))?;
    let raw = &data[..need];
    let t = detach(py, OP, || {
        let mut bytes = Vec::with_capacity(offsets.len() * item);
        let contiguous = offsets.windows(2).all(|w| w[1] == w[0] + 1);
        if contiguous && !offsets.is_empty() {
            bytes.extend_from_slice(&raw[offsets[0] * item..(offsets[offsets.len() - 1] + 1) * item]);
        } else {
            for &o in &offsets {
                bytes.extend_from_slice(&raw[o * item..(o + 1) * item]);
            }
        }
        Tensor::from_raw_buffer(&bytes, dt.candle(), &size, &dev).op(OP)
    })?;
    Ok(PyTensor::wrap_dt(t, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_storage_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(_tensor_from_storage, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::element_offsets;

    #[test]
    fn offsets_of_views() {
        assert_eq!(element_offsets(6, 0, &[2, 3], &[3, 1]).unwrap(), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(element_offsets(6, 0, &[3, 2], &[1, 3]).unwrap(), vec![0, 3, 1, 4, 2, 5]);
        assert_eq!(element_offsets(6, 2, &[2], &[2]).unwrap(), vec![2, 4]);
        assert_eq!(element_offsets(1, 0, &[], &[]).unwrap(), vec![0]);
        assert_eq!(element_offsets(0, 0, &[0, 4], &[4, 1]).unwrap(), Vec::<usize>::new());
        assert!(element_offsets(6, 1, &[2, 3], &[3, 1]).is_err());
        assert!(element_offsets(6, 0, &[2], &[-1]).is_err());
        assert!(element_offsets(6, 0, &[usize::MAX, 2], &[1, 1]).is_err());
        assert!(element_offsets(6, 0, &[2, 3], &[3]).is_err());
    }
}
