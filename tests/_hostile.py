"""Shared by the hostile-file tests (safetensors, GGUF): a corpus directory made by a
generator in tools/, with a manifest of the files to reject (and the message each
must raise) and the valid edge cases to accept."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent


def load_manifest(corpus: Path) -> Tuple[Dict[str, str], List[str]]:
    """(reject: name -> expected message, accept: names) of a corpus."""
    manifest: Dict[str, Any] = json.loads((corpus / "manifest.json").read_text())
    return manifest["reject"], manifest["accept"]


def assert_corpus_matches_generator(corpus: Path, generator: str, suffix: str, min_cases: int = 40) -> None:
    """Every file of the corpus is byte for byte what tools/<generator>.py makes now."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        gen = importlib.import_module(generator)
    finally:
        sys.path.pop(0)
    reject, accept = load_manifest(corpus)
    cases, valid = gen.cases(), gen.valid()
    assert sorted(cases) == sorted(reject) and sorted(valid) == sorted(accept)
    for name, (data, expect) in cases.items():
        assert (corpus / f"{name}{suffix}").read_bytes() == data, f"{name}: rerun tools/{generator}.py"
        assert reject[name] == expect
    for name, data in valid.items():
        assert (corpus / f"{name}{suffix}").read_bytes() == data
    assert len(reject) >= min_cases


_MEMORY_CHILD = """
import json, resource, sys
from pathlib import Path
{imports}

corpus, big, suffix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
names = json.loads((corpus / "manifest.json").read_text())["reject"]
{warm_up}  # warm up code paths


def peak_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# Any allocation of more than ~3 GiB beyond what is mapped now fails
# (and a failed Rust allocation aborts: a crash, so the test fails).
vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), resource.RLIM_INFINITY))
base = peak_kb()
rejected = 0
for _ in range(3):
    for n in names:
        p = corpus / (n + suffix)
        data = p.read_bytes()
        for f in ({loaders},):
            try:
                f()
            except ValueError:
                rejected += 1
hostile_growth = peak_kb() - base
# The big sparse file: refused from its header alone, so its pages are never touched.
base = peak_kb()
try:
    {load_big}(big)
    big_ok = False
except ValueError as e:
    big_ok = {big_message!r} in str(e)
big_growth = peak_kb() - base
print(json.dumps({{"rejected": rejected, "hostile_kb": hostile_growth, "big_kb": big_growth, "big_ok": big_ok}}))
"""


def memory_child(tmp_path: Path, corpus: Path, big: Path, suffix: str, **code: str) -> Dict[str, Any]:
    """Load every rejected file of `corpus` 3 times with each of `code["loaders"]`
    (lambdas over `p`, the path, and `data`, its bytes), then the big sparse file
    `big` with `code["load_big"]`, in a child process whose address space allows
    ~3 GiB more than it maps at start. Returns the rejection count, the peak-RSS
    growth of both phases (KiB) and whether the big file's error had
    `code["big_message"]`. `code` also gives `imports` and `warm_up` lines."""
    import os
    import subprocess

    script = tmp_path / "child.py"
    script.write_text(_MEMORY_CHILD.format(**code))
    r = subprocess.run(
        [sys.executable, str(script), str(corpus), str(big), suffix],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, RUST_BACKTRACE="0"),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out: Dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out
