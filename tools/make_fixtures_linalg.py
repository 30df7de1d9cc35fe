"""Make the PyTorch reference fixture of the composed linear-algebra and shape cases
(tests/linalg_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/linalg/results.safetensors (the result arrays) and results.json (each
case's encoded results).

Run from the repository root:  python tools/make_fixtures_linalg.py
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import torch
from safetensors.numpy import save_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from linalg_cases import CASES, run_case  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "linalg")


def main() -> None:
    torch.set_num_threads(1)
    results = {}
    arrays: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chain_matmul's deprecation, cov's degrees-of-freedom note
        for cid in CASES:
            enc, arr = run_case(torch, cid)
            results[cid] = enc
            arrays.update(arr)
    os.makedirs(OUT, exist_ok=True)
    save_file(arrays, os.path.join(OUT, "results.safetensors"), metadata={"torch": torch.__version__})
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"torch": torch.__version__, "results": results}, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"{len(results)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
