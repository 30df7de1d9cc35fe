//! Sorting, selection and scans along one dim, for every dtype, with PyTorch's NaN
//! rules: NaN sorts as the largest value (last ascending, first descending), `max`/`min`
//! and their indices propagate the first NaN, scans carry NaN from where it appears on.
//!
//! The kernels work on rows: the dim is moved last and made contiguous, each row is
//! handled on its own, and rows are split over the threads when the work is large
//! (`ops::parallel::par_ok`; `per_row` on the spinning team, `nonzero` on rayon's
//! pool). Tensors on other devices are computed on the CPU and the results moved back.
//! Pure compute: no PyO3, no autograd (the bindings record nodes).
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use crate::ops::parallel::par_ok;
use candle_core::{DType, Device, Result, Tensor, WithDType};
use half::{bf16, f16};
use rayon::prelude::*;
use std::cmp::Ordering;

/// An element type the kernels order: a total order in which NaN is the largest value
/// and NaNs are equal to each other (PyTorch's sort order).
pub(crate) trait Key: WithDType + Copy + Send + Sync + 'static {
    fn is_nan(self) -> bool {
        false
    }
    fn is_zero(self) -> bool;
    #[inline]
    fn key_cmp(self, o: Self) -> Ordering {
        match (self.is_nan(), o.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // Not NaN: the partial order is total (and -0.0 == 0.0, as PyTorch's compare).
            (false, false) => self.partial_cmp_(o),
        }
    }
    fn partial_cmp_(self, o: Self) -> Ordering;
    /// Equal as PyTorch's `unique` compares (NaN equals nothing).
    #[inline]
    fn same(self, o: Self) -> bool {
        !self.is_nan() && !o.is_nan() && self.partial_cmp_(o) == Ordering::Equal
    }
}

macro_rules! key_int {
    ($($t:ty),*) => {$(
        impl Key for $t {
            #[inline]
            fn is_zero(self) -> bool { self == 0 }
            #[inline]
            fn partial_cmp_(self, o: Self) -> Ordering { self.cmp(&o) }
        }
    )*};
}
key_int!(u8, u32, i16, i32, i64);

macro_rules! key_float {
    ($($t:ty => $to:expr),*) => {$(
        impl Key for $t {
            #[inline]
            fn is_nan(self) -> bool { self.is_nan() }
            #[inline]
            fn is_zero(self) -> bool { $to(self) == 0.0 }
            #[inline]
            fn partial_cmp_(self, o: Self) -> Ordering { $to(self).partial_cmp(&$to(o)).unwrap_or(Ordering::Equal) }
        }
    )*};
}
key_float!(
    f32 => |x: f32| x as f64,
    f64 => |x: f64| x,
    f16 => |x: f16| x.to_f64(),
    bf16 => |x: bf16| x.to_f64()
);

/// Run `$body` with `$v` bound to the elements of the tensor `$t` as a slice of its
/// dtype (`$T` names the type inside the body): a dense CPU tensor's own storage,
/// borrowed (a copy of the input was 6% of a `topk`), anything else copied first.
macro_rules! with_key {
    ($t:expr, $op:expr, |$v:ident: $T:ident| $body:expr) => {{
        let t: &Tensor = &$t;
        match t.dtype() {
            DType::U8 => key_arm!(t, $op, $v, $T, $body, u8, U8),
            DType::U32 => key_arm!(t, $op, $v, $T, $body, u32, U32),
            DType::I16 => key_arm!(t, $op, $v, $T, $body, i16, I16),
            DType::I32 => key_arm!(t, $op, $v, $T, $body, i32, I32),
            DType::I64 => key_arm!(t, $op, $v, $T, $body, i64, I64),
            DType::F16 => key_arm!(t, $op, $v, $T, $body, f16, F16),
            DType::BF16 => key_arm!(t, $op, $v, $T, $body, bf16, BF16),
            DType::F32 => key_arm!(t, $op, $v, $T, $body, f32, F32),
            DType::F64 => key_arm!(t, $op, $v, $T, $body, f64, F64),
            d => candle_core::bail!("{}: unsupported dtype {d:?}", $op),
        }
    }};
}

/// One dtype's arm of `with_key`: `$ty` is the element type, `$var` its storage variant.
macro_rules! key_arm {
    ($t:expr, $op:expr, $v:ident, $T:ident, $body:expr, $ty:ty, $var:ident) => {{
        type $T = $ty;
        let owned: Vec<$T>;
        let guard;
        // Checked before the storage is locked: the copy below locks it again.
        let $v: &[$T] = match ($t.device().is_cpu(), $t.layout().contiguous_offsets()) {
            (true, Some((a, b))) => {
                guard = $t.storage_and_layout().0;
                match &*guard {
                    candle_core::Storage::Cpu(candle_core::CpuStorage::$var(s)) => &s[a..b],
                    _ => candle_core::bail!("{}: storage does not hold its dtype", $op),
                }
            }
            _ => {
                owned = $t.flatten_all()?.to_vec1()?;
                &owned
            }
        };
        $body
    }};
}

/// `t` with `d` moved last, contiguous on the CPU: rows of `n` elements.
fn rows_last(t: &Tensor, d: usize) -> Result<Tensor> {
    let last = t.rank() - 1;
    let x = if d == last { t.clone() } else { t.transpose(d, last)? };
    x.to_device(&Device::Cpu)?.dense()
}

/// Undo `rows_last` on a result whose rows (last dim) replace dim `d` of the input,
/// back on `dev`.
fn from_rows(x: Tensor, d: usize, dev: &Device) -> Result<Tensor> {
    let last = x.rank() - 1;
    let x = if d == last { x } else { x.transpose(d, last)?.dense()? };
    x.to_device(dev)
}

/// `f(row, out_row)` for every row of `n` inputs and `m` outputs, parallel when large:
/// on the spinning team (`ops::parallel::for_chunks`), a contiguous run of rows per
/// thread. On rayon's pool the worker slept between calls and, on a virtual machine,
/// woke too late to help: `topk(5)` over 2048 rows of 384 ran at one thread's speed
/// in most calls (1.45 ms, 0.7 ms when both threads worked).
fn per_row<T: Sync, U: Send>(src: &[T], n: usize, out: &mut [U], m: usize, f: impl Fn(&[T], &mut [U]) + Sync + Send) {
    if m == 0 {
        return;
    }
    let rows = out.len() / m;
    let work = src.len().max(rows) * (usize::BITS - n.leading_zeros()).max(1) as usize;
    let per = ((1 << 14) / n.max(1)).max(1);
    crate::ops::parallel::for_chunks(out, per * m, par_ok(work), |c, o| {
        for (k, orow) in o.chunks_mut(m).enumerate() {
            let r = c * per + k;
            f(&src[r * n..(r + 1) * n], orow);
        }
    });
}

