//! Dense factorizations of batches of small and mid-size square matrices, the kernels
//! behind `candle_py.linalg`: LU with partial pivoting (and the solves that reuse it),
//! Cholesky, and triangular solves. Row-major `f64` slices in, results out; every matrix
//! of a batch is independent, so batches run in parallel. Gradients are composed in
//! Python from these and ordinary tensor ops.
use rayon::prelude::*;

/// One LU factorization in place (`a` is n x n, row-major): `P A = L U` with unit-lower
/// `L` below the diagonal and `U` on and above it, as LAPACK's getrf. `piv[k]` is the
/// row swapped with row k at step k. Returns 0, or k + 1 for the first zero pivot
/// `U[k, k]` (LAPACK's `info`; the factorization still completes, as getrf's).
pub fn lu_in_place(a: &mut [f64], n: usize, piv: &mut [usize]) -> usize {
    let mut info = 0;
    for k in 0..n {
        // the pivot: the largest magnitude in column k at or below the diagonal
        let mut p = k;
        let mut best = a[k * n + k].abs();
        for i in k + 1..n {
            let v = a[i * n + k].abs();
            if v > best || (best.is_nan() && !v.is_nan()) {
                best = v;
                p = i;
            }
        }
        piv[k] = p;
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
        }
        let d = a[k * n + k];
        if d == 0.0 {
            if info == 0 {
                info = k + 1;
            }
            continue;
        }
        for i in k + 1..n {
            let f = a[i * n + k] / d;
            a[i * n + k] = f;
            if f != 0.0 {
                let (top, bottom) = a.split_at_mut(i * n);
                let row_k = &top[k * n + k + 1..k * n + n];
                for (x, &u) in bottom[k + 1..n].iter_mut().zip(row_k) {
                    *x -= f * u;
                }
            }
        }
    }
    info
}

/// Solve `A X = B` (or `A^T X = B` when `trans`) for the k columns of `b` (n x k,
/// row-major, overwritten by X) from `lu`/`piv` of `lu_in_place`.
pub fn lu_solve_in_place(lu: &[f64], piv: &[usize], n: usize, b: &mut [f64], k: usize, trans: bool) {
    if !trans {
        for (r, &p) in piv.iter().enumerate() {
            if p != r {
                for j in 0..k {
                    b.swap(r * k + j, p * k + j);
                }
            }
        }
        triangular_in_place(lu, n, b, k, false, true, false);
        triangular_in_place(lu, n, b, k, true, false, false);
    } else {
        // A^T = U^T L^T P: solve U^T y = b, L^T z = y, then undo the row swaps
        triangular_in_place(lu, n, b, k, true, false, true);
        triangular_in_place(lu, n, b, k, false, true, true);
        for (r, &p) in piv.iter().enumerate().rev() {
            if p != r {
                for j in 0..k {
                    b.swap(r * k + j, p * k + j);
                }
            }
        }
    }
}

/// Solve `T X = B` in place for the k columns of `b`, where `T` is the upper (`upper`)
/// or lower triangle of `t` (n x n), with ones on the diagonal when `unit`, or its
/// transpose when `trans` (then an upper triangle is solved as a lower one).
pub fn triangular_in_place(t: &[f64], n: usize, b: &mut [f64], k: usize, upper: bool, unit: bool, trans: bool) {
    let at = |i: usize, j: usize| if trans { t[j * n + i] } else { t[i * n + j] };
    // the effective triangle after transposing
    let backward = upper != trans;
    let rows: Vec<usize> = if backward { (0..n).rev().collect() } else { (0..n).collect() };
    for &i in &rows {
        for j in 0..k {
            let mut s = b[i * k + j];
            if backward {
                for m in i + 1..n {
                    s -= at(i, m) * b[m * k + j];
                }
            } else {
                for m in 0..i {
                    s -= at(i, m) * b[m * k + j];
                }
            }
            b[i * k + j] = if unit { s } else { s / at(i, i) };
        }
    }
}

/// Cholesky factor in place: `a` (n x n, symmetric positive-definite, only its lower
/// triangle read) becomes `L` with `A = L L^T` (zeros above the diagonal). Returns 0, or
/// k + 1 when the leading minor of order k + 1 is not positive-definite (LAPACK's potrf
/// `info`, with `a` left as potrf leaves it).
pub fn cholesky_in_place(a: &mut [f64], n: usize) -> usize {
    for j in 0..n {
        let mut d = a[j * n + j];
        for m in 0..j {
            d -= a[j * n + m] * a[j * n + m];
        }
        if d.is_nan() || d <= 0.0 {
            // as LAPACK's potrf leaves it: the failed pivot in place, the columns after
            // it untouched, nothing above the diagonal
            a[j * n + j] = d;
            for i in 0..n {
                for m in i + 1..n {
                    a[i * n + m] = 0.0;
                }
            }
            return j + 1;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for m in 0..j {
                s -= a[i * n + m] * a[j * n + m];
            }
            a[i * n + j] = s / d;
        }
        for i in 0..j {
            a[i * n + j] = 0.0;
        }
    }
    0
}

