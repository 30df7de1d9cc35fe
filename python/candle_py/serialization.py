"""`cp.save` / `cp.load` in PyTorch's checkpoint format, both ways.

The format is the zip archive `torch.save` writes since PyTorch 1.6:
`<name>/data.pkl` (a protocol-2 pickle of the object in which every tensor is a
call to `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)` and
every storage a persistent id `("storage", torch.FloatStorage, key, location,
numel)`), one record `<name>/data/<key>` of raw little-endian bytes per storage,
and the small records `version`, `byteorder`, `.format_version`,
`.storage_alignment`. Files written here load in torch and files written by torch
load here; neither side needs the other installed.

Loading is safe by default (`weights_only=True`): the unpickler resolves only an
allow-list of globals (containers, PyTorch's tensor/parameter rebuild functions,
storage types, dtypes, `torch.Size`, `torch.device`, plus what
`add_safe_globals` adds), so no code from the file runs. Every storage record
and every view into it is checked against the archive before a byte is copied:
a truncated, lying or hostile file raises `UnpicklingError` (a `ValueError`
too) naming the problem.

Differences from torch, by design: loaded tensors are copies (Candle cannot
borrow the file's or the archive's memory: `mmap=True` reads each record
through a memory map of the file instead of buffered zip reads); tensors that
are views of one another are saved as separate storages, so sharing between
views is not preserved (the same tensor object saved twice is stored once and
loads as one tensor).
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import mmap as _mmap
import os
import pickle
import struct
import sys
import threading
import zipfile
from typing import IO, Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import _core
from ._complex import ComplexDType, ComplexTensor, complex64, complex128, view_as_real
from ._core import Tensor
from ._size import Size
from ._sparse import SparseTensor, layout, sparse_coo, sparse_coo_tensor, strided

__all__ = [
    "save",
    "load",
    "add_safe_globals",
    "get_safe_globals",
    "clear_safe_globals",
    "safe_globals",
    "UnpicklingError",
    "DEFAULT_PROTOCOL",
]

DEFAULT_PROTOCOL = 2
FILE_LIKE = Union[str, "os.PathLike[str]", IO[bytes]]
MAP_LOCATION = Union[None, str, Any, Dict[str, Any], Callable[[Any, str], Any]]

_ALIGN = 64  # data records start at multiples of 64 bytes, as torch writes them
# The first bytes of a pre-1.6 (legacy, non-zip) torch.save file: a pickled magic number.
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"


class UnpicklingError(pickle.UnpicklingError, ValueError):
    """A checkpoint that cannot be loaded: corrupt, truncated, hostile, or (with
    `weights_only=True`) naming a global outside the allow-list."""


# -- dtypes: torch's storage classes and dtype names <-> ours -------------------------

_STORAGE_DTYPE = {
    "FloatStorage": _core.float32,
    "DoubleStorage": _core.float64,
    "HalfStorage": _core.float16,
    "BFloat16Storage": _core.bfloat16,
    "LongStorage": _core.int64,
    "IntStorage": _core.int32,
    "ShortStorage": _core.int16,
    "ByteStorage": _core.uint8,
    "BoolStorage": _core.bool,
    "ComplexFloatStorage": complex64,
    "ComplexDoubleStorage": complex128,
}
_DTYPE_STORAGE = {str(dt).replace("candle_py.", ""): name for name, dt in _STORAGE_DTYPE.items()}
_TORCH_DTYPE = {
    "float32": _core.float32,
    "float": _core.float32,
    "float64": _core.float64,
    "double": _core.float64,
    "float16": _core.float16,
    "half": _core.float16,
    "bfloat16": _core.bfloat16,
    "int64": _core.int64,
    "long": _core.int64,
    "int32": _core.int32,
    "int": _core.int32,
    "int16": _core.int16,
    "short": _core.int16,
    "uint8": _core.uint8,
    "bool": _core.bool,
    "uint32": _core.uint32,
    "complex64": complex64,
    "cfloat": complex64,
    "complex128": complex128,
    "cdouble": complex128,
}
# torch dtypes we cannot hold: loading a tensor of one raises, naming it.
_TORCH_DTYPE_UNSUPPORTED = (
    "int8 uint16 uint64 complex32 chalf float8_e4m3fn "
    "float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32 "
    "quint4x2 quint2x4 bits8 bits16"
).split()
_UNSUPPORTED_STORAGE = {
    "CharStorage": "int8",
    "ComplexHalfStorage": "complex32",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
}


def _dtype_name(dt: Any) -> str:
    return str(dt).replace("candle_py.", "")


class _UnsupportedDtype:
    """A torch dtype with no candle_py twin, as found in a checkpoint; tensors of it
    cannot be loaded."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name} (unsupported by candle_py)"


