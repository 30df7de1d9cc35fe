"""Sparse COO tensors, as PyTorch's `torch.sparse_coo` layout: `sparse_coo_tensor`,
`Tensor.to_sparse`, and the `SparseTensor` they make.

A `SparseTensor` is a `Tensor` holding `indices` (int64, sparse_dim x nnz) and `values`
(nnz x dense dims). Its own methods work on those two only: products with dense
matrices (`mm`, `@`, `torch.sparse.mm`, `spmm`) cost O(nnz x columns), `coalesce`,
`sum`, elementwise products and sums with other sparse tensors or scalars, `t`,
conversions. Any op it does not have reads its value as a dense tensor's, which the
core builds from the indices and values on first need (`src/bindings/sparse.rs`): the
result equals PyTorch's numbers in the dense layout (PyTorch raises for most such
ops), at the cost of the dense memory. In-place ops other than `requires_grad_`, `mul_`, `div_` and `neg_`
(which write the values) are refused. Gradients flow to the values (a leaf `SparseTensor`'s `.grad` is sparse, with
its indices) and to the dense operands, all through differentiable ops of the core.
"""

from __future__ import annotations

import builtins
import copy
from typing import Any, Optional, Sequence, Tuple, Union, cast

from . import _core
from ._core import DTypeError, ShapeError, Tensor, as_tensor, zeros
from ._size import Size

Number = Union[int, float, bool]


