"""`backends.cpu.get_cpu_capability()` and the `CANDLE_PY_MAX_ISA` cap.

The wheel carries plain, AVX2 and AVX-512 variants of our kernels and picks one at
run time. Capping the level makes the slower variants run on this CPU: each run is
a fresh process (the level is read once) whose results must match NumPy's math and
the uncapped run's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp

LEVELS = ["DEFAULT", "AVX2", "AVX512"]

# Softmax, norms, activations, a reduction, attention and a loss with its backward:
# one call into each runtime-dispatched kernel family, on sizes that take the SIMD
# loops and their tails (37 is not a multiple of 8 or 16).
SCRIPT = """
import sys
import numpy as np
import candle_py as cp
import candle_py.nn.functional as F
rng = np.random.default_rng(0)
x = cp.from_numpy(rng.standard_normal((5, 37)).astype(np.float32)).requires_grad_()
w = cp.from_numpy(rng.standard_normal(37).astype(np.float32))
q = cp.from_numpy(rng.standard_normal((2, 3, 19, 16)).astype(np.float32))
bn = cp.from_numpy(rng.standard_normal((4, 3, 5, 7)).astype(np.float32))
target = cp.tensor([1, 0, 36, 5, 2])
out = {
    "softmax": F.softmax(x, dim=-1),
    "layer_norm": F.layer_norm(x, (37,), weight=w),
    "gelu": F.gelu(x),
    "silu": F.silu(x),
    "sum": x.sum(dim=1),
    "batch_norm": F.batch_norm(bn, None, None, training=True),
    "sdpa": F.scaled_dot_product_attention(q, q, q),
}
loss = F.cross_entropy(x, target)
loss.backward()
out["loss"] = loss
out["grad"] = x.grad
np.savez(sys.argv[1], capability=cp.backends.cpu.get_cpu_capability(), **{k: v.detach().numpy() for k, v in out.items()})
"""


def _run(tmp_path: Path, cap: str | None) -> tuple[dict[str, np.ndarray], str]:
    env = dict(os.environ)
    env.pop("CANDLE_PY_MAX_ISA", None)
    if cap is not None:
        env["CANDLE_PY_MAX_ISA"] = cap
    path = tmp_path / f"{cap}.npz"
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    with np.load(path) as f:
        return {k: f[k] for k in f.files}, run.stderr


def _uncapped() -> str:
    # This process may itself run under a cap (the CI's AVX2 run): ask a fresh one.
    env = {k: v for k, v in os.environ.items() if k != "CANDLE_PY_MAX_ISA"}
    code = "import candle_py as cp; print(cp.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_capability_is_one_of_torchs_names() -> None:
    assert cp.backends.cpu.get_cpu_capability() in LEVELS
    cap = os.environ.get("CANDLE_PY_MAX_ISA", "").lower()
    if cap in ("sse4.2", "avx2"):
        assert LEVELS.index(cp.backends.cpu.get_cpu_capability()) <= LEVELS.index("AVX2" if cap == "avx2" else "DEFAULT")


@pytest.mark.parametrize("cap, ceiling", [("sse4.2", "DEFAULT"), ("avx2", "AVX2"), ("AVX512", "AVX512")])
def test_cap_lowers_the_level_and_keeps_the_results(tmp_path: Path, cap: str, ceiling: str) -> None:
    best = _uncapped()
    capped, _ = _run(tmp_path, cap)
    full, _ = _run(tmp_path, None)
    want = LEVELS[min(LEVELS.index(best), LEVELS.index(ceiling))]
    assert str(capped.pop("capability")) == want
    assert str(full.pop("capability")) == best
    for name, value in full.items():
        # The SIMD variants use a polynomial exp and fused multiply-adds: not bit-equal.
        np.testing.assert_allclose(capped[name], value, rtol=2e-5, atol=2e-6, err_msg=name)
    x = np.random.default_rng(0).standard_normal((5, 37)).astype(np.float32).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(capped["softmax"], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(capped["sum"], x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_unknown_cap_is_reported_and_ignored(tmp_path: Path) -> None:
    capped, stderr = _run(tmp_path, "avx3")
    assert 'ignoring CANDLE_PY_MAX_ISA="avx3"' in stderr
    assert str(capped["capability"]) == _uncapped()
