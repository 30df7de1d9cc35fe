"""Optimizers (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS) and
learning-rate schedulers against PyTorch: fixed training runs, scheduler sequences,
L-BFGS trajectories and edge cases from tests/fixtures/optim (made by
tools/make_fixtures_optim.py) must be replayed exactly; plus state dicts in torch's
layout, warnings and argument errors."""

from __future__ import annotations

import json
import math
import os
import warnings
from typing import Any, Dict, List, Optional

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from candle_py import optim
from candle_py.optim import lr_scheduler as lrs

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "optim")
TRAJ = sorted(f[5:-12] for f in os.listdir(FIX) if f.startswith("traj_"))
LBFGS_CASES = sorted(f[6:-12] for f in os.listdir(FIX) if f.startswith("lbfgs_"))
EDGE = sorted(f[5:-12] for f in os.listdir(FIX) if f.startswith("edge_"))

# The same named lambdas as tools/make_fixtures_optim.py.
LAMBDAS = {
    "pow95": lambda e: 0.95**e,
    "stairs": lambda e: 1.0 / (1 + e // 3),
    "half_then_one": lambda e: 0.5 if e < 4 else 1.0,
    "mul98": lambda e: 0.98,
}


def np_(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.detach())


def load(name: str) -> tuple:
    path = os.path.join(FIX, name + ".safetensors")
    return cp.load_file(path), cp.safetensors.load_metadata(path) or {}


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def make_optimizer(name: str, params: Any, kwargs: Dict[str, Any]) -> optim.Optimizer:
    kw = dict(kwargs)
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    return getattr(optim, name)(params, **kw)


def split_groups(params: List[Any], groups: Optional[List[Dict[str, Any]]]) -> Any:
    if groups is None:
        return params
    half = len(params) // 2
    fix = [dict(g, **({"betas": tuple(g["betas"])} if "betas" in g else {})) for g in groups]
    return [dict(fix[0], params=params[:half]), dict(fix[1], params=params[half:])]


def make_scheduler(opt: optim.Optimizer, spec: Optional[Dict[str, Any]]) -> Any:
    if spec is None:
        return None
    spec = dict(spec)
    name = spec.pop("name")
    spec.pop("metrics", None)
    spec.pop("closed_epochs", None)
    cls = getattr(lrs, name)
    if name in ("LambdaLR", "MultiplicativeLR"):
        lam = spec.pop("lr_lambda")
        spec["lr_lambda"] = [LAMBDAS[k] for k in lam] if isinstance(lam, list) else LAMBDAS[lam]
    if name == "SequentialLR":
        return cls(opt, schedulers=[make_scheduler(opt, s) for s in spec.pop("schedulers")], **spec)
    if name == "ChainedScheduler":
        return cls([make_scheduler(opt, s) for s in spec.pop("schedulers")], optimizer=opt)
    return cls(opt, **spec)


def momentum_of(group: Dict[str, Any]) -> float:
    return float(group["betas"][0]) if "betas" in group else float(group.get("momentum", 0.0))


def torch_state(t: Dict[str, cp.Tensor], prefix: str) -> Dict[int, Dict[str, cp.Tensor]]:
    """`state_dict()["state"]` in torch's layout from the fixture's `<prefix>.<i>.<key>` tensors."""
    out: Dict[int, Dict[str, cp.Tensor]] = {}
    for k, v in t.items():
        if k.startswith(prefix + "."):
            i, key = k[len(prefix) + 1 :].split(".", 1)
            out.setdefault(int(i), {})[key] = v
    return out


def tolerance(meta: Dict[str, str]) -> float:
    return 1e-10 if meta["dtype"] == "float64" else 1e-5


def test_fixture_cases_present() -> None:
    names = {"RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"}
    seen = {load("traj_" + c)[1]["optimizer"] for c in TRAJ}
    assert names <= seen and len(TRAJ) >= 25
    assert set(EDGE) == names and len(LBFGS_CASES) >= 4


def run_traj(case: str, start: int = 0, resume: bool = False) -> tuple:
    t, meta = load("traj_" + case)
    dt = getattr(cp, meta["dtype"])
    model = mlp().to(dt)
    prefix = "mid." if resume else "init."
    model.load_state_dict({k[len(prefix) :]: v for k, v in t.items() if k.startswith(prefix) and not k.startswith("mid.state.")})
    opt = make_optimizer(meta["optimizer"], split_groups(list(model.parameters()), json.loads(meta["groups"])), json.loads(meta["kwargs"]))
    sched = make_scheduler(opt, json.loads(meta["scheduler"]))
    if resume:
        opt.load_state_dict({"state": torch_state(t, "mid.state"), "param_groups": json.loads(meta["mid_groups"])})
    losses, lr_seq, moms = [], [], []
    for i in range(start, int(meta["steps"])):
        lr_seq.append(opt.param_groups[0]["lr"])
        moms.append(momentum_of(opt.param_groups[0]))
        opt.zero_grad()
        loss = F.cross_entropy(model(t[f"batch.{i}.x"]), t[f"batch.{i}.y"])
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return t, meta, model, opt, losses, lr_seq, moms


@pytest.mark.parametrize("case", TRAJ)
def test_trajectory_matches_torch(case: str) -> None:
    """Losses, learning rates, momenta, final weights and the final optimizer state equal torch's."""
    t, meta, model, opt, losses, lr_seq, moms = run_traj(case)
    tol = tolerance(meta)
    np.testing.assert_allclose(losses, np_(t["losses"]), atol=tol, rtol=tol)
    np.testing.assert_allclose(lr_seq, np_(t["lrs"]), rtol=1e-12)
    np.testing.assert_allclose(moms, np_(t["moms"]), rtol=1e-12)
    final = model.state_dict()
    for k, v in t.items():
        if k.startswith("final."):
            assert final[k[6:]].dtype == v.dtype
            np.testing.assert_allclose(np_(final[k[6:]]), np_(v), atol=tol, rtol=tol, err_msg=f"{case}: {k}")
    want = torch_state(t, "end.state")
    got = opt.state_dict()["state"]
    assert set(got) == set(want)
    for i, st in want.items():
        assert set(got[i]) == set(st), f"{case}: state keys of param {i}"
        for key, v in st.items():
            g = got[i][key]
            assert tuple(g.shape) == tuple(v.shape), f"{case}: {i}.{key}"
            assert g.dtype == v.dtype, f"{case}: {i}.{key}"
            rt = 1e-6 if key == "mu_product" else tol
            np.testing.assert_allclose(
                np_(g).astype(np.float64), np_(v).astype(np.float64), atol=tol, rtol=rt, err_msg=f"{case}: {i}.{key}"
            )
    # updated in place: the module still holds the optimizer's Parameter objects
    assert all(any(p is q for q in model.parameters()) for g in opt.param_groups for p in g["params"])


@pytest.mark.parametrize("case", [c for c in TRAJ if load("traj_" + c)[1]["scheduler"] == "null"])
def test_resume_from_torch_state_dict(case: str) -> None:
    """torch's state_dict() layout (0-d `step` tensors, `mu_product`, its param_groups)
    loads, and the run continues exactly as torch's did."""
    t, meta, model, opt, losses, _, _ = run_traj(case, start=int(meta_of(case)["mid"]), resume=True)
    tol = tolerance(meta)
    np.testing.assert_allclose(losses, np_(t["losses"])[int(meta["mid"]) :], atol=tol, rtol=tol)
    final = model.state_dict()
    for k, v in t.items():
        if k.startswith("final."):
            np.testing.assert_allclose(np_(final[k[6:]]), np_(v), atol=tol, rtol=tol, err_msg=f"{case}: {k}")


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_resume_from_torch_saved_checkpoint(name: str) -> None:
    """A checkpoint written by torch.save (model and optimizer state_dicts) loads with
    cp.load into our model and optimizer, and the next steps give torch's weights."""
    ckpt = cp.load(os.path.join(FIX, f"ckpt_{name}.pt"))
    model = mlp()
    model.load_state_dict(ckpt["model"])
    opt = getattr(optim, name)(model.parameters())
    opt.load_state_dict(ckpt["optimizer"])
    assert opt.param_groups[0]["lr"] == ckpt["optimizer"]["param_groups"][0]["lr"]
    for x, y in ckpt["batches"]:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    final = model.state_dict()
    for k, v in ckpt["final"].items():
        np.testing.assert_allclose(np_(final[k]), np_(v), atol=1e-5, rtol=1e-5, err_msg=f"{name}: {k}")
    assert float(opt.state[next(iter(model.parameters()))]["step"].item()) == 6.0


def meta_of(case: str) -> Dict[str, str]:
    return load("traj_" + case)[1]


def test_state_dict_round_trip_and_step_as_number() -> None:
    """state_dict() -> load_state_dict() resumes identically; a plain-number `step`
    (torch's older layout) loads too."""
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(6)]
    for name, kw in [("NAdam", {"lr": 0.01}), ("RMSprop", {"momentum": 0.9, "centered": True}), ("Adagrad", {"lr_decay": 0.1})]:
        a = nn.Parameter(cp.ones(3, 2))
        oa = getattr(optim, name)([a], **kw)
        for g in grads[:3]:
            a.grad = cp.from_numpy(g)
            oa.step()
        sd = oa.state_dict()
        sd["state"][0]["step"] = float(sd["state"][0]["step"].item())
        b = nn.Parameter(a.detach().clone())
        ob = getattr(optim, name)([b], **kw)
        ob.load_state_dict(sd)
        for g in grads[3:]:
            a.grad, b.grad = cp.from_numpy(g), cp.from_numpy(g)
            oa.step()
            ob.step()
        np.testing.assert_array_equal(np_(a), np_(b), err_msg=name)
        assert float(ob.state[b]["step"].item()) == 6.0


