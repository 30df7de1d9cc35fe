"""`Model` and `Sequential`: Keras's compile / fit / evaluate / predict / summary /
save over any `candle_py.nn.Module`."""

from __future__ import annotations

import json
import math
import os
import sys
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import _core, nn, optim
from .. import safetensors as _st
from .._core import ShapeError, Tensor
from ..autograd import no_grad
from ..nn import functional as F
from ..utils.data import DataLoader, Dataset
from ._progress import Progbar
from .callbacks import Callback, CallbackList, History

__all__ = ["Model", "Sequential", "get_loss", "get_metric"]

LossFn = Callable[[Tensor, Tensor], Tensor]
MetricFn = Callable[[Tensor, Tensor], Any]
PathLike = Union[str, "os.PathLike[str]"]


# -- losses -------------------------------------------------------------------------------
def _match_regression(pred: Tensor, target: Tensor) -> Tensor:
    """Keras-style targets for element-wise losses: same dtype as the prediction,
    `(N,)` targets for `(N, 1)` predictions reshaped."""
    if target.dtype != pred.dtype:
        target = target.to(pred.dtype)
    if tuple(target.shape) != tuple(pred.shape) and target.numel() == pred.numel():
        target = target.reshape(tuple(pred.shape))
    return target


def _class_targets(pred: Tensor, target: Tensor) -> Tensor:
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(pred.shape):
        return target.to(pred.dtype)  # class probabilities / one-hot
    if target.dtype.is_floating_point or target.dtype != _core.int64:
        target = target.to(_core.int64)
    if target.ndim == pred.ndim and target.ndim >= 2 and target.shape[1] == 1:
        target = target.squeeze(1)
    return target


def _mse(pred: Tensor, target: Tensor) -> Tensor:
    return F.mse_loss(pred, _match_regression(pred, target))


def _mae(pred: Tensor, target: Tensor) -> Tensor:
    return F.l1_loss(pred, _match_regression(pred, target))


def _huber(pred: Tensor, target: Tensor) -> Tensor:
    return F.smooth_l1_loss(pred, _match_regression(pred, target))


