//! `scaled_dot_product_attention`: a fused, flash-style CPU kernel.
//!
//! The forward walks each block of query rows over blocks of keys with an online
//! softmax (running row max and row sum), so the L x S score matrix never exists
//! in memory: only a `BQ x BK` tile per task. Block products go through the `gemm`
//! crate; the row work (mask, exp, rescale) is compiled for AVX-512 and AVX2 and
//! picked at run time. Tasks are (batch, query block) pairs run with rayon.
//!
//! The op is a Candle `CustomOp3` over (q, k, v). Its backward is the
//! flash-attention backward: P is recomputed tile by tile from the per-row
//! logsumexp saved by the forward, then `dV = P^T dO`, `dS = P * (dP - rowsum(dO*O))`,
//! `dQ = scale * dS K`, `dK = scale * dS^T Q`. Broadcast batch dims and grouped-query
//! heads are handled with per-batch offset tables; gradients of shared k/v heads
//! (or broadcast inputs) are accumulated afterwards.
//!
//! Dropout uses a counter-based generator (SplitMix64 of a seed and the
//! (batch, row, column) index), so the backward sees the very same mask.
use crate::dtype::DT;
use crate::errors::{dtype_err, shape_err, value_err, OpResult};
use crate::tensor::PyTensor;
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Result, Shape, Storage, Tensor};
use pyo3::prelude::*;
use crate::parallel::SyncPtr;
use rayon::prelude::*;
use std::sync::Mutex;

const OP: &str = "scaled_dot_product_attention";

/// Query rows per forward task.
const BQ: usize = 64;
/// Keys per forward tile.
const BK: usize = 256;
const _: () = assert!(BK % 64 == 0, "K panels are 64 keys wide");
/// Query rows / keys per backward tile.
const BQ_B: usize = 64;
const BK_B: usize = 128;

/// The float types the kernel runs on (f16/bf16 are computed in f32).
trait AF:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + candle_core::WithDType
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    const NEG_INF: Self;
    const INF: Self;
    /// `FMA`: the caller runs with FMA enabled (`kernels::madd`).
    fn exp_<const FMA: bool>(self) -> Self;
    /// `exp(x)` for `x <= 0` or `-inf` (giving exactly 0), with no branch.
    fn exp_np_<const FMA: bool>(self) -> Self;
    fn ln_(self) -> Self;
    fn from_f64_(v: f64) -> Self;
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    fn storage(v: Vec<Self>) -> CpuStorage;
}
impl AF for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    const INF: f32 = f32::INFINITY;
    #[inline(always)]
    fn exp_<const FMA: bool>(self) -> f32 {
        crate::kernels::fast_exp::<FMA>(self)
    }
    #[inline(always)]
    fn exp_np_<const FMA: bool>(self) -> f32 {
        crate::kernels::fast_exp_nonpos::<FMA>(self)
    }
    fn ln_(self) -> f32 {
        self.ln()
    }
    fn from_f64_(v: f64) -> f32 {
        v as f32
    }
    fn slice(s: &CpuStorage) -> Option<&[f32]> {
        match s {
            CpuStorage::F32(v) => Some(v),
            _ => None,
        }
    }
    fn storage(v: Vec<f32>) -> CpuStorage {
        CpuStorage::F32(v)
    }
}
impl AF for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    const INF: f64 = f64::INFINITY;
    #[inline(always)]
    fn exp_<const FMA: bool>(self) -> f64 {
        self.exp()
    }
    #[inline(always)]
    fn exp_np_<const FMA: bool>(self) -> f64 {
        self.exp()
    }
    fn ln_(self) -> f64 {
        self.ln()
    }
    fn from_f64_(v: f64) -> f64 {
        v
    }
    fn slice(s: &CpuStorage) -> Option<&[f64]> {
        match s {
            CpuStorage::F64(v) => Some(v),
            _ => None,
        }
    }
    fn storage(v: Vec<f64>) -> CpuStorage {
        CpuStorage::F64(v)
    }
}

#[inline(always)]
fn fmax<T: AF>(a: T, b: T) -> T {
    if a > b { a } else { b }
}

/// Which compiled variant of the row loops to run.
#[derive(Clone, Copy)]
enum Simd {
    Plain,
    #[allow(dead_code)]
    Avx2,
    #[allow(dead_code)]
    Avx512,
}

fn simd_level() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        let fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if fma && std::is_x86_feature_detected!("avx512f") {
            return Simd::Avx512;
        }
        if fma {
            return Simd::Avx2;
        }
    }
    Simd::Plain
}

/// Everything about the shapes: sizes and, per output batch entry `n`, where
/// its q / k / v / mask data start (broadcast and grouped heads map several
/// `n` onto one input slice).
#[derive(Clone, Debug)]
struct Geo {
    n: usize,
    l: usize,
    s: usize,
    d: usize,
    dv: usize,
    q_off: Vec<usize>,
    k_off: Vec<usize>,
    v_off: Vec<usize>,
    m_off: Vec<usize>,
    /// Mask strides along rows and columns (0 where the mask broadcasts).
    m_rs: usize,
    m_cs: usize,
    /// Whether each input's offsets are all distinct (no broadcasting), so
    /// gradients can be written in place without a reduction.
    q_inj: bool,
    k_inj: bool,
    v_inj: bool,
    q_len: usize,
    k_len: usize,
    v_len: usize,
    /// Elements between consecutive rows (sequence positions) of q, k, v and the
    /// output. The forward reads transposed head views in place, so these need not
    /// be d / dv; the backward's geometry is always the contiguous one.
    q_rs: usize,
    k_rs: usize,
    v_rs: usize,
    o_rs: usize,
    /// Where output entry `n` starts.
    o_off: Vec<usize>,
    /// The distinct k / v slices (their start offsets) and which one entry `n` reads:
    /// K and V are packed once per slice, however many entries share it.
    k_slices: Vec<usize>,
    k_idx: Vec<usize>,
    v_slices: Vec<usize>,
    v_idx: Vec<usize>,
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    causal: bool,
    scale: f64,
    dropout: f64,
    seed: u64,
    /// Keep the per-row logsumexp for a backward; inference skips it (a log per row).
    lse: bool,
}

impl Cfg {
    /// `(threshold, 1/(1-p))`: a contribution is kept when its 32-bit hash >= threshold.
    fn drop_params(&self) -> Option<(u64, f64)> {
        if self.dropout <= 0.0 {
            return None;
        }
        let thr = (self.dropout * 4_294_967_296.0).round() as u64;
        let inv = if self.dropout < 1.0 { 1.0 / (1.0 - self.dropout) } else { 0.0 };
        Some((thr, inv))
    }
}

#[inline(always)]
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The dropout multiplier (0 or 1/(1-p)) of entry (n, i, j): a pure function of the index.
#[inline(always)]
fn keep_factor<T: AF>(seed: u64, idx: u64, thr: u64, inv: T) -> T {
    let h = splitmix(seed ^ idx.wrapping_mul(0xD1B5_4A32_D192_ED03)) >> 32;
    if h >= thr { inv } else { T::ZERO }
}

