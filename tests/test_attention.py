"""`F.scaled_dot_product_attention` against PyTorch fixtures (made by
tools/make_fixtures_attention.py; torch is never imported here), plus checks
of memory use, dropout statistics and error messages."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp
import candle_py.nn.functional as F

FIXTURES = Path(__file__).parent / "fixtures" / "attention"
CASES = sorted(p.stem for p in FIXTURES.glob("*.safetensors"))


def _np(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.detach().float() if t.dtype in (cp.float16, cp.bfloat16) else t.detach())


def test_fixtures_present() -> None:
    assert len(CASES) >= 15, CASES


@pytest.mark.parametrize("name", CASES)
def test_matches_torch(name: str) -> None:
    path = FIXTURES / f"{name}.safetensors"
    t = cp.safetensors.load_file(path)
    meta = cp.safetensors.load_metadata(path)
    kwargs = json.loads(meta["kwargs"])
    half = meta["dtype"] in ("float16", "bfloat16")
    tol = dict(atol=2e-2, rtol=2e-2) if half else dict(atol=1e-6 if meta["dtype"] == "float64" else 1e-4, rtol=0)
    q, k, v = (t[n].detach().requires_grad_(True) for n in ("query", "key", "value"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=t.get("attn_mask"), **kwargs)
    assert out.dtype == t["output"].dtype
    assert tuple(out.shape) == tuple(t["output"].shape)
    np.testing.assert_allclose(_np(out), _np(t["output"]), **tol, err_msg=f"{name}: output")
    (out.float() * t["loss_weight"]).sum().backward()
    for n, x in (("query", q), ("key", k), ("value", v)):
        assert x.grad is not None, f"{name}: no gradient for {n}"
        assert tuple(x.grad.shape) == tuple(x.shape)
        np.testing.assert_allclose(_np(x.grad), _np(t[f"grad.{n}"]), **tol, err_msg=f"{name}: grad.{n}")


def _naive(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, causal: bool = False, scale: float | None = None
) -> np.ndarray:
    """softmax(Q K^T * scale + mask) V in float64 NumPy (rows with no key give zeros)."""
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    a = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * s
    if causal:
        L, S = a.shape[-2:]
        a = np.where(np.tril(np.ones((L, S), bool)), a, -np.inf)
    if mask is not None:
        a = a + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    m = a.max(-1, keepdims=True)
    e = np.where(np.isneginf(a), 0.0, np.exp(a - np.where(np.isneginf(m), 0.0, m)))
    z = e.sum(-1, keepdims=True)
    p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return p @ v.astype(np.float64)


def test_matches_candle_op_formula() -> None:
    rng = np.random.default_rng(0)
    qn, kn, vn = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 70, 16), (2, 3, 300, 16), (2, 3, 300, 16)))
    mn = rng.standard_normal((2, 1, 70, 300)).astype(np.float32)
    q, k, v, m = (cp.from_numpy(a) for a in (qn, kn, vn, mn))
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    ref = F.softmax(q @ k.transpose(-2, -1) / 4.0 + m, dim=-1) @ v
    np.testing.assert_allclose(np.asarray(fused), np.asarray(ref), atol=1e-5)
    np.testing.assert_allclose(np.asarray(fused), _naive(qn, kn, vn, mn), atol=1e-5)


def test_fully_masked_rows_are_zero_with_zero_grads() -> None:
    rng = np.random.default_rng(1)
    q, k, v = (
        cp.from_numpy(rng.standard_normal(s).astype(np.float32)).requires_grad_(True) for s in ((1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8))
    )
    mask = np.ones((4, 6), bool)
    mask[2] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=cp.from_numpy(mask))
    o = np.asarray(out.detach())
    assert np.all(o[:, :, 2] == 0) and np.all(np.isfinite(o))
    assert np.abs(o[:, :, [0, 1, 3]]).sum() > 0
    out.sum().backward()
    gq = np.asarray(q.grad)
    assert np.all(gq[:, :, 2] == 0) and np.all(np.isfinite(gq))
    assert np.all(np.isfinite(np.asarray(k.grad))) and np.all(np.isfinite(np.asarray(v.grad)))


def test_non_contiguous_inputs() -> None:
    """(B, L, H, D) tensors transposed to (B, H, L, D), as in attention layers."""
    rng = np.random.default_rng(2)
    qn, kn, vn = (rng.standard_normal((2, n, 4, 8)).astype(np.float32) for n in (5, 7, 7))
    q, k, v = (cp.from_numpy(a).transpose(1, 2) for a in (qn, kn, vn))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = _naive(*(a.transpose(0, 2, 1, 3) for a in (qn, kn, vn)), causal=True)
    np.testing.assert_allclose(np.asarray(out), ref, atol=1e-5)


STRIDED_CASES = [
    # (B, L, S, Hq, Hkv, D, Dv, mask kind, causal, gqa, dtype)
    (2, 28, 28, 12, 12, 32, 32, "pad", False, False, np.float32),  # BERT-style padding mask, L not a multiple of 16
    (3, 74, 74, 4, 4, 16, 16, "pad", False, False, np.float32),  # two K panels, last one partial
    (1, 70, 130, 2, 2, 16, 24, "full", False, False, np.float32),  # full float mask, Lq != Lk, dv padded to 32
    (2, 37, 37, 4, 4, 64, 64, None, True, False, np.float32),  # causal, odd length
    (2, 20, 33, 8, 2, 16, 16, "pad", False, True, np.float32),  # grouped heads read in place
    (2, 9, 11, 3, 3, 8, 8, "pad", False, False, np.float64),  # the generic (non-AVX-512) path
]


@pytest.mark.parametrize(
    "case",
    STRIDED_CASES,
    ids=lambda c: f"L{c[1]}S{c[2]}H{c[3]}-{c[4]}{'-causal' if c[8] else ''}{'-gqa' if c[9] else ''}-{np.dtype(c[10]).name}",
)
def test_transposed_views_read_in_place_match_contiguous(case) -> None:
    """(B, L, H, D) projections viewed as (B, H, L, D): the kernel reads them where they
    are and writes its output in (B, L, H, Dv) order. Values must equal the contiguous
    call exactly, gradients too, and the caller's transpose(1, 2) must be contiguous."""
    B, L, S, Hq, Hkv, D, Dv, mk, causal, gqa, dt = case
    rng = np.random.default_rng(L * 31 + S)
    qn = rng.standard_normal((B, L, Hq, D)).astype(dt)
    kn = rng.standard_normal((B, S, Hkv, D)).astype(dt)
    vn = rng.standard_normal((B, S, Hkv, Dv)).astype(dt)
    mask = None
    if mk == "pad":
        keep = np.ones((B, S), bool)
        keep[0, S - 5 :] = False
        mask = cp.from_numpy(keep.reshape(B, 1, 1, S))
    elif mk == "full":
        mask = cp.from_numpy(rng.standard_normal((B, 1, L, S)).astype(dt))
    kw = dict(attn_mask=mask, is_causal=causal, enable_gqa=gqa)

    views = [cp.from_numpy(a).requires_grad_(True) for a in (qn, kn, vn)]
    out_v = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in views), **kw)
    conts = [cp.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1, 3))).requires_grad_(True) for a in (qn, kn, vn)]
    out_c = F.scaled_dot_product_attention(*conts, **kw)

    assert tuple(out_v.shape) == (B, Hq, L, Dv)
    np.testing.assert_array_equal(np.asarray(out_v.detach()), np.asarray(out_c.detach()))
    if Hq > 1:
        assert out_v.transpose(1, 2).is_contiguous(), "output not stored in (B, L, H, Dv) order"
    if not gqa:
        kref, vref = (a.transpose(0, 2, 1, 3) for a in (kn, vn))
        m = None if mask is None else np.asarray(mask)
        ref = _naive(qn.transpose(0, 2, 1, 3), kref, vref, m, causal)
        np.testing.assert_allclose(np.asarray(out_v.detach()), ref, atol=1e-5 if dt == np.float32 else 1e-12)

    w = rng.standard_normal((B, Hq, L, Dv)).astype(dt)
    (out_v * cp.from_numpy(w)).sum().backward()
    (out_c * cp.from_numpy(w)).sum().backward()
    for tv, tc in zip(views, conts):
        g = np.asarray(tv.grad).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(g, np.asarray(tc.grad), rtol=0, atol=1e-6 if dt == np.float32 else 1e-12)
        assert np.abs(g).sum() > 0


