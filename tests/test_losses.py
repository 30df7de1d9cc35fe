"""The elementwise losses behind `_core._point_loss` (src/layers/loss_elementwise.rs)
and the norms behind `_core._group_norm` / `_rms_norm`: reductions, weights and
options against NumPy forms of PyTorch's formulas, and bad arguments. The PyTorch
fixtures (tests/test_nn_layers.py) cover the default calls with gradients."""

from __future__ import annotations

from typing import Any, Callable, Dict

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn.functional as F

RNG = np.random.default_rng(21)
X = RNG.standard_normal((4, 5))
Y = RNG.standard_normal((4, 5))
P = 1 / (1 + np.exp(-X))  # probabilities
T = (RNG.random((4, 5)) > 0.5).astype(np.float64)
W = RNG.random((4, 5))


def _reduce(v: np.ndarray, reduction: str) -> Any:
    return {"none": v, "sum": v.sum(), "mean": v.mean()}[reduction]


def _softplus(v: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(-np.abs(v))) + np.maximum(-v, 0)


CASES: Dict[str, tuple[Callable[..., cp.Tensor], np.ndarray, np.ndarray, Dict[str, Any], np.ndarray]] = {
    "mse_weight": (F.mse_loss, X, Y, {"weight": W}, (X - Y) ** 2 * W),
    "l1": (F.l1_loss, X, Y, {}, np.abs(X - Y)),
    "smooth_l1_beta0": (F.smooth_l1_loss, X, Y, {"beta": 0.0}, np.abs(X - Y)),
    "smooth_l1": (F.smooth_l1_loss, X, Y, {"beta": 0.7}, np.where(np.abs(X - Y) < 0.7, 0.5 * (X - Y) ** 2 / 0.7, np.abs(X - Y) - 0.35)),
    "bce_weight": (F.binary_cross_entropy, P, T, {"weight": W}, -(T * np.log(P) + (1 - T) * np.log(1 - P)) * W),
    "bce_logits_pos_weight": (
        F.binary_cross_entropy_with_logits,
        X,
        T,
        {"pos_weight": np.array([1.0, 2.0, 0.5, 3.0, 1.5])},
        (1 - T) * X + (1 + (np.array([1.0, 2.0, 0.5, 3.0, 1.5]) - 1) * T) * _softplus(X),
    ),
    "kl_log_target": (F.kl_div, X, Y, {"log_target": True}, np.exp(Y) * (Y - X)),
    "kl": (F.kl_div, X, np.abs(Y) * (Y > 0), {}, np.where(Y > 0, np.abs(Y) * (np.log(np.where(Y > 0, np.abs(Y), 1.0)) - X), 0.0)),
}


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("case", list(CASES))
def test_losses_match_reference(case: str, reduction: str) -> None:
    fn, x, y, kw, per = CASES[case]
    kw = {k: cp.from_numpy(np.asarray(v)) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    got = fn(cp.from_numpy(x), cp.from_numpy(y), reduction=reduction, **kw)
    want = _reduce(per, reduction)
    if case == "mse_weight" and reduction == "mean":
        want = per.sum() / W.sum()  # PyTorch's weighted mean of mse_loss / l1_loss divides by sum(weight)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_kl_div_batchmean_and_mse_gradient() -> None:
    got = F.kl_div(cp.from_numpy(X), cp.from_numpy(Y), reduction="batchmean", log_target=True)
    np.testing.assert_allclose(got.item(), (np.exp(Y) * (Y - X)).sum() / 4, rtol=1e-12)
    x = cp.from_numpy(X).requires_grad_(True)
    F.mse_loss(x, cp.from_numpy(Y)).backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * (X - Y) / X.size, rtol=1e-12)


def test_bce_clamps_logs_at_minus_100() -> None:
    got = F.binary_cross_entropy(cp.tensor([0.0, 1.0]), cp.tensor([1.0, 0.0]), reduction="none")
    assert got.tolist() == [100.0, 100.0]


