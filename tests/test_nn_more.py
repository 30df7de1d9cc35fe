"""Issue-22 nn layers, functions and losses against PyTorch-made fixtures
(tests/fixtures/nn_more, made by tools/make_fixtures_nn_more.py): outputs,
input and parameter gradients, state_dict keys and buffers, repr; then the
random layers' statistics, containers, and the bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import assert_close

FIXTURES = Path(__file__).parent / "fixtures" / "nn_more"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors"))

# Matrix-product layers get the matmul-like tolerance; the rest are elementwise.
MATMUL_LIKE = ("RNN", "LSTM", "GRU", "Transformer", "Fold", "Unfold", "EmbeddingBag", "LocalResponseNorm")


def _load(name: str) -> Tuple[Dict[str, cp.Tensor], Dict[str, Any]]:
    path = FIXTURES / f"{name}.safetensors"
    meta = dict(cp.safetensors.load_metadata(path) or {})
    for k in ("args", "kwargs", "call_kwargs", "grad_inputs"):
        meta[k] = json.loads(meta[k])
    meta["train"] = meta["train"] == "1"
    return cp.safetensors.load_file(path), meta


def _ctor(v: Any) -> Any:
    return cp.tensor(v["__tensor__"]) if isinstance(v, dict) and "__tensor__" in v else v


def _flatten(out: Any) -> List[cp.Tensor]:
    if isinstance(out, cp.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flatten(o)]
    return []


def _torch_repr(r: str) -> str:
    """PyTorch's repr in our names: the dtype module differs."""
    return r.replace("torch.", "candle_py.")


def test_fixtures_present() -> None:
    assert len(CASES) >= 90


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name: str) -> None:
    t, meta = _load(name)
    target = meta["target"]
    tol = 1e-4 if target.startswith(MATMUL_LIKE) else 1e-5
    xs = []
    j = 0
    while f"in.{j}" in t:
        x = t[f"in.{j}"]
        xs.append(x.clone().requires_grad_(True) if j in meta["grad_inputs"] else x)
        j += 1
    call = {k[3:]: v for k, v in t.items() if k.startswith("kw.")}
    for k in list(call):
        if f"grad.kw.{k}" in t:
            call[k] = call[k].clone().requires_grad_(True)
    call.update(meta["call_kwargs"])
    m = None
    if meta["kind"] == "module":
        m = getattr(nn, target)(*meta["args"], **{k: _ctor(v) for k, v in meta["kwargs"].items()})
        state = {k[len("state.") :]: v for k, v in t.items() if k.startswith("state.")}
        m.load_state_dict(state)
        m.train(meta["train"])
        assert repr(m) == _torch_repr(meta["repr"]), f"{name}: repr"
        out = m(xs[0], (xs[1], xs[2]), **call) if meta.get("hx_pair") == "1" else m(*xs, **call)
    else:
        out = getattr(F, target)(*xs, *meta["args"], **meta["kwargs"], **call)
    outs = _flatten(out)
    assert len(outs) == int(meta["n_out"]), f"{name}: {len(outs)} outputs, torch has {meta['n_out']}"
    loss = None
    for j, o in enumerate(outs):
        assert_close(o, t[f"out.{j}"], tol, 1e-4, f"{name}: output {j}")
        assert o.dtype == t[f"out.{j}"].dtype, f"{name}: output {j} dtype"
        if o.requires_grad:
            term = (cp.where(o.isfinite(), o, 0.0) * t[f"lw.{j}"]).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    for j in meta["grad_inputs"]:
        key = f"grad.in.{j}"
        if key in t:
            assert xs[j].grad is not None, f"{name}: no gradient reached input {j}"
            assert_close(xs[j].grad, t[key], tol, 1e-4, f"{name}: grad of input {j}")
    if m is not None:
        grads = {k[len("grad.param.") :]: v for k, v in t.items() if k.startswith("grad.param.")}
        for k, p in m.named_parameters():
            assert k in grads, f"{name}: torch has no grad for {k}"
            assert p.grad is not None, f"{name}: no gradient reached {k}"
            assert_close(p.grad, grads[k], tol, 1e-4, f"{name}: grad of {k}")
        after = {k[len("state_after.") :]: v for k, v in t.items() if k.startswith("state_after.")}
        sd = m.state_dict()
        assert list(sd) == list(after) or set(sd) == set(after), f"{name}: state_dict keys {sorted(sd)} != torch's {sorted(after)}"
        for k, v in after.items():
            assert_close(sd[k], v, 1e-5, 1e-4, f"{name}: {k} after forward")
    for k, v in call.items():
        if f"grad.kw.{k}" in t:
            assert v.grad is not None, f"{name}: no gradient reached {k}"
            assert_close(v.grad, t[f"grad.kw.{k}"], tol, 1e-4, f"{name}: grad of {k}")


