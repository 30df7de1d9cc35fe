"""Tensor creation: `cp.tensor`, factories, attributes, conversions, repr, devices, pickling.

Expected values are PyTorch's documented behaviour, checked against NumPy.
"""

from __future__ import annotations

import math
import pickle

import ml_dtypes
import numpy as np
import pytest

import candle_py as cp

NP_DTYPES = [
    (np.bool_, cp.bool),
    (np.uint8, cp.uint8),
    (np.int16, cp.int16),
    (np.int32, cp.int32),
    (np.int64, cp.int64),
    (np.uint32, cp.uint32),
    (np.float16, cp.float16),
    (np.float32, cp.float32),
    (np.float64, cp.float64),
    (ml_dtypes.bfloat16, cp.bfloat16),
]


def as_np(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.numpy())


# ---------------------------------------------------------------- cp.tensor from Python data


@pytest.mark.parametrize(
    "value, dtype",
    [(1.5, cp.float32), (3, cp.int64), (True, cp.bool), (-7, cp.int64), (0.0, cp.float32)],
)
def test_tensor_from_python_scalar(value, dtype):
    t = cp.tensor(value)
    assert t.dtype == dtype
    assert t.shape == ()
    assert t.ndim == 0
    assert t.numel() == 1
    assert t.item() == value
    assert type(t.item()) is type(value)


def test_tensor_nested_lists_any_rank():
    for rank in range(0, 5):
        shape = tuple(range(2, 2 + rank))
        a = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
        t = cp.tensor(a.tolist())
        assert t.shape == shape
        assert t.dtype == cp.int64
        np.testing.assert_array_equal(as_np(t), a)


def test_tensor_from_tuples_and_mixed_sequences():
    t = cp.tensor(((1, 2), [3, 4]))
    assert t.shape == (2, 2)
    np.testing.assert_array_equal(as_np(t), [[1, 2], [3, 4]])
    t = cp.tensor((1.5, 2.5))
    assert t.dtype == cp.float32
    np.testing.assert_array_equal(as_np(t), np.array([1.5, 2.5], np.float32))


def test_dtype_inference_like_pytorch():
    assert cp.tensor([1.0, 2.0]).dtype == cp.float32
    assert cp.tensor([1, 2]).dtype == cp.int64
    assert cp.tensor([True, False]).dtype == cp.bool
    assert cp.tensor([1, 2.5]).dtype == cp.float32
    assert cp.tensor([[1], [2.5]]).dtype == cp.float32
    assert cp.tensor([True, 2]).dtype == cp.int64
    np.testing.assert_array_equal(as_np(cp.tensor([1, 2.5])), np.array([1.0, 2.5], np.float32))
    # NumPy data keeps its dtype.
    assert cp.tensor(np.array([1.0, 2.0])).dtype == cp.float64
    assert cp.tensor(np.array([1, 2], np.int32)).dtype == cp.int32
    # Empty list: PyTorch's default float dtype.
    e = cp.tensor([])
    assert e.shape == (0,) and e.dtype == cp.float32
    assert cp.tensor([[]]).shape == (1, 0)


def test_numpy_scalars_keep_their_dtype():
    # torch.tensor(np.float64(2.0)).dtype == torch.float64, likewise for other NumPy scalars.
    assert cp.tensor(np.float64(2.0)).dtype == cp.float64
    assert cp.tensor(np.int32(3)).dtype == cp.int32
    assert cp.tensor(np.float16(1.5)).dtype == cp.float16
    assert cp.tensor(np.bool_(True)).dtype == cp.bool
    assert cp.tensor(np.float64(2.0)).item() == 2.0
    assert cp.tensor(np.uint8(200)).item() == 200


def test_tensor_from_list_of_0d_tensors():
    t = cp.tensor([cp.tensor(1.0), cp.tensor(2.0)])
    np.testing.assert_array_equal(as_np(t), [1.0, 2.0])


