"""A tokenizer built from a GGUF file's `tokenizer.*` metadata, on the `tokenizers` package.

Byte-level BPE vocabularies (`tokenizer.ggml.model == "gpt2"`, the Llama 3 / SmolLM /
Qwen family) become a `tokenizers.Tokenizer` with the file's tokens and merges, the
pre-tokenizer split its `tokenizer.ggml.pre` names, and the tokens the file marks as
control (type 3) added as special tokens, user-defined ones (type 4) as added tokens:
encodes and decodes as transformers' tokenizer for the same file. The chat template
(`tokenizer.chat_template`) is rendered with jinja2 as transformers renders it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

__all__ = ["GGUFTokenizer"]

# The pre-tokenizer splits llama.cpp names in `tokenizer.ggml.pre`. GPT-2's own regex
# is what `tokenizers`' ByteLevel pre-tokenizer applies by itself.
_GPT2 = None
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS: Dict[str, Optional[str]] = {
    **dict.fromkeys(("default", "gpt2", "gpt-2", "smollm", "phi-2", "roberta-bpe", "codeshell", "exaone"), _GPT2),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "falcon3", "pixtral", "dbrx"), _LLAMA3),
}
_CONTROL, _USER_DEFINED = 3, 4


def _byte_alphabet() -> Dict[int, str]:
    """GPT-2's printable spelling of each byte (the alphabet byte-level tokens are written in)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


class GGUFTokenizer:
    """Encode text to token ids and back, as the model a GGUF file holds was trained to read.

    `encode(text)` adds the BOS token when the file asks for it
    (`tokenizer.ggml.add_bos_token`); special tokens written in the text
    (`<|im_start|>`) are matched whole. `decode(ids)`, `decode_stream(ids)` (pieces as
    tokens arrive, multi-byte characters whole), `apply_chat_template(messages)`."""

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        try:
            from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("GGUFTokenizer needs the `tokenizers` package: pip install tokenizers") from e
        kind = metadata.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise NotImplementedError(f"GGUFTokenizer: tokenizer.ggml.model {kind!r} is not supported (only byte-level BPE, 'gpt2')")
        pre = metadata.get("tokenizer.ggml.pre", "default")
        if pre not in _SPLITS:
            raise NotImplementedError(f"GGUFTokenizer: pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported")
        tokens: List[str] = list(metadata["tokenizer.ggml.tokens"])
        types: Sequence[int] = metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        merges = [tuple(m.split(" ", 1)) for m in metadata.get("tokenizer.ggml.merges", ())]
        spelling = _byte_alphabet()
        alphabet = set(spelling.values())
        # Byte-level tokens are written in GPT-2's byte alphabet; a token spelled with
        # other characters (some converters leave them raw) is respelled from its UTF-8 bytes.
        vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")): i for i, t in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        split = _SPLITS[pre]
        if split is None:
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        else:
            from tokenizers import Regex

            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(split), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
            )
        tok.decoder = decoders.ByteLevel()
        # A control token spelled outside the byte alphabet is a mislabel (it could never
        # come out of the byte-level model); transformers leaves those out too.
        tok.add_special_tokens(
            [AddedToken(t, normalized=False, special=True) for t, k in zip(tokens, types) if k == _CONTROL and set(t) <= alphabet]
        )
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t, k in zip(tokens, types) if k == _USER_DEFINED])
        self._tok = tok
        self.tokens = tokens
        self.vocab_size = len(tokens)
        self.bos_token_id: Optional[int] = metadata.get("tokenizer.ggml.bos_token_id")
        self.eos_token_id: Optional[int] = metadata.get("tokenizer.ggml.eos_token_id")
        eot = metadata.get("tokenizer.ggml.eot_token_id")
        self.stop_token_ids = frozenset(i for i in (self.eos_token_id, eot) if i is not None)
        """Ids that end a generation: EOS, and the end-of-turn token when the file names one."""
        self.add_bos_token = bool(metadata.get("tokenizer.ggml.add_bos_token", False))
        self.add_eos_token = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
        self.chat_template: Optional[str] = metadata.get("tokenizer.chat_template")

    @classmethod
    def from_gguf(cls, path: Any) -> "GGUFTokenizer":
        """The tokenizer of the GGUF file at `path`."""
        from ..quantized import load_gguf

        return cls(load_gguf(path)[1])

    def _name(self, i: Optional[int]) -> Optional[str]:
        return None if i is None or not 0 <= i < self.vocab_size else self.tokens[i]

    @property
    def bos_token(self) -> Optional[str]:
        """The BOS token's text (None when the file names none)."""
        return self._name(self.bos_token_id)

    @property
    def eos_token(self) -> Optional[str]:
        """The EOS token's text (None when the file names none)."""
        return self._name(self.eos_token_id)

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Token ids of `text`; with `add_special_tokens`, BOS/EOS where the file asks for them."""
        if not isinstance(text, str):
            raise TypeError(f"GGUFTokenizer.encode: expected a str, got {type(text).__name__}")
        ids: List[int] = self._tok.encode(text, add_special_tokens=False).ids
        if add_special_tokens:
            if self.add_bos_token and self.bos_token_id is not None:
                ids = [self.bos_token_id, *ids]
            if self.add_eos_token and self.eos_token_id is not None:
                ids = [*ids, self.eos_token_id]
        return ids

    def _check_ids(self, ids: Sequence[int]) -> List[int]:
        out = [int(i) for i in ids]
        bad = [i for i in out if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"GGUFTokenizer.decode: token id {bad[0]} is outside the vocabulary of {self.vocab_size}")
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of the token ids `ids` (special tokens kept unless `skip_special_tokens`)."""
        return self._tok.decode(self._check_ids(ids), skip_special_tokens=skip_special_tokens)  # type: ignore[no-any-return]

    def decode_stream(self, ids: Iterable[int], skip_special_tokens: bool = False) -> Iterator[str]:
        """Text pieces as the ids of `ids` arrive (e.g. from `generate`): a piece comes out
        once its characters are complete, so a character split over several byte tokens
        comes out whole. The pieces join to `decode` of all the ids."""
        from tokenizers.decoders import DecodeStream

        stream = DecodeStream(skip_special_tokens=skip_special_tokens)
        for i in ids:
            piece = stream.step(self._tok, self._check_ids([i])[0])
            if piece:
                yield piece

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, tokenize: bool = False, **kwargs: Any
    ) -> Any:
        """The file's chat template (`tokenizer.chat_template`) rendered for `messages`
        (`[{"role": "user", "content": "..."}]`), as transformers renders it (jinja2,
        sandboxed; `bos_token`/`eos_token` defined; extra keyword arguments passed to the
        template). Returns the text, or its token ids (no BOS added) with `tokenize=True`."""
        if not self.chat_template:
            raise ValueError("apply_chat_template: the GGUF file has no tokenizer.chat_template")
        try:
            from jinja2 import TemplateError
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("apply_chat_template needs jinja2: pip install jinja2") from e

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.globals["raise_exception"] = raise_exception
        text = env.from_string(self.chat_template).render(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "",
            eos_token=self.eos_token or "",
            **kwargs,
        )
        return self.encode(text, add_special_tokens=False) if tokenize else text