@pytest.mark.parametrize("case", EDGE)
def test_edge_parameters_match_torch(case: str) -> None:
    """0-d and empty parameters, NaN and +-inf gradients: torch's results, NaNs included."""
    t, meta = load("edge_" + case)
    ps = [nn.Parameter(t[f"p{j}.init"].clone()) for j in range(3)]
    opt = make_optimizer(case, ps, json.loads(meta["kwargs"]))
    for s in range(3):
        for j, p in enumerate(ps):
            p.grad = t[f"p{j}.grad.{s}"].clone()
        opt.step()
    for j, p in enumerate(ps):
        want = np_(t[f"p{j}.final"])
        assert np_(p).shape == want.shape
        np.testing.assert_allclose(np_(p), want, rtol=1e-5, atol=1e-6, err_msg=f"{case} p{j}")
    for i, st in torch_state(t, "state").items():
        for key, v in st.items():
            np.testing.assert_allclose(
                np_(opt.state_dict()["state"][i][key]).astype(np.float64), np_(v).astype(np.float64), rtol=1e-5, atol=1e-6
            )


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
@pytest.mark.parametrize("case", ["float16", "bfloat16", "strided"])
def test_steps_on_tensors_the_kernel_cannot_write(name: str, case: str) -> None:
    """Half-precision parameters and strided gradients go through float32 copies written
    back in place: the same update as float32 (to the half type's precision)."""
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    dtype = {"float16": cp.float16, "bfloat16": cp.bfloat16}.get(case, cp.float32)
    ref = nn.Parameter(cp.from_numpy(p0).to(dtype).float())
    p = nn.Parameter(cp.from_numpy(p0).to(dtype))
    view = p.detach()[0]
    o_ref, o = getattr(optim, name)([ref], lr=0.01), getattr(optim, name)([p], lr=0.01)
    for g in grads:
        gt = cp.from_numpy(g).to(dtype)
        ref.grad = gt.float()
        p.grad = cp.from_numpy(np.ascontiguousarray(g.T)).t() if case == "strided" else gt
        o_ref.step()
        o.step()
    tol = {"float16": 2e-3, "bfloat16": 2e-2}.get(case, 1e-6)
    assert p.dtype == dtype
    np.testing.assert_allclose(np_(p.float()), np_(ref), rtol=tol, atol=tol)
    np.testing.assert_array_equal(np_(view), np_(p)[0])


