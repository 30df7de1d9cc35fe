"""Convolution and pooling layers against PyTorch-made fixtures (outputs, indices,
every gradient), the functional twins, the layers' Module surface, and bad input.

Fixtures come from tools/make_fixtures_conv.py; no torch here."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import FIXTURES, assert_close, cases, group, load

ATOL = RTOL = 1e-4
CASES = cases("conv_pool")


def _build(meta: dict) -> nn.Module:
    return getattr(nn, meta["layer"])(*meta["args"], **meta["kwargs"])


def test_fixtures_present() -> None:
    assert len(CASES) >= 60, f"expected the conv/pool fixtures in {FIXTURES}, found {len(CASES)}"


@pytest.mark.parametrize("name", CASES)
def test_layer_matches_torch(name: str) -> None:
    t, meta = load(name)
    fwd_kwargs = json.loads(cp.safetensors.load_metadata(FIXTURES / f"{name}.safetensors").get("forward_kwargs", "{}"))
    m = _build(meta)
    state = group(t, "state.")
    missing, unexpected = m.load_state_dict(state)
    assert not missing and not unexpected
    assert set(m.state_dict()) == set(state), f"{name}: state_dict keys {sorted(m.state_dict())} != torch's {sorted(state)}"
    for k, v in state.items():
        assert tuple(m.state_dict()[k].shape) == tuple(v.shape), f"{name}: {k} shape"
    x = t["input"].clone().requires_grad_(True)
    y = m(x, **fwd_kwargs)
    if "indices" in t:
        assert isinstance(y, tuple) and len(y) == 2, f"{name}: return_indices must give (output, indices)"
        y, idx = y
        assert idx.dtype == cp.int64
        np.testing.assert_array_equal(np.asarray(idx), np.asarray(t["indices"]), err_msg=f"{name}: indices")
    assert_close(y, t["output"], ATOL, RTOL, f"{name}: output")
    (y * t["loss_weight"]).sum().backward()
    assert x.grad is not None, f"{name}: no gradient reached the input"
    assert_close(x.grad, t["grad.input"], ATOL, RTOL, f"{name}: grad of input")
    grads = group(t, "grad.")
    params = dict(m.named_parameters())
    assert set(params) | {"input"} == set(grads), f"{name}: parameters {sorted(params)} vs torch grads {sorted(grads)}"
    for k, p in params.items():
        assert p.grad is not None, f"{name}: no gradient reached {k}"
        assert_close(p.grad, grads[k], ATOL, RTOL, f"{name}: grad of {k}")


@pytest.mark.parametrize("name", [c for c in CASES if c.startswith(("conv", "maxpool", "avgpool"))])
def test_float64_matches(name: str) -> None:
    """The same layers in float64 agree with the float32 reference (and stay float64)."""
    t, meta = load(name)
    if meta["kwargs"].get("padding_mode", "zeros") != "zeros" or "output_size" in json.dumps(meta):
        pytest.skip("covered in float32")
    kwargs = dict(meta["kwargs"], dtype=cp.float64) if meta["layer"].startswith("Conv") else meta["kwargs"]
    m = getattr(nn, meta["layer"])(*meta["args"], **kwargs)
    m.load_state_dict({k: v.double() for k, v in group(t, "state.").items()})
    y = m(t["input"].double())
    if isinstance(y, tuple):
        y = y[0]
    assert y.dtype == cp.float64
    assert_close(y, t["output"], ATOL, RTOL, f"{name}: float64 output")


# -- functional twins ---------------------------------------------------------------
def test_functional_conv_matches_layer() -> None:
    t, meta = load("conv2d_stride_pad_tuple")
    sd = group(t, "state.")
    y = F.conv2d(t["input"], sd["weight"], sd["bias"], stride=(2, 1), padding=(1, 2))
    assert_close(y, t["output"], ATOL, RTOL, "F.conv2d")
    t, _ = load("conv1d_same_dil")
    sd = group(t, "state.")
    assert_close(F.conv1d(t["input"], sd["weight"], sd["bias"], padding="same", dilation=2), t["output"], ATOL, RTOL, "F.conv1d same")
    t, _ = load("convt2d_stride_pad")
    sd = group(t, "state.")
    y = F.conv_transpose2d(t["input"], sd["weight"], sd["bias"], stride=2, padding=(1, 0), output_padding=(1, 0))
    assert_close(y, t["output"], ATOL, RTOL, "F.conv_transpose2d")
    t, _ = load("convt3d_basic")
    sd = group(t, "state.")
    assert_close(F.conv_transpose3d(t["input"], sd["weight"], sd["bias"], stride=2), t["output"], ATOL, RTOL, "F.conv_transpose3d")
    t, _ = load("conv3d_basic")
    sd = group(t, "state.")
    assert_close(F.conv3d(t["input"], sd["weight"], sd["bias"]), t["output"], ATOL, RTOL, "F.conv3d")
    t, _ = load("convt1d_stride_outpad")
    sd = group(t, "state.")
    y = F.conv_transpose1d(t["input"], sd["weight"], sd["bias"], stride=3, padding=1, output_padding=2)
    assert_close(y, t["output"], ATOL, RTOL, "F.conv_transpose1d")


def test_functional_pools_match_layers() -> None:
    t, _ = load("maxpool2d_ceil_idx")
    y, idx = F.max_pool2d(t["input"], 3, stride=2, ceil_mode=True, return_indices=True)
    assert_close(y, t["output"], ATOL, RTOL, "F.max_pool2d")
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(t["indices"]))
    t, _ = load("maxpool1d_basic")
    assert_close(F.max_pool1d(t["input"], 3), t["output"], ATOL, RTOL, "F.max_pool1d")
    t, _ = load("maxpool3d_basic")
    assert_close(F.max_pool3d(t["input"], 2), t["output"], ATOL, RTOL, "F.max_pool3d")
    t, _ = load("avgpool2d_divisor")
    assert_close(F.avg_pool2d(t["input"], (2, 3), stride=(1, 2), divisor_override=4), t["output"], ATOL, RTOL, "F.avg_pool2d")
    t, _ = load("avgpool1d_pad_exclude")
    assert_close(F.avg_pool1d(t["input"], 4, 2, 2, count_include_pad=False), t["output"], ATOL, RTOL, "F.avg_pool1d")
    t, _ = load("avgpool3d_pad_ceil")
    y = F.avg_pool3d(t["input"], 3, 2, 1, ceil_mode=True, count_include_pad=False)
    assert_close(y, t["output"], ATOL, RTOL, "F.avg_pool3d")
    t, _ = load("adaptive_avg2d")
    assert_close(F.adaptive_avg_pool2d(t["input"], (3, 4)), t["output"], ATOL, RTOL, "F.adaptive_avg_pool2d")
    t, _ = load("adaptive_avg1d")
    assert_close(F.adaptive_avg_pool1d(t["input"], 4), t["output"], ATOL, RTOL, "F.adaptive_avg_pool1d")
    t, _ = load("adaptive_max2d_idx")
    y, idx = F.adaptive_max_pool2d(t["input"], 4, return_indices=True)
    assert_close(y, t["output"], ATOL, RTOL, "F.adaptive_max_pool2d")
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(t["indices"]))


def test_hand_computed_values() -> None:
    x = cp.arange(16, dtype=cp.float32).reshape(1, 1, 4, 4)
    assert F.max_pool2d(x, 2).tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert F.avg_pool2d(x, 2).tolist() == [[[[2.5, 4.5], [10.5, 12.5]]]]
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    assert idx.tolist() == [[[[5, 7], [13, 15]]]]
    w = cp.ones(1, 1, 2, 2)
    assert F.conv2d(x, w).tolist()[0][0][0] == [10.0, 14.0, 18.0]
    # Transposed convolution of a single 1 reproduces the kernel.
    one = cp.zeros(1, 1, 1, 1) + 1.0
    k = cp.arange(6, dtype=cp.float32).reshape(1, 1, 2, 3)
    assert F.conv_transpose2d(one, k).tolist() == k.tolist()


def test_maxpool_nan_propagates() -> None:
    x = cp.tensor([[[1.0, float("nan"), 3.0, 0.5]]])
    y = F.max_pool1d(x, 2).tolist()[0][0]
    assert np.isnan(y[0]) and y[1] == 3.0


def test_max_pool_gradient_goes_to_argmax_once_per_window() -> None:
    x = cp.tensor([[[1.0, 5.0, 2.0, 0.0, 4.0]]], requires_grad=True)
    F.max_pool1d(x, 3, stride=1).sum().backward()  # windows pick 5, 5, 4
    assert x.grad.tolist() == [[[0.0, 2.0, 0.0, 0.0, 1.0]]]


# -- Module surface -----------------------------------------------------------------------
def test_weight_shapes_and_init_bounds() -> None:
    cp.manual_seed(0)
    c = nn.Conv2d(4, 6, (3, 2), groups=2)
    assert tuple(c.weight.shape) == (6, 2, 3, 2) and tuple(c.bias.shape) == (6,)
    bound = 1 / np.sqrt(2 * 3 * 2)  # kaiming_uniform(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    w = np.asarray(c.weight.detach())
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert np.abs(np.asarray(c.bias.detach())).max() <= bound
    t = nn.ConvTranspose3d(4, 6, 2, groups=2, bias=False)
    assert tuple(t.weight.shape) == (4, 3, 2, 2, 2) and t.bias is None
    assert list(t.state_dict()) == ["weight"]
    assert tuple(nn.Conv1d(3, 5, 4, dtype=cp.float64).weight.shape) == (5, 3, 4)
    assert nn.Conv1d(3, 5, 4, dtype=cp.float64).weight.dtype == cp.float64


def test_extra_repr_matches_torch() -> None:
    assert repr(nn.Conv2d(3, 8, 3)) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(nn.Conv1d(4, 4, 3, padding="same", groups=2, bias=False, padding_mode="reflect")) == (
        "Conv1d(4, 4, kernel_size=(3,), stride=(1,), padding=same, groups=2, bias=False, padding_mode=reflect)"
    )
    assert repr(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1, dilation=2)) == (
        "ConvTranspose2d(2, 3, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(2, 2), output_padding=(1, 1))"
    )
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.AvgPool1d(3)) == "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"
    assert repr(nn.AvgPool2d(3, 2)) == "AvgPool2d(kernel_size=3, stride=2, padding=0)"
    assert repr(nn.AdaptiveAvgPool2d((1, 1))) == "AdaptiveAvgPool2d(output_size=(1, 1))"
    assert repr(nn.AdaptiveMaxPool2d(3)) == "AdaptiveMaxPool2d(output_size=3)"


def test_small_cnn_trains() -> None:
    cp.manual_seed(1)
    net = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 2, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )
    x = cp.randn(4, 1, 8, 8)
    target = cp.randn(4, 2)
    losses = []
    for _ in range(30):
        net.zero_grad()
        loss = ((net(x) - target) ** 2).mean()
        loss.backward()
        losses.append(loss.item())
        with cp.no_grad():
            for p in net.parameters():
                p -= 0.1 * p.grad
    assert losses[-1] < 0.7 * losses[0], losses


# -- bad input ---------------------------------------------------------------------------------
def test_wrong_channel_count_names_layer_and_shapes() -> None:
    with pytest.raises(ValueError, match=r"\[Conv2d\] expected input with 3 channels \(N, 3, H, W\), got \[1, 4, 8, 8\]"):
        nn.Conv2d(3, 8, 3)(cp.zeros(1, 4, 8, 8))
    with pytest.raises(ValueError, match=r"\[ConvTranspose1d\].*4 channels.*\[2, 3, 5\]"):
        nn.ConvTranspose1d(4, 2, 3)(cp.zeros(2, 3, 5))
    with pytest.raises(ValueError, match=r"conv2d:.*4 channels.*\[1, 3, 5, 5\]"):
        F.conv2d(cp.zeros(1, 3, 5, 5), cp.zeros(2, 2, 3, 3), groups=2)


def test_wrong_rank() -> None:
    with pytest.raises(ValueError, match=r"\[Conv2d\] expected a 3-d \(C, H, W\) or 4-d \(N, C, H, W\) input, got \[3, 8\]"):
        nn.Conv2d(3, 8, 3)(cp.zeros(3, 8))
    with pytest.raises(ValueError, match=r"\[MaxPool3d\].*got \[2, 3\]"):
        nn.MaxPool3d(2)(cp.zeros(2, 3))
    with pytest.raises(ValueError, match=r"conv1d:.*3-d weight"):
        F.conv1d(cp.zeros(1, 2, 5), cp.zeros(2, 2))


def test_kernel_larger_than_padded_input() -> None:
    with pytest.raises(ValueError, match=r"\[Conv2d\].*larger than the padded input.*\[1, 3, 2, 2\]"):
        nn.Conv2d(3, 2, 5, padding=1)(cp.zeros(1, 3, 2, 2))
    with pytest.raises(ValueError, match=r"\[MaxPool2d\].*larger than the padded input"):
        nn.MaxPool2d(4)(cp.zeros(1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"\[AvgPool1d\].*larger than the padded input"):
        nn.AvgPool1d(5)(cp.zeros(1, 1, 3))


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.Conv2d(0, 2, 3),
        lambda: nn.Conv2d(2, -1, 3),
        lambda: nn.Conv2d(2, 2, 0),
        lambda: nn.Conv1d(2, 2, 3, stride=0),
        lambda: nn.Conv1d(3, 2, 3, groups=2),
        lambda: nn.Conv1d(4, 3, 3, groups=2),
        lambda: nn.Conv2d(2, 2, 3, padding="same", stride=2),
        lambda: nn.Conv2d(2, 2, 3, padding="full"),
        lambda: nn.Conv2d(2, 2, 3, padding_mode="mirror"),
        lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"),
        lambda: nn.Conv2d(2, 2, (3, 3, 3)),
        lambda: nn.MaxPool2d(0),
        lambda: nn.MaxPool2d(2, stride=-1),
        lambda: nn.AvgPool2d(2, divisor_override=0),
        lambda: nn.AdaptiveAvgPool2d(0),
    ],
)
def test_bad_construction(make) -> None:
    with pytest.raises(ValueError, match=r"^\[(Conv|ConvTranspose|MaxPool|AvgPool|AdaptiveAvgPool)\dd\] "):
        make()


def test_bad_pool_and_transposed_params() -> None:
    with pytest.raises(ValueError, match=r"\[MaxPool2d\].*pad should be at most half"):
        nn.MaxPool2d(2, padding=2)(cp.zeros(1, 1, 8, 8))
    with pytest.raises(ValueError, match=r"\[ConvTranspose2d\].*output padding must be smaller"):
        nn.ConvTranspose2d(2, 2, 3, stride=1, output_padding=1)(cp.zeros(1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"\[ConvTranspose2d\] requested an output size"):
        nn.ConvTranspose2d(2, 2, 3, stride=2)(cp.zeros(1, 2, 4, 4), output_size=(20, 20))


def test_dtype_errors() -> None:
    with pytest.raises(TypeError, match="conv2d"):
        F.conv2d(cp.zeros(1, 1, 3, 3, dtype=cp.int64), cp.zeros(1, 1, 2, 2, dtype=cp.int64))
    with pytest.raises(TypeError, match="conv2d"):
        F.conv2d(cp.zeros(1, 1, 3, 3, dtype=cp.float64), cp.zeros(1, 1, 2, 2))
    with pytest.raises(cp.DTypeError, match="max_pool2d"):
        F.max_pool2d(cp.zeros(1, 1, 4, 4, dtype=cp.int64), 2)
    with pytest.raises(cp.DTypeError, match="avg_pool1d"):
        F.avg_pool1d(cp.zeros(1, 1, 4, dtype=cp.int32), 2)
    # Half types pool as in PyTorch (computed in float32, rounded back).
    half = F.avg_pool1d(cp.tensor([[[1.0, 2.0, 3.0, 5.0]]], dtype=cp.float16), 2)
    assert half.dtype == cp.float16 and half.tolist() == [[[1.5, 4.0]]]
    with pytest.raises(TypeError, match=r"\[Conv1d\]"):
        nn.Conv1d(1, 1, 2)([[1.0, 2.0]])


def test_no_grad_gives_detached_output() -> None:
    c = nn.Conv1d(2, 2, 3)
    with cp.no_grad():
        y = c(cp.randn(1, 2, 5))
    assert not y.requires_grad


# -- batched GEMM kernels against a NumPy reference ---------------------------------------------
# conv.rs gathers a whole chunk of samples into one column matrix, with a span fast path
# for unit x/y strides and "same"-width rows; pooling.rs walks arithmetic windows. These
# cases hit both paths and their edges (padding wider than the kernel's reach, dilation,
# groups, odd strides, 1-d/3-d) in float64, against direct loops over kernel taps.
def _np_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, s: tuple, p: tuple, d: tuple, groups: int) -> np.ndarray:
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh = (h + 2 * p[0] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (kw - 1) - 1) // s[1] + 1
    y = np.zeros((n, co, oh, ow)) + b[None, :, None, None]
    og = co // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    i * d[0] : i * d[0] + s[0] * (oh - 1) + 1 : s[0],
                    j * d[1] : j * d[1] + s[1] * (ow - 1) + 1 : s[1],
                ]
                y[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og : (g + 1) * og, :, i, j])
    return y


CONV_GEOMS = [  # (N, C, H, W, Cout, k, stride, padding, dilation, groups)
    (5, 3, 7, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1),  # span path, "same"
    (3, 2, 5, 5, 3, (3, 3), (1, 1), (2, 2), (1, 1), 1),  # span path, padding beyond the kernel reach (wider rows)
    (2, 4, 6, 8, 6, (3, 2), (1, 1), (0, 0), (1, 1), 2),  # no padding, groups
    (2, 2, 9, 9, 2, (3, 3), (2, 2), (1, 1), (1, 1), 1),  # strided: row path
    (2, 3, 8, 7, 3, (3, 3), (1, 1), (2, 2), (2, 2), 3),  # dilated depthwise, "same"
    (3, 1, 4, 4, 2, (5, 5), (1, 1), (2, 2), (1, 1), 1),  # kernel as wide as the padded input
    (2, 2, 6, 5, 2, (1, 3), (1, 2), (0, 1), (1, 1), 1),  # x-stride only
    (1, 2, 3, 3, 2, (3, 3), (1, 1), (4, 4), (1, 1), 1),  # taps that see only padding
    (2, 2, 3, 2, 2, (5, 5), (1, 1), (2, 2), (1, 1), 1),  # span path, x-taps beyond the row
    (3, 4, 5, 5, 2, (1, 1), (1, 1), (0, 0), (1, 1), 1),  # 1x1
]


@pytest.mark.parametrize("geom", CONV_GEOMS)
def test_conv2d_matches_numpy_reference(geom: tuple) -> None:
    n, c, h, wd, co, k, s, p, d, groups = geom
    rng = np.random.default_rng(sum(geom[:5]))
    x = rng.standard_normal((n, c, h, wd))
    w = rng.standard_normal((co, c // groups, *k))
    b = rng.standard_normal(co)
    xt = cp.from_numpy(x).requires_grad_(True)
    wt, bt = cp.from_numpy(w).requires_grad_(True), cp.from_numpy(b).requires_grad_(True)
    y = F.conv2d(xt, wt, bt, stride=s, padding=p, dilation=d, groups=groups)
    ref = _np_conv2d(x, w, b, s, p, d, groups)
    np.testing.assert_allclose(np.asarray(y.detach()), ref, atol=1e-10, rtol=1e-10)
    gy = rng.standard_normal(ref.shape)
    (y * cp.from_numpy(gy)).sum().backward()
    # Gradients from the reference's linearity: d<y, gy>/dx by central differences on
    # random directions would be slow; the adjoint identities are exact instead.
    dx, dw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    lin = lambda xx, ww: float((_np_conv2d(xx, ww, np.zeros(co), s, p, d, groups) * gy).sum())  # noqa: E731
    np.testing.assert_allclose(float((np.asarray(xt.grad) * dx).sum()), lin(dx, w), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(float((np.asarray(wt.grad) * dw).sum()), lin(x, dw), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(bt.grad), gy.sum(axis=(0, 2, 3)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("geom", CONV_GEOMS)
def test_conv_transpose_is_the_adjoint(geom: tuple) -> None:
    """<conv(x), y> == <x, conv_transpose(y)> for the same weight, geometry by geometry."""
    n, c, h, wd, co, k, s, p, d, groups = geom
    rng = np.random.default_rng(7 + sum(geom[:5]))
    x = cp.from_numpy(rng.standard_normal((n, c, h, wd)))
    w = cp.from_numpy(rng.standard_normal((co, c // groups, *k)))
    y = F.conv2d(x, w, stride=s, padding=p, dilation=d, groups=groups)
    g = cp.from_numpy(rng.standard_normal(tuple(y.shape)))
    xt = F.conv_transpose2d(
        g,
        w,
        stride=s,
        padding=p,
        dilation=d,
        groups=groups,
        output_padding=tuple((size + 2 * pp - dd * (kk - 1) - 1) % ss for size, pp, dd, kk, ss in zip((h, wd), p, d, k, s)),
    )
    assert tuple(xt.shape) == (n, c, h, wd)
    np.testing.assert_allclose(float((y * g).sum()), float((x * xt).sum()), rtol=1e-9)


def test_conv_1d_3d_match_2d_embedding() -> None:
    """1-d and 3-d convolutions equal the 2-d kernel on the same data with size-1 axes."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 2, 11)), rng.standard_normal((4, 2, 3))
    y1 = F.conv1d(cp.from_numpy(x), cp.from_numpy(w), padding=2, dilation=2)
    y2 = F.conv2d(cp.from_numpy(x[:, :, None]), cp.from_numpy(w[:, :, None]), padding=(0, 2), dilation=(1, 2))
    np.testing.assert_allclose(np.asarray(y1), np.asarray(y2)[:, :, 0], atol=1e-12)
    x3, w3 = rng.standard_normal((2, 2, 5, 4, 6)), rng.standard_normal((3, 2, 3, 3, 3))
    y3 = np.asarray(F.conv3d(cp.from_numpy(x3), cp.from_numpy(w3), padding=1))
    # Each output depth slice is the sum over depth taps of 2-d convolutions.
    xp = np.pad(x3, ((0, 0), (0, 0), (1, 1), (0, 0), (0, 0)))
    ref = np.stack(
        [sum(_np_conv2d(xp[:, :, z + kz], w3[:, :, kz], np.zeros(3), (1, 1), (1, 1), (1, 1), 1) for kz in range(3)) for z in range(5)],
        axis=2,
    )
    np.testing.assert_allclose(y3, ref, atol=1e-10)


