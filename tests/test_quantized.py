"""`candle_py.quantized`: QTensor over Candle's quantized storage, quantized matmul
and row lookups.

Bit-exactness of the formats against llama.cpp's reference reader is in
test_quantized_gguf.py; here: the API, errors, and the quantized kernels against
float math.

Tolerances of `matmul(x, w)` (= x @ w.T). Candle's kernels round each block of x
to 8 bits first (q8_0 for q4_0/q5_0/q8_0, q8_1 for q4_1/q5_1/q8_1, q8k for the
k-quants) and then compute exactly. So two checks:
- against `dequant(quantize(x, dot_type)) @ dequant(w).T` the result agrees to f32
  rounding (1e-5 relative), except q4_1/q5_1, whose block minimum meets x's block
  sum, which q8_1 stores in float16 (2e-3);
- against the float product `x @ dequant(w).T` the error is that 8-bit rounding of
  x, about 0.6% relative for blocks of 32 and 0.8% for blocks of 256 on Gaussian
  data (measured over seeds); the bounds are 1.5% and 2%.
The float types (f32/f16/bf16) multiply the dequantized weight: 1e-5.
"""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn.functional as F
from candle_py import quantized as Q

FLOATS = ("f32", "f16", "bf16")
QUANTS = tuple(d for d in Q.DTYPES if d not in FLOATS)
DOT_TYPE = {"q4_0": "q8_0", "q4_1": "q8_1", "q5_0": "q8_0", "q5_1": "q8_1", "q8_0": "q8_0", "q8_1": "q8_1"}
BLOCK = {"f32": 1, "f16": 1, "bf16": 1, **{d: 32 for d in DOT_TYPE}, **{d: 256 for d in ("q2k", "q3k", "q4k", "q5k", "q6k", "q8k")}}
# Bytes per block (GGML's block layouts).
BLOCK_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34, "q8_1": 36}
BLOCK_BYTES.update({"q2k": 84, "q3k": 110, "q4k": 144, "q5k": 176, "q6k": 210, "q8k": 292})


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_dtypes_are_every_ggml_type_candle_stores():
    assert Q.DTYPES == tuple(BLOCK)
    for d in Q.DTYPES:
        assert Q.block_size(d) == BLOCK[d]
    assert Q.block_size("Q4_K") == 256 and Q.block_size("q8_0") == 32


@pytest.mark.parametrize("dtype", Q.DTYPES)
def test_quantize_attributes_and_round_trip(dtype):
    x = _rand(3, 512)
    q = Q.quantize(cp.from_numpy(x), dtype)
    assert isinstance(q, Q.QTensor)
    assert q.dtype == dtype and q.shape == (3, 512) and isinstance(q.shape, cp.Size)
    assert q.ndim == 2 and q.numel() == 1536 and q.size() == (3, 512)
    assert q.block_size == BLOCK[dtype]
    assert q.nbytes == 1536 // BLOCK[dtype] * BLOCK_BYTES[dtype]
    assert q.device == cp.device("cpu")
    assert repr(q) == f"QTensor(shape=[3, 512], dtype={dtype}, nbytes={q.nbytes}, device='cpu')"
    y = q.dequantize()
    assert y.dtype == cp.float32 and y.shape == (3, 512)
    # Re-quantizing what a format encodes gives the same encoding back, except where
    # the quantizer searches scales (the k-quants below 8 bits, q4_1/q5_1's minimum).
    err = np.abs(np.asarray(y) - x).max()
    assert err <= {"f32": 0, "f16": 1e-3, "bf16": 1e-2}.get(dtype, 1.5), (dtype, err)
    assert Q.dequantize(q).tolist() == y.tolist()
    if dtype in ("f32", "f16", "bf16", "q8_0", "q8_1", "q8k", "q4_0", "q5_0"):
        again = Q.quantize(y, dtype).dequantize()
        np.testing.assert_allclose(np.asarray(again), np.asarray(y), rtol=0, atol=1e-6 * float(np.abs(x).max()))


