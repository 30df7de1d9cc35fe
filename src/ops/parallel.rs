//! The threading policy shared by every kernel (elementwise ops, conv, pooling,
//! losses, linear): when a pass is worth splitting over the threads, and the
//! helpers that split it (`for_chunks`, `for_chunks2`, `for_tasks`,
//! `for_tasks_init`, `map_indices`), all on the spinning team (`ops::team`; see
//! `for_chunks` for why not rayon, which the `gemm` crate's products still use).
//! One policy in one place, so all kernels agree on what "large enough" means.
use std::mem::MaybeUninit;

/// Below these a pass stays on the calling thread. Handing work to the team costs a
/// microsecond or two while its threads are awake (they spin between jobs, as
/// OpenMP's workers do under PyTorch), so a memory-bound pass is worth splitting
/// from PyTorch's own grain, 32K elements: measured back-to-back on (rows, 384)
/// float tensors, the former 256K threshold left `x * 2`, `relu`, `x + b`,
/// `layer_norm` and `gelu` at 1.1-2.3x torch's time from 98K to 196K elements;
/// split from 32K they took 0.7-1.1x. A team that has parked costs the caller
/// nothing extra: tasks are claimed as threads arrive, so the caller runs them all.
const PAR_ELEMS: usize = 1 << 15;
const PAR_MACS: usize = 1 << 23;
/// A linear layer's product splits from 512K multiply-adds: its threads each run a
/// whole single-threaded GEMM on their block, with none of the convolutions' packing
/// or synchronisation per cache block. Measured on 2 threads against torch (medians of
/// 7 interleaved rounds), `m x k x n` 64 x 128 x 384 1.47x -> 0.92x, 128 x 128 x 384
/// 1.55x -> 1.00x, 512 x 64 x 128 1.52x -> 0.96x, 128 x 400 x 20 1.26x -> 0.93x; the
/// convolutions at this threshold lost (conv1d forward + backward 1.14x).
const PAR_LINEAR_MACS: usize = 1 << 19;

/// Whether a memory-bound pass over `elems` elements is worth splitting over threads.
pub(crate) fn par_ok(elems: usize) -> bool {
    elems >= PAR_ELEMS && super::pool::num_threads() > 1
}

/// Whether GEMMs of `macs` multiply-adds are worth splitting over threads.
pub(crate) fn par_gemm(macs: usize) -> bool {
    macs >= PAR_MACS && super::pool::num_threads() > 1
}

