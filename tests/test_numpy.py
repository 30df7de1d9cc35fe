"""NumPy interop: zero-copy export, read-only views, DLPack, dtype mapping, from_numpy."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import candle_py as cp

# Zero-copy views of tensor memory are CPU behaviour; on a GPU `numpy()` copies.
pytestmark = pytest.mark.cpu_only

DTYPES = [np.bool_, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.float16, np.float32, np.float64, ml_dtypes.bfloat16]
CP_OF = {
    np.dtype(np.bool_): cp.bool,
    np.dtype(np.uint8): cp.uint8,
    np.dtype(np.int16): cp.int16,
    np.dtype(np.int32): cp.int32,
    np.dtype(np.int64): cp.int64,
    np.dtype(np.uint32): cp.uint32,
    np.dtype(np.float16): cp.float16,
    np.dtype(np.float32): cp.float32,
    np.dtype(np.float64): cp.float64,
    np.dtype(ml_dtypes.bfloat16): cp.bfloat16,
}


def _owner_chain(a: np.ndarray) -> list:
    chain = []
    b = a
    while b is not None:
        chain.append(b)
        b = getattr(b, "base", None)
    return chain


def test_numpy_is_zero_copy_for_contiguous():
    t = cp.arange(12.0).reshape(3, 4)
    a = t.numpy()
    b = t.numpy()
    assert np.shares_memory(a, b)
    # The array does not own its data: something in its base chain keeps the tensor alive.
    assert not a.flags.owndata
    assert len(_owner_chain(a)) >= 2
    np.testing.assert_array_equal(a, np.arange(12.0).reshape(3, 4))


def test_numpy_view_of_contiguous_slice_shares_memory():
    t = cp.arange(20.0).reshape(4, 5)
    row = t[1]
    np.testing.assert_array_equal(row.numpy(), np.arange(5.0, 10.0))
    assert np.shares_memory(row.numpy(), t.numpy())


def test_numpy_is_read_only():
    t = cp.tensor([1.0, 2.0, 3.0])
    a = t.numpy()
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 10.0
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0])


def test_numpy_survives_tensor_deletion():
    t = cp.arange(100000, dtype=cp.float32)
    a = t.numpy()
    del t
    gc.collect()
    # Churn the allocator so freed memory would be reused.
    junk = [cp.ones(100000) for _ in range(5)]
    assert float(a[-1]) == 99999.0
    np.testing.assert_array_equal(a[:5], [0, 1, 2, 3, 4])
    del junk


def test_non_contiguous_export_is_correct_copy():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = cp.tensor(base)
    tt = t.t()
    a = tt.numpy()
    np.testing.assert_array_equal(a, base.T)
    assert a.shape == (4, 3)
    p = cp.tensor(np.arange(24).reshape(2, 3, 4)).permute(2, 0, 1)
    np.testing.assert_array_equal(p.numpy(), np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1))
    s = t[:, 1::2]
    np.testing.assert_array_equal(s.numpy(), base[:, 1::2])


def test_asarray_array_and_dlpack():
    t = cp.tensor([[1, 2], [3, 4]], dtype=cp.int32)
    a = np.asarray(t)
    assert a.dtype == np.int32
    np.testing.assert_array_equal(a, [[1, 2], [3, 4]])
    b = np.array(t)
    np.testing.assert_array_equal(b, [[1, 2], [3, 4]])
    # np.array copies by default: the copy is writable and independent.
    b[0, 0] = 100
    assert t[0, 0].item() == 1
    c = np.asarray(t, dtype=np.float64)
    assert c.dtype == np.float64
    d = np.from_dlpack(t)
    assert d.dtype == np.int32
    np.testing.assert_array_equal(d, [[1, 2], [3, 4]])
    assert t.__dlpack_device__() == (1, 0)
    # DLPack on a non-contiguous tensor exports the right values.
    np.testing.assert_array_equal(np.from_dlpack(t.t()), [[1, 3], [2, 4]])


def test_from_dlpack_of_float_tensor_values():
    t = cp.linspace(0, 1, 5, dtype=cp.float64)
    np.testing.assert_allclose(np.from_dlpack(t), np.linspace(0, 1, 5))


def test_float16_and_bfloat16_export():
    h = cp.tensor([1.5, -2.0], dtype=cp.float16)
    assert h.numpy().dtype == np.float16
    np.testing.assert_array_equal(h.numpy(), np.array([1.5, -2.0], np.float16))
    b = cp.tensor([1.5, -2.0, 3.0], dtype=cp.bfloat16)
    bn = b.numpy()
    assert bn.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(bn.astype(np.float32), [1.5, -2.0, 3.0])


def test_bool_export():
    t = cp.tensor([True, False, True])
    assert t.numpy().dtype == np.bool_
    np.testing.assert_array_equal(t.numpy(), [True, False, True])
    m = cp.tensor([1.0, 2.0, 3.0]) > 1.5
    assert m.numpy().dtype == np.bool_
    np.testing.assert_array_equal(m.numpy(), [False, True, True])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (2, 3, 4), (1, 1, 1, 5)])
def test_from_numpy_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    a = (rng.integers(0, 50, size=shape)).astype(dtype)
    t = cp.from_numpy(a)
    assert t.dtype == CP_OF[np.dtype(dtype)]
    assert t.shape == shape
    b = t.numpy()
    assert b.dtype == np.dtype(dtype)
    assert b.shape == shape
    np.testing.assert_array_equal(b.astype(np.float64), a.astype(np.float64))


@given(
    hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_, np.int16]),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
    )
)
def test_from_numpy_round_trip_hypothesis(a):
    t = cp.from_numpy(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.numpy().dtype == a.dtype


def test_from_numpy_rejects_non_arrays_and_bad_dtypes():
    with pytest.raises(TypeError):
        cp.from_numpy([1, 2, 3])
    with pytest.raises(TypeError):
        cp.from_numpy(np.array([1 + 2j]))
    with pytest.raises(TypeError):
        cp.from_numpy(np.array(["a"]))
    with pytest.raises(TypeError):
        cp.from_numpy(np.array([1], dtype=np.int8))


def test_inplace_setitem_visible_through_earlier_numpy_view():
    t = cp.tensor([1.0, 2.0, 3.0])
    a = t.numpy()
    t[0] = 5
    np.testing.assert_array_equal(a, [5.0, 2.0, 3.0])
    t[1:] = cp.tensor([7.0, 8.0])
    np.testing.assert_array_equal(a, [5.0, 7.0, 8.0])


def test_inplace_add_visible_through_earlier_numpy_view():
    t = cp.tensor([1.0, 2.0, 3.0])
    a = t.numpy()
    t += 1
    np.testing.assert_array_equal(t.numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(a, [2.0, 3.0, 4.0])


def test_inplace_methods_visible_through_earlier_numpy_view():
    t = cp.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = t.numpy()
    t.fill_(9.0)
    np.testing.assert_array_equal(a, np.full((2, 2), 9.0))
    t.zero_()
    np.testing.assert_array_equal(a, np.zeros((2, 2)))
    t.copy_(cp.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(a, [[1.0, 2.0], [1.0, 2.0]])


def test_numpy_of_tensor_requiring_grad():
    t = cp.tensor([1.0, 2.0], requires_grad=True)
    # candle_py exports the detached data (PyTorch would require .detach() first).
    np.testing.assert_array_equal(t.detach().numpy(), [1.0, 2.0])


def test_tensor_from_numpy_is_a_copy():
    a = np.arange(5.0)
    t = cp.from_numpy(a)
    a[0] = 42.0
    # candle_py copies on import (documented difference from torch.from_numpy's shared memory).
    assert t[0].item() == 0.0


def test_large_round_trip():
    a = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    t = cp.from_numpy(a)
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t.t().numpy(), a.T)
