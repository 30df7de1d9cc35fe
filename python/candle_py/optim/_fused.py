"""Optimizers whose step is one fused Rust update per parameter group
(`_core._optim_step`): RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam. Each
keeps torch's state keys (`step`, `square_avg`, `exp_avg`, ...) so a state dict in
torch's layout loads; the arithmetic is torch's single-tensor CPU update."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .. import _core
from .._core import Tensor
from .optimizer import Optimizer, ParamsT, _refuse_differentiable


def _number(v: Any) -> float:
    """A scalar state entry (`step`, `mu_product`) as a float: torch keeps 0-d tensors,
    older state dicts plain numbers."""
    return float(v.item()) if isinstance(v, Tensor) else float(v)


def _check(name: str, value: float, ok: bool) -> None:
    if not ok:
        raise ValueError(f"Invalid {name}: {value}")


def _check_betas(betas: Tuple[float, float]) -> None:
    for i in range(2):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


class _FusedOptimizer(Optimizer):
    """Shared step: lazily creates the state buffers (`_buffers`), counts steps, and
    hands the group to `_core._optim_step(_kind, ...)`."""

    _kind = ""

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        """The state buffers (name, initial fill value) the rule updates, in its order."""
        raise NotImplementedError

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        """The group's options under the names `_core._optim_step` takes."""
        raise NotImplementedError

    def _new_state(self, p: Tensor, group: Dict[str, Any]) -> Dict[str, Any]:
        state: Dict[str, Any] = {"step": _core.tensor(0.0)}
        for name, fill in self._buffers(group):
            state[name] = _core.full_like(p, fill) if fill else _core.zeros_like(p)
        return state

    def _step_group(self, group: Dict[str, Any], params: List[Tensor], grads: List[Tensor]) -> None:
        names = [n for n, _ in self._buffers(group)]
        states = []
        for p in params:
            state = self.state.get(p)
            if not state:
                state = self.state[p] = self._new_state(p, group)
            for n, fill in self._buffers(group):  # e.g. momentum switched on after some steps
                if n not in state:
                    state[n] = _core.full_like(p, fill) if fill else _core.zeros_like(p)
            states.append(state)
        steps = [_number(s["step"]) + 1 for s in states]
        mus = [_number(s["mu_product"]) for s in states] if self._kind == "nadam" else []
        new_mus = _core._optim_step(self._kind, params, grads, [[s[n] for s in states] for n in names], steps, mus, self._hyper(group))
        made: Dict[float, Tensor] = {}  # one step tensor per distinct count (they are replaced, never mutated)
        for s, step in zip(states, steps):
            s["step"] = made.get(step) or made.setdefault(step, _core.tensor(step))
        for s, mu in zip(states, new_mus):  # keeps the state's dtype (torch casts it to the parameter's on load)
            old = s["mu_product"]
            s["mu_product"] = _core.tensor(mu, dtype=old.dtype) if isinstance(old, Tensor) else _core.tensor(mu)


class RMSprop(_FusedOptimizer):
    """`torch.optim.RMSprop`: `square_avg = alpha * square_avg + (1 - alpha) * g^2`,
    optionally `centered` (minus the squared running mean `grad_avg`) and with
    `momentum` (`momentum_buffer`). `foreach` / `capturable` pick torch kernels of the same
    update (one Rust update serves all); `differentiable=True` is refused."""

    _kind = "rmsprop"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: Optional[bool] = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _refuse_differentiable("RMSprop", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("epsilon value", eps, eps >= 0.0)
        _check("momentum value", momentum, momentum >= 0.0)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        _check("alpha value", alpha, alpha >= 0.0)
        super().__init__(
            params,
            dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay, maximize=maximize),
        )

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        out = [("square_avg", 0.0)]
        if group["centered"]:
            out.append(("grad_avg", 0.0))
        if group["momentum"] > 0:
            out.append(("momentum_buffer", 0.0))
        return out

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        keys = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize")
        return {k: float(group[k]) for k in keys}


