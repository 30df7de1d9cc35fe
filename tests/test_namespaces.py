"""Module-level names and namespaces real scripts import: constants, finfo/iinfo,
Size, legacy tensor types, the default dtype, backends, accelerator/cuda/mps,
compile/jit, print options, numerics switches, autocast and GradScaler, the
nn.modules import paths, onnx/distributed/multiprocessing, nn.parallel and
utils.checkpoint. Values come from PyTorch (tools/make_fixtures_namespaces.py)."""

from __future__ import annotations

import copy
import importlib
import json
import math
import pickle
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn.functional as F
from candle_py import nn

FIX = Path(__file__).parent / "fixtures" / "namespaces"


def _load(name: str) -> Dict[str, cp.Tensor]:
    return cp.safetensors.load_file(FIX / f"{name}.safetensors")


def _meta(name: str) -> Dict[str, str]:
    return dict(cp.safetensors.load_metadata(FIX / f"{name}.safetensors") or {})


def _np(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.detach().float())


@pytest.fixture
def default_dtype() -> Iterator[None]:
    """Restore the default dtype whatever the test does."""
    try:
        yield
    finally:
        cp.set_default_dtype(cp.float32)


# ---------------------------------------------------------------- constants


def test_constants_equal_pythons() -> None:
    assert cp.inf == math.inf and cp.pi == math.pi and cp.e == math.e
    assert math.isnan(cp.nan)
    assert cp.newaxis is None
    assert cp.zeros(3)[cp.newaxis].shape == (1, 3)


# ---------------------------------------------------------------- finfo / iinfo


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_equals_torch(name: str) -> None:
    exp = _load("dtype_info")[f"finfo.{name}"].tolist()
    f = cp.finfo(getattr(cp, name))
    assert [f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution] == exp
    assert f.dtype == name
    assert repr(f) == _meta("dtype_info")[f"repr.{name}"]


@pytest.mark.parametrize("name", ["uint8", "int16", "int32", "int64", "uint32"])
def test_iinfo_equals_torch(name: str) -> None:
    exp = _load("dtype_info")[f"iinfo.{name}"].tolist()
    i = cp.iinfo(getattr(cp, name))
    assert [i.bits, i.max, i.min] == exp and i.dtype == name
    assert repr(i) == _meta("dtype_info")[f"repr.{name}"]


def test_finfo_default_and_errors(default_dtype: None) -> None:
    assert cp.finfo().dtype == "float32" and cp.finfo() == cp.finfo(cp.float32)
    cp.set_default_dtype(cp.float64)
    assert cp.finfo().dtype == "float64"
    with pytest.raises(TypeError, match="floating point"):
        cp.finfo(cp.int32)
    with pytest.raises(TypeError, match="integer"):
        cp.iinfo(cp.float32)
    with pytest.raises(TypeError, match="bool"):
        cp.iinfo(cp.bool)
    with pytest.raises(TypeError, match="dtype"):
        cp.finfo("float32")  # type: ignore[arg-type]


# ---------------------------------------------------------------- Size


def test_shape_and_size_are_Size() -> None:
    x = cp.zeros(2, 3, 4)
    for s in (x.shape, x.size()):
        assert type(s) is cp.Size and isinstance(s, tuple)
        assert s == (2, 3, 4) and s.numel() == 24
    assert x.size(1) == 3 and type(x.size(1)) is int
    assert repr(x.shape) == "candle_py.Size([2, 3, 4])" == str(x.shape)
    assert cp.zeros(()).shape == cp.Size([]) and cp.zeros(()).shape.numel() == 1