@pytest.mark.parametrize("np_dtype, cp_dtype", NP_DTYPES)
def test_tensor_from_numpy_every_dtype(np_dtype, cp_dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(np_dtype)
    t = cp.tensor(a)
    assert t.dtype == cp_dtype
    assert t.shape == (2, 3, 4)
    out = t.numpy()
    assert out.dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(out.astype(np.float64), a.astype(np.float64))


@pytest.mark.parametrize("np_dtype, cp_dtype", NP_DTYPES)
def test_tensor_dtype_argument_converts(np_dtype, cp_dtype):
    t = cp.tensor([0, 1, 2], dtype=cp_dtype)
    assert t.dtype == cp_dtype
    np.testing.assert_array_equal(as_np(t).astype(np.float64), np.array([0, 1, 2]).astype(np_dtype).astype(np.float64))


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a.T,
        lambda a: a[::2, 1::3],
        lambda a: a[::-1],
        lambda a: a[:, ::-2],
        lambda a: a[::-1, ::-1].T,
        lambda a: np.broadcast_to(a[:1], a.shape),
        lambda a: a.astype(">f4"),  # non-native byte order
    ],
)
def test_tensor_from_non_contiguous_numpy(make):
    base = np.arange(42, dtype=np.float32).reshape(6, 7)
    a = make(base)
    t = cp.tensor(a)
    assert t.shape == a.shape
    np.testing.assert_array_equal(as_np(t), a)


def test_tensor_copies_numpy_data():
    a = np.arange(4.0)
    t = cp.tensor(a)
    a[0] = 100
    assert as_np(t)[0] == 0.0


class ArrayLike:
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


class DLPackOnly:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_tensor_from_array_protocol():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = cp.tensor(ArrayLike(a))
    assert t.dtype == cp.int16
    np.testing.assert_array_equal(as_np(t), a)


def test_tensor_from_dlpack_protocol():
    a = np.linspace(0, 1, 10).reshape(2, 5)
    t = cp.tensor(DLPackOnly(a))
    assert t.dtype == cp.float64
    np.testing.assert_array_equal(as_np(t), a)
    # A candle_py tensor is itself a DLPack producer.
    t2 = cp.tensor(DLPackOnly(cp.tensor([1, 2, 3], dtype=cp.int32)))
    assert t2.dtype == cp.int32
    np.testing.assert_array_equal(as_np(t2), [1, 2, 3])


@pytest.mark.parametrize("spec", [cp.float64, "float64", np.float64, np.dtype("float64"), "double"])
def test_dtype_argument_forms(spec):
    t = cp.tensor([1, 2], dtype=spec)
    assert t.dtype == cp.float64
    assert cp.zeros(2, dtype=spec).dtype == cp.float64


def test_dtype_argument_bfloat16_forms():
    assert cp.tensor([1.0], dtype=ml_dtypes.bfloat16).dtype == cp.bfloat16
    assert cp.tensor([1.0], dtype="bfloat16").dtype == cp.bfloat16


def test_bad_dtype_argument():
    with pytest.raises(TypeError):
        cp.tensor([1], dtype="complex64")
    with pytest.raises(TypeError):
        cp.tensor([1], dtype="nonsense")


@pytest.mark.parametrize("data", [[[1, 2], [3]], [1, [2, 3]], [[[1, 2]], [[1]]]])
def test_ragged_lists_raise_value_error(data):
    with pytest.raises(ValueError):
        cp.tensor(data)


@pytest.mark.parametrize("data", [None, "abc", ["a", "b"], [None, 1], {"a": 1}, object()])
def test_bad_data_raises_type_error(data):
    with pytest.raises(TypeError):
        cp.tensor(data)


def test_tensor_requires_grad_flag():
    t = cp.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad
    assert not cp.tensor([1.0]).requires_grad


def test_tensor_of_tensor_copies():
    a = cp.tensor([1.0, 2.0])
    b = cp.tensor(a)
    b[0] = 9.0
    assert as_np(a)[0] == 1.0


# ---------------------------------------------------------------- factories


@pytest.mark.parametrize("fn, value", [(cp.zeros, 0), (cp.ones, 1), (cp.empty, None)])
@pytest.mark.parametrize("args", [(2, 3), ((2, 3),), ([2, 3],)])
def test_size_forms(fn, value, args):
    t = fn(*args)
    assert t.shape == (2, 3)
    assert t.dtype == cp.float32
    if value is not None:
        np.testing.assert_array_equal(as_np(t), np.full((2, 3), value, np.float32))


def test_zeros_ones_dtype_and_scalar_shapes():
    assert cp.zeros((), dtype=cp.int32).shape == ()
    assert cp.zeros(0).shape == (0,)
    assert cp.ones(2, dtype=cp.int64).dtype == cp.int64
    np.testing.assert_array_equal(as_np(cp.ones(3, dtype=cp.bool)), [True, True, True])
    assert cp.zeros(2, 0, 3).shape == (2, 0, 3)


