//! The time loop of one direction of a recurrent layer, forward and backward through
//! time, on plain slices.
//!
//! The input projection of every step (`x_t W_ih^T + b_ih`, the `xp` argument) is one
//! GEMM done by the caller; what stays sequential is, per step, the small product
//! `h_{t-1} W_hh^T` and the gate math. Composed from tensor ops, each step cost a dozen
//! graph nodes forward and as many backward; here a step is one product per thread
//! and one pass over the gates, and the backward keeps its state in two
//! `batch x hidden` buffers. The weight gradient of `W_hh` is one GEMM over all steps at the end.
//!
//! Threads (`Split`): with enough samples, each thread runs all the steps of its own
//! samples and the threads never meet inside the loop; else the hidden units are split
//! into one slice per thread, each thread computing its slice's gate columns and cell
//! states at every step, and since a step needs the whole previous `h` the threads meet
//! once per step. Either way each share stays on one thread of the awake team of
//! `ops::team` (`for_each_pinned`), so its weights stay in that core's cache.
//!
//! Layouts (row-major): `xp` (steps, batch, gates * hidden) in PyTorch's gate order
//! (LSTM i, f, g, o; GRU r, z, n); `W_hh` (gates * hidden, hidden); `h0`, `c0`
//! (batch, hidden); the output `h_t` (steps, batch, hidden) in time order whatever
//! the direction.
use super::gates::{self, BwdRow, FwdRow};
use super::{Cell, Dims};
use crate::ops::float::{as_f32, Float};
use crate::ops::gemm::{gemm, Parallelism};
use crate::ops::parallel::{par_gemm, SyncPtr};
use crate::ops::sgemm::{Mat, Packed, Right};
use crate::ops::team;
use std::array::from_fn;

/// The weights of the recurrence.
#[derive(Clone, Copy)]
pub struct Recurrence<'a, T> {
    pub cell: Cell,
    pub w_hh: &'a [T],
    pub b_hh: Option<&'a [T]>,
}

/// What one direction's forward returns and keeps for its backward.
pub struct Forward<T> {
    /// `h_t` at every step, (steps, batch, hidden).
    pub out: Vec<T>,
    /// `Cell::kept` floats per (step, sample, hidden unit), (slots, batch, kept * hidden):
    /// every step's (`slots == steps`, in time order) when the backward will need them,
    /// else the last two steps run (step `s` in slot `s % 2`).
    pub kept: Vec<T>,
}

/// How many steps' gates `forward` keeps (see `slot`).
pub(super) fn kept_slots(keep_all: bool, steps: usize) -> usize {
    if keep_all {
        steps
    } else {
        steps.min(2)
    }
}

/// Where step `s` (at time `t`) keeps its gates: its time slot when every step is kept,
/// else one of two slots used in turn (enough for LSTM's `c_{t-1}`).
#[inline]
pub(super) fn slot(keep_all: bool, s: usize, t: usize) -> usize {
    if keep_all {
        t
    } else {
        s % 2
    }
}

/// One thread's share: samples (batch rows) `i0..i1` and hidden units `j0..j1`, and
/// where the units' gate columns sit in the step's product `h_{t-1} W_hh^T`: from
/// `col` (a multiple of `ALIGN`), gate after gate, `j1 - j0` columns each, so a
/// thread's product is one run of columns; the run is padded to whole kernel strips.
#[derive(Clone, Copy, Debug)]
struct Part {
    i0: usize,
    i1: usize,
    j0: usize,
    j1: usize,
    col: usize,
}

impl Part {
    fn units(&self) -> usize {
        self.j1 - self.j0
    }

    fn rows(&self) -> usize {
        self.i1 - self.i0
    }
}

/// How the threads share the time loop.
///
/// By samples (`Rows`), each thread runs every step for its rows of the batch alone:
/// a sample's step needs only its own previous state, so the threads never meet until
/// the end, and each multiplies its rows by the whole `W_hh` (which stays in its L2).
/// By hidden units (`Units`), each step's product and gates are split by columns and
/// the threads meet at every step (a step needs all of `h_{t-1}`): the hand-off and
/// the wait for the slower share made an LSTM step at batch 20, width 200, 43 us
/// against 33 by samples.
/// Units serve small batches (few rows make a slow product) and weights too big to
/// keep a copy per core.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Split {
    Rows,
    Units,
}

