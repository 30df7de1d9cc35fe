"""candle_py: PyTorch-style tensors and autograd on Hugging Face Candle.

`import candle_py as cp`, then use it as you would `torch`: `cp.tensor`,
`cp.zeros`, `x.backward()`, `with cp.no_grad(): ...`.
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
from importlib import metadata as _metadata

from . import (
    _complex,
    _composed,
    _composed_linalg,
    _composed_math,
    _composed_more,
    _core,
    _format,
    _functions,
    _tensor_types,
    accelerator,
    amp,
    autograd,
    backends,
    cpu,
    cuda,
    distributed,
    distributions,
    jit,
    keras,
    linalg,
    metal,
    mps,
    multiprocessing,
    nn,
    onnx,
    optim,
    quantized,
    random,
    safetensors,
    serialization,
    sparse,
    special,
    testing,
    utils,
)
from ._compile import compile
from ._complex import *  # noqa: F403 - ComplexTensor, complex64/complex128, view_as_complex/real, complex, polar, ...
from ._composed import *  # noqa: F403 - einsum, meshgrid, cdist, ... and the function forms of src/bindings/misc_ops.rs
from ._composed_linalg import *  # noqa: F403 - outer, kron, addmm, tensordot, block_diag, tensor_split, cov, ...
from ._composed_math import *  # noqa: F403 - addcmul, nan_to_num, logaddexp, xlogy, ... (and their Tensor methods)
from ._composed_more import *  # noqa: F403 - torch.conv2d/layer_norm/... aliases, relu_/exp_/..., cummax, quantile, searchsorted, ...
from ._core import (
    BackendError,
    DeviceError,
    DTypeError,
    Generator,
    ShapeError,
    Tensor,
    arange,
    as_tensor,
    bernoulli,
    bfloat16,
    bool,
    cat,
    default_generator,
    device,
    dtype,
    empty,
    empty_like,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    full,
    full_like,
    get_default_device,
    get_default_dtype,
    int16,
    int32,
    int64,
    is_grad_enabled,
    linspace,
    multinomial,
    ones,
    ones_like,
    poisson,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    set_default_device,
    set_default_dtype,
    stack,
    tensor,
    uint8,
    uint32,
    where,
    zeros,
    zeros_like,
)
from ._dtype_info import finfo, iinfo
from ._format import get_printoptions, printoptions, set_printoptions
from ._functions import *  # noqa: F403 - the torch.* function forms of Tensor methods, named in _functions.__all__
from ._sampling import normal, randint_like
from ._settings import (
    are_deterministic_algorithms_enabled,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_float32_matmul_precision,
    use_deterministic_algorithms,
)
from ._size import Size
from ._sparse import layout, sparse_coo, sparse_coo_tensor, spmm, strided
from ._tensor_types import *  # noqa: F403 - FloatTensor, LongTensor, ... named in _tensor_types.__all__
from ._threading import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads
from .amp.autocast_mode import (
    autocast,
    get_autocast_dtype,
    is_autocast_available,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .autograd import enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled
from .linalg import cholesky_inverse, cholesky_solve, det, logdet, matrix_power, slogdet
from .linalg import inv as inverse
from .random import get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .safetensors import load_file, save_file
from .serialization import load, save

__version__: str = _core.__version__


def _pep440(version: str) -> str:
    """Cargo's `1.2.0-alpha.1` as the wheel's metadata spells it (`1.2.0a1`)."""
    for cargo, python in (("-alpha.", "a"), ("-beta.", "b"), ("-rc.", "rc")):
        version = version.replace(cargo, python)
    return version


def _check_core_version() -> None:
    """The installed distribution and the compiled core must come from one build.

    Without distribution metadata (a source checkout on `sys.path` with the core
    built in place) there is nothing to compare against, and the check passes."""
    try:
        package = _metadata.version("candle-py")
    except _metadata.PackageNotFoundError:
        return
    if _pep440(package) != _pep440(_core.__version__):
        raise ImportError(
            f"candle_py: the compiled core is version {_core.__version__} but the installed package is {package}; "
            "reinstall candle-py so that both come from one build"
        )


_check_core_version()
_core._set_formatter(_format.tensor_repr)  # the core prints tensors with PyTorch's layout (_format.py)
_core._set_size_type(Size)  # shapes are candle_py.Size, as torch.Size (_size.py)

# PyTorch's module-level constants.
inf: _builtins.float = _math.inf
nan: _builtins.float = _math.nan
pi: _builtins.float = _math.pi
e: _builtins.float = _math.e
newaxis: None = None

# PyTorch's aliases.
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
concat = cat
concatenate = cat


def _dtype_from_name(name: str) -> dtype:
    """Unpickling support for dtypes pickled by earlier versions (dtypes now pickle
    as references to the module globals `candle_py.<name>`)."""
    return getattr(_core, name)  # type: ignore[no-any-return]


def is_tensor(obj: object) -> _builtins.bool:
    """True when `obj` is a candle_py Tensor (`torch.is_tensor`)."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> _builtins.bool:
    """True when `input`'s dtype is a floating point dtype (`torch.is_floating_point`)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.is_floating_point()


def numel(input: Tensor) -> _builtins.int:
    """The number of elements of `input` (the product of its shape)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"numel(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input.numel()


__all__ = [
    "Tensor", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange",
    "linspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like", "ones_like",
    "full_like", "empty_like", "rand_like", "randn_like", "cat", "concat", "concatenate",
    "stack", "where", "device", "dtype", "set_default_device", "get_default_device", "manual_seed", "initial_seed", "seed",
    "get_rng_state", "set_rng_state", "Generator", "default_generator", "random", "normal", "bernoulli", "multinomial",
    "poisson", "randint_like", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled", "autograd", "cuda", "metal",
    "float32", "float", "float64", "double", "float16", "half", "bfloat16", "uint8",
    "uint32", "int16", "short", "int32", "int", "int64", "long", "bool",
    "ShapeError", "DTypeError", "DeviceError", "BackendError", "is_tensor", "numel",
    "nn", "optim", "utils", "keras", "safetensors", "quantized", "load_file", "save_file", "serialization", "save", "load",
    "set_num_threads", "get_num_threads", "set_num_interop_threads", "get_num_interop_threads",
    "inf", "nan", "pi", "e", "newaxis", "finfo", "iinfo", "Size", "is_floating_point",
    "get_default_dtype", "set_default_dtype", "compile", "jit", "set_printoptions", "get_printoptions",
    "printoptions", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "autocast", "is_autocast_enabled",
    "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype", "is_autocast_available",
    "amp", "backends", "accelerator", "cpu", "mps", "distributed", "onnx", "multiprocessing",
    "sparse", "special", "distributions", "testing", "linalg", "det", "logdet", "slogdet", "inverse",
    "cholesky_solve", "cholesky_inverse", "matrix_power", "sparse_coo_tensor", "spmm", "layout", "strided", "sparse_coo",
]  # fmt: skip
__all__ += _functions.__all__
__all__ += _tensor_types.__all__
__all__ += _composed.__all__
__all__ += _complex.__all__
__all__ += _composed_linalg.__all__
__all__ += _composed_math.__all__
__all__ += _composed_more.__all__
