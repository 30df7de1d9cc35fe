//! The threading policy shared by every kernel (elementwise ops, conv, pooling,
//! losses, linear): when a pass is worth splitting over rayon's pool, and the
//! helpers that split it. One policy in one place, so all kernels agree on what
//! "large enough" means.
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Below these a pass stays on the calling thread. Handing work to rayon costs tens
/// of microseconds, and where cores are shared (other threads, other processes) a
/// fork-join can wait a whole scheduler slice for its second thread: only work of
/// about a millisecond or more on one core is worth splitting.
const PAR_ELEMS: usize = 1 << 18;
const PAR_MACS: usize = 1 << 23;

/// Whether a memory-bound pass over `elems` elements is worth splitting over threads.
pub(crate) fn par_ok(elems: usize) -> bool {
    elems >= PAR_ELEMS && super::pool::num_threads() > 1
}

/// Whether GEMMs of `macs` multiply-adds are worth splitting over threads.
pub(crate) fn par_gemm(macs: usize) -> bool {
    macs >= PAR_MACS && super::pool::num_threads() > 1
}

/// Run `f` on a rayon worker when it will go parallel (`par`), so the parallel passes
/// inside it split from there instead of each paying a hand-off from the calling
/// (Python) thread. The pool is `pool`'s: ours after `set_num_threads` or a fork,
/// else rayon's global one.
pub(crate) fn in_pool<R: Send>(par: bool, f: impl FnOnce() -> R + Send) -> R {
    if !par {
        f()
    } else if super::pool::is_active() {
        super::pool::install(f)
    } else if rayon::current_thread_index().is_none() {
        rayon::scope(|_| f())
    } else {
        f()
    }
}

/// `f(i, chunk)` over `v.chunks_mut(size)`, in parallel when `par`.
pub(crate) fn for_chunks<T: Send>(v: &mut [T], size: usize, par: bool, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if size == 0 {
        return;
    }
    if par {
        v.par_chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        v.chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// Elements per task of `for_row_runs`.
const ROW_TASK: usize = 1 << 14;

/// `f(row, col, run)` over `out`, rows of `n` elements laid end to end: tasks are whole
/// rows when rows are short, else pieces of one row (a fully merged operand is one
/// long row, and must still split over the threads); each call gets one row's part
/// of a task, starting at column `col`. In parallel when `par`.
pub(crate) fn for_row_runs<T: Send>(out: &mut [T], n: usize, par: bool, f: impl Fn(usize, usize, &mut [T]) + Sync + Send) {
    if n == 0 {
        return;
    }
    let task = if n >= ROW_TASK { ROW_TASK } else { (ROW_TASK / n) * n };
    for_chunks(out, task, par, |c, dst| {
        let mut done = 0;
        while done < dst.len() {
            let e = c * task + done;
            let (row, col) = (e / n, e % n);
            let len = (n - col).min(dst.len() - done);
            f(row, col, &mut dst[done..done + len]);
            done += len;
        }
    })
}

/// A vector of `n` elements that `fill` writes in full before anything reads them:
/// GEMM outputs, permutes and gathers skip the zero fill, a pass over memory.
pub(crate) fn filled<T: Copy>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<T>])) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    fill(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: the capacity is `n` (`with_capacity(n)`; slicing `..n` above would have
    // panicked otherwise), and every caller's `fill` writes all `n` elements (documented
    // at each call), so the first `n` elements are initialized.
    unsafe { v.set_len(n) };
    v
}

/// `filled` for kernels that write through plain slices of a float type (f32/f64:
/// no invalid bit patterns, no drop): `fill` must write every element before it
/// reads any (documented at each call).
pub(crate) fn filled_plain<T: Copy>(n: usize, fill: impl FnOnce(&mut [T])) -> Vec<T> {
    filled(n, |out| {
        // SAFETY: `MaybeUninit<T>` has `T`'s size, alignment and layout, so the slice cast is
        // in bounds; `T` is a plain float (no drop, every bit pattern valid) and callers write
        // every element before they read it, so no uninitialized value is read as `T`.
        fill(unsafe { &mut *(out as *mut [MaybeUninit<T>] as *mut [T]) })
    })
}

/// `n` zeros, written in parallel where the pass is large enough (`par_ok`). A plain
/// `vec![0.0; n]` is a calloc, which on memory the allocator reuses is one
/// single-threaded memset: 6% of a layer norm's forward+backward at 3M floats.
pub(crate) fn zeros<T: super::float::Float>(n: usize) -> Vec<T> {
    if !par_ok(n) {
        return vec![T::ZERO; n];
    }
    // Every element is written by the fill.
    filled_plain(n, |v: &mut [T]| v.par_chunks_mut(1 << 16).for_each(|c| c.fill(T::ZERO)))
}

/// A raw pointer that tasks writing disjoint regions may share. Read it through
/// `ptr()`, so closures capture the wrapper (Send + Sync), not the bare field.
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
// SAFETY: a `SyncPtr` is only an address; moving or sharing it across threads touches
// no memory. Every dereference is an `unsafe` block at a use site, whose SAFETY comment
// shows that concurrent tasks write disjoint regions of a buffer the spawning call
// borrows mutably for the whole parallel pass (and the pointees are plain floats).
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as for `Send`: `&SyncPtr` only gives out the address (`ptr()`); the accesses
// through it are the use sites' `unsafe` blocks, each over a task's own region.
unsafe impl<T> Sync for SyncPtr<T> {}
impl<T> SyncPtr<T> {
    #[inline(always)]
    pub(crate) fn ptr(&self) -> *mut T {
        self.0
    }
}