/// The fewest samples per thread for `Split::Rows` (the AVX-512 row kernel's tiles
/// reach its peak from about this height).
const ROWS_MIN: usize = 6;

/// The largest `W_hh` (bytes) for `Split::Rows`, whose threads each stream all of it
/// at every step: the smallest L2 we run on (1 MiB a core on AMD Zen 4/5, 2 MiB on
/// the Xeons).
const ROWS_WEIGHT_MAX: usize = 1 << 20;

/// Part boundaries are multiples of this (the widest kernel strip, `ops::sgemm`), so
/// each part's columns of the backward's product `dG W_hh` start a strip.
const ALIGN: usize = 32;

/// The threads' shares (one per thread when a step's product is big enough to share),
/// how they split, and the width of the product laid out by `Part`. By units, sizes are
/// rounded to `ALIGN` to the nearest, so that two threads split 200 units as 96 + 104
/// rather than 128 + 72.
fn parts(gates: usize, hidden: usize, batch: usize, elem: usize) -> (Vec<Part>, Split, usize) {
    let threads = crate::ops::pool::num_threads();
    let macs = batch * gates * hidden * hidden;
    let shared = threads > 1 && macs >= 1 << 16;
    if shared && batch >= 2 * ROWS_MIN && gates * hidden * hidden * elem <= ROWS_WEIGHT_MAX {
        let n = threads.min(batch / ROWS_MIN);
        let width = (gates * hidden).div_ceil(ALIGN) * ALIGN;
        let parts = (0..n).map(|k| Part { i0: k * batch / n, i1: (k + 1) * batch / n, j0: 0, j1: hidden, col: 0 }).collect();
        return (parts, Split::Rows, width);
    }
    let mut n = if shared { threads.min(hidden.div_ceil(ALIGN)) } else { 1 };
    let per = ((hidden as f64 / n as f64 / ALIGN as f64).round() as usize).max(1) * ALIGN;
    while n > 1 && per * (n - 1) >= hidden {
        n -= 1;
    }
    let mut col = 0;
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let (j0, j1) = (k * per, if k + 1 == n { hidden } else { (k + 1) * per });
        out.push(Part { i0: 0, i1: batch, j0, j1, col });
        col += (gates * (j1 - j0)).div_ceil(ALIGN) * ALIGN;
    }
    (out, Split::Units, col)
}

/// Run `f(k, part)` for k in `0..iters` (a time loop's iterations, in order) and every
/// part, each part on its own thread of the team when there are several: by rows one
/// job for the whole loop, by units one per iteration (the next starts when every part
/// has finished this one).
fn run(parts: &[Part], split: Split, iters: usize, f: &(dyn Fn(usize, Part) + Sync)) {
    match (parts.len(), split) {
        (1, _) => (0..iters).for_each(|k| f(k, parts[0])),
        (n, Split::Rows) => team::for_each_pinned(n, &|p| (0..iters).for_each(|k| f(k, parts[p]))),
        (n, Split::Units) => (0..iters).for_each(|k| team::for_each_pinned(n, &|p| f(k, parts[p]))),
    }
}

/// `W_hh^T` (hidden x gates * hidden) with its columns laid out as `Part` says: the
/// forward's right operand, packed once.
struct GateColumns<'a> {
    w: &'a [f32],
    h: usize,
    parts: &'a [Part],
    gates: usize,
}

impl GateColumns<'_> {
    /// The row of `W_hh` that product column `c` multiplies by, None for padding.
    fn row(&self, c: usize) -> Option<usize> {
        let p = self.parts.iter().find(|p| c >= p.col && c < p.col + self.gates * p.units())?;
        let (q, u) = ((c - p.col) / p.units(), (c - p.col) % p.units());
        Some(q * self.h + p.j0 + u)
    }
}

