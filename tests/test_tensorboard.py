"""`candle_py.utils.tensorboard.SummaryWriter` writes the event files PyTorch writes.

The call sequence of tests/tensorboard_cases.py runs on candle_py into tmp_path and
is compared, event by event, with the files torch wrote for it
(tests/fixtures/tensorboard/, made by tools/make_fixtures_tensorboard.py): same
directories, tags, steps, wall times, values, histogram fields, text, image pixels
and sizes, audio, tensors and plugin data (hparams, pr_curves, custom scalars,
mesh), and the same embedding-projector files. Bad input raises the exception
types torch raises (errors.json).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("PIL")

import candle_py as cp  # noqa: E402
import tensorboard_cases as cases  # noqa: E402
from candle_py.utils.tensorboard import SummaryWriter  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tensorboard"
EVENT_NAME = re.compile(r"events\.out\.tfevents\.\d{10}\.[^/]+\.\d+\.\d+(.*)$")


def _same(expected: Any, got: Any, where: str) -> None:
    """Recursive equality; floats equal up to 1e-12 relative (histogram sums go
    through BLAS dot products, whose rounding may differ between machines)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(expected) == sorted(got), f"{where}: keys {sorted(expected)} != {sorted(got)}"
        for k in expected:
            _same(expected[k], got[k], f"{where}.{k}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(expected) == len(got), f"{where}: {expected!r} != {got!r}"
        for i, (e, g) in enumerate(zip(expected, got)):
            _same(e, g, f"{where}[{i}]")
    elif isinstance(expected, float) and not isinstance(got, bool):
        assert isinstance(got, (int, float)), f"{where}: {expected!r} != {got!r}"
        assert math.isclose(expected, got, rel_tol=1e-12) or (math.isnan(expected) and math.isnan(got)), f"{where}: {expected!r} != {got!r}"
    else:
        assert expected == got, f"{where}: {expected!r} != {got!r}"


def _blank_clock_times(events: list) -> list:
    """Wall times from the clock differ between runs: they become "clock" (so both
    sides must have one at the same events); explicit ones (< CLOCK) stay."""
    for ev in events:
        if ev["wall_time"] > cases.CLOCK:
            ev["wall_time"] = "clock"
    return events


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    cases.write_events(cp, SummaryWriter, str(root))
    return root


def test_same_event_files_as_torch(written: Path) -> None:
    expected = cases.event_files(str(FIXTURE))
    got = cases.event_files(str(written))
    assert sorted(got) == sorted(expected) == ["main", "main/hp", "main/run_cmp_a", "main/run_cmp_b", "purged"]
    for d, path in got.items():
        assert EVENT_NAME.search(path.replace(os.sep, "/")), path
        _same(_blank_clock_times(cases.decode_events(expected[d])), _blank_clock_times(cases.decode_events(path)), d)


def test_event_contents_spot_checks(written: Path) -> None:
    """A few decoded values, stated outright (the fixture comparison covers all)."""
    events = cases.decode_events(cases.event_files(str(written))["main"])
    first = events[0]
    assert first["what"] == "file_version" and first["file_version"] == "brain.Event:2"
    by_tag = {}
    for ev in events[1:]:
        for v in ev["values"]:
            by_tag.setdefault(v["tag"], []).append((ev, v))
    loss = by_tag["loss"]
    assert [ev["step"] for ev, _ in loss] == [0, 1, 2, 3]
    assert [ev["wall_time"] for ev, _ in loss] == [cases.T0 + i for i in range(4)]
    data = cases._data()["normal"]
    assert [v["simple_value"] for _, v in loss] == [float(x) for x in data[:4]]
    assert by_tag["tensor/bf16_big"][0][1]["simple_value"] == math.inf  # through float16, as torch
    new = by_tag["new/double"][0][1]
    assert new["plugin"] == "scalars" and new["tensor"]["dtype"] == 2 and new["tensor"]["double_val"] == [1.0 / 3.0]
    h = by_tag["hist/ten"][0][1]["histo"]
    counts, edges = np.histogram(data.astype(float), bins=10)
    assert h["num"] == 300 and h["min"] == data.min() and h["max"] == data.max()
    assert h["bucket"] == [0.0, *counts.tolist()] and h["bucket_limit"] == edges.tolist()
    txt = by_tag["notes/text_summary"][0][1]
    assert txt["plugin"] == "text" and txt["tensor"]["string_val"] == ["hello **tensorboard** ünïcode"]
    img = by_tag["img/hwc_u8"][0][1]["image"]
    assert (img["height"], img["width"], img["colorspace"]) == (6, 4, 3)
    assert np.array_equal(np.array(img["png"]["pixels"], dtype=np.uint8), cases._data()["img_hwc_u8"])
    hp = cases.decode_events(cases.event_files(str(written))["main/hp"])
    assert [v["tag"] for ev in hp[1:] for v in ev["values"]] == [
        "_hparams_/experiment",
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
        "hparam/accuracy",
        "hparam/loss",
    ]
    start = hp[2]["values"][0]["content"]["session_start_info"]["hparams"]
    assert start == {"lr": 0.01, "bsize": 32.0, "opt": "adam", "flag": 1.0, "t": 0.5}  # google.protobuf.Value as JSON


def test_same_projector_files_as_torch(written: Path) -> None:
    expected = {k: v for k, v in cases.other_files(str(FIXTURE)).items() if k.startswith(("main/", "purged/"))}
    got = cases.other_files(str(written))
    assert sorted(got) == sorted(expected)
    for name, data in expected.items():
        if name.endswith(".png"):
            assert cases._png_pixels(got[name]) == cases._png_pixels(data), name
        else:
            assert got[name] == data, name


def test_bad_input_raises_as_torch(tmp_path: Path) -> None:
    expected = json.loads((FIXTURE / "errors.json").read_text())
    assert sorted(expected) == sorted(cases.BAD_CALLS)
    got = cases.bad_call_errors(cp, SummaryWriter, str(tmp_path))
    assert got == expected


def test_scalar_error_message(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(AssertionError, match="Tensor should contain one element"):
            w.add_scalar("x", cp.ones(2, 2))
        with pytest.raises(NotImplementedError, match="numpy array or candle_py tensor are expected"):
            w.add_scalar("x", [1.0])
        w.add_scalar("grad", (cp.ones(1, requires_grad=True) * 2).sum(), 0)  # needs no detach
        w.add_scalar("param", cp.nn.Parameter(cp.ones(1)), 0)


def _records(log_dir: Path) -> list:
    files = sorted(log_dir.glob("events.out.tfevents.*"))
    return [cases.decode_events(str(f)) for f in files]


def test_context_manager_closes_and_reopens(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, flush_secs=10_000) as w:
        assert w.get_logdir() == tmp_path
        w.add_scalar("a", 1.0, 0, walltime=5.0)
        w.add_scalars("grp", {"x": 1.0}, 0, walltime=5.0)
        inner = w.all_writers
    assert w.all_writers is None and w.file_writer is None
    assert inner is not None and all(fw.event_writer._async_writer._closed for fw in inner.values())
    [events] = _records(tmp_path)
    assert [e["what"] for e in events] == ["file_version", "summary"]
    [sub] = _records(tmp_path / "grp_x")
    assert sub[1]["values"][0]["tag"] == "grp" and sub[1]["wall_time"] == 5.0
    w.close()  # a second close does nothing
    w.flush()
    # Writing after close opens a new event file, as in torch.
    w.add_scalar("a", 2.0, 1)
    w.close()
    assert len(_records(tmp_path)) == 2


def test_flush_writes_pending_events(tmp_path: Path) -> None:
    w = SummaryWriter(tmp_path, max_queue=1000, flush_secs=10_000)
    try:
        for i in range(5):
            w.add_scalar("a", float(i), i)
        w.flush()
        [events] = _records(tmp_path)
        assert [e["step"] for e in events[1:]] == [0, 1, 2, 3, 4]
    finally:
        w.close()


def test_default_log_dir_and_filename_suffix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1", filename_suffix=".v2") as w:
        log_dir = w.get_logdir()
    pattern = r"runs[/\\][A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname()) + r"_lr0\.1$"
    assert re.match(pattern, log_dir), log_dir
    [f] = (tmp_path / log_dir).iterdir()
    assert f.name.endswith(".v2") and f.name.startswith("events.out.tfevents.")


def test_purge_step_events(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path, purge_step=7) as w:
        pass
    [events] = _records(tmp_path)
    assert [(e["what"], e["step"]) for e in events] == [("file_version", 0), ("file_version", 7), ("session_log", 7)]
    assert w.purge_step is None


def test_histogram_inputs(tmp_path: Path) -> None:
    """Tensors of any dtype and device-free NumPy input give the same histogram."""
    x = np.arange(-5, 6, dtype=np.float32) / 4
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("np", x, 0, bins=4)
        w.add_histogram("t", cp.tensor(x), 0, bins=4)
        w.add_histogram("t64", cp.tensor(x.astype(np.float64)), 0, bins=4)
        w.add_histogram("half", cp.tensor(x).to(cp.float16), 0, bins=4)
        w.add_histogram_raw("raw", 0, 2, 3, 3, 5, cp.tensor([1.0, 2.0]), np.array([1, 2]), 0)
    [events] = _records(tmp_path)
    histos = {e["values"][0]["tag"]: e["values"][0]["histo"] for e in events[1:]}
    assert histos["np"] == histos["t"] == histos["t64"] == histos["half"]
    assert histos["raw"]["bucket_limit"] == [1.0, 2.0] and histos["raw"]["bucket"] == [1.0, 2.0]


def test_add_graph_and_onnx_graph_are_not_available(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(NotImplementedError, match="add_graph.*JIT tracer"):
            w.add_graph(cp.nn.Linear(2, 2), cp.ones(1, 2))
        with pytest.raises(NotImplementedError, match="add_onnx_graph"):
            w.add_onnx_graph("model.onnx")


def test_image_needs_pillow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if Pillow were not installed
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(ImportError):
            w.add_image("i", cp.zeros(3, 2, 2))


def test_video_without_moviepy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "moviepy", None)
    with SummaryWriter(tmp_path) as w:
        w.add_video("v", cp.zeros(1, 2, 3, 4, 4), 0)
    assert "add_video needs package moviepy" in capsys.readouterr().out
    [events] = _records(tmp_path)
    # As torch: the value has the tag and no image.
    assert events[1]["values"][0]["tag"] == "v" and events[1]["values"][0]["kind"] is None


def test_add_figure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1), dpi=20)
    with SummaryWriter(tmp_path) as w:
        w.add_figure("fig", fig, 0)
        w.add_figure("figs", [plt.figure(figsize=(1, 1), dpi=20), plt.figure(figsize=(1, 1), dpi=20)], 1)
    [events] = _records(tmp_path)
    images = [e["values"][0]["image"] for e in events[1:]]
    assert [(i["height"], i["width"]) for i in images] == [(20, 20), (20, 40)]


def test_import_does_not_load_tensorboard() -> None:
    code = "import sys, candle_py; import candle_py.utils; assert 'tensorboard' not in sys.modules, 'loaded'"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr


def test_missing_tensorboard_raises_import_error() -> None:
    """Without the tensorboard package the import fails as torch's does:
    ModuleNotFoundError "No module named 'tensorboard'"."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tensorboard' or name.startswith('tensorboard.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'tensorboard'\", name='tensorboard')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import candle_py\n"
        "try:\n"
        "    from candle_py.utils.tensorboard import SummaryWriter\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ModuleNotFoundError No module named 'tensorboard'"


def test_public_names() -> None:
    import candle_py.utils.tensorboard as tb

    assert tb.__all__ == ["FileWriter", "RecordWriter", "SummaryWriter"]
    assert cp.utils.tensorboard is tb
    w = tb.SummaryWriter.__init__.__code__.co_varnames[:7]
    assert w == ("self", "log_dir", "comment", "purge_step", "max_queue", "flush_secs", "filename_suffix")