/// `lu_in_place` over a batch of `count` matrices (n x n each, concatenated; `count`
/// given, as n may be 0): the
/// factors, the pivots (1-based, LAPACK's) and each matrix's `info`.
pub fn lu_batch(data: &[f64], n: usize, count: usize) -> (Vec<f64>, Vec<i32>, Vec<i32>) {
    let size = n * n;
    let mut out = data.to_vec();
    let mut piv = vec![0i32; count * n];
    let mut info = vec![0i32; count];
    if size > 0 {
        out.par_chunks_mut(size).zip(piv.par_chunks_mut(n)).zip(info.par_iter_mut()).for_each(|((a, p), inf)| {
            let mut pv = vec![0usize; n];
            *inf = lu_in_place(a, n, &mut pv) as i32;
            for (d, s) in p.iter_mut().zip(&pv) {
                *d = *s as i32 + 1;
            }
        });
    }
    (out, piv, info)
}

/// Solve with a batch of LU factors (`lu`: count x n x n, `piv` 1-based) for a batch of
/// right-hand sides (`b`: count x n x k).
pub fn lu_solve_batch(lu: &[f64], piv: &[i32], n: usize, b: &[f64], k: usize, trans: bool) -> Vec<f64> {
    let mut out = b.to_vec();
    if n == 0 || k == 0 {
        return out;
    }
    out.par_chunks_mut(n * k).zip(lu.par_chunks(n * n)).zip(piv.par_chunks(n)).for_each(|((x, a), p)| {
        let pv: Vec<usize> = p.iter().map(|&v| (v.max(1) as usize - 1).min(n - 1)).collect();
        lu_solve_in_place(a, &pv, n, x, k, trans);
    });
    out
}

/// `cholesky_in_place` over a batch of `count` matrices: the factors and each matrix's `info`.
pub fn cholesky_batch(data: &[f64], n: usize, count: usize) -> (Vec<f64>, Vec<i32>) {
    let size = n * n;
    let mut out = data.to_vec();
    let mut info = vec![0i32; count];
    if size > 0 {
        out.par_chunks_mut(size).zip(info.par_iter_mut()).for_each(|(a, inf)| *inf = cholesky_in_place(a, n) as i32);
    }
    (out, info)
}

/// `triangular_in_place` over a batch (`t`: count x n x n, `b`: count x n x k).
pub fn triangular_batch(t: &[f64], n: usize, b: &[f64], k: usize, upper: bool, unit: bool) -> Vec<f64> {
    let mut out = b.to_vec();
    if n == 0 || k == 0 {
        return out;
    }
    out.par_chunks_mut(n * k).zip(t.par_chunks(n * n)).for_each(|(x, a)| triangular_in_place(a, n, x, k, upper, unit, false));
    out
}

/// Householder QR of one m x n row-major matrix with LAPACK's conventions (geqrf's
/// reflectors, orgqr's Q), so that Q and R come out as PyTorch's (which calls LAPACK):
/// column k's reflector maps `(alpha, x)` to `(beta, 0)` with `beta = -sign(alpha) *
/// |(alpha, x)|`, and is the identity (R's entry keeps its sign) where `x` is zero,
/// the last row of a wide matrix included. Returns Q (m x kq) and R (kq x n), kq = m
/// when `complete`, else min(m, n); R is zero below its diagonal.
pub fn qr_one(a: &[f64], m: usize, n: usize, complete: bool) -> (Vec<f64>, Vec<f64>) {
    let k = m.min(n);
    let mut r = a.to_vec();
    let mut taus = vec![0.0f64; k];
    for c in 0..k {
        let alpha = r[c * n + c];
        let xnorm = (c + 1..m).map(|i| r[i * n + c] * r[i * n + c]).sum::<f64>().sqrt();
        if xnorm == 0.0 {
            continue; // H = I
        }
        let beta = -alpha.signum() * alpha.hypot(xnorm);
        let tau = (beta - alpha) / beta;
        let scale = 1.0 / (alpha - beta);
        for i in c + 1..m {
            r[i * n + c] *= scale; // v below its implicit leading 1, kept in place
        }
        r[c * n + c] = beta;
        taus[c] = tau;
        for j in c + 1..n {
            let w = r[c * n + j] + (c + 1..m).map(|i| r[i * n + c] * r[i * n + j]).sum::<f64>();
            r[c * n + j] -= tau * w;
            for i in c + 1..m {
                r[i * n + j] -= tau * w * r[i * n + c];
            }
        }
    }
    let kq = if complete { m } else { k };
    // Q = H_0 H_1 ... H_{k-1} applied to the first kq columns of the identity.
    let mut q = vec![0.0f64; m * kq];
    for i in 0..m.min(kq) {
        q[i * kq + i] = 1.0;
    }
    for c in (0..k).rev() {
        let tau = taus[c];
        if tau == 0.0 {
            continue;
        }
        for j in 0..kq {
            let w = q[c * kq + j] + (c + 1..m).map(|i| r[i * n + c] * q[i * kq + j]).sum::<f64>();
            q[c * kq + j] -= tau * w;
            for i in c + 1..m {
                q[i * kq + j] -= tau * w * r[i * n + c];
            }
        }
    }
    let mut rr = vec![0.0f64; kq * n];
    for i in 0..kq.min(m) {
        for j in i..n {
            rr[i * n + j] = r[i * n + j];
        }
    }
    (q, rr)
}