# --- random layers: masks and statistics ------------------------------------------


@pytest.mark.parametrize(
    ("layer", "shape"), [(nn.Dropout1d, (64, 16, 5)), (nn.Dropout2d, (64, 16, 3, 2)), (nn.Dropout3d, (64, 16, 2, 2, 2))]
)
def test_channel_dropout_drops_whole_channels(layer: Any, shape: Tuple[int, ...]) -> None:
    cp.manual_seed(0)
    m = layer(0.25)
    x = (cp.rand(*shape) + 1.0).requires_grad_(True)
    y = m(x)
    per_channel = y.detach().reshape(shape[0], shape[1], -1)
    zero = (per_channel == 0).to(cp.float32).mean(2)
    # Every channel is zeroed entirely or kept entirely, survivors scaled by 1 / (1 - p).
    assert bool(((zero == 0) | (zero == 1)).all())
    kept = y.detach() != 0
    np.testing.assert_allclose(y.detach()[kept].numpy(), (x.detach()[kept] / 0.75).numpy(), rtol=1e-6)
    assert 0.18 < float(zero.mean()) < 0.32
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (kept.to(cp.float32) / 0.75).numpy(), rtol=1e-6)
    m.eval()
    assert m(x) is x
    # Unbatched input drops channels too; other ranks are refused.
    u = layer(0.5)(cp.ones(*shape[1:]))
    assert tuple(u.shape) == shape[1:]
    with pytest.raises(RuntimeError, match="Expected"):
        layer(0.5)(cp.ones(*([2] * (len(shape) + 1))))


def test_alpha_dropout_keeps_mean_and_variance() -> None:
    cp.manual_seed(1)
    p = 0.2
    x = cp.randn(200, 500)
    y = nn.AlphaDropout(p)(x)
    alpha = 1.7580993408473766
    a = 1.0 / ((alpha * alpha * p + 1) * (1 - p)) ** 0.5
    dropped_value = a * (-alpha) + alpha * a * p
    yn, xn = y.numpy(), x.numpy()
    dropped = np.isclose(yn, dropped_value, atol=1e-6) & ~np.isclose(xn * a + alpha * a * p, dropped_value, atol=1e-6)
    assert 0.18 < dropped.mean() < 0.22
    np.testing.assert_allclose(yn[~dropped], xn[~dropped] * a + alpha * a * p, rtol=1e-5, atol=1e-6)
    assert abs(yn.mean()) < 0.02 and abs(yn.std() - 1.0) < 0.02
    assert nn.AlphaDropout(p).eval()(x) is x


def test_feature_alpha_dropout_is_per_channel() -> None:
    cp.manual_seed(2)
    y = nn.FeatureAlphaDropout(0.5)(cp.randn(8, 6, 10)).numpy()
    alpha = 1.7580993408473766
    a = 1.0 / ((alpha * alpha * 0.5 + 1) * 0.5) ** 0.5
    const = np.isclose(y, a * (-alpha) + alpha * a * 0.5, atol=1e-6).all(axis=2)
    assert const.any() and not const.all()


