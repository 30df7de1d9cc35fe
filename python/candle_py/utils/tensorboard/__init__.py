"""`candle_py.utils.tensorboard`: `SummaryWriter`, as `torch.utils.tensorboard`.

    from candle_py.utils.tensorboard import SummaryWriter

    with SummaryWriter("runs/exp1") as writer:
        writer.add_scalar("loss", loss.item(), step)

Like PyTorch's module, this is a layer over the `tensorboard` package (its protobufs
and event-file writer): importing it without `tensorboard` installed raises the
same `ImportError` (`pip install tensorboard`), and the event files are those
PyTorch writes. It is not imported by `import candle_py`.
"""

import re as _re

import tensorboard as _tensorboard  # type: ignore[import-untyped, import-not-found, unused-ignore]


def _version_tuple(version: str) -> tuple:
    """The leading numeric release of a version string: "2.15.1rc0" -> (2, 15, 1)."""
    match = _re.match(r"\d+(\.\d+)*", version)
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


if _version_tuple(str(getattr(_tensorboard, "__version__", ""))) < (1, 15):
    raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above")

from tensorboard.summary.writer.record_writer import RecordWriter  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: E402

from .writer import FileWriter, SummaryWriter  # noqa: E402

__all__ = ["FileWriter", "RecordWriter", "SummaryWriter"]
