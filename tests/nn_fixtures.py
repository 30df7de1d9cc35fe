"""Shared loader for the PyTorch-made fixtures in tests/fixtures/nn (no torch needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

import candle_py as cp

FIXTURES = Path(__file__).parent / "fixtures" / "nn"


def cases(kind: str) -> List[str]:
    """Names of the fixture files of one kind ("layer", "loss", ...)."""
    out = []
    for p in sorted(FIXTURES.glob("*.safetensors")):
        meta = cp.safetensors.load_metadata(p) or {}
        if meta.get("kind") == kind:
            out.append(p.stem)
    return out


def load(name: str) -> Tuple[Dict[str, cp.Tensor], Dict[str, Any]]:
    path = FIXTURES / f"{name}.safetensors"
    tensors = cp.safetensors.load_file(path)
    meta = dict(cp.safetensors.load_metadata(path) or {})
    meta["args"] = json.loads(meta.get("args", "[]"))
    meta["kwargs"] = json.loads(meta.get("kwargs", "{}"))
    meta["train"] = meta.get("train", "1") == "1"
    return tensors, meta


def group(tensors: Dict[str, cp.Tensor], prefix: str) -> Dict[str, cp.Tensor]:
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}


def assert_close(actual: cp.Tensor, expected: cp.Tensor, atol: float, rtol: float, what: str) -> None:
    a, e = np.asarray(actual.detach().float()), np.asarray(expected.float())
    assert a.shape == e.shape, f"{what}: shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, err_msg=what)
