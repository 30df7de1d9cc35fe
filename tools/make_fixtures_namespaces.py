"""Make the PyTorch reference fixtures of the namespaces tests (tests/test_namespaces.py).

Needs torch; the tests never import it. Writes tests/fixtures/namespaces/:
  dtype_info.safetensors  finfo (bits, eps, max, min, tiny, smallest_normal,
                          resolution: float64) and iinfo (bits, max, min: int64)
                          of every dtype candle_py has
  autocast.safetensors    inputs, and results (in their dtype) and gradients of
                          the autocast ops under torch.autocast("cpu", bf16/f16)
  grad_scaler.safetensors a GradScaler("cpu") run with an inf gradient injected
  printoptions.safetensors  reprs under set_printoptions settings (metadata)

Run from the repository root:  python tools/make_fixtures_namespaces.py
"""

from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "namespaces")

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int16", "int32", "int64", "uint32"]


def dtype_info() -> None:
    t = {}
    for name in FLOATS:
        f = torch.finfo(getattr(torch, name))
        vals = [f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution]
        t[f"finfo.{name}"] = torch.tensor(vals, dtype=torch.float64)
    for name in INTS:
        i = torch.iinfo(getattr(torch, name))
        t[f"iinfo.{name}"] = torch.tensor([i.bits, i.max, i.min], dtype=torch.int64)
    meta = {f"repr.{n}": repr(torch.finfo(getattr(torch, n))) for n in FLOATS}
    meta.update({f"repr.{n}": repr(torch.iinfo(getattr(torch, n))) for n in INTS})
    save_file(t, os.path.join(OUT, "dtype_info.safetensors"), metadata=meta)


def autocast() -> None:
    g = torch.Generator().manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    t = {
        "x": r(3, 8),
        "w": r(5, 8),
        "b": r(5),
        "a": r(2, 3, 8),
        "m": r(2, 8, 4),
        "img": r(2, 3, 6, 6),
        "k": r(4, 3, 3, 3),
        "kb": r(4),
        "seq": r(2, 3, 7),
        "k1": r(4, 3, 3),
        "kt": r(3, 2, 3, 3),
        "pw": torch.tensor([0.25]),
        "q": r(2, 2, 5, 8),
        "kk": r(2, 2, 6, 8),
        "v": r(2, 2, 6, 8),
        "tgt": torch.randint(0, 5, (3,), generator=g),
        "reg": r(3, 5),
    }
    for tag, dt in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        x = t["x"].clone().requires_grad_()
        w = t["w"].clone().requires_grad_()
        b = t["b"].clone().requires_grad_()
        with torch.autocast("cpu", dtype=dt):
            y = F.linear(x, w, b)
            mm = t["x"] @ t["w"].t()
            bmm = torch.bmm(t["a"], t["m"])
            conv = F.conv2d(t["img"], t["k"], t["kb"], padding=1)
            conv1 = F.conv1d(t["seq"], t["k1"])
            convt = F.conv_transpose2d(t["img"], t["kt"], stride=2)
            prelu = F.prelu(t["img"], t["pw"])
            sdpa = F.scaled_dot_product_attention(t["q"], t["kk"], t["v"], is_causal=True)
            ce = F.cross_entropy(y, t["tgt"])  # bf16 logits: the loss runs in float32
            mse = F.mse_loss(y, t["reg"])
            dot = torch.dot(t["x"][0], t["w"][0])  # not on the autocast list: float32
            add = y + t["reg"]  # mixed bf16 + f32: ordinary promotion
        (ce + mse).backward()
        t.update(
            {
                f"{tag}.linear": y.detach(),
                f"{tag}.matmul": mm,
                f"{tag}.bmm": bmm,
                f"{tag}.conv2d": conv,
                f"{tag}.conv1d": conv1,
                f"{tag}.conv_transpose2d": convt,
                f"{tag}.prelu": prelu,
                f"{tag}.sdpa": sdpa,
                f"{tag}.cross_entropy": ce.detach(),
                f"{tag}.mse_loss": mse.detach(),
                f"{tag}.dot": dot,
                f"{tag}.add": add.detach(),
                f"{tag}.grad.x": x.grad,
                f"{tag}.grad.w": w.grad,
                f"{tag}.grad.b": b.grad,
            }
        )
    # A small CNN trained one step's worth under bf16 autocast: conv -> relu -> max-pool ->
    # flatten -> linear -> cross-entropy (pooling takes the conv's bfloat16 output).
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(16, 5))
    for k, v in cnn.state_dict().items():
        t[f"cnn.state.{k}"] = v.detach().clone()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = cnn(t["img"])
        loss = F.cross_entropy(logits, t["tgt"][:2])
        # Ops on PyTorch's autocast float32 list, fed bfloat16.
        h = t["img"].bfloat16()
        t["fp32.avg_pool3d"] = F.avg_pool3d(h.unsqueeze(0), 2)
        t["fp32.max_pool3d"] = F.max_pool3d(h.unsqueeze(0), 2)
        t["fp32.adaptive_avg_pool3d"] = F.adaptive_avg_pool3d(h.unsqueeze(0), 2)
        t["fp32.pad_reflect"] = F.pad(h, (1, 1, 1, 1), mode="reflect")
        t["fp32.prod"] = h[0, 0].prod(-1)
        t["keep.avg_pool2d"] = F.avg_pool2d(h, 2)  # not on a list: stays bfloat16
    loss.backward()
    t["cnn.logits"] = logits.detach()
    t["cnn.loss"] = loss.detach()
    for k, p in cnn.named_parameters():
        t[f"cnn.grad.{k}"] = p.grad
    save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(OUT, "autocast.safetensors"))


