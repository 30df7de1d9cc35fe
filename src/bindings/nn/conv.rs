//! Python entry points of `layers::conv`: argument checks, GIL release, errors.
use crate::bindings::args::{pad3, per_axis};
use crate::bindings::errors::{labelled_dtype_err, labelled_shape_err, OpResult};
use crate::bindings::tensor::PyTensor;
use crate::dtype::DT;
use crate::layers::conv::*;
use candle_core::{Device, Tensor};
use pyo3::prelude::*;

/// `_core._conv(input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, transposed,
/// output_padding, op)`: N-d convolution (or transposed convolution) with PyTorch's
/// semantics. `pad_hi` (extra padding at the end, for "same") is used by plain
/// convolution only; `op` prefixes error messages (a layer name like "[Conv2d]").
#[pyfunction]
#[pyo3(signature = (input, weight, bias, stride, pad_lo, pad_hi, dilation, groups, transposed, output_padding, op))]
#[allow(clippy::too_many_arguments)]
fn _conv(
    py: Python<'_>,
    input: &Bound<'_, PyTensor>,
    weight: &Bound<'_, PyTensor>,
    bias: Option<&Bound<'_, PyTensor>>,
    stride: Vec<i64>,
    pad_lo: Vec<i64>,
    pad_hi: Vec<i64>,
    dilation: Vec<i64>,
    groups: i64,
    transposed: bool,
    output_padding: Vec<i64>,
    op: &str,
) -> PyResult<PyTensor> {
    let (x, w) = (input.get(), weight.get());
    let b = bias.map(|b| b.get());
    let dt = x.dt();
    for (name, t) in [("input", Some(x)), ("weight", Some(w)), ("bias", b)] {
        if let Some(t) = t {
            if !matches!(t.dt(), DT::F32 | DT::F64) || t.dt() != dt {
                return Err(labelled_dtype_err(
                    op,
                    format!("expected float32 or float64 tensors of one dtype, got {name} of {} (input is {})", t.dt().name(), dt.name()),
                ));
            }
        }
    }
    let mut ins_v = vec![x.v(), w.v()];
    ins_v.extend(b.map(|b| b.v()));
    let (x, w) = (&ins_v[0].data, &ins_v[1].data);
    let b = ins_v.get(2).map(|b| &b.data);
    let home = super::home_device(op, &[x, w].into_iter().chain(b).collect::<Vec<_>>())?;
    let nd = w.rank().saturating_sub(2);
    if !(1..=3).contains(&nd) {
        return Err(labelled_shape_err(op, format!("expected a weight of rank 3, 4 or 5, got shape {:?}", w.dims())));
    }
    if x.rank() != nd + 2 {
        return Err(labelled_shape_err(
            op,
            format!("expected a {}-d input (N, C, *spatial) for weight {:?}, got {:?}", nd + 2, w.dims(), x.dims()),
        ));
    }
    if groups < 1 {
        return Err(labelled_shape_err(op, format!("groups must be positive, got {groups}")));
    }
    let groups = groups as usize;
    let stride = pad3(&per_axis(&stride, nd, "stride", 1, op)?, 1);
    let dil = pad3(&per_axis(&dilation, nd, "dilation", 1, op)?, 1);
    let plo = pad3(&per_axis(&pad_lo, nd, "padding", 0, op)?, 0);
    let phi = pad3(&per_axis(&pad_hi, nd, "padding", 0, op)?, 0);
    let opad = pad3(&per_axis(&output_padding, nd, "output_padding", 0, op)?, 0);
    let (xd, wd) = (x.dims().to_vec(), w.dims().to_vec());
    let (n, cin) = (xd[0], xd[1]);
    let k = pad3(&wd[2..], 1);
    let ins = pad3(&xd[2..], 1);
    if k.contains(&0) {
        return Err(labelled_shape_err(op, format!("kernel size must be positive, got weight {wd:?}")));
    }
    let out = if !transposed {
        let cout = wd[0];
        if cin != wd[1] * groups {
            return Err(labelled_shape_err(
                op,
                format!("expected input with {} channels (weight {wd:?}, groups={groups}), got {xd:?}", wd[1] * groups),
            ));
        }
        if cout % groups != 0 {
            return Err(labelled_shape_err(op, format!("out_channels ({cout}) must be divisible by groups ({groups})")));
        }
        let mut outs = [0; 3];
        for a in 0..3 {
            let padded = (ins[a] + plo[a] + phi[a]) as i64;
            let span = (dil[a] * (k[a] - 1) + 1) as i64;
            if padded < span {
                return Err(labelled_shape_err(
                    op,
                    format!(
                        "kernel size {:?} (dilated to {}) is larger than the padded input size {} in spatial dim {} (input {xd:?})",
                        &wd[2..],
                        span,
                        padded,
                        a + nd - 3
                    ),
                ));
            }
            outs[a] = ((padded - span) / stride[a] as i64 + 1) as usize;
        }
        if let Some(b) = &b {
            if b.dims() != [cout] {
                return Err(labelled_shape_err(op, format!("expected bias of shape ({cout},), got {:?}", b.dims())));
            }
        }
        let g = Geom { n, c: cin, groups, ins, outs, k, stride, pad: plo, dil };
        (g, cout, cout, outs)
    } else {
        if wd[0] != cin {
            return Err(labelled_shape_err(op, format!("expected input with {} channels (weight {wd:?}), got {xd:?}", wd[0])));
        }
        if cin % groups != 0 {
            return Err(labelled_shape_err(op, format!("in_channels ({cin}) must be divisible by groups ({groups})")));
        }
        let cout = wd[1] * groups;
        let mut outs = [0; 3];
        for a in 0..3 {
            if opad[a] >= stride[a] && opad[a] >= dil[a] {
                return Err(labelled_shape_err(
                    op,
                    format!("output padding must be smaller than either stride or dilation, got output_padding={output_padding:?}"),
                ));
            }
            let o = (ins[a] as i64 - 1) * stride[a] as i64 - 2 * plo[a] as i64 + (dil[a] * (k[a] - 1)) as i64 + opad[a] as i64 + 1;
            if o <= 0 {
                return Err(labelled_shape_err(op, format!("computed output size {o} is not positive for input {xd:?} and weight {wd:?}")));
            }
            outs[a] = o as usize;
        }
        if let Some(b) = &b {
            if b.dims() != [cout] {
                return Err(labelled_shape_err(op, format!("expected bias of shape ({cout},), got {:?}", b.dims())));
            }
        }
        // The adjoint of a convolution from the output grid (outs) onto the input grid (ins).
        let g = Geom { n, c: cout, groups, ins: outs, outs: ins, k, stride, pad: plo, dil };
        (g, cin, cout, outs)
    };
    let (g, c_arg, cout, outs) = out;
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&outs[3 - nd..]);
    // A huge padding, stride or dilation must raise, not abort the process on allocation:
    // the output and the padded input are the buffers the kernels allocate.
    let elems = |v: &[usize]| v.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).unwrap_or(usize::MAX);
    let padded: Vec<usize> = (0..3).map(|a| ins[a].saturating_add(plo[a]).saturating_add(phi[a])).collect();
    let item = dt.itemsize();
    crate::bindings::args::check_alloc(elems(&shape), item, op)?;
    crate::bindings::args::check_alloc(elems(&[n, cin.max(cout), padded[0], padded[1], padded[2]]), item, op)?;
    let has_b = b.is_some();
    // The kernels run on the CPU: other devices' tensors go there and the result comes back.
    let (g_node, shape_node, home_node) = (g.clone(), shape.clone(), home.clone());
    let run = move |ts: &[Tensor]| -> candle_core::Result<Tensor> {
        let cpu = Device::Cpu;
        let (x, w) = (ts[0].to_device(&cpu)?, ts[1].to_device(&cpu)?);
        let b = if has_b { Some(ts[2].to_device(&cpu)?) } else { None };
        let y = if transposed {
            conv_transpose_nd(&x, &w, b.as_ref(), g.clone(), c_arg)?
        } else {
            conv_nd(&x, &w, b.as_ref(), g.clone(), c_arg)?
        };
        y.reshape(shape.as_slice())?.to_device(&home)
    };
    let refs: Vec<&crate::autograd::Value> = ins_v.iter().collect();
    // The gathered-windows form for create_graph (plain convolutions).
    let composed: Option<crate::autograd::composed::Composed> = (!transposed).then(|| {
        let r = 3 - nd;
        let (st, lo, hi, dl, os) = (stride[r..].to_vec(), plo[r..].to_vec(), phi[r..].to_vec(), dil[r..].to_vec(), outs[r..].to_vec());
        let f: crate::autograd::composed::Composed = std::sync::Arc::new(move |t: &[crate::autograd::Value]| {
            let xp = crate::autograd::composed::pad_spatial(&t[0], &lo, &hi, 0.0)?;
            crate::autograd::composed::conv(&xp, &t[1], t.get(2), &st, &dl, groups, &os)
        });
        f
    });
    if !crate::autograd::ops::records(&refs) {
        let ts: Vec<Tensor> = ins_v.iter().map(|v| v.data.clone()).collect();
        let y = crate::bindings::errors::detach(py, op, || run(&ts).op(op))?;
        return Ok(PyTensor::wrap_dt(y, dt));
    }
    // In the graph: one fused node whose backward is the kernels' own (gradients only
    // for the inputs that need one).
    let needs = [ins_v[0].requires_grad(), ins_v[1].requires_grad(), ins_v.get(2).is_some_and(|b| b.requires_grad())];
    let (g, shape, home) = (g_node, shape_node, home_node);
    let five = if transposed { [g.n, c_arg, g.outs[0], g.outs[1], g.outs[2]] } else { [g.n, g.c, g.ins[0], g.ins[1], g.ins[2]] };
    // The fused node works in 5-d: its composed form takes the input in its own shape
    // and gives the result in the kernel's (N, Cout, D, H, W).
    let composed = composed.map(|f| {
        let xshape = candle_core::Shape::from(ins_v[0].data.dims().to_vec());
        let yshape = candle_core::Shape::from((g.n, cout, outs[0], outs[1], outs[2]));
        let g: crate::autograd::composed::Composed = std::sync::Arc::new(move |t: &[crate::autograd::Value]| {
            let mut args = t.to_vec();
            args[0] = crate::autograd::ops::reshape(&t[0], &xshape)?;
            crate::autograd::ops::reshape(&f(&args)?, &yshape)
        });
        g
    });
    let y = crate::bindings::errors::detach(py, op, || {
        use crate::autograd::{custom, ops};
        let run = || -> candle_core::Result<crate::autograd::Value> {
            let cpu = Device::Cpu;
            let on = ins_v.iter().map(|v| ops::contiguous(&ops::to_device(v, &cpu)?)).collect::<candle_core::Result<Vec<_>>>()?;
            let x5 = ops::contiguous(&ops::reshape(&on[0], &candle_core::Shape::from(five.to_vec()))?)?;
            let kernel = crate::layers::conv::conv_kernel(g.clone(), c_arg, transposed, needs);
            let kop = if has_b { custom::Op::three(kernel) } else { custom::Op::two(kernel) };
            let mut args = vec![&x5, &on[1]];
            args.extend(on.get(2));
            let y = custom::apply_with("ConvolutionBackward0", kop, &args, composed)?;
            ops::to_device(&ops::reshape(&y, &candle_core::Shape::from(shape.clone()))?, &home)
        };
        run().op(op)
    })?;
    Ok(PyTensor::wrap_vdt(y, dt))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_conv, m)?)?;
    Ok(())
}