/// `(values, indices)` of each row's elements in order; every sort is stable (equal
/// elements keep their order), which satisfies `stable=False` as well.
fn sort_rows<T: Key>(x: &[T], n: usize, descending: bool) -> (Vec<T>, Vec<i64>) {
    let mut idx = vec![0i64; x.len()];
    per_row(x, n, &mut idx, n, |row, o| {
        let mut keys = Vec::new();
        if packed_keys(row, descending, &mut keys) {
            keys.sort_unstable();
            return write_positions(&keys, o);
        }
        let mut ix: Vec<u32> = (0..n as u32).collect();
        if descending {
            ix.sort_by(|&a, &b| row[b as usize].key_cmp(row[a as usize]));
        } else {
            ix.sort_by(|&a, &b| row[a as usize].key_cmp(row[b as usize]));
        }
        for (d, &i) in o.iter_mut().zip(&ix) {
            *d = i as i64;
        }
    });
    let vals = gather_rows(x, n, &idx, n);
    (vals, idx)
}

/// A row's elements as integers in its sort order, `key << 32 | position` (the key's
/// bits reversed for a descending order), so that plain integer order is the stable
/// order PyTorch's sort and topk give: by value, NaN the largest (all NaNs equal),
/// -0.0 equal to 0.0, ties by position. False (and `buf` left empty) for the dtypes
/// whose order does not fit 32 bits (float64, int64), which compare through `Key`.
///
/// Why: sorting positions with a comparison that looks both values up and tests them
/// for NaN ran `sort(-1)` of an (8, 256, 384) float32 tensor at 1.12x torch's time and
/// `topk(50, -1)` at 1.5x; integers compare in one instruction, without branches.
fn packed_keys<T: Key>(row: &[T], reverse: bool, buf: &mut Vec<u64>) -> bool {
    use std::any::TypeId;
    let flip = if reverse { u32::MAX } else { 0 };
    let id = TypeId::of::<T>();
    macro_rules! fill {
        ($ty:ty, $key:expr) => {{
            // SAFETY: `T` is `$ty` (same type id), so the slice is a slice of it.
            let r = unsafe { std::slice::from_raw_parts(row.as_ptr() as *const $ty, row.len()) };
            buf.clear();
            buf.extend(r.iter().enumerate().map(|(i, &v)| (u64::from($key(v) ^ flip) << 32) | i as u64));
            true
        }};
    }
    if id == TypeId::of::<f32>() {
        fill!(f32, f32_key)
    } else if id == TypeId::of::<f16>() {
        fill!(f16, |v: f16| f32_key(v.to_f32()))
    } else if id == TypeId::of::<bf16>() {
        fill!(bf16, |v: bf16| f32_key(v.to_f32()))
    } else if id == TypeId::of::<i32>() {
        fill!(i32, |v: i32| (v as u32) ^ 0x8000_0000)
    } else if id == TypeId::of::<i16>() {
        fill!(i16, |v: i16| (v as i32 as u32) ^ 0x8000_0000)
    } else if id == TypeId::of::<u8>() {
        fill!(u8, u32::from)
    } else if id == TypeId::of::<u32>() {
        fill!(u32, |v: u32| v)
    } else {
        false
    }
}

/// An f32's place in the sort order as an unsigned integer: negative values below
/// positive ones, -0.0 as 0.0, every NaN above +inf.
#[inline(always)]
fn f32_key(v: f32) -> u32 {
    if v.is_nan() {
        return u32::MAX;
    }
    let b = if v == 0.0 { 0 } else { v.to_bits() };
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The positions held in the low halves of `packed_keys`, in order.
fn write_positions(keys: &[u64], out: &mut [i64]) {
    for (d, &k) in out.iter_mut().zip(keys) {
        *d = (k & 0xffff_ffff) as i64;
    }
}

/// The elements at each row's `m` indices.
fn gather_rows<T: Key>(x: &[T], n: usize, idx: &[i64], m: usize) -> Vec<T> {
    if m == 0 {
        return Vec::new();
    }
    idx.chunks(m).enumerate().flat_map(|(r, ix)| ix.iter().map(move |&i| x[r * n + i as usize])).collect()
}

/// `(values, indices)` of the `k` largest (smallest) of each row, largest (smallest)
/// first; ties go to the lower index, as PyTorch's CPU kernel orders them.
fn topk_rows<T: Key>(x: &[T], n: usize, k: usize, largest: bool) -> (Vec<T>, Vec<i64>) {
    let rows = x.len().checked_div(n).unwrap_or(0);
    let mut idx = vec![0i64; rows * k];
    per_row(x, n, &mut idx, k, |row, o| {
        let order = |a: &u32, b: &u32| {
            let c = row[*a as usize].key_cmp(row[*b as usize]);
            (if largest { c.reverse() } else { c }).then(a.cmp(b))
        };
        if k <= SCAN_K && k * 16 <= n {
            return top_by_scan(row, k, largest, o);
        }
        let mut keys = Vec::new();
        if packed_keys(row, largest, &mut keys) {
            if k < n {
                keys.select_nth_unstable(k);
                keys.truncate(k);
            }
            keys.sort_unstable();
            return write_positions(&keys, o);
        }
        let mut ix: Vec<u32> = (0..n as u32).collect();
        if k < n {
            ix.select_nth_unstable_by(k, order);
            ix.truncate(k);
        }
        ix.sort_unstable_by(order);
        for (d, &i) in o.iter_mut().zip(&ix) {
            *d = i as i64;
        }
    });
    let vals = gather_rows(x, n, &idx, k);
    (vals, idx)
}

/// The largest `k` that `topk` finds in one scan of a row (`top_by_scan`), for rows of
/// `16 k` or more; larger ones (and shorter rows, where most elements would enter the
/// list) select and sort.
const SCAN_K: usize = 64;

/// The positions of a row's `k` first elements in `topk`'s order (by value, largest or
/// smallest first, NaN as the largest value, ties by position), in one pass: a sorted
/// list of the best `k` so far, which an element enters only when it beats the list's
/// last. On random data that happens about `k ln(n / k)` times, so the pass is one
/// comparison per element; selecting over an index array (`select_nth_unstable_by`)
/// compared through the indices several times per element: `topk(5)` over the last
/// dim of an (8, 256, 384) tensor took 6.6 ms, torch 1.3.
fn top_by_scan<T: Key>(row: &[T], k: usize, largest: bool, out: &mut [i64]) {
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
        // SAFETY: `T` is f32 (same type id), so the slice is a slice of f32.
        let row = unsafe { std::slice::from_raw_parts(row.as_ptr() as *const f32, row.len()) };
        return top_by_scan_f32(row, k, largest, out);
    }
    top_by_scan_any(row, k, largest, out)
}

