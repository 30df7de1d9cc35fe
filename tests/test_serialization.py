"""`cp.save` / `cp.load` in PyTorch's zip format: files written by torch
(tests/fixtures/serialization, made by tools/make_fixtures_serialization.py) load
with the values torch saved; files written here have torch's layout and round-trip;
hostile files (tests/fixtures/hostile_torch, tools/make_hostile_torch.py) are refused
with a clear error and run no code."""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import candle_py as cp
from candle_py import serialization as S

FIX = Path(__file__).parent / "fixtures" / "serialization"
HOSTILE = Path(__file__).parent / "fixtures" / "hostile_torch"


def as_np(t: Any) -> np.ndarray:
    if t.dtype == cp.bfloat16:
        return t.float().numpy()
    return t.detach().numpy()


def same(a: Any, b: Any) -> None:
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(as_np(a), as_np(b))


# -- files written by torch ------------------------------------------------------------


def test_torch_mixed_checkpoint_values_dtypes_and_containers() -> None:
    got = cp.load(FIX / "mixed.pt")
    exp = cp.load_file(FIX / "mixed_expected.safetensors")
    keys = "f32 f64 f16 bf16 i64 i32 i16 u8 bool u32 scalar empty nonfinite base slice t row param frozen".split()
    for key in keys:
        same(got[key], exp[key])
    same(got["nested"]["list"][0], exp["nested/list/0"])
    same(got["nested"]["tuple"][0], exp["nested/tuple/0"])
    assert got["nested"]["list"][1:] == [1, 2.5, "s", None]
    assert got["nested"]["tuple"][1] == b"raw"
    assert got["size"] == (2, 3)
    assert got["dtype"] == cp.float16
    assert str(got["device"]) == "cpu"
    assert got["inf"] == float("inf")
    assert type(got["param"]) is cp.nn.Parameter and got["param"].requires_grad
    assert type(got["frozen"]) is cp.nn.Parameter and not got["frozen"].requires_grad
    assert not got["f32"].requires_grad
    # views of one base in torch's file: independent tensors here, equal values
    np.testing.assert_array_equal(got["slice"].numpy(), got["base"].numpy()[1:, ::2])
    np.testing.assert_array_equal(got["t"].numpy(), got["base"].numpy().T)


def test_torch_state_dict_loads_into_our_model_and_matches_torch_output() -> None:
    nn = cp.nn
    m = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3), nn.LayerNorm(3))
    result = m.load_state_dict(cp.load(FIX / "model.pt"))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    io_ = cp.load_file(FIX / "model_io.safetensors")
    m.eval()
    with cp.no_grad():
        y = m(io_["x"])
    np.testing.assert_allclose(y.numpy(), io_["y"].numpy(), rtol=1e-5, atol=1e-5)
    assert int(m[1].num_batches_tracked.item()) == 1


def test_torch_state_dict_saved_to_a_buffer_and_read_from_file_objects() -> None:
    a = cp.load(FIX / "model.pt")
    with open(FIX / "buffer.pt", "rb") as fh:
        b = cp.load(fh)
    b2 = cp.load(io.BytesIO((FIX / "buffer.pt").read_bytes()))
    assert list(a) == list(b) == list(b2)
    for k in a:
        same(a[k], b[k])
        same(a[k], b2[k])


def test_torch_optimizer_state_loads_into_our_adam() -> None:
    sd = cp.load(FIX / "optimizer.pt")
    exp = cp.load_file(FIX / "optimizer_expected.safetensors")
    for name, t in exp.items():
        i, key = name.split("/")
        same(sd["state"][int(i)][key], t)
    assert sd["param_groups"][0]["betas"] == (0.9, 0.999) and sd["param_groups"][0]["params"] == [0, 1]
    lin = cp.nn.Linear(3, 2)
    opt = cp.optim.Adam(lin.parameters(), lr=0.5)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.1
    same(opt.state_dict()["state"][0]["exp_avg"], exp["0/exp_avg"])