@pytest.mark.parametrize("fn", [F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout])
def test_dropout_probability_checked(fn: Any) -> None:
    with pytest.raises(ValueError, match="probability"):
        fn(cp.ones(2, 3, 4, 4, 4), p=1.5, training=True)


# --- containers ----------------------------------------------------------------------


def test_parameter_list() -> None:
    pl = nn.ParameterList([cp.zeros(3), nn.Parameter(cp.ones(2, 2))])
    pl.append(cp.ones(1))
    assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl)
    assert list(pl.state_dict()) == ["0", "1", "2"]
    assert len(list(pl.parameters())) == 3
    assert tuple(pl[-1].shape) == (1,) and len(pl[1:]) == 2
    pl[0] = cp.full((3,), 2.0)
    assert pl[0].tolist() == [2.0, 2.0, 2.0] and isinstance(pl[0], nn.Parameter)
    assert repr(pl).splitlines()[1] == "    (0): Parameter containing: [candle_py.float32 of size 3]"

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ws = nn.ParameterList([cp.ones(2), cp.ones(3)])

    m = M()
    assert list(m.state_dict()) == ["ws.0", "ws.1"]
    m.load_state_dict({"ws.0": cp.zeros(2), "ws.1": cp.full((3,), 5.0)})
    assert m.ws[1].tolist() == [5.0, 5.0, 5.0]
    with pytest.raises(IndexError):
        pl[7]
    with pytest.raises(RuntimeError, match="should not be called"):
        pl(cp.ones(1))


def test_parameter_dict() -> None:
    pd = nn.ParameterDict({"b": cp.ones(2), "a": cp.zeros(3)})
    assert list(pd.keys()) == ["a", "b"]  # a plain dict is added in sorted order, as PyTorch does
    pd["c"] = nn.Parameter(cp.ones(1))
    assert list(pd.state_dict()) == ["a", "b", "c"] and isinstance(pd["a"], nn.Parameter)
    assert "c" in pd and len(pd) == 3 and pd.get("zz") is None
    assert tuple(pd.pop("a").shape) == (3,) and list(pd) == ["b", "c"]
    pd.update([("z", cp.ones(4)), ("y", cp.ones(5))])
    assert list(pd) == ["b", "c", "z", "y"]
    assert repr(pd).splitlines()[1] == "    (b): Parameter containing: [candle_py.float32 of size 2]"
    with pytest.raises(KeyError):
        pd["nope"]
    pd.clear()
    assert len(pd) == 0 and list(pd.parameters()) == []


# --- recurrent and transformer ---------------------------------------------------------


def test_flatten_parameters_is_a_noop() -> None:
    for cls in (nn.LSTM, nn.GRU, nn.RNN):
        m = cls(3, 4)
        before = {k: v.clone() for k, v in m.state_dict().items()}
        assert m.flatten_parameters() is None
        assert all(bool((m.state_dict()[k] == v).all()) for k, v in before.items())


def test_rnn_errors() -> None:
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        nn.RNNCell(3, 4)(cp.ones(2, 2, 3))
    with pytest.raises(cp.ShapeError, match="input_size"):
        nn.GRUCell(3, 4)(cp.ones(2, 5))
    with pytest.raises(cp.ShapeError, match="hx"):
        nn.LSTMCell(3, 4)(cp.ones(2, 3), (cp.ones(3, 4), cp.ones(2, 4)))
    assert nn.RNN(3, 4, 2, "relu").state_dict()["weight_hh_l1"].shape == (4, 4)