class _StorageType:
    """What `torch.FloatStorage` (or `torch.storage.UntypedStorage`) stands for in a
    persistent id: the element dtype of the record (None: untyped, bytes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = _STORAGE_DTYPE.get(name)

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class _Storage:
    """One storage record read from the archive: its bytes, element dtype (None when
    untyped) and the location torch recorded (``"cpu"``, ``"cuda:0"``...)."""

    def __init__(self, data: bytes, dtype: Any, numel: int, location: str, device: Any) -> None:
        self.data, self.dtype, self.numel, self.location, self.device = data, dtype, numel, location, device

    def __repr__(self) -> str:
        return f"<storage {self.location} {self.numel} x {self.dtype}>"

    def cpu(self) -> "_Storage":
        """The same bytes, to be placed on the CPU (for `map_location` callables)."""
        return _Storage(self.data, self.dtype, self.numel, "cpu", "cpu")

    def cuda(self, device: Any = None) -> "_Storage":
        """The same bytes, to be placed on a CUDA device (for `map_location` callables)."""
        where = "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else str(device))
        return _Storage(self.data, self.dtype, self.numel, where, where)


# -- rebuild functions: what torch's pickled calls resolve to ------------------------


def _rebuild_from(storage: Any, offset: int, size: Any, stride: Any, dtype: Any, requires_grad: bool) -> Tensor:
    if not isinstance(storage, _Storage):
        raise UnpicklingError(f"load: a tensor's storage is {type(storage).__name__}, not a storage record")
    if isinstance(dtype, _UnsupportedDtype):
        raise UnpicklingError(f"load: tensors of dtype torch.{dtype.name} are not supported by candle_py")
    if dtype is None:
        raise UnpicklingError("load: an untyped storage used without a dtype")
    numel = storage.numel
    if storage.dtype is None:  # untyped storage: numel counts bytes
        numel = numel // _itemsize(dtype)
    try:
        size_l = [int(s) for s in size]
        stride_l = [int(s) for s in stride]
        off = int(offset)
    except (TypeError, ValueError) as e:
        raise UnpicklingError(f"load: bad tensor layout (size {size!r}, stride {stride!r}, offset {offset!r}): {e}") from None
    if off < 0 or any(s < 0 for s in size_l):
        raise UnpicklingError(f"load: negative size or offset (size {size_l}, offset {off})")
    if isinstance(dtype, ComplexDType):  # read as its real (..., 2) layout
        dtype, numel, off = dtype.to_real(), 2 * numel, 2 * off
        size_l, stride_l = size_l + [2], [2 * s for s in stride_l] + [1]
        complex_ = True
    else:
        complex_ = False
    try:
        t = _core._tensor_from_storage(storage.data, dtype, numel, off, size_l, stride_l, storage.device)
    except ValueError as e:
        raise UnpicklingError(str(e)) from None
    if requires_grad:
        t.requires_grad_(True)
    return ComplexTensor(t) if complex_ else t  # type: ignore[return-value]


def _itemsize(dtype: Any) -> int:
    """Bytes per element of one of our dtypes (complex ones too)."""
    if isinstance(dtype, ComplexDType):
        return dtype.itemsize
    return int(_core.tensor([], dtype=dtype).element_size())


def _rebuild_tensor_v2(
    storage: Any,
    storage_offset: int,
    size: Any,
    stride: Any,
    requires_grad: bool = False,
    backward_hooks: Any = None,
    metadata: Any = None,
) -> Tensor:
    """`torch._utils._rebuild_tensor_v2`: a tensor from a typed storage record."""
    dtype = storage.dtype if isinstance(storage, _Storage) else None
    return _rebuild_from(storage, storage_offset, size, stride, dtype, bool(requires_grad))


def _rebuild_tensor_v3(
    storage: Any,
    storage_offset: int,
    size: Any,
    stride: Any,
    requires_grad: bool,
    backward_hooks: Any,
    dtype: Any,
    metadata: Any = None,
) -> Tensor:
    """`torch._utils._rebuild_tensor_v3`: a tensor of `dtype` from an untyped storage."""
    return _rebuild_from(storage, storage_offset, size, stride, dtype, bool(requires_grad))


def _get_layout(name: Any) -> Any:
    """`torch.serialization._get_layout`: a layout by its name."""
    found = {"torch.sparse_coo": sparse_coo, "torch.strided": strided}.get(name)
    if found is None:
        raise UnpicklingError(f"load: layout {name!r} is not supported (torch.strided and torch.sparse_coo are)")
    return found


def _rebuild_sparse_tensor(layout: Any, data: Any) -> SparseTensor:
    """`torch._utils._rebuild_sparse_tensor`: a sparse COO tensor from (indices, values,
    size[, is_coalesced]), checked like any other (a bad index is a broken file)."""
    if layout is not sparse_coo:
        raise UnpicklingError(f"load: sparse layout {layout!r} is not supported (sparse_coo only)")
    if not isinstance(data, tuple) or len(data) not in (3, 4) or not all(isinstance(t, Tensor) for t in data[:2]):
        raise UnpicklingError("load: a sparse tensor record is not (indices, values, size[, is_coalesced])")
    try:
        return sparse_coo_tensor(data[0], data[1], data[2], is_coalesced=bool(data[3]) if len(data) == 4 else None)
    except (RuntimeError, ValueError, TypeError) as e:
        raise UnpicklingError(f"load: bad sparse tensor: {e}") from None


def _rebuild_parameter(data: Any, requires_grad: bool, backward_hooks: Any = None) -> Any:
    """`torch._utils._rebuild_parameter`: an `nn.Parameter` around the rebuilt tensor."""
    from .nn.parameter import Parameter

    if not isinstance(data, Tensor):
        raise UnpicklingError(f"load: a parameter's data is {type(data).__name__}, not a tensor")
    return Parameter(data, requires_grad=bool(requires_grad))


def _rebuild_parameter_with_state(data: Any, requires_grad: bool, backward_hooks: Any, state: Any) -> Any:
    """`torch._utils._rebuild_parameter_with_state`: a parameter plus Python attributes."""
    p = _rebuild_parameter(data, requires_grad, backward_hooks)
    if isinstance(state, dict):
        for k, v in state.items():
            setattr(p, k, v)
    return p


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """`torch._tensor._rebuild_from_type_v2`: rebuild, then re-class (Parameter) a tensor."""
    from .nn.parameter import Parameter

    if not callable(func):
        raise UnpicklingError("load: _rebuild_from_type_v2 without a rebuild function")
    ret = func(*args)
    if new_type is Parameter and isinstance(ret, Tensor) and not isinstance(ret, Parameter):
        ret = Parameter(ret, requires_grad=ret.requires_grad)
    if isinstance(state, dict):
        for k, v in state.items():
            setattr(ret, k, v)
    return ret


def _torch_size(dims: Iterable[int] = ()) -> Tuple[int, ...]:
    """`torch.Size(...)` in a checkpoint: our `Size` (a tuple of ints)."""
    return Size(int(d) for d in dims)


def _torch_device(kind: Any = "cpu", index: Optional[int] = None) -> Any:
    """`torch.device(...)` in a checkpoint: our device object."""
    return _core.device(kind if index is None else f"{kind}:{index}")


def _codecs_encode(obj: Any, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode`, which protocol-2 pickles use to store bytes: latin-1 only."""
    if encoding != "latin1" and encoding != "latin-1":
        raise UnpicklingError(f"load: _codecs.encode with encoding {encoding!r}")
    return str(obj).encode("latin-1")


