"""The usage sweep: every name of ../shared/torch_usage.md (the PyTorch names real code
calls most) run through the cases of tests/usage_cases.py on candle_py and compared
with PyTorch's results (tests/fixtures/usage_sweep, made by
tools/make_fixtures_usage_sweep.py)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import candle_py as cp
from usage_cases import CASES, compare, run_case

FIXTURE = Path(__file__).parent / "fixtures" / "usage_sweep"
USAGE = Path(__file__).resolve().parents[2] / "shared" / "torch_usage.md"
META: Dict[str, Any] = json.loads((FIXTURE / "results.json").read_text())
ARRAYS: Dict[str, np.ndarray] = {k: v.numpy() for k, v in cp.safetensors.load_file(str(FIXTURE / "results.safetensors")).items()}

# Cases where candle_py still differs from PyTorch (each would need a change in Rust,
# or a larger one): strict, so a fix turns them red until this entry is removed.
XFAIL: Dict[str, str] = {}


def _params() -> List[Any]:
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=XFAIL[c])) if c in XFAIL else c for c in CASES]


@pytest.mark.parametrize("cid", _params())
def test_case(cid: str) -> None:
    assert cid in META["results"], f"{cid}: no fixture; run tools/make_fixtures_usage_sweep.py"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, arrays = run_case(cp, cid)
    tol = CASES[cid][2]
    exp = META["results"][cid]
    assert sorted(got) == sorted(exp), f"{cid}: results {sorted(got)} != {sorted(exp)}"
    for k in exp:
        compare(got[k], exp[k], arrays, ARRAYS, tol, f"{cid}.{k}")


def _names_from_markdown(text: str) -> List[str]:
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 2 and cells[1].startswith("`") and cells[1].endswith("`"):
            out.append(cells[1].strip("`"))
    return out


def test_every_usage_name_has_a_case() -> None:
    covered = {n for names, _, _ in CASES.values() for n in names}
    names = list(META["names"])
    if USAGE.exists():  # the shared list itself, when this checkout sits beside it
        assert _names_from_markdown(USAGE.read_text()) == names, "torch_usage.md changed: remake the fixture"
    assert len(names) == 296
    missing = [n for n in names if n not in covered]
    assert not missing, f"names of torch_usage.md without a case: {missing}"


def test_fixture_matches_the_case_table() -> None:
    assert sorted(META["results"]) == sorted(CASES), "the case table changed: remake the fixture"
