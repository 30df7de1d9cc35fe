"""Autograd cases written once against the PyTorch API, run by
`tools/make_autograd_fixtures.py` on torch (writing the expected results) and by
`tests/test_autograd_engine.py` on candle_py. Nothing here imports torch: each case
takes the library module (`torch` or `candle_py`) and tensors made from the stored
inputs (float64; names starting with `x` or `w` require grad).

Each case returns named result tensors: first and second derivatives (through
`create_graph=True`), gradients after hooks, custom Functions' gradients, ...
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

Case = Callable[[Any, dict[str, Any]], dict[str, Any]]
CASES: dict[str, tuple[dict[str, tuple[int, ...]], Case]] = {}


def case(**shapes: tuple[int, ...]) -> Callable[[Case], Case]:
    def reg(fn: Case) -> Case:
        CASES[fn.__name__] = (shapes, fn)
        return fn

    return reg


def inputs(name: str) -> dict[str, np.ndarray]:
    """The case's inputs: fixed pseudo-random float64 arrays (the fixture stores them too)."""
    shapes = CASES[name][0]
    rng = np.random.default_rng(sum(map(ord, name)))
    return {k: rng.standard_normal(s) * (0.5 if k.startswith("w") else 1.0) for k, s in shapes.items()}


def _double(lib: Any, f: Callable[..., Any], xs: list[Any], ps: list[Any], u_seed: int = 0) -> dict[str, Any]:
    """First derivatives of a weighted sum of `f(*xs, *ps)` w.r.t. `xs` (recorded),
    then the gradients of a weighted sum of those w.r.t. `xs` and `ps`."""
    y = f(*xs, *ps)
    w = lib.cos(lib.arange(y.numel(), dtype=lib.float64).reshape(y.shape) * 0.37 + u_seed)
    gs = lib.autograd.grad((y * w).sum(), xs, create_graph=True)
    z = sum(((g * lib.sin(lib.arange(g.numel(), dtype=lib.float64).reshape(g.shape) * 0.53 + 1.0)).sum() for g in gs))
    z.backward()
    out = {"y": y.detach()}
    for i, g in enumerate(gs):
        out[f"g{i}"] = g.detach()
    for i, x in enumerate(xs + ps):
        out[f"gg{i}"] = x.grad if x.grad is not None else lib.zeros_like(x)
    return out


# -- double backward through each op family -----------------------------------------


