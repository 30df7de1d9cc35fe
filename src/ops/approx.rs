//! Branch-free approximations of exp, erf, ln, tanh, sine and cosine for f32, so the
//! loops that call them vectorize (libm's calls stop that), and the fused multiply-add
//! switch they share. Used by softmax, attention, GELU and the elementwise functions.

/// `fast_exp`'s range: from just above ln(f32::MIN_POSITIVE) (-87.33654), so no
/// result is subnormal, to the last x whose 2^n does not overflow (x log2 e
/// rounds to 127; the true value passes f32::MAX only at 88.7228). Past `EXP_HI`
/// the clamp to `EXP_INF` (x log2 e rounds to 128) gives +inf by itself, so only the
/// tests name `EXP_HI`.
const EXP_LO: f32 = -87.3365;
#[cfg(test)]
const EXP_HI: f32 = 88.376;
const EXP_INF: f32 = 89.0;

/// exp for f32 without branches, so loops over it vectorize: 2^n * p(r) with
/// |r| <= ln2/2 and a degree-6 polynomial (error about 1 ulp, as Cephes' expf).
/// Below `EXP_LO` it gives exactly 0 rather than a subnormal (a masked score of
/// -1e30 or -inf must weigh nothing, and subnormals make every later product
/// slow: a causal softmax fed to a matmul ran 27x slower); above `EXP_HI` +inf;
/// NaN stays NaN.
///
/// The clamps are written as `lo > x ? lo : x` (and `hi < x ? hi : x`), which
/// compile to one `vmaxps` / `vminps` each and let NaN through (x86's max returns
/// its second operand when either is NaN), where `f32::max` / `min` (IEEE, NaN
/// dropped) take three instructions each; NaN then stays NaN through the arithmetic,
/// and the clamp to `EXP_INF` gives n = 128, whose scale bits are +inf's (so +inf and
/// every x past `EXP_HI` give +inf with no select). One select is left, the zero below
/// `EXP_LO`: `x.exp()` over 128-512 x 384 floats took 10-16% less time (9.0 -> 8.1,
/// 29.2 -> 24.6 us, both buffers on cache lines as `crate::alloc` places them; torch
/// 7.8, 22.0).
#[inline(always)]
pub fn fast_exp<const FMA: bool>(x: f32) -> f32 {
    let c = if EXP_LO > x { EXP_LO } else { x };
    let c = if EXP_INF < c { EXP_INF } else { c };
    let e = exp_in_range::<FMA>(c);
    if x < EXP_LO {
        0.0
    } else {
        e
    }
}

/// exp for `x <= 0`, where `-inf` (or anything below -87.68) gives exactly 0:
/// the exponent then rounds to -127, whose scale bits are all zero. No branch.
#[inline(always)]
pub fn fast_exp_nonpos<const FMA: bool>(x: f32) -> f32 {
    exp_in_range::<FMA>(x.max(-88.0))
}

/// `a * b + c`, as one fused instruction where the caller is compiled with FMA
/// (`FMA = true`: inside the `#[target_feature(enable = "...fma")]` variants). Rust
/// never fuses `a * b + c` by itself, and `mul_add` without the feature is a libm
/// call, so the portable variants pass `false`. Fused, the polynomials below take
/// half the instructions: softmax ~11% and the attention kernel ~7% faster.
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// The largest |x| `fast_sin_cos` takes: its reduction keeps the reduced argument's
/// relative error near f32's rounding up to here (the quadrant count stays far below
/// 2^22, and pi/2's three-part split leaves ~3e-22 per quadrant); past it callers use
/// libm's.
pub const TRIG_LIMIT: f32 = 1.0e5;

