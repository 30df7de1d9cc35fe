"""nn.Embedding / F.embedding options against PyTorch fixtures (`tools/make_fixtures.py`,
kind "embedding"): padding_idx (no gradient for that row), max_norm (rows renormalized
in place), scale_grad_by_freq (gradients divided by the index counts)."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from nn_fixtures import cases, load

CASES = cases("embedding")


def test_embedding_fixtures_exist() -> None:
    assert {"embedding_padding_idx", "embedding_max_norm", "embedding_max_norm_l1", "embedding_scale_grad_by_freq"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_embedding_options_match_torch(name: str) -> None:
    t, meta = load(name)
    m = nn.Embedding(*meta["args"], **meta["kwargs"])
    m.load_state_dict({"weight": t["weight.before"]})
    y = m(t["input"])
    (y * t["grad.output"]).sum().backward()
    np.testing.assert_allclose(np.asarray(y.detach()), np.asarray(t["output"]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(m.weight.detach()), np.asarray(t["weight.after"]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(m.weight.grad), np.asarray(t["grad.weight"]), rtol=1e-6, atol=1e-6)


def test_padding_row_keeps_its_value_but_gets_no_gradient() -> None:
    w = cp.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = F.embedding(cp.tensor([0, 1, 1]), w, padding_idx=1)
    assert y.tolist() == [[1.0, 2.0], [3.0, 4.0], [3.0, 4.0]]
    y.sum().backward()
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_repr_names_the_options() -> None:
    m = nn.Embedding(5, 3, padding_idx=1, max_norm=2.0, scale_grad_by_freq=True)
    assert repr(m) == "Embedding(5, 3, padding_idx=1, max_norm=2.0, scale_grad_by_freq=True)"
