//! Autograd with PyTorch's surface over Candle's graph.
//!
//! Candle records an op whenever an input is a variable (a leaf that requires
//! grad) or has an op, and `Tensor::backward` returns a `GradStore` keyed by
//! tensor id. PyTorch users expect `.grad` on the leaf objects, accumulation
//! across calls, and `no_grad()`. So:
//! - each leaf's `.grad` lives in a `GradSlot`; a registry maps the leaf's
//!   Candle id to its slot (weakly), and every Python wrapper of that leaf
//!   shares the slot;
//! - `backward()` runs Candle's backward (GIL released) and adds each leaf's
//!   gradient into its slot;
//! - grad mode is per thread, as in PyTorch; when off, results are detached.
use crate::bindings::errors::{runtime_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::grad::{get_slot, grad_enabled, set_grad_enabled, set_slot, slot_of};
use candle_core::{Tensor, TensorId, Var};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The scalar whose backward gives the gradients: `out` itself, or `sum(out * gradient)`.
fn root(py: Python<'_>, out: &PyTensor, gradient: Option<&Bound<'_, PyAny>>, op: &str) -> PyResult<Tensor> {
    let t = out.t();
    if !t.track_op() {
        return Err(runtime_err(op, "element 0 of tensors does not require grad and does not have a grad_fn"));
    }
    match gradient {
        Some(g) if !g.is_none() => {
            let (g, _) = crate::bindings::creation::as_tensor_arg(g, op)?;
            if g.dims() != t.dims() {
                return Err(crate::bindings::errors::shape_err(
                    op,
                    format!("gradient has shape {:?} but the output has shape {:?}", g.dims(), t.dims()),
                ));
            }
            let g = g.detach().to_dtype(t.dtype()).op(op)?;
            // `g` is a constant: only `t`'s side of the product is differentiated.
            let prod = crate::bindings::errors::detach_op(py, op, || {
                crate::ops::binary::one_side_tracked(&t, &g, crate::ops::binary::Bin::Mul).unwrap_or_else(|| t.mul(&g))
            })?;
            crate::bindings::reduce::sum_dims(py, &prod, None, false)
        }
        _ => {
            if t.elem_count() != 1 {
                return Err(runtime_err(op, format!("grad can be implicitly created only for scalar outputs, got shape {:?}", t.dims())));
            }
            if !t.dtype().is_float() {
                return Err(runtime_err(op, "only floating point outputs can require gradients"));
            }
            Ok(t)
        }
    }
}

fn run_backward(py: Python<'_>, root: Tensor, op: &str) -> PyResult<candle_core::backprop::GradStore> {
    crate::bindings::errors::detach_op(py, op, || root.backward())
}

#[pymethods]
impl PyTensor {
    #[getter]
    fn requires_grad(&self) -> bool {
        // Only floating point tensors take part in autograd (comparisons, argmax, ... do not).
        self.t().track_op() && self.dt().is_float()
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
        let t = self.t();
        t.is_variable() || !t.track_op() || !self.dt().is_float()
    }
    #[getter]
    fn grad(&self) -> Option<PyTensor> {
        self.slot_if_any().and_then(|s| get_slot(s)).map(|g| PyTensor::wrap(g, false))
    }
    #[setter(grad)]
    fn set_grad(&self, value: Option<&Bound<'_, PyTensor>>) -> PyResult<()> {
        match value {
            None => {
                if let Some(s) = self.slot_if_any() {
                    set_slot(s, None)
                }
            }
            Some(v) => {
                let g = v.get().t();
                let me = self.t();
                if g.dims() != me.dims() {
                    return Err(crate::bindings::errors::shape_err(
                        "grad",
                        format!("assigned grad has shape {:?} but the tensor has shape {:?}", g.dims(), me.dims()),
                    ));
                }
                set_slot(self.slot(), Some(g.detach()));
            }
        }
        Ok(())
    }

    fn detach(&self) -> PyTensor {
        PyTensor::wrap(self.t().detach(), self.is_bool)
    }

    fn detach_(slf: &Bound<'_, Self>) -> Py<PyTensor> {
        let me = slf.get();
        me.replace(me.t().detach());
        slf.clone().unbind()
    }

    /// Compute gradients of this tensor and add them into the `.grad` of every leaf.
    #[pyo3(signature = (gradient=None, retain_graph=None, create_graph=false, inputs=None))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&Bound<'_, PyAny>>,
        retain_graph: Option<bool>,
        create_graph: bool,
        inputs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let _ = retain_graph; // Candle's graph lives as long as the tensors: always retained.
        if create_graph {
            return Err(runtime_err("backward", "create_graph=True (higher-order gradients) is not supported"));
        }
        let r = root(py, self, gradient, "backward")?;
        let grads = run_backward(py, r, "backward")?;
        let only: Option<Vec<TensorId>> = match inputs {
            Some(i) if !i.is_none() => Some(tensors_of(i)?.iter().map(|t| t.get().t().id()).collect()),
            _ => None,
        };
        let mut work = Vec::new();
        for id in grads.get_ids() {
            if let Some(o) = &only {
                if !o.contains(id) {
                    continue;
                }
            }
            let Some(slot) = slot_of(id) else { continue };
            let Some(g) = grads.get_id(*id) else { continue };
            work.push((slot, g.detach()));
        }
        // Accumulate with the GIL released, and take each slot's lock only
        // there: a thread that blocked on a slot while holding the GIL would
        // deadlock with another thread's backward that holds the slot and waits
        // for the GIL (two threads training one shared model).
        crate::bindings::errors::detach_op(py, "backward", || {
            for (slot, g) in &work {
                let mut cur = slot.lock().unwrap_or_else(|p| p.into_inner());
                // Own storage: a gradient may share memory with another leaf's.
                let new = match cur.as_ref() {
                    None => g.copy()?,
                    Some(old) => old.add(g)?,
                };
                *cur = Some(new);
            }
            Ok(())
        })
    }

    fn retain_grad(&self) -> PyResult<()> {
        if self.t().is_variable() {
            return Ok(());
        }
        Err(runtime_err(
            "retain_grad",
            "gradients of non-leaf tensors are not kept by the Candle backend; take the gradient of a leaf instead",
        ))
    }
}

