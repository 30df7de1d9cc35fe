"""Long Hypothesis campaign over the public API (outside CI).

    python tools/fuzz_campaign.py [--cases 100000] [--chunk 2000] [--seed 0] [--out fuzz_report.json]

Runs the properties of tests/_fuzz.py (junk arguments to every public
function, method, layer, optimizer and helper; tensor-only arguments;
mutated safetensors bytes) for at least `--cases` generated cases in total.
Work is split into chunks, each run by a child process with its own seed, so
that a crash (abort, segfault, hang) kills one chunk only: the child logs each
case before running it, and the parent reports the case that was running
when the child died, then carries on with the next chunk.

Bad outcomes (an exception other than the documented ones, a bad message, a
crash) are grouped by API and problem; the report prints counts, time and
one example of each, and is also written as JSON. Exit status 1 if anything
was found.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Share of cases per property.
MIX = {"api_junk": 0.3, "plausible_args": 0.3, "layer_shapes": 0.15, "tensor_args": 0.15, "safetensors_bytes": 0.1}


def child(prop: str, n: int, seed: int, log_path: str) -> None:
    """Run `n` cases of one property, logging CASE/BAD lines to `log_path`."""
    # Guard the machine: no single case may take more than 8 GiB of address space.
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.RLIM_INFINITY))
    sys.path.insert(0, str(ROOT / "tests"))
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    import _fuzz

    log = open(log_path, "a", buffering=1)
    count = 0

    def record(name: str, what: str, problem: str) -> None:
        log.write(f"BAD\t{name}\t{problem}\t{what}\n")

    _fuzz.report = record
    fn = _fuzz.PROPERTIES[prop]

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def case(data):  # type: ignore[no-untyped-def]
        nonlocal count
        count += 1
        log.write(f"CASE\t{count}\n")
        what = fn(data)
        if count % 200 == 0:
            log.write(f"LAST\t{what}\n")

    # Hypothesis stops early once a property's search space looks exhausted;
    # repeat with new seeds until `n` cases ran.
    s = seed
    while count < n:
        before = count
        case()
        s += 7919
        case = hseed(s)(case)  # type: ignore[assignment]
        if count == before:
            break
    log.write(f"COUNT\t{count}\n")
    log.close()


def run_chunk(prop: str, n: int, seed: int, log_path: Path, timeout: float) -> tuple[int, list[tuple[str, str, str]], str]:
    """Returns (cases run, bad outcomes, crash description or '')."""
    env = dict(os.environ, RUST_BACKTRACE="0", PYTHONFAULTHANDLER="1", OPENBLAS_NUM_THREADS="1")
    if log_path.exists():
        log_path.unlink()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", prop, str(n), str(seed), str(log_path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=str(log_path.parent),
        )
        rc, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, err = "timeout", (e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or "")
    lines = log_path.read_text().splitlines() if log_path.exists() else []
    bad = [tuple(ln.split("\t", 3)[1:]) for ln in lines if ln.startswith("BAD\t")]
    counts = [ln for ln in lines if ln.startswith("COUNT\t")]
    if counts and rc == 0:
        return int(counts[-1].split("\t")[1]), bad, ""  # type: ignore[return-value]
    cases = [ln for ln in lines if ln.startswith("CASE\t")]
    last = [ln for ln in lines if ln.startswith("LAST\t")]
    marks = [ln for ln in err.splitlines() if "panicked" in ln or "Fatal" in ln or "abort" in ln.lower()]
    crash = (
        f"{prop} chunk seed={seed} died (rc={rc}) after {len(cases)} cases; "
        f"last logged case near: {last[-1].split(chr(9), 1)[1] if last else '?'}; {(marks or [err[-300:]])[0][:300]}"
    )
    return len(cases), bad, crash  # type: ignore[return-value]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per chunk")
    ap.add_argument("--out", default="fuzz_report.json")
    args = ap.parse_args()

    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"candle_py_fuzz_{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    total = collections.Counter()
    groups: dict[tuple[str, str], dict] = {}
    crashes: list[str] = []
    chunk_no = 0
    for prop, share in MIX.items():
        target = int(args.cases * share + 0.5)
        done = 0
        while done < target:
            n = min(args.chunk, target - done)
            seed = args.seed * 1_000_003 + chunk_no
            ran, bad, crash = run_chunk(prop, n, seed, work / f"chunk{chunk_no}.log", args.timeout)
            chunk_no += 1
            done += max(ran, 1)
            total[prop] += ran
            for name, problem, what in bad:
                key = (name, problem.split(":")[0][:80])
                g = groups.setdefault(key, {"api": name, "problem": problem, "example": what, "count": 0})
                g["count"] += 1
            if crash:
                crashes.append(crash)
            print(
                f"[{time.time() - t0:7.1f}s] {prop}: {done}/{target} cases, "
                f"{sum(g['count'] for g in groups.values())} bad outcomes, {len(crashes)} crashes",
                flush=True,
            )
    elapsed = time.time() - t0
    report = {
        "cases": sum(total.values()),
        "per_property": dict(total),
        "seconds": round(elapsed, 1),
        "bad_outcome_groups": sorted(groups.values(), key=lambda g: -g["count"]),
        "crashes": crashes,
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"\n{report['cases']} cases in {elapsed:.0f} s ({report['cases'] / elapsed:.0f}/s): "
        f"{len(groups)} kinds of bad outcome, {len(crashes)} crashes"
    )
    for g in report["bad_outcome_groups"]:
        print(f"  {g['count']:6d}  {g['api']}: {g['problem'][:120]}\n          e.g. {g['example'][:200]}")
    for c in crashes:
        print("  CRASH", c)
    return 1 if groups or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
