"""Cases of `testing.assert_close` / `assert_allclose` (PyTorch's `torch.testing`),
written once against the PyTorch API (`lib` is `torch` or `candle_py`): each returns
what a call raised (kind and message, with the library's name taken out) or "ok";
`tools/make_fixtures_testing.py` runs them on torch into tests/fixtures/testing/,
`tests/test_testing.py` on candle_py and compares."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict

import numpy as np

from fixture_cases import Cases

CASES = Cases()
case = CASES.case


def _outcome(fn: Callable[[], Any]) -> str:
    """'ok', or the exception's kind and message without library prefixes."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the outcome is the result
        text = f"{type(e).__name__}: {e}"
        for lib in ("torch.", "candle_py."):
            text = text.replace(lib, "")
        return text
    return "ok"


@case()
def tensors(lib: Any) -> Dict[str, Any]:
    ac = lib.testing.assert_close
    t = lib.tensor
    nan, inf = math.nan, math.inf
    return {
        "same": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.0]))),
        "one_off": _outcome(lambda: ac(t([1.0, 2.0, 3.0]), t([1.0, 2.5, 3.0]))),
        "2d": _outcome(lambda: ac(t([[1.0, 2.0], [3.0, 4.0]]), t([[1.0, 2.0], [3.0, 4.001]]))),
        "within": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.0 + 1e-6]))),
        "nan": _outcome(lambda: ac(t([1.0, nan]), t([1.0, nan]))),
        "nan_eq": _outcome(lambda: ac(t([1.0, nan]), t([1.0, nan]), equal_nan=True)),
        "inf": _outcome(lambda: ac(t([inf]), t([inf]))),
        "inf_neg": _outcome(lambda: ac(t([inf]), t([-inf]))),
        "zero_rel": _outcome(lambda: ac(t([0.0, 1.0]), t([1.0, 0.0]))),
        "ints": _outcome(lambda: ac(t([1, 2]), t([1, 3]))),
        "bools": _outcome(lambda: ac(t([True, False]), t([True, True]))),
        "0d": _outcome(lambda: ac(t(1.0), t(1.5))),
        "dtype": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64))),
        "no_dtype_check": _outcome(lambda: ac(t([1.0, 2.0]), t([1, 2]), check_dtype=False)),
        "no_dtype_check_off": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.5], dtype=lib.float64), check_dtype=False)),
        "shape": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.0, 3.0]))),
        "tols": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.1]), rtol=0.1, atol=0)),
        "tols_fail": _outcome(lambda: ac(t([1.0, 2.0]), t([1.0, 2.5]), rtol=0.1, atol=0.01)),
        "tol_missing": _outcome(lambda: ac(t([1.0]), t([1.0]), rtol=0.1)),
        "requires_grad": _outcome(lambda: ac(t([1.0, 2.0], requires_grad=True), t([1.0, 2.0]))),
        "empty": _outcome(lambda: ac(t([]), t([]))),
        "half": _outcome(lambda: ac(t([1.0, 2.0], dtype=lib.float16), t([1.0, 2.001], dtype=lib.float16))),
        "bf16": _outcome(lambda: ac(t([1.0, 2.0], dtype=lib.bfloat16), t([1.0, 2.5], dtype=lib.bfloat16))),
        "msg": _outcome(lambda: ac(t([1.0]), t([2.0]), msg="custom")),
        "msg_fn": _outcome(lambda: ac(t([1.0]), t([2.0]), msg=lambda m: "X" + m[:10])),
        "vs_number": _outcome(lambda: ac(t(1.0), 1.0)),
        "numpy": _outcome(lambda: ac(np.array([1.0, 2.0]), np.array([1.0, 2.0]))),
        "vs_numpy": _outcome(lambda: ac(t([1.0, 2.0]), np.array([1.0, 2.0]))),
    }


@case()
def containers_and_numbers(lib: Any) -> Dict[str, Any]:
    ac = lib.testing.assert_close
    t = lib.tensor
    return {
        "int_float": _outcome(lambda: ac(1, 1.0)),
        "ints": _outcome(lambda: ac(1, 2)),
        "floats": _outcome(lambda: ac(1.0, 1.0 + 1e-3)),
        "floats_ok": _outcome(lambda: ac(1.0, 1.0 + 1e-9)),
        "bools": _outcome(lambda: ac(True, False)),
        "nan": _outcome(lambda: ac(math.nan, math.nan)),
        "nan_eq": _outcome(lambda: ac(math.nan, math.nan, equal_nan=True)),
        "none": _outcome(lambda: ac(None, None)),
        "none_1": _outcome(lambda: ac(None, 1)),
        "strings": _outcome(lambda: ac("a", "a")),
        "tuple_list": _outcome(lambda: ac((1, 2), [1, 2])),
        "lengths": _outcome(lambda: ac([1, 2], [1, 2, 3])),
        "item": _outcome(lambda: ac([t(1.0), 2], [t(1.0), 3])),
        "nested": _outcome(lambda: ac({"a": [t([1.0]), {"b": t([2.0])}]}, {"a": [t([1.0]), {"b": t([2.5])}]})),
        "keys": _outcome(lambda: ac({"a": 1}, {"b": 1})),
        "dict_item": _outcome(lambda: ac({"a": t(1.0)}, {"a": t(2.0)})),
        "allclose": _outcome(lambda: lib.testing.assert_allclose(t([1.0, 2.0]), [1.0, 2.0])),
        "allclose_bad": _outcome(lambda: lib.testing.assert_allclose(t([1.0, 2.0]), t([1.0, 3.0], dtype=lib.float64))),
    }
