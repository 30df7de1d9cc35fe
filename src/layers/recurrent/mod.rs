//! Recurrent layers (LSTM, GRU, Elman RNN with tanh or ReLU): one direction of one
//! layer over all its steps in one call, forward and backward through time
//! (`kernel`), on contiguous CPU float32 / float64 tensors. The graph node that calls
//! these is `autograd::recurrent`, which also holds the composed form (per-step tensor
//! ops) for other dtypes and devices and for `create_graph`.
use crate::ops::float::Float;
use crate::ops::layout::Dense;
use candle_core::{DType, Device, Result, Storage, Tensor};

mod gates;
mod kernel;

pub use kernel::Recurrence;

/// The recurrent cell.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cell {
    Lstm,
    Gru,
    RnnTanh,
    RnnRelu,
}

impl Cell {
    /// Gate blocks in `W_ih` / `W_hh`.
    pub fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
            Cell::RnnTanh | Cell::RnnRelu => 1,
        }
    }

    /// Floats per (step, sample) kept for the backward besides `h_t`, in units of
    /// `hidden`: LSTM's activated gates and cell state (i, f, g, o, c), GRU's r, z, n
    /// and the hidden part of its new gate (`h W_hn^T + b_hn`, which r scales). An
    /// Elman cell's derivative comes from `h_t` itself.
    pub fn kept(self) -> usize {
        match self {
            Cell::Lstm => 5,
            Cell::Gru => 4,
            Cell::RnnTanh | Cell::RnnRelu => 0,
        }
    }

    /// PyTorch's name of the layer, for messages.
    pub fn layer(self) -> &'static str {
        match self {
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
            Cell::RnnTanh | Cell::RnnRelu => "RNN",
        }
    }
}

/// The sizes of one direction's run.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub steps: usize,
    pub batch: usize,
    pub hidden: usize,
    /// Run from the last step to the first (the reverse direction).
    pub reverse: bool,
}

impl Dims {
    /// The time index of the `s`-th step run.
    pub(crate) fn time(&self, s: usize) -> usize {
        if self.reverse {
            self.steps - 1 - s
        } else {
            s
        }
    }
}

/// A contiguous CPU tensor's data as a slice (the caller made it contiguous).
fn slice<'a, T: Float>(s: &'a Storage, t: &Tensor) -> Result<&'a [T]> {
    let Storage::Cpu(c) = s else { candle_core::bail!("{}: the fused kernel runs on the CPU", "rnn") };
    let v = T::slice(c).ok_or_else(|| candle_core::Error::Msg("rnn: unexpected storage dtype".into()))?;
    crate::ops::storage::data(v, t.layout(), "rnn")
}

/// What the fused forward returns: the outputs and what its backward reads.
pub struct Ran {
    /// `h_t` at every step, (steps, batch, hidden).
    pub out: Tensor,
    /// The gates (and LSTM's cell states) of every step, (steps, batch, kept * hidden).
    pub kept: Tensor,
    /// The last step's `h` and (LSTM) `c`, (batch, hidden): copies, not views of `out`.
    pub h_n: Tensor,
    pub c_n: Option<Tensor>,
}

/// A tensor's storage, read-locked while a kernel reads it.
fn guard(t: &Tensor) -> impl std::ops::Deref<Target = Storage> + '_ {
    t.storage_and_layout().0
}

/// `slice` of an optional tensor (c0, a bias, an upstream gradient).
fn opt<'a, T: Float>(s: Option<&'a Storage>, t: Option<&Tensor>) -> Result<Option<&'a [T]>> {
    match (s, t) {
        (Some(s), Some(t)) => Ok(Some(slice::<T>(s, t)?)),
        _ => Ok(None),
    }
}

/// The dimensions of a run from a (steps, batch, ...) tensor (`xp`, or the forward's
/// `out`) and `h0`.
fn dims(seq: &Tensor, h0: &Tensor, reverse: bool) -> Dims {
    Dims { steps: seq.dims()[0], batch: seq.dims()[1], hidden: h0.dims()[1], reverse }
}

/// One direction's recurrence as the fused kernels take it: contiguous CPU tensors of
/// one dtype, float32 or float64 (the caller checks).
pub struct Layer<'a> {
    pub cell: Cell,
    pub reverse: bool,
    pub h0: &'a Tensor,
    /// LSTM only.
    pub c0: Option<&'a Tensor>,
    pub w_hh: &'a Tensor,
    pub b_hh: Option<&'a Tensor>,
}

/// The fused forward of `l` over the input projection `xp` (steps, batch, gates * hidden).
/// `keep_all`: a backward will run, so every step's gates are kept (`Ran::kept`);
/// without it `kept` holds the last two steps' only.
pub fn forward(l: &Layer<'_>, xp: &Tensor, keep_all: bool) -> Result<Ran> {
    match xp.dtype() {
        DType::F32 => forward_t::<f32>(l, xp, keep_all),
        DType::F64 => forward_t::<f64>(l, xp, keep_all),
        dt => candle_core::bail!("[{}] the fused kernel takes float32 or float64, got {dt:?}", l.cell.layer()),
    }
}

