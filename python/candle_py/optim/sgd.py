"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import _core
from .._core import Tensor
from .optimizer import Optimizer, ParamsT


class SGD(Optimizer):
    """Stochastic gradient descent, as `torch.optim.SGD`: learning rate `lr`, optional
    `momentum` (with `dampening` and `nesterov`), L2 `weight_decay`, and
    `maximize` to ascend; `foreach`, `differentiable`, `fused` are accepted and ignored."""

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
        # foreach / differentiable / fused select PyTorch kernels; accepted for compatibility.
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

    def _update(self, p: Tensor, grad: Tensor, state: Dict[str, Any], group: Dict[str, Any]) -> Tensor:
        wd, momentum = group["weight_decay"], group["momentum"]
        if wd != 0:
            grad = grad + p * wd
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.clone()
            else:
                buf = buf * momentum + grad * (1 - group["dampening"])
            state["momentum_buffer"] = buf
            grad = grad + buf * momentum if group["nesterov"] else buf
        return p - grad * group["lr"]

    def _fused_step(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> bool:
        momentum = group["momentum"]
        bufs: List[Tensor] = []
        fresh: List[bool] = []
        if momentum != 0:
            for p in params:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                fresh.append(buf is None)
                if buf is None:
                    buf = state["momentum_buffer"] = _core.zeros_like(p)
                bufs.append(buf)
        done = _core._sgd_step(
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
        if not done:  # the per-parameter path makes its buffers from the gradient itself
            for p, new in zip(params, fresh):
                if new:
                    del self.state[p]["momentum_buffer"]
        return done