_SAFE: Dict[Tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
    ("_codecs", "encode"): _codecs_encode,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter_with_state,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch._utils", "_rebuild_sparse_tensor"): _rebuild_sparse_tensor,
    ("torch.serialization", "_get_layout"): _get_layout,
    ("torch", "Size"): _torch_size,
    ("torch", "device"): _torch_device,
}
_USER_SAFE: Dict[Tuple[str, str], Any] = {}
_SAFE_LOCAL = threading.local()  # `safe_globals(...)` context additions, per thread


def _parameter_class() -> Any:
    from .nn.parameter import Parameter

    return Parameter


def _resolve_torch(module: str, name: str) -> Any:
    """A torch global the format itself uses, or None."""
    if (module, name) in _SAFE:
        return _SAFE[(module, name)]
    if module == "torch" and name.endswith("Storage"):
        if name in _STORAGE_DTYPE:
            return _StorageType(name)
        if name in _UNSUPPORTED_STORAGE:
            raise UnpicklingError(f"load: tensors of dtype torch.{_UNSUPPORTED_STORAGE[name]} ({name}) are not supported by candle_py")
    if module == "torch.storage" and name in ("UntypedStorage", "_LegacyStorage", "TypedStorage"):
        return _StorageType("UntypedStorage")
    if module == "torch" and name in _TORCH_DTYPE:
        return _TORCH_DTYPE[name]
    if module == "torch" and name in _TORCH_DTYPE_UNSUPPORTED:
        return _UnsupportedDtype(name)
    if (module, name) in (("torch.nn.parameter", "Parameter"), ("torch.nn", "Parameter")):
        return _parameter_class()
    return None