def test_views_of_a_fused_qkv_projection_read_in_place() -> None:
    """q, k, v as views of one (B, L, 3, H, D) projection (rows 3*H*D long, as after
    a fused QKV linear): same values and gradients as contiguous copies, and the
    output still comes back in (B, L, H, D) order."""
    B, L, H, D = 2, 37, 4, 16
    rng = np.random.default_rng(7)
    qkv_n = rng.standard_normal((B, L, 3, H, D)).astype(np.float32)
    keep = np.ones((B, L), bool)
    keep[1, L - 6 :] = False
    mask = cp.from_numpy(keep.reshape(B, 1, 1, L))
    qkv = cp.from_numpy(qkv_n).requires_grad_(True)
    out_v = F.scaled_dot_product_attention(*(qkv[:, :, i].transpose(1, 2) for i in range(3)), attn_mask=mask)
    conts = [cp.from_numpy(np.ascontiguousarray(qkv_n[:, :, i].transpose(0, 2, 1, 3))).requires_grad_(True) for i in range(3)]
    out_c = F.scaled_dot_product_attention(*conts, attn_mask=mask)
    np.testing.assert_array_equal(np.asarray(out_v.detach()), np.asarray(out_c.detach()))
    assert out_v.transpose(1, 2).is_contiguous(), "output not stored in (B, L, H, D) order"
    ref = _naive(*(qkv_n[:, :, i].transpose(0, 2, 1, 3) for i in range(3)), np.asarray(mask), False)
    np.testing.assert_allclose(np.asarray(out_v.detach()), ref, atol=1e-5)
    w = rng.standard_normal((B, H, L, D)).astype(np.float32)
    (out_v * cp.from_numpy(w)).sum().backward()
    (out_c * cp.from_numpy(w)).sum().backward()
    g = np.asarray(qkv.grad)
    for i, tc in enumerate(conts):
        np.testing.assert_allclose(g[:, :, i].transpose(0, 2, 1, 3), np.asarray(tc.grad), rtol=0, atol=1e-6)
        assert np.abs(g[:, :, i]).sum() > 0
    # The gradients come back in the views' (B, L, H, D) order, so the transpose
    # backward of each view is contiguous (no transposing copy before the concatenation).
    views = [qkv[:, :, i].transpose(1, 2) for i in range(3)]
    grads = cp.autograd.grad((F.scaled_dot_product_attention(*views, attn_mask=mask) * cp.from_numpy(w)).sum(), views)
    for i, gv in enumerate(grads):
        assert gv.transpose(1, 2).is_contiguous(), f"gradient {i} not stored in (B, L, H, D) order: strides {gv.stride()}"
        np.testing.assert_allclose(np.asarray(gv), np.asarray(conts[i].grad), rtol=0, atol=1e-6)


