"""`candle_py.linalg` against PyTorch: the cases of tests/linalg_more_cases.py compared
with tests/fixtures/linalg_more (made by tools/make_fixtures_linalg_more.py), then what
the fixture holds only as exception kinds: the exception classes and PyTorch's messages
for singular, non-positive-definite, non-square and integer input."""

from __future__ import annotations

from typing import Any

import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from linalg_more_cases import CASES, NOT_PD, SINGULAR

META, ARRAYS = load_fixture("linalg_more")


def test_fixture_covers_every_case() -> None:
    assert sorted(META["results"]) == sorted(CASES)


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_linalg_error_is_a_value_and_runtime_error() -> None:
    assert issubclass(cp.linalg.LinAlgError, ValueError)
    assert issubclass(cp.linalg.LinAlgError, RuntimeError)


def test_singular_inv_raises_linalg_error_naming_the_op() -> None:
    with pytest.raises(cp.linalg.LinAlgError, match=r"linalg\.inv: The diagonal element 3 is zero.*singular") as e:
        cp.linalg.inv(cp.tensor(SINGULAR))
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)
    with pytest.raises(cp.linalg.LinAlgError, match=r"linalg\.inv: \(Batch element 1\): The diagonal element 3 is zero"):
        cp.linalg.inv(cp.stack([cp.eye(3), cp.tensor(SINGULAR)]))
    with pytest.raises(cp.linalg.LinAlgError, match=r"linalg\.inv"):
        cp.inverse(cp.zeros(2, 2))


def test_singular_solve_raises_linalg_error() -> None:
    with pytest.raises(cp.linalg.LinAlgError, match=r"linalg\.solve: The solver failed because the input matrix is singular"):
        cp.linalg.solve(cp.tensor(SINGULAR), cp.ones(3, 1))


def test_not_positive_definite_cholesky_raises_linalg_error() -> None:
    with pytest.raises(cp.linalg.LinAlgError, match=r"linalg\.cholesky: .*positive-definite.*order 2"):
        cp.linalg.cholesky(cp.tensor(NOT_PD))
    with pytest.raises(cp.linalg.LinAlgError, match=r"\(Batch element 1\): .*positive-definite"):
        cp.linalg.cholesky(cp.stack([cp.eye(3), cp.tensor(NOT_PD)]))
    info = cp.linalg.cholesky_ex(cp.tensor(NOT_PD)).info
    assert int(info) == 2


@pytest.mark.parametrize(
    "call, op",
    [
        (lambda: cp.linalg.det(cp.ones(2, 3)), r"linalg\.det"),
        (lambda: cp.det(cp.ones(2, 3)), r"det"),
        (lambda: cp.linalg.slogdet(cp.ones(4, 2, 3)), r"slogdet"),
        (lambda: cp.linalg.inv(cp.ones(2, 3)), r"linalg\.inv"),
        (lambda: cp.linalg.cholesky(cp.ones(2, 3)), r"cholesky"),
        (lambda: cp.linalg.matrix_power(cp.ones(2, 3), 2), r"matrix_power"),
    ],
)
def test_non_square_raises_value_error_naming_the_op_and_shape(call: Any, op: str) -> None:
    with pytest.raises(ValueError, match=op + r".*2 by 3"):
        call()


def test_too_few_dims_and_mismatched_solve_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"linalg\.det.*at least 2 dimensions"):
        cp.linalg.det(cp.ones(3))
    with pytest.raises(ValueError, match=r"linalg\.solve.*3x3 and 4x2"):
        cp.linalg.solve(cp.eye(3), cp.ones(4, 2))


@pytest.mark.parametrize(
    "call, op",
    [
        (lambda: cp.linalg.inv(cp.tensor([[1, 2], [3, 4]])), r"linalg\.inv"),
        (lambda: cp.inverse(cp.tensor([[1, 2], [3, 4]])), r"inv"),
        (lambda: cp.linalg.det(cp.tensor([[1, 2], [3, 4]])), r"linalg\.det"),
        (lambda: cp.linalg.cholesky(cp.tensor([[1, 0], [0, 1]])), r"linalg\.cholesky"),
        (lambda: cp.linalg.vector_norm(cp.tensor([1, 2])), r"vector_norm"),
    ],
)
def test_integer_input_raises_type_error(call: Any, op: str) -> None:
    with pytest.raises(TypeError, match=op + r".*floating point"):
        call()


def test_lu_factor_of_a_singular_matrix_raises_but_lu_does_not() -> None:
    with pytest.raises((ValueError, RuntimeError), match=r"lu_factor.*U\[3,3\] is zero"):
        cp.linalg.lu_factor(cp.tensor(SINGULAR))
    p = cp.linalg.lu(cp.tensor(SINGULAR))
    assert float(p.U[2, 2]) == 0.0
