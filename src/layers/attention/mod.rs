//! `scaled_dot_product_attention`: a fused, flash-style CPU kernel.
//!
//! The forward walks each block of query rows over blocks of keys with an online
//! softmax (running row max and row sum), so the L x S score matrix never exists
//! in memory: only a `BQ x BK` tile per task. Float32 block products run on our
//! register tiles (`ops::tiles::Tiles`, AVX2 or AVX-512) over K^T (and, in the
//! backward, V^T) panels transposed once per call; other dtypes and CPUs use the
//! `gemm` crate. The row work (mask, exp, rescale) is compiled for AVX-512 and AVX2
//! and picked at run time. Tasks are (batch, query block) pairs run with rayon.
//!
//! The op is a Candle `CustomOp3` over (q, k, v). Its backward is the
//! flash-attention backward: P is recomputed tile by tile from the per-row
//! logsumexp saved by the forward, then `dV = P^T dO`, `dS = P * (dP - rowsum(dO*O))`,
//! `dQ = scale * dS K`, `dK = scale * dS^T Q`. Broadcast batch dims and grouped-query
//! heads are handled with per-batch offset tables; gradients of shared k/v heads
//! (or broadcast inputs) are accumulated afterwards.
//!
//! Dropout uses a counter-based generator (SplitMix64 of a seed and the
//! (batch, row, column) index), so the backward sees the very same mask.

mod backward;
pub(crate) mod decode;
mod forward;
mod math;
mod microkernel;
mod rows;

use crate::ops::cpu::{simd_level, Simd};
use crate::ops::float::Float;
use crate::ops::gemm::{gemm, Parallelism};
use crate::ops::layout::Dense;
use crate::ops::parallel::SyncPtr;
use backward::backward;
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Result, Shape, Storage, Tensor};
use forward::forward;
pub(crate) use math::MathCfg;
use std::sync::Mutex;

pub(crate) const OP: &str = "scaled_dot_product_attention";

/// Query rows per forward task.
pub(crate) const BQ: usize = 64;
/// Keys per forward tile.
pub(crate) const BK: usize = 256;
const _: () = assert!(BK.is_multiple_of(64), "K panels are 64 keys wide");
/// Query rows / keys per backward tile.
pub(crate) const BQ_B: usize = 64;
pub(crate) const BK_B: usize = 128;

/// Query blocks of `bq` rows over `l` rows, the last one absorbing a remainder under
/// `bq / 2`: a ViT's 65 tokens make one block of 65, not 64 and a block of one row
/// whose per-tile overhead costs as much as the 64 (the products are tiny).
/// `(blocks, rows of block qb as i0..i1)`; a block has fewer than `bq + bq / 2` rows.
pub(crate) fn q_blocks(l: usize, bq: usize) -> usize {
    let rem = l % bq;
    if l > bq && rem != 0 && rem < bq / 2 {
        l / bq
    } else {
        l.div_ceil(bq)
    }
}

/// Rows `i0..i1` of query block `qb` of `nqb` (`q_blocks`).
pub(crate) fn q_block(qb: usize, nqb: usize, l: usize, bq: usize) -> (usize, usize) {
    let i0 = qb * bq;
    (i0, if qb + 1 == nqb { l } else { (i0 + bq).min(l) })
}

/// The most rows a query block of `q_blocks` has (for scratch sizes).
pub(crate) const fn q_block_max(bq: usize) -> usize {
    bq + bq / 2 - 1
}

#[inline(always)]
pub(crate) fn fmax<T: Float>(a: T, b: T) -> T {
    if a > b {
        a
    } else {
        b
    }
}