class Adagrad(_FusedOptimizer):
    """`torch.optim.Adagrad`: `sum += g^2`, `p -= clr * g / (sqrt(sum) + eps)` with
    `clr = lr / (1 + (step - 1) * lr_decay)`; `sum` starts at
    `initial_accumulator_value` and, as in torch, the state exists from construction.
    `foreach` / `fused` pick torch kernels of the same update; `differentiable=True` is refused."""

    _kind = "adagrad"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: Optional[bool] = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: Optional[bool] = None,
    ) -> None:
        _refuse_differentiable("Adagrad", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("lr_decay value", lr_decay, lr_decay >= 0.0)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        _check("initial_accumulator_value value", initial_accumulator_value, initial_accumulator_value >= 0.0)
        _check("epsilon value", eps, eps >= 0.0)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                eps=eps,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                maximize=maximize,
            ),
        )
        for group in self.param_groups:  # torch fills the state up front
            for p in group["params"]:
                self.state[p] = self._new_state(p, group)

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        return [("sum", float(group["initial_accumulator_value"]))]

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        return {k: float(group[k]) for k in ("lr", "lr_decay", "eps", "weight_decay", "maximize")}


class Adadelta(_FusedOptimizer):
    """`torch.optim.Adadelta`: running averages `square_avg` of `g^2` and `acc_delta` of
    the squared updates, `delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g`,
    `p -= lr * delta` (lr defaults to 1.0). `foreach` / `capturable` pick torch kernels of
    the same update; `differentiable=True` is refused."""

    _kind = "adadelta"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: Optional[bool] = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _refuse_differentiable("Adadelta", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("rho value", rho, 0.0 <= rho <= 1.0)
        _check("epsilon value", eps, eps >= 0.0)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        return [("square_avg", 0.0), ("acc_delta", 0.0)]

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        return {k: float(group[k]) for k in ("lr", "rho", "eps", "weight_decay", "maximize")}


def _betas_hyper(group: Dict[str, Any], keys: Tuple[str, ...]) -> Dict[str, float]:
    out = {k: float(group[k]) for k in keys}
    out["beta1"], out["beta2"] = (float(b) for b in group["betas"])
    return out


class Adamax(_FusedOptimizer):
    """`torch.optim.Adamax`: Adam with the infinity norm, `exp_inf = max(beta2 * exp_inf,
    |g| + eps)`, `p -= lr / (1 - beta1^step) * exp_avg / exp_inf`. `foreach` /
    `capturable` pick torch kernels of the same update; `differentiable=True` is refused."""

    _kind = "adamax"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: Optional[bool] = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        _refuse_differentiable("Adamax", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("epsilon value", eps, eps >= 0.0)
        _check_betas(betas)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        return [("exp_avg", 0.0), ("exp_inf", 0.0)]

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        return _betas_hyper(group, ("lr", "eps", "weight_decay", "maximize"))


class NAdam(_FusedOptimizer):
    """`torch.optim.NAdam`: Adam with Nesterov momentum scheduled by `momentum_decay`
    (state `mu_product`, the product of the momentum coefficients); L2 or, with
    `decoupled_weight_decay=True`, AdamW-style decay. `foreach` / `capturable` pick torch
    kernels of the same update; `differentiable=True` is refused."""

    _kind = "nadam"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: Optional[bool] = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _refuse_differentiable("NAdam", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("epsilon value", eps, eps >= 0.0)
        _check_betas(betas)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        _check("momentum_decay value", momentum_decay, momentum_decay >= 0.0)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=decoupled_weight_decay,
                maximize=maximize,
            ),
        )

    def _new_state(self, p: Tensor, group: Dict[str, Any]) -> Dict[str, Any]:
        state = super()._new_state(p, group)
        state["mu_product"] = _core.tensor(1.0)
        return state

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        return [("exp_avg", 0.0), ("exp_avg_sq", 0.0)]

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        return _betas_hyper(group, ("lr", "eps", "weight_decay", "momentum_decay", "decoupled_weight_decay", "maximize"))


class RAdam(_FusedOptimizer):
    """`torch.optim.RAdam`: Adam with the variance rectification term (plain momentum SGD
    while the rectifier's `rho_t <= 5`); L2 or, with `decoupled_weight_decay=True`,
    AdamW-style decay. `foreach` / `capturable` pick torch kernels of the same update;
    `differentiable=True` is refused."""

    _kind = "radam"

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: Tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: Optional[bool] = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        _refuse_differentiable("RAdam", differentiable)
        lr = float(lr)
        _check("learning rate", lr, lr >= 0.0)
        _check("epsilon value", eps, eps >= 0.0)
        _check_betas(betas)
        _check("weight_decay value", weight_decay, weight_decay >= 0.0)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def _buffers(self, group: Dict[str, Any]) -> List[Tuple[str, float]]:
        return [("exp_avg", 0.0), ("exp_avg_sq", 0.0)]

    def _hyper(self, group: Dict[str, Any]) -> Dict[str, float]:
        return _betas_hyper(group, ("lr", "eps", "weight_decay", "decoupled_weight_decay", "maximize"))