/// `top_by_scan` for f32 rows: each block of 16 is tested at once for candidates (an
/// element not ordered after the list's last: `!(v <= w)` for the largest, which lets
/// NaN through, and `!(v >= w)` for the smallest), and only the candidates go through
/// the exact order of `top_by_scan_any`. Compiled for the CPU's vector level, where a
/// block's test is one compare and a mask move.
fn top_by_scan_f32(row: &[f32], k: usize, largest: bool, out: &mut [i64]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::ops::cpu::Simd;
        // SAFETY: each variant runs where `simd_level` found its features.
        match (crate::ops::cpu::simd_level(), largest) {
            (Simd::Avx512, true) => return unsafe { scan_f32_avx512::<true>(row, k, out) },
            (Simd::Avx512, false) => return unsafe { scan_f32_avx512::<false>(row, k, out) },
            (Simd::Avx2, true) => return unsafe { scan_f32_avx2::<true>(row, k, out) },
            (Simd::Avx2, false) => return unsafe { scan_f32_avx2::<false>(row, k, out) },
            _ => {}
        }
    }
    if largest {
        scan_f32::<true>(row, k, out)
    } else {
        scan_f32::<false>(row, k, out)
    }
}

/// # Safety
/// The CPU has AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn scan_f32_avx512<const LARGEST: bool>(row: &[f32], k: usize, out: &mut [i64]) {
    scan_f32::<LARGEST>(row, k, out)
}

/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scan_f32_avx2<const LARGEST: bool>(row: &[f32], k: usize, out: &mut [i64]) {
    scan_f32::<LARGEST>(row, k, out)
}

#[inline(always)]
fn scan_f32<const LARGEST: bool>(row: &[f32], k: usize, out: &mut [i64]) {
    if k <= SHORT {
        scan_with::<LARGEST, _>(row, Short::<LARGEST>::new(k), out)
    } else {
        scan_with::<LARGEST, _>(row, Long::<LARGEST>(Vec::with_capacity(k + 1), k), out)
    }
}

/// The sorted list of a row's best `k` elements so far, with their positions.
trait Best {
    /// The list's last value (the list is full).
    fn last(&self) -> f32;
    /// `v` at position `i` (later than every kept element) into the list, when it
    /// comes before the list's last or the list is not full.
    fn offer(&mut self, v: f32, i: usize);
    /// The kept positions, first to last.
    fn write(&self, out: &mut [i64]);
}

/// Lists up to this long are kept in fixed arrays, updated without branches.
const SHORT: usize = 16;

/// A list of at most `SHORT` in fixed arrays: an insertion counts the elements it does
/// not beat and shifts the rest with selects over the list, where `insert`'s search
/// and shift loops mispredicted their exits about twice per insertion on random data.
struct Short<const LARGEST: bool> {
    v: [f32; SHORT],
    ix: [u32; SHORT],
    len: usize,
    k: usize,
}

impl<const LARGEST: bool> Short<LARGEST> {
    fn new(k: usize) -> Self {
        Short { v: [0.0; SHORT], ix: [0; SHORT], len: 0, k }
    }
}

impl<const LARGEST: bool> Best for Short<LARGEST> {
    #[inline(always)]
    fn last(&self) -> f32 {
        self.v[self.k - 1]
    }

    #[inline(always)]
    fn offer(&mut self, v: f32, i: usize) {
        // The kept elements `v` does not beat are a prefix of the list: count them.
        // Both loops run a fixed count once the list is full (k), so their exits
        // predict; the data-dependent parts are selects.
        let mut at = 0;
        for &b in &self.v[..self.len] {
            at += after_f32::<LARGEST>(v, b) as usize;
        }
        if at >= self.k {
            return;
        }
        for j in (1..self.k).rev() {
            let shift = j > at;
            self.v[j] = if shift { self.v[j - 1] } else { self.v[j] };
            self.ix[j] = if shift { self.ix[j - 1] } else { self.ix[j] };
        }
        self.v[at] = v;
        self.ix[at] = i as u32;
        self.len = (self.len + 1).min(self.k);
    }

    fn write(&self, out: &mut [i64]) {
        for (d, &i) in out.iter_mut().zip(&self.ix[..self.len]) {
            *d = i as i64;
        }
    }
}

/// `after(v, b, LARGEST)` for f32 without branches: `v` is not ordered before `b`
/// (NaN the largest value, NaNs equal, -0.0 equal to 0.0).
#[inline(always)]
fn after_f32<const LARGEST: bool>(v: f32, b: f32) -> bool {
    let (vn, bn) = (v.is_nan(), b.is_nan());
    if LARGEST {
        !((v > b) | (vn & !bn))
    } else {
        !((v < b) | (!vn & bn))
    }
}

/// A longer list: `insert`'s search from the end (an element that enters a long list
/// mostly lands near its end).
struct Long<const LARGEST: bool>(Vec<(f32, u32)>, usize);

impl<const LARGEST: bool> Best for Long<LARGEST> {
    #[inline(always)]
    fn last(&self) -> f32 {
        self.0[self.1 - 1].0
    }

    #[inline(always)]
    fn offer(&mut self, v: f32, i: usize) {
        insert(&mut self.0, self.1, v, i, LARGEST)
    }

    fn write(&self, out: &mut [i64]) {
        for (d, &(_, i)) in out.iter_mut().zip(&self.0) {
            *d = i as i64;
        }
    }
}