def test_broadcast_key_view_gradient_is_summed_in_its_own_layout() -> None:
    """A key/value transposed head view shared by every batch entry (shape (H, S, D)
    against a (B, H, L, D) query): its gradient, stored (S, H, D), is the sum over the
    batch, row by row, equal to the contiguous call's."""
    B, L, S, H, D = 3, 21, 34, 4, 16
    rng = np.random.default_rng(11)
    qn = rng.standard_normal((B, H, L, D)).astype(np.float32)
    kn, vn = (rng.standard_normal((S, H, D)).astype(np.float32) for _ in range(2))
    kv = [cp.from_numpy(a).requires_grad_(True) for a in (kn, vn)]
    kc = [cp.from_numpy(np.ascontiguousarray(a.transpose(1, 0, 2))).requires_grad_(True) for a in (kn, vn)]
    w = cp.from_numpy(rng.standard_normal((B, H, L, D)).astype(np.float32))
    q = cp.from_numpy(qn)
    views = [t.transpose(0, 1) for t in kv]
    grads = cp.autograd.grad((F.scaled_dot_product_attention(q, *views, is_causal=True) * w).sum(), views)
    (F.scaled_dot_product_attention(q, *kc, is_causal=True) * w).sum().backward()
    for gv, tc in zip(grads, kc):
        assert gv.transpose(0, 1).is_contiguous(), f"strides {gv.stride()}"
        np.testing.assert_allclose(np.asarray(gv), np.asarray(tc.grad), rtol=0, atol=1e-5)
        assert np.abs(np.asarray(gv)).sum() > 0


