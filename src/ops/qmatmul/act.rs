//! The activations' side of the integer dot products: each row of `x` quantized once
//! per call to the 8-bit block format the weight type multiplies with, with exactly
//! Candle's rounding (so our results and Candle's QMatMul differ only in the order
//! of the float sums), plus the per-block integer sums that let a kernel fold a
//! weight offset (q4_0's 8, q6k's 32, q4_1's and q4k's mins) into one term.
use rayon::prelude::*;

/// Rows quantized in blocks of 32 (GGML's q8_0 / q8_1): `qs[i * k + j]`, and per
/// block `d` (the f16 scale, widened), `isum` (the sum of its quants) and `s`
/// (q8_1's f16 `d * isum`, which Candle's q4_1 dot product uses).
pub(crate) struct Q8x32 {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    pub isum: Vec<i32>,
    pub s: Vec<f32>,
}

/// Rows quantized in blocks of 256 (GGML's q8k): per block an f32 scale and the
/// sums of each 16 quants.
pub(crate) struct Q8x256 {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    pub bsums: Vec<i32>,
}

/// One block's input and outputs as `quantize_32`'s zipped iterators hand them out.
type Block32<'a> = (((&'a [f32], &'a mut [i8]), &'a mut f32), (&'a mut i32, &'a mut f32));
/// The same for `quantize_256`.
type Block256<'a> = ((&'a [f32], &'a mut [i8]), (&'a mut f32, &'a mut [i32]));

/// `v.round()` (halves away from zero) without libm's `roundf` call, which kept the
/// quantizing loops scalar: the truncation plus one step where the dropped fraction
/// is at least a half. Exact: `v - v.trunc()` is computed without rounding.
#[inline(always)]
fn round_away(v: f32) -> f32 {
    let t = v.trunc();
    if (v - t).abs() >= 0.5 {
        t + 1f32.copysign(v)
    } else {
        t
    }
}

/// Quantizing `x` is worth splitting over threads from this many elements.
const PAR_ELEMS: usize = 1 << 16;

/// `x` is (m, k) row-major with `k % 32 == 0`. A block holding NaN or inf gets a
/// NaN scale, so its output rows are NaN as in float math (Candle's quantizer would
/// drop a NaN silently: `f32::max` skips it and the cast makes it 0).
pub(crate) fn quantize_32(x: &[f32]) -> Q8x32 {
    let nb = x.len() / 32;
    let mut out = Q8x32 { qs: vec![0; x.len()], d: vec![0.0; nb], isum: vec![0; nb], s: vec![0.0; nb] };
    let one = |(((xs, qs), d), (isum, s)): Block32| {
        let amax = xs.iter().fold(0f32, |a, v| a.max(v.abs()));
        if !xs.iter().all(|v| v.is_finite()) {
            (*d, *s) = (f32::NAN, f32::NAN);
            return;
        }
        let dd = amax / 127.0;
        let id = if dd != 0.0 { 1.0 / dd } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = round_away(v * id) as i8;
            sum += *q as i32;
        }
        let d16 = half::f16::from_f32(dd);
        *d = d16.to_f32();
        *isum = sum;
        *s = half::f16::from_f32(half::f16::from_f32(sum as f32).to_f32() * *d).to_f32();
    };
    if x.len() >= PAR_ELEMS {
        let (is, ss) = (out.isum.par_iter_mut(), out.s.par_iter_mut());
        x.par_chunks(32).zip(out.qs.par_chunks_mut(32)).zip(out.d.par_iter_mut()).zip(is.zip(ss)).for_each(one);
    } else {
        let (is, ss) = (out.isum.iter_mut(), out.s.iter_mut());
        x.chunks(32).zip(out.qs.chunks_mut(32)).zip(out.d.iter_mut()).zip(is.zip(ss)).for_each(one);
    }
    out
}

/// `x` is (m, k) row-major with `k % 256 == 0`; non-finite blocks as in `quantize_32`.
pub(crate) fn quantize_256(x: &[f32]) -> Q8x256 {
    let nb = x.len() / 256;
    let mut out = Q8x256 { qs: vec![0; x.len()], d: vec![0.0; nb], bsums: vec![0; nb * 16] };
    let one = |((xs, qs), (d, bsums)): Block256| {
        if !xs.iter().all(|v| v.is_finite()) {
            *d = f32::NAN;
            return;
        }
        // Candle's q8k: the scale comes from the signed value of largest magnitude
        // (the first one found), so the quants may reach -128.
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in xs {
            if amax < v.abs() {
                (amax, max) = (v.abs(), v);
            }
        }
        if amax == 0.0 {
            return;
        }
        let iscale = -127.0 / max;
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = round_away(iscale * v).clamp(-128.0, 127.0) as i8;
        }
        for (b, g) in bsums.iter_mut().zip(qs.chunks(16)) {
            *b = g.iter().map(|&q| q as i32).sum();
        }
        *d = 1.0 / iscale;
    };
    if x.len() >= PAR_ELEMS {
        let rest = out.d.par_iter_mut().zip(out.bsums.par_chunks_mut(16));
        x.par_chunks(256).zip(out.qs.par_chunks_mut(256)).zip(rest).for_each(one);
    } else {
        let rest = out.d.iter_mut().zip(out.bsums.chunks_mut(16));
        x.chunks(256).zip(out.qs.chunks_mut(256)).zip(rest).for_each(one);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::round_away;

    #[test]
    fn round_away_equals_round() {
        let mut vals = vec![0.0f32, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 0.49999997, -0.49999997, 127.5, -128.5, 8388607.5, 1e30, -1e30];
        // Every float bit pattern in a stride over the whole range, NaN and inf aside.
        vals.extend((0..u32::MAX).step_by(65_537).map(f32::from_bits).filter(|v| v.is_finite()));
        for v in vals {
            assert_eq!(round_away(v).to_bits(), v.round().to_bits(), "{v}");
        }
    }
}
