//! A recurrent layer's direction in the graph: one node for all its steps, with three
//! outputs (every step's `h`, the last `h`, LSTM's last `c`), whose backward runs
//! `layers::recurrent`'s backward through time. Where the fused kernel does not apply
//! (half types, other devices) and under `create_graph`, the same recurrence runs as
//! per-step ops (`composed`), which the engine differentiates.
use crate::autograd::engine::{self, Options};
use crate::autograd::mode::grad_enabled;
use crate::autograd::node::{freed_err, Edge, Node, NodeBase, Saved};
use crate::autograd::ops::{add, affine, cat, linear, mul, narrow, records, select, sigmoid, tanh, unsqueeze};
use crate::autograd::value::{lock, Meta, Value};
use crate::layers::recurrent::{self as kernel, Cell, Incoming};
use crate::ops::layout::Dense;
use candle_core::{DType, Result, Tensor};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// One direction's outputs: `h_t` at every step (steps, batch, hidden), the last `h`
/// and, for an LSTM, the last `c` (batch, hidden).
pub struct Scanned {
    pub out: Value,
    pub h_n: Value,
    pub c_n: Option<Value>,
}

/// The inputs of one direction: `xp = x W_ih^T + b_ih` for every step (steps, batch,
/// gates * hidden), the initial state, and the recurrent weights. The node's edges,
/// gradients and input flags use the same shape (`V` a gradient or a flag), so their
/// order lives in `list` / `from_list` only.
#[derive(Clone)]
pub struct Inputs<V = Value> {
    pub xp: V,
    pub h0: V,
    /// LSTM only.
    pub c0: Option<V>,
    pub w_hh: V,
    pub b_hh: Option<V>,
}

impl<V> Inputs<V> {
    /// The entries present, in edge order (xp, h0, c0, w_hh, b_hh).
    pub fn list(&self) -> Vec<&V> {
        [Some(&self.xp), Some(&self.h0), self.c0.as_ref(), Some(&self.w_hh), self.b_hh.as_ref()].into_iter().flatten().collect()
    }

    /// `list`'s order, owned.
    fn into_list(self) -> Vec<V> {
        [Some(self.xp), Some(self.h0), self.c0, Some(self.w_hh), self.b_hh].into_iter().flatten().collect()
    }

    /// Which optional entries are present: (c0, b_hh).
    fn optional(&self) -> (bool, bool) {
        (self.c0.is_some(), self.b_hh.is_some())
    }

    /// Rebuild from `list`'s order, `(has_c0, has_b)` saying which optional entries it holds.
    fn from_list((has_c0, has_b): (bool, bool), v: Vec<V>) -> Inputs<V> {
        let mut it = v.into_iter();
        let mut next = || it.next().expect("one entry per edge");
        let (xp, h0) = (next(), next());
        let c0 = has_c0.then(&mut next);
        let w_hh = next();
        let b_hh = has_b.then(&mut next);
        Inputs { xp, h0, c0, w_hh, b_hh }
    }
}

/// Run one direction (`reverse`: from the last step to the first). The fused kernel
/// takes CPU float32 / float64; anything else runs the composed form.
pub fn scan(cell: Cell, reverse: bool, ins: &Inputs) -> Result<Scanned> {
    let list = ins.list();
    let dt = ins.xp.data.dtype();
    let fused = matches!(dt, DType::F32 | DType::F64) && list.iter().all(|v| v.data.device().is_cpu() && v.data.dtype() == dt);
    if !fused {
        return composed(cell, reverse, ins);
    }
    let cont = |v: &Value| v.data.dense();
    let c0 = ins.c0.as_ref().map(cont).transpose()?;
    let b_hh = ins.b_hh.as_ref().map(cont).transpose()?;
    let (h0, w_hh) = (cont(&ins.h0)?, cont(&ins.w_hh)?);
    let layer = kernel::Layer { cell, reverse, h0: &h0, c0: c0.as_ref(), w_hh: &w_hh, b_hh: b_hh.as_ref() };
    let grads = records(&list);
    let ran = kernel::forward(&layer, &cont(&ins.xp)?, grads)?;
    if !grads {
        return Ok(Scanned { out: Value::plain(ran.out), h_n: Value::plain(ran.h_n), c_n: ran.c_n.map(Value::plain) });
    }
    let edges: Vec<Option<Edge>> = list.iter().map(|v| v.edge()).collect();
    let out = Value::plain(ran.out);
    let inputs = Inputs::from_list(ins.optional(), list.iter().map(|v| Saved::input(v)).collect());
    let saved = State { inputs, out: Saved::output(&out, 0), kept: ran.kept };
    let outputs = if cell == Cell::Lstm { 3 } else { 2 };
    let node: Arc<dyn Node> = Arc::new(ScanNode { cell, reverse, base: NodeBase::new(edges, outputs), saved: Mutex::new(Some(saved)) });
    let with = |v: Value, nr: usize| Value { meta: Some(Meta::non_leaf(node.clone(), nr)), ..v };
    Ok(Scanned { out: with(out, 0), h_n: with(Value::plain(ran.h_n), 1), c_n: ran.c_n.map(|c| with(Value::plain(c), 2)) })
}

