//! The threads kernels run on: a pool of ours, active from import, rebuilt when
//! `set_num_threads` changes its size or the process is the child of a `fork`.
//!
//! Why not rayon's global pool: it can be neither resized nor rebuilt. After `fork()`
//! the child has one thread, but the global pool (copied from the parent) still
//! believes its workers exist, so the first parallel op waits for them forever (a
//! `multiprocessing` fork pool hung). A `pthread_atfork` child handler therefore
//! moves the child to a new pool, built lazily on first use.
//!
//! The main thread joins the pool as its worker 0 (rayon's `use_current_thread`)
//! when it builds the first one with two or more threads. Why: handing an op to pool
//! threads and waiting for them costs two thread wake-ups, and on a virtual machine
//! a wake-up measured 40-90 us: a 576-element RMSNorm took 102 us on a pool of one
//! thread against 15 us run in place, and a decode step of a 135M-parameter LLM
//! (some 400 small ops) spent most of its time waking threads. As worker 0 the main
//! thread runs each op itself; a parallel split wakes the other workers for their
//! part only, and a part nobody has picked up by the time the main thread is done
//! with its own, it takes back (no waiting). Only the main thread (the one Python
//! code normally calls from), and only with two or more threads: a one-thread pool
//! whose only worker is the main thread would never run work that other threads
//! hand it while the main thread is busy in Python. Rayon cannot undo a membership,
//! so that pool is never dropped; later pools (another size, a forked child) are
//! plain ones that the main thread hands work to.
//!
//! Work reaches the active pool through `install`: the bindings' GIL-releasing
//! wrappers (every heavy entry point) and `parallel::in_pool` call it, so the
//! parallel passes inside (ours, Candle's, the `gemm` crate's) split over its
//! threads; on a member thread it is a plain call. Candle's other pool (the
//! spin-barrier pool of its elementwise ops) is kept single-threaded by
//! `runtime::configure` for the same fork-safety reason.
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// True once work goes to our pool (from import on; the default path is kept for
/// builds that never register the handlers, such as the Rust unit tests).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The requested number of threads (0: the default, rayon's own count).
static REQUESTED: AtomicUsize = AtomicUsize::new(0);
/// Bumped by `set_num_threads` and by every fork: a pool built under an older value
/// is replaced on next use.
static GENERATION: AtomicUsize = AtomicUsize::new(0);
/// Guards `CURRENT`. A spin lock on an atomic rather than a Mutex so that the fork
/// handlers can take it before `fork` and release it in both processes after
/// (a std Mutex held by another thread at fork time would stay locked in the child).
static LOCK: AtomicBool = AtomicBool::new(false);
static mut CURRENT: Option<(usize, Arc<ThreadPool>)> = None;
/// The thread count of rayon's global pool, read before any fork.
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);

fn lock() {
    while LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::hint::spin_loop();
    }
}

fn unlock() {
    LOCK.store(false, Ordering::Release);
}

/// The default thread count (rayon's global pool size: RAYON_NUM_THREADS, or the
/// cores this process may use).
pub(crate) fn default_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => {
            let n = rayon::current_num_threads().max(1);
            DEFAULT_THREADS.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Whether work goes to our pool (after `set_num_threads` or in a forked child).
pub(crate) fn is_active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// The number of threads kernels split their work over.
pub(crate) fn num_threads() -> usize {
    if !ACTIVE.load(Ordering::Acquire) {
        return rayon::current_num_threads();
    }
    match REQUESTED.load(Ordering::Relaxed) {
        0 => default_threads(),
        n => n,
    }
}

/// Use `n >= 1` threads from now on (`torch.set_num_threads`). The next parallel op
/// builds a pool of that size; work already running finishes on the old one.
pub(crate) fn set_num_threads(n: usize) {
    default_threads(); // read the global pool's size before it stops being the reference
    let n = n.max(1);
    let same = ACTIVE.load(Ordering::Acquire) && num_threads() == n;
    REQUESTED.store(n, Ordering::Relaxed);
    if same {
        return; // the same size: keep the pool (and the main thread's membership)
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    ACTIVE.store(true, Ordering::Release);
}

/// The active pool (built on first use after a switch), or None on the default path.
fn active_pool() -> Option<Arc<ThreadPool>> {
    if !ACTIVE.load(Ordering::Acquire) {
        return None;
    }
    let generation = GENERATION.load(Ordering::Acquire);
    lock();
    // SAFETY: CURRENT is only touched between lock() and unlock() (here and in the fork
    // handlers, which hold the lock across fork), so this is the only access now.
    let current = unsafe { &mut *std::ptr::addr_of_mut!(CURRENT) };
    let pool = match current {
        Some((g, p)) if *g == generation => Some(p.clone()),
        _ => {
            let threads = num_threads();
            let mut builder = ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("candle-py-{i}"));
            // The main thread joins the pool as its worker 0 where it can (see the
            // module docs): its ops then run where they are called.
            let member = threads >= 2 && is_main_thread() && rayon::current_thread_index().is_none();
            if member {
                builder = builder.use_current_thread();
            }
            match builder.build() {
                Ok(p) => {
                    let p = Arc::new(p);
                    if member {
                        // The main thread stays this pool's member for good (rayon cannot
                        // undo it), so the pool must outlive every later switch: its
                        // parallel work outside `install` still lands here.
                        std::mem::forget(p.clone());
                    }
                    if let Some((g, old)) = current.replace((generation, p.clone())) {
                        if g != generation && FORKED_FROM.load(Ordering::Relaxed) > g {
                            // A pool from before a fork: its threads do not exist in this
                            // process, so it must never be dropped (dropping signals them).
                            std::mem::forget(old);
                        }
                    }
                    Some(p)
                }
                // No threads to be had (resource limits): run on the calling thread.
                Err(_) => None,
            }
        }
    };
    unlock();
    pool
}

/// Whether the calling thread is the process's main thread.
fn is_main_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and getpid take no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t == libc::getpid() }
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// The generation at the last fork (pools of older generations are the parent's).
static FORKED_FROM: AtomicUsize = AtomicUsize::new(0);

/// Run `f` on the active pool, so that the parallel work inside it uses that pool's
/// threads; a plain call on the default path or when already on one of its threads.
pub(crate) fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match active_pool() {
        Some(p) if p.current_thread_index().is_none() => p.install(f),
        _ => f(),
    }
}

extern "C" fn before_fork() {
    lock();
}

extern "C" fn after_fork_parent() {
    unlock();
}

extern "C" fn after_fork_child() {
    // Only atomics here: the child has one thread, and the pools it inherited are dead.
    default_threads();
    let g = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    FORKED_FROM.store(g, Ordering::Relaxed);
    ACTIVE.store(true, Ordering::Release);
    unlock();
}

/// Register the fork handlers and make our pool the active one (once, at import):
/// rayon's global pool is never used, so the main thread can be a member of ours.
pub(crate) fn register_fork_handlers() {
    default_threads();
    ACTIVE.store(true, Ordering::Release);
    #[cfg(unix)]
    // SAFETY: the three handlers are `extern "C" fn()` with no arguments, as
    // pthread_atfork requires, and only touch atomics (async-signal-safe enough for
    // the child of a multi-threaded fork).
    unsafe {
        libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(after_fork_child));
    }
}
