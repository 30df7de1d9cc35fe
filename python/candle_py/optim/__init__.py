"""`candle_py.optim`: the `torch.optim` optimizers (SGD, Adam, AdamW, RMSprop, Adagrad,
Adadelta, Adamax, NAdam, RAdam, LBFGS) and learning-rate schedulers."""

from . import lr_scheduler
from ._fused import Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS", "lr_scheduler"]