def test_Size_keeps_its_type_like_torch() -> None:
    s = cp.Size([2, 3])
    assert type(s[0:1]) is cp.Size and s[-1] == 3 and type(s[0]) is int
    assert type(s + (4,)) is cp.Size and s + (4,) == (2, 3, 4)
    assert type((4,) + s) is cp.Size and (4,) + s == (4, 2, 3)
    assert type(s * 2) is cp.Size and type(2 * s) is cp.Size and s * 2 == (2, 3, 2, 3)
    assert hash(s) == hash((2, 3))
    for clone in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert type(clone) is cp.Size and clone == s
    assert cp.Size(cp.tensor([2, 3])) == (2, 3) and cp.Size((np.int64(5),)) == (5,)
    with pytest.raises(TypeError, match=r"item 0 is 'float'"):
        cp.Size([1.5])
    with pytest.raises(TypeError):
        cp.Size(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        s + [1]  # type: ignore[operator]


def test_Size_feeds_creation_and_reshape() -> None:
    x = cp.ones(2, 6)
    assert cp.zeros(x.shape).shape == (2, 6)
    assert x.reshape(x.shape[::-1]).shape == (6, 2)
    assert x.view(cp.Size([3, 4])).shape == (3, 4)


# ---------------------------------------------------------------- legacy tensor types


def test_legacy_constructors_give_their_dtype() -> None:
    pairs = [
        (cp.FloatTensor, cp.float32), (cp.DoubleTensor, cp.float64), (cp.HalfTensor, cp.float16),
        (cp.BFloat16Tensor, cp.bfloat16), (cp.LongTensor, cp.int64), (cp.IntTensor, cp.int32),
        (cp.ShortTensor, cp.int16), (cp.ByteTensor, cp.uint8), (cp.BoolTensor, cp.bool),
    ]  # fmt: skip
    for cls, dt in pairs:
        assert cls.dtype == dt
        from_data = cls([1, 0, 2])
        assert from_data.dtype == dt and from_data.shape == (3,)
        sized = cls(2, 3)
        assert sized.dtype == dt and sized.shape == (2, 3)
        assert cls().shape == (0,) and cls().dtype == dt
        assert isinstance(sized, cls) and isinstance(sized, cp.Tensor)
    assert cp.FloatTensor([1, 2]).tolist() == [1.0, 2.0]
    assert cp.LongTensor([1.7, -2.5]).tolist() == [1, -2]  # truncation, as torch
    assert cp.FloatTensor((2, 3)).tolist() == [2.0, 3.0]  # a tuple is data, as torch
    assert cp.FloatTensor(cp.Size([2, 5])).shape == (2, 5)  # a Size is a size
    assert cp.FloatTensor(np.array([0.5])).tolist() == [0.5]


def test_legacy_isinstance_as_torch() -> None:
    x = cp.zeros(2)
    assert isinstance(x, cp.FloatTensor)
    assert not isinstance(x, cp.DoubleTensor) and not isinstance(x.double(), cp.FloatTensor)
    assert isinstance(cp.zeros(2, dtype=cp.bool), cp.BoolTensor)
    assert not isinstance(cp.zeros(2, dtype=cp.uint8), cp.BoolTensor)
    assert not isinstance(1.0, cp.FloatTensor)
    assert not issubclass(cp.FloatTensor, cp.Tensor)


def test_legacy_constructor_errors() -> None:
    x = cp.zeros(2)
    assert cp.FloatTensor(x) is x  # the same data for a tensor of the right type
    with pytest.raises(TypeError, match="float32"):
        cp.FloatTensor(cp.zeros(2, dtype=cp.int64))
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        cp.FloatTensor(-1)
    with pytest.raises(TypeError, match="str"):
        cp.FloatTensor("a")
    with pytest.raises(TypeError, match="int8"):
        cp.CharTensor([1])
    assert not isinstance(cp.zeros(1), cp.CharTensor)


# ---------------------------------------------------------------- predicates, default dtype


def test_is_tensor_is_floating_point_numel() -> None:
    assert cp.is_tensor(cp.zeros(1)) and not cp.is_tensor([1])
    assert cp.is_floating_point(cp.zeros(1)) and not cp.is_floating_point(cp.zeros(1, dtype=cp.int64))
    assert cp.is_floating_point(cp.zeros(1, dtype=cp.bfloat16))
    with pytest.raises(TypeError, match=r"is_floating_point\(\): argument 'input'.*list"):
        cp.is_floating_point([1])  # type: ignore[arg-type]
    assert cp.numel(cp.zeros(2, 3)) == 6


def test_set_default_dtype_changes_float_defaults(default_dtype: None) -> None:
    assert cp.get_default_dtype() == cp.float32
    cp.set_default_dtype(cp.float64)
    assert cp.get_default_dtype() == cp.float64
    made = {
        "tensor": cp.tensor([1.1]), "scalar": cp.tensor(1.1), "mixed": cp.tensor([1, 2.5]), "zeros": cp.zeros(2),
        "ones": cp.ones(2), "empty": cp.empty(2), "full": cp.full((2,), 1.5), "arange": cp.arange(3.0),
        "linspace": cp.linspace(0, 1, 3), "eye": cp.eye(2), "rand": cp.rand(2), "randn": cp.randn(2),
        "int_div": cp.arange(3) / 2, "int_times_float": cp.arange(3) * 1.5, "exp_int": cp.exp(cp.arange(3)),
        "linear": nn.Linear(2, 2).weight, "finfo": cp.zeros(1, dtype=getattr(cp, cp.finfo().dtype)),
    }  # fmt: skip
    for what, t in made.items():
        assert t.dtype == cp.float64, what
    # Python floats are exact in float64 (not rounded through float32).
    assert cp.tensor([1.1]).item() == 1.1 and cp.tensor(1.1).item() == 1.1
    # What the default does not touch, as torch: integers, explicit dtypes, NumPy arrays, .float().
    assert cp.arange(3).dtype == cp.int64 and cp.full((1,), 1).dtype == cp.int64
    assert cp.zeros(2, dtype=cp.float32).dtype == cp.float32
    assert cp.tensor(np.array([1.5], dtype=np.float32)).dtype == cp.float32
    assert cp.arange(3).float().dtype == cp.float32
    cp.set_default_dtype(cp.bfloat16)
    assert cp.zeros(1).dtype == cp.bfloat16 and cp.tensor([1.5]).dtype == cp.bfloat16
    cp.set_default_dtype(cp.float32)
    assert cp.tensor([1.1]).dtype == cp.float32 and cp.tensor([1.1]).item() != 1.1


def test_set_default_dtype_refuses_non_float(default_dtype: None) -> None:
    with pytest.raises(TypeError, match="only floating-point types"):
        cp.set_default_dtype(cp.int32)
    assert cp.get_default_dtype() == cp.float32


def test_default_dtype_in_repr(default_dtype: None) -> None:
    cp.set_default_dtype(cp.float64)
    assert repr(cp.zeros(2)) == "tensor([0., 0.])"
    assert repr(cp.zeros(2, dtype=cp.float32)) == "tensor([0., 0.], dtype=candle_py.float32)"


# ---------------------------------------------------------------- backends, accelerator, devices


def test_backends_flags_are_settable() -> None:
    b = cp.backends
    assert (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.allow_tf32) == (True, False, False, True)
    assert b.cudnn.is_available() is False and b.cudnn.version() is None
    b.cudnn.benchmark = True
    b.cudnn.deterministic = True
    try:
        assert b.cudnn.benchmark is True and b.cudnn.deterministic is True
        with pytest.raises(TypeError, match="benchmark must be a bool"):
            b.cudnn.benchmark = "yes"
    finally:
        b.cudnn.benchmark = False
        b.cudnn.deterministic = False
    assert b.cuda.is_built() == cp.cuda.is_built()
    assert b.mps.is_available() == cp.mps.is_available() and b.mps.is_built() == cp._core.metal_is_built()
    assert b.mkldnn.is_available() is False and b.mkldnn.enabled is True
    assert b.openmp.is_available() is False
    assert b.opt_einsum.is_available() is False and b.opt_einsum.enabled is False and b.opt_einsum.strategy is None


def test_backends_context_managers_restore() -> None:
    b = cp.backends
    with b.cudnn.flags(enabled=False, benchmark=True, deterministic=True, allow_tf32=False):
        assert (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.allow_tf32) == (False, True, True, False)
    assert (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.allow_tf32) == (True, False, False, True)
    c = b.cuda
    assert c.flash_sdp_enabled() and c.mem_efficient_sdp_enabled() and c.math_sdp_enabled() and c.cudnn_sdp_enabled()
    with c.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
        assert not c.flash_sdp_enabled() and not c.mem_efficient_sdp_enabled() and c.math_sdp_enabled()
        q = cp.randn(1, 2, 3, 4)
        assert F.scaled_dot_product_attention(q, q, q).shape == (1, 2, 3, 4)
    assert c.flash_sdp_enabled() and c.mem_efficient_sdp_enabled()
    try:
        c.enable_math_sdp(False)
        assert not c.math_sdp_enabled()
        with pytest.raises(TypeError, match="enabled"):
            c.enable_flash_sdp(1)  # type: ignore[arg-type]
    finally:
        c.enable_math_sdp(True)


def test_cuda_matmul_allow_tf32_follows_matmul_precision() -> None:
    m = cp.backends.cuda.matmul
    try:
        assert m.allow_tf32 is False and cp.get_float32_matmul_precision() == "highest"
        cp.set_float32_matmul_precision("high")
        assert m.allow_tf32 is True
        m.allow_tf32 = False
        assert cp.get_float32_matmul_precision() == "highest"
        assert m.allow_fp16_reduced_precision_reduction is True
        m.allow_bf16_reduced_precision_reduction = False
        assert m.allow_bf16_reduced_precision_reduction is False
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            m.foo = 1
    finally:
        m.allow_bf16_reduced_precision_reduction = True
        cp.set_float32_matmul_precision("highest")


def test_matmul_precision_and_determinism_switches() -> None:
    try:
        for p in ("medium", "high", "highest"):
            cp.set_float32_matmul_precision(p)
            assert cp.get_float32_matmul_precision() == p
        with pytest.warns(UserWarning, match="no effect"):
            cp.set_float32_matmul_precision("low")
        assert cp.get_float32_matmul_precision() == "highest"
        assert not cp.are_deterministic_algorithms_enabled()
        cp.use_deterministic_algorithms(True, warn_only=True)
        assert cp.are_deterministic_algorithms_enabled() and cp.is_deterministic_algorithms_warn_only_enabled()
        with pytest.raises(TypeError, match="mode"):
            cp.use_deterministic_algorithms(1)  # type: ignore[arg-type]
    finally:
        cp.use_deterministic_algorithms(False)
        cp.set_float32_matmul_precision("highest")
    assert not cp.are_deterministic_algorithms_enabled() and not cp.is_deterministic_algorithms_warn_only_enabled()


def test_accelerator_reflects_the_build() -> None:
    acc = cp.accelerator
    if cp.cuda.is_built():
        assert acc.current_accelerator() == cp.device("cuda")
    elif cp._core.metal_is_built():
        assert acc.current_accelerator() == cp.device("metal")
    else:
        assert acc.current_accelerator() is None and acc.current_accelerator(check_available=True) is None
    assert acc.is_available() == (cp.cuda.is_available() or cp.metal.is_available())
    assert acc.device_count() == (cp.cuda.device_count() if cp.cuda.is_available() else int(cp.metal.is_available()))
    if not acc.is_available():
        with pytest.raises(RuntimeError, match="no accelerator"):
            acc.current_device_index()


@pytest.mark.skipif(cp.cuda.is_available(), reason="checks the answers of a machine without CUDA")
def test_cuda_without_a_gpu_answers_as_torch() -> None:
    c = cp.cuda
    assert c.is_available() is False and c.device_count() == 0 and c.is_initialized() is False
    assert c.memory_allocated() == 0 and c.max_memory_allocated() == 0 and c.memory_reserved() == 0
    assert c.empty_cache() is None and c.is_bf16_supported() is False
    exc = AssertionError if not c.is_built() else RuntimeError
    for call in (c.get_device_name, c.current_device, c.get_device_capability):
        with pytest.raises(exc, match=call.__name__):
            call()
    with pytest.raises(exc):
        c.set_device(0)
    assert cp.mps.is_available() == cp.metal.is_available() and cp.mps.device_count() in (0, 1)
    assert cp.mps.empty_cache() is None
    assert cp.cpu.is_available() and cp.cpu.device_count() == 1 and cp.cpu.current_device() == "cpu"


# ---------------------------------------------------------------- compile, jit


def test_compile_returns_the_callable() -> None:
    m = nn.Linear(2, 2)
    assert cp.compile(m) is m
    assert cp.compile(m, mode="max-autotune", fullgraph=True, dynamic=False, backend="inductor") is m

    def f(x: cp.Tensor) -> cp.Tensor:
        return x * 2

    assert cp.compile(f) is f
    bare = cp.compile(f)
    deco = cp.compile(mode="reduce-overhead")(f)
    assert bare is f and deco is f

    @cp.compile
    def g(x: cp.Tensor) -> cp.Tensor:
        return x + 1

    @cp.compile(disable=True)
    def h(x: cp.Tensor) -> cp.Tensor:
        return x - 1

    assert g(cp.ones(1)).tolist() == [2.0] and h(cp.ones(1)).tolist() == [0.0]
    with pytest.raises(RuntimeError, match="mode or options"):
        cp.compile(f, mode="default", options={"x": 1})
    with pytest.raises(RuntimeError, match="callable"):
        cp.compile(3)  # type: ignore[call-overload]


def test_jit_basics() -> None:
    m = nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="TorchScript"):
        cp.jit.script(m)
    with pytest.raises(NotImplementedError, match="tracing"):
        cp.jit.trace(m, cp.ones(1, 2))

    def f(x: int) -> int:
        return x + 1

    assert cp.jit.ignore(f) is f and cp.jit.ignore(drop=True)(f) is f
    assert cp.jit.unused(f) is f and cp.jit.export(f) is f
    assert cp.jit.is_scripting() is False and cp.jit.is_tracing() is False