def _qualname(obj: Any) -> Tuple[str, str]:
    return getattr(obj, "__module__", "") or "", getattr(obj, "__qualname__", getattr(obj, "__name__", ""))


def add_safe_globals(safe_globals: List[Any]) -> None:
    """Allow these globals in `load(weights_only=True)` (as `torch.serialization.add_safe_globals`).

    Each entry is an object (class or function, found under its `__module__` and
    `__qualname__`) or a pair `(object, "module.name")` naming where the file refers to it."""
    for g in safe_globals:
        if isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], str):
            mod, _, name = g[1].rpartition(".")
            _USER_SAFE[(mod, name)] = g[0]
        else:
            _USER_SAFE[_qualname(g)] = g


def get_safe_globals() -> List[Any]:
    """The globals added by `add_safe_globals`."""
    return list(_USER_SAFE.values())


def clear_safe_globals() -> None:
    """Forget every global added by `add_safe_globals`."""
    _USER_SAFE.clear()


class safe_globals:
    """Context manager allowing extra globals in `load(weights_only=True)` for its body
    (as `torch.serialization.safe_globals`)."""

    def __init__(self, safe_globals: List[Any]) -> None:
        self.globals = safe_globals
        self.added: Dict[Tuple[str, str], Any] = {}

    def __enter__(self) -> None:
        stack = getattr(_SAFE_LOCAL, "stack", None)
        if stack is None:
            stack = _SAFE_LOCAL.stack = []
        for g in self.globals:
            if isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], str):
                mod, _, name = g[1].rpartition(".")
                self.added[(mod, name)] = g[0]
            else:
                self.added[_qualname(g)] = g
        stack.append(self.added)

    def __exit__(self, *exc: Any) -> None:
        _SAFE_LOCAL.stack.remove(self.added)


def _extra_safe(module: str, name: str) -> Any:
    if (module, name) in _USER_SAFE:
        return _USER_SAFE[(module, name)]
    for added in getattr(_SAFE_LOCAL, "stack", ()):
        if (module, name) in added:
            return added[(module, name)]
    return None


# -- load ----------------------------------------------------------------------------


def _device_of(location: str, map_location: MAP_LOCATION, storage: _Storage) -> _Storage:
    """Where a storage recorded at `location` goes, by torch's `map_location` rules."""
    if callable(map_location) and not isinstance(map_location, (str, dict)) and not isinstance(map_location, _core.device):
        out = map_location(storage, location)
        if out is None:
            out = storage
        if not isinstance(out, _Storage):
            raise TypeError(
                f"load: map_location callable returned {type(out).__name__}, expected the storage it was given (or storage.cpu()/.cuda())"
            )
        return out
    target: Any = location
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif map_location is not None:
        target = map_location
    target = str(target)
    dev = _core.device(target)  # raises on an unknown device string
    if dev.type != "cpu":
        mod = getattr(__import__("candle_py", fromlist=[dev.type]), dev.type, None)
        if mod is None or not mod.is_available():
            raise RuntimeError(
                f"load: attempting to deserialize a tensor onto {target!r}, but this build of candle_py has no {dev.type} device. "
                "If you are running on a CPU-only machine, use cp.load(..., map_location='cpu') (or torch.device('cpu'))."
            )
    return _Storage(storage.data, storage.dtype, storage.numel, location, dev)


