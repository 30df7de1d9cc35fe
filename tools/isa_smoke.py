"""A short run through every CPU kernel family, checked against NumPy, for CPUs
that tests cannot easily be run on (scripts/check_portable.sh runs it under an
emulated SSE4.2-only CPU). Prints the kernels' SIMD level; exits non-zero on a
wrong result, and a missing instruction would kill it with SIGILL.

Usage: python tools/isa_smoke.py [EXPECTED_CAPABILITY]
"""

from __future__ import annotations

import sys

import numpy as np

import candle_py as cp
import candle_py.nn.functional as F


def close(name: str, got: cp.Tensor, want: np.ndarray, tol: float = 1e-4) -> None:
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol, err_msg=name)
    print(f"  {name:12s} ok")


def main() -> int:
    rng = np.random.default_rng(0)
    cap = cp.backends.cpu.get_cpu_capability()
    print(f"candle_py {cp.__version__}, cpu capability {cap}")
    if len(sys.argv) > 1 and cap != sys.argv[1]:
        print(f"expected {sys.argv[1]}")
        return 1
    a = rng.standard_normal((96, 130)).astype(np.float32)
    b = rng.standard_normal((130, 70)).astype(np.float32)
    close("matmul", cp.from_numpy(a) @ cp.from_numpy(b), a @ b)  # the gemm crate's kernels
    ba = rng.standard_normal((3, 13, 20)).astype(np.float32)
    bb = rng.standard_normal((3, 20, 17)).astype(np.float32)
    close("bmm", cp.from_numpy(ba) @ cp.from_numpy(bb), ba @ bb)  # the small batched products
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    want = np.zeros((2, 4, 7, 9), np.float32)
    for i in range(7):
        for j in range(9):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i : i + 3, j : j + 3], w)
    close("conv2d", F.conv2d(cp.from_numpy(x), cp.from_numpy(w)), want)
    r = rng.standard_normal((6, 37)).astype(np.float32)
    e = np.exp(r - r.max(1, keepdims=True))
    close("softmax", F.softmax(cp.from_numpy(r), dim=1), e / e.sum(1, keepdims=True))
    mu, var = r.mean(1, keepdims=True), r.var(1, keepdims=True)
    close("layer_norm", F.layer_norm(cp.from_numpy(r), (37,)), (r - mu) / np.sqrt(var + 1e-5))
    close("silu", F.silu(cp.from_numpy(r)), r / (1 + np.exp(-r)))
    close("sum", cp.from_numpy(r).sum(dim=1), r.sum(1))
    q = rng.standard_normal((2, 5, 8)).astype(np.float32)
    s = q @ q.transpose(0, 2, 1) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    close("sdpa", F.scaled_dot_product_attention(cp.from_numpy(q), cp.from_numpy(q), cp.from_numpy(q)), (p / p.sum(-1, keepdims=True)) @ q)
    # Head dim 16 with a causal mask: the register-tiled products, forward and backward.
    q, k, v, g = (rng.standard_normal((2, 13, 16)).astype(np.float32) for _ in range(4))
    s = q @ k.transpose(0, 2, 1) / 4 + np.triu(np.full((13, 13), -np.inf, np.float32), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    qt, kt, vt = (cp.from_numpy(a).requires_grad_() for a in (q, k, v))
    close("sdpa d16", F.scaled_dot_product_attention(qt, kt, vt, is_causal=True), p @ v)
    (F.scaled_dot_product_attention(qt, kt, vt, is_causal=True) * cp.from_numpy(g)).sum().backward()
    dp = g @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / 4
    close("sdpa d16 dq", qt.grad, ds @ k)
    close("sdpa d16 dk", kt.grad, ds.transpose(0, 2, 1) @ q)
    close("sdpa d16 dv", vt.grad, p.transpose(0, 2, 1) @ g)
    t = cp.from_numpy(r).requires_grad_()
    F.cross_entropy(t, cp.tensor([0, 3, 36, 7, 1, 2])).backward()
    sm = e / e.sum(1, keepdims=True)
    sm[np.arange(6), [0, 3, 36, 7, 1, 2]] -= 1
    close("backward", t.grad, sm / 6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
