"""`torch.special`: the special functions under their `torch.special` names.

Most are the functions of `candle_py` itself (`erfinv`, `digamma`, `xlogy`, ...: one
implementation each, here under a second name, as in PyTorch); `ndtr` and
`multigammaln` are compositions of them, so gradients flow. Names PyTorch has that
are not here (`entr`, `xlog1py`, `ndtri`, `erfcx`, the Bessel functions, `zeta`, ...)
raise AttributeError rather than giving numbers that differ from PyTorch's at the edges.
"""

from __future__ import annotations

import math
from typing import Any

from . import _composed_math, _functions
from ._core import Tensor

__all__ = [
    "expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
    "xlogy", "exp2", "expm1", "log1p", "round", "sinc", "softmax", "log_softmax", "logsumexp", "ndtr",
]  # fmt: skip

expit = _functions.sigmoid
logit = _composed_math.logit
erf = _functions.erf
erfc = _functions.erfc
erfinv = _functions.erfinv
gammaln = _functions.lgamma
digamma = psi = _functions.digamma
polygamma = _functions.polygamma
xlogy = _composed_math.xlogy
exp2 = _functions.exp2
expm1 = _functions.expm1
log1p = _functions.log1p
round = _functions.round
sinc = _composed_math.sinc


def _tensor(input: Any, op: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"special.{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """`exp(x) / sum(exp(x))` along `dim` (computed in `dtype` when given)."""
    return _tensor(input, "softmax").softmax(dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """`log(softmax(x))` along `dim`, computed stably (in `dtype` when given)."""
    return _tensor(input, "log_softmax").log_softmax(dim, dtype=dtype)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """`log(sum(exp(x)))` over `dim`, computed stably."""
    return _tensor(input, "logsumexp").logsumexp(dim, keepdim=keepdim)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, `0.5 * erfc(-x / sqrt(2))` (PyTorch's formula)."""
    x = _tensor(input, "ndtr")
    if not x.is_floating_point():
        x = x.float()
    return (x * -math.sqrt(0.5)).erfc() * 0.5


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The log of the multivariate gamma function of dimension `p`:
    `p (p - 1) / 4 * log(pi) + sum_{j < p} lgamma(input - j / 2)`."""
    x = _tensor(input, "multigammaln")
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"special.multigammaln: p has to be greater than or equal to 1, got {p!r}")
    if not x.is_floating_point():
        raise TypeError(f"special.multigammaln: only floating point inputs are supported, got {x.dtype}")
    total = x.lgamma()
    for j in range(1, p):
        total = total + (x - j / 2).lgamma()
    return total + p * (p - 1) / 4 * math.log(math.pi)