/// Everything about the shapes: sizes and, per output batch entry `n`, where
/// its q / k / v / mask data start (broadcast and grouped heads map several
/// `n` onto one input slice).
#[derive(Clone, Debug)]
pub(crate) struct Geo {
    pub(crate) n: usize,
    pub(crate) l: usize,
    pub(crate) s: usize,
    pub(crate) d: usize,
    pub(crate) dv: usize,
    pub(crate) q_off: Vec<usize>,
    pub(crate) k_off: Vec<usize>,
    pub(crate) v_off: Vec<usize>,
    pub(crate) m_off: Vec<usize>,
    /// Mask strides along rows and columns (0 where the mask broadcasts).
    pub(crate) m_rs: usize,
    pub(crate) m_cs: usize,
    /// Whether each input's offsets are all distinct (no broadcasting), so
    /// gradients can be written in place without a reduction.
    pub(crate) q_inj: bool,
    pub(crate) k_inj: bool,
    pub(crate) v_inj: bool,
    pub(crate) q_len: usize,
    pub(crate) k_len: usize,
    pub(crate) v_len: usize,
    /// Elements between consecutive rows (sequence positions) of q, k, v and the
    /// output. Both passes read transposed head views in place, so these need not
    /// be d / dv; in the geometry of the gradients (`Sdpa::geo_c`) they are d / dv, or
    /// H * d / H * dv where a gradient is stored (..., L, H, D).
    pub(crate) q_rs: usize,
    pub(crate) k_rs: usize,
    pub(crate) v_rs: usize,
    pub(crate) o_rs: usize,
    /// Where output entry `n` starts.
    pub(crate) o_off: Vec<usize>,
    /// The distinct k / v slices (their start offsets) and which one entry `n` reads:
    /// K and V are packed once per slice, however many entries share it.
    pub(crate) k_slices: Vec<usize>,
    pub(crate) k_idx: Vec<usize>,
    pub(crate) v_slices: Vec<usize>,
    pub(crate) v_idx: Vec<usize>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Cfg {
    pub(crate) causal: bool,
    pub(crate) scale: f64,
    pub(crate) dropout: f64,
    pub(crate) seed: u64,
    /// Keep the per-row logsumexp for a backward; inference skips it (a log per row).
    pub(crate) lse: bool,
}

impl Cfg {
    /// `(threshold, 1/(1-p))`: a contribution is kept when its 32-bit hash >= threshold.
    fn drop_params(&self) -> Option<(u64, f64)> {
        if self.dropout <= 0.0 {
            return None;
        }
        let thr = (self.dropout * 4_294_967_296.0).round() as u64;
        let inv = if self.dropout < 1.0 { 1.0 / (1.0 - self.dropout) } else { 0.0 };
        Some((thr, inv))
    }
}

#[inline(always)]
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The dropout multiplier (0 or 1/(1-p)) of entry (n, i, j): a pure function of the index.
#[inline(always)]
pub(crate) fn keep_factor<T: Float>(seed: u64, idx: u64, thr: u64, inv: T) -> T {
    let h = splitmix(seed ^ idx.wrapping_mul(0xD1B5_4A32_D192_ED03)) >> 32;
    if h >= thr {
        inv
    } else {
        T::ZERO
    }
}

pub(crate) struct Inputs<'a, T> {
    pub(crate) q: &'a [T],
    pub(crate) k: &'a [T],
    pub(crate) v: &'a [T],
    pub(crate) mask: Option<&'a [T]>,
}

pub(crate) fn cpu_slice<'a, T: Float>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [T]> {
    let v = T::slice(s).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: unexpected storage dtype")))?;
    crate::ops::storage::data(v, l, OP)
}

/// The storage from the layout's first element on: the forward reads strided
/// inputs through their own row and batch strides (see `Geo`).
pub(crate) fn cpu_slice_from<'a, T: Float>(s: &'a CpuStorage, l: &Layout) -> Result<&'a [T]> {
    let v = T::slice(s).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: unexpected storage dtype")))?;
    Ok(&v[l.start_offset()..])
}

/// `cpu_slice_from` of a storage that must be on the CPU.
pub(crate) fn storage_from<'a, T: Float>(s: &'a Storage, l: &Layout) -> Result<&'a [T]> {
    match s {
        Storage::Cpu(c) => cpu_slice_from(c, l),
        _ => candle_core::bail!("{OP}: the fused kernel runs on the CPU"),
    }
}