def _cross_entropy(pred: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(pred, _class_targets(pred, target))


def _nll(pred: Tensor, target: Tensor) -> Tensor:
    return F.nll_loss(pred, _class_targets(pred, target))


def _bce(pred: Tensor, target: Tensor) -> Tensor:
    return F.binary_cross_entropy(pred, _match_regression(pred, target))


def _bce_logits(pred: Tensor, target: Tensor) -> Tensor:
    return F.binary_cross_entropy_with_logits(pred, _match_regression(pred, target))


# Class losses take logits (PyTorch's convention); "binary_crossentropy" takes
# probabilities (a sigmoid output, as Keras's default and nn.BCELoss).
_LOSSES: Dict[str, LossFn] = {
    "mse": _mse,
    "mean_squared_error": _mse,
    "mae": _mae,
    "l1": _mae,
    "mean_absolute_error": _mae,
    "huber": _huber,
    "smooth_l1": _huber,
    "cross_entropy": _cross_entropy,
    "categorical_crossentropy": _cross_entropy,
    "sparse_categorical_crossentropy": _cross_entropy,
    "nll": _nll,
    "binary_crossentropy": _bce,
    "bce": _bce,
    "binary_crossentropy_with_logits": _bce_logits,
    "bce_with_logits": _bce_logits,
}


def get_loss(loss: Union[str, LossFn, nn.Module]) -> LossFn:
    """A loss name (`"mse"`, `"mae"`, `"huber"`, `"cross_entropy"` (logits),
    `"nll"`, `"binary_crossentropy"` (probabilities), `"bce_with_logits"`), an
    `nn` loss module or any `fn(y_pred, y_true) -> Tensor`."""
    if isinstance(loss, str):
        key = loss.lower()
        if key not in _LOSSES:
            raise ValueError(f"unknown loss {loss!r}; known: {', '.join(sorted(_LOSSES))}")
        return _LOSSES[key]
    if isinstance(loss, (nn.CrossEntropyLoss, nn.NLLLoss)):
        mod = loss
        return lambda p, t: mod(p, _class_targets(p, t))
    if isinstance(loss, nn.Module):
        mod2 = loss
        return lambda p, t: mod2(p, _match_regression(p, t) if t.dtype.is_floating_point or p.shape != t.shape else t)
    if callable(loss):
        return loss
    raise TypeError(f"loss must be a name, an nn loss module or a callable, got {type(loss).__name__}")


# -- metrics ------------------------------------------------------------------------------
def _accuracy_for(threshold: float) -> MetricFn:
    def accuracy(pred: Tensor, target: Tensor) -> Tensor:
        if pred.ndim >= 2 and pred.shape[-1] > 1 and not (target.dtype.is_floating_point and target.shape == pred.shape):
            t = _class_targets(pred, target)
            return (pred.argmax(-1) == t.reshape(tuple(pred.shape[:-1]))).float().mean()
        if pred.ndim >= 2 and pred.shape[-1] > 1:  # one-hot / probability targets
            return (pred.argmax(-1) == target.argmax(-1)).float().mean()
        t = _match_regression(pred, target)
        return ((pred > threshold).float() == (t > 0.5).float()).float().mean()

    return accuracy


def _mae_metric(pred: Tensor, target: Tensor) -> Tensor:
    return (pred - _match_regression(pred, target)).abs().mean()


def _mse_metric(pred: Tensor, target: Tensor) -> Tensor:
    d = pred - _match_regression(pred, target)
    return (d * d).mean()


_METRIC_ALIASES = {
    "acc": "accuracy",
    "accuracy": "accuracy",
    "sparse_categorical_accuracy": "accuracy",
    "categorical_accuracy": "accuracy",
    "binary_accuracy": "accuracy",
    "mae": "mae",
    "mean_absolute_error": "mae",
    "mse": "mse",
    "mean_squared_error": "mse",
    "rmse": "rmse",
    "root_mean_squared_error": "rmse",
}


def get_metric(metric: Union[str, MetricFn], loss_name: Optional[str] = None) -> Tuple[str, MetricFn, bool]:
    """(log name, `fn(y_pred, y_true)`, whether the epoch value is the root of the
    mean). Accuracy on logits uses threshold 0 for `bce_with_logits`, 0.5 otherwise."""
    if isinstance(metric, str):
        kind = _METRIC_ALIASES.get(metric.lower())
        if kind is None:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(sorted(_METRIC_ALIASES))}")
        if kind == "accuracy":
            logits = loss_name in ("bce_with_logits", "binary_crossentropy_with_logits")
            return metric, _accuracy_for(0.0 if logits else 0.5), False
        if kind == "mae":
            return metric, _mae_metric, False
        if kind == "mse":
            return metric, _mse_metric, False
        return metric, _mse_metric, True
    if callable(metric):
        return getattr(metric, "__name__", type(metric).__name__), metric, False
    raise TypeError(f"metric must be a name or a callable, got {type(metric).__name__}")


# -- data -------------------------------------------------------------------------------
ArrayLike = Any


def _as_tensor(a: ArrayLike, float_dtype: Optional[Any], device: Optional[Any] = None) -> Tensor:
    if isinstance(a, Tensor):
        t = a
    else:
        arr = np.asarray(a)
        if arr.dtype == np.float64 or arr.dtype == np.float16:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.bool_:
            arr = arr.astype(np.float32)
        t = _core.from_numpy(np.ascontiguousarray(arr))
    if float_dtype is not None and t.dtype.is_floating_point and t.dtype != float_dtype:
        t = t.to(float_dtype)
    if device is not None and t.device != device:
        t = t.to(device)  # batches go to the model's device (a DataLoader yields CPU tensors)
    return t.detach()