#[inline(always)]
fn scan_with<const LARGEST: bool, L: Best>(row: &[f32], mut best: L, out: &mut [i64]) {
    let n = row.len().min(out.len());
    // The first k elements fill the list.
    for (i, &v) in row[..n].iter().enumerate() {
        best.offer(v, i);
    }
    let mut i = n;
    for block in row[n..].chunks(16) {
        // The block's candidates as bits, visited by their positions: of a block
        // holding a candidate, most elements are not, and testing each of them through
        // the exact order (NaN tests, the direction) ran ~20 cycles per element.
        let w = best.last();
        let mut bits = 0u32;
        if let Ok(b) = <&[f32; 16]>::try_from(block) {
            for (j, &v) in b.iter().enumerate() {
                bits |= (candidate(v, w, LARGEST) as u32) << j;
            }
        } else {
            for (j, &v) in block.iter().enumerate() {
                bits |= (candidate(v, w, LARGEST) as u32) << j;
            }
        }
        while bits != 0 {
            let j = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (v, w) = (block[j], best.last());
            // The list's last may have moved up since the block's test.
            if candidate(v, w, LARGEST) && !after(v, w, LARGEST) {
                best.offer(v, i + j);
            }
        }
        i += block.len();
    }
    best.write(out);
}

/// Whether `v` may come before `w` in `topk`'s order: a plain compare does not put it
/// after `w`. Negated on purpose: a NaN `v` (unordered, first among the largest) passes.
#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn candidate(v: f32, w: f32, largest: bool) -> bool {
    if largest {
        !(v <= w)
    } else {
        !(v >= w)
    }
}

/// `a` comes after `b` in `topk`'s order (an equal value after it as well: `a` is later
/// in the row wherever this is asked).
#[inline(always)]
fn after<T: Key>(a: T, b: T, largest: bool) -> bool {
    let c = a.key_cmp(b);
    if largest {
        c != Ordering::Greater
    } else {
        c != Ordering::Less
    }
}

/// `v` (at `i`, later than every kept element) into the sorted list `best`, kept to `k`.
#[inline(always)]
fn insert<T: Key>(best: &mut Vec<(T, u32)>, k: usize, v: T, i: usize, largest: bool) {
    // Its place: after every kept element it does not beat (ties stay in row order).
    let at = best.iter().rposition(|&(b, _)| after(v, b, largest)).map_or(0, |p| p + 1);
    if at >= k {
        return;
    }
    // Shifted by hand: `Vec::insert`'s `memmove` call for a few elements, made ~30 times a
    // row, cost more than the row's comparisons.
    if best.len() < k {
        best.push((v, i as u32));
    }
    for j in (at + 1..best.len()).rev() {
        best[j] = best[j - 1];
    }
    best[at] = (v, i as u32);
}

/// `top_by_scan` for any key type.
fn top_by_scan_any<T: Key>(row: &[T], k: usize, largest: bool, out: &mut [i64]) {
    let mut best: Vec<(T, u32)> = Vec::with_capacity(k + 1);
    for (i, &v) in row.iter().enumerate() {
        if best.len() == k && after(v, best[k - 1].0, largest) {
            continue;
        }
        insert(&mut best, k, v, i, largest);
    }
    for (d, &(_, i)) in out.iter_mut().zip(&best) {
        *d = i as i64;
    }
}

/// Which element of a row `kth` selects.
#[derive(Clone, Copy)]
pub enum Pick {
    /// The k-th smallest (0-based) in sort order (NaN largest; ties by position).
    Kth(usize),
    /// The lower median; a row holding NaN gives its first NaN (PyTorch's `median`).
    Median,
    /// The most frequent value (the smallest of those tied), at its last position;
    /// NaNs are never equal to each other.
    Mode,
}

fn kth_rows<T: Key>(x: &[T], n: usize, pick: Pick) -> (Vec<T>, Vec<i64>) {
    let rows = x.len().checked_div(n).unwrap_or(0);
    let mut idx = vec![0i64; rows];
    per_row(x, n, &mut idx, 1, |row, o| {
        let k = match pick {
            Pick::Mode => {
                o[0] = mode_index(row) as i64;
                return;
            }
            Pick::Kth(k) => k,
            Pick::Median => match row.iter().position(|v| v.is_nan()) {
                Some(p) => {
                    o[0] = p as i64;
                    return;
                }
                None => (n - 1) / 2,
            },
        };
        let mut ix: Vec<u32> = (0..n as u32).collect();
        let (_, nth, _) = ix.select_nth_unstable_by(k, |a, b| row[*a as usize].key_cmp(row[*b as usize]).then(a.cmp(b)));
        o[0] = *nth as i64;
    });
    let vals = gather_rows(x, n, &idx, 1);
    (vals, idx)
}

/// The position of a row's mode: runs of equal values in sorted order, the longest
/// (the first, so the smallest value, on ties), its last position in the row.
fn mode_index<T: Key>(row: &[T]) -> usize {
    let mut ix: Vec<u32> = (0..row.len() as u32).collect();
    ix.sort_by(|&a, &b| row[a as usize].key_cmp(row[b as usize]).then(a.cmp(&b)));
    let (mut best, mut best_len) = (ix[0], 0usize);
    let mut start = 0;
    for i in 1..=ix.len() {
        if i == ix.len() || !row[ix[i] as usize].same(row[ix[start] as usize]) {
            if i - start > best_len {
                // Positions within a run are ascending: its last is the largest.
                best = ix[i - 1];
                best_len = i - start;
            }
            start = i;
        }
    }
    best as usize
}

/// Shape of the rows tensor (dim `d` moved last) with `m` per row.
fn rows_shape(t: &Tensor, d: usize, m: usize) -> Vec<usize> {
    let mut s = t.dims().to_vec();
    let last = s.len() - 1;
    s.swap(d, last);
    s[last] = m;
    s
}

fn pair<T: Key>(vals: Vec<T>, idx: Vec<i64>, shape: Vec<usize>, d: usize, dev: &Device) -> Result<(Tensor, Tensor)> {
    let v = Tensor::from_vec(vals, shape.clone(), &Device::Cpu)?;
    let i = Tensor::from_vec(idx, shape, &Device::Cpu)?;
    Ok((from_rows(v, d, dev)?, from_rows(i, d, dev)?))
}

/// `sort(t, d, descending)`: `(values, indices)` shaped as `t` (rank >= 1). Stable.
pub fn sort(t: &Tensor, d: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    let n = t.dims()[d];
    let x = rows_last(t, d)?;
    let shape = x.dims().to_vec();
    with_key!(x, "sort", |v: T| {
        let (vals, idx) = sort_rows::<T>(v, n, descending);
        pair(vals, idx, shape, d, t.device())
    })
}

