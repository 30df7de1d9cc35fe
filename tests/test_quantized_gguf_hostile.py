"""Hostile GGUF files are rejected with a clear ValueError, cheaply.

The corpus in tests/fixtures/hostile_gguf/ is written by tools/make_hostile_gguf.py
(bad magic and versions, counts and lengths past the end of the file, unknown
value and tensor types, bad bools, arrays nested too deep, duplicate keys and
tensor names, zero/odd/huge alignments, too many or zero dims, element counts
that overflow, offsets past the end, misaligned or overlapping tensors). Each
file must make `load_gguf` raise a ValueError whose one-line message names the
problem; the memory test runs them in a child process under an address-space
limit and checks its peak RSS, so a huge allocation fails instead of passing
unnoticed (and a panic or abort would fail the child).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import candle_py as cp
from _hostile import assert_corpus_matches_generator, load_manifest, memory_child
from candle_py import quantized as Q

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "hostile_gguf"
REJECT, ACCEPT = load_manifest(CORPUS)


def _path(name: str) -> Path:
    return CORPUS / f"{name}.gguf"


def test_corpus_matches_its_generator():
    assert_corpus_matches_generator(CORPUS, "make_hostile_gguf", ".gguf")


@pytest.mark.parametrize("name", sorted(REJECT))
def test_hostile_file_is_rejected(name):
    with pytest.raises(ValueError) as ei:
        Q.load_gguf(_path(name))
    msg = str(ei.value)
    assert REJECT[name] in msg, msg
    assert msg.startswith("load_gguf: ") and f"{name}.gguf" in msg  # names the op and the file
    assert len(msg.splitlines()) == 1 and len(msg) < 400, msg


def test_valid_edge_cases_load():
    t, md = Q.load_gguf(_path("valid_f32"))
    assert md == {"general.alignment": 32} and t["w"].dequantize().tolist() == [float(i) for i in range(32)]
    t, md = Q.load_gguf(_path("valid_metadata_only"))
    assert t == {} and md == {"a": 7, "f": 0.5, "s": "x"}  # trailing NULs dropped, as Candle and llama.cpp do
    # Data at 2-byte alignment: copied to aligned memory before Candle reads blocks from it.
    t, md = Q.load_gguf(_path("valid_alignment_2"))
    assert t["w"].dequantize().tolist() == [float(i) for i in range(32)]
    assert t["q"].dtype == "q8_0" and t["q"].dequantize().tolist() == [float(i) for i in range(32)]
    t, _ = Q.load_gguf(_path("valid_empty_tensor"))
    assert t["e"].shape == (0, 32) and t["w"].shape == (32,)
    assert sorted(ACCEPT) == ["valid_alignment_2", "valid_empty_tensor", "valid_f32", "valid_metadata_only"]


def test_hostile_corpus_needs_no_big_allocation(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import make_hostile_gguf as gen
    finally:
        sys.path.pop(0)
    n = (2 << 30) // 4
    big = tmp_path / "sparse.gguf"
    head = gen.gguf([], [gen.info("a", [32], gen.T_F32, 0), gen.info("b", [n], gen.T_F32, 128)], gen.F32x32)
    with open(big, "wb") as f:
        f.write(head)
        f.truncate(len(head) + 4 * n - 32)  # sparse: no disk blocks behind the data; 32 bytes short
    out = memory_child(
        tmp_path,
        CORPUS,
        big,
        ".gguf",
        imports="from candle_py import quantized as Q",
        warm_up='Q.load_gguf(corpus / "valid_f32.gguf")',
        loaders="lambda: Q.load_gguf(p)",
        load_big="Q.load_gguf",
        big_message="run past the end",  # the last tensor runs 32 bytes past the end
    )
    assert out["rejected"] == 3 * len(REJECT), out
    assert out["hostile_kb"] < 32 * 1024, out  # peak RSS grows by less than 32 MiB
    assert out["big_ok"] and out["big_kb"] < 32 * 1024, out


def test_loaded_tensors_outlive_the_file(tmp_path):
    # Tensors own their blocks: the file can be replaced (atomically) while they live on.
    path = tmp_path / "w.gguf"
    Q.save_gguf(path, {"a": Q.quantize(cp.from_numpy(np.arange(64, dtype=np.float32)), "q8_0")})
    loaded = Q.load_gguf(path)[0]["a"]
    before = loaded.dequantize().tolist()
    Q.save_gguf(path, {"a": cp.zeros(32)})
    assert loaded.dequantize().tolist() == before
    assert Q.load_gguf(path)[0]["a"].dequantize().tolist() == [0.0] * 32
