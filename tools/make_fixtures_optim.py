"""Make the PyTorch reference fixtures for tests/test_optim.py: optimizer
trajectories (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, with and without
schedulers), learning-rate scheduler sequences, L-BFGS trajectories and edge cases.

Needs torch; the tests never import it. Writes tests/fixtures/optim/:

traj_<case>.safetensors  one training run of the small MLP (training-fixture pattern):
  init.<key> / final.<key>   state_dict before / after the STEPS steps
  batch.<i>.x / batch.<i>.y  the fixed batches
  losses, lrs, moms          per step: loss (before the update), group 0's lr and
                             momentum (`momentum` or `betas[0]`; 0 if none) before the step
  mid.<key>                  the weights after MID steps
  mid.state.<i>.<k>          the optimizer's state_dict()["state"] after MID steps
  end.state.<i>.<k>          ... after the last step
  metadata: optimizer, kwargs, groups (per-group overrides for the two halves of the
  parameters, or null), scheduler (or null), dtype, steps, mid, mid_groups (the
  state_dict's param_groups after MID steps, JSON).
schedulers.safetensors   <key>.lr (steps x groups) and <key>.mom (steps) for each spec in
  the metadata (JSON: optimizer, groups' lrs, scheduler spec; nested specs for
  SequentialLR / ChainedScheduler; `metrics` for ReduceLROnPlateau; `closed_epochs` for the
  deprecated step(epoch) closed forms).
lbfgs_<case>.safetensors init.<name>, x, y, per call `after.<c>.<name>`, `losses`,
  `func_evals`, `n_iters`; metadata: problem, kwargs, calls.
edge_<optimizer>.safetensors  0-d, empty and NaN/inf-gradient parameters over 3 steps:
  p<j>.init, p<j>.grad.<s>, p<j>.final, and the final state `state.<j>.<k>`.
ckpt_<optimizer>.pt      a torch.save'd dict: "model" / "optimizer" state_dicts after 3 steps,
  the 3 next "batches" and the "final" model state_dict.

Run from the repository root:  python tools/make_fixtures_optim.py
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "optim")
STEPS, MID = 8, 4

# Lambdas of LambdaLR / MultiplicativeLR by name; tests/test_optim.py defines the same.
LAMBDAS = {
    "pow95": lambda e: 0.95**e,
    "stairs": lambda e: 1.0 / (1 + e // 3),
    "half_then_one": lambda e: 0.5 if e < 4 else 1.0,
    "mul98": lambda e: 0.98,
}

# (case, optimizer, kwargs, per-group overrides or None, scheduler spec or None, dtype)
TRAJ: List[tuple] = [
    ("rmsprop", "RMSprop", {"lr": 0.01}, None, None, "float32"),
    (
        "rmsprop_centered_mom_wd",
        "RMSprop",
        {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.05, "momentum": 0.8, "centered": True},
        None,
        None,
        "float32",
    ),
    ("rmsprop_maximize", "RMSprop", {"lr": 0.005, "momentum": 0.5, "maximize": True}, None, None, "float32"),
    ("rmsprop_groups", "RMSprop", {"lr": 0.01}, [{"centered": True}, {"lr": 0.002, "momentum": 0.9, "weight_decay": 0.1}], None, "float32"),
    ("rmsprop_f64", "RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.3}, None, None, "float64"),
    ("adagrad", "Adagrad", {"lr": 0.1}, None, None, "float32"),
    (
        "adagrad_decay_wd_init",
        "Adagrad",
        {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.01, "initial_accumulator_value": 0.1, "eps": 1e-8},
        None,
        None,
        "float32",
    ),
    ("adagrad_maximize_groups", "Adagrad", {"lr": 0.05, "maximize": True}, [{}, {"lr": 0.2, "lr_decay": 0.1}], None, "float32"),
    ("adadelta", "Adadelta", {}, None, None, "float32"),
    ("adadelta_wd", "Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.02}, None, None, "float32"),
    ("adadelta_maximize_groups", "Adadelta", {"maximize": True}, [{"rho": 0.95}, {"lr": 2.0, "weight_decay": 0.1}], None, "float32"),
    ("adamax", "Adamax", {"lr": 0.01}, None, None, "float32"),
    ("adamax_wd_betas", "Adamax", {"lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.05}, None, None, "float32"),
    ("adamax_maximize", "Adamax", {"lr": 0.01, "maximize": True, "betas": [0.3, 0.9]}, None, None, "float32"),
    ("nadam", "NAdam", {"lr": 0.01}, None, None, "float32"),
    ("nadam_decoupled", "NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None, None, "float32"),
    (
        "nadam_wd_momentum_decay",
        "NAdam",
        {"lr": 0.01, "weight_decay": 0.01, "momentum_decay": 0.01, "betas": [0.8, 0.99]},
        None,
        None,
        "float32",
    ),
    ("nadam_maximize_groups", "NAdam", {"lr": 0.01, "maximize": True}, [{}, {"lr": 0.003, "weight_decay": 0.05}], None, "float32"),
    ("nadam_f64", "NAdam", {"lr": 0.01, "weight_decay": 0.02}, None, None, "float64"),
    ("radam", "RAdam", {"lr": 0.01}, None, None, "float32"),
    (
        "radam_decoupled",
        "RAdam",
        {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "betas": [0.9, 0.99]},
        None,
        None,
        "float32",
    ),
    ("radam_wd_maximize", "RAdam", {"lr": 0.01, "weight_decay": 0.05, "maximize": True}, None, None, "float32"),
    ("radam_groups", "RAdam", {"lr": 0.01}, [{"betas": [0.5, 0.9]}, {"lr": 0.03}], None, "float32"),
    ("sgd_onecycle", "SGD", {"lr": 0.1, "momentum": 0.9}, None, {"name": "OneCycleLR", "max_lr": 0.5, "total_steps": STEPS}, "float32"),
    (
        "adam_onecycle_three_phase",
        "Adam",
        {"lr": 0.01},
        None,
        {"name": "OneCycleLR", "max_lr": 0.05, "total_steps": STEPS, "three_phase": True, "anneal_strategy": "linear"},
        "float32",
    ),
    (
        "rmsprop_cyclic",
        "RMSprop",
        {"lr": 0.01, "momentum": 0.5},
        None,
        {"name": "CyclicLR", "base_lr": 0.001, "max_lr": 0.02, "step_size_up": 3},
        "float32",
    ),
    (
        "adamw_cyclic_exp_range",
        "AdamW",
        {"lr": 0.01},
        None,
        {"name": "CyclicLR", "base_lr": 0.001, "max_lr": 0.02, "step_size_up": 2, "step_size_down": 3, "mode": "exp_range", "gamma": 0.9},
        "float32",
    ),
    ("nadam_exponential", "NAdam", {"lr": 0.02}, None, {"name": "ExponentialLR", "gamma": 0.8}, "float32"),
    (
        "radam_chained",
        "RAdam",
        {"lr": 0.02},
        None,
        {
            "name": "ChainedScheduler",
            "schedulers": [{"name": "ConstantLR", "factor": 0.5, "total_iters": 3}, {"name": "ExponentialLR", "gamma": 0.9}],
        },
        "float32",
    ),
]


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def make_scheduler(opt: torch.optim.Optimizer, spec: Optional[Dict[str, Any]]) -> Any:
    if spec is None:
        return None
    spec = dict(spec)
    name = spec.pop("name")
    spec.pop("metrics", None)
    spec.pop("closed_epochs", None)
    cls = getattr(torch.optim.lr_scheduler, name)
    if name in ("LambdaLR", "MultiplicativeLR"):
        lam = spec.pop("lr_lambda")
        spec["lr_lambda"] = [LAMBDAS[k] for k in lam] if isinstance(lam, list) else LAMBDAS[lam]
    if name == "SequentialLR":
        return cls(opt, schedulers=[make_scheduler(opt, s) for s in spec.pop("schedulers")], **spec)
    if name == "ChainedScheduler":
        return cls([make_scheduler(opt, s) for s in spec.pop("schedulers")], optimizer=opt)
    return cls(opt, **spec)


def momentum_of(group: Dict[str, Any]) -> float:
    if "betas" in group:
        return float(group["betas"][0])
    return float(group.get("momentum", 0.0))


def make_optimizer(name: str, params: Any, kwargs: Dict[str, Any]) -> torch.optim.Optimizer:
    kw = dict(kwargs)
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    return getattr(torch.optim, name)(params, **kw)


def split_groups(params: List[Any], groups: Optional[List[Dict[str, Any]]]) -> Any:
    if groups is None:
        return params
    half = len(params) // 2
    fix = [dict(g) for g in groups]
    for g in fix:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    return [dict(fix[0], params=params[:half]), dict(fix[1], params=params[half:])]


def state_tensors(prefix: str, sd: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    out = {}
    for i, s in sd["state"].items():
        for k, v in s.items():
            out[f"{prefix}.{i}.{k}"] = (v if torch.is_tensor(v) else torch.tensor(v)).detach().clone()
    return out


def traj(name: str, opt_name: str, kwargs: Dict[str, Any], groups: Any, sched: Any, dtype: str, seed: int) -> None:
    torch.manual_seed(seed)
    dt = getattr(torch, dtype)
    model = mlp().to(dt)
    tensors: Dict[str, torch.Tensor] = {f"init.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    batches = []
    for i in range(STEPS):
        x, y = torch.randn(6, 4, dtype=dt), torch.randint(0, 3, (6,))
        batches.append((x, y))
        tensors[f"batch.{i}.x"], tensors[f"batch.{i}.y"] = x, y
    opt = make_optimizer(opt_name, split_groups(list(model.parameters()), groups), kwargs)
    scheduler = make_scheduler(opt, sched)
    losses, lrs, moms = [], [], []
    mid_groups = None
    for i, (x, y) in enumerate(batches):
        if i == MID:
            for k, v in model.state_dict().items():
                tensors[f"mid.{k}"] = v.detach().clone()
            sd = opt.state_dict()
            tensors.update(state_tensors("mid.state", sd))
            mid_groups = sd["param_groups"]
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(momentum_of(opt.param_groups[0]))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    tensors["losses"] = torch.tensor(losses, dtype=torch.float64)
    tensors["lrs"] = torch.tensor(lrs, dtype=torch.float64)
    tensors["moms"] = torch.tensor(moms, dtype=torch.float64)
    for k, v in model.state_dict().items():
        tensors[f"final.{k}"] = v.detach().clone()
    tensors.update(state_tensors("end.state", opt.state_dict()))
    meta = {
        "optimizer": opt_name,
        "kwargs": json.dumps(kwargs),
        "groups": json.dumps(groups),
        "scheduler": json.dumps(sched),
        "dtype": dtype,
        "steps": str(STEPS),
        "mid": str(MID),
        "mid_groups": json.dumps(mid_groups),
    }
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(OUT, f"traj_{name}.safetensors"), metadata=meta)


SCHED_SGD = {"optimizer": "SGD", "kwargs": {"lr": 0.1, "momentum": 0.9}, "lrs": [0.1, 0.05]}
SCHED_ADAM = {"optimizer": "Adam", "kwargs": {"lr": 0.01}, "lrs": [0.01, 0.002]}
PLATEAU_METRICS = [1.0, 0.9, 0.91, 0.92, 0.93, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.6, 0.7, 0.8, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3]

SCHEDULERS: Dict[str, Dict[str, Any]] = {
    "lambda_one": {**SCHED_SGD, "spec": {"name": "LambdaLR", "lr_lambda": "pow95"}},
    "lambda_per_group": {**SCHED_SGD, "spec": {"name": "LambdaLR", "lr_lambda": ["stairs", "half_then_one"]}},
    "multiplicative": {**SCHED_SGD, "spec": {"name": "MultiplicativeLR", "lr_lambda": "mul98"}},
    "step": {**SCHED_SGD, "spec": {"name": "StepLR", "step_size": 4, "gamma": 0.5, "closed_epochs": [0, 3, 4, 9, 2]}},
    "multistep": {
        **SCHED_SGD,
        "spec": {"name": "MultiStepLR", "milestones": [3, 7, 7, 12], "gamma": 0.3, "closed_epochs": [2, 3, 7, 8, 13]},
    },
    "constant": {**SCHED_SGD, "spec": {"name": "ConstantLR", "factor": 0.25, "total_iters": 6, "closed_epochs": [0, 5, 6, 20]}},
    "constant_default": {**SCHED_SGD, "spec": {"name": "ConstantLR"}},
    "linear": {
        **SCHED_SGD,
        "spec": {"name": "LinearLR", "start_factor": 0.1, "end_factor": 0.9, "total_iters": 7, "closed_epochs": [0, 3, 7, 10]},
    },
    "linear_default": {**SCHED_SGD, "spec": {"name": "LinearLR"}},
    "exponential": {**SCHED_SGD, "spec": {"name": "ExponentialLR", "gamma": 0.9, "closed_epochs": [0, 4, 2]}},
    "polynomial": {**SCHED_SGD, "spec": {"name": "PolynomialLR", "total_iters": 10, "power": 2.0, "closed_epochs": [0, 5, 10, 15]}},
    "polynomial_default": {**SCHED_SGD, "spec": {"name": "PolynomialLR"}},
    "cosine": {**SCHED_SGD, "spec": {"name": "CosineAnnealingLR", "T_max": 7, "eta_min": 0.001, "closed_epochs": [0, 3, 7, 11]}},
    "sequential": {
        **SCHED_SGD,
        "spec": {
            "name": "SequentialLR",
            "schedulers": [{"name": "LinearLR", "start_factor": 0.2, "total_iters": 4}, {"name": "CosineAnnealingLR", "T_max": 8}],
            "milestones": [5],
        },
    },
    "sequential_three": {
        **SCHED_SGD,
        "spec": {
            "name": "SequentialLR",
            "schedulers": [
                {"name": "ConstantLR", "factor": 0.1, "total_iters": 3},
                {"name": "ExponentialLR", "gamma": 0.8},
                {"name": "StepLR", "step_size": 3, "gamma": 0.5},
            ],
            "milestones": [4, 10],
        },
    },
    "chained": {
        **SCHED_SGD,
        "spec": {
            "name": "ChainedScheduler",
            "schedulers": [{"name": "ConstantLR", "factor": 0.1, "total_iters": 6}, {"name": "ExponentialLR", "gamma": 0.9}],
        },
    },
    "chained_step_cosine": {
        **SCHED_SGD,
        "spec": {
            "name": "ChainedScheduler",
            "schedulers": [{"name": "StepLR", "step_size": 5, "gamma": 0.5}, {"name": "CosineAnnealingLR", "T_max": 10}],
        },
    },
    "plateau_min_rel": {**SCHED_SGD, "spec": {"name": "ReduceLROnPlateau", "patience": 2, "factor": 0.5, "metrics": PLATEAU_METRICS}},
    "plateau_min_abs_cooldown": {
        **SCHED_SGD,
        "spec": {
            "name": "ReduceLROnPlateau",
            "patience": 1,
            "factor": 0.3,
            "threshold": 0.05,
            "threshold_mode": "abs",
            "cooldown": 2,
            "min_lr": [0.01, 0.0],
            "metrics": PLATEAU_METRICS,
        },
    },
    "plateau_max_rel": {
        **SCHED_SGD,
        "spec": {"name": "ReduceLROnPlateau", "mode": "max", "patience": 0, "threshold": 0.1, "min_lr": 0.02, "metrics": PLATEAU_METRICS},
    },
    "plateau_max_abs_eps": {
        **SCHED_SGD,
        "spec": {
            "name": "ReduceLROnPlateau",
            "mode": "max",
            "threshold_mode": "abs",
            "patience": 1,
            "factor": 0.9,
            "eps": 0.006,
            "metrics": PLATEAU_METRICS,
        },
    },
    "cyclic_triangular": {**SCHED_SGD, "spec": {"name": "CyclicLR", "base_lr": 0.01, "max_lr": [0.1, 0.2], "step_size_up": 4}},
    "cyclic_triangular2": {
        **SCHED_SGD,
        "spec": {
            "name": "CyclicLR",
            "base_lr": 0.01,
            "max_lr": 0.1,
            "step_size_up": 2,
            "step_size_down": 5,
            "mode": "triangular2",
            "base_momentum": 0.7,
            "max_momentum": 0.95,
        },
    },
    "cyclic_exp_range_adam": {
        **SCHED_ADAM,
        "spec": {"name": "CyclicLR", "base_lr": 0.001, "max_lr": 0.01, "step_size_up": 3, "mode": "exp_range", "gamma": 0.95},
    },
    "cyclic_no_momentum": {
        **SCHED_SGD,
        "spec": {"name": "CyclicLR", "base_lr": [0.01, 0.02], "max_lr": 0.1, "step_size_up": 5, "cycle_momentum": False},
    },
    "onecycle_cos": {**SCHED_SGD, "spec": {"name": "OneCycleLR", "max_lr": [0.5, 0.2], "total_steps": 30}},
    "onecycle_linear_three_adam": {
        **SCHED_ADAM,
        "spec": {
            "name": "OneCycleLR",
            "max_lr": 0.05,
            "epochs": 5,
            "steps_per_epoch": 6,
            "anneal_strategy": "linear",
            "three_phase": True,
            "pct_start": 0.25,
        },
    },
    "onecycle_options": {
        **SCHED_SGD,
        "spec": {
            "name": "OneCycleLR",
            "max_lr": 0.3,
            "total_steps": 40,
            "pct_start": 0.4,
            "div_factor": 10.0,
            "final_div_factor": 100.0,
            "base_momentum": 0.8,
            "max_momentum": 0.9,
        },
    },
    "warm_restarts": {**SCHED_SGD, "spec": {"name": "CosineAnnealingWarmRestarts", "T_0": 4, "eta_min": 0.001}},
    "warm_restarts_mult": {
        **SCHED_SGD,
        "spec": {"name": "CosineAnnealingWarmRestarts", "T_0": 3, "T_mult": 2, "closed_epochs": [0, 2.5, 3, 8.25, 20]},
    },
}
SCHED_STEPS = 30


def schedulers() -> None:
    out: Dict[str, torch.Tensor] = {}
    meta: Dict[str, str] = {}
    for key, case in SCHEDULERS.items():
        p, q = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(3))
        opt = make_optimizer(
            case["optimizer"], [{"params": [p], "lr": case["lrs"][0]}, {"params": [q], "lr": case["lrs"][1]}], case["kwargs"]
        )
        spec = case["spec"]
        sch = make_scheduler(opt, spec)
        lrs, moms = [], []
        for i in range(SCHED_STEPS):
            lrs.append([g["lr"] for g in opt.param_groups])
            moms.append(momentum_of(opt.param_groups[0]))
            opt.step()
            if spec["name"] == "ReduceLROnPlateau":
                sch.step(spec["metrics"][i % len(spec["metrics"])])
            else:
                sch.step()
        out[f"{key}.lr"] = torch.tensor(lrs, dtype=torch.float64)
        out[f"{key}.mom"] = torch.tensor(moms, dtype=torch.float64)
        if "closed_epochs" in spec:
            closed = []
            for e in spec["closed_epochs"]:
                sch.step(e)
                closed.append([g["lr"] for g in opt.param_groups])
            out[f"{key}.closed"] = torch.tensor(closed, dtype=torch.float64)
        meta[key] = json.dumps(case)
    save_file(out, os.path.join(OUT, "schedulers.safetensors"), metadata=meta)


def lbfgs_loss(problem: str, params: List[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if problem == "rosenbrock":
        (z,) = params
        return (1 - z[0]) ** 2 + 100 * (z[1] - z[0] ** 2) ** 2
    w, b = params
    return ((torch.tanh(x @ w.t() + b) - y) ** 2).mean() + 0.01 * (w**4).sum()


def make_closure(
    opt: torch.optim.Optimizer, problem: str, params: List[torch.Tensor], x: torch.Tensor, y: torch.Tensor, sign: float
) -> Any:
    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = sign * lbfgs_loss(problem, params, x, y)
        loss.backward()
        return loss

    return closure


LBFGS_CASES = [
    ("tanh_none", "tanh", {"lr": 0.5, "max_iter": 6}, 3),
    ("tanh_wolfe", "tanh", {"max_iter": 8, "history_size": 3, "line_search_fn": "strong_wolfe"}, 3),
    ("tanh_wolfe_maximize", "tanh", {"max_iter": 5, "line_search_fn": "strong_wolfe", "maximize": True}, 2),
    ("rosenbrock_wolfe", "rosenbrock", {"max_iter": 15, "line_search_fn": "strong_wolfe"}, 3),
    ("rosenbrock_none", "rosenbrock", {"lr": 0.05, "max_iter": 10, "max_eval": 8, "history_size": 4}, 3),
]


def lbfgs() -> None:
    for name, problem, kwargs, calls in LBFGS_CASES:
        torch.manual_seed(11)
        x, y = torch.randn(10, 4, dtype=torch.float64), torch.rand(10, 3, dtype=torch.float64)
        if problem == "rosenbrock":
            params = {"z": torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)}
        else:
            params = {
                "w": (0.5 * torch.randn(3, 4, dtype=torch.float64)).requires_grad_(),
                "b": torch.zeros(3, dtype=torch.float64, requires_grad=True),
            }
        tensors: Dict[str, torch.Tensor] = {f"init.{k}": v.detach().clone() for k, v in params.items()}
        tensors["x"], tensors["y"] = x, y
        opt = torch.optim.LBFGS(list(params.values()), **kwargs)
        sign = -1.0 if kwargs.get("maximize") else 1.0

        closure = make_closure(opt, problem, list(params.values()), x, y, sign)

        losses, evals, iters = [], [], []
        for c in range(calls):
            losses.append(float(opt.step(closure)))
            st = opt.state[list(params.values())[0]]
            evals.append(st["func_evals"])
            iters.append(st["n_iter"])
            for k, v in params.items():
                tensors[f"after.{c}.{k}"] = v.detach().clone()
        tensors["losses"] = torch.tensor(losses, dtype=torch.float64)
        tensors["func_evals"] = torch.tensor(evals, dtype=torch.int64)
        tensors["n_iters"] = torch.tensor(iters, dtype=torch.int64)
        meta = {"problem": problem, "kwargs": json.dumps(kwargs), "calls": str(calls)}
        save_file(tensors, os.path.join(OUT, f"lbfgs_{name}.safetensors"), metadata=meta)


EDGE = {
    "RMSprop": {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.1},
    "Adagrad": {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1},
    "Adadelta": {"weight_decay": 0.1},
    "Adamax": {"lr": 0.01, "weight_decay": 0.1},
    "NAdam": {"lr": 0.01, "weight_decay": 0.1},
    "RAdam": {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True},
}


def edge() -> None:
    """0-d, empty and non-finite-gradient parameters: NaN / inf propagate as in torch."""
    for name, kwargs in EDGE.items():
        torch.manual_seed(5)
        ps = [torch.randn((), requires_grad=True), torch.zeros(0, 3, requires_grad=True), torch.randn(6, requires_grad=True)]
        tensors = {f"p{j}.init": p.detach().clone() for j, p in enumerate(ps)}
        opt = make_optimizer(name, ps, kwargs)
        for s in range(3):
            grads = [torch.randn(()), torch.zeros(0, 3), torch.randn(6)]
            if s == 1:
                grads[2][1] = float("nan")
                grads[2][3] = float("inf")
                grads[2][4] = -float("inf")
            for j, (p, g) in enumerate(zip(ps, grads)):
                p.grad = g
                tensors[f"p{j}.grad.{s}"] = g.clone()
            opt.step()
        for j, p in enumerate(ps):
            tensors[f"p{j}.final"] = p.detach().clone()
        tensors.update(state_tensors("state", opt.state_dict()))
        save_file(
            {k: v.contiguous() for k, v in tensors.items()},
            os.path.join(OUT, f"edge_{name}.safetensors"),
            metadata={"kwargs": json.dumps(kwargs)},
        )


CKPT = {
    "RMSprop": {"lr": 0.01, "momentum": 0.9, "centered": True},
    "Adagrad": {"lr": 0.1, "lr_decay": 0.01},
    "Adadelta": {"weight_decay": 0.01},
    "Adamax": {"lr": 0.01},
    "NAdam": {"lr": 0.01, "weight_decay": 0.01},
    "RAdam": {"lr": 0.01},
}


def checkpoints() -> None:
    """torch.save'd checkpoints (model and optimizer state_dicts after 3 steps, the next 3
    batches and the weights after them): what a user resuming a torch run loads with cp.load."""
    for name, kwargs in CKPT.items():
        torch.manual_seed(77)
        model = mlp()
        opt = make_optimizer(name, model.parameters(), kwargs)
        batches = [(torch.randn(6, 4), torch.randint(0, 3, (6,))) for _ in range(6)]
        ckpt: Dict[str, Any] = {}
        for i, (x, y) in enumerate(batches):
            if i == 3:
                ckpt["model"], ckpt["optimizer"] = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        ckpt["batches"] = batches[3:]
        ckpt["final"] = model.state_dict()
        torch.save(ckpt, os.path.join(OUT, f"ckpt_{name}.pt"))


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for i, case in enumerate(TRAJ):
        traj(*case, seed=200 + i)
    schedulers()
    lbfgs()
    edge()
    checkpoints()
    print(f"wrote {len(TRAJ) + 1 + len(LBFGS_CASES) + len(EDGE) + len(CKPT)} fixtures to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
