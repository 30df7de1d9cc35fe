"""PyTorch's small linear-algebra and shape functions that are compositions of tensor ops:
products (`outer`, `inner`, `kron`, `mv`, the `add*` family with `beta`/`alpha`,
`tensordot`, `chain_matmul`), constructors (`block_diag`, `cartesian_prod`,
`combinations`, `tril_indices`, `triu_indices`, `vander`), broadcasting and stacking
(`broadcast_tensors`, `broadcast_shapes`, `atleast_*d`, `*stack`), splitting
(`tensor_split`, `hsplit`, `vsplit`, `dsplit`), dim moves and views (`movedim`,
`unflatten`, `adjoint`), gathers (`take_along_dim`, `take`, `narrow_copy`) and
statistics (`cov`, `corrcoef`).

Every result is built from differentiable tensor ops (matmul, mul, reshape, permute,
expand, cat, index_select, gather, ...), so gradients flow through each as through
PyTorch's. The Tensor methods of the same names are attached at the end of the module.
"""

from __future__ import annotations

import builtins
import inspect
import math
import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from ._composed import meshgrid
from ._core import DTypeError, ShapeError, Tensor, arange, cat, int64, ones, stack, zeros
from ._core import bool as _bool
from ._size import Size

Number = Union[int, float, bool]

__all__ = [
    "outer", "ger", "inner", "kron", "mv", "addmm", "addmv", "addr", "baddbmm", "addbmm", "vdot", "tensordot",
    "chain_matmul", "block_diag", "cartesian_prod", "combinations", "tril_indices", "triu_indices", "vander",
    "broadcast_tensors", "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "row_stack",
    "hstack", "vstack", "dstack", "tensor_split", "hsplit", "vsplit", "dsplit", "movedim", "moveaxis", "unflatten",
    "adjoint", "take_along_dim", "take", "narrow_copy", "cov", "corrcoef",
]  # fmt: skip


# -- argument checks -------------------------------------------------------------------


def _tensor(op: str, name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(x).__name__}")
    return x


# The most elements a helper grid (tril_indices, combinations, vander) or a split into
# sections may have: beyond it PyTorch's own allocation fails, and ours would exhaust memory.
_MAX_ELEMS = 2**32


def _shape(x: Tensor) -> List[int]:
    return list(x.shape)


def _same_dtype(op: str, *xs: Tensor) -> None:
    if any(x.dtype != xs[0].dtype for x in xs[1:]):
        names = ", ".join(str(x.dtype).rsplit(".", 1)[-1] for x in xs)
        raise DTypeError(f"{op}: expected all inputs to have the same dtype, got {names}")


def _ndim(op: str, name: str, x: Tensor, n: int) -> None:
    if x.ndim != n:
        raise ShapeError(f"{op}: expected {name} to be {n}-D, got shape {_shape(x)}")


def _wrap(op: str, d: int, n: int) -> int:
    m = builtins.max(n, 1)
    if not -m <= d < m:
        raise IndexError(f"{op}: dimension {d} out of range for a {n}-D tensor (expected in [{-m}, {m - 1}])")
    return d % m


def _is_int(x: Tensor) -> bool:
    return not x.is_floating_point() and x.dtype != _bool


def _scalar(op: str, name: str, v: Any, x: Tensor) -> Number:
    """`beta`/`alpha` as the product's dtype takes them: truncated to int for integer results."""
    if isinstance(v, Tensor):
        v = v.item()
    if _is_int(x):
        return int(v)
    return v


def _expand_to(op: str, input: Tensor, shape: List[int], others: str) -> Tensor:
    try:
        return input.expand(*shape)
    except Exception:
        raise ShapeError(f"{op}: input of shape {_shape(input)} cannot be broadcast to the shape {shape} of {others}") from None


def _scaled_sum(op: str, input: Tensor, prod: Tensor, beta: Any, alpha: Any, others: str, skip_alpha0: bool = True) -> Tensor:
    """`beta * input + alpha * prod`, input broadcast to prod's shape; beta == 0 ignores input's
    values (NaN/inf included) and, with `skip_alpha0`, alpha == 0 the product's, as PyTorch's
    GEMM/GEMV do (its baddbmm and addr multiply by the zero)."""
    shape = _shape(prod)
    inp = _expand_to(op, input, shape, others)
    b = _scalar(op, "beta", beta, prod)
    a = _scalar(op, "alpha", alpha, prod)
    mask = ones(*shape, dtype=_bool, device=prod.device)
    if a == 0 and skip_alpha0:
        prod = prod.masked_fill(mask, 0)  # zeros, still in the graph (zero gradients, as PyTorch's)
    elif a != 1:
        prod = prod * a
    if b == 0:
        return prod + inp.masked_fill(mask, 0)
    return prod + (inp if b == 1 else inp * b)


