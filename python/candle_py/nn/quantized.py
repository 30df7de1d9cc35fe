"""Quantized layers: `QuantizedLinear` and `QuantizedEmbedding` keep their weight as
a `QTensor` (GGML blocks, Candle's kernels), and `quantize(model, ...)` swaps a
model's `Linear` / `Embedding` layers for them in place (MLX's `nn.quantize`).

The weight is a `QTensor` attribute, not a Parameter: it has no gradient (inputs
and biases do). It is in `state_dict()` under PyTorch's key (`weight`), so a
quantized model's state dict round-trips through `cp.quantized.save_gguf` /
`load_gguf`; `load_state_dict` takes a QTensor for it (replacing the weight, its
dtype included) or a float tensor (quantized to the layer's dtype)."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Set, Union

from .. import _core
from .._core import QTensor, Tensor
from ..autograd import no_grad
from ..quantized import block_size
from ..quantized import quantize as _quantize_tensor
from . import init
from .linear import Embedding, Linear, NonDynamicallyQuantizableLinear
from .module import Module

__all__ = ["QuantizedLinear", "QuantizedEmbedding", "quantize"]


def _check_k(layer: str, what: str, k: int, dtype: str) -> None:
    bs = block_size(dtype)
    if k % bs:
        raise ValueError(f"[{layer}] {what}={k} must be a multiple of {dtype}'s block size {bs}")


class _QuantizedWeight(Module):
    """What both layers share: the QTensor weight in state dicts and device moves."""

    weight: QTensor

    def _move_extra(self, device: Any) -> None:
        self.weight = self.weight.to(device)

    def state_dict(self, *, destination: Optional[Dict[str, Any]] = None, prefix: str = "", keep_vars: bool = False) -> Dict[str, Any]:
        """`weight` (the QTensor itself: it is immutable) first, then the module's tensors."""
        if destination is None:
            destination = {}
        destination[prefix + "weight"] = self.weight
        return super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def _load_own(self, sd: Dict[str, Any], prefix: str, errors: List[str], found: Set[str], missing: List[str]) -> None:
        key = prefix + "weight"
        if key not in sd:
            missing.append(key)
        else:
            found.add(key)
            value = sd[key]
            if isinstance(value, Tensor) and value.dtype.is_floating_point:
                value = _quantize_tensor(value.detach(), self.weight.dtype)
            if not isinstance(value, QTensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected a QTensor or a float Tensor, got {type(value).__name__}.'
                )
            elif tuple(value.shape) != tuple(self.weight.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {list(value.shape)} from checkpoint, "
                    f"the shape in current model is {list(self.weight.shape)}."
                )
            else:
                self.weight = value.to(self.weight.device)
        super()._load_own(sd, prefix, errors, found, missing)


