"""Tensor benchmarks, candle_py side by side with torch in one run.

Ratios are candle_py time / torch time (lower is better), medians of repeats.
Run: python benches/bench_tensor.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _harness import median_time, print_table, try_torch  # noqa: E402

import candle_py as cp  # noqa: E402

torch = try_torch()


def main() -> None:
    rows = []
    print(f"threads: torch={torch.get_num_threads() if torch else '-'}, cpus={os.cpu_count()}")

    # 1. dispatch of a + b on two (4,) tensors
    a, b = cp.rand(4), cp.rand(4)
    c_t = median_time(lambda: a + b, number=20000, repeat=7)
    t_t = None
    if torch:
        ta, tb = torch.rand(4), torch.rand(4)
        t_t = median_time(lambda: ta + tb, number=20000, repeat=7)
    rows.append(("dispatch a + b, (4,) float32", c_t, t_t, "<= 0.3x"))

    # 2. from_numpy (copying import) and numpy() export of 1024x1024 float32
    arr = np.random.rand(1024, 1024).astype(np.float32)
    c_t = median_time(lambda: cp.from_numpy(arr), number=20)
    t_t = median_time(lambda: torch.tensor(arr), number=20) if torch else None
    rows.append(("import 1024x1024 f32 (cp.from_numpy vs torch.tensor)", c_t, t_t, "<= 1.5x"))

    for n in (1024, 4096):
        x = cp.rand(n, n)
        c_t = median_time(lambda: x.numpy(), number=2000)
        t_t = None
        if torch:
            tx = torch.rand(n, n)
            t_t = median_time(lambda: tx.numpy(), number=2000)
        rows.append((f"export numpy() {n}x{n} f32 (zero-copy)", c_t, t_t, "O(1)"))

    # 3. matmul 1024x1024
    m1, m2 = cp.rand(1024, 1024), cp.rand(1024, 1024)
    c_t = median_time(lambda: m1 @ m2, number=3)
    t_t = None
    if torch:
        tm1, tm2 = torch.rand(1024, 1024), torch.rand(1024, 1024)
        t_t = median_time(lambda: tm1 @ tm2, number=3)
    rows.append(("matmul 1024x1024 f32", c_t, t_t, "<= 0.9x"))

    # 4. softmax over the last dim of (64, 1024, 1024)
    s = cp.randn(64, 1024, 1024)
    c_t = median_time(lambda: s.softmax(-1), repeat=5)
    t_t = None
    if torch:
        ts = torch.randn(64, 1024, 1024)
        t_t = median_time(lambda: ts.softmax(-1), repeat=5)
    rows.append(("softmax(-1) of (64, 1024, 1024) f32", c_t, t_t, "<= 1.0x"))
    del s

    # 5. sum over dim 1 of (4096, 4096)
    r = cp.rand(4096, 4096)
    c_t = median_time(lambda: r.sum(1), number=5)
    t_t = None
    if torch:
        tr = torch.rand(4096, 4096)
        t_t = median_time(lambda: tr.sum(1), number=5)
    rows.append(("sum(dim=1) of (4096, 4096) f32", c_t, t_t, "<= 1.0x"))

    print_table(rows)


if __name__ == "__main__":
    main()