/// `topk(t, k, d, largest)`: `(values, indices)` with dim `d` of size `k` (`k <= size`).
pub fn topk(t: &Tensor, k: usize, d: usize, largest: bool) -> Result<(Tensor, Tensor)> {
    let n = t.dims()[d];
    if k > n {
        candle_core::bail!("topk: selected index k out of range");
    }
    let x = rows_last(t, d)?;
    let shape = rows_shape(t, d, k);
    with_key!(x, "topk", |v: T| {
        let (vals, idx) = topk_rows::<T>(v, n, k, largest);
        pair(vals, idx, shape, d, t.device())
    })
}

/// `kthvalue` / `median` along `d`: `(values, indices)` with dim `d` kept as size 1.
/// The dim must not be empty.
pub fn kth(t: &Tensor, d: usize, pick: Pick) -> Result<(Tensor, Tensor)> {
    let n = t.dims()[d];
    if n == 0 {
        candle_core::bail!("kthvalue: cannot select from an empty dimension");
    }
    let x = rows_last(t, d)?;
    let shape = rows_shape(t, d, 1);
    with_key!(x, "kthvalue", |v: T| {
        let (vals, idx) = kth_rows::<T>(v, n, pick);
        pair(vals, idx, shape, d, t.device())
    })
}

/// `max`/`min` along `d` with the index of the extreme (the first one on ties), or of
/// the first NaN, whose value propagates: `(values, indices)`, `d` kept as size 1.
pub fn extreme(t: &Tensor, d: usize, is_max: bool) -> Result<(Tensor, Tensor)> {
    let n = t.dims()[d];
    if n == 0 {
        candle_core::bail!("cannot reduce over an empty dimension");
    }
    if !t.device().is_cpu() {
        return extreme_on_device(t, d, is_max);
    }
    let x = rows_last(t, d)?;
    let shape = rows_shape(t, d, 1);
    match x.dtype() {
        DType::F32 => return extreme_float::<f32>(&x, n, is_max, shape, d, t.device()),
        DType::F64 => return extreme_float::<f64>(&x, n, is_max, shape, d, t.device()),
        _ => {}
    }
    with_key!(x, "max", |v: T| {
        let rows = v.len() / n;
        let mut idx = vec![0i64; rows];
        per_row(v, n, &mut idx, 1, |row, o| {
            let mut best = 0usize;
            for (i, &e) in row.iter().enumerate().skip(1) {
                let b = row[best];
                if b.is_nan() {
                    break;
                }
                let better =
                    e.is_nan() || if is_max { e.partial_cmp_(b) == Ordering::Greater } else { e.partial_cmp_(b) == Ordering::Less };
                if better {
                    best = i;
                }
            }
            o[0] = best as i64;
        });
        let vals = gather_rows(v, n, &idx, 1);
        pair(vals, idx, shape, d, t.device())
    })
}

/// `extreme` for float rows (`x` dense, rows of `n` last): read in place (no copy to
/// a vector first), each row in two vectorized passes over L1-resident data, the
/// extreme value (and whether a NaN is present), then the first index holding it
/// (or the first NaN). The value is read back at that index, so ties between -0.0
/// and 0.0 go to the first, as in the one-pass scan.
fn extreme_float<T: Float + Key>(
    x: &Tensor,
    n: usize,
    is_max: bool,
    shape: Vec<usize>,
    d: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    let (st, l) = x.storage_and_layout();
    let candle_core::Storage::Cpu(cs) = &*st else { candle_core::bail!("max: expected a CPU tensor") };
    let Some(all) = T::slice(cs) else { candle_core::bail!("max: unexpected dtype") };
    let Some((a, b)) = l.contiguous_offsets() else { candle_core::bail!("max: expected a dense input") };
    let v = &all[a..b];
    let rows = v.len() / n;
    let mut idx = vec![0i64; rows];
    let level = crate::ops::cpu::simd_level();
    per_row(v, n, &mut idx, 1, |row, o| {
        use crate::ops::cpu::Simd;
        o[0] = match (is_max, level) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the level says the CPU has AVX-512.
            (true, Simd::Avx512) => unsafe { first_extreme_avx512::<T, true>(row) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (false, Simd::Avx512) => unsafe { first_extreme_avx512::<T, false>(row) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the level says the CPU has AVX2 and FMA.
            (true, Simd::Avx2) => unsafe { first_extreme_avx2::<T, true>(row) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (false, Simd::Avx2) => unsafe { first_extreme_avx2::<T, false>(row) },
            (true, _) => first_extreme::<T, true>(row),
            (false, _) => first_extreme::<T, false>(row),
        } as i64;
    });
    let vals = gather_rows(v, n, &idx, 1);
    drop(st);
    pair(vals, idx, shape, d, dev)
}

/// The index of the first maximum (`MAX`) or minimum of a non-empty row, or of its
/// first NaN.
#[inline(always)]
fn first_extreme<T: Float, const MAX: bool>(row: &[T]) -> usize {
    let better = |e: T, m: T| if MAX { e > m } else { e < m };
    let mut acc = [row[0]; 16];
    let mut nan = [false; 16];
    let chunks = row.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..16 {
            acc[k] = if better(c[k], acc[k]) { c[k] } else { acc[k] };
            nan[k] |= c[k].is_nan();
        }
    }
    let mut m = row[0];
    let mut any_nan = nan.iter().any(|&b| b);
    for &e in acc.iter().chain(rest) {
        m = if better(e, m) { e } else { m };
        any_nan |= e.is_nan();
    }
    let hit = |e: T| if any_nan { e.is_nan() } else { e == m };
    let chunks = row.chunks_exact(16);
    let rest = chunks.remainder();
    for (ci, c) in chunks.enumerate() {
        let mut found = false;
        for &e in c {
            found |= hit(e);
        }
        if found {
            return ci * 16 + c.iter().position(|&e| hit(e)).expect("found in this chunk");
        }
    }
    let base = row.len() - rest.len();
    base + rest.iter().position(|&e| hit(e)).expect("the extreme is in the row")
}

/// `first_extreme` compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA (`ops::cpu::has_avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn first_extreme_avx512<T: Float, const MAX: bool>(row: &[T]) -> usize {
    first_extreme::<T, MAX>(row)
}

/// `first_extreme` compiled for AVX2 (CPUs without AVX-512 ran the baseline build).
///
/// # Safety
/// The CPU must support AVX2 and FMA (`ops::cpu::has_avx2_fma`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn first_extreme_avx2<T: Float, const MAX: bool>(row: &[T]) -> usize {
    first_extreme::<T, MAX>(row)
}

