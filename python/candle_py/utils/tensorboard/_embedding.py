"""The files of TensorBoard's embedding projector, as `torch.utils.tensorboard`
writes them for `SummaryWriter.add_embedding`: `tensors.tsv` (the vectors),
`metadata.tsv` (labels), `sprite.png` (label images) and the run's
`projector_config.pbtxt`. Paths go through TensorBoard's `tf.io.gfile`, so log
directories on the file systems it knows work as in PyTorch.
"""

from __future__ import annotations

import io
import math
from typing import Any, List, Optional, Sequence

import numpy as np
from tensorboard.compat import tf  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo  # type: ignore[import-untyped, import-not-found, unused-ignore]

from ._convert import make_grid, make_np

__all__ = ["gfile_join", "make_tsv", "make_sprite", "make_mat", "get_embedding_info", "write_pbtxt"]


def gfile_join(a: str, b: str) -> str:
    """`a/b` by the file system of `a` (the TensorFlow stub and TensorFlow differ in
    where `join` lives)."""
    if hasattr(tf.io.gfile, "join"):
        return str(tf.io.gfile.join(a, b))
    return str(tf.io.gfile.get_filesystem(a).join(a, b))


def _write(path: str, data: bytes) -> None:
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(data)


def make_tsv(metadata: Sequence[Any], save_path: str, metadata_header: Optional[Sequence[Any]] = None) -> None:
    """Write `metadata.tsv`: one label per line, or with `metadata_header` a header
    line and one tab-separated row per point (each row as long as the header)."""
    if not metadata_header:
        lines = [str(x) for x in metadata]
    else:
        if len(metadata_header) != len(metadata[0]):
            raise AssertionError("len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header, *metadata]]
    _write(gfile_join(save_path, "metadata.tsv"), ("\n".join(lines) + "\n").encode("utf-8"))


def make_sprite(label_img: Any, save_path: str) -> None:
    """Write `sprite.png`: the `(N, C, H, W)` label images (values in [0, 1]) tiled
    in a square grid of ceil(sqrt(N)) columns. Needs Pillow."""
    from PIL import Image

    images = make_np(label_img)
    nrow = math.ceil(images.shape[0] ** 0.5)
    grid = make_grid(images, ncols=nrow)  # CHW
    side = grid.shape[2]
    square = np.zeros((side, side, 3))
    square[: grid.shape[1], :, :] = grid.transpose(1, 2, 0)
    with io.BytesIO() as buf:
        Image.fromarray(np.uint8((square * 255).clip(0, 255))).save(buf, format="PNG")
        _write(gfile_join(save_path, "sprite.png"), buf.getvalue())


def make_mat(mat: np.ndarray, save_path: str) -> None:
    """Write `tensors.tsv`: one tab-separated line per row of the 2-D `mat`."""
    with tf.io.gfile.GFile(gfile_join(save_path, "tensors.tsv"), "wb") as f:
        for row in mat:
            f.write(("\t".join(str(v.item()) for v in row) + "\n").encode("utf-8"))


def get_embedding_info(metadata: Optional[Sequence[Any]], label_img: Any, subdir: str, global_step: int, tag: str) -> Any:
    """The projector's `EmbeddingInfo` for one embedding stored under `subdir`."""
    info = EmbeddingInfo()
    info.tensor_name = f"{tag}:{str(global_step).zfill(5)}"
    info.tensor_path = gfile_join(subdir, "tensors.tsv")
    if metadata is not None:
        info.metadata_path = gfile_join(subdir, "metadata.tsv")
    if label_img is not None:
        shape: List[int] = list(label_img.shape)
        info.sprite.image_path = gfile_join(subdir, "sprite.png")
        info.sprite.single_image_dim.extend([shape[3], shape[2]])
    return info


def write_pbtxt(save_path: str, contents: str) -> None:
    """Write the projector's `projector_config.pbtxt` into `save_path`."""
    _write(gfile_join(save_path, "projector_config.pbtxt"), contents.encode("utf-8"))
