//! The Rust heap of this extension: the system allocator, with large buffers marked
//! for transparent huge pages.
//!
//! Why: every op result is a fresh buffer, and a fresh large buffer is mapped by the
//! kernel on first touch, one 4 KiB page fault at a time. At 256 MiB (softmax of a
//! (64, 1024, 1024) tensor) that is 65,536 faults, about a third of the op's time, and
//! the two threads writing the output serialize on the kernel's page-table locks.
//! Linux distributions commonly ship THP in "madvise" mode (on only where asked), so
//! we ask: a buffer of `HUGE_MIN` bytes or more gets `MADV_HUGEPAGE`, and is then
//! mapped 2 MiB per fault. Small allocations (shapes, per-op bookkeeping) are untouched.
//! NumPy does the same for its array buffers of 4 MiB and more.
//! Elsewhere than Linux this is the plain system allocator.
use std::alloc::{GlobalAlloc, Layout, System};

/// From this size on a buffer is worth huge pages: it spans at least one aligned
/// 2 MiB page whatever its start, and the `madvise` call (~1 us) is small beside
/// the faults it saves (512 per 2 MiB).
#[cfg(target_os = "linux")]
const HUGE_MIN: usize = 4 << 20;

pub struct HugePageAlloc;

/// Ask the kernel for huge pages under the `size` bytes at `p` (when `size >= HUGE_MIN`).
///
/// # Safety
/// `p` must be null or the start of a live allocation of at least `size` bytes that
/// this allocator handed out (so the advised range lies inside memory we own).
#[cfg(target_os = "linux")]
#[inline]
unsafe fn advise(p: *mut u8, size: usize) {
    if p.is_null() || size < HUGE_MIN {
        return;
    }
    // Only whole aligned 2 MiB pieces can be huge pages, so the advice starts at the
    // first 2 MiB boundary (page-aligned, as madvise wants, whatever the base page
    // size). Failure (THP off, old kernel) only means the buffer gets normal pages,
    // so its result is ignored.
    const HUGE_PAGE: usize = 2 << 20;
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    let end = p as usize + size;
    if end > start {
        // SAFETY: `start..end` lies inside the caller's allocation `p..p + size` (start is
        // p rounded up, end > start), and MADV_HUGEPAGE only changes how the kernel backs
        // those pages, never their contents or mapping.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// No huge-page advice off Linux: does nothing.
///
/// # Safety
/// Same contract as the Linux `advise` (`p` null or an allocation of `size` bytes);
/// this version touches nothing.
#[cfg(not(target_os = "linux"))]
#[inline]
unsafe fn advise(_: *mut u8, _: usize) {}

// SAFETY: every call forwards to `System` with the caller's arguments; `advise` only
// changes how the kernel backs memory the allocation already owns.
unsafe impl GlobalAlloc for HugePageAlloc {
    /// # Safety
    /// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract (non-zero size), which
        // we forward to `System`; `p` is null or a fresh block of `layout.size()` bytes.
        unsafe {
            let p = System.alloc(layout);
            advise(p, layout.size());
            p
        }
    }
    /// # Safety
    /// As `GlobalAlloc::alloc_zeroed`: `layout` has a non-zero size.
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh large blocks come from mmap already zeroed, so calloc does not touch
        // them and the advice still applies before the first write.
        // SAFETY: as in `alloc`: the caller's contract is forwarded to `System`, and `p` is
        // null or a fresh block of `layout.size()` bytes.
        unsafe {
            let p = System.alloc_zeroed(layout);
            advise(p, layout.size());
            p
        }
    }
    /// # Safety
    /// As `GlobalAlloc::dealloc`: `ptr` was allocated by this allocator with `layout`.
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: every block this allocator hands out comes from `System` with the same
        // layout, and the caller guarantees `ptr`/`layout` describe such a live block.
        unsafe { System.dealloc(ptr, layout) }
    }
    /// # Safety
    /// As `GlobalAlloc::realloc`: `ptr` was allocated by this allocator with `layout`,
    /// and `new_size` is non-zero and, rounded up to `layout.align()`, fits `isize`.
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` (as in `dealloc`) and the caller upholds
        // `realloc`'s contract, forwarded as is; `p` is null or a block of `new_size` bytes.
        unsafe {
            let p = System.realloc(ptr, layout, new_size);
            advise(p, new_size);
            p
        }
    }
}
