"""The writer shared by the fixture tools of the case files (make_fixtures_sparse,
_special, _math, _linalg): runs every case of a tests/<x>_cases.py module on torch and
writes tests/fixtures/<name>/results.safetensors (the arrays) and results.json (each
case's encoded results)."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import numpy as np
import torch
from safetensors.numpy import save_file

TESTS = os.path.join(os.path.dirname(__file__), "..", "tests")
sys.path.insert(0, TESTS)


def write(cases: Any, name: str) -> str:
    """Run `cases` (a fixture_cases.Cases) on torch into tests/fixtures/<name>; returns the folder."""
    torch.set_num_threads(1)
    results = {}
    arrays: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation and invariant-check notes
        for cid in cases:
            enc, arr = cases.run(torch, cid)
            results[cid] = enc
            arrays.update(arr)
    out = os.path.join(TESTS, "fixtures", name)
    os.makedirs(out, exist_ok=True)
    save_file(arrays, os.path.join(out, "results.safetensors"), metadata={"torch": torch.__version__})
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"torch": torch.__version__, "results": results}, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"{name}: {len(results)} cases, {len(arrays)} arrays")
    return out