/// `sin(x)` (`COS = false`) or `cos(x)` for f32 `|x| <= TRIG_LIMIT`, without branches;
/// NaN and the infinities give NaN. Callers run it only where FMA is enabled (the
/// reduction needs fused products: see below), a libm call elsewhere.
///
/// Cody and Waite's reduction: `k` = x 2/pi rounded to the nearest integer (by the
/// `SHIFT` addition, whose low mantissa bits then hold k, so the quadrant needs no
/// float-to-int cast), then `r = x - k (P1 + P2 + P3)` with pi/2 split into three floats,
/// one fused step each. The first step is exact (k P1 and x are multiples of 2^-23
/// there, and |r| <= pi/4 needs at most 23 bits), so the only rounding that matters is
/// the second's, relative to r. Then Cephes' minimax polynomials for sinf / cosf on
/// [-pi/4, pi/4] (about 1 ulp, as the libm sinf this replaces), picked and signed by k
/// mod 4. `k == 0` keeps x itself as r, so `sin(-0.0)` stays -0.0.
///
/// On an (8, 256, 384) tensor with 2 threads (Zen 3): libm's sinf per element 3.4 ms,
/// torch (SLEEF) 0.76 ms.
#[inline(always)]
pub fn fast_sin_cos<const COS: bool>(x: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0;
    const P1: f32 = std::f32::consts::FRAC_PI_2; // pi/2 rounded to f32
    const P2: f32 = -4.371_139e-8; // pi/2 - P1, rounded
    const P3: f32 = -1.715_124_5e-15; // pi/2 - P1 - P2, rounded
    let t = x.mul_add(std::f32::consts::FRAC_2_PI, SHIFT);
    let k = t - SHIFT;
    let r = (-k).mul_add(P1, x);
    let r = (-k).mul_add(P2, r);
    let r = (-k).mul_add(P3, r);
    let r = if k == 0.0 { x } else { r };
    let z = r * r;
    // sin(r) has r's sign on [-pi/4, pi/4], zeros included: r + r z p(z) makes -0.0 +0.0.
    let sin = (z * (z.mul_add(-1.951_529_6e-4, 8.332_161e-3)).mul_add(z, -0.166_666_55)).mul_add(r, r).copysign(r);
    let cos = (z * z).mul_add(2.443_315_7e-5f32.mul_add(z, -1.388_731_6e-3).mul_add(z, 4.166_664_6e-2), (-0.5f32).mul_add(z, 1.0));
    let q = (t.to_bits() as i32).wrapping_add(COS as i32);
    let v = if q & 1 != 0 { cos } else { sin };
    if q & 2 != 0 {
        -v
    } else {
        v
    }
}

/// Whether `fast_atan2` takes (y, x): both finite and not both zero (NaN fails the
/// comparisons). The rest (the signed zeros' and infinities' special angles, NaN)
/// takes libm's `atan2`.
#[inline(always)]
pub fn atan2_in_range(y: f32, x: f32) -> bool {
    let (ax, ay) = (x.abs(), y.abs());
    ax < f32::INFINITY && ay < f32::INFINITY && (ax > 0.0 || ay > 0.0)
}

/// `atan2(y, x)` for f32 where `atan2_in_range` holds, without branches (selects),
/// within 2.5 ulp of the exact angle (2.41 at most over 2M random pairs; libm's
/// through f64 is correctly rounded). Callers run it only where FMA is enabled (the last step's `k pi/4` is
/// one fused product), libm's elsewhere.
///
/// The ratio `t = min(|x|, |y|) / max(|x|, |y|)` in [0, 1] is reduced as Cephes'
/// `atanf` does (past tan(pi/8), `u = (t - 1) / (t + 1)` and pi/4 more) to
/// |u| <= tan(pi/8), where its polynomial holds about 1 ulp. The octant then gives the
/// angle as `k pi/4 + s p`, `k` in 0..=4 and `s` a sign (|y| > |x| reflects about pi/2,
/// a negative x, -0.0 included, about pi), with pi/4 in two parts so that `k pi/4` adds
/// no rounding of its own; y's sign, zeros included, is the result's.
///
/// On an (8, 256, 384) tensor with 2 threads (Zen 3): 0.49 ms; through f64 libm per
/// element 15.7 ms, torch (SLEEF) 1.36-1.42 ms.
#[inline(always)]
pub fn fast_atan2(y: f32, x: f32) -> f32 {
    const TAN_PI_8: f32 = 0.414_213_57;
    const PI_4_HI: f32 = std::f32::consts::FRAC_PI_4; // pi/4 rounded to f32
    const PI_4_LO: f32 = -2.185_569_4e-8; // pi/4 - PI_4_HI, rounded
    let (ax, ay) = (x.abs(), y.abs());
    let swap = ay > ax;
    let (mn, mx) = if swap { (ax, ay) } else { (ay, ax) };
    let t = mn / mx;
    let big = t > TAN_PI_8;
    let u = if big { (t - 1.0) / (t + 1.0) } else { t };
    let z = u * u;
    let poly = 8.053_744_5e-2f32.mul_add(z, -1.387_768_6e-1).mul_add(z, 1.997_771e-1).mul_add(z, -3.333_295e-1);
    let p = (poly * z).mul_add(u, u);
    let neg = x.is_sign_negative();
    // The octant's multiple of pi/4: 0 + o, 2 - o, 4 - o, 2 + o (o = 1 past tan(pi/8))
    // for (swap, neg) = (no, no), (yes, no), (no, yes), (yes, yes); `s` is the sign of
    // both o and p.
    let s: f32 = if swap != neg { -1.0 } else { 1.0 };
    let base: f32 = if swap {
        2.0
    } else if neg {
        4.0
    } else {
        0.0
    };
    let k = if big { base + s } else { base };
    k.mul_add(PI_4_HI, k.mul_add(PI_4_LO, s * p)).copysign(y)
}