@pytest.mark.parametrize(
    "fill, dtype",
    [(3, cp.int64), (2.5, cp.float32), (True, cp.bool), (-1, cp.int64)],
)
def test_full_infers_dtype_from_fill(fill, dtype):
    t = cp.full((2, 2), fill)
    assert t.dtype == dtype
    np.testing.assert_array_equal(as_np(t), np.full((2, 2), fill))


def test_full_explicit_dtype_and_like():
    t = cp.full((3,), 7, dtype=cp.float64)
    assert t.dtype == cp.float64
    np.testing.assert_array_equal(as_np(t), [7.0, 7.0, 7.0])
    t = cp.full([2], float("inf"))
    assert np.isinf(as_np(t)).all()


def test_arange_dtype_inference():
    assert cp.arange(5).dtype == cp.int64
    assert cp.arange(5.0).dtype == cp.float32
    assert cp.arange(0, 5, 0.5).dtype == cp.float32
    assert cp.arange(1, 4).dtype == cp.int64
    np.testing.assert_array_equal(as_np(cp.arange(5)), np.arange(5))
    np.testing.assert_array_equal(as_np(cp.arange(2, 9, 3)), [2, 5, 8])


@pytest.mark.parametrize(
    "start, end, step",
    [(10, 0, -3), (0, -5, -1), (1.0, -1.0, -0.5), (0, 1, 0.1), (0, 1, 0.3), (-1.0, 2.0, 0.7), (0.0, 1.0, 1 / 3), (5, 5, 1), (0, 10, 20)],
)
def test_arange_length_and_values(start, end, step):
    t = cp.arange(start, end, step)
    n = max(0, math.ceil((end - start) / step))
    assert t.shape == (n,)
    expected = np.array([start + i * step for i in range(n)])
    np.testing.assert_allclose(as_np(t).astype(np.float64), expected, rtol=1e-6, atol=1e-6)


def test_arange_bad_arguments():
    with pytest.raises(ValueError):
        cp.arange(0, 10, 0)
    with pytest.raises(ValueError):
        cp.arange(0, 10, -1)
    with pytest.raises(ValueError):
        cp.arange(0, float("inf"))


def test_linspace():
    np.testing.assert_allclose(as_np(cp.linspace(0, 1, 5)), [0, 0.25, 0.5, 0.75, 1])
    assert cp.linspace(0, 1, 5).dtype == cp.float32
    assert cp.linspace(0, 1, 0).shape == (0,)
    # steps=1 gives `start`, as torch.linspace does.
    np.testing.assert_array_equal(as_np(cp.linspace(3, 7, 1)), [3.0])
    np.testing.assert_allclose(as_np(cp.linspace(-2, 5, 11)), np.linspace(-2, 5, 11), rtol=1e-6)
    np.testing.assert_allclose(as_np(cp.linspace(5, -2, 8, dtype=cp.float64)), np.linspace(5, -2, 8))
    assert as_np(cp.linspace(0, 1, 7))[-1] == 1.0
    with pytest.raises(ValueError):
        cp.linspace(0, 1, -1)


