"""Child process for tests/test_errors.py: call every public API with junk.

Usage: python _junk_sweep.py OUT_PATH START_INDEX [NAME ...]

Calls are enumerated in a fixed order. Before each call the child writes
`CALL <index> <name>` to OUT_PATH (flushed), and for each call whose outcome is
not allowed it writes `BAD <index> <name> <description>`. A crash therefore
leaves `CALL` as the last line; the parent resumes at the next index.
Only the names given (or all, if none) are swept.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import candle_py as cp

# FileNotFoundError: API.md "Errors" documents it for missing files (load_file)
ALLOWED = (TypeError, ValueError, IndexError, RuntimeError, ZeroDivisionError, FileNotFoundError)

# Things whose call would only test Python itself or block.
SKIP_FUNCS = {"annotations", "builtins_bool", "builtins_int"}
SKIP_METHODS = {
    "__init__",
    "__new__",
    "__init_subclass__",
    "__subclasshook__",
    "__getattribute__",
    "__setattr__",
    "__delattr__",
    "__dir__",
    "__sizeof__",
    "__class__",
    "__reduce_ex__",
    "__getstate__",
    "__hash__",
}
DUNDERS_KEPT = {
    "__abs__",
    "__add__",
    "__and__",
    "__array__",
    "__bool__",
    "__copy__",
    "__deepcopy__",
    "__delitem__",
    "__dlpack__",
    "__dlpack_device__",
    "__eq__",
    "__float__",
    "__floordiv__",
    "__format__",
    "__ge__",
    "__getitem__",
    "__gt__",
    "__iadd__",
    "__iand__",
    "__ifloordiv__",
    "__imod__",
    "__imul__",
    "__index__",
    "__int__",
    "__invert__",
    "__ior__",
    "__ipow__",
    "__isub__",
    "__iter__",
    "__itruediv__",
    "__ixor__",
    "__le__",
    "__len__",
    "__lt__",
    "__matmul__",
    "__mod__",
    "__mul__",
    "__ne__",
    "__neg__",
    "__or__",
    "__pos__",
    "__pow__",
    "__radd__",
    "__rand__",
    "__reduce__",
    "__repr__",
    "__rfloordiv__",
    "__rmatmul__",
    "__rmod__",
    "__rmul__",
    "__ror__",
    "__rpow__",
    "__rsub__",
    "__rtruediv__",
    "__rxor__",
    "__setitem__",
    "__str__",
    "__sub__",
    "__truediv__",
    "__xor__",
    "__contains__",
}


def junk_values():
    """Fresh junk each time (in-place methods may change tensors)."""
    return [
        None,
        "abc",
        [[1, 2], [3]],
        float("nan"),
        float("inf"),
        -1,
        0,
        1,
        2**62,
        -(2**62),
        3.5,
        True,
        (2, 3),
        [],
        cp.zeros(0),
        cp.tensor(1.5),
        cp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        cp.tensor([1, 0, 2]),
        cp.tensor([True, False]),
        cp.tensor([0.5, 1.5]),  # a float "index" tensor
        cp.tensor([1.0, 2.0], dtype=cp.float16),
        cp.zeros(2, 0, 3),
        cp.float64,
        object(),
        slice(None, None, -1),
    ]


def second_values():
    return [None, "abc", -1, 2**62, 1, cp.tensor([[1.0, 2.0], [3.0, 4.0]]), cp.zeros(0)]


def bases():
    """Receivers for Tensor methods."""
    return [
        cp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
        cp.zeros(0),
        cp.tensor(2.5),
        cp.tensor([[3, -1], [0, 7]]),
        cp.tensor([True, False, True]),
        cp.tensor([1.0, float("nan"), float("inf")], dtype=cp.float64),
    ]


def function_names():
    out = []
    for n in sorted(dir(cp)):
        if n.startswith("_") or n in SKIP_FUNCS:
            continue
        obj = getattr(cp, n)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        if isinstance(obj, (cp.dtype,)) or type(obj).__name__ == "module" or not callable(obj):
            continue
        out.append(n)
    return out


def method_names():
    out = []
    for n in sorted(dir(cp.Tensor)):
        if n in SKIP_METHODS:
            continue
        if n.startswith("_") and n not in DUNDERS_KEPT:
            continue
        out.append(n)
    return out


def _short(a) -> str:
    if isinstance(a, cp.Tensor):
        return f"tensor(shape={tuple(a.shape)}, {a.dtype.name})"
    r = repr(a)
    return r if len(r) <= 40 else r[:37] + "..."


def calls(names):
    """Yield (name, description, thunk) in a fixed order.

    The junk pool is made once per API name (in-place methods may alter its
    tensors' values, which is harmless); receivers are made fresh per call.
    """
    wanted = set(names) if names else None

    def desc(head, args, kwargs):
        parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
        return f"{head}({', '.join(parts)})"

    for n in function_names():
        key = "cp." + n
        if wanted is not None and key not in wanted:
            continue
        f = getattr(cp, n)
        J, S = junk_values(), second_values()
        arglists = [((), {})] + [((a,), {}) for a in J] + [((a, b), {}) for a in J for b in S]
        arglists += [
            ((cp.ones(2, 3),), {"dim": 2**62}),
            ((cp.ones(2, 3),), {"dtype": "junk"}),
            (((2, 3),), {"dtype": cp.float32, "device": "nonsense"}),
        ]
        for args, kwargs in arglists:
            yield key, desc(key, args, kwargs), (lambda f=f, args=args, kwargs=kwargs: f(*args, **kwargs))
    for n in method_names():
        key = "Tensor." + n
        if wanted is not None and key not in wanted:
            continue
        J, S = junk_values(), second_values()
        base_reprs = [_short(b) for b in bases()]
        for bi in range(len(base_reprs)):
            arglists = [((), {})] + [((a,), {}) for a in J]
            if bi == 0:
                arglists += [((a, b), {}) for a in J for b in S]
            arglists += [((), {"dim": 2**62}), ((), {"dim": "x"}), ((), {"dtype": "junk"})]
            for args, kwargs in arglists:

                def thunk(bi=bi, n=n, args=args, kwargs=kwargs):
                    return _call_or_read(getattr(bases()[bi], n), *args, **kwargs)

                yield key, desc(f"{base_reprs[bi]}.{n}", args, kwargs), thunk
    # Attribute assignment.
    for attr in ["grad", "data", "requires_grad"]:
        key = "Tensor." + attr + "="
        if wanted is not None and key not in wanted:
            continue
        for a in junk_values():

            def setit(a=a, attr=attr):
                t = cp.tensor([1.0, 2.0], requires_grad=True)
                setattr(t, attr, a)

            yield key, f"t.{attr} = {_short(a)}", setit


def _call_or_read(attr, *args, **kwargs):
    if callable(attr):
        return attr(*args, **kwargs)
    if args or kwargs:
        return None  # a plain attribute: nothing to call
    return attr


def check_message(e: BaseException) -> str | None:
    msg = str(e)
    if len(msg.splitlines()) > 3:
        return f"message has {len(msg.splitlines())} lines"
    low = msg.lower()
    for marker in ["stack backtrace", "rust_backtrace", "panicked at", "src/", ".rs:"]:
        if marker in low:
            return f"message contains {marker!r}"
    return None


def main() -> None:
    out_path, start = sys.argv[1], int(sys.argv[2])
    names = sys.argv[3:]
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    with open(out_path, "a", buffering=1) as out:
        for idx, (name, what, thunk) in enumerate(calls(names)):
            if idx < start:
                continue
            out.write(f"CALL {idx} {name} {what}\n")
            out.flush()
            try:
                r = thunk()
                # Results must be usable: repr them when they are tensors.
                if isinstance(r, cp.Tensor):
                    repr(r)
                elif isinstance(r, (tuple, list)):
                    for x in r:
                        if isinstance(x, cp.Tensor):
                            repr(x)
            except NotImplementedError as e:
                out.write(f"BAD {idx} {name} {what} -> NotImplementedError: {str(e).splitlines()[0] if str(e) else ''}\n")
            except ALLOWED as e:
                bad = check_message(e)
                if bad:
                    first = str(e).splitlines()[0] if str(e) else ""
                    out.write(f"BAD {idx} {name} {what} -> {type(e).__name__} {bad}: {first[:120]}\n")
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001 - PanicException and friends
                first = str(e).splitlines()[0] if str(e) else ""
                out.write(f"BAD {idx} {name} {what} -> {type(e).__name__}: {first[:160]}\n")
            finally:
                if not cp.is_grad_enabled():
                    cp.set_grad_enabled(True)
        out.write("DONE\n")


if __name__ == "__main__":
    main()
