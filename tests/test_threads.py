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


# ---------------------------------------------------------------- models from threads


class _Net:
    """Factory for a small model with most layer families (conv, norm, pool,
    linear, attention, activations), built deterministically from a seed."""

    @staticmethod
    def build(seed: int):
        from candle_py import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)
                self.bn = nn.BatchNorm2d(8)
                self.pool = nn.MaxPool2d(2)
                self.proj = nn.Linear(8, 32)
                self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
                self.norm = nn.LayerNorm(32)
                self.head = nn.Linear(32, 5)

            def forward(self, x):
                h = self.pool(cp.relu(self.bn(self.conv(x))))  # (N, 8, 8, 8)
                h = h.flatten(2).transpose(1, 2)  # (N, 64, 8)
                h = nn.functional.gelu(self.proj(h))
                a, _ = self.attn(h, h, h, need_weights=False)
                h = self.norm(h + a)
                return self.head(h.mean(dim=1))

        cp.manual_seed(seed)
        return Net()

    @staticmethod
    def batch(seed: int, n: int = 16):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
        y = rng.integers(0, 5, n)
        return cp.from_numpy(x), cp.tensor(y)


def test_eight_threads_forward_on_one_model_match_serial():
    model = _Net.build(0).eval()
    inputs = [_Net.batch(100 + i)[0] for i in range(8)]

    def fwd(x):
        with cp.no_grad():
            return model(x).numpy().copy()

    serial = [fwd(x) for x in inputs]
    for _ in range(2):
        parallel = _run_threads(fwd, inputs, n_workers=8)
        for s, p in zip(serial, parallel):
            np.testing.assert_array_equal(s, p)
    assert all(np.isfinite(s).all() and s.shape == (16, 5) for s in serial)


def _train_steps(model, seed: int, steps: int = 3):
    """forward + backward + SGD step, in training mode; returns the losses,
    the last gradients and the final parameters."""
    from candle_py import nn

    model.train()
    opt = cp.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for k in range(steps):
        x, y = _Net.batch(seed * 10 + k)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    params = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    bufs = {n: b.numpy().copy() for n, b in model.named_buffers()}
    return losses, grads, params, bufs


def test_threads_training_separate_models_match_serial():
    seeds = list(range(8))
    serial = [_train_steps(_Net.build(s), s) for s in seeds]
    models = [_Net.build(s) for s in seeds]  # built serially: the seed RNG is global
    parallel = _run_threads(lambda s: _train_steps(models[s], s), seeds, n_workers=8)
    for s, p in zip(serial, parallel):
        assert s[0] == p[0]  # losses, bit for bit
        for a, b in zip(s[1:], p[1:]):
            assert a.keys() == b.keys()
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert serial[0][0][-1] < serial[0][0][0] + 1.0  # it trains (sanity, not a benchmark)


def test_threads_training_one_shared_model_no_deadlock_and_exact_accumulation():
    # Several threads run backward on the same parameters at once. Gradient
    # slots are locked only with the GIL released (a thread blocking on a slot
    # while holding the GIL used to deadlock against one that held the slot
    # and waited for the GIL), and every contribution is added exactly once.
    from candle_py import nn

    cp.manual_seed(1)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    x = cp.from_numpy(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
    model(x).square().sum().backward()
    one = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}

    def churn(_):
        for _ in range(50):
            model.zero_grad()
            model(x).square().sum().backward()

    _run_threads(churn, range(4), n_workers=4)  # must finish (TIMEOUT), whatever the values

    model.zero_grad()
    n_threads, reps = 4, 25

    def accumulate(_):
        for _ in range(reps):
            model(x).square().sum().backward()

    _run_threads(accumulate, range(n_threads), n_workers=n_threads)
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), n_threads * reps * one[n], rtol=1e-4, atol=1e-4, err_msg=n)


_MEMBER_SCRIPT = r"""
import threading, time
import numpy as np
import candle_py as cp
cp.set_num_threads(2)
a = cp.from_numpy(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
ref = (a @ a).numpy()  # the main thread builds the pool and joins it as worker 0
out = []
def job():
    out.append((a @ a).numpy())  # another thread hands its work to the pool
t = threading.Thread(target=job)
t.start()
time.sleep(0.5)  # meanwhile the main thread is busy in Python, not in the pool
t.join(30)
assert not t.is_alive(), "a worker thread's op waited on the main thread"
np.testing.assert_array_equal(out[0], ref)
cp.set_num_threads(3)  # a new pool the main thread is not part of
np.testing.assert_allclose((a @ a).numpy(), ref, rtol=1e-5, atol=1e-4)
cp.set_num_threads(2)
np.testing.assert_allclose((a @ a).sum(0).numpy(), ref.sum(0), rtol=1e-4, atol=1e-2)
print("ok")
"""


def test_main_thread_in_the_pool_never_blocks_other_threads() -> None:
    """The main thread is worker 0 of the pool (ops run where they are called). Work
    that another thread hands the pool while the main thread sits in Python must still
    run, and resizing the pool must keep working (ops/pool.rs)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _MEMBER_SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
