"""Processes and threads: forked children run parallel ops (instead of waiting for
the parent's pool threads, which do not exist in the child), spawn/forkserver
workers import and compute, and `set_num_threads` / `get_num_threads` behave as
torch's (tests/test_threads.py covers several Python threads in one process)."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
from typing import Any, List

import numpy as np
import pytest

import candle_py as cp

F = cp.nn.functional
TIMEOUT = 180  # seconds; a hang fails the test instead of the whole run


def battery(seed: int) -> List[float]:
    """Ops large enough to go parallel (GEMM, conv, norms, softmax, reductions,
    autograd, an optimizer step, NumPy export), reduced to a few numbers."""
    rng = np.random.default_rng(seed)
    cp.manual_seed(seed)  # nn.Linear's initial weights
    a = cp.tensor(rng.standard_normal((384, 512), dtype=np.float32))
    b = cp.tensor(rng.standard_normal((512, 384), dtype=np.float32))
    x = cp.tensor(rng.standard_normal((8, 16, 32, 32), dtype=np.float32), requires_grad=True)
    w = cp.tensor(rng.standard_normal((16, 16, 3, 3), dtype=np.float32) * 0.1, requires_grad=True)
    out = []
    out.append(float((a @ b).sum().item()))
    out.append(float(cp.bmm(a.reshape(4, 96, 512), b.unsqueeze(0).expand(4, 512, 384).contiguous()).sum().item()))
    y = F.conv2d(x, w, padding=1)
    y = F.layer_norm(y, (32,))
    y = F.batch_norm(y, None, None, training=True)
    loss = F.softmax(y, dim=-1).pow(2).mean() + y.relu().mean()
    loss.backward()
    out.append(float(loss.item()))
    out.append(float(x.grad.abs().sum().item()))
    lin = cp.nn.Linear(512, 512)
    opt = cp.optim.Adam(lin.parameters(), lr=1e-3)
    lin(a).square().mean().backward()
    opt.step()
    out.append(float(lin.weight.sum().item()))
    out.append(float((a * 3 + 1).exp().clamp(max=1e3).numpy().sum()))
    q = cp.tensor(rng.standard_normal((2, 4, 256, 64), dtype=np.float32))
    out.append(float(F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().item()))
    return out


def _child(seed: int) -> List[float]:
    return battery(seed)


def _child_threads(_: Any) -> int:
    return cp.get_num_threads()


def run_pool(method: str, fn: Any, args: List[Any]) -> List[Any]:
    ctx = mp.get_context(method)
    with ctx.Pool(2) as pool:
        return pool.map_async(fn, args).get(timeout=TIMEOUT)


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_fork_pool_after_parallel_work_in_the_parent() -> None:
    expected = [battery(s) for s in (1, 2)]  # the parent's pools are now running
    got = run_pool("fork", _child, [1, 2])
    np.testing.assert_allclose(np.array(got), np.array(expected), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawn_and_forkserver_workers(method: str) -> None:
    if method not in mp.get_all_start_methods():
        pytest.skip(f"{method} unavailable")
    expected = battery(3)
    got = run_pool(method, _child, [3])
    np.testing.assert_allclose(np.array(got[0]), np.array(expected), rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_bare_fork_child_computes_and_exits() -> None:
    battery(0)
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, report, leave without running pytest's teardown
        try:
            vals = battery(4)
            os.write(wfd, repr(vals).encode())
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(wfd)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    np.testing.assert_allclose(np.array(eval(data)), np.array(battery(4)), rtol=1e-4, atol=1e-3)


def test_forked_children_keep_the_thread_count() -> None:
    before = cp.get_num_threads()
    assert run_pool("fork", _child_threads, [0, 1]) == [before, before]


def test_set_num_threads_changes_the_pool_and_results_agree() -> None:
    default = cp.get_num_threads()
    assert default >= 1
    ref = battery(5)
    try:
        cp.set_num_threads(1)
        assert cp.get_num_threads() == 1
        one = battery(5)
        cp.set_num_threads(3)
        assert cp.get_num_threads() == 3
        three = battery(5)
    finally:
        cp.set_num_threads(default)
    assert cp.get_num_threads() == default
    np.testing.assert_allclose(one, ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(three, ref, rtol=1e-4, atol=1e-3)


def test_set_num_threads_errors() -> None:
    with pytest.raises(RuntimeError, match="positive integer"):
        cp.set_num_threads(0)
    with pytest.raises(RuntimeError, match="positive integer"):
        cp.set_num_threads(-2)
    with pytest.raises(TypeError, match="must be int"):
        cp.set_num_threads(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be int"):
        cp.set_num_threads("2")  # type: ignore[arg-type]


def _fresh(code: str, **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout.strip()


def test_environment_variables_set_the_default() -> None:
    code = "import candle_py as cp; print(cp.get_num_threads())"
    assert _fresh(code, OMP_NUM_THREADS="1") == "1"
    assert _fresh(code, OMP_NUM_THREADS="3") == "3"
    assert _fresh(code, OMP_NUM_THREADS="3", RAYON_NUM_THREADS="2") == "2"


def test_interop_threads_set_once_as_torch() -> None:
    code = (
        "import candle_py as cp\n"
        "assert cp.get_num_interop_threads() >= 1\n"
        "cp.set_num_interop_threads(3)\n"
        "assert cp.get_num_interop_threads() == 3\n"
        "try:\n"
        "    cp.set_num_interop_threads(2)\n"
        "except RuntimeError as e:\n"
        "    print('refused', 'cannot set number of interop threads' in str(e))\n"
    )
    assert _fresh(code) == "refused True"
    with pytest.raises(RuntimeError, match="positive integer"):
        cp.set_num_interop_threads(0)


def test_own_pool_keeps_the_callers_thread_state() -> None:
    """With our pool active (after set_num_threads; also in forked children), ops run
    on its threads but see the calling thread's grad mode and autocast, and an
    exception raised by a Python hook during backward still comes back."""
    default = cp.get_num_threads()
    try:
        cp.set_num_threads(2)
        x = cp.randn(512, 512, requires_grad=True)
        with cp.no_grad():
            assert not (x @ x).requires_grad
            assert not F.softmax(x, -1).requires_grad
        assert (x @ x).requires_grad
        with cp.autocast("cpu", dtype=cp.bfloat16):
            assert (x @ x).dtype == cp.bfloat16
        assert (x @ x).dtype == cp.float32
        y = (x @ x).relu()

        def boom(g: Any) -> None:
            raise ValueError("from the hook")

        y.register_hook(boom)
        with pytest.raises(ValueError, match="from the hook"):
            y.sum().backward()
        z = x * 2
        z.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full((512, 512), 2.0, np.float32))
    finally:
        cp.set_num_threads(default)