def test_rnn_time_loop_errors() -> None:
    """The fused time loop (`_core._rnn_scan`) checks what it is handed."""
    scan = cp._core._rnn_scan
    xp, h, w, b = cp.ones(5, 2, 16), cp.ones(2, 4), cp.ones(16, 4), cp.ones(16)
    with pytest.raises(cp.ShapeError, match=r"\[LSTM\] expected a sequence of at least one step"):
        nn.LSTM(3, 4)(cp.ones(0, 2, 3))
    with pytest.raises(cp.ShapeError, match=r"\[LSTM\] an LSTM needs the initial cell state c0"):
        scan("LSTM", xp, h, None, w, b, False)
    with pytest.raises(cp.ShapeError, match=r"\[GRU\] expected an input projection of shape \(steps, 2, 12\)"):
        scan("GRU", xp, h, None, cp.ones(12, 4), None, False)
    with pytest.raises(cp.ShapeError, match=r"\[RNN\] only an LSTM has a cell state"):
        scan("RNN_TANH", cp.ones(5, 2, 4), h, h, cp.ones(4, 4), None, False)
    with pytest.raises(cp.ShapeError, match=r"expected weight_hh of shape \[16, 4\], got \[16, 3\]"):
        scan("LSTM", xp, h, h, cp.ones(16, 3), b, False)
    with pytest.raises(cp.ShapeError, match=r"expected bias_hh of shape \[16\], got \[4\]"):
        scan("LSTM", xp, h, h, w, cp.ones(4), False)
    with pytest.raises(cp.ShapeError, match=r"expected c0 of shape \[2, 4\], got \[3, 4\]"):
        scan("LSTM", xp, h, cp.ones(3, 4), w, b, False)
    with pytest.raises(cp.DTypeError, match=r"\[LSTM\] expected floating-point tensors of one dtype, got .*h0 float64"):
        scan("LSTM", xp, h.double(), h, w, b, False)
    with pytest.raises(cp.DTypeError, match="of one dtype"):
        scan("RNN_RELU", cp.ones(5, 2, 4, dtype=cp.int64), cp.ones(2, 4, dtype=cp.int64), None, cp.ones(4, 4, dtype=cp.int64), None, False)
    with pytest.raises(ValueError, match='unknown mode "LSTMX"'):
        scan("LSTMX", xp, h, h, w, b, False)


def test_rnn_half_precision_and_edge_values_follow_the_float64_run() -> None:
    """bfloat16 runs the composed recurrence (no fused kernel), float32 the kernel: both
    follow the float64 run; inf and nan inputs give what the formulas give (torch's:
    a saturated gate, a nan row), with no error."""
    cp.manual_seed(0)
    m64 = nn.LSTM(6, 40, dtype=cp.float64)
    x = cp.randn(4, 3, 6, dtype=cp.float64)
    ref, (hn, cn) = m64(x)
    m32 = nn.LSTM(6, 40)
    m32.load_state_dict({k: v.float() for k, v in m64.state_dict().items()})
    out, _ = m32(x.float())
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    mb = nn.LSTM(6, 40, dtype=cp.bfloat16)
    mb.load_state_dict({k: v.to(cp.bfloat16) for k, v in m64.state_dict().items()})
    outb, _ = mb(x.to(cp.bfloat16))
    assert outb.dtype == cp.bfloat16
    np.testing.assert_allclose(outb.detach().float().numpy(), ref.detach().numpy(), atol=5e-2)
    # +inf saturates the gates of its row to 1 (torch: sigmoid(inf) = 1, tanh(inf) = 1);
    # a nan spreads through its sample only.
    xe = x.float().clone()
    xe[0, 0, 0] = float("inf")
    xe[1, 1, 2] = float("nan")
    oute, _ = m32(xe)
    e = oute.detach().numpy()
    assert np.isnan(e[1:, 1]).all() and not np.isnan(e[:, 0]).any() and not np.isnan(e[:, 2]).any()
    assert np.isfinite(e[0, 0]).all()


