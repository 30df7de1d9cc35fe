"""Shared timing helpers for the benchmarks: medians of repeated runs, and a
side-by-side table of candle_py against torch (when torch is installed)."""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional


def _rounds(fn: Callable[[], object], repeat: int, number: int, warmup: int) -> list[float]:
    """Seconds per call of `fn` in each of `repeat` rounds of `number` calls (back to back)."""
    return interleaved_rounds({"fn": fn}, repeat=repeat, number=number, warmup=warmup, settle=0.0)["fn"]


def median_time(fn: Callable[[], object], *, repeat: int = 7, number: int = 1, warmup: int = 1) -> float:
    """Median seconds per call of `fn` over `repeat` rounds of `number` calls."""
    return statistics.median(_rounds(fn, repeat, number, warmup))


def interleaved_rounds(
    fns: dict[str, Callable[[], object]], *, repeat: int, number: int = 1, warmup: int = 1, settle: float = 0.05
) -> dict[str, list[float]]:
    """Seconds per call of each function in each of `repeat` interleaved rounds: each
    round runs `number` calls of every function in turn, so a slow spell of a shared
    machine hits all sides alike.

    Each side's round starts after `settle` idle seconds: torch's OpenMP workers spin
    for a while after a parallel op (GOMP's default wait policy), and a round timed
    right after one shares the cores with those spinning threads (on 2 cores that made
    a multi-threaded `sum` look 25% slower than it is)."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            time.sleep(settle)
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            times[k].append((time.perf_counter() - t0) / number)
    return times


def interleaved(
    fns: dict[str, Optional[Callable[[], object]]], *, repeat: int, number: int = 1, warmup: int = 1, settle: float = 0.05
) -> dict[str, Optional[float]]:
    """Median seconds per call of each function (None where the function is None),
    from `interleaved_rounds`."""
    live = {k: f for k, f in fns.items() if f is not None}
    times = interleaved_rounds(live, repeat=repeat, number=number, warmup=warmup, settle=settle)
    return {k: (statistics.median(times[k]) if k in times else None) for k in fns}


def fmt_time(s: Optional[float]) -> str:
    if s is None:
        return "-"
    if s < 1e-6:
        return f"{s * 1e9:.0f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def print_table(rows: list[tuple[str, float, Optional[float], str]]) -> None:
    """rows: (name, candle seconds, torch seconds or None, target text)."""
    head = f"| {'benchmark':<44} | {'candle_py':>10} | {'torch':>10} | {'ratio':>6} | target |"
    print(head)
    print("|" + "-" * 46 + "|" + "-" * 12 + "|" + "-" * 12 + "|" + "-" * 8 + "|--------|")
    for name, c, t, target in rows:
        ratio = f"{c / t:.2f}x" if t else "-"
        print(f"| {name:<44} | {fmt_time(c):>10} | {fmt_time(t):>10} | {ratio:>6} | {target} |")


def try_torch():  # type: ignore[no-untyped-def]
    try:
        import torch

        return torch
    except Exception:  # pragma: no cover - torch is optional
        return None