/// Add the mask row to a tile row and cut it at `lim` (causal); returns the row max.
#[inline(always)]
fn prep_row<T: AF>(sc: &mut [T], mask: Option<&[T]>, m_cs: usize, lim: usize) -> T {
    let w = sc.len();
    if let Some(mrow) = mask {
        if m_cs == 1 {
            for (x, &m) in sc[..lim].iter_mut().zip(&mrow[..lim]) {
                *x = *x + m;
            }
        } else {
            let m = mrow[0];
            for x in sc[..lim].iter_mut() {
                *x = *x + m;
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
fn exp_row<T: AF, const FMA: bool>(sc: &mut [T], m: T) -> T {
    let mut acc = [T::ZERO; 16];
    let mut chunks = sc.chunks_exact_mut(16);
    for c in &mut chunks {
        for k in 0..16 {
            let x = c[k];
            let p = (x - m).exp_np_::<FMA>();
            c[k] = p;
            acc[k] = acc[k] + p;
        }
    }
    let mut s = T::ZERO;
    for x in chunks.into_remainder() {
        let p = (*x - m).exp_np_::<FMA>();
        *x = p;
        s = s + p;
    }
    for a in acc {
        s = s + a;
    }
    s
}

/// `exp_row` for float32 rows with AVX-512's `vscalefps`: exp(x - m) = 2^n * 2^f
/// with t = (x - m) log2(e) = n + f, |f| <= 1/2, so the power of two needs no
/// integer bit tricks and no range clamp of n: 13 vector instructions per 16 scores
/// instead of 18, ~5% of the whole attention forward. A ragged tail is read as -inf
/// (exp 0) and stored under a lane mask; exp(d) for d < -87 is 0 (see below).
/// Max relative error 1e-7 (tested).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn exp_row_f32(sc: &mut [f32], m: f32) -> f32 {
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
        let x = _mm512_mask_loadu_ps(ninf, km, p.add(i));
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
        _mm512_mask_storeu_ps(p.add(i), km, e);
        acc = _mm512_add_ps(acc, e);
        i += 16;
    }
    _mm512_reduce_add_ps(acc)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn exp_row_f32(_: &mut [f32], _: f32) -> f32 {
    unreachable!("called only where AVX-512 was detected")
}

/// Whether `exp_row_fast` may take the AVX-512 float32 kernel for `T`.
fn fast_exp<T: AF>() -> bool {
    std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && matches!(simd_level(), Simd::Avx512)
}

/// `exp_row`, through `exp_row_f32` when `fast` (from `fast_exp::<T>()`).
#[inline(always)]
fn exp_row_fast<T: AF, const FMA: bool>(sc: &mut [T], m: T, fast: bool) -> T {
    if fast {
        // SAFETY: `fast` means T is f32 and AVX-512 was detected.
        unsafe {
            let s = exp_row_f32(std::slice::from_raw_parts_mut(sc.as_mut_ptr() as *mut f32, sc.len()), std::mem::transmute_copy(&m));
            std::mem::transmute_copy(&s)
        }
    } else {
        exp_row::<T, FMA>(sc, m)
    }
}

/// log2(e) = LOG2E_HI + LOG2E_LO, the first part rounded to float32.
const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
const LOG2E_LO: f32 = 1.925_963e-8;

/// 2^f - 1 = f (c0 + f (c1 + ... f c5)) on [-1/2, 1/2]: a relative-error minimax fit.
const EXP2_POLY: [f32; 6] = [0.693_147_2, 0.240_226_48, 0.055_503_324, 0.009_618_437, 0.001_339_887_5, 0.000_153_533_6];

/// `dst (m x n) = beta * lhs (m x k) * rhs (k x n) [+ dst]`, strides in elements.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn mm<T: AF>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: usize,
    accumulate: bool,
    lhs: *const T,
    lhs_rs: usize,
    lhs_cs: usize,
    rhs: *const T,
    rhs_rs: usize,
    rhs_cs: usize,
    beta: T,
) {
    if m == 0 || n == 0 {
        return;
    }
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs as isize,
        accumulate,
        lhs,
        lhs_cs as isize,
        lhs_rs as isize,
        rhs,
        rhs_cs as isize,
        rhs_rs as isize,
        T::ONE,
        beta,
        false,
        false,
        false,
        gemm::Parallelism::None,
    );
}

struct Inputs<'a, T> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    mask: Option<&'a [T]>,
}

/// Per-thread scratch of the forward.
struct FwdWs<T> {
    sc: Vec<T>,
    acc: Vec<T>,
    m: Vec<T>,
    l: Vec<T>,
    /// Row maxes of the current score tile, when the tile store computed them.
    m_blk: Vec<T>,
}

/// K transposed into (d x 64) panels (sp keys, a multiple of 64) and V padded to (s, dvp) per kv slice, with sp and dvp
/// rounded up to 16 lanes, for the f32 AVX-512 micro-kernel (no per-tile packing).
struct Packed {
    kt: Vec<f32>,
    vp: Vec<f32>,
    sp: usize,
    /// Keys per K^T panel: 64, or all of them (rounded to 16) when fewer.
    pw: usize,
    dvp: usize,
}

fn pack(g: &Geo, k: &[f32], v: &[f32]) -> Packed {
    let (s, d, dv) = (g.s, g.d, g.dv);
    let dvp = dv.div_ceil(16) * 16;
    let (nk, nv) = (g.k_slices.len(), g.v_slices.len());
    let (k_rs, v_rs) = (g.k_rs, g.v_rs);
    // K^T in panels of 64 keys: panel p holds [d][64] contiguous, so the
    // micro-kernel streams it (a plain (d, s) transpose would alias in L1).
    // Short sequences take one panel of s keys rounded to 16, not 64.
    let pw = s.div_ceil(16).clamp(1, 4) * 16;
    let sp = s.div_ceil(pw) * pw;
    // Each panel row is written left to right (reading the key rows, which sit in
    // L1, with a stride); columns past the last key are zeroed, nothing else is.
    let kt = crate::parallel::filled(nk * d * sp, |kt| {
        crate::parallel::for_chunks(kt, d * sp, crate::parallel::par_ok(nk * d * sp), |u, dst| {
            let src = &k[g.k_slices[u]..];
            for (pi, panel) in dst.chunks_mut(d * pw).enumerate() {
                let j0 = pi * pw;
                let keys = s.min(j0 + pw) - j0;
                if keys > 0 && (j0 + keys - 1) * k_rs + d <= src.len() && pw * k_rs <= i32::MAX as usize {
                    // SAFETY: the packed path runs only where AVX-512 was detected; the
                    // check above keeps every gathered element inside `src`, and each
                    // panel row is pw (a multiple of 16) elements long.
                    unsafe { transpose_panel(src.as_ptr().add(j0 * k_rs), k_rs, keys, d, pw, panel.as_mut_ptr() as *mut f32) };
                    continue;
                }
                for (dd, prow) in panel.chunks_mut(pw).enumerate() {
                    for (jj, o) in prow[..keys].iter_mut().enumerate() {
                        o.write(src[(j0 + jj) * k_rs + dd]);
                    }
                    for o in prow[keys..].iter_mut() {
                        o.write(0.0);
                    }
                }
            }
        })
    });
    let vp = if dvp == dv {
        Vec::new()
    } else {
        let mut vp = vec![0f32; nv * s * dvp];
        if nv > 0 && s * dvp > 0 {
            vp.par_chunks_mut(s * dvp).enumerate().for_each(|(u, dst)| {
                let base = g.v_slices[u];
                for j in 0..s {
                    dst[j * dvp..j * dvp + dv].copy_from_slice(&v[base + j * v_rs..base + j * v_rs + dv]);
                }
            });
        }
        vp
    };
    Packed { kt, vp, sp, pw, dvp }
}

/// Panel row `dd` = element `dd` of keys 0..keys (rows `k_rs` apart), zeros up to `pw`:
/// 16 keys per masked gather instead of one scattered store per element.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose_panel(src: *const f32, k_rs: usize, keys: usize, d: usize, pw: usize, dst: *mut f32) {
    use std::arch::x86_64::*;
    let lanes = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(k_rs as i32));
    for dd in 0..d {
        let mut jb = 0;
        while jb < pw {
            let live = keys.saturating_sub(jb).min(16);
            let km: __mmask16 = if live >= 16 { 0xFFFF } else { ((1u32 << live) - 1) as __mmask16 };
            let v = if km == 0 {
                _mm512_setzero_ps()
            } else {
                _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), km, lanes, src.add(jb * k_rs + dd) as *const f32)
            };
            _mm512_storeu_ps(dst.add(dd * pw + jb), v);
            jb += 16;
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn transpose_panel(_: *const f32, _: usize, _: usize, _: usize, _: usize, _: *mut f32) {
    unreachable!("the packed kernel runs only with AVX-512")
}