#[inline(always)]
fn exp_in_range<const FMA: bool>(x: f32) -> f32 {
    let (em1, scale) = exp_parts::<FMA>(x);
    (em1 + 1.0) * scale
}

/// `e^x = 2^n e^r` with x = n ln2 + r, |r| <= ln2/2: returns `e^r - 1` (as
/// `r + r^2 P(r)`, Cephes' expf polynomial) and `2^n` (from its exponent bits: 0.0 at
/// n = -127, +inf at n = 128). Shared by `fast_exp` and `fast_expm1`, which keeps the
/// `- 1` apart from the `+ 1` to stay accurate near 0.
#[inline(always)]
fn exp_parts<const FMA: bool>(x: f32) -> (f32, f32) {
    // Round x*log2(e) to the nearest integer n by adding 1.5*2^23 (the float's
    // low mantissa bits then hold n), so no libm call or cast breaks vectorization.
    const SHIFT: f32 = 12_582_912.0;
    let t = madd::<FMA>(x, std::f32::consts::LOG2_E, SHIFT);
    let n = t - SHIFT;
    let ni = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let r = madd::<FMA>(-n, 1.428_606_8e-6, madd::<FMA>(-n, 0.693_145_75, x));
    let mut p = 1.987_569_1e-4_f32;
    for k in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 0.5] {
        p = madd::<FMA>(p, r, k);
    }
    (madd::<FMA>(p * r, r, r), f32::from_bits((ni.wrapping_add(127) as u32) << 23))
}

/// erf for f32 as a branch-free rational function of x^2 on [-4, 4] (the
/// approximation Eigen and XLA use; max abs error 3e-7, near the clamp), so loops
/// vectorize. Past the clamp it is exactly +-1 (f32's erf rounds to 1 from 3.92):
/// the approximation's 1 - 1.8e-7 there made GELU(-1000) -8.9e-5 instead of -0.
#[inline(always)]
pub fn fast_erf<const FMA: bool>(x: f32) -> f32 {
    // max/min, not clamp: NaN goes through as a number here (the result is
    // replaced below), and the pair compiles to two vector instructions.
    #[allow(clippy::manual_clamp)]
    let e = erf_in_range::<FMA>(x.max(-4.0).min(4.0));
    if x >= 4.0 {
        1.0
    } else if x <= -4.0 {
        -1.0
    } else if x.is_nan() {
        x
    } else {
        e
    }
}

#[inline(always)]
fn erf_in_range<const FMA: bool>(x: f32) -> f32 {
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    for k in [2.770_681_4e-8, -2.101_024e-6, -5.692_506_4e-5, -7.349_906_3e-4, -2.954_600_1e-3, -1.609_603_3e-2] {
        p = madd::<FMA>(p, x2, k);
    }
    let mut q = -1.456_607_2e-5_f32;
    for k in [-2.133_740_6e-4, -1.682_827e-3, -7.373_329e-3, -1.426_473_9e-2] {
        q = madd::<FMA>(q, x2, k);
    }
    x * p / q
}