impl Right for GateColumns<'_> {
    unsafe fn pack(&self, nr: usize, (p0, kc): (usize, usize), (c0, cols): (usize, usize), out: &mut [f32]) {
        let wide = crate::ops::cpu::has_avx512();
        for (t, strip) in out.chunks_exact_mut(nr * kc).take(cols.div_ceil(nr)).enumerate() {
            strip.fill(0.0);
            let live = nr.min(cols - t * nr);
            let mut j = 0;
            while j < live {
                let Some(row) = self.row(c0 + t * nr + j) else {
                    j += 1;
                    continue;
                };
                // A run of columns taken from consecutive rows of W_hh (one gate of one
                // part), transposed as a block: element by element, with a lookup per
                // column, this packing was 4% of an LSTM's forward.
                let mut run = 1;
                while j + run < live && self.row(c0 + t * nr + j + run) == Some(row + run) {
                    run += 1;
                }
                let src = &self.w[row * self.h + p0..];
                if wide {
                    // SAFETY: `run` rows of W_hh from `row`, `kc` floats each from depth p0,
                    // `h` apart, lie in `w`; the strip holds `kc` rows of `nr` floats, of
                    // which columns j..j + run are written; the CPU has AVX-512.
                    unsafe { crate::ops::transpose::transpose(src.as_ptr(), self.h, run, kc, strip[j..].as_mut_ptr(), nr) };
                } else {
                    for u in 0..run {
                        for (p, &x) in src[u * self.h..u * self.h + kc].iter().enumerate() {
                            strip[p * nr + j + u] = x;
                        }
                    }
                }
                j += run;
            }
        }
    }
}

