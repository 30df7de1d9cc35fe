//! The gate math of one sample's row at one step, for a run of hidden units, forward
//! and backward, as loops over equal-length slices compiled for the CPU's vector width
//! (`#[target_feature]` variants, as `ops::simd_map`). Scalar, the sigmoids and
//! tanhs of an LSTM step (20 x 200 units) took three times as long as its product.
use super::Cell;
use crate::ops::cpu::{simd_level, Simd};
use crate::ops::float::Float;
use crate::ops::unary::sigmoid;

/// One row's inputs and outputs of the forward, each slice `n` units long (`n` the
/// length of `out`); entries past the cell's gate count are empty.
pub(super) struct FwdRow<'a, T> {
    /// `x_t W_ih^T + b_ih`, per gate.
    pub x: [&'a [T]; 4],
    /// `h_{t-1} W_hh^T`, per gate.
    pub p: [&'a [T]; 4],
    /// `b_hh` per gate (zeros for a layer without bias).
    pub b: [&'a [T]; 4],
    pub h_prev: &'a [T],
    /// LSTM's `c_{t-1}`.
    pub c_prev: &'a [T],
    pub out: &'a mut [T],
    /// What the backward reads (`Cell::kept`: LSTM i, f, g, o, c; GRU r, z, n, hn).
    pub kept: [&'a mut [T]; 5],
}

#[inline(always)]
fn fwd<T: Float, const FMA: bool>(cell: Cell, r: FwdRow<'_, T>) {
    let n = r.out.len();
    let out = r.out;
    let [x0, x1, x2, x3] = r.x;
    let [p0, p1, p2, p3] = r.p;
    let [b0, b1, b2, b3] = r.b;
    let [k0, k1, k2, k3, k4] = r.kept;
    match cell {
        Cell::Lstm => {
            let (x0, x1, x2, x3) = (&x0[..n], &x1[..n], &x2[..n], &x3[..n]);
            let (p0, p1, p2, p3) = (&p0[..n], &p1[..n], &p2[..n], &p3[..n]);
            let (b0, b1, b2, b3) = (&b0[..n], &b1[..n], &b2[..n], &b3[..n]);
            let (k0, k1, k2, k3, k4) = (&mut k0[..n], &mut k1[..n], &mut k2[..n], &mut k3[..n], &mut k4[..n]);
            let cp = &r.c_prev[..n];
            for j in 0..n {
                let i = sigmoid::<T, FMA>(x0[j] + p0[j] + b0[j]);
                let f = sigmoid::<T, FMA>(x1[j] + p1[j] + b1[j]);
                let g = (x2[j] + p2[j] + b2[j]).tanh::<FMA>();
                let o = sigmoid::<T, FMA>(x3[j] + p3[j] + b3[j]);
                let c = f * cp[j] + i * g;
                out[j] = o * c.tanh::<FMA>();
                (k0[j], k1[j], k2[j], k3[j], k4[j]) = (i, f, g, o, c);
            }
        }
        Cell::Gru => {
            let (x0, x1, x2) = (&x0[..n], &x1[..n], &x2[..n]);
            let (p0, p1, p2) = (&p0[..n], &p1[..n], &p2[..n]);
            let (b0, b1, b2) = (&b0[..n], &b1[..n], &b2[..n]);
            let (k0, k1, k2, k3) = (&mut k0[..n], &mut k1[..n], &mut k2[..n], &mut k3[..n]);
            let hp = &r.h_prev[..n];
            for j in 0..n {
                let r = sigmoid::<T, FMA>(x0[j] + p0[j] + b0[j]);
                let z = sigmoid::<T, FMA>(x1[j] + p1[j] + b1[j]);
                let hn = p2[j] + b2[j];
                let nn = (x2[j] + r * hn).tanh::<FMA>();
                out[j] = (T::ONE - z) * nn + z * hp[j];
                (k0[j], k1[j], k2[j], k3[j]) = (r, z, nn, hn);
            }
        }
        Cell::RnnTanh => {
            let (x0, p0, b0) = (&x0[..n], &p0[..n], &b0[..n]);
            for j in 0..n {
                out[j] = (x0[j] + p0[j] + b0[j]).tanh::<FMA>();
            }
        }
        Cell::RnnRelu => {
            let (x0, p0, b0) = (&x0[..n], &p0[..n], &b0[..n]);
            for j in 0..n {
                out[j] = (x0[j] + p0[j] + b0[j]).maximum(T::ZERO);
            }
        }
    }
}

/// One row's inputs and outputs of the backward, each slice `n` units long (`n` the
/// length of `dh`); entries a cell does not use are empty.
pub(super) struct BwdRow<'a, T> {
    /// The forward's `kept` of this step.
    pub kept: [&'a [T]; 5],
    pub h_t: &'a [T],
    pub h_prev: &'a [T],
    /// LSTM's `c_{t-1}`.
    pub c_prev: &'a [T],
    /// The gradient flowing into `h_t` from the output (zeros when none).
    pub up: &'a [T],
    /// In: the gradient of `h_t` from later steps; out (GRU): the direct part of `h_{t-1}`'s.
    pub dh: &'a mut [T],
    /// In: the gradient of `c_t`; out: that of `c_{t-1}` (LSTM).
    pub dc: &'a mut [T],
    /// The gates' pre-activation gradients on the hidden side, per gate.
    pub dgh: [&'a mut [T]; 4],
    /// GRU: those on the input side (they differ in the new gate).
    pub dgx: [&'a mut [T]; 3],
}

#[inline(always)]
fn bwd<T: Float, const FMA: bool>(cell: Cell, r: BwdRow<'_, T>) {
    let n = r.dh.len();
    let dh = r.dh;
    let up = &r.up[..n];
    let [k0, k1, k2, k3, k4] = r.kept;
    let [g0, g1, g2, g3] = r.dgh;
    let one = T::ONE;
    match cell {
        Cell::Lstm => {
            let (k0, k1, k2, k3, k4) = (&k0[..n], &k1[..n], &k2[..n], &k3[..n], &k4[..n]);
            let (g0, g1, g2, g3) = (&mut g0[..n], &mut g1[..n], &mut g2[..n], &mut g3[..n]);
            let (dc, cp) = (&mut r.dc[..n], &r.c_prev[..n]);
            for j in 0..n {
                let d = dh[j] + up[j];
                let (i, f, g, o) = (k0[j], k1[j], k2[j], k3[j]);
                let tc = k4[j].tanh::<FMA>();
                let dct = dc[j] + d * o * (one - tc * tc);
                g0[j] = dct * g * i * (one - i);
                g1[j] = dct * cp[j] * f * (one - f);
                g2[j] = dct * i * (one - g * g);
                g3[j] = d * tc * o * (one - o);
                dc[j] = dct * f;
            }
        }
        Cell::Gru => {
            let (k0, k1, k2, k3) = (&k0[..n], &k1[..n], &k2[..n], &k3[..n]);
            let (g0, g1, g2) = (&mut g0[..n], &mut g1[..n], &mut g2[..n]);
            let [x0, x1, x2] = r.dgx;
            let (x0, x1, x2) = (&mut x0[..n], &mut x1[..n], &mut x2[..n]);
            let hp = &r.h_prev[..n];
            for j in 0..n {
                let d = dh[j] + up[j];
                let (rr, z, nn, hn) = (k0[j], k1[j], k2[j], k3[j]);
                let dn = d * (one - z) * (one - nn * nn);
                let dr = dn * hn * rr * (one - rr);
                let dz = d * (hp[j] - nn) * z * (one - z);
                (x0[j], x1[j], x2[j]) = (dr, dz, dn);
                (g0[j], g1[j], g2[j]) = (dr, dz, dn * rr);
                dh[j] = d * z;
            }
        }
        Cell::RnnTanh => {
            let (g0, y) = (&mut g0[..n], &r.h_t[..n]);
            for j in 0..n {
                g0[j] = (dh[j] + up[j]) * (one - y[j] * y[j]);
            }
        }
        Cell::RnnRelu => {
            let (g0, y) = (&mut g0[..n], &r.h_t[..n]);
            for j in 0..n {
                g0[j] = if y[j] > T::ZERO { dh[j] + up[j] } else { T::ZERO };
            }
        }
    }
}

// `fwd` / `bwd` compiled with AVX-512 or AVX2 enabled, so the inlined math vectorizes.
// Written out (not by a macro) so that `tools/avx_audit.py` finds their names.

/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA (`simd_level` says so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn fwd_avx512<'a, T: Float, F: Fn(usize) -> FwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    for i in 0..rows {
        fwd::<T, true>(cell, row(i))
    }
}

/// # Safety
/// As `fwd_avx512`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn bwd_avx512<'a, T: Float, F: Fn(usize) -> BwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    for i in 0..rows {
        bwd::<T, true>(cell, row(i))
    }
}

/// # Safety
/// The CPU has AVX2 and FMA (`simd_level` says so).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fwd_avx2<'a, T: Float, F: Fn(usize) -> FwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    for i in 0..rows {
        fwd::<T, true>(cell, row(i))
    }
}

