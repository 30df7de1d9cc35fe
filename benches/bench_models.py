"""Whole-model benchmark: one training step (forward, backward, optimizer step) of
five models, and inference of two, on candle_py and on torch in one process.

The model code is written once against the PyTorch API (`build(lib)` takes the
`torch` or `candle_py` module); candle_py's model loads torch's initial weights, and
the first step's losses are checked to agree before anything is timed. Rounds are
interleaved (a block of steps of each library in turn, so both see the same machine)
and the table gives medians per phase: forward (with the loss), backward, optimizer
step. Each block first runs untimed steps for `WARM_S` seconds, as a training loop
has run steps before the one measured: one library's threads (torch's OpenMP
workers spin for milliseconds after their last job) and the virtual CPUs' wake-up
state (KVM's halt polling grows over consecutive short idles) would otherwise carry
into the other's first steps. Measured on the VAE, candle_py's backward took 1.7-1.9
ms in the first steps after a 50 ms pause and 1.4 ms from the tenth on; torch's
settled after two.

Models: a nanoGPT-style decoder (6 layers, width 384, 6 heads, T=256, batch 4,
AdamW), a CIFAR-size ResNet (batch 32, SGD with momentum), a 2-layer LSTM word LM
(vocab 1000, width 200, 35 steps, batch 20, SGD + clip_grad_norm_), an MLP VAE
(batch 128, Adam), a ViT-style encoder (32x32 images, 4x4 patches, 6 layers, width
192, batch 32, AdamW); inference (no_grad forward) of the GPT and the ResNet.

Then the peak RSS of the GPT's training steps (`--rss` for that part alone): each
library in a fresh subprocess that builds the model, optimizer and batch and runs
three steps; the table gives the peak extra resident memory over
what the process held before the first step (/proc's VmHWM).

Benchmark on a quiet machine only: the script prints the 1-minute load average
before it starts and refuses to run above 0.3 unless `--force` is given.

Run: python benches/bench_models.py [--quick] [--only NAME[,NAME]] [--force] [--rss]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
from _harness import fmt_time, try_torch

torch = try_torch()
QUICK = "--quick" in sys.argv
ONLY = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
# Untimed steps before each block's timed ones (see the module docstring).
WARM_S = 0.3


# -- the models, written once against the PyTorch API --------------------------------


def gpt(lib: Any, vocab: int = 65, n_layer: int = 6, d: int = 384, heads: int = 6, block: int = 256) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.proj = nn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(block, d)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            pos = lib.arange(idx.shape[1])
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def resnet(lib: Any, widths: tuple[int, ...] = (32, 64, 128)) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Sequential()
            )

        def forward(self, x: Any) -> Any:
            out = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(out)) + self.short(x))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU())
            layers, cin = [], widths[0]
            for i, w in enumerate(widths):
                layers += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
                cin = w
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, 10)

        def forward(self, x: Any) -> Any:
            return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))

    return ResNet()


def lstm_lm(lib: Any, vocab: int = 1000, d: int = 200) -> Any:
    nn = lib.nn

    class RNNLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Embedding(vocab, d)
            self.rnn = nn.LSTM(d, d, 2)
            self.decoder = nn.Linear(d, vocab)

        def forward(self, x: Any) -> Any:
            out, _ = self.rnn(self.encoder(x))
            return self.decoder(out)

    return RNNLM()


def vae(lib: Any) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class VAE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(784, 400)
            self.fc21 = nn.Linear(400, 20)
            self.fc22 = nn.Linear(400, 20)
            self.fc3 = nn.Linear(20, 400)
            self.fc4 = nn.Linear(400, 784)

        def forward(self, x: Any, eps: Any) -> Any:
            h = F.relu(self.fc1(x))
            mu, logvar = self.fc21(h), self.fc22(h)
            z = mu + eps * lib.exp(0.5 * logvar)
            recon = lib.sigmoid(self.fc4(F.relu(self.fc3(z))))
            bce = F.binary_cross_entropy(recon, x, reduction="sum")
            return bce - 0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return VAE()


def vit(lib: Any, d: int = 192, depth: int = 6, heads: int = 3) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, d, 4, 4)
            self.cls = nn.Parameter(lib.zeros(1, 1, d))
            self.pos = nn.Parameter(lib.zeros(1, 65, d))
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 10)

        def forward(self, x: Any) -> Any:
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = lib.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x)[:, 0])

    return ViT()


# -- one step per model ----------------------------------------------------------------


def setups(lib: Any) -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any], Callable[[Any], Any], str]]:
    """name -> (build model, make optimizer, loss(model, data), data kind)."""
    F = lib.nn.functional
    o = lib.optim
    return {
        "gpt": (gpt, lambda m: o.AdamW(m.parameters(), lr=3e-4), lambda m, d: F.cross_entropy(m(d[0]).view(-1, 65), d[1].view(-1)), "gpt"),
        "resnet": (resnet, lambda m: o.SGD(m.parameters(), lr=0.05, momentum=0.9), lambda m, d: F.cross_entropy(m(d[0]), d[1]), "img"),
        "lstm": (
            lstm_lm,
            lambda m: o.SGD(m.parameters(), lr=20.0),
            lambda m, d: F.cross_entropy(m(d[0]).view(-1, 1000), d[1].view(-1)),
            "lstm",
        ),
        "vae": (vae, lambda m: o.Adam(m.parameters(), lr=1e-3), lambda m, d: m(d[0], d[1]), "vae"),
        "vit": (vit, lambda m: o.AdamW(m.parameters(), lr=3e-4), lambda m, d: F.cross_entropy(m(d[0]), d[1]), "img"),
    }


def data(kind: str, rng: np.random.Generator) -> list[np.ndarray]:
    if kind == "gpt":
        x = rng.integers(0, 65, (4, 257))
        return [x[:, :-1], x[:, 1:]]
    if kind == "img":
        return [rng.standard_normal((32, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, 32)]
    if kind == "lstm":
        x = rng.integers(0, 1000, (36, 20))
        return [x[:-1], x[1:]]
    return [rng.random((128, 784)).astype(np.float32), rng.standard_normal((128, 20)).astype(np.float32)]


def to_lib(lib: Any, arrays: list[np.ndarray]) -> list[Any]:
    return [lib.tensor(a) for a in arrays]


def copy_weights(src: Any, dst: Any) -> None:
    sd = {k: cp.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)


class Runner:
    """One library's model, optimizer and batch; `step()` times the three phases."""

    def __init__(self, lib: Any, name: str, model: Any, batch: list[np.ndarray]) -> None:
        self.lib, self.model = lib, model
        build, make_opt, loss_fn, _ = setups(lib)[name]
        self.opt, self.loss_fn = make_opt(model), loss_fn
        self.batch = to_lib(lib, batch)
        self.clip = name == "lstm"
        self.times: dict[str, list[float]] = {"fwd": [], "bwd": [], "opt": []}

    def step(self, record: bool = True) -> float:
        t0 = time.perf_counter()
        loss = self.loss_fn(self.model, self.batch)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if self.clip:
            self.lib.nn.utils.clip_grad_norm_(self.model.parameters(), 0.25)
        self.opt.step()
        self.opt.zero_grad()
        t3 = time.perf_counter()
        if record:
            for k, v in zip(("fwd", "bwd", "opt"), (t1 - t0, t2 - t1, t3 - t2)):
                self.times[k].append(v)
        return float(loss.item())


