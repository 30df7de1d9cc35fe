"""`candle_py.nn`: PyTorch's `torch.nn` on Candle — `Module`, `Parameter`,
containers, layers (PyTorch's names, signatures and state_dict keys), losses.

Each layer family's module lists its public names in its `__all__`; this
package re-exports them, so a new layer is named in its own module only."""

from . import (
    activation,
    containers,
    conv,
    distance,
    dropout,
    elementwise,
    fold,
    functional,
    init,
    linear,
    loss,
    loss_more,
    modules,
    normalization,
    padding,
    parallel,
    pixelshuffle,
    pooling,
    quantized,
    rnn,
    snake,
    transformer,
    utils,
)
from ._typecheck import type_check_forwards as _type_check
from .activation import *  # noqa: F403
from .attention import MultiheadAttention
from .containers import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .elementwise import *  # noqa: F403
from .fold import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .loss_more import *  # noqa: F403
from .module import Buffer, Module, Parameter, StateDictError
from .normalization import *  # noqa: F403
from .padding import *  # noqa: F403
from .parallel import DataParallel
from .pixelshuffle import *  # noqa: F403
from .pooling import *  # noqa: F403
from .quantized import *  # noqa: F403
from .rnn import *  # noqa: F403
from .snake import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

# Built-in layers' forward raises TypeError for a non-tensor input, as in PyTorch
# (containers and Identity pass anything through, so they are left alone).
_type_check(
    [
        v
        for v in list(globals().values())
        if isinstance(v, type) and issubclass(v, Module) and v not in (Module, *(getattr(containers, n) for n in containers.__all__))
    ],
    Module,
)

# attention.py and upsampling.py also re-export their functional forms (F.*), and
# module.py its hook handle; only their layers are nn's.
__all__ = [
    "functional",
    "init",
    "utils",
    "modules",
    "parallel",
    "DataParallel",
    "Module",
    "StateDictError",
    "Parameter",
    "Buffer",
    "MultiheadAttention",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
]
__all__ += activation.__all__
__all__ += containers.__all__
__all__ += elementwise.__all__
__all__ += conv.__all__
__all__ += linear.__all__
__all__ += loss.__all__
__all__ += normalization.__all__
__all__ += pooling.__all__
__all__ += quantized.__all__
__all__ += rnn.__all__
__all__ += snake.__all__
__all__ += distance.__all__
__all__ += dropout.__all__
__all__ += fold.__all__
__all__ += loss_more.__all__
__all__ += padding.__all__
__all__ += pixelshuffle.__all__
__all__ += transformer.__all__
