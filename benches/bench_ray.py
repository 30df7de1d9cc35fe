"""Ray throughput of examples/ray_embeddings.py: all-MiniLM-L6-v2 embeddings of a text
file, sentences/s with 1 actor and with 2 actors of 1 thread each (and 1 actor of 2
threads), on a local Ray; beside it the one-process examples/sentence_embeddings.py
with 1 and 2 threads, on the same file.

The rate reported is the steady one: each configuration runs the whole script on the
file and on a 2-line file (Ray start, actors, model loading, shutdown: the
"start-up"), and the rate is the extra sentences over the extra wall time. Each runs
`--repeat` times (medians).

Benchmark on a quiet machine only: the script prints the 1-minute load average and
refuses to run above 0.3 unless `--force` is given.

Run: python benches/bench_ray.py [--sentences 3000] [--repeat 3] [--force]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WORDS = "the a man woman dog cat eats plays runs under over quickly slowly music violin bread horse car city river mountain".split()


def write_sentences(path: Path, n: int) -> None:
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30))) + "\n")


def _wall(src: Path, actors: int, threads: int) -> float:
    out = src.parent / "ray.npy"
    cmd = [sys.executable, str(EXAMPLES / "ray_embeddings.py"), "--input", str(src), "--output", str(out)]
    cmd += ["--actors", str(actors), "--threads", str(threads), "--num-cpus", "2", "--rows-per-call", "128"]
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0


def ray_run(src: Path, tiny: Path, n: int, actors: int, threads: int) -> Tuple[float, float]:
    """(start-up seconds, steady sentences/s) of ray_embeddings.py on `src` (n lines)."""
    start = _wall(tiny, actors, threads)
    total = _wall(src, actors, threads)
    return start, (n - 2) / (total - start)


def local_run(src: Path, threads: int) -> float:
    """Sentences/s of sentence_embeddings.py in one process (model loading excluded)."""
    code = (
        "import sys, time, candle_py as cp; sys.path.insert(0, sys.argv[1]); import sentence_embeddings as se;"
        "cp.set_num_threads(int(sys.argv[3])); s = open(sys.argv[2]).read().splitlines(); se.get_encoder();"
        "t = time.perf_counter(); se.encode(s); print(len(s) / (time.perf_counter() - t))"
    )
    run = subprocess.run([sys.executable, "-c", code, str(EXAMPLES), str(src), str(threads)], capture_output=True, text=True, check=True)
    return float(run.stdout.strip())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sentences", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--force", action="store_true")
    args = p.parse_args()
    load = os.getloadavg()[0]
    print(f"load average (1 min) before the run: {load:.2f}")
    if load > 0.3 and not args.force:
        sys.exit("the machine is busy (load > 0.3): benchmark results would not hold; use --force to run anyway")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "sentences.txt"
        write_sentences(src, args.sentences)
        tiny = Path(tmp) / "tiny.txt"
        write_sentences(tiny, 2)
        print(f"{args.sentences} sentences, median of {args.repeat} runs\n")
        print(f"{'configuration':<40}{'start-up':>10}{'sentences/s':>14}")
        rows: List[Tuple[str, float, float]] = []
        for threads in (1, 2):
            rates = [local_run(src, threads) for _ in range(args.repeat)]
            rows.append((f"one process, {threads} thread(s)", float("nan"), statistics.median(rates)))
            print(f"{rows[-1][0]:<40}{'-':>10}{rows[-1][2]:>14.1f}", flush=True)
        for actors, threads in ((1, 1), (2, 1), (1, 2)):
            runs = [ray_run(src, tiny, args.sentences, actors, threads) for _ in range(args.repeat)]
            start, rate = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            rows.append((f"Ray, {actors} actor(s) x {threads} thread(s)", start, rate))
            print(f"{rows[-1][0]:<40}{start:>9.1f}s{rate:>14.1f}", flush=True)
            time.sleep(2)
        by = {r[0]: r[2] for r in rows}
        print(f"\nRay 2 actors / 1 actor: {by['Ray, 2 actor(s) x 1 thread(s)'] / by['Ray, 1 actor(s) x 1 thread(s)']:.2f}x")


if __name__ == "__main__":
    main()
