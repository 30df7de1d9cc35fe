"""What the case files written once against the PyTorch API share (sparse_cases,
special_cases, math_cases, linalg_cases; `lib` is `torch` or `candle_py`): a registry of
cases with their tolerances, running one case into encoded results, and, for their tests,
loading the fixture a tool made from torch and comparing a case with it."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Tuple

import numpy as np

from usage_cases import TOL, compare, encode

Case = Callable[[Any], Dict[str, Any]]
FIXTURES = Path(__file__).parent / "fixtures"


class Cases(Dict[str, Tuple[Case, float]]):
    """Case id (the function's name) -> (function, tolerance)."""

    def case(self, tol: float = TOL) -> Callable[[Case], Case]:
        """Register the decorated function as a case compared to `tol`."""

        def reg(fn: Case) -> Case:
            assert fn.__name__ not in self, fn.__name__
            self[fn.__name__] = (fn, tol)
            return fn

        return reg

    def run(self, lib: Any, cid: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
        """Case `cid` on `lib` (seeded): its encoded results and their arrays."""
        lib.manual_seed(0)
        res = self[cid][0](lib)
        arrays: Dict[str, np.ndarray] = {}
        return {k: encode(lib, v, arrays, f"{cid}/{k}") for k, v in res.items()}, arrays


def load_fixture(name: str) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """tests/fixtures/<name>: its results.json and its arrays."""
    import candle_py as cp

    d = FIXTURES / name
    meta = json.loads((d / "results.json").read_text())
    return meta, {k: v.numpy() for k, v in cp.safetensors.load_file(str(d / "results.safetensors")).items()}


def check_case(cases: Cases, cid: str, meta: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> None:
    """Run case `cid` on candle_py and compare every result with torch's."""
    import candle_py as cp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, got_arrays = cases.run(cp, cid)
    exp = meta["results"][cid]
    assert sorted(got) == sorted(exp), f"{cid}: results {sorted(got)} != {sorted(exp)}"
    for k in exp:
        compare(got[k], exp[k], got_arrays, arrays, cases[cid][1], f"{cid}.{k}")