/// `C[R x 16*NC] (+)= alpha * A[R x k] B[k x 16*NC]`, A rows of stride `a_rs`
/// (unit stride along k), B rows of stride `b_rs`: accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn ukr<const R: usize, const NC: usize>(k: usize, a: *const f32, a_rs: usize, b: *const f32, b_rs: usize, c: *mut f32, c_rs: usize, add: bool, alpha: f32, ep: Epi) {
    use std::arch::x86_64::*;
    if !ep.mask.is_null() {
        // The mask tile comes from L3 in rows 4 KiB+ apart, which the hardware
        // prefetcher does not follow: ask for it now, use it after the k loop.
        for r in 0..R {
            for cc in 0..NC {
                _mm_prefetch::<_MM_HINT_T0>(ep.mask.add(r * ep.m_rs + cc * 16) as *const i8);
            }
        }
    }
    let mut acc = [[_mm512_setzero_ps(); NC]; R];
    let mut kk = 0;
    while kk < k {
        let bp = b.add(kk * b_rs);
        let mut bv = [_mm512_setzero_ps(); NC];
        let mut cc = 0;
        while cc < NC {
            bv[cc] = _mm512_loadu_ps(bp.add(cc * 16));
            cc += 1;
        }
        let mut r = 0;
        while r < R {
            let av = _mm512_set1_ps(*a.add(r * a_rs + kk));
            let mut cc = 0;
            while cc < NC {
                acc[r][cc] = _mm512_fmadd_ps(av, bv[cc], acc[r][cc]);
                cc += 1;
            }
            r += 1;
        }
        kk += 1;
    }
    let al = _mm512_set1_ps(alpha);
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut r = 0;
    while r < R {
        let mut mx = ninf;
        let rl = ep.row_lim(r);
        let mut cc = 0;
        while cc < NC {
            let cp = c.add(r * c_rs + cc * 16);
            // Lanes at or past the row's limit: -inf, and the mask is not read there
            // (a masked load does not touch memory in masked-off lanes).
            let live = rl.saturating_sub(cc * 16);
            let km: __mmask16 = if live >= 16 { 0xFFFF } else { ((1u32 << live) - 1) as __mmask16 };
            let v = if add {
                _mm512_fmadd_ps(acc[r][cc], al, _mm512_loadu_ps(cp))
            } else if !ep.mask.is_null() {
                _mm512_fmadd_ps(acc[r][cc], al, _mm512_maskz_loadu_ps(km, ep.mask.add(r * ep.m_rs + cc * 16)))
            } else {
                _mm512_mul_ps(acc[r][cc], al)
            };
            let v = if km == 0xFFFF { v } else { _mm512_mask_blend_ps(km, ninf, v) };
            _mm512_storeu_ps(cp, v);
            mx = _mm512_max_ps(mx, v);
            cc += 1;
        }
        if !ep.rmax.is_null() {
            let p = ep.rmax.add(r);
            *p = (*p).max(_mm512_reduce_max_ps(mx));
        }
        r += 1;
    }
}

/// What the score tile's store also does: add a mask tile (rows `m_rs` apart,
/// unit column stride) and fold each row's max into `rmax`. Doing it while the
/// tile is still in registers saves two passes over it in the row loop.
#[derive(Clone, Copy)]
struct Epi {
    mask: *const f32,
    m_rs: usize,
    rmax: *mut f32,
    /// Columns from this tile's first on that take part (the rest are padding up to
    /// 16 lanes, or past the end of the mask row): stored as -inf, never read.
    lim: usize,
    /// Causal: row r keeps columns below `diag + r + 1` (the query index minus the
    /// key index of the tile's corner); `None` when not causal.
    diag: Option<isize>,
}

impl Epi {
    const NONE: Epi = Epi { mask: std::ptr::null(), m_rs: 0, rmax: std::ptr::null_mut(), lim: usize::MAX, diag: None };
    #[inline(always)]
    unsafe fn at(self, r0: usize, c0: usize) -> Epi {
        Epi {
            mask: if self.mask.is_null() { self.mask } else { self.mask.add(r0 * self.m_rs + c0) },
            m_rs: self.m_rs,
            rmax: if self.rmax.is_null() { self.rmax } else { self.rmax.add(r0) },
            lim: self.lim.saturating_sub(c0),
            diag: self.diag.map(|d| d + r0 as isize - c0 as isize),
        }
    }