class _Archive:
    """The records of a torch zip checkpoint, read by name under one prefix."""

    def __init__(self, zf: zipfile.ZipFile, name: str, mapped: Optional[_mmap.mmap]) -> None:
        self.zf, self.name, self.mapped = zf, name, mapped
        names = zf.namelist()
        if not names:
            raise UnpicklingError(f"load: {name}: empty zip archive, not a PyTorch checkpoint")
        self.prefix = names[0].split("/", 1)[0]
        self.infos = {i.filename: i for i in zf.infolist()}
        if f"{self.prefix}/constants.pkl" in self.infos or any(n.startswith(f"{self.prefix}/code/") for n in self.infos):
            raise UnpicklingError(f"load: {name} is a TorchScript archive (torch.jit.save); candle_py loads torch.save checkpoints only")
        if f"{self.prefix}/data.pkl" not in self.infos:
            raise UnpicklingError(f"load: {name}: no data.pkl record, not a PyTorch checkpoint")

    def info(self, rel: str) -> zipfile.ZipInfo:
        i = self.infos.get(f"{self.prefix}/{rel}")
        if i is None:
            raise UnpicklingError(f"load: {self.name}: the archive has no record {rel!r}")
        return i

    def read(self, rel: str, expect: Optional[int] = None) -> bytes:
        i = self.info(rel)
        if expect is not None and i.file_size < expect:
            raise UnpicklingError(f"load: {self.name}: record {rel!r} holds {i.file_size} bytes, {expect} needed")
        try:
            if self.mapped is not None and i.compress_type == zipfile.ZIP_STORED:
                return self._read_mapped(i)
            return self.zf.read(i)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error) as e:
            raise UnpicklingError(f"load: {self.name}: record {rel!r} is corrupt: {e}") from None

    def _read_mapped(self, i: zipfile.ZipInfo) -> bytes:
        m = self.mapped
        assert m is not None
        h = i.header_offset
        if h + 30 > len(m) or m[h : h + 4] != b"PK\x03\x04":
            raise UnpicklingError(f"load: {self.name}: bad local header for {i.filename!r}")
        name_len, extra_len = struct.unpack("<HH", m[h + 26 : h + 30])
        start = h + 30 + name_len + extra_len
        if start + i.file_size > len(m):
            raise UnpicklingError(f"load: {self.name}: record {i.filename!r} runs past the end of the file (truncated?)")
        return m[start : start + i.file_size]


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: _Archive, map_location: MAP_LOCATION, weights_only: bool, encoding: str) -> None:
        super().__init__(io.BytesIO(data), encoding=encoding)
        self.archive, self.map_location, self.weights_only = archive, map_location, weights_only
        self.loaded: Dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names that protocol-2 pickles use (`__builtin__.set`), mapped as
        # pickle's own fix_imports does (no Python 3 module has those names).
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        g = _resolve_torch(module, name)
        if g is not None:
            return g
        g = _extra_safe(module, name)
        if g is not None:
            return g
        if self.weights_only:
            raise UnpicklingError(
                f"load: weights_only=True refuses the global {module}.{name} found in {self.archive.name}. "
                "If you trust the file, pass weights_only=False, or allow it with "
                "candle_py.serialization.add_safe_globals([...])."
            )
        if module.startswith("torch.") or module == "torch":
            raise UnpicklingError(
                f"load: {self.archive.name} holds a pickled PyTorch object {module}.{name}; candle_py can load "
                "tensors, state_dicts and plain containers from torch files (save model.state_dict() in torch)"
            )
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnpicklingError(f"load: unknown persistent id {pid!r:.200}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType) or not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
            raise UnpicklingError(f"load: malformed storage id {pid!r:.200}")
        key = str(key)
        location = str(location)
        if key in self.loaded:
            return self.loaded[key]
        item = 1 if stype.dtype is None else _itemsize(stype.dtype)
        data = self.archive.read(f"data/{key}", expect=numel * item)
        st = _device_of(location, self.map_location, _Storage(data, stype.dtype, numel, location, "cpu"))
        self.loaded[key] = st
        return st


def _open_archive(f: Any, mmap: bool) -> Tuple[zipfile.ZipFile, str, Optional[_mmap.mmap], Any]:
    """The zip over `f` (path or binary file object), its display name, the memory map
    (when asked for one) and the file object to close afterwards (or None)."""
    to_close = None
    mapped = None
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        fh = open(name, "rb")
        to_close = fh
    else:
        name = getattr(f, "name", "<file>")
        if not isinstance(name, str):
            name = "<file>"
        fh = f
        if not hasattr(fh, "read"):
            raise TypeError(f"load: expected a path or a binary file object, got {type(f).__name__}")
    try:
        head = fh.read(len(_LEGACY_MAGIC))
        if isinstance(head, str):
            raise TypeError("load: the file object must be opened in binary mode ('rb')")
        fh.seek(-len(head), os.SEEK_CUR)
        if head[:2] != b"PK":
            if head == _LEGACY_MAGIC:
                raise UnpicklingError(
                    f"load: {name} is in PyTorch's legacy (pre-1.6, non-zip) format, which candle_py does not read; "
                    "re-save it with a current torch (torch.save(torch.load(path), path))"
                )
            raise UnpicklingError(f"load: {name} is not a PyTorch checkpoint (not a zip archive)")
        if mmap:
            if to_close is None:
                raise ValueError("load: mmap=True needs a file path, not a file object")
            mapped = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_READ)
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error) as e:
            raise UnpicklingError(f"load: {name}: corrupt or truncated zip archive ({e})") from None
    except BaseException:
        if mapped is not None:
            mapped.close()
        if to_close is not None:
            to_close.close()
        raise
    return zf, name, mapped, to_close


