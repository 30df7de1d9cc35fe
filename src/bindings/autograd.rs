//! PyTorch's autograd surface over our engine (`crate::autograd`): `requires_grad`,
//! `.grad`, `grad_fn`, `backward()`, `retain_grad()`, tensor hooks,
//! `autograd.grad`, and the per-thread grad and inference modes.
use crate::autograd::engine::{self, Options};
use crate::autograd::node::Edge;
use crate::autograd::value::{lock, Meta};
use crate::autograd::{grad_enabled, set_grad_enabled, Value};
use crate::bindings::errors::{runtime_err, shape_err, value_err, OpResult};
use crate::bindings::grad_fn::{py_hook, register_tensor_hook, PyHandle, PyNode};
use crate::bindings::tensor::PyTensor;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const NO_GRAD_FN: &str = "element 0 of tensors does not require grad and does not have a grad_fn";

/// The gradient to start from at `out`: `gradient`, or 1 for a scalar output.
fn root_grad(out: &Value, gradient: Option<&Bound<'_, PyAny>>, op: &str) -> PyResult<Value> {
    match gradient {
        Some(g) if !g.is_none() => {
            let gv = match g.cast::<PyTensor>() {
                Ok(t) => t.get().v(),
                Err(_) => Value::plain(crate::bindings::creation::as_tensor_arg(g, op)?.0),
            };
            if gv.data.dims() != out.data.dims() {
                return Err(shape_err(
                    op,
                    format!(
                        "Mismatch in shape: grad_output[0] has a shape of {:?} and output[0] has a shape of {:?}",
                        gv.data.dims(),
                        out.data.dims()
                    ),
                ));
            }
            if gv.data.dtype() == out.data.dtype() {
                Ok(gv)
            } else {
                crate::autograd::ops::to_dtype(&gv, out.data.dtype()).op(op)
            }
        }
        _ => {
            if out.data.elem_count() != 1 {
                return Err(runtime_err(
                    op,
                    format!("grad can be implicitly created only for scalar outputs, got shape {:?}", out.data.dims()),
                ));
            }
            Ok(Value::plain(out.data.ones_like().op(op)?))
        }
    }
}

fn edge_of(v: &Value, op: &str) -> PyResult<Edge> {
    v.edge().ok_or_else(|| runtime_err(op, NO_GRAD_FN))
}

fn run(py: Python<'_>, roots: Vec<(Edge, Value)>, targets: Vec<Value>, opts: Options, op: &str) -> PyResult<Vec<Option<Value>>> {
    crate::bindings::errors::detach(py, op, || engine::run(roots, &targets, &opts).op(op))
}

#[pymethods]
impl PyTensor {
    #[getter]
    fn requires_grad(&self) -> bool {
        self.read().requires_grad()
    }
    #[setter(requires_grad)]
    fn set_requires_grad_attr(&self, value: bool) -> PyResult<()> {
        self.set_requires_grad(value)
    }
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_(slf: &Bound<'_, Self>, requires_grad: bool) -> PyResult<Py<PyTensor>> {
        slf.get().set_requires_grad(requires_grad)?;
        Ok(slf.clone().unbind())
    }
    #[getter]
    fn is_leaf(&self) -> bool {
        self.read().is_leaf()
    }
    /// The node that made this tensor (None for leaves and tensors outside the graph).
    #[getter]
    fn grad_fn(&self) -> Option<PyNode> {
        self.read().grad_fn().map(|(node, _)| PyNode { node })
    }
    /// Which output of its `grad_fn` this tensor is.
    #[getter]
    fn output_nr(&self) -> usize {
        self.read().grad_fn().map_or(0, |(_, nr)| nr)
    }
    #[getter]
    pub(crate) fn grad(&self) -> Option<PyTensor> {
        let v = self.v();
        let g = match &v.meta {
            Some(m) => lock(&m.grad).clone(),
            None => self.plain_grad().clone(),
        };
        g.map(|g| PyTensor::wrap_v(g, false))
    }
    #[setter(grad)]
    pub(crate) fn set_grad(&self, value: Option<&Bound<'_, PyTensor>>) -> PyResult<()> {
        let new = match value {
            None => None,
            Some(v) => {
                let (g, me) = (v.get().v(), self.t());
                if g.data.dims() != me.dims() {
                    return Err(shape_err(
                        "grad",
                        format!("assigned grad has shape {:?} but the tensor has shape {:?}", g.data.dims(), me.dims()),
                    ));
                }
                Some(g)
            }
        };
        match &self.read().meta {
            Some(m) => *lock(&m.grad) = new,
            None => *self.plain_grad() = new,
        }
        Ok(())
    }
    /// How many in-place writes this tensor's storage has seen (PyTorch's `_version`).
    #[getter]
    fn _version(&self) -> u32 {
        self.read().version_now()
    }
    /// Whether `.grad` is kept for this non-leaf tensor.
    #[getter]
    fn retains_grad(&self) -> bool {
        self.read().meta.as_ref().is_some_and(|m| m.grad_fn.is_some() && m.retains_grad.load(Ordering::Relaxed))
    }

