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


# MKL (inside torch's wheel) runs its AVX2 code on AMD CPUs: it asks
# `mkl_serv_intel_cpu_true()` and takes the Intel-only AVX-512 kernels only when that
# says yes. Measured on a 2-core Zen 5: torch's 1024^2 matmul took 9.9 ms on the stock
# path and 4.4 ms with the check answered yes, which halves every GEMM-bound ratio in
# our favour. Benchmarks therefore compare against torch's best path: on AMD they
# re-run themselves with a two-function library preloaded that answers yes (the
# symbols are exported by libtorch_cpu.so, so the dynamic linker binds MKL's calls to
# the preloaded ones). `--stock-mkl` keeps MKL's own choice.
_SHIM_C = "int mkl_serv_intel_cpu_true(void) { return 1; }\nint mkl_serv_intel_cpu(void) { return 1; }\n"
MKL_NOTE = "torch's MKL: stock"


def _amd_cpu() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "AuthenticAMD" in f.read(4096)
    except OSError:
        return False


def _mkl_shim() -> Optional[str]:
    """Path of the compiled shim (built once with `cc` into ~/.cache), or None."""
    import os
    import subprocess
    import tempfile

    d = os.path.join(os.path.expanduser("~"), ".cache", "candle_py_bench")
    so = os.path.join(d, "mkl_intel_cpu_shim.so")
    if os.path.exists(so):
        return so
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "shim.c")
        with open(src, "w") as f:
            f.write(_SHIM_C)
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", so, src], capture_output=True)
    return so if r.returncode == 0 else None


def unlock_torch_mkl() -> None:
    """On an AMD CPU, re-execute this script with MKL's Intel check answered yes (see
    `_SHIM_C`), unless `--stock-mkl` is given or torch is absent; sets `MKL_NOTE`."""
    import os
    import sys

    global MKL_NOTE
    pre = os.environ.get("LD_PRELOAD", "")
    if "mkl_intel_cpu_shim" in pre:
        MKL_NOTE = "torch's MKL: its Intel code paths (the Intel check answered yes on this AMD CPU; --stock-mkl keeps MKL's choice)"
        return
    if "--stock-mkl" in sys.argv or not _amd_cpu():
        MKL_NOTE = "torch's MKL: stock" + (" (AMD: MKL takes its AVX2 path)" if _amd_cpu() else "")
        return
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return
    so = _mkl_shim()
    if so is None:
        MKL_NOTE = "torch's MKL: stock (no C compiler to build the Intel-check shim)"
        return
    env = dict(os.environ, LD_PRELOAD=(so + " " + pre).strip())
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def try_torch():  # type: ignore[no-untyped-def]
    """torch, or None when it is not installed; on AMD first re-runs the script with
    torch's MKL on its best path (`unlock_torch_mkl`) and prints which path it is on."""
    unlock_torch_mkl()
    try:
        import torch

        print(MKL_NOTE)
        return torch
    except Exception:  # pragma: no cover - torch is optional
        return None
