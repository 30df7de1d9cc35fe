//! `_core._activation`: the entry of every elementwise activation of `layers::pointwise`.
use crate::bindings::errors::{detach_op, require_float, value_err};
use crate::bindings::tensor::PyTensor;
use crate::layers::pointwise::{activation, Act, SELU_ALPHA, SELU_SCALE};
use pyo3::prelude::*;

/// `_core._activation(input, op, alpha=1.0, beta=1.0, threshold=20.0, negative_slope=0.01)`:
/// `op` is one of silu, mish, hardsigmoid, hardswish, elu (alpha), selu, celu (alpha),
/// softplus (beta, threshold), leaky_relu (negative_slope), gelu_tanh.
#[pyfunction]
#[pyo3(signature = (input, op, alpha=1.0, beta=1.0, threshold=20.0, negative_slope=0.01))]
fn _activation(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    op: &str,
    alpha: f64,
    beta: f64,
    threshold: f64,
    negative_slope: f64,
) -> PyResult<PyTensor> {
    let act = match op {
        "silu" => Act::Silu,
        "mish" => Act::Mish,
        "hardsigmoid" => Act::Hardsigmoid,
        "hardswish" => Act::Hardswish,
        "elu" => Act::Elu { alpha, scale: 1.0, input_scale: 1.0, grad_scale: 1.0 },
        "selu" => Act::Elu { alpha: SELU_ALPHA, scale: SELU_SCALE, input_scale: 1.0, grad_scale: 1.0 },
        "celu" if alpha == 0.0 => return Err(value_err("celu", "ZeroDivisionError: alpha must not be 0")),
        // PyTorch's CELU backward scales the input by 1 / alpha with alpha rounded to float32 (its forward does not).
        "celu" => Act::Elu { alpha, scale: 1.0, input_scale: 1.0 / alpha, grad_scale: 1.0 / f64::from(alpha as f32) },
        "softplus" => Act::Softplus { beta, threshold },
        "leaky_relu" => Act::LeakyRelu { slope: negative_slope },
        "gelu_tanh" => Act::GeluTanh,
        _ => return Err(value_err("_activation", format!("unknown activation {op:?}"))),
    };
    let (t, dt) = input.get().v_dt();
    require_float(op, dt)?;
    let k = crate::layers::pointwise::activation_kernel(&t.data, act).map(crate::autograd::custom::Op::one);
    let name = node_name(op);
    let y = detach_op(py, op, || {
        crate::autograd::custom::fused_or(
            name,
            k,
            &[&t],
            move |x| activation(&x[0], act),
            std::sync::Arc::new(move |x: &[crate::autograd::Value]| crate::autograd::composed::act(&x[0], act)),
        )
    })?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

/// PyTorch's node name of each activation.
fn node_name(op: &str) -> &'static str {
    match op {
        "silu" => "SiluBackward0",
        "mish" => "MishBackward0",
        "hardsigmoid" => "HardsigmoidBackward0",
        "hardswish" => "HardswishBackward0",
        "elu" | "selu" | "celu" => "EluBackward0",
        "softplus" => "SoftplusBackward0",
        "leaky_relu" => "LeakyReluBackward0",
        _ => "GeluBackward0",
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_activation, m)?)?;
    Ok(())
}
