//! Process-wide settings made once, when `_core` is imported and before any
//! Candle op runs: the allocator and Candle's thread pools are global, so these
//! belong to no one op. A user's own environment variables always win.

/// Keep freed buffers for reuse. A training step frees and re-allocates the same
/// 0.1-30 MB buffers (activations, gradients, their accumulations) every step; with
/// glibc's defaults those come from fresh mmaps or a heap top that was just trimmed,
/// so every step pays page faults for them again (a quarter of a small model's step).
/// Freed memory stays in the process instead (as in caching allocators); a user's own
/// MALLOC_* / GLIBC_TUNABLES settings win.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    let user_set = ["MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !user_set {
        // SAFETY: the declaration above matches glibc's `int mallopt(int, int)`; mallopt takes
        // no pointers and only changes glibc's allocation thresholds (it is thread-safe).
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20);
            mallopt(M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

/// Candle's own elementwise ops (those not yet replaced by our kernels) fan out to a
/// spin-barrier thread pool of Candle's. Two reasons keep it at one thread (the
/// calling one): on a machine with few cores, whose other threads (rayon's, the
/// caller's, other processes) are busy, the barrier's spinning waits for a
/// descheduled worker (a small model's training step ran 4x slower); and that pool
/// cannot be rebuilt, so after `fork()` a child whose parent had used it would wait
/// for workers that do not exist (our own parallel work moves to a new pool in the
/// child: `ops::pool`). A user's CANDLE_NUM_THREADS wins. Must run before Candle's
/// first parallel op (the pool reads the variable once).
fn single_threaded_candle_barrier() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
}

/// PyTorch reads OMP_NUM_THREADS for its intra-op thread count; so do we, by giving
/// it to rayon's global pool (RAYON_NUM_THREADS, if set, wins). Must run before the
/// pool exists.
fn honour_omp_num_threads() {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return;
    }
    if let Some(n) = std::env::var("OMP_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n > 0) {
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
}

/// Apply the settings above; called first thing in the module's init.
pub fn configure() {
    keep_freed_memory();
    single_threaded_candle_barrier();
    honour_omp_num_threads();
    crate::ops::pool::register_fork_handlers();
}
