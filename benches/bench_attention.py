"""Benchmark of `F.scaled_dot_product_attention`: candle_py's fused kernel, torch's
SDPA, and the unfused formula `softmax(Q K^T / sqrt(d) + mask) V` written with
candle_py ops, side by side in one run. Times are medians of interleaved rounds
(each round runs every implementation once, so machine noise hits all alike).
"fwd" runs without autograd; "fwd+bwd" is a forward then `(y * g).sum().backward()`
with q, k, v requiring grad. Then the peak extra RSS of one call at L=4096, each
implementation measured in a fresh subprocess.

Run: python benches/bench_attention.py [--quick] [--rss-only]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
import candle_py.nn.functional as F
from _harness import fmt_time, interleaved, try_torch

torch = try_torch()
QUICK = "--quick" in sys.argv


_CAUSAL: dict[tuple[int, int], cp.Tensor] = {}


def naive(q, k, v, mask, causal: bool):  # type: ignore[no-untyped-def]
    s = q @ k.transpose(-2, -1) * (1.0 / q.shape[-1] ** 0.5)
    if causal:
        L, S = s.shape[-2], s.shape[-1]
        if (L, S) not in _CAUSAL:  # made once, outside the timed calls after the warm-up
            _CAUSAL[(L, S)] = cp.from_numpy(np.triu(np.full((L, S), -1e30, np.float32), 1))
        s = s + _CAUSAL[(L, S)]
    if mask is not None:
        s = s + mask
    return F.softmax(s, dim=-1) @ v


def bench(shape: tuple[int, int, int, int], kind: str, repeat: int, with_naive: bool) -> list[tuple]:
    rng = np.random.default_rng(0)
    L = shape[2]
    qn, kn, vn, gn = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    mn = rng.standard_normal((L, L)).astype(np.float32) if kind == "masked" else None
    causal = kind == "causal"
    q, k, v, g = (cp.from_numpy(a) for a in (qn, kn, vn, gn))
    m = cp.from_numpy(mn) if mn is not None else None
    qg, kg, vg = (cp.from_numpy(a).requires_grad_(True) for a in (qn, kn, vn))

    def c_fwd() -> None:
        with cp.no_grad():
            F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)

    def c_bwd() -> None:
        for t in (qg, kg, vg):
            t.grad = None
        (F.scaled_dot_product_attention(qg, kg, vg, attn_mask=m, is_causal=causal) * g).sum().backward()

    def n_fwd() -> None:
        with cp.no_grad():
            naive(q, k, v, m, causal)

    def n_bwd() -> None:
        for t in (qg, kg, vg):
            t.grad = None
        (naive(qg, kg, vg, m, causal) * g).sum().backward()

    fwd: dict[str, Optional[Callable[[], object]]] = {"fused": c_fwd, "torch": None, "naive": n_fwd if with_naive else None}
    bwd: dict[str, Optional[Callable[[], object]]] = {"fused": c_bwd, "torch": None, "naive": n_bwd if with_naive else None}
    if torch is not None:
        tq, tk, tv, tg = (torch.from_numpy(a) for a in (qn, kn, vn, gn))
        tm = torch.from_numpy(mn) if mn is not None else None
        tqg, tkg, tvg = (torch.from_numpy(a).clone().requires_grad_(True) for a in (qn, kn, vn))
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def t_fwd() -> None:
            with torch.no_grad():
                sdpa(tq, tk, tv, attn_mask=tm, is_causal=causal)

        def t_bwd() -> None:
            for t in (tqg, tkg, tvg):
                t.grad = None
            (sdpa(tqg, tkg, tvg, attn_mask=tm, is_causal=causal) * tg).sum().backward()

        fwd["torch"], bwd["torch"] = t_fwd, t_bwd
    name = f"{shape} {kind}"
    rows = []
    for label, fns in (("fwd", fwd), ("fwd+bwd", bwd)):
        r = interleaved(fns, repeat=repeat)
        rows.append((f"{name} {label}", r["fused"], r["torch"], r["naive"]))
    return rows


_RSS = """
import json, resource, sys, numpy as np
impl, L, bwd = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def hwm():
    # Peak RSS of this process image in bytes. /proc's VmHWM starts afresh at exec;
    # getrusage's ru_maxrss is inherited across fork+exec from a bigger parent.
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
rng = np.random.default_rng(0)
arrs = [rng.standard_normal((1, 8, L, 64)).astype(np.float32) for _ in range(4)]
if impl == "torch":
    import torch
    q, k, v, g = (torch.from_numpy(a).requires_grad_(bwd) for a in arrs)
    f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    nog = torch.no_grad