@pytest.mark.parametrize(
    "name,msg",
    [
        ("legacy.pt", "legacy (pre-1.6, non-zip) format"),
        ("script.pt", "TorchScript archive"),
        ("int8.pt", "torch.int8"),
    ],
)
def test_torch_files_we_refuse_say_why(name: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        cp.load(FIX / name)


def test_torch_complex_tensors_load_as_complex() -> None:
    got = cp.load(FIX / "complex.pt")
    exp = cp.load_file(str(FIX / "complex_expected.safetensors"))
    for k, v in exp.items():
        assert isinstance(got[k], cp.ComplexTensor), k
        assert got[k].dtype == (cp.complex128 if k == "c128" else cp.complex64), k
        same(cp.view_as_real(got[k]), v)
    assert got["scalar"].shape == () and got["empty"].shape == (0, 3)
    assert got["leaf"].requires_grad and got["leaf"].is_leaf and not got["c64"].requires_grad
    assert got["dtypes"] == [cp.complex64, cp.complex128]


def test_complex_round_trip_keeps_torch_storage_names(tmp_path: Path) -> None:
    z = cp.view_as_complex(cp.arange(12.0).reshape(2, 3, 2))
    obj = {"z": z, "zt": z.t(), "z128": z.cdouble(), "dt": cp.complex64, "leaf": z.detach().requires_grad_()}
    cp.save(obj, tmp_path / "c.pt")
    pkl = zipfile.ZipFile(tmp_path / "c.pt").read("c/data.pkl")
    globals_used = {a for op, a, _ in __import__("pickletools").genops(pkl) if op.name == "GLOBAL"}
    assert {"torch ComplexFloatStorage", "torch ComplexDoubleStorage", "torch complex64"} <= globals_used
    assert not any("candle_py" in g for g in globals_used)
    got = cp.load(tmp_path / "c.pt")
    for k in ("z", "zt", "z128", "leaf"):
        assert got[k].dtype == obj[k].dtype and tuple(got[k].shape) == tuple(obj[k].shape)
        np.testing.assert_array_equal(got[k].numpy(force=True), obj[k].numpy(force=True))
    assert got["dt"] is cp.complex64 and got["leaf"].requires_grad


# -- files written here -------------------------------------------------------------------


def sample() -> dict:
    base = cp.arange(24.0).reshape(4, 6)
    p = cp.nn.Parameter(cp.randn(2, 3))
    return {
        "f32": cp.randn(3, 4),
        "f64": cp.tensor([1.5, -2.0], dtype=cp.float64),
        "f16": cp.tensor([0.5, 65504.0], dtype=cp.float16),
        "bf16": cp.tensor([1.5, -3.0], dtype=cp.bfloat16),
        "i64": cp.tensor([-(2**40), 3]),
        "i32": cp.tensor([7, -7], dtype=cp.int32),
        "i16": cp.tensor([-300, 300], dtype=cp.int16),
        "u8": cp.tensor([0, 255], dtype=cp.uint8),
        "u32": cp.tensor([1, 4_000_000_000], dtype=cp.uint32),
        "bool": cp.tensor([True, False]),
        "scalar": cp.tensor(3.25),
        "empty": cp.zeros(0, 5),
        "nonfinite": cp.tensor([float("nan"), float("inf"), -float("inf")]),
        "view": base[1:, ::2],
        "t": base.t(),
        "param": p,
        "leaf": cp.ones(2, requires_grad=True),
        "nested": [{"a": (1, 2.5, None, "s", b"b")}, [cp.ones(1)]],
        "dtype": cp.bfloat16,
        "device": cp.device("cpu"),
    }


def test_round_trip_path_buffer_and_mmap(tmp_path: Path) -> None:
    obj = sample()
    path = tmp_path / "ckpt.pt"
    cp.save(obj, path)
    buf = io.BytesIO()
    cp.save(obj, buf)
    buf.seek(0)
    for got in (cp.load(path), cp.load(buf), cp.load(path, mmap=True), cp.load(str(path), map_location="cpu")):
        assert list(got) == list(obj)
        for k, v in obj.items():
            if isinstance(v, cp.Tensor):
                same(got[k], v)
        assert type(got["param"]) is cp.nn.Parameter and got["param"].requires_grad
        assert got["leaf"].requires_grad and got["leaf"].is_leaf
        assert not got["f32"].requires_grad
        assert got["nested"][0] == {"a": (1, 2.5, None, "s", b"b")}
        same(got["nested"][1][0], cp.ones(1))
        assert got["dtype"] == cp.bfloat16 and str(got["device"]) == "cpu"


def test_the_same_tensor_twice_is_stored_once_and_loads_as_one() -> None:
    t = cp.randn(3)
    buf = io.BytesIO()
    cp.save({"a": t, "b": t, "c": t.clone()}, buf)
    names = zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()
    assert sorted(n for n in names if "/data/" in n) == ["archive/data/0", "archive/data/1"]
    buf.seek(0)
    got = cp.load(buf)
    assert got["a"] is got["b"] and got["c"] is not got["a"]


def test_archive_layout_matches_torch(tmp_path: Path) -> None:
    """Same record names as torch's file, data records aligned to 64 bytes (torch's
    mmap loading needs it), and only globals torch's weights_only loader allows."""
    cp.save(cp.load(FIX / "model.pt"), tmp_path / "model.pt")
    ours = zipfile.ZipFile(tmp_path / "model.pt")
    theirs = zipfile.ZipFile(FIX / "model.pt")
    assert sorted(ours.namelist()) == sorted(theirs.namelist())
    raw = (tmp_path / "model.pt").read_bytes()
    for info in ours.infolist():
        h = info.header_offset
        name_len, extra_len = int.from_bytes(raw[h + 26 : h + 28], "little"), int.from_bytes(raw[h + 28 : h + 30], "little")
        assert (h + 30 + name_len + extra_len) % 64 == 0, info.filename
    assert ours.read("model/version") == b"3\n" and ours.read("model/byteorder") == b"little"
    globals_used = {a for op, a, _ in __import__("pickletools").genops(ours.read("model/data.pkl")) if op.name == "GLOBAL"}
    assert globals_used <= {"collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch FloatStorage", "torch LongStorage"}


def test_saved_state_dict_loads_into_a_fresh_model(tmp_path: Path) -> None:
    cp.manual_seed(0)
    a = cp.nn.Sequential(cp.nn.Linear(4, 8), cp.nn.ReLU(), cp.nn.Linear(8, 2))
    b = cp.nn.Sequential(cp.nn.Linear(4, 8), cp.nn.ReLU(), cp.nn.Linear(8, 2))
    cp.save(a.state_dict(), tmp_path / "m.pth")
    b.load_state_dict(cp.load(tmp_path / "m.pth"))
    x = cp.randn(3, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())


def test_optimizer_state_round_trip(tmp_path: Path) -> None:
    lin = cp.nn.Linear(3, 2)
    opt = cp.optim.AdamW(lin.parameters(), lr=0.01)
    lin(cp.ones(4, 3)).sum().backward()
    opt.step()
    cp.save(opt.state_dict(), tmp_path / "opt.pt")
    sd = cp.load(tmp_path / "opt.pt")
    opt2 = cp.optim.AdamW(cp.nn.Linear(3, 2).parameters(), lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01
    same(opt2.state_dict()["state"][1]["exp_avg_sq"], opt.state_dict()["state"][1]["exp_avg_sq"])


def test_weights_only_false_loads_our_own_modules(tmp_path: Path) -> None:
    m = cp.nn.Linear(3, 2)
    cp.save(m, tmp_path / "module.pt")
    with pytest.raises(ValueError, match="refuses the global candle_py.nn"):
        cp.load(tmp_path / "module.pt")
    got = cp.load(tmp_path / "module.pt", weights_only=False)
    assert isinstance(got, cp.nn.Linear)
    same(got.weight, m.weight)


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


def test_add_safe_globals_and_safe_globals_context(tmp_path: Path) -> None:
    cp.save({"p": Point(3)}, tmp_path / "p.pt")
    with pytest.raises(pickle.UnpicklingError, match="refuses the global"):
        cp.load(tmp_path / "p.pt")
    with S.safe_globals([Point]):
        assert cp.load(tmp_path / "p.pt")["p"].x == 3
    with pytest.raises(ValueError):
        cp.load(tmp_path / "p.pt")
    S.add_safe_globals([Point])
    try:
        assert cp.load(tmp_path / "p.pt")["p"].x == 3
        assert Point in S.get_safe_globals()
    finally:
        S.clear_safe_globals()
    assert S.get_safe_globals() == []


def test_map_location_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file recording a CUDA location (as torch writes from a GPU), made by our writer.
    monkeypatch.setattr(S, "_location", lambda t: "cuda:0")
    cp.save({"w": cp.ones(2)}, tmp_path / "gpu.pt")
    monkeypatch.undo()
    if not cp.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            cp.load(tmp_path / "gpu.pt")
    for ml in ("cpu", cp.device("cpu"), {"cuda:0": "cpu"}, lambda storage, loc: storage.cpu()):
        got = cp.load(tmp_path / "gpu.pt", map_location=ml)
        assert str(got["w"].device) == "cpu"
        same(got["w"], cp.ones(2))
    seen = []
    cp.load(tmp_path / "gpu.pt", map_location=lambda storage, loc: seen.append(loc) or storage.cpu())
    assert seen == ["cuda:0"]
    with pytest.raises(TypeError, match="map_location callable returned"):
        cp.load(tmp_path / "gpu.pt", map_location=lambda storage, loc: 3)


def test_save_and_load_argument_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pickle_module"):
        cp.save({}, tmp_path / "a.pt", pickle_module=json)
    with pytest.raises(NotImplementedError, match="legacy"):
        cp.save({}, tmp_path / "a.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="pickle_protocol"):
        cp.save({}, tmp_path / "a.pt", pickle_protocol=1)
    with pytest.raises(TypeError, match="writable binary file"):
        cp.save({}, 3)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        cp.load(tmp_path / "missing.pt")
    cp.save({"a": 1}, tmp_path / "a.pt", pickle_protocol=4)
    assert cp.load(tmp_path / "a.pt") == {"a": 1}
    with pytest.raises(TypeError, match="unexpected keyword"):
        cp.load(tmp_path / "a.pt", fix_imports=True)
    with pytest.raises(ValueError, match="mmap=True needs a file path"):
        cp.load(io.BytesIO((tmp_path / "a.pt").read_bytes()), mmap=True)
    with open(tmp_path / "a.pt", "r", encoding="latin-1") as text:
        with pytest.raises(TypeError, match="binary mode"):
            cp.load(text)  # type: ignore[arg-type]


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    cp.save({"a": cp.ones(2)}, tmp_path / "x.pt")

    class Boom:
        def __reduce__(self) -> Any:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cp.save({"a": Boom()}, tmp_path / "x.pt")
    assert sorted(os.listdir(tmp_path)) == ["x.pt"]
    same(cp.load(tmp_path / "x.pt")["a"], cp.ones(2))


# -- the hostile corpus -------------------------------------------------------------------

MANIFEST = json.loads((HOSTILE / "manifest.json").read_text())


@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_hostile_checkpoint(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    msg = MANIFEST[case]
    path = HOSTILE / f"{case}.pt"
    monkeypatch.chdir(tmp_path)  # nothing in the file may run; nothing may appear here
    if not msg:
        got = cp.load(path)
        assert isinstance(got["w"], cp.Tensor)
        return
    with pytest.raises(ValueError) as err:
        cp.load(path)
    assert isinstance(err.value, pickle.UnpicklingError)
    assert msg in str(err.value), str(err.value)
    assert os.listdir(tmp_path) == []


def test_keras_load_weights_reads_a_torch_checkpoint(tmp_path: Path) -> None:
    from candle_py import keras

    nn = cp.nn
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3), nn.LayerNorm(3))
    model = keras.Model(net)
    model.load_weights(FIX / "model.pt")
    io_ = cp.load_file(FIX / "model_io.safetensors")
    net.eval()
    with cp.no_grad():
        np.testing.assert_allclose(net(io_["x"]).numpy(), io_["y"].numpy(), rtol=1e-5, atol=1e-5)
    cp.save({"not": "a state dict"}, tmp_path / "x.pt")
    with pytest.raises(TypeError, match="not a state_dict"):
        model.load_weights(tmp_path / "x.pt")