# ---------------------------------------------------------------- print options


@pytest.mark.parametrize(
    "case", ["default", "precision2", "sci_on", "sci_off", "threshold", "linewidth", "short", "full", "int_sci", "zeros_sci"]
)
def test_set_printoptions_matches_torch(case: str) -> None:
    meta = _meta("printoptions")
    opts = json.loads(meta[f"{case}.opts"])
    # The fixture expressions use torch's creation functions; ours have the same names.
    expr = meta[f"{case}.expr"].replace("torch.", "cp.")
    try:
        cp.set_printoptions(profile="default")
        cp.set_printoptions(**opts)
        got = repr(eval(expr, {"cp": cp}))
    finally:
        cp.set_printoptions(profile="default")
    assert got == meta[f"{case}.repr"]


def test_printoptions_context_and_get() -> None:
    before = cp.get_printoptions()
    with cp.printoptions(precision=1, sci_mode=False):
        assert repr(cp.tensor([1.26])) == "tensor([1.3])"
        assert cp.get_printoptions()["precision"] == 1
    assert cp.get_printoptions() == before
    with pytest.raises(ValueError, match="profile"):
        cp.set_printoptions(profile="long")


# ---------------------------------------------------------------- autocast


def _close(got: cp.Tensor, exp: cp.Tensor, what: str, low: bool) -> None:
    assert got.dtype == exp.dtype, f"{what}: dtype {got.dtype} != {exp.dtype}"
    tol = 2e-2 if low else 1e-4
    np.testing.assert_allclose(_np(got), _np(exp), rtol=tol, atol=tol, err_msg=what)