/// The forward of one direction. `xp` (steps, batch, gates * hidden), `h0` and (LSTM)
/// `c0` (batch, hidden). `keep_all`: keep every step's gates for a backward; without
/// it (inference) they go to two slots that stay in cache, where the whole record
/// (2.8 MB for a 35-step LSTM at batch 20, width 200) was written for nothing.
pub fn forward<T: Float>(r: Recurrence<'_, T>, d: Dims, xp: &[T], h0: &[T], c0: Option<&[T]>, keep_all: bool) -> Forward<T> {
    let (b, h) = (d.batch, d.hidden);
    let g = r.cell.gates();
    let (gh, kw) = (g * h, r.cell.kept() * h);
    assert!(xp.len() == d.steps * b * gh && h0.len() == b * h && r.w_hh.len() == gh * h);
    assert!(r.b_hh.is_none_or(|x| x.len() == gh) && (r.cell != Cell::Lstm || c0.is_some_and(|c| c.len() == b * h)));
    let mut out = Unfilled::<T>::new(d.steps * b * h);
    let mut kept = Unfilled::<T>::new(kept_slots(keep_all, d.steps) * b * kw);
    let (parts, split, width) = parts(g, h, b, std::mem::size_of::<T>());
    // The product h_{t-1} W_hh^T of the current step, (batch, width) laid out by `Part`
    // (its padding columns are never read).
    let mut pre = Unfilled::<T>::new(b * width);
    // f32: the products run on `ops::sgemm` with the weight packed once for all steps
    // (the `gemm` crate took 130-160 us for one step's 20 x 200 x 800 product on one
    // AVX-512 core, torch 40-50).
    let packed = as_f32(r.w_hh).and_then(|w| {
        let cols = GateColumns { w, h, parts: &parts, gates: g };
        // SAFETY: `GateColumns` packs any block of its h x width extent.
        unsafe { Packed::new(&cols, h, width) }
    });
    debug_assert!(packed.as_ref().is_none_or(|p| ALIGN.is_multiple_of(p.strip())));
    let (po, pk, pp) = (SyncPtr(out.ptr()), SyncPtr(kept.ptr()), SyncPtr(pre.ptr()));
    let kc = r.cell.kept();
    let zeros = vec![T::ZERO; gh];
    let bias = r.b_hh.unwrap_or(&zeros);
    run(&parts, split, d.steps, &|s, pt| {
        let t = d.time(s);
        let prev = (s > 0).then(|| d.time(s - 1));
        // SAFETY: `out`, `kept` and `pre` are owned by this call and outlive the
        // loop. This task writes only its part's rows and columns of `pre`, and
        // units j0..j1 of rows i0..i1 of step t's `out` and of step s's slot of
        // `kept`; it reads step `prev`'s rows i0..i1 of `out` and the same slot
        // (two slots, so never the one written now), written by the previous step:
        // by this task when split by rows, else by tasks `run` waited for. The
        // other tasks write disjoint rows or columns.
        unsafe {
            let h_prev: *const T = match prev {
                Some(p) => po.ptr().add(p * b * h),
                None => h0.as_ptr(),
            };
            // This step's input projection for the gate pass below: 4 * batch short runs
            // (one per gate and sample) that the hardware prefetcher does not follow,
            // written by the projection's GEMM out to L3. Fetched now, they arrive
            // while the product runs (the loads were ~40% of the gate pass).
            for i in pt.i0..pt.i1 {
                for q in 0..g {
                    prefetch(xp.as_ptr().add((t * b + i) * gh + q * h + pt.j0), pt.units());
                }
            }
            let (a_rows, pre_rows) = (h_prev.add(pt.i0 * h), pp.ptr().add(pt.i0 * width));
            if let Some(pk) = &packed {
                let (a, dst, cols) =
                    (Mat::new(a_rows as *const f32, h as isize, 1), pre_rows as *mut f32, (pt.col, pt.col + g * pt.units()));
                if !pk.mul_rows(pt.rows(), dst, width as isize, false, a, cols) {
                    pk.mul(pt.rows(), dst, width as isize, false, a, cols, 1.0);
                }
            } else {
                for q in 0..g {
                    // pre[:, gate q of this part] = h_prev @ W_hh[q*H + j0..q*H + j1, :]^T
                    let w = r.w_hh.as_ptr().add((q * h + pt.j0) * h);
                    let dst = pre_rows.add(pt.col + q * pt.units());
                    gemm(
                        (pt.rows(), pt.units(), h),
                        dst,
                        width as isize,
                        false,
                        (a_rows, h as isize, 1),
                        (w, 1, h as isize),
                        T::ONE,
                        Parallelism::None,
                    );
                }
            }
            let c_prev: *const T = match (r.cell, prev) {
                (Cell::Lstm, Some(p)) => pk.ptr().add(slot(keep_all, s - 1, p) * b * kw + 4 * h),
                (Cell::Lstm, None) => c0.map_or(std::ptr::null(), |c| c.as_ptr()),
                _ => std::ptr::null(),
            };
            let n = pt.units();
            gates::forward(r.cell, pt.rows(), &|i| {
                let i = pt.i0 + i;
                let (row, j0) = (t * b + i, pt.j0);
                let (x, p) = (xp.as_ptr().add(row * gh + j0), pp.ptr().add(i * width + pt.col) as *const T);
                let kr = pk.ptr().add((slot(keep_all, s, t) * b + i) * kw + j0);
                let c_row = if prev.is_some() { i * kw } else { i * h };
                FwdRow {
                    x: from_fn(|q| if q < g { rd(x.add(q * h), n) } else { &[] }),
                    p: from_fn(|q| if q < g { rd(p.add(q * n), n) } else { &[] }),
                    b: from_fn(|q| if q < g { rd(bias.as_ptr().add(q * h + j0), n) } else { &[] }),
                    h_prev: rd(h_prev.add(i * h + j0), n),
                    c_prev: if c_prev.is_null() { &[] } else { rd(c_prev.add(c_row + j0), n) },
                    out: wr(po.ptr().add(row * h + j0), n),
                    kept: from_fn(|q| if q < kc { wr(kr.add(q * h), n) } else { Default::default() }),
                }
            });
        }
    });
    // SAFETY: every step wrote all units of its rows of `out` and of its slot of `kept`
    // (the parts cover 0..hidden; LSTM and GRU write each kept field), and every slot
    // was some step's.
    unsafe { Forward { out: out.written(), kept: kept.written() } }
}

/// A buffer of `n` floats that a kernel writes in full, through `ptr`, before
/// `written` hands it out: the time loop's outputs and gradients, whose zero fill
/// (3.4 MB for an LSTM layer at 35 steps x 20 x 200, 2.2 MB for its gate gradients)
/// was a memset on one thread, while the other waited, of ~4% of the layer's forward
/// and backward.
struct Unfilled<T> {
    v: Vec<T>,
    n: usize,
}

impl<T: Float> Unfilled<T> {
    fn new(n: usize) -> Self {
        Unfilled { v: Vec::with_capacity(n), n }
    }

    /// The start of the `n` floats.
    fn ptr(&mut self) -> *mut T {
        self.v.as_mut_ptr()
    }