class QuantizedLinear(_QuantizedWeight):
    """`y = x @ W.T + b` with W (out_features, in_features) kept quantized (`dtype`,
    default "q4k"); `in_features` must be a multiple of the dtype's block size.
    The bias is an ordinary tensor (a buffer). Input float32/float16/bfloat16
    (float64 computes in float32); the output has the input's dtype."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: str = "q4k", device: Any = None) -> None:
        super().__init__()
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"[QuantizedLinear] '{name}' must be a positive integer, got {v!r}")
        _check_k("QuantizedLinear", "in_features", in_features, dtype)
        self.in_features, self.out_features = in_features, out_features
        # Linear's default initialization, then packed.
        w = _core.empty(out_features, in_features, device=device)
        init.kaiming_uniform_(w, a=math.sqrt(5))
        self.weight = _quantize_tensor(w, dtype)
        if bias:
            bound = 1 / math.sqrt(in_features)
            self.register_buffer("bias", init.uniform_(_core.empty(out_features, device=device), -bound, bound))
        else:
            self.register_buffer("bias", None)

    @classmethod
    def from_float(cls, mod: Linear, dtype: str = "q4k") -> "QuantizedLinear":
        """The layer for a float `Linear`: its weight quantized to `dtype`, its bias copied."""
        if not isinstance(mod, Linear):
            raise TypeError(f"[QuantizedLinear] from_float expects a Linear, got {type(mod).__name__}")
        _check_k("QuantizedLinear", "in_features", mod.in_features, dtype)
        self = cls.__new__(cls)
        Module.__init__(self)
        self.in_features, self.out_features = mod.in_features, mod.out_features
        with no_grad():
            self.weight = _quantize_tensor(mod.weight.detach(), dtype)
            self.register_buffer("bias", None if mod.bias is None else mod.bias.detach().clone())
        return self

    @classmethod
    def from_qtensor(cls, weight: QTensor, bias: Optional[Tensor] = None) -> "QuantizedLinear":
        """The layer whose weight is the 2-d QTensor `weight` (out_features, in_features),
        shared, not copied (a checkpoint's packed weight); `bias` (out_features,) is copied."""
        if not isinstance(weight, QTensor) or len(weight.shape) != 2:
            raise TypeError(f"[QuantizedLinear] from_qtensor expects a 2-d QTensor, got {type(weight).__name__}")
        out_f, in_f = weight.shape
        if bias is not None and tuple(bias.shape) != (out_f,):
            raise ValueError(f"[QuantizedLinear] bias of shape {list(bias.shape)} does not fit out_features={out_f}")
        self = cls.__new__(cls)
        Module.__init__(self)
        self.in_features, self.out_features, self.weight = in_f, out_f, weight
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        return self

    def forward(self, input: Tensor) -> Tensor:
        return _core._qlinear(input, self.weight, self.bias, "[QuantizedLinear]")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, dtype={self.weight.dtype}"


class QuantizedEmbedding(_QuantizedWeight):
    """A lookup table of `num_embeddings` rows of `embedding_dim` values kept quantized
    (`dtype`, default "q4k"; `embedding_dim` a multiple of its block size). Rows come
    out as float32. `padding_idx` only marks a row (zeroed at initialization): the
    weight has no gradient to mask."""

    def __init__(
        self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None, dtype: str = "q4k", device: Any = None
    ) -> None:
        super().__init__()
        for name, v in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"[QuantizedEmbedding] '{name}' must be a positive integer, got {v!r}")
        _check_k("QuantizedEmbedding", "embedding_dim", embedding_dim, dtype)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"[QuantizedEmbedding] padding_idx must be within num_embeddings, got {padding_idx}")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        w = _core.randn(num_embeddings, embedding_dim, device=device)
        if padding_idx is not None:
            w[padding_idx] = 0.0
        self.weight = _quantize_tensor(w, dtype)

    @classmethod
    def from_float(cls, mod: Embedding, dtype: str = "q4k") -> "QuantizedEmbedding":
        """The layer for a float `Embedding`: its weight quantized to `dtype`. An
        Embedding with `max_norm` is refused (it rescales its weight in place on lookup)."""
        if not isinstance(mod, Embedding):
            raise TypeError(f"[QuantizedEmbedding] from_float expects an Embedding, got {type(mod).__name__}")
        if mod.max_norm is not None:
            raise ValueError("[QuantizedEmbedding] an Embedding with max_norm rewrites its weight on lookup; a quantized weight cannot be")
        _check_k("QuantizedEmbedding", "embedding_dim", mod.embedding_dim, dtype)
        self = cls.__new__(cls)
        Module.__init__(self)
        self.num_embeddings, self.embedding_dim, self.padding_idx = mod.num_embeddings, mod.embedding_dim, mod.padding_idx
        self.weight = _quantize_tensor(mod.weight.detach(), dtype)
        return self

    @classmethod
    def from_qtensor(cls, weight: QTensor) -> "QuantizedEmbedding":
        """The table whose weight is the 2-d QTensor `weight` (num_embeddings,
        embedding_dim), shared, not copied (a checkpoint's packed table)."""
        if not isinstance(weight, QTensor) or len(weight.shape) != 2:
            raise TypeError(f"[QuantizedEmbedding] from_qtensor expects a 2-d QTensor, got {type(weight).__name__}")
        self = cls.__new__(cls)
        Module.__init__(self)
        self.num_embeddings, self.embedding_dim = weight.shape
        self.padding_idx, self.weight = None, weight
        return self

    def forward(self, input: Tensor) -> Tensor:
        return _core._qembedding(input, self.weight)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s + f", dtype={self.weight.dtype}"


def _features(m: Module) -> int:
    return m.in_features if isinstance(m, Linear) else m.embedding_dim  # type: ignore[no-any-return]


def quantize(model: Module, dtype: str = "q4k", class_predicate: Optional[Callable[[str, Module], Union[bool, str]]] = None) -> None:
    """Replace `model`'s `Linear` and `Embedding` layers by quantized ones, in place (MLX's API).

    `class_predicate(path, module)` decides per layer: False skips it, True quantizes it
    to `dtype`, a dtype name quantizes it to that. Without a predicate, layers whose
    `in_features` (`embedding_dim`) is not a multiple of the block size are skipped; a
    predicate that asks for such a layer raises ValueError. MultiheadAttention's
    `out_proj` (read directly by the attention op) is never replaced."""
    block_size(dtype)  # an unknown dtype fails before anything changes
    if isinstance(model, (Linear, Embedding)):
        raise TypeError(f"quantize: the model itself is a {type(model).__name__}; use Quantized{type(model).__name__}.from_float")
    done: Dict[int, Module] = {}
    for path, parent in list(model.named_modules()):
        for name, child in list(parent._modules.items()):
            if not isinstance(child, (Linear, Embedding)) or isinstance(child, NonDynamicallyQuantizableLinear):
                continue
            if id(child) in done:  # a layer shared by two parents stays shared
                parent._modules[name] = done[id(child)]
                continue
            full = f"{path}.{name}" if path else name
            want = class_predicate(full, child) if class_predicate is not None else True
            if not want:
                continue
            d = want if isinstance(want, str) else dtype
            bs = block_size(d)
            if _features(child) % bs:
                if class_predicate is None:
                    continue
                what = "in_features" if isinstance(child, Linear) else "embedding_dim"
                raise ValueError(f"quantize: layer {full!r} has {what}={_features(child)}, not a multiple of {d}'s block size {bs}")
            q = QuantizedLinear.from_float(child, d) if isinstance(child, Linear) else QuantizedEmbedding.from_float(child, d)
            done[id(child)] = q
            parent._modules[name] = q
