"""The PyTorch-made cases of tests/fixtures/random (tools/make_fixtures_random.py):
expressions over `T` (here candle_py), `D` (`T.utils.data`) and `np`, with
PyTorch's normalized result or its exception type and message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

import candle_py as cp
import candle_py.utils.data.distributed  # noqa: F401 - D.distributed in the cases

FIXTURE = Path(__file__).parent / "fixtures" / "random" / "cases.safetensors"


def _meta() -> Dict[str, str]:
    return dict(cp.safetensors.load_metadata(str(FIXTURE)) or {})


def cases(prefix: str) -> List[Dict[str, Any]]:
    """The cases whose expression starts with `prefix` (or contains `D.` for "D")."""
    out = json.loads(_meta()["cases"])
    if prefix == "D":
        return [c for c in out if "D." in c["expr"]]
    return [c for c in out if "D." not in c["expr"]]


def namespace() -> Dict[str, Any]:
    ns: Dict[str, Any] = {"T": cp, "D": cp.utils.data, "np": np}
    exec(_meta()["prelude"], ns)  # noqa: S102 - the fixture's own helper classes
    return ns


def norm(v: Any) -> Any:
    """The same normal form as the fixture tool's `norm`."""
    if isinstance(v, cp.Tensor):
        return {"tensor": v.tolist(), "dtype": str(v.dtype).split(".")[-1]}
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return {"namedtuple": type(v).__name__, "fields": [norm(x) for x in v]}
    if isinstance(v, tuple) and type(v).__name__ == "Size":
        return {"size": list(v)}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [norm(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": {k: norm(x) for k, x in v.items()}}
    if isinstance(v, cp.dtype):
        return {"dtype": str(v).split(".")[-1]}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    raise TypeError(f"cannot normalize {type(v)}")


def _shape_as_size(expected: Any, got: Any) -> Any:
    """torch.Size is normalized as {"size": [...]}; shapes that are plain tuples
    compare as sizes too."""
    if isinstance(expected, dict) and "size" in expected and isinstance(got, dict) and "tuple" in got:
        return {"size": got["tuple"]}
    return got


def check(case: Dict[str, Any], ns: Dict[str, Any]) -> None:
    """Evaluate one case and compare with PyTorch's result or exception."""
    expr = case["expr"]
    if "ok" in case:
        got = _shape_as_size(case["ok"], norm(eval(expr, ns)))  # noqa: S307 - the fixture's expressions
        assert got == case["ok"], (expr, got, case["ok"])
        return
    etype, msg = case["error"]
    try:
        eval(expr, ns)  # noqa: S307
    except Exception as e:  # noqa: BLE001 - compared with torch's type below
        names = [c.__name__ for c in type(e).__mro__]
        if etype == "NotImplementedError" and "not implemented for" in msg:
            # PyTorch's "<kernel>" not implemented for 'Long': candle_py's dtype
            # refusals are DTypeError (a TypeError), as for every op.
            etype = "DTypeError"
        assert etype in names, (expr, type(e).__name__, str(e), etype, msg)
        if case["check_msg"]:
            assert msg[:40] in str(e), (expr, str(e), msg)
    else:
        raise AssertionError(f"{expr}: no exception; torch raised {etype}: {msg}")
