"""L-BFGS, as `torch.optim.LBFGS`: written over tensor ops on one flat vector of all
parameters (their gradients concatenated), with an optional strong-Wolfe line search.
The vector operations (dots, axpy updates, the two-loop recursion) are tensor ops;
only the scalars of the line search (step sizes, losses, directional derivatives)
are Python floats, as in torch's own implementation."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core
from .._core import Tensor
from ..autograd import enable_grad, no_grad
from .optimizer import Optimizer, ParamsT


def _f(t: Any) -> float:
    return float(t.item()) if isinstance(t, Tensor) else float(t)


def _cubic_min(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float, bounds: Optional[Tuple[float, float]] = None) -> float:
    """Minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped
    to `bounds` (default: the interval between the points); the midpoint when the
    cubic has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1**2 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = disc**0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


ObjFn = Callable[[List[Tensor], float, Tensor], Tuple[float, Tensor]]


def _strong_wolfe(
    obj: ObjFn,
    x: List[Tensor],
    t: float,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> Tuple[float, Tensor, float, int]:
    """Line search along `d` from step `t` for a point meeting the strong Wolfe
    conditions (sufficient decrease `c1`, curvature `c2`): bracketing, then zoom by cubic
    interpolation. Returns (loss, flat gradient, step, evaluations)."""
    d_norm = _f(d.abs().max())
    f_new, g_new = obj(x, t, d)
    evals = 1
    gtd_new = _f(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    bracket: List[float] = []
    bracket_f: List[float] = []
    bracket_g: List[Tensor] = []
    bracket_gtd: List[float] = []
    # Phase 1: grow the step until an interval holding an acceptable point is found.
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(lo, hi))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = t_next
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = _f(g_new.dot(d))
        it += 1
    if it == max_ls:  # reached the evaluation budget without a bracket
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    # Phase 2: zoom into the bracket.
    stalled = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        top, bottom = max(bracket), min(bracket)
        margin = 0.1 * (top - bottom)
        # Keep the trial point away from the ends unless that made no progress before.
        if min(top - t, t - bottom) < margin:
            if stalled or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = obj(x, t, d)
        evals += 1
        gtd_new = _f(g_new.dot(d))
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new.clone(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = (
                    bracket[low],
                    bracket_f[low],
                    bracket_g[low],
                    bracket_gtd[low],
                )
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.clone(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """`torch.optim.LBFGS`: limited-memory BFGS with `history_size` curvature pairs, at
    most `max_iter` iterations and `max_eval` loss evaluations per `step(closure)`;
    stops early when the largest gradient entry is below `tolerance_grad` or the loss or
    the step change less than `tolerance_change`. `line_search_fn='strong_wolfe'`
    searches the step size; None takes fixed steps of `lr`. One parameter group only."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: Optional[int] = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: Optional[str] = None,
        *,
        maximize: bool = False,
    ) -> None:
        lr = float(lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
            maximize=maximize,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: List[Tensor] = self.param_groups[0]["params"]

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Parameter groups are refused after construction, as by torch's LBFGS."""
        if getattr(self, "_params", None) is not None:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _flat_grad(self) -> Tensor:
        views = [p.grad.reshape(-1) if p.grad is not None else _core.zeros(p.numel(), dtype=p.dtype) for p in self._params]
        flat = _core.cat(views, 0)
        return flat.neg() if self.param_groups[0]["maximize"] else flat

    def _add_grad(self, step: float, update: Tensor) -> None:
        """`p += step * update[slice of p]` for each parameter, in place."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(update[offset : offset + n].view_as(p) * step)
            offset += n

    def _evaluate(self, closure: Callable[[], Any], x: List[Tensor], t: float, d: Tensor) -> Tuple[float, Tensor]:
        """Loss and flat gradient at `x + t * d`; the parameters are restored to `x` after."""
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        if self.param_groups[0]["maximize"]:
            loss = -loss
        g = self._flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, g

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        """Run up to `max_iter` L-BFGS iterations; `closure` must zero the gradients,
        compute the loss, call `backward()` and return the loss. Returns the first loss."""
        if closure is None:
            raise TypeError("LBFGS.step() requires a closure that re-evaluates the model and returns the loss")
        self._opt_called = True
        with no_grad():
            return self._step(closure)

    def _step(self, closure: Callable[[], Any]) -> Any:
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history, line_search, maximize = group["history_size"], group["line_search_fn"], group["maximize"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = -float(orig_loss) if maximize else float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if _f(g.abs().max()) <= tol_grad:
            return orig_loss
        d: Optional[Tensor] = state.get("d")
        t: float = state.get("t", lr)
        old_dirs: List[Tensor] = state.get("old_dirs", [])
        old_stps: List[Tensor] = state.get("old_stps", [])
        ro: List[float] = state.get("ro", [])
        h_diag: float = state.get("H_diag", 1.0)
        prev_g: Optional[Tensor] = state.get("prev_flat_grad")
        prev_loss: Optional[float] = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1 or d is None or prev_g is None:
                d = g.neg()
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                # Curvature pair of the last step; skipped when not positive enough.
                y = g.sub(prev_g)
                s = d.mul(t)
                ys = _f(y.dot(s))
                if ys > 1e-10:
                    if len(old_dirs) == history:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _f(y.dot(y))
                # Two-loop recursion: d = -H g with the implicit inverse Hessian.
                al = [0.0] * len(old_dirs)
                q = g.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = _f(old_stps[i].dot(q)) * ro[i]
                    q.sub_(old_dirs[i] * al[i])
                r = q.mul(h_diag)
                for i in range(len(old_dirs)):
                    be = _f(old_dirs[i].dot(r)) * ro[i]
                    r.add_(old_stps[i] * (al[i] - be))
                d = r
            prev_g = g.clone()
            prev_loss = loss
            t = min(1.0, 1.0 / _f(g.abs().sum())) * lr if state["n_iter"] == 1 else lr
            gtd = _f(g.dot(d))
            if gtd > -tol_change:  # not a descent direction
                break
            ls_evals = 0
            if line_search is not None:
                x0 = [p.clone() for p in self._params]
                dd = d

                def obj(x: List[Tensor], step: float, direction: Tensor) -> Tuple[float, Tensor]:
                    return self._evaluate(closure, x, step, direction)

                loss, g, t, ls_evals = _strong_wolfe(obj, x0, t, dd, loss, g, gtd, max_ls=max_eval - evals)
                self._add_grad(t, d)
                converged = _f(g.abs().max()) <= tol_grad
            else:
                self._add_grad(t, d)
                converged = False
                if n_iter != max_iter:
                    # Re-evaluate at the new point (not needed after the last iteration).
                    with enable_grad():
                        loss = float(closure())
                    loss = -loss if maximize else loss
                    g = self._flat_grad()
                    converged = _f(g.abs().max()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if _f(d.mul(t).abs().max()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag, prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss
