"""`autocast`: the context manager and decorator of `torch.autocast`, and the
module-level state functions (`is_autocast_enabled`, `get_autocast_dtype`, ...)."""

from __future__ import annotations

import functools
import warnings
from types import TracebackType
from typing import Any, Callable, List, Optional, Tuple, Type, TypeVar

from .. import _core

__all__ = [
    "autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
    "set_autocast_enabled", "set_autocast_dtype", "is_autocast_cache_enabled",
    "set_autocast_cache_enabled", "clear_autocast_cache", "custom_fwd", "custom_bwd",
]  # fmt: skip

F = TypeVar("F", bound=Callable[..., Any])

# candle_py's device types, with PyTorch's names ("metal" is PyTorch's "mps").
_KNOWN = ("cpu", "cuda", "mps")
_ALIASES = {"metal": "mps"}
# The dtypes CPU autocast accepts, as PyTorch's; float32 is accepted and casts nothing.
_CPU_DTYPES = ("bfloat16", "float16")
_cache = {"enabled": True}


def _device_type(device_type: Any) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    name = device_type.split(":", 1)[0]
    name = _ALIASES.get(name, name)
    if name not in _KNOWN:
        raise RuntimeError(f"autocast: invalid device type {device_type!r}; candle_py's autocast knows 'cpu', 'cuda' and 'mps'")
    return name


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast supports `device_type` ("cpu", "cuda", "mps")."""
    try:
        _device_type(device_type)
    except (RuntimeError, ValueError):
        return False
    return True


def is_autocast_enabled(device_type: Optional[str] = None) -> bool:
    """Whether autocast is on for `device_type` on this thread. Without an argument
    it asks about CUDA, as PyTorch does (so it is False inside a CPU autocast)."""
    return bool(_core._autocast_state(_device_type("cuda" if device_type is None else device_type))[0])


def get_autocast_dtype(device_type: str) -> _core.dtype:
    """The dtype autocast uses on `device_type` (bfloat16 for "cpu", float16 else, by default)."""
    return _core._autocast_state(_device_type(device_type))[1]  # type: ignore[no-any-return]


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Switch autocast on or off for `device_type` on this thread (what `autocast` does)."""
    d = _device_type(device_type)
    _core._set_autocast_state(d, bool(enabled), _core._autocast_state(d)[1])


