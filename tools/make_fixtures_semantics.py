"""Make the PyTorch reference fixtures for tests/test_semantics.py: in-place twins,
integer bitwise operators, float floor division / remainder special values, and
`view`'s stride rule.

Needs torch; tests/test_semantics.py never imports it. Writes
tests/fixtures/semantics/<group>.safetensors:
  inplace:   x (any sign), xp (positive), y, w; for each case <case>.out (the value
             after `t.<op>_(*args)`) and <case>.grad (d/dx of sum(w * result) where the
             in-place op ran on a non-leaf copy of x); metadata "cases" is JSON
             {case: [method, input name, args, kwargs, has_grad]}.
  bitwise:   for each dtype: <dt>.a, <dt>.b (shift amounts include negative ones and
             ones past the width), <dt>.<op> results; bool.a, bool.b and their results.
  floordiv:  a, b (the cartesian product of special values) in float32 and float64,
             <dt>.floor_divide, <dt>.remainder, <dt>.div_floor, <dt>.div_trunc.
  losses:    input, target, weight; <l1_loss|mse_loss>.<reduction>.out / .grad (the
             gradient of the result's sum with respect to input), weighted.
  view:      metadata "cases": JSON list of [shape, permutation, narrow, new shape, ok]
             where the input is arange(shape).permute(permutation) narrowed on its
             last dim to `narrow` elements (when not null), and ok says whether
             torch's `view(new shape)` succeeds.

Run from the repository root:  python tools/make_fixtures_semantics.py
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "semantics")

# case -> (method, input, args, kwargs, has_grad)
INPLACE: dict[str, tuple[str, str, list[Any], dict[str, Any], bool]] = {
    "abs": ("abs_", "x", [], {}, True),
    "absolute": ("absolute_", "x", [], {}, True),
    "neg": ("neg_", "x", [], {}, True),
    "negative": ("negative_", "x", [], {}, True),
    "sign": ("sign_", "x", [], {}, True),
    "square": ("square_", "x", [], {}, True),
    "exp": ("exp_", "x", [], {}, True),
    "expm1": ("expm1_", "x", [], {}, True),
    "log": ("log_", "xp", [], {}, True),
    "log2": ("log2_", "xp", [], {}, True),
    "log10": ("log10_", "xp", [], {}, True),
    "log1p": ("log1p_", "xp", [], {}, True),
    "sqrt": ("sqrt_", "xp", [], {}, True),
    "rsqrt": ("rsqrt_", "xp", [], {}, True),
    "reciprocal": ("reciprocal_", "xp", [], {}, True),
    "sin": ("sin_", "x", [], {}, True),
    "cos": ("cos_", "x", [], {}, True),
    "tan": ("tan_", "x", [], {}, True),
    "tanh": ("tanh_", "x", [], {}, True),
    "sigmoid": ("sigmoid_", "x", [], {}, True),
    "erf": ("erf_", "x", [], {}, True),
    "relu": ("relu_", "x", [], {}, True),
    "frac": ("frac_", "x", [], {}, True),
    "floor": ("floor_", "x", [], {}, True),
    "ceil": ("ceil_", "x", [], {}, True),
    "round": ("round_", "x", [], {}, True),
    "trunc": ("trunc_", "x", [], {}, True),
    "clamp_min": ("clamp_min_", "x", [0.1], {}, True),
    "clamp_max": ("clamp_max_", "x", [0.2], {}, True),
    "clip": ("clip_", "x", [-0.5, 0.5], {}, True),
    "tril": ("tril_", "x", [], {}, True),
    "triu_k1": ("triu_", "x", [1], {}, True),
    "tril_kneg": ("tril_", "x", [], {"diagonal": -1}, True),
    "cumsum": ("cumsum_", "x", [1], {}, True),
    "pow": ("pow_", "xp", [1.5], {}, True),
    "add_alpha": ("add_", "x", ["y"], {"alpha": 2.5}, True),
    "sub_alpha": ("sub_", "x", ["y"], {"alpha": 0.5}, True),
    "subtract_alpha": ("subtract_", "x", ["y"], {"alpha": -2}, True),
    "multiply": ("multiply_", "x", ["y"], {}, True),
    "div": ("div_", "x", ["y"], {}, True),
    "divide": ("divide_", "x", ["y"], {}, True),
    "true_divide": ("true_divide_", "x", ["y"], {}, True),
    "div_floor": ("div_", "x", ["y"], {"rounding_mode": "floor"}, False),
    "div_trunc": ("div_", "x", ["y"], {"rounding_mode": "trunc"}, False),
    "fmod": ("fmod_", "x", [0.7], {}, True),
    "eq": ("eq_", "x", ["y"], {}, False),
    "lt": ("lt_", "x", ["y"], {}, False),
    "ge": ("ge_", "x", [0.0], {}, False),
    "logical_not": ("logical_not_", "x", [], {}, False),
}


def inplace() -> None:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(4, 5, generator=g) * 2
    x[0, 0] = 0.0
    xp = torch.rand(4, 5, generator=g) * 2 + 0.25
    y = torch.randn(4, 5, generator=g)
    y[y.abs() < 0.2] = 0.5
    w = torch.randn(4, 5, generator=g)
    inputs = {"x": x, "xp": xp, "y": y}
    out: dict[str, torch.Tensor] = {"x": x, "xp": xp, "y": y, "w": w}
    for case, (method, src, args, kwargs, has_grad) in INPLACE.items():
        real_args = [inputs[a] if isinstance(a, str) else a for a in args]
        leaf = inputs[src].clone().requires_grad_(has_grad)
        t = leaf * 1.0 if has_grad else leaf.clone()
        r = getattr(t, method)(*real_args, **kwargs)
        assert r is t
        out[f"{case}.out"] = t.detach().clone()
        if has_grad:
            (t * w).sum().backward()
            assert leaf.grad is not None
            out[f"{case}.grad"] = leaf.grad
    save_file(out, os.path.join(OUT, "inplace.safetensors"), metadata={"cases": json.dumps(INPLACE)})


BIT_OPS = {
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
}


def bitwise() -> None:
    out: dict[str, torch.Tensor] = {}
    for name, dt, bits in [("int64", torch.int64, 64), ("int32", torch.int32, 32), ("int16", torch.int16, 16), ("uint8", torch.uint8, 8)]:
        lo = 0 if dt == torch.uint8 else -(2 ** (bits - 1))
        hi = 2**bits - 1 if dt == torch.uint8 else 2 ** (bits - 1) - 1
        vals = [0, 1, 3, 5, 100, hi, hi - 1] + ([lo, lo + 1, -1, -8, -100] if lo < 0 else [128, 200])
        shifts = [0, 1, 3, bits - 1, bits, bits + 3] + ([-1, -5] if lo < 0 else [])
        pairs = list(itertools.product(vals, shifts))
        a = torch.tensor([p[0] for p in pairs], dtype=dt)
        b = torch.tensor([p[1] for p in pairs], dtype=dt)
        out[f"{name}.a"], out[f"{name}.b"] = a, b
        for op, f in BIT_OPS.items():
            out[f"{name}.{op}"] = f(a, b)
        # And/or/xor with a second operand of ordinary values (not just shift amounts).
        c = torch.tensor(vals, dtype=dt)
        d = c.flip(0)
        out[f"{name}.c"], out[f"{name}.d"] = c, d
        for op in ("and", "or", "xor"):
            out[f"{name}.cd_{op}"] = BIT_OPS[op](c, d)
        out[f"{name}.not"] = ~c
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    out["bool.a"], out["bool.b"] = a, b
    for op in ("and", "or", "xor"):
        out[f"bool.{op}"] = BIT_OPS[op](a, b)
    out["bool.not"] = ~a
    # Mixed: bool with int64 promotes to int64; a Python int scalar keeps the tensor's dtype.
    out["mixed.bool_and_int"] = a & torch.tensor([3, 2, 1, 0])
    out["mixed.uint8_xor_neg1"] = torch.tensor([3, 200], dtype=torch.uint8) ^ -1
    out["mixed.rlshift"] = 2 << torch.tensor([0, 1, 5])
    save_file(out, os.path.join(OUT, "bitwise.safetensors"))


def floordiv() -> None:
    inf, nan = float("inf"), float("nan")
    specials = [inf, -inf, nan, 0.0, -0.0, 5.0, -5.0, 2.5, -0.75, 7.0]
    pairs = list(itertools.product(specials, specials))
    out: dict[str, torch.Tensor] = {}
    for name, dt in [("float32", torch.float32), ("float64", torch.float64)]:
        a = torch.tensor([p[0] for p in pairs], dtype=dt)
        b = torch.tensor([p[1] for p in pairs], dtype=dt)
        out[f"{name}.a"], out[f"{name}.b"] = a, b
        out[f"{name}.floor_divide"] = a // b
        out[f"{name}.remainder"] = a % b
        out[f"{name}.div_floor"] = torch.div(a, b, rounding_mode="floor")
        out[f"{name}.div_trunc"] = torch.div(a, b, rounding_mode="trunc")
        out[f"{name}.scalar_floordiv"] = a // 2
        out[f"{name}.scalar_rfloordiv"] = 2 // a
        out[f"{name}.scalar_rem"] = a % 2
        out[f"{name}.scalar_rrem"] = 2 % a
    # Gradients of remainder and floor_divide through the special-value-free part.
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(12, generator=g) * 4).requires_grad_()
    b = (torch.rand(12, generator=g) * 2 + 0.5).requires_grad_()
    (a % b).sum().backward()
    out["grad.a"], out["grad.b"] = a.detach(), b.detach()
    assert a.grad is not None and b.grad is not None
    out["grad.remainder_a"], out["grad.remainder_b"] = a.grad, b.grad
    save_file(out, os.path.join(OUT, "floordiv.safetensors"))


def view() -> None:
    cases = []
    specs = [
        ((2, 3, 4), (1, 0, 2), None, [(6, 4), (3, 8), (12, 2), (3, 2, 4), (24,), (-1,), (3, 2, 2, 2), (1, 3, 1, 2, 4)]),
        ((4, 6), (1, 0), None, [(24,), (6, 4), (3, 2, 4), (6, 2, 2), (6, 1, 4), (1, 6, 4)]),
        ((2, 3, 4), (0, 2, 1), None, [(2, 12), (8, 3), (2, 4, 3), (2, 2, 2, 3), (24,)]),
        ((3, 8), (0, 1), 4, [(12,), (3, 2, 2), (3, 4), (6, 2), (3, 4, 1)]),
        ((2, 1, 4), (1, 0, 2), None, [(8,), (2, 4), (4, 2)]),
        ((0, 3), (1, 0), None, [(0,), (3, 0), (0, 5)]),
        ((), (), None, [(1,), (1, 1), ()]),
    ]
    for shape, perm, narrow, news in specs:
        base = torch.arange(int(torch.tensor(shape).prod().item()) if shape else 1, dtype=torch.float32).reshape(shape)
        t = base.permute(perm) if perm else base
        if narrow is not None:
            t = t.narrow(-1, 0, narrow)
        for new in news:
            try:
                t.view(new)
                ok = True
            except RuntimeError as e:
                assert "view size is not compatible" in str(e), e
                ok = False
            cases.append([list(shape), list(perm), narrow, list(new), ok])
    save_file({"dummy": torch.zeros(1)}, os.path.join(OUT, "view.safetensors"), metadata={"cases": json.dumps(cases)})


def losses() -> None:
    """Weighted `l1_loss` / `mse_loss` (value and input gradient) for each reduction."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 4, generator=g)
    t = torch.randn(3, 4, generator=g)
    w = torch.rand(3, 4, generator=g) + 0.1
    out: dict[str, torch.Tensor] = {"input": x, "target": t, "weight": w}
    for name, f in [("l1_loss", torch.nn.functional.l1_loss), ("mse_loss", torch.nn.functional.mse_loss)]:
        for red in ("mean", "sum", "none"):
            xi = x.clone().requires_grad_()
            r = f(xi, t, reduction=red, weight=w)
            r.sum().backward()
            assert xi.grad is not None
            out[f"{name}.{red}.out"], out[f"{name}.{red}.grad"] = r.detach(), xi.grad
    save_file(out, os.path.join(OUT, "losses.safetensors"))


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    inplace()
    bitwise()
    floordiv()
    view()
    losses()
    print("wrote", sorted(os.listdir(OUT)))