def test_no_grad_result_is_detached() -> None:
    q = cp.randn(1, 2, 3, 4).requires_grad_(True)
    with cp.no_grad():
        out = F.scaled_dot_product_attention(q, q, q)
    assert not out.requires_grad
    assert F.scaled_dot_product_attention(q, q, q).requires_grad


def test_large_batch_many_blocks_against_numpy() -> None:
    rng = np.random.default_rng(3)
    qn, kn, vn = (rng.standard_normal((3, 4, 333, 40)).astype(np.float32) for _ in range(3))
    out = F.scaled_dot_product_attention(*(cp.from_numpy(a) for a in (qn, kn, vn)), is_causal=True)
    np.testing.assert_allclose(np.asarray(out), _naive(qn, kn, vn, causal=True), atol=1e-5)


_LONG = textwrap.dedent(
    """
    import resource, sys, numpy as np
    import candle_py as cp, candle_py.nn.functional as F

    def hwm():
        # Peak RSS (bytes) of this process image: /proc's VmHWM starts afresh at
        # exec, while ru_maxrss is inherited across fork+exec from the parent.
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    L, D = 2048, 32
    rng = np.random.default_rng(0)
    qn, kn, vn = (rng.standard_normal((1, 1, L, D)).astype(np.float32) for _ in range(3))
    q, k, v = (cp.from_numpy(a).requires_grad_(True) for a in (qn, kn, vn))
    g = cp.from_numpy(rng.standard_normal((1, 1, L, D)).astype(np.float32))
    w = cp.randn(1, 1, 64, D).requires_grad_(True)  # warm-up: thread pool, allocator arenas
    F.scaled_dot_product_attention(w, w, w, is_causal=True).sum().backward()
    base = hwm()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (out * g).sum().backward()
    peak = hwm()
    o = np.asarray(out.detach())
    rows = [0, 1, 1000, L - 1]
    s = qn[0, 0, rows] @ kn[0, 0].T / np.sqrt(D)
    s = np.where(np.arange(L)[None, :] <= np.array(rows)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    err = float(np.abs(o[0, 0, rows] - p @ vn[0, 0]).max())
    finite = all(np.isfinite(np.asarray(t.grad)).all() for t in (q, k, v))
    # Control: the unfused formula does build the L x S matrix, and the probe sees it.
    with cp.no_grad():
        ref = F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    naive_peak = hwm()
    print(peak - base, naive_peak - peak, err, finite)
    """
)


