"""Deterministic `nn.init` fills against PyTorch-made fixtures (tools/make_fixtures_init.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp

FIX = Path(__file__).parent / "fixtures" / "init" / "dirac.safetensors"
CASES = cp.load_file(FIX)
META = {k: json.loads(v) for k, v in (cp.safetensors.load_metadata(FIX) or {}).items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_dirac_matches_torch(case: str) -> None:
    m = META[case]
    t = cp.randn(*m["shape"])
    out = cp.nn.init.dirac_(t, groups=m["groups"])
    assert out is t
    np.testing.assert_array_equal(t.numpy(), CASES[case].numpy())


def test_dirac_conv_is_identity_and_errors() -> None:
    conv = cp.nn.Conv2d(3, 3, 3, padding=1, bias=False)
    cp.nn.init.dirac_(conv.weight)
    x = cp.randn(2, 3, 5, 5)
    np.testing.assert_allclose(conv(x).detach().numpy(), x.numpy(), atol=1e-6)
    assert conv.weight.requires_grad and conv.weight.is_leaf
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        cp.nn.init.dirac_(cp.zeros(3, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        cp.nn.init.dirac_(cp.zeros(5, 2, 3), groups=2)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (8, 3, 3, 3), (2, 18)])
def test_orthogonal_is_orthogonal_times_gain(shape: tuple) -> None:
    """torch's construction (QR of N(0, 1) draws, signed by R's diagonal): the rows (or
    columns, whichever are fewer) of the flattened weight are orthonormal times `gain`.
    The draws are candle_py's, so the values are checked by their defining property."""
    w = cp.empty(*shape)
    gain = cp.nn.init.calculate_gain("relu")
    assert cp.nn.init.orthogonal_(w, gain, generator=cp.Generator().manual_seed(3)) is w
    flat = w.reshape(shape[0], -1).double().numpy() / gain
    small = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(small, np.eye(small.shape[0]), atol=1e-5)
    again = cp.nn.init.orthogonal_(cp.empty(*shape), gain, generator=cp.Generator().manual_seed(3))
    np.testing.assert_array_equal(again.numpy(), w.numpy())  # the generator decides
    with pytest.raises(ValueError, match="2 or more dimensions"):
        cp.nn.init.orthogonal_(cp.empty(4))
    assert cp.nn.init.orthogonal_(cp.empty(0, 3)).shape == (0, 3)


def test_sparse_zeros_each_column_and_draws_the_rest() -> None:
    w = cp.empty(20, 300)
    assert cp.nn.init.sparse_(w, 0.25, std=0.5, generator=cp.Generator().manual_seed(1)) is w
    zeros = (w == 0).sum(0)
    assert zeros.tolist() == [5] * 300  # ceil(0.25 * 20) per column, no draw is exactly 0
    kept = w[w != 0].numpy()
    assert abs(kept.std() - 0.5) < 0.03 and abs(kept.mean()) < 0.03
    with pytest.raises(ValueError, match="2 dimensions"):
        cp.nn.init.sparse_(cp.empty(2, 3, 4), 0.5)