    /// The vector of the `n` floats.
    ///
    /// # Safety
    /// Every one of them has been written.
    unsafe fn written(mut self) -> Vec<T> {
        // SAFETY: the capacity is at least `n` (`with_capacity`), and the caller wrote
        // all `n` floats (plain floats: no drop, every bit pattern valid).
        unsafe { self.v.set_len(self.n) };
        self.v
    }
}

/// Ask for the cache lines of `n` elements from `p` into L1 (a hint: no fault, no effect
/// on results; nothing off x86-64).
#[inline]
fn prefetch<T>(p: *const T, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (start, bytes) = (p as usize, n * std::mem::size_of::<T>());
        for line in (start & !63..start + bytes).step_by(64) {
            // SAFETY: a prefetch is a hint: it never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
        }
    }
    let _ = (p, n);
}

/// `n` floats at `p`.
///
/// # Safety
/// They are initialized, and no thread writes them while the slice lives.
unsafe fn rd<'a, T>(p: *const T, n: usize) -> &'a [T] {
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// `n` floats at `p`, writable.
///
/// # Safety
/// No other thread accesses them while the slice lives, and they are initialized or
/// (an `Unfilled` buffer's plain floats, as `ops::parallel::filled_plain`) written
/// before they are read.
unsafe fn wr<'a, T>(p: *mut T, n: usize) -> &'a mut [T] {
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p, n) }
}

/// The gradients of one direction; `None` where not asked for.
pub struct Backward<T> {
    /// Of `xp`, (steps, batch, gates * hidden).
    pub xp: Vec<T>,
    pub h0: Vec<T>,
    pub c0: Option<Vec<T>>,
    pub w_hh: Option<Vec<T>>,
    pub b_hh: Option<Vec<T>>,
}

/// The gradients flowing into one direction's outputs (`None`: zero).
pub struct Upstream<'a, T> {
    /// Of every `h_t`, (steps, batch, hidden).
    pub out: Option<&'a [T]>,
    pub h_last: Option<&'a [T]>,
    pub c_last: Option<&'a [T]>,
}