# -- products --------------------------------------------------------------------------


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-D tensors: `out[i, j] = input[i] * vec2[j]` (type-promoted)."""
    _tensor("outer", "input", input)
    _tensor("outer", "vec2", vec2)
    _ndim("outer", "input", input, 1)
    _ndim("outer", "vec2", vec2, 1)
    return input.reshape(-1, 1) * vec2


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """Alias of `outer` (PyTorch's older name)."""
    return outer(input, vec2)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors of one dtype (real tensors: same as `dot`)."""
    _tensor("vdot", "input", input)
    _tensor("vdot", "other", other)
    _ndim("vdot", "input", input, 1)
    _ndim("vdot", "other", other, 1)
    _same_dtype("vdot", input, other)
    if input.shape[0] != other.shape[0]:
        raise ShapeError(f"vdot: inconsistent tensor size, shapes {_shape(input)} and {_shape(other)}")
    return input.dot(other)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """The product of a matrix (`[n, m]`) and a vector (`[m]`): a `[n]` tensor."""
    _tensor("mv", "input", input)
    _tensor("mv", "vec", vec)
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv: expected a matrix and a vector, got shapes {_shape(input)} and {_shape(vec)}")
    _same_dtype("mv", input, vec)
    if input.shape[1] != vec.shape[0]:
        raise ShapeError(f"mv: size mismatch, matrix of shape {_shape(input)} and vector of shape {_shape(vec)}")
    return input.matmul(vec)


def _dims_list(op: str, dims: Any) -> List[int]:
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if not isinstance(dims, (list, tuple)):
        raise TypeError(f"{op}(): each of the dims lists must be a list or tuple of ints, not {type(dims).__name__}")
    return [int(d) for d in dims]


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Sum of products over the dims `dims` names: an int `n` (the last `n` of `a` with the
    first `n` of `b`), or a pair of dim lists (`([1, 0], [0, 1])`)."""
    _tensor("tensordot", "a", a)
    _tensor("tensordot", "b", b)
    if isinstance(dims, Tensor) and dims.numel() == 1:
        dims = int(dims.item())
    if isinstance(dims, (list, tuple)) or isinstance(dims, Tensor):
        if len(dims) != 2:
            raise ValueError(f"tensordot: dims must be an int or a pair of dim lists, got {dims}")
        da, db = _dims_list("tensordot", dims[0]), _dims_list("tensordot", dims[1])
    elif isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0:
            raise ValueError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise ValueError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims} for shapes {_shape(a)} and {_shape(b)}")
        da, db = list(range(-dims, 0)), list(range(dims))
    else:
        raise TypeError(f"tensordot(): argument 'dims' must be an int or a pair of dim lists, not {type(dims).__name__}")
    if len(da) != len(db):
        raise ShapeError(f"tensordot: both dimension lists should have same length, got {da} and {db}")
    _same_dtype("tensordot", a, b)
    da = [_wrap("tensordot", d, a.ndim) for d in da]
    db = [_wrap("tensordot", d, b.ndim) for d in db]
    for lst in (da, db):
        if len(set(lst)) != len(lst):
            raise ValueError(f"tensordot: a dim appears multiple times in the list of dims {lst}")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            # a size-1 contracted dim broadcasts: the other side is summed over its dim first
            if b.shape[j] == 1:
                a = a.sum(i, keepdim=True)
            elif a.shape[i] == 1:
                b = b.sum(j, keepdim=True)
            else:
                raise ShapeError(
                    f"tensordot: contracted dimensions need to match, but first has size {a.shape[i]} in dim {i}"
                    f" and second has size {b.shape[j]} in dim {j} (shapes {_shape(a)} and {_shape(b)})"
                )
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = 1
    for d in da:
        k *= a.shape[d]
    sa = [a.shape[d] for d in fa]
    sb = [b.shape[d] for d in fb]
    pa, pb = 1, 1
    for s in sa:
        pa *= s
    for s in sb:
        pb *= s
    left = a.permute(*(fa + da)).reshape(pa, k)
    right = b.permute(*(db + fb)).reshape(k, pb)
    return left.matmul(right).reshape(*(sa + sb))