@pytest.mark.parametrize("tag", ["bf16", "f16"])
def test_autocast_cpu_matches_torch(tag: str) -> None:
    t = _load("autocast")
    dt = cp.bfloat16 if tag == "bf16" else cp.float16
    x, w, b = (t[k].clone().requires_grad_() for k in ("x", "w", "b"))
    with cp.autocast("cpu", dtype=dt):
        assert cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == dt
        assert not cp.is_autocast_enabled()  # no argument asks about CUDA, as torch
        y = F.linear(x, w, b)
        got = {
            "linear": y,
            "matmul": t["x"] @ t["w"].t(),
            "bmm": cp.bmm(t["a"], t["m"]),
            "conv2d": F.conv2d(t["img"], t["k"], t["kb"], padding=1),
            "conv1d": F.conv1d(t["seq"], t["k1"]),
            "conv_transpose2d": F.conv_transpose2d(t["img"], t["kt"], stride=2),
            "prelu": F.prelu(t["img"], t["pw"]),
            "sdpa": F.scaled_dot_product_attention(t["q"], t["kk"], t["v"], is_causal=True),
            "cross_entropy": F.cross_entropy(y, t["tgt"]),
            "mse_loss": F.mse_loss(y, t["reg"]),
            "dot": cp.dot(t["x"][0], t["w"][0]),
            "add": y + t["reg"],
        }
    (got["cross_entropy"] + got["mse_loss"]).backward()
    for name, v in got.items():
        exp = t[f"{tag}.{name}"]
        _close(v, exp, f"{tag} {name}", exp.dtype != cp.float32 or name in ("cross_entropy", "mse_loss", "add"))
    for name, leaf in (("x", x), ("w", w), ("b", b)):
        assert leaf.grad is not None and leaf.grad.dtype == cp.float32
        _close(leaf.grad, t[f"{tag}.grad.{name}"], f"{tag} grad {name}", True)
    assert not cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == cp.bfloat16


