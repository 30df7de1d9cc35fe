"""Tensor benchmarks, candle_py side by side with torch in one run.

Ratios are candle_py time / torch time (lower is better): medians of interleaved
rounds (each round times both sides in turn, so a slow spell hits both).
Run: python benches/bench_tensor.py
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
from _harness import interleaved, median_time, print_table, try_torch

torch = try_torch()


def side_by_side(ours: Callable[[], object], theirs: Optional[Callable[[], object]], **kw: int) -> tuple[float, Optional[float]]:
    """candle_py's and torch's median seconds per call, timed in interleaved rounds."""
    r = interleaved({"ours": ours, "torch": theirs}, **kw)
    c = r["ours"]
    assert c is not None
    return c, r["torch"]


def main() -> None:
    rows = []
    print(f"threads: torch={torch.get_num_threads() if torch else '-'}, cpus={os.cpu_count()}")

    # 1. dispatch of a + b on two (4,) tensors
    a, b = cp.rand(4), cp.rand(4)
    ta, tb = (torch.rand(4), torch.rand(4)) if torch else (None, None)
    c_t, t_t = side_by_side(lambda: a + b, (lambda: ta + tb) if torch else None, number=20000, repeat=15)
    rows.append(("dispatch a + b, (4,) float32", c_t, t_t, "<= 0.3x"))

    # 2. from_numpy (copying import) and numpy() export of 1024x1024 float32
    arr = np.random.rand(1024, 1024).astype(np.float32)
    c_t, t_t = side_by_side(lambda: cp.from_numpy(arr), (lambda: torch.tensor(arr)) if torch else None, number=20, repeat=7)
    rows.append(("import 1024x1024 f32 (cp.from_numpy vs torch.tensor)", c_t, t_t, "<= 1.5x"))

    for n in (1024, 4096):
        x = cp.rand(n, n)
        tx = torch.rand(n, n) if torch else None
        c_t, t_t = side_by_side(lambda: x.numpy(), (lambda: tx.numpy()) if torch else None, number=2000, repeat=7)
        rows.append((f"export numpy() {n}x{n} f32 (zero-copy)", c_t, t_t, "O(1)"))

    # 3. matmul 1024x1024
    m1, m2 = cp.rand(1024, 1024), cp.rand(1024, 1024)
    tm1, tm2 = (torch.rand(1024, 1024), torch.rand(1024, 1024)) if torch else (None, None)
    c_t, t_t = side_by_side(lambda: m1 @ m2, (lambda: tm1 @ tm2) if torch else None, number=3, repeat=9)
    rows.append(("matmul 1024x1024 f32", c_t, t_t, "<= 0.9x"))

    # 4. softmax over the last dim of (64, 1024, 1024)
    s = cp.randn(64, 1024, 1024)
    ts = torch.randn(64, 1024, 1024) if torch else None
    c_t, t_t = side_by_side(lambda: s.softmax(-1), (lambda: ts.softmax(-1)) if torch else None, repeat=7)
    rows.append(("softmax(-1) of (64, 1024, 1024) f32", c_t, t_t, "<= 1.0x"))
    s = ts = None  # free the 256 MiB inputs before the next case

    # 5. sum over dim 1 of (4096, 4096)
    r = cp.rand(4096, 4096)
    tr = torch.rand(4096, 4096) if torch else None
    c_t, t_t = side_by_side(lambda: r.sum(1), (lambda: tr.sum(1)) if torch else None, number=5, repeat=9)
    rows.append(("sum(dim=1) of (4096, 4096) f32", c_t, t_t, "<= 1.0x"))

    # 6. mid-size ops (issue 21's list): where per-call overhead and the threading
    # policy, not the arithmetic, decide. Back-to-back calls in rounds of ~10 ms.
    def mid(name: str, ours: Callable[[], object], theirs: Optional[Callable[[], object]], target: str) -> None:
        ours()
        n = max(1, int(0.01 / max(median_time(ours, repeat=3), 1e-7)))
        c_t, t_t = side_by_side(ours, theirs, number=n, repeat=9)
        rows.append((name, c_t, t_t, target))

    def pair(*shape: int) -> tuple[object, object]:
        a = np.random.rand(*shape).astype(np.float32)
        return cp.from_numpy(a), (torch.from_numpy(a.copy()) if torch else None)

    lin, tlin = cp.nn.Linear(128, 384), (torch.nn.Linear(128, 384) if torch else None)
    x, tx = pair(8, 64, 128)
    with cp.no_grad():
        mid("Linear(128->384) on (8, 64, 128)", lambda: lin(x), (lambda: tlin(tx)) if torch else None, "<= 1.0x")
    a, ta = pair(512, 256)
    b, tb = pair(256, 512)
    mid("matmul 512x256 @ 256x512", lambda: a @ b, (lambda: ta @ tb) if torch else None, "<= 1.0x")
    g, tg = pair(1024, 1152)
    h, th = pair(1024, 384)
    mid("matmul 1152x1024 (transposed) @ 1024x384", lambda: g.t() @ h, (lambda: tg.t() @ th) if torch else None, "<= 1.0x")
    for bs in ((24, 256, 64, 256), (192, 65, 32, 65)):
        q, tq = pair(bs[0], bs[1], bs[2])
        k, tk = pair(bs[0], bs[2], bs[3])
        mid(f"bmm ({bs[0]},{bs[1]},{bs[2]}) @ ({bs[0]},{bs[2]},{bs[3]})", lambda: q @ k, (lambda: tq @ tk) if torch else None, "<= 1.0x")
    v, tv = pair(65536)
    mid("x + x, 65536 f32", lambda: v + v, (lambda: tv + tv) if torch else None, "<= 1.0x")
    for shp in ((8, 64, 128), (2048, 64)):
        y, ty = pair(*shp)
        mid(f"softmax(-1) of {shp}", lambda: y.softmax(-1), (lambda: ty.softmax(-1)) if torch else None, "<= 1.0x")
    # Stepped slices are strided views (as torch's): a rotary embedding's even/odd halves
    # go straight into the broadcast kernels.
    r, tr = pair(8, 256, 384)
    cs, tcs = pair(256, 192)

    def rot(x: Any, c: Any) -> Any:
        return x[..., ::2] * c - x[..., 1::2] * c

    mid("x[..., ::2] * c - x[..., 1::2] * c, (8, 256, 384)", lambda: rot(r, cs), (lambda: rot(tr, tcs)) if torch else None, "<= 1.0x")

    # 7. elementwise ops that were compositions of several passes (or libm per element,
    # or Candle's one-thread conversions), and scans and triangles that transposed or
    # built masks, on the same (8, 256, 384) tensor.
    e, te = pair(8, 256, 384)
    f, tf = pair(8, 256, 384)
    wt, twt = pair(8, 256, 384)
    lib_ops: list[tuple[str, Callable[[Any, Any, Any, Any], Any]]] = [
        ("sin", lambda L, x, y, w: x.sin()),
        ("clamp(-0.5, 0.5)", lambda L, x, y, w: x.clamp(-0.5, 0.5)),
        ("addcmul(value=0.5)", lambda L, x, y, w: L.addcmul(x, y, w, value=0.5)),
        ("lerp(y, tensor weight)", lambda L, x, y, w: x.lerp(y, w)),
        ("nan_to_num", lambda L, x, y, w: x.nan_to_num()),
        ("isnan", lambda L, x, y, w: x.isnan()),
        ("to(float16)", lambda L, x, y, w: x.to(L.float16)),
        ("to(bfloat16)", lambda L, x, y, w: x.to(L.bfloat16)),
        ("amax(-1)", lambda L, x, y, w: x.amax(-1)),
        ("topk(5, -1)", lambda L, x, y, w: x.topk(5, -1)),
        ("x // 0.3", lambda L, x, y, w: x // 0.3),
        ("x % y", lambda L, x, y, w: x % y),
        ("atan2(x, y)", lambda L, x, y, w: L.atan2(x, y)),
        ("cumsum(-1)", lambda L, x, y, w: x.cumsum(-1)),
        ("cumsum(1)", lambda L, x, y, w: x.cumsum(1)),
        ("tril()", lambda L, x, y, w: x.tril()),
    ]
    for name, op in lib_ops:
        mid(
            f"{name}, (8, 256, 384)",
            (lambda op=op: op(cp, e, f, wt)),
            (lambda op=op: op(torch, te, tf, twt)) if torch else None,
            "<= 1.0x",
        )

    print_table(rows)


if __name__ == "__main__":
    main()