def inner(input: Tensor, other: Tensor) -> Tensor:
    """The sum of products over the last dims of both inputs (a 0-d input multiplies)."""
    _tensor("inner", "input", input)
    _tensor("inner", "other", other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: the last dimension must match on both input tensors but got shapes {_shape(input)} and {_shape(other)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: dims aligned from the right, each result dim the product of the two."""
    _tensor("kron", "input", input)
    _tensor("kron", "other", other)
    n = builtins.max(input.ndim, other.ndim)
    sa = [1] * (n - input.ndim) + _shape(input)
    sb = [1] * (n - other.ndim) + _shape(other)
    ia: List[int] = []
    ib: List[int] = []
    for x, y in zip(sa, sb):
        ia += [x, 1]
        ib += [1, y]
    return (input.reshape(*ia) * other.reshape(*ib)).reshape(*[x * y for x, y in zip(sa, sb)])


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`beta * input + alpha * (mat1 @ mat2)`, `input` broadcast to `[n, p]`; with `beta=0` the
    input's values are ignored (NaN and inf too). Integer results take `beta`/`alpha` as ints."""
    for nm, x in (("input", input), ("mat1", mat1), ("mat2", mat2)):
        _tensor("addmm", nm, x)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"addmm: mat1 and mat2 must be matrices, got shapes {_shape(mat1)} and {_shape(mat2)}")
    if mat1.shape[1] != mat2.shape[0]:
        raise ShapeError(f"addmm: mat1 and mat2 shapes cannot be multiplied ({_shape(mat1)} and {_shape(mat2)})")
    _same_dtype("addmm", input, mat1, mat2)
    return _scaled_sum("addmm", input, mat1.matmul(mat2), beta, alpha, f"mat1 @ mat2 ({_shape(mat1)} @ {_shape(mat2)})")


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`beta * input + alpha * (mat @ vec)`, `input` broadcast to `[n]` (rules of `addmm`)."""
    for nm, x in (("input", input), ("mat", mat), ("vec", vec)):
        _tensor("addmv", nm, x)
    if mat.ndim != 2 or vec.ndim != 1 or input.ndim > 1:
        raise ShapeError(f"addmv: vector + matrix @ vector expected, got shapes {_shape(input)}, {_shape(mat)} and {_shape(vec)}")
    if mat.shape[1] != vec.shape[0]:
        raise ShapeError(f"addmv: size mismatch, got input {_shape(input)}, mat {_shape(mat)}, vec {_shape(vec)}")
    _same_dtype("addmv", input, mat, vec)
    return _scaled_sum("addmv", input, mat.matmul(vec), beta, alpha, f"mat @ vec ({_shape(mat)} @ {_shape(vec)})")


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`beta * input + alpha * outer(vec1, vec2)`, type-promoted like `add`; integer inputs
    refuse float `beta`/`alpha`, and `beta=0` ignores the input's values."""
    for nm, x in (("input", input), ("vec1", vec1), ("vec2", vec2)):
        _tensor("addr", nm, x)
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"addr: vec1 and vec2 must be 1-D, got shapes {_shape(vec1)} and {_shape(vec2)}")
    prod = outer(vec1, vec2)
    dt = _promoted([input, prod])
    if dt != _bool and not _is_float_dtype(dt):
        for nm, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise DTypeError(f"addr: for integral input tensors, argument {nm} must not be a floating point number")
    others = f"outer(vec1, vec2) ({_shape(vec1)}, {_shape(vec2)})"
    if dt == _bool:
        inp = _expand_to("addr", input, _shape(prod), others)
        p = prod if alpha else prod.logical_and(zeros(*_shape(prod), dtype=_bool, device=prod.device))
        return p.logical_or(inp) if beta else p
    return _scaled_sum("addr", input.to(dt), prod.to(dt), beta, alpha, others, skip_alpha0=False)


def _bmm_check(op: str, input: Tensor, b1: Tensor, b2: Tensor) -> None:
    for nm, x in (("input", input), ("batch1", b1), ("batch2", b2)):
        _tensor(op, nm, x)
    if b1.ndim != 3 or b2.ndim != 3:
        raise ShapeError(f"{op}: batch1 and batch2 must be 3-D tensors, got shapes {_shape(b1)} and {_shape(b2)}")
    if b1.shape[0] != b2.shape[0] or b1.shape[2] != b2.shape[1]:
        raise ShapeError(f"{op}: batch1 and batch2 shapes cannot be multiplied ({_shape(b1)} and {_shape(b2)})")
    _same_dtype(op, input, b1, b2)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`beta * input + alpha * (batch1 @ batch2)` per batch, `input` broadcast to `[b, n, p]`."""
    _bmm_check("baddbmm", input, batch1, batch2)
    others = f"batch1 @ batch2 ({_shape(batch1)} @ {_shape(batch2)})"
    return _scaled_sum("baddbmm", input, batch1.matmul(batch2), beta, alpha, others, skip_alpha0=False)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`beta * input + alpha * sum_b(batch1[b] @ batch2[b])`, `input` broadcast to `[n, p]`."""
    _bmm_check("addbmm", input, batch1, batch2)
    b, n, m = batch1.shape
    p = batch2.shape[2]
    # the batch sum as one product: [n, b*m] @ [b*m, p]
    prod = batch1.permute(1, 0, 2).reshape(n, b * m).matmul(batch2.reshape(b * m, p))
    return _scaled_sum("addbmm", input, prod, beta, alpha, f"the summed products of batch1 {_shape(batch1)} and batch2 {_shape(batch2)}")


