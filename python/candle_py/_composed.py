"""Functions PyTorch has that are compositions of tensor ops: `einsum` (a planner
lowering to diagonal/sum/permute/reshape/matmul), `meshgrid`, `cdist`, `trapezoid`;
and the function forms of the Tensor methods of src/bindings/misc_ops.rs (complex
tensors are in _complex.py).

Every result is built from differentiable tensor ops, so gradients flow through
each as through PyTorch's.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ._core import DeviceError, DTypeError, ShapeError, Tensor, arange, tensor, where

Number = Union[int, float, bool]

__all__ = [
    "einsum", "meshgrid", "cdist", "trapezoid", "trapz", "select", "repeat_interleave", "diag", "diagonal",
    "diag_embed", "trace", "lerp", "masked_select", "masked_scatter", "index_add", "index_copy", "index_fill", "scatter_reduce",
    "fliplr", "flipud", "roll", "rot90", "less_equal", "greater_equal", "not_equal",
]  # fmt: skip


def _method(name: str) -> Callable[..., Any]:
    def f(input: Tensor, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"`{name}(input, ...)`: same as `Tensor.{name}`."
    return f


select = _method("select")
diag = _method("diag")
diagonal = _method("diagonal")
diag_embed = _method("diag_embed")
trace = _method("trace")
lerp = _method("lerp")
masked_select = _method("masked_select")
masked_scatter = _method("masked_scatter")
index_add = _method("index_add")
index_copy = _method("index_copy")
index_fill = _method("index_fill")
scatter_reduce = _method("scatter_reduce")
fliplr = _method("fliplr")
flipud = _method("flipud")
roll = _method("roll")
rot90 = _method("rot90")
less_equal = _method("le")
greater_equal = _method("ge")
not_equal = _method("ne")
less_equal.__name__ = less_equal.__qualname__ = "less_equal"
greater_equal.__name__ = greater_equal.__qualname__ = "greater_equal"
not_equal.__name__ = not_equal.__qualname__ = "not_equal"


def repeat_interleave(input: Tensor, repeats: Any = None, dim: Optional[int] = None, *, output_size: Optional[int] = None) -> Tensor:
    """Repeat each element `repeats` times along `dim` (the flattened input when None).

    With `repeats` omitted, `input` is itself the repeats (a 1-d integer tensor) and the
    result repeats each index `0..len(input)` that many times, as `torch.repeat_interleave(repeats)`.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"repeat_interleave(): argument 'input' must be Tensor, not {type(input).__name__}")
    if repeats is None:
        if input.is_floating_point():
            raise DTypeError(f"repeat_interleave: repeats must be an integer tensor, got {input.dtype}")
        if input.ndim > 1:
            raise ShapeError(f"repeat_interleave: repeats must be 0-dim or 1-dim tensor, got shape {list(input.shape)}")
        n = 1 if input.ndim == 0 else input.shape[0]
        return arange(n, device=input.device).repeat_interleave(input, output_size=output_size)
    return input.repeat_interleave(repeats, dim, output_size=output_size)


# ----------------------------------------------------------------------------- einsum

_Label = int  # a letter's code point; ellipsis dims are -1, -2, ... counted from the right


def _parse_term(term: str, pos: int) -> Tuple[List[_Label], bool]:
    """The labels of one subscript term; `True` when it holds an ellipsis (marked by 0)."""
    labels: List[_Label] = []
    ell = False
    i = 0
    while i < len(term):
        ch = term[i]
        if term.startswith("...", i):
            if ell:
                raise ValueError("einsum(): found '.' for operand that is not part of any ellipsis")
            ell = True
            labels.append(0)
            i += 3
            continue
        if not (("a" <= ch <= "z") or ("A" <= ch <= "Z")):
            raise ValueError(f"einsum(): invalid subscript given at index {pos + i} in the equation string, subscripts must be in [a-zA-Z]")
        labels.append(ord(ch))
        i += 1
    return labels, ell


def _sublist_term(sub: Any) -> str:
    """A sublist (`[0, 1, Ellipsis]`) as equation letters (0-25 -> A-Z, 26-51 -> a-z, as PyTorch)."""
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, builtins.int) and 0 <= s < 52:
            out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
        else:
            raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52), got {s}")
    return "".join(out)


def _diagonalize(x: Tensor, labels: List[_Label]) -> Tuple[Tensor, List[_Label]]:
    """Take the diagonal over each repeated label of one operand (the label then appears once)."""
    while True:
        seen: Dict[_Label, int] = {}
        rep = None
        for k, lab in enumerate(labels):
            if lab in seen:
                rep = (seen[lab], k)
                break
            seen[lab] = k
        if rep is None:
            return x, labels
        a, b = rep
        if x.shape[a] != x.shape[b]:
            raise ShapeError(
                f"einsum(): subscript {chr(labels[a])} is repeated for operand but the sizes don't match, {x.shape[b]} != {x.shape[a]}"
            )
        x = x.diagonal(0, a, b)  # the diagonal becomes the last dim
        labels = [lab for k, lab in enumerate(labels) if k not in (a, b)] + [labels[a]]


