"""`candle_py.cuda`: PyTorch's `torch.cuda` basics for builds with the `cuda` feature.

A CPU-only build answers `is_available() == False` and `device_count() == 0`;
asking it for a CUDA tensor raises `DeviceError` naming the missing feature, and
the calls that need a GPU (`get_device_name`, `set_device`, ...) raise as a
CPU-only PyTorch does: `AssertionError("... not compiled with CUDA enabled")`.
`candle_py.cuda.amp` holds the (deprecated in PyTorch) `autocast`/`GradScaler`.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from .._core import cuda_device_count, cuda_is_available, cuda_is_built, device
from .._core import default_generator as _default_generator
from .._core import synchronize as _synchronize
from . import amp

__all__ = [
    "is_available", "is_built", "device_count", "current_device", "synchronize", "is_initialized",
    "get_device_name", "get_device_capability", "set_device", "empty_cache", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "is_bf16_supported", "amp", "manual_seed", "manual_seed_all", "seed", "seed_all",
]  # fmt: skip

_Device = Optional[Union[device, str, int]]


def is_available() -> bool:
    """True when this build has the `cuda` feature and CUDA device 0 opens."""
    return cuda_is_available()


def is_built() -> bool:
    """True when this build has the `cuda` feature (`torch.backends.cuda.is_built()`);
    such a build needs the NVIDIA driver even to import."""
    return cuda_is_built()


def device_count() -> int:
    """How many CUDA devices the driver reports (0 without the `cuda` feature)."""
    return cuda_device_count()


def is_initialized() -> bool:
    """Whether CUDA is usable in this process (candle_py opens devices on first use;
    there is no separate lazy initialisation step to have happened or not)."""
    return cuda_is_available()


def _require(op: str) -> None:
    """Raise as PyTorch does when a call needs a GPU that is not there."""
    if not cuda_is_built():
        raise AssertionError(f"{op}: candle_py not compiled with CUDA enabled (build it with the `cuda` feature)")
    if not cuda_is_available():
        raise RuntimeError(f"{op}: no CUDA GPUs are available")


def _index(dev: _Device, op: str) -> int:
    """The CUDA device index `dev` names (None: device 0)."""
    if dev is None:
        return 0
    d = dev if isinstance(dev, device) else device(dev if not isinstance(dev, int) else f"cuda:{dev}")
    if d.type != "cuda":
        raise ValueError(f"{op}: expected a cuda device, but got: {d}")
    return 0 if d.index is None else int(d.index)


def current_device() -> int:
    """candle_py has no per-thread current device: `"cuda"` always means device 0."""
    _require("current_device")
    return 0


def set_device(device: _Device) -> None:
    """Only device 0 can be current (candle_py's `"cuda"` is always `"cuda:0"`):
    selecting it is accepted, another index raises ValueError."""
    _require("set_device")
    i = _index(device, "set_device")
    if i != 0:
        raise ValueError(f"set_device: candle_py always uses cuda:0 for 'cuda'; address device {i} as 'cuda:{i}' instead")


def synchronize(device: _Device = None) -> None:
    """Wait until the queued work on a CUDA device (default `"cuda:0"`) is done."""
    _synchronize("cuda" if device is None else device)


def get_device_name(device: _Device = None) -> str:
    """The GPU's name. Candle does not expose device properties, so on a build with
    CUDA this raises NotImplementedError; without CUDA it raises as PyTorch does."""
    _require("get_device_name")
    raise NotImplementedError("get_device_name: Candle does not expose CUDA device properties")


def get_device_capability(device: _Device = None) -> Any:
    """The GPU's compute capability; like `get_device_name`, not exposed by Candle."""
    _require("get_device_capability")
    raise NotImplementedError("get_device_capability: Candle does not expose CUDA device properties")


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False without a CUDA device; with one, Candle's CUDA kernels take bfloat16."""
    return cuda_is_available()


def empty_cache() -> None:
    """Returns at once: candle_py keeps no cache of freed GPU memory of its own
    (PyTorch's caching allocator does); freed tensors' memory goes back to the driver."""
    return None


def _stat(op: str, device: _Device) -> int:
    """Memory statistics are 0 where there is no CUDA (as PyTorch before CUDA is
    used); with CUDA they need allocator counters Candle does not keep."""
    if not cuda_is_available():
        return 0
    raise NotImplementedError(f"{op}: Candle's CUDA allocator keeps no statistics")


def memory_allocated(device: _Device = None) -> int:
    """Bytes held by tensors on the device: 0 without CUDA; NotImplementedError with it."""
    return _stat("memory_allocated", device)


def max_memory_allocated(device: _Device = None) -> int:
    """Peak of `memory_allocated`: 0 without CUDA; NotImplementedError with it."""
    return _stat("max_memory_allocated", device)


def memory_reserved(device: _Device = None) -> int:
    """Bytes reserved by the caching allocator: 0 without CUDA; NotImplementedError with it."""
    return _stat("memory_reserved", device)


def max_memory_reserved(device: _Device = None) -> int:
    """Peak of `memory_reserved`: 0 without CUDA; NotImplementedError with it."""
    return _stat("max_memory_reserved", device)


def reset_peak_memory_stats(device: _Device = None) -> None:
    """Nothing to reset without CUDA; NotImplementedError with it (no statistics kept)."""
    _stat("reset_peak_memory_stats", device)


def manual_seed(seed: int) -> None:
    """Seed the generator CUDA draws come from. candle_py draws every random value
    from the CPU-side default generator, so with CUDA available this seeds that one
    generator (as `candle_py.manual_seed`); without CUDA it does nothing, as PyTorch
    ignores CUDA seeding on a build or machine without CUDA."""
    if is_available():
        _default_generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """`manual_seed` for every CUDA device: they share the one generator here."""
    manual_seed(seed)


def seed() -> None:
    """Seed the generator CUDA draws come from with OS entropy (nothing without CUDA)."""
    if is_available():
        _default_generator.seed()


def seed_all() -> None:
    """`seed` for every CUDA device: they share the one generator here."""
    seed()
