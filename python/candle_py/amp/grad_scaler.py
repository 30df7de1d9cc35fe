"""`GradScaler`: loss scaling for mixed-precision training, as `torch.amp.GradScaler`.

Enabled, it multiplies the loss by a scale factor before `backward()` (so small
float16 gradients do not flush to zero), divides the gradients by it again
(`unscale_`), skips `optimizer.step()` when a gradient is inf/NaN, and then adapts
the scale (`update`: times `backoff_factor` after an overflow, times
`growth_factor` after `growth_interval` clean steps). Disabled — `enabled=False`,
or `device="cuda"` (the default, as in PyTorch) without a CUDA device — every
method is a pass-through: `scale()` returns its input, `step()` just calls
`optimizer.step()`, `get_scale()` is 1.0 and `state_dict()` is empty.

The per-parameter work is tensor ops (`mul_`, `isfinite`): no Python loop over elements.
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any, Dict, Iterable, Optional, Union

from .. import _core
from .._core import Tensor
from ..autograd import no_grad

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    """Where an optimizer is in the current iteration (`unscale_`/`step` bookkeeping)."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """Dynamic loss scaling (`torch.amp.GradScaler`); see the module docstring."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = _core.device(device).type
        self._enabled = bool(enabled)
        if self._enabled and self._device == "cuda" and not _core.cuda_is_available():
            warnings.warn("candle_py.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        # id(optimizer) -> {"stage": OptState, "found_inf": bool}
        self._per_optimizer: Dict[int, Dict[str, Any]] = {}

    def _state(self, optimizer: Any) -> Dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": OptState.READY, "found_inf": False})

    def scale(self, outputs: Any) -> Any:
        """`outputs` (a tensor, or nested lists/tuples of tensors) times the scale;
        unchanged when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * _core.tensor(self._scale, dtype=_core.float32, device=outputs.device)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, tuple) else scaled
        if isinstance(outputs, Iterable):
            return map(self.scale, outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer: Any) -> None:
        """Divide the gradients of `optimizer`'s parameters by the scale, in place, and
        note whether any is inf/NaN (then `step` skips). At most once per `update()`."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # PyTorch takes the reciprocal in float64, then rounds it to float32.
        inv = float(_core.tensor(1.0 / self._scale, dtype=_core.float32).item())
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    g.mul_(inv)
                    if not found and not bool(g.isfinite().all().item()):
                        found = True
        st["found_inf"] = found
        st["stage"] = OptState.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Optional[Any]:
        """`optimizer.step(*args, **kwargs)` on unscaled gradients, skipped when they
        hold inf/NaN; returns what `optimizer.step` returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        ret = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return ret

    def update(self, new_scale: Optional[Union[float, Tensor]] = None) -> None:
        """Adapt the scale for the next iteration (or set it to `new_scale`)."""
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.dtype != _core.float32:
                    raise ValueError("new_scale should be a float or a 1-element candle_py float32 Tensor")
                new_scale = float(new_scale.item())
            self._scale = float(new_scale)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale = float(_core.tensor(self._scale * self._backoff_factor, dtype=_core.float32).item())
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = float(_core.tensor(self._scale * self._growth_factor, dtype=_core.float32).item())
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by after `growth_interval` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the growth factor."""
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a step with inf/NaN gradients."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the backoff factor."""
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        """How many clean steps in a row grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the growth interval."""
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        """Whether scaling is on (False when disabled or without the device)."""
        return self._enabled

    def state_dict(self) -> Dict[str, Any]:
        """`scale`, `growth_factor`, `backoff_factor`, `growth_interval`,
        `_growth_tracker` (PyTorch's keys); empty when disabled."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore from `state_dict()`; a no-op when disabled."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
