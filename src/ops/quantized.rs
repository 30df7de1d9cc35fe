//! Quantized weights over `candle_core::quantized`: GGML type names, quantizing a
//! float tensor, `x @ W^T` with a quantized `W` (our kernels in `ops::qmatmul` for
//! the common types on the CPU, Candle's QMatMul otherwise), row lookups, device moves. No PyO3: the bindings (`bindings::quantized`) check the
//! arguments and name the op in errors.
use super::qmatmul::{self, Packed};
use crate::ops::layout::Dense;
use candle_core::quantized::{GgmlDType, QStorage, QTensor};
use candle_core::{DType, Device, Result, Storage, Tensor};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

/// Every GGML type Candle stores, with the name Python uses for it.
pub const TYPES: [(GgmlDType, &str); 15] = [
    (GgmlDType::F32, "f32"),
    (GgmlDType::F16, "f16"),
    (GgmlDType::BF16, "bf16"),
    (GgmlDType::Q4_0, "q4_0"),
    (GgmlDType::Q4_1, "q4_1"),
    (GgmlDType::Q5_0, "q5_0"),
    (GgmlDType::Q5_1, "q5_1"),
    (GgmlDType::Q8_0, "q8_0"),
    (GgmlDType::Q8_1, "q8_1"),
    (GgmlDType::Q2K, "q2k"),
    (GgmlDType::Q3K, "q3k"),
    (GgmlDType::Q4K, "q4k"),
    (GgmlDType::Q5K, "q5k"),
    (GgmlDType::Q6K, "q6k"),
    (GgmlDType::Q8K, "q8k"),
];

/// The type for a name: ours (`"q4k"`), case-insensitive, or GGML's spelling (`"Q4_K"`).
pub fn parse_type(name: &str) -> Option<GgmlDType> {
    let lower = name.to_ascii_lowercase();
    let canon = lower.strip_suffix("_k").map_or(lower.clone(), |s| format!("{s}k"));
    TYPES.iter().find(|(_, n)| *n == canon).map(|(t, _)| *t)
}

pub fn type_name(t: GgmlDType) -> &'static str {
    TYPES.iter().find(|(x, _)| *x == t).map_or("?", |(_, n)| n)
}

/// GGUF's numeric id of a type (the `ggml_type` enum), for the header validator.
pub fn type_of_id(id: u32) -> Option<GgmlDType> {
    Some(match id {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => return None,
    })
}

/// Types stored as plain floats: Candle's QMatMul multiplies them dequantized.
pub fn is_float_type(t: GgmlDType) -> bool {
    matches!(t, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
}

/// A float tensor as float32 in a storage of exactly its elements, from offset 0:
/// Candle's quantizer reads the whole storage, ignoring a view's offset and length.
fn compact_f32(t: &Tensor) -> Result<Tensor> {
    let t = t.to_dtype(DType::F32)?;
    let exact = t.is_contiguous() && t.layout().start_offset() == 0 && {
        let (s, _) = t.storage_and_layout();
        match &*s {
            Storage::Cpu(c) => c.as_slice::<f32>()?.len() == t.elem_count(),
            _ => false,
        }
    };
    if exact {
        Ok(t)
    } else {
        crate::ops::layout::copy(&t)
    }
}

/// Quantize a float tensor (last dim a multiple of the type's block size, checked by the caller).
pub fn quantize(t: &Tensor, ty: GgmlDType) -> Result<QTensor> {
    QTensor::quantize(&compact_f32(t)?, ty)
}

/// A weight kept quantized, shared by every Python handle and layer that uses it,
/// with the float copy that plain-float types multiply by and the repacked copy our
/// kernels multiply by (each made once, on first use: a weight only ever looked up
/// as an embedding is never repacked). `q` keeps the original bytes, which
/// `dequantize`, saving and the embedding read.
pub struct QWeight {
    pub q: Arc<QTensor>,
    dense: OnceLock<Tensor>,
    packed: OnceLock<Option<Packed>>,
}

/// Which kernels `QWeight::matmul_t_with` runs (tests and benchmarks compare them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Ours where the type and device allow (AVX2 when the CPU has it), else Candle's.
    Auto,
    /// Ours with the portable (non-SIMD) code, where the type and device allow.
    Portable,
    /// Candle's QMatMul.
    Candle,
}

impl QWeight {
    pub fn new(q: QTensor) -> QWeight {
        Self::from_arc(Arc::new(q))
    }

    pub fn from_arc(q: Arc<QTensor>) -> QWeight {
        QWeight { q, dense: OnceLock::new(), packed: OnceLock::new() }
    }

    /// The dequantized float32 weight of a float-typed tensor, cached: f32/f16/bf16
    /// weights gain nothing from the quantized kernels (Candle's QMatMul does the same).
    fn dense(&self) -> Result<&Tensor> {
        if let Some(t) = self.dense.get() {
            return Ok(t);
        }
        let t = self.q.dequantize(&self.q.device())?;
        Ok(self.dense.get_or_init(|| t))
    }

    /// The repacked weight for our kernels, when its type and device have them.
    fn packed(&self) -> Result<Option<&Packed>> {
        if let Some(p) = self.packed.get() {
            return Ok(p.as_ref());
        }
        let p = match (self.q.device(), self.q.shape().dims()) {
            (Device::Cpu, &[n, k]) if qmatmul::supports(self.q.dtype()) => Packed::of(&self.q, n, k),
            _ => None,
        };
        Ok(self.packed.get_or_init(|| p).as_ref())
    }

