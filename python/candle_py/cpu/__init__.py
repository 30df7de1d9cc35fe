"""`candle_py.cpu`: `torch.cpu` basics — `amp` (the deprecated `torch.cpu.amp.autocast`),
`is_available()` and `device_count()`."""

from __future__ import annotations

from . import amp

__all__ = ["amp", "is_available", "device_count", "synchronize", "current_device"]


def is_available() -> bool:
    """True: the CPU is always there."""
    return True


def device_count() -> int:
    """1, as PyTorch counts the CPU."""
    return 1


def current_device() -> str:
    """ "cpu", as PyTorch's `torch.cpu.current_device()`."""
    return "cpu"


def synchronize(device: object = None) -> None:
    """Returns at once: CPU ops finish before they return."""
    return None
