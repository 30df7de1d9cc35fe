"""Quantized matmul `y = x @ W^T`: our kernels (src/ops/qmatmul) against Candle's
QMatMul and against the dequantized float32 matmul, per weight type, at the shapes of
SmolLM2-135M: decode GEMVs (M=1: 576->1536, 1536->576, and the 576->49152 output
head) and a prefill GEMM (M=512, 576->1536); q4k/q6k use 768 for 576 (their blocks
are 256 wide).

Candle's path is reached through the private `_core._qmatmul(x, w, "candle")`
(`"auto"` is what `quantized.matmul` / `F.linear` / `nn.QuantizedLinear` run).
For the GEMVs the table also gives the weight bytes streamed per second (GB/s).
Threads: the default pool (all cores) and one thread (`set_num_threads(1)`).

Timings on a shared machine are noisy: the script prints the load average and
refuses to run above 0.3 unless --force; numbers taken with --force are indicative.

Run: PYTHONPATH=python python benches/bench_qmatmul.py [--force] [--types q4_1,q8_0]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp  # noqa: E402
from _harness import fmt_time, interleaved  # noqa: E402
from candle_py import _core  # noqa: E402
from candle_py import quantized as Q  # noqa: E402

SHAPES = (
    ("gemv 576->1536", 1, 576, 1536),
    ("gemv 1536->576", 1, 1536, 576),
    ("gemv 576->49152", 1, 576, 49152),
    ("gemm M=512 576->1536", 512, 576, 1536),
)
TYPES = ("q4_0", "q4_1", "q8_0", "q4k", "q6k")
BYTES_PER_32 = {"q4_0": 18, "q4_1": 20, "q8_0": 34, "q4k": 18, "q6k": 26.25}


def bench(types: list[str], threads: int) -> None:
    cp.set_num_threads(threads)
    print(f"\n## {threads} thread(s)\n")
    print("| type | shape | ours | Candle | f32 (dequantized) | Candle/ours | f32/ours | ours GB/s |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for t in types:
        for name, m, k, n in SHAPES:
            if t in ("q4k", "q6k") and k % 256:
                # 576 is no multiple of the k-quants' 256: the nearest width that is.
                name, k = name.replace("576", "768"), 768
            w = Q.quantize(cp.from_numpy(rng.standard_normal((n, k)).astype(np.float32)), t)
            wd = w.dequantize()
            wdt = wd.t()
            x = cp.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
            rep = 5 if m > 1 or n > 10000 else 20
            number = 1 if m > 1 else (20 if n > 10000 else 200)
            r = interleaved(
                {"ours": lambda: _core._qmatmul(x, w, "auto"), "candle": lambda: _core._qmatmul(x, w, "candle"), "f32": lambda: x @ wdt},
                repeat=rep,
                number=number,
                settle=0.0,
            )
            gbs = f"{n * k / 32 * BYTES_PER_32[t] / r['ours'] / 1e9:.1f}" if m == 1 else "-"
            print(
                f"| {t} | {name} | {fmt_time(r['ours'])} | {fmt_time(r['candle'])} | {fmt_time(r['f32'])} | "
                f"{r['candle'] / r['ours']:.1f}x | {r['f32'] / r['ours']:.1f}x | {gbs} |",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="run even when the machine is busy (numbers indicative only)")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default: all cores, then 1)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"load average (1 min): {load:.2f}")
    if load > 0.3 and not args.force:
        sys.exit("machine busy (load > 0.3): timings would be noise; rerun with --force for indicative numbers")
    counts = [int(c) for c in args.threads.split(",")] if args.threads else [cp.get_num_threads(), 1]
    for c in counts:
        bench(args.types.split(","), c)


if __name__ == "__main__":
    main()
