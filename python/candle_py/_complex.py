"""Complex tensors: `complex64` / `complex128`, `view_as_complex`, `view_as_real`,
`complex`, `polar`, and the complex arithmetic real programs use (LLaMA's rotary
embedding multiplies by `polar(1, theta)` between two `view_as_*` calls).

Candle has no complex dtype, so a `ComplexTensor` holds its values as a real tensor
with a trailing dimension of 2 (real, imaginary): exactly `view_as_real`'s layout, and
the same bytes as PyTorch's `complex64`. `view_as_complex(x)` wraps a view of `x` (writes
through either side reach the other), `view_as_real(z)` returns a view of that tensor.

Every complex op is composed from differentiable real ops on the two parts (`mul` is
`(ac - bd, ad + bc)`, division is PyTorch's scaled division with its values at zero,
`abs`/`angle`/`sgn` have PyTorch's zero gradient at 0), so autograd runs on the real
tensor: for a real loss the gradient of a complex tensor is `dL/dre + i dL/dim`, which
is PyTorch's convention (the conjugate Wirtinger derivative), and the gradient of the
real tensor under `view_as_complex` is the same numbers.

A `ComplexTensor` is not a subclass of `Tensor` (so `isinstance(z, candle_py.Tensor)`
is False, where PyTorch says True), on purpose: any op without a complex form here then
raises `TypeError` naming the op, instead of running on the real layout and returning
wrong numbers. `grad_fn` is the node of the real tensor underneath (PyTorch names
complex nodes of its own, e.g. `ViewAsComplexBackward0`). `candle_py.complex64` and
`complex128` are likewise not `candle_py.dtype` instances, and creation functions
(`zeros(..., dtype=complex64)`, `tensor([1j])`) do not take them: complex values come from
`view_as_complex`, `complex` and `polar`.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _core
from ._composed_linalg import broadcast_tensors
from ._core import DTypeError, ShapeError, Tensor, float32, float64, stack, where

__all__ = [
    "ComplexTensor", "ComplexDType", "complex64", "complex128", "cfloat", "cdouble",
    "view_as_complex", "view_as_real", "complex", "polar", "is_complex", "real", "imag",
    "conj", "conj_physical", "resolve_conj", "angle",
]  # fmt: skip

Scalar = Union[int, float, bool, "complex"]
_builtin_complex = complex
_builtin_float = float


class ComplexDType:
    """A complex dtype (`complex64`: float32 parts, `complex128`: float64 parts)."""

    __slots__ = ("_name", "_real")

    def __init__(self, name: str, real: Any) -> None:
        self._name = name
        self._real = real

    @property
    def is_complex(self) -> bool:
        """Always True."""
        return True

    @property
    def is_floating_point(self) -> bool:
        """Always False: complex dtypes are not floating point in PyTorch's sense."""
        return False

    @property
    def is_signed(self) -> bool:
        """Always True."""
        return True

    @property
    def itemsize(self) -> int:
        """Bytes per element: both parts."""
        return 2 * int(self._real.itemsize)

    def to_real(self) -> Any:
        """The dtype of each part (`float32` for `complex64`)."""
        return self._real

    def to_complex(self) -> "ComplexDType":
        """This dtype."""
        return self

    def __repr__(self) -> str:
        return f"candle_py.{self._name}"

    __str__ = __repr__

    def __reduce__(self) -> str:
        return self._name


ComplexDType.__module__ = "candle_py"
complex64 = cfloat = ComplexDType("complex64", float32)
complex128 = cdouble = ComplexDType("complex128", float64)
_OF_REAL = {float32: complex64, float64: complex128}


def _cdtype(real_dtype: Any, op: str) -> ComplexDType:
    try:
        return _OF_REAL[real_dtype]
    except KeyError:
        raise DTypeError(
            f"{op}: candle_py's complex tensors have float32 or float64 parts (complex64, complex128), got {real_dtype}"
        ) from None


def _dim(d: int, n: int, op: str) -> int:
    """A logical dim (of `n`) as a non-negative index, with PyTorch's range error."""
    lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
    if not isinstance(d, int) or isinstance(d, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(d).__name__}")
    if not lo <= d <= hi:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d + n if d < 0 else d


def _shape_args(args: Tuple[Any, ...]) -> List[int]:
    """`f(2, 3)` and `f((2, 3))` alike."""
    if len(args) == 1 and not isinstance(args[0], int):
        return list(args[0])
    return list(args)


