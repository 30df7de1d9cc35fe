//! The backward pass: runs the graph reachable from the roots in dependency order
//! (among ready nodes, the most recently created first, as PyTorch), sums the
//! gradients arriving at each node's outputs (the slices' parts of one gradient joined
//! in one pass, `Piece`), runs hooks, and either accumulates
//! into leaves (`backward`) or captures the gradients of chosen tensors
//! (`autograd.grad`). Pure Rust: the caller releases the GIL around it.
use crate::autograd::mode::with_grad_mode;
use crate::autograd::node::{accumulate_into, node_key, AccumulateGrad, Edge, Node};
use crate::autograd::value::{lock, Value};
use crate::ops::layout::storage_key;
use candle_core::{Result, Tensor};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

pub struct Options {
    pub retain_graph: bool,
    pub create_graph: bool,
    /// `backward()`: add into `.grad`; `autograd.grad`: only return the gradients.
    pub accumulate: bool,
}

struct Target {
    key: usize,
    nr: usize,
    /// Set for a non-leaf target of `backward(inputs=...)`: its `.grad` receives the gradient.
    meta: Option<Arc<crate::autograd::value::Meta>>,
}

/// Run backward from `roots` (each an edge and the gradient flowing into it).
/// `targets` empty: every leaf reached accumulates its gradient. Otherwise only the
/// paths to the targets run; the result holds each target's gradient (None where
/// none reached it) and, when accumulating, targets get it added to `.grad`.
pub fn run(roots: Vec<(Edge, Value)>, targets: &[Value], opts: &Options) -> Result<Vec<Option<Value>>> {
    // Discover the graph and count each node's incoming edges.
    let mut nodes: HashMap<usize, Arc<dyn Node>> = HashMap::new();
    let mut deps: HashMap<usize, usize> = HashMap::new();
    let mut stack: Vec<Arc<dyn Node>> = Vec::new();
    for (e, _) in &roots {
        let k = node_key(&e.node);
        if nodes.insert(k, e.node.clone()).is_none() {
            deps.insert(k, 0);
            stack.push(e.node.clone());
        }
    }
    while let Some(n) = stack.pop() {
        for e in n.base().next.iter().flatten() {
            let k = node_key(&e.node);
            *deps.entry(k).or_insert(0) += 1;
            if nodes.insert(k, e.node.clone()).is_none() {
                stack.push(e.node.clone());
            }
        }
    }
    let tgts: Vec<Target> = targets
        .iter()
        .map(|v| {
            let e = v.edge().expect("targets require grad (checked by the caller)");
            let leaf = e.node.as_any().is::<AccumulateGrad>();
            Target { key: node_key(&e.node), nr: e.nr, meta: if opts.accumulate && !leaf { v.meta.clone() } else { None } }
        })
        .collect();
    let exec = if tgts.is_empty() { None } else { Some(needed(&nodes, &deps, &tgts, opts.accumulate)) };

    // Each pending gradient, with whether the engine holds the only reference to it
    // (`owned`: a leaf may then take it without a copy). The caller's `gradient` is not.
    let mut buffers: HashMap<usize, Vec<Option<Value>>> = HashMap::new();
    let mut owned: HashMap<usize, Vec<bool>> = HashMap::new();
    for (e, g) in roots {
        let k = node_key(&e.node);
        let n = e.node.base().num_outputs;
        add_to(buffers.entry(k).or_insert_with(|| vec![None; n]), owned.entry(k).or_insert_with(|| vec![false; n]), e.nr, g, false)?;
    }
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    for (k, d) in &deps {
        if *d == 0 {
            ready.push((nodes[k].base().seq, *k));
        }
    }
    let mut captured: Vec<Option<Value>> = vec![None; tgts.len()];
    // Gradient pieces waiting for their node, by (node, output).
    let mut pending: HashMap<(usize, usize), Vec<Piece>> = HashMap::new();
    with_grad_mode(opts.create_graph, || -> Result<()> {
        while let Some((_, k)) = ready.pop() {
            let node = nodes[&k].clone();
            let base = node.base();
            let mut buf = buffers.remove(&k).unwrap_or_else(|| vec![None; base.num_outputs]);
            let mut own = owned.remove(&k).unwrap_or_else(|| vec![false; base.num_outputs]);
            let runs = exec.as_ref().is_none_or(|x| x.get(&k).copied().unwrap_or(false));
            // Pieces of the gradients of this node's outputs (`Piece`), joined first.
            for nr in 0..base.num_outputs {
                if let Some(list) = pending.remove(&(k, nr)) {
                    add_to(&mut buf, &mut own, nr, Value::plain(join(list)?), true)?;
                }
            }
            let mut pieces: Vec<Piece> = Vec::new();
            let mut grads_out: Vec<Option<Value>> = vec![None; base.next.len()];
            let mut own_out: Vec<bool> = vec![false; base.next.len()];
            if buf.iter().any(|g| g.is_some()) {
                // Hooks and retained or captured gradients are seen from outside.
                if run_pre_hooks(node.as_ref(), &mut buf)? {
                    own.iter_mut().for_each(|o| *o = false);
                }
                for (i, t) in tgts.iter().enumerate() {
                    if t.key == k {
                        if let Some(g) = buf.get(t.nr).cloned().flatten() {
                            if let Some(m) = &t.meta {
                                accumulate_into(m, g.clone())?;
                            }
                            captured[i] = Some(g);
                            own[t.nr] = false;
                        }
                    }
                }
                let acc = node.as_any().downcast_ref::<AccumulateGrad>();
                if runs && (opts.accumulate || acc.is_none()) {
                    let t0 = profiling().then(std::time::Instant::now);
                    let keys: Vec<Option<(usize, bool)>> =
                        buf.iter().zip(&own).map(|(g, &o)| g.as_ref().map(|g| (storage_key(&g.data), o))).collect();
                    let outer = PIECES.with(|p| p.replace(Some(Vec::new())));
                    let applied = match acc {
                        Some(a) => a.apply_owned(buf, own.first().copied().unwrap_or(false)),
                        None => node.apply(buf),
                    };
                    pieces = PIECES.with(|p| p.replace(outer)).unwrap_or_default();
                    grads_out = applied?;
                    if node.fresh_outputs() {
                        own_out = ownership(&grads_out, &keys);
                    }
                    if let Some(t0) = t0 {
                        record_time(node.name(), t0.elapsed().as_secs_f64());
                    }
                    if !opts.retain_graph {
                        node.release();
                        base.released.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
            let outs = grads_out.into_iter().zip(own_out).chain(std::iter::repeat((None, false)));
            for (e, (g, o)) in base.next.iter().zip(outs) {
                let Some(e) = e else { continue };
                let ck = node_key(&e.node);
                if let Some(p) = g.as_ref().and_then(|g| pieces.iter().find(|p| p.id == g.data.id())) {
                    pending.entry((ck, e.nr)).or_default().push(p.clone());
                } else if let Some(g) = g {
                    let n = e.node.base().num_outputs;
                    let (b, ow) = (buffers.entry(ck).or_insert_with(|| vec![None; n]), owned.entry(ck).or_insert_with(|| vec![false; n]));
                    add_to(b, ow, e.nr, g, o)?;
                }
                let d = deps.get_mut(&ck).expect("every child was counted");
                *d -= 1;
                if *d == 0 {
                    ready.push((e.node.base().seq, ck));
                }
            }
        }
        Ok(())
    })?;
    Ok(captured)
}

/// A slice's gradient the engine joins with the other pieces of its tensor's gradient
/// (`ops::slice_grad`): the tensor `id`'s data goes at `start` along `dim` of a
/// gradient `size` long there, laid out in memory in the dims' `order` (outermost
/// first; `None`: row-major), the sliced tensor's own.
#[derive(Clone)]
struct Piece {
    id: candle_core::TensorId,
    data: Tensor,
    dim: usize,
    start: usize,
    size: usize,
    order: Option<Vec<usize>>,
}

thread_local! {
    /// The pieces handed in by the node being applied; `None` outside a node's apply.
    static PIECES: std::cell::RefCell<Option<Vec<Piece>>> = const { std::cell::RefCell::new(None) };
}

/// Take `data` as a piece of a gradient (see `Piece`) when a node's backward is being
/// applied by `run`, which then routes the returned tensor to the pieces; false (pad
/// it yourself) anywhere else.
pub(crate) fn defer_piece(data: &Tensor, dim: usize, start: usize, size: usize, order: Option<&[usize]>) -> bool {
    PIECES.with(|p| match p.borrow_mut().as_mut() {
        Some(v) => {
            v.push(Piece { id: data.id(), data: data.clone(), dim, start, size, order: order.map(<[usize]>::to_vec) });
            true
        }
        None => false,
    })
}

/// One gradient from pieces: per dim, pieces that do not overlap are laid side by side
/// with zeros in the gaps (one `cat`: every element written once); overlapping ones
/// are padded and summed. The parts of different dims are summed. Pieces of one dim
/// that share a memory order (`Piece::order`) are joined in that order and returned as
/// the permuted view: a ViT's `qkv[0], qkv[1], qkv[2]` of a permuted (B, T, 3, H, D)
/// projection then join straight into (B, T, 3, H, D) memory, which the permute backward
/// turns contiguous (joined row-major, the reshape after it copied everything again).
fn join(mut pieces: Vec<Piece>) -> Result<Tensor> {
    pieces.sort_by_key(|p| (p.dim, p.start));
    let mut total: Option<Tensor> = None;
    let one_dim = pieces.windows(2).all(|w| w[0].dim == w[1].dim);
    let mut i = 0;
    while i < pieces.len() {
        let dim = pieces[i].dim;
        let group: Vec<&Piece> = pieces[i..].iter().take_while(|p| p.dim == dim).collect();
        i += group.len();
        let apart = group.windows(2).all(|w| w[0].start + w[0].data.dims()[dim] <= w[1].start);
        let part = if apart {
            let first = &group[0].data;
            // The memory order to join in: the pieces' common one, when they are this
            // gradient's only parts.
            let order = group[0].order.as_ref().filter(|o| one_dim && group.iter().all(|p| p.order.as_ref() == Some(*o)));
            let ord = |t: Tensor| match order {
                Some(o) => t.permute(o.clone()),
                None => Ok(t),
            };
            let zeros = |n: usize| {
                let mut shape = first.dims().to_vec();
                shape[dim] = n;
                if let Some(o) = order {
                    shape = o.iter().map(|&k| shape[k]).collect();
                }
                Tensor::zeros(shape, first.dtype(), first.device())
            };
            let mut parts: Vec<Tensor> = Vec::with_capacity(2 * group.len() + 1);
            let mut at = 0;
            for p in &group {
                if p.start > at {
                    parts.push(zeros(p.start - at)?);
                }
                parts.push(ord(p.data.clone())?);
                at = p.start + p.data.dims()[dim];
            }
            if group[0].size > at {
                parts.push(zeros(group[0].size - at)?);
            }
            let refs: Vec<&Tensor> = parts.iter().collect();
            match order {
                Some(o) => {
                    // Joined along `dim`'s place in the order, then viewed back.
                    let inv = crate::autograd::ops::inverse_permutation(o);
                    crate::ops::layout::cat(&refs, inv[dim])?.permute(inv)?
                }
                None => crate::ops::layout::cat(&refs, dim)?,
            }
        } else {
            let mut sum: Option<Tensor> = None;
            for p in &group {
                let len = p.data.dims()[dim];
                let padded = crate::ops::layout::pad_zeros(&p.data, dim, p.start, p.size - p.start - len)?;
                sum = Some(match sum {
                    None => padded,
                    Some(s) => s.add(&padded)?,
                });
            }
            sum.expect("a group has a piece")
        };
        total = Some(match total {
            None => part,
            Some(t) => t.add(&part)?,
        });
    }
    total.ok_or_else(|| candle_core::Error::Msg("autograd: no gradient pieces to join".into()))
}

/// Whether backward time per node name is being collected: set
/// `CANDLE_PY_AUTOGRAD_PROFILE=1` (a development aid; `profile_take` reads it).
fn profiling() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CANDLE_PY_AUTOGRAD_PROFILE").is_some_and(|v| v != "0"))
}

type Profile = HashMap<String, (f64, u64)>;
static PROFILE: std::sync::Mutex<Option<Profile>> = std::sync::Mutex::new(None);

fn record_time(name: String, secs: f64) {
    let mut p = lock(&PROFILE);
    let e = p.get_or_insert_with(HashMap::new).entry(name).or_insert((0.0, 0));
    e.0 += secs;
    e.1 += 1;
}

/// The collected (seconds, calls) per node name since the last call, then reset.
pub fn profile_take() -> Vec<(String, f64, u64)> {
    let mut v: Vec<(String, f64, u64)> = lock(&PROFILE).take().unwrap_or_default().into_iter().map(|(k, (t, n))| (k, t, n)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

/// Which of a node's returned gradients nothing else references, from the storages
/// and ownership of the gradients it was given (`keys`): a new storage is owned, a
/// view of a given gradient is owned if that one was, and a storage returned twice
/// (add's backward hands one tensor to both inputs) is owned by neither.
fn ownership(out: &[Option<Value>], keys: &[Option<(usize, bool)>]) -> Vec<bool> {
    let ks: Vec<Option<usize>> = out.iter().map(|g| g.as_ref().map(|g| storage_key(&g.data))).collect();
    ks.iter()
        .enumerate()
        .map(|(i, k)| {
            let Some(k) = *k else { return false };
            if ks.iter().enumerate().any(|(j, o)| j != i && *o == Some(k)) {
                return false;
            }
            keys.iter().flatten().find(|(ik, _)| *ik == k).is_none_or(|&(_, o)| o)
        })
        .collect()
}

/// Tensor hooks and `retain_grad` of the node's outputs, in registration order;
/// whether there were any (they see the gradients).
fn run_pre_hooks(node: &dyn Node, buf: &mut [Option<Value>]) -> Result<bool> {
    let base = node.base();
    let hooks: Vec<_> = lock(&base.pre_hooks).iter().map(|(_, nr, h)| (*nr, h.clone())).collect();
    let hooked = !hooks.is_empty();
    for (nr, h) in hooks {
        if let Some(g) = buf.get(nr).cloned().flatten() {
            if let Some(new) = h(&g)? {
                buf[nr] = Some(new);
            }
        }
    }
    let retains: Vec<_> = lock(&base.retains).iter().map(|(nr, m)| (*nr, m.clone())).collect();
    let seen = hooked || !retains.is_empty();
    for (nr, m) in retains {
        if let (Some(g), Some(m)) = (buf.get(nr).cloned().flatten(), m.upgrade()) {
            accumulate_into(&m, g)?;
        }
    }
    Ok(seen)
}

/// Add `g` (owned or not) into slot `nr`: the first is kept, later ones summed into
/// it in place when the engine holds the only reference to it (and neither is
/// recorded for a double backward), else into a new (owned) tensor.
fn add_to(buf: &mut [Option<Value>], own: &mut [bool], nr: usize, g: Value, owned: bool) -> Result<()> {
    (buf[nr], own[nr]) = match buf[nr].take() {
        None => (Some(g), owned),
        Some(old) => {
            let plain = old.meta.is_none() && g.meta.is_none();
            if plain && own[nr] && crate::ops::assign::add_assign(&old.data, &g.data)? {
                (Some(old), true)
            } else if plain && owned && crate::ops::assign::add_assign(&g.data, &old.data)? {
                (Some(g), true)
            } else {
                (Some(crate::autograd::ops::add(&old, &g)?), true)
            }
        }
    };
    Ok(())
}

/// Which nodes must run to reach the targets: a node runs if any child leads to a
/// target (an accumulator that is itself a target runs when accumulating).
fn needed(nodes: &HashMap<usize, Arc<dyn Node>>, deps: &HashMap<usize, usize>, tgts: &[Target], accumulate: bool) -> HashMap<usize, bool> {
    // Topological order (parents before children), then children first.
    let mut d = deps.clone();
    let mut order = Vec::with_capacity(nodes.len());
    let mut queue: Vec<usize> = d.iter().filter(|(_, v)| **v == 0).map(|(k, _)| *k).collect();
    while let Some(k) = queue.pop() {
        order.push(k);
        for e in nodes[&k].base().next.iter().flatten() {
            let ck = node_key(&e.node);
            let c = d.get_mut(&ck).expect("counted");
            *c -= 1;
            if *c == 0 {
                queue.push(ck);
            }
        }
    }
    let mut leads: HashMap<usize, bool> = HashMap::new(); // reaches a target (itself included)
    let mut exec: HashMap<usize, bool> = HashMap::new();
    for &k in order.iter().rev() {
        let n = &nodes[&k];
        let is_target = tgts.iter().any(|t| t.key == k);
        let child_leads = n.base().next.iter().flatten().any(|e| leads.get(&node_key(&e.node)).copied().unwrap_or(false));
        let is_acc = n.as_any().is::<AccumulateGrad>();
        exec.insert(k, child_leads || (is_target && is_acc && accumulate));
        leads.insert(k, is_target || child_leads);
    }
    exec
}

/// Whether an error message is one of the engine's (mapped to RuntimeError by the bindings).
pub fn is_engine_msg(msg: &str) -> bool {
    msg.starts_with("Trying to backward through the graph a second time")
        || msg.starts_with("one of the variables needed for gradient computation")
        || msg.starts_with("create_graph=True:")
        || msg.starts_with("derivative for ")
}

/// `autograd.grad` for Rust callers: the gradients of `y` (upstream gradient `g`) with
/// respect to `xs`, `None` where `y` does not depend on one.
pub fn grad(y: &Value, g: Tensor, xs: &[Value]) -> Result<Vec<Option<Value>>> {
    let Some(e) = y.edge() else { return Ok(vec![None; xs.len()]) };
    run(vec![(e, Value::plain(g))], xs, &Options { retain_graph: false, create_graph: false, accumulate: false })
}