def _sum_labels(x: Tensor, labels: List[_Label], drop: Sequence[_Label]) -> Tuple[Tensor, List[_Label]]:
    dims = [k for k, lab in enumerate(labels) if lab in drop]
    if not dims:
        return x, labels
    return x.sum(dim=tuple(dims)), [lab for lab in labels if lab not in drop]


def _prod(xs: Sequence[int]) -> int:
    p = 1
    for v in xs:
        p *= v
    return p


def _contract(a: Tensor, la: List[_Label], b: Tensor, lb: List[_Label], keep: Sequence[_Label]) -> Tuple[Tensor, List[_Label]]:
    """`a` and `b` multiplied, summing the labels they share that `keep` lacks, as one
    batched matmul: [batch, a-only, shared] @ [batch, shared, b-only]."""
    sa = dict(zip(la, a.shape))
    sb = dict(zip(lb, b.shape))
    batch = [lab for lab in la if lab in sb and lab in keep]
    summed = [lab for lab in la if lab in sb and lab not in keep]
    a_only = [lab for lab in la if lab not in sb]
    b_only = [lab for lab in lb if lab not in sa]
    # A summed label of size 1 on one side broadcasts against the other's size.
    for lab in summed:
        if sa[lab] != sb[lab]:
            if sa[lab] == 1:
                a = a.expand(*[sb[lab] if l_ == lab else s for l_, s in zip(la, a.shape)])
                sa[lab] = sb[lab]
            else:
                b = b.expand(*[sa[lab] if l_ == lab else s for l_, s in zip(lb, b.shape)])
                sb[lab] = sa[lab]
    a = a.permute(*[la.index(lab) for lab in batch + a_only + summed])
    b = b.permute(*[lb.index(lab) for lab in batch + summed + b_only])
    m, k, n = _prod([sa[lab] for lab in a_only]), _prod([sa[lab] for lab in summed]), _prod([sb[lab] for lab in b_only])
    ab = [sa[lab] for lab in batch]
    bb = [sb[lab] for lab in batch]
    out = a.reshape(*ab, m, k).matmul(b.reshape(*bb, k, n))
    bshape = [builtins.max(x, y) for x, y in zip(ab, bb)]
    out = out.reshape(*bshape, *[sa[lab] for lab in a_only], *[sb[lab] for lab in b_only])
    return out, batch + a_only + b_only


