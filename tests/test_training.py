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


# -- learning-rate schedulers and gradient clipping against torch ------------------------------
def test_scheduler_lr_sequences_match_torch() -> None:
    path = os.path.join(FIX, "schedulers.safetensors")
    t, meta = cp.load_file(path), cp.safetensors.load_metadata(path) or {}
    assert set(meta) >= {"step_lr", "cosine_lr"}
    for key, spec_json in meta.items():
        spec = json.loads(spec_json)
        cls = getattr(optim.lr_scheduler, spec.pop("name"))
        p = nn.Parameter(cp.zeros(1))
        opt = optim.SGD([p], lr=0.1)
        sch = cls(opt, **spec)
        seq = []
        for _ in range(t[key].shape[0]):
            seq.append(sch.get_last_lr()[0])
            assert opt.param_groups[0]["lr"] == seq[-1]
            opt.step()
            sch.step()
        np.testing.assert_allclose(seq, np_(t[key]), rtol=1e-9, atol=1e-12, err_msg=key)


def test_scheduler_state_dict_round_trip() -> None:
    p = nn.Parameter(cp.zeros(1))
    opt = optim.SGD([p], lr=0.1)
    sch = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        opt.step()
        sch.step()
    sd = sch.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3
    opt2 = optim.SGD([nn.Parameter(cp.zeros(1))], lr=0.1)
    sch2 = optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    # StepLR is chainable, as torch's: it scales the group's current lr, so resuming
    # restores the optimizer's state (its lrs) as well as the scheduler's.
    opt2.load_state_dict(opt.state_dict())
    sch2.load_state_dict(sd)
    sch.step()
    sch2.step()
    assert sch2.get_last_lr() == sch.get_last_lr() == [0.025]


def test_clip_grad_norm_matches_torch() -> None:
    path = os.path.join(FIX, "clip_grad.safetensors")
    t, meta = cp.load_file(path), cp.safetensors.load_metadata(path) or {}
    model = mlp()
    names = [k for k, _ in model.named_parameters()]
    for tag, (max_norm, norm_type) in ((k, json.loads(v)) for k, v in meta.items()):
        norm_type = math.inf if norm_type == "inf" else norm_type
        for k, p in model.named_parameters():
            p.grad = t[f"grad.{k}"].clone()
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=norm_type)
        np.testing.assert_allclose(float(total.item()), float(t[f"{tag}.total"][0].item()), rtol=1e-5, err_msg=tag)
        for k, p in model.named_parameters():
            np.testing.assert_allclose(np_(p.grad), np_(t[f"{tag}.clipped.{k}"]), atol=1e-6, rtol=1e-5, err_msg=f"{tag} {k}")
    assert names


