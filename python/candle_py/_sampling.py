"""`normal(mean, std, ...)` (PyTorch's four forms) and `randint_like`, composed from
`randn`/`randint` and the broadcasting arithmetic (the draws come from
`generator`, or the default one).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from ._core import DTypeError, Generator, Tensor, randint, randn, where, zeros

__all__ = ["normal", "randint_like"]

Number = Union[int, float]


def _broadcast(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """NumPy's broadcast of two shapes; RuntimeError naming both when they clash."""
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise RuntimeError(f"normal: the size of mean {list(a)} must match the size of std {list(b)} at non-singleton dimension {-i}")
        out.append(y if x == 1 else x)
    return out[::-1]


def _zero_grad_path(out: Tensor, inputs: Sequence[Any]) -> Tensor:
    """PyTorch's `normal` is not reparameterized: its result requires grad when an
    input does, but the gradient it passes back is zero. `where` with an all-false
    mask keeps `out`'s values and routes a zero gradient to each such input."""
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad:
            none = zeros(out.shape, dtype=bool, device=out.device)
            out = where(none, t.to(out.dtype).expand(out.shape), out)
    return out


def normal(
    mean: Union[Tensor, Number],
    std: Union[Tensor, Number] = 1.0,
    size: Optional[Sequence[int]] = None,
    *,
    generator: Optional[Generator] = None,
    out: Optional[Tensor] = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
) -> Tensor:
    """Draws from N(mean, std^2): `normal(mean_tensor, std_tensor)`,
    `normal(mean_tensor, std=1.0)`, `normal(mean, std_tensor)` (result of the
    broadcast shape and the tensors' promoted float dtype), or
    `normal(mean, std, size, *, dtype, device, requires_grad)` for two numbers."""
    if out is not None:
        raise NotImplementedError("normal: out= is not supported; assign the result instead")
    if layout is not None or pin_memory:
        raise NotImplementedError("normal: layout= and pin_memory= are not supported (dense CPU/GPU tensors only)")
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal(): with a number mean and std, size is required: normal(mean, std, size)")
        if float(std) < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        res = randn(tuple(size), generator=generator, dtype=dtype, device=device) * float(std) + float(mean)
        return res.requires_grad_() if requires_grad else res
    if size is not None or dtype is not None or device is not None or requires_grad:
        raise TypeError("normal(): size, dtype, device and requires_grad are only accepted when mean and std are numbers")
    mean_t = mean if isinstance(mean, Tensor) else None
    std_t = std if isinstance(std, Tensor) else None
    ref = mean_t if mean_t is not None else std_t
    assert ref is not None  # one of them is a tensor here
    dt = (mean_t + std_t).dtype if mean_t is not None and std_t is not None else ref.dtype
    if not dt.is_floating_point:
        raise DTypeError(f"normal: expected a floating point input, got {dt}")
    if std_t is not None:
        if bool((std_t < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif float(std) < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if mean_t is not None and std_t is not None:
        shape = _broadcast(list(mean_t.shape), list(std_t.shape))
    else:
        shape = list(ref.shape)
    eps = randn(tuple(shape), generator=generator, dtype=dt, device=ref.device)
    m = mean_t.detach() if mean_t is not None else mean
    s = std_t.detach() if std_t is not None else std
    return _zero_grad_path(eps * s + m, [mean, std])


def randint_like(
    input: Tensor,
    low: int = 0,
    high: Optional[int] = None,
    *,
    generator: Optional[Generator] = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Integers uniform in [low, high) in a tensor shaped like `input`, of its dtype
    and device unless `dtype`/`device` say otherwise; `randint_like(x, high)` is
    `randint_like(x, 0, high)`."""
    if not isinstance(input, Tensor):
        raise TypeError(f"randint_like(): argument 'input' must be Tensor, not {type(input).__name__}")
    if layout is not None or memory_format is not None:
        raise NotImplementedError("randint_like: layout= and memory_format= are not supported (dense tensors only)")
    if high is None:
        low, high = 0, low
    res = randint(
        low,
        high,
        tuple(input.shape),
        generator=generator,
        dtype=input.dtype if dtype is None else dtype,
        device=input.device if device is None else device,
    )
    return res.requires_grad_() if requires_grad else res
