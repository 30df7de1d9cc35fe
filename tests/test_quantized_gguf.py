"""GGUF files and the block formats against llama.cpp's reference Python package
(`gguf`, a test dependency: pure Python + NumPy).

- Our encodings decode bit for bit as `gguf.quants.dequantize` decodes them: random
  data is quantized by candle_py, written with `save_gguf`, read back by
  `gguf.GGUFReader`, and dequantized by the reference; `QTensor.dequantize()` must
  give exactly the same float32 values. q8_1 and q8k (formats llama.cpp uses for
  activations only, which `gguf` cannot decode) are decoded here by hand from
  their block layouts.
- Files written by `gguf.GGUFWriter` (with the reference's own quantizer) load
  with `load_gguf` and decode to the reference's values.
- `save_gguf` / `load_gguf` round trips keep tensors and metadata.
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFWriter
from gguf import quants as ref_quants

import candle_py as cp
from candle_py import quantized as Q

REF_TYPE = {
    "f32": T.F32,
    "f16": T.F16,
    "bf16": T.BF16,
    "q4_0": T.Q4_0,
    "q4_1": T.Q4_1,
    "q5_0": T.Q5_0,
    "q5_1": T.Q5_1,
    "q8_0": T.Q8_0,
    "q2k": T.Q2_K,
    "q3k": T.Q3_K,
    "q4k": T.Q4_K,
    "q5k": T.Q5_K,
    "q6k": T.Q6_K,
}


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Gaussian values with a few outliers and exact zeros: every block's scale differs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.01, 10, size=shape[:-1] + (1,)).astype(np.float32)
    x.reshape(-1)[::97] *= 20
    x.reshape(-1)[5::131] = 0
    return x


def _reference_decode(path, name: str) -> np.ndarray:
    t = next(t for t in GGUFReader(path).tensors if t.name == name)
    return np.asarray(ref_quants.dequantize(t.data, t.tensor_type), dtype=np.float32)


@pytest.mark.parametrize("dtype", sorted(REF_TYPE))
def test_our_encoding_decodes_as_llama_cpp_decodes_it(dtype, tmp_path):
    x = _data((6, 512), seed=len(dtype))
    q = Q.quantize(cp.from_numpy(x), dtype)
    path = tmp_path / "t.gguf"
    Q.save_gguf(path, {"w": q})
    reader_t = GGUFReader(path).tensors[0]
    assert reader_t.tensor_type == REF_TYPE[dtype]
    assert list(reader_t.shape) == [512, 6]  # GGUF lists dims innermost first
    ref = _reference_decode(path, "w").reshape(6, 512)
    ours = np.asarray(q.dequantize())
    np.testing.assert_array_equal(ours.view(np.uint32), ref.view(np.uint32))  # bit for bit
    # ... and what load_gguf reads back is the same encoding.
    loaded = Q.load_gguf(path)[0]["w"]
    assert loaded.dtype == dtype and loaded.shape == (6, 512)
    np.testing.assert_array_equal(np.asarray(loaded.dequantize()).view(np.uint32), ref.view(np.uint32))


def _f16(b: np.ndarray) -> np.ndarray:
    return b.view(np.float16).astype(np.float32)


def test_q8_1_and_q8k_decode_by_their_block_layouts(tmp_path):
    # q8_1: f16 scale d, f16 s (= d * sum of the quants), 32 int8 quants -> d * q.
    # q8k: f32 scale d, 256 int8 quants, 16 int16 block sums -> d * q.
    x = _data((3, 512), seed=7)
    for dtype, bsize, block in (("q8_1", 32, 36), ("q8k", 256, 292)):
        q = Q.quantize(cp.from_numpy(x), dtype)
        path = tmp_path / f"{dtype}.gguf"
        Q.save_gguf(path, {"w": q})
        # The tensor is the file's last item, padded to 32 bytes (gguf's own reader
        # sizes q8_1 blocks as 40 bytes, an older layout, so it cannot locate it).
        size = x.size // bsize * block
        buf = path.read_bytes()
        start = len(buf) - (size + (-size) % 32)
        raw = np.frombuffer(buf[start : start + size], dtype=np.uint8).reshape(-1, block)
        if dtype == "q8_1":
            d, qs = _f16(raw[:, 0:2].copy()), raw[:, 4:36].view(np.int8)
            s = _f16(raw[:, 2:4].copy())
            assert np.allclose(s[:, 0], d[:, 0] * qs.astype(np.float32).sum(1), rtol=2e-3, atol=1e-2)
        else:
            d, qs = raw[:, 0:4].copy().view(np.float32), raw[:, 4:260].view(np.int8)
            sums = raw[:, 260:292].copy().view(np.int16)
            assert (sums == qs.astype(np.int32).reshape(-1, 16, 16).sum(2)).all()
        ref = (d * qs.astype(np.float32)).reshape(3, 512)
        np.testing.assert_array_equal(np.asarray(q.dequantize()).view(np.uint32), ref.view(np.uint32))
        assert x.size // bsize == raw.shape[0]


@pytest.mark.parametrize("dtype", ["f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"])
def test_files_written_by_the_reference_load(dtype, tmp_path):
    # The reference's own quantizer and writer (GGUF v3, its alignment and layout).
    x = _data((4, 256), seed=11)
    packed = ref_quants.quantize(x, REF_TYPE[dtype])
    path = tmp_path / "ref.gguf"
    w = GGUFWriter(path, "llama")
    w.add_uint32("llama.context_length", 4096)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_string("general.name", "tiny")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "a"])
    w.add_bool("flag", True)
    w.add_tensor("blk.0.w", packed, raw_dtype=REF_TYPE[dtype])
    w.add_tensor("blk.0.b", x[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tensors, meta = Q.load_gguf(path)
    assert list(tensors) == ["blk.0.w", "blk.0.b"]
    t = tensors["blk.0.w"]
    assert t.dtype == dtype and t.shape == (4, 256)
    ref = np.asarray(ref_quants.dequantize(packed, REF_TYPE[dtype]), dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(t.dequantize()).view(np.uint32), ref.view(np.uint32))
    assert tensors["blk.0.b"].dequantize().tolist() == x[0].tolist()
    assert meta["llama.context_length"] == 4096 and meta["llama.rope.freq_base"] == 10000.0
    assert meta["general.name"] == "tiny" and meta["general.architecture"] == "llama"
    assert meta["tokenizer.ggml.tokens"] == ["<s>", "</s>", "a"] and meta["flag"] is True


def test_save_load_round_trip_keeps_tensors_and_metadata(tmp_path):
    tensors = {
        "q": Q.quantize(cp.from_numpy(_data((2, 256), 1)), "q6k"),
        "f": cp.arange(6.0).reshape(2, 3),
        "h": cp.ones(4, dtype=cp.float16),
        "b": cp.ones(1, 2, 3, 4, dtype=cp.bfloat16),
    }
    meta = {
        "general.alignment": 32,
        "u": 7,
        "neg": -3,
        "big": 2**40,
        "huge": 2**63 + 1,
        "f": 0.5,
        "s": "héllo",
        "t": True,
        "ints": [1, 2, 2**33],
        "floats": [0.25, 1.5],
        "strs": ["a", ""],
        "nested": [[1, 2], [3]],
        "empty": [],
        "np64": np.float64(0.1),
        "np8": np.int8(-5),
    }
    path = tmp_path / "m.gguf"
    Q.save_gguf(path, tensors, meta)
    got, md = Q.load_gguf(path)
    assert list(got) == list(tensors)
    assert got["q"].dequantize().tolist() == tensors["q"].dequantize().tolist()
    assert got["f"].dtype == "f32" and got["f"].dequantize().tolist() == tensors["f"].tolist()
    assert got["h"].dtype == "f16" and got["b"].dtype == "bf16" and got["b"].shape == (1, 2, 3, 4)
    expect = dict(meta, np64=0.1, np8=-5)
    assert md == expect
    # The types written: GGUF's usual ones, NumPy scalars as themselves.
    fields = GGUFReader(path).fields
    from gguf import GGUFValueType as V

    assert fields["u"].types == [V.UINT32] and fields["neg"].types == [V.INT64] and fields["huge"].types == [V.UINT64]
    assert fields["f"].types == [V.FLOAT32] and fields["np64"].types == [V.FLOAT64] and fields["np8"].types == [V.INT8]
    assert fields["ints"].types == [V.ARRAY, V.INT64]


def test_load_to_a_device_and_file_errors(tmp_path):
    path = tmp_path / "a.gguf"
    Q.save_gguf(path, {"w": cp.ones(32)})
    assert Q.load_gguf(path, device="cpu")[0]["w"].device == cp.device("cpu")
    with pytest.raises(FileNotFoundError):
        Q.load_gguf(tmp_path / "missing.gguf")
    with pytest.raises(FileNotFoundError):
        Q.save_gguf(tmp_path / "no" / "dir.gguf", {"w": cp.ones(32)})


def test_save_errors():
    with pytest.raises(cp.DTypeError, match=r"save_gguf: tensor 'i' has dtype int64|save_gguf: tensor \"i\" has dtype int64"):
        Q.save_gguf("/tmp/never.gguf", {"i": cp.ones(3, dtype=cp.int64)})
    with pytest.raises(cp.DTypeError, match="float64"):
        Q.save_gguf("/tmp/never.gguf", {"d": cp.ones(3, dtype=cp.float64)})
    with pytest.raises(cp.ShapeError, match="0-d"):
        Q.save_gguf("/tmp/never.gguf", {"s": cp.tensor(1.0)})
    with pytest.raises(cp.ShapeError, match="at most 4 dimensions"):
        Q.save_gguf("/tmp/never.gguf", {"s": cp.ones(1, 1, 1, 1, 2)})
    with pytest.raises(TypeError, match="expected a QTensor or a Tensor"):
        Q.save_gguf("/tmp/never.gguf", {"x": [1.0]})
    with pytest.raises(TypeError, match=r"metadata \"k\": cannot store a value of type dict"):
        Q.save_gguf("/tmp/never.gguf", {}, {"k": {}})
    with pytest.raises(TypeError, match="mixes"):
        Q.save_gguf("/tmp/never.gguf", {}, {"k": [1, "a"]})
    with pytest.raises(ValueError, match="fits none"):
        Q.save_gguf("/tmp/never.gguf", {}, {"k": 2**70})
    with pytest.raises(ValueError, match="general.alignment"):
        Q.save_gguf("/tmp/never.gguf", {}, {"general.alignment": 64})
