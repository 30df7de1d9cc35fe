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
