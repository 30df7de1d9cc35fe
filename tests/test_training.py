"""Training against PyTorch: optimizers (SGD, Adam, AdamW), schedulers and
gradient clipping replay fixed batches from tests/fixtures/training (made by
tools/make_fixtures_training.py) and must give the same loss at every step and
the same final weights; plus optimizer state dicts, param groups, DataLoader."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from candle_py import optim
from candle_py.utils.data import DataLoader, Dataset, TensorDataset, random_split

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "training")
TRAIN_CASES = sorted(f[:-12] for f in os.listdir(FIX) if f.endswith(".safetensors") and f[:-12] not in ("schedulers", "clip_grad"))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def np_(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.detach())


def load_case(name: str) -> tuple:
    path = os.path.join(FIX, name + ".safetensors")
    return cp.load_file(path), cp.safetensors.load_metadata(path) or {}


def test_fixture_cases_present() -> None:
    assert len(TRAIN_CASES) >= 15
    assert {"sgd_momentum", "sgd_nesterov_wd", "adam", "adam_amsgrad", "adamw", "conv_adam"} <= set(TRAIN_CASES)


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_training_matches_torch(case: str) -> None:
    t, meta = load_case(case)
    model = {"mlp": mlp, "convnet": convnet}[meta["model"]]()
    model.load_state_dict({k[5:]: v for k, v in t.items() if k.startswith("init.")})
    kwargs = json.loads(meta["kwargs"])
    groups = json.loads(meta["groups"])
    params: Any = list(model.parameters())
    if groups is not None:
        half = len(params) // 2
        params = [dict(groups[0], params=params[:half]), dict(groups[1], params=params[half:])]
    opt = getattr(optim, meta["optimizer"])(params, **kwargs)
    sched_spec = json.loads(meta["scheduler"])
    sched = None
    if sched_spec is not None:
        spec = dict(sched_spec)
        sched = getattr(optim.lr_scheduler, spec.pop("name"))(opt, **spec)
    clip = json.loads(meta["clip"])
    steps = int(meta["steps"])
    losses, lrs = [], []
    for i in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        loss = F.cross_entropy(model(t[f"batch.{i}.x"]), t[f"batch.{i}.y"])
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    np.testing.assert_allclose(losses, np_(t["losses"]), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(lrs, np_(t["lrs"]), rtol=1e-9)
    final = model.state_dict()
    for k, v in t.items():
        if k.startswith("final."):
            np.testing.assert_allclose(np_(final[k[6:]]), np_(v), atol=1e-4, err_msg=f"{case}: {k}")
    # the parameters were updated in place: the module holds the same Parameter objects
    assert all(any(p is q for q in model.parameters()) for g in opt.param_groups for p in g["params"])