def test_eye():
    np.testing.assert_array_equal(as_np(cp.eye(3)), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(as_np(cp.eye(2, 4)), np.eye(2, 4))
    np.testing.assert_array_equal(as_np(cp.eye(4, 2, dtype=cp.int64)), np.eye(4, 2, dtype=np.int64))
    assert cp.eye(0).shape == (0, 0)


@pytest.mark.parametrize("dtype", [cp.float32, cp.float64, cp.int32, cp.bool])
def test_like_factories(dtype):
    x = cp.tensor([[1, 0, 2], [3, 4, 5]], dtype=dtype)
    for fn, val in [(cp.zeros_like, 0), (cp.ones_like, 1), (cp.empty_like, None)]:
        t = fn(x)
        assert t.shape == x.shape and t.dtype == dtype
        if val is not None:
            np.testing.assert_array_equal(as_np(t).astype(np.float64), np.full((2, 3), val))
    f = cp.full_like(x, 1)
    assert f.dtype == dtype
    assert cp.zeros_like(x, dtype=cp.float64).dtype == cp.float64


def test_rand_like_shapes_and_ranges():
    x = cp.zeros(50, 20, dtype=cp.float64)
    r = cp.rand_like(x)
    assert r.dtype == cp.float64 and r.shape == (50, 20)
    a = as_np(r)
    assert (a >= 0).all() and (a < 1).all()
    n = as_np(cp.randn_like(x))
    assert n.shape == (50, 20) and abs(n.mean()) < 0.2 and 0.8 < n.std() < 1.2


def test_rand_randn_distributions():
    cp.manual_seed(0)
    u = as_np(cp.rand(100, 100))
    assert u.dtype == np.float32 and (u >= 0).all() and (u < 1).all()
    assert abs(u.mean() - 0.5) < 0.02
    n = as_np(cp.randn((100, 100)))
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    assert cp.rand([2, 3]).shape == (2, 3)
    assert cp.rand(3, dtype=cp.float64).dtype == cp.float64
    with pytest.raises(TypeError):
        cp.rand(3, dtype=cp.int64)


def test_randint_and_randperm():
    t = cp.randint(3, 10, (1000,))
    a = as_np(t)
    assert t.dtype == cp.int64
    assert a.min() >= 3 and a.max() < 10
    assert set(a.tolist()) == set(range(3, 10))
    t = cp.randint(5, (2, 3))
    assert t.shape == (2, 3) and as_np(t).max() < 5 and as_np(t).min() >= 0
    p = cp.randperm(50)
    assert p.dtype == cp.int64
    assert sorted(as_np(p).tolist()) == list(range(50))
    assert cp.randperm(0).shape == (0,)
    with pytest.raises(RuntimeError):  # as torch: randint draws with random_
        cp.randint(5, 5, (3,))


def _draw():
    return [
        as_np(cp.rand(20)).copy(),
        as_np(cp.randn(20)).copy(),
        as_np(cp.randint(0, 1000, (20,))).copy(),
        as_np(cp.randperm(20)).copy(),
    ]


def test_manual_seed_reproducible():
    cp.manual_seed(1234)
    first = _draw()
    cp.manual_seed(1234)
    second = _draw()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    cp.manual_seed(4321)
    third = _draw()
    for a, b in zip(first, third):
        assert not np.array_equal(a, b)
    # Successive draws without reseeding differ.
    assert not np.array_equal(as_np(cp.rand(20)), as_np(cp.rand(20)))


def test_negative_and_bad_sizes():
    with pytest.raises(ValueError):
        cp.zeros(-1)
    with pytest.raises(ValueError):
        cp.ones(2**62, 2**62)
    with pytest.raises(TypeError):
        cp.zeros(2.5)
    with pytest.raises(TypeError):
        cp.zeros("a")


# ---------------------------------------------------------------- attributes and conversions


def test_attributes():
    t = cp.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.shape == (2, 3)
    assert tuple(t.shape) == (2, 3)
    assert t.ndim == 2 and t.dim() == 2
    assert t.numel() == 6
    assert t.size() == (2, 3)
    assert t.size(0) == 2 and t.size(1) == 3 and t.size(-1) == 3
    with pytest.raises(IndexError):
        t.size(2)
    assert t.device == cp.get_default_device()  # cpu unless CANDLE_PY_DEVICE says otherwise
    assert str(t.device) in ("cpu", "cuda:0", "metal:0")
    assert len(t) == 2


def test_item_and_tolist():
    assert cp.tensor([[5]]).item() == 5
    assert isinstance(cp.tensor([[5]]).item(), int)
    assert cp.tensor([True]).item() is True
    assert cp.tensor(2.5).item() == 2.5
    with pytest.raises((ValueError, RuntimeError)):
        cp.tensor([1, 2]).item()
    assert cp.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert cp.tensor(2.5).tolist() == 2.5
    assert cp.tensor([True, False]).tolist() == [True, False]
    assert cp.tensor([1.5], dtype=cp.float16).tolist() == [1.5]
    assert cp.tensor([1.5], dtype=cp.bfloat16).tolist() == [1.5]
    assert cp.zeros(0, 2).tolist() == []
    lst = cp.tensor([1.0, 2.0]).tolist()
    assert all(type(v) is float for v in lst)


def test_to_dtype_and_device():
    t = cp.tensor([1, 2])
    assert t.to(cp.float32).dtype == cp.float32
    assert t.to("float64").dtype == cp.float64
    assert t.to(np.float16).dtype == cp.float16
    assert t.to(dtype=cp.int32).dtype == cp.int32
    c = t.to("cpu")
    assert c.device.type == "cpu"
    np.testing.assert_array_equal(as_np(c), [1, 2])
    assert t.to(cp.device("cpu"), cp.float64).dtype == cp.float64
    assert t.to(cp.zeros(1, dtype=cp.float16)).dtype == cp.float16
    assert t.cpu().device.type == "cpu"


def test_conversion_methods():
    t = cp.tensor([1.7, -2.7, 0.0])
    assert t.float().dtype == cp.float32
    assert t.double().dtype == cp.float64
    assert t.half().dtype == cp.float16
    np.testing.assert_array_equal(as_np(t.long()), [1, -2, 0])
    assert t.long().dtype == cp.int64
    np.testing.assert_array_equal(as_np(t.int()), [1, -2, 0])
    assert t.int().dtype == cp.int32
    np.testing.assert_array_equal(as_np(t.bool()), [True, True, False])
    assert t.bool().dtype == cp.bool
    np.testing.assert_array_equal(as_np(cp.tensor([True, False]).float()), [1.0, 0.0])
    np.testing.assert_allclose(as_np(t.half()).astype(np.float32), [1.7, -2.7, 0.0], rtol=1e-3)


def test_contiguous_clone_detach():
    x = cp.arange(6.0).reshape(2, 3)
    tt = x.t()
    assert not tt.is_contiguous()
    c = tt.contiguous()
    assert c.is_contiguous()
    np.testing.assert_array_equal(as_np(c), np.arange(6.0).reshape(2, 3).T)
    assert x.contiguous() is x
    k = x.clone()
    k[0, 0] = 100.0
    assert as_np(x)[0, 0] == 0.0
    g = cp.tensor([1.0, 2.0], requires_grad=True)
    d = g.detach()
    assert not d.requires_grad
    np.testing.assert_array_equal(as_np(d), [1.0, 2.0])
    cl = g.clone()
    assert cl.requires_grad


# ---------------------------------------------------------------- repr


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: cp.tensor([1.0, 2.0]), "tensor([1., 2.])"),
        (lambda: cp.tensor([1, 2]), "tensor([1, 2])"),
        (lambda: cp.tensor([True, False]), "tensor([ True, False])"),
        (lambda: cp.tensor(3.5), "tensor(3.5000)"),
        (lambda: cp.tensor(3), "tensor(3)"),
        (lambda: cp.tensor([1.5, 2.25]), "tensor([1.5000, 2.2500])"),
        (lambda: cp.tensor([1.0, 2.0], dtype=cp.float64), "tensor([1., 2.], dtype=candle_py.float64)"),
        (lambda: cp.tensor([1, 2], dtype=cp.int32), "tensor([1, 2], dtype=candle_py.int32)"),
        (lambda: cp.tensor([1.0], dtype=cp.float16), "tensor([1.], dtype=candle_py.float16)"),
        (lambda: cp.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
        (lambda: cp.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
        (lambda: cp.tensor([]), "tensor([])"),
        (lambda: cp.zeros(2, 0), "tensor([], size=(2, 0))"),
        (lambda: cp.tensor([], dtype=cp.int64), "tensor([], dtype=candle_py.int64)"),
        (lambda: cp.tensor([1.5e10, 1.0]), "tensor([1.5000e+10, 1.0000e+00])"),
        (lambda: cp.tensor([1.0, 2000.0]), "tensor([1.0000e+00, 2.0000e+03])"),
        (lambda: cp.tensor([0.00001, 1.0]), "tensor([1.0000e-05, 1.0000e+00])"),
        (lambda: cp.tensor(1e-5), "tensor(1.0000e-05)"),
        (lambda: cp.tensor([1.0, float("inf"), float("nan")]), "tensor([1., inf, nan])"),
        (lambda: cp.tensor([1.5, float("nan")]), "tensor([1.5000,    nan])"),
        (lambda: cp.tensor([1.0, 100.0]), "tensor([  1., 100.])"),
        (lambda: cp.tensor([-1.5, 10.25]), "tensor([-1.5000, 10.2500])"),
    ],
)
def test_repr_pytorch_style(make, expected):
    assert repr(make()) == expected


