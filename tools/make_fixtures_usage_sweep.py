"""Make the PyTorch reference fixture of the usage sweep (tests/usage_cases.py).

Needs torch; the tests never import it. Runs every case on torch (CPU only, as the
CPU-only cases expect) and writes tests/fixtures/usage_sweep/results.safetensors (the
result arrays) and results.json (each case's encoded results, or the exception torch
raised when a case cannot run on torch at all).

Run from the repository root:  python tools/make_fixtures_usage_sweep.py
To remake only some cases, keeping every other case's arrays as they are (a full run
on another torch build can move unrelated results by an ULP):
    python tools/make_fixtures_usage_sweep.py --only CASE [CASE ...]
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from usage_cases import CASES, run_case  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "usage_sweep")
USAGE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "torch_usage.md")


def usage_names(path: str) -> list[str]:
    """The names of the table in torch_usage.md (first column, in backticks)."""
    out = []
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) > 2 and cells[1].startswith("`") and cells[1].endswith("`"):
                out.append(cells[1].strip("`"))
    return out


def main() -> None:
    torch.set_num_threads(1)
    assert not torch.cuda.is_available(), "make the fixture on a machine without CUDA (the CPU-only cases)"
    results = {}
    arrays: dict[str, np.ndarray] = {}
    failed = []
    only = sys.argv[sys.argv.index("--only") + 1 :] if "--only" in sys.argv else None
    if only is not None:
        unknown = [c for c in only if c not in CASES]
        if unknown:
            sys.exit(f"unknown cases: {unknown}")
        with open(os.path.join(OUT, "results.json")) as f:
            results = {k: v for k, v in json.load(f)["results"].items() if k not in only and k in CASES}
        old = load_file(os.path.join(OUT, "results.safetensors"))
        arrays = {k: v for k, v in old.items() if k.split("/", 1)[0] in results}
    for cid in only if only is not None else CASES:
        try:
            enc, arr = run_case(torch, cid)
        except Exception as e:  # noqa: BLE001 - a case torch cannot run is a defect of the case
            failed.append(f"{cid}: {type(e).__name__}: {e}")
            continue
        results[cid] = enc
        arrays.update(arr)
    if failed:
        sys.exit("cases that fail on torch:\n" + "\n".join(failed))
    os.makedirs(OUT, exist_ok=True)
    save_file(arrays, os.path.join(OUT, "results.safetensors"), metadata={"torch": torch.__version__})
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"torch": torch.__version__, "names": usage_names(USAGE), "results": results}, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"{len(results)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