def _tensors_arg(op: str, args: Tuple[Any, ...]) -> List[Tensor]:
    """Varargs tensors, or one list/tuple of them."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    return [_tensor(op, f"tensors[{i}]", x) for i, x in enumerate(args)]


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of a chain of 2-D tensors, `matrices[0] @ matrices[1] @ ...` (deprecated in
    PyTorch in favour of `linalg.multi_dot`)."""
    ms = _tensors_arg("chain_matmul", matrices)
    if not ms:
        raise ValueError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(ms):
        if m.ndim != 2:
            raise ShapeError(f"chain_matmul: tensor {i} must be 2-D, got shape {_shape(m)}")
    _same_dtype("chain_matmul", *ms)
    if len(ms) == 1:
        return ms[0].clone()
    out = ms[0]
    for i, m in enumerate(ms[1:], 1):
        if out.shape[1] != m.shape[0]:
            raise ShapeError(f"chain_matmul: matrices {i - 1} and {i} cannot be multiplied ({_shape(ms[i - 1])} and {_shape(m)})")
        out = out.matmul(m)
    return out


# -- constructors ----------------------------------------------------------------------


def _promoted(xs: Sequence[Tensor]) -> Any:
    """The dtype PyTorch's type promotion gives `xs` together (all as dimensioned tensors)."""
    return cat([x.reshape(-1)[:0] for x in xs]).dtype


def _is_float_dtype(dt: Any) -> bool:
    return builtins.bool(zeros(0, dtype=dt).is_floating_point())


def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the 0-d, 1-d (one row) and 2-d inputs, type-promoted."""
    ts = [_tensor("block_diag", f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    if not ts:
        return zeros(1, 0)
    mats = []
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise ShapeError(f"block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has shape {_shape(t)}")
        mats.append(t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t)
    dt = _promoted(ts)
    total = builtins.sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        parts = [zeros(r, left, dtype=dt, device=m.device), m.to(dt), zeros(r, total - left - c, dtype=dt, device=m.device)]
        rows.append(cat(parts, 1))
        left += c
    return cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """The Cartesian product of 1-D tensors of one dtype: `[N, k]` rows (one tensor: itself)."""
    ts = [_tensor("cartesian_prod", f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    if not ts:
        raise ValueError("cartesian_prod: expects at least one tensor")
    for t in ts:
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod: Expect a 1D vector, but got shape {_shape(t)}")
    if len(ts) == 1:
        return ts[0]
    _same_dtype("cartesian_prod", *ts)
    grids = meshgrid(*ts, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-`r` combinations of a 1-D tensor's elements, in lexicographic order of position,
    as rows of a `[N, r]` tensor (`with_replacement`: repeats allowed); `r=0` gives an empty 1-D tensor."""
    _tensor("combinations", "input", input)
    if input.ndim != 1:
        raise ShapeError(f"combinations: Expect a 1D vector, but got shape {_shape(input)}")
    if r < 0:
        raise ValueError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    n = input.shape[0]
    if n == 0 or (r > n and not with_replacement):
        return input.new_empty(0, r)
    if r * math.log2(builtins.max(n, 2)) > 32:
        raise ValueError(f"combinations: {n} ** {r} candidate rows exceed {_MAX_ELEMS} (input shape {_shape(input)})")
    idx = arange(n, device=input.device)
    grids = [g.reshape(-1) for g in meshgrid(*([idx] * r), indexing="ij")]
    mask = ones(n**r, dtype=_bool, device=input.device)
    for a, b in zip(grids, grids[1:]):
        mask = mask.logical_and(a <= b if with_replacement else a < b)
    cols = [input.index_select(0, g.masked_select(mask)) for g in grids]
    return stack(cols, 1)


