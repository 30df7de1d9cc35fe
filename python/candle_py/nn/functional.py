"""`candle_py.nn.functional` (import as `F`): PyTorch's functional forms.

Every function is differentiable: the math is the core's (Tensor methods and the
`_core` kernels, each with its backward); Python adds PyTorch's signatures,
argument checks and defaults.

The functions live by family in `nn/_functional/` (activation, linear,
normalization, vision, loss, conv_pool, attention); this module is their public
face: it names them in `__all__` and checks their Tensor arguments.
"""

from __future__ import annotations

# The names this module held before its functions moved into families: shared
# imports and the private helpers nn's layers call as `F._x`; `F.<name>` still works.
import math  # noqa: F401
from typing import Any, Optional, Sequence, Tuple, Union  # noqa: F401

from .. import _core  # noqa: F401
from .._core import ShapeError, Tensor  # noqa: F401
from ..autograd import no_grad as _no_grad  # noqa: F401
from ._functional import elementwise as _elementwise
from ._functional.activation import (
    celu,
    elu,
    gelu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    log_softmax,
    mish,
    prelu,
    relu,
    relu6,
    rrelu,
    selu,
    sigmoid,
    silu,
    snake,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
)
from ._functional.attention import (  # noqa: F401
    _as_additive,
    multi_head_attention_forward,
    rotary_embedding,
    scaled_dot_product_attention,
)
from ._functional.common import _check_tensor  # noqa: F401
from ._functional.conv_pool import (  # noqa: F401
    _adaptive_size,
    _avg_pool_nd,
    _conv_nd,
    _conv_rank,
    _conv_transpose_nd,
    _lp_pool_nd,
    _max_pool_nd,
    _pool_args,
    _tuple_n,
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from ._functional.distance import cosine_similarity, pairwise_distance
from ._functional.dropout_more import alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout
from ._functional.elementwise import *  # noqa: F403 - the generated elementwise ops, named in their __all__
from ._functional.linear import bilinear, dropout, embedding, embedding_bag, linear, one_hot
from ._functional.loss import (  # noqa: F401
    _legacy,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    smooth_l1_loss,
)
from ._functional.loss_more import (
    cosine_embedding_loss,
    ctc_loss,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    poisson_nll_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from ._functional.normalization import (  # noqa: F401
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    normalize,
    rms_norm,
)
from ._functional.shuffle_fold import channel_shuffle, fold, pixel_shuffle, pixel_unshuffle, unfold
from ._functional.vision import _per_dim, _resize_dim, _Scale, _Size, interpolate, pad  # noqa: F401
from ._typecheck import type_check_functions as _type_check

# Tests sample from this list by position: append new names, never reorder.
__all__ = [
    "linear", "bilinear", "relu", "relu6", "leaky_relu", "prelu", "rrelu", "elu", "selu", "celu",
    "gelu", "silu", "mish", "sigmoid", "tanh", "hardtanh", "hardsigmoid", "hardswish", "softplus",
    "softmax", "log_softmax", "dropout", "embedding", "layer_norm", "rms_norm", "group_norm",
    "batch_norm", "normalize", "pad", "one_hot", "interpolate", "snake", "multi_head_attention_forward",
    "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "scaled_dot_product_attention",
    "softsign", "softmin", "hardshrink", "softshrink", "tanhshrink", "threshold", "glu",
    "cosine_similarity", "pairwise_distance",
    "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "instance_norm", "local_response_norm", "embedding_bag",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "unfold", "fold",
    "huber_loss", "soft_margin_loss", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
    "multi_margin_loss", "multilabel_margin_loss", "ctc_loss",
    "rotary_embedding",
]  # fmt: skip
# The elementwise ops generated from the core's table (tools/gen_surface.py).
__all__ += _elementwise.__all__

# Non-tensor inputs raise PyTorch's TypeError ("tanh(): argument 'input' (position 1)
# must be Tensor, not list") instead of an AttributeError from inside.
_type_check(globals(), __all__)
# The checked functions are this module's (as torch.nn.functional's are): their
# `__module__` names it, for pickling, help() and stubtest.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
