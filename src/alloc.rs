//! The Rust heap of this extension: the system allocator, with buffers of 512 bytes
//! or more aligned to 64 bytes (a cache line, as PyTorch's CPU allocator does) and
//! large ones marked for transparent huge pages.
//!
//! Why the alignment: the kernels load 64 bytes at a time, and a load that straddles
//! two cache lines costs two. glibc returns 16-byte-aligned blocks (its large ones
//! start 16 bytes past a page, so never on a line), which left a kernel's speed to
//! where its operands happened to lie: `Linear(768, 768)` on 64 rows (`ops::dot_rows`)
//! took 272-289 us with both operands on a line and up to 448 with neither. Lined,
//! mid-size linear products gained 10-20% (128 x 128 x 384 1.23x -> 1.02x torch,
//! 128 x 512 x 2048 1.18x -> 1.05x) and `x + b` on 512 x 384 12% (15.2 -> 13.4 us);
//! `bench_layers.py` and `bench_models.py` moved within their run-to-run spread.
//!
//! Why the huge pages: every op result is a fresh buffer, and a fresh large buffer is mapped by the
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

/// From this size on a block starts on a cache line (`LINE` bytes). Below it (shapes,
/// strides, per-op bookkeeping) the plain allocator's 16 bytes serve.
const ALIGN_MIN: usize = 512;
const LINE: usize = 64;
/// The alignment asked of `System` for a lined block: what malloc gives anyway, so the
/// block comes from plain malloc (not memalign) and its start is 16 bytes aligned.
const RAW_ALIGN: usize = 16;

/// The extension's global allocator (`lib.rs`): blocks of `ALIGN_MIN` bytes or more on a
/// cache line, huge-page advice from `HUGE_MIN` (see the module doc).
pub struct HugePageAlloc;

/// Whether a block of `layout` is lined here: `ALIGN_MIN` bytes or more, and an
/// alignment malloc's own covers (a larger one goes to `System` as asked). A function
/// of the layout alone, so `dealloc` and `realloc` know how the block was made.
///
/// Why by hand and not `System` with a 64-byte layout: that takes glibc's memalign,
/// which carves each block out of a larger free one; with the 12 MiB buffers of a
/// `tanh` forward and backward it left the step 1.2-1.4x slower in two runs of three
/// (fresh pages faulted again), where malloc reuses the freed blocks whole.
#[inline]
fn lined(layout: Layout) -> bool {
    layout.size() >= ALIGN_MIN && layout.align() <= RAW_ALIGN
}

/// The layout of the malloc block behind a lined block of `size` bytes: a line more,
/// for the shift to the line and the pointer stored before it.
#[inline]
fn raw_layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(LINE)?, RAW_ALIGN).ok()
}

/// How far into a raw block at `raw` (16-byte aligned) its line-aligned start lies:
/// 16, 32, 48 or 64 bytes, room for the stored pointer before it.
#[inline]
fn shift_of(raw: *mut u8) -> usize {
    (raw as usize + 8).next_multiple_of(LINE) - raw as usize
}

/// The line-aligned start inside the raw block at `raw` (`shift_of`), with `raw`
/// stored in the 8 bytes before it for `dealloc`.
///
/// # Safety
/// `raw` is null or a live block of at least `LINE + 1` bytes, 16-byte aligned.
#[inline]
unsafe fn place(raw: *mut u8) -> *mut u8 {
    if raw.is_null() {
        return raw;
    }
    let shift = shift_of(raw);
    // SAFETY: raw is 16-byte aligned, so shift is 16, 32, 48 or 64: the line start and
    // the 8 bytes before it (8-aligned, at shift - 8 >= 8) lie inside the block.
    unsafe {
        let p = raw.add(shift);
        (p.sub(8) as *mut *mut u8).write(raw);
        p
    }
}

/// The raw block behind the lined block at `p`.
///
/// # Safety
/// `p` came from `place`, and its block is live.
#[inline]
unsafe fn raw_of(p: *mut u8) -> *mut u8 {
    // SAFETY: `place` stored the raw pointer in the 8 (aligned) bytes before `p`.
    unsafe { (p.sub(8) as *const *mut u8).read() }
}

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