def test_autocast_cnn_and_float32_ops_match_torch() -> None:
    t = _load("autocast")
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 5))
    cnn.load_state_dict({k[len("cnn.state.") :]: v for k, v in t.items() if k.startswith("cnn.state.")})
    with cp.autocast("cpu", dtype=cp.bfloat16):
        logits = cnn(t["img"])
        loss = F.cross_entropy(logits, t["tgt"][:2])
        h = t["img"].to(cp.bfloat16)
        got = {
            "fp32.avg_pool3d": F.avg_pool3d(h.unsqueeze(0), 2),
            "fp32.max_pool3d": F.max_pool3d(h.unsqueeze(0), 2),
            "fp32.adaptive_avg_pool3d": F.adaptive_avg_pool3d(h.unsqueeze(0), 2),
            "fp32.pad_reflect": F.pad(h, (1, 1, 1, 1), mode="reflect"),
            "fp32.prod": h[0, 0].prod(-1),
            "keep.avg_pool2d": F.avg_pool2d(h, 2),
        }
    loss.backward()
    _close(logits, t["cnn.logits"], "cnn logits", True)
    _close(loss, t["cnn.loss"], "cnn loss", True)
    for k, p in cnn.named_parameters():
        assert p.grad is not None
        _close(p.grad, t[f"cnn.grad.{k}"], f"cnn grad {k}", True)
    for name, v in got.items():
        _close(v, t[name], name, True)