def test_long_sequence_never_builds_the_score_matrix() -> None:
    """L = S = 2048: the L x S float32 matrix is 16 MiB; forward + backward must grow
    the peak RSS (VmHWM) by far less (run in a fresh process so the peak is clean),
    while the unfused formula in the same process grows it by at least that much."""
    res = subprocess.run([sys.executable, "-c", _LONG], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    growth, naive_growth, err, finite = res.stdout.split()
    full = 2048 * 2048 * 4
    # Measured about 4.4 MB: some 17 buffers of L x D floats (256 KiB each: output,
    # grads, packed K, dQ partials, autograd's own copies), nothing of L x S.
    assert int(growth) < full // 2, f"peak RSS grew by {int(growth)} bytes (L*S*4 = {full})"
    assert int(naive_growth) >= full // 2, f"the RSS probe missed the unfused L x S matrix ({naive_growth} bytes)"
    assert float(err) < 1e-5
    assert finite == "True"


def _dropout_setup(p: float, L: int = 96, S: int = 128):
    """q = 0 gives uniform attention 1/S; with V = I the output is the (dropped,
    rescaled) attention matrix itself, so every contribution is visible."""
    q = cp.zeros(1, 1, L, 8).requires_grad_(True)
    k = cp.randn(1, 1, S, 8).requires_grad_(True)
    v = cp.from_numpy(np.eye(S, dtype=np.float32)[None, None]).requires_grad_(True)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    return q, k, v, out


def test_dropout_zero_equals_no_dropout() -> None:
    rng = np.random.default_rng(4)
    q, k, v = (cp.from_numpy(rng.standard_normal((2, 2, 9, 8)).astype(np.float32)) for _ in range(3))
    a = np.asarray(F.scaled_dot_product_attention(q, k, v, dropout_p=0.0))
    b = np.asarray(F.scaled_dot_product_attention(q, k, v))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_statistics_and_gradients(p: float) -> None:
    q, k, v, out = _dropout_setup(p)
    o = np.asarray(out.detach())
    S = o.shape[-1]
    zero = o == 0
    assert abs(zero.mean() - p) < 0.03, zero.mean()
    np.testing.assert_allclose(o[~zero], 1.0 / S / (1.0 - p), rtol=1e-5)
    # The expectation is kept: rows sum to 1 on average.
    assert abs(o.sum(-1).mean() - 1.0) < 0.05
    g = cp.randn(*tuple(out.shape))
    (out * g).sum().backward()
    for t in (q, k, v):
        assert np.all(np.isfinite(np.asarray(t.grad)))
    # Backward sees the forward's mask: dV = P_dropped^T dO = out^T dO here.
    np.testing.assert_allclose(np.asarray(v.grad)[0, 0], o[0, 0].T @ np.asarray(g)[0, 0], atol=1e-5)


def test_causal_dropout_gradients_follow_the_forward_mask() -> None:
    """Causal attention with dropout on the tiled float32 path (head dims of 16): with
    V = I the output is the dropped, rescaled P itself, so the keep factors are read off
    it and dQ, dK, dV are checked against the backward's formulas in float64. The query
    block astride the diagonal is where the tiles skip the masked half of P and dS."""
    rng = np.random.default_rng(11)
    L = S = 80
    qn = rng.standard_normal((1, 1, L, S)).astype(np.float32) * 0.3
    kn = rng.standard_normal((1, 1, S, S)).astype(np.float32) * 0.3
    gn = rng.standard_normal((1, 1, L, S)).astype(np.float32)
    q, k = cp.from_numpy(qn).requires_grad_(True), cp.from_numpy(kn).requires_grad_(True)
    v = cp.from_numpy(np.eye(S, dtype=np.float32)[None, None]).requires_grad_(True)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
    (out * cp.from_numpy(gn)).sum().backward()
    o, g = np.asarray(out.detach())[0, 0].astype(np.float64), gn[0, 0].astype(np.float64)
    scale = 1.0 / math.sqrt(S)
    s = qn[0, 0].astype(np.float64) @ kn[0, 0].T.astype(np.float64) * scale
    s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert np.all(o[np.triu_indices(L, 1)] == 0), "dropout output past the causal diagonal"
    f = np.divide(o, p, out=np.zeros_like(o), where=p > 0)  # 0 or 1 / (1 - p_drop)
    kept = f[np.tril_indices(L)]
    assert 0.2 < np.mean(kept == 0) < 0.4
    np.testing.assert_allclose(kept[kept > 0], 1.0 / 0.7, rtol=1e-4)
    ds = p * (g * f - (g * o).sum(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(v.grad)[0, 0], o.T @ g, atol=1e-4)
    np.testing.assert_allclose(np.asarray(q.grad)[0, 0], scale * ds @ kn[0, 0], atol=1e-4)
    np.testing.assert_allclose(np.asarray(k.grad)[0, 0], scale * ds.T @ qn[0, 0], atol=1e-4)


def test_dropout_is_seeded_and_varies() -> None:
    cp.manual_seed(7)
    a = np.asarray(_dropout_setup(0.5)[3].detach())
    b = np.asarray(_dropout_setup(0.5)[3].detach())
    cp.manual_seed(7)
    c = np.asarray(_dropout_setup(0.5)[3].detach())
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_dropout_one_gives_zeros() -> None:
    out = _dropout_setup(1.0)[3]
    assert np.all(np.asarray(out.detach()) == 0)


def test_gradients_match_finite_differences_float64() -> None:
    rng = np.random.default_rng(5)
    base = [rng.standard_normal(s) for s in ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3))]
    mask = rng.standard_normal((3, 5))
    w = rng.standard_normal((1, 2, 3, 3))

    def loss(arrs) -> float:
        t = [cp.from_numpy(a) for a in arrs]
        return float((F.scaled_dot_product_attention(*t, attn_mask=cp.from_numpy(mask)) * cp.from_numpy(w)).sum().item())

    ts = [cp.from_numpy(a).requires_grad_(True) for a in base]
    (F.scaled_dot_product_attention(*ts, attn_mask=cp.from_numpy(mask)) * cp.from_numpy(w)).sum().backward()
    eps = 1e-6
    for i, t in enumerate(ts):
        g = np.asarray(t.grad)
        for idx in [(0, 0, 0, 0), (0, 1, 2, 1)]:
            plus = [a.copy() for a in base]
            minus = [a.copy() for a in base]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            fd = (loss(plus) - loss(minus)) / (2 * eps)
            assert abs(fd - g[idx]) < 1e-6, (i, idx, fd, g[idx])