else:
    import candle_py as cp, candle_py.nn.functional as F
    sys.path.insert(0, sys.argv[4]); from bench_attention import naive
    q, k, v, g = (cp.from_numpy(a).requires_grad_(bwd) for a in arrs)
    if impl == "fused":
        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        f = lambda: naive(q, k, v, None, True)
    nog = cp.no_grad
base = hwm()
if bwd:
    (f() * g).sum().backward()
else:
    with nog():
        f()
print(json.dumps(hwm() - base))
"""


def peak_rss(impl: str, L: int, bwd: bool) -> Optional[int]:
    if impl == "torch" and torch is None:
        return None
    res = subprocess.run(
        [sys.executable, "-c", _RSS, impl, str(L), "1" if bwd else "0", os.path.dirname(os.path.abspath(__file__))],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        print(res.stderr[-2000:], file=sys.stderr)
        return None
    return int(json.loads(res.stdout.strip().splitlines()[-1]))


def mib(b: Optional[int]) -> str:
    return "-" if b is None else f"{b / 2**20:.1f} MiB"


def main() -> None:
    print(f"candle_py {cp.__version__}; torch {torch.__version__ if torch else 'not installed'}; threads: {os.cpu_count()} cpus")
    rows = []
    for L in () if "--rss-only" in sys.argv else (1024, 4096):
        for kind in ("causal", "masked"):
            if QUICK and L == 4096 and kind == "masked":
                continue
            # L=1024 calls take ~10-60 ms: enough rounds that the median holds on a noisy box.
            rows += bench(
                (1, 8, L, 64),
                kind,
                repeat=(15 if L == 1024 else 3) if not QUICK else (9 if L == 1024 else 3),
                with_naive=not (QUICK and L == 4096),
            )
    print()
    print(f"| {'benchmark':<36} | {'fused':>10} | {'torch':>10} | {'fused/torch':>11} | {'naive cp':>10} | {'naive/fused':>11} |")
    print("|" + "-" * 38 + "|" + "-" * 12 + "|" + "-" * 12 + "|" + "-" * 13 + "|" + "-" * 12 + "|" + "-" * 13 + "|")
    for name, c, t, n in rows:
        r1 = f"{c / t:.2f}x" if t else "-"
        r2 = f"{n / c:.2f}x" if n else "-"
        print(f"| {name:<36} | {fmt_time(c):>10} | {fmt_time(t):>10} | {r1:>11} | {fmt_time(n):>10} | {r2:>11} |")
    print("\ntarget: fused forward at L=1024 at most 1.0x torch")
    print(
        "\nPeak extra RSS of one causal call at (1, 8, 4096, 64) (fresh subprocess each; "
        "inputs excluded; one L x S float32 score matrix per head set = 512 MiB):"
    )
    print(f"| {'implementation':<16} | {'fwd':>12} | {'fwd+bwd':>12} |")
    print("|" + "-" * 18 + "|" + "-" * 14 + "|" + "-" * 14 + "|")
    for impl in ("fused", "torch") + (() if QUICK else ("naive",)):
        print(f"| {impl:<16} | {mib(peak_rss(impl, 4096, False)):>12} | {mib(peak_rss(impl, 4096, True)):>12} |")


if __name__ == "__main__":
    main()