def _tri_indices(op: str, row: int, col: int, offset: int, dtype: Any, device: Any, upper: bool) -> Tensor:
    for nm, v in (("row", row), ("col", col), ("offset", offset)):
        if not isinstance(v, int) or isinstance(v, builtins.bool):
            raise TypeError(f"{op}(): argument '{nm}' must be int, not {type(v).__name__}")
    if row < 0:
        raise ValueError(f"{op}: row must be non-negative, got {row}")
    if col < 0:
        raise ValueError(f"{op}: col must be non-negative, got {col}")
    if dtype not in (int64, None) and str(dtype).rsplit(".", 1)[-1] not in ("int32", "int16", "uint8"):
        raise DTypeError(f"{op}: not implemented for dtype {dtype}")
    if row * col > _MAX_ELEMS:
        raise ValueError(f"{op}: a {row} x {col} matrix has more than {_MAX_ELEMS} entries")
    i, j = meshgrid(arange(row, device=device), arange(col, device=device), indexing="ij")
    keep = (j - i >= offset) if upper else (j - i <= offset)
    out = stack([i.masked_select(keep), j.masked_select(keep)], 0)
    return out if dtype in (None, int64) else out.to(dtype)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None, layout: Any = None) -> Tensor:
    """The `[2, N]` (row, column) coordinates of the lower triangle of a `row x col` matrix
    (entries with `col - row <= offset`), in row-major order; int64 unless `dtype` says otherwise."""
    return _tri_indices("tril_indices", row, col, offset, dtype, device, False)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None, layout: Any = None) -> Tensor:
    """The `[2, N]` (row, column) coordinates of the upper triangle of a `row x col` matrix
    (entries with `col - row >= offset`), in row-major order; int64 unless `dtype` says otherwise."""
    return _tri_indices("triu_indices", row, col, offset, dtype, device, True)


