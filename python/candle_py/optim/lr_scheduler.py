"""Learning-rate schedulers: `StepLR`, `CosineAnnealingLR` (PyTorch's formulas)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR"]


class LRScheduler:
    """Base class of learning-rate schedulers: sets each param group's `lr` from
    `get_lr()` on every `step()`; `last_epoch=-1` starts from the optimizer's
    current learning rates (kept as `initial_lr`)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        self.base_lrs: List[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> List[float]:
        """The learning rate of each param group for the current epoch (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} must define get_lr")

    def get_last_lr(self) -> List[float]:
        """The learning rates set by the latest `step()`, one per param group."""
        return self._last_lr

    def step(self, epoch: Optional[int] = None) -> None:
        """Advance one epoch (or jump to `epoch`, PyTorch's deprecated form)."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> Dict[str, Any]:
        """The scheduler's state (everything but the optimizer), for `load_state_dict`."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore a state from `state_dict()`."""
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply the learning rate by `gamma` every `step_size` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """`eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> List[float]:
        return [self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2 for base in self.base_lrs]
