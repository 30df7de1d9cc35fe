"""`candle_py.nn.utils`: weight normalization, gradient clipping and packed sequences (`rnn`)."""

from . import parametrizations, rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["weight_norm", "remove_weight_norm", "parametrizations", "rnn", "clip_grad_norm_", "clip_grad_value_"]