class ComplexTensor:
    """A tensor of complex numbers (see the module docstring): PyTorch's complex tensor
    surface over a real tensor `view_as_real(self)` of shape `(*self.shape, 2)`."""

    __slots__ = ("_p", "__weakref__")
    __array_priority__ = 1000  # NumPy defers `ndarray * z` to us

    def __init__(self, payload: Tensor) -> None:
        if not isinstance(payload, Tensor) or payload.ndim == 0 or payload.shape[-1] != 2:
            raise ValueError("ComplexTensor: expected a real tensor with a last dimension of size 2 (use view_as_complex)")
        _cdtype(payload.dtype, "ComplexTensor")
        self._p = payload

    # -- attributes ------------------------------------------------------------------

    @property
    def dtype(self) -> ComplexDType:
        """`complex64` or `complex128`."""
        return _OF_REAL[self._p.dtype]

    @property
    def shape(self) -> Any:
        """The size, as `candle_py.Size`."""
        return self._p.shape[:-1]

    def size(self, dim: Optional[int] = None) -> Any:
        """The size, or the length of one dim."""
        if dim is None:
            return self.shape
        return self._p.shape[_dim(dim, self.ndim, "size")]

    @property
    def ndim(self) -> int:
        """Number of dims."""
        return int(self._p.ndim) - 1

    def dim(self) -> int:
        """Number of dims."""
        return self.ndim

    def numel(self) -> int:
        """Number of complex elements."""
        return int(self._p.numel()) // 2

    nelement = numel

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def stride(self, dim: Optional[int] = None) -> Any:
        """Strides in complex elements."""
        s = tuple(int(x) // 2 for x in self._p.stride()[:-1])
        return s if dim is None else s[_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> int:
        """Offset into the storage, in complex elements."""
        return int(self._p.storage_offset()) // 2

    @property
    def device(self) -> Any:
        """The device of the data."""
        return self._p.device

    @property
    def is_cuda(self) -> bool:
        """Whether the data is on a CUDA device."""
        return bool(self._p.is_cuda)

    @property
    def is_sparse(self) -> bool:
        """Always False."""
        return False

    @property
    def layout(self) -> Any:
        """`candle_py.strided`."""
        return self._p.layout

    def is_complex(self) -> bool:
        """Always True."""
        return True

    def is_floating_point(self) -> bool:
        """Always False."""
        return False

    def is_contiguous(self) -> bool:
        """Whether the elements are laid out row-major without gaps."""
        return bool(self._p.is_contiguous())

    # -- autograd ---------------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        """Whether autograd records ops on this tensor."""
        return bool(self._p.requires_grad)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._p.requires_grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "ComplexTensor":
        """Set `requires_grad` of this leaf in place."""
        self._p.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """Whether this tensor was made by the user rather than by a recorded op."""
        return bool(self._p.is_leaf)

    @property
    def grad_fn(self) -> Any:
        """The node of the real tensor underneath (see the module docstring)."""
        return self._p.grad_fn

    @property
    def grad(self) -> Optional["ComplexTensor"]:
        """The accumulated gradient (`dL/dre + i dL/dim`), or None."""
        g = self._p.grad
        return None if g is None else ComplexTensor(g)

    @grad.setter
    def grad(self, value: Optional["ComplexTensor"]) -> None:
        if value is not None and not isinstance(value, ComplexTensor):
            got = getattr(value, "dtype", type(value).__name__)
            raise TypeError(f"assigned grad has data of a different type: expected {self.dtype}, got {got}")
        self._p.grad = None if value is None else value._p

    def retain_grad(self) -> None:
        """Keep `.grad` of this non-leaf tensor after backward."""
        self._p.retain_grad()

    def backward(
        self,
        gradient: Optional["ComplexTensor"] = None,
        retain_graph: Optional[bool] = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Backpropagate `gradient` (required: a complex output has no implicit one)."""
        if gradient is None:
            raise RuntimeError("backward: grad can be implicitly created only for real scalar outputs")
        if not isinstance(gradient, ComplexTensor):
            got = getattr(gradient, "dtype", type(gradient).__name__)
            raise TypeError(f"backward: the gradient of a {self.dtype} tensor must be complex, got {got}")
        if inputs is not None:
            seq = [inputs] if isinstance(inputs, (Tensor, ComplexTensor)) else list(inputs)
            inputs = [x._p if isinstance(x, ComplexTensor) else x for x in seq]
        self._p.backward(gradient._p.to(self._p.dtype), retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self) -> "ComplexTensor":
        """The same values outside the graph (sharing storage)."""
        return ComplexTensor(self._p.detach())

    @property
    def data(self) -> "ComplexTensor":
        """The values outside the graph."""
        return ComplexTensor(self._p.data)

    def clone(self) -> "ComplexTensor":
        """A copy (differentiable)."""
        return ComplexTensor(self._p.clone())

    def contiguous(self) -> "ComplexTensor":
        """This tensor if contiguous, else a contiguous copy."""
        return self if self.is_contiguous() else ComplexTensor(self._p.contiguous())

    # -- parts ------------------------------------------------------------------------

    @property
    def real(self) -> Tensor:
        """The real parts, as a view."""
        return self._p[..., 0]

    @real.setter
    def real(self, value: Any) -> None:
        self._p[..., 0] = value

    @property
    def imag(self) -> Tensor:
        """The imaginary parts, as a view."""
        return self._p[..., 1]

    @imag.setter
    def imag(self, value: Any) -> None:
        self._p[..., 1] = value

    def _parts(self) -> Tuple[Tensor, Tensor]:
        return self._p[..., 0], self._p[..., 1]

    # -- conversion -------------------------------------------------------------------

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A NumPy complex array of the values (`force=True` for a tensor that requires grad)."""
        a = np.ascontiguousarray(self._p.numpy(force=force))
        return a.view(np.complex64 if a.dtype == np.float32 else np.complex128)[..., 0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self) -> Any:
        """The values as (nested lists of) Python complex numbers."""
        return self.numpy(force=True).tolist()

    def item(self) -> _builtin_complex:
        """The one value, as a Python complex."""
        if self.numel() != 1:
            raise ValueError(f"item: a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return _builtin_complex(self.numpy(force=True).reshape(-1)[0])

    def __complex__(self) -> _builtin_complex:
        return self.item()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} values is ambiguous")
        return self.item() != 0

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    def __iter__(self) -> Iterator["ComplexTensor"]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        from ._format import complex_repr

        return complex_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self.item(), spec)
        return repr(self)

    def __reduce__(self) -> Any:
        return (ComplexTensor, (self._p,))

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """`to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other)`, keyword forms too;
        a real dtype keeps the real parts (with PyTorch's warning)."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        copy = bool(kwargs.pop("copy", False))
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, (ComplexDType, _core.dtype)):
                dtype = a
            elif isinstance(a, ComplexTensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, bool):
                continue  # non_blocking / copy given positionally
            else:
                device = a
        out: Any = self
        if device is not None:
            out = ComplexTensor(out._p.to(device))
        if dtype is not None:
            out = out._cast(dtype)
        if copy and out is self:
            out = self.clone()
        return out

    def _cast(self, dtype: Any) -> Any:
        if isinstance(dtype, ComplexDType):
            return self if dtype is self.dtype else ComplexTensor(self._p.to(dtype.to_real()))
        if not isinstance(dtype, _core.dtype):
            raise TypeError(f"to: expected a dtype, got {type(dtype).__name__}")
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
        return self.real.to(dtype).clone() if dtype == self._p.dtype else self.real.to(dtype)

    def type_as(self, other: Any) -> Any:
        """Cast to `other`'s dtype."""
        return self._cast(other.dtype)

    def cpu(self) -> "ComplexTensor":
        """On the CPU."""
        return self.to("cpu")

    def cuda(self, device: Any = None) -> "ComplexTensor":
        """On a CUDA device."""
        return ComplexTensor(self._p.cuda(device))

    def cfloat(self) -> "ComplexTensor":
        """As `complex64`."""
        return self._cast(complex64)  # type: ignore[no-any-return]

    def cdouble(self) -> "ComplexTensor":
        """As `complex128`."""
        return self._cast(complex128)  # type: ignore[no-any-return]

    def float(self) -> Tensor:
        """The real parts as float32 (warns: the imaginary parts are dropped)."""
        return self._cast(float32)  # type: ignore[no-any-return]

    def double(self) -> Tensor:
        """The real parts as float64 (warns: the imaginary parts are dropped)."""
        return self._cast(float64)  # type: ignore[no-any-return]

    # -- shapes -----------------------------------------------------------------------

    def reshape(self, *shape: Any) -> "ComplexTensor":
        """The same elements in a new shape (a view when possible)."""
        return ComplexTensor(self._p.reshape(*_shape_args(shape), 2))

    def view(self, *shape: Any) -> "ComplexTensor":
        """A view with a new shape (the strides must allow it)."""
        if len(shape) == 1 and isinstance(shape[0], (ComplexDType, _core.dtype)):
            raise TypeError(f"view: a {self.dtype} tensor cannot be viewed as another dtype in candle_py")
        return ComplexTensor(self._p.view(*_shape_args(shape), 2))

    def view_as(self, other: Any) -> "ComplexTensor":
        """A view with `other`'s shape."""
        return self.view(*other.shape)

    def reshape_as(self, other: Any) -> "ComplexTensor":
        """Reshaped to `other`'s shape."""
        return self.reshape(*other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "ComplexTensor":
        """Dims `start_dim..end_dim` merged into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s, e = _dim(start_dim, self.ndim, "flatten"), _dim(end_dim, self.ndim, "flatten")
        if s > e:
            raise ValueError("flatten: start_dim cannot come after end_dim")
        return ComplexTensor(self._p.flatten(s, e))

    def unsqueeze(self, dim: int) -> "ComplexTensor":
        """A new dim of size 1 at `dim`."""
        return ComplexTensor(self._p.unsqueeze(_dim(dim, self.ndim + 1, "unsqueeze")))

    def squeeze(self, dim: Any = None) -> "ComplexTensor":
        """Dims of size 1 removed (all, or those named)."""
        n = self.ndim
        if dim is None:
            dims = [i for i in range(n) if self.shape[i] == 1]
        else:
            ds = dim if isinstance(dim, (tuple, list)) else [dim]
            dims = [i for i in (_dim(d, n, "squeeze") for d in ds) if n and self.shape[i] == 1]
        if not dims:
            return ComplexTensor(self._p.view(self._p.shape))
        return ComplexTensor(self._p.squeeze(tuple(dims)))

    def transpose(self, dim0: int, dim1: int) -> "ComplexTensor":
        """Two dims swapped (a view)."""
        n = self.ndim
        return ComplexTensor(self._p.transpose(_dim(dim0, n, "transpose"), _dim(dim1, n, "transpose")))

    swapaxes = swapdims = transpose

    def t(self) -> "ComplexTensor":
        """The transpose of a tensor of at most 2 dims."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self) -> "ComplexTensor":
        """Dims reversed."""
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self) -> "ComplexTensor":
        """The last two dims swapped."""
        return self.transpose(-2, -1)

    @property
    def H(self) -> "ComplexTensor":
        """The conjugate transpose of a matrix."""
        return self.t().conj()

    @property
    def mH(self) -> "ComplexTensor":
        """The conjugate transpose of the last two dims."""
        return self.mT.conj()

    def adjoint(self) -> "ComplexTensor":
        """The conjugate transpose of the last two dims."""
        return self.mH

    def permute(self, *dims: Any) -> "ComplexTensor":
        """Dims reordered (a view)."""
        ds = [_dim(d, self.ndim, "permute") for d in _shape_args(dims)]
        if sorted(ds) != list(range(self.ndim)):
            raise ValueError(f"permute: dims {ds} are not a permutation of {self.ndim} dims")
        return ComplexTensor(self._p.permute(*ds, self.ndim))

    def expand(self, *sizes: Any) -> "ComplexTensor":
        """Broadcast to `sizes` (-1 keeps a dim)."""
        return ComplexTensor(self._p.expand(*_shape_args(sizes), 2))

    def expand_as(self, other: Any) -> "ComplexTensor":
        """Broadcast to `other`'s shape."""
        return self.expand(*other.shape)

    def __getitem__(self, key: Any) -> "ComplexTensor":
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            return ComplexTensor(self._p[key + (slice(None),)])
        return ComplexTensor(self._p[key + (Ellipsis, slice(None))])

    def __setitem__(self, key: Any, value: Any) -> None:
        key = key if isinstance(key, tuple) else (key,)
        key = key + (slice(None),) if any(k is Ellipsis for k in key) else key + (Ellipsis, slice(None))
        self._p[key] = _payload_of(value, self._p.dtype, "__setitem__")

    # -- in place ---------------------------------------------------------------------

    def copy_(self, src: Any, non_blocking: bool = False) -> "ComplexTensor":
        """Copy `src` (complex, real or a scalar; broadcast) into this tensor."""
        self._p.copy_(_payload_of(src, self._p.dtype, "copy_").expand(self._p.shape))
        return self

    def zero_(self) -> "ComplexTensor":
        """Set every element to 0."""
        self._p.zero_()
        return self

    def fill_(self, value: Any) -> "ComplexTensor":
        """Set every element to `value`."""
        return self.copy_(value)

    def _inplace(self, result: "ComplexTensor", op: str) -> "ComplexTensor":
        if tuple(result.shape) != tuple(self.shape):
            raise ValueError(f"{op}: output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}")
        self._p.copy_(result._p)
        return self

    def add_(self, other: Any, *, alpha: Any = 1) -> "ComplexTensor":
        """`self += alpha * other`."""
        return self._inplace(self.add(other, alpha=alpha), "add_")

    def sub_(self, other: Any, *, alpha: Any = 1) -> "ComplexTensor":
        """`self -= alpha * other`."""
        return self._inplace(self.sub(other, alpha=alpha), "sub_")

    def mul_(self, other: Any) -> "ComplexTensor":
        """`self *= other`."""
        return self._inplace(self * other, "mul_")

    def div_(self, other: Any) -> "ComplexTensor":
        """`self /= other`."""
        return self._inplace(self / other, "div_")

    def neg_(self) -> "ComplexTensor":
        """`self = -self`."""
        return self._inplace(-self, "neg_")

    def conj_(self) -> "ComplexTensor":
        """Conjugate in place (`conj_physical_`)."""
        return self._inplace(self.conj(), "conj_physical_")

    conj_physical_ = conj_

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

    # -- arithmetic -------------------------------------------------------------------

    def add(self, other: Any, *, alpha: Any = 1) -> "ComplexTensor":
        """`self + alpha * other`."""
        return _add(self, other if alpha == 1 else _mul(other, alpha), 1.0)

    def sub(self, other: Any, *, alpha: Any = 1) -> "ComplexTensor":
        """`self - alpha * other`."""
        return _add(self, other if alpha == 1 else _mul(other, alpha), -1.0)

    subtract = sub

    def mul(self, other: Any) -> "ComplexTensor":
        """Elementwise product."""
        return _mul(self, other)

    multiply = mul

    def div(self, other: Any, *, rounding_mode: Optional[str] = None) -> "ComplexTensor":
        """Elementwise quotient (PyTorch's scaled complex division)."""
        if rounding_mode is not None:
            raise TypeError(f"div: rounding_mode='{rounding_mode}' is not supported for complex inputs")
        return _div(self, other)

    divide = true_divide = div

    def __add__(self, other: Any) -> Any:
        return _add(self, other, 1.0) if _operand(other) else NotImplemented

    def __radd__(self, other: Any) -> Any:
        return _add(self, other, 1.0) if _operand(other) else NotImplemented

    def __sub__(self, other: Any) -> Any:
        return _add(self, other, -1.0) if _operand(other) else NotImplemented

    def __rsub__(self, other: Any) -> Any:
        return _add(-self, other, 1.0) if _operand(other) else NotImplemented

    def __mul__(self, other: Any) -> Any:
        return _mul(self, other) if _operand(other) else NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Any:
        return _div(self, other) if _operand(other) else NotImplemented

    def __rtruediv__(self, other: Any) -> Any:
        return _div(other, self) if _operand(other) else NotImplemented

    def __matmul__(self, other: Any) -> Any:
        return _matmul(self, other) if isinstance(other, (Tensor, ComplexTensor)) else NotImplemented

    def __rmatmul__(self, other: Any) -> Any:
        return _matmul(other, self) if isinstance(other, Tensor) else NotImplemented

    def matmul(self, other: Any) -> "ComplexTensor":
        """Matrix product with another complex tensor of the same dtype."""
        return _matmul(self, other)

    def __pow__(self, exponent: Any) -> Any:
        return self.pow(exponent) if _operand(exponent) else NotImplemented

    def __rpow__(self, base: Any) -> Any:
        return _pow(_as_complex(base, self._p.dtype, "pow"), self) if _operand(base) else NotImplemented

    def pow(self, exponent: Any) -> "ComplexTensor":
        """`self ** exponent`, as PyTorch computes it: the exponents 2, 3, 0.5, -0.5, -1 and
        -2 as products, `sqrt` and quotients; other real exponents as `|z|**p` at `p` times
        the angle (a positive real base stays real); complex or tensor exponents as
        `exp(exponent * log(self))`, 0 at a base of 0."""
        return _pow(self, exponent)

    def square(self) -> "ComplexTensor":
        """`self * self`."""
        return _mul(self, self)

    def __neg__(self) -> "ComplexTensor":
        return ComplexTensor(-self._p)

    neg = negative = __neg__

    def __pos__(self) -> "ComplexTensor":
        return self

    def positive(self) -> "ComplexTensor":
        """`self`."""
        return self

    def conj(self) -> "ComplexTensor":
        """The complex conjugate (a new tensor: candle_py has no lazy conjugate bit)."""
        re, im = self._parts()
        return _make(re, -im)

    conj_physical = conj

    def resolve_conj(self) -> "ComplexTensor":
        """`self` (conjugates are never lazy here)."""
        return self

    def abs(self) -> Tensor:
        """The magnitude (real), without overflow; gradient 0 at 0, as PyTorch's."""
        re, im = self._parts()
        return _abs(re, im)

    absolute = abs

    def __abs__(self) -> Tensor:
        return self.abs()

    def angle(self) -> Tensor:
        """The argument in (-pi, pi] (real); gradient 0 at 0, as PyTorch's."""
        re, im = self._parts()
        z = (re == 0) & (im == 0)
        safe = where(z, 0.0, im).atan2(where(z, 1.0, re))
        return where(z, im.detach().atan2(re.detach()), safe)

    def sgn(self) -> "ComplexTensor":
        """`self / abs(self)`, 0 at 0."""
        re, im = self._parts()
        r = _abs(re, im)
        z = r == 0
        rs = where(z, 1.0, r)
        return _make(where(z, 0.0, re / rs), where(z, 0.0, im / rs))

    def exp(self) -> "ComplexTensor":
        """`e**re * (cos im + i sin im)`, with C99's values where a part is not finite (an
        imaginary part of 0 stays 0; `exp(inf + nan i)` is `inf + nan i`, `exp(-inf + nan i)` 0)."""
        re, im = self._parts()
        e = re.exp()
        flat = im == 0
        out_re, out_im = where(flat, e, e * im.cos()), where(flat, im, e * im.sin())
        wild = ~im.isfinite()
        up, down = wild & (re == math.inf), wild & (re == -math.inf)
        return _make(where(up, math.inf, where(down, 0.0, out_re)), where(down, 0.0, out_im))

    def log(self) -> "ComplexTensor":
        """The principal logarithm `log|z| + i angle(z)`."""
        return _make(self.abs().log(), self.angle())

    def sqrt(self) -> "ComplexTensor":
        """The principal square root (`sqrt|z|` at half the angle), with C99's values at
        infinities (`sqrt(-inf + i) = 0 + inf i`, `sqrt(x + inf i) = inf + inf i`, ...)."""
        re, im = self._parts()
        r, th = self.abs().sqrt(), self.angle() * 0.5
        out_re, out_im = r * th.cos(), r * th.sin()
        fin = im.isfinite()
        pos, neg = fin & (re == math.inf), fin & (re == -math.inf)
        signed_inf = where(im.detach().signbit(), -math.inf, math.inf)
        out_re = where(pos, math.inf, where(neg, 0.0, out_re))
        out_im = where(pos, im.detach() * 0.0, where(neg, signed_inf, out_im))
        nan_im = im.isnan() & re.isinf()  # (inf, nan) for +inf, (nan, inf) for -inf
        out_re = where(nan_im, where(re > 0, math.inf, math.nan), out_re)
        out_im = where(nan_im, where(re > 0, math.nan, math.inf), out_im)
        up = im.isinf()
        return _make(where(up, math.inf, out_re), where(up, im.detach(), out_im))

    def reciprocal(self) -> "ComplexTensor":
        """`1 / self`."""
        return _div(1.0, self)

    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> "ComplexTensor":
        """Sum over `dim` (all dims when None)."""
        return self._reduce("sum", dim, keepdim, dtype)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> "ComplexTensor":
        """Mean over `dim` (all dims when None)."""
        return self._reduce("mean", dim, keepdim, dtype)

    def _reduce(self, op: str, dim: Any, keepdim: bool, dtype: Any) -> "ComplexTensor":
        x = self if dtype is None else self._cast(dtype)
        if not isinstance(x, ComplexTensor):
            raise TypeError(f"{op}: dtype {dtype} would drop the imaginary parts of a complex tensor")
        n = x.ndim
        if dim is None:
            dims = list(range(n))
        else:
            dims = [_dim(d, n, op) for d in (dim if isinstance(dim, (tuple, list)) else [dim])]
        if n == 0:
            return ComplexTensor(x._p.clone())
        if not dims:  # `dim=()` reduces every dim, as in PyTorch
            dims = list(range(n))
        return ComplexTensor(getattr(x._p, op)(dim=tuple(dims), keepdim=keepdim))

    # -- comparison -------------------------------------------------------------------

    def eq(self, other: Any) -> Tensor:
        """Elementwise equality of both parts."""
        (a, b), (c, d) = self._parts(), _parts_of(other, self._p.dtype, "eq")
        return (a == c) & (b == d)

    def ne(self, other: Any) -> Tensor:
        """Elementwise inequality of either part."""
        return self.eq(other).logical_not()

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self.eq(other) if _operand(other) else NotImplemented

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self.ne(other) if _operand(other) else NotImplemented

    __hash__ = object.__hash__

    def isnan(self) -> Tensor:
        """Whether either part is NaN."""
        re, im = self._parts()
        return re.isnan() | im.isnan()

    def isinf(self) -> Tensor:
        """Whether either part is infinite."""
        re, im = self._parts()
        return re.isinf() | im.isinf()

    def isfinite(self) -> Tensor:
        """Whether both parts are finite."""
        re, im = self._parts()
        return re.isfinite() & im.isfinite()

    def isclose(self, other: Any, rtol: _builtin_float = 1e-05, atol: _builtin_float = 1e-08, equal_nan: bool = False) -> Tensor:
        """`|self - other| <= atol + rtol * |other|` (complex magnitudes), elementwise."""
        o = _as_complex(other, self._p.dtype, "isclose")
        close = (self == o) | ((self - o).abs() <= atol + rtol * o.abs())
        close = close & self.isfinite() & o.isfinite() | (self == o)
        if equal_nan:
            close = close | (self.isnan() & o.isnan())
        return close

    def allclose(self, other: Any, rtol: _builtin_float = 1e-05, atol: _builtin_float = 1e-08, equal_nan: bool = False) -> bool:
        """Whether every element `isclose`."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def equal(self, other: Any) -> bool:
        """Same shape and every element equal."""
        return isinstance(other, ComplexTensor) and tuple(other.shape) == tuple(self.shape) and bool(self.eq(other).all())

    # -- everything else --------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        # protocol probes (`__deepcopy__`, `__array_interface__`, ...) get the usual AttributeError
        if not name.startswith("_") and hasattr(Tensor, name):
            raise TypeError(
                f"{name}: not supported for complex tensors (dtype {self.dtype}); candle_py's complex tensors "
                "support arithmetic, abs/angle/exp/log/sqrt/pow, sum/mean, matmul, shape ops and indexing "
                "(see candle_py.ComplexTensor)"
            )
        raise AttributeError(f"'ComplexTensor' object has no attribute '{name}'")


# -- operands -------------------------------------------------------------------------


def _operand(x: Any) -> bool:
    return isinstance(x, (ComplexTensor, Tensor, numbers.Number)) and not isinstance(x, np.ndarray)


def _parts_of(x: Any, dtype: Any, op: str) -> Tuple[Any, Any]:
    """(re, im) of an operand: a complex tensor's views, a real tensor and 0, or a scalar's parts."""
    if isinstance(x, ComplexTensor):
        return x._parts()
    if isinstance(x, Tensor):
        return x, 0.0
    if isinstance(x, numbers.Complex) and not isinstance(x, bool):
        z = _builtin_complex(x)  # type: ignore[arg-type]
        return z.real, z.imag
    if isinstance(x, bool):
        return float(x), 0.0
    raise TypeError(f"{op}: unsupported operand type {type(x).__name__} for a complex tensor")


def _as_complex(x: Any, dtype: Any, op: str) -> ComplexTensor:
    """`x` (complex tensor, real tensor or scalar) as a complex tensor with parts of `dtype` for scalars."""
    if isinstance(x, ComplexTensor):
        return x
    if isinstance(x, Tensor):
        if not x.is_floating_point():
            x = x.to(_core.get_default_dtype())
        return _make(x, _core.zeros_like(x))
    re, im = _parts_of(x, dtype, op)
    return ComplexTensor(_core.tensor([re, im], dtype=dtype))


def _payload_of(value: Any, dtype: Any, op: str) -> Tensor:
    """The (..., 2) real layout of a value written into a complex tensor."""
    if isinstance(value, ComplexTensor):
        return value._p.to(dtype)
    if isinstance(value, Tensor):
        v = value.to(dtype)
        return stack([v, _core.zeros_like(v)], -1)
    re, im = _parts_of(value, dtype, op)
    return _core.tensor([re, im], dtype=dtype)


def _make(re: Any, im: Any) -> ComplexTensor:
    """A complex tensor from its parts (tensors or scalars), broadcast together."""
    if not isinstance(re, Tensor):
        re = _core.full_like(im, re) if isinstance(im, Tensor) else _core.tensor(re)
    if not isinstance(im, Tensor):
        im = _core.full_like(re, im)
    # complex64 unless either part is float64 (integer and half operands give complex64, as in PyTorch)
    dt = float64 if float64 in (re.dtype, im.dtype) else float32
    re, im = re.to(dt), im.to(dt)
    if tuple(re.shape) != tuple(im.shape):
        re, im = broadcast_tensors(re, im)
    return ComplexTensor(stack([re, im], -1))


def _add(x: ComplexTensor, other: Any, sign: float) -> ComplexTensor:
    (a, b), (c, d) = x._parts(), _parts_of(other, x._p.dtype, "add")
    if sign < 0:
        return _make(a - c, b - d)
    return _make(a + c, b + d)


def _mul(x: Any, y: Any) -> ComplexTensor:
    """`(ac - bd, ad + bc)`, a real operand taken as `c + 0i` (as PyTorch promotes it)."""
    if not isinstance(x, ComplexTensor):
        x, y = y, x
    if not isinstance(x, ComplexTensor):
        raise TypeError("mul: neither operand is a complex tensor")
    (a, b), (c, d) = x._parts(), _parts_of(y, x._p.dtype, "mul")
    return _make(a * c - b * d, a * d + b * c)


def _div(x: Any, y: Any) -> ComplexTensor:
    """PyTorch's complex division (c10::complex): scaled by the larger part of the
    divisor, and `(a / |c|, b / |d|)` (inf or NaN) for a zero divisor."""
    ref = x if isinstance(x, ComplexTensor) else y
    (a, b), (c, d) = _parts_of(x, ref._p.dtype, "div"), _parts_of(y, ref._p.dtype, "div")
    like = next(t for t in (c, d, a, b) if isinstance(t, Tensor))
    c, d = (t if isinstance(t, Tensor) else _core.full_like(like, t) for t in (c, d))
    zero = (c == 0) & (d == 0)
    by_c = (c.abs() >= d.abs()) & ~zero
    by_d = ~by_c & ~zero
    # each branch gets safe operands where it is not taken, so its gradient stays finite there
    c1, d1 = where(by_c, c, 1.0), where(by_c, d, 0.0)
    rat1 = d1 / c1
    scl1 = (c1 + d1 * rat1).reciprocal()
    c2, d2 = where(by_d, c, 0.0), where(by_d, d, 1.0)
    rat2 = c2 / d2
    scl2 = (d2 + c2 * rat2).reciprocal()
    re = where(by_c, (a + b * rat1) * scl1, (a * rat2 + b) * scl2)
    im = where(by_c, (b - a * rat1) * scl1, (b * rat2 - a) * scl2)
    cz, dz = where(zero, c, 1.0).abs(), where(zero, d, 1.0).abs()
    return _make(where(zero, a / cz, re), where(zero, b / dz, im))


def _abs(re: Tensor, im: Tensor) -> Tensor:
    """`hypot(re, im)` scaled by the larger part (no overflow), inf when either part is,
    with gradient `(re, im) / abs` and 0 at 0."""
    s = re.detach().abs().maximum(im.detach().abs())
    ok = s.isfinite() & (s > 0)
    s = where(ok, s, 1.0)
    rs, is_ = where(ok, re, 1.0) / s, where(ok, im, 0.0) / s
    r = (rs.square() + is_.square()).sqrt() * s
    out = where(ok, r, re.detach().abs() + im.detach().abs())
    return where(re.isinf() | im.isinf(), math.inf, out)


def _pow(x: ComplexTensor, exponent: Any) -> ComplexTensor:
    """See `ComplexTensor.pow`."""
    if isinstance(exponent, (int, float)):
        p = float(exponent)
        special = {
            1.0: lambda: x.clone(),
            2.0: lambda: _mul(x, x),
            3.0: lambda: _mul(_mul(x, x), x),
            0.5: lambda: x.sqrt(),
            -0.5: lambda: _div(1.0, x.sqrt()),
            -1.0: lambda: _div(1.0, x),
            -2.0: lambda: _div(1.0, _mul(x, x)),
        }
        if p in special:
            return special[p]()
        a, b = x._parts()
        if p == 0.0:
            return _make(_core.ones_like(a), _core.zeros_like(b))
        real_base = (b == 0) & (a > 0)
        th = x.angle() * p
        r = (x.abs().log() * p).exp()
        out_re, out_im = r * th.cos(), r * th.sin()
        return _make(where(real_base, where(real_base, a, 1.0) ** p, out_re), where(real_base, 0.0, out_im))
    re, im = _mul(x.log(), exponent).exp()._parts()
    a, b = x._parts()
    at0 = (a == 0) & (b == 0)
    return _make(where(at0, 0.0, re), where(at0, 0.0, im))


def _matmul(x: Any, y: Any) -> ComplexTensor:
    """`(A + iB)(C + iD) = (AC - BD) + i(AD + BC)`; both operands complex of one dtype, as
    PyTorch's matmul does not promote."""
    if not (isinstance(x, ComplexTensor) and isinstance(y, ComplexTensor)) or x.dtype is not y.dtype:
        raise DTypeError(f"matmul: expected m1 and m2 to have the same dtype, but got: {_dtype_of(x)} != {_dtype_of(y)}")
    (a, b), (c, d) = x._parts(), y._parts()
    return _make(a @ c - b @ d, a @ d + b @ c)


def _dtype_of(x: Any) -> Any:
    return getattr(x, "dtype", type(x).__name__)


# -- functions --------------------------------------------------------------------------


def view_as_complex(input: Tensor) -> ComplexTensor:
    """A complex view of a float tensor whose last dim (size 2, stride 1) holds the real
    and imaginary parts; writes through either reach the other."""
    if not isinstance(input, Tensor):
        raise TypeError(f"view_as_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.dtype not in (float32, float64):
        raise DTypeError(
            f"view_as_complex: view_as_complex is only supported for float and double tensors (candle_py: float32, float64), "
            f"but got a tensor of scalar type: {input.dtype}"
        )
    if input.ndim == 0:
        raise ShapeError("view_as_complex: Input tensor must have one or more dimensions")
    if input.shape[-1] != 2:
        raise ShapeError(f"view_as_complex: Tensor must have a last dimension of size 2, got shape {list(input.shape)}")
    if input.stride(-1) != 1:
        raise ShapeError("view_as_complex: Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in input.stride()[:-1]) or input.storage_offset() % 2:
        raise ShapeError("view_as_complex: Tensor must have a stride divisible by 2 for all but last dimension")
    return ComplexTensor(input.view(input.shape))


def view_as_real(input: ComplexTensor) -> Tensor:
    """The real view of a complex tensor: shape `(*input.shape, 2)`, (real, imaginary)."""
    if not isinstance(input, ComplexTensor):
        if isinstance(input, Tensor):
            raise DTypeError(f"view_as_real: view_as_real is only supported for complex tensors, got {input.dtype}")
        raise TypeError(f"view_as_real(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input._p.view(input._p.shape)


def complex(real: Tensor, imag: Tensor) -> ComplexTensor:
    """The complex tensor `real + i imag` (same float dtype, broadcast together)."""
    for name, x in (("real", real), ("imag", imag)):
        if not isinstance(x, Tensor):
            raise TypeError(f"complex(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if real.dtype != imag.dtype:
        raise DTypeError(f"complex: Expected object of scalar type {real.dtype} but got scalar type {imag.dtype} for second argument")
    if real.dtype not in (float32, float64):
        raise DTypeError(
            f"complex: Expected both inputs to be Half, Float or Double tensors (candle_py: float32, float64) "
            f"but got {real.dtype} and {imag.dtype}"
        )
    return _make(real, imag)


def polar(abs: Tensor, angle: Tensor) -> ComplexTensor:
    """The complex tensor `abs * (cos(angle) + i sin(angle))`."""
    for name, x in (("abs", abs), ("angle", angle)):
        if not isinstance(x, Tensor):
            raise TypeError(f"polar(): argument '{name}' must be Tensor, not {type(x).__name__}")
    if abs.dtype != angle.dtype:
        raise DTypeError(f"polar: Expected object of scalar type {abs.dtype} but got scalar type {angle.dtype} for second argument")
    if abs.dtype not in (float32, float64):
        raise DTypeError(f"polar: Expected both inputs to be Float or Double tensors but got {abs.dtype} and {angle.dtype}")
    # PyTorch's gradient for `abs` is Re(conj(grad) * sgn(result)): the derivative times the
    # sign of `abs` (0 where abs is 0); `r` has abs's values and that slope
    s = abs.detach().sign()
    r = abs.detach() + (abs - abs.detach()) * s
    return _make(r * angle.cos(), r * angle.sin())


def is_complex(input: Any) -> bool:
    """Whether `input` is a complex tensor."""
    if not isinstance(input, (Tensor, ComplexTensor)):
        raise TypeError(f"is_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    return isinstance(input, ComplexTensor)


def real(input: Any) -> Tensor:
    """The real parts of a complex tensor (a view); a real tensor itself."""
    return input.real if isinstance(input, ComplexTensor) else _need(input, "real")


def imag(input: Any) -> Tensor:
    """The imaginary parts of a complex tensor (a view); a real tensor raises, as in PyTorch."""
    if isinstance(input, ComplexTensor):
        return input.imag
    raise DTypeError(f"imag: imag is not implemented for tensors with non-complex dtypes ({_need(input, 'imag').dtype})")


def conj(input: Any) -> Any:
    """The complex conjugate; a real tensor itself."""
    return input.conj() if isinstance(input, ComplexTensor) else _need(input, "conj")


conj_physical = conj


def resolve_conj(input: Any) -> Any:
    """`input` (conjugates are never lazy in candle_py)."""
    return input if isinstance(input, ComplexTensor) else _need(input, "resolve_conj")


def angle(input: Any) -> Tensor:
    """The argument of each element: for a real tensor pi where negative, 0 elsewhere,
    NaN for NaN (integers give the default float dtype; gradient 0)."""
    if isinstance(input, ComplexTensor):
        return input.angle()
    x = _need(input, "angle")
    if not x.is_floating_point():
        x = x.to(_core.get_default_dtype())
    base = where(x.isnan(), math.nan, where(x < 0, math.pi, 0.0)).to(x.dtype)
    # joined to the graph with gradient 0 everywhere, as PyTorch's (a 0 that is never NaN)
    return base + where(x.isfinite(), x, 0.0) * 0.0


def _need(x: Any, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


# -- the complex-related methods of real tensors -------------------------------------------


def _real_conj(self: Tensor) -> Tensor:
    """`conj` of a real tensor: itself."""
    return self


def _tensor_angle(self: Tensor) -> Tensor:
    """The argument of each element (pi where negative, 0 elsewhere, NaN for NaN)."""
    return angle(self)


def _tensor_is_complex(self: Tensor) -> bool:
    """Always False for a real tensor."""
    return False


def _tensor_real(self: Tensor) -> Tensor:
    """A real tensor's real part: itself."""
    return self


def _tensor_imag(self: Tensor) -> Tensor:
    """A real tensor has no imaginary part: raises, as in PyTorch."""
    return imag(self)


for _n, _f in (
    ("angle", _tensor_angle),
    ("conj", _real_conj),
    ("conj_physical", _real_conj),
    ("resolve_conj", _real_conj),
    ("is_complex", _tensor_is_complex),
    ("real", property(_tensor_real)),
    ("imag", property(_tensor_imag)),
):
    assert not hasattr(Tensor, _n), _n  # the core has no method of this name
    setattr(Tensor, _n, _f)
