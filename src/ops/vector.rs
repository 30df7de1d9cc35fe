//! Slice helpers the kernels share: `dot` and `axpy` over float slices, as plain
//! index loops that vectorize (attention, depthwise convolution).
use super::float::Float;

/// `a . b` with 8 independent partial sums (attention's f64 and pre-AVX2 path, whose
/// f32 on AVX2 goes through `attention::forward::dot_f32_avx2`; depthwise convolution).
/// Plain index loops: iterator adapters were left un-inlined in the `target_feature`
/// callers of some builds, costing 4x.
#[inline(always)]
pub(crate) fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut part = [T::ZERO; 8];
    let mut i = 0;
    while i + 8 <= n {
        let (x, y) = (&a[i..i + 8], &b[i..i + 8]);
        part[0] += x[0] * y[0];
        part[1] += x[1] * y[1];
        part[2] += x[2] * y[2];
        part[3] += x[3] * y[3];
        part[4] += x[4] * y[4];
        part[5] += x[5] * y[5];
        part[6] += x[6] * y[6];
        part[7] += x[7] * y[7];
        i += 8;
    }
    let mut s = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    while i < n {
        s += a[i] * b[i];
        i += 1;
    }
    s
}

/// `acc += p * v`.
#[inline(always)]
pub(crate) fn axpy<T: Float>(acc: &mut [T], p: T, v: &[T]) {
    let n = acc.len().min(v.len());
    let (acc, v) = (&mut acc[..n], &v[..n]);
    let mut i = 0;
    while i < n {
        acc[i] += p * v[i];
        i += 1;
    }
}
