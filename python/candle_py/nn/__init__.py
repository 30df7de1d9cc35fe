"""`candle_py.nn`: PyTorch's `torch.nn` on Candle — `Module`, `Parameter`,
containers, layers (PyTorch's names, signatures and state_dict keys), losses."""
from . import functional, init, utils
from .activation import (
    CELU, ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU,
    ReLU6, RReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh,
)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d,
    AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
)
from .attention import MultiheadAttention
from .containers import Identity, ModuleDict, ModuleList, Sequential
from .linear import Bilinear, Dropout, Embedding, Flatten, Linear, Unflatten
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .module import Module, StateDictError
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm
from .parameter import Buffer, Parameter
from .rnn import GRU, LSTM
from .snake import Snake1d
from .upsampling import Upsample
from ._typecheck import type_check_forwards as _type_check

# Built-in layers' forward raises TypeError for a non-tensor input, as in PyTorch
# (containers and Identity pass anything through, so they are left alone).
_type_check([v for v in list(globals().values()) if isinstance(v, type) and issubclass(v, Module)
             and v not in (Module, Sequential, ModuleList, ModuleDict, Identity)], Module)

__all__ = [
    "functional", "init", "utils", "Snake1d", "Module", "StateDictError", "Parameter", "Buffer",
    "Sequential", "ModuleList", "ModuleDict", "Identity",
    "Linear", "Bilinear", "Flatten", "Unflatten", "Dropout", "Embedding",
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
    "Sigmoid", "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softmax", "LogSoftmax",
    "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "MultiheadAttention", "LSTM", "GRU", "Upsample",
    "MSELoss", "L1Loss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
]
