"""In-place view ops (`t_`, `transpose_`, `squeeze_`, ...) beyond the usage sweep's
torch-checked case: the paths PyTorch's fixture does not reach."""

from __future__ import annotations

import pytest

import candle_py as cp


def test_leaf_under_no_grad_changes_shape_and_keeps_storage() -> None:
    a = cp.arange(6.0).reshape(2, 3).requires_grad_(True)
    with cp.no_grad():
        assert a.t_() is a
        a[2, 0] = 7.0
    assert a.shape == (3, 2) and a.requires_grad and a.is_leaf
    assert a.detach().contiguous().reshape(-1).tolist() == [0.0, 3.0, 1.0, 4.0, 7.0, 5.0]


def test_view_in_the_graph_refuses_with_the_op_name() -> None:
    b = cp.ones(2, 3, requires_grad=True) * 2
    v = b[0:1]
    with pytest.raises(RuntimeError, match=r"unsqueeze_.*out-of-place unsqueeze\(\)"):
        v.unsqueeze_(0)
    assert v.shape == (1, 3)  # unchanged


def test_saved_value_is_invalidated_like_torch() -> None:
    """The op bumps the version counter: a backward that saved the old value refuses."""
    a = cp.ones(2, 3, requires_grad=True)
    b = a * 1
    y = (b * b).sum()  # saves b
    b.t_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
