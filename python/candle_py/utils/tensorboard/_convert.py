"""Array helpers of `candle_py.utils.tensorboard`: values to NumPy (`make_np`), image
layouts to HWC (`convert_to_HWC`, `make_grid`), video batches to frames
(`prepare_video`) and matplotlib figures to CHW arrays (`figure_to_image`).

They follow `torch.utils.tensorboard`'s conversions, so that the same inputs give
the same pixels, histograms and values in the event files.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._core import Tensor, bfloat16

__all__ = ["make_np", "convert_to_HWC", "make_grid", "prepare_video", "figure_to_image"]


def make_np(x: Any) -> np.ndarray:
    """`x` as a NumPy array: arrays pass through, Python and NumPy scalars become
    one-element 1-D arrays, candle_py tensors are detached and copied to the host.

    As PyTorch, a bfloat16 tensor is converted through float16 (so values beyond
    float16's range become infinite, as in the files torch writes); anything else
    (lists, strings that are not scalars...) raises `NotImplementedError`."""
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, Tensor):
        t = x.detach().cpu()
        if t.dtype == bfloat16:
            with np.errstate(over="ignore"):  # out of float16's range: inf, silently as in torch
                return np.asarray(t.float().numpy()).astype(np.float16)
        return np.asarray(t.numpy())
    raise NotImplementedError(f"Got {type(x)}, but numpy array or candle_py tensor are expected.")


def make_grid(images: np.ndarray, ncols: int = 8) -> np.ndarray:
    """Tile an `(N, C, H, W)` batch (C 1 or 3) into one `(3, rows*H, ncols*W)` image,
    row by row, padding the last row with zeros; a single channel is repeated to RGB."""
    if not isinstance(images, np.ndarray):
        raise AssertionError("plugin error, should pass numpy array here")
    if images.shape[1] == 1:
        images = np.concatenate([images, images, images], 1)
    if images.ndim != 4 or images.shape[1] != 3:
        raise AssertionError("Input should be a 4D numpy array with 3 channels")
    n, _, h, w = images.shape
    ncols = min(n, ncols)
    nrows = int(np.ceil(float(n) / ncols))
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h : (y + 1) * h, x * w : (x + 1) * w] = images[i]
    return canvas


def convert_to_HWC(tensor: np.ndarray, input_format: str) -> np.ndarray:
    """Reorder an image array described by `input_format` (letters from N, C, H, W,
    e.g. "CHW", "HWC", "HW", "NCHW", "NHWC") to `(H, W, C)`: batches are tiled with
    `make_grid`, one channel and 2-D images are repeated to three channels."""
    if len(set(input_format)) != len(input_format):
        raise AssertionError(f"You can not use the same dimension shorthand twice. input_format: {input_format}")
    if len(tensor.shape) != len(input_format):
        raise AssertionError(
            f"size of input tensor and input format are different. tensor shape: {tensor.shape}, input_format: {input_format}"
        )
    input_format = input_format.upper()
    if len(input_format) == 4:
        nchw = tensor.transpose([input_format.find(c) for c in "NCHW"])
        return make_grid(nchw).transpose(1, 2, 0)
    if len(input_format) == 3:
        hwc = tensor.transpose([input_format.find(c) for c in "HWC"])
        if hwc.shape[2] == 1:
            hwc = np.concatenate([hwc, hwc, hwc], 2)
        return hwc
    if len(input_format) == 2:
        hw = tensor.transpose([input_format.find(c) for c in "HW"])
        return np.stack([hw, hw, hw], 2)
    # torch falls through here and fails later on the missing array; say why instead.
    raise AssertionError(f"input_format should have 2, 3 or 4 dimensions, got {input_format!r}")


def prepare_video(video: np.ndarray) -> np.ndarray:
    """A `(B, T, C, H, W)` batch of videos as `(T, H', W', C)` frames: the batch is
    padded with black videos to a power of two and laid out as a grid in each frame.
    uint8 input is scaled to [0, 1] floats first."""
    b, t, c, h, w = video.shape
    if video.dtype == np.uint8:
        video = video.astype(np.float32) / 255.0
    if not (b != 0 and (b & (b - 1)) == 0):
        extra = int(2 ** b.bit_length() - b)
        video = np.concatenate((video, np.zeros(shape=(extra, t, c, h, w))), axis=0)
    n_rows = 2 ** ((b.bit_length() - 1) // 2)
    n_cols = video.shape[0] // n_rows
    video = np.reshape(video, (n_rows, n_cols, t, c, h, w))
    video = np.transpose(video, axes=(2, 0, 4, 1, 5, 3))
    return np.reshape(video, (t, n_rows * h, n_cols * w, c))


def figure_to_image(figures: Any, close: bool = True) -> np.ndarray:
    """Render a matplotlib figure to a `(3, H, W)` uint8 array, or a list of figures
    to `(N, 3, H, W)`; `close` closes each figure afterwards. Needs matplotlib."""
    import matplotlib.backends.backend_agg as backend_agg  # type: ignore[import-not-found, unused-ignore]
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    def render(figure: Any) -> np.ndarray:
        canvas = backend_agg.FigureCanvasAgg(figure)
        canvas.draw()
        data = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8)
        w, h = figure.canvas.get_width_height()
        chw = np.moveaxis(data.reshape([h, w, 4])[:, :, 0:3], source=2, destination=0)
        if close:
            plt.close(figure)
        return chw

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)