@pytest.mark.parametrize("dtype", ["f16", "q8_0", "q4k"])
def test_quantize_accepts_every_float_dtype_and_views(dtype):
    x = _rand(4, 256)
    ref = Q.quantize(cp.from_numpy(x), dtype).dequantize().tolist()
    for t in (cp.from_numpy(x).double(), cp.from_numpy(x).half().float()):
        got = Q.quantize(t, dtype).dequantize()
        assert got.shape == (4, 256)
    assert Q.quantize(cp.from_numpy(x).double(), dtype).dequantize().tolist() == ref
    # A view with an offset, a transposed (non-contiguous) tensor, a slice of rows.
    big = cp.from_numpy(np.concatenate([_rand(2, 256, seed=5), x]))
    assert Q.quantize(big[2:], dtype).dequantize().tolist() == ref
    assert Q.quantize(cp.from_numpy(np.ascontiguousarray(x.T)).t(), dtype).dequantize().tolist() == ref
    assert Q.quantize(big[2:4], dtype).dequantize().tolist() == ref[:2]


def test_quantize_higher_ranks_and_empty():
    x = _rand(2, 3, 64)
    q = Q.quantize(cp.from_numpy(x), "q8_0")
    assert q.shape == (2, 3, 64)
    np.testing.assert_allclose(np.asarray(q.dequantize()), x, atol=0.02)
    e = Q.quantize(cp.zeros(0, 256), "q4k")
    assert e.shape == (0, 256) and e.nbytes == 0 and e.dequantize().shape == (0, 256)
    assert Q.quantize(cp.zeros(5, 0), "q4_0").dequantize().shape == (5, 0)


def test_quantize_errors_name_the_op_shape_and_dtype():
    with pytest.raises(
        ValueError, match=r"quantize: float32 tensor of shape \[4, 100\]: the last dim 100 must be a multiple of q4k's block size 256"
    ):
        Q.quantize(cp.zeros(4, 100), "q4k")
    with pytest.raises(cp.ShapeError, match=r"quantize: cannot quantize a 0-d tensor"):
        Q.quantize(cp.tensor(1.0), "q8_0")
    with pytest.raises(cp.DTypeError, match=r"quantize: expected a floating point tensor, got int64 of shape \[2, 32\]"):
        Q.quantize(cp.zeros(2, 32, dtype=cp.int64), "q8_0")
    with pytest.raises(TypeError, match="bool"):
        Q.quantize(cp.zeros(2, 32, dtype=cp.bool), "q8_0")
    with pytest.raises(ValueError, match=r"quantize: unknown quantized dtype \"q3\"; expected one of f32, f16"):
        Q.quantize(cp.zeros(2, 32), "q3")
    with pytest.raises(ValueError, match="unknown quantized dtype"):
        Q.block_size("int4")
    with pytest.raises(TypeError):
        Q.QTensor()  # made by quantize / load_gguf only


@pytest.mark.parametrize("dtype", Q.DTYPES)
def test_matmul_against_float_math(dtype):
    w, x = _rand(48, 512, seed=1), _rand(2, 7, 512, seed=2)
    q = Q.quantize(cp.from_numpy(w), dtype)
    wd = np.asarray(q.dequantize()).astype(np.float64)
    y = Q.matmul(cp.from_numpy(x), q)
    assert y.shape == (2, 7, 48) and y.dtype == cp.float32
    y = np.asarray(y)
    if dtype in FLOATS:
        assert _rel(y, x @ wd.T) < 1e-5
        return
    dot = DOT_TYPE.get(dtype, "q8k")
    xq = np.asarray(Q.quantize(cp.from_numpy(x), dot).dequantize()).astype(np.float64)
    assert _rel(y, xq @ wd.T) < (2e-3 if dtype in ("q4_1", "q5_1") else 1e-5)
    assert _rel(y, x @ wd.T) < (1.5e-2 if BLOCK[dtype] == 32 else 2e-2)


@pytest.mark.parametrize("dtype", ["q4_0", "q6k", "f16"])
def test_matmul_shapes_and_input_dtypes(dtype):
    w = _rand(16, 256, seed=3)
    q = Q.quantize(cp.from_numpy(w), dtype)
    x = _rand(5, 256, seed=4)
    ref = np.asarray(Q.matmul(cp.from_numpy(x), q))
    assert Q.matmul(cp.from_numpy(x[0]), q).shape == (16,)  # a 1-d input
    np.testing.assert_allclose(np.asarray(Q.matmul(cp.from_numpy(x[0]), q)), ref[0], rtol=1e-5, atol=1e-5)
    assert Q.matmul(cp.from_numpy(x).reshape(1, 5, 1, 256), q).shape == (1, 5, 1, 16)
    np.testing.assert_allclose(np.asarray(Q.matmul(cp.from_numpy(x).reshape(1, 5, 1, 256), q)).reshape(5, 16), ref, rtol=1e-5, atol=1e-5)
    xt = cp.from_numpy(np.ascontiguousarray(x.T)).t()  # non-contiguous
    np.testing.assert_allclose(np.asarray(Q.matmul(xt, q)), ref, rtol=1e-5, atol=1e-5)
    for dt, tol in ((cp.float64, 1e-5), (cp.float16, 2e-2), (cp.bfloat16, 5e-2)):
        y = Q.matmul(cp.from_numpy(x).to(dt), q)
        assert y.dtype == dt
        assert _rel(np.asarray(y.float()), ref) < tol
    assert Q.matmul(cp.zeros(0, 256), q).shape == (0, 16)  # an empty batch
    assert Q.matmul(cp.zeros(3, 0), Q.quantize(cp.zeros(4, 0), dtype)).tolist() == [[0.0] * 4] * 3