    fn detach(&self) -> PyTensor {
        PyTensor::wrap_v(self.read().detached(), self.is_bool)
    }

    fn detach_(slf: &Bound<'_, Self>) -> Py<PyTensor> {
        slf.get().set_meta(None);
        slf.clone().unbind()
    }

    /// Compute gradients of this tensor and add them into the `.grad` of every leaf
    /// (or only of `inputs`).
    #[pyo3(signature = (gradient=None, retain_graph=None, create_graph=false, inputs=None))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&Bound<'_, PyAny>>,
        retain_graph: Option<bool>,
        create_graph: bool,
        inputs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let out = self.v();
        let edge = edge_of(&out, "backward")?;
        let g = root_grad(&out, gradient, "backward")?;
        let targets = match inputs {
            Some(i) if !i.is_none() => {
                let ts = tensors_of(i)?;
                if ts.is_empty() {
                    return Err(runtime_err("backward", "'inputs' argument to backward() cannot be empty."));
                }
                ts.iter().map(|t| t.get().v()).map(|v| edge_of(&v, "backward").map(|_| v)).collect::<PyResult<Vec<_>>>()?
            }
            _ => Vec::new(),
        };
        let opts = Options { retain_graph: retain_graph.unwrap_or(create_graph), create_graph, accumulate: true };
        run(py, vec![(edge, g)], targets, opts, "backward")?;
        Ok(())
    }

    /// Keep `.grad` for this non-leaf tensor at the next backward.
    fn retain_grad(&self) -> PyResult<()> {
        let v = self.v();
        let Some(m) = &v.meta else {
            return Err(runtime_err("retain_grad", "can't retain_grad on Tensor that has requires_grad=False"));
        };
        if let Some((node, nr)) = &m.grad_fn {
            if !m.retains_grad.swap(true, Ordering::Relaxed) {
                lock(&node.base().retains).push((*nr, Arc::downgrade(m)));
            }
        }
        Ok(())
    }

    /// `hook(grad)` runs when this tensor's gradient is computed; it may return a replacement.
    fn register_hook(&self, hook: Py<PyAny>) -> PyResult<PyHandle> {
        register_tensor_hook(&self.v(), py_hook(hook))
            .ok_or_else(|| runtime_err("register_hook", "cannot register a hook on a tensor that doesn't require gradient"))
    }

    /// `hook(tensor)` runs after this leaf's gradient was accumulated into `.grad`.
    fn register_post_accumulate_grad_hook(slf: &Bound<'_, Self>, hook: Py<PyAny>) -> PyResult<PyHandle> {
        let v = slf.get().v();
        let m = match &v.meta {
            Some(m) if m.grad_fn.is_none() => m.clone(),
            Some(_) => {
                return Err(runtime_err(
                    "register_post_accumulate_grad_hook",
                    "post accumulate grad hooks cannot be registered on non-leaf tensors",
                ))
            }
            None => {
                return Err(runtime_err(
                    "register_post_accumulate_grad_hook",
                    "cannot register a hook on a tensor that doesn't require gradient",
                ))
            }
        };
        let me: Py<PyTensor> = slf.clone().unbind();
        let h: crate::autograd::node::Hook = Arc::new(move |_g: &Value| {
            Python::attach(|py| hook.call1(py, (me.clone_ref(py),)).map(|_| None).map_err(crate::bindings::errors::py_to_candle))
        });
        let id = crate::autograd::node::next_hook_id();
        lock(&m.post_hooks).push((id, h));
        Ok(PyHandle::leaf(&m, true, id))
    }
}

impl PyTensor {
    pub fn set_requires_grad(&self, value: bool) -> PyResult<()> {
        let v = self.v();
        if !v.is_leaf() {
            if value {
                return Ok(());
            }
            return Err(runtime_err(
                "requires_grad_",
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().",
            ));
        }
        if value == v.requires_grad() {
            return Ok(());
        }
        if value {
            if !self.dt().is_float() {
                return Err(runtime_err("requires_grad_", "only Tensors of floating point dtype can require gradients"));
            }
            // A plain `.grad` assigned earlier stays the leaf's gradient.
            let m = Meta::leaf();
            *lock(&m.grad) = self.plain_grad().take();
            self.set_meta(Some(m));
        } else {
            if let Some(m) = &v.meta {
                *self.plain_grad() = lock(&m.grad).take();
            }
            self.set_meta(None);
        }
        Ok(())
    }
}

