"""Keras callbacks: `Callback`, `History`, `EarlyStopping`, `ModelCheckpoint`,
`LambdaCallback`, `LearningRateScheduler`. Epochs passed to hooks are 0-based, as
in Keras; `ModelCheckpoint`'s `{epoch}` field is 1-based, as in Keras."""

from __future__ import annotations

import math
import os
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Union

from .._core import Tensor

if TYPE_CHECKING:
    from .models import Model

__all__ = ["Callback", "CallbackList", "History", "EarlyStopping", "ModelCheckpoint", "LambdaCallback",
           "LearningRateScheduler"]  # fmt: skip

Logs = Optional[Dict[str, Any]]


class Callback:
    """Base class: override any of the hooks. `self.model` is the model being
    trained, `self.params` holds `epochs`, `steps`, `verbose`."""

    model: Optional["Model"]
    params: Dict[str, Any]

    def __init__(self) -> None:
        self.model = None
        self.params = {}

    def set_model(self, model: "Model") -> None:
        """Called by `fit` with the model being trained."""
        self.model = model

    def set_params(self, params: Dict[str, Any]) -> None:
        """Called by `fit` with `epochs`, `steps` and `verbose`."""
        self.params = params

    def on_train_begin(self, logs: Logs = None) -> None:
        """Called once when `fit` starts."""
        pass

    def on_train_end(self, logs: Logs = None) -> None:
        """Called once when `fit` ends; `logs` holds the last epoch's values."""
        pass

    def on_epoch_begin(self, epoch: int, logs: Logs = None) -> None:
        """Called at the start of each epoch (0-based `epoch`)."""
        pass

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        """Called at the end of each epoch with its `logs` (loss, metrics, `val_*`, learning rate)."""
        pass

    def on_batch_begin(self, batch: int, logs: Logs = None) -> None:
        """Called before each training batch (the legacy name of `on_train_batch_begin`)."""
        pass

    def on_batch_end(self, batch: int, logs: Logs = None) -> None:
        """Called after each training batch (the legacy name of `on_train_batch_end`)."""
        pass

    def on_train_batch_begin(self, batch: int, logs: Logs = None) -> None:
        """Called before each training batch; by default calls `on_batch_begin`."""
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Logs = None) -> None:
        """Called after each training batch with its `logs`; by default calls `on_batch_end`."""
        self.on_batch_end(batch, logs)

    def on_test_begin(self, logs: Logs = None) -> None:
        """Called when an evaluation (`evaluate`, or validation in `fit`) starts."""
        pass

    def on_test_end(self, logs: Logs = None) -> None:
        """Called when an evaluation ends, with its `logs`."""
        pass


