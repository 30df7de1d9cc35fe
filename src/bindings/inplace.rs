//! The in-place twins (`sqrt_`, `tril_`, `eq_`, ...) of out-of-place Tensor methods.
//!
//! Each twin runs its out-of-place method, under the same arguments, on an alias of
//! the tensor with a fresh version counter (`PyTensor::inplace_source`) and writes
//! the result back with `arith::assign_inplace`, as `add_` and `clamp_` do: the
//! tensor's own storage is written (views see it), its version counter is bumped,
//! a non-leaf tensor in the graph gets the op's node as its new history, a leaf that
//! requires grad is refused with PyTorch's error, and a result that the tensor's
//! dtype cannot hold (`sqrt_` of an integer tensor) is refused. The math stays the
//! out-of-place method's: each op is still written once.
//!
//! The twins of `ops::unary`'s vectorized functions (`exp_`, `relu_`, `sqrt_`, ...)
//! first try the direct write (`ops::assign::unary_assign`: the same element formulas,
//! computed in the tensor's own storage, one pass and no new buffer) on a dense CPU
//! float tensor outside autograd.
use crate::bindings::arith::{assign_inplace, write_direct};
use crate::bindings::tensor::PyTensor;
use crate::ops::assign::{unary_assign, Unary};
use crate::ops::unary::Fast;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// `slf.<method>(*args, **kwargs)` written into `slf`; returns `slf`.
fn inplace_via(
    slf: &Bound<'_, PyTensor>,
    method: &str,
    op: &str,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyTensor>> {
    let py = slf.py();
    let src = Bound::new(py, slf.get().inplace_source())?;
    let out = src.call_method(method, args, kwargs)?;
    let out = out.cast::<PyTensor>().map_err(|_| crate::bindings::errors::type_err(op, format!("{method} did not return a Tensor")))?;
    let (v, dt) = out.get().v_dt();
    assign_inplace(slf.get(), PyTensor::wrap_vdt(v, dt), op)?;
    Ok(slf.clone().unbind())
}

macro_rules! inplace_twins {
    ($($name_:ident => $name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            #[doc = concat!("`", stringify!($name), "` written into this tensor in place; returns it.")]
            #[pyo3(signature = (*args, **kwargs))]
            fn $name_(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyTensor>> {
                inplace_via(slf, stringify!($name), stringify!($name_), args, kwargs)
            }
            )*
        }
    };
}

/// The twins with a direct path: `slf` overwritten by `f` in its own storage when
/// `ops::assign::unary_assign` applies (no arguments given), `inplace_via` otherwise.
macro_rules! direct_twins {
    ($($name_:ident => $name:ident: $f:expr),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(
            #[doc = concat!("`", stringify!($name), "` written into this tensor in place; returns it.")]
            #[pyo3(signature = (*args, **kwargs))]
            fn $name_(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyTensor>> {
                let bare = args.is_empty() && kwargs.is_none_or(|k| k.is_empty());
                if bare && write_direct(slf.get(), stringify!($name_), |t| unary_assign(t, Unary::Fast($f)))? {
                    return Ok(slf.clone().unbind());
                }
                inplace_via(slf, stringify!($name), stringify!($name_), args, kwargs)
            }
            )*
        }
    };
}

direct_twins! {
    abs_ => abs: Fast::Abs, absolute_ => absolute: Fast::Abs, neg_ => neg: Fast::Neg, negative_ => negative: Fast::Neg,
    square_ => square: Fast::Sqr, exp_ => exp: Fast::Exp, log_ => log: Fast::Log, sqrt_ => sqrt: Fast::Sqrt,
    reciprocal_ => reciprocal: Fast::Recip, sin_ => sin: Fast::Sin, cos_ => cos: Fast::Cos, tanh_ => tanh: Fast::Tanh,
    sigmoid_ => sigmoid: Fast::Sigmoid, relu_ => relu: Fast::Relu, log1p_ => log1p: Fast::Log1p,
    expm1_ => expm1: Fast::Expm1, rsqrt_ => rsqrt: Fast::Rsqrt,
}

inplace_twins! {
    sign_ => sign,
    log2_ => log2, log10_ => log10, tan_ => tan,
    erf_ => erf, frac_ => frac,
    floor_ => floor, ceil_ => ceil, round_ => round, trunc_ => trunc,
    tril_ => tril, triu_ => triu, cumsum_ => cumsum,
    eq_ => eq, ne_ => ne, lt_ => lt, le_ => le, gt_ => gt, ge_ => ge,
    multiply_ => multiply, subtract_ => subtract, divide_ => divide, true_divide_ => true_divide,
    atan_ => atan, asin_ => asin, acos_ => acos, sinh_ => sinh, cosh_ => cosh, asinh_ => asinh, acosh_ => acosh,
    atanh_ => atanh, arctan_ => arctan, arcsin_ => arcsin, arccos_ => arccos, arcsinh_ => arcsinh, arccosh_ => arccosh,
    arctanh_ => arctanh, exp2_ => exp2, erfc_ => erfc, erfinv_ => erfinv, lgamma_ => lgamma, digamma_ => digamma,
    atan2_ => atan2, arctan2_ => arctan2, polygamma_ => polygamma,
    fmod_ => fmod, logical_not_ => logical_not, bitwise_not_ => bitwise_not,
}
// `scatter_` / `scatter_add_` (with torch's `reduce=` forms) are `misc_ops`' own.
