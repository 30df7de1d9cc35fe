//! Conversions between the float dtypes on the CPU as parallel vector passes: f32 to
//! and from f16 (the F16C instructions in our own loop where the CPU has them, else the
//! `half` crate's slice conversions), bf16 (a rounding add on the bits) and f64.
//! Candle converts one element at a time on one thread: `x.half()` of 3.1M floats took
//! 1.48 ms against torch's 0.05, `x.to(torch.bfloat16)` 0.28 against 0.06 (Zen 3, 2
//! threads). The values are Candle's (and PyTorch's): round to nearest even, NaN
//! kept NaN.
use super::layout::Dense;
use super::parallel::{even_chunk, filled_plain, for_chunks, par_ok};
use super::simd_map::map;
use candle_core::{CpuStorage, DType, Device, Result, Storage, Tensor};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// Elements per task (at most).
const CHUNK: usize = 1 << 15;

/// `t` converted to `dt`: the passes above for the float pairs they cover on the CPU,
/// Candle's `to_dtype` for everything else.
pub(crate) fn to_dtype(t: &Tensor, dt: DType) -> Result<Tensor> {
    let covered = matches!(
        (t.dtype(), dt),
        (DType::F32, DType::F16 | DType::BF16 | DType::F64) | (DType::F16 | DType::BF16 | DType::F64, DType::F32)
    );
    if !covered || !t.device().is_cpu() {
        return t.to_dtype(dt);
    }
    let d = t.dense()?;
    let (st, l) = d.storage_and_layout();
    let Some((a, b)) = l.contiguous_offsets() else { return t.to_dtype(dt) };
    let (cpu, shape) = (&Device::Cpu, t.shape());
    match (&*st, dt) {
        (Storage::Cpu(CpuStorage::F32(v)), DType::F16) => Tensor::from_vec(pass(&v[a..b], f32_to_f16), shape, cpu),
        (Storage::Cpu(CpuStorage::F16(v)), DType::F32) => Tensor::from_vec(pass(&v[a..b], f16_to_f32), shape, cpu),
        (Storage::Cpu(CpuStorage::F32(v)), DType::BF16) => Tensor::from_vec(map(&v[a..b], bf16_of), shape, cpu),
        (Storage::Cpu(CpuStorage::BF16(v)), DType::F32) => {
            Tensor::from_vec(map(&v[a..b], |x: bf16| f32::from_bits(u32::from(x.to_bits()) << 16)), shape, cpu)
        }
        (Storage::Cpu(CpuStorage::F32(v)), DType::F64) => Tensor::from_vec(map(&v[a..b], f64::from), shape, cpu),
        (Storage::Cpu(CpuStorage::F64(v)), DType::F32) => Tensor::from_vec(map(&v[a..b], |x: f64| x as f32), shape, cpu),
        _ => t.to_dtype(dt),
    }
}

/// f32 to bf16, rounding to nearest even on the bits (no branch, so the loop
/// vectorizes); NaN keeps its sign and payload's top bits with the quiet bit set, as
/// `half::bf16::from_f32` (Candle's conversion) gives.
#[inline(always)]
fn bf16_of(x: f32) -> bf16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    let nan = ((b >> 16) | 0x40) as u16;
    bf16::from_bits(if b & 0x7FFF_FFFF > 0x7F80_0000 { nan } else { rounded })
}

/// `src` rounded to f16 into `dst` (same length). The `half` crate's slice conversion
/// uses the same instruction but calls it through a function pointer per 8 elements (a
/// `#[target_feature]` function cannot be inlined into its caller): `x.half()` of an
/// (8, 256, 384) float32 tensor took 154 us, torch 36.
fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::has_f16c() {
        // SAFETY: `has_f16c()` checked the instructions (AVX with AVX2, and F16C).
        return unsafe { f32_to_f16_f16c(src, dst) };
    }
    dst.convert_from_f32_slice(src)
}

/// `src` widened to f32 into `dst` (same length); see `f32_to_f16`.
fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::has_f16c() {
        // SAFETY: `has_f16c()` checked the instructions (AVX with AVX2, and F16C).
        return unsafe { f16_to_f32_f16c(src, dst) };
    }
    src.convert_to_f32_slice(dst)
}

