"""Layer benchmarks (convolution, pooling, normalisation), candle_py side by side
with torch in one run. Ratios are candle_py time / torch time (lower is better),
medians of rounds (short ops called several times a round so that a round lasts
about 10 ms, each library warmed up on its own calls first, see `_calls_per_round`);
"fwd" is a forward pass without autograd, "fwd+bwd" a forward,
`(y * g).sum().backward()`, with every input and parameter requiring grad.

Run: python benches/bench_layers.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import candle_py as cp
import candle_py.nn as nn
from _harness import median_time, print_table, try_torch

torch = try_torch()
QUICK = "--quick" in sys.argv
# `--only WORD`: only the rows whose name contains WORD.
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
# Seconds a timed round of one library lasts at least (several calls of a short op).
ROUND = 0.004 if QUICK else 0.01
# Seconds of warm-up calls before a library's timed rounds.
WARM = 0.03


def _first(y: Any) -> Any:
    """A recurrent layer's output sequence (it returns `(output, state)`)."""
    return y[0] if isinstance(y, tuple) else y


def _calls_per_round(f: Callable[[], None]) -> tuple[int, int]:
    """(calls per timed round, warm-up calls) for `f`: rounds of about `ROUND` seconds,
    after `WARM` seconds of warm-up calls. A single call of a short op is timed mostly
    by what ran before it: on the 2-core VM the same 30 us pooling call took 25 us
    after one of ours, 54 us right after torch's (whose OpenMP workers spin for
    milliseconds after a parallel op, holding the cores) and 200 us after 10 ms idle.
    So each library warms up on its own calls, then is timed in back-to-back runs."""
    t0 = time.perf_counter()
    f()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(1000, int(ROUND / one))), max(1, min(5000, int(WARM / one)))


def _pair(name: str, shape: tuple, make_cp: Callable[[], Any], make_t: Optional[Callable[[], Any]], repeat: int):
    """Time forward and forward+backward of the same layer (weights copied) on the same input."""
    x_np = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    m = make_cp()
    x = cp.from_numpy(x_np)
    xg = cp.from_numpy(x_np).requires_grad_(True)

    def c_fwd() -> None:
        with cp.no_grad():
            m(x)

    y0 = _first(m(x))
    g = cp.randn(*tuple(y0.shape))

    def c_bwd() -> None:
        m.zero_grad()
        xg.grad = None
        y = _first(m(xg))
        (y * g).sum().backward()

    fwd: dict[str, Optional[Callable[[], None]]] = {"cp": c_fwd, "torch": None}
    bwd: dict[str, Optional[Callable[[], None]]] = {"cp": c_bwd, "torch": None}
    if torch and make_t is not None:
        tm = make_t()
        with torch.no_grad():
            for k, v in m.state_dict().items():
                tm.state_dict()[k].copy_(torch.from_numpy(np.asarray(v).copy()))
        tx = torch.from_numpy(x_np)
        txg = torch.from_numpy(x_np).clone().requires_grad_(True)
        tg = torch.from_numpy(np.asarray(g).copy())

        def t_fwd() -> None:
            with torch.no_grad():
                tm(tx)

        def t_bwd() -> None:
            tm.zero_grad()
            txg.grad = None
            (_first(tm(txg)) * tg).sum().backward()

        # Same numbers, or the timing is of the wrong thing.
        with torch.no_grad():
            ty = _first(tm(tx))
        np.testing.assert_allclose(np.asarray(y0.detach()), ty.numpy(), atol=2e-3, rtol=2e-3)
        fwd["torch"], bwd["torch"] = t_fwd, t_bwd
    out = []
    for label, fns in (("fwd", fwd), ("fwd+bwd", bwd)):
        times: dict[str, Optional[float]] = {}
        for side, f in fns.items():
            if f is None:
                times[side] = None
                continue
            number, warmup = _calls_per_round(f)
            times[side] = median_time(f, repeat=repeat, number=number, warmup=warmup)
        out.append((f"{name} {label}", times["cp"], times["torch"], "-"))
    return out


