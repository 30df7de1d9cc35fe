"""`candle_py.onnx`: importable, as `torch.onnx`; exporting is not supported.

ONNX export needs a traced graph of the model (PyTorch's TorchScript or
`torch.export`), which candle_py, an eager-only library, does not build.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["export", "is_in_onnx_export"]


def export(model: Any, args: Any = (), f: Any = None, **kwargs: Any) -> NoReturn:
    """Raises NotImplementedError: candle_py builds no graph to export to ONNX
    (export the model from PyTorch, loading our `state_dict` there)."""
    raise NotImplementedError(
        "candle_py.onnx.export: ONNX export is not supported (candle_py runs eagerly and traces no graph); "
        "load the model's state_dict into the PyTorch model and export it with torch.onnx.export"
    )


def is_in_onnx_export() -> bool:
    """False: an ONNX export is never running."""
    return False