# -- errors ------------------------------------------------------------------------
def _t(*shape: int) -> cp.Tensor:
    return cp.randn(*shape)


def test_error_rank_too_small() -> None:
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\[8\]"):
        F.scaled_dot_product_attention(_t(8), _t(8), _t(8))


def test_error_batch_dims_do_not_broadcast() -> None:
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\[2, 3, 4, 8\].*\[4, 5, 8\]"):
        F.scaled_dot_product_attention(_t(2, 3, 4, 8), _t(4, 5, 8), _t(4, 5, 8))


def test_error_embedding_dim_mismatch() -> None:
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\[1, 2, 4, 8\].*\[1, 2, 5, 6\]"):
        F.scaled_dot_product_attention(_t(1, 2, 4, 8), _t(1, 2, 5, 6), _t(1, 2, 5, 8))


def test_error_key_value_length_mismatch() -> None:
    with pytest.raises(ValueError, match=r"\[1, 2, 5, 8\].*\[1, 2, 6, 8\]"):
        F.scaled_dot_product_attention(_t(1, 2, 4, 8), _t(1, 2, 5, 8), _t(1, 2, 6, 8))


@pytest.mark.parametrize("mshape", [(3, 5), (4, 6), (3, 1, 4, 5), (2, 2, 2, 4, 5), (5,)])
def test_error_mask_not_broadcastable(mshape) -> None:
    with pytest.raises(ValueError, match=r"attn_mask of shape .*\[2, 2, 4, 5\]"):
        F.scaled_dot_product_attention(_t(2, 2, 4, 8), _t(2, 2, 5, 8), _t(2, 2, 5, 8), attn_mask=cp.zeros(*mshape))


def test_error_mask_and_causal() -> None:
    with pytest.raises(ValueError, match=r"is_causal.*\[4, 5\]"):
        F.scaled_dot_product_attention(_t(1, 4, 8), _t(1, 5, 8), _t(1, 5, 8), attn_mask=cp.zeros(4, 5), is_causal=True)


def test_error_gqa_heads_not_divisible() -> None:
    with pytest.raises(ValueError, match=r"multiple.*\[1, 4, 3, 8\].*\[1, 3, 5, 8\]"):
        F.scaled_dot_product_attention(_t(1, 4, 3, 8), _t(1, 3, 5, 8), _t(1, 3, 5, 8), enable_gqa=True)
    # Without enable_gqa, unequal head counts do not broadcast.
    with pytest.raises(ValueError, match="broadcast"):
        F.scaled_dot_product_attention(_t(1, 4, 3, 8), _t(1, 2, 5, 8), _t(1, 2, 5, 8))