def vander(x: Tensor, N: Optional[int] = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D tensor: columns `x ** (N-1) ... x ** 0` (increasing: the
    reverse), built by a cumulative product; bool inputs give int64."""
    _tensor("vander", "x", x)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got shape {_shape(x)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    if x.dtype == _bool:
        x = x.to(int64)
    if n == 0 or x.shape[0] == 0:
        return x.new_empty(x.shape[0], n)
    if x.shape[0] * n > _MAX_ELEMS:
        raise ValueError(f"vander: a {x.shape[0]} x {n} result has more than {_MAX_ELEMS} entries")
    cols = [ones(x.shape[0], 1, dtype=x.dtype, device=x.device)]
    if n > 1:
        cols.append(x.reshape(-1, 1).expand(x.shape[0], n - 1).cumprod(1))
    out = cat(cols, 1)
    return out if increasing else out.flip(1)


# -- broadcasting, stacking ------------------------------------------------------------


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape the given shapes (ints or sequences of ints) broadcast to, as a `Size`."""
    out: List[int] = []
    for k, s in enumerate(shapes):
        dims = [int(s)] if isinstance(s, int) else [int(d) for d in s]
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for i in range(1, len(dims) + 1):
            d, o = dims[-i], out[-i]
            if d < 0:
                raise ValueError(f"broadcast_shapes: trying to create a tensor with negative dimension {d}: {dims}")
            if d == o or d == 1:
                continue
            if o == 1:
                out[-i] = d
            else:
                raise ShapeError(f"broadcast_shapes: shape {dims} (argument {k}) cannot be broadcast to {out} (dim {-i}: {d} vs {o})")
    return Size(out)


def broadcast_tensors(*tensors: Tensor) -> Tuple[Tensor, ...]:
    """The inputs expanded (views) to their common broadcast shape."""
    ts = [_tensor("broadcast_tensors", f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    try:
        shape = list(broadcast_shapes(*[t.shape for t in ts]))
    except ShapeError:
        raise ShapeError(f"broadcast_tensors: shapes {[_shape(t) for t in ts]} cannot be broadcast together") from None
    return tuple(t.expand(*shape) for t in ts)


def _atleast(op: str, n: int, tensors: Tuple[Any, ...]) -> Any:
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    ts = _tensors_arg(op, tensors)
    out = []
    for t in ts:
        s = _shape(t)
        if t.ndim < n:
            if n == 3 and t.ndim == 2:
                s = s + [1]
            elif n == 3 and t.ndim == 1:
                s = [1] + s + [1]
            else:
                s = [1] * (n - t.ndim) + s
            t = t.reshape(*s)
        out.append(t)
    return out[0] if single else tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    """Each input with at least one dim (0-d -> `[1]`); a tuple for several inputs or a list."""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each input with at least two dims (`[n]` -> `[1, n]`); a tuple for several inputs or a list."""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """Each input with at least three dims (`[n]` -> `[1, n, 1]`, `[m, n]` -> `[m, n, 1]`)."""
    return _atleast("atleast_3d", 3, tensors)


def _seq(op: str, tensors: Any) -> List[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be a tuple or list of Tensors, not {type(tensors).__name__}")
    ts = [_tensor(op, f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    if not ts:
        raise ValueError(f"{op} expects a non-empty TensorList")
    return ts


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Inputs joined column-wise: along dim 0 for 1-D inputs, dim 1 otherwise (0-d as 1-D)."""
    ts = atleast_1d(_seq("hstack", tensors))
    return cat(list(ts), 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Inputs joined row-wise (along dim 0) after `atleast_2d`."""
    return cat(list(atleast_2d(_seq("vstack", tensors))), 0)


def row_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Alias of `vstack`."""
    return cat(list(atleast_2d(_seq("row_stack", tensors))), 0)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Inputs joined depth-wise (along dim 2) after `atleast_3d`."""
    return cat(list(atleast_3d(_seq("dstack", tensors))), 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Inputs as columns: 0-d and 1-d inputs become `[n, 1]` columns, then joined along dim 1."""
    ts = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in _seq("column_stack", tensors)]
    return cat(ts, 1)


# -- splitting -------------------------------------------------------------------------


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> Tuple[Tensor, ...]:
    """Views of `input` split along `dim`: into `n` near-equal parts (an int, or a 0-d integer
    tensor; the first `size % n` one longer), or at the given indices (list, tuple, 1-D tensor)."""
    _tensor("tensor_split", "input", input)
    if input.ndim == 0:
        raise ShapeError(f"tensor_split: expected at least a 1-dimensional tensor, got shape {_shape(input)}")
    d = _wrap("tensor_split", dim, input.ndim)
    size = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.is_floating_point() or ios.dtype == _bool:
            raise DTypeError(f"tensor_split: indices_or_sections must be an integer tensor, got {ios.dtype}")
        if ios.ndim > 1:
            raise ShapeError(f"tensor_split: indices_or_sections must be a 0-D or 1-D tensor, got shape {_shape(ios)}")
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, int) and not isinstance(ios, bool):
        if ios <= 0:
            raise ValueError(f"tensor_split: number of sections must be larger than 0, got {ios}")
        if ios > _MAX_ELEMS:
            raise ValueError(f"tensor_split: {ios} sections are more than {_MAX_ELEMS} (input shape {_shape(input)})")
        q, rem = divmod(size, ios)
        bounds = []
        at = 0
        for k in range(ios - 1):
            at += q + (1 if k < rem else 0)
            bounds.append(at)
    elif isinstance(ios, (list, tuple)):
        bounds = [int(i) for i in ios]
    else:
        raise TypeError(
            f"tensor_split(): argument 'indices_or_sections' must be an int, a sequence of ints or a Tensor, not {type(ios).__name__}"
        )
    out, start = [], 0
    for end in bounds + [size]:
        out.append(_slice(input, d, start, end))
        start = end
    return tuple(out)


def _slice(x: Tensor, d: int, start: int, end: int) -> Tensor:
    """`x[start:end]` along `d` (Python's slice rules: negatives from the end, clamped)."""
    size = x.shape[d]
    s = builtins.min(builtins.max(start + size if start < 0 else start, 0), size)
    e = builtins.min(builtins.max(end + size if end < 0 else end, 0), size)
    return x.narrow(d, s, builtins.max(e - s, 0))


def _xsplit(op: str, input: Tensor, ios: Any, dim: int, need: int) -> Tuple[Tensor, ...]:
    _tensor(op, "input", input)
    if input.ndim < need:
        raise ShapeError(
            f"torch.{op} requires a tensor with at least {need} dimension, but got a tensor with {input.ndim} dimensions"
            f" (shape {_shape(input)})"
        )
    if isinstance(ios, int) and not isinstance(ios, bool):
        size = input.shape[dim]
        if ios == 0 or size % ios != 0:
            raise ValueError(
                f"torch.{op} attempted to split along dimension {dim}, but the size of the dimension {size}"
                f" is not divisible by the split_size {ios}!"
            )
    return tensor_split(input, ios, dim)


def hsplit(input: Tensor, indices_or_sections: Any) -> Tuple[Tensor, ...]:
    """`tensor_split` along dim 1 (dim 0 for 1-D inputs); an int must divide the size exactly."""
    _tensor("hsplit", "input", input)
    return _xsplit("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> Tuple[Tensor, ...]:
    """`tensor_split` along dim 0 of a 2+-D input; an int must divide the size exactly."""
    return _xsplit("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> Tuple[Tensor, ...]:
    """`tensor_split` along dim 2 of a 3+-D input; an int must divide the size exactly."""
    return _xsplit("dsplit", input, indices_or_sections, 2, 3)


# -- dims and views --------------------------------------------------------------------


def movedim(input: Tensor, source: Union[int, Sequence[int]], destination: Union[int, Sequence[int]]) -> Tensor:
    """A view with the dims `source` moved to the positions `destination`, the others in order."""
    _tensor("movedim", "input", input)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(
            f"movedim: Invalid source or destination dims: source ({src} dims) should contain the same number of dims"
            f" as destination ({dst} dims)"
        )
    n = input.ndim
    src = [_wrap("movedim", d, n) for d in src]
    dst = [_wrap("movedim", d, n) for d in dst]
    if len(set(src)) != len(src):
        raise ValueError(f"movedim: repeated dim in `source` ({src})")
    if len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in `destination` ({dst})")
    if n == 0:
        return input.reshape(())
    order: List[int] = [-1] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o >= 0 else next(rest) for o in order]
    return input.permute(*order)


def moveaxis(input: Tensor, source: Union[int, Sequence[int]], destination: Union[int, Sequence[int]]) -> Tensor:
    """Alias of `movedim` (NumPy's name)."""
    return movedim(input, source, destination)


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """`input` with dim `dim` split into `sizes` (one entry may be -1); same as `Tensor.unflatten`."""
    _tensor("unflatten", "input", input)
    return input.unflatten(dim, sizes)


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims; for real tensors a transposed view."""
    _tensor("adjoint", "input", input)
    if input.ndim < 2:
        raise ShapeError(
            f"adjoint: tensor.adjoint() is only supported on matrices or batches of matrices."
            f" Got {input.ndim}-D tensor (shape {_shape(input)})."
        )
    return input.transpose(-2, -1)


# -- gathers ---------------------------------------------------------------------------


def take_along_dim(input: Tensor, indices: Tensor, dim: Optional[int] = None) -> Tensor:
    """Values of `input` at `indices` along `dim` (the two broadcast in the other dims);
    `dim=None` gathers from the flattened input with the flattened indices."""
    _tensor("take_along_dim", "input", input)
    _tensor("take_along_dim", "indices", indices)
    if indices.is_floating_point() or indices.dtype == _bool:
        raise DTypeError(f"take_along_dim: dtype of indices should be an integer type but got {indices.dtype}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if indices.dtype != int64:
        raise DTypeError(f"take_along_dim(): dtype of indices should be int64 but got {indices.dtype}")
    if input.ndim != indices.ndim:
        raise ShapeError(
            f"take_along_dim: input and indices should have the same number of dimensions,"
            f" but got shapes {_shape(input)} and {_shape(indices)}"
        )
    d = _wrap("take_along_dim", dim, input.ndim)
    si, sx = _shape(input), _shape(indices)
    si[d], sx[d] = 1, 1
    try:
        shape = list(broadcast_shapes(si, sx))
    except ShapeError:
        raise ShapeError(
            f"take_along_dim: input of shape {_shape(input)} and indices of shape {_shape(indices)} cannot be broadcast"
        ) from None
    a, b = list(shape), list(shape)
    if input.ndim:
        a[d], b[d] = input.shape[d], indices.shape[d]
    return input.expand(*a).gather(d, indices.expand(*b))


def take(input: Tensor, index: Tensor) -> Tensor:
    """Values of the flattened `input` at `index` (an int64 tensor, negative indices from the
    end), in `index`'s shape."""
    _tensor("take", "input", input)
    _tensor("take", "index", index)
    if index.dtype != int64:
        raise DTypeError(f"take(): Expected a long tensor for index, but got {index.dtype}")
    n = input.numel()
    flat = index.reshape(-1)
    if flat.numel():
        lo, hi = int(flat.min().item()), int(flat.max().item())
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"take: out of range: tried to access index {bad} on a tensor of {n} elements (input shape {_shape(input)}).")
    flat = flat.remainder(builtins.max(n, 1)) if flat.numel() else flat
    return input.reshape(-1).gather(0, flat).reshape(*_shape(index))


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A new tensor (not a view) of `input.narrow(dim, start, length)`."""
    _tensor("narrow_copy", "input", input)
    if input.ndim == 0:
        raise ShapeError(f"narrow_copy: narrow() cannot be applied to a 0-dim tensor (shape {_shape(input)})")
    d = _wrap("narrow_copy", dim, input.ndim)
    size = input.shape[d]
    s = start + size if start < 0 else start
    if not 0 <= s <= size:
        raise IndexError(f"narrow_copy: start ({start}) out of range for dimension {d} of size {size} (shape {_shape(input)})")
    if length < 0 or s + length > size:
        raise ValueError(f"narrow_copy: start ({start}) + length ({length}) exceeds dimension size ({size}) (shape {_shape(input)})")
    return input.narrow(d, s, length).clone()


# -- statistics ------------------------------------------------------------------------


def cov(input: Tensor, *, correction: int = 1, fweights: Optional[Tensor] = None, aweights: Optional[Tensor] = None) -> Tensor:
    """The covariance of the variables in `input`'s rows (observations in columns; a 1-D input
    is one variable), with Bessel's `correction` and optional integer frequency weights
    `fweights` and float observation weights `aweights` (PyTorch's formula)."""
    _tensor("cov", "input", input)
    if input.ndim > 2:
        raise ShapeError(f"cov(): expected input to have two or fewer dimensions but got an input with shape {_shape(input)}")
    if input.dtype == _bool:
        raise DTypeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    nobs = x.shape[1]
    w: Optional[Tensor] = None
    if fweights is not None:
        _tensor("cov", "fweights", fweights)
        if fweights.ndim > 1:
            raise ShapeError(f"cov(): expected fweights to have one or fewer dimensions but got fweights of shape {_shape(fweights)}")
        if not _is_int(fweights):
            raise DTypeError(f"cov(): expected fweights to have integral dtype but got fweights with {fweights.dtype} dtype")
        if fweights.numel() != nobs:
            raise ShapeError(
                f"cov(): expected fweights to have the same numel as there are observations in the input"
                f" but got {fweights.numel()} != {nobs}"
            )
        if nobs and fweights.min().item() < 0:
            raise ValueError("cov(): fweights cannot be negative")
        w = fweights
    if aweights is not None:
        _tensor("cov", "aweights", aweights)
        if aweights.ndim > 1:
            raise ShapeError(f"cov(): expected aweights to have one or fewer dimensions but got aweights of shape {_shape(aweights)}")
        if not aweights.is_floating_point():
            raise DTypeError(f"cov(): expected aweights to have floating point dtype but got aweights with {aweights.dtype} dtype")
        if aweights.numel() != nobs:
            raise ShapeError(
                f"cov(): expected aweights to have the same numel as there are observations in the input"
                f" but got {aweights.numel()} != {nobs}"
            )
        if nobs and aweights.min().item() < 0:
            raise ValueError("cov(): aweights cannot be negative")
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum: Any = nobs
        avg = x.sum(1) / nobs if nobs else x.sum(1) * math.nan
    else:
        w = w.reshape(-1)
        w_sum = w.sum()
        if nobs and w_sum.item() == 0:
            raise ValueError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1) / w_sum
    if w is not None and aweights is not None and correction != 0:
        norm: Any = w_sum - correction * (w * aweights.reshape(-1)).sum() / w_sum
    else:
        norm = w_sum - correction
    if (norm.item() if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn(
            "cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of observations.", stacklevel=2
        )
        norm = norm * 0 if isinstance(norm, Tensor) else 0.0
    xc = x - avg.unsqueeze(1)
    c = xc.matmul((xc if w is None else xc * w).t())
    return (c / norm).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in `input`'s rows (`cov` normalised
    by the standard deviations, clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    sd = c.diagonal().sqrt()
    c = c / sd.reshape(-1, 1)
    c = c / sd.reshape(1, -1)
    return c.clip(-1, 1)


# -- Tensor methods --------------------------------------------------------------------


def _as_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a Tensor method: the same function, its first parameter shown as `self`."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    method.__signature__ = sig.replace(parameters=[params[0].replace(name="self")] + params[1:])  # type: ignore[attr-defined]
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _as_inplace(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The in-place twin of an `add*` function: the result written into `self`, which is returned."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        out = fn(self, *args, **kwargs)
        if list(out.shape) != list(self.shape):
            raise ShapeError(f"{fn.__name__}_: the result of shape {list(out.shape)} does not fit self of shape {list(self.shape)}")
        if out.dtype != self.dtype:
            raise DTypeError(f"{fn.__name__}_: result type {out.dtype} can't be cast to the desired output type {self.dtype}")
        self.copy_(out)
        return self

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    method.__signature__ = sig.replace(parameters=[params[0].replace(name="self")] + params[1:])  # type: ignore[attr-defined]
    method.__name__ = method.__qualname__ = fn.__name__ + "_"
    method.__doc__ = f"In-place `{fn.__name__}`: the result written into `self`, which is returned."
    return method


# The Tensor methods PyTorch has for these functions (Tensor.unflatten is the core's own),
# and the in-place twins of the add* family.
for _n in (
    "outer", "ger", "inner", "kron", "mv", "addmm", "addmv", "addr", "baddbmm", "addbmm", "vdot", "movedim", "moveaxis",
    "adjoint", "take_along_dim", "take", "narrow_copy", "tensor_split", "hsplit", "vsplit", "dsplit", "cov", "corrcoef",
):  # fmt: skip
    setattr(Tensor, _n, _as_method(globals()[_n]))
for _n in ("addmm", "addmv", "addr", "baddbmm", "addbmm"):
    setattr(Tensor, _n + "_", _as_inplace(globals()[_n]))
del _n
