"""Sparse COO tensors against PyTorch: the cases of tests/sparse_cases.py compared with
tests/fixtures/sparse (made by tools/make_fixtures_sparse.py), then what candle_py does
beyond PyTorch (ops without a sparse kernel read the dense value) and its refusals."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import candle_py as cp
from fixture_cases import FIXTURES, check_case, load_fixture
from sparse_cases import CASES

META, ARRAYS = load_fixture("sparse")
FIXTURE = FIXTURES / "sparse"


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def _s() -> Any:
    return cp.sparse_coo_tensor([[0, 1, 1, 0], [2, 0, 2, 2]], [3.0, 4.0, 5.0, 1.0], (2, 3))


DENSE = np.array([[0.0, 0.0, 4.0], [4.0, 0.0, 5.0]], dtype=np.float32)


def test_ops_without_sparse_kernel_use_the_dense_value() -> None:
    s = _s()
    np.testing.assert_allclose(cp.exp(s).numpy(), np.exp(DENSE), rtol=1e-6)
    np.testing.assert_allclose(cp.cat([s, s]).numpy(), np.concatenate([DENSE, DENSE]))
    np.testing.assert_allclose(s[1].numpy(), DENSE[1])
    np.testing.assert_allclose(s.max().item(), 5.0)
    assert isinstance(s, cp.Tensor) and s.is_sparse and not cp.exp(s).is_sparse


def test_dense_value_follows_the_values() -> None:
    s = _s()
    np.testing.assert_allclose(cp.exp(s).numpy(), np.exp(DENSE), rtol=1e-6)  # builds the dense value
    s.mul_(2)
    np.testing.assert_allclose(cp.exp(s).numpy(), np.exp(2 * DENSE), rtol=1e-6)
    s.neg_()
    np.testing.assert_allclose((cp.zeros(2, 3) + s).numpy(), -2 * DENSE)
    s._values().requires_grad_(True)
    y = (cp.relu(-s) * cp.arange(6.0).reshape(2, 3)).sum()  # through the dense value
    y.backward()
    # d/ds of relu(-s) * w at the entries (all negative, so relu passes): -w
    np.testing.assert_allclose(s.grad.to_dense().numpy(), [[0.0, 0.0, -2.0], [-3.0, 0.0, -5.0]])


def test_gradient_through_dense_fallback_matches_masked_gradient() -> None:
    v = cp.tensor([3.0, 4.0, 5.0, 1.0], requires_grad=True)
    s = cp.sparse_coo_tensor([[0, 1, 1, 0], [2, 0, 2, 2]], v, (2, 3))
    (cp.tanh(s) * 2).sum().backward()  # tanh(0) = 0 elsewhere: only the entries get gradient
    t = np.tanh(DENSE)
    g = 2 * (1 - t**2)
    np.testing.assert_allclose(v.grad.numpy(), [g[0, 2], g[1, 0], g[1, 2], g[0, 2]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "method", ["add_", "zero_", "copy_", "fill_", "index_add_", "clamp_", "__setitem__", "__iadd__", "retain_grad", "register_hook"]
)
def test_writes_that_would_miss_the_values_are_refused(method: str) -> None:
    s = _s()
    with pytest.raises(NotImplementedError, match=method):
        getattr(s, method)(1)
    np.testing.assert_allclose(s.to_dense().numpy(), DENSE)


def test_bad_input_is_named() -> None:
    with pytest.raises(RuntimeError, match=r"sparse_coo_tensor: size is inconsistent with indices: for dim 0, size is 3 but found index 5"):
        cp.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,))  # checked always (torch only with check_invariants)
    with pytest.raises(RuntimeError, match="negative index -1"):
        cp.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (3,))
    with pytest.raises(cp.ShapeError, match="same nnz"):
        cp.sparse_coo_tensor([[0, 1]], [1.0], (3,))
    with pytest.raises(cp.ShapeError, match=r"values has incorrect size"):
        cp.sparse_coo_tensor([[0, 1]], cp.ones(2, 3), (3, 2))
    with pytest.raises(RuntimeError, match="without entries"):
        cp.sparse_coo_tensor(cp.zeros((1, 0), dtype=cp.int64), cp.zeros(0))
    with pytest.raises(cp.ShapeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)"):
        cp.mm(_s(), cp.ones(4, 2))
    with pytest.raises(cp.DTypeError, match="mm: expected scalar type"):
        cp.mm(_s(), cp.ones(3, 2, dtype=cp.float64))
    with pytest.raises(NotImplementedError, match="layout"):
        cp.ones(2).to_sparse(layout=cp.strided)
    with pytest.raises(TypeError, match="numpy"):
        _s().numpy()
    with pytest.raises(cp.ShapeError, match="sparse operands differ"):
        _s() + cp.sparse_coo_tensor([[0]], [1.0], (4,))


def test_pickle_deepcopy_repr() -> None:
    s = _s()
    for t in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert t.is_sparse and not t.is_coalesced() and t.shape == (2, 3)
        np.testing.assert_allclose(t.to_dense().numpy(), DENSE)
    r = repr(s.coalesce())
    assert r.startswith("tensor(indices=tensor([[0, 1, 1],\n                       [2, 0, 2]]),\n       values=tensor([4., 4., 5.]),")
    assert r.endswith("size=(2, 3), nnz=3, layout=candle_py.sparse_coo)")
    assert "requires_grad=True" in repr(_s().requires_grad_())
    assert repr(cp.strided) == "candle_py.strided" and pickle.loads(pickle.dumps(cp.sparse_coo)) is cp.sparse_coo


def test_grad_slot() -> None:
    s = _s().requires_grad_()
    cp.sparse.sum(s).backward()
    g = s.grad
    assert g.is_sparse and g.is_coalesced()  # the repeated entry (0, 2) once
    np.testing.assert_allclose(g.to_dense().numpy(), DENSE != 0)
    s.grad = None
    assert s.grad is None
    s.grad = g
    assert s.grad is not None
    s.grad = cp.ones(2, 3)  # read at the entries
    np.testing.assert_allclose(s.grad.to_dense().numpy(), DENSE != 0)
    with pytest.raises(RuntimeError, match="different size"):
        s.grad = cp.ones(3, 3)


def test_gcn_layer_never_builds_the_dense_adjacency() -> None:
    # A 30000-node graph: its dense adjacency (3.6 GB) is never built by spmm, mm or sum.
    n = 30000
    rng = np.random.default_rng(0)
    e = rng.integers(0, n, (2, 60000))
    adj = cp.sparse_coo_tensor(e, cp.ones(e.shape[1]), (n, n)).coalesce()
    x = cp.randn(n, 8)
    w = cp.randn(8, 4, requires_grad=True)
    y = cp.spmm(adj, x @ w)
    y.sum().backward()
    ref = np.zeros((n, 4), dtype=np.float32)
    np.add.at(ref, adj.indices()[0].numpy(), (x @ w).detach().numpy()[adj.indices()[1].numpy()] * adj.values().numpy()[:, None])
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-4, atol=1e-4)
    assert w.grad is not None and cp.sparse.sum(adj).item() == e.shape[1]


def test_load_sparse_tensors_saved_by_torch() -> None:
    f = cp.load(str(FIXTURE / "torch_saved.pt"))
    for k, s in f["sparse"].items():
        assert s.is_sparse and s.is_coalesced() == f["coalesced"][k], k
        assert s.dtype == f["dense"][k].dtype, k
        np.testing.assert_array_equal(s.to_dense().numpy(), f["dense"][k].numpy(), err_msg=k)


def test_save_load_round_trip(tmp_path: Path) -> None:
    s = _s()
    cp.save({"s": s, "c": s.coalesce(), "layout": cp.sparse_coo}, str(tmp_path / "s.pt"))
    back = cp.load(str(tmp_path / "s.pt"))
    assert back["layout"] is cp.sparse_coo and back["s"].is_sparse and not back["s"].is_coalesced() and back["c"].is_coalesced()
    np.testing.assert_array_equal(back["s"]._indices().numpy(), s._indices().numpy())
    np.testing.assert_allclose(back["c"].to_dense().numpy(), DENSE)


def test_load_refuses_a_sparse_tensor_with_bad_indices(tmp_path: Path) -> None:
    # cp.save checks nothing it writes, so forge the record: an index past the size.
    bad = cp.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,))
    bad._size = cp.Size([1])
    cp.save(bad, str(tmp_path / "bad.pt"))
    with pytest.raises(cp.serialization.UnpicklingError, match="bad sparse tensor: .*size is inconsistent with indices"):
        cp.load(str(tmp_path / "bad.pt"))