def _split_batch(batch: Any) -> Tuple[Any, Any]:
    if isinstance(batch, (tuple, list)):
        if len(batch) == 1:
            return batch[0], None
        if len(batch) >= 2:
            return batch[0], batch[1]
    if isinstance(batch, dict):
        for kx, ky in (("x", "y"), ("input", "target"), ("inputs", "targets"), ("features", "labels")):
            if kx in batch:
                return batch[kx], batch.get(ky)
        raise ValueError(f"dict batches need keys 'x'/'y' (or input/target, features/labels), got {list(batch)}")
    return batch, None


class _Batches:
    """Batches of (x, y) from arrays/tensors (sliced with `index_select`) or from a
    DataLoader / Dataset; `len()` is the number of steps."""

    def __init__(
        self, x: Any, y: Any, batch_size: Optional[int], shuffle: bool, float_dtype: Optional[Any], device: Optional[Any] = None
    ) -> None:
        self.float_dtype = float_dtype
        self.device = device
        self.loader: Optional[Iterable[Any]] = None
        self.x: Optional[Tensor] = None
        self.y: Optional[Tensor] = None
        if isinstance(x, Dataset) and not isinstance(x, DataLoader):
            x = DataLoader(x, batch_size=batch_size or 32, shuffle=shuffle)
        if isinstance(x, DataLoader) or (not isinstance(x, (Tensor, np.ndarray, list, tuple)) and hasattr(x, "__iter__")):
            if y is not None:
                raise ValueError("when x is a DataLoader, y must be None (the loader yields (x, y) batches)")
            self.loader = x
            return
        self.x = _as_tensor(x, float_dtype, device)
        self.y = None if y is None else _as_tensor(y, float_dtype, device)
        n = self.x.shape[0]
        if self.y is not None and self.y.shape[0] != n:
            raise ShapeError(f"x and y have different numbers of samples: {n} and {self.y.shape[0]}")
        self.n = n
        self.batch_size = batch_size or 32
        self.shuffle = shuffle

    def __len__(self) -> int:
        if self.loader is not None:
            try:
                return len(self.loader)  # type: ignore[arg-type]
            except TypeError:
                return 0
        return math.ceil(self.n / self.batch_size)

    def __iter__(self) -> Iterator[Tuple[Tensor, Optional[Tensor]]]:
        if self.loader is not None:
            for batch in self.loader:
                bx, by = _split_batch(batch)
                yield (_as_tensor(bx, self.float_dtype, self.device), None if by is None else _as_tensor(by, None, self.device))
            return
        assert self.x is not None
        if not self.shuffle and self.batch_size >= self.n:
            yield self.x, self.y
            return
        order = _core.randperm(self.n, device=self.x.device) if self.shuffle else None
        for start in range(0, self.n, self.batch_size):
            stop = min(start + self.batch_size, self.n)
            if order is None:
                yield self.x[start:stop], (None if self.y is None else self.y[start:stop])
            else:
                idx = order[start:stop]
                yield self.x.index_select(0, idx), (None if self.y is None else self.y.index_select(0, idx))


class _Meter:
    """Running, sample-weighted means of the loss and metrics over an epoch."""

    def __init__(self, names: List[str], roots: List[bool]) -> None:
        self.names, self.roots = names, roots
        self.sums = [0.0] * len(names)
        self.count = 0

    def add(self, values: List[float], n: int) -> None:
        for i, v in enumerate(values):
            self.sums[i] += v * n
        self.count += n

    def result(self, prefix: str = "") -> Dict[str, float]:
        out: Dict[str, float] = OrderedDict()
        for name, s, root in zip(self.names, self.sums, self.roots):
            v = s / max(self.count, 1)
            out[prefix + name] = math.sqrt(v) if root else v
        return out


def _scalar(v: Any) -> float:
    if isinstance(v, Tensor):
        return float(v.detach().item())
    return float(v)


def _count(t: Tensor) -> int:
    return t.shape[0] if t.ndim else 1


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
        """Load weights saved by `save` / `save_weights` (or any safetensors
        state_dict of the same module); returns the missing/unexpected keys."""
        if not os.path.exists(os.fspath(filepath)):
            raise FileNotFoundError(f"no such weights file: {os.fspath(filepath)!r}")
        return self.load_state_dict(_st.load_file(filepath), strict=strict)

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
