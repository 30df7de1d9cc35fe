//! The Python face of graph nodes: `Tensor.grad_fn` objects (`name()`,
//! `next_functions`, `register_hook`, `register_prehook`), removable hook handles,
//! and Python callables as gradient hooks.
use crate::autograd::node::{next_hook_id, Hook, Node};
use crate::autograd::value::{lock, Meta, Value};
use crate::bindings::tensor::PyTensor;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Weak};

/// A node of the autograd graph (`y.grad_fn`).
#[pyclass(name = "Node", module = "candle_py.autograd.graph", frozen)]
pub struct PyNode {
    pub node: Arc<dyn Node>,
}

/// Call a Python hook with a gradient: its return value (a Tensor) replaces the gradient.
pub fn py_hook(f: Py<PyAny>) -> Hook {
    Arc::new(move |g: &Value| -> candle_core::Result<Option<Value>> {
        Python::attach(|py| {
            let arg = Py::new(py, PyTensor::wrap_v(g.clone(), false)).map_err(crate::bindings::errors::py_to_candle)?;
            let r = f.call1(py, (arg,)).map_err(crate::bindings::errors::py_to_candle)?;
            if r.is_none(py) {
                return Ok(None);
            }
            let t = r.bind(py).cast::<PyTensor>().map_err(|_| {
                crate::bindings::errors::py_to_candle(crate::bindings::errors::type_err(
                    "hook",
                    "a gradient hook must return a Tensor or None",
                ))
            })?;
            let v = t.get().v();
            if v.data.dims() != g.data.dims() {
                return Err(crate::bindings::errors::py_to_candle(crate::bindings::errors::runtime_err(
                    "hook",
                    format!("hook returned a gradient of shape {:?} for a tensor of shape {:?}", v.data.dims(), g.data.dims()),
                )));
            }
            Ok(Some(v))
        })
    })
}

/// What a handle removes its hook from.
enum Owner {
    Leaf(Weak<Meta>, bool),
    Node(Weak<dyn Node>),
}

/// `handle.remove()` unregisters the hook (`torch.utils.hooks.RemovableHandle`).
#[pyclass(name = "RemovableHandle", module = "candle_py.utils.hooks", frozen)]
pub struct PyHandle {
    owner: Owner,
    pub id: u64,
}

impl PyHandle {
    pub fn leaf(m: &Arc<Meta>, post: bool, id: u64) -> PyHandle {
        PyHandle { owner: Owner::Leaf(Arc::downgrade(m), post), id }
    }
    pub fn node(n: &Arc<dyn Node>, id: u64) -> PyHandle {
        PyHandle { owner: Owner::Node(Arc::downgrade(n)), id }
    }
}

#[pymethods]
impl PyHandle {
    fn remove(&self) {
        match &self.owner {
            Owner::Leaf(m, post) => {
                if let Some(m) = m.upgrade() {
                    let list = if *post { &m.post_hooks } else { &m.hooks };
                    lock(list).retain(|(i, _)| *i != self.id);
                }
            }
            Owner::Node(n) => {
                if let Some(n) = n.upgrade() {
                    lock(&n.base().pre_hooks).retain(|(i, _, _)| *i != self.id);
                }
            }
        }
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn __exit__(&self, _a: &Bound<'_, PyAny>, _b: &Bound<'_, PyAny>, _c: &Bound<'_, PyAny>) {
        self.remove()
    }
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }
}

/// Register `hook` on the gradient of `v`: on a leaf, before accumulation; on a
/// non-leaf, as a pre-hook of its node for its output.
pub fn register_tensor_hook(v: &Value, hook: Hook) -> Option<PyHandle> {
    let m = v.meta.as_ref()?;
    let id = next_hook_id();
    Some(match &m.grad_fn {
        None => {
            lock(&m.hooks).push((id, hook));
            PyHandle::leaf(m, false, id)
        }
        Some((n, nr)) => {
            lock(&n.base().pre_hooks).push((id, *nr, hook));
            PyHandle::node(n, id)
        }
    })
}

