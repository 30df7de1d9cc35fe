"""Two Python threads on large ops: the speed-up from releasing the GIL.

Each large op (matmul, elementwise, reduction, softmax, conv2d, a Linear
forward + backward) runs N times in one thread, then N/2 times in each of two
threads; speed-up = one-thread time / two-thread time (best of several
rounds). With the GIL released around the kernels the two threads run at
once, so on 2 cores the ideal is 2.0x.

Candle's kernels are themselves multi-threaded (rayon), which already uses both
cores from one Python thread; to see what the GIL release alone gives, the
first table runs each op with one kernel thread (RAYON_NUM_THREADS=1), the
second with the default. A pure-Python loop (which holds the GIL) is the
control: it cannot speed up.

Reading the first table: ops whose kernels are our own rayon loops (sum,
softmax, max) hand their work to rayon's pool, which RAYON_NUM_THREADS=1
shrinks to one worker shared by both Python threads, so they serialise there
even though the GIL is free; ops that run on the calling thread (gemm, Candle's
elementwise and conv paths) overlap fully. With default kernel threads both
cores are already busy inside one op, so two Python threads gain little.

Run: OPENBLAS_NUM_THREADS=1 python benches/bench_threads.py
Each configuration runs in a child process, because the rayon pool size is
fixed at start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

N = 8  # calls per measurement (split 4 + 4 across two threads)
ROUNDS = 5


def workloads():  # type: ignore[no-untyped-def]
    import numpy as np

    import candle_py as cp
    from candle_py import nn

    rng = np.random.default_rng(0)
    a = cp.from_numpy(rng.standard_normal((1024, 1024)).astype(np.float32))
    big = cp.from_numpy(rng.standard_normal((4096, 1024)).astype(np.float32))
    img = cp.from_numpy(rng.standard_normal((8, 32, 64, 64)).astype(np.float32))
    conv = nn.Conv2d(32, 64, 3, padding=1)
    lin = nn.Linear(1024, 1024)

    def lin_fwd_bwd():  # type: ignore[no-untyped-def]
        lin.zero_grad()
        lin(a).sum().backward()

    def python_loop():  # type: ignore[no-untyped-def]
        s = 0
        for i in range(200_000):
            s += i
        return s

    return {
        "matmul 1024x1024 @ 1024x1024": lambda: a @ a,
        "exp, 4M elements": lambda: big.exp(),
        "sum(dim=1), 4096x1024": lambda: big.sum(dim=1),
        "softmax(dim=-1), 4096x1024": lambda: big.softmax(dim=-1),
        "conv2d 8x32x64x64, 64 filters 3x3": lambda: conv(img),
        "Linear 1024->1024 fwd+bwd, batch 1024": lin_fwd_bwd,
        "control: pure-Python loop (holds the GIL)": python_loop,
    }


def _one_thread(fn, n: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _two_threads(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    barrier = threading.Barrier(3)

    def job() -> None:
        barrier.wait()
        for _ in range(n // 2):
            fn()

    ts = [threading.Thread(target=job) for _ in range(2)]
    for t in ts:
        t.start()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, time.process_time() - c0


def child() -> None:
    out = {}
    for name, fn in workloads().items():
        fn()  # warm up
        one = min(_one_thread(fn, N) for _ in range(ROUNDS))
        two = min(_two_threads(fn, N) for _ in range(ROUNDS))
        # CPU seconds per wall second while two threads run: how many cores
        # they kept busy at once (1.0 = serialised, as under the GIL).
        out[name] = (one[0] / N, two[0] / N, two[1] / two[0])
    print(json.dumps(out))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    print(
        f"cpus={os.cpu_count()}; {N} calls per measurement, best of {ROUNDS}; "
        "time per call; speed-up = 1 thread / 2 threads; "
        "cores busy = CPU time / wall time with 2 threads (other processes on the machine lower it)"
    )
    configs = [
        ("RAYON_NUM_THREADS=1 (kernels single-threaded: the GIL release alone)", {"RAYON_NUM_THREADS": "1"}),
        ("default kernel threads", {}),
    ]
    for title, extra in configs:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", **extra)
        env.pop("RAYON_NUM_THREADS", None) if not extra else None
        r = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True, check=True)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"\n{title}")
        print(f"| {'op':<44} | {'1 thread':>10} | {'2 threads':>10} | {'speed-up':>8} | cores busy |")
        print("|" + "-" * 46 + "|" + "-" * 12 + "|" + "-" * 12 + "|" + "-" * 10 + "|------------|")
        for name, (one, two, busy) in res.items():
            print(f"| {name:<44} | {one * 1e3:>7.2f} ms | {two * 1e3:>7.2f} ms | {one / two:>7.2f}x | {busy:>10.2f} |")


if __name__ == "__main__":
    main()
