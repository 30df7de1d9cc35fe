"""Make the PyTorch reference fixtures for the issue-22 nn layers, functions and losses.

Needs torch; the tests (tests/test_nn_more.py) never import it. Each case writes
tests/fixtures/nn_more/<case>.safetensors with
  in.<i>            the positional inputs (floats require grad unless marked "nograd")
  kw.<name>         tensor keyword arguments of the call (masks, offsets, ...)
  out.<j>           the outputs, flattened (tuples of tuples too), None left out
  lw.<j>            random weights: loss = sum_j (out.j * lw.j).sum()
  grad.in.<i>       gradients of the differentiable inputs (grad.kw.<name>: of keyword ones)
  state.<key>       the module's state_dict before the call, state_after.<key> after
  grad.param.<key>  gradients of the module's parameters
and metadata {"kind": "module" | "function", "target", "args", "kwargs" (constructor,
JSON; tensors as {"__tensor__": values}), "call_kwargs" (non-tensor call
arguments, JSON), "train", "repr" (the module's repr), "grad_inputs"}.

Run from the repository root:  python tools/make_fixtures_nn_more.py [CASE ...]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "nn_more")

NAN, INF = float("nan"), float("inf")
EDGE = [-INF, -30.0, -2.0, -0.5, -0.25, -0.0, 0.0, 0.25, 0.5, 0.75, 2.0, 30.0, INF, NAN]


def R(*shape: int) -> tuple:
    return ("randn", shape)


def P(*shape: int) -> tuple:
    """Positive floats in [0.5, 2)."""
    return ("rand", shape, 0.5, 2.0)


def I(lo: int, hi: int, *shape: int) -> tuple:  # noqa: E743 - short spec helpers read as a table
    return ("randint", lo, hi, shape)


def S(*shape: int) -> tuple:
    """Random +-1 floats (margin-loss targets), not differentiated."""
    return ("sign", shape)


def C(values: Any, dtype: str = "float32", grad: bool = True) -> tuple:
    return ("const", values, dtype, grad)


def T(values: Any) -> dict:
    """A tensor inside constructor kwargs."""
    return {"__tensor__": values}


SQ_MASK = [[0.0, -INF, -INF, -INF, -INF], [0.0, 0.0, -INF, -INF, -INF], [0.0, 0.0, 0.0, -INF, -INF],
           [0.0, 0.0, 0.0, 0.0, -INF], [0.0, 0.0, 0.0, 0.0, 0.0]]  # fmt: skip
KPM = [[False, False, False, False, True], [False, False, False, False, False]]

# (name, kind, target, ctor args, ctor kwargs, inputs, call kwargs (tensors as C(...)), train)
CASES: list[tuple[str, str, str, list[Any], dict[str, Any], list[tuple], dict[str, Any], bool]] = [
    # activations
    ("softsign", "module", "Softsign", [], {}, [R(3, 7)], {}, True),
    ("softsign_edges", "function", "softsign", [], {}, [C(EDGE)], {}, True),
    ("softmin", "module", "Softmin", [], {"dim": 1}, [R(3, 7)], {}, True),
    ("softmin_dim0", "module", "Softmin", [0], {}, [R(3, 4, 2)], {}, True),
    ("hardshrink", "module", "Hardshrink", [], {}, [R(3, 7)], {}, True),
    ("hardshrink_edges", "function", "hardshrink", [], {"lambd": 0.25}, [C(EDGE)], {}, True),
    ("softshrink", "module", "Softshrink", [0.3], {}, [R(3, 7)], {}, True),
    ("softshrink_edges", "function", "softshrink", [], {"lambd": 0.25}, [C(EDGE)], {}, True),
    ("tanhshrink", "module", "Tanhshrink", [], {}, [R(3, 7)], {}, True),
    ("threshold", "module", "Threshold", [0.1, 20.0], {}, [R(3, 7)], {}, True),
    ("threshold_edges", "function", "threshold", [0.25, -3.0], {}, [C(EDGE)], {}, True),
    ("glu", "module", "GLU", [], {}, [R(3, 8)], {}, True),
    ("glu_dim1", "module", "GLU", [1], {}, [R(2, 6, 3)], {}, True),
    # distances
    ("cosine_similarity", "module", "CosineSimilarity", [], {}, [R(4, 5), R(4, 5)], {}, True),
    ("cosine_similarity_bcast", "module", "CosineSimilarity", [], {"dim": -1, "eps": 1e-6}, [R(3, 1, 5), R(4, 5)], {}, True),
    ("cosine_similarity_zero", "function", "cosine_similarity", [], {}, [C([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]), R(2, 3)], {}, True),
    ("pairwise_distance", "module", "PairwiseDistance", [], {}, [R(4, 5), R(4, 5)], {}, True),
    ("pairwise_distance_p1_keep", "module", "PairwiseDistance", [1.0], {"keepdim": True}, [R(4, 5), R(1, 5)], {}, True),
    ("pairwise_distance_pinf", "function", "pairwise_distance", [], {"p": INF}, [R(4, 5), R(4, 5)], {}, True),
    # dropout in evaluation (identity), normalization
    ("dropout2d_eval", "module", "Dropout2d", [0.3], {}, [R(2, 3, 4, 4)], {}, False),
    ("alpha_dropout_eval", "module", "AlphaDropout", [0.3], {}, [R(4, 5)], {}, False),
    ("instance_norm1d", "module", "InstanceNorm1d", [3], {}, [R(2, 3, 6)], {}, True),
    (
        "instance_norm2d_affine_track",
        "module",
        "InstanceNorm2d",
        [3],
        {"affine": True, "track_running_stats": True},
        [R(2, 3, 4, 5)],
        {},
        True,
    ),
    (
        "instance_norm2d_track_eval",
        "module",
        "InstanceNorm2d",
        [3],
        {"affine": True, "track_running_stats": True},
        [R(2, 3, 4, 5)],
        {},
        False,
    ),
    ("instance_norm3d_unbatched", "module", "InstanceNorm3d", [2], {"affine": True, "eps": 1e-3}, [R(2, 3, 2, 4)], {}, True),
    ("local_response_norm", "module", "LocalResponseNorm", [3], {}, [R(2, 6, 5)], {}, True),
    ("local_response_norm_4d", "module", "LocalResponseNorm", [2], {"alpha": 0.1, "beta": 0.5, "k": 2.0}, [R(2, 5, 3, 4)], {}, True),
    # pixel / channel shuffles, padding, fold
    ("pixel_shuffle", "module", "PixelShuffle", [2], {}, [R(2, 8, 3, 4)], {}, True),
    ("pixel_unshuffle", "module", "PixelUnshuffle", [2], {}, [R(1, 3, 4, 6)], {}, True),
    ("pixel_shuffle_5d", "function", "pixel_shuffle", [3], {}, [R(2, 1, 9, 2, 2)], {}, True),
    ("channel_shuffle", "module", "ChannelShuffle", [2], {}, [R(2, 6, 3)], {}, True),
    ("zero_pad2d", "module", "ZeroPad2d", [[1, 2, 0, 3]], {}, [R(2, 3, 4)], {}, True),
    ("zero_pad1d_neg", "module", "ZeroPad1d", [[-1, 2]], {}, [R(2, 3, 4)], {}, True),
    ("constant_pad3d", "module", "ConstantPad3d", [1, 2.5], {}, [R(1, 2, 2, 3, 2)], {}, True),
    ("reflection_pad1d", "module", "ReflectionPad1d", [[3, 1]], {}, [R(2, 3, 5)], {}, True),
    ("reflection_pad2d", "module", "ReflectionPad2d", [2], {}, [R(1, 2, 4, 5)], {}, True),
    ("reflection_pad3d", "module", "ReflectionPad3d", [1], {}, [R(1, 1, 3, 3, 2)], {}, True),
    ("replication_pad1d", "module", "ReplicationPad1d", [[2, 4]], {}, [R(2, 3, 5)], {}, True),
    ("replication_pad2d", "module", "ReplicationPad2d", [[1, 0, 2, 3]], {}, [R(2, 4, 3)], {}, True),
    ("replication_pad3d", "module", "ReplicationPad3d", [1], {}, [R(1, 2, 2, 3, 2)], {}, True),
    ("circular_pad1d", "module", "CircularPad1d", [[2, 1]], {}, [R(2, 3, 5)], {}, True),
    ("circular_pad2d", "module", "CircularPad2d", [[1, 2, 2, 0]], {}, [R(1, 2, 4, 3)], {}, True),
    ("circular_pad3d", "module", "CircularPad3d", [1], {}, [R(1, 1, 3, 2, 2)], {}, True),
    ("unfold", "module", "Unfold", [[2, 3]], {"padding": 1, "stride": [2, 1]}, [R(2, 3, 5, 6)], {}, True),
    ("unfold_dilation_unbatched", "module", "Unfold", [2], {"dilation": 2}, [R(2, 5, 5)], {}, True),
    ("fold", "module", "Fold", [[4, 5], [2, 2]], {"stride": 1}, [R(2, 12, 12)], {}, True),
    ("fold_pad_stride", "module", "Fold", [[5, 6], 3], {"padding": 1, "stride": 2, "dilation": 1}, [R(1, 18, 9)], {}, True),
    ("upsampling_nearest2d", "module", "UpsamplingNearest2d", [], {"scale_factor": 2}, [R(1, 2, 3, 4)], {}, True),
    ("upsampling_bilinear2d", "module", "UpsamplingBilinear2d", [], {"size": [5, 7]}, [R(1, 2, 3, 4)], {}, True),
    # embedding bag
    ("embedding_bag_mean_2d", "module", "EmbeddingBag", [10, 3], {}, [I(0, 10, 4, 3)], {}, True),
    (
        "embedding_bag_sum_offsets",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"mode": "sum"},
        [C([1, 2, 4, 5, 4, 3, 2, 9], "int64")],
        {"offsets": C([0, 2, 2, 5], "int64")},
        True,
    ),
    (
        "embedding_bag_max",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"mode": "max"},
        [C([1, 2, 4, 5, 4, 3, 2, 9], "int64")],
        {"offsets": C([0, 4, 4], "int64")},
        True,
    ),
    (
        "embedding_bag_psw_last_offset",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"mode": "sum", "include_last_offset": True},
        [C([1, 2, 4, 5, 4, 3, 2, 9], "int64")],
        {"offsets": C([0, 3, 8], "int64"), "per_sample_weights": R(8)},
        True,
    ),
    (
        "embedding_bag_padding_mean",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"padding_idx": 2},
        [C([[1, 2, 4], [2, 2, 2], [3, 2, 9]], "int64")],
        {},
        True,
    ),
    (
        "embedding_bag_freq_sum",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"mode": "sum", "scale_grad_by_freq": True},
        [C([1, 2, 4, 5, 4, 3, 2, 9, 2], "int64")],
        {"offsets": C([0, 2, 2, 5], "int64"), "per_sample_weights": R(9)},
        True,
    ),
    (
        "embedding_bag_freq_mean_padding",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"scale_grad_by_freq": True, "padding_idx": 3},
        [C([[1, 2, 4], [2, 2, 3], [3, 2, 9]], "int64")],
        {},
        True,
    ),
    # recurrent
    ("rnn_tanh", "module", "RNN", [4, 5], {}, [R(6, 3, 4)], {}, True),
    (
        "rnn_relu_2layer_bidir_bf",
        "module",
        "RNN",
        [3, 4],
        {"num_layers": 2, "nonlinearity": "relu", "bidirectional": True, "batch_first": True},
        [R(2, 5, 3)],
        {},
        True,
    ),
    ("rnn_h0_unbatched_nobias", "module", "RNN", [3, 2], {"bias": False}, [R(4, 3), R(1, 2)], {}, True),
    ("rnn_cell", "module", "RNNCell", [4, 5], {}, [R(3, 4), R(3, 5)], {}, True),
    ("rnn_cell_relu_nobias_unbatched", "module", "RNNCell", [4, 5], {"bias": False, "nonlinearity": "relu"}, [R(4)], {}, True),
    ("lstm_cell", "module", "LSTMCell", [4, 5], {}, [R(3, 4)], {}, True),
    ("gru_cell", "module", "GRUCell", [4, 5], {}, [R(3, 4), R(3, 5)], {}, True),
    # transformer
    (
        "tel_post",
        "module",
        "TransformerEncoderLayer",
        [8, 2],
        {"dim_feedforward": 16, "dropout": 0.0},
        [R(5, 2, 8)],
        {"src_mask": C(SQ_MASK, grad=False), "src_key_padding_mask": C(KPM, "bool")},
        True,
    ),
    (
        "tel_pre_gelu_bf",
        "module",
        "TransformerEncoderLayer",
        [8, 4],
        {"dim_feedforward": 12, "dropout": 0.0, "activation": "gelu", "norm_first": True, "batch_first": True},
        [R(2, 5, 8)],
        {"src_key_padding_mask": C(KPM, "bool")},
        True,
    ),
    (
        "tel_eval_nobias",
        "module",
        "TransformerEncoderLayer",
        [8, 2],
        {"dim_feedforward": 16, "bias": False, "layer_norm_eps": 1e-3},
        [R(4, 8)],
        {},
        False,
    ),
    (
        "tdl_post",
        "module",
        "TransformerDecoderLayer",
        [8, 2],
        {"dim_feedforward": 16, "dropout": 0.0},
        [R(5, 2, 8), R(6, 2, 8)],
        {"tgt_mask": C(SQ_MASK, grad=False), "memory_key_padding_mask": C([[False] * 5 + [True], [False] * 6], "bool")},
        True,
    ),
    (
        "tdl_pre_bf",
        "module",
        "TransformerDecoderLayer",
        [8, 2],
        {"dim_feedforward": 16, "dropout": 0.0, "norm_first": True, "batch_first": True},
        [R(2, 5, 8), R(2, 3, 8)],
        {"tgt_mask": C(SQ_MASK, grad=False), "tgt_is_causal": True},
        True,
    ),
    (
        "transformer",
        "module",
        "Transformer",
        [],
        {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 1, "dim_feedforward": 16, "dropout": 0.0},
        [R(4, 2, 8), R(5, 2, 8)],
        {"tgt_mask": C(SQ_MASK, grad=False), "src_key_padding_mask": C([[False, False, False, True], [False] * 4], "bool")},
        True,
    ),
    (
        "transformer_bf_prenorm",
        "module",
        "Transformer",
        [],
        {
            "d_model": 8,
            "nhead": 4,
            "num_encoder_layers": 1,
            "num_decoder_layers": 2,
            "dim_feedforward": 8,
            "dropout": 0.0,
            "batch_first": True,
            "norm_first": True,
            "activation": "gelu",
        },
        [R(2, 3, 8), R(2, 5, 8)],
        {"tgt_mask": C(SQ_MASK, grad=False), "tgt_is_causal": True},
        True,
    ),
    # losses
    ("huber", "module", "HuberLoss", [], {}, [R(4, 3), ("scaled", (4, 3), 2.0)], {}, True),
    ("huber_delta_none", "module", "HuberLoss", [], {"delta": 0.5, "reduction": "none"}, [R(4, 3), R(4, 3)], {}, True),
    ("soft_margin", "module", "SoftMarginLoss", [], {}, [R(4, 3), S(4, 3)], {}, True),
    (
        "soft_margin_large",
        "function",
        "soft_margin_loss",
        [],
        {"reduction": "sum"},
        [C([[-100.0, 50.0, 0.0]]), C([[1.0, -1.0, 1.0]], grad=False)],
        {},
        True,
    ),
    ("margin_ranking", "module", "MarginRankingLoss", [], {"margin": 0.2}, [R(6), R(6), S(6)], {}, True),
    ("hinge_embedding", "module", "HingeEmbeddingLoss", [], {"margin": 0.5}, [R(4, 3), S(4, 3)], {}, True),
    ("hinge_embedding_none", "module", "HingeEmbeddingLoss", [], {"reduction": "none"}, [R(5), S(5)], {}, True),
    ("cosine_embedding", "module", "CosineEmbeddingLoss", [], {"margin": 0.1}, [R(5, 4), R(5, 4), S(5)], {}, True),
    ("cosine_embedding_1d_sum", "module", "CosineEmbeddingLoss", [], {"reduction": "sum"}, [R(4), R(4), C(-1.0, grad=False)], {}, True),
    ("triplet_margin", "module", "TripletMarginLoss", [], {}, [R(5, 4), R(5, 4), R(5, 4)], {}, True),
    (
        "triplet_margin_swap_p1",
        "module",
        "TripletMarginLoss",
        [],
        {"margin": 2.0, "p": 1.0, "swap": True, "reduction": "none"},
        [R(5, 4), R(5, 4), R(5, 4)],
        {},
        True,
    ),
    ("poisson_nll", "module", "PoissonNLLLoss", [], {}, [R(4, 3), P(4, 3)], {}, True),
    (
        "poisson_nll_full_nolog",
        "module",
        "PoissonNLLLoss",
        [],
        {"log_input": False, "full": True, "reduction": "sum"},
        [P(4, 3), ("rand", (4, 3), 0.0, 4.0)],
        {},
        True,
    ),
    ("gaussian_nll", "module", "GaussianNLLLoss", [], {}, [R(4, 3), R(4, 3), P(4, 3)], {}, True),
    (
        "gaussian_nll_full_hetero",
        "module",
        "GaussianNLLLoss",
        [],
        {"full": True, "reduction": "none", "eps": 0.1},
        [R(4, 3), R(4, 3), ("rand", (4, 1), 0.01, 1.0)],
        {},
        True,
    ),
    ("gaussian_nll_var_nolast", "module", "GaussianNLLLoss", [], {"reduction": "sum"}, [R(4, 3), R(4, 3), P(4)], {}, True),
    ("multilabel_soft_margin", "module", "MultiLabelSoftMarginLoss", [], {}, [R(4, 5), ("randint_f", 0, 2, (4, 5))], {}, True),
    (
        "multilabel_soft_margin_weight",
        "module",
        "MultiLabelSoftMarginLoss",
        [],
        {"weight": T([1.0, 2.0, 0.5, 1.5, 1.0]), "reduction": "none"},
        [R(4, 5), ("randint_f", 0, 2, (4, 5))],
        {},
        True,
    ),
    ("multi_margin", "module", "MultiMarginLoss", [], {}, [R(5, 4), I(0, 4, 5)], {}, True),
    (
        "multi_margin_p2_weight",
        "module",
        "MultiMarginLoss",
        [],
        {"p": 2, "margin": 0.7, "weight": T([1.0, 2.0, 0.5, 1.5]), "reduction": "none"},
        [R(5, 4), I(0, 4, 5)],
        {},
        True,
    ),
    ("multi_margin_1d", "function", "multi_margin_loss", [], {}, [R(4), C(2, "int64")], {}, True),
    (
        "multilabel_margin",
        "module",
        "MultiLabelMarginLoss",
        [],
        {},
        [R(3, 4), C([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]], "int64")],
        {},
        True,
    ),
    (
        "multilabel_margin_1d_none",
        "function",
        "multilabel_margin_loss",
        [],
        {"reduction": "none"},
        [R(4), C([2, -1, 0, 0], "int64")],
        {},
        True,
    ),
    # CTC: log-probabilities from log_softmax of random logits, targets padded or concatenated
    (
        "ctc_mean",
        "module",
        "CTCLoss",
        [],
        {},
        [("logsm", (7, 3, 5)), C([[1, 2, 2, 3], [4, 1, 0, 0], [3, 3, 1, 0]], "int64"), C([7, 6, 5], "int64"), C([4, 2, 3], "int64")],
        {},
        True,
    ),
    (
        "ctc_sum_concat_blank_last",
        "module",
        "CTCLoss",
        [],
        {"blank": 4, "reduction": "sum"},
        [("logsm", (6, 2, 5)), C([0, 1, 1, 3, 2], "int64"), C([6, 4], "int64"), C([3, 2], "int64")],
        {},
        True,
    ),
    (
        "ctc_none_infeasible",
        "module",
        "CTCLoss",
        [],
        {"reduction": "none"},
        [("logsm", (4, 2, 3)), C([[1, 1, 1], [2, 1, 0]], "int64"), C([4, 3], "int64"), C([3, 2], "int64")],
        {},
        True,
    ),
    (
        "ctc_zero_infinity_mean",
        "module",
        "CTCLoss",
        [],
        {"zero_infinity": True},
        [("logsm", (4, 2, 3)), C([[1, 1, 1], [2, 1, 0]], "int64"), C([4, 3], "int64"), C([3, 0], "int64")],
        {},
        True,
    ),
    (
        "ctc_unbatched",
        "function",
        "ctc_loss",
        [],
        {"reduction": "sum"},
        [("logsm", (5, 4)), C([1, 3], "int64"), C(5, "int64"), C(2, "int64")],
        {},
        True,
    ),
    (
        "ctc_float64",
        "function",
        "ctc_loss",
        [],
        {},
        [("logsm64", (8, 2, 6)), C([[5, 2, 2], [1, 4, 3]], "int64"), C([8, 7], "int64"), C([3, 3], "int64")],
        {},
        True,
    ),
    # more edges: renorming bags, the other p-norms, unbatched fold, float64, a float variance, empty batches
    (
        "embedding_bag_max_norm",
        "module",
        "EmbeddingBag",
        [10, 3],
        {"max_norm": 1.0, "mode": "sum"},
        [C([[1, 2, 4], [4, 3, 9]], "int64")],
        {},
        True,
    ),
    (
        "pairwise_distance_p0",
        "function",
        "pairwise_distance",
        [],
        {"p": 0.0},
        [C([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]]), C([[1.0, 0.0, 3.0], [0.0, 1.0, 0.0]])],
        {},
        True,
    ),
    ("pairwise_distance_p3", "function", "pairwise_distance", [], {"p": 3.0}, [R(4, 5), R(4, 5)], {}, True),
    ("fold_unbatched", "function", "fold", [[3, 4], 2], {}, [R(8, 6)], {}, True),
    ("softmin_float64", "function", "softmin", [], {"dim": 0}, [("logsm64", (3, 4))], {}, True),
    ("gaussian_nll_float_var", "function", "gaussian_nll_loss", [], {"var": 0.5}, [R(4, 3), R(4, 3)], {}, True),
    ("unfold_empty_batch", "function", "unfold", [2], {}, [R(0, 2, 3, 3)], {}, True),
    ("huber_empty", "function", "huber_loss", [], {"reduction": "sum"}, [R(0, 3), R(0, 3)], {}, True),
    # recurrent layers wide enough that the fused time loop shares its work over two
    # threads (batch x gates x hidden^2 >= 2^16), with given initial states: by samples
    # from a batch of 12 (here 16, and 13 split 6 + 7), by hidden units below (batch 8)
    (
        "lstm_wide_2layer_bidir_hx",
        "module",
        "LSTM",
        [24, 72],
        {"num_layers": 2, "bidirectional": True},
        [R(7, 16, 24), R(4, 16, 72), R(4, 16, 72)],
        {},
        True,
    ),
    (
        "gru_wide_bidir_batch_first_h0",
        "module",
        "GRU",
        [24, 72],
        {"bidirectional": True, "batch_first": True},
        [R(16, 7, 24), R(2, 16, 72)],
        {},
        True,
    ),
    ("rnn_relu_wide_2layer", "module", "RNN", [24, 96], {"num_layers": 2, "nonlinearity": "relu"}, [R(6, 16, 24)], {}, True),
    (
        "rnn_tanh_wide_reverse_nobias",
        "module",
        "RNN",
        [24, 96],
        {"bidirectional": True, "bias": False},
        [R(6, 16, 24), R(2, 16, 96)],
        {},
        True,
    ),
    ("lstm_cell_wide_hx", "module", "LSTMCell", [24, 72], {}, [R(16, 24), R(16, 72), R(16, 72)], {}, True),
    ("lstm_wide_2layer_batch8_units", "module", "LSTM", [24, 72], {"num_layers": 2}, [R(6, 8, 24)], {}, True),
    ("gru_wide_bidir_batch13_rows", "module", "GRU", [24, 72], {"bidirectional": True}, [R(6, 13, 24), R(2, 13, 72)], {}, True),
]


def _make_input(spec: tuple, gen_grad: bool = True) -> tuple[torch.Tensor, bool]:
    kind = spec[0]
    if kind == "randn":
        return torch.randn(*spec[1]), True
    if kind == "scaled":
        return torch.randn(*spec[1]) * spec[2], True
    if kind == "rand":
        _, shape, lo, hi = spec
        return torch.rand(*shape) * (hi - lo) + lo, True
    if kind in ("logsm", "logsm64"):
        dt = torch.float64 if kind == "logsm64" else torch.float32
        return torch.randn(*spec[1], dtype=dt).log_softmax(-1), True
    if kind == "randint":
        _, lo, hi, shape = spec
        return torch.randint(lo, hi, shape), False
    if kind == "randint_f":
        _, lo, hi, shape = spec
        return torch.randint(lo, hi, shape).float(), False
    if kind == "sign":
        return torch.randint(0, 2, spec[1]).float() * 2 - 1, False
    if kind == "const":
        _, values, dtype, grad = spec
        t = torch.tensor(values, dtype=getattr(torch, dtype))
        return t, grad and t.is_floating_point()
    raise ValueError(spec)


def _ctor(v: Any) -> Any:
    if isinstance(v, dict) and "__tensor__" in v:
        return torch.tensor(v["__tensor__"])
    return v


def _flatten(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flatten(o)]
    return []


def make(only: Optional[set[str]] = None) -> None:
    os.makedirs(OUT, exist_ok=True)
    for i, (name, kind, target, args, kwargs, inputs, call_kwargs, train) in enumerate(CASES):
        if only is not None and name not in only:
            continue
        torch.manual_seed(5000 + i)
        tensors: dict[str, torch.Tensor] = {}
        meta: dict[str, str] = {
            "kind": kind,
            "target": target,
            "args": json.dumps(args),
            "kwargs": json.dumps(kwargs),
            "train": str(int(train)),
        }
        m = None
        if kind == "module":
            m = getattr(torch.nn, target)(*args, **{k: _ctor(v) for k, v in kwargs.items()})
            m.train(train)
            if target.startswith("InstanceNorm") and m.affine:
                with torch.no_grad():
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
            if target.startswith("InstanceNorm") and m.track_running_stats:
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
            tensors.update({"state." + k: v.clone() for k, v in m.state_dict().items()})
            meta["repr"] = repr(m)
        xs, grads = [], []
        for j, spec in enumerate(inputs):
            x, g = _make_input(spec)
            x = x.requires_grad_(g) if g else x
            xs.append(x)
            tensors[f"in.{j}"] = x
            if g:
                grads.append(j)
        call: dict[str, Any] = {}
        plain: dict[str, Any] = {}
        for k, spec in call_kwargs.items():
            if isinstance(spec, tuple):
                t, g = _make_input(spec)
                # Random float keyword tensors (per_sample_weights) are differentiated too.
                call[k] = t.requires_grad_(g and spec[0] != "const")
                tensors[f"kw.{k}"] = t
            else:
                call[k] = plain[k] = spec
        fn = m if m is not None else getattr(F, target)
        if m is not None and target in ("LSTM", "LSTMCell") and len(xs) == 3:
            # An LSTM's initial state is the pair (h0, c0): inputs 1 and 2.
            meta["hx_pair"] = "1"
            out = fn(xs[0], (xs[1], xs[2]), **call)
        else:
            out = fn(*xs, **call) if m is not None else fn(*xs, *args, **kwargs, **call)
        outs = _flatten(out)
        loss = torch.zeros(())
        for j, o in enumerate(outs):
            w = torch.randn_like(o)
            tensors[f"out.{j}"], tensors[f"lw.{j}"] = o, w
            if o.requires_grad:
                loss = loss + (torch.where(torch.isfinite(o), o, 0.0) * w).sum()
        if loss.requires_grad:
            loss.backward()
        for j in grads:
            if xs[j].grad is not None:
                tensors[f"grad.in.{j}"] = xs[j].grad
        for k, v in call.items():
            if isinstance(v, torch.Tensor) and v.grad is not None:
                tensors[f"grad.kw.{k}"] = v.grad
        if m is not None:
            tensors.update({"state_after." + k: v for k, v in m.state_dict().items()})
            for k, p in m.named_parameters():
                if p.grad is not None:
                    tensors["grad.param." + k] = p.grad
        meta["call_kwargs"] = json.dumps(plain)
        meta["grad_inputs"] = json.dumps(grads)
        meta["n_out"] = str(len(outs))
        save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, os.path.join(OUT, name + ".safetensors"), metadata=meta)


if __name__ == "__main__":
    make(set(sys.argv[1:]) or None)