#[pymethods]
impl PyNode {
    /// PyTorch's class name of the node, e.g. `AddBackward0`.
    fn name(&self) -> String {
        self.node.name()
    }
    /// `((node or None, input_nr), ...)`, one pair per input of the op.
    #[getter]
    fn next_functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let mut items = Vec::new();
        for e in &self.node.base().next {
            let pair = match e {
                Some(e) => (Py::new(py, PyNode { node: e.node.clone() })?.into_any(), e.nr),
                None => (py.None(), 0),
            };
            items.push(PyTuple::new(py, [pair.0, pair.1.into_pyobject(py)?.into_any().unbind()])?);
        }
        PyTuple::new(py, items)
    }
    /// Hook on the gradients flowing into this node's outputs: `hook(grad_outputs)` may
    /// return replacement gradients (a tuple) or None.
    fn register_prehook(&self, py: Python<'_>, hook: Py<PyAny>) -> PyResult<PyHandle> {
        let id = next_hook_id();
        let n = self.node.base().num_outputs;
        for nr in 0..n {
            let f = hook.clone_ref(py);
            let h: Hook = Arc::new(move |g: &Value| {
                Python::attach(|py| {
                    let mut gs: Vec<Py<PyAny>> = (0..n).map(|_| py.None()).collect();
                    gs[nr] = Py::new(py, PyTensor::wrap_v(g.clone(), false)).map_err(crate::bindings::errors::py_to_candle)?.into_any();
                    let r = f
                        .call1(py, (PyTuple::new(py, gs).map_err(crate::bindings::errors::py_to_candle)?,))
                        .map_err(crate::bindings::errors::py_to_candle)?;
                    if r.is_none(py) {
                        return Ok(None);
                    }
                    let item = r.bind(py).get_item(nr).map_err(crate::bindings::errors::py_to_candle)?;
                    if item.is_none() {
                        return Ok(None);
                    }
                    Ok(Some(item.cast::<PyTensor>().map_err(|e| crate::bindings::errors::py_to_candle(PyErr::from(e)))?.get().v()))
                })
            });
            lock(&self.node.base().pre_hooks).push((id, nr, h));
        }
        Ok(PyHandle::node(&self.node, id))
    }
    fn __repr__(&self) -> String {
        format!("<{} object at {:#x}>", self.node.name(), crate::autograd::node::node_key(&self.node))
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyNode>().is_ok_and(|o| Arc::ptr_eq(&o.get().node, &self.node))
    }
    fn __hash__(&self) -> isize {
        crate::autograd::node::node_key(&self.node) as isize
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNode>()?;
    m.add_class::<PyHandle>()?;
    m.add_function(wrap_pyfunction!(_function_node, m)?)?;
    Ok(())
}

/// The node of a Python `autograd.Function`: its backward is the class's
/// `backward(ctx, *grad_outputs)`, called with the GIL held.
struct FunctionNode {
    name: String,
    base: crate::autograd::node::NodeBase,
    ctx: Py<PyAny>,
    backward: Py<PyAny>,
    /// Shapes and dtypes of the outputs, to make zeros for missing gradients.
    outputs: Vec<Option<candle_core::Tensor>>,
    materialize: bool,
    /// Shapes of the inputs with an edge (the returned gradients must fit them).
    input_dims: Vec<Option<Vec<usize>>>,
}