/// Backward through time of `forward`: `fwd` is its result, `h0`/`c0` its initial
/// state; `weights` asks for the gradients of `W_hh` and `b_hh`.
pub fn backward<T: Float>(
    r: Recurrence<'_, T>,
    d: Dims,
    fwd: (&[T], &[T]),
    (h0, c0): (&[T], Option<&[T]>),
    up: Upstream<'_, T>,
    weights: bool,
) -> Backward<T> {
    let (out, kept) = fwd;
    let (b, h) = (d.batch, d.hidden);
    let g = r.cell.gates();
    let (gh, kw) = (g * h, r.cell.kept() * h);
    let rows = d.steps * b;
    assert!(out.len() == rows * h && kept.len() == rows * kw && h0.len() == b * h);
    assert!(up.out.is_none_or(|x| x.len() == rows * h) && up.h_last.is_none_or(|x| x.len() == b * h));
    assert!(up.c_last.is_none_or(|x| x.len() == b * h) && r.w_hh.len() == gh * h);
    assert!(r.cell != Cell::Lstm || c0.is_some_and(|c| c.len() == b * h), "an LSTM's backward needs c0");
    // The gradients of the gates' pre-activations, on the hidden side (`dgh`, what
    // multiplies W_hh) and the input side (`dgx`): equal but for GRU's new gate,
    // whose hidden part is scaled by r.
    let mut dgh = Unfilled::<T>::new(rows * gh);
    let mut dgx = Unfilled::<T>::new(if r.cell == Cell::Gru { rows * gh } else { 0 });
    // The gradient of h_t (filled by the step after t) and of c_t.
    let mut dh: Vec<T> = up.h_last.map_or_else(|| vec![T::ZERO; b * h], |x| x.to_vec());
    let mut dc: Vec<T> = up.c_last.map_or_else(|| vec![T::ZERO; b * h], |x| x.to_vec());
    let (parts, split, _) = parts(g, h, b, std::mem::size_of::<T>());
    let kc = r.cell.kept();
    let zeros = vec![T::ZERO; h];
    let ptr = (SyncPtr(dgh.ptr()), SyncPtr(dgx.ptr()), SyncPtr(dh.as_mut_ptr()), SyncPtr(dc.as_mut_ptr()));
    let gru = r.cell == Cell::Gru;
    // W_hh (gates * hidden x hidden) packed once as the right operand of every step.
    let packed = as_f32(r.w_hh).and_then(|w| {
        // SAFETY: the matrix is `w`, gh x h row-major.
        unsafe { Packed::new(&Mat::new(w.as_ptr(), h as isize, 1), gh, h) }
    });
    // dh[i0..i1, j0..j1] (+)= dG_t[i0..i1] @ W_hh[:, j0..j1]: the part of h_{t-1}'s
    // gradient that flows back through step t's product (GRU adds it to the direct
    // part z dh).
    let through = |t: usize, pt: Part| {
        // SAFETY: reads rows i0..i1 of step t's `dgh` (complete: written by the previous
        // iteration, of this task when split by rows, else of tasks `run` waited for)
        // and writes rows i0..i1, columns j0..j1 of `dh`, which only this task touches
        // (j0 is a multiple of `ALIGN`, so of the packed operand's strip).
        unsafe {
            let lhs = ptr.0.ptr().add((t * b + pt.i0) * gh) as *const T;
            let dst = ptr.2.ptr().add(pt.i0 * h);
            if let Some(pk) = &packed {
                let a = Mat::new(lhs as *const f32, gh as isize, 1);
                if !pk.mul_rows(pt.rows(), dst as *mut f32, h as isize, gru, a, (pt.j0, pt.j1)) {
                    pk.mul(pt.rows(), dst as *mut f32, h as isize, gru, a, (pt.j0, pt.j1), 1.0);
                }
            } else {
                let (dst, w) = (dst.add(pt.j0), r.w_hh.as_ptr().add(pt.j0));
                gemm(
                    (pt.rows(), pt.units(), gh),
                    dst,
                    h as isize,
                    gru,
                    (lhs, gh as isize, 1),
                    (w, h as isize, 1),
                    T::ONE,
                    Parallelism::None,
                )
            }
        }
    };
    // Iteration k runs step steps - 1 - k; the last one (k == steps) only carries the
    // first step's gradient through its product into h0's.
    run(&parts, split, d.steps + 1, &|k, pt| {
        if k == d.steps {
            if d.steps > 0 {
                through(d.time(0), pt);
            }
            return;
        }
        let s = d.steps - 1 - k;
        let t = d.time(s);
        let next = (s + 1 < d.steps).then(|| d.time(s + 1));
        let prev = (s > 0).then(|| d.time(s - 1));
        if let Some(n) = next {
            through(n, pt);
        }
        // SAFETY: this task reads and writes only rows i0..i1, units j0..j1 of `dh`,
        // `dc` and of step t's `dgh` / `dgx`; the forward's buffers are read only.
        unsafe {
            let n = pt.units();
            gates::backward(r.cell, pt.rows(), &|i| {
                let i = pt.i0 + i;
                let (row, j0) = (t * b + i, pt.j0);
                let (hp, cp): (*const T, *const T) = match prev {
                    Some(p) => (out.as_ptr().add(p * b * h + i * h), kept.as_ptr().add((p * b + i) * kw + 4 * h)),
                    None => (h0.as_ptr().add(i * h), c0.map_or(std::ptr::null(), |c| c.as_ptr().add(i * h))),
                };
                let kr = kept.as_ptr().add(row * kw + j0);
                let (gr, xr) = (ptr.0.ptr().add(row * gh + j0), ptr.1.ptr().add(row * gh + j0));
                BwdRow {
                    kept: from_fn(|q| if q < kc { rd(kr.add(q * h), n) } else { &[] }),
                    h_t: rd(out.as_ptr().add(row * h + j0), n),
                    h_prev: rd(hp.add(j0), n),
                    c_prev: if r.cell == Cell::Lstm { rd(cp.add(j0), n) } else { &[] },
                    up: match up.out {
                        Some(u) => &u[row * h + j0..row * h + j0 + n],
                        None => &zeros[..n],
                    },
                    dh: wr(ptr.2.ptr().add(i * h + j0), n),
                    dc: wr(ptr.3.ptr().add(i * h + j0), n),
                    dgh: from_fn(|q| if q < g { wr(gr.add(q * h), n) } else { Default::default() }),
                    dgx: from_fn(|q| if gru { wr(xr.add(q * h), n) } else { Default::default() }),
                }
            });
        }
    });
    // SAFETY: every step wrote all gates of all units of its rows of `dgh` (and `dgx`).
    let (dgh, dgx) = unsafe { (dgh.written(), dgx.written()) };
    let (w_hh, b_hh) = if weights { weight_grads(r, d, &dgh, out, h0) } else { (None, None) };
    Backward { xp: if gru { dgx } else { dgh }, h0: dh, c0: (r.cell == Cell::Lstm).then_some(dc), w_hh, b_hh }
}

