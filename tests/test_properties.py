"""Property-based tests over the whole public API (CI-sized).

Hypothesis draws an API entry (every `cp.*` function, Tensor method, `F.*`
function, layer constructor and forward, `nn.init`/`nn.utils`, optimizers,
data and safetensors helpers; see tests/_fuzz.py) and arguments that mix
tensors of every dtype and shape (0-d, empty, non-contiguous, NaN/inf) with
junk (None, strings, ragged lists, negative and huge sizes, wrong devices
and dtypes). Allowed outcomes: a usable result, or a documented exception
with a short message. tools/fuzz_campaign.py runs the same properties for
100,000+ cases outside CI.

The second half checks results, not just survival, on the edge inputs that
the per-area suites draw less often: sizes that are 0, negative or huge,
ragged and nested lists, NaN/inf/-0.0 values.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import candle_py as cp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fuzz  # noqa: E402

FAMILIES = {
    "cp": [e for e in _fuzz.API if e[0].startswith("cp.")],
    "Tensor": [e for e in _fuzz.API if e[0].startswith("Tensor.")],
    "F": [e for e in _fuzz.API if e[0].startswith("F.")],
    "nn": [e for e in _fuzz.API if e[0].startswith("nn.")],
    "other": [e for e in _fuzz.API if e[0].split(".")[0] in ("optim", "utils", "safetensors", "autograd")],
}


def test_api_table_covers_the_public_surface():
    assert sum(map(len, FAMILIES.values())) == len(_fuzz.API)
    names = {e[0] for e in _fuzz.API}
    for must in (
        "cp.tensor",
        "cp.matmul",
        "Tensor.__getitem__",
        "Tensor.backward",
        "F.conv2d",
        "F.scaled_dot_product_attention",
        "nn.Linear",
        "nn.LSTM.forward",
        "optim.Adam",
        "safetensors.load",
        "utils.data.DataLoader",
        "nn.init.kaiming_uniform_",
    ):
        assert must in names, must
    assert len(FAMILIES["F"]) > 50 and len(FAMILIES["nn"]) > 100


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=150)
@given(data=st.data())
def test_junk_arguments(family, data):
    entries = FAMILIES[family]
    old = _fuzz.API
    _fuzz.API = entries
    try:
        _fuzz.prop_api_junk(data)
    finally:
        _fuzz.API = old


@settings(max_examples=200)
@given(data=st.data())
def test_tensor_arguments_of_any_dtype_and_shape(data):
    _fuzz.prop_tensor_args(data)


@settings(max_examples=200)
@given(data=st.data())
def test_plausible_arguments(data):
    _fuzz.prop_plausible_args(data)


@settings(max_examples=150)
@given(data=st.data())
def test_layers_on_inputs_of_any_rank_and_size(data):
    _fuzz.prop_layer_shapes(data)


@settings(max_examples=100)
@given(data=st.data())
def test_safetensors_roundtrip_and_mutated_bytes(data):
    _fuzz.prop_safetensors_bytes(data)


# ------------------------------------------------------------------ results on edge inputs

sizes = st.one_of(st.integers(0, 5), st.integers(-3, -1), st.sampled_from([2**62, 2**63, 2**64]))


@settings(max_examples=100)
@given(shape=st.lists(sizes, max_size=3), which=st.sampled_from(["zeros", "ones", "empty", "rand", "randn"]))
def test_creation_sizes(shape, which):
    fn = getattr(cp, which)
    if any(d < 0 for d in shape):
        with pytest.raises(ValueError):
            fn(*shape)
    elif any(d >= 2**63 for d in shape):
        with pytest.raises(ValueError, match="too large"):
            fn(*shape)
    elif math.prod(d for d in shape if d) >= 2**63 or math.prod(shape) > 2**40:
        # An element count past int64 (even with a zero dim, as PyTorch), or
        with pytest.raises((ValueError, RuntimeError)):  # cannot allocate (or does not fit an index)
            fn(*shape)
    else:
        t = fn(*shape)
        assert tuple(t.shape) == tuple(shape) and t.dtype == cp.float32
        if which in ("zeros", "ones") and max(shape, default=0) < 2**20:
            np.testing.assert_array_equal(t.numpy(), getattr(np, which)(shape, np.float32))


@settings(max_examples=100)
@given(start=st.integers(-5, 5), end=st.integers(-5, 5), step=st.sampled_from([1, 2, 3, -1, -2, 0]))
def test_arange_matches_numpy(start, end, step):
    if step == 0:
        with pytest.raises(ValueError):
            cp.arange(start, end, step)
        return
    want = np.arange(start, end, step)
    if want.size == 0 and np.sign(end - start) not in (0, np.sign(step)):
        # PyTorch rejects a step that points away from `end`; NumPy returns empty.
        with pytest.raises(ValueError):
            cp.arange(start, end, step)
        return
    np.testing.assert_array_equal(cp.arange(start, end, step).numpy(), want)


@settings(max_examples=100)
@given(start=st.floats(-10, 10), end=st.floats(-10, 10), steps=st.one_of(st.integers(0, 7), st.integers(-3, -1)))
def test_linspace_matches_numpy(start, end, steps):
    if steps < 0:
        with pytest.raises(ValueError):
            cp.linspace(start, end, steps)
        return
    got = cp.linspace(start, end, steps, dtype=cp.float64).numpy()
    np.testing.assert_allclose(got, np.linspace(start, end, steps), rtol=1e-12, atol=1e-12)


@settings(max_examples=150)
@given(x=_fuzz.nested)
def test_tensor_from_nested_lists(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ref = np.array(x)
        except ValueError:
            ref = None
    if ref is None or ref.dtype == object:
        with pytest.raises((ValueError, TypeError)):
            cp.tensor(x)
        return
    t = cp.tensor(x)
    assert tuple(t.shape) == ref.shape
    if ref.dtype.kind == "f":
        assert t.dtype == cp.float32
        np.testing.assert_array_equal(t.numpy(), ref.astype(np.float32))
    elif ref.dtype.kind == "b":
        assert t.dtype == cp.bool
        np.testing.assert_array_equal(t.numpy(), ref)
    else:
        assert t.dtype == cp.int64
        np.testing.assert_array_equal(t.numpy(), ref)


# PyTorch's results on NaN/inf/-0.0 for functions where NumPy agrees with it.
UNARY = {
    "abs": np.abs,
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "square": np.square,
    "reciprocal": np.reciprocal,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "log2": np.log2,
    "log10": np.log10,
    "rsqrt": lambda a: 1 / np.sqrt(a),
    "round": np.round,
    "sign": lambda a: np.where(np.isnan(a), 0, np.sign(a)),  # PyTorch: sign(nan) == 0
}
edge_arrays = st.lists(_fuzz.floats, max_size=6).map(lambda v: np.array(v, np.float64))


@settings(max_examples=120)
@given(name=st.sampled_from(sorted(UNARY)), a=edge_arrays, dtype=st.sampled_from(["float32", "float64"]), zero_d=st.booleans())
def test_unary_functions_on_edge_values(name, a, dtype, zero_d):
    a = a.astype(dtype)
    if zero_d:
        a = a[:1].reshape(()) if a.size else np.array(0.0, dtype)
    with np.errstate(all="ignore"):
        want = UNARY[name](a).astype(dtype)
    got = getattr(cp.from_numpy(a), name)().numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    # The project's elementwise tolerance for float32; float64 must be near exact.
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got, want, equal_nan=True, **tol)


@settings(max_examples=100)
@given(
    shape_a=st.lists(st.integers(0, 3), max_size=3),
    shape_b=st.lists(st.integers(0, 3), max_size=3),
    op=st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum", "eq", "lt"]),
)
def test_broadcasting_matches_numpy_or_raises(shape_a, shape_b, op):
    rng = np.random.default_rng(len(shape_a) * 7 + len(shape_b))
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    ref = {
        "add": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "div": np.divide,
        "maximum": np.maximum,
        "minimum": np.minimum,
        "eq": np.equal,
        "lt": np.less,
    }[op]
    try:
        want = ref(a, b)
    except ValueError:
        with pytest.raises(ValueError) as ei:
            getattr(cp, op)(cp.from_numpy(a), cp.from_numpy(b))
        assert str(list(shape_a)) in str(ei.value) and str(list(shape_b)) in str(ei.value)
        return
    got = getattr(cp, op)(cp.from_numpy(a), cp.from_numpy(b)).numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------------------------ what the campaign found


def test_fuzz_findings_stay_fixed():
    """Each line was a crash, a hang or an undocumented exception found by
    tools/fuzz_campaign.py or the properties above; they stay fixed."""
    from candle_py import nn
    from candle_py.nn import functional as F

    # Rust panics on an empty view whose offset lies past its (empty) storage.
    e = cp.zeros(0, 3)[:, 1]
    assert e.reshape(0, 0).tril().shape == (0, 0) and e.sum().item() == 0.0
    assert cp.safetensors.load(cp.safetensors.save({"e": e}))["e"].shape == (0,)
    # Rust panics on gather/scatter of a 0-d tensor (PyTorch treats it as one element).
    assert cp.tensor(3).scatter_add(0, cp.tensor([0, 0]), cp.tensor([1, 2])).item() == 6
    assert cp.tensor(3).gather(0, cp.tensor([0, 0])).tolist() == [3, 3]
    # Endless loop in trunc_normal_ with a NaN mean or a > b.
    with pytest.raises(ValueError):
        nn.init.trunc_normal_(cp.zeros(3), mean=float("nan"))
    with pytest.raises(ValueError):
        nn.init.trunc_normal_(cp.zeros(3), a=1.0, b=-1.0)
    # An empty tensor whose other dims are huge, and sizes past int64.
    assert cp.zeros(2**62, 0).shape == (2**62, 0)
    with pytest.raises(ValueError, match="too large"):
        cp.zeros(2**63)
    # AttributeError / BufferError instead of TypeError.
    for call in (
        lambda: F.softplus(cp.ones(2), ()),
        lambda: cp.tensor([1.0], dtype=cp.bfloat16).__dlpack__(),
        lambda: nn.utils.weight_norm([1, 2]),
        lambda: nn.utils.clip_grad_norm_([[1, 2]], 1.0),
        lambda: nn.BatchNorm1d(2)(slice(None)),
        lambda: F.tanh([1.0]),
        lambda: nn.init.zeros_(0.0),
    ):
        with pytest.raises(TypeError):
            call()
    # Messages that echoed a tensor's multi-line repr.
    with pytest.raises(TypeError) as ei:
        cp.as_tensor([1], cp.ones(3, 3))
    assert len(str(ei.value).splitlines()) == 1