def test_autocast_modules_and_exceptions() -> None:
    lin = nn.Linear(4, 3)
    conv = nn.Conv2d(2, 3, 3)
    gru = nn.GRU(4, 3)
    bil = nn.Bilinear(4, 4, 2)
    x = cp.randn(2, 4)
    with cp.autocast("cpu"):
        assert lin(x).dtype == cp.bfloat16
        assert conv(cp.randn(1, 2, 5, 5)).dtype == cp.bfloat16
        assert gru(cp.randn(3, 1, 4))[0].dtype == cp.float32  # not autocast in torch
        assert bil(x, x).dtype == cp.float32  # not autocast in torch
        assert (x.double() @ x.double().t()).dtype == cp.float64  # float64 is not eligible
        assert (cp.arange(4).reshape(2, 2) @ cp.arange(4).reshape(2, 2)).dtype == cp.int64
        assert cp.exp(x).dtype == cp.float32  # other ops keep their inputs' dtype
        with cp.autocast("cpu", enabled=False):
            assert lin(x).dtype == cp.float32 and cp.get_autocast_dtype("cpu") == cp.bfloat16
        assert cp.is_autocast_enabled("cpu")
    assert lin(x).dtype == cp.float32


def test_autocast_nesting_decorator_and_errors() -> None:
    with cp.autocast("cpu", dtype=cp.float16):
        with cp.autocast("cpu", enabled=False):
            assert not cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == cp.float16
        assert cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == cp.float16
    assert cp.get_autocast_dtype("cpu") == cp.bfloat16

    @cp.autocast("cpu")
    def f(a: cp.Tensor) -> cp.Tensor:
        return a @ a

    assert f(cp.ones(2, 2)).dtype == cp.bfloat16 and not cp.is_autocast_enabled("cpu")
    with pytest.warns(UserWarning, match="not supported. Disabling"):
        with cp.autocast("cpu", dtype=cp.float64):
            assert not cp.is_autocast_enabled("cpu")
    with cp.autocast("cpu", dtype=cp.float32):
        assert not cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == cp.float32
    with pytest.raises(ValueError, match="device_type"):
        cp.autocast(1)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="xpu2"):
        cp.autocast("xpu2")
    assert cp.is_autocast_available("cpu") and not cp.is_autocast_available("xpu2")
    if not cp.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with cp.autocast("cuda"):
                assert not cp.is_autocast_enabled("cuda")
    # An exception inside the block restores the state.
    with pytest.raises(KeyError):
        with cp.autocast("cpu"):
            raise KeyError("x")
    assert not cp.is_autocast_enabled("cpu")


def test_autocast_deprecated_spellings() -> None:
    assert cp.amp.autocast is cp.autocast
    with pytest.warns(FutureWarning, match="cpu.amp.autocast"):
        ctx = cp.cpu.amp.autocast()
    with ctx:
        assert cp.is_autocast_enabled("cpu") and cp.get_autocast_dtype("cpu") == cp.bfloat16
    if not cp.cuda.is_available():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with cp.cuda.amp.autocast():
                assert not cp.is_autocast_enabled("cuda")


def test_autocast_is_per_thread() -> None:
    import threading

    seen = []
    with cp.autocast("cpu"):
        th = threading.Thread(target=lambda: seen.append(cp.is_autocast_enabled("cpu")))
        th.start()
        th.join()
    assert seen == [False]


# ---------------------------------------------------------------- GradScaler


