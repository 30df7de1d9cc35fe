"""The elementwise ops' Python surface is generated from the core's table
(tools/gen_surface.py): the generated files are current, every row reaches
`_core`, `F` and `nn`, and the tool notices a stale file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_surface", ROOT / "tools" / "gen_surface.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_rows_are_read() -> None:
    rows = _tool().rows()
    names = [r[0] for r in rows]
    assert "logsigmoid" in names
    name, doc, layer = rows[names.index("logsigmoid")]
    assert layer == "LogSigmoid" and "log(sigmoid(input))" in doc


def test_generated_files_are_current(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tool = _tool()
    monkeypatch.setattr("sys.argv", ["gen_surface.py", "--check"])
    assert tool.main() == 0


def test_every_row_reaches_core_functional_and_nn() -> None:
    for name, doc, layer in _tool().rows():
        core_fn = getattr(cp._core, name)
        assert doc.splitlines()[0] in (core_fn.__doc__ or ""), name
        assert name in F.__all__ and getattr(F, name).__doc__.startswith(doc.splitlines()[0]), name
        assert layer in nn.__all__ and issubclass(getattr(nn, layer), nn.Module), layer
        x = cp.tensor([-1.0, 0.5])
        assert getattr(nn, layer)()(x).tolist() == getattr(F, name)(x).tolist() == core_fn(x).tolist()


def test_a_new_row_makes_the_files_stale() -> None:
    tool = _tool()
    rows = tool.rows() + [("newop", "A new op.", "NewOp")]
    assert tool.functional_text(rows) != (ROOT / "python/candle_py/nn/_functional/elementwise.py").read_text()
    assert "class NewOp(Module):" in tool.layers_text(rows)
    stub = tool.stub_text((ROOT / "python/candle_py/_core.pyi").read_text(), rows)
    assert "def newop(input: Tensor) -> Tensor: ..." in stub


def test_every_tensor_method_row_reaches_the_method_its_stub_and_its_function() -> None:
    names = _tool().method_rows()
    assert {"exp", "log1p", "sigmoid", "floor", "trunc"} <= set(names)
    stub = (ROOT / "python/candle_py/_core.pyi").read_text()
    x = cp.tensor([0.25, 1.5])
    for name in names:
        assert f"    def {name}(self) -> Tensor: ..." in stub, name
        assert name in cp.__all__, name
        # NaN where x is outside the domain (asin(1.5)): equal as arrays, NaN included.
        np.testing.assert_array_equal(getattr(cp, name)(x).numpy(), getattr(x, name)().numpy(), err_msg=name)


def test_a_new_method_row_makes_the_files_stale() -> None:
    tool = _tool()
    names = tool.method_rows() + ["newmethod"]
    assert 'newmethod = _unary("newmethod")' in tool.functions_text((ROOT / "python/candle_py/_functions.py").read_text(), names)
    assert "    def newmethod(self) -> Tensor: ..." in tool.methods_stub_text((ROOT / "python/candle_py/_core.pyi").read_text(), names)