def test_repr_large_tensor_is_summarized():
    r = repr(cp.arange(5000))
    assert r.startswith("tensor([   0,    1,    2,")
    assert "..." in r
    assert r.endswith("4997, 4998, 4999])")


# ---------------------------------------------------------------- devices


def test_cpu_device_forms():
    for dev in ["cpu", cp.device("cpu")]:
        t = cp.zeros(2, device=dev)
        assert t.device.type == "cpu"
        t = cp.tensor([1.0], device=dev)
        assert t.device == cp.device("cpu")
    assert repr(cp.device("cpu")) == "device(type='cpu')"
    assert cp.device("cuda:1").index == 1


@pytest.mark.parametrize("dev, feature", [("cuda", "cuda"), ("cuda:1", "cuda"), ("metal", "metal")])
def test_missing_device_raises_device_error(dev, feature):
    assert issubclass(cp.DeviceError, RuntimeError)
    backend = cp.cuda if feature == "cuda" else cp.metal
    if backend.is_available():
        pytest.skip(f"this build has the {feature} feature and a device")
    for make in [
        lambda: cp.zeros(2, device=dev),
        lambda: cp.tensor([1.0], device=dev),
        lambda: cp.ones(2).to(dev),
        lambda: cp.arange(3, device=dev),
        lambda: cp.rand(2, device=dev),
    ]:
        with pytest.raises(cp.DeviceError) as ei:
            make()
        assert feature in str(ei.value)
        if not backend.is_built():  # a GPU build without a GPU names the device instead
            assert "feature" in str(ei.value)


