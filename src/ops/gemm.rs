//! The one GEMM entry of the kernels: every matrix product of attention,
//! convolution and linear goes through `gemm` (raw strided pointers) or
//! `gemm_slices` (bounds-checked slices), and only these call the `gemm` crate,
//! whose AVX2 / AVX-512 micro-kernels are chosen at run time.
use super::float::Float;
use std::mem::MaybeUninit;

pub(crate) use gemm::Parallelism;

/// `dst (m x n) = beta * lhs (m x k) @ rhs (k x n)`, plus `dst` when `read_dst`;
/// strides in elements, `dst` with unit column stride.
///
/// # Safety
/// `dst` must point to `m` rows of `n` writable elements, `dst_rs` apart, also
/// readable when `read_dst` (without it `dst` is written unread, so it may be
/// uninitialized); `lhs` to an `m x k` matrix readable at row / column strides
/// `lhs_rs` / `lhs_cs`, `rhs` to a `k x n` one at `rhs_rs` / `rhs_cs`. The `dst`
/// elements must not overlap `lhs` or `rhs`, and nothing else may access them during
/// the call.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn gemm<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: *mut T,
    dst_rs: isize,
    read_dst: bool,
    (lhs, lhs_rs, lhs_cs): (*const T, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const T, isize, isize),
    beta: T,
    par: Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: the caller guarantees what `gemm::gemm` reads and writes: the m x n, m x k
    // and k x n matrices at these strides, `dst` disjoint from both and read only when
    // `read_dst`.
    unsafe {
        gemm::gemm(m, n, k, dst, 1, dst_rs, read_dst, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs, T::ONE, beta, false, false, false, par)
    }
}

/// `dst (m x n, row-major) = lhs (m x k) @ rhs (k x n)` (`+ dst` when `acc`, which
/// needs `dst` initialized), row / column strides given; the slices are checked to
/// hold every element the strides reach. Writes all of `dst[..m * n]` (zeros when
/// `k == 0` and not `acc`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_slices<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [MaybeUninit<T>],
    acc: bool,
    lhs: &[T],
    (lrs, lcs): (usize, usize),
    rhs: &[T],
    (rrs, rcs): (usize, usize),
    par: Parallelism,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            dst[..m * n].fill(MaybeUninit::new(T::ZERO));
        }
        return;
    }
    assert!(dst.len() >= m * n);
    assert!(lhs.len() > (m - 1) * lrs + (k - 1) * lcs);
    assert!(rhs.len() > (k - 1) * rrs + (n - 1) * rcs);
    // SAFETY: the slices hold every element the strides reach (checked above), and `dst`,
    // borrowed mutably, cannot overlap `lhs` or `rhs`; without `acc` the destination is
    // written unread (so it may be uninitialized).
    unsafe {
        gemm(
            (m, n, k),
            dst.as_mut_ptr() as *mut T,
            n as isize,
            acc,
            (lhs.as_ptr(), lrs as isize, lcs as isize),
            (rhs.as_ptr(), rrs as isize, rcs as isize),
            T::ONE,
            par,
        )
    }
}
