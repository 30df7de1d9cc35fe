"""Moving a DataLoader worker's tensors to the main process through shared memory.

A worker process pickles each batch onto a queue. Pickling a tensor by value copies
its bytes six times: out of the tensor, into the pickle, through the pipe, out of
the pipe, into an array, into the new tensor. Here a worker writes each big CPU
tensor into a file in /dev/shm (a tmpfs: memory, not disk) and pickles only the
file's name; the main process reads the file into a new tensor. That is three
copies (benches/bench_dataloader.py measures both ways). It is the mechanism of PyTorch's "file_system" sharing strategy, except that the
main process owns its tensor's memory once the batch arrives, so nothing has to
reference-count the file.

The main process hands each file it has read back to its worker with the worker's
next task, and the worker writes a later batch into it: a fresh tmpfs file costs
2-3x the copy to allocate, a reused one only the copy. Files are named
`candle_py_dl_<main pid>_<loader tag>_<worker id>_<n>`, so a loader that shuts down
deletes all its workers' files, in flight or idle (`remove_leftovers`), and the next
loader to start deletes those of main processes that were killed (`remove_orphans`).

Small tensors (under `MIN_BYTES`), tensors on other devices, dtypes NumPy cannot
view, and any tensor when /dev/shm is missing or full go by pickle as before. Files
are written with write(), so a full tmpfs (Docker's 64 MiB default) is an error we
fall back from, not a SIGBUS in the worker.
"""

from __future__ import annotations

import itertools
import os
from multiprocessing.reduction import ForkingPickler
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..._core import Tensor

SHM_DIR = "/dev/shm"
# Below this size, creating, mapping and unlinking a file costs more than the pickle's
# extra copies (measured: ~30 us per file against ~1 us per 4 KiB copied).
MIN_BYTES = 64 * 1024

_prefix = ""  # set in a worker by `install`: its files' names start with it
_counter = itertools.count()
# Worker side: files the main process has read and handed back, name -> capacity.
_free: Dict[str, int] = {}
# Main side: files read since `take_received` was last called.
_received: List[str] = []
MAX_FREE = 32  # a worker keeps at most this many idle files; beyond, it deletes them


def available() -> bool:
    """Whether this platform has a tmpfs at /dev/shm to put batches in."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def prefix_for(loader_tag: str) -> str:
    """The name prefix of the files one loader's workers create (main process side)."""
    return f"candle_py_dl_{os.getpid()}_{loader_tag}_"


def install(prefix: str) -> None:
    """In a worker: pickle plain CPU tensors through shared-memory files named `prefix...`
    on multiprocessing's queues (its ForkingPickler) from now on."""
    global _prefix
    _prefix = prefix
    _free.clear()
    ForkingPickler.register(Tensor, _reduce)


def release(names: List[str]) -> None:
    """In a worker: the main process has read these files; reuse them for later batches."""
    for name in names:
        path = os.path.join(SHM_DIR, name)
        if len(_free) >= MAX_FREE:
            _unlink(path)
            continue
        try:
            _free[name] = os.stat(path).st_size
        except OSError:
            pass


def take_received(prefix: str) -> Dict[int, List[str]]:
    """In the main process: the files of loader `prefix` read since the last call, by
    worker id (to hand back to their workers)."""
    out: Dict[int, List[str]] = {}
    keep = []
    for name in _received:
        if name.startswith(prefix):
            out.setdefault(int(name[len(prefix) :].split("_", 1)[0]), []).append(name)
        else:  # another loader's
            keep.append(name)
    _received[:] = keep
    return out


def _reduce(t: Tensor) -> Tuple[Any, ...]:
    nbytes = t.numel() * t.element_size()
    if nbytes >= MIN_BYTES and t.device.type == "cpu":
        try:
            arr = t.detach().numpy()
        except (TypeError, RuntimeError):  # a dtype NumPy has no type for here
            arr = None
        if arr is not None:
            name = _write(arr)
            if name is not None:
                return (_rebuild, (name, arr.shape, arr.dtype, str(t.dtype).split(".")[-1], t.requires_grad))
    return t.__reduce__()


def _write(arr: np.ndarray) -> Optional[str]:
    """Copy `arr` into a /dev/shm file (a free one big enough, else a new one); its name,
    or None if there is no room."""
    nbytes = arr.nbytes
    fits = [n for n, cap in _free.items() if cap >= nbytes]
    if fits:
        name = min(fits, key=_free.__getitem__)
        del _free[name]
        flags = os.O_WRONLY
    else:
        name = f"{_prefix}{next(_counter)}"
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    path = os.path.join(SHM_DIR, name)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        # write(), not a shared mapping: a full tmpfs (Docker's 64 MiB default) is ENOSPC
        # here rather than SIGBUS at a store. A reused file's pages are already allocated,
        # which is why files are reused: allocating tmpfs pages costs 2-3x the copy.
        # Bytes, not the array itself: memoryview cannot export ml_dtypes' bfloat16.
        view = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data
        done = 0
        while done < nbytes:
            done += os.pwrite(fd, view[done:], done)
    except OSError:
        os.close(fd)
        _unlink(path)
        return None
    os.close(fd)
    return name


def _rebuild(name: str, shape: Tuple[int, ...], np_dtype: np.dtype, dtype_name: str, requires_grad: bool) -> Tensor:
    """Main process: the tensor stored in file `name` (the file goes back to its worker)."""
    raw = np.empty(int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize, np.uint8)
    view = raw.data
    fd = os.open(os.path.join(SHM_DIR, name), os.O_RDONLY)
    try:
        done = 0
        while done < len(view):
            n = os.preadv(fd, [view[done:]], done)
            if not n:
                raise EOFError(f"DataLoader: shared-memory batch file {name} is truncated ({done} of {len(view)} bytes)")
            done += n
    finally:
        os.close(fd)
    _received.append(name)
    return Tensor._rebuild(raw.view(np_dtype).reshape(shape), dtype_name, requires_grad)  # one more copy, into the tensor


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_orphans() -> int:
    """Delete files left by main processes that no longer exist (killed before their
    loaders could clean up); the count removed. Run when a loader starts its workers."""
    n = 0
    for name in os.listdir(SHM_DIR):
        if not name.startswith("candle_py_dl_"):
            continue
        pid = name[len("candle_py_dl_") :].split("_", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            _unlink(os.path.join(SHM_DIR, name))
            n += 1
    return n


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_leftovers(prefix: str) -> int:
    """Delete the files a loader's workers wrote that were never received (after they
    have stopped); the count removed."""
    n = 0
    # os.listdir rather than glob: this also runs from __del__ at interpreter exit,
    # when glob can no longer import what it needs.
    for name in os.listdir(SHM_DIR):
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                n += 1
            except FileNotFoundError:
                pass
    return n