    /// `x @ W^T` for `x` of shape (..., K) with W (N, K): the result is (..., N) in x's
    /// dtype. Quantized types quantize `x` per row to the type's dot-product format
    /// (q8_0, q8_1 or q8k) and multiply in integers: q4_0, q4_1, q8_0, q4k and q6k on
    /// the CPU with our kernels (`ops::qmatmul`), the rest with Candle's, which take
    /// f32/f16/bf16 inputs (f64 runs in f32). The caller checks ranks and K.
    pub fn matmul_t(&self, x: &Tensor) -> Result<Tensor> {
        self.matmul_t_with(x, Kernel::Auto)
    }

    /// `matmul_t` with a choice of kernels.
    pub fn matmul_t_with(&self, x: &Tensor, kernel: Kernel) -> Result<Tensor> {
        let (n, k) = self.q.shape().dims2()?;
        let lead = &x.dims()[..x.rank() - 1];
        let mut out_dims = lead.to_vec();
        out_dims.push(n);
        let m: usize = lead.iter().product();
        if m == 0 || n == 0 || k == 0 {
            // Nothing to multiply (an empty batch or an empty sum): skip the kernels.
            return Tensor::zeros(out_dims, x.dtype(), x.device());
        }
        let x2 = x.reshape((m, k))?;
        let y = if is_float_type(self.q.dtype()) {
            let w = self.dense()?.to_dtype(x.dtype())?;
            x2.matmul(&w.t()?)?
        } else if let Some(p) = if kernel == Kernel::Candle { None } else { self.packed()? } {
            let xs = x2.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
            let y = p.matmul(&xs, m, kernel == Kernel::Auto);
            Tensor::from_vec(y, (m, n), &Device::Cpu)?.to_dtype(x.dtype())?
        } else {
            let run = match x.dtype() {
                DType::F32 | DType::F16 | DType::BF16 => x2.dense()?,
                _ => x2.to_dtype(DType::F32)?.dense()?,
            };
            run.apply_op1_no_bwd(self.q.as_ref())?.to_dtype(x.dtype())?
        };
        y.reshape(out_dims)
    }

    /// `x @ W^T` for `m` rows of K floats in a flat slice: the (m, N) result, flat.
    /// Our kernels where they take the type, without the tensor round trip of
    /// `matmul_t` (a decode step's projections are a few microseconds each); other
    /// types through `matmul_t`. For a weight on the CPU.
    pub fn matmul_rows(&self, x: &[f32], m: usize) -> Result<Vec<f32>> {
        let (n, k) = self.q.shape().dims2()?;
        if x.len() != m * k {
            candle_core::bail!("matmul_rows: {} floats are not {m} rows of {k}", x.len());
        }
        if m == 0 || n == 0 || k == 0 {
            return Ok(vec![0.0; m * n]);
        }
        if !is_float_type(self.q.dtype()) {
            if let Some(p) = self.packed()? {
                return Ok(p.matmul(x, m, true));
            }
        }
        let t = Tensor::from_slice(x, (m, k), &Device::Cpu)?;
        self.matmul_t(&t)?.flatten_all()?.to_vec1::<f32>()
    }

    /// Rows `ids` (u32, already range-checked) of a 2-D weight, as float32 of shape (*ids, K).
    pub fn embedding(&self, ids: &Tensor) -> Result<Tensor> {
        self.q.embedding(ids)
    }
}

/// The tensors `parts` (one dtype, device and trailing shape; checked by the caller)
/// joined along dim 0: GGML stores a tensor's rows one after another, each a whole
/// number of blocks, so their bytes simply follow each other. Lossless.
pub fn cat0(parts: &[Arc<QTensor>]) -> Result<QTensor> {
    let first = &parts[0];
    let mut dims = first.shape().dims().to_vec();
    dims[0] = parts.iter().map(|p| p.shape().dims()[0]).sum();
    let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.storage_size_in_bytes()).sum());
    for p in parts {
        bytes.extend_from_slice(&p.data()?);
    }
    let storage = QStorage::from_data(Cow::Owned(bytes), &first.device(), first.dtype())?;
    QTensor::new(storage, dims)
}

/// A copy of `q` on `dev` (the same bytes; `q` itself if already there).
pub fn to_device(q: &Arc<QTensor>, dev: &Device) -> Result<Arc<QTensor>> {
    if q.device().same_device(dev) {
        return Ok(q.clone());
    }
    let data = q.data()?;
    let storage = QStorage::from_data(Cow::Borrowed(&data), dev, q.dtype())?;
    Ok(Arc::new(QTensor::new(storage, q.shape().clone())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (t, n) in TYPES {
            assert_eq!(parse_type(n), Some(t));
            assert_eq!(type_name(t), n);
        }
        assert_eq!(parse_type("Q4_K"), Some(GgmlDType::Q4K));
        assert_eq!(parse_type("q4"), None);
    }

    #[test]
    fn quantize_reads_only_the_view() {
        // A narrowed view (offset 32, storage longer than the view) quantizes its own elements.
        let base = Tensor::arange(0f32, 96f32, &Device::Cpu).unwrap().reshape((3, 32)).unwrap();
        let view = base.narrow(0, 1, 1).unwrap();
        let q = quantize(&view, GgmlDType::F32).unwrap();
        let back = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(back, (32..64).map(|v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn matmul_t_matches_dense() {
        let w = Tensor::arange(0f32, 64f32, &Device::Cpu).unwrap().reshape((2, 32)).unwrap();
        let x = Tensor::ones((3, 32), DType::F32, &Device::Cpu).unwrap();
        let qw = QWeight::new(quantize(&w, GgmlDType::F32).unwrap());
        let y = qw.matmul_t(&x).unwrap().to_vec2::<f32>().unwrap();
        let s0: f32 = (0..32).map(|v| v as f32).sum();
        let s1: f32 = (32..64).map(|v| v as f32).sum();
        assert_eq!(y, vec![vec![s0, s1]; 3]);
    }
}