def einsum(*args: Any) -> Tensor:
    """Einstein summation: `einsum("ij,jk->ik", a, b)`, the list form `einsum(eq, [a, b])`
    and the sublist form `einsum(a, [0, 1], b, [1, 2], [0, 2])`; `...` broadcasts, a
    label repeated in one operand takes its diagonal, and without `->` the output is
    the labels seen once, in alphabetical order, after the ellipsis dims.

    Lowered to diagonal / sum / permute / reshape / matmul, contracting the operands
    left to right, so gradients flow through the same ops.
    """
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand")
    if isinstance(args[0], Tensor):
        # Sublist form: operand, sublist, operand, sublist, ..., [output sublist].
        rest = list(args)
        out_sub = rest.pop() if len(rest) % 2 == 1 else None
        ops_l, subs = rest[0::2], rest[1::2]
        eq = ",".join(_sublist_term(s) for s in subs)
        if out_sub is not None:
            eq += "->" + _sublist_term(out_sub)
        return einsum(eq, *ops_l)
    equation = args[0]
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    operands: List[Any] = list(args[1:])
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = list(operands[0])
    for k, o in enumerate(operands):
        if not isinstance(o, Tensor):
            raise TypeError(f"einsum(): operand {k} must be a Tensor, not {type(o).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise ValueError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise ValueError("einsum(): more operands were provided than specified in the equation")

    # Labels per operand, ellipsis expanded into negative labels aligned from the right.
    pos = 0
    parsed: List[List[_Label]] = []
    n_ell = 0
    for k, (term, x) in enumerate(zip(terms, operands)):
        labels, ell = _parse_term(term, pos)
        pos += len(term) + 1
        named = len(labels) - (1 if ell else 0)
        if (not ell and named != x.ndim) or (ell and named > x.ndim):
            raise ShapeError(
                f"einsum(): the number of subscripts in the equation ({named}) does not match the number of dimensions "
                f"({x.ndim}) for operand {k}" + ("" if ell else " and no ellipsis was given")
            )
        if ell:
            e = x.ndim - named
            n_ell = builtins.max(n_ell, e)
            at = labels.index(0)
            labels = labels[:at] + [-(e - j) for j in range(e)] + labels[at + 1 :]
        parsed.append(labels)
    ell_labels = [-(n_ell - j) for j in range(n_ell)]

    # Sizes must agree (or be 1) across operands.
    sizes: Dict[_Label, int] = {}
    for k, (labels, x) in enumerate(zip(parsed, operands)):
        own: Dict[_Label, int] = {}
        for lab, s in zip(labels, x.shape):
            if lab in own and own[lab] != s:
                raise ShapeError(f"einsum(): subscript {chr(lab)} is repeated for operand {k} but the sizes don't match, {s} != {own[lab]}")
            own[lab] = s
        for lab, s in zip(labels, x.shape):
            if lab in sizes and s != sizes[lab] and s != 1 and sizes[lab] != 1:
                name = "..." if lab < 0 else chr(lab)
                raise ShapeError(
                    f"einsum(): subscript {name} has size {s} for operand {k} which does not broadcast with previously "
                    f"seen size {sizes[lab]}"
                )
            sizes[lab] = builtins.max(sizes.get(lab, s), s)

    # The output labels.
    if arrow:
        out_terms, out_ell = _parse_term(rhs, len(lhs) + 2)
        out: List[_Label] = []
        for lab in out_terms:
            if lab == 0:
                out += ell_labels
                continue
            if lab in out:
                raise ValueError(f"einsum(): output subscript {chr(lab)} appears more than once in the output")
            if not any(lab in labels for labels in parsed):
                raise ValueError(f"einsum(): output subscript {chr(lab)} does not appear in the equation for any input operand")
            out.append(lab)
    else:
        counts: Dict[_Label, int] = {}
        for labels in parsed:
            for lab in labels:
                if lab > 0:
                    counts[lab] = counts.get(lab, 0) + 1
        out = ell_labels + sorted(lab for lab, c in counts.items() if c == 1)

    # Per operand: diagonals, then sum the labels no one else needs.
    cur: List[Tuple[Tensor, List[_Label]]] = []
    for k, (labels, x) in enumerate(zip(parsed, operands)):
        x, labels = _diagonalize(x, labels)
        others = set(out)
        for j, ls in enumerate(parsed):
            if j != k:
                others.update(ls)
        x, labels = _sum_labels(x, labels, [lab for lab in labels if lab not in others])
        cur.append((x, labels))

    # Contract left to right.
    x, labels = cur[0]
    for k in range(1, len(cur)):
        y, ly = cur[k]
        keep = set(out)
        for _, ls in cur[k + 1 :]:
            keep.update(ls)
        x, labels = _contract(x, labels, y, ly, list(keep))
    x, labels = _sum_labels(x, labels, [lab for lab in labels if lab not in out])
    if labels != out:
        x = x.permute(*[labels.index(lab) for lab in out])
    return x


# ----------------------------------------------------------------------------- meshgrid, cdist, trapezoid


def meshgrid(*tensors: Any, indexing: Optional[str] = None) -> Tuple[Tensor, ...]:
    """Coordinate grids from 0-d or 1-d tensors: with `indexing="ij"` (the default)
    output `k` varies along dim `k`; with `"xy"` the first two dims are swapped
    (Cartesian indexing). The results are expanded views of the inputs."""
    ts: List[Any] = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    ix = "ij" if indexing is None else indexing
    if ix not in ("ij", "xy"):
        raise ValueError(f'meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not ts:
        raise ValueError("meshgrid: expects a non-empty TensorList")
    for t in ts:
        if not isinstance(t, Tensor):
            raise TypeError(f"meshgrid: expected Tensors, got {type(t).__name__}")
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got shape {list(t.shape)}")
        if t.dtype != ts[0].dtype:
            raise DTypeError("meshgrid: Expected all tensors in the tensor list to have the same dtype")
        if t.device != ts[0].device:
            raise DeviceError("meshgrid: Expected all tensors in the tensor list to have the same device")
    swap = ix == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    n = len(ts)
    grids = [t.reshape(*[-1 if j == k else 1 for j in range(n)]).expand(*shape) for k, t in enumerate(ts)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def _euclidean_dist(x1: Tensor, x2: Tensor) -> Tensor:
    """PyTorch's `_euclidean_dist`: one matrix product of `[-2 x, |x|^2, 1]` and
    `[y, 1, |y|^2]` gives `|x - y|^2`, clamped at 0 (rounding can make it negative)."""
    from ._core import cat, ones_like

    xn, yn = (x1 * x1).sum(-1, keepdim=True), (x2 * x2).sum(-1, keepdim=True)
    xa = cat([x1 * -2, xn, ones_like(xn)], -1)
    ya = cat([x2, ones_like(yn), yn], -1)
    return (xa @ ya.transpose(-2, -1)).clamp_min(0).sqrt()


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of `x1` (`[B..., P, M]`) and each row of `x2`
    (`[B..., R, M]`): `[B..., P, R]`. `p=0` counts the differing coordinates, `p=inf`
    takes the largest. `p=2` goes through PyTorch's matrix-product form
    (`|x|^2 - 2 x.y + |y|^2`, clamped at 0) with `compute_mode="use_mm_for_euclid_dist"`
    and by default when either side has more than 25 rows, as PyTorch chooses: fast,
    no (P, R, M) difference tensor, less exact for near points. Otherwise directly;
    the direct path's gradient at a zero distance is zero, as PyTorch's."""
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"cdist: {compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if not isinstance(x, Tensor):
            raise TypeError(f"cdist(): argument '{name.lower()}' must be Tensor, not {type(x).__name__}")
        if x.ndim < 2:
            raise ShapeError(f"cdist: only supports at least 2D tensors, {name} got: {x.ndim}D (shape {list(x.shape)})")
        if not x.is_floating_point():
            raise DTypeError(f"cdist: only supports floating-point dtypes, {name} got: {x.dtype}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: X1 and X2 must have the same number of columns. X1: {list(x1.shape)} X2: {list(x2.shape)}")
    if p < 0:
        raise ValueError(f"cdist: only supports non-negative p values, got {p}")
    if p == 2 and (
        compute_mode == "use_mm_for_euclid_dist"
        or (compute_mode == "use_mm_for_euclid_dist_if_necessary" and (x1.shape[-2] > 25 or x2.shape[-2] > 25))
    ):
        return _euclidean_dist(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # [B..., P, R, M]
    if diff.shape[-1] == 0:
        return diff.sum(-1)  # no coordinates: every distance is 0
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1).detach()
    ad = diff.abs()
    if p == float("inf"):
        return ad.amax(-1)
    if p == 1:
        return ad.sum(-1)
    zero = ad == 0
    if p == 2:
        s = (diff * diff).sum(-1)
    else:
        # |d|^p with the gradient at d == 0 kept finite (0) for every p.
        s = where(zero, 0.0, where(zero, 1.0, ad) ** p).sum(-1)
    # s^(1/p), zero where s is 0 with a zero (not NaN) gradient there.
    s0 = s == 0
    safe = where(s0, 1.0, s)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(s0, 0.0, root)


def trapezoid(y: Tensor, x: Optional[Tensor] = None, *, dx: Optional[Number] = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along `dim`: samples `y` at points `x` (1-d, or `y`'s shape),
    or spaced `dx` apart (default 1)."""
    if not isinstance(y, Tensor):
        raise TypeError(f"trapezoid(): argument 'y' must be Tensor, not {type(y).__name__}")
    if x is not None and dx is not None:
        raise ValueError("trapezoid: received both x and dx")
    if y.ndim == 0:
        raise IndexError("trapezoid: Dimension out of range (y is a 0-d tensor)")
    d = dim + y.ndim if dim < 0 else dim
    if not 0 <= d < y.ndim:
        raise IndexError(f"trapezoid: Dimension out of range (expected to be in range of [{-y.ndim}, {y.ndim - 1}], but got {dim})")
    yf = y if y.is_floating_point() else y.float()
    n = yf.shape[d]
    if n == 0:
        return yf.sum(d)  # zeros of the reduced shape, as PyTorch
    if x is None:
        step = 1 if dx is None else dx
        ends = yf.narrow(d, 0, 1).squeeze(d) + yf.narrow(d, n - 1, 1).squeeze(d)
        return (yf.sum(d) - ends * 0.5) * step
    if not isinstance(x, Tensor):
        x = tensor(x)
    if x.ndim == 1:
        if x.shape[0] != n:
            raise ShapeError(f"trapezoid: There must be one `x` value for each sample point, got {x.shape[0]} and {n}")
        dxs = x[1:] - x[:-1]
        dxs = dxs.reshape(*[-1 if k == d else 1 for k in range(y.ndim)])
    else:
        if list(x.shape) != list(y.shape):
            raise ShapeError(f"trapezoid: x of shape {list(x.shape)} does not match y of shape {list(y.shape)}")
        dxs = x.narrow(d, 1, n - 1) - x.narrow(d, 0, n - 1)
    mid = (yf.narrow(d, 1, n - 1) + yf.narrow(d, 0, n - 1)) * dxs
    return mid.sum(d) * 0.5


def trapz(y: Tensor, x: Optional[Tensor] = None, *, dx: Optional[Number] = None, dim: int = -1) -> Tensor:
    """Alias of `trapezoid` (PyTorch's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)
