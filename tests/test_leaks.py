"""Resident memory stays flat: no leak per op or per training step.

Runs tools/leak_check.py in a child process (a clean RSS baseline): 100,000
small-op calls and 1,000 forward + backward + Adam steps, each after a
warm-up; RSS after each run must be within 5% of RSS after its warm-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "leak_check.py"


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
def test_rss_flat_over_small_ops_and_training_steps():
    r = subprocess.run(
        [sys.executable, str(TOOL), "--small-ops", "100000", "--train-steps", "1000", "--tolerance", "0.05"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.stdout.strip(), r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["small_ops"]["n"] == 100_000 and res["train_steps"]["n"] == 1000
    assert res["small_ops"]["growth"] <= 0.05, res
    assert res["train_steps"]["growth"] <= 0.05, res
    assert r.returncode == 0, r.stderr[-2000:]


def _thp_mode() -> str:
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return "unavailable"
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else "unavailable"


@pytest.mark.skipif(_thp_mode() not in ("always", "madvise"), reason="transparent huge pages are off here")
def test_large_results_are_mapped_with_huge_pages():
    """A 64 MiB result is asked for huge pages (src/alloc.rs): mapping it in 4 KiB pages
    takes 16,384 page faults, about a third of a softmax's time at this size."""
    import resource

    import candle_py as cp

    x = cp.randn(16, 1024, 1024)
    x.softmax(-1)  # warm-up: one-time allocations of the op's own
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    y = x.softmax(-1)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert y.shape == (16, 1024, 1024)
    assert faults < 16_384 // 4, f"{faults} page faults for a 64 MiB result"
