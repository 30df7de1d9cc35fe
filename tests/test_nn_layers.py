"""nn layers and losses against PyTorch-made fixtures (outputs and gradients),
plus the Module protocol: state_dict keys, load_state_dict reports, repr."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import assert_close, cases, group, load

ELEMENTWISE = {
    "ReLU",
    "ReLU6",
    "LeakyReLU",
    "ELU",
    "SELU",
    "CELU",
    "GELU",
    "SiLU",
    "Mish",
    "Sigmoid",
    "LogSigmoid",
    "Tanh",
    "Hardtanh",
    "Hardsigmoid",
    "Hardswish",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "Flatten",
    "Unflatten",
    "Dropout",
    "Identity",
    "RReLU",
    "PReLU",
}


def _tol(layer: str) -> tuple[float, float]:
    return (1e-5, 1e-4) if layer in ELEMENTWISE else (1e-4, 1e-4)


@pytest.mark.parametrize("name", cases("layer"))
def test_layer_matches_torch(name: str) -> None:
    t, meta = load(name)
    layer = meta["layer"]
    m = getattr(nn, layer)(*meta["args"], **meta["kwargs"])
    m.load_state_dict(group(t, "state."))
    m.train(meta["train"])
    x = t["input"].clone().requires_grad_(True)
    if "input2" in t:
        x2 = t["input2"].clone().requires_grad_(True)
        y = m(x, x2)
    else:
        y = m(x)
    atol, rtol = _tol(layer)
    assert_close(y, t["output"], atol, rtol, f"{name}: output")
    (y * t["loss_weight"]).sum().backward()
    assert_close(x.grad, t["grad.input"], atol, rtol, f"{name}: grad of input")
    if "input2" in t:
        assert_close(x2.grad, t["grad.input2"], atol, rtol, f"{name}: grad of input2")
    grads = group(t, "grad.")
    params = dict(m.named_parameters())
    for k, p in params.items():
        assert k in grads, f"{name}: torch has no grad for {k}"
        assert p.grad is not None, f"{name}: no gradient reached {k}"
        assert_close(p.grad, grads[k], atol, rtol, f"{name}: grad of {k}")
    # Buffers after the forward (BatchNorm running statistics in training).
    after = group(t, "state_after.")
    sd = m.state_dict()
    assert set(sd) == set(after), f"{name}: state_dict keys {sorted(sd)} != torch's {sorted(after)}"
    for k, v in after.items():
        assert_close(sd[k], v, 1e-5, 1e-4, f"{name}: {k} after forward")


@pytest.mark.parametrize("name", cases("loss"))
def test_loss_matches_torch(name: str) -> None:
    t, meta = load(name)
    kwargs = {k: (cp.tensor(v) if isinstance(v, list) else v) for k, v in meta["kwargs"].items()}
    loss_fn = getattr(nn, meta["layer"])(**kwargs)
    x = t["input"].clone().requires_grad_(True)
    y = loss_fn(x, t["target"])
    assert_close(y, t["output"], 1e-5, 1e-4, f"{name}: loss")
    (y * t["loss_weight"]).sum().backward()
    assert_close(x.grad, t["grad.input"], 1e-5, 1e-4, f"{name}: grad of input")


def test_fixtures_present() -> None:
    assert len(cases("layer")) >= 40 and len(cases("loss")) >= 15


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(2, 30), nn.ReLU(), nn.Linear(30, 20), nn.ReLU(), nn.Linear(20, 2))
        self.norm = nn.LayerNorm(2)

    def forward(self, x: cp.Tensor) -> cp.Tensor:
        return self.norm(self.layers(x))


def test_state_dict_keys_and_parameters() -> None:
    m = MLP()
    assert list(m.state_dict()) == [
        "layers.0.weight",
        "layers.0.bias",
        "layers.2.weight",
        "layers.2.bias",
        "layers.4.weight",
        "layers.4.bias",
        "norm.weight",
        "norm.bias",
    ]
    assert sum(p.numel() for p in m.parameters()) == 2 * 30 + 30 + 30 * 20 + 20 + 20 * 2 + 2 + 2 + 2
    assert all(p.requires_grad and p.is_leaf for p in m.parameters())
    assert [n for n, _ in m.named_modules()][:3] == ["", "layers", "layers.0"]


def test_repr_matches_pytorch_layout() -> None:
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Dropout(0.1)))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        ")"
    )


def test_load_state_dict_reports_keys_and_shapes() -> None:
    m = MLP()
    sd = m.state_dict()
    sd2 = dict(sd)
    del sd2["norm.bias"]
    sd2["extra.weight"] = cp.zeros(1)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(sd2)
    assert 'Missing key(s) in state_dict: "norm.bias"' in str(e.value)
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in str(e.value)
    res = m.load_state_dict(sd2, strict=False)
    assert res.missing_keys == ["norm.bias"] and res.unexpected_keys == ["extra.weight"]
    bad = dict(sd)
    bad["layers.0.weight"] = cp.zeros(3, 3)
    with pytest.raises(ValueError, match=r"size mismatch for layers.0.weight: .*\[3, 3\].*\[30, 2\]"):
        m.load_state_dict(bad)
    wrong_dtype = dict(sd)
    wrong_dtype["layers.0.bias"] = cp.zeros(30, dtype=cp.int64)
    with pytest.raises(ValueError, match="dtype mismatch for layers.0.bias"):
        m.load_state_dict(wrong_dtype)


def test_load_state_dict_copies_values_and_keeps_leaves() -> None:
    a, b = MLP(), MLP()
    b.load_state_dict(a.state_dict())
    x = cp.randn(4, 2)
    assert cp.allclose(a(x), b(x))
    p = b.layers[0].weight
    assert p.requires_grad and p.is_leaf
    b(x).sum().backward()
    assert p.grad is not None and p.grad.shape == (30, 2)


def test_train_eval_and_zero_grad() -> None:
    m = MLP()
    assert m.training and m.layers[0].training
    m.eval()
    assert not m.training and not m.layers[1].training
    m(cp.randn(3, 2)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_containers() -> None:
    seq = nn.Sequential()
    seq.append(nn.Linear(2, 2)).append(nn.Tanh())
    assert len(seq) == 2 and isinstance(seq[-1], nn.Tanh) and isinstance(seq[0:1], nn.Sequential)
    from collections import OrderedDict

    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["fc.weight", "fc.bias"]
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(list(ml.parameters())) == 6 and list(ml.state_dict())[0] == "0.weight"
    md = nn.ModuleDict({"a": nn.Linear(1, 2)})
    md["b"] = nn.Identity()
    assert list(md.keys()) == ["a", "b"] and list(md.state_dict()) == ["a.weight", "a.bias"]
    with pytest.raises(IndexError):
        seq[5]


def test_subclassing_like_pytorch_with_buffers() -> None:
    class WithBuffer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(cp.ones(3))
            self.register_buffer("offset", cp.arange(3).float())
            self.register_buffer("tmp", cp.zeros(1), persistent=False)

        def forward(self, x: cp.Tensor) -> cp.Tensor:
            return x * self.scale + self.offset

    m = WithBuffer()
    assert list(m.state_dict()) == ["scale", "offset"]
    assert [n for n, _ in m.named_buffers()] == ["offset", "tmp"]
    out = m(cp.ones(3))
    assert out.tolist() == [1.0, 2.0, 3.0]


def test_linear_init_distribution_matches_pytorch() -> None:
    cp.manual_seed(0)
    m = nn.Linear(100, 50)
    bound = 1 / 10
    w = m.weight.detach().numpy()
    assert w.min() >= -bound and w.max() <= bound and w.std() > bound / 2
    cp.manual_seed(0)
    m2 = nn.Linear(100, 50)
    assert cp.equal(m.weight.detach(), m2.weight.detach())


@pytest.mark.parametrize(
    "make, call, match",
    [
        (lambda: nn.Linear(3, 2), lambda m: m(cp.zeros(4, 5)), r"\[Linear\].*3.*\[4, 5\]"),
        (lambda: nn.LayerNorm(4), lambda m: m(cp.zeros(2, 5)), r"\[LayerNorm\].*\[2, 5\]"),
        (lambda: nn.BatchNorm2d(3), lambda m: m(cp.zeros(2, 4, 5, 5)), r"\[BatchNorm2d\].*3 channels.*\[2, 4, 5, 5\]"),
        (lambda: nn.BatchNorm1d(3), lambda m: m(cp.zeros(2, 3, 4, 5)), r"\[BatchNorm1d\].*\[2, 3, 4, 5\]"),
        (lambda: nn.GroupNorm(2, 4), lambda m: m(cp.zeros(2, 3, 5)), r"\[GroupNorm\].*4 channels"),
    ],
)
def test_bad_input_names_layer_and_shapes(make, call, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=match):
        call(make())


@pytest.mark.parametrize(
    "ctor",
    [
        lambda: nn.Linear(0, 3),
        lambda: nn.Linear(3, -1),
        lambda: nn.Embedding(0, 3),
        lambda: nn.BatchNorm1d(0),
        lambda: nn.GroupNorm(3, 4),
        lambda: nn.Dropout(1.5),
        lambda: nn.LayerNorm(0),
    ],
)
def test_bad_construction_raises_value_error(ctor) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError):
        ctor()


def test_embedding_rejects_float_indices_and_matches_lookup() -> None:
    e = nn.Embedding(10, 3)
    out = e(cp.tensor([[1, 2], [3, 9]]))
    assert out.shape == (2, 2, 3)
    assert cp.allclose(out[1, 1], e.weight[9])
    with pytest.raises(TypeError, match="embedding.*integer"):
        e(cp.tensor([1.0, 2.0]))


def test_dropout_train_zeroes_and_scales() -> None:
    cp.manual_seed(3)
    d = nn.Dropout(0.5)
    y = d(cp.ones(10000))
    vals = set(y.numpy().tolist())
    assert vals <= {0.0, 2.0}
    frac = float((y == 0).float().mean())
    assert 0.45 < frac < 0.55
    d.eval()
    assert cp.equal(d(cp.ones(5)), cp.ones(5))


def test_rrelu_training_slopes_in_range() -> None:
    cp.manual_seed(1)
    m = nn.RReLU(0.1, 0.3)
    x = -cp.ones(1000)
    y = m(x)
    assert float(y.max()) <= -0.1 + 1e-6 and float(y.min()) >= -0.3 - 1e-6
    assert float(y.std()) > 0.01  # random slopes, not one fixed value
    m.eval()
    assert cp.allclose(m(x), cp.full((1000,), -0.2))


@pytest.mark.parametrize("name", cases("sequence"))
def test_sequence_layer_matches_torch(name: str) -> None:
    """LSTM/GRU (outputs and final hidden states) and MultiheadAttention
    (outputs and averaged attention weights, with padding and additive masks)."""
    t, meta = load(name)
    m = getattr(nn, meta["layer"])(*meta["args"], **meta["kwargs"])
    m.load_state_dict(group(t, "state."))
    x = t["input"].clone().requires_grad_(True)
    if meta["layer"] == "MultiheadAttention":
        k = t["key"].clone().requires_grad_(True)
        v = t["value"].clone().requires_grad_(True)
        y, w = m(x, k, v, key_padding_mask=t["key_padding_mask"], attn_mask=t["attn_mask"])
        assert_close(w, t["weights"], 1e-4, 1e-4, f"{name}: attention weights")
        extra = (w * t["weights_loss_weight"]).sum()
    else:
        y, hid = m(x)
        h = hid[0] if isinstance(hid, tuple) else hid
        assert_close(h, t["h_n"], 1e-4, 1e-4, f"{name}: h_n")
        if "c_n" in t:
            assert_close(hid[1], t["c_n"], 1e-4, 1e-4, f"{name}: c_n")
        extra = (h * t["h_loss_weight"]).sum()
    assert_close(y, t["output"], 1e-4, 1e-4, f"{name}: output")
    ((y * t["loss_weight"]).sum() + extra).backward()
    assert_close(x.grad, t["grad.input"], 1e-4, 1e-4, f"{name}: grad of input")
    if meta["layer"] == "MultiheadAttention":
        assert_close(k.grad, t["grad.key"], 1e-4, 1e-4, f"{name}: grad of key")
        assert_close(v.grad, t["grad.value"], 1e-4, 1e-4, f"{name}: grad of value")
    grads = group(t, "grad.")
    for pname, p in m.named_parameters():
        assert p.grad is not None, f"{name}: no gradient reached {pname}"
        assert_close(p.grad, grads[pname], 1e-4, 1e-4, f"{name}: grad of {pname}")
    assert set(m.state_dict()) == set(group(t, "state.")), f"{name}: state_dict keys differ from torch's"


def test_functional_multi_head_attention_matches_module() -> None:
    """F.multi_head_attention_forward with the module's tensors gives the module's result."""
    t, meta = load("mha_self")
    m = nn.MultiheadAttention(*meta["args"], **meta["kwargs"])
    m.load_state_dict(group(t, "state."))
    x, k, v = t["input"], t["key"], t["value"]
    out, w = nn.functional.multi_head_attention_forward(
        x,
        k,
        v,
        m.embed_dim,
        m.num_heads,
        m.in_proj_weight,
        m.in_proj_bias,
        None,
        None,
        False,
        0.0,
        m.out_proj.weight,
        m.out_proj.bias,
        training=False,
        key_padding_mask=t["key_padding_mask"],
        attn_mask=t["attn_mask"],
    )
    assert_close(out, t["output"], 1e-4, 1e-4, "functional MHA output")
    assert_close(w, t["weights"], 1e-4, 1e-4, "functional MHA weights")


@pytest.mark.parametrize("n", [5, 64, 300_000])  # scalar tail, 16-lane loop, threaded
def test_gelu_tails_match_pytorch(n: int) -> None:
    # x * Phi(x) is below 6e-9 in size for x <= -6 (PyTorch gives -0 there); the erf
    # approximation once stopped at 1 - 1.8e-7, so GELU(-1000) came out as -8.9e-5.
    neg = np.float32([-6.0, -10.0, -100.0, -1000.0, -1e30])
    pos = np.float32([6.0, 10.0, 100.0, 1000.0, 1e30])
    x = np.resize(np.concatenate([neg, pos, [np.nan]]), n).astype(np.float32)
    y = nn.GELU()(cp.tensor(x)).numpy()
    is_neg, is_pos = np.isin(x, neg), np.isin(x, pos)
    assert np.abs(y[is_neg]).max() <= 1e-8
    np.testing.assert_array_equal(y[is_pos], x[is_pos])
    assert np.isnan(y[np.isnan(x)]).all()


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 1, 7), (3, 2, 9), (1, 384, 1536), (70, 33, 1), (780, 384, 384), (4, 0, 3)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_and_matmul_write_every_output_element(m, k, n, bias) -> None:
    """Without a bias the GEMM writes into uninitialised memory (no zero fill): every
    path of the gemm crate (k <= 2, vector shapes, k = 0, threaded blocks) must still
    write each element, and `a @ b` (same kernel, W = b^T) too. Repeated so a stale
    buffer from an earlier result would show."""
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    for _ in range(3):
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        ref = x.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0)
        got = F.linear(cp.from_numpy(x), cp.from_numpy(w), cp.from_numpy(b) if bias else None).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        got_mm = (cp.from_numpy(x) @ cp.from_numpy(np.ascontiguousarray(w.T))).numpy()
        np.testing.assert_allclose(got_mm, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "rows,d", [(3, 1), (3, 7), (2, 8), (4, 9), (2, 16), (3, 17), (2, 31), (2, 32), (5, 33), (3, 100), (7, 384), (2, 385), (1200, 384)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_every_row_length(rows: int, d: int, dtype: type) -> None:
    """The f32 kernels widen 32 (forward) or 8 values at a time with a scalar or
    masked tail: each split of a row (and the threaded passes, 1200 x 384) against
    float64 NumPy, output and the gradients of input, weight and bias, on rows with
    a large mean, where a one-pass variance would lose digits. float64 takes the
    generic loops."""
    rng = np.random.default_rng(rows * 1000 + d)
    x = (rng.standard_normal((rows, d)) * 3 + 50).astype(dtype)
    w = rng.standard_normal(d).astype(dtype)
    b = rng.standard_normal(d).astype(dtype)
    g = rng.standard_normal((rows, d)).astype(dtype)
    x64, w64, g64 = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    rstd = 1 / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    xhat = (x64 - x64.mean(-1, keepdims=True)) * rstd
    gw = g64 * w64
    ref_dx = rstd * (gw - gw.mean(-1, keepdims=True) - xhat * (gw * xhat).mean(-1, keepdims=True))

    xt, wt, bt = (cp.from_numpy(a).requires_grad_(True) for a in (x, w, b))
    y = F.layer_norm(xt, (d,), wt, bt, eps=1e-5)
    np.testing.assert_allclose(y.detach().numpy(), xhat * w64 + b, rtol=1e-4, atol=1e-5)
    assert y.shape == (rows, d)
    (y * cp.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), ref_dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wt.grad.numpy(), (g64 * xhat).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bt.grad.numpy(), g64.sum(0), rtol=1e-4, atol=1e-4)
