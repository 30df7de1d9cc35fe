"""examples/torch_parity.py and examples/extra_ops.py run and print what they promise."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(name: str) -> str:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_torch_parity_example_matches_pytorch() -> None:
    out = run("torch_parity.py")
    assert "<All keys matched successfully>" in out
    err = float(re.search(r"max abs error over 20 outputs: (\S+)", out).group(1))  # type: ignore[union-attr]
    assert err < 1e-4


def test_extra_ops_example_prints_the_article_results() -> None:
    out = run("extra_ops.py")
    assert "linspace(0, 1, 5): tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])" in out
    assert "prod([1, 2, 3, 4]) = 24" in out
    assert "first query of head 0 attends only to itself: True" in out
    assert "same output from all three layouts: True True" in out
    table = "tensor([[ 0,  1,  2,  3,  4],\n        [ 5,  6,  7,  0,  1],\n        [10, 11, 12,  2,  3],\n        [15, 16, 17,  4,  5]])"
    assert table in out
    assert "gives the same table: True" in out
