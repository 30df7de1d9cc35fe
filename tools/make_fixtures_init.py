"""Make the PyTorch reference fixtures for the deterministic `nn.init` fills that
tests/test_init.py compares against: `dirac_` on 3-, 4- and 5-D shapes, with groups.

Writes tests/fixtures/init/dirac.safetensors: `<case>` is torch's filled tensor, and
the metadata maps each case to its shape and groups (JSON).
Run from the repository root:  python tools/make_fixtures_init.py
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "init")
CASES = {
    "conv1d": ((4, 2, 3), 1),
    "conv2d_more_out": ((6, 4, 3, 3), 1),
    "conv2d_groups": ((6, 4, 3, 3), 2),
    "conv2d_more_in": ((3, 5, 2, 2), 1),
    "conv3d": ((2, 2, 3, 3, 3), 1),
    "conv2d_groups3": ((6, 1, 5, 4), 3),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    tensors, meta = {}, {}
    for name, (shape, groups) in CASES.items():
        t = torch.nn.init.dirac_(torch.randn(*shape), groups=groups)
        tensors[name] = t.contiguous()
        meta[name] = json.dumps({"shape": list(shape), "groups": groups})
    save_file(tensors, os.path.join(OUT, "dirac.safetensors"), metadata=meta)
    print("wrote", sorted(tensors))