def test_conv_batch_chunks_agree_with_single_samples() -> None:
    """A batch whose columns exceed one chunk (32 channels x 3x3 taps x 32x32 positions
    per sample: 3 samples per chunk, so chunks of 3, 3 and 1) gives each sample what it
    gives alone; the weight and bias gradients sum over the chunks."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 32, 32, 32)).astype(np.float32)
    conv = nn.Conv2d(32, 4, 3, padding=1)
    xt = cp.from_numpy(x).requires_grad_(True)
    y = conv(xt)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    (y * cp.from_numpy(g)).sum().backward()
    gw_all, gb_all, gx_all = (np.asarray(t.grad).copy() for t in (conv.weight, conv.bias, xt))
    gw_sum, gb_sum = np.zeros_like(gw_all), np.zeros_like(gb_all)
    for i in range(7):
        conv.zero_grad()
        xi = cp.from_numpy(x[i : i + 1]).requires_grad_(True)
        yi = conv(xi)
        np.testing.assert_allclose(np.asarray(y.detach())[i], np.asarray(yi.detach())[0], atol=1e-4, rtol=1e-4)
        (yi * cp.from_numpy(g[i : i + 1])).sum().backward()
        gw_sum += np.asarray(conv.weight.grad)
        gb_sum += np.asarray(conv.bias.grad)
        np.testing.assert_allclose(gx_all[i], np.asarray(xi.grad)[0], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(gw_all, gw_sum, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(gb_all, gb_sum, rtol=1e-4, atol=1e-3)


def _np_max_pool2d(x: np.ndarray, k: tuple, s: tuple, p: tuple, d: tuple, ceil: bool) -> tuple:
    n, c, h, w = x.shape

    def out(size: int, a: int) -> int:
        num = size + 2 * p[a] - d[a] * (k[a] - 1) - 1 + (s[a] - 1 if ceil else 0)
        o = num // s[a] + 1
        if ceil and (o - 1) * s[a] >= size + p[a]:
            o -= 1
        return o

    oh, ow = out(h, 0), out(w, 1)
    y = np.full((n, c, oh, ow), -np.inf)
    idx = np.full((n, c, oh, ow), -1, dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
                    if 0 <= r < h and 0 <= q < w:
                        # PyTorch: the first maximum, or the last NaN; the first element to start.
                        v = x[:, :, r, q]
                        better = (v > y[:, :, i, j]) | np.isnan(v) | (idx[:, :, i, j] < 0)
                        y[:, :, i, j] = np.where(better, v, y[:, :, i, j])
                        idx[:, :, i, j] = np.where(better, r * w + q, idx[:, :, i, j])
    return y, idx


@pytest.mark.parametrize(
    "k,s,p,d,ceil",
    [
        ((2, 2), (2, 2), (0, 0), (1, 1), False),
        ((3, 3), (2, 2), (1, 1), (1, 1), True),
        ((3, 2), (1, 2), (1, 0), (2, 1), False),
        ((2, 3), (3, 2), (1, 1), (3, 2), True),
    ],
)
def test_max_pool2d_matches_numpy_reference(k: tuple, s: tuple, p: tuple, d: tuple, ceil: bool) -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 9, 10))
    ref, ridx = _np_max_pool2d(x, k, s, p, d, ceil)
    xt = cp.from_numpy(x).requires_grad_(True)
    y, idx = F.max_pool2d(xt, k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(np.asarray(y.detach()), ref)
    np.testing.assert_array_equal(np.asarray(idx), ridx)
    gy = rng.standard_normal(ref.shape)
    (y * cp.from_numpy(gy)).sum().backward()
    gx = np.zeros(x.shape).reshape(2, 3, -1)
    for a in range(2):
        for b in range(3):
            np.add.at(gx[a, b], ridx[a, b].ravel(), gy[a, b].ravel())
    np.testing.assert_allclose(np.asarray(xt.grad), gx.reshape(x.shape), atol=1e-12)
    # Without grad the kernel takes the no-argmax path: same values.
    with cp.no_grad():
        np.testing.assert_array_equal(np.asarray(F.max_pool2d(cp.from_numpy(x), k, s, p, d, ceil_mode=ceil)), ref)


def test_max_pool_backward_twice_and_all_negative_infinity() -> None:
    x = cp.tensor([[[[-np.inf, -np.inf], [-np.inf, -np.inf]]]], requires_grad=True)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    assert idx.tolist() == [[[[0]]]] and y.tolist() == [[[[-np.inf]]]]
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert x.grad.tolist() == [[[[2.0, 0.0], [0.0, 0.0]]]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,s,p", [((2, 2), (2, 2), (0, 0)), ((2, 2), (1, 1), (0, 0)), ((3, 3), (2, 2), (1, 1))])
def test_max_pool_ties_nan_and_infinities_pick_like_torch(dtype: Any, k: tuple, s: tuple, p: tuple) -> None:
    """Ties go to the first maximum, NaN wins (the last NaN), all -inf gives the first
    element: on the 2x2 tree path and the general one, float32 and float64."""
    rng = np.random.default_rng(21)
    x = rng.integers(-2, 3, (3, 2, 8, 6)).astype(dtype)  # many ties
    x[rng.random(x.shape) < 0.08] = np.nan
    x[rng.random(x.shape) < 0.08] = -np.inf
    x[0, 0, :2, :2] = -np.inf
    ref, ridx = _np_max_pool2d(x, k, s, p, (1, 1), False)
    y, idx = F.max_pool2d(cp.from_numpy(x), k, s, p, return_indices=True)
    np.testing.assert_array_equal(np.asarray(idx), ridx)
    np.testing.assert_array_equal(np.asarray(y), ref)
    xt = cp.from_numpy(x).requires_grad_(True)
    F.max_pool2d(xt, k, s, p).sum().backward()
    gx = np.zeros(x.shape).reshape(3, 2, -1)
    for a in range(3):
        for b in range(2):
            np.add.at(gx[a, b], ridx[a, b].ravel(), 1.0)
    np.testing.assert_array_equal(np.asarray(xt.grad), gx.reshape(x.shape))


def test_conv_backward_twice_with_kept_columns() -> None:
    """The forward keeps its columns for the weight gradient and the bias gradient is
    summed by that kernel: both must follow each backward's upstream gradient."""
    cp.manual_seed(4)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    x = cp.randn(4, 2, 5, 5)
    y = conv(x)
    grads = []
    for seed in (1, 2):
        g = cp.from_numpy(np.random.default_rng(seed).standard_normal(tuple(y.shape)).astype(np.float32))
        conv.zero_grad()
        (y * g).sum().backward(retain_graph=True)
        grads.append((np.asarray(conv.weight.grad).copy(), np.asarray(conv.bias.grad).copy(), g))
    for gw, gb, g in grads:
        np.testing.assert_allclose(gb, np.asarray(g).sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-5)
        ref = conv.weight.detach().clone().requires_grad_(True)
        (F.conv2d(x, ref, None, padding=1) * g).sum().backward()  # a fresh forward and backward
        np.testing.assert_allclose(gw, np.asarray(ref.grad), rtol=1e-5, atol=1e-5)
    assert not np.allclose(grads[0][1], grads[1][1])