# -- learning-rate schedulers --------------------------------------------------------------------
def sched_cases() -> List[str]:
    path = os.path.join(FIX, "schedulers.safetensors")
    return sorted(cp.safetensors.load_metadata(path) or {})


@pytest.mark.parametrize("key", sched_cases())
def test_scheduler_sequences_match_torch(key: str) -> None:
    """Learning rates of both groups and group 0's momentum at every step, then the
    deprecated step(epoch) closed forms, equal torch's."""
    t, meta = load("schedulers")
    case = json.loads(meta[key])
    p, q = nn.Parameter(cp.zeros(2)), nn.Parameter(cp.zeros(3))
    opt = make_optimizer(case["optimizer"], [{"params": [p], "lr": case["lrs"][0]}, {"params": [q], "lr": case["lrs"][1]}], case["kwargs"])
    spec = case["spec"]
    sch = make_scheduler(opt, spec)
    seq, moms = [], []
    for i in range(t[f"{key}.lr"].shape[0]):
        seq.append([g["lr"] for g in opt.param_groups])
        moms.append(momentum_of(opt.param_groups[0]))
        assert sch.get_last_lr() == seq[-1]
        opt.step()
        if spec["name"] == "ReduceLROnPlateau":
            sch.step(spec["metrics"][i % len(spec["metrics"])])
        else:
            sch.step()
    np.testing.assert_allclose(seq, np_(t[f"{key}.lr"]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(moms, np_(t[f"{key}.mom"]), rtol=1e-12, atol=1e-15)
    if "closed_epochs" in spec:
        closed = []
        # torch warns that step(epoch) is deprecated, except for CosineAnnealingWarmRestarts (fractional epochs).
        expect = spec["name"] != "CosineAnnealingWarmRestarts"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for e in spec["closed_epochs"]:
                sch.step(e)
                closed.append([g["lr"] for g in opt.param_groups])
        assert any("epoch parameter" in str(w.message) for w in caught) == expect
        np.testing.assert_allclose(closed, np_(t[f"{key}.closed"]), rtol=1e-12, atol=1e-15)


def _sgd(lr: float = 0.1, **kw: Any) -> optim.SGD:
    return optim.SGD([nn.Parameter(cp.zeros(2))], lr=lr, **kw)


@pytest.mark.parametrize(
    "make",
    [
        lambda o: lrs.LambdaLR(o, LAMBDAS["pow95"]),
        lambda o: lrs.MultiStepLR(o, [2, 4], gamma=0.5),
        lambda o: lrs.SequentialLR(o, [lrs.ConstantLR(o, factor=0.5, total_iters=2), lrs.ExponentialLR(o, gamma=0.9)], milestones=[3]),
        lambda o: lrs.ChainedScheduler([lrs.LinearLR(o, total_iters=4), lrs.CosineAnnealingLR(o, T_max=5)]),
        lambda o: lrs.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="triangular2"),
        lambda o: lrs.OneCycleLR(o, max_lr=0.2, total_steps=20),
        lambda o: lrs.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
        lambda o: lrs.PolynomialLR(o, total_iters=8, power=0.5),
    ],
)
def test_scheduler_state_dict_resumes(make: Any) -> None:
    """A scheduler rebuilt on a fresh optimizer and given the saved state (optimizer and
    scheduler) continues with the same learning rates."""
    oa = _sgd(momentum=0.9)
    a = make(oa)
    for _ in range(4):
        oa.step()
        a.step()
    sd = a.state_dict()
    assert "optimizer" not in sd
    ob = _sgd(momentum=0.9)
    b = make(ob)
    ob.load_state_dict(oa.state_dict())
    b.load_state_dict(sd)
    for _ in range(6):
        oa.step()
        ob.step()
        a.step()
        b.step()
        assert b.get_last_lr() == a.get_last_lr()
        assert ob.param_groups[0]["momentum"] == oa.param_groups[0]["momentum"]


def test_reduce_lr_on_plateau_state_dict() -> None:
    oa, ob = _sgd(), _sgd()
    a = lrs.ReduceLROnPlateau(oa, patience=1, cooldown=1)
    for m in [1.0, 1.0, 1.0]:
        a.step(m)
    b = lrs.ReduceLROnPlateau(ob, patience=1, cooldown=1)
    ob.load_state_dict(oa.state_dict())
    b.load_state_dict(a.state_dict())
    assert b.best == 1.0 and b.cooldown_counter == a.cooldown_counter == 1
    for m in [1.0, 1.0, 1.0, 0.5]:
        a.step(m)
        b.step(m)
        assert a.get_last_lr() == b.get_last_lr()
    assert a.get_last_lr()[0] == pytest.approx(0.001)


def test_lambda_state_dict_saves_callable_objects_not_functions() -> None:
    class Decay:
        def __init__(self) -> None:
            self.rate = 0.5

        def __call__(self, e: int) -> float:
            return self.rate**e

    obj = Decay()
    s = lrs.LambdaLR(_sgd(), [obj])
    assert s.state_dict()["lr_lambdas"] == [{"rate": 0.5}]
    assert lrs.LambdaLR(_sgd(), lambda e: 1.0).state_dict()["lr_lambdas"] == [None]
    other = Decay()
    t = lrs.LambdaLR(_sgd(), [other])
    other.rate = 0.1
    t.load_state_dict(s.state_dict())
    assert other.rate == 0.5


def test_scheduler_warnings() -> None:
    o = _sgd()
    s = lrs.StepLR(o, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        s.get_lr()
    o2 = _sgd()
    s2 = lrs.ExponentialLR(o2, gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        o2.step()
        s2.step()
    assert s2.get_last_lr() == [0.05]


def test_resuming_with_last_epoch_needs_initial_lr() -> None:
    with pytest.raises(KeyError, match="initial_lr"):
        lrs.StepLR(_sgd(), step_size=2, last_epoch=3)
    o = _sgd()
    o.param_groups[0]["initial_lr"] = 0.4
    s = lrs.StepLR(o, step_size=2, gamma=0.5, last_epoch=3)
    assert s.last_epoch == 4 and s.base_lrs == [0.4]


@pytest.mark.parametrize(
    "call,err,words",
    [
        (lambda: lrs.LambdaLR(_sgd(), [lambda e: 1.0, lambda e: 1.0]), ValueError, "Expected 1 lr_lambdas, but got 2"),
        (lambda: lrs.MultiplicativeLR(_sgd(), [3]), TypeError, "lr_lambda should be a function"),
        (lambda: lrs.ConstantLR(_sgd(), factor=1.5), ValueError, "between 0 and 1"),
        (lambda: lrs.LinearLR(_sgd(), start_factor=0), ValueError, "Starting multiplicative factor"),
        (lambda: lrs.LinearLR(_sgd(), end_factor=2), ValueError, "Ending multiplicative factor"),
        (lambda: lrs.StepLR("sgd", 3), TypeError, "str is not an Optimizer"),  # type: ignore[arg-type]
        (lambda: lrs.ReduceLROnPlateau(_sgd(), factor=1.0), ValueError, "Factor should be < 1.0"),
        (lambda: lrs.ReduceLROnPlateau(_sgd(), mode="avg"), ValueError, "mode avg is unknown"),
        (lambda: lrs.ReduceLROnPlateau(_sgd(), threshold_mode="x"), ValueError, "threshold mode x is unknown"),
        (lambda: lrs.ReduceLROnPlateau(_sgd(), min_lr=[0.1, 0.2]), ValueError, "expected 1 min_lrs, got 2"),
        (lambda: lrs.CyclicLR(_sgd(), 0.01, 0.1, mode="zigzag"), ValueError, "mode is invalid"),
        (lambda: lrs.CyclicLR(optim.Adagrad([nn.Parameter(cp.zeros(1))]), 0.01, 0.1), ValueError, "must support momentum"),
        (lambda: lrs.CyclicLR(_sgd(), [0.01, 0.02], 0.1), ValueError, "base_lr must have the same length"),
        (lambda: lrs.OneCycleLR(_sgd(), 0.1), ValueError, "either total_steps OR"),
        (lambda: lrs.OneCycleLR(_sgd(), 0.1, total_steps=0), ValueError, "positive integer total_steps"),
        (lambda: lrs.OneCycleLR(_sgd(), 0.1, total_steps=5, pct_start=1), ValueError, "pct_start"),
        (lambda: lrs.OneCycleLR(_sgd(), 0.1, total_steps=5, anneal_strategy="exp"), ValueError, "anneal_strategy"),
        (lambda: lrs.CosineAnnealingWarmRestarts(_sgd(), T_0=0), ValueError, "positive integer T_0"),
        (lambda: lrs.CosineAnnealingWarmRestarts(_sgd(), T_0=2, T_mult=0), ValueError, "T_mult >= 1"),
        (lambda: lrs.SequentialLR(_sgd(), [], []), ValueError, "at least one scheduler"),
        (lambda: lrs.ChainedScheduler([]), ValueError, "at least one scheduler"),
    ],
)
def test_scheduler_argument_errors(call: Any, err: Any, words: str) -> None:
    with pytest.raises(err, match=words):
        call()


def test_composite_scheduler_errors() -> None:
    o, other = _sgd(), _sgd()
    a, b = lrs.ExponentialLR(o, 0.9), lrs.ExponentialLR(other, 0.9)
    with pytest.raises(ValueError, match="same optimizer"):
        lrs.SequentialLR(o, [a, b], milestones=[2])
    with pytest.raises(ValueError, match="number of milestones"):
        lrs.SequentialLR(o, [a, lrs.StepLR(o, 2)], milestones=[2, 3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        lrs.ChainedScheduler([a, lrs.ReduceLROnPlateau(o)])
    one = lrs.OneCycleLR(_sgd(), 0.1, total_steps=2)
    one.optimizer.step()
    one.step()
    one.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        one.step()
    with pytest.raises(ValueError, match="non-negative epoch"):
        lrs.CosineAnnealingWarmRestarts(_sgd(), T_0=2).step(-1)


# -- L-BFGS ---------------------------------------------------------------------------------------
def lbfgs_loss(problem: str, params: List[cp.Tensor], x: cp.Tensor, y: cp.Tensor) -> cp.Tensor:
    if problem == "rosenbrock":
        (z,) = params
        return (1 - z[0]) ** 2 + 100 * (z[1] - z[0] ** 2) ** 2
    w, b = params
    return ((cp.tanh(x @ w.t() + b) - y) ** 2).mean() + 0.01 * (w**4).sum()


@pytest.mark.parametrize("case", LBFGS_CASES)
def test_lbfgs_matches_torch(case: str) -> None:
    """Parameters after every step(closure), the returned losses and torch's
    `func_evals` / `n_iter` counters, with and without the strong-Wolfe line search."""
    t, meta = load("lbfgs_" + case)
    problem, kwargs = meta["problem"], json.loads(meta["kwargs"])
    names = ["z"] if problem == "rosenbrock" else ["w", "b"]
    params = {k: nn.Parameter(t[f"init.{k}"].clone()) for k in names}
    opt = optim.LBFGS(list(params.values()), **kwargs)
    sign = -1.0 if kwargs.get("maximize") else 1.0

    def closure() -> cp.Tensor:
        opt.zero_grad()
        loss = lbfgs_loss(problem, list(params.values()), t["x"], t["y"]) * sign
        loss.backward()
        return loss

    for c in range(int(meta["calls"])):
        loss = opt.step(closure)
        np.testing.assert_allclose(float(loss), float(t["losses"][c].item()), rtol=1e-9, atol=1e-12)
        st = opt.state[params[names[0]]]
        assert st["func_evals"] == int(t["func_evals"][c].item()) and st["n_iter"] == int(t["n_iters"][c].item())
        for k in names:
            np.testing.assert_allclose(np_(params[k]), np_(t[f"after.{c}.{k}"]), rtol=1e-8, atol=1e-10, err_msg=f"{case} call {c} {k}")


def test_lbfgs_errors_and_converged_start() -> None:
    p = nn.Parameter(cp.zeros(2))
    with pytest.raises(ValueError, match="per-parameter options"):
        optim.LBFGS([{"params": [p]}, {"params": [nn.Parameter(cp.zeros(1))]}])
    with pytest.raises(ValueError, match="only 'strong_wolfe'"):
        optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.LBFGS([p], lr=-1)
    opt = optim.LBFGS([p])
    with pytest.raises(TypeError, match="requires a closure"):
        opt.step()
    with pytest.raises(ValueError, match="per-parameter options"):
        opt.add_param_group({"params": [nn.Parameter(cp.zeros(1))]})

    def flat() -> cp.Tensor:  # gradient zero at the start: returns at once, parameters unchanged
        opt.zero_grad()
        loss = (p * 0.0).sum()
        loss.backward()
        return loss

    assert float(opt.step(flat)) == 0.0
    assert opt.state[p]["func_evals"] == 1 and opt.state[p]["n_iter"] == 0
    np.testing.assert_array_equal(np_(p), [0.0, 0.0])


# -- argument errors of the optimizers ------------------------------------------------------------
def _ps() -> List[nn.Parameter]:
    return [nn.Parameter(cp.zeros(2))]


@pytest.mark.parametrize(
    "call,err,words",
    [
        (lambda: optim.RMSprop(_ps(), lr=-1), ValueError, "Invalid learning rate: -1"),
        (lambda: optim.RMSprop(_ps(), alpha=-0.5), ValueError, "Invalid alpha value"),
        (lambda: optim.RMSprop(_ps(), momentum=-1), ValueError, "Invalid momentum value"),
        (lambda: optim.RMSprop(_ps(), eps=-1), ValueError, "Invalid epsilon value"),
        (lambda: optim.Adagrad(_ps(), lr_decay=-1), ValueError, "Invalid lr_decay value"),
        (lambda: optim.Adagrad(_ps(), initial_accumulator_value=-1), ValueError, "Invalid initial_accumulator_value"),
        (lambda: optim.Adadelta(_ps(), rho=1.5), ValueError, "Invalid rho value"),
        (lambda: optim.Adadelta(_ps(), weight_decay=-1), ValueError, "Invalid weight_decay value"),
        (lambda: optim.Adamax(_ps(), betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0"),
        (lambda: optim.NAdam(_ps(), betas=(0.9, -0.1)), ValueError, "Invalid beta parameter at index 1"),
        (lambda: optim.NAdam(_ps(), momentum_decay=-1), ValueError, "Invalid momentum_decay value"),
        (lambda: optim.RAdam(_ps(), eps=-1), ValueError, "Invalid epsilon value"),
        (lambda: optim.RAdam(_ps(), differentiable=True), NotImplementedError, "RAdam: differentiable=True"),
        (lambda: optim.Adagrad(_ps(), differentiable=True), NotImplementedError, "Adagrad: differentiable=True"),
        (lambda: optim.RMSprop([]), ValueError, "empty parameter list"),
    ],
)
def test_optimizer_argument_errors(call: Any, err: Any, words: str) -> None:
    with pytest.raises(err, match=words):
        call()


def test_optim_step_binding_errors() -> None:
    """The fused step names the optimizer and what is wrong: unknown kind, missing or
    unknown hyper-parameters, wrong number of buffers, shapes, step counts."""
    p, g = nn.Parameter(cp.zeros(4, 3)), cp.zeros(4, 3)
    hyper = {"lr": 0.1, "rho": 0.9, "eps": 1e-6, "weight_decay": 0.0, "maximize": 0.0}
    step = cp._core._optim_step
    with pytest.raises(ValueError, match="optimizer.step: unknown optimizer 'adamz'"):
        step("adamz", [p], [g], [], [1.0], [], {})
    with pytest.raises(ValueError, match="adadelta: missing hyper-parameter 'rho'"):
        step("adadelta", [p], [g], [[cp.zeros(4, 3)], [cp.zeros(4, 3)]], [1.0], [], {k: v for k, v in hyper.items() if k != "rho"})
    with pytest.raises(ValueError, match="adadelta: unknown hyper-parameter 'beta1'"):
        step("adadelta", [p], [g], [[cp.zeros(4, 3)], [cp.zeros(4, 3)]], [1.0], [], dict(hyper, beta1=0.9))
    with pytest.raises(ValueError, match=r"adadelta: expected 2 state buffer lists \(square_avg, acc_delta\), got 1"):
        step("adadelta", [p], [g], [[cp.zeros(4, 3)]], [1.0], [], hyper)
    with pytest.raises(cp.ShapeError, match=r"acc_delta 0 has shape \[3, 4\] but its parameter has \[4, 3\]"):
        step("adadelta", [p], [g], [[cp.zeros(4, 3)], [cp.zeros(3, 4)]], [1.0], [], hyper)
    with pytest.raises(ValueError, match="expected 1 step counts, got 2"):
        step("adadelta", [p], [g], [[cp.zeros(4, 3)], [cp.zeros(4, 3)]], [1.0, 2.0], [], hyper)
    with pytest.raises(ValueError, match="expected 1 mu_products, got 0"):
        step("nadam", [p], [g], [[cp.zeros(4, 3)], [cp.zeros(4, 3)]], [1.0], [], {})
    np.testing.assert_array_equal(np_(p), np.zeros((4, 3)))  # nothing was written by the failed calls


def test_momentum_switched_on_later_and_params_without_grad() -> None:
    """A group whose RMSprop momentum is turned on after some steps gets its buffer then
    (as torch's lazily created state); parameters without a gradient are skipped."""
    a, frozen = nn.Parameter(cp.ones(3)), nn.Parameter(cp.ones(2))
    opt = optim.RMSprop([a, frozen], lr=0.1)
    a.grad = cp.ones(3)
    opt.step()
    assert set(opt.state[a]) == {"step", "square_avg"} and frozen not in opt.state
    opt.param_groups[0]["momentum"] = 0.9
    a.grad = cp.ones(3)
    opt.step()
    assert set(opt.state[a]) == {"step", "square_avg", "momentum_buffer"}
    np.testing.assert_array_equal(np_(frozen), [1.0, 1.0])
    assert math.isfinite(float(a.sum().item()))


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_large_parameters_split_over_threads_match_small_ones(name: str) -> None:
    """A parameter big enough to be updated in chunks on several threads gets, element by
    element, the same update as a small parameter holding its first elements."""
    kw: Dict[str, Any] = {"RMSprop": {"momentum": 0.9, "centered": True}, "Adagrad": {"lr_decay": 0.1}}.get(name, {})
    rng = np.random.default_rng(4)
    n, m = 300_001, 777
    p0 = rng.standard_normal(n)
    big, small = nn.Parameter(cp.from_numpy(p0)), nn.Parameter(cp.from_numpy(p0[:m].copy()))
    ob, osm = getattr(optim, name)([big], weight_decay=0.01, **kw), getattr(optim, name)([small], weight_decay=0.01, **kw)
    for _ in range(7):  # past RAdam's switch to the rectified step
        g = rng.standard_normal(n)
        big.grad, small.grad = cp.from_numpy(g), cp.from_numpy(g[:m].copy())
        ob.step()
        osm.step()
    np.testing.assert_array_equal(np_(big)[:m], np_(small))
    assert not np.array_equal(np_(big)[:m], p0[:m])