/// ln for f32 without branches: x = m 2^e with m in [sqrt(1/2), sqrt(2)) read from the
/// bits (subnormals scaled by 2^23 first), then `ln x = e ln 2 + f P(f)` with
/// f = m - 1 and P a degree-9 polynomial we fitted (minimax in relative error on that
/// interval, 4e-9 in float64); ln 2 is split in two so `e ln 2` stays exact. Max
/// error 1.6 ulp. 0 gives -inf, negatives and NaN give NaN, +inf gives +inf.
#[inline(always)]
pub fn fast_ln<const FMA: bool>(x: f32) -> f32 {
    const P: [f32; 10] = [
        1.0,
        -0.499_999_88,
        0.333_333_25,
        -0.250_015_85,
        0.200_019_69,
        -0.166_090_18,
        0.141_818_46,
        -0.132_434_35,
        0.129_045_71,
        -0.076_210_71,
    ];
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let tiny = x < f32::MIN_POSITIVE;
    let xs = if tiny { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let e0 = ((bits >> 23) & 0xff) as i32 - 126 - if tiny { 23 } else { 0 };
    let m0 = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m0 < std::f32::consts::FRAC_1_SQRT_2;
    let m = if low { m0 + m0 } else { m0 };
    let e = (if low { e0 - 1 } else { e0 }) as f32;
    let f = m - 1.0;
    let mut p = P[9];
    for k in [P[8], P[7], P[6], P[5], P[4], P[3], P[2], P[1], P[0]] {
        p = madd::<FMA>(p, f, k);
    }
    let r = madd::<FMA>(e, LN2_HI, madd::<FMA>(e, LN2_LO, f * p));
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        r
    }
}

/// exp(x) - 1 for f32 without branches, accurate near 0 where `exp(x) - 1` cancels:
/// `fast_exp`'s reduction x = n ln2 + r and polynomial, kept as `e^r - 1 = r + r^2 P(r)`,
/// then `2^n (e^r - 1) + (2^n - 1)` (exact while n is small; from x = 20 on, where
/// e^x - 1 rounds to e^x, `2^n e^r` as `fast_exp`, which keeps +inf from overflowing
/// into NaN). Below -88 it is -1; NaN stays NaN; -0.0 stays -0.0. Max error about 1.5 ulp.
#[inline(always)]
pub fn fast_expm1<const FMA: bool>(x: f32) -> f32 {
    // `lo > x ? lo : x`: NaN passes (see `fast_exp`).
    let c = if -88.0 > x { -88.0 } else { x };
    let c = if EXP_INF < c { EXP_INF } else { c };
    // s = 2^n: 0.0 at x = -88 (the result is then -1), +inf past the overflow.
    let (em1, s) = exp_parts::<FMA>(c);
    let r = if c > 20.0 { s * (em1 + 1.0) } else { madd::<FMA>(s, em1, s - 1.0) };
    if x == 0.0 {
        x
    } else {
        r
    }
}

/// ln(1 + x) for f32 without branches, accurate near 0 where `ln(1 + x)` loses x's low
/// bits: with w = 1 + x rounded, `ln(w) - ((w - 1) - x) / w` (the second term is what
/// the rounding of w took away; `w - 1` is exact). -1 gives -inf, below it NaN, +inf
/// gives +inf, NaN stays NaN, -0.0 stays -0.0. Max error about 2 ulp (`fast_ln`'s 1.6
/// and the correction's rounding).
#[inline(always)]
pub fn fast_log1p<const FMA: bool>(x: f32) -> f32 {
    let w = 1.0 + x;
    // Only where w is positive and finite: at 0 and +inf the term is 0 / 0 or inf - inf.
    let fix = if w > 0.0 && w < f32::INFINITY { ((w - 1.0) - x) / w } else { 0.0 };
    let r = fast_ln::<FMA>(w) - fix;
    if x == 0.0 {
        x
    } else {
        r
    }
}