def test_rnn_inference_keeps_two_steps_and_equals_the_recorded_run() -> None:
    """Under no_grad the time loop keeps only the last two steps' gates (the backward's
    record is not needed); its outputs and final states equal the recording run's bit for
    bit, and the float64 run's to 1e-5, for 1 to 3 steps and more, both directions, and
    widths that split into uneven per-thread parts (gate columns packed by transposes)."""
    cp.manual_seed(1)
    for cls in (nn.LSTM, nn.GRU, nn.RNN):
        for steps, hidden, batch in ((1, 40, 3), (2, 17, 1), (3, 200, 20), (9, 70, 5)):
            m = cls(8, hidden, 2, bidirectional=True)
            m64 = cls(8, hidden, 2, bidirectional=True, dtype=cp.float64)
            m64.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
            x = cp.randn(steps, batch, 8)
            rec_out, rec_state = m(x.clone().requires_grad_(True))
            with cp.no_grad():
                out, state = m(x)
            ref_out, ref_state = m64(x.double())
            states = (state, rec_state, ref_state) if cls is not nn.LSTM else None
            np.testing.assert_array_equal(out.numpy(), rec_out.detach().numpy())
            np.testing.assert_allclose(out.numpy(), ref_out.detach().numpy(), rtol=1e-5, atol=1e-5)
            pairs = zip(state, rec_state, ref_state) if cls is nn.LSTM else [states]
            for got, rec, ref in pairs:
                np.testing.assert_array_equal(got.numpy(), rec.detach().numpy())
                np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_square_subsequent_mask() -> None:
    m = nn.Transformer.generate_square_subsequent_mask(4)
    assert m.dtype == cp.float32 and tuple(m.shape) == (4, 4)
    expected = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    np.testing.assert_array_equal(m.numpy(), expected)
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=cp.float64).dtype == cp.float64


