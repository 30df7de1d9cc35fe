"""DataLoader with worker processes (`num_workers > 0`), as torch's: same batches in
the same order as in-process loading, worker info and seeds, worker_init_fn,
IterableDataset sharding, exceptions with the worker's traceback, timeouts, dead
workers, persistent workers, start methods, and no leaked processes."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from typing import Any, Iterator, List

import numpy as np
import pytest

import candle_py as cp
from candle_py.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


class Squares(Dataset):
    def __init__(self, n: int = 10) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return cp.tensor([float(i), float(i * i)]), i


class WhoAmI(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        info = get_worker_info()
        assert info is not None
        return {"id": info.id, "n": info.num_workers, "seed": info.seed, "pid": os.getpid(), "init": _INIT.get("id", -1)}


_INIT: dict = {}


def _record_init(worker_id: int) -> None:
    _INIT["id"] = worker_id * 10


class Failing(Dataset):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> Any:
        if i == 3:
            raise ValueError(f"bad item {i}")
        return i


class Slow(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        time.sleep(5)
        return i


class Dies(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        os._exit(3)


class Range(IterableDataset):
    def __init__(self, n: int, shard: bool) -> None:
        self.n, self.shard = n, shard

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        if not self.shard or info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Dtypes(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        return (cp.tensor([i], dtype=cp.bfloat16), cp.tensor([i]), cp.tensor([i % 2 == 0]), np.float32(i), "s")


def batches(loader: Any) -> List[Any]:
    return [b for b in loader]


def to_np(x: Any) -> Any:
    if isinstance(x, cp.Tensor):
        return x.float().numpy() if x.dtype == cp.bfloat16 else x.numpy()
    if isinstance(x, (list, tuple)):
        return [to_np(v) for v in x]
    if isinstance(x, dict):
        return {k: to_np(v) for k, v in x.items()}
    return x


def assert_same(a: Any, b: Any) -> None:
    a, b = to_np(a), to_np(b)
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


KWARGS = [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None), dict(batch_size=4, collate_fn=list)]


@pytest.mark.parametrize("kw", KWARGS)
def test_workers_give_the_in_process_batches_in_order(kw: dict) -> None:
    ref = batches(DataLoader(Squares(10), **kw))
    got = batches(DataLoader(Squares(10), num_workers=2, **kw))
    assert_same(got, ref)


def test_shuffle_with_a_seeded_generator_matches_in_process_order() -> None:
    ref = batches(DataLoader(Squares(12), batch_size=4, shuffle=True, generator=cp.Generator().manual_seed(7)))
    got = batches(DataLoader(Squares(12), batch_size=4, shuffle=True, num_workers=2, generator=cp.Generator().manual_seed(7)))
    assert_same(got, ref)


def test_worker_info_seeds_and_init_fn() -> None:
    assert get_worker_info() is None
    out = batches(DataLoader(WhoAmI(), batch_size=None, num_workers=2, worker_init_fn=_record_init))
    ids = {o["id"] for o in out}
    assert ids == {0, 1} and {o["n"] for o in out} == {2}
    seeds = {o["id"]: o["seed"] for o in out}
    assert seeds[1] == seeds[0] + 1  # base_seed + worker id, as torch
    assert all(o["init"] == o["id"] * 10 for o in out)
    assert os.getpid() not in {o["pid"] for o in out}
    # Round-robin: item i is made by worker i % 2.
    assert [o["id"] for o in out] == [i % 2 for i in range(8)]
    again = batches(DataLoader(WhoAmI(), batch_size=None, num_workers=2))
    assert {o["seed"] for o in again} != set(seeds.values())  # a fresh base seed per epoch


def test_iterable_dataset_sharding_and_duplication() -> None:
    sharded = batches(DataLoader(Range(10, shard=True), batch_size=2, num_workers=2))
    flat = sorted(int(v) for b in sharded for v in b.tolist())
    assert flat == list(range(10))
    # torch's order: worker 0's first batch, worker 1's first batch, ...
    assert [b.tolist() for b in sharded] == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    dup = batches(DataLoader(Range(5, shard=False), batch_size=None, num_workers=2))
    assert sorted(int(v) for v in dup) == sorted(list(range(5)) * 2)


def test_worker_exception_is_reraised_with_its_traceback() -> None:
    with pytest.raises(ValueError) as err:
        batches(DataLoader(Failing(), batch_size=2, num_workers=2))
    msg = str(err.value)
    assert "Caught ValueError in DataLoader worker process" in msg
    assert "bad item 3" in msg and "__getitem__" in msg


def test_timeout_raises() -> None:
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="timed out after 1 seconds"):
        batches(DataLoader(Slow(), batch_size=1, num_workers=1, timeout=1))
    assert time.perf_counter() - t0 < 4.5


def test_a_dead_worker_raises_instead_of_hanging() -> None:
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        batches(DataLoader(Dies(), batch_size=1, num_workers=2))


def _children_settle() -> List[Any]:
    for _ in range(50):
        gc.collect()
        kids = mp.active_children()
        if not kids:
            return []
        time.sleep(0.1)
    return mp.active_children()


def test_no_leaked_processes_after_exhaustion_break_and_errors() -> None:
    batches(DataLoader(Squares(6), batch_size=2, num_workers=2))
    assert _children_settle() == []
    for _ in DataLoader(Squares(100), batch_size=2, num_workers=2):
        break
    assert _children_settle() == []
    with pytest.raises(ValueError):
        batches(DataLoader(Failing(), batch_size=2, num_workers=2))
    assert _children_settle() == []


_CTRL_C_SCRIPT = """
import multiprocessing as mp, time
import candle_py as cp
from candle_py.utils.data import DataLoader, Dataset