class CallbackList(Callback):
    """Calls each hook on every callback in order."""

    def __init__(self, callbacks: Optional[List[Callback]] = None) -> None:
        super().__init__()
        self.callbacks: List[Callback] = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be keras Callback instances, got {type(cb).__name__}")

    def set_model(self, model: "Model") -> None:
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params: Dict[str, Any]) -> None:
        for cb in self.callbacks:
            cb.set_params(params)

    def on_train_begin(self, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_train_begin(logs)

    def on_train_end(self, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_train_end(logs)

    def on_epoch_begin(self, epoch: int, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_epoch_end(epoch, logs)

    def on_train_batch_begin(self, batch: int, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Logs = None) -> None:
        for cb in self.callbacks:
            cb.on_train_batch_end(batch, logs)


class History(Callback):
    """`history.history[name]` is the list of per-epoch values of each logged
    quantity (`loss`, metrics, `val_*`); `history.epoch` the epoch indices."""

    def __init__(self) -> None:
        super().__init__()
        self.history: Dict[str, List[float]] = {}
        self.epoch: List[int] = []

    def on_train_begin(self, logs: Logs = None) -> None:
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={list(self.history)})"


def _auto_mode(monitor: str, mode: str) -> str:
    if mode not in ("auto", "min", "max"):
        warnings.warn(f"mode {mode!r} is unknown, falling back to 'auto'", stacklevel=3)
        mode = "auto"
    if mode != "auto":
        return mode
    name = monitor[4:] if monitor.startswith("val_") else monitor
    return (
        "max"
        if name in ("acc", "accuracy", "auc", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy", "r2")
        or name.endswith("accuracy")
        else "min"
    )


def _clone_state(model: "Model") -> Dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


class EarlyStopping(Callback):
    """Stop training when `monitor` has not improved by more than `min_delta` for
    `patience` epochs (sets `model.stop_training`). With `restore_best_weights`
    the weights of the best epoch are put back when training stops early."""

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: Optional[float] = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ) -> None:
        super().__init__()
        self.monitor, self.patience, self.verbose = monitor, patience, verbose
        self.min_delta = abs(min_delta)
        self.mode = _auto_mode(monitor, mode)
        self.baseline, self.restore_best_weights, self.start_from_epoch = baseline, restore_best_weights, start_from_epoch
        self.wait = 0
        self.stopped_epoch = 0
        self.best: float = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.best_weights: Optional[Dict[str, Tensor]] = None

    def _improved(self, current: float, reference: float) -> bool:
        if self.mode == "min":
            return current < reference - self.min_delta
        return current > reference + self.min_delta

    def on_train_begin(self, logs: Logs = None) -> None:
        self.wait, self.stopped_epoch, self.best_epoch = 0, 0, 0
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_weights = None

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        current = (logs or {}).get(self.monitor)
        if current is None:
            warnings.warn(f"EarlyStopping: metric {self.monitor!r} is not available; available: {', '.join(logs or {})}", stacklevel=2)
            return
        if epoch < self.start_from_epoch:
            return
        current = float(current)
        if self.restore_best_weights and self.best_weights is None and self.model is not None:
            self.best_weights = _clone_state(self.model)
        self.wait += 1
        if self._improved(current, self.best):
            self.best, self.best_epoch = current, epoch
            if self.restore_best_weights and self.model is not None:
                self.best_weights = _clone_state(self.model)
            if self.baseline is None or self._improved(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            if self.model is not None:
                self.model.stop_training = True
                if self.restore_best_weights and self.best_weights is not None:
                    if self.verbose > 0:
                        print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
                    self.model.load_state_dict(self.best_weights)

    def on_train_end(self, logs: Logs = None) -> None:
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")


class ModelCheckpoint(Callback):
    """Save the model after each epoch to `filepath` (may hold format fields such
    as `{epoch:02d}` or `{val_loss:.3f}`). With `save_best_only` only when
    `monitor` improved. Files are written atomically (temporary file + rename)."""

    def __init__(
        self,
        filepath: Union[str, "os.PathLike[str]"],
        monitor: str = "val_loss",
        verbose: int = 0,
        save_best_only: bool = False,
        save_weights_only: bool = False,
        mode: str = "auto",
        save_freq: Union[str, int] = "epoch",
        initial_value_threshold: Optional[float] = None,
    ) -> None:
        super().__init__()
        if save_freq != "epoch":
            raise ValueError("ModelCheckpoint: only save_freq='epoch' is supported")
        self.filepath = os.fspath(filepath)
        self.monitor, self.verbose = monitor, verbose
        self.save_best_only, self.save_weights_only = save_best_only, save_weights_only
        self.mode = _auto_mode(monitor, mode)
        self.initial_value_threshold = initial_value_threshold
        self.best: float = math.inf if self.mode == "min" else -math.inf
        if initial_value_threshold is not None:
            self.best = float(initial_value_threshold)

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        logs = logs or {}
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                warnings.warn(f"ModelCheckpoint: can save best model only with {self.monitor!r} available, skipping", stacklevel=2)
                return
            current = float(current)
            better = current < self.best if self.mode == "min" else current > self.best
            if not better:
                if self.verbose > 0:
                    print(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {self.best:.5f}")
                return
            if self.verbose > 0:
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {self.best:.5f} to {current:.5f}, saving model to {path}")
            self.best = current
        elif self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")
        assert self.model is not None
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)


class LambdaCallback(Callback):
    """A callback from plain functions: `on_epoch_begin(epoch, logs)`,
    `on_epoch_end(epoch, logs)`, `on_batch_begin(batch, logs)`, `on_batch_end(batch, logs)`,
    `on_train_begin(logs)`, `on_train_end(logs)`."""

    def __init__(
        self,
        on_epoch_begin: Optional[Callable[[int, Logs], Any]] = None,
        on_epoch_end: Optional[Callable[[int, Logs], Any]] = None,
        on_batch_begin: Optional[Callable[[int, Logs], Any]] = None,
        on_batch_end: Optional[Callable[[int, Logs], Any]] = None,
        on_train_begin: Optional[Callable[[Logs], Any]] = None,
        on_train_end: Optional[Callable[[Logs], Any]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._fns: Dict[str, Any] = dict(
            on_epoch_begin=on_epoch_begin,
            on_epoch_end=on_epoch_end,
            on_batch_begin=on_batch_begin,
            on_batch_end=on_batch_end,
            on_train_begin=on_train_begin,
            on_train_end=on_train_end,
        )
        unknown = set(kwargs) - {"on_train_batch_begin", "on_train_batch_end"}
        if unknown:
            raise TypeError(f"LambdaCallback got unexpected arguments: {sorted(unknown)}")
        self._fns.update(kwargs)

    def on_train_begin(self, logs: Logs = None) -> None:
        if self._fns["on_train_begin"]:
            self._fns["on_train_begin"](logs)

    def on_train_end(self, logs: Logs = None) -> None:
        if self._fns["on_train_end"]:
            self._fns["on_train_end"](logs)

    def on_epoch_begin(self, epoch: int, logs: Logs = None) -> None:
        if self._fns["on_epoch_begin"]:
            self._fns["on_epoch_begin"](epoch, logs)

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        if self._fns["on_epoch_end"]:
            self._fns["on_epoch_end"](epoch, logs)

    def on_batch_begin(self, batch: int, logs: Logs = None) -> None:
        if self._fns["on_batch_begin"]:
            self._fns["on_batch_begin"](batch, logs)

    def on_batch_end(self, batch: int, logs: Logs = None) -> None:
        if self._fns["on_batch_end"]:
            self._fns["on_batch_end"](batch, logs)

    def on_train_batch_begin(self, batch: int, logs: Logs = None) -> None:
        fn = self._fns.get("on_train_batch_begin")
        if fn:
            fn(batch, logs)
        self.on_batch_begin(batch, logs)

    def on_train_batch_end(self, batch: int, logs: Logs = None) -> None:
        fn = self._fns.get("on_train_batch_end")
        if fn:
            fn(batch, logs)
        self.on_batch_end(batch, logs)


class LearningRateScheduler(Callback):
    """Set the learning rate at the start of each epoch: `schedule(epoch, lr) -> lr`,
    or step a `candle_py.optim.lr_scheduler` scheduler at the end of each epoch."""

    def __init__(self, schedule: Any, verbose: int = 0) -> None:
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def _optimizer(self) -> Any:
        opt = getattr(self.model, "optimizer", None)
        if opt is None:
            raise RuntimeError("LearningRateScheduler: the model has no optimizer; call compile() first")
        return opt

    def on_epoch_begin(self, epoch: int, logs: Logs = None) -> None:
        if hasattr(self.schedule, "step") and hasattr(self.schedule, "get_last_lr"):
            return
        opt = self._optimizer()
        lr = float(self.schedule(epoch, opt.param_groups[0]["lr"]))
        for g in opt.param_groups:
            g["lr"] = lr
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {lr}.")

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        if hasattr(self.schedule, "step") and hasattr(self.schedule, "get_last_lr"):
            self.schedule.step()
        if logs is not None:
            logs["learning_rate"] = float(self._optimizer().param_groups[0]["lr"])