def test_matmul_errors():
    q = Q.quantize(cp.from_numpy(_rand(8, 64)), "q8_0")
    with pytest.raises(cp.ShapeError, match=r"expected input with last dimension 64 for the q8_0 weight \[8, 64\].*got shape \[2, 32\]"):
        Q.matmul(cp.zeros(2, 32), q)
    with pytest.raises(cp.ShapeError, match="got shape"):
        Q.matmul(cp.tensor(1.0), q)
    with pytest.raises(cp.DTypeError, match="got input int64"):
        Q.matmul(cp.zeros(2, 64, dtype=cp.int64), q)
    with pytest.raises(cp.ShapeError, match=r"\[QuantizedLinear\].*weight \[64\]"):
        cp._core._qlinear(cp.zeros(2, 64), Q.quantize(cp.zeros(64), "q8_0"), None, "[QuantizedLinear]")


@pytest.mark.parametrize("dtype", ["q4_1", "q8_0", "q4k", "q6k", "q5_0", "f16"])
def test_cat_joins_rows_without_requantizing(dtype):
    k = 256
    parts = [Q.quantize(cp.from_numpy(_rand(n, k, seed=n)), dtype) for n in (24, 8, 8)]
    j = Q.cat(parts)
    assert j.dtype == dtype and tuple(j.shape) == (40, k) and j.nbytes == sum(p.nbytes for p in parts)
    whole = np.concatenate([np.asarray(p.dequantize()) for p in parts])
    np.testing.assert_array_equal(np.asarray(j.dequantize()), whole)
    # The joined matmul equals the separate ones (the same blocks, rows independent).
    x = cp.from_numpy(_rand(3, k, seed=9))
    sep = np.concatenate([np.asarray(Q.matmul(x, p)) for p in parts], axis=-1)
    np.testing.assert_array_equal(np.asarray(Q.matmul(x, j)), sep)
    # Higher ranks join along dim 0 too.
    q3 = Q.quantize(cp.from_numpy(_rand(2, 3, k)), dtype)
    assert tuple(Q.cat([q3, q3], dim=-3).shape) == (4, 3, k)


def test_cat_errors():
    a = Q.quantize(cp.from_numpy(_rand(4, 64)), "q8_0")
    with pytest.raises(cp.DTypeError, match=r"quantized.cat.*one dtype.*q8_0 \[4, 64\], q4_0 \[4, 64\]"):
        Q.cat([a, Q.quantize(cp.from_numpy(_rand(4, 64)), "q4_0")])
    with pytest.raises(cp.ShapeError, match=r"agree except in dim 0.*q8_0 \[4, 64\], q8_0 \[4, 32\]"):
        Q.cat([a, Q.quantize(cp.from_numpy(_rand(4, 32)), "q8_0")])
    with pytest.raises(ValueError, match="only dim 0"):
        Q.cat([a, a], dim=1)
    with pytest.raises(ValueError, match="non-empty"):
        Q.cat([])


def test_linear_with_a_quantized_weight_and_its_gradients():
    w, x, b = _rand(8, 64, seed=1), _rand(3, 64, seed=2), _rand(8, seed=3)
    q = Q.quantize(cp.from_numpy(w), "q8_0")
    xt = cp.from_numpy(x).requires_grad_()
    bt = cp.from_numpy(b).requires_grad_()
    y = F.linear(xt, q, bt)
    np.testing.assert_allclose(np.asarray(y.detach()), np.asarray(Q.matmul(cp.from_numpy(x), q)) + b, rtol=1e-6, atol=1e-6)
    assert y.grad_fn is not None
    g = _rand(3, 8, seed=4)
    y.backward(cp.from_numpy(g))
    # d/dx (x @ W^T) = g @ W with W the dequantized weight; d/db = g summed over rows.
    np.testing.assert_allclose(np.asarray(xt.grad), g @ np.asarray(q.dequantize()), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(bt.grad), g.sum(0), rtol=1e-5, atol=1e-5)
    with cp.no_grad():
        assert F.linear(xt, q).grad_fn is None
    with pytest.raises(cp.ShapeError, match=r"bias shape \[3\] does not fit weight shape \[8, 64\]"):
        F.linear(cp.zeros(2, 64), q, cp.zeros(3))
    with pytest.raises(cp.DTypeError, match="bias float64"):
        F.linear(cp.zeros(2, 64), q, cp.zeros(8, dtype=cp.float64))


