"""Make the PyTorch reference fixtures of the autograd cases (tests/autograd_cases.py).

Needs torch; the tests never import it. Writes tests/fixtures/autograd/<case>.npz with
the case's inputs (`in.<name>`) and torch's results (`out.<name>`).

Run from the repository root:  python tools/make_autograd_fixtures.py [CASE ...]
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from autograd_cases import CASES, inputs  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "autograd")


def run(name: str) -> None:
    arrays = inputs(name)
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k.startswith(("x", "w"))) for k, v in arrays.items()}
    res = CASES[name][1](torch, t)
    data = {f"in.{k}": v for k, v in arrays.items()}
    data.update({f"out.{k}": v.detach().numpy() for k, v in res.items()})
    np.savez(os.path.join(OUT, f"{name}.npz"), **data)
    print(f"{name}: {', '.join(sorted(res))}")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for n in sys.argv[1:] or list(CASES):
        run(n)
