"""Complex tensors (complex64/complex128) against PyTorch: the cases of
tests/complex_cases.py (view_as_complex/view_as_real, complex, polar, elementwise math
with every operand kind, LLaMA's rotary embedding, matmul, reductions, shape ops,
indexing, in-place ops, dtypes, autograd through real and complex leaves) compared with
tests/fixtures/complex (made by tools/make_fixtures_complex.py), then what the fixture
cannot show: the ops candle_py refuses on complex tensors (where PyTorch has kernels)
raise a TypeError naming the op and the dtype, and bad inputs name the function."""

from __future__ import annotations

import pytest

import candle_py as cp
from complex_cases import CASES
from fixture_cases import check_case, load_fixture

META, ARRAYS = load_fixture("complex")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def _c() -> cp.Tensor:
    return cp.view_as_complex(cp.arange(6.0).reshape(3, 2))


def test_unsupported_op_names_the_op_and_the_dtype() -> None:
    c = _c()
    with pytest.raises(TypeError, match=r"sin.*complex64|complex64.*sin"):
        cp.sin(c)
    with pytest.raises(TypeError, match=r"sin.*complex64|complex64.*sin"):
        c.sin()


def test_cat_of_complex_is_refused() -> None:
    c = _c()
    with pytest.raises(TypeError):
        cp.cat([c, c])


def test_backward_of_a_complex_output_needs_a_gradient() -> None:
    x = cp.ones(3, 2, requires_grad=True)
    s = cp.view_as_complex(x).sum()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar outputs"):
        s.backward()


def test_view_as_complex_needs_a_last_dimension_of_two() -> None:
    with pytest.raises(ValueError, match="view_as_complex"):
        cp.view_as_complex(cp.ones(3))


def test_complex_of_integer_tensors_is_refused() -> None:
    with pytest.raises(TypeError, match="complex"):
        cp.complex(cp.tensor([1, 2]), cp.tensor([3, 4]))


def test_real_tensor_compares_with_a_complex_one() -> None:
    x = cp.tensor([0.0, 2.0, 4.0])
    c = _c()
    assert (x == c).tolist() == [False, False, False]
    assert (c.real == x).tolist() == [True, True, True]
    z = cp.complex(x, cp.zeros(3))
    assert (x == z).tolist() == [True, True, True] and (x != z).tolist() == [False, False, False]
    assert (cp.mul(x, c) - x * c).abs().max().item() == 0.0


def test_pickle_and_numpy() -> None:
    import copy
    import pickle

    import numpy as np

    c = _c()
    back = pickle.loads(pickle.dumps(c))
    assert back.dtype == cp.complex64 and back.tolist() == c.tolist()
    assert copy.deepcopy(c).tolist() == c.tolist()
    a = np.asarray(c)
    assert a.dtype == np.complex64 and a.tolist() == [1j, 2 + 3j, 4 + 5j]
    assert pickle.loads(pickle.dumps(cp.complex128)) is cp.complex128


def test_complex_dtypes_are_not_creation_dtypes() -> None:
    # complex values come from view_as_complex / complex / polar; creation functions refuse
    with pytest.raises(TypeError):
        cp.zeros(3, dtype=cp.complex64)
    with pytest.raises(TypeError):
        cp.tensor([1j])
    assert not isinstance(_c(), cp.Tensor) and cp.is_complex(_c()) and not cp.is_complex(cp.ones(1))
