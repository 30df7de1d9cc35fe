"""Llama-family causal language models, loaded from GGUF files (llama.cpp's format).

`LlamaForCausalLM.from_gguf(path)` reads the hyper-parameters from the file's
`llama.*` metadata and keeps the weights quantized (`nn.QuantizedLinear`: GGML
blocks, Candle's kernels); `dequantize=True` runs in float32 from the dequantized
weights instead. The model is composed of our layers: `nn.RMSNorm`, grouped-query
`F.scaled_dot_product_attention`, `F.rotary_embedding`, a SwiGLU MLP (`F.silu`), an
embedding table and an output head that may be the embedding table itself (tied).

GGUF stores the Q and K projections with llama.cpp's row permutation (each head's
two rotary halves interleaved), so the rotary embedding here pairs adjacent
features (`interleaved=True`): this equals Hugging Face's `rotate_half` on the
unpermuted weights, since attention scores do not depend on the order of a head's
features as long as Q and K share it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from .. import _core
from .. import nn as _nn
from .._core import QTensor, Tensor
from ..autograd import is_grad_enabled, no_grad
from ..nn import functional as F
from ..quantized import cat as qcat
from ..quantized import load_gguf

__all__ = ["LlamaConfig", "KVCache", "Projections", "LlamaForCausalLM"]

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters of a Llama-family model (GGUF's `llama.*` metadata keys)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    context_length: int = 4096
    rope_linear_factor: float = 1.0

    @classmethod
    def from_gguf_metadata(cls, meta: Mapping[str, Any], vocab_size: Optional[int] = None) -> "LlamaConfig":
        """The config a GGUF file's metadata describes; ValueError when the file is not
        a Llama model or a required key is missing, NotImplementedError for variants
        this model does not compute (mixture of experts, partial or YaRN rotary)."""
        arch = meta.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"LlamaForCausalLM: the GGUF file's general.architecture is {arch!r}, not 'llama'")

        def need(key: str) -> Any:
            if f"llama.{key}" not in meta:
                raise ValueError(f"LlamaForCausalLM: the GGUF metadata lacks llama.{key}")
            return meta[f"llama.{key}"]

        if meta.get("llama.expert_count", 0):
            raise NotImplementedError("LlamaForCausalLM: mixture-of-experts Llama files (llama.expert_count) are not supported")
        hidden, heads = int(need("embedding_length")), int(need("attention.head_count"))
        head_dim = int(meta.get("llama.attention.key_length", hidden // heads))
        rope_dim = int(meta.get("llama.rope.dimension_count", head_dim))
        if rope_dim != head_dim or int(meta.get("llama.attention.value_length", head_dim)) != head_dim:
            raise NotImplementedError(f"LlamaForCausalLM: rotary dims {rope_dim} differ from the head dim {head_dim}")
        scaling = meta.get("llama.rope.scaling.type", "none")
        if scaling not in ("none", "linear"):
            raise NotImplementedError(f"LlamaForCausalLM: rope scaling {scaling!r} is not supported (only linear)")
        factor = float(meta.get("llama.rope.scaling.factor", 1.0)) if scaling == "linear" else 1.0
        if vocab_size is None:
            vocab_size = int(meta.get("llama.vocab_size", len(meta.get("tokenizer.ggml.tokens", ()))))
        return cls(
            vocab_size=int(vocab_size),
            hidden_size=hidden,
            intermediate_size=int(need("feed_forward_length")),
            num_layers=int(need("block_count")),
            num_heads=heads,
            num_kv_heads=int(meta.get("llama.attention.head_count_kv", heads)),
            head_dim=head_dim,
            rope_theta=float(meta.get("llama.rope.freq_base", 10000.0)),
            rms_norm_eps=float(need("attention.layer_norm_rms_epsilon")),
            context_length=int(meta.get("llama.context_length", 4096)),
            rope_linear_factor=factor or 1.0,
        )


class KVCache:
    """Keys and values of the positions seen so far, per layer. `length` is the number
    of positions cached; the model advances it after each forward.

    Each layer's keys live in a (B, H_kv, capacity, D) buffer that new positions are
    written into, and attention reads a view of its first `length` positions; the
    capacity doubles when full (one copy). Measured against concatenating per step
    (which copies the whole cache every step), at 1024 cached positions one layer's
    decode step took 0.23-0.28 ms instead of 0.41-1.05 ms.

    `dtype` is the buffers' dtype (default: the keys' own). A float16 cache, as
    llama.cpp keeps by default, halves the memory a decode step reads; attention
    computes in the query's dtype either way."""

    def __init__(self, num_layers: int, min_capacity: int = 256, dtype: Any = None) -> None:
        self.keys: List[Optional[Tensor]] = [None] * num_layers
        self.values: List[Optional[Tensor]] = [None] * num_layers
        self.length = 0
        self.min_capacity = min_capacity
        self.dtype = dtype

    def _grow(self, buf: Optional[Tensor], rows: Tuple[int, int, int], dtype: Any, device: Any, end: int) -> Tensor:
        b, h, d = rows
        cap = max(end, self.min_capacity, 0 if buf is None else 2 * buf.shape[2])
        new = _core.zeros(b, h, cap, d, dtype=self.dtype or dtype, device=device)
        if buf is not None and self.length:
            new[:, :, : self.length] = buf[:, :, : self.length]
        return new

    def reserve(self, layer: int, rows: Tuple[int, int, int], dtype: Any, device: Any, end: int) -> Tuple[Tensor, Tensor]:
        """The key and value buffers of `layer`, grown to hold `end` positions of rows
        `rows` = (B, H_kv, D) (made in the cache's dtype, else `dtype`, on `device`)."""
        kb, vb = self.keys[layer], self.values[layer]
        if kb is None or vb is None or end > kb.shape[2]:
            kb = self.keys[layer] = self._grow(kb, rows, dtype, device, end)
            vb = self.values[layer] = self._grow(vb, rows, dtype, device, end)
        return kb, vb

    def append(self, layer: int, k: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
        """Write the new positions' keys and values (B, H_kv, T, D) of `layer` after the
        cached ones; return views of all of them (in k's dtype when the cache's differs)."""
        start, end = self.length, self.length + k.shape[2]
        b, h, _, d = k.shape
        kb, vb = self.reserve(layer, (b, h, d), k.dtype, k.device, end)
        kb[:, :, start:end] = k
        vb[:, :, start:end] = v
        ks, vs = kb[:, :, :end], vb[:, :, :end]
        if ks.dtype != k.dtype:
            ks, vs = ks.to(k.dtype), vs.to(v.dtype)
        return ks, vs


def _float_linear(weight: Tensor) -> _nn.Linear:
    """A bias-free float Linear whose weight is `weight` (out, in), not copied."""
    # A 1x1 layer whose weight is then replaced: skips the random initialization of a
    # full-size Linear that the checkpoint overwrites anyway.
    lin = _nn.Linear(1, 1, bias=False)
    lin.weight = weight if isinstance(weight, _nn.Parameter) else _nn.Parameter(weight, requires_grad=False)
    lin.out_features, lin.in_features = weight.shape
    return lin


def _linear(w: QTensor, dequantize: bool) -> _nn.Module:
    """A bias-free projection with the weight `w` (out, in): packed, or float32."""
    return _float_linear(w.dequantize()) if dequantize else _nn.QuantizedLinear.from_qtensor(w)


def _norm(w: QTensor, eps: float) -> _nn.RMSNorm:
    norm = _nn.RMSNorm(w.shape[0], eps=eps)
    norm.weight = _nn.Parameter(w.dequantize(), requires_grad=False)
    return norm


class Projections(_nn.Module):
    """Several bias-free projections of one input (a layer's q, k and v; gate and up):
    one matmul with their weights joined along the output dim when they share a dtype
    (`quantized.cat`: the same blocks, so the same results), else one each. Returns
    the outputs in order. A decode step is mostly per-call costs: joining cuts a
    layer's matmul calls from 7 to 4."""

    def __init__(self, weights: Sequence[QTensor], dequantize: bool) -> None:
        super().__init__()
        self.sizes = [int(w.shape[0]) for w in weights]
        if dequantize:
            parts: List[_nn.Module] = [_float_linear(_core.cat([w.dequantize() for w in weights]))]
        elif len({w.dtype for w in weights}) == 1:
            parts = [_nn.QuantizedLinear.from_qtensor(qcat(list(weights)))]
        else:
            parts = [_nn.QuantizedLinear.from_qtensor(w) for w in weights]
        self.parts = _nn.ModuleList(parts)
        self.fused = len(parts) == 1 and len(weights) > 1

    def forward(self, x: Tensor) -> Tuple[Tensor, ...]:
        if self.fused:
            return tuple(self.parts[0](x).split(self.sizes, dim=-1))
        return tuple(p(x) for p in self.parts)


class LlamaAttention(_nn.Module):
    """Grouped-query self-attention with rotary positions (interleaved pairs, GGUF's layout)."""

    def __init__(self, cfg: LlamaConfig, qkv: Projections, o: _nn.Module) -> None:
        super().__init__()
        self.qkv_proj, self.o_proj = qkv, o
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Optional[Tensor], causal: bool, cache: Optional[KVCache], layer: int
    ) -> Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv_proj(x)
        q = q.reshape(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q = F.rotary_embedding(q, cos, sin, interleaved=True)
        k = F.rotary_embedding(k, cos, sin, interleaved=True)
        if cache is not None:
            k, v = cache.append(layer, k, v)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


class LlamaMLP(_nn.Module):
    """SwiGLU: `down(silu(gate(x)) * up(x))`."""

    def __init__(self, gate_up: Projections, down: _nn.Module) -> None:
        super().__init__()
        self.gate_up_proj, self.down_proj = gate_up, down

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up_proj(x)
        return self.down_proj(F.silu(gate) * up)


class LlamaBlock(_nn.Module):
    """Pre-norm transformer block: `x + attn(norm(x))`, then `x + mlp(norm(x))`."""

    def __init__(self, attn: LlamaAttention, mlp: LlamaMLP, input_norm: _nn.RMSNorm, post_norm: _nn.RMSNorm) -> None:
        super().__init__()
        self.self_attn, self.mlp = attn, mlp
        self.input_layernorm, self.post_attention_layernorm = input_norm, post_norm

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Optional[Tensor], causal: bool, cache: Optional[KVCache], layer: int
    ) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, causal, cache, layer)
        return x + self.mlp(self.post_attention_layernorm(x))

    def decode_step(self, x: Tensor, cache: KVCache, layer: int, inv_freq: Tensor) -> Optional[Tensor]:
        """This block's output for one new position per sequence (x (B, 1, hidden),
        at position `cache.length`) in one fused call (`_core._llama_decode_step`), or
        None when the fused step cannot stand in for `forward`: float (dequantized)
        or mixed projections, a bias, hooks on any module of the block, a weight that
        requires grad while grad mode is on, or modules replaced by other kinds.

        The block's structure is read afresh each call (a replaced module or weight
        takes effect at once), through the modules' dicts: a decode step makes this
        walk for every block, and `Module.__getattr__` would cost more than the step's
        Python side otherwise does."""
        sub = self.__dict__["_modules"]
        attn, mlp, n1, n2 = sub.get("self_attn"), sub.get("mlp"), sub.get("input_layernorm"), sub.get("post_attention_layernorm")
        if type(attn) is not LlamaAttention or type(mlp) is not LlamaMLP or type(n1) is not _nn.RMSNorm or type(n2) is not _nn.RMSNorm:
            return None
        am, mm = attn.__dict__["_modules"], mlp.__dict__["_modules"]
        qkv, o, gate_up, down = am.get("qkv_proj"), am.get("o_proj"), mm.get("gate_up_proj"), mm.get("down_proj")
        if type(qkv) is not Projections or type(gate_up) is not Projections:
            return None
        ql, gl = qkv.__dict__["_modules"].get("parts"), gate_up.__dict__["_modules"].get("parts")
        if type(ql) is not _nn.ModuleList or type(gl) is not _nn.ModuleList:
            return None
        qparts, gparts = list(ql.__dict__["_modules"].values()), list(gl.__dict__["_modules"].values())
        linears = (*qparts, *gparts, o, down)
        for p in linears:
            if type(p) is not _nn.QuantizedLinear or p.__dict__["_buffers"].get("bias") is not None:
                return None
        for m in (self, attn, mlp, n1, n2, qkv, gate_up, ql, gl, *linears):
            d = m.__dict__
            if d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"] or d["_backward_pre_hooks"]:
                return None
        w1, w2 = n1.__dict__["_parameters"].get("weight"), n2.__dict__["_parameters"].get("weight")
        eps = n1.eps
        if w1 is None or w2 is None or eps is None or eps != n2.eps:
            return None
        if (w1.requires_grad or w2.requires_grad or x.requires_grad) and is_grad_enabled():
            return None
        rows = (x.shape[0], attn.num_kv_heads, attn.head_dim)
        kb, vb = cache.reserve(layer, rows, x.dtype, x.device, cache.length + 1)
        return _core._llama_decode_step(
            x,
            kb,
            vb,
            cache.length,
            w1,
            w2,
            [p.weight for p in qparts],
            o.weight,  # type: ignore[union-attr]
            [p.weight for p in gparts],
            down.weight,  # type: ignore[union-attr]
            attn.num_heads,
            attn.num_kv_heads,
            eps,
            inv_freq,
        )


