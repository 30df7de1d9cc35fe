"""Make the PyTorch-written checkpoints that tests/test_serialization.py loads with
`cp.load`, each with the values it must give in a companion safetensors file.

Writes tests/fixtures/serialization/:
  mixed.pt            a dict of every dtype we share with torch, 0-d and empty tensors,
                      views sharing one storage (slices, transposes), a Parameter,
                      nested lists/tuples/dicts, torch.Size, dtypes, a device, bytes,
                      None and non-finite floats; mixed_expected.safetensors holds the
                      tensors' values (contiguous) under the same keys ("/" for nesting)
  model.pt            the state_dict of a small conv + linear model (with BatchNorm's
                      num_batches_tracked); model_io.safetensors: its input and output
  optimizer.pt        an Adam state_dict after two steps; optimizer_expected.safetensors
  buffer.pt           a state_dict saved into a BytesIO (records under "archive/")
  legacy.pt           the pre-1.6 non-zip format (must be refused with a clear message)
  script.pt           a TorchScript archive (must be refused with a clear message)
  int8.pt             an int8 tensor (a dtype candle_py lacks: a clear error)
  complex.pt          complex64/complex128 tensors (0-d, empty, a transposed view sharing
                      its base's storage, a leaf that requires grad) and the complex
                      dtypes; complex_expected.safetensors: their `view_as_real` values

Run from the repository root:  python tools/make_fixtures_serialization.py
Then `python tools/make_fixtures_serialization.py --check-ours DIR` loads with torch
every `*.pt` file that candle_py wrote into DIR (tests write some with
CANDLE_PY_KEEP_SAVED=DIR) and prints what torch read: the other direction of the format.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import save_file

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "serialization"


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 2, 3, padding=1),
        nn.BatchNorm2d(2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(2 * 4 * 4, 3),
        nn.LayerNorm(3),
    )


def mixed() -> None:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g)
    obj = {
        "f32": torch.randn(2, 3, generator=g),
        "f64": torch.randn(3, generator=g, dtype=torch.float64),
        "f16": torch.randn(5, generator=g).half(),
        "bf16": torch.randn(5, generator=g).bfloat16(),
        "i64": torch.tensor([-(2**40), 0, 7]),
        "i32": torch.tensor([-5, 2**30], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "u32": torch.tensor([1, 4_000_000_000], dtype=torch.uint32),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "nonfinite": torch.tensor([float("inf"), float("-inf"), float("nan"), 1.0]),
        "base": base,
        "slice": base[1:, ::2],
        "t": base.t(),
        "row": base[2],
        "param": nn.Parameter(torch.randn(2, 2, generator=g)),
        "frozen": nn.Parameter(torch.randn(2, generator=g), requires_grad=False),
        "nested": {"list": [torch.arange(3), 1, 2.5, "s", None], "tuple": (torch.ones(2, 2), b"raw")},
        "size": torch.Size([2, 3]),
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "inf": float("inf"),
    }
    torch.save(obj, OUT / "mixed.pt")
    flat = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            flat[k] = v.detach().clone().contiguous()
    flat["nested/list/0"] = obj["nested"]["list"][0].clone()
    flat["nested/tuple/0"] = obj["nested"]["tuple"][0].clone()
    save_file(flat, OUT / "mixed_expected.safetensors")


def model_files() -> None:
    torch.manual_seed(0)
    m = model()
    x = torch.randn(2, 1, 4, 4)
    m.train()
    m(x)  # moves BatchNorm's running statistics off their initial values
    m.eval()
    with torch.no_grad():
        y = m(x)
    torch.save(m.state_dict(), OUT / "model.pt")
    save_file({"x": x, "y": y}, OUT / "model_io.safetensors")
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    (OUT / "buffer.pt").write_bytes(buf.getvalue())

    lin = nn.Linear(3, 2)
    opt = torch.optim.Adam(lin.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        lin(torch.ones(4, 3)).pow(2).sum().backward()
        opt.step()
    sd = opt.state_dict()
    torch.save(sd, OUT / "optimizer.pt")
    exp = {}
    for i, st in sd["state"].items():
        for k, v in st.items():
            exp[f"{i}/{k}"] = v.clone().contiguous()
    save_file(exp, OUT / "optimizer_expected.safetensors")


def refused() -> None:
    torch.save({"w": torch.ones(2)}, OUT / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.jit.save(torch.jit.script(nn.Linear(2, 2)), OUT / "script.pt")
    torch.save({"q": torch.tensor([1, -2], dtype=torch.int8)}, OUT / "int8.pt")


def complex_file() -> None:
    base = torch.view_as_complex(torch.arange(24.0).reshape(3, 4, 2) / 4 - 1)
    obj = {
        "c64": base,
        "c64_t": base.t(),
        "c128": torch.polar(torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([0.5, -3.0], dtype=torch.float64)),
        "scalar": torch.view_as_complex(torch.tensor([1.5, -0.5])),
        "empty": torch.view_as_complex(torch.zeros(0, 3, 2)),
        "leaf": torch.view_as_complex(torch.ones(2, 2)).detach().requires_grad_(),
        "dtypes": [torch.complex64, torch.cdouble],
    }
    torch.save(obj, OUT / "complex.pt")
    exp = {k: torch.view_as_real(v.detach()).contiguous() for k, v in obj.items() if isinstance(v, torch.Tensor)}
    save_file(exp, OUT / "complex_expected.safetensors")


def check_ours(folder: str) -> None:
    for p in sorted(Path(folder).glob("*.pt")):
        obj = torch.load(p)  # weights_only=True: torch's own safe loader
        print(p.name, "->", obj if not isinstance(obj, dict) else {k: type(v).__name__ for k, v in obj.items()})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check-ours":
        check_ours(sys.argv[2])
        sys.exit(0)
    os.makedirs(OUT, exist_ok=True)
    mixed()
    model_files()
    refused()
    complex_file()
    print("wrote", sorted(p.name for p in OUT.iterdir()))
