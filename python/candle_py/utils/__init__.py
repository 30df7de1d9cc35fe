"""`candle_py.utils`: data loading (`candle_py.utils.data`) and `checkpoint`.

`candle_py.utils.tensorboard` (`SummaryWriter`, needs the `tensorboard` package) is
not imported here: as `torch.utils.tensorboard`, import it by name."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
