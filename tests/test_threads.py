"""Concurrent use from Python threads: correct results, no deadlock.

Large ops release the GIL; these tests check that doing so is safe (results are
identical to serial runs) and that nothing deadlocks (every run has a timeout).
No timing assertions.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import candle_py as cp

TIMEOUT = 60.0


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    return a, b


def _work(seed: int):
    a, b = _inputs(seed)
    x, y = cp.from_numpy(a), cp.from_numpy(b)
    m = x @ y
    s = (m * 0.5).sum(dim=1)
    e = cp.exp(x.clamp(-5, 5)).mean()
    t = m.t().contiguous()
    return m.numpy().copy(), s.numpy().copy(), float(e.item()), t.numpy().copy()


def _run_threads(fn, args, n_workers=4):
    with ThreadPoolExecutor(max_workers=n_workers) as ex:
        futs = [ex.submit(fn, a) for a in args]
        return [f.result(timeout=TIMEOUT) for f in futs]


def test_concurrent_matmul_and_reductions_match_serial():
    seeds = list(range(8))
    serial = [_work(s) for s in seeds]
    parallel = _run_threads(_work, seeds)
    for ser, par in zip(serial, parallel):
        for x, y in zip(ser, par):
            np.testing.assert_array_equal(x, y)
    # And the values are right, not just consistent.
    a, b = _inputs(0)
    np.testing.assert_allclose(serial[0][0], a @ b, rtol=1e-4, atol=1e-3)


def test_threads_sharing_one_tensor():
    a, b = _inputs(42)
    x, y = cp.from_numpy(a), cp.from_numpy(b)
    expected = (x @ y).numpy().copy()

    def job(_):
        return (x @ y).numpy().copy(), x.sum().item(), x[3:7, ::2].numpy().copy()

    results = _run_threads(job, range(16))
    for m, s, sl in results:
        np.testing.assert_array_equal(m, expected)
        assert s == results[0][1]
        np.testing.assert_array_equal(sl, a[3:7, ::2])


def test_large_op_in_two_threads_no_deadlock():
    x = cp.from_numpy(np.linspace(-3, 3, 1 << 20, dtype=np.float32))
    ref = np.exp(x.numpy())
    done = []

    def job():
        for _ in range(3):
            out = x.exp()
            done.append(out.numpy().copy())

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), "thread did not finish: deadlock?"
    assert len(done) == 6
    for d in done:
        np.testing.assert_allclose(d, ref, rtol=1e-6)


def test_creation_and_numpy_export_from_threads():
    def job(seed):
        a = np.arange(seed, seed + 1000, dtype=np.float64).reshape(10, 100)
        t = cp.tensor(a)
        t[0] = -1.0
        b = a.copy()
        b[0] = -1.0
        np.testing.assert_array_equal(t.numpy(), b)
        np.testing.assert_array_equal(t.t().numpy(), b.T)
        return t.sum().item() == b.sum()

    assert all(_run_threads(job, range(32)))


def test_concurrent_inplace_writes_to_distinct_tensors():
    tensors = [cp.zeros(1000) for _ in range(8)]

    def job(i):
        t = tensors[i]
        for k in range(50):
            t[k] = float(i)
        t += 1
        return t.numpy().copy()

    outs = _run_threads(job, range(8))
    for i, o in enumerate(outs):
        expected = np.ones(1000, np.float32)
        expected[:50] = i + 1
        np.testing.assert_array_equal(o, expected)


def test_seeded_rng_is_thread_safe():
    cp.manual_seed(7)

    def job(_):
        return cp.rand(1000).numpy().copy()

    outs = _run_threads(job, range(8))
    for o in outs:
        assert o.shape == (1000,) and (o >= 0).all() and (o < 1).all()
    # All draws come from one generator: no two threads got the same stream.
    assert len({o.tobytes() for o in outs}) == 8


@pytest.mark.parametrize("n_threads", [2, 4])
def test_reductions_under_contention(n_threads):
    a = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)
    x = cp.from_numpy(a)
    ref = (x.sum(dim=0).numpy().copy(), x.max().item(), x.argmax(dim=1).numpy().copy())

    def job(_):
        return x.sum(dim=0).numpy().copy(), x.max().item(), x.argmax(dim=1).numpy().copy()

    for out in _run_threads(job, range(4 * n_threads), n_workers=n_threads):
        np.testing.assert_array_equal(out[0], ref[0])
        assert out[1] == ref[1]
        np.testing.assert_array_equal(out[2], ref[2])
    np.testing.assert_allclose(ref[0], a.sum(axis=0), rtol=1e-4, atol=1e-3)