struct State {
    inputs: Inputs<Saved>,
    out: Saved,
    kept: Tensor,
}

struct ScanNode {
    cell: Cell,
    reverse: bool,
    base: NodeBase,
    saved: Mutex<Option<State>>,
}

impl ScanNode {
    fn name_of(&self) -> &'static str {
        match self.cell {
            Cell::Lstm => "LstmBackward0",
            Cell::Gru => "GruBackward0",
            Cell::RnnTanh => "RnnTanhBackward0",
            Cell::RnnRelu => "RnnReluBackward0",
        }
    }
}

impl Node for ScanNode {
    fn name(&self) -> String {
        self.name_of().to_string()
    }
    fn base(&self) -> &NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        if grads.iter().all(|g| g.is_none()) {
            return Ok(vec![None; self.base.next.len()]);
        }
        let name = self.name_of();
        let (ins, out, kept) = {
            let s = lock(&self.saved);
            let Some(s) = s.as_ref() else { return Err(freed_err()) };
            let vals = s.inputs.list().iter().map(|v| v.unpack(name)).collect::<Result<Vec<_>>>()?;
            (Inputs::from_list(s.inputs.optional(), vals), s.out.unpack(name)?, s.kept.clone())
        };
        let needs = Inputs::from_list(ins.optional(), self.base.next.iter().map(|e| e.is_some()).collect());
        if grad_enabled() && (grads.iter().flatten().any(|g| g.requires_grad()) || ins.list().iter().any(|v| v.requires_grad())) {
            return self.double(&ins, &grads, &needs.into_list());
        }
        let g = |i: usize| grads.get(i).cloned().flatten().map(|g| g.data.dense()).transpose();
        let (gout, ghn, gcn) = (g(0)?, g(1)?, g(2)?);
        let cont = |v: &Value| v.data.dense();
        let c0 = ins.c0.as_ref().map(cont).transpose()?;
        let b_hh = ins.b_hh.as_ref().map(cont).transpose()?;
        let weights = needs.w_hh || needs.b_hh == Some(true);
        let (h0, w_hh) = (cont(&ins.h0)?, cont(&ins.w_hh)?);
        let layer = kernel::Layer { cell: self.cell, reverse: self.reverse, h0: &h0, c0: c0.as_ref(), w_hh: &w_hh, b_hh: b_hh.as_ref() };
        let up = Incoming { out: gout.as_ref(), h_n: ghn.as_ref(), c_n: gcn.as_ref() };
        let gr = kernel::backward(&layer, (&out.data, &kept), up, weights)?;
        let got = Inputs {
            xp: Some(gr.xp),
            h0: Some(gr.h0),
            c0: ins.c0.as_ref().map(|_| gr.c0),
            w_hh: gr.w_hh,
            b_hh: ins.b_hh.as_ref().map(|_| gr.b_hh),
        };
        let need = needs.into_list();
        Ok(got.into_list().into_iter().zip(need).map(|(g, need)| if need { g.map(Value::plain) } else { None }).collect())
    }
    fn release(&self) {
        *lock(&self.saved) = None;
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl ScanNode {
    /// `create_graph`: differentiate the composed form, so the gradients are recorded.
    fn double(&self, ins: &Inputs, grads: &[Option<Value>], needs: &[bool]) -> Result<Vec<Option<Value>>> {
        let s = composed(self.cell, self.reverse, ins)?;
        let outs = [Some(s.out), Some(s.h_n), s.c_n];
        let roots: Vec<(Edge, Value)> = outs.iter().zip(grads).filter_map(|(o, g)| Some((o.as_ref()?.edge()?, g.clone()?))).collect();
        let list = ins.list();
        let pos: Vec<usize> = (0..list.len()).filter(|&i| needs[i] && list[i].requires_grad()).collect();
        let mut res = vec![None; list.len()];
        if roots.is_empty() {
            return Ok(res);
        }
        let targets: Vec<Value> = pos.iter().map(|&i| list[i].clone()).collect();
        let opts = Options { retain_graph: true, create_graph: true, accumulate: false };
        for (i, g) in pos.into_iter().zip(engine::run(roots, &targets, &opts)?) {
            res[i] = g;
        }
        Ok(res)
    }
}

/// The recurrence as per-step differentiable ops (PyTorch's formulas): the path for
/// the dtypes and devices the kernel does not take, and what `create_graph`
/// differentiates.
pub fn composed(cell: Cell, reverse: bool, ins: &Inputs) -> Result<Scanned> {
    let dims = ins.xp.data.dims().to_vec();
    let steps = dims[0];
    let hs = ins.h0.data.dims()[1];
    let mut h = ins.h0.clone();
    let mut c = ins.c0.clone();
    let mut outs: Vec<Option<Value>> = vec![None; steps];
    let gate = |v: &Value, q: usize| narrow(v, 1, q * hs, hs);
    for s in 0..steps {
        let t = if reverse { steps - 1 - s } else { s };
        let x = select(&ins.xp, 0, t)?;
        let hp = linear(&h, &ins.w_hh, ins.b_hh.as_ref())?;
        match cell {
            Cell::Lstm => {
                let pre = add(&x, &hp)?;
                let (i, f) = (sigmoid(&gate(&pre, 0)?)?, sigmoid(&gate(&pre, 1)?)?);
                let (g, o) = (tanh(&gate(&pre, 2)?)?, sigmoid(&gate(&pre, 3)?)?);
                let c_prev = c.as_ref().expect("an LSTM has a cell state");
                let cn = add(&mul(&f, c_prev)?, &mul(&i, &g)?)?;
                h = mul(&o, &tanh(&cn)?)?;
                c = Some(cn);
            }
            Cell::Gru => {
                let r = sigmoid(&add(&gate(&x, 0)?, &gate(&hp, 0)?)?)?;
                let z = sigmoid(&add(&gate(&x, 1)?, &gate(&hp, 1)?)?)?;
                let n = tanh(&add(&gate(&x, 2)?, &mul(&r, &gate(&hp, 2)?)?)?)?;
                h = add(&mul(&affine(&z, -1.0, 1.0)?, &n)?, &mul(&z, &h)?)?;
            }
            Cell::RnnTanh => h = tanh(&add(&x, &hp)?)?,
            Cell::RnnRelu => h = crate::autograd::composed::relu(&add(&x, &hp)?)?,
        }
        outs[t] = Some(unsqueeze(&h, 0)?);
    }
    let outs: Vec<Value> = outs.into_iter().map(|o| o.expect("every step ran")).collect();
    let out = cat(&outs, 0)?;
    Ok(Scanned { out, h_n: h, c_n: c })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_values;
    use candle_core::Device;

    fn leaf(dims: &[usize], seed: u64) -> Result<Value> {
        let n = dims.iter().product();
        let v: Vec<f64> = test_values(n, seed).into_iter().map(|x| 2.0 * x as f64).collect();
        Ok(Value::leaf(Tensor::from_vec(v, dims, &Device::Cpu)?))
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
        assert_eq!(a.dims(), b.dims());
        a.sub(b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f64>()
    }

    /// The fused kernel's outputs and gradients equal the composed form's (float64),
    /// for every cell, both directions, with and without bias, with gradients into
    /// every output or only into the sequence; the larger size splits the hidden
    /// units over two threads.
    #[test]
    fn fused_kernel_matches_the_composed_recurrence() -> Result<()> {
        for cell in [Cell::Lstm, Cell::Gru, Cell::RnnTanh, Cell::RnnRelu] {
            for (steps, b, h) in [(1, 1, 3), (5, 3, 20), (4, 16, 80)] {
                for (reverse, bias, all_outputs) in [(false, true, true), (true, true, false), (false, false, false), (true, false, true)] {
                    let gh = cell.gates() * h;
                    let ins = Inputs {
                        xp: leaf(&[steps, b, gh], 1)?,
                        h0: leaf(&[b, h], 2)?,
                        c0: (cell == Cell::Lstm).then(|| leaf(&[b, h], 3)).transpose()?,
                        w_hh: leaf(&[gh, h], 4)?,
                        b_hh: bias.then(|| leaf(&[gh], 5)).transpose()?,
                    };
                    let fused = scan(cell, reverse, &ins)?;
                    let comp = composed(cell, reverse, &ins)?;
                    let what = format!("{cell:?} steps {steps} batch {b} hidden {h} reverse {reverse} bias {bias}");
                    assert!(max_diff(&fused.out.data, &comp.out.data)? < 1e-12, "{what}: out");
                    assert!(max_diff(&fused.h_n.data, &comp.h_n.data)? < 1e-12, "{what}: h_n");
                    if let (Some(a), Some(c)) = (&fused.c_n, &comp.c_n) {
                        assert!(max_diff(&a.data, &c.data)? < 1e-12, "{what}: c_n");
                    }
                    let ups = [leaf(&[steps, b, h], 6)?, leaf(&[b, h], 7)?, leaf(&[b, h], 8)?];
                    let roots = |s: &Scanned| -> Vec<(Edge, Value)> {
                        let outs = [Some(&s.out), Some(&s.h_n), s.c_n.as_ref()];
                        let n = if all_outputs { 3 } else { 1 };
                        outs.into_iter().zip(&ups).take(n).filter_map(|(o, g)| Some((o?.edge()?, g.detached()))).collect()
                    };
                    let targets: Vec<Value> = ins.list().into_iter().cloned().collect();
                    let opts = Options { retain_graph: false, create_graph: false, accumulate: false };
                    let gf = engine::run(roots(&fused), &targets, &opts)?;
                    let gc = engine::run(roots(&comp), &targets, &opts)?;
                    for (i, (a, c)) in gf.iter().zip(&gc).enumerate() {
                        let (a, c) = (a.as_ref().expect("a gradient"), c.as_ref().expect("a gradient"));
                        assert!(max_diff(&a.data, &c.data)? < 1e-10, "{what}: gradient of input {i}");
                    }
                    // float32 (the packed products of `ops::sgemm` where the CPU has AVX2)
                    // against the float64 run.
                    let f32v = |v: &Value| -> Result<Value> { Ok(Value::leaf(v.data.to_dtype(DType::F32)?)) };
                    let ins32 = Inputs {
                        xp: f32v(&ins.xp)?,
                        h0: f32v(&ins.h0)?,
                        c0: ins.c0.as_ref().map(f32v).transpose()?,
                        w_hh: f32v(&ins.w_hh)?,
                        b_hh: ins.b_hh.as_ref().map(f32v).transpose()?,
                    };
                    let s32 = scan(cell, reverse, &ins32)?;
                    let wide = |t: &Tensor| t.to_dtype(DType::F64);
                    let tol = |t: &Tensor| -> Result<f64> { Ok(1e-5 * (1.0 + t.abs()?.flatten_all()?.max(0)?.to_scalar::<f64>()?)) };
                    assert!(max_diff(&wide(&s32.out.data)?, &fused.out.data)? < tol(&fused.out.data)?, "{what}: float32 out");
                    let ups32: Vec<Value> = ups.iter().map(|u| Ok(Value::plain(u.data.to_dtype(DType::F32)?))).collect::<Result<_>>()?;
                    let outs32 = [Some(&s32.out), Some(&s32.h_n), s32.c_n.as_ref()];
                    let n = if all_outputs { 3 } else { 1 };
                    let roots32: Vec<(Edge, Value)> =
                        outs32.into_iter().zip(&ups32).take(n).filter_map(|(o, g)| Some((o?.edge()?, g.clone()))).collect();
                    let targets32: Vec<Value> = ins32.list().into_iter().cloned().collect();
                    let g32 = engine::run(roots32, &targets32, &opts)?;
                    for (i, (a, c)) in g32.iter().zip(&gf).enumerate() {
                        let (a, c) = (a.as_ref().expect("a gradient"), c.as_ref().expect("a gradient"));
                        assert!(max_diff(&wide(&a.data)?, &c.data)? < tol(&c.data)?, "{what}: float32 gradient of input {i}");
                    }
                }
            }
        }
        Ok(())
    }
}
