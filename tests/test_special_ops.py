"""The elementwise functions of src/ops/special.rs against PyTorch: the cases of
tests/special_cases.py compared with tests/fixtures/special (made by
tools/make_fixtures_special.py), then what the fixture cannot show: large inputs split
over threads, gradients beyond PyTorch's (in-place twins whose derivative PyTorch lacks),
and error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from special_cases import CASES

META, ARRAYS = load_fixture("special")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_large_inputs_split_over_threads_equal_the_scalar_math() -> None:
    x = np.linspace(0.05, 40.0, 300_001, dtype=np.float64)
    got = cp.lgamma(cp.tensor(x)).numpy()
    want = np.array([math.lgamma(v) for v in x[::1000]])
    np.testing.assert_allclose(got[::1000], want, rtol=1e-13)
    a = cp.atan2(cp.tensor(x), cp.tensor(-x[::-1].copy())).numpy()
    np.testing.assert_allclose(a, np.arctan2(x, -x[::-1]), rtol=1e-15)


def test_inplace_twins_torch_cannot_differentiate_get_the_out_of_place_gradient() -> None:
    x = cp.tensor([0.1, -0.4, 0.7], requires_grad=True)
    y = x * 1
    y.atanh_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1.0 / (1.0 - x.detach().numpy() ** 2), rtol=1e-6)


def test_errors_name_the_op() -> None:
    with pytest.raises(ValueError, match=r"atan2: .*\[2, 3\].*\[4\]"):
        cp.atan2(cp.zeros(2, 3), cp.zeros(4))
    with pytest.raises(TypeError, match="atan2: argument 'other' must be Tensor, not float"):
        cp.zeros(2).atan2(2.0)
    with pytest.raises(ValueError, match="polygamma: .*negative n"):
        cp.polygamma(-1, cp.ones(2))
    with pytest.raises(TypeError, match="polygamma"):
        cp.polygamma(1, [1.0])
