"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import _core
from .._core import Tensor
from .optimizer import Optimizer, ParamsT, _refuse_differentiable


class SGD(Optimizer):
    """Stochastic gradient descent, as `torch.optim.SGD`: learning rate `lr`, optional
    `momentum` (with `dampening` and `nesterov`), L2 `weight_decay`, and
    `maximize` to ascend. `foreach` / `fused` pick PyTorch kernels of the same update (one
    Rust update serves both); `differentiable=True` (autograd through the step) is refused."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
        differentiable: bool = False,
        fused: Optional[bool] = None,
    ) -> None:
        # foreach / fused select PyTorch kernels of the same update: one Rust update serves both.
        _refuse_differentiable("SGD", differentiable)
        lr = float(lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        )

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        momentum = group["momentum"]
        bufs: List[Tensor] = []
        fresh: List[bool] = []
        if momentum != 0:
            for p in params:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                fresh.append(buf is None)
                if buf is None:  # filled with the gradient by the step (torch's clone)
                    buf = state["momentum_buffer"] = _core.zeros_like(p)
                bufs.append(buf)
        _core._sgd_step(
            params,
            grads,
            bufs,
            fresh,
            float(group["lr"]),
            float(momentum),
            float(group["dampening"]),
            float(group["weight_decay"]),
            bool(group["nesterov"]),
            bool(group.get("maximize", False)),
        )