impl PyTensor {
    pub fn set_requires_grad(&self, value: bool) -> PyResult<()> {
        let t = self.t();
        if t.track_op() && !t.is_variable() && self.dt().is_float() {
            return Err(runtime_err(
                "requires_grad_",
                "you can only change requires_grad flags of leaf variables; use detach() for a non-leaf",
            ));
        }
        if value == t.is_variable() {
            return Ok(());
        }
        if value {
            if !t.dtype().is_float() {
                return Err(runtime_err("requires_grad_", "only Tensors of floating point dtype can require gradients"));
            }
            if t.track_op() {
                return Err(runtime_err("requires_grad_", "you can only change requires_grad flags of leaf variables"));
            }
            // A variable needs its own storage in Candle; this is the one copy.
            let v = Var::from_tensor(&t).op("requires_grad_")?.into_inner();
            self.replace(v);
        } else {
            if !t.is_variable() && t.track_op() {
                return Err(runtime_err(
                    "requires_grad_",
                    "you can only change requires_grad flags of leaf variables; use detach() for a non-leaf",
                ));
            }
            self.replace(t.detach());
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

/// `candle_py.autograd.grad(outputs, inputs, grad_outputs=None, allow_unused=False)`.
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
    let _ = retain_graph;
    if create_graph {
        return Err(runtime_err("autograd.grad", "create_graph=True (higher-order gradients) is not supported"));
    }
    let outs = tensors_of(outputs)?;
    let ins = tensors_of(inputs)?;
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
        return Err(crate::bindings::errors::value_err(
            "autograd.grad",
            format!("got {} grad_outputs for {} outputs", gos.len(), outs.len()),
        ));
    }
    let mut total: Option<Tensor> = None;
    for (o, g) in outs.iter().zip(gos.iter()) {
        let r = root(py, o.get(), g.as_ref(), "autograd.grad")?;
        total = Some(match total {
            None => r,
            Some(t) => t.add(&r.to_dtype(t.dtype()).op("autograd.grad")?).op("autograd.grad")?,
        });
    }
    let Some(total) = total else {
        return Err(crate::bindings::errors::value_err("autograd.grad", "no outputs given"));
    };
    let grads = run_backward(py, total, "autograd.grad")?;
    let mut res: Vec<Option<PyTensor>> = Vec::new();
    for i in &ins {
        let it = i.get().t();
        match grads.get(&it) {
            // Detached: without create_graph the gradients are plain values, as in PyTorch.
            Some(g) => res.push(Some(PyTensor::wrap(g.detach().copy().op("autograd.grad")?, false))),
            None => {
                if it.track_op() && !it.is_variable() {
                    return Err(runtime_err(
                        "autograd.grad",
                        "gradients with respect to non-leaf tensors are not kept by the Candle backend; pass leaf tensors as inputs",
                    ));
                }
                if materialize_grads {
                    res.push(Some(PyTensor::wrap(it.zeros_like().op("autograd.grad")?, false)));
                } else if allow_unused.unwrap_or(false) {
                    res.push(None);
                } else {
                    return Err(runtime_err(
                        "autograd.grad",
                        "One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.",
                    ));
                }
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(grad, m)?)?;
    m.add_function(wrap_pyfunction!(_set_grad_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(is_grad_enabled, m)?)?;
    Ok(())
}