/// `extreme` where the tensor lives (CUDA, Metal), from Candle's reductions: their
/// result, overridden by NaN and the first NaN's index in rows holding one.
fn extreme_on_device(t: &Tensor, d: usize, is_max: bool) -> Result<(Tensor, Tensor)> {
    let vals = if is_max { t.max_keepdim(d)? } else { t.min_keepdim(d)? };
    let idx = if is_max { t.argmax_keepdim(d)? } else { t.argmin_keepdim(d)? }.to_dtype(DType::I64)?;
    if !t.dtype().is_float() {
        return Ok((vals, idx));
    }
    let nan = t.ne(t)?;
    let any = nan.max_keepdim(d)?;
    let first = nan.argmax_keepdim(d)?.to_dtype(DType::I64)?;
    let nans = vals.ones_like()?.affine(f64::NAN, 0.0)?;
    Ok((any.where_cond(&nans, &vals)?, any.where_cond(&first, &idx)?))
}

/// What `scan` accumulates.
#[derive(Clone, Copy, PartialEq)]
pub enum Scan {
    Sum,
    Prod,
    /// `log(cumsum(exp(x)))`, computed stably (floats only).
    LogSumExp,
}

/// Running sum / product / log-sum-exp along `d` of a float tensor, accumulated in f64
/// with each output rounded to the dtype (PyTorch's CPU kernels accumulate in double).
/// NaN propagates from where it appears on.
pub fn scan(t: &Tensor, d: usize, op: Scan) -> Result<Tensor> {
    let n = t.dims()[d];
    if t.elem_count() == 0 {
        return Ok(t.clone());
    }
    if !t.dtype().is_float() {
        // Integers go through `scan_i64` (exact); f64 would round above 2^53.
        candle_core::bail!("scan: expected a float input, got {:?}", t.dtype());
    }
    if t.device().is_cpu() && matches!(t.dtype(), DType::F32 | DType::F64) && op != Scan::LogSumExp {
        // Sums and products in the input's layout (`ops::scan`), no transposes.
        let x = t.dense()?;
        let dims = x.dims().to_vec();
        let shape = (dims[..d].iter().product(), n, dims[d + 1..].iter().product());
        let (st, l) = x.storage_and_layout();
        let prod = op == Scan::Prod;
        let name = if prod { "cumprod" } else { "cumsum" };
        return match &*st {
            candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) => {
                Tensor::from_vec(super::scan::scan(super::storage::data(v, l, name)?, shape, prod), dims, &Device::Cpu)
            }
            candle_core::Storage::Cpu(candle_core::CpuStorage::F64(v)) => {
                Tensor::from_vec(super::scan::scan(super::storage::data(v, l, name)?, shape, prod), dims, &Device::Cpu)
            }
            _ => candle_core::bail!("{name}: expected a float32 or float64 CPU tensor"),
        };
    }
    let x = rows_last(t, d)?;
    let shape = x.dims().to_vec();
    let out = with_key!(x, "cumsum", |v: T| {
        let mut o = vec![v[0]; v.len()];
        per_row(v, n, &mut o, n, |row, orow| {
            let mut acc = match op {
                Scan::Sum => 0.0,
                Scan::Prod => 1.0,
                Scan::LogSumExp => f64::NEG_INFINITY,
            };
            for (d, &e) in orow.iter_mut().zip(row) {
                let e = e.to_f64();
                acc = match op {
                    Scan::Sum => acc + e,
                    Scan::Prod => acc * e,
                    Scan::LogSumExp => log_add_exp(acc, e),
                };
                *d = T::from_f64(acc);
            }
        });
        Tensor::from_vec(o, shape, &Device::Cpu)?
    });
    from_rows(out, d, t.device())
}

/// Integer running sums and products exactly, for int64 input (f64 would round above 2^53).
pub fn scan_i64(t: &Tensor, d: usize, prod: bool) -> Result<Tensor> {
    let n = t.dims()[d];
    if t.elem_count() == 0 {
        return Ok(t.clone());
    }
    let x = rows_last(&t.to_dtype(DType::I64)?, d)?;
    let shape = x.dims().to_vec();
    let v: Vec<i64> = x.flatten_all()?.to_vec1()?;
    let mut o = vec![0i64; v.len()];
    per_row(&v, n, &mut o, n, |row, orow| {
        let mut acc: i64 = if prod { 1 } else { 0 };
        for (d, &e) in orow.iter_mut().zip(row) {
            acc = if prod { acc.wrapping_mul(e) } else { acc.wrapping_add(e) };
            *d = acc;
        }
    });
    from_rows(Tensor::from_vec(o, shape, &Device::Cpu)?, d, t.device())
}