def load(
    f: FILE_LIKE,
    map_location: MAP_LOCATION = None,
    pickle_module: Any = None,
    *,
    weights_only: Optional[bool] = None,
    mmap: Optional[bool] = None,
    **pickle_load_args: Any,
) -> Any:
    """Load an object saved by `torch.save` or `cp.save` (PyTorch's zip format).

    Args:
        f: a path or a binary file object (seekable).
        map_location: where tensors go: None (where they were saved; a CUDA location
            needs a CUDA build), a device or device string, a dict from saved location
            to target, or a callable `(storage, location) -> storage` (return the
            storage, `storage.cpu()` or `storage.cuda(i)`).
        pickle_module: only `pickle` (or None): loading always uses our unpickler.
        weights_only: True (the default, as torch >= 2.6) resolves only an allow-list of
            globals, so no code in the file runs; False also imports the classes the
            file names (only for files you trust; PyTorch's own classes still raise).
        mmap: read records through a memory map of the file (tensors are still copies).
        **pickle_load_args: `encoding` (default "utf-8"), as torch.

    Raises:
        UnpicklingError (also a ValueError) for corrupt, truncated, hostile or legacy
        files, and for globals outside the allow-list; FileNotFoundError for a missing path."""
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError(f"load: pickle_module={getattr(pickle_module, '__name__', pickle_module)!r} is not supported; only pickle")
    encoding = pickle_load_args.pop("encoding", "utf-8")
    if pickle_load_args:
        raise TypeError(f"load: unexpected keyword arguments {sorted(pickle_load_args)}")
    wo = True if weights_only is None else bool(weights_only)
    zf, name, mapped, to_close = _open_archive(f, bool(mmap))
    try:
        archive = _Archive(zf, name, mapped)
        data = archive.read("data.pkl")
        bo = archive.infos.get(f"{archive.prefix}/byteorder")
        if bo is not None:
            order = archive.read("byteorder").decode("ascii", "replace")
            if order != "little":
                raise UnpicklingError(f"load: {name}: byte order {order!r}; only little-endian checkpoints are supported")
        try:
            return _Unpickler(data, archive, map_location, wo, encoding).load()
        except UnpicklingError:
            raise
        except (pickle.UnpicklingError, EOFError, IndexError, KeyError, AttributeError, struct.error) as e:
            raise UnpicklingError(f"load: {name}: corrupt data.pkl ({type(e).__name__}: {e})") from None
        except RecursionError:
            raise UnpicklingError(f"load: {name}: data.pkl nests too deeply") from None
    finally:
        zf.close()
        if mapped is not None:
            mapped.close()
        if to_close is not None:
            to_close.close()


# -- save ----------------------------------------------------------------------------