def grad_scaler() -> None:
    torch.manual_seed(0)
    m = torch.nn.Linear(2, 1)
    t = {"w0": m.weight.detach().clone(), "b0": m.bias.detach().clone(), "x": torch.randn(3, 2)}
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    s = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    scales, scaled, steps = [], [], []
    for it in range(5):
        opt.zero_grad()
        loss = m(t["x"]).pow(2).mean()
        sl = s.scale(loss)
        scaled.append(sl.item())
        sl.backward()
        if it == 1:
            m.weight.grad[0, 0] = float("inf")  # this step is skipped and the scale backs off
        before = m.weight.detach().clone()
        s.step(opt)
        steps.append(float(not torch.equal(before, m.weight.detach())))
        s.update()
        scales.append(s.get_scale())
    t.update(
        {
            "scales": torch.tensor(scales, dtype=torch.float64),
            "scaled_losses": torch.tensor(scaled, dtype=torch.float32),
            "stepped": torch.tensor(steps),
            "w_final": m.weight.detach(),
            "b_final": m.bias.detach(),
        }
    )
    save_file(t, os.path.join(OUT, "grad_scaler.safetensors"), metadata={"state_dict": json.dumps(s.state_dict())})


def printoptions() -> None:
    cases = {
        "default": ({}, "torch.arange(12.).reshape(3, 4) / 3"),
        "precision2": ({"precision": 2}, "torch.tensor([1.23456, -2.5, 3.0])"),
        "sci_on": ({"sci_mode": True}, "torch.tensor([1.5, 2.5, 100.0])"),
        "sci_off": ({"sci_mode": False}, "torch.tensor([1e-8, 1.0, 12345.0])"),
        "threshold": ({"threshold": 5, "edgeitems": 2}, "torch.arange(10.)"),
        "linewidth": ({"linewidth": 30}, "torch.arange(12.) / 7"),
        "short": ({"profile": "short"}, "torch.arange(2000.) / 3"),
        "full": ({"profile": "full"}, "torch.arange(1200).reshape(40, 30)"),
        "int_sci": ({"sci_mode": True}, "torch.tensor([1.0, 2.0, 3.0])"),
        "zeros_sci": ({"sci_mode": True}, "torch.zeros(3)"),
    }
    meta = {}
    for name, (opts, expr) in cases.items():
        torch.set_printoptions(profile="default")
        torch.set_printoptions(**opts)
        meta[f"{name}.opts"] = json.dumps(opts)
        meta[f"{name}.expr"] = expr
        meta[f"{name}.repr"] = repr(eval(expr))  # the expressions above, written here
    torch.set_printoptions(profile="default")
    save_file({"unused": torch.zeros(1)}, os.path.join(OUT, "printoptions.safetensors"), metadata=meta)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    dtype_info()
    autocast()
    grad_scaler()
    printoptions()