/// # Safety
/// As `fwd_avx2`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn bwd_avx2<'a, T: Float, F: Fn(usize) -> BwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    for i in 0..rows {
        bwd::<T, true>(cell, row(i))
    }
}

/// The forward gate math of `rows` rows (`row(i)` says where row i's slices lie), at
/// the CPU's vector width. The rows' loop runs inside the vector variant, so `row` is
/// inlined there and its slices stay in registers (built per call, they were stored
/// to the stack and read back: 5% of an LSTM's forward).
pub(super) fn forward<'a, T: Float, F: Fn(usize) -> FwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    #[cfg(target_arch = "x86_64")]
    match simd_level() {
        // SAFETY: the level says the CPU has the variant's features.
        Simd::Avx512 => return unsafe { fwd_avx512(cell, rows, row) },
        // SAFETY: as above.
        Simd::Avx2 => return unsafe { fwd_avx2(cell, rows, row) },
        Simd::Plain => {}
    }
    for i in 0..rows {
        fwd::<T, false>(cell, row(i))
    }
}

/// The backward gate math of `rows` rows, as `forward`.
pub(super) fn backward<'a, T: Float, F: Fn(usize) -> BwdRow<'a, T>>(cell: Cell, rows: usize, row: &F) {
    #[cfg(target_arch = "x86_64")]
    match simd_level() {
        // SAFETY: the level says the CPU has the variant's features.
        Simd::Avx512 => return unsafe { bwd_avx512(cell, rows, row) },
        // SAFETY: as above.
        Simd::Avx2 => return unsafe { bwd_avx2(cell, rows, row) },
        Simd::Plain => {}
    }
    for i in 0..rows {
        bwd::<T, false>(cell, row(i))
    }
}