/// `dW_hh = sum_t dG_t^T h_{t-1}` as two GEMMs (the steps whose `h_{t-1}` is a row of
/// `out`, then the first step's with `h0`), and `db_hh` the column sums of `dG`.
fn weight_grads<T: Float>(r: Recurrence<'_, T>, d: Dims, dgh: &[T], out: &[T], h0: &[T]) -> (Option<Vec<T>>, Option<Vec<T>>) {
    let (b, h) = (d.batch, d.hidden);
    let gh = r.cell.gates() * h;
    let mut dw = Unfilled::<T>::new(gh * h);
    // Forward: steps 1.. pair with out[0..T-1]; reverse: steps 0..T-1 with out[1..].
    let (g_from, o_from, first) = if d.reverse { (0, 1, d.steps - 1) } else { (1, 0, 0) };
    let k = (d.steps - 1) * b;
    let threads = if par_gemm(gh * h * k) { crate::ops::pool::num_threads() } else { 1 };
    let (pw, pg, po) = (SyncPtr(dw.ptr()), SyncPtr(dgh.as_ptr() as *mut T), SyncPtr(out.as_ptr() as *mut T));
    // dG's rows read transposed (gh x k, then gh x b within `dgh`) times rows of `out`
    // (k x h) and of `h0` (b x h).
    let ph = SyncPtr(h0.as_ptr() as *mut T);
    crate::ops::parallel::in_pool(threads > 1, || {
        let lhs = |from: usize| (pg.ptr() as *const T).wrapping_add(from * b * gh);
        let (o, hz) = ((po.ptr() as *const T).wrapping_add(o_from * b * h), ph.ptr() as *const T);
        if as_f32(dgh).is_some() && crate::ops::sgemm::takes(gh, h) {
            // Our GEMM: its packing reads dG^T by columns and `out` by rows, both
            // contiguous runs (the `gemm` crate took 1.6 ms for this 800 x 200 x 700
            // product on two threads, about a third of its peak).
            let mat = |p: *const T, rs: usize, cs: usize| Mat::new(p as *const f32, rs as isize, cs as isize);
            // SAFETY: `dw` is gh x h; the operands lie inside `dgh`, `out` and `h0` at these strides.
            unsafe {
                let dst = pw.ptr() as *mut f32;
                crate::ops::sgemm::sgemm_with((gh, h, k), dst, h as isize, false, mat(lhs(g_from), 1, gh), &mat(o, h, 1), 1.0, threads);
                crate::ops::sgemm::sgemm_with((gh, h, b), dst, h as isize, k > 0, mat(lhs(first), 1, gh), &mat(hz, h, 1), 1.0, 1);
            }
            return;
        }
        let par = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
        // SAFETY: as above.
        unsafe {
            gemm((gh, h, k), pw.ptr(), h as isize, false, (lhs(g_from), 1, gh as isize), (o, h as isize, 1), T::ONE, par);
            gemm((gh, h, b), pw.ptr(), h as isize, k > 0, (lhs(first), 1, gh as isize), (hz, h as isize, 1), T::ONE, Parallelism::None);
        }
    });
    let db = r.b_hh.map(|_| {
        let mut s = vec![T::ZERO; gh];
        for row in dgh.chunks_exact(gh) {
            for (a, &x) in s.iter_mut().zip(row) {
                *a += x;
            }
        }
        s
    });
    // SAFETY: the second product overwrites `dw` when the first had no steps (k == 0),
    // else adds to what the first wrote in full.
    (Some(unsafe { dw.written() }), db)
}