    /// Columns of row `r` that take part, counted from the tile's first.
    #[inline(always)]
    fn row_lim(self, r: usize) -> usize {
        match self.diag {
            Some(d) => self.lim.min((d + r as isize + 1).max(0) as usize),
            None => self.lim,
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn ukr<const R: usize, const NC: usize>(_: usize, _: *const f32, _: usize, _: *const f32, _: usize, _: *mut f32, _: usize, _: bool, _: f32, _: Epi) {
    unreachable!("the packed kernel runs only with AVX-512")
}

/// `C[m x n] (+)= alpha * A B` with n a multiple of 16, by 6 x 64 register tiles;
/// each 64 columns of B start `b_c64` elements after the previous ones.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn mm16(m: usize, n: usize, k: usize, a: *const f32, a_rs: usize, b: *const f32, b_rs: usize, b_c64: usize, c: *mut f32, c_rs: usize, add: bool, alpha: f32, ep: Epi) {
    macro_rules! rows {
        ($nc:literal, $c0:expr) => {{
            let mut r0 = 0;
            while r0 < m {
                let (ap, cp) = (a.add(r0 * a_rs), c.add(r0 * c_rs + $c0));
                let bp = b.add($c0 / 64 * b_c64);
                let e = ep.at(r0, $c0);
                match m - r0 {
                    1 => ukr::<1, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    2 => ukr::<2, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    3 => ukr::<3, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    4 => ukr::<4, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    5 => ukr::<5, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                    _ => ukr::<6, $nc>(k, ap, a_rs, bp, b_rs, cp, c_rs, add, alpha, e),
                }
                r0 += 6;
            }
        }};
    }
    let mut c0 = 0;
    while c0 < n {
        match (n - c0) / 16 {
            1 => rows!(1, c0),
            2 => rows!(2, c0),
            3 => rows!(3, c0),
            _ => rows!(4, c0),
        }
        c0 += 64;
    }
}

/// One forward task: query rows `i0..i1` of batch entry `n`, all key blocks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fwd_task<T: AF, const FMA: bool>(g: &Geo, c: &Cfg, x: &Inputs<T>, pk: Option<&Packed>, n: usize, i0: usize, i1: usize, out: SyncPtr<T>, lse: SyncPtr<T>, ws: &mut FwdWs<T>) {
    let (l, s, d, dv) = (g.l, g.s, g.d, g.dv);
    let h = i1 - i0;
    let scale = T::from_f64_(c.scale);
    let drop = c.drop_params().map(|(t, inv)| (t, T::from_f64_(inv)));
    let fast = fast_exp::<T>();
    let FwdWs { sc, acc, m, l: lsum, m_blk } = ws;
    let acc_rs = pk.map_or(dv, |p| p.dvp);
    acc[..h * acc_rs].iter_mut().for_each(|a| *a = T::ZERO);
    m[..h].iter_mut().for_each(|a| *a = T::NEG_INF);
    lsum[..h].iter_mut().for_each(|a| *a = T::ZERO);
    let qp = x.q.as_ptr().add(g.q_off[n] + i0 * g.q_rs);
    // Causal rows i attend keys j <= i: the block needs keys below i1.
    let s_end = if c.causal { s.min(i1) } else { s };
    let mut j0 = 0;
    while j0 < s_end {
        let w = BK.min(s_end - j0);
        let vp = x.v.as_ptr().add(g.v_off[n] + j0 * g.v_rs);
        let mut fused = false;
        // S = scale * Q K^T (h x w), rows of stride sc_rs.
        let sc_rs = match pk {
            Some(p) => {
                let wp = w.div_ceil(16) * 16;
                let kt = p.kt.as_ptr().add(g.k_idx[n] * d * p.sp + j0 * d);
                // Fuse the mask add, the causal cut, the -inf of padded columns and
                // the row max into the tile store when the mask is a plain row slice.
                fused = x.mask.is_none() || g.m_cs == 1;
                let ep = if fused {
                    m_blk[..h].iter_mut().for_each(|a| *a = T::NEG_INF);
                    Epi {
                        mask: x.mask.map_or(std::ptr::null(), |mk| mk.as_ptr().add(g.m_off[n] + i0 * g.m_rs + j0) as *const f32),
                        m_rs: g.m_rs,
                        rmax: m_blk.as_mut_ptr() as *mut f32,
                        lim: w,
                        diag: c.causal.then_some(i0 as isize - j0 as isize),
                    }
                } else {
                    Epi::NONE
                };
                mm16(h, wp, d, qp as *const f32, g.q_rs, kt, p.pw, d * p.pw, sc.as_mut_ptr() as *mut f32, wp, false, c.scale as f32, ep);
                wp
            }
            None => {
                let kp = x.k.as_ptr().add(g.k_off[n] + j0 * g.k_rs);
                mm(h, w, d, sc.as_mut_ptr(), w, false, qp, g.q_rs, 1, kp, 1, g.k_rs, scale);
                w
            }
        };
        for r in 0..h {
            let i = i0 + r;
            // A fused tile's row is -inf from its limit to the padded width (a multiple
            // of 16), so the exp runs over whole vectors.
            let row = &mut sc[r * sc_rs..r * sc_rs + if fused { sc_rs } else { w }];
            let lim = if c.causal { (i + 1).saturating_sub(j0).min(w) } else { w };
            let bmax = if fused {
                m_blk[r]
            } else {
                let mrow = x.mask.map(|mk| &mk[g.m_off[n] + i * g.m_rs + j0 * g.m_cs..]);
                prep_row(row, mrow, g.m_cs, lim)
            };
            let m_new = fmax(m[r], bmax);
            if m_new == T::NEG_INF {
                row.iter_mut().for_each(|p| *p = T::ZERO);
                continue;
            }
            let ps = exp_row_fast::<T, FMA>(row, m_new, fast);
            if m[r] != m_new {
                let alpha = if m[r] == T::NEG_INF { T::ZERO } else { (m[r] - m_new).exp_::<FMA>() };
                lsum[r] = lsum[r] * alpha;
                for a in acc[r * acc_rs..r * acc_rs + dv].iter_mut() {
                    *a = *a * alpha;
                }
                m[r] = m_new;
            }
            lsum[r] = lsum[r] + ps;
            if let Some((thr, inv)) = drop {
                let base = ((n * l + i) * s + j0) as u64;
                for (jj, p) in row[..w].iter_mut().enumerate() {
                    *p = *p * keep_factor(c.seed, base + jj as u64, thr, inv);
                }
            }
        }
        // acc += P V (h x dv).
        match pk {
            Some(p) => {
                let (vpp, v_rs) = if p.vp.is_empty() { (vp as *const f32, g.v_rs) } else { (p.vp.as_ptr().add(g.v_idx[n] * s * p.dvp + j0 * p.dvp), p.dvp) };
                mm16(h, p.dvp, w, sc.as_ptr() as *const f32, sc_rs, vpp, v_rs, 64, acc.as_mut_ptr() as *mut f32, p.dvp, true, 1.0, Epi::NONE);
            }
            None => mm(h, dv, w, acc.as_mut_ptr(), dv, true, sc.as_ptr(), w, 1, vp, g.v_rs, 1, T::ONE),
        }
        j0 += w;
    }
    let o = out.0.add(g.o_off[n] + i0 * g.o_rs);
    for r in 0..h {
        let ls = lsum[r];
        let dst = std::slice::from_raw_parts_mut(o.add(r * g.o_rs), dv);
        if ls == T::ZERO {
            dst.iter_mut().for_each(|v| *v = T::ZERO);
            if c.lse {
                *lse.0.add(n * l + i0 + r) = T::INF;
            }
        } else {
            let inv = T::ONE / ls;
            for (v, &a) in dst.iter_mut().zip(&acc[r * acc_rs..r * acc_rs + dv]) {
                *v = a * inv;
            }
            if c.lse {
                *lse.0.add(n * l + i0 + r) = m[r] + ls.ln_();
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn fwd_task_avx512<T: AF>(g: &Geo, c: &Cfg, x: &Inputs<T>, pk: Option<&Packed>, n: usize, i0: usize, i1: usize, out: SyncPtr<T>, lse: SyncPtr<T>, ws: &mut FwdWs<T>) {
    fwd_task::<T, true>(g, c, x, pk, n, i0, i1, out, lse, ws)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn fwd_task_avx2<T: AF>(g: &Geo, c: &Cfg, x: &Inputs<T>, n: usize, i0: usize, i1: usize, out: SyncPtr<T>, lse: SyncPtr<T>, ws: &mut FwdWs<T>) {
    fwd_task::<T, true>(g, c, x, None, n, i0, i1, out, lse, ws)
}

/// The forward over all (batch, query block) tasks: output (n, l, dv) and logsumexp (n, l).
fn forward<T: AF>(g: &Geo, c: &Cfg, x: &Inputs<T>) -> (Vec<T>, Vec<T>) {
    // Every row of `out` (and of `lse` when kept) is written by exactly one task below.
    let mut out: Vec<T> = Vec::with_capacity(g.n * g.l * g.dv);
    let mut lse: Vec<T> = Vec::with_capacity(if c.lse { g.n * g.l } else { 0 });
    let nqb = g.l.div_ceil(BQ);
    let (op, lp) = (SyncPtr(out.as_mut_ptr()), SyncPtr(lse.as_mut_ptr()));
    let simd = simd_level();
    // The register-tiled f32 path (AVX-512): K and V repacked once per call.
    let packed = if matches!(simd, Simd::Avx512) && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && g.n * g.l > 0 {
        // SAFETY: T is f32 (checked just above).
        let (k, v) = unsafe { (std::slice::from_raw_parts(x.k.as_ptr() as *const f32, x.k.len()), std::slice::from_raw_parts(x.v.as_ptr() as *const f32, x.v.len())) };
        Some(pack(g, k, v))
    } else {
        None
    };
    let pk = packed.as_ref();
    let bk = BK.min(g.s.max(1)).div_ceil(16) * 16;
    let accw = g.dv.div_ceil(16) * 16;
    // Scratch is made once per rayon split: a minimum split length keeps that to
    // a few per thread when there are many small tasks (short sequences).
    let tasks = g.n * nqb;
    let min_len = (tasks / (8 * rayon::current_num_threads())).max(1);
    (0..tasks).into_par_iter().with_min_len(min_len).for_each_init(
        || FwdWs { sc: vec![T::ZERO; BQ * bk], acc: vec![T::ZERO; BQ * accw], m: vec![T::ZERO; BQ], l: vec![T::ZERO; BQ], m_blk: vec![T::ZERO; BQ] },
        |ws, t| {
            let (n, qb) = (t / nqb, t % nqb);
            let i0 = qb * BQ;
            let i1 = (i0 + BQ).min(g.l);
            // SAFETY: tasks write disjoint rows of `out` / `lse`; CPU features were detected.
            unsafe {
                match simd {
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx512 => fwd_task_avx512(g, c, x, pk, n, i0, i1, op, lp, ws),
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx2 => fwd_task_avx2(g, c, x, n, i0, i1, op, lp, ws),
                    _ => fwd_task::<T, false>(g, c, x, None, n, i0, i1, op, lp, ws),
                }
            }
        },
    );
    // SAFETY: the tasks above wrote every element (see the allocation).
    unsafe {
        out.set_len(g.n * g.l * g.dv);
        if c.lse {
            lse.set_len(g.n * g.l);
        }
    }
    (out, lse)
}

/// Per-thread scratch of the backward.
struct BwdWs<T> {
    p: Vec<T>,
    pd: Vec<T>,
    dp: Vec<T>,
}

struct BwdIo<'a, T> {
    x: Inputs<'a, T>,
    d_o: &'a [T],
    lse: &'a [T],
    delta: &'a [T],
    dq: SyncPtr<T>,
    dk: SyncPtr<T>,
    dv: SyncPtr<T>,
}

/// One backward task: batch entry `n`, key blocks `c, c + stride, ...`; dK and dV
/// of those blocks are owned by the task, dQ goes to `dq_base` (exclusive to the task).
#[inline(always)]
unsafe fn bwd_task<T: AF, const FMA: bool>(g: &Geo, c: &Cfg, io: &BwdIo<T>, n: usize, chunk: usize, stride: usize, dq_base: *mut T, dk_base: *mut T, dv_base: *mut T, ws: &mut BwdWs<T>) {
    let (l, s, d, dvn) = (g.l, g.s, g.d, g.dv);
    let x = &io.x;
    let scale = T::from_f64_(c.scale);
    let fast = fast_exp::<T>();
    let drop = c.drop_params().map(|(t, inv)| (t, T::from_f64_(inv)));
    let nkb = s.div_ceil(BK_B);
    let BwdWs { p, pd, dp } = ws;
    let mut kb = chunk;
    while kb < nkb {
        let j0 = kb * BK_B;
        let w = BK_B.min(s - j0);
        let kp = x.k.as_ptr().add(g.k_off[n] + j0 * d);
        let vp = x.v.as_ptr().add(g.v_off[n] + j0 * dvn);
        let dkp = dk_base.add(j0 * d);
        let dvp = dv_base.add(j0 * dvn);
        let mut i0 = if c.causal { (j0 / BQ_B) * BQ_B } else { 0 };
        while i0 < l {
            let h = BQ_B.min(l - i0);
            let qp = x.q.as_ptr().add(g.q_off[n] + i0 * d);
            let dop = io.d_o.as_ptr().add((n * l + i0) * dvn);
            mm(h, w, d, p.as_mut_ptr(), w, false, qp, d, 1, kp, 1, d, scale);
            for r in 0..h {
                let i = i0 + r;
                let row = &mut p[r * w..(r + 1) * w];
                let lse_i = io.lse[n * l + i];
                if lse_i == T::INF {
                    row.iter_mut().for_each(|v| *v = T::ZERO);
                    continue;
                }
                let lim = if c.causal { (i + 1).saturating_sub(j0).min(w) } else { w };
                let mrow = x.mask.map(|mk| &mk[g.m_off[n] + i * g.m_rs + j0 * g.m_cs..]);
                prep_row(row, mrow, g.m_cs, lim);
                exp_row_fast::<T, FMA>(row, lse_i, fast);
            }
            // dP = dO V^T (h x w).
            mm(h, w, dvn, dp.as_mut_ptr(), w, false, dop, dvn, 1, vp, 1, dvn, T::ONE);
            for r in 0..h {
                let i = i0 + r;
                let di = io.delta[n * l + i];
                let prow = &p[r * w..(r + 1) * w];
                let dprow = &mut dp[r * w..(r + 1) * w];
                if let Some((thr, inv)) = drop {
                    let pdrow = &mut pd[r * w..(r + 1) * w];
                    let base = ((n * l + i) * s + j0) as u64;
                    for jj in 0..w {
                        let f = keep_factor(c.seed, base + jj as u64, thr, inv);
                        pdrow[jj] = prow[jj] * f;
                        dprow[jj] = prow[jj] * (dprow[jj] * f - di);
                    }
                } else {
                    for (dpv, &pv) in dprow.iter_mut().zip(prow) {
                        *dpv = pv * (*dpv - di);
                    }
                }
            }
            let pk = if drop.is_some() { pd.as_ptr() } else { p.as_ptr() };
            // dV_j += P^T dO ; dK_j += scale dS^T Q ; dQ_i += scale dS K.
            mm(w, dvn, h, dvp, dvn, true, pk, 1, w, dop, dvn, 1, T::ONE);
            mm(w, d, h, dkp, d, true, dp.as_ptr(), 1, w, qp, d, 1, scale);
            mm(h, d, w, dq_base.add(i0 * d), d, true, dp.as_ptr(), w, 1, kp, d, 1, scale);
            i0 += h;
        }
        kb += stride;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn bwd_task_avx512<T: AF>(g: &Geo, c: &Cfg, io: &BwdIo<T>, n: usize, chunk: usize, stride: usize, dq: *mut T, dk: *mut T, dv: *mut T, ws: &mut BwdWs<T>) {
    bwd_task::<T, true>(g, c, io, n, chunk, stride, dq, dk, dv, ws)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn bwd_task_avx2<T: AF>(g: &Geo, c: &Cfg, io: &BwdIo<T>, n: usize, chunk: usize, stride: usize, dq: *mut T, dk: *mut T, dv: *mut T, ws: &mut BwdWs<T>) {
    bwd_task::<T, true>(g, c, io, n, chunk, stride, dq, dk, dv, ws)
}

/// Add `full` (n entries of `block` elements) into `dst` at `off[n]`, in parallel over distinct targets.
fn scatter_add<T: AF>(dst: &mut [T], full: &[T], off: &[usize], block: usize) {
    if block == 0 {
        return;
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (n, &o) in off.iter().enumerate() {
        groups.entry(o).or_default().push(n);
    }
    let dp = SyncPtr(dst.as_mut_ptr());
    groups.into_par_iter().for_each(|(o, ns)| {
        // SAFETY: distinct offsets address disjoint blocks of `dst`.
        let tgt = unsafe { std::slice::from_raw_parts_mut(dp.ptr().add(o), block) };
        for n in ns {
            for (a, &b) in tgt.iter_mut().zip(&full[n * block..(n + 1) * block]) {
                *a = *a + b;
            }
        }
    });
}

/// Gradients of q, k, v (each the size of its input).
fn backward<T: AF>(g: &Geo, c: &Cfg, x: Inputs<T>, o: &[T], d_o: &[T], lse: &[T]) -> (Vec<T>, Vec<T>, Vec<T>) {
    let (n_, l, s, d, dvn) = (g.n, g.l, g.s, g.d, g.dv);
    // delta_i = rowsum(dO * O).
    let mut delta = vec![T::ZERO; n_ * l];
    if dvn > 0 {
        delta.par_chunks_mut(1024).enumerate().for_each(|(ci, dch)| {
            for (k, dd) in dch.iter_mut().enumerate() {
                let row = ci * 1024 + k;
                let a = &o[row * dvn..(row + 1) * dvn];
                let b = &d_o[row * dvn..(row + 1) * dvn];
                let mut acc = T::ZERO;
                for (&u, &v) in a.iter().zip(b) {
                    acc = acc + u * v;
                }
                *dd = acc;
            }
        });
    }
    let threads = rayon::current_num_threads().max(1);
    let nkb = s.div_ceil(BK_B).max(1);
    // Key-block chunks per batch entry: enough tasks to fill the threads.
    let chunks = threads.div_ceil(n_.max(1)).min(nkb).max(1);
    // Targets: in place when an input has no broadcasting, else full-size then reduced.
    let mut dq_in = vec![T::ZERO; g.q_len];
    let mut dk_in = vec![T::ZERO; g.k_len];
    let mut dv_in = vec![T::ZERO; g.v_len];
    let mut dq_full = if g.q_inj && chunks == 1 { Vec::new() } else { vec![T::ZERO; n_ * chunks * l * d] };
    let mut dk_full = if g.k_inj { Vec::new() } else { vec![T::ZERO; n_ * s * d] };
    let mut dv_full = if g.v_inj { Vec::new() } else { vec![T::ZERO; n_ * s * dvn] };
    let io = BwdIo {
        x,
        d_o,
        lse,
        delta: &delta,
        dq: SyncPtr(if dq_full.is_empty() { dq_in.as_mut_ptr() } else { dq_full.as_mut_ptr() }),
        dk: SyncPtr(if dk_full.is_empty() { dk_in.as_mut_ptr() } else { dk_full.as_mut_ptr() }),
        dv: SyncPtr(if dv_full.is_empty() { dv_in.as_mut_ptr() } else { dv_full.as_mut_ptr() }),
    };
    let (q_direct, k_direct, v_direct) = (dq_full.is_empty(), dk_full.is_empty(), dv_full.is_empty());
    let simd = simd_level();
    let io_ref = &io;
    (0..n_ * chunks).into_par_iter().for_each_init(
        || BwdWs { p: vec![T::ZERO; BQ_B * BK_B], pd: vec![T::ZERO; BQ_B * BK_B], dp: vec![T::ZERO; BQ_B * BK_B] },
        |ws, t| {
            let (n, ch) = (t / chunks, t % chunks);
            // SAFETY: each task owns its key blocks of dk/dv (per n) and its dq region.
            unsafe {
                let dq = if q_direct { io_ref.dq.ptr().add(g.q_off[n]) } else { io_ref.dq.ptr().add((n * chunks + ch) * l * d) };
                let dk = if k_direct { io_ref.dk.ptr().add(g.k_off[n]) } else { io_ref.dk.ptr().add(n * s * d) };
                let dv = if v_direct { io_ref.dv.ptr().add(g.v_off[n]) } else { io_ref.dv.ptr().add(n * s * dvn) };
                match simd {
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx512 => bwd_task_avx512(g, c, io_ref, n, ch, chunks, dq, dk, dv, ws),
                    #[cfg(target_arch = "x86_64")]
                    Simd::Avx2 => bwd_task_avx2(g, c, io_ref, n, ch, chunks, dq, dk, dv, ws),
                    _ => bwd_task::<T, false>(g, c, io_ref, n, ch, chunks, dq, dk, dv, ws),
                }
            }
        },
    );
    drop(io);
    if !dq_full.is_empty() {
        // Sum the chunks of each n into the first, then into the input's layout.
        if chunks > 1 {
            dq_full.par_chunks_mut(chunks * l * d).for_each(|blk| {
                let (first, rest) = blk.split_at_mut(l * d);
                for part in rest.chunks(l * d) {
                    for (a, &b) in first.iter_mut().zip(part) {
                        *a = *a + b;
                    }
                }
            });
        }
        let offs: Vec<usize> = (0..n_).map(|n| g.q_off[n]).collect();
        let firsts: Vec<T> = if chunks > 1 {
            dq_full.chunks(chunks * l * d).flat_map(|b| b[..l * d].iter().copied()).collect()
        } else {
            std::mem::take(&mut dq_full)
        };
        scatter_add(&mut dq_in, &firsts, &offs, l * d);
    }
    if !dk_full.is_empty() {
        scatter_add(&mut dk_in, &dk_full, &g.k_off, s * d);
    }
    if !dv_full.is_empty() {
        scatter_add(&mut dv_in, &dv_full, &g.v_off, s * dvn);
    }
    (dq_in, dk_in, dv_in)
}

fn cpu_slice<'a, T: AF>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [T]> {
    let v = T::slice(s).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: unexpected storage dtype")))?;
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{OP}: expected contiguous inputs"),
    }
}

/// The storage from the layout's first element on: the forward reads strided
/// inputs through their own row and batch strides (see `Geo`).
fn cpu_slice_from<'a, T: AF>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [T]> {
    let v = T::slice(s).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: unexpected storage dtype")))?;
    Ok(&v[l.start_offset()..])
}

fn storage_slice<'a, T: AF>(s: &'a Storage, l: &Layout) -> Result<&'a [T]> {
    match s {
        Storage::Cpu(c) => cpu_slice(c, l),
        _ => candle_core::bail!("{OP}: the fused kernel runs on the CPU"),
    }
}

struct Sdpa {
    geo: Geo,
    /// The backward's geometry (contiguous inputs and output) when the forward's differs.
    geo_c: Option<Geo>,
    /// The output is stored as (..., L, H, dv) and handed out as its transposed view.
    interleave: bool,
    cfg: Cfg,
    /// The additive mask in the compute dtype (its own, unexpanded shape).
    mask: Option<Tensor>,
    out_shape: Vec<usize>,
    /// Per-row logsumexp saved by the forward for the backward.
    lse: Mutex<Option<CpuStorage>>,
}

impl Sdpa {
    fn fwd<T: AF>(&self, q: &[T], k: &[T], v: &[T]) -> Result<(CpuStorage, Shape)> {
        let mask_guard = self.mask.as_ref().map(|m| m.storage_and_layout());
        let mask = match &mask_guard {
            Some((s, l)) => Some(storage_slice::<T>(s, l)?),
            None => None,
        };
        let (out, lse) = forward(&self.geo, &self.cfg, &Inputs { q, k, v, mask });
        *self.lse.lock().unwrap_or_else(|p| p.into_inner()) = Some(T::storage(lse));
        Ok((T::storage(out), Shape::from(self.out_shape.clone())))
    }

    fn bwd_t<T: AF>(&self, q: &Tensor, k: &Tensor, v: &Tensor, o: &Tensor, d_o: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (q, k, v) = (q.contiguous()?, k.contiguous()?, v.contiguous()?);
        let (o, d_o) = if self.interleave {
            // (..., L, H, dv) back to the (..., H, L, dv) the backward reads.
            let r = o.rank();
            (o.transpose(r - 3, r - 2)?.contiguous()?, d_o.transpose(r - 3, r - 2)?.contiguous()?)
        } else {
            (o.clone(), d_o.contiguous()?)
        };
        let geo = self.geo_c.as_ref().unwrap_or(&self.geo);
        let (gq, lq) = q.storage_and_layout();
        let (gk, lk) = k.storage_and_layout();
        let (gv, lv) = v.storage_and_layout();
        let (go, lo) = o.storage_and_layout();
        let (gd, ld) = d_o.storage_and_layout();
        let mask_guard = self.mask.as_ref().map(|m| m.storage_and_layout());
        let mask = match &mask_guard {
            Some((s, l)) => Some(storage_slice::<T>(s, l)?),
            None => None,
        };
        let lse_guard = self.lse.lock().unwrap_or_else(|p| p.into_inner());
        let Some(lse) = lse_guard.as_ref() else { candle_core::bail!("{OP}: backward without a forward") };
        let lse = T::slice(lse).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: logsumexp dtype")))?;
        let x = Inputs {
            q: storage_slice::<T>(&gq, lq)?,
            k: storage_slice::<T>(&gk, lk)?,
            v: storage_slice::<T>(&gv, lv)?,
            mask,
        };
        let (dq, dk, dv) = backward(geo, &self.cfg, x, storage_slice::<T>(&go, lo)?, storage_slice::<T>(&gd, ld)?, lse);
        let dev = Device::Cpu;
        Ok((Tensor::from_vec(dq, q.shape(), &dev)?, Tensor::from_vec(dk, k.shape(), &dev)?, Tensor::from_vec(dv, v.shape(), &dev)?))
    }
}

impl CustomOp3 for Sdpa {
    fn name(&self) -> &'static str {
        "scaled_dot_product_attention"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> Result<(CpuStorage, Shape)> {
        match s1 {
            CpuStorage::F32(_) => self.fwd::<f32>(cpu_slice_from(s1, l1)?, cpu_slice_from(s2, l2)?, cpu_slice_from(s3, l3)?),
            CpuStorage::F64(_) => self.fwd::<f64>(cpu_slice_from(s1, l1)?, cpu_slice_from(s2, l2)?, cpu_slice_from(s3, l3)?),
            _ => candle_core::bail!("{OP}: the fused kernel runs on float32 and float64"),
        }
    }
    fn bwd(&self, q: &Tensor, k: &Tensor, v: &Tensor, res: &Tensor, grad_res: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dq, dk, dv) = match q.dtype() {
            DType::F32 => self.bwd_t::<f32>(q, k, v, res, grad_res)?,
            DType::F64 => self.bwd_t::<f64>(q, k, v, res, grad_res)?,
            d => candle_core::bail!("{OP}: backward for dtype {d:?}"),
        };
        Ok((Some(dq), Some(dk), Some(dv)))
    }
}

/// Strides of a contiguous shape, with 0 where a dim has size 1 (it broadcasts).
fn bcast_strides(dims: &[usize], inner: usize) -> Vec<usize> {
    let mut st = vec![0; dims.len()];
    let mut acc = inner;
    for i in (0..dims.len()).rev() {
        st[i] = if dims[i] == 1 { 0 } else { acc };
        acc *= dims[i];
    }
    st
}

/// A shape as Python prints a tuple: `(2, 3)`, `(8,)`, `()`.
fn fmt(d: &[usize]) -> String {
    let parts: Vec<String> = d.iter().map(|x| x.to_string()).collect();
    if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
}

/// Batch dims of `x` right-aligned to `rank` dims (1 where missing).
fn pad_left(x: &[usize], rank: usize) -> Vec<usize> {
    let mut v = vec![1; rank - x.len()];
    v.extend_from_slice(x);
    v
}

/// Per-n offsets of an input whose (padded) batch dims are `xb` with strides `st`,
/// into an output batch of dims `ob`; `group` divides the index of the last batch
/// dim (grouped heads).
fn offsets(ob: &[usize], xb: &[usize], st: &[usize], group: usize) -> Vec<usize> {
    let n: usize = ob.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; ob.len()];
    for _ in 0..n {
        let mut off = 0;
        for a in 0..ob.len() {
            let i = if a + 1 == ob.len() { idx[a] / group } else { idx[a] };
            off += if xb[a] == 1 { 0 } else { i * st[a] };
        }
        out.push(off);
        for a in (0..ob.len()).rev() {
            idx[a] += 1;
            if idx[a] < ob[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    out
}

/// Batch strides (padded on the left to `rank`, 0 where a dim broadcasts) and row
/// stride of `t` when the forward can read it where it is: on the CPU, in the
/// compute dtype, with unit stride along the feature dim. `None`: it is copied.
fn in_place(t: &Tensor, cdt: DType, rank: usize) -> Option<(Vec<usize>, usize)> {
    let (dims, st) = (t.dims(), t.layout().stride());
    let r = dims.len();
    if !t.device().is_cpu() || t.dtype() != cdt || r < 2 || (st[r - 1] != 1 && dims[r - 1] > 1) {
        return None;
    }
    let mut b = vec![0; rank + 2 - r];
    b.extend(dims[..r - 2].iter().zip(st).map(|(&n, &x)| if n == 1 { 0 } else { x }));
    Some((b, st[r - 2]))
}

/// The distinct values of `off` (sorted) and, for each entry, which one it is.
fn slices(off: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut u = off.to_vec();
    u.sort_unstable();
    u.dedup();
    let idx = off.iter().map(|o| u.binary_search(o).unwrap_or(0)).collect();
    (u, idx)
}

fn injective(off: &[usize]) -> bool {
    let mut v = off.to_vec();
    v.sort_unstable();
    v.windows(2).all(|w| w[0] != w[1])
}

/// `_core._sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)`.
#[pyfunction]
#[pyo3(signature = (query, key, value, attn_mask=None, dropout_p=0.0, is_causal=false, scale=None, enable_gqa=false))]
#[allow(clippy::too_many_arguments)]
fn _sdpa(
    py: Python<'_>,
    query: &Bound<'_, PyTensor>,
    key: &Bound<'_, PyTensor>,
    value: &Bound<'_, PyTensor>,
    attn_mask: Option<&Bound<'_, PyTensor>>,
    dropout_p: f64,
    is_causal: bool,
    scale: Option<f64>,
    enable_gqa: bool,
) -> PyResult<PyTensor> {
    let (q, qdt) = query.get().t_dt();
    let (k, kdt) = key.get().t_dt();
    let (v, vdt) = value.get().t_dt();
    let (qd, kd, vd) = (q.dims().to_vec(), k.dims().to_vec(), v.dims().to_vec());
    if !matches!(qdt, DT::F16 | DT::BF16 | DT::F32 | DT::F64) || qdt != kdt || qdt != vdt {
        return Err(dtype_err(
            OP,
            format!(
                "expected query, key and value of one float dtype, got {}, {} and {} (shapes {}, {}, {})",
                qdt.name(),
                kdt.name(),
                vdt.name(),
                fmt(&qd),
                fmt(&kd),
                fmt(&vd)
            ),
        ));
    }
    if qd.len() < 2 || kd.len() < 2 || vd.len() < 2 {
        return Err(shape_err(
            OP,
            format!("expected query, key and value of at least 2 dims, got shapes {}, {}, {}", fmt(&qd), fmt(&kd), fmt(&vd)),
        ));
    }
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(value_err(OP, format!("dropout_p must be in [0, 1], got {dropout_p}")));
    }
    if is_causal && attn_mask.is_some() {
        return Err(value_err(OP, "attn_mask must not be given together with is_causal=True"));
    }
    let (l, d) = (qd[qd.len() - 2], qd[qd.len() - 1]);
    let (s, dk_) = (kd[kd.len() - 2], kd[kd.len() - 1]);
    let (sv, dv) = (vd[vd.len() - 2], vd[vd.len() - 1]);
    if d != dk_ {
        return Err(shape_err(
            OP,
            format!("query {} and key {} must have the same last dim (embedding size)", fmt(&qd), fmt(&kd)),
        ));
    }
    if s != sv {
        return Err(shape_err(
            OP,
            format!("key {} and value {} must have the same sequence length (dim -2)", fmt(&kd), fmt(&vd)),
        ));
    }
    let (qb, kb, vb) = (&qd[..qd.len() - 2], &kd[..kd.len() - 2], &vd[..vd.len() - 2]);
    let rank = qb.len().max(kb.len()).max(vb.len());
    let (qb, mut kb2, mut vb2) = (pad_left(qb, rank), pad_left(kb, rank), pad_left(vb, rank));
    // Grouped heads: kv head h // (Hq / Hkv) serves query head h.
    let (mut kg, mut vg) = (1, 1);
    let gqa = enable_gqa && qd.len() >= 3 && kd.len() >= 3 && vd.len() >= 3;
    if gqa {
        let hq = qb[rank - 1];
        for (name, xb, g, xd) in [("key", &mut kb2, &mut kg, &kd), ("value", &mut vb2, &mut vg, &vd)] {
            let hk = xb[rank - 1];
            if hk == 0 || hq % hk != 0 {
                return Err(shape_err(
                    OP,
                    format!(
                        "with enable_gqa the number of query heads must be a multiple of the {name} heads, got query {} and {name} {}",
                        fmt(&qd),
                        fmt(xd)
                    ),
                ));
            }
            if hk != hq && hk != 1 {
                *g = hq / hk;
            }
        }
    }
    // The output batch dims: broadcast of q's, k's and v's (grouped heads count as Hq).
    let mut ob = vec![1; rank];
    for a in 0..rank {
        let dims = [
            qb[a],
            if gqa && a + 1 == rank && kg > 1 { qb[a] } else { kb2[a] },
            if gqa && a + 1 == rank && vg > 1 { qb[a] } else { vb2[a] },
        ];
        let mut o = 1;
        for &x in &dims {
            if x != 1 {
                if o != 1 && o != x {
                    return Err(shape_err(
                        OP,
                        format!(
                            "the batch dims of query {}, key {} and value {} do not broadcast",
                            fmt(&qd),
                            fmt(&kd),
                            fmt(&vd)
                        ),
                    ));
                }
                o = x;
            }
        }
        ob[a] = if dims.contains(&0) { 0 } else { o };
    }
    let n: usize = ob.iter().product();
    // The mask: bool (True takes part) or additive float, broadcast to (ob..., l, s).
    let mut m_rs = 0;
    let mut m_cs = 0;
    let mut m_off = Vec::new();
    let cdt = if qdt == DT::F64 { DType::F64 } else { DType::F32 };
    let mask = match attn_mask {
        None => None,
        Some(m) => {
            let (mt, mdt) = m.get().t_dt();
            let md = mt.dims().to_vec();
            if !(mdt == DT::Bool || mdt == DT::F32 || mdt == qdt) {
                return Err(dtype_err(
                    OP,
                    format!("expected attn_mask of dtype bool, float32 or the query's ({}), got {}", qdt.name(), mdt.name()),
                ));
            }
            let full_rank = rank + 2;
            let (ml, ms) = if md.len() >= 2 { (md[md.len() - 2], md[md.len() - 1]) } else { (0, 0) };
            let fits = md.len() >= 2
                && md.len() <= full_rank
                && (ml == l || ml == 1)
                && (ms == s || ms == 1)
                && {
                    let mb = pad_left(&md[..md.len() - 2], rank);
                    mb.iter().zip(&ob).all(|(&x, &o)| x == 1 || x == o)
                };
            if !fits {
                let mut target = ob.clone();
                target.extend([l, s]);
                return Err(shape_err(
                    OP,
                    format!("attn_mask of shape {} does not broadcast to the attention shape {}", fmt(&md), fmt(&target)),
                ));
            }
            let mb = pad_left(&md[..md.len() - 2], rank);
            m_off = offsets(&ob, &mb, &bcast_strides(&mb, ml * ms), 1);
            m_rs = if ml == 1 { 0 } else { ms };
            m_cs = if ms == 1 { 0 } else { 1 };
            let mt = mt.to_device(&Device::Cpu).op(OP)?;
            let add = if mdt == DT::Bool {
                let bits = mt.flatten_all().and_then(|t| t.to_vec1::<u8>()).op(OP)?;
                if cdt == DType::F64 {
                    let vals: Vec<f64> = bits.iter().map(|&b| if b != 0 { 0.0 } else { f64::NEG_INFINITY }).collect();
                    Tensor::from_vec(vals, md.as_slice(), &Device::Cpu).op(OP)?
                } else {
                    let vals: Vec<f32> = bits.iter().map(|&b| if b != 0 { 0.0 } else { f32::NEG_INFINITY }).collect();
                    Tensor::from_vec(vals, md.as_slice(), &Device::Cpu).op(OP)?
                }
            } else {
                mt.to_dtype(cdt).and_then(|t| t.contiguous()).op(OP)?
            };
            Some(add.detach())
        }
    };
    // Inputs the forward reads in place (transposed head views need no copy); the
    // rest get a contiguous copy in the compute dtype.
    let (qs, ks, vs) = (in_place(&q, cdt, rank), in_place(&k, cdt, rank), in_place(&v, cdt, rank));
    let cont_q = (bcast_strides(&qb, l * d), d);
    let cont_k = (bcast_strides(&kb2, s * d), d);
    let cont_v = (bcast_strides(&vb2, s * dv), dv);
    let heads = if rank > 0 { ob[rank - 1] } else { 1 };
    // A query read as the transposed view of (..., L, H, d) gets its output in that
    // order too, so the caller's `transpose(1, 2).reshape(...)` costs no copy. Rows
    // may be longer than H * d: q as one part of a fused (..., L, 3 * H * d) projection.
    let interleave = qs.as_ref().is_some_and(|(st, rs)| rank > 0 && heads > 1 && qb[rank - 1] == heads && st[rank - 1] == d && *rs >= heads * d);
    let build = |(qst, q_rs): &(Vec<usize>, usize), (kst, k_rs): &(Vec<usize>, usize), (vst, v_rs): &(Vec<usize>, usize), il: bool| {
        let q_off = offsets(&ob, &qb, qst, 1);
        let k_off = offsets(&ob, &kb2, kst, kg);
        let v_off = offsets(&ob, &vb2, vst, vg);
        let (o_off, o_rs) = if il {
            ((0..n).map(|i| (i / heads) * l * heads * dv + (i % heads) * dv).collect(), heads * dv)
        } else {
            ((0..n).map(|i| i * l * dv).collect(), dv)
        };
        let (k_slices, k_idx) = slices(&k_off);
        let (v_slices, v_idx) = slices(&v_off);
        Geo {
            n,
            l,
            s,
            d,
            dv,
            q_inj: injective(&q_off),
            k_inj: injective(&k_off),
            v_inj: injective(&v_off),
            q_off,
            k_off,
            v_off,
            m_off: m_off.clone(),
            m_rs,
            m_cs,
            q_len: q.elem_count(),
            k_len: k.elem_count(),
            v_len: v.elem_count(),
            q_rs: *q_rs,
            k_rs: *k_rs,
            v_rs: *v_rs,
            o_rs,
            o_off,
            k_slices,
            k_idx,
            v_slices,
            v_idx,
        }
    };
    let geo_c = build(&cont_q, &cont_k, &cont_v, false);
    let strided = qs.is_some() || ks.is_some() || vs.is_some();
    let (geo, geo_c) = if strided {
        let pick = |x: &Option<(Vec<usize>, usize)>, c: &(Vec<usize>, usize)| x.clone().unwrap_or_else(|| c.clone());
        (build(&pick(&qs, &cont_q), &pick(&ks, &cont_k), &pick(&vs, &cont_v), interleave), Some(geo_c))
    } else {
        (geo_c, None)
    };
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    let seed = if dropout_p > 0.0 {
        use rand::Rng;
        crate::random::with_rng(|r| r.random::<u64>())
    } else {
        0
    };
    let needs_grad = crate::autograd::grad_enabled() && (q.track_op() || k.track_op() || v.track_op());
    let cfg = Cfg { causal: is_causal, scale, dropout: dropout_p, seed, lse: needs_grad };
    let mut out_shape = ob.clone();
    if interleave {
        out_shape.insert(rank - 1, l);
    } else {
        out_shape.push(l);
    }
    out_shape.push(dv);
    let dev = q.device().clone();
    let op = Sdpa { geo, geo_c, interleave, cfg, mask, out_shape, lse: Mutex::new(None) };
    let y = py
        .detach(|| -> Result<Tensor> {
            let prep = |t: &Tensor, direct: bool| -> Result<Tensor> {
                if direct {
                    Ok(t.clone())
                } else {
                    t.to_device(&Device::Cpu)?.to_dtype(cdt)?.contiguous()
                }
            };
            let (q, k, v) = (prep(&q, qs.is_some())?, prep(&k, ks.is_some())?, prep(&v, vs.is_some())?);
            let mut y = q.apply_op3(&k, &v, op)?;
            if interleave {
                y = y.transpose(rank - 1, rank)?;
            }
            y.to_dtype(qdt.candle())?.to_device(&dev)
        })
        .op(OP)?;
    Ok(PyTensor::wrap_dt(y, qdt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_sdpa, m)?)?;
    Ok(())
}

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
        unsafe { exp_row_f32(&mut edge, 0.0) };
        assert!(edge[0] > 0.0 && edge[0].is_normal());
        assert_eq!(&edge[1..4], &[0.0, 0.0, 0.0]);
        assert!(edge[4].is_nan());
        // A dense sweep of x - m over [-87, 0].
        let mut row: Vec<f32> = (0..4096).map(|i| -87.0 * (i as f32) / 4095.0).collect();
        let xs = row.clone();
        unsafe { exp_row_f32(&mut row, 0.0) };
        for (&x, &p) in xs.iter().zip(&row) {
            let e = (x as f64).exp();
            assert!(((p as f64 - e) / e).abs() < 3e-7, "x={x}: {p} vs {e}");
        }
    }
}
