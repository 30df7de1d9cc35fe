"""`Tensor.view(dtype)` beyond the usage sweep's torch-checked values: writes shared
both ways (through the view, its sub-views, the base's views, optimizer updates),
PyTorch's shape rules and errors, and the refusals. NumPy's `ndarray.view(dtype)` is
the oracle for the bytes (the same reinterpretation of the same little-endian bytes)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import candle_py as cp


def test_values_and_shapes_match_numpy_for_every_size_pair() -> None:
    x = np.array([[1.5, -2.0, 0.0, np.inf], [np.nan, 3.25, -0.0, 1e-40]], dtype=np.float32)
    t = cp.tensor(x)
    pairs = [(cp.int32, np.int32), (cp.uint8, np.uint8), (cp.int16, np.int16), (cp.float16, np.float16)]
    pairs += [(cp.bfloat16, None), (cp.int64, np.int64), (cp.float64, np.float64)]
    for dt, nd in pairs:
        v = t.view(dt)
        assert v.dtype == dt
        if nd is None:
            assert v.shape == (2, 8)
            np.testing.assert_array_equal(v.view(cp.int16).numpy(), x.view(np.int16))
        else:
            assert v.shape == x.view(nd).shape
            np.testing.assert_array_equal(v.numpy(), x.view(nd))
    np.testing.assert_array_equal(t.view(cp.float32).numpy().view(np.int32), x.view(np.int32))


def test_round_trip_is_exact_and_zero_d_same_size() -> None:
    t = cp.randn(5, 6)
    np.testing.assert_array_equal(t.view(cp.int32).view(cp.float32).numpy(), t.numpy())
    assert cp.tensor(1.0).view(cp.int32).item() == 1065353216
    assert cp.tensor(1065353216, dtype=cp.int32).view(cp.float32).item() == 1.0
    assert cp.tensor([1, 0, 2], dtype=cp.uint8).view(cp.bool).tolist() == [True, False, True]
    assert cp.zeros(0, 4).view(cp.uint8).shape == (0, 16)


def test_write_through_the_view_reaches_the_base() -> None:
    a = cp.zeros(2, 3)
    v = a.view(cp.int32)
    v[0] = 1065353216
    assert a.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    v.add_(1)
    np.testing.assert_array_equal(a.numpy().view(np.int32), np.array([[1065353217] * 3, [1] * 3], dtype=np.int32))


def test_write_into_a_sub_view_of_the_view_reaches_the_base() -> None:
    a = cp.zeros(2, 3)
    s = a.view(cp.int32)[1]  # the view itself is gone; its sub-view keeps the alias
    gc.collect()
    s.fill_(1065353216)
    assert a.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


def test_write_into_the_base_or_its_views_reaches_the_view() -> None:
    a = cp.zeros(2, 3)
    v = a.view(cp.int32)
    a.add_(1)
    assert v.tolist() == [[1065353216] * 3] * 2
    a[:, 1].mul_(2)
    assert v[:, 1].tolist() == [1073741824, 1073741824]
    a.t()[2].zero_()
    assert v[:, 2].tolist() == [0, 0]


def test_view_of_a_transposed_base_reads_and_writes_its_elements() -> None:
    a = cp.arange(6.0).reshape(2, 3)
    b = a.t()  # (3, 2), not contiguous: same element size keeps the shape
    v = b.view(cp.int32)
    np.testing.assert_array_equal(v.numpy(), a.numpy().T.copy().view(np.int32))
    v[0, 1] = 0
    assert a.tolist() == [[0.0, 1.0, 2.0], [0.0, 4.0, 5.0]]


def test_chained_views_carry_writes_through_each_link() -> None:
    a = cp.zeros(4)
    b = a.view(cp.int32)
    c = b.view(cp.uint8)
    c[0] = 1
    assert b[0].item() == 1
    assert a.numpy().view(np.uint32)[0] == 1
    a.fill_(1.0)
    assert c[:4].tolist() == [0, 0, 128, 63]


def test_optimizer_update_of_the_base_reaches_the_view() -> None:
    w = cp.nn.Parameter(cp.ones(3))
    bits = w.detach().view(cp.int32)
    opt = cp.optim.SGD([w], lr=0.5)
    w.sum().backward()
    opt.step()
    assert w.tolist() == [0.5, 0.5, 0.5]
    assert bits.tolist() == [1056964608] * 3


def test_writes_bump_the_other_side_s_version_so_saved_values_refuse() -> None:
    a = cp.ones(3, requires_grad=True)
    b = a * 2
    bits = b.detach().view(cp.int32)
    y = (b * b).sum()  # saves b
    with cp.no_grad():
        bits[0] = 0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_result_is_not_differentiable_and_leaf_bits_are_writable() -> None:
    w = cp.ones(2, requires_grad=True)
    v = w.view(cp.int32)
    assert not v.requires_grad and v.grad_fn is None
    assert not w.view(cp.float32).requires_grad
    v[0] = 0  # PyTorch allows it: the view is outside the graph
    assert w.detach().tolist() == [0.0, 1.0]


def test_graph_write_on_an_aliased_tensor_is_refused() -> None:
    b = cp.ones(3, requires_grad=True) * 1
    v = b.view(cp.int32)
    with pytest.raises(RuntimeError, match="view\\(dtype\\)"):
        b.add_(1)
    assert v.tolist() == [1065353216] * 3


def test_alias_is_dropped_with_the_view() -> None:
    a = cp.zeros(1000)
    v = a.view(cp.int32)
    del v
    gc.collect()
    a.add_(1)  # nothing to carry, nothing kept alive
    assert a[0].item() == 1.0


def test_shape_errors_name_the_op_like_torch() -> None:
    with pytest.raises(ValueError, match=r"view: self.size\(-1\) must be divisible by 2"):
        cp.zeros(2, 3).view(cp.int64)
    with pytest.raises(ValueError, match=r"view: self.dim\(\) cannot be 0"):
        cp.tensor(1.0).view(cp.uint8)
    with pytest.raises(ValueError, match=r"view: self.stride\(-1\) must be 1"):
        cp.zeros(2, 3).t().view(cp.uint8)
    assert cp.zeros(2, 2).view(cp.int64).shape == (2, 1)
