"""Make the PyTorch reference fixtures for convolution and pooling layers.

Needs torch; the tests (tests/test_nn_conv_pool.py) never import it. Each case
writes tests/fixtures/nn/<case>.safetensors with:
  input, output, loss_weight, state.<key>, grad.input, grad.<param>
  (and indices for return_indices), where loss = (output * loss_weight).sum(),
and metadata {"kind": "conv_pool", "layer", "args", "kwargs", "forward_kwargs"
(JSON), "train"}.

Run from the repository root:  python tools/make_fixtures_conv.py [--only CASE ...]
(tools/make_fixtures.py also calls main() here.)
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "nn")

# (case name, layer class, args, kwargs, input shape, forward kwargs)
CASES: list[tuple[str, str, list[Any], dict[str, Any], tuple[int, ...], dict[str, Any]]] = [
    # Conv1d
    ("conv1d_basic", "Conv1d", [3, 4, 3], {}, (2, 3, 9), {}),
    ("conv1d_stride_pad", "Conv1d", [2, 5, 4], {"stride": 2, "padding": 2, "bias": False}, (1, 2, 11), {}),
    ("conv1d_same_dil", "Conv1d", [4, 4, 4], {"padding": "same", "dilation": 2}, (2, 4, 10), {}),
    ("conv1d_groups", "Conv1d", [4, 6, 3], {"groups": 2, "padding": 1}, (3, 4, 8), {}),
    ("conv1d_reflect", "Conv1d", [2, 3, 3], {"padding": 2, "padding_mode": "reflect"}, (2, 2, 7), {}),
    ("conv1d_unbatched", "Conv1d", [3, 2, 2], {"stride": 3}, (3, 10), {}),
    # Conv2d
    ("conv2d_basic", "Conv2d", [3, 4, 3], {}, (2, 3, 7, 6), {}),
    ("conv2d_stride_pad_tuple", "Conv2d", [3, 5, (3, 2)], {"stride": (2, 1), "padding": (1, 2)}, (2, 3, 9, 7), {}),
    ("conv2d_dilation", "Conv2d", [2, 3, 3], {"dilation": (2, 1), "padding": 1, "bias": False}, (1, 2, 9, 8), {}),
    ("conv2d_groups", "Conv2d", [6, 4, 3], {"groups": 2, "stride": 2}, (2, 6, 8, 9), {}),
    ("conv2d_depthwise", "Conv2d", [4, 8, 3], {"groups": 4, "padding": 1}, (2, 4, 7, 7), {}),
    ("conv2d_same_even", "Conv2d", [3, 2, (4, 3)], {"padding": "same"}, (1, 3, 6, 7), {}),
    ("conv2d_valid", "Conv2d", [2, 2, 2], {"padding": "valid"}, (2, 2, 5, 5), {}),
    ("conv2d_replicate", "Conv2d", [2, 3, 3], {"padding": (1, 2), "padding_mode": "replicate"}, (2, 2, 5, 6), {}),
    ("conv2d_circular", "Conv2d", [2, 3, 3], {"padding": 1, "padding_mode": "circular", "stride": 2}, (1, 2, 6, 5), {}),
    ("conv2d_reflect_same", "Conv2d", [2, 2, 3], {"padding": "same", "padding_mode": "reflect"}, (1, 2, 5, 5), {}),
    ("conv2d_1x1", "Conv2d", [5, 3, 1], {}, (2, 5, 4, 3), {}),
    ("conv2d_unbatched", "Conv2d", [2, 3, 2], {"padding": 1}, (2, 5, 4), {}),
    # Conv3d
    ("conv3d_basic", "Conv3d", [2, 3, 3], {}, (2, 2, 5, 4, 5), {}),
    ("conv3d_stride_pad", "Conv3d", [2, 4, (2, 3, 2)], {"stride": (1, 2, 2), "padding": (1, 1, 0), "bias": False}, (1, 2, 4, 6, 5), {}),
    ("conv3d_groups_dil", "Conv3d", [4, 4, 2], {"groups": 2, "dilation": 2, "padding": 1}, (2, 4, 4, 5, 4), {}),
    # ConvTranspose1d
    ("convt1d_basic", "ConvTranspose1d", [3, 2, 3], {}, (2, 3, 6), {}),
    ("convt1d_stride_outpad", "ConvTranspose1d", [2, 3, 4], {"stride": 3, "padding": 1, "output_padding": 2}, (2, 2, 5), {}),
    ("convt1d_groups_dil", "ConvTranspose1d", [4, 6, 3], {"groups": 2, "dilation": 2, "bias": False}, (1, 4, 5), {}),
    # ConvTranspose2d
    ("convt2d_basic", "ConvTranspose2d", [3, 4, 3], {}, (2, 3, 4, 5), {}),
    ("convt2d_stride_pad", "ConvTranspose2d", [3, 2, (3, 2)], {"stride": 2, "padding": (1, 0), "output_padding": (1, 0)}, (2, 3, 4, 3), {}),
    ("convt2d_groups", "ConvTranspose2d", [4, 6, 2], {"groups": 2, "stride": (2, 1), "dilation": (1, 2)}, (1, 4, 3, 4), {}),
    ("convt2d_depthwise", "ConvTranspose2d", [3, 3, 3], {"groups": 3, "stride": 2, "padding": 1, "bias": False}, (2, 3, 4, 4), {}),
    ("convt2d_output_size", "ConvTranspose2d", [2, 2, 3], {"stride": 2, "padding": 1}, (1, 2, 4, 4), {"output_size": [8, 8]}),
    ("convt2d_unbatched", "ConvTranspose2d", [2, 3, 2], {"stride": 2}, (2, 3, 3), {}),
    # ConvTranspose3d
    ("convt3d_basic", "ConvTranspose3d", [2, 3, 2], {"stride": 2}, (1, 2, 3, 3, 2), {}),
    (
        "convt3d_pad_outpad",
        "ConvTranspose3d",
        [2, 2, 3],
        {"stride": (2, 1, 2), "padding": 1, "output_padding": (1, 0, 1)},
        (2, 2, 3, 4, 3),
        {},
    ),
    # MaxPool
    ("maxpool1d_basic", "MaxPool1d", [3], {}, (2, 3, 10), {}),
    ("maxpool1d_stride_pad_idx", "MaxPool1d", [4], {"stride": 2, "padding": 2, "return_indices": True}, (2, 2, 9), {}),
    ("maxpool1d_dil_ceil", "MaxPool1d", [3], {"stride": 2, "dilation": 2, "ceil_mode": True}, (1, 3, 12), {}),
    ("maxpool2d_basic", "MaxPool2d", [2], {}, (2, 3, 8, 6), {}),
    ("maxpool2d_overlap_pad", "MaxPool2d", [3], {"stride": 2, "padding": 1}, (2, 2, 7, 9), {}),
    ("maxpool2d_ceil_idx", "MaxPool2d", [3], {"stride": 2, "ceil_mode": True, "return_indices": True}, (2, 2, 8, 7), {}),
    ("maxpool2d_tuple_dil", "MaxPool2d", [(3, 2)], {"stride": (2, 1), "dilation": (1, 2), "padding": (1, 0)}, (1, 3, 9, 8), {}),
    ("maxpool2d_unbatched", "MaxPool2d", [2], {"stride": 1}, (3, 5, 4), {}),
    ("maxpool3d_basic", "MaxPool3d", [2], {}, (2, 2, 4, 6, 4), {}),
    (
        "maxpool3d_pad_ceil_idx",
        "MaxPool3d",
        [3],
        {"stride": 2, "padding": 1, "ceil_mode": True, "return_indices": True},
        (1, 2, 5, 6, 7),
        {},
    ),
    # AvgPool
    ("avgpool1d_basic", "AvgPool1d", [3], {}, (2, 3, 10), {}),
    ("avgpool1d_pad_exclude", "AvgPool1d", [4], {"stride": 2, "padding": 2, "count_include_pad": False}, (2, 2, 9), {}),
    ("avgpool1d_ceil", "AvgPool1d", [3], {"stride": 2, "padding": 1, "ceil_mode": True}, (1, 2, 10), {}),
    ("avgpool2d_basic", "AvgPool2d", [2], {}, (2, 3, 8, 6), {}),
    ("avgpool2d_pad_include", "AvgPool2d", [3], {"stride": 2, "padding": 1}, (2, 2, 7, 8), {}),
    (
        "avgpool2d_pad_exclude_ceil",
        "AvgPool2d",
        [3],
        {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (2, 2, 8, 7),
        {},
    ),
    ("avgpool2d_divisor", "AvgPool2d", [(2, 3)], {"stride": (1, 2), "divisor_override": 4}, (1, 3, 6, 9), {}),
    ("avgpool2d_ceil_include", "AvgPool2d", [3], {"stride": 2, "padding": 1, "ceil_mode": True}, (1, 2, 8, 8), {}),
    ("avgpool3d_basic", "AvgPool3d", [2], {}, (2, 2, 4, 6, 4), {}),
    (
        "avgpool3d_pad_ceil",
        "AvgPool3d",
        [3],
        {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (1, 2, 5, 6, 7),
        {},
    ),
    ("avgpool3d_divisor", "AvgPool3d", [(1, 2, 2)], {"divisor_override": 3}, (1, 2, 3, 4, 4), {}),
    # Adaptive
    ("adaptive_avg1d", "AdaptiveAvgPool1d", [4], {}, (2, 3, 10), {}),
    ("adaptive_avg2d", "AdaptiveAvgPool2d", [(3, 4)], {}, (2, 3, 7, 10), {}),
    ("adaptive_avg2d_none", "AdaptiveAvgPool2d", [[None, 2]], {}, (1, 2, 5, 7), {}),
    ("adaptive_avg2d_global", "AdaptiveAvgPool2d", [1], {}, (2, 4, 5, 6), {}),
    ("adaptive_avg3d", "AdaptiveAvgPool3d", [(2, 3, 2)], {}, (1, 2, 5, 7, 3), {}),
    ("adaptive_max1d", "AdaptiveMaxPool1d", [3], {}, (2, 2, 8), {}),
    ("adaptive_max2d", "AdaptiveMaxPool2d", [(3, 2)], {}, (2, 3, 7, 5), {}),
    ("adaptive_max2d_idx", "AdaptiveMaxPool2d", [4], {"return_indices": True}, (1, 2, 9, 6), {}),
    ("adaptive_max3d", "AdaptiveMaxPool3d", [2], {}, (1, 2, 5, 4, 3), {}),
    # Output rows of 16+ positions with 6+ output channels per group: the f32 forward
    # takes the implicit GEMM (src/layers/conv/implicit.rs) unless the in-place kernel
    # (src/layers/conv/direct.rs: one group, dilation 1, 8+ output channels) takes it,
    # as it now does for `conv2d_implicit_basic` and `conv2d_implicit_deep`.
    ("conv2d_implicit_basic", "Conv2d", [3, 8, 3], {"padding": 1}, (2, 3, 9, 40), {}),
    ("conv2d_implicit_stride_dil", "Conv2d", [4, 12, (3, 5)], {"stride": 2, "padding": (2, 3), "dilation": (2, 1)}, (2, 4, 11, 70), {}),
    ("conv2d_implicit_groups", "Conv2d", [6, 14, 3], {"groups": 2, "padding": 1}, (1, 6, 5, 33), {}),
    ("conv2d_implicit_deep", "Conv2d", [40, 30, 3], {"padding": 1, "bias": False}, (1, 40, 4, 33), {}),
    ("conv1d_implicit", "Conv1d", [5, 9, 5], {"padding": 2}, (2, 5, 100), {}),
    ("conv1d_implicit_stride", "Conv1d", [3, 8, 4], {"stride": 3, "padding": 1}, (2, 3, 110), {}),
    ("conv3d_implicit", "Conv3d", [2, 6, 3], {"padding": 1}, (1, 2, 3, 4, 34), {}),
    # Stride-1 transposed convolutions with rows of 16+: the flipped-kernel forward.
    ("convt2d_implicit", "ConvTranspose2d", [6, 8, 3], {"padding": 1}, (2, 6, 5, 36), {}),
    ("convt1d_implicit_dil", "ConvTranspose1d", [4, 6, 3], {"dilation": 2}, (1, 4, 40), {}),
    # Stride 1, one group, output rows a multiple of 16 wide, 8+ output channels: the
    # f32 forward reads the image in place (src/layers/conv/direct.rs). Partial channel
    # blocks, an odd number of 16-wide runs, wide windows, no padding, 1-D.
    ("conv2d_direct_pad", "Conv2d", [3, 20, 3], {"padding": 1}, (2, 3, 5, 32), {}),
    ("conv2d_direct_odd_runs", "Conv2d", [4, 12, (3, 5)], {"padding": (1, 2), "bias": False}, (1, 4, 3, 16), {}),
    ("conv2d_direct_valid5", "Conv2d", [2, 9, 5], {}, (2, 2, 8, 20), {}),
    ("conv2d_direct_wide", "Conv2d", [8, 32, 3], {"padding": 1}, (1, 8, 4, 48), {}),
    ("conv1d_direct", "Conv1d", [3, 16, 3], {"padding": 1}, (2, 3, 64), {}),
    # Rows of 8 to 15: each vector gathers two or three rows.
    ("conv2d_direct_rows8", "Conv2d", [6, 13, 3], {"padding": 1}, (2, 6, 8, 8), {}),
    ("conv2d_direct_rows11", "Conv2d", [3, 12, (3, 5)], {"padding": (1, 0)}, (1, 3, 5, 15), {}),
    # x-stride 2 (even lanes of two loads), any y-stride.
    ("conv2d_direct_stride2", "Conv2d", [3, 16, 3], {"stride": 2, "padding": 1}, (2, 3, 9, 33), {}),
    ("conv2d_direct_stride2_1x1", "Conv2d", [4, 8, 1], {"stride": 2, "bias": False}, (1, 4, 6, 32), {}),
    ("conv2d_direct_stride32", "Conv2d", [2, 10, 3], {"stride": (3, 2), "padding": 1}, (1, 2, 10, 40), {}),
    # 16+ input channels per group: the f32 weight gradient multiplies channels-last
    # copies (src/layers/conv/wgrad_cl.rs). Rows of 8, stride 2 (3x3 and 1x1), groups,
    # channel counts off the 16s, 1-D and 3-D, and a transposed convolution (whose
    # weight gradient reads its upstream gradient as the image).
    ("conv2d_wgrad_cl", "Conv2d", [32, 24, 3], {"padding": 1}, (3, 32, 8, 8), {}),
    ("conv2d_wgrad_cl_stride2", "Conv2d", [20, 16, 3], {"stride": 2, "padding": 1, "bias": False}, (2, 20, 9, 9), {}),
    ("conv2d_wgrad_cl_1x1_stride2", "Conv2d", [24, 40, 1], {"stride": 2, "bias": False}, (2, 24, 8, 8), {}),
    ("conv2d_wgrad_cl_groups", "Conv2d", [36, 8, 3], {"groups": 2, "stride": (1, 2), "padding": 1, "dilation": (2, 1)}, (2, 36, 7, 9), {}),
    ("conv1d_wgrad_cl", "Conv1d", [17, 12, 5], {"stride": 3, "padding": 2}, (2, 17, 40), {}),
    ("conv3d_wgrad_cl", "Conv3d", [16, 6, 3], {"padding": 1}, (2, 16, 3, 4, 5), {}),
    ("convt2d_wgrad_cl", "ConvTranspose2d", [8, 20, 4], {"stride": 2, "padding": 1}, (2, 8, 5, 5), {}),
    # Strided, one group, 16+ image channels: the adjoint (the input gradient; a strided
    # transposed convolution's forward) adds tiles into a channels-last image
    # (src/layers/conv/adj_cl.rs); the cases above with strides take it too.
    ("convt2d_adj_cl_outpad", "ConvTranspose2d", [16, 24, 3], {"stride": 2, "padding": 1, "output_padding": 1}, (2, 16, 5, 6), {}),
    ("conv3d_adj_cl_stride2", "Conv3d", [20, 8, 3], {"stride": 2, "padding": 1}, (2, 20, 5, 6, 7), {}),
    # 3x3, stride 1, one group, 16+ channels each side: the f32 forward is Winograd
    # F(4x4, 3x3) (src/layers/conv/winograd.rs), and so is the input gradient (a 3x3
    # stride-1 convolution with the kernel flipped). Planes a multiple of 4 and odd ones
    # (partial tiles), pads 0 to 2, channel counts off the 16s and 32s, a transposed
    # convolution, and wide channel counts (the transforms' rounding grows with them).
    ("conv2d_winograd", "Conv2d", [16, 16, 3], {"padding": 1}, (2, 16, 8, 8), {}),
    ("conv2d_winograd_odd", "Conv2d", [20, 24, 3], {"padding": 1}, (2, 20, 9, 13), {}),
    ("conv2d_winograd_valid", "Conv2d", [17, 33, 3], {}, (1, 17, 11, 7), {}),
    ("conv2d_winograd_pad2", "Conv2d", [16, 18, 3], {"padding": 2, "bias": False}, (2, 16, 6, 10), {}),
    ("conv2d_winograd_wide", "Conv2d", [64, 64, 3], {"padding": 1}, (2, 64, 16, 16), {}),
    ("conv2d_winograd_deep", "Conv2d", [160, 96, 3], {"padding": 1, "bias": False}, (1, 160, 6, 6), {}),
    ("convt2d_winograd", "ConvTranspose2d", [16, 24, 3], {"padding": 1}, (2, 16, 7, 9), {}),
    # Strided, one group, 16+ input and 32+ output channels: the f32 forward runs as
    # register tiles over a channels-last copy (src/layers/conv/fwd_cl.rs). Tiles of 64,
    # 32 and 16 output channels with partial vectors, runs of positions with tails, 1x1,
    # dilation, 1-D and 3-D, and a transposed convolution (whose input gradient is such
    # a forward: 16 gradient channels into 32).
    ("conv2d_fwd_cl_k4", "Conv2d", [16, 64, 4], {"stride": 2, "padding": 1}, (3, 16, 10, 10), {}),
    ("conv2d_fwd_cl_odd", "Conv2d", [24, 40, 3], {"stride": 2, "padding": 1}, (2, 24, 9, 11), {}),
    ("conv2d_fwd_cl_1x1", "Conv2d", [32, 32, 1], {"stride": 2, "bias": False}, (2, 32, 7, 7), {}),
    ("conv1d_fwd_cl_dil", "Conv1d", [16, 33, 5], {"stride": 3, "padding": 2, "dilation": 2}, (2, 16, 31), {}),
    ("conv3d_fwd_cl", "Conv3d", [17, 32, 3], {"stride": (2, 1, 2), "padding": 1}, (2, 17, 4, 5, 6), {}),
    ("convt2d_fwd_cl", "ConvTranspose2d", [32, 16, 4], {"stride": 2, "padding": 1}, (2, 32, 5, 5), {}),
    # Depthwise (groups == input channels): taps summed in registers from a padded
    # plane (src/layers/conv/depthwise.rs), forward, input and weight gradients. Stride,
    # dilation, both, a channel multiplier, odd planes, 1-D and 3-D.
    ("conv2d_depthwise_stride2", "Conv2d", [32, 32, 3], {"groups": 32, "stride": 2, "padding": 1}, (2, 32, 11, 14), {}),
    ("conv2d_depthwise_dil2", "Conv2d", [16, 16, 3], {"groups": 16, "dilation": 2, "padding": 2, "bias": False}, (2, 16, 9, 13), {}),
    (
        "conv2d_depthwise_stride_dil",
        "Conv2d",
        [24, 24, (5, 3)],
        {"groups": 24, "stride": (2, 3), "dilation": (2, 1), "padding": (3, 1)},
        (1, 24, 15, 17),
        {},
    ),
    ("conv2d_depthwise_mult2_stride2", "Conv2d", [16, 32, 3], {"groups": 16, "stride": 2, "padding": 1}, (2, 16, 10, 9), {}),
    ("conv1d_depthwise_stride_dil", "Conv1d", [20, 20, 5], {"groups": 20, "stride": 2, "dilation": 3, "padding": 4}, (3, 20, 37), {}),
    ("conv3d_depthwise_stride2", "Conv3d", [8, 8, 3], {"groups": 8, "stride": 2, "padding": 1, "dilation": (1, 2, 1)}, (2, 8, 5, 9, 7), {}),
    # Rows of several vectors: the interior vectors take plain loads, the edges masks.
    ("conv2d_depthwise_wide", "Conv2d", [8, 8, 3], {"groups": 8, "padding": 1}, (2, 8, 5, 56), {}),
    ("conv2d_depthwise_wide_k5_mult2", "Conv2d", [4, 8, 5], {"groups": 4, "padding": 2}, (1, 4, 6, 70), {}),
    # The direct kernel's narrow tile (fewer than 8 output channels) and windows of up to
    # A window as large as the image (no padding): the three passes are plain GEMMs
    # (src/layers/conv/dense.rs). DCGAN's discriminator head and generator input layer.
    ("conv2d_dense_head", "Conv2d", [64, 1, 4], {}, (5, 64, 4, 4), {}),
    ("conv1d_dense", "Conv1d", [6, 9, 7], {"bias": False}, (3, 6, 7), {}),
    ("convt2d_dense_first", "ConvTranspose2d", [20, 32, 4], {}, (4, 20, 1, 1), {}),
    # Under 16 input channels per group, strided: the weight gradient multiplies small
    # blocks of columns on ops::sgemm, summed over threads (src/layers/conv/wgrad_cols.rs).
    ("conv2d_wgrad_cols_s2", "Conv2d", [3, 32, 4], {"stride": 2, "padding": 1}, (3, 3, 16, 16), {}),
    ("conv2d_wgrad_cols_7x7", "Conv2d", [3, 16, 7], {"stride": 2, "padding": 3, "bias": False}, (2, 3, 20, 20), {}),
    ("convt2d_wgrad_cols", "ConvTranspose2d", [32, 3, 4], {"stride": 2, "padding": 1}, (2, 32, 8, 8), {}),
    # 121 taps (9x9, 11x11: style-transfer and RGB output layers).
    ("conv2d_narrow_k9", "Conv2d", [6, 3, 9], {"padding": 4}, (2, 6, 12, 19), {}),
    ("conv2d_narrow_k11_s2", "Conv2d", [4, 1, 11], {"stride": 2, "padding": 3}, (1, 4, 23, 40), {}),
    ("conv1d_narrow_k7", "Conv1d", [5, 2, 7], {"padding": 3}, (3, 5, 37), {}),
    ("conv3d_narrow_co5", "Conv3d", [3, 5, 3], {"padding": 1}, (1, 3, 4, 6, 16), {}),
    ("conv2d_k9_co12", "Conv2d", [3, 12, 9], {"padding": 4}, (1, 3, 10, 20), {}),
    # 1-D, stride 1, 2 to 7 taps, one group, 16+ channels each side: the f32 forward is
    # Winograd F(9 - r, r) over 8 points (src/layers/conv/winograd1d.rs), and so is the
    # input gradient (the kernel flipped). Every tap count (tiles of 7 to 2 outputs),
    # lengths ending in a partial tile, pads from 0 to wider than the window, channel
    # counts off the vectors, several blocks per sample, and a transposed convolution.
    ("conv1d_winograd_k3", "Conv1d", [16, 16, 3], {"padding": 1}, (2, 16, 40), {}),
    ("conv1d_winograd_k5_odd", "Conv1d", [20, 33, 5], {"padding": 2}, (3, 20, 37), {}),
    ("conv1d_winograd_k7_valid", "Conv1d", [17, 24, 7], {"bias": False}, (2, 17, 31), {}),
    ("conv1d_winograd_k4_same", "Conv1d", [16, 18, 4], {"padding": "same"}, (1, 16, 29), {}),
    ("conv1d_winograd_k6_pad7", "Conv1d", [24, 16, 6], {"padding": 7}, (2, 24, 19), {}),
    ("conv1d_winograd_k2", "Conv1d", [32, 16, 2], {}, (2, 32, 23), {}),
    ("conv1d_winograd_wide", "Conv1d", [64, 64, 5], {"padding": 2}, (1, 64, 1100), {}),
    ("convt1d_winograd", "ConvTranspose1d", [16, 24, 5], {"padding": 2}, (2, 16, 33), {}),
    # "same" with an even window pads one more at the end than at the start: the
    # channels-last weight gradient's padded copy reaches past `pad` there.
    ("conv2d_same_even_wgrad_cl", "Conv2d", [16, 20, (4, 2)], {"padding": "same"}, (2, 16, 9, 10), {}),
    ("conv3d_same_even_wgrad_cl", "Conv3d", [16, 8, (2, 3, 4)], {"padding": "same", "bias": False}, (1, 16, 4, 5, 6), {}),
]


def _save(name: str, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> None:
    path = os.path.join(OUT, name + ".safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, path, metadata=meta)


def make_cases(only: Optional[list[str]] = None) -> int:
    """Write every case's file, or only the named ones (the others' files untouched: a
    run on another torch build can move their values by an ULP)."""
    for i, (name, layer, args, kwargs, shape, fwd_kwargs) in enumerate(CASES):
        if only is not None and name not in only:
            continue
        torch.manual_seed(3000 + i)
        m = getattr(torch.nn, layer)(*args, **kwargs)
        state = {"state." + k: v.clone() for k, v in m.state_dict().items()}
        x = torch.randn(*shape, requires_grad=True)
        y = m(x, **fwd_kwargs)
        extra: dict[str, torch.Tensor] = {}
        if isinstance(y, tuple):
            y, extra["indices"] = y
        w = torch.randn_like(y)
        (y * w).sum().backward()
        tensors = {"input": x, "output": y, "loss_weight": w, "grad.input": x.grad, **state, **extra}
        for k, p in m.named_parameters():
            tensors["grad." + k] = p.grad
        _save(
            name,
            tensors,
            {
                "kind": "conv_pool",
                "layer": layer,
                "args": json.dumps(args),
                "kwargs": json.dumps(kwargs),
                "forward_kwargs": json.dumps(fwd_kwargs),
                "train": "1",
            },
        )
    return len(CASES)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    torch.set_default_dtype(torch.float32)
    only = sys.argv[sys.argv.index("--only") + 1 :] if "--only" in sys.argv else None
    if only is not None and set(only) - {c[0] for c in CASES}:
        sys.exit(f"unknown cases: {sorted(set(only) - {c[0] for c in CASES})}")
    n = make_cases(only)
    print(f"wrote {n if only is None else len(only)} conv/pool fixture files to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
