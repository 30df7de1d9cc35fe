"""Make the PyTorch reference fixture of the sparse COO cases (tests/sparse_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/sparse/results.safetensors (the result arrays) and results.json (each
case's encoded results), and torch_saved.pt: sparse tensors written by torch.save
(coalesced, uncoalesced, hybrid, int64) beside their dense forms, for cp.load.

Run from the repository root:  python tools/make_fixtures_sparse.py
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
from sparse_cases import CASES, run_case  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "sparse")


def main() -> None:
    torch.set_num_threads(1)
    results = {}
    arrays: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note that invariant checks are off by default
        for cid in CASES:
            enc, arr = run_case(torch, cid)
            results[cid] = enc
            arrays.update(arr)
    os.makedirs(OUT, exist_ok=True)
    save_file(arrays, os.path.join(OUT, "results.safetensors"), metadata={"torch": torch.__version__})
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"torch": torch.__version__, "results": results}, f, indent=0, sort_keys=True)
        f.write("\n")
    i = torch.tensor([[0, 1, 1, 0], [2, 0, 2, 2]])
    parts = {
        "coalesced": torch.sparse_coo_tensor(i, torch.tensor([3.0, 4.0, 5.0, 1.0]), (2, 3)).coalesce(),
        "uncoalesced": torch.sparse_coo_tensor(i, torch.tensor([3.0, 4.0, 5.0, 1.0]), (2, 3)),
        "hybrid": torch.sparse_coo_tensor(i[:1], torch.arange(8.0).reshape(4, 2), (2, 2)),
        "int64": torch.sparse_coo_tensor(i, torch.tensor([1, 2, 3, 4]), (2, 3)),
    }
    saved = {
        "sparse": parts,
        "dense": {k: v.to_dense() for k, v in parts.items()},
        "coalesced": {k: v.is_coalesced() for k, v in parts.items()},
    }
    torch.save(saved, os.path.join(OUT, "torch_saved.pt"))
    print(f"{len(results)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