impl Node for FunctionNode {
    fn name(&self) -> String {
        self.name.clone()
    }
    /// The user's `backward` may return any tensor (its input, a saved one, a global).
    fn fresh_outputs(&self) -> bool {
        false
    }
    fn base(&self) -> &crate::autograd::node::NodeBase {
        &self.base
    }
    fn apply(&self, grads: Vec<Option<Value>>) -> candle_core::Result<Vec<Option<Value>>> {
        use crate::bindings::errors::py_to_candle;
        Python::attach(|py| {
            let mut args: Vec<Py<PyAny>> = vec![self.ctx.clone_ref(py)];
            for (g, o) in grads.into_iter().zip(&self.outputs) {
                let g = match (g, o) {
                    (Some(g), _) => Some(g),
                    (None, Some(o)) if self.materialize => Some(Value::plain(o.zeros_like()?)),
                    _ => None,
                };
                args.push(match g {
                    Some(g) => Py::new(py, PyTensor::wrap_v(g, false)).map_err(py_to_candle)?.into_any(),
                    None => py.None(),
                });
            }
            let r = self.backward.call1(py, PyTuple::new(py, args).map_err(py_to_candle)?).map_err(py_to_candle)?;
            let r = r.bind(py);
            let items: Vec<Bound<'_, PyAny>> = if let Ok(t) = r.cast::<PyTuple>() { t.iter().collect() } else { vec![r.clone()] };
            let n = self.base.next.len();
            if items.len() < n {
                return Err(py_to_candle(crate::bindings::errors::runtime_err(
                    &self.name,
                    format!("function {} returned an incorrect number of gradients (expected {n}, got {})", self.name, items.len()),
                )));
            }
            let mut out = Vec::with_capacity(n);
            for (i, (item, e)) in items.iter().zip(&self.base.next).enumerate() {
                if e.is_none() || item.is_none() {
                    out.push(None);
                    continue;
                }
                let t = item.cast::<PyTensor>().map_err(|_| {
                    py_to_candle(crate::bindings::errors::type_err(
                        &self.name,
                        format!("backward returned a non-Tensor gradient at index {i}"),
                    ))
                })?;
                let v = t.get().v();
                if let Some(Some(want)) = self.input_dims.get(i) {
                    if v.data.dims() != want.as_slice() {
                        return Err(py_to_candle(crate::bindings::errors::runtime_err(
                            &self.name,
                            format!(
                                "Function {} returned an invalid gradient at index {i} - got {:?} but expected shape compatible with {:?}",
                                self.name,
                                v.data.dims(),
                                want
                            ),
                        )));
                    }
                }
                out.push(Some(v));
            }
            Ok(out)
        })
    }
    fn release(&self) {
        Python::attach(|py| {
            let _ = self.ctx.call_method0(py, "_release");
        });
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `_core._function_node(name, ctx, backward, inputs, outputs, differentiable, materialize)`:
/// record a Python `autograd.Function` call. `inputs` holds the forward's arguments
/// (None where not a tensor); each differentiable output tensor becomes output `i`
/// of the new node.
#[pyfunction]
fn _function_node(
    name: String,
    ctx: Py<PyAny>,
    backward: Py<PyAny>,
    inputs: Vec<Option<Bound<'_, PyTensor>>>,
    outputs: Vec<Option<Bound<'_, PyTensor>>>,
    differentiable: Vec<bool>,
    materialize: bool,
) -> PyResult<()> {
    let vals: Vec<Option<Value>> = inputs.iter().map(|t| t.as_ref().map(|t| t.get().v())).collect();
    let next: Vec<Option<crate::autograd::node::Edge>> = vals.iter().map(|v| v.as_ref().and_then(|v| v.edge())).collect();
    let input_dims = vals.iter().map(|v| v.as_ref().map(|v| v.data.dims().to_vec())).collect();
    let outs: Vec<Option<candle_core::Tensor>> = outputs.iter().map(|o| o.as_ref().map(|o| o.get().t())).collect();
    let node: Arc<dyn Node> = Arc::new(FunctionNode {
        name,
        base: crate::autograd::node::NodeBase::new(next, outputs.len()),
        ctx,
        backward,
        outputs: outs,
        materialize,
        input_dims,
    });
    for (i, (o, d)) in outputs.iter().zip(differentiable).enumerate() {
        if let (Some(o), true) = (o, d) {
            if o.get().dt().is_float() {
                o.get().set_meta(Some(Meta::non_leaf(node.clone(), i)));
            }
        }
    }
    Ok(())
}