pub(crate) fn storage_slice<'a, T: Float>(s: &'a Storage, l: &Layout) -> Result<&'a [T]> {
    match s {
        Storage::Cpu(c) => cpu_slice(c, l),
        _ => candle_core::bail!("{OP}: the fused kernel runs on the CPU"),
    }
}

pub(crate) struct Sdpa {
    pub(crate) geo: Geo,
    /// Where the backward writes the inputs' gradients when the forward's geometry
    /// differs: contiguous, or (`grad_tm`) in the (..., L, H, D) order of an input read
    /// as a transposed head view.
    pub(crate) geo_c: Option<Geo>,
    /// Per input (q, k, v): its gradient is stored (..., L, H, D) and returned as the
    /// transposed view, so that the caller's `transpose(1, 2)` backward (and a fused
    /// projection's reshape) needs no transposing copy.
    pub(crate) grad_tm: [bool; 3],
    pub(crate) cfg: Cfg,
    /// The additive mask in the compute dtype (its own, unexpanded shape).
    pub(crate) mask: Option<Tensor>,
    pub(crate) out_shape: Vec<usize>,
    /// Per-row logsumexp saved by the forward for the backward.
    pub(crate) lse: Mutex<Option<CpuStorage>>,
}

impl Sdpa {
    fn fwd<T: Float>(&self, q: &[T], k: &[T], v: &[T]) -> Result<(CpuStorage, Shape)> {
        let mask_guard = self.mask.as_ref().map(|m| m.storage_and_layout());
        let mask = match &mask_guard {
            Some((s, l)) => Some(storage_slice::<T>(s, l)?),
            None => None,
        };
        let (out, lse) = forward(&self.geo, &self.cfg, &Inputs { q, k, v, mask });
        *self.lse.lock().unwrap_or_else(|p| p.into_inner()) = Some(T::storage(lse));
        Ok((T::storage(out), Shape::from(self.out_shape.clone())))
    }

    fn bwd_t<T: Float>(&self, q: &Tensor, k: &Tensor, v: &Tensor, o: &Tensor, d_o: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        // q, k, v are the tensors the forward read, and `self.geo` says where their rows
        // are (transposed head views of a fused projection included): they are read in
        // place, as are the output and its gradient, in the output's stored layout
        // (`o_off` / `o_rs`). The gradients are written where `geo_c` says.
        let d_o = d_o.dense()?;
        let (gq, lq) = q.storage_and_layout();
        let (gk, lk) = k.storage_and_layout();
        let (gv, lv) = v.storage_and_layout();
        let (go, lo) = o.storage_and_layout();
        let (gd, ld) = d_o.storage_and_layout();
        let mask_guard = self.mask.as_ref().map(|m| m.storage_and_layout());
        let mask = match &mask_guard {
            Some((s, l)) => Some(storage_slice::<T>(s, l)?),
            None => None,
        };
        let lse_guard = self.lse.lock().unwrap_or_else(|p| p.into_inner());
        let Some(lse) = lse_guard.as_ref() else { candle_core::bail!("{OP}: backward without a forward") };
        let lse = T::slice(lse).ok_or_else(|| candle_core::Error::Msg(format!("{OP}: logsumexp dtype")))?;
        let x = Inputs { q: storage_from::<T>(&gq, lq)?, k: storage_from::<T>(&gk, lk)?, v: storage_from::<T>(&gv, lv)?, mask };
        let geo_out = self.geo_c.as_ref().unwrap_or(&self.geo);
        let (dq, dk, dv) = backward(&self.geo, geo_out, &self.cfg, x, storage_slice::<T>(&go, lo)?, storage_slice::<T>(&gd, ld)?, lse);
        let shaped = |g: Vec<T>, x: &Tensor, tm: bool| -> Result<Tensor> {
            if !tm {
                return Tensor::from_vec(g, x.shape(), &Device::Cpu);
            }
            let mut dims = x.dims().to_vec();
            let r = dims.len();
            dims.swap(r - 3, r - 2);
            Tensor::from_vec(g, dims, &Device::Cpu)?.transpose(r - 3, r - 2)
        };
        let [tq, tk, tv] = self.grad_tm;
        Ok((shaped(dq, q, tq)?, shaped(dk, k, tk)?, shaped(dv, v, tv)?))
    }
}

