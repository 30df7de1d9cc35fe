"""Hostile safetensors files are rejected with a clear ValueError, cheaply.

The corpus in tests/fixtures/hostile/ is written by tools/make_hostile_safetensors.py
(truncations, header lengths past the end, invalid JSON, overlapping and
out-of-range offsets, dtype/shape versus byte count, overflowing element
counts, duplicate names, ...). Each file must be refused by `load_file`,
`load` and `load_metadata` with a ValueError whose one-line message names the
problem; the memory test runs them in a child process under an address-space
limit and checks its peak RSS, so a huge allocation fails the test instead of
passing unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import candle_py as cp
from _hostile import assert_corpus_matches_generator, load_manifest, memory_child
from candle_py import safetensors as st

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "hostile"
REJECT, ACCEPT = load_manifest(CORPUS)


def _path(name: str) -> Path:
    return CORPUS / f"{name}.safetensors"


def test_corpus_matches_its_generator():
    assert_corpus_matches_generator(CORPUS, "make_hostile_safetensors", ".safetensors")


def _check(excinfo, expect: str) -> str:
    msg = str(excinfo.value)
    assert expect in msg, msg
    assert len(msg.splitlines()) == 1, msg
    assert len(msg) < 400, msg
    return msg


@pytest.mark.parametrize("name", sorted(REJECT))
def test_hostile_file_is_rejected(name):
    expect = REJECT[name]
    with pytest.raises(ValueError) as ei:
        st.load_file(_path(name))
    msg = _check(ei, expect)
    assert msg.startswith("load_file: ") and name in msg  # names the op and the file
    with pytest.raises(ValueError) as ei:
        st.load(_path(name).read_bytes())
    assert _check(ei, expect).startswith("load: ")
    with pytest.raises(ValueError) as ei:
        st.load_metadata(_path(name))
    _check(ei, expect)


@pytest.mark.parametrize("name", ACCEPT)
def test_valid_edge_cases_load(name):
    a = st.load_file(_path(name))
    b = st.load(_path(name).read_bytes())
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape and a[k].dtype == b[k].dtype
        assert a[k].tolist() == b[k].tolist()
    if name == "valid_good":
        assert a["a"].tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    if name == "valid_metadata":
        assert st.load_metadata(_path(name)) == {"format": "pt"}


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        st.load_file(tmp_path / "nope.safetensors")


def test_hostile_corpus_needs_no_big_allocation(tmp_path):
    big = tmp_path / "sparse.safetensors"
    n = (2 << 30) // 4
    header = json.dumps({"a": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
    with open(big, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + 4 * n + 8)  # sparse: no disk blocks behind the data
    out = memory_child(
        tmp_path,
        CORPUS,
        big,
        ".safetensors",
        imports="from candle_py import safetensors as st",
        warm_up='st.load_file(corpus / "valid_good.safetensors")',
        loaders="lambda: st.load_file(p), lambda: st.load(data), lambda: st.load_metadata(p)",
        load_big="st.load_file",
        big_message="cover",  # the data section is 8 bytes longer than its tensor
    )
    assert out["rejected"] == 3 * 3 * len(REJECT), out
    assert out["hostile_kb"] < 32 * 1024, out  # peak RSS grows by less than 32 MiB
    assert out["big_ok"] and out["big_kb"] < 32 * 1024, out


def test_load_file_is_memory_mapped(tmp_path):
    # A tensor stored in the file loads correctly whatever its alignment in the
    # map, and the file can be replaced (atomically) while its tensors live on.
    path = tmp_path / "w.safetensors"
    st.save_file({"a": cp.arange(10, dtype=cp.float64), "b": cp.ones(3, dtype=cp.uint8)}, path)
    loaded = st.load_file(path)
    st.save_file({"a": cp.zeros(2)}, path)
    assert loaded["a"].tolist() == list(map(float, range(10)))
    assert loaded["b"].tolist() == [1, 1, 1]
    assert st.load_file(path)["a"].tolist() == [0.0, 0.0]
    assert "memory-map" in (st.load_file.__doc__ or "") + (cp._core.safetensors.load_file.__doc__ or "")