/// `f32_to_f16` with VCVTPS2PH, 8 elements per instruction, rounding to nearest even
/// (NaN stays NaN): the same bits as `half::f16::from_f32` gives on such a CPU.
///
/// # Safety
/// The CPU must support AVX and F16C (`ops::cpu::has_f16c`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn f32_to_f16_f16c(src: &[f32], dst: &mut [f16]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtps_ph, _mm256_loadu_ps, _mm_storeu_si128, _MM_FROUND_TO_NEAREST_INT};
    assert_eq!(src.len(), dst.len(), "f32_to_f16: lengths differ");
    let body = src.len() / 8 * 8;
    for i in (0..body).step_by(8) {
        // SAFETY: i + 8 <= len for both slices; unaligned loads and stores.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.as_ptr().add(i)));
            _mm_storeu_si128(dst.as_mut_ptr().add(i).cast::<__m128i>(), h);
        }
    }
    dst[body..].convert_from_f32_slice(&src[body..]);
}

/// `f16_to_f32` with VCVTPH2PS, 8 elements per instruction (exact).
///
/// # Safety
/// The CPU must support AVX and F16C (`ops::cpu::has_f16c`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn f16_to_f32_f16c(src: &[f16], dst: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    assert_eq!(src.len(), dst.len(), "f16_to_f32: lengths differ");
    let body = src.len() / 8 * 8;
    for i in (0..body).step_by(8) {
        // SAFETY: i + 8 <= len for both slices; unaligned loads and stores.
        unsafe {
            let v = _mm256_cvtph_ps(_mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>()));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), v);
        }
    }
    src[body..].convert_to_f32_slice(&mut dst[body..]);
}

/// `conv(src chunk, dst chunk)` over `src` in parallel chunks, into a new buffer (the
/// f16 conversions, which pick their instructions themselves; the other conversions
/// are `simd_map::map`s, compiled for AVX2 and AVX-512).
fn pass<A: Sync, U: Copy + Send>(src: &[A], conv: impl Fn(&[A], &mut [U]) + Sync + Send) -> Vec<U> {
    filled_plain(src.len(), |out| {
        let par = par_ok(src.len());
        let size = even_chunk(src.len(), CHUNK, 64, par);
        for_chunks(out, size, par, |i, dst| conv(&src[i * size..][..dst.len()], dst))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_match_candle_bit_for_bit() {
        let mut x: Vec<f32> = crate::ops::test_values(100_003, 11).iter().map(|v| v * 1e5).collect();
        x.extend([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN, f32::MAX, f32::MIN_POSITIVE, 1e-40, 65520.0, 65504.0]);
        x.extend([1.0 + f32::EPSILON * 128.0, 1.0 + f32::EPSILON * 384.0]); // bf16 ties
        let t = Tensor::from_vec(x.clone(), x.len(), &Device::Cpu).unwrap();
        for dt in [DType::F16, DType::BF16, DType::F64] {
            let ours = to_dtype(&t, dt).unwrap();
            let theirs = t.to_dtype(dt).unwrap();
            let (a, b) = (ours.to_dtype(DType::F64).unwrap(), theirs.to_dtype(DType::F64).unwrap());
            let (a, b) = (a.to_vec1::<f64>().unwrap(), b.to_vec1::<f64>().unwrap());
            for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "{dt:?} at {}: {p} vs {q}", x[i]);
            }
            let back = to_dtype(&ours, DType::F32).unwrap().to_vec1::<f32>().unwrap();
            let cand = theirs.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap();
            for (p, q) in back.iter().zip(&cand) {
                assert!(p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()), "{dt:?} back: {p} vs {q}");
            }
        }
        // Short lengths: the 8-wide loops' tails.
        for n in 0..20 {
            let mut h = vec![f16::ZERO; n];
            f32_to_f16(&x[x.len() - n..], &mut h);
            let want: Vec<f16> = x[x.len() - n..].iter().map(|&v| f16::from_f32(v)).collect();
            assert!(h.iter().zip(&want).all(|(p, q)| p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())), "f16 of {n}");
            let mut w = vec![0f32; n];
            f16_to_f32(&h, &mut w);
            assert!(w.iter().zip(&h).all(|(p, q)| p.to_bits() == q.to_f32().to_bits() || p.is_nan()), "f32 of {n}");
        }
    }
}