class _Global:
    """A global (`module.name`) written into the pickle by name, so that files name
    torch's functions and classes without torch being importable here."""

    _made: Dict[Tuple[str, str], "_Global"] = {}

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:
        # Callable only so that pickle's save_reduce accepts it as the reduce function.
        raise TypeError(f"{self.module}.{self.name} is a name written into a checkpoint, not callable here")

    @classmethod
    def of(cls, module: str, name: str) -> "_Global":
        g = cls._made.get((module, name))
        if g is None:
            g = cls._made[(module, name)] = cls(module, name)
        return g


class _StorageRef:
    """A tensor's storage as the pickle refers to it: a persistent id."""

    def __init__(self, key: str, storage_name: str, numel: int, location: str) -> None:
        self.key, self.storage_name, self.numel, self.location = key, storage_name, numel, location


def _location(t: Tensor) -> str:
    d = t.device
    if d.type == "cpu":
        return "cpu"
    return f"{d.type}:{d.index if d.index is not None else 0}"


# The pure-Python pickler: unlike the C one, its `save` can be extended (typeshed omits it).
_PurePickler: Any = pickle._Pickler  # type: ignore[attr-defined]


class _Pickler(_PurePickler):  # type: ignore[misc]
    """The pure-Python pickler writing tensors, dtypes and devices as torch does."""

    def __init__(self, file: IO[bytes], protocol: int) -> None:
        super().__init__(file, protocol)
        self.records: List[Tuple[str, Tensor]] = []
        self.keys: Dict[int, _StorageRef] = {}

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, _StorageRef):
            module = "torch.storage" if obj.storage_name == "UntypedStorage" else "torch"
            return ("storage", _Global.of(module, obj.storage_name), obj.key, obj.location, obj.numel)
        return None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, _Global):
            x = self.memo.get(id(obj))
            if x is not None:
                self.write(self.get(x[0]))
                return
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode("utf-8"))
            self.memoize(obj)
            return
        if isinstance(obj, (_core.dtype, ComplexDType)):  # torch.float32 etc., by name
            self.save(_Global.of("torch", _dtype_name(obj)))
            return
        super().save(obj, save_persistent_id)

    def _storage(self, t: Any) -> Tuple[_StorageRef, Any]:
        ref = self.keys.get(id(t))
        if ref is None:
            dt = _dtype_name(t.dtype)
            key = str(len(self.records))
            if dt == "uint32":  # torch >= 2.3 writes the newer dtypes as untyped storages
                ref = _StorageRef(key, "UntypedStorage", t.numel() * 4, _location(t))
            else:
                ref = _StorageRef(key, _DTYPE_STORAGE[dt], t.numel(), _location(t))
            self.keys[id(t)] = ref
            # a complex tensor's bytes are those of its real (..., 2) layout
            self.records.append((key, view_as_real(t) if isinstance(t, ComplexTensor) else t))
        return ref, t.dtype

    def _tensor_reduce(self, t: Any, requires_grad: bool) -> Any:
        ref, dt = self._storage(t)
        shape = tuple(t.shape)
        stride = []
        acc = 1
        for d in reversed(shape):
            stride.append(acc)
            acc *= d
        stride_t = tuple(reversed(stride))
        hooks = collections.OrderedDict()  # type: ignore[var-annotated]
        if _dtype_name(dt) == "uint32":
            args = (ref, 0, shape, stride_t, requires_grad, hooks, _Global.of("torch", "uint32"))
            return (_Global.of("torch._utils", "_rebuild_tensor_v3"), args)
        return (_Global.of("torch._utils", "_rebuild_tensor_v2"), (ref, 0, shape, stride_t, requires_grad, hooks))

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, SparseTensor):  # as torch pickles one: its parts, by layout
            parts = (obj._indices(), obj._values().detach(), Size(obj.shape), obj.is_coalesced())
            return (_Global.of("torch._utils", "_rebuild_sparse_tensor"), (sparse_coo, parts))
        if isinstance(obj, ComplexTensor):
            return self._tensor_reduce(obj, obj.requires_grad and obj.is_leaf)
        if isinstance(obj, layout):  # as torch writes one: by name
            return (_Global.of("torch.serialization", "_get_layout"), (f"torch.{obj._name}",))
        if isinstance(obj, Tensor):
            if _dtype_name(obj.dtype) not in _DTYPE_STORAGE and _dtype_name(obj.dtype) != "uint32":
                raise TypeError(f"save: cannot save a tensor of dtype {obj.dtype}")
            param = _parameter_class()
            if isinstance(obj, param):
                inner = _PlainTensor(obj)
                return (_Global.of("torch._utils", "_rebuild_parameter"), (inner, obj.requires_grad, collections.OrderedDict()))
            return self._tensor_reduce(obj, obj.requires_grad and obj.is_leaf)
        if isinstance(obj, _PlainTensor):
            return self._tensor_reduce(obj.t, False)
        if isinstance(obj, _core.device):
            return (_Global.of("torch", "device"), (str(obj),))
        if isinstance(obj, Size):  # a shape, as torch.Size (which torch's weights_only loader allows)
            return (_Global.of("torch", "Size"), (tuple(obj),))
        return NotImplemented


