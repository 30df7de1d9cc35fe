"""Adam (with amsgrad) and AdamW, with PyTorch's bias-corrected update:
`p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)`."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .. import _core
from .._core import Tensor
from .optimizer import Optimizer, ParamsT, _refuse_differentiable


class Adam(Optimizer):
    """`torch.optim.Adam`; `decoupled_weight_decay=True` makes it AdamW."""

    _decoupled = False

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: Optional[bool] = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: Optional[bool] = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        # foreach / capturable / fused select PyTorch kernels of the same update: one Rust update serves all.
        _refuse_differentiable(type(self).__name__, differentiable)
        lr = float(lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Invalid beta parameters: {betas}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                decoupled_weight_decay=bool(decoupled_weight_decay or self._decoupled),
            ),
        )

    @staticmethod
    def _init_state(p: Tensor, state: Dict[str, Any], group: Dict[str, Any]) -> None:
        if not state:
            state["step"] = _core.tensor(0.0)
            state["exp_avg"] = _core.zeros_like(p)
            state["exp_avg_sq"] = _core.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = _core.zeros_like(p)

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        states = [self.state.setdefault(p, {}) for p in params]
        for p, state in zip(params, states):
            self._init_state(p, state, group)
        amsgrad = bool(group["amsgrad"])
        steps = [float(s["step"].item()) + 1 for s in states]
        b1, b2 = group["betas"]
        _core._adam_step(
            params,
            grads,
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [s["max_exp_avg_sq"] for s in states] if amsgrad else [],
            steps,
            float(group["lr"]),
            float(b1),
            float(b2),
            float(group["eps"]),
            float(group["weight_decay"]),
            amsgrad,
            bool(group.get("maximize", False)),
            bool(group.get("decoupled_weight_decay", self._decoupled)),
        )
        made: Dict[float, Tensor] = {}  # one step tensor per distinct count (they are replaced, never mutated)
        for s, step in zip(states, steps):
            s["step"] = made.get(step) or made.setdefault(step, _core.tensor(step))


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2), as `torch.optim.AdamW`."""

    _decoupled = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: Optional[bool] = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: Optional[bool] = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, differentiable=differentiable, decoupled_weight_decay=True
        )
