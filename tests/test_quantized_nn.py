"""`nn.QuantizedLinear`, `nn.QuantizedEmbedding` and `nn.quantize` (MLX's in-place
conversion): outputs against the float layers with the dequantized weight, state
dicts through GGUF files, device moves, errors."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
from candle_py import quantized as Q


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 256)
        self.proj = nn.Linear(256, 64)
        self.odd = nn.Linear(64, 48)  # 64 is not a multiple of 256 (k-quants) but is of 32
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(48, 8, bias=False))

    def forward(self, ids: cp.Tensor) -> cp.Tensor:
        return self.head(self.odd(self.proj(self.emb(ids))))


def _model(seed: int = 0) -> Tiny:
    cp.manual_seed(seed)
    return Tiny()


def test_quantized_linear_matches_linear_with_the_dequantized_weight():
    lin = nn.Linear(256, 16)
    q = nn.QuantizedLinear.from_float(lin, "q8_0")
    assert q.in_features == 256 and q.out_features == 16 and q.weight.dtype == "q8_0"
    assert isinstance(q.bias, cp.Tensor) and q.bias.tolist() == lin.bias.tolist()
    assert [n for n, _ in q.named_parameters()] == [] and [n for n, _ in q.named_buffers()] == ["bias"]
    x = cp.randn(2, 5, 256)
    ref = nn.functional.linear(x, q.weight.dequantize(), q.bias)
    np.testing.assert_allclose(np.asarray(q(x)), np.asarray(ref), rtol=0, atol=0.02 * float(ref.abs().max()))
    assert repr(q) == "QuantizedLinear(in_features=256, out_features=16, bias=True, dtype=q8_0)"
    fresh = nn.QuantizedLinear(512, 4, bias=False)
    assert fresh.weight.dtype == "q4k" and fresh.weight.shape == (4, 512) and fresh.bias is None
    assert fresh(cp.randn(3, 512)).shape == (3, 4)
    # Linear's init range, then packed.
    assert float(fresh.weight.dequantize().abs().max()) <= 1 / 512**0.5 * 1.1


def test_quantized_linear_errors():
    with pytest.raises(ValueError, match=r"\[QuantizedLinear\] in_features=100 must be a multiple of q4k's block size 256"):
        nn.QuantizedLinear(100, 4)
    with pytest.raises(ValueError, match="block size 32"):
        nn.QuantizedLinear.from_float(nn.Linear(40, 4), "q4_0")
    with pytest.raises(TypeError, match="expects a Linear"):
        nn.QuantizedLinear.from_float(nn.ReLU())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        nn.QuantizedLinear(0, 4)
    q = nn.QuantizedLinear(256, 4)
    with pytest.raises(cp.ShapeError, match=r"\[QuantizedLinear\] expected input with last dimension 256"):
        q(cp.zeros(2, 3))
    with pytest.raises(TypeError):
        q("x")


def test_quantized_embedding():
    emb = nn.Embedding(10, 64, padding_idx=2)
    q = nn.QuantizedEmbedding.from_float(emb, "q8_0")
    assert (q.num_embeddings, q.embedding_dim, q.padding_idx) == (10, 64, 2)
    ids = cp.tensor([[0, 2, 9]])
    np.testing.assert_array_equal(np.asarray(q(ids)), np.asarray(q.weight.dequantize())[np.asarray(ids)])
    np.testing.assert_allclose(np.asarray(q(ids)), np.asarray(emb(ids).detach()), atol=0.05)
    assert repr(q) == "QuantizedEmbedding(10, 64, padding_idx=2, dtype=q8_0)"
    fresh = nn.QuantizedEmbedding(5, 256, padding_idx=-1)
    assert fresh.padding_idx == 4 and fresh(cp.tensor([4])).tolist() == [[0.0] * 256]
    with pytest.raises(ValueError, match="max_norm"):
        nn.QuantizedEmbedding.from_float(nn.Embedding(4, 32, max_norm=1.0), "q8_0")
    with pytest.raises(ValueError, match=r"\[QuantizedEmbedding\] embedding_dim=48 must be a multiple"):
        nn.QuantizedEmbedding(4, 48)
    with pytest.raises(IndexError, match="out of range"):
        q(cp.tensor([10]))


def test_quantize_replaces_layers_in_place():
    m = _model()
    ids = cp.tensor([[1, 2, 3]])
    before = m(ids)
    assert nn.quantize(m) is None
    assert type(m.emb) is nn.QuantizedEmbedding and type(m.proj) is nn.QuantizedLinear
    assert type(m.odd) is nn.Linear and type(m.head[1]) is nn.Linear  # 64 and 48 in_features: skipped for q4k
    assert m.proj.weight.dtype == "q4k"
    after = m(ids)
    assert after.shape == before.shape
    assert float((after - before).abs().max()) < 0.2 * float(before.abs().max())
    assert "QuantizedLinear(in_features=256, out_features=64, bias=True, dtype=q4k)" in repr(m)


def test_quantize_with_a_class_predicate():
    m = _model()
    seen = []

    def pred(path, mod):
        seen.append((path, type(mod).__name__))
        return {"emb": False, "proj": "q8_0", "odd": True}.get(path, False)

    nn.quantize(m, "q4_0", class_predicate=pred)
    assert seen == [("emb", "Embedding"), ("proj", "Linear"), ("odd", "Linear"), ("head.1", "Linear")]
    assert type(m.emb) is nn.Embedding and m.proj.weight.dtype == "q8_0" and m.odd.weight.dtype == "q4_0"
    assert type(m.head[1]) is nn.Linear
    with pytest.raises(ValueError, match=r"quantize: layer 'odd' has in_features=64, not a multiple of q4k's block size 256"):
        nn.quantize(_model(), class_predicate=lambda p, mod: p == "odd")
    with pytest.raises(ValueError, match="unknown quantized dtype"):
        nn.quantize(_model(), "q9")
    with pytest.raises(TypeError, match="the model itself is a Linear"):
        nn.quantize(nn.Linear(256, 2))


def test_quantize_keeps_shared_layers_shared_and_skips_attention_out_proj():
    shared = nn.Linear(256, 256)
    m = nn.Sequential(shared, nn.ReLU(), shared)
    nn.quantize(m)
    assert m[0] is m[2] and type(m[0]) is nn.QuantizedLinear
    mha = nn.MultiheadAttention(256, 4)
    nn.quantize(mha)
    assert type(mha.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def test_state_dict_round_trips_through_gguf(tmp_path):
    m = _model(1)
    nn.quantize(m, "q8_0")
    sd = m.state_dict()
    assert list(sd) == ["emb.weight", "proj.weight", "proj.bias", "odd.weight", "odd.bias", "head.1.weight"]
    assert isinstance(sd["proj.weight"], Q.QTensor) and isinstance(sd["proj.bias"], cp.Tensor)
    path = tmp_path / "model.gguf"
    Q.save_gguf(path, sd, {"general.architecture": "tiny"})
    loaded, meta = Q.load_gguf(path)
    assert meta == {"general.architecture": "tiny"}
    fresh = _model(2)
    nn.quantize(fresh, "q8_0")
    ids = cp.tensor([[0, 5, 19, 7]])
    assert fresh(ids).tolist() != m(ids).tolist()
    fresh.load_state_dict(loaded)
    assert fresh(ids).tolist() == m(ids).tolist()  # identical outputs
    # A float model takes the GGUF file's float tensors (dequantized) too.
    plain = _model(3)
    plain.load_state_dict(loaded)
    assert plain.proj.weight.tolist() == m.proj.weight.dequantize().tolist()
    assert plain.odd.weight.tolist() == m.odd.weight.dequantize().tolist()
    assert type(m.head[1]) is nn.Linear and plain.head[1].weight.tolist() == m.head[1].weight.tolist()  # 48: not quantized
    np.testing.assert_allclose(np.asarray(plain(ids).detach()), np.asarray(m(ids)), rtol=0, atol=0.02 * float(m(ids).abs().max()))


def test_load_state_dict_into_quantized_layers():
    q = nn.QuantizedLinear(256, 4, dtype="q4k")
    w = cp.randn(4, 256)
    q.load_state_dict({"weight": w, "bias": cp.zeros(4)})  # a float weight: quantized to the layer's dtype
    assert q.weight.dtype == "q4k" and q.weight.dequantize().tolist() == Q.quantize(w, "q4k").dequantize().tolist()
    q8 = Q.quantize(w, "q8_0")
    q.load_state_dict({"weight": q8, "bias": Q.quantize(cp.ones(4), "f32")})  # a QTensor replaces the weight
    assert q.weight is q8 and q.bias.tolist() == [1.0] * 4
    with pytest.raises(nn.StateDictError, match=r"size mismatch for weight: copying a param with shape \[4, 512\]"):
        q.load_state_dict({"weight": Q.quantize(cp.zeros(4, 512), "q4k"), "bias": cp.zeros(4)})
    with pytest.raises(nn.StateDictError, match=r'Missing key\(s\) in state_dict: "weight"'):
        q.load_state_dict({"bias": cp.zeros(4)})
    with pytest.raises(nn.StateDictError, match="expected a QTensor or a float Tensor, got int"):
        q.load_state_dict({"weight": 3, "bias": cp.zeros(4)})


def test_module_to_moves_quantized_weights():
    m = nn.Sequential(nn.QuantizedLinear(256, 4))
    w = m[0].weight
    m.to("cpu")
    assert m[0].weight is w  # already there: the same object
    m.to(cp.float64)  # a dtype only: the bias casts, the packed weight stays
    assert m[0].bias.dtype == cp.float64 and m[0].weight is w
    assert m(cp.randn(2, 256, dtype=cp.float64)).dtype == cp.float64