def test_embedding_rows():
    w = _rand(10, 64)
    q = Q.quantize(cp.from_numpy(w), "q8_0")
    ids = cp.tensor([[1, 9], [0, 1]])
    out = F.embedding(ids, q)
    assert out.shape == (2, 2, 64) and out.dtype == cp.float32
    np.testing.assert_array_equal(np.asarray(out), np.asarray(q.dequantize())[np.asarray(ids)])
    assert F.embedding(cp.tensor([3], dtype=cp.int32), q).tolist() == [q.dequantize()[3].tolist()]
    assert F.embedding(cp.zeros(0, dtype=cp.int64), q).shape == (0, 64)
    with pytest.raises(IndexError, match=r"embedding: index 10 is out of range for 10 rows"):
        F.embedding(cp.tensor([10]), q)
    with pytest.raises(IndexError, match=r"index -1 is out of range"):
        F.embedding(cp.tensor([-1]), q)
    with pytest.raises(TypeError, match="indices must be an integer tensor, got float32"):
        F.embedding(cp.tensor([1.0]), q)
    with pytest.raises(ValueError, match="max_norm"):
        F.embedding(cp.tensor([1]), q, max_norm=1.0)
    with pytest.raises(cp.ShapeError, match="2-D"):
        F.embedding(cp.tensor([1]), Q.quantize(cp.zeros(2, 2, 32), "q8_0"))


def test_device_moves_and_copies():
    q = Q.quantize(cp.from_numpy(_rand(4, 32)), "q4_0")
    assert q.to("cpu") is q and q.cpu() is q
    assert copy.copy(q) is q and copy.deepcopy(q) is q  # immutable: copies share
    with pytest.raises((RuntimeError, ValueError)):
        q.to("cuda:99")


@pytest.mark.parametrize("dtype", Q.DTYPES)
def test_pickle_round_trip_keeps_the_blocks(dtype):
    # Before, pickling a QTensor (and so a quantized model sent to a worker process)
    # raised TypeError: cannot pickle.
    q = Q.quantize(cp.from_numpy(_rand(3, 512)), dtype)
    back = pickle.loads(pickle.dumps(q))
    assert isinstance(back, Q.QTensor) and back.dtype == q.dtype and tuple(back.shape) == (3, 512)
    np.testing.assert_array_equal(back.dequantize().numpy(), q.dequantize().numpy())


def test_pickle_of_quantized_layers_and_bad_bytes():
    lin = cp.nn.QuantizedLinear(64, 8, dtype="q4_0")
    x = cp.randn(2, 64)
    back = pickle.loads(pickle.dumps(lin))
    np.testing.assert_array_equal(back(x).numpy(), lin(x).numpy())
    with pytest.raises(ValueError, match=r"QTensor: 17 bytes do not hold a q4_0 tensor of shape \[1, 32\]"):
        cp._core._qtensor_from_bytes("q4_0", [1, 32], b"x" * 17, "cpu")
    with pytest.raises(ValueError, match="QTensor: .* shape \\[1, 31\\]"):
        cp._core._qtensor_from_bytes("q4_0", [1, 31], b"x" * 18, "cpu")
    with pytest.raises(ValueError, match="unknown quantized dtype"):
        cp._core._qtensor_from_bytes("q9", [1, 32], b"", "cpu")


def test_threads_share_a_weight():
    # The kernels run without the GIL: threads using one weight get the serial results.
    q = Q.quantize(cp.from_numpy(_rand(64, 256)), "q4k")
    xs = [cp.from_numpy(_rand(32, 256, seed=s)) for s in range(4)]
    ref = [Q.matmul(x, q).tolist() for x in xs]
    out: dict[int, list] = {}

    def run(i: int) -> None:
        for _ in range(5):
            out[i] = Q.matmul(xs[i], q).tolist()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert [out[i] for i in range(4)] == ref
