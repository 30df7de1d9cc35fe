"""Make the PyTorch reference fixtures for training (optimizers, schedulers,
gradient clipping) that tests/test_training.py compares against.

Needs torch; the tests never import it. Each training case writes
tests/fixtures/training/<case>.safetensors with:
  init.<key>      the model's state_dict before training
  final.<key>     the state_dict after the last optimizer step
  batch.<i>.x / batch.<i>.y   the fixed batches, one per step
  losses          the loss of every step (computed before that step's update)
  lrs             the learning rate of the first parameter group at every step
and metadata {"model", "optimizer", "kwargs" (JSON), "groups" (JSON: per-group
overrides, the model's parameters split in two groups), "scheduler" (JSON or
"null"), "clip" (max_norm or "null"), "loss", "steps"}.

schedulers.safetensors holds lr sequences (`step_lr`, `cosine_lr`, ...) with their
settings in the metadata; clip_grad.safetensors holds gradients before and after
`clip_grad_norm_` and the returned norms.

Run from the repository root:  python tools/make_fixtures_training.py
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "training")
STEPS = 10


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def convnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


MODELS = {"mlp": mlp, "convnet": convnet}
INPUT = {"mlp": (6, 4), "convnet": (4, 1, 8, 8)}

# (case, model, optimizer, kwargs, per-group overrides or None, scheduler or None, clip max_norm or None)
CASES: List[tuple] = [
    ("sgd_plain", "mlp", "SGD", {"lr": 0.2}, None, None, None),
    ("sgd_momentum", "mlp", "SGD", {"lr": 0.1, "momentum": 0.9}, None, None, None),
    ("sgd_nesterov_wd", "mlp", "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, None, None, None),
    ("sgd_dampening_wd", "mlp", "SGD", {"lr": 0.05, "momentum": 0.5, "dampening": 0.3, "weight_decay": 0.05}, None, None, None),
    ("sgd_maximize", "mlp", "SGD", {"lr": 0.01, "momentum": 0.9, "maximize": True}, None, None, None),
    ("adam", "mlp", "Adam", {"lr": 0.01}, None, None, None),
    ("adam_amsgrad", "mlp", "Adam", {"lr": 0.01, "amsgrad": True}, None, None, None),
    ("adam_wd_betas", "mlp", "Adam", {"lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.05}, None, None, None),
    ("adamw", "mlp", "AdamW", {"lr": 0.01, "weight_decay": 0.1}, None, None, None),
    ("adamw_amsgrad", "mlp", "AdamW", {"lr": 0.01, "amsgrad": True}, None, None, None),
    ("sgd_param_groups", "mlp", "SGD", {"lr": 0.1, "momentum": 0.9}, [{}, {"lr": 0.02, "momentum": 0.5}], None, None),
    ("adam_param_groups", "mlp", "Adam", {"lr": 0.01}, [{"weight_decay": 0.1}, {"lr": 0.003, "amsgrad": True}], None, None),
    ("sgd_steplr", "mlp", "SGD", {"lr": 0.2, "momentum": 0.9}, None, {"name": "StepLR", "step_size": 3, "gamma": 0.5}, None),
    ("adam_cosine", "mlp", "Adam", {"lr": 0.02}, None, {"name": "CosineAnnealingLR", "T_max": 6, "eta_min": 0.001}, None),
    ("sgd_clip", "mlp", "SGD", {"lr": 0.5, "momentum": 0.9}, None, None, 0.5),
    ("conv_sgd", "convnet", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}, None, None, None),
    ("conv_adam", "convnet", "Adam", {"lr": 0.01}, None, None, None),
]


def make_scheduler(opt: torch.optim.Optimizer, spec: Optional[Dict[str, Any]]) -> Any:
    if spec is None:
        return None
    spec = dict(spec)
    cls = getattr(torch.optim.lr_scheduler, spec.pop("name"))
    return cls(opt, **spec)


def train_case(
    name: str,
    model_name: str,
    opt_name: str,
    kwargs: Dict[str, Any],
    groups: Optional[List[Dict[str, Any]]],
    sched: Optional[Dict[str, Any]],
    clip: Optional[float],
    seed: int,
) -> None:
    torch.manual_seed(seed)
    model = MODELS[model_name]()
    tensors: Dict[str, torch.Tensor] = {f"init.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    batches = []
    for i in range(STEPS):
        x = torch.randn(*INPUT[model_name])
        y = torch.randint(0, 3, (INPUT[model_name][0],))
        batches.append((x, y))
        tensors[f"batch.{i}.x"], tensors[f"batch.{i}.y"] = x, y
    kw = dict(kwargs)
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    params: Any = list(model.parameters())
    if groups is not None:
        half = len(params) // 2
        params = [dict(groups[0], params=params[:half]), dict(groups[1], params=params[half:])]
    opt = getattr(torch.optim, opt_name)(params, **kw)
    scheduler = make_scheduler(opt, sched)
    losses, lrs = [], []
    for x, y in batches:
        lrs.append(opt.param_groups[0]["lr"])
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    tensors["losses"] = torch.tensor(losses, dtype=torch.float64)
    tensors["lrs"] = torch.tensor(lrs, dtype=torch.float64)
    for k, v in model.state_dict().items():
        tensors[f"final.{k}"] = v.detach().clone()
    meta = {
        "model": model_name,
        "optimizer": opt_name,
        "kwargs": json.dumps(kwargs),
        "groups": json.dumps(groups),
        "scheduler": json.dumps(sched),
        "clip": json.dumps(clip),
        "loss": "cross_entropy",
        "steps": str(STEPS),
    }
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, f"{name}.safetensors"), metadata=meta)


def schedulers() -> None:
    p = torch.nn.Parameter(torch.zeros(1))
    out: Dict[str, torch.Tensor] = {}
    meta: Dict[str, str] = {}
    specs = {
        "step_lr": {"name": "StepLR", "step_size": 3, "gamma": 0.5},
        "step_lr_default": {"name": "StepLR", "step_size": 2},
        "cosine_lr": {"name": "CosineAnnealingLR", "T_max": 10, "eta_min": 0.001},
        "cosine_lr_zero": {"name": "CosineAnnealingLR", "T_max": 4},
    }
    for key, spec in specs.items():
        opt = torch.optim.SGD([p], lr=0.1)
        sch = make_scheduler(opt, spec)
        seq = []
        for _ in range(30):
            seq.append(sch.get_last_lr()[0])
            opt.step()
            sch.step()
        out[key] = torch.tensor(seq, dtype=torch.float64)
        meta[key] = json.dumps(spec)
    save_file(out, os.path.join(OUT, "schedulers.safetensors"), metadata=meta)


def clip_grad() -> None:
    torch.manual_seed(7)
    model = mlp()
    x, y = torch.randn(6, 4) * 3, torch.randint(0, 3, (6,))
    F.cross_entropy(model(x), y).backward()
    grads = {k: p.grad.detach().clone() for k, p in model.named_parameters()}
    out: Dict[str, torch.Tensor] = {f"grad.{k}": v for k, v in grads.items()}
    for tag, max_norm, norm_type in [("l2", 0.1, 2.0), ("inf", 0.05, float("inf")), ("l1_noclip", 1e6, 1.0)]:
        for k, p in model.named_parameters():
            p.grad = grads[k].clone()
        total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=norm_type)
        out[f"{tag}.total"] = total.detach().reshape(1)
        for k, p in model.named_parameters():
            out[f"{tag}.clipped.{k}"] = p.grad.detach().clone()
    meta = {"l2": json.dumps([0.1, 2.0]), "inf": json.dumps([0.05, "inf"]), "l1_noclip": json.dumps([1e6, 1.0])}
    save_file(out, os.path.join(OUT, "clip_grad.safetensors"), metadata=meta)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for i, case in enumerate(CASES):
        train_case(*case, seed=100 + i)
    schedulers()
    clip_grad()
    print(f"wrote {len(CASES) + 2} fixtures to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
