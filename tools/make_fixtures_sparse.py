"""Make the PyTorch reference fixture of the sparse COO cases (tests/sparse_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/sparse/results.safetensors (the result arrays) and results.json (each
case's encoded results), and torch_saved.pt: sparse tensors written by torch.save
(coalesced, uncoalesced, hybrid, int64) beside their dense forms, for cp.load.

Run from the repository root:  python tools/make_fixtures_sparse.py
"""

from __future__ import annotations

import os

import torch

from _fixture_tool import write
from sparse_cases import CASES


def main() -> None:
    out = write(CASES, "sparse")
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
    torch.save(saved, os.path.join(out, "torch_saved.pt"))


if __name__ == "__main__":
    main()