impl CustomOp3 for Sdpa {
    fn name(&self) -> &'static str {
        "scaled_dot_product_attention"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        match s1 {
            CpuStorage::F32(_) => self.fwd::<f32>(cpu_slice_from(s1, l1)?, cpu_slice_from(s2, l2)?, cpu_slice_from(s3, l3)?),
            CpuStorage::F64(_) => self.fwd::<f64>(cpu_slice_from(s1, l1)?, cpu_slice_from(s2, l2)?, cpu_slice_from(s3, l3)?),
            _ => candle_core::bail!("{OP}: the fused kernel runs on float32 and float64"),
        }
    }
    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        res: &Tensor,
        grad_res: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (dq, dk, dv) = match q.dtype() {
            DType::F32 => self.bwd_t::<f32>(q, k, v, res, grad_res)?,
            DType::F64 => self.bwd_t::<f64>(q, k, v, res, grad_res)?,
            d => candle_core::bail!("{OP}: backward for dtype {d:?}"),
        };
        Ok((Some(dq), Some(dk), Some(dv)))
    }
}

/// Strides of a contiguous shape, with 0 where a dim has size 1 (it broadcasts).
pub(crate) fn bcast_strides(dims: &[usize], inner: usize) -> Vec<usize> {
    let mut st = vec![0; dims.len()];
    let mut acc = inner;
    for i in (0..dims.len()).rev() {
        st[i] = if dims[i] == 1 { 0 } else { acc };
        acc *= dims[i];
    }
    st
}

/// Batch dims of `x` right-aligned to `rank` dims (1 where missing).
pub(crate) fn pad_left(x: &[usize], rank: usize) -> Vec<usize> {
    let mut v = vec![1; rank - x.len()];
    v.extend_from_slice(x);
    v
}

/// Per-n offsets of an input whose (padded) batch dims are `xb` with strides `st`,
/// into an output batch of dims `ob`; `group` divides the index of the last batch
/// dim (grouped heads).
pub(crate) fn offsets(ob: &[usize], xb: &[usize], st: &[usize], group: usize) -> Vec<usize> {
    let n: usize = ob.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; ob.len()];
    for _ in 0..n {
        let mut off = 0;
        for a in 0..ob.len() {
            let i = if a + 1 == ob.len() { idx[a] / group } else { idx[a] };
            off += if xb[a] == 1 { 0 } else { i * st[a] };
        }
        out.push(off);
        for a in (0..ob.len()).rev() {
            idx[a] += 1;
            if idx[a] < ob[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    out
}

/// Batch strides (padded on the left to `rank`, 0 where a dim broadcasts) and row
/// stride of `t` when the forward can read it where it is: on the CPU, in the
/// compute dtype, with unit stride along the feature dim. `None`: it is copied.
pub(crate) fn in_place(t: &Tensor, cdt: DType, rank: usize) -> Option<(Vec<usize>, usize)> {
    let (dims, st) = (t.dims(), t.layout().stride());
    let r = dims.len();
    if !t.device().is_cpu() || t.dtype() != cdt || r < 2 || (st[r - 1] != 1 && dims[r - 1] > 1) {
        return None;
    }
    let mut b = vec![0; rank + 2 - r];
    b.extend(dims[..r - 2].iter().zip(st).map(|(&n, &x)| if n == 1 { 0 } else { x }));
    Some((b, st[r - 2]))
}

/// The distinct values of `off` (sorted) and, for each entry, which one it is.
pub(crate) fn slices(off: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut u = off.to_vec();
    u.sort_unstable();
    u.dedup();
    let idx = off.iter().map(|o| u.binary_search(o).unwrap_or(0)).collect();
    (u, idx)
}

pub(crate) fn injective(off: &[usize]) -> bool {
    let mut v = off.to_vec();
    v.sort_unstable();
    v.windows(2).all(|w| w[0] != w[1])
}