def test_grad_scaler_cpu_matches_torch() -> None:
    t = _load("grad_scaler")
    m = nn.Linear(2, 1)
    with cp.no_grad():
        m.weight.copy_(t["w0"])
        m.bias.copy_(t["b0"])
    opt = cp.optim.SGD(m.parameters(), lr=0.1)
    s = cp.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    assert s.is_enabled()
    scales, scaled, stepped = [], [], []
    for it in range(5):
        opt.zero_grad()
        loss = m(t["x"]).pow(2).mean()
        sl = s.scale(loss)
        scaled.append(sl.item())
        sl.backward()
        if it == 1:
            with cp.no_grad():
                m.weight.grad[0, 0] = float("inf")
        before = m.weight.detach().clone()
        s.step(opt)
        stepped.append(float(not cp.equal(before, m.weight.detach())))
        s.update()
        scales.append(s.get_scale())
    assert scales == t["scales"].tolist() and stepped == t["stepped"].tolist()
    np.testing.assert_allclose(scaled, t["scaled_losses"].tolist(), rtol=1e-6)
    np.testing.assert_allclose(_np(m.weight), _np(t["w_final"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(m.bias), _np(t["b_final"]), rtol=1e-5, atol=1e-6)
    assert s.state_dict() == json.loads(_meta("grad_scaler")["state_dict"])
    s2 = cp.amp.GradScaler("cpu")
    s2.load_state_dict(s.state_dict())
    assert s2.state_dict() == s.state_dict()


def test_grad_scaler_rules_and_disabled_forms() -> None:
    m = nn.Linear(2, 1)
    opt = cp.optim.SGD(m.parameters(), lr=0.1)
    s = cp.amp.GradScaler("cpu")
    loss = m(cp.ones(1, 2)).sum()
    out = s.scale([loss, (loss,)])
    assert isinstance(out, list) and isinstance(out[1], tuple) and out[0].item() == pytest.approx(loss.item() * 65536.0)
    s.scale(loss).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        cp.amp.GradScaler("cpu").step(opt, closure=lambda: None)
    s.update(new_scale=8.0)
    assert s.get_scale() == 8.0
    with pytest.raises(ValueError, match="growth factor"):
        cp.amp.GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(RuntimeError, match="empty"):
        cp.amp.GradScaler("cpu").load_state_dict({})
    # Disabled: enabled=False, or the default device "cuda" without CUDA (warns, as torch).
    forms = [cp.amp.GradScaler("cpu", enabled=False)]
    if not cp.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            forms.append(cp.amp.GradScaler())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            forms.append(cp.cuda.amp.GradScaler())
        assert {w.category for w in caught} == {FutureWarning, UserWarning}
    for d in forms:
        assert not d.is_enabled() and d.get_scale() == 1.0 and d.state_dict() == {}
        l2 = m(cp.ones(1, 2)).sum()
        assert d.scale(l2) is l2
        w = m.weight.detach().clone()
        opt.zero_grad()
        l2.backward()
        assert d.step(opt) is None and not cp.equal(w, m.weight.detach())
        d.update()
        d.unscale_(opt)
        d.load_state_dict({})


# ---------------------------------------------------------------- import paths


@pytest.mark.parametrize(
    "path,name",
    [
        ("linear", "Linear"), ("linear", "Identity"), ("conv", "Conv2d"), ("activation", "ReLU"),
        ("activation", "MultiheadAttention"), ("module", "Module"), ("loss", "CrossEntropyLoss"),
        ("batchnorm", "BatchNorm2d"), ("normalization", "LayerNorm"), ("container", "Sequential"),
        ("dropout", "Dropout"), ("sparse", "Embedding"), ("pooling", "MaxPool2d"), ("rnn", "LSTM"),
        ("upsampling", "Upsample"), ("flatten", "Flatten"),
    ],
)  # fmt: skip
def test_nn_modules_paths_resolve_to_nn_classes(path: str, name: str) -> None:
    mod = importlib.import_module(f"candle_py.nn.modules.{path}")
    assert getattr(mod, name) is getattr(nn, name)
    assert name in mod.__all__ and name in dir(mod)
    assert getattr(nn.modules, name) is getattr(nn, name)


def test_nn_modules_paths_are_lazy_and_honest(monkeypatch: pytest.MonkeyPatch) -> None:
    from candle_py.nn.modules import transformer

    assert all(hasattr(nn, n) for n in transformer.__all__)
    if not hasattr(nn, "TransformerEncoderLayer"):
        with pytest.raises(AttributeError, match="does not provide it yet"):
            transformer.TransformerEncoderLayer  # noqa: B018
        # A class added to candle_py.nn later appears under the path.
        sentinel = type("TransformerEncoderLayer", (nn.Module,), {})
        monkeypatch.setattr(nn, "TransformerEncoderLayer", sentinel, raising=False)
        assert transformer.TransformerEncoderLayer is sentinel and "TransformerEncoderLayer" in transformer.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        nn.modules.linear.Nope  # noqa: B018
    ns: Dict[str, Any] = {}
    exec("from candle_py.nn.modules.linear import *", ns)
    assert ns["Linear"] is nn.Linear


def test_onnx_distributed_multiprocessing() -> None:
    with pytest.raises(NotImplementedError, match="ONNX export is not supported"):
        cp.onnx.export(nn.Linear(1, 1), (cp.ones(1, 1),), "m.onnx")
    assert cp.onnx.is_in_onnx_export() is False
    dist = cp.distributed
    assert dist.is_available() is False and dist.is_initialized() is False
    for fn in (dist.init_process_group, dist.get_rank, dist.get_world_size, dist.all_reduce, dist.barrier):
        with pytest.raises(RuntimeError, match="no distributed backend"):
            fn()
    import multiprocessing

    mp = cp.multiprocessing
    assert mp.Process is multiprocessing.Process and mp.Queue is multiprocessing.Queue
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    before = mp.get_sharing_strategy()
    try:
        mp.set_sharing_strategy("file_system")
        assert mp.get_sharing_strategy() == "file_system"
        with pytest.raises(AssertionError, match="invalid sharing strategy"):
            mp.set_sharing_strategy("bad")
    finally:
        mp.set_sharing_strategy(before)


def test_data_parallel_on_cpu_wraps_and_forwards() -> None:
    inner = nn.Linear(2, 3)
    for dp in (nn.DataParallel(inner), nn.parallel.DataParallel(inner, device_ids=[0])):
        assert dp.module is inner and (dp.device_ids == [] or cp.cuda.is_available())
        x = cp.randn(4, 2)
        assert cp.equal(dp(x), inner(x))
        assert list(dp.state_dict()) == ["module.weight", "module.bias"]
        assert repr(dp) == "DataParallel(\n  (module): Linear(in_features=2, out_features=3, bias=True)\n)"
    other = nn.DataParallel(nn.Linear(2, 3))
    other.load_state_dict(nn.DataParallel(inner).state_dict())
    assert cp.equal(other.module.weight, inner.weight)
    with pytest.raises(RuntimeError, match="no distributed backend"):
        nn.parallel.DistributedDataParallel(inner)


def test_checkpoint_gives_the_same_values_and_gradients() -> None:
    from candle_py.utils.checkpoint import checkpoint, checkpoint_sequential

    lin = nn.Linear(3, 3)
    x = cp.randn(2, 3, requires_grad=True)

    def block(a: cp.Tensor, scale: float = 1.0) -> cp.Tensor:
        return lin(a).tanh() * scale

    plain = block(x, 2.0)
    plain.sum().backward()
    gx, gw = x.grad.clone(), lin.weight.grad.clone()
    x.grad = None
    lin.weight.grad = None
    out = checkpoint(block, x, 2.0, use_reentrant=False)
    assert cp.equal(out, plain)
    out.sum().backward()
    assert cp.equal(x.grad, gx) and cp.equal(lin.weight.grad, gw)
    assert cp.equal(checkpoint(block, x, use_reentrant=False, scale=2.0), plain)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(block, x, use_reentrant=True, scale=2.0)
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert cp.equal(checkpoint_sequential(seq, 2, x, use_reentrant=False), seq(x))
    assert cp.utils.checkpoint.checkpoint is checkpoint


def test_Size_in_checkpoints_is_torch_Size(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "s.pt"
    cp.save({"shape": cp.zeros(2, 3).shape}, path)
    with zipfile.ZipFile(path) as z:
        pkl = next(z.read(n) for n in z.namelist() if n.endswith("data.pkl"))
    assert b"torch\nSize\n" in pkl and b"candle_py" not in pkl  # torch's loader accepts torch.Size
    back = cp.load(path)["shape"]
    assert type(back) is cp.Size and back == (2, 3)


def test_amp_custom_fwd_bwd() -> None:
    seen = []

    def make(cast: Any) -> Any:
        class MM(cp.autograd.Function):
            @staticmethod
            @cp.amp.custom_fwd(device_type="cpu", cast_inputs=cast)
            def forward(ctx: Any, a: cp.Tensor, b: cp.Tensor) -> cp.Tensor:
                ctx.save_for_backward(a, b)
                return a @ b

            @staticmethod
            @cp.amp.custom_bwd(device_type="cpu")
            def backward(ctx: Any, g: cp.Tensor) -> Any:
                a, b = ctx.saved_tensors
                seen.append(cp.is_autocast_enabled("cpu"))
                return (g @ b.t()).to(a.dtype), (a.t() @ g).to(b.dtype)

        return MM

    a = cp.randn(2, 3, requires_grad=True)
    b = cp.randn(3, 2, requires_grad=True)
    with cp.autocast("cpu"):
        casted = make(cp.float32).apply(a.to(cp.bfloat16), b)  # inputs cast to float32, autocast off inside
        plain = make(None).apply(a, b)  # autocast stays on inside
    assert casted.dtype == cp.float32 and plain.dtype == cp.bfloat16
    (casted.sum() + plain.float().sum()).backward()
    assert sorted(seen) == [False, True]  # each backward ran under its forward's autocast state
    assert a.grad is not None and a.grad.dtype == cp.float32
    outside = make(cp.float32).apply(a.to(cp.bfloat16), b.to(cp.bfloat16))
    assert outside.dtype == cp.bfloat16  # outside autocast, cast_inputs does nothing
    with pytest.raises(ValueError, match="device_type"):
        cp.amp.custom_fwd(device_type=1)  # type: ignore[arg-type]
