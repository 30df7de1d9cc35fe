"""Issue-22 nn layers, functions and losses against PyTorch-made fixtures
(tests/fixtures/nn_more, made by tools/make_fixtures_nn_more.py): outputs,
input and parameter gradients, state_dict keys and buffers, repr; then the
random layers' statistics, containers, and the bad-input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import assert_close

FIXTURES = Path(__file__).parent / "fixtures" / "nn_more"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors"))

# Matrix-product layers get the matmul-like tolerance; the rest are elementwise.
MATMUL_LIKE = ("RNN", "LSTM", "GRU", "Transformer", "Fold", "Unfold", "EmbeddingBag", "LocalResponseNorm")


def _load(name: str) -> Tuple[Dict[str, cp.Tensor], Dict[str, Any]]:
    path = FIXTURES / f"{name}.safetensors"
    meta = dict(cp.safetensors.load_metadata(path) or {})
    for k in ("args", "kwargs", "call_kwargs", "grad_inputs"):
        meta[k] = json.loads(meta[k])
    meta["train"] = meta["train"] == "1"
    return cp.safetensors.load_file(path), meta


def _ctor(v: Any) -> Any:
    return cp.tensor(v["__tensor__"]) if isinstance(v, dict) and "__tensor__" in v else v


def _flatten(out: Any) -> List[cp.Tensor]:
    if isinstance(out, cp.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flatten(o)]
    return []


def _torch_repr(r: str) -> str:
    """PyTorch's repr in our names: its MultiheadAttention's out_proj class and dtype module differ."""
    return r.replace("NonDynamicallyQuantizableLinear", "Linear").replace("torch.", "candle_py.")


def test_fixtures_present() -> None:
    assert len(CASES) >= 90


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name: str) -> None:
    t, meta = _load(name)
    target = meta["target"]
    tol = 1e-4 if target.startswith(MATMUL_LIKE) else 1e-5
    xs = []
    j = 0
    while f"in.{j}" in t:
        x = t[f"in.{j}"]
        xs.append(x.clone().requires_grad_(True) if j in meta["grad_inputs"] else x)
        j += 1
    call = {k[3:]: v for k, v in t.items() if k.startswith("kw.")}
    for k in list(call):
        if f"grad.kw.{k}" in t:
            call[k] = call[k].clone().requires_grad_(True)
    call.update(meta["call_kwargs"])
    m = None
    if meta["kind"] == "module":
        m = getattr(nn, target)(*meta["args"], **{k: _ctor(v) for k, v in meta["kwargs"].items()})
        state = {k[len("state.") :]: v for k, v in t.items() if k.startswith("state.")}
        m.load_state_dict(state)
        m.train(meta["train"])
        assert repr(m) == _torch_repr(meta["repr"]), f"{name}: repr"
        out = m(*xs, **call)
    else:
        out = getattr(F, target)(*xs, *meta["args"], **meta["kwargs"], **call)
    outs = _flatten(out)
    assert len(outs) == int(meta["n_out"]), f"{name}: {len(outs)} outputs, torch has {meta['n_out']}"
    loss = None
    for j, o in enumerate(outs):
        assert_close(o, t[f"out.{j}"], tol, 1e-4, f"{name}: output {j}")
        assert o.dtype == t[f"out.{j}"].dtype, f"{name}: output {j} dtype"
        if o.requires_grad:
            term = (cp.where(o.isfinite(), o, 0.0) * t[f"lw.{j}"]).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    for j in meta["grad_inputs"]:
        key = f"grad.in.{j}"
        if key in t:
            assert xs[j].grad is not None, f"{name}: no gradient reached input {j}"
            assert_close(xs[j].grad, t[key], tol, 1e-4, f"{name}: grad of input {j}")
    if m is not None:
        grads = {k[len("grad.param.") :]: v for k, v in t.items() if k.startswith("grad.param.")}
        for k, p in m.named_parameters():
            assert k in grads, f"{name}: torch has no grad for {k}"
            assert p.grad is not None, f"{name}: no gradient reached {k}"
            assert_close(p.grad, grads[k], tol, 1e-4, f"{name}: grad of {k}")
        after = {k[len("state_after.") :]: v for k, v in t.items() if k.startswith("state_after.")}
        sd = m.state_dict()
        assert list(sd) == list(after) or set(sd) == set(after), f"{name}: state_dict keys {sorted(sd)} != torch's {sorted(after)}"
        for k, v in after.items():
            assert_close(sd[k], v, 1e-5, 1e-4, f"{name}: {k} after forward")
    for k, v in call.items():
        if f"grad.kw.{k}" in t:
            assert v.grad is not None, f"{name}: no gradient reached {k}"
            assert_close(v.grad, t[f"grad.kw.{k}"], tol, 1e-4, f"{name}: grad of {k}")
