//! The row work of a score tile: mask, causal cut, row max, and exp with the
//! row sum (an AVX-512 float32 variant through `vscalefps`).
use super::*;

/// Add the mask row to a tile row and cut it at `lim` (causal); returns the row max.
#[inline(always)]
pub(crate) fn prep_row<T: Float>(sc: &mut [T], mask: Option<&[T]>, m_cs: usize, lim: usize) -> T {
    let w = sc.len();
    if let Some(mrow) = mask {
        if m_cs == 1 {
            for (x, &m) in sc[..lim].iter_mut().zip(&mrow[..lim]) {
                *x += m;
            }
        } else {
            let m = mrow[0];
            for x in sc[..lim].iter_mut() {
                *x += m;
            }
        }
    }
    for x in sc[lim..w].iter_mut() {
        *x = T::NEG_INF;
    }
    let mut acc = [T::NEG_INF; 16];
    let chunks = sc[..lim].chunks_exact(16);
    let rem = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] = fmax(acc[k], c[k]);
        }
    }
    let mut m = T::NEG_INF;
    for &a in acc.iter().chain(rem) {
        m = fmax(m, a);
    }
    m
}

/// `p = exp(x - m)` in place (0 where x is -inf); returns the row sum.
#[inline(always)]
pub(crate) fn exp_row<T: Float, const FMA: bool>(sc: &mut [T], m: T) -> T {
    let mut acc = [T::ZERO; 16];
    let mut chunks = sc.chunks_exact_mut(16);
    for c in &mut chunks {
        for k in 0..16 {
            let x = c[k];
            let p = (x - m).exp_nonpos::<FMA>();
            c[k] = p;
            acc[k] += p;
        }
    }
    let mut s = T::ZERO;
    for x in chunks.into_remainder() {
        let p = (*x - m).exp_nonpos::<FMA>();
        *x = p;
        s += p;
    }
    for a in acc {
        s += a;
    }
    s
}

/// `exp_row` for float32 rows with AVX-512's `vscalefps`: exp(x - m) = 2^n * 2^f
/// with t = (x - m) log2(e) = n + f, |f| <= 1/2, so the power of two needs no
/// integer bit tricks and no range clamp of n: 13 vector instructions per 16 scores
/// instead of 18, ~5% of the whole attention forward. A ragged tail is read as -inf
/// (exp 0) and stored under a lane mask; exp(d) for d < -87 is 0 (see below).
/// Max relative error 1e-7 (tested).
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`fast_exp` / `ops::cpu::simd_level`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn exp_row_f32(sc: &mut [f32], m: f32) -> f32 {
    use std::arch::x86_64::*;
    let (log2e, log2e_lo) = (_mm512_set1_ps(LOG2E_HI), _mm512_set1_ps(LOG2E_LO));
    let (mv, lo, ninf) = (_mm512_set1_ps(m), _mm512_set1_ps(-87.0), _mm512_set1_ps(f32::NEG_INFINITY));
    let c = EXP2_POLY.map(|v| _mm512_set1_ps(v));
    let mut acc = _mm512_setzero_ps();
    let p = sc.as_mut_ptr();
    let mut i = 0;
    while i < sc.len() {
        let live = sc.len() - i;
        let km: __mmask16 = if live >= 16 { 0xFFFF } else { ((1u32 << live) - 1) as __mmask16 };
        // SAFETY: i < sc.len(), so `p.add(i)` is inside `sc`, and `km` enables only the
        // lanes i..i + min(16, live), all < sc.len(); masked-off lanes are not read.
        let x = unsafe { _mm512_mask_loadu_ps(ninf, km, p.add(i)) };
        // Lanes with d < -87 (masked, causal and padding scores are -inf) give exact 0
        // through the mask of the final scalef, which never makes the subnormals
        // e^-87..e^-104: each one costs a microcode assist, here and again in the P V
        // product (they made a padding-masked BERT attention 3x slower). NaN is kept.
        let d = _mm512_sub_ps(x, mv);
        let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(d, lo);
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(d, log2e));
        // f = d log2(e) - n with log2(e) in two parts: one rounding of t would cost
        // |t| ulps (4e-7 relative at d = -7).
        let f = _mm512_fmadd_ps(d, log2e_lo, _mm512_fmsub_ps(d, log2e, n));
        let mut q = c[5];
        q = _mm512_fmadd_ps(q, f, c[4]);
        q = _mm512_fmadd_ps(q, f, c[3]);
        q = _mm512_fmadd_ps(q, f, c[2]);
        q = _mm512_fmadd_ps(q, f, c[1]);
        q = _mm512_fmadd_ps(q, f, c[0]);
        q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0));
        let e = _mm512_maskz_scalef_ps(keep, q, n);
        // SAFETY: as for the load: `km` enables only lanes inside `sc`, which `p` (from
        // `sc.as_mut_ptr()`) may write; masked-off lanes are not written.
        unsafe { _mm512_mask_storeu_ps(p.add(i), km, e) };
        acc = _mm512_add_ps(acc, e);
        i += 16;
    }
    _mm512_reduce_add_ps(acc)
}

