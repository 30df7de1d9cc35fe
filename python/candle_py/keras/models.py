"""`Model` and `Sequential`: Keras's compile / fit / evaluate / predict / summary /
save over any `candle_py.nn.Module`. Losses and metrics by name are in `_losses`, the
batching and epoch meter of fit / evaluate / predict in `_data`."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, nn, optim
from .. import safetensors as _st
from .. import serialization as _serialization
from .._core import Tensor
from ..autograd import no_grad
from ..utils.data import DataLoader, Dataset
from ._data import ArrayLike, _as_tensor, _Batches, _count, _Meter, _scalar
from ._losses import LossFn, MetricFn, get_loss, get_metric
from ._progress import Progbar
from .callbacks import Callback, CallbackList, History

__all__ = ["Model", "Sequential", "get_loss", "get_metric"]

PathLike = Union[str, "os.PathLike[str]"]


# -- models -------------------------------------------------------------------------------
class Model(nn.Module):
    """Keras's `Model` over PyTorch-style modules.

    `Model(module)` wraps any `nn.Module` (its state_dict keys are kept, so weights
    saved here load into the bare module and back); subclass `Model` and define
    `forward` to build one directly. Then `compile`, `fit`, `evaluate`, `predict`,
    `summary`, `save` / `load_weights`."""

    stop_training: bool

    def __init__(self, module: Optional[nn.Module] = None, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None) -> None:
        super().__init__()
        if module is not None and not isinstance(module, nn.Module):
            raise TypeError(f"Model wraps an nn.Module, got {type(module).__name__}")
        if module is not None:
            self.module = module
        object.__setattr__(self, "_wrapped", module is not None)
        object.__setattr__(
            self,
            "name",
            name or ("sequential" if isinstance(self, Sequential) else type(self).__name__.lower() if type(self) is not Model else "model"),
        )
        object.__setattr__(self, "optimizer", None)
        object.__setattr__(self, "_loss_fn", None)
        object.__setattr__(self, "_loss_name", None)
        object.__setattr__(self, "_metrics", [])
        object.__setattr__(self, "_compile_config", {})
        object.__setattr__(self, "_input_shape", tuple(input_shape) if input_shape is not None else None)
        object.__setattr__(self, "_input_dtype", None)
        object.__setattr__(self, "stop_training", False)
        object.__setattr__(self, "history", None)

    # -- the network --------------------------------------------------------------------
    @property
    def network(self) -> nn.Module:
        """The module that is trained (the wrapped one, or the model itself)."""
        return self._modules["module"] if self._wrapped else self  # type: ignore[return-value]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the wrapped module (or the subclass's `call`) on the inputs."""
        if self._wrapped:
            return self._modules["module"](*args, **kwargs)  # type: ignore[misc]
        call = getattr(self, "call", None)
        if call is None:
            raise NotImplementedError(f"{type(self).__name__} wraps no module and defines no forward()")
        return call(*args, **kwargs)

    def state_dict(
        self, *, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "", keep_vars: bool = False
    ) -> Dict[str, Tensor]:
        """The wrapped module's state_dict, with its own keys (no `module.` prefix)."""
        if self._wrapped:
            return self.network.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        return super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Load into the wrapped module, with its keys; returns the missing and unexpected keys."""
        if self._wrapped:
            return self.network.load_state_dict(state_dict, strict=strict, assign=assign)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _float_dtype(self) -> Optional[Any]:
        for p in self.network.parameters():
            if p.dtype.is_floating_point:
                return p.dtype
        return None

    def _device(self) -> Any:
        """Where the network's parameters live; inputs are moved there."""
        for p in self.network.parameters():
            return p.device
        return _core.get_default_device()

    # -- compile --------------------------------------------------------------------------
    def compile(
        self,
        optimizer: Union[str, optim.Optimizer, Callable[..., optim.Optimizer]] = "adam",
        loss: Union[str, LossFn, nn.Module, None] = None,
        metrics: Optional[Sequence[Union[str, MetricFn]]] = None,
        learning_rate: Optional[float] = None,
        **kwargs: Any,
    ) -> None:
        """`optimizer`: `"sgd"` (lr 0.01), `"adam"` (1e-3), `"adamw"` (1e-3, weight decay
        0.01), an `Optimizer`, or a function of the parameters returning one;
        `learning_rate` overrides the named optimizers' default. `loss`: see `get_loss`.
        `metrics`: names (`"accuracy"`, `"mae"`, `"mse"`, `"rmse"`) or `fn(y_pred, y_true)`."""
        if kwargs:
            raise TypeError(f"compile() got unexpected arguments: {sorted(kwargs)}")
        params = list(self.network.parameters())
        if isinstance(optimizer, optim.Optimizer):
            opt = optimizer
        elif isinstance(optimizer, str):
            key = optimizer.lower()
            if key == "sgd":
                opt = optim.SGD(params, lr=0.01 if learning_rate is None else learning_rate)
            elif key == "adam":
                opt = optim.Adam(params, lr=1e-3 if learning_rate is None else learning_rate)
            elif key == "adamw":
                opt = optim.AdamW(params, lr=1e-3 if learning_rate is None else learning_rate)
            else:
                raise ValueError(f"unknown optimizer {optimizer!r}; use 'sgd', 'adam', 'adamw' or an Optimizer")
        elif callable(optimizer):
            opt = optimizer(params)
            if not isinstance(opt, optim.Optimizer):
                raise TypeError("an optimizer factory must return a candle_py.optim.Optimizer")
        else:
            raise TypeError(f"optimizer must be a name or an Optimizer, got {type(optimizer).__name__}")
        if loss is None:
            raise ValueError("compile() needs a loss")
        loss_name = loss.lower() if isinstance(loss, str) else None
        object.__setattr__(self, "optimizer", opt)
        object.__setattr__(self, "_loss_fn", get_loss(loss))
        object.__setattr__(self, "_loss_name", loss_name)
        object.__setattr__(self, "_metrics", [get_metric(m, loss_name) for m in (metrics or [])])
        object.__setattr__(
            self,
            "_compile_config",
            {
                "optimizer": type(opt).__name__,
                "loss": loss if isinstance(loss, str) else getattr(loss, "__name__", type(loss).__name__),
                "metrics": [m[0] for m in self._metrics],
            },
        )

    @property
    def metrics_names(self) -> List[str]:
        """`"loss"` followed by the compiled metrics' names."""
        return ["loss"] + [m[0] for m in self._metrics]

    def _require_compiled(self, what: str) -> None:
        if self._loss_fn is None or self.optimizer is None:
            raise RuntimeError(f"You must call compile() before {what}()")

    def _batch_metrics(self, out: Tensor, y: Tensor) -> List[float]:
        return [_scalar(fn(out, y)) for _, fn, _ in self._metrics]

    def _remember_input(self, x: Tensor) -> None:
        if x.ndim >= 1:
            object.__setattr__(self, "_input_shape", tuple(x.shape[1:]))
            object.__setattr__(self, "_input_dtype", x.dtype)

    # -- training -------------------------------------------------------------------------
    def train_on_batch(self, x: ArrayLike, y: ArrayLike) -> float:
        """One optimizer step on one batch; returns the loss."""
        self._require_compiled("train_on_batch")
        xb, yb = _as_tensor(x, self._float_dtype(), self._device()), _as_tensor(y, None, self._device())
        self.network.train()
        return self._train_step(xb, yb)[0]

    def _train_step(self, xb: Tensor, yb: Tensor) -> List[float]:
        opt = self.optimizer
        assert opt is not None and self._loss_fn is not None
        opt.zero_grad()
        out = self.network(xb)
        loss = self._loss_fn(out, yb)
        loss.backward()
        opt.step()
        values = [_scalar(loss)]
        if self._metrics:
            with no_grad():
                values += self._batch_metrics(out.detach(), yb)
        return values

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        epochs: int = 1,
        verbose: Union[int, str] = 1,
        callbacks: Optional[List[Callback]] = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: bool = True,
        initial_epoch: int = 0,
    ) -> History:
        """Train for `epochs` epochs; returns a `History`. `x`/`y` are arrays or
        tensors (then `batch_size`, default 32, and `shuffle` apply; shuffling follows
        `candle_py.manual_seed`), or `x` is a DataLoader / Dataset of (x, y) batches.
        `validation_split` holds out the last fraction of the arrays (before shuffling);
        `validation_data` is `(x_val, y_val)` or a DataLoader. `verbose`: 0 silent, 1
        progress bar, 2 one line per epoch."""
        self._require_compiled("fit")
        verbose = 1 if verbose == "auto" else int(verbose)
        fdt = self._float_dtype()
        if not 0.0 <= validation_split < 1.0:
            raise ValueError(f"validation_split must be in [0, 1), got {validation_split}")
        if validation_split and validation_data is None:
            if isinstance(x, (DataLoader, Dataset)):
                raise ValueError("validation_split is only supported for array or tensor inputs")
            xt, yt = _as_tensor(x, fdt, self._device()), _as_tensor(y, None, self._device())
            n = xt.shape[0]
            split = n - int(n * validation_split)
            if split <= 0 or split >= n:
                raise ValueError(f"validation_split={validation_split} leaves no training or no validation samples of {n}")
            validation_data = (xt[split:], yt[split:])
            x, y = xt[:split], yt[:split]
        train = _Batches(x, y, batch_size, shuffle, fdt, self._device())
        val = None
        if validation_data is not None:
            if isinstance(validation_data, (tuple, list)):
                if len(validation_data) != 2:
                    raise ValueError("validation_data must be (x_val, y_val) or a DataLoader")
                val = _Batches(validation_data[0], validation_data[1], batch_size, False, fdt, self._device())
            else:
                val = _Batches(validation_data, None, batch_size, False, fdt, self._device())
        history = History()
        cbs = CallbackList(list(callbacks or []) + [history])
        cbs.set_model(self)
        steps = len(train)
        cbs.set_params({"epochs": epochs, "steps": steps, "verbose": verbose})
        object.__setattr__(self, "stop_training", False)
        names = self.metrics_names
        roots = [False] + [m[2] for m in self._metrics]
        cbs.on_train_begin()
        logs: Dict[str, float] = {}
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch)
            bar = Progbar(steps or None, verbose=verbose, prefix=f"Epoch {epoch + 1}/{epochs} - ")
            meter = _Meter(names, roots)
            self.network.train()
            step = 0
            for step, (xb, yb) in enumerate(train, start=1):
                if yb is None:
                    raise ValueError("fit() needs targets: pass y, or a DataLoader yielding (x, y)")
                if step == 1 and epoch == initial_epoch:
                    self._remember_input(xb)
                cbs.on_train_batch_begin(step - 1)
                values = self._train_step(xb, yb)
                meter.add(values, _count(xb))
                logs = meter.result()
                cbs.on_train_batch_end(step - 1, dict(logs))
                bar.update(step, logs)
                if self.stop_training:
                    break
            if step == 0:
                raise ValueError("fit() got no batches (empty data, or drop_last with fewer samples than batch_size)")
            logs = meter.result()
            if val is not None:
                logs.update(self._evaluate_batches(val, prefix="val_"))
            bar.target = bar.target or step
            bar.update(step, logs, finalize=True)
            cbs.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        cbs.on_train_end(logs)
        object.__setattr__(self, "history", history)
        return history

    def _evaluate_batches(self, batches: _Batches, prefix: str = "", bar: Optional[Progbar] = None) -> Dict[str, float]:
        assert self._loss_fn is not None
        meter = _Meter(self.metrics_names, [False] + [m[2] for m in self._metrics])
        was_training = self.network.training
        self.network.eval()
        step = 0
        try:
            with no_grad():
                for step, (xb, yb) in enumerate(batches, start=1):
                    if yb is None:
                        raise ValueError("evaluate() needs targets: pass y, or a DataLoader yielding (x, y)")
                    out = self.network(xb)
                    meter.add([_scalar(self._loss_fn(out, yb))] + self._batch_metrics(out, yb), _count(xb))
                    if bar is not None:
                        bar.update(step, meter.result(prefix))
        finally:
            self.network.train(was_training)
        if step == 0:
            raise ValueError("no batches to evaluate")
        result = meter.result(prefix)
        if bar is not None:
            bar.target = bar.target or step
            bar.update(step, result, finalize=True)
        return result

    def evaluate(
        self, x: Any = None, y: Any = None, batch_size: Optional[int] = None, verbose: Union[int, str] = 1, return_dict: bool = False
    ) -> Any:
        """The loss (a float) when no metrics were compiled, else `[loss, *metrics]`;
        a dict `{name: value}` with `return_dict=True`."""
        self._require_compiled("evaluate")
        verbose = 1 if verbose == "auto" else int(verbose)
        batches = _Batches(x, y, batch_size, False, self._float_dtype(), self._device())
        bar = Progbar(len(batches) or None, verbose=verbose)
        result = self._evaluate_batches(batches, bar=bar)
        if return_dict:
            return dict(result)
        values = list(result.values())
        return values[0] if len(values) == 1 else values

    def predict(self, x: Any, batch_size: Optional[int] = None, verbose: Union[int, str] = 0) -> Any:
        """Outputs for `x`, batch by batch, in eval mode without autograd: a NumPy
        array for NumPy/list input, a Tensor for Tensor or DataLoader input."""
        verbose = 1 if verbose == "auto" else int(verbose)
        as_numpy = not isinstance(x, (Tensor, DataLoader, Dataset)) and not hasattr(x, "__next__")
        batches = _Batches(x, None, batch_size, False, self._float_dtype(), self._device())
        bar = Progbar(len(batches) or None, verbose=verbose)
        outs: List[Tensor] = []
        was_training = self.network.training
        self.network.eval()
        try:
            with no_grad():
                for step, (xb, _) in enumerate(batches, start=1):
                    if step == 1 and self._input_shape is None:
                        self._remember_input(xb)
                    outs.append(self.network(xb))
                    bar.update(step)
        finally:
            self.network.train(was_training)
        if not outs:
            raise ValueError("predict() got no samples")
        bar.update(len(outs), finalize=True)
        out = outs[0] if len(outs) == 1 else _core.cat(outs, 0)
        return np.asarray(out) if as_numpy else out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], np.ndarray):
            args = (_as_tensor(args[0], self._float_dtype(), self._device()),)
        return super().__call__(*args, **kwargs)

    # -- summary -----------------------------------------------------------------------------
    def summary(
        self,
        input_shape: Optional[Sequence[int]] = None,
        line_length: int = 80,
        print_fn: Optional[Callable[[str], Any]] = None,
        dtype: Optional[Any] = None,
    ) -> None:
        """Print the layers, their output shapes and parameter counts. Output shapes
        come from one traced forward of a zero batch of shape `(1, *input_shape)`:
        `input_shape` defaults to the model's (from `Sequential(..., input_shape=)` or
        the last data seen by fit/evaluate/predict), else the first Linear/Conv layer's
        input size when that is enough; without one the shapes show as `?`."""
        emit: Callable[[str], Any] = print_fn or (lambda s: print(s))
        net = self.network
        shape = tuple(input_shape) if input_shape is not None else self._input_shape or self._guess_input_shape()
        rows: List[Tuple[str, nn.Module]] = []
        for name, mod in net.named_modules():
            if mod is net and self._wrapped:
                if not any(True for _ in mod.children()) and name == "":
                    rows.append((type(mod).__name__.lower(), mod))
                continue
            if mod is self:
                continue
            has_own = any(True for _ in mod.parameters(recurse=False)) or any(True for _ in mod.buffers(recurse=False))
            if not any(True for _ in mod.children()) or has_own:
                rows.append((name, mod))
        shapes: Dict[int, str] = {}
        if shape is not None:
            handles = []
            for _, mod in rows:

                def hook(m: nn.Module, args: Any, out: Any) -> None:
                    shapes.setdefault(id(m), _fmt_shape(out))

                handles.append(mod.register_forward_hook(hook))
            was_training = net.training
            try:
                net.eval()
                with no_grad():
                    sample = _core.zeros(
                        1, *shape, dtype=dtype or self._input_dtype or self._float_dtype() or _core.float32, device=self._device()
                    )
                    out = net(sample)
                    shapes.setdefault(id(net), _fmt_shape(out))
            except Exception as e:  # a wrong guess of the input shape must not break summary()
                shapes.clear()
                emit(f"(could not trace output shapes with input shape {shape}: {e})")
            finally:
                for h in handles:
                    h.remove()
                net.train(was_training)
        col = [max(30, line_length * 4 // 10), max(22, line_length * 3 // 10)]
        col.append(max(12, line_length - col[0] - col[1]))
        bold, thin = _rule_chars()
        emit(f'Model: "{self.name}"')
        emit(bold * sum(col))
        emit(f"{'Layer (type)':<{col[0]}}{'Output Shape':<{col[1]}}{'Param #':>{col[2]}}")
        emit(bold * sum(col))
        for i, (name, mod) in enumerate(rows):
            n = sum(p.numel() for p in mod.parameters(recurse=not any(True for _ in mod.children())))
            label = f"{name} ({type(mod).__name__})"
            emit(f"{label:<{col[0]}}{shapes.get(id(mod), '?'):<{col[1]}}{n:>{col[2]},}")
            if i + 1 < len(rows):
                emit(thin * sum(col))
        emit(bold * sum(col))
        params = list(net.parameters())
        total = sum(p.numel() for p in params)
        trainable = sum(p.numel() for p in params if p.requires_grad)
        nbytes = sum(p.numel() * p.element_size() for p in params)
        emit(f"Total params: {total:,} ({_fmt_bytes(nbytes)})")
        emit(f"Trainable params: {trainable:,}")
        emit(f"Non-trainable params: {total - trainable:,}")
        emit(bold * sum(col))

    def _guess_input_shape(self) -> Optional[Tuple[int, ...]]:
        for mod in self.network.modules():
            if isinstance(mod, nn.Linear):
                return (mod.in_features,)
            if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding, nn.Flatten)):
                return None
        return None

    def count_params(self) -> int:
        """The number of scalar parameters of the wrapped module."""
        return sum(p.numel() for p in self.network.parameters())

    # -- saving ------------------------------------------------------------------------------
    def save_weights(self, filepath: PathLike) -> None:
        """Write the state_dict (the wrapped module's keys) to a safetensors file, atomically."""
        tensors = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        _st.save_file(tensors, filepath, metadata={"format": "pt", "saved_by": "candle_py.keras"})

    def save(self, filepath: PathLike) -> None:
        """`save_weights` plus metadata describing the model (class, layers, compile
        settings); loads back with `load_weights`, or into the bare module with
        `load_state_dict(candle_py.load_file(path))`."""
        tensors = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        meta = {
            "format": "pt",
            "saved_by": "candle_py.keras",
            "model_class": type(self).__name__,
            "name": self.name,
            "architecture": repr(self.network),
            "compile": json.dumps(self._compile_config),
        }
        _st.save_file(tensors, filepath, metadata=meta)

    def load_weights(self, filepath: PathLike, strict: bool = True) -> Any:
        """Load weights saved by `save` / `save_weights`, or any state_dict of the
        same module in a safetensors file or a PyTorch checkpoint (`torch.save`'s zip
        format: `.pt` / `.pth` / `.bin`); returns the missing/unexpected keys."""
        path = os.fspath(filepath)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such weights file: {path!r}")
        with open(path, "rb") as fh:
            is_zip = fh.read(2) == b"PK"
        if not is_zip:
            return self.load_state_dict(_st.load_file(filepath), strict=strict)
        sd = _serialization.load(path)
        if not isinstance(sd, dict) or not all(isinstance(v, Tensor) for v in sd.values()):
            raise TypeError(f"load_weights: {path!r} holds a {type(sd).__name__}, not a state_dict (a dict of tensors)")
        return self.load_state_dict(sd, strict=strict)

    def get_weights(self) -> List[np.ndarray]:
        """The state_dict's tensors as NumPy arrays, in state_dict order."""
        return [np.asarray(v.detach()).copy() for v in self.state_dict().values()]

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Load arrays given in `get_weights` order into the state_dict."""
        keys = list(self.state_dict().keys())
        if len(keys) != len(weights):
            raise ValueError(f"set_weights: expected {len(keys)} arrays, got {len(weights)}")
        self.load_state_dict({k: _as_tensor(w, None) for k, w in zip(keys, weights)})

    def _get_name(self) -> str:
        return type(self).__name__


class Sequential(Model):
    """`Sequential([layer, ...])` / `.add(layer)`: the layers applied in order
    (an `nn.Sequential` inside, so state_dict keys are `0.weight`, ...)."""

    def __init__(
        self, layers: Optional[Iterable[nn.Module]] = None, name: Optional[str] = None, input_shape: Optional[Sequence[int]] = None
    ) -> None:
        super().__init__(nn.Sequential(*(layers or [])), name=name, input_shape=input_shape)

    @property
    def layers(self) -> List[nn.Module]:
        """The layers, in order."""
        return list(self.network.children())

    def add(self, layer: nn.Module) -> None:
        """Append `layer` to the end of the stack."""
        if not isinstance(layer, nn.Module):
            raise TypeError(f"Sequential.add expects an nn.Module, got {type(layer).__name__}")
        self.network.append(layer)  # type: ignore[operator]

    def pop(self) -> nn.Module:
        """Remove the last layer and return it."""
        seq = self.network
        if len(seq) == 0:  # type: ignore[arg-type]
            raise IndexError("pop from an empty Sequential")
        last = seq[-1]  # type: ignore[index]
        del seq[-1]  # type: ignore[attr-defined]
        return last  # type: ignore[no-any-return]


def _fmt_shape(out: Any) -> str:
    if isinstance(out, Tensor):
        return "(" + ", ".join(["None"] + [str(d) for d in tuple(out.shape)[1:]]) + ("" if out.ndim != 1 else ",") + ")"
    if isinstance(out, (tuple, list)):
        return "[" + ", ".join(_fmt_shape(o) for o in out) + "]"
    return type(out).__name__


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _rule_chars() -> Tuple[str, str]:
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        "━─".encode(enc)
        return "━", "─"
    except (UnicodeEncodeError, LookupError):
        return "=", "-"
