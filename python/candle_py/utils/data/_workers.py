"""DataLoader worker processes (`num_workers > 0`), as PyTorch's.

The main process sends tasks (a batch's indices, or "the next item" for an
`IterableDataset`) to each worker's own queue, round-robin, keeping at most
`prefetch_factor` tasks in flight per worker; workers put `(task, result)` on one
shared queue, and the main process yields results in task order. Each worker gets
`get_worker_info()` (id, count, seed, its copy of the dataset), seeds candle_py's
and Python's generators with `base_seed + id` (the base drawn from the loader's
`generator` each epoch), then runs `worker_init_fn(id)`. An exception in a worker
is re-raised in the main process, of the same type when possible, with the
worker's traceback in the message. Workers stop when the iterator is exhausted,
closed (`break` drops it) or collected; with `persistent_workers=True` they serve
the next epoch too. A worker that dies, or a `timeout` that passes, raises
RuntimeError instead of hanging.

Batches cross processes by pickle; a batch's big CPU tensors travel through
shared-memory files instead (`_shared_memory`: two copies instead of six, measured
in benches/bench_dataloader.py), and the rest by value.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import queue
import random
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any, Dict, Iterator, List, Optional

from ... import _core
from . import _shared_memory

__all__ = ["WorkerInfo", "get_worker_info"]

_POLL = 1.0  # seconds between checks that the workers are alive while waiting


@dataclass(frozen=True)
class WorkerInfo:
    """What `get_worker_info()` returns inside a worker process."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: Optional[WorkerInfo] = None


def get_worker_info() -> Optional[WorkerInfo]:
    """In a DataLoader worker: its `WorkerInfo` (id, num_workers, seed, dataset);
    in the main process: None. Use it in an `IterableDataset.__iter__` to shard."""
    return _worker_info


class _Stop:
    """A worker's iterable dataset is exhausted."""


@dataclass
class _Failure:
    """An exception raised in a worker, carried back as type, message and traceback."""

    exc_type: type
    message: str
    where: str
    text: str

    def reraise(self) -> None:
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.text}"
        try:
            err = self.exc_type(msg)
        except Exception:  # an exception type whose constructor wants other arguments
            raise RuntimeError(msg) from None
        raise err


def _seed_default_generator(seed: int) -> None:
    from ... import random as _random  # the default generator's owner (candle_py.random)

    _random.manual_seed(seed)


def _fetch(state: Dict[str, Any], task: Any) -> Any:
    ds, collate, auto = state["dataset"], state["collate_fn"], state["auto"]
    if state["iterable"]:
        it = state["iter"]
        if auto:
            batch = list(itertools.islice(it, state["batch_size"]))
            if not batch or (state["drop_last"] and len(batch) < state["batch_size"]):
                return _Stop()
            return collate(batch)
        try:
            return collate(next(it))
        except StopIteration:
            return _Stop()
    if not auto:
        return collate(ds[task])
    if state["fast"]:  # a TensorDataset with the default collate: one gather per tensor
        index = _core.tensor(list(task), dtype=_core.int64, device=ds.tensors[0].device)
        return [t.index_select(0, index) for t in ds.tensors]
    getitems = getattr(ds, "__getitems__", None)
    items = getitems(list(task)) if getitems is not None else [ds[i] for i in task]
    return collate(items)


