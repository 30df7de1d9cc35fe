"""`candle_py.nn`: PyTorch's `torch.nn` on Candle — `Module`, `Parameter`,
containers, layers (PyTorch's names, signatures and state_dict keys), losses."""
from . import functional, init
from .activation import (
    CELU, ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU,
    ReLU6, RReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh,
)
from .containers import Identity, ModuleDict, ModuleList, Sequential
from .linear import Bilinear, Dropout, Embedding, Flatten, Linear, Unflatten
from .loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss
from .module import Module, StateDictError
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm, RMSNorm
from .parameter import Buffer, Parameter

__all__ = [
    "functional", "init", "Module", "StateDictError", "Parameter", "Buffer",
    "Sequential", "ModuleList", "ModuleDict", "Identity",
    "Linear", "Bilinear", "Flatten", "Unflatten", "Dropout", "Embedding",
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
    "Sigmoid", "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softmax", "LogSoftmax",
    "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "MSELoss", "L1Loss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss",
]
