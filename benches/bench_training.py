"""Training-step benchmark: steps per second of a full step (forward, loss,
backward, optimizer step) for the digits conv net of examples/digits_cnn.py and a
3-layer MLP, batch 64, candle_py against the same model (same weights, same
batch) in torch in one run. Before timing, the first step's loss of both is
checked to agree.

Rounds of 10 steps alternate between the two libraries, so both see the same
machine (a shared one drifts); the table gives each library's best round (steadier
than the median there) and, for reference, the ratio of the median rounds.
`--threads N` runs both libraries on N threads (sets RAYON_NUM_THREADS before
candle_py loads, and torch.set_num_threads).

Run: python benches/bench_training.py [--quick] [--threads N]
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else None
if THREADS:
    os.environ["RAYON_NUM_THREADS"] = str(THREADS)

sys.path.insert(0, os.path.dirname(__file__))
import statistics
import time

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from _harness import try_torch

torch = try_torch()
if torch is not None and THREADS:
    torch.set_num_threads(THREADS)
QUICK = "--quick" in sys.argv
BATCH = 64


def conv_cp() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def conv_t() -> Any:
    t = torch.nn
    return t.Sequential(
        t.Conv2d(1, 16, 3, padding=1),
        t.ReLU(),
        t.MaxPool2d(2),
        t.Conv2d(16, 32, 3, padding=1),
        t.ReLU(),
        t.MaxPool2d(2),
        t.Flatten(),
        t.Linear(128, 64),
        t.ReLU(),
        t.Linear(64, 10),
    )


def mlp_cp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def mlp_t() -> Any:
    t = torch.nn
    return t.Sequential(t.Linear(64, 256), t.ReLU(), t.Linear(256, 256), t.ReLU(), t.Linear(256, 10))


def make_opt(lib: Any, name: str, params: Any) -> Any:
    if name == "sgd":
        return lib.optim.SGD(params, lr=0.01, momentum=0.9)
    return lib.optim.Adam(params, lr=1e-3)


def _round(step: Callable[[], float], number: int = 10) -> float:
    """Seconds per step over `number` steps."""
    t0 = time.perf_counter()
    for _ in range(number):
        step()
    return (time.perf_counter() - t0) / number


def case(
    name: str, make_c: Callable[[], nn.Module], make_t: Optional[Callable[[], Any]], shape: Tuple[int, ...], opt_name: str, rounds: int
) -> Tuple[str, List[float], List[float]]:
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(shape).astype(np.float32)
    y_np = rng.integers(0, 10, shape[0]).astype(np.int64)
    m = make_c()
    sd = {k: np.asarray(v).copy() for k, v in m.state_dict().items()}
    opt = make_opt(cp, opt_name, m.parameters())
    x, y = cp.from_numpy(x_np), cp.from_numpy(y_np)

    def c_step() -> float:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    first_c = c_step()
    t_step: Optional[Callable[[], float]] = None
    if torch is not None and make_t is not None:
        tm = make_t()
        tm.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
        topt = make_opt(torch, opt_name, tm.parameters())
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

        def t_step_() -> float:
            topt.zero_grad()
            loss = torch.nn.functional.cross_entropy(tm(tx), ty)
            loss.backward()
            topt.step()
            return loss.item()

        t_step = t_step_
        first_t = t_step()
        assert abs(first_c - first_t) < 1e-4, f"{name}: first loss {first_c} vs torch {first_t}"
    c_times, t_times = [], []
    _round(c_step, 2)  # warm-up
    if t_step is not None:
        _round(t_step, 2)
    for _ in range(rounds):
        c_times.append(_round(c_step))
        if t_step is not None:
            t_times.append(_round(t_step))
    return name, c_times, t_times


def main() -> None:
    threads = torch.get_num_threads() if torch else "-"
    print(
        f"threads: torch={threads}, candle_py(rayon)={os.environ.get('RAYON_NUM_THREADS', 'default')}, cpus={os.cpu_count()}, batch={BATCH}"
    )
    rounds = 3 if QUICK else 9
    tc = conv_t if torch else None
    tmlp = mlp_t if torch else None
    rows = [
        case("digits conv net, Adam", conv_cp, tc, (BATCH, 1, 8, 8), "adam", rounds),
        case("digits conv net, SGD momentum", conv_cp, tc, (BATCH, 1, 8, 8), "sgd", rounds),
        case("MLP 64-256-256-10, Adam", mlp_cp, tmlp, (BATCH, 64), "adam", rounds),
        case("MLP 64-256-256-10, SGD momentum", mlp_cp, tmlp, (BATCH, 64), "sgd", rounds),
    ]
    print(
        f"| {'training step (batch 64)':<34} | {'candle_py steps/s':>17} | {'torch steps/s':>13} | {'ratio':>6} "
        f"| {'median ratio':>12} | target |"
    )
    print("|" + "-" * 36 + "|" + "-" * 19 + "|" + "-" * 15 + "|" + "-" * 8 + "|" + "-" * 14 + "|--------|")
    for name, c, t in rows:
        cb = min(c)
        tb = min(t) if t else None
        ratio = f"{tb / cb:.2f}x" if tb else "-"  # candle_py steps/s over torch steps/s
        med = f"{statistics.median(t) / statistics.median(c):.2f}x" if t else "-"
        ok = "-" if tb is None else ("met" if cb <= tb else "missed")
        print(f"| {name:<34} | {1 / cb:>17.0f} | {(1 / tb if tb else float('nan')):>13.0f} | {ratio:>6} | {med:>12} | {ok} (>= torch) |")


if __name__ == "__main__":
    main()