class layout:
    """A memory layout (`torch.layout`): `strided` (dense) or `sparse_coo`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"candle_py.{self._name}"

    def __reduce__(self) -> str:
        return self._name


strided = layout("strided")
sparse_coo = layout("sparse_coo")


def _strides(sizes: Sequence[int]) -> list:
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(acc)
        acc *= s
    return out[::-1]


def _make(indices: Tensor, values: Tensor, size: Sequence[int], coalesced: bool) -> "SparseTensor":
    """The sparse tensor of these parts (checked by the core)."""
    obj = cast(SparseTensor, Tensor.__new__(SparseTensor, zeros(0, dtype=values.dtype, device=values.device)))
    obj._i, obj._v, obj._coalesced = indices, values, coalesced
    obj._size = Size(int(s) for s in size)
    _core._sparse_attach(obj, indices, values, list(obj._size))
    return obj


def _refuse(name: str) -> Any:
    def f(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name}: not supported for sparse COO tensors (in place, only requires_grad_, mul_, div_ and neg_ are)")

    f.__name__ = name
    return f


class SparseTensor(Tensor):
    """A tensor in the sparse COO layout; see the module docstring for what it computes
    sparsely and what through its dense value."""

    _i: Tensor
    _v: Tensor
    _size: Size
    _coalesced: builtins.bool

    # -- metadata (never builds the dense value) --------------------------------------
    @property
    def shape(self) -> Size:  # type: ignore[override]
        """The full size: sparse dims, then dense dims."""
        return self._size

    def size(self, dim: Optional[int] = None) -> Any:  # type: ignore[override]
        """The shape, or the size of dimension `dim`."""
        if dim is None:
            return self._size
        if not -len(self._size) <= dim < len(self._size):
            raise IndexError(
                f"size: dimension out of range (expected to be in range of [{-len(self._size)}, {len(self._size) - 1}], but got {dim})"
            )
        return self._size[dim]

    def dim(self) -> builtins.int:  # type: ignore[override]
        """Number of dimensions (sparse + dense)."""
        return len(self._size)

    @property
    def ndim(self) -> builtins.int:  # type: ignore[override]
        """Number of dimensions (sparse + dense)."""
        return len(self._size)

    def numel(self) -> builtins.int:  # type: ignore[override]
        """Number of elements of the dense equivalent."""
        n = 1
        for s in self._size:
            n *= s
        return n

    nelement = numel

    def __len__(self) -> builtins.int:
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    @property
    def dtype(self) -> Any:  # type: ignore[override]
        """The values' dtype."""
        return self._v.dtype

    @property
    def device(self) -> Any:  # type: ignore[override]
        """The values' device."""
        return self._v.device

    @property
    def layout(self) -> layout:  # type: ignore[override]
        """`sparse_coo`."""
        return sparse_coo

    def is_contiguous(self, memory_format: Any = None) -> builtins.bool:  # type: ignore[override]
        """PyTorch raises for sparse tensors, which have no strides."""
        raise RuntimeError("is_contiguous: sparse tensors do not have is_contiguous")

    def sparse_dim(self) -> builtins.int:
        """Number of sparse dimensions."""
        return int(self._i.shape[0])

    def dense_dim(self) -> builtins.int:
        """Number of dense dimensions (those of each value)."""
        return self._v.dim() - 1

    def _nnz(self) -> builtins.int:
        """Number of stored entries (duplicates included until coalesced)."""
        return int(self._i.shape[1])

    def is_coalesced(self) -> builtins.bool:
        """Whether the indices are sorted and unique."""
        return self._coalesced

    def _indices(self) -> Tensor:
        """The indices, coalesced or not."""
        return self._i

    def _values(self) -> Tensor:
        """The values, coalesced or not."""
        return self._v

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor."""
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._i

    def values(self) -> Tensor:
        """The values of a coalesced tensor."""
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._v

    # -- autograd ------------------------------------------------------------------------
    @property
    def requires_grad(self) -> builtins.bool:  # type: ignore[override]
        """Whether the values require grad."""
        return bool(self._v.requires_grad)

    @requires_grad.setter
    def requires_grad(self, value: builtins.bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: builtins.bool = True) -> "SparseTensor":  # type: ignore[override]
        """Make this (leaf) sparse tensor require grad: its values do."""
        self._v.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> builtins.bool:  # type: ignore[override]
        """Whether the values are a leaf."""
        return bool(self._v.is_leaf)

    @property
    def grad_fn(self) -> Any:  # type: ignore[override]
        """The node that made the values (None for a leaf)."""
        return self._v.grad_fn

    @property
    def grad(self) -> Optional["SparseTensor"]:  # type: ignore[override]
        """The gradient of a leaf: sparse and coalesced, as the gradient with respect to
        the dense matrix at the stored entries (repeated entries, which all get the same
        gradient through the dense value, count once)."""
        g = self._v.grad
        if g is None:
            return None
        if self._coalesced:
            return _make(self._i, g, self._size, True)
        sizes = list(self._size[: self.sparse_dim()])
        uniq, inv = _linear(self._i, sizes).unique(sorted=True, return_inverse=True)
        tail = (1,) * (g.dim() - 1)
        tot = zeros((uniq.shape[0],) + tuple(g.shape[1:]), dtype=g.dtype, device=g.device).index_add(0, inv, g)
        count = zeros(uniq.shape[0], dtype=g.dtype, device=g.device).index_add(0, inv, _core.ones_like(inv, dtype=g.dtype))
        return _make(_unravel(uniq, sizes), tot / count.reshape((-1,) + tail), self._size, True)

    @grad.setter
    def grad(self, g: Optional[Tensor]) -> None:
        if g is None:
            self._v.grad = None
            return
        if not isinstance(g, Tensor) or tuple(g.shape) != tuple(self._size):
            raise RuntimeError(f"grad: assigned grad has data of a different size: expected {tuple(self._size)}")
        dense = g.to_dense() if isinstance(g, SparseTensor) else g
        self._v.grad = dense.detach()[tuple(self._i)].to(self._v.dtype)

    def detach(self) -> "SparseTensor":  # type: ignore[override]
        """The same parts outside the graph."""
        return _make(self._i, self._v.detach(), self._size, self._coalesced)

    @property  # type: ignore[misc]
    def data(self) -> "SparseTensor":  # type: ignore[override]
        """The same parts outside the graph."""
        return self.detach()

    def clone(self, *, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """A copy of the indices and values (differentiable)."""
        return _make(self._i.clone(), self._v.clone(), self._size, self._coalesced)

    # -- conversions ---------------------------------------------------------------------
    def to_dense(self, dtype: Any = None, *, masked_grad: Optional[bool] = None) -> Tensor:
        """The dense tensor (gradients flow back to the values)."""
        if masked_grad is not None:
            raise NotImplementedError("to_dense: masked_grad is not supported")
        out = Tensor.clone(self)
        return out if dtype is None else out.to(dtype)

    def to_sparse(
        self, sparse_dim: Optional[int] = None, *, layout: Any = None, blocksize: Any = None, dense_dim: Any = None
    ) -> "SparseTensor":  # type: ignore[override]
        """Itself (a different `sparse_dim` goes through the dense value)."""
        if sparse_dim is None or sparse_dim == self.sparse_dim():
            _check_layout(layout, blocksize, dense_dim)
            return self
        return to_sparse(self.to_dense(), sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)

    def coalesce(self) -> "SparseTensor":
        """Sorted, unique indices; the values of repeated indices summed (differentiable)."""
        if self._coalesced:
            return self
        sd = self.sparse_dim()
        sizes = list(self._size[:sd])
        if self._nnz() == 0 or sd == 0:
            if sd == 0 and self._nnz() > 1:
                v = self._v.sum(0, keepdim=True)
                return _make(self._i[:, :1], v, self._size, True)
            return _make(self._i, self._v, self._size, True)
        lin = _linear(self._i, sizes)
        uniq, inv = lin.unique(sorted=True, return_inverse=True)
        vals = zeros((uniq.shape[0],) + tuple(self._v.shape[1:]), dtype=self._v.dtype, device=self._v.device).index_add(0, inv, self._v)
        return _make(_unravel(uniq, sizes), vals, self._size, True)

    def to(self, *args: Any, **kwargs: Any) -> "SparseTensor":  # type: ignore[override]
        """Dtype and device conversion of the values (indices follow the device)."""
        v = self._v.to(*args, **kwargs)
        if v is self._v:
            return self
        return _make(self._i.to(v.device), v, self._size, self._coalesced)

    def cpu(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """On the CPU."""
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: builtins.bool = False, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """On a CUDA device."""
        return self.to("cuda" if device is None else device, non_blocking=non_blocking)

    def type(self, dtype: Any = None, non_blocking: builtins.bool = False, **kwargs: Any) -> Any:  # type: ignore[override]
        """The type name, or a converted copy."""
        if dtype is None:
            return "torch.sparse." + Tensor.type(self._v).split(".")[-1]
        return self.to(dtype)

    def float(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as float32."""
        return self.to(_core.float32)

    def double(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as float64."""
        return self.to(_core.float64)

    def half(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as float16."""
        return self.to(_core.float16)

    def bfloat16(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as bfloat16."""
        return self.to(_core.bfloat16)

    def long(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as int64."""
        return self.to(_core.int64)

    def int(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as int32."""
        return self.to(_core.int32)

    def bool(self, memory_format: Any = None) -> "SparseTensor":  # type: ignore[override]
        """Values as bool."""
        return self.to(_core.bool)

    def numpy(self, *, force: builtins.bool = False) -> Any:  # type: ignore[override]
        """Refused, as in PyTorch."""
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    # -- arithmetic ----------------------------------------------------------------------
    def t(self) -> "SparseTensor":  # type: ignore[override]
        """The transpose of a 2-D sparse matrix."""
        if self.dim() > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
        return self.transpose(0, 1) if self.dim() == 2 else self

    @property
    def T(self) -> "SparseTensor":  # type: ignore[override]
        """The transpose of a 2-D sparse matrix (`t()`)."""
        return self.t()

    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> "SparseTensor":  # type: ignore[override]
        """Swap two sparse dims (their index rows); dense dims cannot be, as in PyTorch."""
        n, sd = self.dim(), self.sparse_dim()
        d0, d1 = _norm(dim0, n, "transpose"), _norm(dim1, n, "transpose")
        size = list(self._size)
        size[d0], size[d1] = size[d1], size[d0]
        if d0 == d1:
            return self
        if d0 < sd and d1 < sd:
            order = list(range(sd))
            order[d0], order[d1] = d1, d0
            return _make(self._i[order], self._v, size, False)
        raise RuntimeError(f"sparse transpose: transposed dimensions must be sparse Got sparse_dim: {sd}, d0: {d0}, d1: {d1}")

    def __neg__(self) -> "SparseTensor":
        return _make(self._i, -self._v, self._size, self._coalesced)

    def neg(self) -> "SparseTensor":  # type: ignore[override]
        """Negated values."""
        return -self

    def mul(self, other: Any) -> Tensor:  # type: ignore[override]
        """Elementwise product: by a scalar or a dense tensor of the same shape (read at
        the entries: sparse); by a sparse tensor, through both dense values (dense memory;
        the product's zeros are not stored); by a dense tensor of another (broadcast)
        shape, through the dense value (a dense result)."""
        if isinstance(other, SparseTensor):
            _same_shape(self, other, "mul")
            return to_sparse(self.to_dense() * other.to_dense(), self.sparse_dim())
        if isinstance(other, Tensor) and other.dim() > 0:
            if tuple(other.shape) != tuple(self._size) or self.dense_dim() != 0:
                return Tensor.mul(self, other)
            return _make(self._i, self._v * other[tuple(self._i)], self._size, self._coalesced)
        return _make(self._i, self._v * other, self._size, self._coalesced)

    multiply = mul
    __mul__ = mul

    def __rmul__(self, other: Any) -> Tensor:
        return self.mul(other)

    def mul_(self, other: Any) -> "SparseTensor":  # type: ignore[override]
        """Scale the values in place by a scalar (or 0-d tensor)."""
        if isinstance(other, Tensor) and other.dim() > 0:
            raise RuntimeError("mul_: a sparse tensor can only be scaled in place by a scalar or a 0-d tensor")
        self._v.mul_(other)
        return self

    def div_(self, other: Any) -> "SparseTensor":  # type: ignore[override]
        """Divide the values in place by a scalar (or 0-d tensor)."""
        if isinstance(other, Tensor) and other.dim() > 0:
            raise RuntimeError("div_: a sparse tensor can only be divided in place by a scalar or a 0-d tensor")
        self._v.div_(other)
        return self

    def neg_(self) -> "SparseTensor":  # type: ignore[override]
        """Negate the values in place."""
        self._v.neg_()
        return self

    def div(self, other: Any, *, rounding_mode: Optional[str] = None) -> "SparseTensor":  # type: ignore[override]
        """Values divided by a scalar (or 0-d tensor)."""
        if isinstance(other, Tensor) and other.dim() > 0:
            raise RuntimeError("div: a sparse tensor can only be divided by a scalar or a 0-d tensor")
        return _make(self._i, self._v.div(other, rounding_mode=rounding_mode), self._size, self._coalesced)

    divide = true_divide = __truediv__ = div

    def add(self, other: Any, *, alpha: Number = 1) -> Tensor:  # type: ignore[override]
        """Sparse + sparse is sparse (entries concatenated, as PyTorch leaves them);
        PyTorch refuses sparse + dense on this side (write dense + sparse)."""
        if isinstance(other, SparseTensor):
            _same_shape(self, other, "add")
            ov = other._v if alpha == 1 else other._v * alpha
            return _make(_core.cat([self._i, other._i], 1), _core.cat([self._v, ov.to(self._v.dtype)], 0), self._size, False)
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")

    __add__ = add

    def __radd__(self, other: Any) -> Tensor:
        if isinstance(other, Tensor):
            return other + self.to_dense()
        raise RuntimeError("add(dense, sparse): the dense operand must be a Tensor")

    def sub(self, other: Any, *, alpha: Number = 1) -> Tensor:  # type: ignore[override]
        """`self - alpha * other` (sparse operands only, as `add`)."""
        return self.add(other, alpha=-alpha)

    subtract = __sub__ = sub

    def __rsub__(self, other: Any) -> Tensor:
        if isinstance(other, Tensor):
            return other - self.to_dense()
        raise RuntimeError("sub(dense, sparse): the dense operand must be a Tensor")

    def sum(self, dim: Any = None, keepdim: builtins.bool = False, dtype: Any = None) -> Tensor:  # type: ignore[override]
        """All entries (a dense 0-d tensor), or over `dim` (sparse while sparse dims remain)."""
        return sparse_sum(self, dim, keepdim=keepdim, dtype=dtype)

    def mm(self, mat2: Tensor) -> Tensor:  # type: ignore[override]
        """sparse (n, m) @ dense (m, p) -> dense (n, p), in O(nnz * p)."""
        return _spmm(self, mat2, "mm")

    def matmul(self, other: Tensor) -> Tensor:  # type: ignore[override]
        """Product with a dense matrix or vector (a sparse right operand: a sparse result)."""
        if isinstance(other, SparseTensor):
            return to_sparse(_spmm(self, other.to_dense(), "matmul"))
        if isinstance(other, Tensor) and other.dim() == 1:
            return _spmm(self, other.unsqueeze(1), "matmul").squeeze(1)
        return _spmm(self, other, "matmul")

    __matmul__ = matmul

    def __rmatmul__(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a Tensor, got {type(other).__name__}")
        if other.dim() == 1:
            return _spmm(self.t(), other.unsqueeze(1), "matmul").squeeze(1)
        return _spmm(self.t(), other.t(), "matmul").t()

    # -- printing, pickling --------------------------------------------------------------
    def __repr__(self) -> str:
        pad = " " * len("tensor(indices=")
        idx = repr(self._i).replace("\n", "\n" + pad)
        val = repr(self._v.detach()).replace("\n", "\n" + " " * len("tensor(values="))
        extra = f"size={tuple(self._size)}, nnz={self._nnz()}"
        if self._v.dtype not in (_core.get_default_dtype(), _core.int64, _core.bool):
            extra += f", dtype={self._v.dtype}"
        extra += ", layout=candle_py.sparse_coo"
        if self._v.grad_fn is not None:
            extra += f", grad_fn=<{self._v.grad_fn.name()}>"
        elif self._v.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor(indices={idx},\n       values={val},\n       {extra})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self) if not spec else format(self.to_dense(), spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_make, (self._i, self._v, tuple(self._size), self._coalesced))

    def __deepcopy__(self, memo: dict) -> "SparseTensor":
        return _make(copy.deepcopy(self._i, memo), copy.deepcopy(self._v, memo), self._size, self._coalesced)


# In-place ops would write the dense value only: refused, except those above (which write the values).
for _name in dir(Tensor):
    if _name.endswith("_") and not _name.startswith("__") and _name not in SparseTensor.__dict__:
        setattr(SparseTensor, _name, _refuse(_name))
for _name in ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
              "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "retain_grad", "register_hook"):  # fmt: skip
    if hasattr(Tensor, _name):
        setattr(SparseTensor, _name, _refuse(_name))


def _norm(d: int, n: int, op: str) -> int:
    if not -builtins.max(n, 1) <= d < builtins.max(n, 1):
        raise IndexError(f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % builtins.max(n, 1)


def _same_shape(a: SparseTensor, b: SparseTensor, op: str) -> None:
    if a._size != b._size or a.sparse_dim() != b.sparse_dim():
        raise ShapeError(
            f"{op}: sparse operands differ: size {tuple(a._size)} (sparse_dim {a.sparse_dim()}) "
            f"vs {tuple(b._size)} (sparse_dim {b.sparse_dim()})"
        )


def _linear(indices: Tensor, sizes: Sequence[int]) -> Tensor:
    """Row-major offsets of each index column over `sizes`."""
    lin = zeros(indices.shape[1], dtype=indices.dtype, device=indices.device)
    for row, st in zip(indices, _strides(sizes)):
        lin = lin + row * st
    return lin


def _unravel(lin: Tensor, sizes: Sequence[int]) -> Tensor:
    """The index columns of row-major offsets `lin` over `sizes`."""
    rows = [(lin // st) % s for s, st in zip(sizes, _strides(sizes))]
    return _core.stack(rows, 0) if rows else zeros((0, lin.shape[0]), dtype=lin.dtype, device=lin.device)


def _need(x: Any, op: str, arg: str, sparse: bool = False) -> None:
    """TypeError naming the op unless `x` is a Tensor (a sparse one if `sparse`)."""
    if not isinstance(x, SparseTensor if sparse else Tensor):
        kind = "a sparse COO Tensor" if sparse else "a Tensor"
        raise TypeError(f"{op}(): argument '{arg}' must be {kind}, not {type(x).__name__}")


def _check_layout(layout_: Any, blocksize: Any, dense_dim: Any) -> None:
    if layout_ not in (None, sparse_coo):
        raise NotImplementedError(f"to_sparse: layout {layout_} is not supported (candle_py has sparse_coo only)")
    if blocksize is not None or dense_dim is not None:
        raise NotImplementedError("to_sparse: blocksize and dense_dim are for the compressed layouts, which candle_py does not have")


def _spmm(s: SparseTensor, d: Any, op: str) -> Tensor:
    """sparse (n, m) @ dense (m, p): each entry's row of `d`, scaled, added into its output row."""
    if not isinstance(d, Tensor):
        raise TypeError(f"{op}: expected a dense Tensor as the second operand, got {type(d).__name__}")
    if s.sparse_dim() != 2 or s.dense_dim() != 0 or d.dim() != 2:
        raise RuntimeError(
            f"{op}: expected a 2-D sparse matrix (sparse_dim 2) and a 2-D dense matrix, "
            f"got sparse {tuple(s._size)} (sparse_dim {s.sparse_dim()}) and dense {tuple(d.shape)}"
        )
    if s._size[1] != d.shape[0]:
        raise ShapeError(f"{op}: mat1 and mat2 shapes cannot be multiplied ({s._size[0]}x{s._size[1]} and {d.shape[0]}x{d.shape[1]})")
    if s.dtype != d.dtype:
        raise DTypeError(f"{op}: expected scalar type {s.dtype} but found {d.dtype}")
    rows, cols = s._i[0], s._i[1]
    out = zeros((s._size[0], d.shape[1]), dtype=d.dtype, device=d.device)
    return out.index_add(0, rows, d.index_select(0, cols) * s._v.unsqueeze(1))


# -- construction ------------------------------------------------------------------------


def sparse_coo_tensor(
    indices: Any,
    values: Any,
    size: Optional[Sequence[int]] = None,
    *,
    dtype: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
    check_invariants: Optional[bool] = None,
    is_coalesced: Optional[bool] = None,
) -> SparseTensor:
    """A sparse COO tensor of `indices` (sparse_dim x nnz integers) and `values`
    (nnz x dense dims); `size` defaults to the smallest that holds the indices. The
    indices are always checked against `size` (PyTorch checks only with
    `check_invariants=True`; an index out of range would be a memory error there)."""
    v = as_tensor(values, dtype=dtype, device=device)
    i = as_tensor(indices, device=v.device)
    i = i.long()  # PyTorch converts indices of any dtype
    if i.dim() != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(i.shape)}")
    if size is None:
        if i.shape[1] == 0:
            raise RuntimeError("sparse_coo_tensor: cannot infer the size of a tensor without entries; pass size")
        size = [int(m) + 1 for m in i.amax(1).tolist()] + list(v.shape[1:])
    if requires_grad:
        v = v.detach().requires_grad_(True)
    # PyTorch calls a tensor of at most one entry coalesced.
    return _make(i, v, list(size), bool(is_coalesced) if is_coalesced is not None else int(i.shape[1]) <= 1)


def to_sparse(
    x: Tensor, sparse_dim: Optional[int] = None, *, layout: Any = None, blocksize: Any = None, dense_dim: Any = None
) -> SparseTensor:
    """`x` as a coalesced sparse COO tensor over its first `sparse_dim` dims (all by
    default): the entries where `x` (or, for a hybrid tensor, any value of the entry's
    dense slice) is nonzero; NaN counts as nonzero. Gradients flow back to `x`."""
    _need(x, "to_sparse", "self")
    if isinstance(x, SparseTensor):
        return x.to_sparse(sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)
    _check_layout(layout, blocksize, dense_dim)
    n = x.dim()
    sd = n if sparse_dim is None else sparse_dim
    if not 0 <= sd <= n:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [0, {n}], got {sd}")
    sizes = list(x.shape[:sd])
    rows = 1
    for s in sizes:
        rows *= s
    flat = x.reshape((rows,) + tuple(x.shape[sd:]))
    nz = flat != 0
    if flat.dim() > 1:
        nz = nz.reshape(rows, -1).any(1)
    lin = nz.nonzero().reshape(-1)
    return _make(_unravel(lin, sizes), flat.index_select(0, lin), list(x.shape), True)


# -- torch.sparse functions ----------------------------------------------------------------


def sparse_sum(input: SparseTensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """`torch.sparse.sum`: over all entries (a dense 0-d tensor) or over `dim`: sparse
    while sparse dims remain, dense otherwise."""
    _need(input, "sparse.sum", "input", sparse=True)
    v = input._v if dtype is None else input._v.to(dtype)
    if dim is None:
        if keepdim:
            raise RuntimeError("sum: keepdim needs dim for a sparse tensor")
        return v.sum()
    n, sd = input.dim(), input.sparse_dim()
    dims = sorted({_norm(d, n, "sum") for d in (dim if isinstance(dim, (list, tuple)) else (dim,))})
    if keepdim:
        raise NotImplementedError("sum: keepdim=True is not supported for sparse tensors (as in PyTorch)")
    dense_axes = [d - sd + 1 for d in dims if d >= sd]
    if dense_axes:
        v = v.sum(dense_axes)
    keep = [d for d in range(sd) if d not in dims]
    size = [input._size[d] for d in range(n) if d not in dims]
    if not keep:
        return v.sum(0)
    out = _make(input._i[keep], v, size, False)
    return out.coalesce()


def _segments(s: SparseTensor, dim: int) -> Tuple[Tensor, int]:
    """For each entry of coalesced `s`, the id of its slice along sparse dim `dim` (the
    entries sharing every other sparse index), and the number of slices."""
    sd = s.sparse_dim()
    others = [d for d in range(sd) if d != dim]
    if not others:
        return zeros(s._nnz(), dtype=_core.int64, device=s.device), 1
    lin = _linear(s._i[others], [s._size[d] for d in others])
    uniq, inv = lin.unique(sorted=True, return_inverse=True)
    return inv, int(uniq.shape[0])


def _sparse_softmax(input: SparseTensor, dim: int, dtype: Any, log: bool) -> SparseTensor:
    _need(input, "sparse.log_softmax" if log else "sparse.softmax", "input", sparse=True)
    s = input.coalesce()
    v = s._v if dtype is None else s._v.to(dtype)
    if not v.dtype.is_floating_point:
        raise DTypeError(f"softmax: expected a floating-point sparse tensor, got {v.dtype}")
    d = _norm(dim, s.dim(), "softmax")
    sd = s.sparse_dim()
    if d >= sd:
        fn = v.log_softmax if log else v.softmax
        return _make(s._i, fn(d - sd + 1), s._size, True)
    seg, count = _segments(s, d)
    tail = tuple(v.shape[1:])
    # Unspecified entries count as -inf: each slice normalises over its stored entries.
    top = zeros((count,) + tail, dtype=v.dtype, device=v.device).scatter_reduce(
        0, seg.reshape((-1,) + (1,) * len(tail)).expand(v.shape), v.detach(), "amax", include_self=False
    )
    shifted = v - top.index_select(0, seg)
    e = shifted.exp()
    tot = zeros((count,) + tail, dtype=v.dtype, device=v.device).index_add(0, seg, e)
    out = shifted - tot.log().index_select(0, seg) if log else e / tot.index_select(0, seg)
    return _make(s._i, out, s._size, True)


def sparse_softmax(input: SparseTensor, dim: int, dtype: Any = None) -> SparseTensor:
    """`torch.sparse.softmax`: softmax along `dim` over the stored entries only (the
    others count as -inf and stay unstored)."""
    return _sparse_softmax(input, dim, dtype, False)


def sparse_log_softmax(input: SparseTensor, dim: int, dtype: Any = None) -> SparseTensor:
    """`torch.sparse.log_softmax`: log of `sparse_softmax`."""
    return _sparse_softmax(input, dim, dtype, True)


def sparse_mm(mat1: Tensor, mat2: Tensor, reduce: str = "sum") -> Tensor:
    """`torch.sparse.mm`: sparse @ dense -> dense, sparse @ sparse -> sparse."""
    _need(mat1, "sparse.mm", "mat1")
    _need(mat2, "sparse.mm", "mat2")
    if reduce != "sum":
        raise NotImplementedError(f"sparse.mm: reduce={reduce!r} is not supported (sum only)")
    if isinstance(mat1, SparseTensor):
        return mat1.matmul(mat2)
    return mat1.mm(mat2)


def sparse_addmm(mat: Tensor, mat1: SparseTensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    """`torch.sparse.addmm`: `beta * mat + alpha * (mat1 @ mat2)`, mat1 sparse."""
    _need(mat, "sparse.addmm", "mat")
    return mat * beta + sparse_mm(mat1, mat2) * alpha


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    """`torch.spmm`: matrix product whose first operand may be sparse."""
    _need(input, "spmm", "input")
    return input.mm(mat2)