// SAFETY: blocks that are not `lined` are `System`'s, made and freed with the caller's
// layouts. A lined block is a `System` block of `raw_layout(size)` whose line-aligned
// interior (`place`, at most 64 bytes in, so `size` bytes fit) is handed out, its raw
// pointer stored before it and read back (`raw_of`) to free or resize it; `lined` is a
// function of the layout, which the caller passes back unchanged. `advise` only
// changes how the kernel backs memory the allocation already owns.
unsafe impl GlobalAlloc for HugePageAlloc {
    /// # Safety
    /// As `GlobalAlloc::alloc`: `layout` has a non-zero size.
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (non-zero size) is forwarded to `System`; a raw
        // block has `LINE` more bytes, so `place` fits; `p` is null or `layout.size()` bytes.
        unsafe {
            let p = match (lined(layout), raw_layout(layout.size())) {
                (true, Some(raw)) => place(System.alloc(raw)),
                (true, None) => std::ptr::null_mut(),
                (false, _) => System.alloc(layout),
            };
            advise(p, layout.size());
            p
        }
    }
    /// # Safety
    /// As `GlobalAlloc::alloc_zeroed`: `layout` has a non-zero size.
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh large blocks come from mmap already zeroed, so calloc does not touch
        // them and the advice still applies before the first write. The stored pointer
        // lies before the block handed out, which stays all zeros.
        // SAFETY: as in `alloc`.
        unsafe {
            let p = match (lined(layout), raw_layout(layout.size())) {
                (true, Some(raw)) => place(System.alloc_zeroed(raw)),
                (true, None) => std::ptr::null_mut(),
                (false, _) => System.alloc_zeroed(layout),
            };
            advise(p, layout.size());
            p
        }
    }
    /// # Safety
    /// As `GlobalAlloc::dealloc`: `ptr` was allocated by this allocator with `layout`.
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block of ours: a
        // lined one was made from a raw block of `raw_layout(size)` (which existed, or
        // `alloc` had failed), stored before `ptr`; any other is `System`'s as is.
        unsafe {
            match (lined(layout), raw_layout(layout.size())) {
                (true, Some(raw)) => System.dealloc(raw_of(ptr), raw),
                _ => System.dealloc(ptr, layout),
            }
        }
    }
    /// # Safety
    /// As `GlobalAlloc::realloc`: `ptr` was allocated by this allocator with `layout`,
    /// and `new_size` is non-zero and, rounded up to `layout.align()`, fits `isize`.
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY (of the unchecked layout): the caller guarantees new_size rounded up to
        // layout.align() fits isize, and the alignment is the caller's valid one.
        let asked = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `ptr`/`layout` describe a live block of ours (caller). Both lined: the
        // raw block is resized by `System` (which copies the bytes, shift included) and
        // the data moved to the new block's line if its shift differs (`ptr::copy`
        // handles the overlap). Neither: `System` as is. Across `ALIGN_MIN`: a fresh block,
        // the common bytes copied, the old one freed. Null on failure, the old block kept.
        unsafe {
            let p = match (lined(layout), lined(asked), raw_layout(layout.size()), raw_layout(new_size)) {
                (true, true, Some(old), Some(new)) => {
                    let raw = raw_of(ptr);
                    let shift = ptr as usize - raw as usize;
                    let moved = System.realloc(raw, old, new.size());
                    if moved.is_null() {
                        return moved;
                    }
                    // The data first (the new stored pointer may fall inside its old place).
                    let new_shift = shift_of(moved);
                    if new_shift != shift {
                        std::ptr::copy(moved.add(shift), moved.add(new_shift), layout.size().min(new_size));
                    }
                    place(moved)
                }
                (false, false, ..) => System.realloc(ptr, layout, new_size),
                _ => {
                    let p = self.alloc(asked);
                    if !p.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    p
                }
            };
            advise(p, new_size);
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of 512 bytes or more start on a line, through every resize path (below
    /// to above `ALIGN_MIN`, lined to lined with the raw block moved, back below), keep
    /// their bytes, and a zeroed one is zeros.
    #[test]
    fn lined_blocks_are_aligned_and_keep_their_bytes_through_realloc() {
        let a = HugePageAlloc;
        let fill = |p: *mut u8, n: usize| (0..n).for_each(|i| unsafe { p.add(i).write((i * 31 % 251) as u8) });
        let same = |p: *mut u8, n: usize| (0..n).all(|i| unsafe { p.add(i).read() } == (i * 31 % 251) as u8);
        for align in [1, 4, 8, 16] {
            // SAFETY: every block is used within its size and freed with its layout.
            unsafe {
                let mut layout = Layout::from_size_align(100, align).unwrap();
                let mut p = a.alloc(layout);
                fill(p, 100);
                let mut kept = 100;
                for size in [600, 5000, 1 << 20, 700, 300, 64 << 10] {
                    p = a.realloc(p, layout, size);
                    assert!(!p.is_null());
                    assert!(same(p, kept.min(size)), "{align}: bytes lost resizing to {size}");
                    if size >= ALIGN_MIN {
                        assert_eq!(p as usize % LINE, 0, "{align}: a {size}-byte block off its line");
                    }
                    layout = Layout::from_size_align(size, align).unwrap();
                    fill(p, size);
                    kept = size;
                }
                a.dealloc(p, layout);
                let z = Layout::from_size_align(3000, align).unwrap();
                let q = a.alloc_zeroed(z);
                assert_eq!(q as usize % LINE, 0);
                assert!((0..3000).all(|i| q.add(i).read() == 0));
                a.dealloc(q, z);
            }
        }
        // The global allocator is this one: a tensor-sized Vec starts on a line.
        let v = vec![0f32; 1000];
        assert_eq!(v.as_ptr() as usize % LINE, 0);
    }
}