/// `qr_one` over a batch of `count` m x n matrices: Q (count x m x kq) and R (count x kq x n).
pub fn qr_batch(data: &[f64], m: usize, n: usize, count: usize, complete: bool) -> (Vec<f64>, Vec<f64>) {
    let kq = if complete { m } else { m.min(n) };
    let mut q = vec![0.0f64; count * m * kq];
    let mut r = vec![0.0f64; count * kq * n];
    if m * n > 0 {
        q.par_chunks_mut(m * kq).zip(r.par_chunks_mut(kq * n)).zip(data.par_chunks(m * n)).for_each(|((qo, ro), a)| {
            let (qv, rv) = qr_one(a, m, n, complete);
            qo.copy_from_slice(&qv);
            ro.copy_from_slice(&rv);
        });
    } else if complete && m > 0 {
        // An empty matrix's complete Q is still the m x m identity.
        for qo in q.chunks_mut(m * m) {
            (0..m).for_each(|i| qo[i * m + i] = 1.0);
        }
    }
    (q, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul(a: &[f64], b: &[f64], n: usize, k: usize) -> Vec<f64> {
        let mut out = vec![0.0; n * k];
        for i in 0..n {
            for j in 0..k {
                out[i * k + j] = (0..n).map(|m| a[i * n + m] * b[m * k + j]).sum();
            }
        }
        out
    }

    #[test]
    fn lu_solves_and_transposed_solves() {
        let a = [0.0, 2.0, 1.0, 1.0, 1.0, 0.0, 3.0, -1.0, 4.0];
        let (lu, piv, info) = lu_batch(&a, 3, 1);
        assert_eq!(info, vec![0]);
        let b = [1.0, 2.0, 3.0];
        for trans in [false, true] {
            let x = lu_solve_batch(&lu, &piv, 3, &b, 1, trans);
            let at: Vec<f64> = (0..9).map(|i| if trans { a[(i % 3) * 3 + i / 3] } else { a[i] }).collect();
            let back = matmul(&at, &x, 3, 1);
            for (u, v) in back.iter().zip(b) {
                assert!((u - v).abs() < 1e-12, "{back:?}");
            }
        }
    }

    #[test]
    fn singular_lu_reports_the_zero_pivot_and_cholesky_the_minor() {
        let (_, _, info) = lu_batch(&[1.0, 2.0, 2.0, 4.0], 2, 1);
        assert_eq!(info, vec![2]);
        let (l, info) = cholesky_batch(&[4.0, 2.0, 2.0, 3.0, 1.0, 2.0, 2.0, 1.0], 2, 2);
        assert_eq!(info, vec![0, 2]);
        assert_eq!(&l[..4], &[2.0, 0.0, 1.0, 2f64.sqrt()]);
    }

    /// Q R = A, Q's columns orthonormal, R upper with LAPACK's signs (a negative
    /// diagonal where the column's head is positive), for tall, wide and square inputs.
    #[test]
    fn qr_reconstructs_with_lapack_signs() {
        for (m, n) in [(5usize, 3usize), (3, 5), (4, 4), (1, 3), (3, 1)] {
            let a: Vec<f64> = (0..m * n).map(|i| ((i * 7919 % 23) as f64 - 11.0) / 7.0).collect();
            for complete in [false, true] {
                let (q, r) = qr_one(&a, m, n, complete);
                let kq = if complete { m } else { m.min(n) };
                for i in 0..m {
                    for j in 0..n {
                        let v: f64 = (0..kq).map(|t| q[i * kq + t] * r[t * n + j]).sum();
                        assert!((v - a[i * n + j]).abs() < 1e-12, "{m}x{n} complete={complete}: QR[{i},{j}] = {v}, A = {}", a[i * n + j]);
                    }
                }
                for s in 0..kq {
                    for t in 0..kq {
                        let d: f64 = (0..m).map(|i| q[i * kq + s] * q[i * kq + t]).sum();
                        assert!((d - if s == t { 1.0 } else { 0.0 }).abs() < 1e-12, "{m}x{n}: Q^T Q[{s},{t}] = {d}");
                    }
                }
                for i in 0..kq {
                    for j in 0..i.min(n) {
                        assert_eq!(r[i * n + j], 0.0, "R below the diagonal");
                    }
                }
                if m > 1 && a[0] > 0.0 {
                    assert!(r[0] < 0.0, "geqrf's sign: R[0,0] = -sign(a00) * |col|");
                }
            }
        }
    }
}