def main() -> None:
    threads = torch.get_num_threads() if torch else "-"
    print(f"threads: torch={threads}, cpus={os.cpu_count()}")
    b = 2 if QUICK else 8
    tn = torch.nn if torch else None
    cases = [
        (
            f"conv1d {b}x64x4096 -> 64, k5 p2",
            (b, 64, 4096),
            lambda: nn.Conv1d(64, 64, 5, padding=2),
            lambda: tn.Conv1d(64, 64, 5, padding=2),
        ),
        (
            f"conv2d {b}x3x224x224 -> 64, k3 p1",
            (b, 3, 224, 224),
            lambda: nn.Conv2d(3, 64, 3, padding=1),
            lambda: tn.Conv2d(3, 64, 3, padding=1),
        ),
        (
            f"conv2d {b}x64x56x56 -> 64, k3 p1",
            (b, 64, 56, 56),
            lambda: nn.Conv2d(64, 64, 3, padding=1),
            lambda: tn.Conv2d(64, 64, 3, padding=1),
        ),
        (
            f"depthwise conv2d {b}x64x56x56, k3 p1",
            (b, 64, 56, 56),
            lambda: nn.Conv2d(64, 64, 3, padding=1, groups=64),
            lambda: tn.Conv2d(64, 64, 3, padding=1, groups=64),
        ),
        (
            f"conv3d {b}x8x16x32x32 -> 16, k3 p1",
            (b, 8, 16, 32, 32),
            lambda: nn.Conv3d(8, 16, 3, padding=1),
            lambda: tn.Conv3d(8, 16, 3, padding=1),
        ),
        (
            f"conv_transpose2d {b}x64x28x28 -> 32, k4 s2 p1",
            (b, 64, 28, 28),
            lambda: nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1),
            lambda: tn.ConvTranspose2d(64, 32, 4, stride=2, padding=1),
        ),
        # The digits conv net of bench_training.py: small images, where per-op overhead shows.
        (
            "conv2d 64x16x4x4 -> 32, k3 p1 (digits)",
            (64, 16, 4, 4),
            lambda: nn.Conv2d(16, 32, 3, padding=1),
            lambda: tn.Conv2d(16, 32, 3, padding=1),
        ),
        ("max_pool2d 64x16x8x8, k2 (digits)", (64, 16, 8, 8), lambda: nn.MaxPool2d(2), lambda: tn.MaxPool2d(2)),
        (f"max_pool2d {b}x64x112x112, k3 s2 p1", (b, 64, 112, 112), lambda: nn.MaxPool2d(3, 2, 1), lambda: tn.MaxPool2d(3, 2, 1)),
        (f"avg_pool2d {b}x64x112x112, k2", (b, 64, 112, 112), lambda: nn.AvgPool2d(2), lambda: tn.AvgPool2d(2)),
        (f"max_pool3d {b}x16x16x56x56, k2", (b, 16, 16, 56, 56), lambda: nn.MaxPool3d(2), lambda: tn.MaxPool3d(2)),
        (f"avg_pool3d {b}x16x16x56x56, k3 s2 p1", (b, 16, 16, 56, 56), lambda: nn.AvgPool3d(3, 2, 1), lambda: tn.AvgPool3d(3, 2, 1)),
        (f"adaptive_avg_pool2d {b}x512x14x14 -> 1", (b, 512, 14, 14), lambda: nn.AdaptiveAvgPool2d(1), lambda: tn.AdaptiveAvgPool2d(1)),
        (f"layer_norm {b}x512x768", (b, 512, 768), lambda: nn.LayerNorm(768), lambda: tn.LayerNorm(768)),
        (f"batch_norm2d {b}x64x56x56 (train)", (b, 64, 56, 56), lambda: nn.BatchNorm2d(64), lambda: tn.BatchNorm2d(64)),
        (f"group_norm {b}x64x56x56, 8 groups", (b, 64, 56, 56), lambda: nn.GroupNorm(8, 64), lambda: tn.GroupNorm(8, 64)),
        # Activations over a transformer-sized activation (b x 512 x 768).
        (f"relu {b}x512x768", (b, 512, 768), lambda: nn.ReLU(), lambda: tn.ReLU()),
        (f"gelu {b}x512x768", (b, 512, 768), lambda: nn.GELU(), lambda: tn.GELU()),
        (f"gelu tanh {b}x512x768", (b, 512, 768), lambda: nn.GELU("tanh"), lambda: tn.GELU("tanh")),
        (f"silu {b}x512x768", (b, 512, 768), lambda: nn.SiLU(), lambda: tn.SiLU()),
        (f"tanh {b}x512x768", (b, 512, 768), lambda: nn.Tanh(), lambda: tn.Tanh()),
        (f"softmax {b}x512x768, dim -1", (b, 512, 768), lambda: nn.Softmax(-1), lambda: tn.Softmax(-1)),
        # Recurrent layers at a word-LM size (35 steps, batch 20, width 200).
        ("lstm 2 layers 35x20x200", (35, 20, 200), lambda: nn.LSTM(200, 200, 2), lambda: tn.LSTM(200, 200, 2)),
        (
            "gru bidirectional 35x20x200",
            (35, 20, 200),
            lambda: nn.GRU(200, 200, bidirectional=True),
            lambda: tn.GRU(200, 200, bidirectional=True),
        ),
        ("rnn tanh 35x20x200", (35, 20, 200), lambda: nn.RNN(200, 200), lambda: tn.RNN(200, 200)),
    ]
    rows = []
    for name, shape, mk_cp, mk_t in cases:
        if ONLY is not None and ONLY not in name:
            continue
        try:
            rows += _pair(name, shape, mk_cp, mk_t if torch else None, repeat=3 if QUICK else 7)
        except Exception as e:  # a missing layer elsewhere must not hide the others
            print(f"{name}: skipped ({type(e).__name__}: {e})")
    print_table(rows)


if __name__ == "__main__":
    main()