# -- optimizer API -------------------------------------------------------------------------------
def _train_steps(model: nn.Module, opt: optim.Optimizer, n: int, seed: int = 0, dtype: Any = cp.float32) -> List[float]:
    """`n` cross-entropy steps on seeded (6, 4) batches of `dtype`; the losses."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = cp.from_numpy(rng.standard_normal((6, 4))).to(dtype)
        y = cp.from_numpy(rng.integers(0, 3, 6).astype(np.int64))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        lambda ps: optim.Adam(ps, lr=0.01, amsgrad=True),
        lambda ps: optim.AdamW(ps, lr=0.01),
    ],
)
def test_optimizer_state_dict_round_trip_resumes_identically(make: Any) -> None:
    cp.manual_seed(0)
    a = mlp()
    opt_a = make(a.parameters())
    _train_steps(a, opt_a, 3)
    b = mlp()
    b.load_state_dict(a.state_dict())
    opt_b = make(b.parameters())
    sd = opt_a.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sorted(sd["state"]) == list(range(4)) and sd["param_groups"][0]["params"] == [0, 1, 2, 3]
    opt_b.load_state_dict(sd)
    # the loaded state is a copy: stepping A must not change B's buffers
    la = _train_steps(a, opt_a, 3, seed=1)
    lb = _train_steps(b, opt_b, 3, seed=1)
    np.testing.assert_allclose(la, lb, rtol=1e-6)
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_allclose(np_(va), np_(vb), atol=1e-6, err_msg=k)


def test_optimizer_load_state_dict_rejects_mismatch() -> None:
    a, b = mlp(), nn.Linear(4, 3)
    opt_a = optim.SGD(a.parameters(), lr=0.1)
    opt_b = optim.SGD(b.parameters(), lr=0.1)
    with pytest.raises(ValueError):
        opt_b.load_state_dict(opt_a.state_dict())


def test_param_groups_and_add_param_group() -> None:
    m = mlp()
    first, second = m[0], m[2]
    opt = optim.SGD([{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert all(g["momentum"] == 0.9 for g in opt.param_groups)
    extra = nn.Parameter(cp.ones(2))
    opt.add_param_group({"params": [extra], "lr": 1.0, "momentum": 0.0})
    assert len(opt.param_groups) == 3 and opt.param_groups[2]["nesterov"] is False
    with pytest.raises(ValueError):
        opt.add_param_group({"params": [extra]})
    extra.grad = cp.ones(2)
    before = np_(second.weight).copy()
    x = cp.randn(5, 4)
    m(x).sum().backward()
    opt.step()
    np.testing.assert_allclose(np_(extra), [0.0, 0.0], atol=1e-7)  # lr 1, grad 1
    np.testing.assert_allclose(np_(second.weight), before - 0.5 * np_(second.weight.grad), atol=1e-6)
    with pytest.raises(ValueError):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError):
        optim.Adam(m.parameters(), lr=-1.0)
    with pytest.raises(ValueError):
        optim.SGD(m.parameters(), lr=0.1, nesterov=True)


def test_zero_grad_set_to_none() -> None:
    m = nn.Linear(3, 2)
    opt = optim.SGD(m.parameters(), lr=0.1)
    m(cp.randn(4, 3)).sum().backward()
    assert m.weight.grad is not None
    opt.zero_grad(set_to_none=False)
    assert m.weight.grad is not None and float(m.weight.grad.abs().sum().item()) == 0.0
    m(cp.randn(4, 3)).sum().backward()
    opt.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


def test_step_with_closure_and_skips_params_without_grad() -> None:
    m = nn.Linear(3, 1)
    frozen = nn.Parameter(cp.ones(2))
    opt = optim.Adam([{"params": m.parameters()}, {"params": [frozen]}], lr=0.1)
    x, y = cp.randn(8, 3), cp.randn(8, 1)

    def closure() -> cp.Tensor:
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss

    l0 = opt.step(closure)
    assert isinstance(l0, cp.Tensor)
    for _ in range(20):
        opt.step(closure)
    assert closure().item() < l0.item()
    np.testing.assert_array_equal(np_(frozen), [1.0, 1.0])
    assert frozen not in opt.state


def test_adam_decoupled_flag_equals_adamw() -> None:
    cp.manual_seed(3)
    a = mlp()
    b = mlp()
    b.load_state_dict(a.state_dict())
    la = _train_steps(a, optim.AdamW(a.parameters(), lr=0.01, weight_decay=0.1), 4)
    lb = _train_steps(b, optim.Adam(b.parameters(), lr=0.01, weight_decay=0.1, decoupled_weight_decay=True), 4)
    np.testing.assert_allclose(la, lb, rtol=1e-6)


# -- fused optimizer kernels (src/optim.rs) against the per-parameter tensor path ---------------
FUSED_CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.6, 0.95), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.99), maximize=True)),  # lerp weight >= 0.5: torch's other form
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
]


def _reference_steps(name: str, kwargs: Dict[str, Any], p: np.ndarray, grads: List[np.ndarray]) -> Dict[str, np.ndarray]:
    """torch.optim's single-tensor update rules in float64 NumPy: the oracle for the Rust steps."""
    lr, wd, maximize = kwargs["lr"], kwargs.get("weight_decay", 0.0), kwargs.get("maximize", False)
    p = p.astype(np.float64).copy()
    state: Dict[str, np.ndarray] = {}
    for step, g in enumerate(grads, 1):
        g = -g if maximize else g.astype(np.float64)
        if name == "SGD":
            mom = kwargs.get("momentum", 0.0)
            if wd:
                g = g + wd * p
            if mom:
                buf = (
                    g.copy() if "momentum_buffer" not in state else mom * state["momentum_buffer"] + (1 - kwargs.get("dampening", 0.0)) * g
                )
                state["momentum_buffer"] = buf
                g = g + mom * buf if kwargs.get("nesterov") else buf
            p = p - lr * g
            continue
        b1, b2 = kwargs.get("betas", (0.9, 0.999))
        if name == "AdamW" and "weight_decay" not in kwargs:
            wd = 1e-2
        if wd and name == "AdamW":
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = state.get("exp_avg", np.zeros_like(p))
        v = state.get("exp_avg_sq", np.zeros_like(p))
        m = m + (1 - b1) * (g - m)
        v = b2 * v + (1 - b2) * g * g
        state["exp_avg"], state["exp_avg_sq"] = m, v
        if kwargs.get("amsgrad"):
            v = state["max_exp_avg_sq"] = np.maximum(state.get("max_exp_avg_sq", np.zeros_like(p)), v)
        denom = np.sqrt(v) / math.sqrt(1 - b2**step) + 1e-8
        p = p - lr / (1 - b1**step) * m / denom
    state["param"] = p
    return state


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
@pytest.mark.parametrize("name,kwargs", FUSED_CONFIGS)
def test_optimizer_steps_match_torch_rules(name: str, kwargs: Dict[str, Any], dtype: Any) -> None:
    """The one-pass Rust update gives torch's update rule, state included (NumPy oracle, 5 steps)."""
    rng = np.random.default_rng(3)
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(5)]
    p = nn.Parameter(cp.from_numpy(p0).to(dtype))
    opt = getattr(optim, name)([p], **kwargs)
    for g in grads:
        p.grad = cp.from_numpy(g).to(dtype)
        opt.step()
    ref = _reference_steps(name, kwargs, p0, grads)
    tol = 1e-5 if dtype == cp.float32 else 1e-12
    assert p.dtype == dtype
    np.testing.assert_allclose(np_(p), ref.pop("param"), rtol=tol, atol=tol)
    state = opt.state_dict()["state"]
    assert set(state.get(0, {})) - {"step"} == set(ref)  # plain SGD keeps no state, as torch
    for key, want in ref.items():
        assert state[0][key].dtype == dtype
        np.testing.assert_allclose(np_(state[0][key]), want, rtol=tol, atol=tol, err_msg=key)