/// Whether a linear layer's product of `macs` multiply-adds is worth splitting over
/// threads (see `PAR_LINEAR_MACS`).
pub(crate) fn par_linear(macs: usize) -> bool {
    macs >= PAR_LINEAR_MACS && super::pool::num_threads() > 1
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

/// `f(i, chunk)` over `v.chunks_mut(size)`, in parallel when `par`: the chunks in
/// one contiguous run per thread, on the caller and the spinning team (`team`).
///
/// Why not rayon's work stealing here: for passes of 20-500 us, the cost is the
/// pool's sleeping worker (40-90 us to wake on a virtual machine, so the caller did
/// most of the pass alone) and where each piece lands (rayon hands pieces to whichever
/// thread is free, so the data one thread wrote is read by the other, from L3 instead
/// of its L2). A static split on threads that stay awake is what OpenMP gives torch:
/// a global average pool of 8x512x14x14 took 94 us with rayon, 36 on the team
/// (torch 45), one thread 112.
pub(crate) fn for_chunks<T: Send>(v: &mut [T], size: usize, par: bool, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    if size == 0 {
        return;
    }
    let (len, chunks) = (v.len(), v.len().div_ceil(size));
    let parts = if par { super::pool::num_threads().min(chunks) } else { 1 };
    if parts < 2 {
        v.chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
        return;
    }
    let base = SyncPtr(v.as_mut_ptr());
    super::team::for_each(parts, &|k| {
        for c in k * chunks / parts..(k + 1) * chunks / parts {
            let (a, b) = (c * size, ((c + 1) * size).min(len));
            // SAFETY: chunk c is v[a..b] (a < b <= len); each chunk index belongs to
            // exactly one part, so the tasks' slices are disjoint, and `v` is borrowed
            // mutably until `for_each` returns, after every task has run.
            f(c, unsafe { std::slice::from_raw_parts_mut(base.ptr().add(a), b - a) });
        }
    });
}

/// `f(i, a_i, b_i)` over two slices cut into the same number of chunks (`a` by `sa`,
/// `b` by `sb`: an output and its per-row statistics), as `for_chunks`.
pub(crate) fn for_chunks2<A: Send, B: Send>(
    a: &mut [A],
    sa: usize,
    b: &mut [B],
    sb: usize,
    par: bool,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync + Send,
) {
    assert!(sa > 0 && sb > 0 && a.len().div_ceil(sa) == b.len().div_ceil(sb), "for_chunks2: the slices must have as many chunks");
    let (bp, bl) = (SyncPtr(b.as_mut_ptr()), b.len());
    for_chunks(a, sa, par, |i, ca| {
        let (s, e) = (i * sb, ((i + 1) * sb).min(bl));
        // SAFETY: chunk i of `b` is b[s..e] (in bounds: both slices have as many chunks,
        // so s < bl); each i is visited once, so the slices are disjoint, and `b` is
        // borrowed mutably until `for_chunks` returns.
        f(i, ca, unsafe { std::slice::from_raw_parts_mut(bp.ptr().add(s), e - s) })
    });
}

/// `f(0)`, .., `f(n - 1)` on the caller and the team when `par` (each thread claims
/// the next index as it finishes one: for tasks of uneven cost, GEMM blocks), else
/// in order on the caller.
pub(crate) fn for_tasks(n: usize, par: bool, f: impl Fn(usize) + Sync) {
    if par && n > 1 {
        super::team::for_each(n, &f);
    } else {
        (0..n).for_each(f);
    }
}

/// `f(&mut ws, i)` for `i < n` as `for_tasks` (each thread claims the next index as it
/// finishes one), with scratch `ws` made by `init` once per thread that takes part.
/// Tasks were claimed in runs of `n / 8` (scratch made per run): with a ViT's 96
/// attention heads, a thread that finished its last run early waited for up to a whole
/// run of the other's.
pub(crate) fn for_tasks_init<W>(n: usize, par: bool, init: impl Fn() -> W + Sync, f: impl Fn(&mut W, usize) + Sync) {
    if !par || n < 2 {
        if n > 0 {
            let mut ws = init();
            (0..n).for_each(|i| f(&mut ws, i));
        }
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = super::pool::num_threads().clamp(1, n);
    for_tasks(workers, true, |_| {
        let mut ws: Option<W> = None;
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                return;
            }
            f(ws.get_or_insert_with(&init), i);
        }
    });
}

/// `[f(0, chunk 0), f(1, chunk 1), ..]` over `v.chunks_mut(size)`, as `for_chunks`
/// splits them (per-group statistics, per-task partial sums).
pub(crate) fn map_chunks<T: Send, R: Send>(v: &mut [T], size: usize, par: bool, f: impl Fn(usize, &mut [T]) -> R + Sync + Send) -> Vec<R> {
    if size == 0 || v.is_empty() {
        return Vec::new();
    }
    let mut res: Vec<Option<R>> = (0..v.len().div_ceil(size)).map(|_| None).collect();
    for_chunks2(v, size, &mut res, 1, par, |i, c, r| r[0] = Some(f(i, c)));
    res.into_iter().map(|r| r.expect("map_chunks: every chunk runs")).collect()
}

/// `[f(0), .., f(n - 1)]`, computed as `for_chunks` splits work (contiguous runs of
/// indices per thread, in parallel when `par`).
pub(crate) fn map_indices<R: Send>(n: usize, par: bool, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    map_chunks(&mut vec![(); n], 1, par, |i, _| f(i))
}

/// Elements per task of `for_row_runs` (at most).
const ROW_TASK: usize = 1 << 14;

/// The size of the chunks that split `len` elements over the threads (when `par`) in
/// equal shares: pieces of at most about `max` elements (a multiple of `align`), as
/// many as a multiple of the thread count. Whole `max` pieces would leave the shares
/// uneven: 49152 floats in 16K chunks are 3, one thread's 16K against the other's
/// 32K (`relu` on (128, 384) took 1.27x torch's time).
pub(crate) fn even_chunk(len: usize, max: usize, align: usize, par: bool) -> usize {
    let threads = super::pool::num_threads().max(1);
    if !par || len == 0 {
        return max.max(align);
    }
    let pieces = len.div_ceil(max.max(1)).next_multiple_of(threads);
    len.div_ceil(pieces).next_multiple_of(align.max(1))
}