def test_max_pool_2x2_over_many_planes() -> None:
    """MaxPool2d(2) over planes stacked as one tall image, in several blocks of rows."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((4, 8, 64, 64)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    ref, ridx = _np_max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False)
    y, idx = F.max_pool2d(cp.from_numpy(x), 2, return_indices=True)
    np.testing.assert_array_equal(np.asarray(idx), ridx)
    np.testing.assert_array_equal(np.asarray(y), ref.astype(np.float32))
    xt = cp.from_numpy(x).requires_grad_(True)
    with cp.no_grad():
        np.testing.assert_array_equal(np.asarray(F.max_pool2d(xt, 2)), ref.astype(np.float32))
    F.max_pool2d(xt, 2).sum().backward()
    assert float(np.asarray(xt.grad).sum()) == ref.size


def test_global_average_pool_is_the_plane_mean() -> None:
    """Windows of whole consecutive rows (global pooling) sum as one run, both ways."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 5, 7, 6))
    xt = cp.from_numpy(x).requires_grad_(True)
    y = F.adaptive_avg_pool2d(xt, 1)
    np.testing.assert_allclose(np.asarray(y.detach()), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal((3, 5, 1, 1))
    (y * cp.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(np.asarray(xt.grad), np.broadcast_to(g / 42, x.shape), rtol=1e-12, atol=1e-12)
    # Rows 2..5 of a 7-row plane: one run too, with padding counted as PyTorch counts it.
    y2 = F.avg_pool2d(cp.from_numpy(x), (4, 6), stride=(3, 6))
    np.testing.assert_allclose(np.asarray(y2)[:, :, 1, 0], x[:, :, 3:7, :].mean(axis=(2, 3)), rtol=1e-12)
    # float32, large enough for the parallel plane sums and fills.
    x32 = rng.standard_normal((8, 64, 14, 14)).astype(np.float32)
    xt32 = cp.from_numpy(x32).requires_grad_(True)
    y32 = F.adaptive_avg_pool2d(xt32, 1)
    np.testing.assert_allclose(y32.detach().numpy(), x32.astype(np.float64).mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    g32 = rng.standard_normal((8, 64, 1, 1)).astype(np.float32)
    y32.backward(cp.from_numpy(g32))
    np.testing.assert_allclose(xt32.grad.numpy(), np.broadcast_to(g32 / 196, x32.shape), rtol=1e-6)


@pytest.mark.parametrize(
    "kind",
    ["implicit", "direct", "depthwise", "transposed", "channels_last", "channels_last_stride2", "transposed_stride2"],
)
def test_nan_inf_and_empty_follow_the_float64_path(kind: str) -> None:
    """The float32 fast paths (implicit GEMM for output rows of 16+, the in-place
    stride-1 forward for rows a multiple of 16 wide, the depthwise loops, the stride-1
    transposed convolution as a flipped forward, the channels-last weight gradient and
    strided adjoint for 16+ channels) put NaN and inf where the float64 path (im2col +
    GEMM) does, forward and backward; an empty batch gives an empty result and zero
    weight gradients."""
    rng = np.random.default_rng(3)
    groups, cin, cout = {
        "depthwise": (8, 8, 8),
        "direct": (1, 8, 13),
        "channels_last": (1, 17, 12),
        "channels_last_stride2": (1, 20, 24),
        "transposed_stride2": (1, 12, 20),
    }.get(kind, (1, 4, 6))
    stride = 2 if kind.endswith("stride2") else 1
    width = 32 if kind == "direct" else 20
    x = rng.standard_normal((2, cin, 20, width)).astype(np.float32)
    x[0, 0, 5, 7] = np.nan
    x[1, 1 % cin, 10, 3] = np.inf
    x[1, 2 % cin, 0, 0] = -np.inf
    transposed = kind.startswith("transposed")
    w_shape = (cin, cout // groups, 3, 3) if transposed else (cout, cin // groups, 3, 3)
    w = (rng.standard_normal(w_shape) * 0.3).astype(np.float32)

    def run(dtype: Any, xa: np.ndarray) -> tuple:
        xt = cp.tensor(xa, dtype=dtype).requires_grad_()
        wt = cp.tensor(w, dtype=dtype).requires_grad_()
        if transposed:
            y = F.conv_transpose2d(xt, wt, stride=stride, padding=1)
        else:
            y = F.conv2d(xt, wt, stride=stride, padding=1, groups=groups)
        y.backward(cp.ones_like(y))
        return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()

    for got, want in zip(run(cp.float32, x), run(cp.float64, x)):
        assert got.shape == want.shape
        assert (np.isnan(got) == np.isnan(want)).all()
        assert (np.isposinf(got) == np.isposinf(want)).all() and (np.isneginf(got) == np.isneginf(want)).all()
        fin = np.isfinite(want)
        assert fin.any()
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4)
    y, gx, gw = run(cp.float32, x[:0])
    assert y.shape[0] == 0 and gx.shape == (0, cin, 20, width)
    assert (gw == 0).all()


@pytest.mark.parametrize(
    "case",
    [
        # conv_transpose1d whose padding equals the kernel's reach: the input gradient's
        # implicit GEMM has runs of output positions that start past the input row's end.
        ("convt1d", (5, 64, 43), (64, 24, 3), {"stride": 1, "padding": 4, "dilation": 2}),
        # grouped, dilated conv2d: the stride-1 input gradient (a flipped-kernel forward
        # with padding 5 on a 14-wide row) meets the same runs.
        ("conv2d", (1, 32, 16, 18), (80, 16, 3, 4), {"padding": (0, 1), "dilation": (1, 2), "groups": 2}),
    ],
)
def test_runs_past_the_row_end_follow_the_float64_path(case: tuple) -> None:
    """Found by a randomized sweep (float32 against float64 over random geometries):
    these two backward passes raised "range start index 40 out of range" from the
    implicit GEMM's column packing. Now every output and gradient equals the float64
    (im2col) path's."""
    kind, xs, ws, kw = case
    rng = np.random.default_rng(8)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.2).astype(np.float32)
    op = F.conv_transpose1d if kind == "convt1d" else F.conv2d
    got = []
    for dtype in (cp.float32, cp.float64):
        xt = cp.tensor(x, dtype=dtype).requires_grad_()
        wt = cp.tensor(w, dtype=dtype).requires_grad_()
        y = op(xt, wt, **kw)
        y.backward(cp.ones_like(y))
        got.append([t.numpy().astype(np.float64) for t in (y.detach(), xt.grad, wt.grad)])
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def _random_conv(rng: np.random.Generator) -> tuple:
    """A random valid convolution: dims, transposed, groups, channels (many of 16+, for
    the channels-last paths), kernel, stride, padding, dilation, output_padding, size."""
    dims = int(rng.integers(1, 4))
    transposed = bool(rng.random() < 0.3)
    groups = int(rng.choice([1, 1, 1, 2]))
    cin = int(rng.choice([16, 17, 20, 32, 33, 48, 64])) * groups
    cout = int(rng.choice([1, 3, 8, 13, 16, 24, 40])) * groups
    k = [int(rng.integers(1, 6)) for _ in range(dims)]
    stride = [int(rng.choice([1, 1, 2, 3])) for _ in range(dims)]
    dil = [int(rng.choice([1, 1, 2])) for _ in range(dims)]
    pad = [int(rng.integers(0, (k[i] - 1) * dil[i] + 1)) for i in range(dims)]
    size = [int(rng.integers(*{1: (8, 61), 2: (5, 21), 3: (3, 9)}[dims])) for _ in range(dims)]
    outpad = [int(rng.integers(0, max(1, min(stride[i], dil[i])))) for i in range(dims)]
    n = int(rng.choice([1, 2, 3, 5]))
    return dims, transposed, groups, cin, cout, k, stride, pad, dil, size, outpad, n


def _float32_follows_float64(op: Any, xwb: tuple, g: np.ndarray, what: str, **kw: Any) -> None:
    """`op(x, w, b, **kw)` in float32 gives the float64 path's output and its input,
    weight and bias gradients under the upstream gradient `g`, each to 1e-4 of its
    largest magnitude (the fast paths are float32 only; float64 takes im2col)."""
    got = []
    for dtype in (cp.float32, cp.float64):
        xt, wt, bt = (cp.tensor(v, dtype=dtype).requires_grad_() for v in xwb)
        y = op(xt, wt, bt, **kw)
        assert list(y.shape) == list(g.shape), (what, y.shape)
        y.backward(cp.tensor(g, dtype=dtype))
        got.append([t.numpy().astype(np.float64) for t in (y.detach(), xt.grad, wt.grad, bt.grad)])
    for name, a, want in zip(("output", "input grad", "weight grad", "bias grad"), *got):
        np.testing.assert_allclose(a, want, rtol=0, atol=1e-4 * np.abs(want).max(), err_msg=f"{name}: {what}")


def test_random_geometries_follow_the_float64_path() -> None:
    """A sweep over 120 random geometries (1-3 d, plain and transposed, groups, strides,
    dilations, padding up to the kernel's reach, channel counts around 16): every float32
    fast path (direct, implicit GEMM, channels-last weight gradient and strided adjoint,
    im2col) gives the float64 (im2col) path's output and gradients. Such a sweep found the
    implicit GEMM's runs past the row end."""
    rng = np.random.default_rng(2024)
    ran = 0
    for _ in range(120):
        dims, transposed, groups, cin, cout, k, stride, pad, dil, size, outpad, n = _random_conv(rng)
        out_sizes = [
            (size[i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + outpad[i] + 1
            if transposed
            else (size[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // stride[i] + 1
            for i in range(dims)
        ]
        if min(out_sizes) < 1:
            continue
        x = rng.standard_normal((n, cin, *size)).astype(np.float32)
        if transposed:
            w = (rng.standard_normal((cin, cout // groups, *k)) * 0.2).astype(np.float32)
            op = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
            kw = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups, "output_padding": outpad}
        else:
            w = (rng.standard_normal((cout, cin // groups, *k)) * 0.2).astype(np.float32)
            op = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
            kw = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups}
        b = rng.standard_normal(cout).astype(np.float32)
        g = rng.standard_normal((n, cout, *out_sizes)).astype(np.float32)
        what = f"{dims}-d transposed={transposed} {kw} n={n} cin={cin} cout={cout} size={size}"
        _float32_follows_float64(op, (x, w, b), g, what, **kw)
        ran += 1
    assert ran >= 100, f"only {ran} of the random geometries were valid"


def test_winograd_geometries_follow_the_float64_path() -> None:
    """3x3 stride-1 convolutions with 16+ channels each side run as Winograd F(4x4, 3x3)
    in float32 (forward and input gradient; transposed ones too): 40 random ones (planes
    from 4 to 21, partial tiles, pads 0 to 2, channel counts off the 16s, 1 to 5 samples)
    give the float64 (im2col) path's output and gradients."""
    rng = np.random.default_rng(44)
    for _ in range(40):
        transposed = bool(rng.random() < 0.3)
        cin, cout = (int(rng.choice([16, 17, 24, 32, 33, 48, 64])) for _ in range(2))
        pad = int(rng.integers(0, 3))
        size = [int(rng.integers(4, 22)) for _ in range(2)]
        n = int(rng.choice([1, 2, 3, 5]))
        out_sizes = [s + 2 - 2 * pad if transposed else s + 2 * pad - 2 for s in size]
        if min(out_sizes) < 4:
            continue
        x = rng.standard_normal((n, cin, *size)).astype(np.float32)
        w = (rng.standard_normal((cin, cout, 3, 3) if transposed else (cout, cin, 3, 3)) * 0.1).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        g = rng.standard_normal((n, cout, *out_sizes)).astype(np.float32)
        op = F.conv_transpose2d if transposed else F.conv2d
        _float32_follows_float64(op, (x, w, b), g, f"transposed={transposed} pad={pad} n={n} {cin}->{cout} {size}", padding=pad)


@pytest.mark.parametrize("dims", [2, 1])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_winograd_shapes_keep_the_direct_sums_infinities(dims: int, bad: float) -> None:
    """Winograd's transforms subtract, so an infinite input would turn some infinite
    outputs into NaN; such outputs are recomputed directly: the float32 result equals the
    float64 path's (inf where the sum is one-signed, NaN where it mixes), value by value,
    for F(4x4, 3x3) (3x3 on 8x8) and the 1-D F(4, 5) (5 taps on 40), output and input
    gradient (the adjoint takes the same kernel)."""
    rng = np.random.default_rng(7 if dims == 2 else 8)
    conv, size, k, pad = (F.conv2d, (8, 8), (3, 3), 1) if dims == 2 else (F.conv1d, (40,), (5,), 2)
    x = rng.standard_normal((2, 16, *size)).astype(np.float32)
    x[(1, 3, *[s // 2 for s in size])] = bad
    w = np.abs(rng.standard_normal((16, 16, *k))).astype(np.float32)
    w[0] *= -1
    xg = cp.tensor(x).requires_grad_()
    y32 = conv(xg, cp.tensor(w), padding=pad)
    y64 = conv(cp.tensor(x, dtype=cp.float64), cp.tensor(w, dtype=cp.float64), padding=pad).numpy()
    assert not np.isfinite(y64).all()
    np.testing.assert_allclose(y32.detach().numpy(), y64, rtol=1e-4, atol=1e-4)
    # The input gradient with an infinite upstream gradient: the same through the adjoint.
    gy = np.ones(y64.shape, dtype=np.float32)
    gy[(0, 2, *[1 for _ in size])] = bad
    y32.backward(cp.tensor(gy))
    xg64 = cp.tensor(x, dtype=cp.float64).requires_grad_()
    conv(xg64, cp.tensor(w, dtype=cp.float64), padding=pad).backward(cp.tensor(gy, dtype=cp.float64))
    np.testing.assert_allclose(xg.grad.numpy(), xg64.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_winograd_1d_geometries_follow_the_float64_path() -> None:
    """1-D stride-1 convolutions with 2 to 7 taps and 16+ channels each side run as
    Winograd F(9 - r, r) in float32 (forward and input gradient; transposed ones too):
    40 random ones (every tap count, lengths from one tile to several blocks, pads from 0
    to past the window, channel counts off the vectors, 1 to 3 samples) give the float64
    (im2col) path's output and gradients."""
    rng = np.random.default_rng(45)
    ran = 0
    for _ in range(40):
        transposed = bool(rng.random() < 0.3)
        cin, cout = (int(rng.choice([16, 17, 24, 33, 64])) for _ in range(2))
        k = int(rng.integers(2, 8))
        pad = int(rng.integers(0, k + 2))
        size = int(rng.choice([int(rng.integers(9, 80)), 700]))
        n = int(rng.choice([1, 2, 3]))
        if transposed:
            pad = min(pad, k - 1)
        out = size + k - 1 - 2 * pad if transposed else size + 2 * pad - k + 1
        if out < 9:
            continue
        x = rng.standard_normal((n, cin, size)).astype(np.float32)
        w = (rng.standard_normal((cin, cout, k) if transposed else (cout, cin, k)) * 0.1).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        g = rng.standard_normal((n, cout, out)).astype(np.float32)
        op = F.conv_transpose1d if transposed else F.conv1d
        _float32_follows_float64(op, (x, w, b), g, f"transposed={transposed} k={k} pad={pad} n={n} {cin}->{cout} {size}", padding=pad)
        ran += 1
    assert ran >= 30, f"only {ran} of the random geometries were valid"


@pytest.mark.parametrize("pad", [0, 1])
def test_depthwise_float32_kernels_follow_the_float64_path_with_infinities(pad: int) -> None:
    """The float32 depthwise kernels (taps summed in registers from a padded plane; the
    weight gradient masks lanes past each row's end) equal the float64 path, value by
    value, with an infinite input in the last column (read only by lanes past the end of
    some taps' rows when unpadded) and in the middle, for 3x3 and 3x5 kernels."""
    rng = np.random.default_rng(3)
    for k, col in [((3, 3), -1), ((3, 5), -1), ((3, 3), 20)]:
        x = rng.standard_normal((2, 4, 9, 37)).astype(np.float32)
        x[1, 2, 4, col] = np.inf
        w = rng.standard_normal((4, 1, *k)).astype(np.float32)
        got = []
        for dtype in (cp.float32, cp.float64):
            xt, wt = cp.tensor(x, dtype=dtype).requires_grad_(), cp.tensor(w, dtype=dtype).requires_grad_()
            y = F.conv2d(xt, wt, padding=pad, groups=4)
            y.backward(cp.ones(tuple(y.shape), dtype=dtype))
            got.append([t.numpy().astype(np.float64) for t in (y.detach(), xt.grad, wt.grad)])
        for name, a, want in zip(("output", "input grad", "weight grad"), *got):
            np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-4, err_msg=f"{name}: k={k} col={col} pad={pad}")
