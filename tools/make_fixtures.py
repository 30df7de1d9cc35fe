"""Make the PyTorch reference fixtures the tests compare against.

Needs torch (`pip install torch`); the tests never import it. Each case writes
tests/fixtures/nn/<case>.safetensors with:
  input (and input2 / target), output, loss_weight, state.<key> (the state_dict
  before the forward), state_after.<key> (after it, e.g. BatchNorm running
  stats), grad.input, grad.<param> for loss = (output * loss_weight).sum(),
and metadata {"layer", "args", "kwargs" (JSON), "train", "kind"}.

Run from the repository root:  python tools/make_fixtures.py [CASE ...]
(with case names, only those layer / edge cases are written).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "nn")

# (case name, layer class, args, kwargs, input shape, train mode)
LAYERS: list[tuple[str, str, list[Any], dict[str, Any], tuple[int, ...], bool]] = [
    ("linear_basic", "Linear", [5, 3], {}, (4, 5), True),
    ("linear_nobias_3d", "Linear", [7, 2], {"bias": False}, (2, 3, 7), True),
    ("linear_batch1", "Linear", [1, 1], {}, (1, 1), True),
    ("bilinear", "Bilinear", [3, 4, 2], {}, (5, 3), True),
    ("relu", "ReLU", [], {}, (3, 7), True),
    ("relu6", "ReLU6", [], {}, (3, 7), True),
    ("leaky_relu", "LeakyReLU", [0.2], {}, (3, 7), True),
    ("prelu_1", "PReLU", [], {}, (3, 7), True),
    ("prelu_channels", "PReLU", [4], {"init": 0.1}, (2, 4, 5), True),
    ("rrelu_eval", "RReLU", [0.1, 0.3], {}, (3, 7), False),
    ("elu", "ELU", [], {"alpha": 0.7}, (3, 7), True),
    ("selu", "SELU", [], {}, (3, 7), True),
    ("celu", "CELU", [], {"alpha": 1.5}, (3, 7), True),
    ("gelu", "GELU", [], {}, (3, 7), True),
    ("gelu_tanh", "GELU", [], {"approximate": "tanh"}, (3, 7), True),
    ("silu", "SiLU", [], {}, (3, 7), True),
    ("mish", "Mish", [], {}, (3, 7), True),
    ("sigmoid", "Sigmoid", [], {}, (3, 7), True),
    ("tanh", "Tanh", [], {}, (3, 7), True),
    ("hardtanh", "Hardtanh", [-0.5, 0.8], {}, (3, 7), True),
    ("hardsigmoid", "Hardsigmoid", [], {}, (3, 7), True),
    ("hardswish", "Hardswish", [], {}, (3, 7), True),
    ("softplus", "Softplus", [], {"beta": 2.0, "threshold": 3.0}, (3, 7), True),
    ("softmax", "Softmax", [], {"dim": 1}, (3, 7), True),
    ("softmax_dim0", "Softmax", [0], {}, (3, 4, 2), True),
    ("log_softmax", "LogSoftmax", [], {"dim": -1}, (3, 7), True),
    ("flatten", "Flatten", [], {}, (2, 3, 4), True),
    ("unflatten", "Unflatten", [1, [2, 3]], {}, (4, 6), True),
    ("dropout_eval", "Dropout", [0.3], {}, (4, 5), False),
    ("identity", "Identity", [], {}, (4, 5), True),
    ("layer_norm", "LayerNorm", [6], {}, (3, 6), True),
    ("layer_norm_2d_eps", "LayerNorm", [[4, 5]], {"eps": 1e-3}, (2, 3, 4, 5), True),
    ("layer_norm_noaffine", "LayerNorm", [6], {"elementwise_affine": False}, (3, 6), True),
    ("rms_norm", "RMSNorm", [6], {}, (3, 6), True),
    ("group_norm", "GroupNorm", [2, 6], {}, (3, 6, 5), True),
    ("batch_norm1d_train", "BatchNorm1d", [4], {}, (8, 4), True),
    ("batch_norm1d_3d_train", "BatchNorm1d", [3], {"momentum": 0.3}, (4, 3, 5), True),
    ("batch_norm1d_eval", "BatchNorm1d", [4], {}, (8, 4), False),
    ("batch_norm2d_train", "BatchNorm2d", [3], {}, (2, 3, 4, 5), True),
    ("batch_norm2d_eval", "BatchNorm2d", [3], {"eps": 1e-3}, (2, 3, 4, 5), False),
    ("batch_norm3d_train", "BatchNorm3d", [2], {"affine": False}, (2, 2, 3, 4, 3), True),
    ("upsample_nearest2d", "Upsample", [], {"scale_factor": 2, "mode": "nearest"}, (2, 3, 4, 5), True),
    ("upsample_nearest1d_size", "Upsample", [], {"size": 7, "mode": "nearest"}, (2, 3, 4), True),
    # f32 rows over several vectors with a tail, and tasks of more rows than the
    # partial weight-gradient sums fold (src/layers/norm/f32_lanes.rs).
    ("layer_norm_rows_tail", "LayerNorm", [100], {}, (3, 40, 100), True),
    ("layer_norm_many_rows", "LayerNorm", [20], {}, (600, 20), True),
    ("group_norm_long", "GroupNorm", [4, 8], {}, (2, 8, 9, 11), True),
    ("upsample_bilinear", "Upsample", [], {"scale_factor": 2, "mode": "bilinear"}, (1, 2, 3, 4), True),
    ("upsample_bilinear_align", "Upsample", [], {"size": [5, 7], "mode": "bilinear", "align_corners": True}, (1, 2, 3, 4), True),
    ("upsample_linear_frac", "Upsample", [], {"scale_factor": 1.5, "mode": "linear"}, (2, 2, 5), True),
    ("upsample_trilinear", "Upsample", [], {"scale_factor": 2, "mode": "trilinear"}, (1, 1, 2, 3, 2), True),
    ("logsigmoid", "LogSigmoid", [], {}, (3, 7), True),
]

# Elementwise functions on the values where their formulas break down (overflow, the
# cut-offs of fast approximations, signed zeros, inf, NaN), in float32 and float64:
# (case name, torch.nn.functional function, keyword arguments)
EDGES: list[tuple[str, str, dict[str, Any]]] = [
    ("logsigmoid_edges", "logsigmoid", {}),
    ("silu_edges", "silu", {}),
    ("mish_edges", "mish", {}),
    ("hardsigmoid_edges", "hardsigmoid", {}),
    ("hardswish_edges", "hardswish", {}),
    ("elu_edges", "elu", {"alpha": 1.3}),
    ("selu_edges", "selu", {}),
    ("celu_edges", "celu", {"alpha": 0.7}),
    ("softplus_edges", "softplus", {"beta": 2.0, "threshold": 15.0}),
    ("leaky_relu_edges", "leaky_relu", {"negative_slope": 0.2}),
    ("gelu_tanh_edges", "gelu", {"approximate": "tanh"}),
]
EDGE_VALUES = [-float("inf"), -1e30, -1e4, -104.0, -88.5, -87.0, -30.0, -17.0, -1.0, -1e-8, -0.0, 0.0, 1e-8, 0.5, 1.0,
               17.0, 30.0, 87.0, 88.5, 104.0, 1e4, 1e30, float("inf"), float("nan")]  # fmt: skip

# (case name, class, args, kwargs, input shapes / call, train)
SEQUENCE: list[tuple[str, str, list[Any], dict[str, Any], tuple[int, ...]]] = [
    ("lstm_basic", "LSTM", [4, 5], {}, (6, 3, 4)),
    ("lstm_2layer_bidir_batch_first", "LSTM", [3, 4], {"num_layers": 2, "bidirectional": True, "batch_first": True}, (2, 5, 3)),
    ("lstm_nobias_unbatched", "LSTM", [3, 2], {"bias": False}, (4, 3)),
    ("gru_basic", "GRU", [4, 5], {}, (6, 3, 4)),
    ("gru_2layer_bidir", "GRU", [3, 4], {"num_layers": 2, "bidirectional": True}, (5, 2, 3)),
    ("mha_self", "MultiheadAttention", [8, 2], {}, (5, 3, 8)),
    ("mha_batch_first_nobias", "MultiheadAttention", [8, 4], {"batch_first": True, "bias": False}, (3, 5, 8)),
    ("mha_kdim_vdim", "MultiheadAttention", [8, 2], {"kdim": 6, "vdim": 4}, (5, 2, 8)),
    ("mha_bias_kv_zero_attn", "MultiheadAttention", [8, 2], {"add_bias_kv": True, "add_zero_attn": True}, (4, 2, 8)),
]

# (case name, loss class, kwargs, input shape, target kind)
LOSSES: list[tuple[str, str, dict[str, Any], tuple[int, ...], str]] = [
    ("mse", "MSELoss", {}, (4, 3), "same"),
    ("mse_sum", "MSELoss", {"reduction": "sum"}, (4, 3), "same"),
    ("l1", "L1Loss", {}, (4, 3), "same"),
    ("smooth_l1", "SmoothL1Loss", {"beta": 0.5}, (4, 3), "same"),
    ("cross_entropy", "CrossEntropyLoss", {}, (5, 4), "class"),
    ("cross_entropy_weight_ignore", "CrossEntropyLoss", {"weight": [1.0, 2.0, 0.5, 1.5], "ignore_index": 2}, (6, 4), "class"),
    ("cross_entropy_smoothing", "CrossEntropyLoss", {"label_smoothing": 0.1}, (5, 4), "class"),
    ("cross_entropy_smoothing_weight", "CrossEntropyLoss", {"label_smoothing": 0.2, "weight": [1.0, 2.0, 0.5, 1.5]}, (5, 4), "class"),
    ("cross_entropy_probs", "CrossEntropyLoss", {}, (5, 4), "probs"),
    ("cross_entropy_spatial_none", "CrossEntropyLoss", {"reduction": "none"}, (2, 4, 3), "class"),
    ("nll", "NLLLoss", {}, (5, 4), "class_logp"),
    ("bce", "BCELoss", {}, (4, 3), "prob"),
    ("bce_with_logits", "BCEWithLogitsLoss", {}, (4, 3), "prob"),
    ("bce_with_logits_pos_weight", "BCEWithLogitsLoss", {"pos_weight": [1.0, 2.0, 3.0]}, (4, 3), "prob"),
    ("kl_div", "KLDivLoss", {"reduction": "batchmean"}, (4, 3), "kl"),
    # NLL's fused op (layers/nll.rs): weights with an ignored row, per-position "none"
    # over (N, C, d), and a batch wide enough that its backward splits over threads.
    ("nll_weight_ignore", "NLLLoss", {"weight": [1.0, 2.0, 0.5, 1.5], "ignore_index": 2}, (6, 4), "class_logp"),
    ("nll_spatial_none", "NLLLoss", {"reduction": "none"}, (2, 4, 3), "class_logp"),
    ("nll_sum_wide", "NLLLoss", {"reduction": "sum"}, (24, 700), "class_logp"),
]


def _save(name: str, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> None:
    path = os.path.join(OUT, name + ".safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, path, metadata=meta)


def make_layers(only: Optional[set[str]] = None) -> None:
    for i, (name, layer, args, kwargs, shape, train) in enumerate(LAYERS):
        if only is not None and name not in only:
            continue
        torch.manual_seed(1000 + i)
        m = getattr(torch.nn, layer)(*args, **kwargs)
        if layer == "PReLU":
            with torch.no_grad():
                m.weight.uniform_(-0.5, 0.5)
        if layer.startswith(("LayerNorm", "GroupNorm", "BatchNorm", "RMSNorm")):
            with torch.no_grad():
                for p in m.parameters():
                    p.uniform_(0.5, 1.5)
        if layer.startswith("BatchNorm") and not train:
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
        m.train(train)
        state = {"state." + k: v.clone() for k, v in m.state_dict().items()}
        x = torch.randn(*shape, requires_grad=True)
        extra: dict[str, torch.Tensor] = {}
        if layer == "Bilinear":
            x2 = torch.randn(shape[0], args[1], requires_grad=True)
            y = m(x, x2)
            extra["input2"] = x2
        else:
            y = m(x)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        tensors = {"input": x, "output": y, "loss_weight": w, **state, **extra}
        tensors.update({"state_after." + k: v for k, v in m.state_dict().items()})
        if x.grad is not None:
            tensors["grad.input"] = x.grad
        if layer == "Bilinear":
            tensors["grad.input2"] = extra["input2"].grad
        for k, p in m.named_parameters():
            if p.grad is not None:
                tensors["grad." + k] = p.grad
        _save(
            name,
            tensors,
            {"kind": "layer", "layer": layer, "args": json.dumps(args), "kwargs": json.dumps(kwargs), "train": str(int(train))},
        )


def make_edges(only: Optional[set[str]] = None) -> None:
    """`EDGES`: input, output and the gradient of `output.sum()`, per float dtype
    (keys `input.float32`, `output.float32`, `grad.input.float32`, ...)."""
    for name, fn, kwargs in EDGES:
        if only is not None and name not in only:
            continue
        tensors: dict[str, torch.Tensor] = {}
        for dt in (torch.float32, torch.float64):
            x = torch.tensor(EDGE_VALUES, dtype=dt, requires_grad=True)
            y = getattr(torch.nn.functional, fn)(x, **kwargs)
            y.sum().backward()
            key = str(dt).split(".")[-1]
            tensors.update({f"input.{key}": x, f"output.{key}": y, f"grad.input.{key}": x.grad})
        _save(name, tensors, {"kind": "edges", "layer": fn, "args": "[]", "kwargs": json.dumps(kwargs), "train": "1"})


def make_sequence() -> None:
    """Recurrent layers and attention: outputs (and hidden states), gradients."""
    for i, (name, cls, args, kwargs, shape) in enumerate(SEQUENCE):
        torch.manual_seed(3000 + i)
        m = getattr(torch.nn, cls)(*args, **kwargs)
        if cls == "MultiheadAttention":
            with torch.no_grad():
                for p in m.parameters():
                    p.uniform_(-0.3, 0.3)
        state = {"state." + k: v.clone() for k, v in m.state_dict().items()}
        x = torch.randn(*shape, requires_grad=True)
        tensors: dict[str, torch.Tensor] = {"input": x}
        if cls == "MultiheadAttention":
            bf = kwargs.get("batch_first", False)
            L, B = (shape[1], shape[0]) if bf else (shape[0], shape[1])
            S = L + 2
            kshape = (B, S, kwargs.get("kdim", args[0])) if bf else (S, B, kwargs.get("kdim", args[0]))
            vshape = (B, S, kwargs.get("vdim", args[0])) if bf else (S, B, kwargs.get("vdim", args[0]))
            k = torch.randn(*kshape, requires_grad=True)
            v = torch.randn(*vshape, requires_grad=True)
            kpm = torch.zeros(B, S, dtype=torch.bool)
            kpm[0, -1] = True
            am = torch.randn(L, S) * 0.5
            y, w = m(x, k, v, key_padding_mask=kpm, attn_mask=am)
            ww = torch.randn_like(w)
            tensors.update({"key": k, "value": v, "key_padding_mask": kpm, "attn_mask": am, "weights": w, "weights_loss_weight": ww})
            extra_loss = (w * ww).sum()
        else:
            y, hid = m(x)
            h = hid[0] if isinstance(hid, tuple) else hid
            hw = torch.randn_like(h)
            tensors.update({"h_n": h, "h_loss_weight": hw})
            if isinstance(hid, tuple):
                tensors["c_n"] = hid[1]
            extra_loss = (h * hw).sum()
        lw = torch.randn_like(y)
        ((y * lw).sum() + extra_loss).backward()
        tensors.update({"output": y, "loss_weight": lw, "grad.input": x.grad, **state})
        if cls == "MultiheadAttention":
            tensors["grad.key"] = tensors["key"].grad
            tensors["grad.value"] = tensors["value"].grad
        for k2, p in m.named_parameters():
            if p.grad is not None:
                tensors["grad." + k2] = p.grad
        _save(name, tensors, {"kind": "sequence", "layer": cls, "args": json.dumps(args), "kwargs": json.dumps(kwargs), "train": "1"})


def make_losses(only: set[str] | None = None) -> None:
    for i, (name, cls, kwargs, shape, target) in enumerate(LOSSES):
        if only is not None and name not in only:
            continue
        torch.manual_seed(2000 + i)
        kw = {k: (torch.tensor(v) if isinstance(v, list) else v) for k, v in kwargs.items()}
        loss_fn = getattr(torch.nn, cls)(**kw)
        x = torch.randn(*shape)
        if target == "same":
            t = torch.randn(*shape)
        elif target == "class":
            t = torch.randint(0, shape[1], (shape[0], *shape[2:]))
            if "ignore_index" in kwargs:
                t[0] = kwargs["ignore_index"]
        elif target == "class_logp":
            x = x.log_softmax(1)
            t = torch.randint(0, shape[1], (shape[0], *shape[2:]))
            if "ignore_index" in kwargs:
                t[0] = kwargs["ignore_index"]
        elif target == "probs":
            t = torch.randn(*shape).softmax(1)
        elif target == "prob":
            if cls == "BCELoss":
                x = x.sigmoid()
            t = torch.rand(*shape)
        elif target == "kl":
            x = x.log_softmax(1)
            t = torch.randn(*shape).softmax(1)
        else:
            raise ValueError(target)
        x = x.detach().requires_grad_(True)
        y = loss_fn(x, t)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        _save(
            name,
            {"input": x, "target": t, "output": y, "loss_weight": w, "grad.input": x.grad},
            {"kind": "loss", "layer": cls, "args": "[]", "kwargs": json.dumps(kwargs), "train": "1"},
        )


def make_extra_ops() -> None:
    """prod, Snake1d and weight-normed layers (issue: extra ops)."""
    cases = [((2, 3, 4), None, False), ((2, 3, 4), 1, False), ((2, 3, 4), -1, True), ((5,), 0, False)]
    for i, (shape, dim, keep) in enumerate(cases):
        torch.manual_seed(4000 + i)
        x = torch.randn(*shape, dtype=torch.float64)
        x.view(-1)[1] = 0.0  # a zero: the gradient must still be exact
        x.requires_grad_(True)
        y = x.prod() if dim is None else x.prod(dim, keepdim=keep)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        _save(
            f"prod_{i}",
            {"input": x, "output": y, "loss_weight": w, "grad.input": x.grad},
            {"kind": "prod", "layer": "prod", "args": "[]", "kwargs": json.dumps({"dim": dim, "keepdim": keep}), "train": "1"},
        )
    for i, (n, c, length) in enumerate([(2, 3, 16), (1, 5, 7)]):
        torch.manual_seed(4100 + i)
        x = torch.sin(torch.linspace(0, 6.28, length)).repeat(n, c, 1) + 0.1 * torch.randn(n, c, length)
        x.requires_grad_(True)
        alpha = (torch.rand(1, c, 1) + 0.5).requires_grad_(True)
        y = x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        _save(
            f"snake_{i}",
            {"input": x, "state.alpha": alpha, "output": y, "loss_weight": w, "grad.input": x.grad, "grad.alpha": alpha.grad},
            {"kind": "snake", "layer": "Snake1d", "args": json.dumps([c]), "kwargs": "{}", "train": "1"},
        )
    layers = {
        "Linear": ([5, 3], {}, (4, 5)),
        "Conv1d": ([4, 6, 3], {"padding": 1}, (2, 4, 9)),
        "ConvTranspose1d": ([4, 3, 4], {"stride": 2}, (2, 4, 7)),
    }
    wn_cases = [
        ("Linear", "old", 0),
        ("Linear", "old", 1),
        ("Linear", "param", 0),
        ("Linear", "old", None),
        ("Conv1d", "old", 0),
        ("Conv1d", "param", 0),
        ("ConvTranspose1d", "old", 0),
        ("ConvTranspose1d", "param", 1),
    ]
    for i, (layer, style, dim) in enumerate(wn_cases):
        torch.manual_seed(4200 + i)
        args, kw, in_shape = layers[layer]
        lin = getattr(torch.nn, layer)(*args, **kw)
        if style == "old":
            m = torch.nn.utils.weight_norm(lin, dim=dim)
        else:
            m = torch.nn.utils.parametrizations.weight_norm(lin, dim=dim)
        x = torch.randn(*in_shape, requires_grad=True)
        y = m(x)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        tensors = {"input": x, "output": y, "loss_weight": w, "grad.input": x.grad}
        tensors.update({"state." + k: v for k, v in m.state_dict().items()})
        tensors.update({"grad." + k: p.grad for k, p in m.named_parameters()})
        tensors["plain_weight"] = m.weight.detach()
        _save(
            f"weight_norm_{layer.lower()}_{i}",
            tensors,
            {
                "kind": "weight_norm",
                "layer": layer,
                "args": json.dumps(args),
                "kwargs": json.dumps({"style": style, "dim": dim, "layer_kwargs": kw}),
                "train": "1",
            },
        )


class ParityNet(torch.nn.Module):
    """The conv net of examples/torch_parity.py, as a PyTorch user writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, stride=2),
            torch.nn.GELU(),
            torch.nn.AvgPool2d(2),
        )
        self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16 * 3 * 3, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def make_parity_model() -> None:
    """Weights saved with safetensors.torch.save_model (the article's way), plus an
    input and PyTorch's output for it, for examples/torch_parity.py."""
    from safetensors.torch import save_model

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "data")
    os.makedirs(path, exist_ok=True)
    torch.manual_seed(7)
    net = ParityNet()
    with torch.no_grad():  # non-trivial batch-norm statistics
        net.features[1].running_mean.uniform_(-0.2, 0.2)
        net.features[1].running_var.uniform_(0.5, 1.5)
    net.eval()
    save_model(net, os.path.join(path, "parity_convnet.safetensors"))
    x = torch.randn(2, 3, 28, 28)
    with torch.no_grad():
        y = net(x)
    save_file({"input": x, "output": y}, os.path.join(path, "parity_io.safetensors"))