def _worker_loop(
    worker_id: int,
    num_workers: int,
    dataset: Any,
    collate_fn: Any,
    auto: bool,
    fast: bool,
    iterable: bool,
    batch_size: Optional[int],
    drop_last: bool,
    seed: int,
    worker_init_fn: Any,
    index_queue: Any,
    result_queue: Any,
    shm_prefix: Optional[str],
) -> None:
    global _worker_info
    if shm_prefix is not None:
        _shared_memory.install(f"{shm_prefix}{worker_id}_")
    state: Dict[str, Any] = dict(
        dataset=dataset, collate_fn=collate_fn, auto=auto, fast=fast, iterable=iterable, batch_size=batch_size, drop_last=drop_last
    )
    where = f"in DataLoader worker process {worker_id}"
    epoch = -1
    try:
        _seed_default_generator(seed)
        random.seed(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    except Exception as e:  # reported for the first task instead
        init_failure: Optional[_Failure] = _Failure(type(e), str(e), where, traceback.format_exc())
    else:
        init_failure = None
    # Ctrl-C reaches the whole process group: the main process raises KeyboardInterrupt
    # and shuts the workers down, so a worker leaves quietly (torch's workers do the same)
    # instead of printing a traceback of its own.
    try:
        while True:
            try:
                msg = index_queue.get()
            except (EOFError, OSError):  # the main process is gone
                return
            if msg is None:  # shut down
                return
            kind, ep, task_id, task, freed = msg
            if freed:  # batch files the main process has read: ours to reuse
                _shared_memory.release(freed)
            if kind == "epoch":  # a new epoch: a fresh iterator over an iterable dataset
                epoch = ep
                if iterable and init_failure is None:
                    try:
                        state["iter"] = iter(dataset)
                    except Exception as e:
                        init_failure = _Failure(type(e), str(e), where, traceback.format_exc())
                continue
            if init_failure is not None:
                result_queue.put(_pickled(ep, task_id, init_failure, where))
                continue
            try:
                out: Any = _fetch(state, task)
            except Exception as e:
                out = _Failure(type(e), str(e), where, traceback.format_exc())
            result_queue.put(_pickled(epoch, task_id, out, where))
    except KeyboardInterrupt:
        return


def _pickled(epoch: int, task_id: int, out: Any, where: str) -> bytes:
    """The result, pickled here rather than by the queue's feeder thread: a result that
    does not pickle must become an error the main process sees, and the feeder thread
    would only print it and drop the batch (the main process then waits forever)."""
    try:
        return bytes(ForkingPickler.dumps((epoch, task_id, out)))
    except Exception as e:
        failure = _Failure(type(e), str(e), where, traceback.format_exc())
        try:
            return bytes(ForkingPickler.dumps((epoch, task_id, failure)))
        except Exception:  # the exception type itself does not pickle (a local class)
            failure.exc_type = RuntimeError
            return bytes(ForkingPickler.dumps((epoch, task_id, failure)))


class _MultiProcessIter:
    """One DataLoader's worker processes and the epoch iterating over them."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.n = loader.num_workers
        self.prefetch = loader.prefetch_factor if loader.prefetch_factor is not None else 2
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = mp.get_context()
        elif isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        self.timeout = float(loader.timeout or 0)
        self.result_queue = ctx.Queue()
        self.index_queues: List[Any] = []
        self.workers: List[Any] = []
        self.base_seed = self._draw_seed()
        self.shm_prefix = _shared_memory.prefix_for(f"{id(self):x}") if _shared_memory.available() else None
        if self.shm_prefix is not None:
            _shared_memory.remove_orphans()
        for wid in range(self.n):
            iq = ctx.Queue()
            args = (
                wid,
                self.n,
                loader.dataset,
                loader.collate_fn,
                loader._auto_collation,
                loader._fast,
                loader._iterable,
                loader.batch_size,
                loader.drop_last,
                self.base_seed + wid,
                loader.worker_init_fn,
                iq,
                self.result_queue,
                self.shm_prefix,
            )
            w = ctx.Process(target=_worker_loop, args=args, daemon=True)
            w.start()
            self.index_queues.append(iq)
            self.workers.append(w)
        self.epoch = -1
        self.shut = False
        self._freed: Dict[int, List[str]] = {}  # worker -> its batch files we have read

    def _draw_seed(self) -> int:
        # As torch: a random int64 from the loader's generator (or the default one).
        return int(_core.empty((), dtype=_core.int64).random_(generator=self.loader.generator).item())

    # -- one epoch ------------------------------------------------------------------

    def epoch_iter(self) -> Iterator[Any]:
        """Yield one epoch's results in task order (as they arrive with in_order=False);
        the workers outlive it only when the loader keeps them (persistent_workers)."""
        self.epoch += 1
        epoch = self.epoch
        for w, iq in enumerate(self.index_queues):
            iq.put(("epoch", epoch, -1, None, self._freed.pop(w, None)))
        loader = self.loader
        if loader._iterable:
            tasks: Iterator[Any] = itertools.repeat(None)
        elif loader._auto_collation:
            tasks = iter(loader.batch_sampler)
        else:
            tasks = iter(loader.sampler)
        in_order = bool(getattr(loader, "in_order", True))
        active = [True] * self.n
        outstanding: Dict[int, int] = {}  # task id -> worker
        done: Dict[int, Any] = {}
        next_task, next_yield, rr = 0, 0, 0
        exhausted = False
        try:
            while True:
                # Keep every active worker fed up to prefetch_factor tasks.
                while not exhausted and len(outstanding) < self.prefetch * sum(active):
                    try:
                        task = next(tasks)
                    except StopIteration:
                        exhausted = True
                        break
                    while not active[rr % self.n]:
                        rr += 1
                    w = rr % self.n
                    rr += 1
                    self.index_queues[w].put(("task", epoch, next_task, task, self._freed.pop(w, None)))
                    outstanding[next_task] = w
                    next_task += 1
                if next_yield in done:
                    out = done.pop(next_yield)
                    next_yield += 1
                    if out is _SKIP:
                        continue
                    if isinstance(out, _Failure):
                        out.reraise()
                    yield out
                    continue
                if not in_order:
                    if not outstanding:
                        if exhausted or not any(active):
                            return
                        continue
                elif next_yield not in outstanding:
                    if exhausted or not any(active):
                        return
                    continue
                ep, tid, out = self._get()
                if ep != epoch or tid not in outstanding:
                    continue  # left over from an epoch that was abandoned
                w = outstanding.pop(tid)
                if isinstance(out, _Stop):
                    # That worker's copy of the dataset ran out; tasks queued behind
                    # this one on it will report the same and are skipped too.
                    active[w] = False
                    out = _SKIP
                    if not any(active):
                        exhausted = True
                if not in_order:  # in_order=False: each batch as soon as it arrives
                    if out is not _SKIP:
                        if isinstance(out, _Failure):
                            out.reraise()
                        yield out
                    if exhausted and not outstanding:
                        return
                    continue
                done[tid] = out
                next_yield = self._skip_ahead_from(done, next_yield)
        finally:
            if not loader.persistent_workers:
                self.shutdown()

    @staticmethod
    def _skip_ahead_from(done: Dict[int, Any], next_yield: int) -> int:
        while done.get(next_yield) is _SKIP:
            del done[next_yield]
            next_yield += 1
        return next_yield

    def _get(self) -> Any:
        waited = 0.0
        while True:
            try:
                data = self.result_queue.get(timeout=_POLL)
            except queue.Empty:
                waited += _POLL
                dead = [w for w in self.workers if not w.is_alive()]
                if dead:
                    pids = ", ".join(str(w.pid) for w in dead)
                    codes = ", ".join(str(w.exitcode) for w in dead)
                    self.shutdown(wait=False)
                    raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly with exit code {codes}") from None
                if self.timeout > 0 and waited >= self.timeout:
                    self.shutdown(wait=False)
                    raise RuntimeError(f"DataLoader timed out after {self.timeout:g} seconds") from None
            else:
                out = ForkingPickler.loads(data)  # (epoch, task id, result); reads shared memory
                if self.shm_prefix is not None:
                    for w, names in _shared_memory.take_received(self.shm_prefix).items():
                        self._freed.setdefault(w, []).extend(names)
                return out

    def shutdown(self, wait: bool = True) -> None:
        """Stop the workers and release the queues (idempotent); `wait=False` (after a
        timeout or a dead worker) terminates them at once instead of letting them finish
        the task in hand."""
        if self.shut:
            return
        self.shut = True
        for iq in self.index_queues:
            try:
                iq.put(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.join(timeout=5 if wait else 0)
            if w.is_alive():
                w.terminate()
                w.join(timeout=5)
        for q in [*self.index_queues, self.result_queue]:
            q.cancel_join_thread()
            q.close()
        if self.shm_prefix is not None:  # batches the workers sent that were never received
            _shared_memory.remove_leftovers(self.shm_prefix)

    def __del__(self) -> None:
        if os is not None and not getattr(self, "shut", True):
            self.shutdown()


_SKIP = object()  # a task whose worker had already run out of items