@pytest.mark.parametrize("name,kwargs", [FUSED_CONFIGS[3], FUSED_CONFIGS[5]])
@pytest.mark.parametrize("case", ["strided", "float16", "bfloat16", "aliased"])
def test_optimizer_steps_on_tensors_the_kernel_cannot_write(name: str, kwargs: Dict[str, Any], case: str) -> None:
    """Strided gradients, half-precision parameters and a gradient sharing the
    parameter's storage are updated through float copies written back in place: same rule,
    same Parameter object, same dtype, views of the parameter see the update."""
    rng = np.random.default_rng(5)
    p0 = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    dtype = {"float16": cp.float16, "bfloat16": cp.bfloat16}.get(case, cp.float32)
    p = nn.Parameter(cp.from_numpy(p0).to(dtype))
    view = p.detach()[0]
    opt = getattr(optim, name)([p], **kwargs)
    used = []
    for g in grads:
        if case == "aliased":
            p.grad = p.detach()  # the gradient is the parameter's own storage
            used.append(np_(p).astype(np.float64))
        else:
            p.grad = cp.from_numpy(np.ascontiguousarray(g.T)).t() if case == "strided" else cp.from_numpy(g).to(dtype)
            assert p.grad.is_contiguous() == (case != "strided")
            used.append(np_(p.grad).astype(np.float64))
        opt.step()
    start = np_(cp.from_numpy(p0).to(dtype)).astype(np.float64)
    ref = _reference_steps(name, kwargs, start, used)
    tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(case, 1e-5)
    assert p.dtype == dtype and tuple(p.shape) == (4, 3)
    np.testing.assert_allclose(np_(p).astype(np.float64), ref["param"], rtol=tol, atol=tol)
    np.testing.assert_array_equal(np_(view), np_(p)[0])


def test_optimizer_step_rejects_mismatched_state() -> None:
    """Lists of the wrong length or shape raise, naming the step and the shapes."""
    p = nn.Parameter(cp.zeros(4, 3))
    with pytest.raises(cp.ShapeError, match=r"optimizer.step.*grads 0 has shape \[3, 4\] but its parameter has \[4, 3\]"):
        cp._core._sgd_step([p], [cp.zeros(3, 4)], [], [], 0.1, 0.0, 0.0, 0.0, False, False)
    with pytest.raises(ValueError, match="optimizer.step: expected 1 step counts, got 0"):
        cp._core._adam_step(
            [p], [cp.zeros(4, 3)], [cp.zeros(4, 3)], [cp.zeros(4, 3)], [], [], 0.1, 0.9, 0.999, 1e-8, 0.0, False, False, False
        )


def test_fused_steps_on_large_parameters_match_numpy() -> None:
    """Parameters big enough to be split over threads: torch's formulas, element by element."""
    rng = np.random.default_rng(2)
    n = 300_001
    p0, g = rng.standard_normal(n), rng.standard_normal(n)
    p = nn.Parameter(cp.from_numpy(p0))
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    for _ in range(2):
        p.grad = cp.from_numpy(g)
        opt.step()
    d = g + 0.01 * p0
    ref, buf = p0 - 0.1 * d, d
    d = g + 0.01 * ref
    buf = 0.9 * buf + d
    np.testing.assert_allclose(np_(p), ref - 0.1 * buf, rtol=1e-12, atol=1e-12)
    q = nn.Parameter(cp.from_numpy(p0.astype(np.float32)))
    opt = optim.AdamW([q], lr=0.01, amsgrad=True)
    q.grad = cp.from_numpy(g.astype(np.float32))
    opt.step()
    m, v = 0.1 * g, 0.001 * g * g
    denom = np.sqrt(v) / np.sqrt(1 - 0.999) + 1e-8
    ref = p0 * (1 - 0.01 * 0.01) - 0.01 / (1 - 0.9) * m / denom
    np.testing.assert_allclose(np_(q), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np_(opt.state[q]["max_exp_avg_sq"]), v, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda ps: optim.AdamW(ps, lr=0.01),
        lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    ],
)
def test_group_updated_side_by_side_equals_one_parameter_at_a_time(make: Any) -> None:
    """A group of 270K elements updates its parameters on several threads; each alone
    (under the group threshold) is updated on the calling thread: bit-equal results."""
    rng = np.random.default_rng(8)
    shapes = [(100_000,), (300, 300), (80_000,), (7,)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    together = [nn.Parameter(cp.tensor(a)) for a in init]
    alone = [nn.Parameter(cp.tensor(a)) for a in init]
    opt, opts = make(together), [make([p]) for p in alone]
    for gs in grads:
        for p, q, g in zip(together, alone, gs):
            p.grad, q.grad = cp.tensor(g), cp.tensor(g)
        opt.step()
        for o in opts:
            o.step()
    for p, q, a in zip(together, alone, init):
        assert not np.array_equal(np_(p), a)
        np.testing.assert_array_equal(np_(p), np_(q))


def _cross_entropy_reference(x: np.ndarray, t: np.ndarray, g: np.ndarray, kwargs: Dict[str, Any]) -> Any:
    """torch's cross-entropy and its gradient (upstream `g`) in float64 NumPy: the oracle."""
    n, c = x.shape
    w = np.ones(c) if kwargs.get("weight") is None else np_(kwargs["weight"]).astype(np.float64)
    ls, red = kwargs.get("label_smoothing", 0.0), kwargs.get("reduction", "mean")
    valid = t != kwargs.get("ignore_index", -100)
    ts = np.where(valid, t, 0)
    shifted = x - x.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    p = np.exp(logp)
    wt = w[ts] * valid
    per = -(1 - ls) * wt * logp[np.arange(n), ts] - ls / c * (logp * w).sum(1) * valid
    dper = (1 - ls) * wt[:, None] * (p - np.eye(c)[ts]) + ls / c * (p * w.sum() - w) * valid[:, None]
    if red == "none":
        return per, dper * g[:, None]
    if red == "sum":
        return per.sum(), dper * g
    return per.sum() / wt.sum(), dper * g / wt.sum()


CE_CONFIGS = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none", weight=True),
    dict(label_smoothing=0.3, weight=True),
    dict(label_smoothing=0.1, reduction="none"),
    dict(ignore_index=7, reduction="mean", weight=True),
]


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
@pytest.mark.parametrize("config", range(len(CE_CONFIGS)))
def test_cross_entropy_matches_reference(dtype: Any, config: int) -> None:
    """`F.cross_entropy` (one Rust op, fused one-pass backward on the CPU) against torch's
    formulas: every reduction, class weights, ignore_index and label smoothing, gradients too."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((7, 5))
    kwargs: Dict[str, Any] = dict(CE_CONFIGS[config])
    if kwargs.get("weight"):
        kwargs["weight"] = cp.from_numpy(rng.random(5)).to(dtype)
    ignore = kwargs.get("ignore_index", -100)
    t = np.array([0, 4, 2, ignore, 1, 3, 0 if ignore == 7 else 4])
    xt = cp.from_numpy(x).to(dtype).requires_grad_(True)
    loss = F.cross_entropy(xt, cp.from_numpy(t), **kwargs)
    g = np.linspace(0.5, 1.5, max(loss.numel(), 1)).reshape(tuple(loss.shape))
    (loss * cp.from_numpy(g).to(dtype)).sum().backward()
    want, dwant = _cross_entropy_reference(np_(xt.detach()).astype(np.float64), t, g, kwargs)
    tol = 1e-6 if dtype == cp.float32 else 1e-12
    assert loss.dtype == xt.grad.dtype == dtype
    np.testing.assert_allclose(np_(loss), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(np_(xt.grad), dwant, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(6, 4), (2, 4, 3), (2, 4, 2, 2), (4,)])
@pytest.mark.parametrize("kwargs", [dict(), dict(reduction="none", weight=True), dict(reduction="sum", ignore_index=1)])
def test_cross_entropy_is_nll_of_log_softmax(shape: Any, kwargs: Dict[str, Any]) -> None:
    """The fused op and `nll_loss(log_softmax(x))` (the tensor-op form, also the off-CPU
    path) agree in value and gradient, for spatial inputs and an unbatched one too."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape)
    c = shape[1] if len(shape) > 1 else shape[0]
    t = rng.integers(0, c, (shape[0],) + shape[2:] if len(shape) > 1 else ())
    kw = dict(kwargs, weight=cp.from_numpy(rng.random(c))) if kwargs.get("weight") else kwargs
    out = []
    for fused in (True, False):
        xt = cp.from_numpy(x).requires_grad_(True)
        tt = cp.from_numpy(np.asarray(t))
        loss = F.cross_entropy(xt, tt, **kw) if fused else F.nll_loss(F.log_softmax(xt, 1 if len(shape) > 1 else 0), tt, **kw)
        (loss * cp.from_numpy(np.linspace(0.5, 1.5, max(loss.numel(), 1)).reshape(tuple(loss.shape)))).sum().backward()
        out.append((np_(loss), np_(xt.grad)))
    assert out[0][0].shape == out[1][0].shape == (np.asarray(t).shape if kwargs.get("reduction") == "none" else ())
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-12)