def set_autocast_dtype(device_type: str, dtype: _core.dtype) -> None:
    """Set the dtype autocast uses on `device_type` on this thread."""
    d = _device_type(device_type)
    _core._set_autocast_state(d, _core._autocast_state(d)[0], dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether autocast's cast cache is on (see `set_autocast_cache_enabled`)."""
    return bool(_cache["enabled"])


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Stored for `is_autocast_cache_enabled`. PyTorch's cache keeps the cast copy of a
    weight for reuse inside one autocast block (speed only: the values are the same);
    candle_py casts on every use, so results do not depend on this setting."""
    _cache["enabled"] = bool(enabled)


def clear_autocast_cache() -> None:
    """Nothing to clear: candle_py keeps no cast cache (see `set_autocast_cache_enabled`)."""
    return None


class autocast:
    """`with candle_py.autocast("cpu"):` (or `@autocast("cpu")` on a function): inside,
    the matmul-like ops (`linear`, `matmul`/`@`/`mm`/`bmm`, `conv*`, `conv_transpose*`,
    `prelu`, `scaled_dot_product_attention`) cast float32 inputs to `dtype`
    (bfloat16 by default on "cpu", float16 on "cuda"/"mps"), the losses run in
    float32, other ops in their inputs' dtype; gradients flow back through the casts
    to the float32 parameters. Nested blocks restore the outer state on exit.

    As PyTorch: on "cpu" only bfloat16 and float16 are supported (another dtype
    warns and disables autocast for the block); on "cuda"/"mps" without such a
    device, autocast warns and is disabled. `cache_enabled` sets the (results-neutral)
    cast cache flag for the block, see `set_autocast_cache_enabled`."""

    def __init__(
        self, device_type: str, dtype: Optional[_core.dtype] = None, enabled: bool = True, cache_enabled: Optional[bool] = None
    ) -> None:
        self.device = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dtype
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        self._enabled = bool(enabled)
        if not isinstance(self.fast_dtype, _core.dtype):
            warnings.warn(
                f"autocast: dtype must be a candle_py.dtype, got {self.fast_dtype!r}. Disabling autocast.", UserWarning, stacklevel=2
            )
            self.fast_dtype, self._enabled = get_autocast_dtype(self.device), False
        elif self.device == "cpu":
            if self._enabled and self.fast_dtype.name not in _CPU_DTYPES and self.fast_dtype.name != "float32":
                warnings.warn(
                    "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                    "CPU Autocast only supports dtypes of candle_py.bfloat16, candle_py.float16 currently.",
                    UserWarning,
                    stacklevel=2,
                )
                self._enabled = False
            elif self.fast_dtype.name == "float32":
                # PyTorch accepts float32 on CPU and then autocasts nothing.
                self._enabled = False
        elif self._enabled:
            available = _core.cuda_is_available() if self.device == "cuda" else _core.metal_is_available()
            if not available:
                warnings.warn(f"{self.device.upper()} is not available. Disabling autocast.", UserWarning, stacklevel=2)
                self._enabled = False
        self._saved: List[Tuple[bool, _core.dtype, bool]] = []

    def __enter__(self) -> None:
        on, dt = _core._autocast_state(self.device)
        self._saved.append((on, dt, is_autocast_cache_enabled()))
        _core._set_autocast_state(self.device, self._enabled, self.fast_dtype)
        set_autocast_cache_enabled(self._cache_enabled)

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        on, dt, cache = self._saved.pop()
        _core._set_autocast_state(self.device, on, dt)
        set_autocast_cache_enabled(cache)

    def __call__(self, func: F) -> F:
        """Use as a decorator: `func` runs inside this autocast block."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _cast_floats(value: Any, device_type: str, dtype: _core.dtype) -> Any:
    """`value` with its float tensors on `device_type` (float64 excepted) cast to
    `dtype`, looking inside lists, tuples and dicts."""
    if isinstance(value, _core.Tensor):
        dev = _ALIASES.get(value.device.type, value.device.type)
        if value.is_floating_point() and value.dtype != _core.float64 and dev == device_type:
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, device_type, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_floats(v, device_type, dtype) for k, v in value.items()}
    return value


def custom_fwd(fwd: Optional[F] = None, *, device_type: str, cast_inputs: Optional[_core.dtype] = None) -> Any:
    """Decorate the `forward` of an `autograd.Function` for autocast (`torch.amp.custom_fwd`).

    It records the autocast state on `ctx` (for `custom_bwd`). With `cast_inputs`,
    inside an autocast block the float tensor arguments are cast to `cast_inputs` and
    `forward` runs with autocast off; outside autocast it is called as is."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    dev = _device_type(device_type)
    body = fwd

    @functools.wraps(body)
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        ctx._dtype = get_autocast_dtype(dev)
        on = is_autocast_enabled(dev)
        if cast_inputs is None:
            ctx._fwd_used_autocast = on
            return body(ctx, *args, **kwargs)
        ctx._fwd_used_autocast = False
        if not on:
            return body(ctx, *args, **kwargs)
        with autocast(dev, enabled=False):
            return body(ctx, *_cast_floats(args, dev, cast_inputs), **_cast_floats(kwargs, dev, cast_inputs))

    return forward


def custom_bwd(bwd: Optional[F] = None, *, device_type: str) -> Any:
    """Decorate the `backward` of an `autograd.Function` decorated with `custom_fwd`:
    it runs under the autocast state its forward saw (`torch.amp.custom_bwd`)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    dev = _device_type(device_type)
    body = bwd

    @functools.wraps(body)
    def backward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        with autocast(dev, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return body(ctx, *args, **kwargs)

    return backward