fn forward_t<T: Float>(l: &Layer<'_>, xp: &Tensor, keep_all: bool) -> Result<Ran> {
    let Layer { cell, reverse, h0, c0, w_hh, b_hh } = *l;
    let d = dims(xp, h0, reverse);
    let (b, h) = (d.batch, d.hidden);
    let (sx, sh, sw) = (guard(xp), guard(h0), guard(w_hh));
    let (sc, sb) = (c0.map(guard), b_hh.map(guard));
    let r = Recurrence::<T> { cell, w_hh: slice(&sw, w_hh)?, b_hh: opt(sb.as_deref(), b_hh)? };
    let f = kernel::forward(r, d, slice(&sx, xp)?, slice(&sh, h0)?, opt(sc.as_deref(), c0)?, keep_all);
    let cpu = Device::Cpu;
    let last = d.time(d.steps.saturating_sub(1));
    let out = Tensor::from_vec(f.out, (d.steps, b, h), &cpu)?;
    let h_n = out.get(last)?.dense_copy()?;
    let kept = Tensor::from_vec(f.kept, (kernel::kept_slots(keep_all, d.steps), b, cell.kept() * h), &cpu)?;
    // LSTM's kept row is (i, f, g, o, c): the last step's c.
    let at = kernel::slot(keep_all, d.steps - 1, last);
    let c_n = if cell == Cell::Lstm { Some(kept.get(at)?.narrow(1, 4 * h, h)?.dense()?) } else { None };
    Ok(Ran { out, kept, h_n, c_n })
}

/// The gradients `backward` returns; `None` where not asked for.
pub struct Grads {
    pub xp: Tensor,
    pub h0: Tensor,
    pub c0: Option<Tensor>,
    pub w_hh: Option<Tensor>,
    pub b_hh: Option<Tensor>,
}

/// The gradients flowing into a run's three outputs (`None`: zero).
pub struct Incoming<'a> {
    pub out: Option<&'a Tensor>,
    pub h_n: Option<&'a Tensor>,
    pub c_n: Option<&'a Tensor>,
}

/// Backward through time of `forward` (`ran`: its `out` and `kept`), every tensor
/// contiguous and of the forward's dtype; `weights` asks for the gradients of `W_hh`
/// (and `b_hh` when there is one).
pub fn backward(l: &Layer<'_>, ran: (&Tensor, &Tensor), up: Incoming<'_>, weights: bool) -> Result<Grads> {
    match ran.0.dtype() {
        DType::F32 => backward_t::<f32>(l, ran, up, weights),
        DType::F64 => backward_t::<f64>(l, ran, up, weights),
        dt => candle_core::bail!("[{}] the fused kernel takes float32 or float64, got {dt:?}", l.cell.layer()),
    }
}

fn backward_t<T: Float>(l: &Layer<'_>, (out, kept): (&Tensor, &Tensor), up: Incoming<'_>, weights: bool) -> Result<Grads> {
    let Layer { cell, reverse, h0, c0, w_hh, b_hh } = *l;
    let d = dims(out, h0, reverse);
    let (b, h) = (d.batch, d.hidden);
    let gh = cell.gates() * h;
    let (so, sk, sh, sw) = (guard(out), guard(kept), guard(h0), guard(w_hh));
    let (sc, sb) = (c0.map(guard), b_hh.map(guard));
    let (su, shn, scn) = (up.out.map(guard), up.h_n.map(guard), up.c_n.map(guard));
    let r = Recurrence::<T> { cell, w_hh: slice(&sw, w_hh)?, b_hh: opt(sb.as_deref(), b_hh)? };
    let incoming =
        kernel::Upstream { out: opt(su.as_deref(), up.out)?, h_last: opt(shn.as_deref(), up.h_n)?, c_last: opt(scn.as_deref(), up.c_n)? };
    let g = kernel::backward(r, d, (slice(&so, out)?, slice(&sk, kept)?), (slice(&sh, h0)?, opt(sc.as_deref(), c0)?), incoming, weights);
    let cpu = Device::Cpu;
    Ok(Grads {
        xp: Tensor::from_vec(g.xp, (d.steps, b, gh), &cpu)?,
        h0: Tensor::from_vec(g.h0, (b, h), &cpu)?,
        c0: g.c0.map(|c| Tensor::from_vec(c, (b, h), &cpu)).transpose()?,
        w_hh: g.w_hh.map(|w| Tensor::from_vec(w, (gh, h), &cpu)).transpose()?,
        b_hh: g.b_hh.map(|x| Tensor::from_vec(x, gh, &cpu)).transpose()?,
    })
}