def test_empty_mean_is_nan_and_half_keeps_dtype() -> None:
    assert np.isnan(F.mse_loss(cp.zeros(0), cp.zeros(0)).item())
    h = F.l1_loss(cp.ones(3, dtype=cp.float16), cp.zeros(3, dtype=cp.float16))
    assert h.dtype == cp.float16 and h.item() == 1.0


@pytest.mark.parametrize(
    "call,err,words",
    [
        (lambda: F.mse_loss(cp.ones(2, 3), cp.ones(3, 2)), cp.ShapeError, ["mse_loss", "[3, 2]", "[2, 3]"]),
        (lambda: F.l1_loss(cp.ones(2), cp.ones(2), reduction="avg"), ValueError, ["l1_loss", "'avg'"]),
        (lambda: F.mse_loss(cp.ones(2), cp.ones(2), reduction="batchmean"), ValueError, ["mse_loss", "batchmean"]),
        (lambda: F.smooth_l1_loss(cp.ones(2), cp.ones(2), beta=-1.0), ValueError, ["smooth_l1_loss", "beta"]),
        (lambda: F.mse_loss(cp.ones(2, dtype=cp.int64), cp.ones(2, dtype=cp.int64)), cp.DTypeError, ["mse_loss", "int64"]),
        (lambda: F.group_norm(cp.ones(2, 6, 3), 4), cp.ShapeError, ["group_norm", "6", "4"]),
        (lambda: F.group_norm(cp.ones(2, 6, 3), 3, weight=cp.ones(5)), cp.ShapeError, ["group_norm", "weight", "[5]"]),
        (lambda: F.rms_norm(cp.ones(2, 6), (5,)), cp.ShapeError, ["rms_norm", "[2, 6]"]),
    ],
)
def test_bad_arguments_name_op_and_shapes(call: Callable[[], Any], err: Any, words: list[str]) -> None:
    with pytest.raises(err) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_group_norm_and_rms_norm_match_reference() -> None:
    x = RNG.standard_normal((3, 6, 4))
    w, b = RNG.random(6), RNG.standard_normal(6)
    g = x.reshape(3, 2, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(3, 6, 4) * w[None, :, None] + b[
        None, :, None
    ]
    got = F.group_norm(cp.from_numpy(x), 2, cp.from_numpy(w), cp.from_numpy(b))
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10, atol=1e-10)
    assert F.group_norm(cp.zeros(0, 6, 4), 2).shape == (0, 6, 4)
    r = F.rms_norm(cp.from_numpy(x), (6, 4), cp.from_numpy(np.ones((6, 4)) * 2))
    flat = x.reshape(3, -1)
    want = (flat / np.sqrt((flat**2).mean(-1, keepdims=True) + np.finfo(np.float64).eps)).reshape(3, 6, 4) * 2
    np.testing.assert_allclose(np.asarray(r), want, rtol=1e-12)
    h = F.rms_norm(cp.ones(2, 4, dtype=cp.bfloat16) * 3, (4,))
    assert h.dtype == cp.bfloat16 and abs(float(h.float()[0, 0].item()) - 1.0) < 1e-2


def test_loss_weights_are_buffers_as_torch():
    """torch's weighted losses register `weight` (and `pos_weight`) as buffers: they are
    in the state_dict (keys as torch prints them) and absent when None."""
    w = cp.ones(3)
    assert list(cp.nn.CrossEntropyLoss(weight=w).state_dict()) == ["weight"]
    assert list(cp.nn.NLLLoss(weight=w).state_dict()) == ["weight"]
    assert list(cp.nn.BCELoss(weight=w).state_dict()) == ["weight"]
    assert list(cp.nn.BCEWithLogitsLoss(weight=w, pos_weight=cp.ones(3)).state_dict()) == ["weight", "pos_weight"]
    assert list(cp.nn.CrossEntropyLoss().state_dict()) == [] and cp.nn.CrossEntropyLoss().weight is None
    loss = cp.nn.CrossEntropyLoss(weight=cp.tensor([1.0, 2.0, 3.0]))
    loss.load_state_dict({"weight": cp.tensor([3.0, 2.0, 1.0])})
    np.testing.assert_array_equal(loss.weight.numpy(), [3.0, 2.0, 1.0])
