"""DataLoader worker processes: one epoch over a dataset whose `__getitem__` is slow
Python (a decode-like CPU loop plus a short I/O wait per item), with 0, 1 and 2
workers, on candle_py and on torch in the same run (interleaved rounds, medians),
as times and as the speed-up over in-process loading. Also the cost of moving a
batch of tensors between processes (a dataset that is fast but returns big items),
by shared-memory files (candle_py's default for tensors of 64 KiB and more) and by
pickle (`candle_py pickle`: the threshold raised so that every tensor is pickled).

Benchmark on a quiet machine only: the script prints the 1-minute load average and
refuses to run above 0.3 unless `--force` is given.

Run: python benches/bench_dataloader.py [--force]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
from _harness import fmt_time, interleaved, try_torch

torch = try_torch()
ITEMS, BATCH = 64, 8


class SlowItems:
    """Each item: ~2 ms of Python work and a 2 ms wait (reading a file, say)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> Any:
        acc = 0
        for k in range(20000):
            acc += (k * i) % 7
        time.sleep(0.002)
        return self.lib.tensor(np.full((3, 32, 32), float(acc % 5), dtype=np.float32))


class BigItems:
    """Fast items of 1 MiB each: the transport between processes dominates."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.data = np.random.default_rng(0).standard_normal((ITEMS, 256, 1024)).astype(np.float32)

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> Any:
        return self.lib.tensor(self.data[i])


def epoch(lib: Any, ds: Any, workers: int, pickle_only: bool = False) -> Callable[[], object]:
    loader = lib.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0)
    if pickle_only and workers > 0:
        # Start the persistent workers with every tensor below the shared-memory
        # threshold (forked workers copy the module's setting), then restore it.
        from candle_py.utils.data import _shared_memory

        saved, _shared_memory.MIN_BYTES = _shared_memory.MIN_BYTES, 1 << 62
        try:
            iter(loader)
        finally:
            _shared_memory.MIN_BYTES = saved

    def run() -> object:
        n = 0
        for b in loader:
            n += b.shape[0]
        assert n == ITEMS
        return n

    return run


def main() -> None:
    load = os.getloadavg()[0]
    print(f"load average (1 min) before the run: {load:.2f}")
    if load > 0.3 and "--force" not in sys.argv:
        sys.exit("the machine is busy (load > 0.3): benchmark results would not hold; use --force to run anyway")
    libs: Dict[str, Any] = {"candle_py": cp}
    if torch is not None:
        libs["torch"] = torch
    for title, make in (("slow __getitem__ (~4 ms/item)", SlowItems), ("1 MiB items (transport)", BigItems)):
        print(f"\n{title}: one epoch of {ITEMS} items, batch {BATCH}")
        rows = dict(libs)
        if make is BigItems:
            rows = {"candle_py": cp, "candle_py pickle": cp, **{k: v for k, v in libs.items() if k != "candle_py"}}
        fns = {f"{name} w={w}": epoch(lib, make(lib), w, name.endswith("pickle")) for name, lib in rows.items() for w in (0, 1, 2)}
        times = interleaved(fns, repeat=5, warmup=1, settle=0.2)
        print(f"{'':<18}{'w=0':>12}{'w=1':>12}{'w=2':>12}{'speed-up w=2':>14}")
        for name in rows:
            row = [times[f"{name} w={w}"] for w in (0, 1, 2)]
            print(f"{name:<18}" + "".join(f"{fmt_time(t):>12}" for t in row) + f"{row[0] / row[2]:>13.2f}x")
        if torch is not None:
            print("candle_py / torch: " + "  ".join(f"w={w} {times[f'candle_py w={w}'] / times[f'torch w={w}']:.2f}x" for w in (0, 1, 2)))


if __name__ == "__main__":
    main()