def test_transformer_layers_are_independent_copies_and_callable_activation() -> None:
    cp.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    enc = nn.TransformerEncoder(layer, 2)
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    x = cp.randn(5, 2, 8)
    by_name = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    by_fn = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=F.gelu)
    by_fn.load_state_dict(by_name.state_dict())
    np.testing.assert_allclose(by_fn(x).detach().numpy(), by_name(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    by_module = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=nn.GELU())
    by_module.load_state_dict(by_name.state_dict())
    np.testing.assert_allclose(by_module(x).detach().numpy(), by_name(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    # A causal mask given as a mask or as is_causal with it gives one result.
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_allclose(enc(x, mask=mask).detach().numpy(), enc(x, mask=mask, is_causal=True).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_transformer_errors() -> None:
    t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    with pytest.raises(RuntimeError, match="batch number"):
        t(cp.ones(3, 2, 8), cp.ones(3, 3, 8))
    with pytest.raises(RuntimeError, match="d_model"):
        t(cp.ones(3, 2, 6), cp.ones(3, 2, 6))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        nn.TransformerEncoderLayer(8, 2, 16)(cp.ones(3, 2, 8), is_causal=True)
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


# --- errors of the functional forms ---------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: F.glu(cp.ones(2, 3)), RuntimeError, "halving dimension must be even"),
        (lambda: F.glu(cp.ones(2, 4), dim=3), IndexError, "out of range"),
        (lambda: F.softshrink(cp.ones(2), -1.0), ValueError, "lambda"),
        (lambda: F.cosine_similarity(cp.ones(2, 3), cp.ones(2, 4)), cp.ShapeError, "broadcast"),
        (lambda: F.pairwise_distance(cp.ones(2, 3), cp.ones(3, 3)), cp.ShapeError, "broadcast"),
        (lambda: F.pixel_shuffle(cp.ones(1, 3, 2, 2), 2), RuntimeError, "divisible"),
        (lambda: F.pixel_unshuffle(cp.ones(1, 1, 3, 4), 2), RuntimeError, "divisible"),
        (lambda: F.channel_shuffle(cp.ones(1, 5, 2), 2), RuntimeError, "divisible"),
        (lambda: F.unfold(cp.ones(2, 3), 2), NotImplementedError, "3D or 4D"),
        (lambda: F.unfold(cp.ones(1, 1, 2, 2), 3), RuntimeError, "too small"),
        (lambda: F.fold(cp.ones(1, 8, 5), (3, 3), 2), RuntimeError, "sliding blocks"),
        (lambda: F.fold(cp.ones(1, 7, 4), (3, 3), 2), RuntimeError, "divisible"),
        (lambda: F.local_response_norm(cp.ones(2, 3), 2), ValueError, "3D or higher"),
        (lambda: F.instance_norm(cp.ones(2, 3)), cp.ShapeError, "3-D"),
        (lambda: F.embedding_bag(cp.tensor([1, 2]), cp.ones(5, 2)), ValueError, "offsets"),
        (lambda: F.embedding_bag(cp.tensor([[1, 2]]), cp.ones(5, 2), cp.tensor([0])), ValueError, "offsets has to be None"),
        (lambda: F.embedding_bag(cp.tensor([1, 2]), cp.ones(5, 2), cp.tensor([1])), ValueError, "offsets\\[0\\]"),
        (lambda: F.embedding_bag(cp.tensor([1, 9]), cp.ones(5, 2), cp.tensor([0])), IndexError, "embedding_bag"),
        (lambda: F.embedding_bag(cp.tensor([1.0]), cp.ones(5, 2), cp.tensor([0])), TypeError, "integer"),
        (lambda: F.embedding_bag(cp.tensor([1, 2]), cp.ones(5, 2), cp.tensor([0]), mode="bad"), ValueError, "mode"),
        (
            lambda: F.embedding_bag(cp.tensor([1, 2]), cp.ones(5, 2), cp.tensor([0]), per_sample_weights=cp.ones(2)),
            NotImplementedError,
            "per_sample_weights",
        ),
        (
            lambda: F.embedding_bag(cp.tensor([1]), cp.ones(5, 2), cp.tensor([0]), mode="max", scale_grad_by_freq=True),
            ValueError,
            "max mode does not support scaling the gradient by the frequency",
        ),
        (lambda: F.huber_loss(cp.ones(2), cp.ones(3)), cp.ShapeError, "same as input size"),
        (lambda: F.huber_loss(cp.ones(2), cp.ones(2), delta=0.0), RuntimeError, "delta"),
        (lambda: F.huber_loss(cp.ones(2), cp.ones(2), reduction="avg"), ValueError, "reduction"),
        (lambda: F.margin_ranking_loss(cp.ones(2), cp.ones(2, 1), cp.ones(2)), RuntimeError, "same dimension"),
        (lambda: F.cosine_embedding_loss(cp.ones(2, 3), cp.ones(2, 3), cp.ones(2, 1)), cp.ShapeError, "target"),
        (lambda: F.triplet_margin_loss(cp.ones(2, 3), cp.ones(2, 3), cp.ones(3)), RuntimeError, "dimensions"),
        (lambda: F.triplet_margin_loss(cp.ones(2, 3), cp.ones(2, 3), cp.ones(2, 3), margin=0.0), ValueError, "margin"),
        (lambda: F.gaussian_nll_loss(cp.ones(2, 3), cp.ones(2, 3), cp.ones(3, 3)), ValueError, "incorrect size"),
        (lambda: F.gaussian_nll_loss(cp.ones(2, 3), cp.ones(2, 3), -cp.ones(2, 3)), ValueError, "negative"),
        (lambda: F.multi_margin_loss(cp.ones(2, 3), cp.tensor([0, 1]), p=3), ValueError, "p == 1"),
        (lambda: F.multi_margin_loss(cp.ones(2, 3), cp.tensor([0, 3])), IndexError, "out of range"),
        (lambda: F.multi_margin_loss(cp.ones(2, 3), cp.tensor([0, 1, 2])), cp.ShapeError, "inconsistent target"),
        (lambda: F.multilabel_margin_loss(cp.ones(2, 3), cp.tensor([[0, 5, -1], [0, 1, 2]])), IndexError, "out of range"),
        (lambda: F.multilabel_margin_loss(cp.ones(2, 3), cp.tensor([0, 1])), cp.ShapeError, "inconsistent target"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2), cp.tensor([[1]]), [4], [1], blank=3), ValueError, "blank"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2), cp.tensor([[1]]), [5], [1]), ValueError, "input_lengths"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2), cp.tensor([[1]]), [4], [2]), RuntimeError, "at least 2"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2), cp.tensor([[0]]), [4], [1]), IndexError, "blank"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2), cp.tensor([[1.0]]), [4], [1]), TypeError, "integer"),
        (lambda: F.ctc_loss(cp.ones(4, 2, 3).log_softmax(2), cp.tensor([[1]]), [4], [1]), RuntimeError, "batch"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3).log_softmax(2).long(), cp.tensor([[1]]), [4], [1]), TypeError, "float"),
        (lambda: F.ctc_loss(cp.ones(4, 1, 3), cp.tensor([[1]]), [4], [1], reduction="avg"), ValueError, "reduction"),
    ],
)
def test_bad_input_raises(call: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    ("make", "x", "exc", "match"),
    [
        (lambda: nn.InstanceNorm1d(3), cp.ones(2, 3, 4, 5), ValueError, "2D or 3D"),
        (lambda: nn.InstanceNorm2d(3, affine=True), cp.ones(2, 4, 3, 3), ValueError, "num_features"),
        (lambda: nn.ReflectionPad1d(3), cp.ones(1, 2, 3), ValueError, "smaller than the input size"),
        (lambda: nn.ReflectionPad2d(1), cp.ones(1, 1, 2, 3, 3), cp.ShapeError, "3D or 4D"),
        (lambda: nn.CircularPad1d(4), cp.ones(1, 2, 3), ValueError, "larger than the input size"),
        (lambda: nn.EmbeddingBag(5, 2), cp.tensor([[6, 1]]), IndexError, "embedding_bag"),
    ],
)
def test_bad_layer_input_raises(make: Any, x: cp.Tensor, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        make()(x)


def test_constructor_errors() -> None:
    with pytest.raises(ValueError, match="padding"):
        nn.ReplicationPad2d((1, 2, 3))
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(5, 2, mode="median")
    with pytest.raises(ValueError, match="margin"):
        nn.TripletMarginLoss(margin=-1.0)
    with pytest.raises(ValueError, match="p == 1"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="probability"):
        nn.Dropout2d(1.5)
    with pytest.raises(TypeError, match="Tensor"):
        nn.Softsign()([1.0, 2.0])


def test_threshold_inplace_and_weighted_loss_buffers() -> None:
    x = cp.tensor([-1.0, 0.5, 2.0])
    y = nn.Threshold(0.6, -9.0, inplace=True)(x)
    assert y is x and x.tolist() == [-9.0, -9.0, 2.0]
    loss = nn.MultiMarginLoss(weight=cp.tensor([1.0, 2.0, 3.0]))
    assert list(loss.state_dict()) == ["weight"]
    assert list(nn.MultiLabelSoftMarginLoss().state_dict()) == []


def test_ctc_loss_gradient_through_log_softmax_and_double_backward_refused() -> None:
    cp.manual_seed(4)
    logits = cp.randn(6, 2, 4, requires_grad=True)
    loss = F.ctc_loss(logits.log_softmax(2), cp.tensor([[1, 2], [3, 3]]), [6, 6], [2, 2])
    (g,) = cp.autograd.grad(loss, [logits])
    # Through log_softmax the per-frame gradients sum to zero over the classes.
    np.testing.assert_allclose(g.sum(2).numpy(), np.zeros((6, 2)), atol=1e-6)
    lp = logits.log_softmax(2)
    loss = F.ctc_loss(lp, cp.tensor([[1, 2], [3, 3]]), [6, 6], [2, 2])
    # The recursion has no composed form: a second derivative is refused, not wrong.
    with pytest.raises(RuntimeError, match="double-backward"):
        cp.autograd.grad(loss, [lp], create_graph=True)


@pytest.mark.parametrize("p", [float("inf"), float("-inf"), 0.0, 1.0, 2.0, 3.0])
def test_tensor_norm_orders(p: float) -> None:
    """The vector norms pairwise_distance relies on, NumPy's definitions (PyTorch's too)."""
    x = cp.tensor([[1.0, -3.0, 0.0, 2.0], [0.5, 0.0, 0.0, -0.5]])
    np.testing.assert_allclose(x.norm(p, -1).numpy(), np.linalg.norm(x.numpy(), ord=p, axis=-1), rtol=1e-6)
    np.testing.assert_allclose(x.norm(p, 0, keepdim=True).numpy(), np.linalg.norm(x.numpy(), ord=p, axis=0, keepdims=True), rtol=1e-6)


def test_tensor_norm_inf_gradient_goes_to_the_maxima() -> None:
    x = cp.tensor([1.0, -3.0, 3.0, 2.0], requires_grad=True)
    x.norm(float("inf")).backward()
    assert x.grad.tolist() == [0.0, -0.5, 0.5, 0.0]


def test_norm_of_zero_vector_has_zero_gradient() -> None:
    """PyTorch's subgradient at 0 (not the 0 * inf = NaN of the root's derivative),
    for the 2-norm and the other p-norms, and so for F.normalize of a zero row."""
    for p in (2.0, 3.0, 0.5):  # PyTorch: zeros for each
        x = cp.zeros(2, 3, requires_grad=True)
        x.norm(p, 1).sum().backward()
        assert x.grad.tolist() == [[0.0] * 3] * 2, p
    x = cp.tensor([[0.0, 0.0], [3.0, 4.0]], requires_grad=True)
    (F.normalize(x) * cp.tensor([[1.0, 2.0], [1.0, 2.0]])).sum().backward()
    # d/dx of x / max(|x|, eps): 1/eps at the zero row, as in PyTorch.
    np.testing.assert_allclose(x.grad.numpy(), [[1e12, 2e12], [-0.064, 0.048]], rtol=1e-5)
    x = cp.tensor([0.0, 1.0], requires_grad=True)
    x.norm(0.5).backward()
    assert x.grad.tolist() == [0.0, 1.0]  # a zero entry of a non-zero vector, p < 1


def test_softmin_implicit_dim_is_pytorchs_legacy_choice() -> None:
    x = cp.randn(3, 4, 5)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmin(x)
    np.testing.assert_allclose(y.numpy(), F.softmin(x, 0).numpy(), rtol=1e-6)
    with pytest.warns(UserWarning):
        y4 = nn.Softmin()(cp.randn(2, 3, 4, 5))
    np.testing.assert_allclose(y4.sum(1).numpy(), np.ones((2, 4, 5)), rtol=1e-5)


def test_rnn_dropout_between_layers_only_in_training() -> None:
    cp.manual_seed(5)
    m = nn.RNN(3, 8, num_layers=2, dropout=0.5)
    x = cp.randn(4, 2, 3)
    m.eval()
    y_eval = m(x)[0].detach().numpy()
    np.testing.assert_array_equal(m(x)[0].detach().numpy(), y_eval)
    m.train()
    assert not np.allclose(m(x)[0].detach().numpy(), y_eval)
    # The last layer's output is not dropped: one layer trains deterministically.
    one = nn.RNN(3, 8, num_layers=1, dropout=0.5)
    np.testing.assert_array_equal(one(x)[0].detach().numpy(), one.eval()(x)[0].detach().numpy())