fn tensors_of<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyTensor>>> {
    if let Ok(t) = obj.cast::<PyTensor>() {
        return Ok(vec![t.clone()]);
    }
    let mut out = Vec::new();
    for it in obj.try_iter()? {
        let it = it?;
        out.push(
            it.cast_into::<PyTensor>()
                .map_err(|_| crate::bindings::errors::type_err("autograd", "expected a Tensor or a sequence of Tensors"))?,
        );
    }
    Ok(out)
}

/// `candle_py.autograd.grad(outputs, inputs, grad_outputs=None, ...)`.
#[pyfunction]
#[pyo3(signature = (outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=false, allow_unused=None, materialize_grads=false))]
#[allow(clippy::too_many_arguments)]
fn grad<'py>(
    py: Python<'py>,
    outputs: &Bound<'py, PyAny>,
    inputs: &Bound<'py, PyAny>,
    grad_outputs: Option<&Bound<'py, PyAny>>,
    retain_graph: Option<bool>,
    create_graph: bool,
    allow_unused: Option<bool>,
    materialize_grads: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    const OP: &str = "autograd.grad";
    let outs = tensors_of(outputs)?;
    let ins = tensors_of(inputs)?;
    if outs.is_empty() {
        return Err(value_err(OP, "no outputs given"));
    }
    let gos: Vec<Option<Bound<'py, PyAny>>> = match grad_outputs {
        Some(g) if !g.is_none() => {
            if let Ok(t) = g.cast::<PyTensor>() {
                vec![Some(t.clone().into_any())]
            } else {
                g.try_iter()?.map(|x| x.map(|x| if x.is_none() { None } else { Some(x) })).collect::<PyResult<_>>()?
            }
        }
        _ => vec![None; outs.len()],
    };
    if gos.len() != outs.len() {
        return Err(value_err(OP, format!("got {} grad_outputs for {} outputs", gos.len(), outs.len())));
    }
    let mut roots = Vec::new();
    for (o, g) in outs.iter().zip(gos.iter()) {
        let v = o.get().v();
        let e = edge_of(&v, OP)?;
        roots.push((e, root_grad(&v, g.as_ref(), OP)?));
    }
    let targets: Vec<Value> = ins
        .iter()
        .map(|t| {
            let v = t.get().v();
            if v.requires_grad() {
                Ok(v)
            } else {
                Err(runtime_err(OP, "One of the differentiated Tensors does not require grad"))
            }
        })
        .collect::<PyResult<_>>()?;
    let opts = Options { retain_graph: retain_graph.unwrap_or(create_graph), create_graph, accumulate: false };
    let got = run(py, roots, targets.clone(), opts, OP)?;
    let allow_unused = allow_unused.unwrap_or(materialize_grads);
    let mut res: Vec<Option<PyTensor>> = Vec::new();
    for (g, v) in got.into_iter().zip(&targets) {
        match g {
            Some(g) => {
                // Without create_graph the gradients are plain values, as in PyTorch.
                let g = if create_graph { g } else { g.detached() };
                res.push(Some(PyTensor::wrap_v(g, false)));
            }
            None if materialize_grads => res.push(Some(PyTensor::wrap(v.data.zeros_like().op(OP)?, false))),
            None if allow_unused => res.push(None),
            None => {
                return Err(runtime_err(
                    OP,
                    "One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.",
                ))
            }
        }
    }
    PyTuple::new(py, res)
}

/// Set grad mode for this thread; returns the previous mode (used by `no_grad`).
#[pyfunction]
fn _set_grad_enabled(mode: bool) -> bool {
    set_grad_enabled(mode)
}

#[pyfunction]
fn is_grad_enabled() -> bool {
    grad_enabled()
}

/// Enter (True) or leave inference mode on this thread; returns the previous
/// (inference mode, grad mode) pair for the context manager to restore.
#[pyfunction]
fn _set_inference_mode(on: bool) -> (bool, bool) {
    crate::autograd::mode::set_inference_mode(on)
}

/// Backward time per node name, `[(name, seconds, calls)]` slowest first, collected
/// since the last call while `CANDLE_PY_AUTOGRAD_PROFILE=1` was set at start-up (a
/// development aid for finding slow backward formulas); resets the counts.
#[pyfunction]
fn _autograd_profile() -> Vec<(String, f64, u64)> {
    crate::autograd::engine::profile_take()
}

#[pyfunction]
fn is_inference_mode_enabled() -> bool {
    crate::autograd::mode::inference_mode()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(grad, m)?)?;
    m.add_function(wrap_pyfunction!(_set_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(is_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_set_inference_mode, m)?)?;
    m.add_function(wrap_pyfunction!(is_inference_mode_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_autograd_profile, m)?)?;
    Ok(())
}