/// ln(1 + e^z) for f32 without branches (softplus, Mish): `max(z, 0) + log1p(e^-|z|)`,
/// whose exponential is at most 1, so large z lose nothing; past 88.72283, where f32's
/// e^z overflows, +inf as PyTorch's `log1p(exp(z))` gives. Below -87.3 it is 0 where
/// PyTorch gives a subnormal (under 1.2e-38). NaN stays NaN.
#[inline(always)]
pub fn fast_log1p_exp<const FMA: bool>(z: f32) -> f32 {
    // `z < 0 ? 0 : z`: NaN takes the `z` side.
    let pos = if z < 0.0 { 0.0 } else { z };
    let r = pos + fast_log1p::<FMA>(fast_exp_nonpos::<FMA>(-z.abs()));
    if z > 88.722_83 {
        f32::INFINITY
    } else {
        r
    }
}

/// tanh for f32 as a rational function: `x P(t) / Q(t)` with `t = (x / 9.02)^2`, P of
/// degree 6 and Q of degree 3, whose coefficients we fitted (minimax in relative
/// error, by iteratively reweighted least squares in float64) on [-9.02, 9.02], where
/// f32's tanh reaches +-1; outside, x is clamped there. Max relative error 3.6e-7
/// (about 6 ulp just below 1, under 2 ulp in most of the range). Ten multiply-adds
/// and one division: a third of the work of the exp-based form it replaces, whose
/// division and exponential both ran for every element. NaN goes through the clamp;
/// -0.0 stays -0.0.
#[inline(always)]
pub fn fast_tanh<const FMA: bool>(x: f32) -> f32 {
    const LIM: f32 = 9.02;
    const INV_LIM2: f32 = 1.0 / (9.02 * 9.02);
    const P: [f32; 7] = [1.0, 10.644_513, 20.540_4, 6.001_95, -0.884_428_9, 0.187_445_21, -0.024_469_594];
    const Q: [f32; 4] = [1.0, 37.764_64, 162.121_2, 137.052_15];
    // f32::clamp lets NaN through (it compares; min/max would replace it).
    let c = x.clamp(-LIM, LIM);
    let t = c * c * INV_LIM2;
    let mut p = P[6];
    for k in [P[5], P[4], P[3], P[2], P[1], P[0]] {
        p = madd::<FMA>(p, t, k);
    }
    let mut q = Q[3];
    for k in [Q[2], Q[1], Q[0]] {
        q = madd::<FMA>(q, t, k);
    }
    c * p / q
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn fast_tanh_is_accurate() {
        for fma in [false, true] {
            let mut worst = 0.0f64;
            for i in -200_000..=200_000 {
                let x = i as f32 * 1e-4;
                let got = if fma { fast_tanh::<true>(x) } else { fast_tanh::<false>(x) } as f64;
                let want = (x as f64).tanh();
                worst = worst.max((got - want).abs() / want.abs().max(1e-30));
            }
            assert!(worst < 4e-7, "relative error {worst}");
        }
        assert_eq!(fast_tanh::<false>(100.0), 1.0);
        assert_eq!(fast_tanh::<false>(-100.0), -1.0);
        assert_eq!(fast_tanh::<false>(0.0), 0.0);
        assert!(fast_tanh::<false>(f32::NAN).is_nan());
        assert_eq!(fast_tanh::<false>(f32::INFINITY), 1.0);
        // f32's tanh is exactly +-1 from 9.02 on; -0.0 and tiny values keep themselves.
        for x in [9.02f32, 9.5, 15.0, 1e30] {
            assert_eq!(fast_tanh::<false>(x), 1.0);
            assert_eq!(fast_tanh::<true>(-x), -1.0);
        }
        assert!(fast_tanh::<false>(-0.0).is_sign_negative());
        assert_eq!(fast_tanh::<false>(1e-30), 1e-30);
    }

    /// The error of `got` in units in the last place of f32 at `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) as f64 - w.abs() as f64).max(f64::from(f32::MIN_POSITIVE) * 1e-7);
        (got as f64 - want).abs() / ulp
    }

    #[test]
    fn fast_expm1_log1p_and_softplus_are_accurate() {
        for fma in [false, true] {
            let expm1 = |x: f32| if fma { fast_expm1::<true>(x) } else { fast_expm1::<false>(x) };
            let log1p = |x: f32| if fma { fast_log1p::<true>(x) } else { fast_log1p::<false>(x) };
            let sp = |x: f32| if fma { fast_log1p_exp::<true>(x) } else { fast_log1p_exp::<false>(x) };
            let (mut we, mut wl, mut ws) = (0f64, 0f64, 0f64);
            // Magnitudes from 1e-30 to 88 both signs (expm1), from 1e-30 up (log1p).
            let mut m = 1e-30f32;
            while m < 88.0 {
                for x in [m, -m] {
                    we = we.max(ulps(expm1(x), (x as f64).exp_m1()));
                    // Below f32's normal range (x < -87.3) the exponential is flushed
                    // to 0 (`fast_exp_nonpos`): softplus is then 0 instead of a subnormal.
                    let want = (x as f64).exp().ln_1p();
                    if want >= f64::from(f32::MIN_POSITIVE) {
                        ws = ws.max(ulps(sp(x), want));
                    } else {
                        assert!(sp(x) >= 0.0 && (sp(x) as f64 - want).abs() < 1.2e-38, "softplus({x})");
                    }
                    if x > -1.0 {
                        wl = wl.max(ulps(log1p(x), (x as f64).ln_1p()));
                    }
                }
                m *= 1.0037;
            }
            assert!(we < 2.0 && wl < 3.0 && ws < 3.0, "ulp errors expm1 {we} log1p {wl} softplus {ws}");
            assert_eq!(expm1(-100.0), -1.0);
            assert_eq!(expm1(f32::NEG_INFINITY), -1.0);
            assert_eq!(expm1(89.0), f32::INFINITY);
            assert_eq!(expm1(88.5), f32::INFINITY);
            assert_eq!(expm1(f32::INFINITY), f32::INFINITY);
            assert!(expm1(-0.0).is_sign_negative() && expm1(-0.0) == 0.0);
            assert_eq!(log1p(-1.0), f32::NEG_INFINITY);
            assert_eq!(log1p(f32::INFINITY), f32::INFINITY);
            assert!(ulps(log1p(f32::MAX), (f32::MAX as f64).ln()) < 2.0);
            assert!(log1p(-1.5).is_nan() && log1p(f32::NAN).is_nan() && expm1(f32::NAN).is_nan());
            assert!(log1p(-0.0).is_sign_negative() && log1p(-0.0) == 0.0);
            assert_eq!(sp(f32::NEG_INFINITY), 0.0);
            assert_eq!(sp(-200.0), 0.0);
            assert_eq!(sp(50.0), 50.0);
            assert_eq!(sp(88.8), f32::INFINITY);
            assert!(sp(f32::NAN).is_nan());
        }
    }

    #[test]
    fn fast_ln_is_accurate() {
        for fma in [false, true] {
            let ln = |x: f32| if fma { fast_ln::<true>(x) } else { fast_ln::<false>(x) };
            let mut worst = 0.0f64;
            // Every 97th float from the smallest subnormal to the largest finite.
            let mut b = 1u32;
            while b < 0x7f80_0000 {
                let x = f32::from_bits(b);
                let want = (x as f64).ln();
                let ulp = ((want.abs() as f32).to_bits() + 1) as f64;
                let ulp = (f32::from_bits(ulp as u32) as f64 - want.abs() as f32 as f64).abs().max(f64::MIN_POSITIVE);
                worst = worst.max((ln(x) as f64 - want).abs() / ulp);
                b += 97;
            }
            assert!(worst < 2.0, "ulp error {worst}");
            assert_eq!(ln(1.0), 0.0);
            assert_eq!(ln(0.0), f32::NEG_INFINITY);
            assert_eq!(ln(-0.0), f32::NEG_INFINITY);
            assert!(ln(-1.0).is_nan() && ln(f32::NAN).is_nan() && ln(f32::NEG_INFINITY).is_nan());
            assert_eq!(ln(f32::INFINITY), f32::INFINITY);
        }
    }

    #[test]
    fn fast_erf_is_accurate() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_erf_is_accurate_with::<false>();
        fast_erf_is_accurate_with::<true>();
    }

    fn fast_erf_is_accurate_with<const FMA: bool>() {
        let mut x = -6.0f64;
        while x < 6.0 {
            let exact = libm_erf(x);
            assert!((fast_erf::<FMA>(x as f32) as f64 - exact).abs() < 5e-7, "x={x} fast={} exact={exact}", fast_erf::<FMA>(x as f32));
            x += 0.001;
        }
    }

    #[test]
    fn fast_erf_saturates_past_the_clamp_and_keeps_nan() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_erf_saturates_past_the_clamp_and_keeps_nan_with::<false>();
        fast_erf_saturates_past_the_clamp_and_keeps_nan_with::<true>();
    }

    fn fast_erf_saturates_past_the_clamp_and_keeps_nan_with<const FMA: bool>() {
        for x in [4.0f32, 4.5, 100.0, 1e30, f32::INFINITY] {
            assert_eq!(fast_erf::<FMA>(x), 1.0);
            assert_eq!(fast_erf::<FMA>(-x), -1.0);
        }
        // NaN stays NaN (the clamp made it -4 first: erf(NaN) was -0.99999988).
        assert!(fast_erf::<FMA>(f32::NAN).is_nan());
    }

    /// erf by its Taylor series (|x| < 3) or the continued-fraction tail: a reference only.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 3.0 {
            let (mut sum, mut term, mut n) = (x, x, 0.0);
            while term.abs() > 1e-17 {
                n += 1.0;
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
            }
            return sum * 2.0 / std::f64::consts::PI.sqrt();
        }
        let t = x.abs();
        let mut f = t;
        for k in (1..60).rev() {
            f = t + (k as f64 / 2.0) / f;
        }
        let tail = (-t * t).exp() / (f * std::f64::consts::PI.sqrt());
        x.signum() * (1.0 - tail)
    }

    #[test]
    fn fast_exp_is_accurate() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_is_accurate_with::<false>();
        fast_exp_is_accurate_with::<true>();
    }

    fn fast_exp_is_accurate_with<const FMA: bool>() {
        let mut x = EXP_LO;
        while x <= EXP_HI {
            let (a, b) = (fast_exp::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
            x += 0.0137;
        }
        for x in [EXP_LO, -87.3, -87.1, 88.37, EXP_HI] {
            let (a, b) = (fast_exp::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
        }
    }

    #[test]
    fn fast_exp_edges_are_zero_inf_nan_never_subnormal() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_edges_are_zero_inf_nan_never_subnormal_with::<false>();
        fast_exp_edges_are_zero_inf_nan_never_subnormal_with::<true>();
    }

    fn fast_exp_edges_are_zero_inf_nan_never_subnormal_with<const FMA: bool>() {
        for x in [f32::NEG_INFINITY, -1e30, -104.0, -88.0, -87.34] {
            assert_eq!(fast_exp::<FMA>(x), 0.0, "x={x}");
        }
        assert!(fast_exp::<FMA>(EXP_LO) >= f32::MIN_POSITIVE);
        assert_eq!(fast_exp::<FMA>(0.0), 1.0);
        assert_eq!(fast_exp::<FMA>(88.8), f32::INFINITY);
        assert_eq!(fast_exp::<FMA>(f32::INFINITY), f32::INFINITY);
        assert!(fast_exp::<FMA>(f32::NAN).is_nan());
    }

    #[test]
    fn fast_exp_nonpos_is_accurate_and_zero_at_neg_inf() {
        // Both builds of the polynomials: plain and fused multiply-adds.
        fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with::<false>();
        fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with::<true>();
    }

    fn fast_exp_nonpos_is_accurate_and_zero_at_neg_inf_with<const FMA: bool>() {
        assert_eq!(fast_exp_nonpos::<FMA>(f32::NEG_INFINITY), 0.0);
        assert_eq!(fast_exp_nonpos::<FMA>(-1e30), 0.0);
        assert_eq!(fast_exp_nonpos::<FMA>(0.0), 1.0);
        let mut x = -87.0f32;
        while x <= 0.0 {
            let (a, b) = (fast_exp_nonpos::<FMA>(x), x.exp());
            assert!(((a - b) / b).abs() < 3e-7, "x={x} {a} {b}");
            x += 0.0137;
        }
    }
}