/// Stand-in off x86-64, so generic callers compile; never called (`fast_exp` is false there).
///
/// # Safety
/// Never called: `fast_exp` only allows the AVX-512 kernel on x86-64. It panics.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn exp_row_f32(_: &mut [f32], _: f32) -> f32 {
    unreachable!("called only where AVX-512 was detected")
}

/// Whether `exp_row_fast` may take the AVX-512 float32 kernel for `T`.
pub(crate) fn fast_exp<T: Float>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && matches!(simd_level(), Simd::Avx512)
}

/// `exp_row`, through `exp_row_f32` when `fast` (from `fast_exp::<T>()`).
#[inline(always)]
pub(crate) fn exp_row_fast<T: Float, const FMA: bool>(sc: &mut [T], m: T, fast: bool) -> T {
    if fast {
        // `fast` means T is f32, so `via_f32` runs the closure on `sc` and `m` as they are.
        let s = T::via_f32(sc, m, |row, m| {
            // SAFETY: `fast` (from `fast_exp`) means AVX-512F, AVX2 and FMA were detected.
            unsafe { exp_row_f32(row, m) }
        });
        if let Some(s) = s {
            return s;
        }
    }
    exp_row::<T, FMA>(sc, m)
}

/// log2(e) = LOG2E_HI + LOG2E_LO, the first part rounded to float32.
pub(crate) const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
pub(crate) const LOG2E_LO: f32 = 1.925_963e-8;

/// 2^f - 1 = f (c0 + f (c1 + ... f c5)) on [-1/2, 1/2]: a relative-error minimax fit.
/// (c0 is a fitted coefficient close to ln 2, not ln 2 itself.)
#[allow(clippy::approx_constant)]
pub(crate) const EXP2_POLY: [f32; 6] = [0.693_147_2, 0.240_226_48, 0.055_503_324, 0.009_618_437, 0.001_339_887_5, 0.000_153_533_6];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_row_f32_is_accurate_zero_at_neg_inf_and_keeps_the_tail() {
        if !fast_exp::<f32>() {
            return; // no AVX-512 on this machine: the kernel is never called
        }
        // 37 values: two full vectors and a ragged tail of 5.
        let m = 3.5f32;
        let mut xs: Vec<f32> = (0..37).map(|i| m - 87.0 * (i as f32) / 36.0).collect();
        xs[7] = f32::NEG_INFINITY;
        xs[36] = -1e30;
        let mut buf = xs.clone();
        buf.push(42.0); // past the row: must stay untouched
                        // SAFETY: `fast_exp::<f32>()` above means AVX-512F, AVX2 and FMA were detected.
        let sum = unsafe { exp_row_f32(&mut buf[..37], m) };
        assert_eq!(buf[37], 42.0);
        assert_eq!(buf[7], 0.0);
        assert_eq!(buf[36], 0.0);
        assert_eq!(buf[0], 1.0);
        let mut want = 0f64;
        for (i, &x) in xs.iter().enumerate() {
            let e = ((x - m) as f64).exp();
            want += e;
            if e > 0.0 {
                assert!(((buf[i] as f64 - e) / e).abs() < 3e-7, "x={x}: {} vs {e}", buf[i]);
            }
        }
        assert!(((sum as f64 - want) / want).abs() < 1e-6);
        // Below -87: exact 0, never a subnormal; NaN propagates.
        let mut edge = [-87.0f32, -87.01, -100.0, -103.9, f32::NAN];
        // SAFETY: as above (AVX-512 detected).
        unsafe { exp_row_f32(&mut edge, 0.0) };
        assert!(edge[0] > 0.0 && edge[0].is_normal());
        assert_eq!(&edge[1..4], &[0.0, 0.0, 0.0]);
        assert!(edge[4].is_nan());
        // A dense sweep of x - m over [-87, 0].
        let mut row: Vec<f32> = (0..4096).map(|i| -87.0 * (i as f32) / 4095.0).collect();
        let xs = row.clone();
        // SAFETY: as above (AVX-512 detected).
        unsafe { exp_row_f32(&mut row, 0.0) };
        for (&x, &p) in xs.iter().zip(&row) {
            let e = (x as f64).exp();
            assert!(((p as f64 - e) / e).abs() < 3e-7, "x={x}: {p} vs {e}");
        }
    }
}