/// `log(exp(a) + exp(b))` without overflow; infinities as PyTorch's `logaddexp`.
#[inline]
fn log_add_exp(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if hi.is_infinite() {
        // -inf + -inf stays -inf; +inf absorbs anything (inf - inf would be NaN).
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// The gradient of `cumprod` along `d` (f32/f64): for each element the sum over later
/// outputs of `grad * d out / d x`, exact with zeros (before a row's first zero the
/// division form `revcumsum(grad * out) / x`; at the first zero the product of the
/// elements before it times the running sum after it; after it zero).
pub fn cumprod_backward(x: &Tensor, g: &Tensor, d: usize) -> Result<Tensor> {
    let n = x.dims()[d];
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let dt = x.dtype();
    let xr = rows_last(&x.to_dtype(DType::F64)?, d)?;
    let gr = rows_last(&g.to_dtype(DType::F64)?, d)?;
    let shape = xr.dims().to_vec();
    let xv: Vec<f64> = xr.flatten_all()?.to_vec1()?;
    let gv: Vec<f64> = gr.flatten_all()?.to_vec1()?;
    let mut o = vec![0f64; xv.len()];
    let both: Vec<(f64, f64)> = xv.into_iter().zip(gv).collect();
    per_row(&both, n, &mut o, n, |row, orow| {
        let z = row.iter().position(|&(x, _)| x == 0.0).unwrap_or(n);
        // Prefix products before the first zero.
        let mut pre = vec![1f64; z + 1];
        for i in 0..z {
            pre[i + 1] = pre[i] * row[i].0;
        }
        // i < z: sum_{j in i..z} g_j * out_j / x_i (later outputs are zero).
        let mut acc = 0f64;
        for i in (0..z).rev() {
            acc += row[i].1 * pre[i + 1];
            orow[i] = acc / row[i].0;
        }
        if z < n {
            // i == z: d out_j / d x_z = pre[z] * prod_{z<k<=j} x_k.
            let (mut run, mut s) = (pre[z], 0f64);
            for (j, &(xj, gj)) in row.iter().enumerate().skip(z) {
                if j > z {
                    run *= xj;
                }
                s += gj * run;
            }
            orow[z] = s;
        }
    });
    from_rows(Tensor::from_vec(o, shape, &Device::Cpu)?, d, x.device())?.to_dtype(dt)
}

/// The gradient of `logcumsumexp` along `d`: `grad_i = sum_{j >= i} g_j exp(x_i - out_j)`,
/// with the sums over later outputs taken in log space (positive and negative parts of
/// `g` apart), so large inputs neither overflow nor lose the small terms.
pub fn logcumsumexp_backward(x: &Tensor, out: &Tensor, g: &Tensor, d: usize) -> Result<Tensor> {
    let n = x.dims()[d];
    if x.elem_count() == 0 {
        return x.zeros_like();
    }
    let dt = x.dtype();
    let rows = |t: &Tensor| -> Result<Vec<f64>> { rows_last(&t.to_dtype(DType::F64)?, d)?.flatten_all()?.to_vec1() };
    let shape = rows_last(x, d)?.dims().to_vec();
    let (xv, ov, gv) = (rows(x)?, rows(out)?, rows(g)?);
    let all: Vec<(f64, f64, f64)> = xv.into_iter().zip(ov).zip(gv).map(|((a, b), c)| (a, b, c)).collect();
    let mut o = vec![0f64; all.len()];
    per_row(&all, n, &mut o, n, |row, orow| {
        let (mut pos, mut neg) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        for i in (0..n).rev() {
            let (x, out, g) = row[i];
            if g > 0.0 {
                pos = log_add_exp(pos, g.ln() - out);
            } else if g < 0.0 {
                neg = log_add_exp(neg, (-g).ln() - out);
            } else if g.is_nan() {
                pos = f64::NAN;
            }
            orow[i] = (x + pos).exp() - (x + neg).exp();
        }
    });
    from_rows(Tensor::from_vec(o, shape, &Device::Cpu)?, d, x.device())?.to_dtype(dt)
}

/// Row-major coordinates (`(count, rank)`, int64) of the nonzero elements; NaN is nonzero.
pub fn nonzero(t: &Tensor) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rank = dims.len();
    let x = t.to_device(&Device::Cpu)?.dense()?;
    let offs: Vec<usize> = with_key!(x, "nonzero", |v: T| {
        let chunk = 1 << 16;
        if par_ok(v.len()) {
            let parts: Vec<Vec<usize>> = crate::ops::parallel::in_pool(true, || {
                v.par_chunks(chunk)
                    .enumerate()
                    .map(|(c, s)| s.iter().enumerate().filter(|(_, e)| !e.is_zero()).map(|(i, _)| c * chunk + i).collect())
                    .collect()
            });
            parts.concat()
        } else {
            v.iter().enumerate().filter(|(_, e)| !e.is_zero()).map(|(i, _)| i).collect()
        }
    });
    let mut coords = vec![0i64; offs.len() * rank];
    if rank > 0 {
        for (c, &off) in coords.chunks_mut(rank).zip(&offs) {
            let mut rem = off;
            for k in (0..rank).rev() {
                c[k] = (rem % dims[k]) as i64;
                rem /= dims[k];
            }
        }
    }
    Tensor::from_vec(coords, (offs.len(), rank), &Device::Cpu)?.to_device(t.device())
}

/// `unique` of all elements (sorted; NaNs stay distinct, last) or of consecutive runs
/// (`consecutive`: in order): `(values, inverse, counts)`, inverse shaped as `t`.
pub fn unique(t: &Tensor, consecutive: bool) -> Result<(Tensor, Tensor, Tensor)> {
    let x = t.to_device(&Device::Cpu)?.dense()?;
    let shape = t.dims().to_vec();
    let dev = t.device();
    with_key!(x, "unique", |v: T| {
        let order: Vec<u32> = if consecutive {
            (0..v.len() as u32).collect()
        } else {
            let mut ix: Vec<u32> = (0..v.len() as u32).collect();
            ix.par_sort_by(|&a, &b| v[a as usize].key_cmp(v[b as usize]));
            ix
        };
        let mut vals: Vec<T> = Vec::new();
        let mut counts: Vec<i64> = Vec::new();
        let mut inverse = vec![0i64; v.len()];
        for &i in &order {
            let e = v[i as usize];
            match vals.last() {
                Some(&l) if l.same(e) => *counts.last_mut().expect("counts follow vals") += 1,
                _ => {
                    vals.push(e);
                    counts.push(1);
                }
            }
            inverse[i as usize] = vals.len() as i64 - 1;
        }
        let m = vals.len();
        Ok((
            Tensor::from_vec(vals, m, &Device::Cpu)?.to_device(dev)?,
            Tensor::from_vec(inverse, shape, &Device::Cpu)?.to_device(dev)?,
            Tensor::from_vec(counts, m, &Device::Cpu)?.to_device(dev)?,
        ))
    })
}

/// `unique(dim=d)`: the distinct slices along `d` in lexicographic order (NaN largest),
/// with `inverse` (one per slice) and `counts`.
pub fn unique_dim(t: &Tensor, d: usize, consecutive: bool) -> Result<(Tensor, Tensor, Tensor)> {
    let n = t.dims()[d];
    // Slices along d as rows: move d first.
    let x = if d == 0 { t.clone() } else { t.transpose(0, d)? }.to_device(&Device::Cpu)?.dense()?;
    let row = x.elem_count().checked_div(n).unwrap_or(0);
    let dev = t.device();
    with_key!(x, "unique", |v: T| {
        let slice = |i: u32| &v[i as usize * row..(i as usize + 1) * row];
        let cmp = |a: u32, b: u32| slice(a).iter().zip(slice(b)).map(|(p, q)| p.key_cmp(*q)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal);
        let mut order: Vec<u32> = (0..n as u32).collect();
        if !consecutive {
            order.sort_by(|&a, &b| cmp(a, b));
        }
        let mut keep: Vec<u32> = Vec::new();
        let mut counts: Vec<i64> = Vec::new();
        let mut inverse = vec![0i64; n];
        for &i in &order {
            match keep.last() {
                // Slices compare equal element by element (NaN equals NaN here, as
                // PyTorch's `unique(dim=)` compares slices).
                Some(&l) if cmp(l, i).is_eq() => *counts.last_mut().expect("counts follow keep") += 1,
                _ => {
                    keep.push(i);
                    counts.push(1);
                }
            }
            inverse[i as usize] = keep.len() as i64 - 1;
        }
        let m = keep.len();
        let data: Vec<T> = keep.iter().flat_map(|&i| slice(i).iter().copied()).collect();
        let mut sh = x.dims().to_vec();
        sh[0] = m;
        let vals = Tensor::from_vec(data, sh, &Device::Cpu)?;
        let vals = if d == 0 { vals } else { vals.transpose(0, d)?.dense()? };
        Ok((
            vals.to_device(dev)?,
            Tensor::from_vec(inverse, n, &Device::Cpu)?.to_device(dev)?,
            Tensor::from_vec(counts, m, &Device::Cpu)?.to_device(dev)?,
        ))
    })
}

/// `bincount`: counts (or summed f64 `weights`) of each value of the non-negative int64
/// `t`, `max(max + 1, minlength)` bins.
pub fn bincount(t: &Tensor, weights: Option<&Tensor>, minlength: usize) -> Result<Tensor> {
    let v: Vec<i64> = t.to_dtype(DType::I64)?.to_device(&Device::Cpu)?.to_vec1()?;
    let bins = v.iter().map(|&i| i as usize + 1).max().unwrap_or(0).max(minlength);
    let dev = t.device();
    match weights {
        None => {
            let mut out = vec![0i64; bins];
            for &i in &v {
                out[i as usize] += 1;
            }
            Tensor::from_vec(out, bins, &Device::Cpu)?.to_device(dev)
        }
        Some(w) => {
            let w: Vec<f64> = w.to_dtype(DType::F64)?.to_device(&Device::Cpu)?.to_vec1()?;
            let mut out = vec![0f64; bins];
            for (&i, &wi) in v.iter().zip(&w) {
                out[i as usize] += wi;
            }
            Tensor::from_vec(out, bins, &Device::Cpu)?.to_device(dev)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_puts_nan_last_and_is_stable() {
        let t = Tensor::new(&[3f32, f32::NAN, 1.0, 3.0], &Device::Cpu).unwrap();
        let (v, i) = sort(&t, 0, false).unwrap();
        let v: Vec<f32> = v.to_vec1().unwrap();
        assert_eq!(&v[..3], &[1.0, 3.0, 3.0]);
        assert!(v[3].is_nan());
        assert_eq!(i.to_vec1::<i64>().unwrap(), vec![2, 0, 3, 1]);
        let (_, i) = sort(&t, 0, true).unwrap();
        assert_eq!(i.to_vec1::<i64>().unwrap(), vec![1, 0, 3, 2]);
    }

    /// The packed integer keys give the stable order of `Key::key_cmp` (NaN largest and
    /// equal, -0.0 equal to 0.0, ties by position), ascending and descending, for
    /// sort and for topk's select path (k > 64), over rows full of ties and specials.
    #[test]
    fn packed_keys_sort_as_key_cmp() {
        fn check<T: Key + std::fmt::Debug>(row: &[T]) {
            let n = row.len();
            for rev in [false, true] {
                let mut want: Vec<u32> = (0..n as u32).collect();
                want.sort_by(|&a, &b| {
                    let c = row[a as usize].key_cmp(row[b as usize]);
                    if rev {
                        c.reverse()
                    } else {
                        c
                    }
                });
                let want: Vec<i64> = want.iter().map(|&i| i as i64).collect();
                let (_, got) = sort_rows(row, n, rev);
                assert_eq!(got, want, "sort descending={rev} of {row:?}");
                let (_, top) = topk_rows(row, n, 70, rev);
                assert_eq!(top, want[..70], "topk(70) largest={rev}");
            }
        }
        let specials = [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, f32::MAX, f32::MIN];
        let f: Vec<f32> =
            (0..300).map(|i| if i % 3 == 0 { specials[(i * 7) % specials.len()] } else { ((i * 37) % 11) as f32 - 5.0 }).collect();
        check(&f);
        check(&f.iter().map(|&v| half::f16::from_f32(v)).collect::<Vec<_>>());
        check(&f.iter().map(|&v| half::bf16::from_f32(v)).collect::<Vec<_>>());
        let ints: Vec<i32> = (0..300).map(|i| [i32::MIN, i32::MAX, 0, -1, 1][i % 5].wrapping_add(((i * 13) % 7) as i32 - 3)).collect();
        check(&ints);
        check(&ints.iter().map(|&v| v as i16).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as u8).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as u32).collect::<Vec<_>>());
        check(&ints.iter().map(|&v| v as i64).collect::<Vec<_>>());
    }

    /// The branchless f32 order of the short top-k lists against the generic one, over
    /// every pair of special values.
    #[test]
    fn after_f32_matches_after() {
        let vals = [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1.0, -1.0, 1e-45, f32::MAX];
        for &v in &vals {
            for &b in &vals {
                assert_eq!(after_f32::<true>(v, b), after(v, b, true), "largest: {v} after {b}");
                assert_eq!(after_f32::<false>(v, b), after(v, b, false), "smallest: {v} after {b}");
            }
        }
    }

    #[test]
    fn extreme_propagates_first_nan() {
        let t = Tensor::new(&[[1f32, f32::NAN, 5.0, f32::NAN]], &Device::Cpu).unwrap();
        let (_, i) = extreme(&t, 1, true).unwrap();
        assert_eq!(i.flatten_all().unwrap().to_vec1::<i64>().unwrap(), vec![1]);
    }

    #[test]
    fn cumprod_grad_with_zero() {
        // x = [2, 0, 3], g = 1: d/dx0 = 1 + 0 + 0 = 1, d/dx1 = 2 + 2*3 = 8, d/dx2 = 0.
        let x = Tensor::new(&[2f64, 0.0, 3.0], &Device::Cpu).unwrap();
        let g = x.ones_like().unwrap();
        let r: Vec<f64> = cumprod_backward(&x, &g, 0).unwrap().to_vec1().unwrap();
        assert_eq!(r, vec![1.0, 8.0, 0.0]);
    }
}