class _PlainTensor:
    """A parameter's data, pickled as a plain tensor inside `_rebuild_parameter`."""

    def __init__(self, t: Tensor) -> None:
        self.t = t


def _record_info(name: str, offset: int, size: int) -> zipfile.ZipInfo:
    """A stored (uncompressed) record whose data starts at a multiple of 64 bytes:
    the padding goes into an extra field (id "FB", as torch writes it)."""
    zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    zi.compress_type = zipfile.ZIP_STORED
    zi.external_attr = 0o600 << 16
    header = 30 + len(name.encode("utf-8")) + 4
    if size * 1.05 > zipfile.ZIP64_LIMIT:
        header += 20  # zipfile appends a zip64 extra field to the local header
    pad = (-(offset + header)) % _ALIGN
    zi.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    return zi


def _write_archive(out: IO[bytes], prefix: str, pickled: bytes, records: List[Tuple[str, Tensor]]) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:

        def put(rel: str, data: bytes) -> None:
            offset = out.tell() if out.seekable() else zf.start_dir
            zf.writestr(_record_info(f"{prefix}/{rel}", offset, len(data)), data)

        put("data.pkl", pickled)
        put(".format_version", b"1")
        put(".storage_alignment", str(_ALIGN).encode())
        put("byteorder", sys.byteorder.encode())
        for key, t in records:
            put(f"data/{key}", _core._storage_bytes(t))
        put("version", b"3\n")
        put(".data/serialization_id", str(int.from_bytes(os.urandom(16), "little")).zfill(40).encode())


def save(
    obj: Any,
    f: FILE_LIKE,
    pickle_module: Any = pickle,
    pickle_protocol: int = DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
) -> None:
    """Save `obj` (tensors, state_dicts, optimizer states, nested dicts/lists/tuples,
    numbers, strings, and picklable objects of your own) in PyTorch's zip format, so
    `torch.load` reads it (for containers of tensors and plain values).

    Args:
        obj: what to save.
        f: a path (written atomically: a temporary file then a rename) or a writable
            binary file object.
        pickle_module: only `pickle`.
        pickle_protocol: pickle protocol, 2 (torch's default) or higher.
        _use_new_zipfile_serialization: must be True (the legacy format is not written).
        _disable_byteorder_record: must be False (the record is always written)."""
    if pickle_module is not pickle:
        raise ValueError(f"save: pickle_module={getattr(pickle_module, '__name__', pickle_module)!r} is not supported; only pickle")
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("save: the legacy (pre-1.6) format is not written; leave _use_new_zipfile_serialization=True")
    if _disable_byteorder_record:
        raise NotImplementedError("save: the byteorder record is always written; leave _disable_byteorder_record=False")
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"save: pickle_protocol must be an int in 2..{pickle.HIGHEST_PROTOCOL}, got {pickle_protocol!r}")
    buf = io.BytesIO()
    p = _Pickler(buf, pickle_protocol)
    p.dump(obj)
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        prefix = os.path.splitext(os.path.basename(path))[0] or "archive"
        folder = os.path.dirname(os.path.abspath(path))
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "wb") as out:
                _write_archive(out, prefix, buf.getvalue(), p.records)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        return
    if not hasattr(f, "write"):
        raise TypeError(f"save: expected a path or a writable binary file object, got {type(f).__name__}")
    _write_archive(f, "archive", buf.getvalue(), p.records)  # type: ignore[arg-type]