_RSS = """
import sys, numpy as np
sys.path.insert(0, sys.argv[2])
if sys.argv[1] == "torch":
    import torch as lib
else:
    import candle_py as lib
from bench_models import setups, data, to_lib, hwm
build, make_opt, loss_fn, kind = setups(lib)["gpt"]
if sys.argv[1] == "torch":
    lib.manual_seed(0)
model = build(lib)
opt = make_opt(model)
batch = to_lib(lib, data(kind, np.random.default_rng(0)))
base = hwm()
for _ in range(3):
    loss_fn(model, batch).backward()
    opt.step()
    opt.zero_grad()
print(hwm() - base)
"""


def hwm() -> int:
    """Peak RSS of this process image in bytes (/proc's VmHWM starts afresh at exec)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def gpt_step_rss(lib: str) -> int:
    """Peak extra RSS of three GPT training steps in a fresh process of `lib` alone."""
    here = os.path.dirname(os.path.abspath(__file__))
    res = subprocess.run([sys.executable, "-c", _RSS, lib, here], capture_output=True, text=True, timeout=600, check=True)
    return int(res.stdout.strip().splitlines()[-1])


def warm(step: Callable[[], Any]) -> None:
    """Run `step` untimed for `WARM_S` seconds (at least once)."""
    end = time.perf_counter() + WARM_S
    step()
    while time.perf_counter() < end:
        step()


def load_average() -> float:
    return os.getloadavg()[0]


def main() -> None:
    if torch is None:
        print("torch is not installed: nothing to compare against")
        return
    la = load_average()
    print(f"load average (1 min) before the run: {la:.2f}")
    if la > 0.3 and "--force" not in sys.argv:
        print("the machine is busy (load average above 0.3): not benchmarking; wait, or pass --force")
        return
    if "--rss" in sys.argv:
        report_rss()
        return
    torch.manual_seed(0)
    # Rounds of blocks: 9 timed steps per library (4 with --quick).
    rounds, per_block = (2, 2) if QUICK else (3, 3)
    names = ONLY or ["gpt", "resnet", "lstm", "vae", "vit"]
    rows = []
    for name in names:
        rng = np.random.default_rng(0)
        build = setups(torch)[name][0]
        tm = build(torch)
        cm = build(cp)
        copy_weights(tm, cm)
        batch = data(setups(torch)[name][3], rng)
        rt, rc = Runner(torch, name, tm, batch), Runner(cp, name, cm, batch)
        lt, lc = rt.step(False), rc.step(False)
        if abs(lt - lc) > 1e-3 * max(1.0, abs(lt)):
            raise SystemExit(f"{name}: first losses differ: torch {lt} vs candle_py {lc}")
        for _ in range(rounds):
            for r in (rt, rc):
                warm(lambda: r.step(False))
                for _ in range(per_block):
                    r.step()
        for phase in ("fwd", "bwd", "opt"):
            c, t = statistics.median(rc.times[phase]), statistics.median(rt.times[phase])
            rows.append((f"{name} train {phase}", c, t))
        c = sum(statistics.median(rc.times[p]) for p in ("fwd", "bwd", "opt"))
        t = sum(statistics.median(rt.times[p]) for p in ("fwd", "bwd", "opt"))
        rows.append((f"{name} train step", c, t))
        if name in ("gpt", "resnet"):
            tm.eval()
            cm.eval()
            xt, xc = to_lib(torch, batch[:1])[0], to_lib(cp, batch[:1])[0]
            ti: list[float] = []
            ci: list[float] = []
            for _ in range(rounds):
                for lib, model, x, times in ((torch, tm, xt, ti), (cp, cm, xc, ci)):
                    with lib.no_grad():
                        warm(lambda: model(x))
                        for _ in range(per_block):
                            s = time.perf_counter()
                            model(x)
                            times.append(time.perf_counter() - s)
            rows.append((f"{name} inference", statistics.median(ci), statistics.median(ti)))
        print(f"{name}: first loss torch {lt:.5f}, candle_py {lc:.5f}", flush=True)
    print(f"\n| {'model / phase':<22} | {'candle_py':>10} | {'torch':>10} | {'ratio':>6} |")
    print("|" + "-" * 24 + "|" + "-" * 12 + "|" + "-" * 12 + "|" + "-" * 8 + "|")
    for n, c, t in rows:
        print(f"| {n:<22} | {fmt_time(c):>10} | {fmt_time(t):>10} | {c / t:>5.2f}x |")
    print(f"\nload average (1 min) after the run: {load_average():.2f}")
    if not ONLY or "gpt" in ONLY:
        report_rss()


def report_rss() -> None:
    """The GPT training step's peak extra RSS, each library in its own process."""
    c, t = gpt_step_rss("candle_py"), gpt_step_rss("torch")
    print("\nPeak extra RSS of three GPT training steps (fresh process per library, over the model, optimizer and batch):")
    print(f"| {'library':<10} | {'peak extra RSS':>14} |")
    print("|" + "-" * 12 + "|" + "-" * 16 + "|")
    for name, b in (("candle_py", c), ("torch", t)):
        print(f"| {name:<10} | {b / 2**20:>10.1f} MiB |")
    print(f"candle_py / torch: {c / t:.2f}x")


if __name__ == "__main__":
    main()
