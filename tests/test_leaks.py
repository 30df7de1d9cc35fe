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
    r = subprocess.run([sys.executable, str(TOOL), "--small-ops", "100000", "--train-steps", "1000",
                        "--tolerance", "0.05"], capture_output=True, text=True, timeout=300)
    assert r.stdout.strip(), r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["small_ops"]["n"] == 100_000 and res["train_steps"]["n"] == 1000
    assert res["small_ops"]["growth"] <= 0.05, res
    assert res["train_steps"]["growth"] <= 0.05, res
    assert r.returncode == 0, r.stderr[-2000:]
