"""A writer killed mid-save never corrupts the previous file.

For `save_file`, `Model.save` (keras) and `ModelCheckpoint`, a child process
overwrites an existing file with a large new one; the parent SIGKILLs it while
the temporary file is being written, then checks that the target still loads
and holds exactly the old values. The save is atomic because the data go to a
temporary file in the same folder that is renamed over the target only once
complete and fsynced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp
from candle_py import safetensors as st

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

# Children: build ~64 MiB of new weights, print READY, then save once.
WRITERS = {
    "save_file": """
        import candle_py as cp
        big = {f"w{i}": cp.full((1024, 1024), float(i + 1)) for i in range(16)}
        print("READY", flush=True)
        cp.save_file(big, PATH)
    """,
    "keras_save": """
        import candle_py as cp
        from candle_py import keras, nn
        model = keras.Sequential([nn.Linear(4096, 4096)])
        print("READY", flush=True)
        model.save(PATH)
    """,
    "model_checkpoint": """
        import candle_py as cp
        from candle_py import keras, nn
        model = keras.Sequential([nn.Linear(4096, 4096)])
        cb = keras.callbacks.ModelCheckpoint(PATH, save_weights_only=True)
        cb.set_model(model)
        print("READY", flush=True)
        cb.on_epoch_end(0, {"loss": 1.0})
    """,
}


def _old_file(kind: str, path: Path) -> dict[str, np.ndarray]:
    """Write the file the child will try to replace; return its contents."""
    if kind == "save_file":
        old = {"w0": cp.full((4, 4), -1.0), "extra": cp.arange(5)}
        st.save_file(old, path)
    else:
        from candle_py import keras, nn

        model = keras.Sequential([nn.Linear(3, 2)])
        model.save(path)
    return {k: v.numpy().copy() for k, v in st.load_file(path).items()}


def _tmp_files(folder: Path, target: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith("." + target.name) and p.name.endswith(".tmp")]


def _partly_written(folder: Path, target: Path) -> bool:
    for p in _tmp_files(folder, target):
        try:
            if p.stat().st_size > 0:
                return True
        except FileNotFoundError:  # renamed meanwhile
            pass
    return False


def _start(kind: str, target: Path) -> subprocess.Popen:
    code = f"PATH = {str(target)!r}\n" + textwrap.dedent(WRITERS[kind])
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, RUST_BACKTRACE="0")
    )


def _kill_mid_save(jobs: dict[str, tuple[Path, Path]]) -> set[str]:
    """Run one writer per kind at once (they take seconds to start) and SIGKILL
    each once its temporary file exists and is partly written. Returns the
    kinds whose writer was killed mid-write."""
    procs = {kind: _start(kind, target) for kind, (_, target) in jobs.items()}
    killed: set[str] = set()
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "READY", proc.stderr.read() if proc.stderr else ""
        deadline = time.monotonic() + 60
        live = dict(procs)
        while live and time.monotonic() < deadline:
            for kind, proc in list(live.items()):
                folder, target = jobs[kind]
                if proc.poll() is not None:
                    del live[kind]  # finished before we caught it
                elif _partly_written(folder, target):
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(10)
                    # Still there after the kill: the rename had not happened yet.
                    if _tmp_files(folder, target):
                        killed.add(kind)
                    del live[kind]
            time.sleep(0.0005)
        return killed
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()


def test_kill_during_save_keeps_old_file(tmp_path):
    jobs, old = {}, {}
    for kind in WRITERS:
        folder = tmp_path / kind
        folder.mkdir()
        jobs[kind] = (folder, folder / "model.safetensors")
        old[kind] = _old_file(kind, jobs[kind][1])
    pending = dict(jobs)
    for _ in range(5):  # the write window is short; retry a writer that finished first
        killed = _kill_mid_save(pending)
        for kind, (_folder, target) in pending.items():
            if kind not in killed:  # it replaced the file: start over
                old[kind] = _old_file(kind, target)
        pending = {k: v for k, v in pending.items() if k not in killed}
        if not pending:
            break
    assert not pending, f"never caught these writers mid-save: {sorted(pending)}"
    for kind, (folder, target) in jobs.items():
        # The target is untouched: it loads, with exactly the old tensors.
        loaded = st.load_file(target)
        assert sorted(loaded) == sorted(old[kind]), kind
        for k, v in old[kind].items():
            np.testing.assert_array_equal(loaded[k].numpy(), v)
        # Only the killed writer's temporary file is left behind; a new save works.
        assert len(_tmp_files(folder, target)) == 1, kind
        st.save_file({"x": cp.ones(2)}, target)
        assert st.load_file(target)["x"].tolist() == [1.0, 1.0]


def test_failed_save_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "a.safetensors"
    st.save_file({"a": cp.ones(2)}, target)
    with pytest.raises(TypeError):
        st.save_file({"a": "not a tensor"}, target)  # type: ignore[dict-item]
    with pytest.raises(FileNotFoundError):
        st.save_file({"a": cp.ones(2)}, tmp_path / "no" / "such" / "dir.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["a.safetensors"]
    assert st.load_file(target)["a"].tolist() == [1.0, 1.0]


def test_concurrent_saves_to_one_target_stay_whole(tmp_path):
    # Threads racing to save the same path: the survivor is one complete file.
    from concurrent.futures import ThreadPoolExecutor

    target = tmp_path / "race.safetensors"

    def save(i: int) -> None:
        st.save_file({"v": cp.full((256, 256), float(i))}, target)

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(save, range(16)))
    v = st.load_file(target)["v"].numpy()
    assert v.shape == (256, 256) and (v == v[0, 0]).all() and 0 <= v[0, 0] < 16
    assert [p.name for p in tmp_path.iterdir()] == ["race.safetensors"]