class LlamaForCausalLM(_nn.Module):
    """A Llama-family decoder with its language-model head.

    `model(input_ids, cache)` takes (B, T) token ids and returns (B, T, vocab) logits
    (only the last position's, (B, 1, vocab), with `last_only=True`). With a `KVCache`
    the ids continue the cached positions: a prompt is run once (prefill), then each
    new token alone (decode). Build it with `from_gguf`."""

    def __init__(self, config: LlamaConfig, tensors: Mapping[str, QTensor], dequantize: bool = False) -> None:
        super().__init__()
        self.config = cfg = config
        self.dequantized = dequantize

        def get(name: str) -> QTensor:
            if name not in tensors:
                raise ValueError(f"LlamaForCausalLM: the GGUF file has no tensor {name!r}")
            return tensors[name]

        emb = get("token_embd.weight")
        if tuple(emb.shape) != (cfg.vocab_size, cfg.hidden_size):
            raise ValueError(
                f"LlamaForCausalLM: token_embd.weight has shape {list(emb.shape)}, expected {[cfg.vocab_size, cfg.hidden_size]}"
            )
        if dequantize:
            self.embed_tokens: _nn.Module = _nn.Embedding.from_pretrained(emb.dequantize(), freeze=True)
        else:
            self.embed_tokens = _nn.QuantizedEmbedding.from_qtensor(emb)
        eps = cfg.rms_norm_eps
        layers = []
        for i in range(cfg.num_layers):
            p = f"blk.{i}."
            qkv = Projections([get(p + n + ".weight") for n in ("attn_q", "attn_k", "attn_v")], dequantize)
            attn = LlamaAttention(cfg, qkv, _linear(get(p + "attn_output.weight"), dequantize))
            gate_up = Projections([get(p + "ffn_gate.weight"), get(p + "ffn_up.weight")], dequantize)
            mlp = LlamaMLP(gate_up, _linear(get(p + "ffn_down.weight"), dequantize))
            layers.append(LlamaBlock(attn, mlp, _norm(get(p + "attn_norm.weight"), eps), _norm(get(p + "ffn_norm.weight"), eps)))
        self.layers = _nn.ModuleList(layers)
        self.norm = _norm(get("output_norm.weight"), eps)
        # No output.weight: the head is the embedding table (tied), one shared copy.
        self.tied = "output.weight" not in tensors
        if self.tied and dequantize:
            table = self.embed_tokens.weight
            assert isinstance(table, Tensor)  # dequantized: a float nn.Embedding
            self.lm_head: _nn.Module = _float_linear(table)
        else:
            self.lm_head = _linear(emb if self.tied else tensors["output.weight"], dequantize)
        self._rope_base = self._inv_freq(cfg, tensors.get("rope_freqs.weight"))
        self._rope_len = 0
        self._cos = self._sin = self._rope_base

    @staticmethod
    def _inv_freq(cfg: LlamaConfig, factors: Optional[QTensor]) -> Tensor:
        """Per-pair angular speeds `theta^(-2i/D)` in float32 (as transformers computes
        them), divided by the file's `rope_freqs` factors (Llama 3.1's scaling) and the
        linear scaling factor."""
        d = cfg.head_dim
        inv = 1.0 / (cfg.rope_theta ** (_core.arange(0, d, 2, dtype=_core.float32) / d))
        if factors is not None:
            inv = inv / factors.dequantize().reshape(-1)
        return inv / cfg.rope_linear_factor

    def _rope_tables(self, start: int, count: int) -> Tuple[Tensor, Tensor]:
        """cos/sin of positions [start, start + count), from tables grown by doubling."""
        end = start + count
        if end > self._rope_len:
            n = max(end, 2 * self._rope_len, 256)
            ang = _core.arange(n, dtype=_core.float32).unsqueeze(1) * self._rope_base.unsqueeze(0)
            self._cos, self._sin, self._rope_len = ang.cos(), ang.sin(), n
        return self._cos[start:end], self._sin[start:end]

    @classmethod
    def from_gguf(cls, path: PathLike, dequantize: bool = False, device: Any = None) -> "LlamaForCausalLM":
        """Load a Llama-architecture GGUF file (tensors and metadata: see `load_gguf`)."""
        tensors, meta = load_gguf(path, device)
        return cls.from_tensors(tensors, meta, dequantize)

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, QTensor], metadata: Mapping[str, Any], dequantize: bool = False) -> "LlamaForCausalLM":
        """The model from `load_gguf`'s two results."""
        emb = tensors.get("token_embd.weight")
        cfg = LlamaConfig.from_gguf_metadata(metadata, None if emb is None else emb.shape[0])
        return cls(cfg, tensors, dequantize)

    def new_cache(self, dtype: Any = None) -> KVCache:
        """An empty key/value cache for this model. `dtype`: the cache's, by default
        float16 for quantized weights (llama.cpp's default: half the memory traffic of
        a decode step, within the quantized path's agreement) and float32 for
        dequantized ones (which reproduce transformers' float32 numbers)."""
        if dtype is None:
            dtype = _core.float32 if self.dequantized else _core.float16
        return KVCache(self.config.num_layers, dtype=dtype)

    def forward(self, input_ids: Tensor, cache: Optional[KVCache] = None, last_only: bool = False) -> Tensor:
        if input_ids.ndim != 2:
            raise ValueError(f"LlamaForCausalLM: expected input_ids of shape [B, T], got {list(input_ids.shape)}")
        t = input_ids.shape[1]
        past = 0 if cache is None else cache.length
        if t == 0:
            raise ValueError("LlamaForCausalLM: input_ids has no positions")
        cos, sin = self._rope_tables(past, t)
        mask, causal = None, t > 1 and past == 0
        if t > 1 and past > 0:
            # New positions after cached ones: causal mask aligned to the bottom right.
            mask = _core.ones(t, past + t, dtype=_core.bool).tril(past)
        x = self.embed_tokens(input_ids)
        # One new position with a cache (a decode step): each block in one fused call
        # where it can take it (quantized weights, CPU float32, no hooks), else composed.
        fused = t == 1 and x.dtype == _core.float32 and x.device.type == "cpu"
        for i, layer in enumerate(self.layers):
            y = layer.decode_step(x, cache, i, self._rope_base) if fused and cache is not None and type(layer) is LlamaBlock else None
            x = layer(x, cos, sin, mask, causal, cache, i) if y is None else y
        if cache is not None:
            cache.length += t
        if last_only:
            x = x[:, -1:]
        return self.lm_head(self.norm(x))  # type: ignore[no-any-return]

    @no_grad()
    def logits(self, ids: List[int]) -> Tensor:
        """The next-token logits (vocab,) after the token ids `ids`, without a cache."""
        return self(_core.tensor([ids]), last_only=True)[0, 0]

    def extra_repr(self) -> str:
        c = self.config
        return (
            f"layers={c.num_layers}, hidden={c.hidden_size}, heads={c.num_heads}/{c.num_kv_heads}, "
            f"vocab={c.vocab_size}, tied={self.tied}, dequantized={self.dequantized}"
        )
