"""The composed linear-algebra and shape functions against PyTorch: the cases of
tests/linalg_cases.py compared with tests/fixtures/linalg (made by
tools/make_fixtures_linalg.py), then the error messages (they name the op and the
shapes) and what the fixture cannot hold (vander's gradient: torch's own backward fails)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from linalg_cases import CASES

META, ARRAYS = load_fixture("linalg")


def test_fixture_covers_every_case() -> None:
    assert sorted(META["results"]) == sorted(CASES)


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


@pytest.mark.parametrize(
    "call, kind, parts",
    [
        (lambda: cp.addmm(cp.ones(2, 2), cp.ones(2, 3), cp.ones(4, 5)), cp.ShapeError, ["addmm", "[2, 3]", "[4, 5]"]),
        (lambda: cp.addmm(cp.ones(3, 3), cp.ones(2, 3), cp.ones(3, 5)), cp.ShapeError, ["addmm", "[3, 3]", "[2, 5]"]),
        (lambda: cp.addmm(cp.ones(2, 2).double(), cp.ones(2, 2), cp.ones(2, 2)), cp.DTypeError, ["addmm", "float64", "float32"]),
        (lambda: cp.mv(cp.ones(2, 3), cp.ones(4)), cp.ShapeError, ["mv", "[2, 3]", "[4]"]),
        (lambda: cp.addmv(cp.ones(3), cp.ones(2, 3), cp.ones(3)), cp.ShapeError, ["addmv", "[3]", "[2]"]),
        (lambda: cp.baddbmm(cp.ones(2, 2, 2), cp.ones(2, 2, 3), cp.ones(3, 3, 2)), cp.ShapeError, ["baddbmm", "[2, 2, 3]", "[3, 3, 2]"]),
        (lambda: cp.addbmm(cp.ones(2, 2), cp.ones(2, 2, 3), cp.ones(2, 4, 2)), cp.ShapeError, ["addbmm", "[2, 2, 3]", "[2, 4, 2]"]),
        (lambda: cp.addr(cp.ones(3, 3), cp.ones(2), cp.ones(2)), cp.ShapeError, ["addr", "[3, 3]", "[2, 2]"]),
        (lambda: cp.addr(cp.ones(2, 2).long(), cp.ones(2).long(), cp.ones(2).long(), alpha=0.5), cp.DTypeError, ["addr", "alpha"]),
        (lambda: cp.outer(cp.ones(2, 2), cp.ones(2)), cp.ShapeError, ["outer", "[2, 2]"]),
        (lambda: cp.inner(cp.ones(2, 3), cp.ones(4)), cp.ShapeError, ["inner", "[2, 3]", "[4]"]),
        (lambda: cp.vdot(cp.ones(2), cp.ones(3)), cp.ShapeError, ["vdot", "[2]", "[3]"]),
        (lambda: cp.tensordot(cp.ones(2, 3), cp.ones(4, 5), 1), cp.ShapeError, ["tensordot", "[2, 3]", "[4, 5]"]),
        (lambda: cp.chain_matmul(cp.ones(2, 3), cp.ones(2, 3)), cp.ShapeError, ["chain_matmul", "[2, 3]"]),
        (lambda: cp.block_diag(cp.ones(1, 2, 3)), cp.ShapeError, ["block_diag", "[1, 2, 3]"]),
        (lambda: cp.broadcast_tensors(cp.ones(2), cp.ones(3)), cp.ShapeError, ["broadcast_tensors", "[2]", "[3]"]),
        (lambda: cp.broadcast_shapes((2,), (3,)), cp.ShapeError, ["broadcast_shapes", "[3]", "[2]"]),
        (lambda: cp.vsplit(cp.ones(4), 2), cp.ShapeError, ["vsplit", "[4]"]),
        (lambda: cp.hsplit(cp.ones(2, 5), 2), ValueError, ["hsplit", "5", "2"]),
        (lambda: cp.adjoint(cp.ones(3)), cp.ShapeError, ["adjoint", "[3]"]),
        (lambda: cp.take_along_dim(cp.ones(2, 3), cp.tensor([0]), 1), cp.ShapeError, ["take_along_dim", "[2, 3]", "[1]"]),
        (lambda: cp.take(cp.ones(2, 3), cp.tensor([6])), IndexError, ["take", "6", "[2, 3]"]),
        (lambda: cp.narrow_copy(cp.ones(2, 3), 1, 2, 2), ValueError, ["narrow_copy", "[2, 3]"]),
        (lambda: cp.cov(cp.ones(2, 2, 2)), cp.ShapeError, ["cov", "[2, 2, 2]"]),
        (lambda: cp.movedim(cp.ones(2, 3), (0, 1), (1,)), ValueError, ["movedim"]),
    ],
)
def test_error_messages_name_the_op_and_shapes(call: Any, kind: type, parts: list) -> None:
    with pytest.raises(kind) as info:
        call()
    for p in parts:
        assert p in str(info.value), f"{p!r} not in {str(info.value)!r}"


def test_vander_gradient_matches_the_analytic_derivative() -> None:
    xs = np.array([0.0, 1.5, -0.7, 2.0], dtype=np.float32)
    n = 5
    w = np.cos(np.arange(len(xs) * n, dtype=np.float32).reshape(len(xs), n) * 0.37)
    for increasing in (False, True):
        x = cp.tensor(xs, requires_grad=True)
        (cp.vander(x, n, increasing=increasing) * cp.tensor(w)).sum().backward()
        powers = np.arange(n) if increasing else np.arange(n)[::-1]
        # d/dx of x**k is k * x**(k-1) (0 for k = 0, including at x = 0)
        deriv = np.where(powers > 0, powers * np.power(xs[:, None], np.maximum(powers - 1, 0)), 0.0)
        np.testing.assert_allclose(x.grad.numpy(), (w * deriv).sum(1), rtol=1e-5, atol=1e-5)


def test_views_and_copies() -> None:
    x = cp.arange(12.0).reshape(3, 4)
    x.adjoint()[0, 1] = 100.0  # adjoint is a view of real tensors
    assert x[1, 0].item() == 100.0
    x.movedim(0, 1)[2, 0] = -1.0
    assert x[0, 2].item() == -1.0
    parts = cp.tensor_split(x, 2)
    parts[1][0, 0] = 7.0  # tensor_split gives views
    assert x[2, 0].item() == 7.0
    c = cp.narrow_copy(x, 0, 0, 1)
    c[0, 0] = 55.0  # narrow_copy does not
    assert x[0, 0].item() == 0.0


def test_addmm_beta_zero_ignores_nan_but_keeps_gradient() -> None:
    x = cp.full((2, 2), math.nan, requires_grad=True)
    y = cp.addmm(x, cp.ones(2, 3), cp.ones(3, 2), beta=0)
    np.testing.assert_array_equal(y.detach().numpy(), np.full((2, 2), 3.0, dtype=np.float32))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2), dtype=np.float32))


def test_inplace_twins_write_into_self() -> None:
    x = cp.ones(2, 2)
    v = x._version
    assert x.addmm_(cp.ones(2, 3), cp.ones(3, 2), alpha=2) is x
    assert x._version > v
    np.testing.assert_array_equal(x.numpy(), np.full((2, 2), 7.0, dtype=np.float32))


def test_public_surface() -> None:
    from candle_py import _composed_linalg

    for name in _composed_linalg.__all__:
        assert getattr(cp, name) is getattr(_composed_linalg, name)
        assert getattr(cp, name).__doc__, name
    for name in ("outer", "addmm_", "tensor_split", "cov", "take_along_dim"):
        assert callable(getattr(cp.ones(2), name))
