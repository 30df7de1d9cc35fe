"""`x[key]`, `x[key] = value` and `slice_assign`, checked against NumPy.

View semantics observed (and asserted below in `test_views_taken_before_a_write`):

* Keys made only of ints, `None`, `...` and step-1 slices give views: they share
  storage with the tensor, so a later in-place write to the tensor (`x[k] = v`,
  `x += 1`, `fill_`) is visible through them, as in PyTorch.
* Slices with a step > 1 and advanced keys (index tensors, lists, masks) give
  copies: later writes are NOT visible through them. (In PyTorch stepped slices
  are views; Candle layouts cannot express a strided step, so candle_py copies.)
* Writing through an earlier view `v = x[0]; v[1] = 5` is visible in `x` when
  `v` is a view in the sense above.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import candle_py as cp

SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


def _positive_steps(key) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return all(not (isinstance(k, slice) and k.step is not None and k.step < 0) for k in items)


def _check_get(a: np.ndarray, key, ckey=None):
    x = cp.tensor(a)
    got = x[key if ckey is None else ckey]
    want = a[key]
    assert isinstance(got, cp.Tensor)
    assert tuple(got.shape) == want.shape, (key, got.shape, want.shape)
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.dtype == x.dtype


# ---------------------------------------------------------------- reads, hand-picked


A = np.arange(120, dtype=np.float32).reshape(4, 5, 6)

BASIC_KEYS = [
    0,
    -1,
    3,
    -4,
    (1, 2),
    (1, -2, 3),
    (-1, -1, -1),
    slice(None),
    slice(1, 3),
    slice(None, None, 2),
    slice(1, None, 3),
    slice(-3, -1),
    slice(10, 20),
    slice(3, 1),
    (slice(None), slice(None, None, 2)),
    (slice(None), 1, slice(1, 6, 2)),
    None,
    (None, 0),
    (0, None, slice(None), None),
    Ellipsis,
    (Ellipsis, 0),
    (0, Ellipsis),
    (Ellipsis, None),
    (1, Ellipsis, slice(None, None, 4)),
    (None, Ellipsis, None, -1),
    (),
]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
def test_basic_keys_match_numpy(key):
    _check_get(A, key)


ADVANCED_KEYS = [
    [0, 2],
    [-1, 0, 0],
    ([0, 1], [1, 2]),
    ([0, 1], [1, 2], [3, 4]),
    ([[0, 1], [2, 3]],),
    (slice(None), [0, 4]),
    (Ellipsis, [5, 0, 1]),
    ([0, 3], slice(None), [1, 2]),  # separated advanced indices: broadcast dims go first
    (slice(1, 3), [0, 1], [2, 3]),  # adjacent advanced indices after a slice
    (0, [1, 2], slice(None)),
    ([1], None, [2]),
    (np.array([True, False, True, False]),),
    (slice(None), np.array([True, False, True, False, True])),
    (A > 60,),
    (A[:, :, 0] > 10,),  # partial boolean mask over the first two dims
    (np.array([[0], [2]]), np.array([1, 4])),
    ([0, 1, 0],),
]


@pytest.mark.parametrize("key", ADVANCED_KEYS, ids=lambda k: repr(k)[:40])
def test_advanced_keys_match_numpy(key):
    _check_get(A, key)


def _to_cp_key(key):
    if isinstance(key, tuple):
        return tuple(_to_cp_key(k) for k in key)
    if isinstance(key, (list, np.ndarray)):
        return cp.tensor(np.asarray(key))
    return key


@pytest.mark.parametrize("key", ADVANCED_KEYS, ids=lambda k: repr(k)[:40])
def test_advanced_keys_as_candle_tensors(key):
    _check_get(A, key, _to_cp_key(key))


def test_index_tensor_dtypes():
    x = cp.tensor(A)
    for dt in [cp.int64, cp.int32, cp.uint8, cp.int16, cp.uint32]:
        idx = cp.tensor([2, 0], dtype=dt)
        np.testing.assert_array_equal(x[idx].numpy(), A[[2, 0]])
    # A 0-d integer tensor acts like an int.
    np.testing.assert_array_equal(x[cp.tensor(1)].numpy(), A[1])
    # A bool tensor is a mask.
    m = cp.tensor([True, False, False, True])
    np.testing.assert_array_equal(x[m].numpy(), A[[0, 3]])


def test_index_on_0d_and_empty():
    s = cp.tensor(5.0)
    assert s[()].item() == 5.0
    assert s[None].shape == (1,)
    assert s[...].shape == ()
    e = cp.zeros(0, 3)
    assert e[:, 1].shape == (0,)
    assert e[cp.tensor([], dtype=cp.int64)].shape == (0, 3)
    with pytest.raises(IndexError):
        e[0]
    with pytest.raises(IndexError):
        s[0]


def test_bool_and_int_tensors_index_rows():
    b = cp.tensor([[True, False], [False, True]])
    np.testing.assert_array_equal(b[0].numpy(), [True, False])
    assert b[0].dtype == cp.bool
    np.testing.assert_array_equal(b[b].numpy(), [True, True])


# ---------------------------------------------------------------- reads, property-based


@st.composite
def basic_case(draw):
    shape = draw(SHAPES)
    key = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    assume(_positive_steps(key))
    return shape, key


@given(basic_case())
def test_basic_indexing_hypothesis(case):
    shape, key = case
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    _check_get(a, key)


@st.composite
def int_array_case(draw):
    shape = draw(SHAPES)
    key = draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=3)))
    return shape, key


@given(int_array_case(), st.booleans())
def test_integer_array_indexing_hypothesis(case, as_tensor):
    shape, key = case
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    _check_get(a, key, _to_cp_key(key) if as_tensor else tuple(k.tolist() for k in key))


@given(st.data())
def test_boolean_mask_hypothesis(data):
    shape = data.draw(SHAPES)
    k = data.draw(st.integers(1, len(shape)))
    mask = data.draw(hnp.arrays(np.bool_, shape[:k]))
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    _check_get(a, mask, cp.tensor(mask))


# ---------------------------------------------------------------- read errors


@pytest.mark.parametrize(
    "key",
    [4, -5, (0, 5), (0, 0, 6), (0, 0, 0, 0), [4], [0, -5], (slice(None), [5]), (Ellipsis, Ellipsis)],
    ids=repr,
)
def test_out_of_range_raises_index_error(key):
    x = cp.tensor(A)
    with pytest.raises(IndexError):
        x[key]


def test_negative_step_raises_value_error():
    x = cp.tensor(A)
    with pytest.raises(ValueError):
        x[::-1]
    with pytest.raises(ValueError):
        x[:, 3:0:-1]
    with pytest.raises(ValueError):
        x[0, ::0]


@pytest.mark.parametrize("key", [1.5, "a", cp.tensor([0.0, 1.0]), [0.5, 1.0], {"a": 1}], ids=repr)
def test_bad_key_types(key):
    x = cp.tensor(A)
    with pytest.raises((IndexError, TypeError)):
        x[key]


def test_wrong_mask_shape():
    x = cp.tensor(A)
    with pytest.raises(IndexError):
        x[cp.tensor([True, False])]


# ---------------------------------------------------------------- writes


SET_CASES = [
    (1, 7.0),
    (-1, np.arange(30.0).reshape(5, 6)),
    ((0, 1), np.arange(6.0)),
    ((0, 1, 2), -3.0),
    (slice(1, 3), 1.5),
    ((slice(None), slice(None, None, 2)), np.arange(6.0)),  # broadcast over leading dims
    ((Ellipsis, 0), np.arange(5.0).reshape(1, 5)),
    ((slice(1, None, 2), 2), np.ones((2, 6))),
    ((None, 0), np.ones((1, 5, 6))),
    ([0, 2], 9.0),
    (([0, 1], [1, 2]), np.array([10.0, 20.0])[:, None]),
    ((slice(None), [0, 4]), np.zeros((2, 6))),
    (([0, 3], slice(None), [1, 2]), np.arange(5.0)[None, :]),
    (A > 100, -1.0),
    (A[:, :, 0] > 50, np.arange(6.0)),
    (np.array([True, False, True, False]), 0.5),
]


@pytest.mark.parametrize("key, value", SET_CASES, ids=lambda v: repr(v)[:30])
@pytest.mark.parametrize("value_kind", ["numpy-like", "tensor"])
def test_setitem_matches_numpy(key, value, value_kind):
    a = A.copy()
    x = cp.tensor(a)
    if value_kind == "tensor" and isinstance(value, np.ndarray):
        v = cp.tensor(value.astype(np.float32))
    elif isinstance(value, np.ndarray):
        v = value.tolist()
    else:
        v = value
    x[key] = v
    a[key] = value
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_with_tensor_keys():
    a = A.copy()
    x = cp.tensor(a)
    x[cp.tensor([1, 3])] = cp.tensor(-2.0)
    a[[1, 3]] = -2.0
    x[cp.tensor(a > 50)] = 0.0
    a[a > 50] = 0.0
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_casts_to_destination_dtype():
    x = cp.zeros(4, dtype=cp.int64)
    x[1] = 2.7
    x[2:] = cp.tensor([5.9, -1.2])
    assert x.dtype == cp.int64
    np.testing.assert_array_equal(x.numpy(), [0, 2, 5, -1])
    b = cp.zeros(3, dtype=cp.bool)
    b[1] = True
    np.testing.assert_array_equal(b.numpy(), [False, True, False])
    h = cp.zeros(3, dtype=cp.float16)
    h[0] = 1.5
    np.testing.assert_array_equal(h.numpy(), np.array([1.5, 0, 0], np.float16))


def test_setitem_duplicate_indices_last_write_wins_like_numpy():
    a = np.zeros(5)
    x = cp.tensor(a)
    x[[1, 1, 3]] = cp.tensor([1.0, 2.0, 3.0], dtype=cp.float64)
    a[[1, 1, 3]] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_on_non_contiguous_tensor():
    base = cp.arange(12.0).reshape(3, 4)
    t = base.t()  # (4, 3) view
    t[1] = cp.tensor([-1.0, -2.0, -3.0])
    a = np.arange(12.0).reshape(3, 4)
    a.T[1] = [-1, -2, -3]
    np.testing.assert_array_equal(t.numpy(), a.T)
    # `.t()` is a view in candle_py, so the write shows in the base, as in PyTorch.
    np.testing.assert_array_equal(base.numpy(), a)


@given(basic_case(), st.floats(-100, 100, allow_nan=False, width=32))
def test_setitem_scalar_hypothesis(case, value):
    shape, key = case
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x = cp.tensor(a)
    x[key] = value
    a[key] = value
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_wrong_value_shape_names_both_shapes():
    x = cp.tensor(A)
    with pytest.raises(ValueError) as ei:
        x[0] = cp.ones(4, 6)
    msg = str(ei.value)
    assert "4, 6" in msg and "5, 6" in msg
    with pytest.raises(ValueError) as ei:
        x[[0, 1]] = cp.ones(3, 5, 6)
    msg = str(ei.value)
    assert "3, 5, 6" in msg and "2, 5, 6" in msg
    # Nothing was written.
    np.testing.assert_array_equal(x.numpy(), A)


def test_setitem_errors():
    x = cp.tensor(A)
    with pytest.raises(IndexError):
        x[4] = 1.0
    with pytest.raises(ValueError):
        x[::-1] = 1.0
    with pytest.raises(TypeError):
        x[0] = "a"
    with pytest.raises(TypeError):
        x[0] = None


def test_views_taken_before_a_write():
    x = cp.tensor(A)
    row = x[1]  # int key: view
    block = x[:, 1:3]  # step-1 slices: view
    stepped = x[::2]  # step 2: copy
    picked = x[[1, 2]]  # advanced: copy
    x[1, 1, 0] = -100.0
    assert row[1, 0].item() == -100.0
    assert block[1, 0, 0].item() == -100.0
    assert stepped.numpy()[0, 0, 0] == A[0, 0, 0]
    assert picked[0, 1, 0].item() == A[1, 1, 0]
    # An advanced-key write also lands in the shared storage.
    x[[1], [2]] = 55.0
    assert block[1, 1, 0].item() == 55.0
    # Writes through a view reach the base tensor.
    row[0, 0] = 123.0
    assert x[1, 0, 0].item() == 123.0


def test_write_into_graph_tensor_keeps_gradients():
    w = cp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 2
    y[1] = 0.0
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 0.0, 2.0])
    with pytest.raises(RuntimeError):
        w[0] = 5.0


# ---------------------------------------------------------------- slice_assign


def test_slice_assign_returns_new_tensor():
    a = np.arange(20.0).reshape(4, 5)
    x = cp.tensor(a)
    src = cp.tensor([[-1.0, -2.0], [-3.0, -4.0]], dtype=cp.float64)
    y = x.slice_assign([slice(1, 3), slice(0, 2)], src)
    b = a.copy()
    b[1:3, 0:2] = [[-1, -2], [-3, -4]]
    np.testing.assert_array_equal(y.numpy(), b)
    np.testing.assert_array_equal(x.numpy(), a)  # x unchanged
    assert y.dtype == x.dtype
    # ranges work too, and fewer ranges than dims cover the trailing dims fully.
    z = x.slice_assign([range(0, 1)], cp.zeros(1, 5))
    b = a.copy()
    b[0:1] = 0
    np.testing.assert_array_equal(z.numpy(), b)


def test_slice_assign_shape_mismatch():
    x = cp.zeros(4, 5)
    with pytest.raises(ValueError) as ei:
        x.slice_assign([slice(1, 3), slice(0, 2)], cp.zeros(3, 2))
    assert "3, 2" in str(ei.value) and "2, 2" in str(ei.value)
    with pytest.raises((ValueError, IndexError)):
        x.slice_assign([slice(0, 1), slice(0, 1), slice(0, 1)], cp.zeros(1, 1, 1))
    with pytest.raises(TypeError):
        x.slice_assign([1, 2], cp.zeros(1))


def test_slice_assign_gradient():
    x = cp.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    s = cp.tensor([[10.0, 20.0]], requires_grad=True)
    y = x.slice_assign([slice(0, 1)], s)
    (y * cp.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_array_equal(s.grad.numpy(), [[1.0, 2.0]])
