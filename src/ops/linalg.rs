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
}
