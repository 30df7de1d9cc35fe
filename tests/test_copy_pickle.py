"""copy.copy / copy.deepcopy / pickle of tensors, Parameters, modules and
optimizers, with torch's semantics (what each keeps: requires_grad, leaf-ness,
`.grad`, the Parameter class, hooks, training flag, shared submodules), and models
and optimizer states sent to spawn workers by pickle."""

from __future__ import annotations

import copy
import multiprocessing as mp
import pickle
from typing import Any, Tuple

import numpy as np
import pytest

import candle_py as cp

nn = cp.nn


def test_copy_copy_is_a_leaf_sharing_data() -> None:
    t = cp.ones(2, requires_grad=True)
    c = copy.copy(t)
    assert c.requires_grad and c.is_leaf and c.grad_fn is None
    nl = t * 2
    c2 = copy.copy(nl)
    assert c2.requires_grad and c2.is_leaf
    plain = cp.zeros(3)
    c3 = copy.copy(plain)
    c3.add_(1)  # torch's copy.copy rebuilds from the same storage: writes show in both
    np.testing.assert_array_equal(plain.numpy(), np.ones(3, np.float32))


def test_deepcopy_tensor_keeps_grad_and_refuses_non_leaves() -> None:
    t = cp.ones(2, requires_grad=True)
    t.grad = cp.full((2,), 3.0)
    d = copy.deepcopy(t)
    assert d.requires_grad and d.is_leaf
    np.testing.assert_array_equal(d.grad.numpy(), [3.0, 3.0])
    d.grad.add_(1)
    np.testing.assert_array_equal(t.grad.numpy(), [3.0, 3.0])  # its own copy
    with cp.no_grad():
        d.add_(5)
    np.testing.assert_array_equal(t.detach().numpy(), [1.0, 1.0])
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(t * 2)
    with cp.no_grad():
        assert not copy.deepcopy(t * 2).requires_grad  # made without a graph: fine


def test_deepcopy_keeps_identity_of_repeated_tensors_and_dtype() -> None:
    a = cp.arange(6.0)
    out = copy.deepcopy({"x": a, "y": a, "h": cp.ones(2, dtype=cp.float16)})
    assert out["x"] is out["y"] and out["x"] is not a
    assert out["h"].dtype == cp.float16


def test_parameter_copies_keep_the_class() -> None:
    p = nn.Parameter(cp.ones(2))
    p.grad = cp.ones(2)
    for c in (copy.copy(p), copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(c) is nn.Parameter and c.requires_grad
    assert copy.deepcopy(p).grad is None  # torch's Parameter.__deepcopy__ leaves .grad behind
    frozen = nn.Parameter(cp.ones(2), requires_grad=False)
    assert not copy.deepcopy(frozen).requires_grad


def test_pickle_keeps_requires_grad_not_grad() -> None:
    t = cp.ones(2, requires_grad=True)
    t.grad = cp.ones(2)
    u = pickle.loads(pickle.dumps(t * 2))
    assert u.requires_grad and u.is_leaf and u.grad is None


def test_deepcopy_module_keeps_flags_hooks_and_sharing() -> None:
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    m.eval()
    calls = []
    m.register_forward_hook(lambda mod, i, o: calls.append(1))
    m[0].weight.grad = cp.ones(3, 3)
    c = copy.deepcopy(m)
    assert not c.training and c[0].weight is not m[0].weight
    assert type(c[0].weight) is nn.Parameter and c[0].weight.grad is None
    x = cp.randn(4, 3)
    np.testing.assert_array_equal(c(x).detach().numpy(), m(x).detach().numpy())
    assert len(calls) == 2  # the hook came along
    with cp.no_grad():
        c[0].weight.add_(1)
    assert not np.array_equal(c[0].weight.detach().numpy(), m[0].weight.detach().numpy())
    shared = nn.Linear(2, 2)
    tied = copy.deepcopy(nn.ModuleList([shared, shared]))
    assert tied[0] is tied[1] and tied[0] is not shared


def test_deepcopy_optimizer_state_is_independent() -> None:
    m = nn.Linear(3, 2)
    opt = cp.optim.Adam(m.parameters(), lr=0.1)
    m(cp.ones(4, 3)).sum().backward()
    opt.step()
    c = copy.deepcopy(opt)
    assert len(c.state) == 2 and c.param_groups[0]["lr"] == 0.1
    st = next(iter(c.state.values()))
    st["exp_avg"].add_(100)
    orig = next(iter(opt.state.values()))["exp_avg"]
    assert float(orig.abs().max().item()) < 100


def _train_in_worker(payload: bytes) -> Tuple[Any, Any]:
    model, opt = pickle.loads(payload)
    loss = model(cp.ones(4, 3)).pow(2).sum()
    loss.backward()
    opt.step()
    return float(loss.item()), model.state_dict()["0.weight"].numpy()


def test_model_and_optimizer_pickled_to_a_spawn_worker() -> None:
    cp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = cp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(cp.ones(4, 3)).sum().backward()
    opt.step()
    opt.zero_grad()
    payload = pickle.dumps((model, opt))
    with mp.get_context("spawn").Pool(1) as pool:
        loss, w = pool.apply_async(_train_in_worker, (payload,)).get(timeout=180)
    local_loss, local_w = _train_in_worker(payload)
    assert loss == pytest.approx(local_loss, rel=1e-6)
    np.testing.assert_allclose(w, local_w, rtol=1e-6)