@case(x=(3, 4), x2=(3, 4))
def dd_elementwise(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    def f(a: Any, b: Any) -> Any:
        return a.exp() * b.tanh() + (a * b).sigmoid() / (b.exp() + 1.0) - a.sin() * b.cos() + (a**2).sqrt() * b.pow(3)

    return _double(lib, f, [t["x"], t["x2"]], [])


@case(x=(3, 5), w=(4, 5), wb=(4,), w2=(2, 4))
def dd_linear_matmul(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    return _double(lib, lambda x, w, b, w2: F.linear(F.linear(x, w, b).tanh(), w2) @ w2, [t["x"]], [t["w"], t["wb"], t["w2"]])


@case(x=(2, 3, 4))
def dd_reductions(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    def f(a: Any) -> Any:
        return (a * a).sum(dim=1) + a.mean(dim=(0, 2), keepdim=True).exp().sum() + a.max(dim=2).values.pow(2).sum() + a.var(dim=1).sum()

    return _double(lib, f, [t["x"]], [])


@case(x=(3, 6))
def dd_softmax(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    return _double(lib, lambda a: F.softmax(a, dim=1) * F.log_softmax(a * 1.3, dim=-1), [t["x"]], [])


@case(x=(4, 6), w=(6,), wb=(6,))
def dd_layer_norm(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    return _double(lib, lambda a, w, b: F.layer_norm(a, (6,), w, b, 1e-5).pow(2), [t["x"]], [t["w"], t["wb"]])


@case(x=(3, 7))
def dd_activations(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional

    def f(a: Any) -> Any:
        return (
            F.relu(a) * a
            + F.gelu(a)
            + F.gelu(a, approximate="tanh")
            + F.silu(a)
            + F.elu(a, 0.7)
            + F.softplus(a, beta=2.0)
            + F.leaky_relu(a, 0.1) * a
            + F.mish(a)
            + F.hardswish(a)
        )

    return _double(lib, f, [t["x"]], [])


@case(x=(5, 4))
def dd_cross_entropy(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    target = lib.tensor([0, 3, 1, 2, 3])
    return _double(
        lib, lambda a: F.cross_entropy(a, target, label_smoothing=0.1) + F.cross_entropy(a * 2.0, target, reduction="sum"), [t["x"]], []
    )


@case(x=(2, 2, 5, 4), x2=(2, 2, 6, 4), x3=(2, 2, 6, 3))
def dd_sdpa(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    return _double(lib, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [t["x"], t["x2"], t["x3"]], [])


@case(x=(2, 3, 7, 6), w=(4, 3, 3, 3), wb=(4,), w2=(2, 2, 2, 1))
def dd_conv_pool(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional

    def f(x: Any, w: Any, b: Any, w2: Any) -> Any:
        h = F.conv2d(x, w, b, padding=1)
        h = F.max_pool2d(F.leaky_relu(h, 0.2), 2, ceil_mode=True)
        h = F.conv2d(h, w2, stride=(1, 2), groups=2, dilation=(1, 1))
        return F.avg_pool2d(h.tanh(), (2, 1), stride=1, padding=(1, 0), count_include_pad=False)

    return _double(lib, f, [t["x"]], [t["w"], t["wb"], t["w2"]])


@case(x=(3, 2, 9), w=(4, 2, 3))
def dd_conv1d(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    return _double(lib, lambda x, w: F.avg_pool1d(F.conv1d(x, w, stride=2, padding=2, dilation=2).sigmoid(), 2), [t["x"]], [t["w"]])


def _recurrent(lib: Any, t: dict[str, Any], kind: str, **kw: Any) -> dict[str, Any]:
    """A two-layer recurrent module (weights from `t`, in its parameter order) under
    double backward: the input's gradient recorded, then differentiated again."""
    m = getattr(lib.nn, kind)(3, 4, num_layers=2, dtype=lib.float64, **kw)
    ps = list(m.parameters())
    with lib.no_grad():
        for i, p in enumerate(ps):
            p.copy_(t[f"w{i}"])
    return _double(lib, lambda x, *_: m(x)[0], [t["x"]], ps)


_RNN_WEIGHTS = {f"w{i}": s for i, s in enumerate([(16, 3), (16, 4), (16,), (16,), (16, 4), (16, 4), (16,), (16,)])}
# Bidirectional: layer 0 forward then reverse, then layer 1 (input 2 * hidden) likewise.
_GRU_LAYER = [(12, 3), (12, 4), (12,), (12,)] * 2 + [(12, 8), (12, 4), (12,), (12,)] * 2
_GRU_WEIGHTS = {f"w{i}": s for i, s in enumerate(_GRU_LAYER)}


@case(x=(5, 2, 3), **_RNN_WEIGHTS)
def dd_lstm(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    return _recurrent(lib, t, "LSTM")


@case(x=(5, 2, 3), **_GRU_WEIGHTS)
def dd_gru_bidirectional(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    return _recurrent(lib, t, "GRU", bidirectional=True)


# -- the two worked examples --------------------------------------------------


@case(x=(4, 3, 8, 8), w=(6, 3, 3, 3), wb=(6,), w2=(1, 6 * 4 * 4))
def gradient_penalty(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    """WGAN-GP: the critic's input gradient norm penalised, backpropagated to the weights."""
    F = lib.nn.functional
    x, w, b, w2 = t["x"], t["w"], t["wb"], t["w2"]
    h = F.max_pool2d(F.leaky_relu(F.conv2d(x, w, b, padding=1), 0.2), 2)
    score = F.linear(h.flatten(1), w2)
    (g,) = lib.autograd.grad(score.sum(), x, create_graph=True)
    gp = ((g.flatten(1).norm(2, dim=1) - 1.0) ** 2).mean()
    gp.backward()

    # x and b reach gp only through piecewise-constant masks: torch's grads are zeros
    # there, and an engine may leave them None.
    def z(p: Any) -> Any:
        return p.grad if p.grad is not None else lib.zeros_like(p)

    return {"gp": gp.detach(), "grad_w": w.grad, "grad_b": z(b), "grad_w2": w2.grad, "grad_x": z(x)}


@case(x=(5, 4), w=(8, 4), wb=(8,), w2=(3, 8), x2=(3, 8), x3=(3,))
def mlp_hvp(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    """Hessian-vector product of an MLP's loss with respect to its weights."""
    F = lib.nn.functional
    x, w, b, w2, vw, vb = t["x"], t["w"], t["wb"], t["w2"], t["x2"], t["x3"]
    del vb
    target = lib.tensor([0, 2, 1, 1, 0])
    loss = F.cross_entropy(F.linear(F.gelu(F.linear(x, w, b)), w2), target)
    gw, gb, gw2 = lib.autograd.grad(loss, [w, b, w2], create_graph=True)
    hv = lib.autograd.grad((gw2 * vw.detach()).sum(), [w, b, w2])
    return {"loss": loss.detach(), "gw2": gw2.detach(), "hv_w": hv[0], "hv_b": hv[1], "hv_w2": hv[2]}


# -- hooks, retain_grad, custom Functions ----------------------------------------------


@case(x=(3, 4), w=(4, 2))
def hooks(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    x, w = t["x"], t["w"]
    h = x @ w
    h.retain_grad()
    h.register_hook(lambda g: g * 3.0)
    y = (h.tanh() * h).sum()
    x.register_hook(lambda g: g + 1.0)
    y.backward()
    return {"h_grad": h.grad, "x_grad": x.grad, "w_grad": w.grad}


@case(x=(3, 4))
def custom_function(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, k: float) -> Any:
            ctx.save_for_backward(a)
            ctx.k = k
            return a**3 * k, a.sum()

        @staticmethod
        def backward(ctx: Any, g: Any, gs: Any) -> Any:
            (a,) = ctx.saved_tensors
            return 3 * a**2 * ctx.k * g + gs, None

    x = t["x"]
    y, s = Cube.apply(x, 2.0)
    (g,) = lib.autograd.grad((y * y).sum() + s * 2.0, x, create_graph=True)
    g.sum().backward()
    return {"y": y.detach(), "g": g.detach(), "gg": x.grad}


@case(x=(3, 4), w=(2, 4))
def module_backward_hooks(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    class Lin(lib.nn.Module):
        def __init__(self, w: Any) -> None:
            super().__init__()
            self.w = w

        def forward(self, a: Any) -> Any:
            return lib.nn.functional.linear(a, self.w).tanh()

    seen: dict[str, Any] = {}
    m = Lin(t["w"])

    def pre(mod: Any, grad_output: Any) -> Any:
        seen["pre_grad_output"] = grad_output[0].detach()
        return (grad_output[0] * 2.0,)

    def full(mod: Any, grad_input: Any, grad_output: Any) -> Any:
        seen["grad_input"] = grad_input[0].detach()
        seen["grad_output"] = grad_output[0].detach()
        return (grad_input[0] + 1.0,)

    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(full)
    x = t["x"]
    y = m(x)
    (y * y).sum().backward()
    seen.update(x_grad=x.grad, w_grad=t["w"].grad)
    return seen


@case(x=(2, 4, 3, 3), w=(4,), wb=(4,), w2=(3,))
def dd_group_rms_norm(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional

    def f(x: Any, w: Any, b: Any, w2: Any) -> Any:
        return F.rms_norm(F.group_norm(x, 2, w, b, 1e-5).tanh(), (3,), w2, 1e-6).pow(2)

    return _double(lib, f, [t["x"]], [t["w"], t["wb"], t["w2"]])


@case(x=(3, 4), x2=(3, 4))
def dd_indexing(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    idx = lib.tensor([[0, 2, 1], [3, 3, 0], [1, 0, 2]])
    dst = lib.tensor([[2, 0], [1, 1], [0, 2]])

    def f(a: Any, b: Any) -> Any:
        g = a.gather(1, idx) * b.gather(1, idx).exp()
        s = (a * 0.5).scatter_add(0, dst, b[:, :2].sin()) + b.scatter(0, dst, a[:, 1:3] ** 2)
        fl = a.flip(0, 1) * b.tanh()
        rp = a.repeat(2, 1, 2)[:, :3, :5] * 0.3
        cs = (a * b).cumsum(1) + a.cumsum(0).pow(2)
        return g.sum(1) + s.sum(1)[:3] + fl.sum(1) + rp.sum((0, 2)) + cs.sum(1)

    return _double(lib, f, [t["x"], t["x2"]], [])


@case(x=(3, 4))
def dd_prod(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    zero_one = lib.tensor([[1.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]], dtype=lib.float64)

    def f(a: Any) -> Any:
        z = a * zero_one + (1.0 - zero_one) * 0.0
        return z.prod(1) + a.prod(0).sum() + (a * 0.7).prod() + z.prod(dim=0, keepdim=True).sum()

    return _double(lib, f, [t["x"]], [])


@case(x=(3, 4))
def dd_extrema(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    def f(a: Any) -> Any:
        tied = lib.cat([a, a[:, :1]], dim=1)  # ties with the first column
        m = tied.max() * tied.min(dim=1).values.sum() + tied.amax(dim=1).pow(2).sum() + tied.amin(dim=0).sum()
        return m * a.max(dim=0, keepdim=True).values.sum() + lib.maximum(a, a.flip(0)).sum() + lib.minimum(a, a * 0.5).pow(2).sum()

    return _double(lib, f, [t["x"]], [])


@case(x=(3, 5), x2=(3, 5))
def dd_pointwise_more(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional

    def f(a: Any, b: Any) -> Any:
        base = a.abs() + 0.5
        return (
            a.erf() * b
            + (a * 3.1).frac() * b.sin()
            + (a * 2).floor() * b
            + a.abs() * b.exp()
            + F.logsigmoid(a * b)
            + base.pow(b) * 0.5
            + lib.remainder(a * 4.0, b.abs() + 0.7)
            + lib.floor_divide(a * 4.0, b.abs() + 0.7).detach() * a
        )

    return _double(lib, f, [t["x"], t["x2"]], [])


@case(x=(4, 5), x2=(4, 5))
def dd_soft_target_cross_entropy(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    F = lib.nn.functional
    w = lib.tensor([0.5, 1.0, 2.0, 1.5, 0.25], dtype=lib.float64)

    def f(a: Any, b: Any) -> Any:
        p = F.softmax(b, dim=1)
        return F.cross_entropy(a, p, weight=w, label_smoothing=0.1) + F.cross_entropy(a * 0.5, p, reduction="none").sum()

    return _double(lib, f, [t["x"], t["x2"]], [])


@case(x=(3, 4), x2=(2, 3, 4))
def inplace_views(lib: Any, t: dict[str, Any]) -> dict[str, Any]:
    """In-place writes through strided views (t, view, narrow, transpose, indexing,
    flatten) of non-leaf tensors reach the base; views follow writes into the base."""
    a, b = t["x"], t["x2"]
    y = a * 2
    y.t()[0].mul_(3)
    y.view(12)[2:5].add_(a.view(12)[:3] ** 2)
    y.narrow(1, 1, 2).mul_(a[:, :2].exp())
    z = b * 1.5
    q = z.transpose(0, 1)
    q[1].add_(b[:, 0] * b[:, 2])
    s = z.permute(2, 0, 1)
    z.mul_(z.detach().sign() + 2.0)
    f = z.unsqueeze(0).squeeze(0).flatten()
    f[3:9].mul_(0.5)
    loss = (y * y).sum() + (s * s.cos()).sum() + (q * 0.3).sum()
    loss.backward()
    return {"y": y.detach(), "z": z.detach(), "s": s.detach(), "ga": a.grad, "gb": b.grad}
