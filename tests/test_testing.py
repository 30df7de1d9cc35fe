"""`candle_py.testing` against PyTorch's `torch.testing`: the outcomes (error kinds and
messages) of tests/testing_cases.py compared with tests/fixtures/testing (made by
tools/make_fixtures_testing.py), and `make_tensor`'s ranges, dtypes and layouts."""

from __future__ import annotations

import pytest

import candle_py as cp
from fixture_cases import load_fixture
from testing_cases import CASES

META, _ = load_fixture("testing")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    got, _arrays = CASES.run(cp, cid)
    exp = META["results"][cid]
    assert sorted(got) == sorted(exp)
    for k in exp:
        assert got[k] == exp[k], f"{cid}.{k}:\n got: {got[k]!r}\nwant: {exp[k]!r}"


def test_make_tensor() -> None:
    t = cp.testing.make_tensor(3, 4, dtype=cp.float32, device="cpu", low=-1, high=1)
    assert t.shape == (3, 4) and t.dtype == cp.float32 and bool(((t >= -1) & (t < 1)).all())
    i = cp.testing.make_tensor((50,), dtype=cp.int64, device="cpu", exclude_zero=True)
    assert i.dtype == cp.int64 and bool(((i >= -9) & (i < 10) & (i != 0)).all())
    b = cp.testing.make_tensor(5, dtype=cp.bool, device="cpu")
    assert b.dtype == cp.bool
    n = cp.testing.make_tensor(4, 3, dtype=cp.float64, device="cpu", noncontiguous=True, requires_grad=True)
    assert not n.is_contiguous() and n.requires_grad and n.dtype == cp.float64
    z = cp.testing.make_tensor(2, dtype=cp.complex64, device="cpu")
    assert z.dtype == cp.complex64 and z.shape == (2,)
    with pytest.raises(ValueError, match="can require grad"):
        cp.testing.make_tensor(2, dtype=cp.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="low"):
        cp.testing.make_tensor(2, dtype=cp.float32, device="cpu", low=1, high=0)