/// `f(row, col, run)` over `out`, rows of `n` elements laid end to end, in tasks of
/// equal size (`even_chunk`) that may start or end inside a row; each call gets one
/// row's part of a task, starting at column `col`. In parallel when `par`.
pub(crate) fn for_row_runs<T: Send>(out: &mut [T], n: usize, par: bool, f: impl Fn(usize, usize, &mut [T]) + Sync + Send) {
    if n == 0 {
        return;
    }
    let task = even_chunk(out.len(), if n >= ROW_TASK { ROW_TASK } else { (ROW_TASK / n) * n }, 16, par);
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
    filled_plain(n, |v: &mut [T]| for_chunks(v, 1 << 16, true, |_, c| c.fill(T::ZERO)))
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

/// `dst.copy_from_slice(src)`, split over the threads from `PAR_ELEMS` on: each thread
/// copies its share through its own core's cache (one thread copying 400K floats took
/// 121 us, torch's two 27).
pub(crate) fn par_copy<T: Copy + Send + Sync>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "par_copy: slices of different lengths");
    let par = par_ok(dst.len());
    let size = even_chunk(dst.len(), 1 << 16, 64, par);
    for_chunks(dst, size, par, |i, d| d.copy_from_slice(&src[i * size..i * size + d.len()]));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chunk / index is visited once, with the right contents, serial and split,
    /// for lengths that do and do not divide evenly.
    #[test]
    fn the_helpers_visit_each_chunk_once_with_its_own_elements() {
        for par in [false, true] {
            for len in [0usize, 1, 7, 64, 1000, 4099] {
                let mut v: Vec<usize> = vec![0; len];
                for_chunks(&mut v, 10, par, |i, c| c.iter_mut().enumerate().for_each(|(k, e)| *e += i * 10 + k + 1));
                assert!(v.iter().enumerate().all(|(k, &e)| e == k + 1), "for_chunks len {len} par {par}");

                let mut st = vec![0usize; len.div_ceil(10)];
                for_chunks2(&mut v, 10, &mut st, 1, par, |i, c, s| s[0] = i * 1000 + c.len());
                assert!(st.iter().enumerate().all(|(i, &s)| s == i * 1000 + (len - i * 10).min(10)), "for_chunks2 len {len}");

                assert_eq!(map_indices(len, par, |i| i * 3), (0..len).map(|i| i * 3).collect::<Vec<_>>());
                let lens: Vec<usize> = (0..len.div_ceil(10)).map(|i| (len - i * 10).min(10)).collect();
                assert_eq!(map_chunks(&mut v, 10, par, |_, c| c.len()), lens, "map_chunks len {len}");

                let hits: Vec<std::sync::atomic::AtomicUsize> = (0..len).map(|_| Default::default()).collect();
                for_tasks_init(len, par, Vec::<usize>::new, |ws, i| {
                    ws.push(i);
                    hits[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
                assert!(hits.iter().all(|h| h.load(std::sync::atomic::Ordering::SeqCst) == 1), "for_tasks_init len {len}");
            }
        }
    }

    /// `even_chunk` gives the threads shares less than a chunk apart (equal where the
    /// length allows), in multiples of `align`, and one `max` chunk serially;
    /// `for_row_runs` with such tasks (which start inside rows) still visits every
    /// element once with its own (row, column).
    #[test]
    fn even_chunks_balance_the_threads_and_row_runs_cover_each_element() {
        let threads = super::super::pool::num_threads().max(1);
        assert_eq!(even_chunk(49152, 16384, 64, false), 16384);
        for len in [1usize, 100, 49152, 65536, 196_608, 1_000_003] {
            let size = even_chunk(len, 16384, 64, true);
            assert!(size.is_multiple_of(64) && size <= 16384 + 64, "len {len}: size {size}");
            let chunks = len.div_ceil(size);
            let share = |k: usize| {
                ((k * chunks / threads)..((k + 1) * chunks / threads)).map(|c| ((c + 1) * size).min(len) - c * size).sum::<usize>()
            };
            let (lo, hi) = ((0..threads).map(share).min().unwrap(), (0..threads).map(share).max().unwrap());
            assert!(hi - lo < size, "len {len}: shares {lo}..{hi} with chunks of {size}");
            if len.is_multiple_of(64 * threads) && len >= 16384 {
                assert_eq!(lo, hi, "len {len}: chunks of {size}");
            }
        }
        for (len, n) in [(0usize, 5usize), (49152, 384), (1000, 7), (70000, 70000), (140_000, 70000)] {
            let mut v = vec![(usize::MAX, usize::MAX); len];
            for_row_runs(&mut v, n, true, |row, col, run| run.iter_mut().enumerate().for_each(|(k, e)| *e = (row, col + k)));
            assert!(v.iter().enumerate().all(|(i, &e)| e == (i / n, i % n)), "for_row_runs len {len} n {n}");
        }
    }
}
