"""Resident memory stays flat over many small ops and many training steps.

    python tools/leak_check.py [--small-ops 100000] [--train-steps 1000] [--tolerance 0.05]

Phase 1 runs `--small-ops` calls of small tensor ops (arithmetic, reductions,
views, indexing, creation, NumPy round trips, tiny autograd); phase 2 runs
`--train-steps` iterations of forward + backward + Adam step on a small
network with LayerNorm, Conv1d and Linear layers. Each phase warms up first
(allocator pools, caches), then compares RSS (from /proc/self/statm) after
the run with RSS after warm-up. Prints one JSON line and exits 1 if a phase
grew by more than `--tolerance` (relative). tests/test_leaks.py runs it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import numpy as np

import candle_py as cp
from candle_py import nn


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def small_ops(n_calls: int) -> None:
    """`n_calls` calls to the small-op API, about 20 different ones."""
    a = cp.randn(8, 8)
    b = cp.randn(8, 8)
    v = cp.arange(16, dtype=cp.float32)
    idx = cp.tensor([0, 3, 5])
    w = cp.randn(4, requires_grad=True)
    arr = np.ones((4, 4), np.float32)
    ops = [
        lambda: a + b,
        lambda: a * 2.0,
        lambda: a @ b,
        lambda: a.sum(dim=1),
        lambda: a.mean(),
        lambda: a.max(dim=0),
        lambda: cp.relu(a),
        lambda: a.exp(),
        lambda: a.reshape(4, 16),
        lambda: a.t().contiguous(),
        lambda: a[1:5, ::2],
        lambda: v[idx],
        lambda: a > b,
        lambda: cp.tensor([1.0, 2.0, 3.0]),
        lambda: cp.zeros(3, 3),
        lambda: cp.from_numpy(arr),
        lambda: a.numpy(),
        lambda: a.softmax(dim=-1),
        lambda: cp.cat([a, b]),
        lambda: (w * w).sum().backward(),
    ]
    k = len(ops)
    for i in range(n_calls):
        ops[i % k]()
    w.grad = None


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.norm = nn.LayerNorm(16)
        self.fc1 = nn.Linear(8 * 16, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        h = self.norm(cp.relu(self.conv(x)))
        return self.fc2(cp.tanh(self.fc1(h.flatten(1))))


def train_steps(model: nn.Module, opt, n_steps: int, x, y) -> float:
    loss = None
    for _ in range(n_steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return float(loss.item()) if loss is not None else float("nan")


def measure(run, warm: int, n: int) -> dict:
    run(warm)
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    run(n)
    seconds = time.perf_counter() - t0
    gc.collect()
    after = rss_bytes()
    return {
        "n": n,
        "rss_before_mb": round(before / 2**20, 2),
        "rss_after_mb": round(after / 2**20, 2),
        "growth": round((after - before) / before, 4),
        "seconds": round(seconds, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small-ops", type=int, default=100_000)
    ap.add_argument("--train-steps", type=int, default=1000)
    ap.add_argument("--tolerance", type=float, default=0.05)
    args = ap.parse_args(argv)

    cp.manual_seed(0)
    res = {"small_ops": measure(small_ops, warm=max(args.small_ops // 10, 1000), n=args.small_ops)}

    model = Tiny()
    opt = cp.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = cp.from_numpy(rng.standard_normal((32, 4, 16)).astype(np.float32))
    y = cp.tensor(rng.integers(0, 3, 32))
    res["train_steps"] = measure(lambda n: train_steps(model, opt, n, x, y), warm=max(args.train_steps // 10, 50), n=args.train_steps)
    res["ok"] = all(r["growth"] <= args.tolerance for r in (res["small_ops"], res["train_steps"]))
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