def test_cross_entropy_on_large_logits() -> None:
    """Logits big enough to be split over threads by rows give torch's formulas."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((300, 1000)).astype(np.float32)
    t = rng.integers(0, 1000, 300)
    xt = cp.from_numpy(x).requires_grad_(True)
    loss = F.cross_entropy(xt, cp.from_numpy(t), label_smoothing=0.1)
    loss.backward()
    want, dwant = _cross_entropy_reference(x.astype(np.float64), t, np.float64(1.0), dict(label_smoothing=0.1))
    assert abs(loss.item() - want) < 1e-5
    np.testing.assert_allclose(np_(xt.grad), dwant, atol=1e-8, rtol=1e-4)


@pytest.mark.parametrize("dtype", [cp.float16, cp.bfloat16])
def test_cross_entropy_half_precision(dtype: Any) -> None:
    """Half-precision logits compute in float32 and give a result of their own dtype."""
    rng = np.random.default_rng(12)
    x = cp.from_numpy(rng.standard_normal((6, 5)).astype(np.float32)).to(dtype)
    t = cp.from_numpy(rng.integers(0, 5, 6))
    xt = x.requires_grad_(True)
    loss = F.cross_entropy(xt, t, label_smoothing=0.1)
    loss.backward()
    want, dwant = _cross_entropy_reference(np_(x.float()).astype(np.float64), np_(t), np.float64(1.0), dict(label_smoothing=0.1))
    assert loss.dtype == xt.grad.dtype == dtype
    np.testing.assert_allclose(np_(loss.float()), want, rtol=1e-2)
    np.testing.assert_allclose(np_(xt.grad.float()), dwant, atol=1e-2)


@pytest.mark.parametrize(
    "call,err,words",
    [
        (lambda: F.cross_entropy(cp.ones(4, 3), cp.tensor([0, 1, 2, 0]), reduction="avg"), ValueError, ["cross_entropy", "'avg'"]),
        (lambda: F.cross_entropy(cp.ones(4, 3), cp.tensor([0, 1, 2, 0]), weight=cp.ones(4)), cp.ShapeError, ["all 3 classes", "[4]"]),
        (lambda: F.cross_entropy(cp.ones(4, 3), cp.ones(4, 2)), cp.ShapeError, ["[4, 2]", "[4, 3]"]),
        (lambda: F.cross_entropy(cp.ones(4, 3), cp.ones(4, dtype=cp.bool)), TypeError, ["integer", "bool"]),
        (lambda: F.cross_entropy(cp.ones(4, 3), cp.tensor([0, 1, 2, 0]), label_smoothing=1.5), ValueError, ["label_smoothing", "1.5"]),
        (lambda: F.cross_entropy(cp.ones(4, 3, dtype=cp.int64), cp.tensor([0, 1, 2, 0])), cp.DTypeError, ["floating", "int64"]),
        (lambda: F.nll_loss(cp.ones(4, 3), cp.tensor([0, 1, -2, 0])), IndexError, ["nll_loss", "-2", "3 classes"]),
        (lambda: F.nll_loss(cp.ones(()), cp.tensor(0)), cp.ShapeError, ["nll_loss", "0-d"]),
    ],
)
def test_loss_argument_errors(call: Any, err: Any, words: List[str]) -> None:
    """Bad arguments raise the right exception, naming the op, the shapes and dtypes."""
    with pytest.raises(err) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


# -- utils.data -------------------------------------------------------------------------------
def test_dataloader_batching_and_drop_last() -> None:
    x = cp.arange(10).reshape(10, 1).float()
    y = cp.arange(10)
    ds = TensorDataset(x, y)
    dl = DataLoader(ds, batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert batches[2][1].tolist() == [8, 9]
    dl = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dl) == 2 and [b[1].tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=0)


def test_dataloader_shuffle_reproducible_under_manual_seed() -> None:
    ds = TensorDataset(cp.arange(20))

    def order(seed: int) -> List[int]:
        cp.manual_seed(seed)
        return [i for (b,) in DataLoader(ds, batch_size=6, shuffle=True) for i in b.tolist()]

    a, b, c = order(5), order(5), order(6)
    assert a == b and sorted(a) == list(range(20))
    assert a != c and a != list(range(20))
    # two epochs of one loader see different orders
    cp.manual_seed(5)
    dl = DataLoader(ds, batch_size=20, shuffle=True)
    e1, e2 = next(iter(dl))[0].tolist(), next(iter(dl))[0].tolist()
    assert e1 != e2


class _DictDS(Dataset[Dict[str, Any]]):
    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int) -> Dict[str, Any]:
        return {"x": np.full((2,), i, dtype=np.float32), "label": i, "name": f"s{i}", "w": np.float32(i) / 2}


def test_dataloader_dict_tuple_numpy_batches() -> None:
    b = next(iter(DataLoader(_DictDS(), batch_size=3)))
    assert set(b) == {"x", "label", "name", "w"}
    assert tuple(b["x"].shape) == (3, 2) and b["x"].dtype == cp.float32
    assert b["label"].tolist() == [0, 1, 2] and b["label"].dtype == cp.int64
    assert b["name"] == ["s0", "s1", "s2"]
    assert b["w"].dtype == cp.float32 and b["w"].tolist() == [0.0, 0.5, 1.0]

    class Pairs(Dataset[tuple]):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> tuple:
            return np.arange(3, dtype=np.float64) + i, float(i)

    xb, yb = next(iter(DataLoader(Pairs(), batch_size=4)))
    assert xb.dtype == cp.float64 and tuple(xb.shape) == (4, 3) and np_(xb)[3, 0] == 3.0
    assert yb.dtype == cp.float64 and yb.tolist() == [0.0, 1.0, 2.0, 3.0]
    # a custom collate_fn and a batch_sampler
    dl = DataLoader(Pairs(), batch_sampler=[[3, 1], [0]], collate_fn=lambda items: [i[1] for i in items])
    assert list(dl) == [[3.0, 1.0], [0.0]] and len(dl) == 2


def test_random_split() -> None:
    ds = TensorDataset(cp.arange(10))
    cp.manual_seed(0)
    a, b = random_split(ds, [7, 3])
    assert len(a) == 7 and len(b) == 3
    seen = sorted(int(a[i][0].item()) for i in range(7)) + sorted(int(b[i][0].item()) for i in range(3))
    assert sorted(seen) == list(range(10))
    c, d, e = random_split(ds, [0.5, 0.3, 0.2])
    assert (len(c), len(d), len(e)) == (5, 3, 2)
    with pytest.raises(ValueError):
        random_split(ds, [4, 4])


# -- keras ----------------------------------------------------------------------------------------
from candle_py import keras  # noqa: E402


def _blobs(n: int = 120, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2.0, 0.0, 0.0, 1.0], [-2.0, 1.0, 0.0, 0.0], [0.0, -2.0, 2.0, 0.0]])
    x = centers[y] + 0.3 * rng.standard_normal((n, 4))
    return x, y  # float64 / int64 arrays, as users pass them


def _clf(seed: int = 0) -> keras.Sequential:
    cp.manual_seed(seed)
    return keras.Sequential([nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)])


def test_keras_fit_evaluate_predict(capsys: Any) -> None:
    x, y = _blobs()
    model = _clf()
    model.compile(optimizer="adam", loss="cross_entropy", metrics=["accuracy"], learning_rate=0.05)
    hist = model.fit(x, y, batch_size=16, epochs=8, validation_split=0.25, verbose=0)
    assert capsys.readouterr().out == ""  # verbose=0 is silent
    assert isinstance(hist, keras.History) and hist.epoch == list(range(8))
    assert set(hist.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 8 for v in hist.history.values())
    assert hist.history["loss"][-1] < hist.history["loss"][0] * 0.2
    assert hist.history["val_accuracy"][-1] == 1.0
    loss, acc = model.evaluate(x, y, verbose=0)
    assert acc == 1.0 and loss < 0.1
    # evaluate's loss is the sample-weighted mean over batches == full-batch loss
    full = F.cross_entropy(model(cp.from_numpy(x.astype(np.float32))), cp.from_numpy(y)).item()
    assert abs(model.evaluate(x, y, batch_size=7, verbose=0, return_dict=True)["loss"] - full) < 1e-5
    pred = model.predict(x, batch_size=50)
    assert isinstance(pred, np.ndarray) and pred.shape == (120, 3)
    assert (pred.argmax(1) == y).all()
    tpred = model.predict(cp.from_numpy(x.astype(np.float32)))
    assert isinstance(tpred, cp.Tensor) and np.allclose(np_(tpred), pred, atol=1e-6)
    assert model.network.training  # predict/evaluate restore training mode


def test_keras_fit_dataloader_and_validation_data() -> None:
    x, y = _blobs(96)
    xv, yv = _blobs(30, seed=1)
    ds = TensorDataset(cp.from_numpy(x.astype(np.float32)), cp.from_numpy(y))
    model = _clf(1)
    model.compile(optim.SGD(model.parameters(), lr=0.1, momentum=0.9), nn.CrossEntropyLoss(), metrics=["acc"])
    calls: List[int] = []
    cb = keras.LambdaCallback(on_batch_end=lambda b, logs: calls.append(b))
    hist = model.fit(DataLoader(ds, batch_size=32, shuffle=True), epochs=3, validation_data=(xv, yv), verbose=0, callbacks=[cb])
    assert calls == [0, 1, 2] * 3
    assert set(hist.history) == {"loss", "acc", "val_loss", "val_acc"}
    assert hist.history["val_acc"][-1] > 0.9
    assert model.evaluate(DataLoader(ds, batch_size=40), verbose=0)[1] > 0.9
    out = model.predict(DataLoader(TensorDataset(cp.from_numpy(xv.astype(np.float32))), batch_size=8))
    assert isinstance(out, cp.Tensor) and tuple(out.shape) == (30, 3)


def test_keras_fit_is_reproducible_under_manual_seed() -> None:
    x, y = _blobs(64)

    def run() -> List[float]:
        model = _clf(7)
        model.compile("sgd", "cross_entropy", learning_rate=0.1)
        cp.manual_seed(11)
        return model.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"]

    assert run() == run()


def test_keras_regression_losses_and_metrics() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 2))
    y = 3 * x[:, 0] + x[:, 1] - 2
    cp.manual_seed(0)
    model = keras.Sequential()
    model.add(nn.Linear(2, 1))
    model.compile("sgd", "mse", metrics=["mae", "rmse"], learning_rate=0.1)
    hist = model.fit(x, y, batch_size=32, epochs=15, verbose=0)
    w, b = np_(model.layers[0].weight)[0], float(np_(model.layers[0].bias)[0])
    np.testing.assert_allclose(w, [3.0, 1.0], atol=1e-3)
    assert abs(b + 2.0) < 1e-3
    h = hist.history
    assert h["rmse"][-1] == pytest.approx(math.sqrt(h["loss"][-1]), rel=1e-3, abs=1e-6)
    assert h["mae"][-1] < 1e-2
    # a custom loss callable and a custom metric function
    m2 = keras.Model(nn.Linear(2, 1))
    m2.compile(
        optim.Adam(m2.parameters(), lr=0.05),
        loss=lambda p, t: ((p.squeeze(1) - t) ** 2).mean(),
        metrics=[lambda p, t: (p.squeeze(1) - t).abs().max()],
    )
    h2 = m2.fit(x.astype(np.float32), y.astype(np.float32), epochs=3, verbose=0).history
    assert "<lambda>" in h2 and h2["loss"][-1] < h2["loss"][0]
    assert isinstance(m2.evaluate(x, y, verbose=0), list)


def test_keras_binary_crossentropy() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((100, 2))
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float64)
    cp.manual_seed(0)
    model = keras.Sequential([nn.Linear(2, 1), nn.Sigmoid()])
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"], learning_rate=0.1)
    model.fit(x, y, batch_size=20, epochs=20, verbose=0)
    assert model.evaluate(x, y, verbose=0)[1] >= 0.95
    logits = keras.Sequential([nn.Linear(2, 1)])
    logits.compile("adam", "bce_with_logits", metrics=["accuracy"], learning_rate=0.1)
    logits.fit(x, y, batch_size=20, epochs=20, verbose=0)
    assert logits.evaluate(x, y, verbose=0)[1] >= 0.95


def test_keras_compile_errors() -> None:
    model = _clf()
    with pytest.raises(RuntimeError, match="compile"):
        model.fit(*_blobs(8), verbose=0)
    with pytest.raises(ValueError, match="unknown loss"):
        model.compile("adam", "hinge_of_doom")
    with pytest.raises(ValueError, match="unknown optimizer"):
        model.compile("lbfgs9", "mse")
    with pytest.raises(ValueError, match="unknown metric"):
        model.compile("adam", "mse", metrics=["f7"])
    model.compile("adam", "cross_entropy")
    with pytest.raises(ValueError, match="different numbers of samples"):
        model.fit(np.zeros((4, 4)), np.zeros(3, dtype=np.int64), verbose=0)
    with pytest.raises(TypeError):
        keras.Model(42)  # type: ignore[arg-type]


def test_keras_summary(capsys: Any) -> None:
    cp.manual_seed(0)
    model = keras.Sequential(
        [nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10)], name="tiny", input_shape=(1, 8, 8)
    )
    model.summary()
    out = capsys.readouterr().out
    assert 'Model: "tiny"' in out
    lines = {ln.split()[0] + " " + ln.split()[1]: ln for ln in out.splitlines() if "(" in ln and ln[:1].isdigit()}
    assert "(None, 4, 8, 8)" in lines["0 (Conv2d)"] and lines["0 (Conv2d)"].rstrip().endswith("40")
    assert "(None, 4, 4, 4)" in lines["2 (MaxPool2d)"]
    assert "(None, 64)" in lines["3 (Flatten)"]
    assert "(None, 10)" in lines["4 (Linear)"] and lines["4 (Linear)"].rstrip().endswith("650")
    assert "Total params: 690" in out and "Trainable params: 690" in out and "Non-trainable params: 0" in out
    # a frozen layer counts as non-trainable; the shape is inferred from the first Linear
    mlp_model = keras.Model(mlp())
    for p in mlp_model.network[0].parameters():
        p.requires_grad_(False)
    lines_out: List[str] = []
    mlp_model.summary(print_fn=lines_out.append)
    text = "\n".join(lines_out)
    assert "(None, 8)" in text and "(None, 3)" in text
    assert "Total params: 67" in text and "Trainable params: 27" in text and "Non-trainable params: 40" in text
    # hooks are removed after tracing
    assert all(not m._forward_hooks for m in mlp_model.network.modules())


def test_keras_summary_after_fit_uses_seen_input_shape(capsys: Any) -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten())
            self.head = nn.Linear(2 * 4 * 4, 3)

        def forward(self, x: cp.Tensor) -> cp.Tensor:
            return self.head(self.body(x))

    model = keras.Model(Net())
    model.compile("sgd", "cross_entropy")
    rng = np.random.default_rng(0)
    model.fit(rng.standard_normal((8, 1, 6, 6)), rng.integers(0, 3, 8), epochs=1, verbose=0)
    model.summary()
    out = capsys.readouterr().out
    assert "body.0 (Conv2d)" in out and "(None, 2, 4, 4)" in out and "head (Linear)" in out and "(None, 3)" in out


def test_keras_save_and_load_weights(tmp_path: Any) -> None:
    x, y = _blobs(60)
    model = _clf()
    model.compile("adam", "cross_entropy", metrics=["accuracy"], learning_rate=0.05)
    model.fit(x, y, epochs=3, verbose=0)
    path = tmp_path / "model.safetensors"
    model.save(path)
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors"]  # no temporary file left behind
    meta = cp.safetensors.load_metadata(path) or {}
    assert meta["model_class"] == "Sequential" and json.loads(meta["compile"])["loss"] == "cross_entropy"
    fresh = _clf(seed=99)
    assert not np.allclose(fresh.predict(x), model.predict(x))
    fresh.load_weights(path)
    np.testing.assert_array_equal(fresh.predict(x), model.predict(x))
    # the file is a plain state_dict of the wrapped module (keys 0.weight ...)
    bare = mlp_like = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    bare.load_state_dict(cp.load_file(path))
    assert set(cp.load_file(path)) == {"0.weight", "0.bias", "2.weight", "2.bias"} == set(mlp_like.state_dict())
    model.save_weights(tmp_path / "w.safetensors")
    fresh2 = _clf(seed=5)
    fresh2.load_weights(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(fresh2.predict(x), model.predict(x))
    with pytest.raises(FileNotFoundError):
        fresh.load_weights(tmp_path / "missing.safetensors")
    with pytest.raises(Exception, match="size mismatch"):
        keras.Sequential([nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 3)]).load_weights(path)


def test_keras_progress_one_line_per_epoch_when_not_a_tty(capsys: Any) -> None:
    x, y = _blobs(40)
    model = _clf()
    model.compile("adam", "cross_entropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=10, epochs=3, verbose=1)
    out = capsys.readouterr().out
    assert "\r" not in out
    lines = out.splitlines()
    assert len(lines) == 3
    for i, ln in enumerate(lines, start=1):
        assert ln.startswith(f"Epoch {i}/3 - 4/4 ━━━━━━━━━━━━━━━━━━━━ ")
        assert "/step - loss: " in ln and " - accuracy: " in ln
    model.fit(x, y, batch_size=10, epochs=2, verbose=2, validation_split=0.5)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("Epoch 2/2 - 2/2 - ") and "val_loss: " in lines[1] and "━" not in lines[1]
    model.evaluate(x, y, batch_size=20)
    ev = capsys.readouterr().out.splitlines()
    assert len(ev) == 1 and ev[0].startswith("2/2 ") and "loss: " in ev[0]


def test_keras_progress_redraws_in_place_on_a_tty(monkeypatch: Any) -> None:
    import io
    import sys

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    monkeypatch.setattr(sys, "stdout", stream)
    from candle_py.keras import _progress

    x, y = _blobs(40)
    model = _clf()
    model.compile("adam", "cross_entropy")
    orig = _progress.Progbar.__init__

    def no_throttle(self: Any, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        self.interval = 0.0

    monkeypatch.setattr(_progress.Progbar, "__init__", no_throttle)
    model.fit(x, y, batch_size=10, epochs=2, verbose=1)
    out = stream.getvalue()
    assert out.startswith("Epoch 1/2\n") and "\nEpoch 2/2\n" in out
    epoch1 = out.split("Epoch 2/2")[0]
    assert epoch1.count("\r") >= 4  # redrawn per batch, then the final line
    assert "\r1/4 " in epoch1 and "\r4/4 ━━━━━━━━━━━━━━━━━━━━ " in epoch1
    assert out.count("\n") == 4  # two epoch headers + two finished bars


class _Recorder(keras.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.events: List[str] = []

    def on_train_begin(self, logs: Any = None) -> None:
        self.events.append("train_begin")

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.events.append(f"epoch_begin{epoch}")

    def on_batch_end(self, batch: int, logs: Any = None) -> None:
        assert logs is not None and "loss" in logs
        self.events.append(f"batch{batch}")

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        assert logs is not None and {"loss", "val_loss"} <= set(logs)
        self.events.append(f"epoch_end{epoch}")

    def on_train_end(self, logs: Any = None) -> None:
        self.events.append("train_end")


def test_keras_callback_hooks_order() -> None:
    x, y = _blobs(20)
    model = _clf()
    model.compile("sgd", "cross_entropy")
    rec = _Recorder()
    model.fit(x, y, batch_size=8, epochs=2, validation_data=(x, y), callbacks=[rec], verbose=0)
    assert rec.events == [
        "train_begin",
        "epoch_begin0",
        "batch0",
        "batch1",
        "batch2",
        "epoch_end0",
        "epoch_begin1",
        "batch0",
        "batch1",
        "batch2",
        "epoch_end1",
        "train_end",
    ]
    assert rec.model is model and rec.params["epochs"] == 2 and rec.params["steps"] == 3


def test_keras_early_stopping_restores_best_weights() -> None:
    x, y = _blobs(40)
    model = _clf()
    model.compile("sgd", "cross_entropy", learning_rate=0.05)
    # a scripted monitor: improves until epoch 2, then gets worse
    scripted = [1.0, 0.5, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0]
    snapshots: Dict[int, Dict[str, np.ndarray]] = {}

    def script(epoch: int, logs: Any) -> None:
        logs["score"] = scripted[epoch]
        snapshots[epoch] = {k: np_(v).copy() for k, v in model.state_dict().items()}

    es = keras.EarlyStopping(monitor="score", patience=2, restore_best_weights=True)
    hist = model.fit(x, y, epochs=10, verbose=0, callbacks=[keras.LambdaCallback(on_epoch_end=script), es])
    assert hist.epoch == [0, 1, 2, 3, 4] and model.stop_training
    assert es.stopped_epoch == 4 and es.best_epoch == 2 and es.best == 0.2
    assert hist.history["score"] == scripted[:5]
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(np_(v), snapshots[2][k])
    # mode "max" from the name, min_delta, and no restore
    es2 = keras.EarlyStopping(monitor="val_accuracy", patience=1, min_delta=0.5)
    assert es2.mode == "max"
    m2 = _clf()
    m2.compile("sgd", "cross_entropy", metrics=["accuracy"])
    h2 = m2.fit(x, y, epochs=6, validation_data=(x, y), verbose=0, callbacks=[es2])
    assert len(h2.epoch) == 2  # accuracy can never improve by 0.5 twice


def test_keras_model_checkpoint(tmp_path: Any) -> None:
    x, y = _blobs(40)
    model = _clf()
    model.compile("adam", "cross_entropy", metrics=["accuracy"], learning_rate=0.05)
    every = keras.ModelCheckpoint(str(tmp_path / "ep{epoch:02d}.safetensors"), save_best_only=False, save_weights_only=True)
    scripted = [0.5, 0.4, 0.45, 0.1]
    saved_best: Dict[str, np.ndarray] = {}

    def script(epoch: int, logs: Any) -> None:
        logs["val_loss"] = scripted[epoch]
        if epoch == 3:
            saved_best.update({k: np_(v).copy() for k, v in model.state_dict().items()})

    best = keras.ModelCheckpoint(tmp_path / "best" / "model.safetensors", monitor="val_loss", save_best_only=True)
    model.fit(x, y, epochs=4, verbose=0, callbacks=[keras.LambdaCallback(on_epoch_end=script), every, best])
    assert sorted(os.listdir(tmp_path)) == ["best", "ep01.safetensors", "ep02.safetensors", "ep03.safetensors", "ep04.safetensors"]
    assert os.listdir(tmp_path / "best") == ["model.safetensors"] and best.best == 0.1
    fresh = _clf(3)
    fresh.load_weights(tmp_path / "best" / "model.safetensors")
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(np_(v), saved_best[k])
    assert (cp.safetensors.load_metadata(tmp_path / "best" / "model.safetensors") or {}).get("model_class") == "Sequential"


def test_keras_learning_rate_scheduler_and_subclassed_model() -> None:
    class Tiny(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x: cp.Tensor) -> cp.Tensor:
            return self.fc(x)

    x, y = _blobs(30)
    model = Tiny()
    assert list(model.state_dict()) == ["fc.weight", "fc.bias"]
    model.compile(optim.SGD(model.parameters(), lr=0.1), "cross_entropy")
    lrs: List[float] = []
    sched = keras.LearningRateScheduler(lambda epoch, lr: 0.1 * 0.5**epoch)
    hist = model.fit(
        x,
        y,
        epochs=3,
        verbose=0,
        callbacks=[sched, keras.LambdaCallback(on_epoch_begin=lambda e, logs: lrs.append(model.optimizer.param_groups[0]["lr"]))],
    )
    assert lrs == [0.1, 0.05, 0.025] and hist.history["learning_rate"] == lrs
    opt = optim.SGD(model.parameters(), lr=0.2)
    model.compile(opt, "cross_entropy")
    step = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.1)
    model.fit(x, y, epochs=2, verbose=0, callbacks=[keras.LearningRateScheduler(step)])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.002)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_differentiable_optimizer_step_is_refused(name: str) -> None:
    p = nn.Parameter(cp.zeros(2))
    with pytest.raises(NotImplementedError, match=f"{name}: differentiable=True"):
        getattr(optim, name)([p], lr=0.1, differentiable=True)
    getattr(optim, name)([p], lr=0.1, foreach=True, fused=False)  # kernel choices: the same update