class SlowItems(Dataset):
    def __len__(self): return 10000
    def __getitem__(self, i):
        time.sleep(0.05)
        return cp.tensor([float(i)])

if __name__ == "__main__":
    it = iter(DataLoader(SlowItems(), batch_size=2, num_workers=2))
    next(it)
    print(" ".join(str(p.pid) for p in mp.active_children()), flush=True)
    for _ in it:
        pass
"""


def test_ctrl_c_stops_main_and_workers_quietly(tmp_path: Any) -> None:
    # Ctrl-C signals the whole process group, workers included. Before, each worker
    # busy in __getitem__ printed a KeyboardInterrupt traceback of its own; torch's
    # workers leave quietly and the main process's KeyboardInterrupt is the only one.
    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2, pids
        time.sleep(0.3)  # the workers are inside __getitem__
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert err.count("KeyboardInterrupt") == 1, err
    assert "_worker_loop" not in err, err
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.1)
    assert alive == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie whose parent has not reaped it is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_persistent_workers_serve_every_epoch() -> None:
    loader = DataLoader(WhoAmI(), batch_size=None, num_workers=2, persistent_workers=True)
    e1 = {o["pid"] for o in loader}
    e2 = {o["pid"] for o in loader}
    assert e1 == e2 and len(e1) == 2
    plain = DataLoader(WhoAmI(), batch_size=None, num_workers=2)
    assert {o["pid"] for o in plain} != {o["pid"] for o in plain}
    del loader
    assert _children_settle() == []


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_start_methods(method: str) -> None:
    if method not in mp.get_all_start_methods():
        pytest.skip(f"{method} unavailable")
    got = batches(DataLoader(Squares(6), batch_size=2, num_workers=2, multiprocessing_context=method))
    assert_same(got, batches(DataLoader(Squares(6), batch_size=2)))


def test_dtypes_and_python_values_cross_processes() -> None:
    assert_same(batches(DataLoader(Dtypes(), batch_size=2, num_workers=2)), batches(DataLoader(Dtypes(), batch_size=2)))


class Unpicklable(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> Any:
        return (lambda: i) if i == 2 else i


def test_a_batch_that_does_not_pickle_raises_instead_of_hanging() -> None:
    # Before: the queue's feeder thread printed the pickling error and dropped the
    # batch, and the main process waited for it forever.
    loader = DataLoader(Unpicklable(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    with pytest.raises(Exception, match="DataLoader worker process") as err:
        batches(loader)
    assert "pickle" in str(err.value).lower()


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        DataLoader(Squares(), num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(Squares(), prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(Squares(), persistent_workers=True)


# -- big tensors cross through shared-memory files (utils/data/_shared_memory.py) ---------


class Big(Dataset):
    """Items far above the shared-memory threshold, of several dtypes and layouts."""

    def __init__(self, n: int = 8) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        base = cp.arange(64 * 1024, dtype=cp.float32).reshape(256, 256) + i
        return {
            "f32": base,
            "t": base.t(),  # a non-contiguous view
            "bf16": base.to(cp.bfloat16),
            "i64": base.to(cp.int64),
            "bool": base > 40000,
            "small": cp.tensor([i]),
        }


def _our_shm_files() -> List[str]:
    if not os.path.isdir("/dev/shm"):
        return []
    return [f for f in os.listdir("/dev/shm") if f.startswith(f"candle_py_dl_{os.getpid()}_")]


shm_only = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this platform")


@shm_only
def test_big_tensors_cross_by_shared_memory_and_files_are_reused_then_deleted() -> None:
    loader = DataLoader(Big(12), batch_size=2, num_workers=2, persistent_workers=True)
    ref = batches(DataLoader(Big(12), batch_size=2))
    for _ in range(3):
        got = batches(loader)
        assert_same(got, ref)
        assert got[0]["t"].shape == (2, 256, 256)
    files = _our_shm_files()
    # Files go back to their worker and are reused: a few per worker, not one per tensor
    # per batch (3 epochs x 6 batches x 5 big tensors = 90 otherwise).
    assert 0 < len(files) <= 2 * 2 * 5 + 10
    del loader
    assert _children_settle() == []
    assert _our_shm_files() == []


@shm_only
def test_no_shared_memory_files_left_after_break_or_worker_error() -> None:
    for _ in DataLoader(Big(40), batch_size=2, num_workers=2, prefetch_factor=4):
        break
    assert _children_settle() == [] and _our_shm_files() == []

    class BigThenFail(Big):
        def __getitem__(self, i: int) -> Any:
            if i == 5:
                raise KeyError(i)
            return super().__getitem__(i)

    with pytest.raises(KeyError):
        batches(DataLoader(BigThenFail(12), batch_size=1, num_workers=2))
    assert _children_settle() == [] and _our_shm_files() == []


@shm_only
def test_files_of_a_killed_main_process_are_removed_by_the_next_loader() -> None:
    dead = mp.get_context("fork").Process(target=os._exit, args=(0,))
    dead.start()
    dead.join()
    stale = f"/dev/shm/candle_py_dl_{dead.pid}_0_0_0"
    with open(stale, "wb") as f:
        f.write(b"x" * 10)
    mine = f"/dev/shm/candle_py_dl_{os.getpid()}_feed_0_0"  # a live process's file stays
    with open(mine, "wb") as f:
        f.write(b"x" * 10)
    try:
        batches(DataLoader(Squares(4), batch_size=2, num_workers=1))
        assert not os.path.exists(stale) and os.path.exists(mine)
    finally:
        for p in (stale, mine):
            if os.path.exists(p):
                os.unlink(p)


def _no_room(*args: Any, **kwargs: Any) -> int:
    raise OSError(28, "No space left on device")


@shm_only
def test_a_full_tmpfs_falls_back_to_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    # Workers are forked, so they inherit the patched os.pwrite: every shared-memory
    # write fails as on a full /dev/shm, and the batch must still arrive whole.
    monkeypatch.setattr(os, "pwrite", _no_room)
    got = batches(DataLoader(Big(4), batch_size=2, num_workers=2, multiprocessing_context="fork"))
    monkeypatch.undo()
    assert_same(got, batches(DataLoader(Big(4), batch_size=2)))
    assert _children_settle() == [] and _our_shm_files() == []


def test_without_dev_shm_tensors_go_by_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    from candle_py.utils.data import _shared_memory

    monkeypatch.setattr(_shared_memory, "available", lambda: False)
    got = batches(DataLoader(Big(4), batch_size=2, num_workers=1))
    assert_same(got, batches(DataLoader(Big(4), batch_size=2)))
    assert _our_shm_files() == []