def test_unknown_device_string():
    with pytest.raises(RuntimeError):
        cp.zeros(2, device="tpu")
    with pytest.raises(TypeError):
        cp.zeros(2, device=1.5)


# ---------------------------------------------------------------- pickling


@pytest.mark.parametrize(
    "t",
    [
        cp.tensor([[1.0, 2.0], [3.0, 4.0]]),
        cp.tensor([1, 2, 3], dtype=cp.int32),
        cp.tensor([True, False]),
        cp.tensor(2.5, dtype=cp.float64),
        cp.tensor([1.5, -2.0], dtype=cp.bfloat16),
        cp.tensor([1.5, -2.0], dtype=cp.float16),
        cp.zeros(0, 3),
        cp.arange(12).reshape(3, 4).t(),
    ],
)
def test_pickle_tensor_round_trip(t):
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == t.dtype
    assert u.shape == t.shape
    np.testing.assert_array_equal(as_np(u).astype(np.float64), as_np(t).astype(np.float64))


def test_pickle_requires_grad_dtype_device():
    t = cp.tensor([1.0, 2.0], requires_grad=True)
    assert pickle.loads(pickle.dumps(t)).requires_grad
    for d in [cp.float32, cp.bfloat16, cp.bool, cp.int64]:
        assert pickle.loads(pickle.dumps(d)) == d
    for dev in [cp.device("cpu"), cp.device("cuda:1")]:
        assert pickle.loads(pickle.dumps(dev)) == dev


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_dtypes_pickle_and_copy_as_the_same_global_objects(protocol):
    import copy

    for name in ["bool", "uint8", "int16", "int32", "int64", "uint32", "float16", "bfloat16", "float32", "float64"]:
        d = getattr(cp, name)
        data = pickle.dumps(d, protocol=protocol)
        assert pickle.loads(data) is d
        assert b"candle_py" in data and name.encode() in data
        assert copy.deepcopy(d) is d and copy.copy(d) is d
    # Pickles written by earlier versions named the helper; they still load.
    assert cp._dtype_from_name("float16") is cp.float16


def test_repr_of_huge_broadcast_view_reads_only_corners():
    # 2**62 elements exist only as a view; repr must not try to copy them out.
    t = cp.tensor(1.5).expand(2**62)
    assert repr(t) == "tensor([1.5000, 1.5000, 1.5000,  ..., 1.5000, 1.5000, 1.5000])"
    m = cp.arange(4.0).reshape(2, 2, 1).expand(2, 2, 2**40)
    assert repr(m).splitlines()[0] == "tensor([[[0., 0., 0.,  ..., 0., 0., 0.],"
    with pytest.raises(RuntimeError):
        t.numpy()  # materializing it cannot work: an exception, not an abort


def test_python_floats_asked_for_as_float64_stay_exact() -> None:
    """torch.tensor([0.1], dtype=torch.float64) holds the double 0.1, not 0.1 rounded through float32."""
    assert cp.tensor([0.1, -1e-8], dtype=cp.float64).tolist() == [0.1, -1e-8]
    assert cp.tensor([[0.1], [1e300]], dtype=cp.float64).tolist() == [[0.1], [1e300]]
    assert cp.tensor(0.1, dtype=cp.float64).item() == 0.1
    assert cp.tensor([0.1]).dtype == cp.float32 and cp.tensor([0.1]).item() == np.float32(0.1)
