"""Our quantized matmul kernels (`src/ops/qmatmul`: q4_0, q4_1, q8_0, q4k, q6k on the
CPU) against Candle's QMatMul, their portable twin, and float math.

Same activation rounding as Candle (tests/test_quantized.py explains the 8-bit
rounding of x and its tolerances), same integer sums: only the order of the float
sums differs from Candle, so the two agree to a few f32 ulps of the result's scale
(bound 1e-5). The portable path computes the same sums in the same order: equal bits.
"""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from candle_py import _core
from candle_py import quantized as Q

TYPES = ("q4_0", "q4_1", "q8_0", "q4k", "q6k")
DOT_TYPE = {"q4_0": "q8_0", "q4_1": "q8_1", "q8_0": "q8_0", "q4k": "q8k", "q6k": "q8k"}


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _max_rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def _ks(dtype: str) -> tuple[int, ...]:
    return (256, 512) if dtype in ("q4k", "q6k") else (32, 96, 576)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("m", [1, 3, 17, 512])
def test_kernels_agree_with_candle_and_portable(dtype, m):
    for k in _ks(dtype):
        n = 21  # not a multiple of the 8-row tile
        q = Q.quantize(cp.from_numpy(_rand(n, k, seed=k)), dtype)
        x = cp.from_numpy(_rand(m, k, seed=m))
        ours = np.asarray(_core._qmatmul(x, q, "auto"))
        assert ours.shape == (m, n)
        assert np.array_equal(ours, np.asarray(_core._qmatmul(x, q, "portable")))
        assert _max_rel(ours, np.asarray(_core._qmatmul(x, q, "candle"))) < 1e-5
        # The public entry points run the same kernels.
        assert np.array_equal(np.asarray(Q.matmul(x, q)), ours)
        np.testing.assert_array_equal(np.asarray(F.linear(x, q)), ours)


@pytest.mark.parametrize("dtype", TYPES)
def test_kernels_against_float_math(dtype):
    w, x = _rand(40, 512, seed=1), _rand(9, 512, seed=2)
    q = Q.quantize(cp.from_numpy(w), dtype)
    wd = np.asarray(q.dequantize()).astype(np.float64)
    y = np.asarray(Q.matmul(cp.from_numpy(x), q))
    xq = np.asarray(Q.quantize(cp.from_numpy(x), DOT_TYPE[dtype]).dequantize()).astype(np.float64)
    rel = float(np.linalg.norm(y - xq @ wd.T) / np.linalg.norm(xq @ wd.T))
    assert rel < (2e-3 if dtype == "q4_1" else 1e-5)
    assert float(np.linalg.norm(y - x @ wd.T) / np.linalg.norm(x @ wd.T)) < (2e-2 if dtype in ("q4k", "q6k") else 1.5e-2)


@pytest.mark.parametrize("dtype", TYPES)
def test_non_finite_rows_give_nan(dtype):
    x = _rand(4, 256, seed=3)
    x[1, 7], x[3, 100] = np.nan, np.inf
    q = Q.quantize(cp.from_numpy(_rand(10, 256, seed=4)), dtype)
    for kernel in ("auto", "portable"):
        y = np.asarray(_core._qmatmul(cp.from_numpy(x), q, kernel))
        assert np.isfinite(y[[0, 2]]).all() and np.isnan(y[[1, 3]]).all()


def test_quantized_linear_and_dequantize_unchanged():
    lin = nn.Linear(64, 24)
    ql = nn.QuantizedLinear.from_float(lin, "q4_1")
    before = np.asarray(ql.weight.dequantize()).copy()
    x = cp.from_numpy(_rand(2, 64, seed=6))
    y = np.asarray(ql(x).detach())  # repacks the weight for our kernels
    assert np.array_equal(np.asarray(ql.weight.dequantize()), before)
    ref = np.asarray(_core._qmatmul(x, ql.weight, "auto")) + np.asarray(ql.bias.detach())
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_qmatmul_errors():
    q = Q.quantize(cp.zeros(8, 32), "q4_0")
    with pytest.raises(ValueError, match="unknown kernel"):
        _core._qmatmul(cp.zeros(2, 32), q, "fast")
    with pytest.raises(ValueError, match=r"_qmatmul: expected a float input of shape \(\.\.\., 32\)"):
        _core._qmatmul(cp.zeros(2, 64), q, "auto")