def test_error_dtypes() -> None:
    q = _t(1, 3, 4)
    with pytest.raises(TypeError, match="float64"):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(TypeError, match="int64"):
        i = cp.zeros(1, 3, 4, dtype=cp.int64)
        F.scaled_dot_product_attention(i, i, i)
    with pytest.raises(TypeError, match="attn_mask"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=cp.zeros(3, 3, dtype=cp.int64))
    with pytest.raises(TypeError, match="Tensor"):
        F.scaled_dot_product_attention(np.zeros((1, 3, 4)), q, q)  # type: ignore[arg-type]


def test_error_bad_dropout() -> None:
    q = _t(1, 3, 4)
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=1.5)
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=-0.1)


def test_empty_keys_give_zeros() -> None:
    out = F.scaled_dot_product_attention(_t(1, 3, 4), _t(1, 0, 4), _t(1, 0, 5))
    assert tuple(out.shape) == (1, 3, 5)
    assert np.all(np.asarray(out) == 0)


# ------------------------------------------------------------------ F.rotary_embedding


def _rope_reference(x: np.ndarray, ang: np.ndarray, interleaved: bool) -> np.ndarray:
    """The rotation written out in float64: pairs (2i, 2i+1) or (i, i + D/2)."""
    d = x.shape[-1]
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., : d // 2], x[..., d // 2 :])
    c, s = np.cos(ang), np.sin(ang)
    ra, rb = a * c - b * s, a * s + b * c
    return np.stack([ra, rb], -1).reshape(x.shape) if interleaved else np.concatenate([ra, rb], -1)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("dtype", [cp.float32, cp.float64, cp.bfloat16])
def test_rotary_embedding_values_and_grads(interleaved: bool, dtype: cp.dtype) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 8))
    ang = rng.uniform(-4, 4, (5, 4))
    xt = cp.tensor(x, dtype=dtype, requires_grad=True)
    cos, sin = cp.tensor(np.cos(ang), requires_grad=True), cp.tensor(np.sin(ang))
    y = F.rotary_embedding(xt, cos, sin, interleaved=interleaved)
    assert y.dtype == dtype and y.shape == (2, 3, 5, 8)
    tol = 2e-2 if dtype == cp.bfloat16 else 1e-6
    np.testing.assert_allclose(_np(y), _rope_reference(x, ang, interleaved), atol=tol * 4, rtol=0)
    # A rotation keeps norms: d/dx sum(y^2) = 2x. And d/dcos of sum(y) is sum(a + b) over batch and heads.
    (y.float() ** 2).sum().backward()
    np.testing.assert_allclose(_np(xt.grad), 2 * x, atol=tol * 20, rtol=0)
    if dtype == cp.float64:
        cos.grad = None
        xt.grad = None
        F.rotary_embedding(xt, cos, sin, interleaved=interleaved).sum().backward()
        a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :4], x[..., 4:])
        np.testing.assert_allclose(_np(cos.grad), (a + b).sum((0, 1)), atol=1e-5, rtol=0)


def test_rotary_embedding_errors() -> None:
    x, t = cp.zeros(1, 2, 3, 8), cp.zeros(3, 4)
    with pytest.raises(cp.ShapeError, match=r"rotary_embedding: expected x of shape \[B, H, T, D\].*\[1, 2, 3, 8\], \[2, 4\]"):
        F.rotary_embedding(x, cp.zeros(2, 4), t)
    with pytest.raises(cp.ShapeError, match="rotary_embedding"):
        F.rotary_embedding(cp.zeros(2, 3, 7), t, t)
    with pytest.raises(cp.DTypeError, match="rotary_embedding"):
        F.rotary_embedding(cp.zeros(1, 2, 3, 8, dtype=cp.int64), t, t)
    with pytest.raises(TypeError, match="rotary_embedding\\(\\): argument 'cos'"):
        F.rotary_embedding(x, [1.0], t)