# (case name, nn.Embedding keyword arguments): what the options do to the output, the
# weight (max_norm renormalizes it in place) and the weight's gradient.
EMBEDDINGS: list[tuple[str, dict[str, Any]]] = [
    ("embedding_padding_idx", {"padding_idx": 2}),
    ("embedding_max_norm", {"max_norm": 1.5}),
    ("embedding_max_norm_l1", {"max_norm": 2.0, "norm_type": 1.0}),
    ("embedding_scale_grad_by_freq", {"scale_grad_by_freq": True, "padding_idx": 0}),
]


def make_embeddings(only: Optional[set[str]] = None) -> None:
    for i, (name, kwargs) in enumerate(EMBEDDINGS):
        if only is not None and name not in only:
            continue
        torch.manual_seed(2000 + i)
        m = torch.nn.Embedding(7, 4, **kwargs)
        w0 = m.weight.detach().clone()
        idx = torch.tensor([[0, 2, 5, 2], [3, 5, 5, 0]])
        y = m(idx)
        g = torch.randn(y.shape)
        (y * g).sum().backward()
        meta = {"kind": "embedding", "layer": "Embedding", "args": "[7, 4]", "kwargs": json.dumps(kwargs), "train": "1"}
        tensors = {"weight.before": w0, "input": idx, "output": y, "grad.output": g, "weight.after": m.weight, "grad.weight": m.weight.grad}
        _save(name, tensors, meta)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    torch.set_default_dtype(torch.float32)
    if len(sys.argv) > 1:
        # Named cases only (e.g. a new layer's), leaving every other fixture as it is.
        only = set(sys.argv[1:])
        make_layers(only)
        make_edges(only)
        make_embeddings(only)
        make_losses(only)
        print(f"wrote the cases {sorted(only)} (where they exist) to {os.path.normpath(OUT)}")
        return
    make_layers()
    make_edges()
    make_embeddings()
    make_sequence()
    make_losses()
    make_extra_ops()
    try:
        sys.path.insert(0, os.path.dirname(__file__))
        import make_fixtures_conv  # type: ignore[import-not-found]

        make_fixtures_conv.main()
    except ImportError:
        print("tools/make_fixtures_conv.py not found: conv/pool fixtures skipped")
    make_parity_model()
    print(f"wrote {len(os.listdir(OUT))} fixture files to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
