"""`SummaryWriter` and `FileWriter`: write TensorBoard event files, as
`torch.utils.tensorboard.writer` does.

Event files are written by the `tensorboard` package's `EventFileWriter` (a
background thread appends TFRecord-framed `Event` protos, flushing every
`flush_secs` seconds or when `max_queue` events are pending), so the files are
the ones PyTorch writes: same directory layout, tags, steps, wall times and
summary contents for the same calls.

Not available: `add_graph` and `add_onnx_graph` (PyTorch traces the model with
its JIT, which candle_py does not have); they raise `NotImplementedError`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Union

from tensorboard.compat import tf  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.compat.proto.event_pb2 import Event, SessionLog  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # type: ignore[import-untyped, import-not-found, unused-ignore]

from ._convert import figure_to_image, make_np
from ._embedding import get_embedding_info, make_mat, make_sprite, make_tsv, write_pbtxt
from .summary import (
    audio,
    custom_scalars,
    histogram,
    histogram_raw,
    hparams,
    image,
    image_boxes,
    mesh,
    pr_curve,
    pr_curve_raw,
    scalar,
    tensor_proto,
    text,
    video,
)

__all__ = ["FileWriter", "SummaryWriter"]


def _default_bins() -> List[float]:
    """TensorBoard's default histogram edges (generate_testdata.py): +-1e-12 growing
    by 10% per bin up to 1e20 on each side of 0."""
    v = 1e-12
    pos = []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-x for x in reversed(pos)] + [0] + pos


class FileWriter:
    """Writes `Event` protocol buffers to one event file in `log_dir`.

    A new file `events.out.tfevents.<time>.<host>.<pid>.<n><filename_suffix>` is
    created on construction; events are written asynchronously, flushed when
    `max_queue` are pending, every `flush_secs` seconds, and by `flush`/`close`."""

    def __init__(self, log_dir: Any, max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        """Create the event file in `log_dir` (a string or path; created if missing)."""
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        """The directory of the event file."""
        return str(self.event_writer.get_logdir())

    def add_event(self, event: Any, step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Append the `Event` proto `event`, stamped with `walltime` (seconds since the
        epoch; now by default) and, when given, the global `step` (made an int)."""
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary: Any, global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Append a `Summary` proto, wrapped in an `Event`."""
        self.add_event(Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile: Any, walltime: Optional[float] = None) -> None:
        """Append a `(GraphDef, RunMetadata)` pair: the graph, then its step stats
        tagged "step1" (the events PyTorch writes for a traced model)."""
        graph, stepstats = graph_profile
        self.add_event(Event(graph_def=graph.SerializeToString()), None, walltime)
        from tensorboard.compat.proto.event_pb2 import TaggedRunMetadata  # type: ignore[import-untyped, import-not-found, unused-ignore]

        trm = TaggedRunMetadata(tag="step1", run_metadata=stepstats.SerializeToString())
        self.add_event(Event(tagged_run_metadata=trm), None, walltime)

    def add_onnx_graph(self, graph: Any, walltime: Optional[float] = None) -> None:
        """Append a `GraphDef` proto."""
        self.add_event(Event(graph_def=graph.SerializeToString()), None, walltime)

    def flush(self) -> None:
        """Write all pending events to disk."""
        self.event_writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.event_writer.close()

    def reopen(self) -> None:
        """Open the writer again after `close` (events then go to a new file); no-op
        while it is open. Not every version of `EventFileWriter` can reopen."""
        self.event_writer.reopen()


class SummaryWriter:
    """Writes scalars, histograms, images, text, hyperparameters... to event files in
    `log_dir` for TensorBoard, as `torch.utils.tensorboard.SummaryWriter`.

    Values may be candle_py tensors (any device; bfloat16 is converted through
    float16 as PyTorch does), NumPy arrays or Python numbers. Use it as a context
    manager, or call `close` to flush and close the files."""

    def __init__(
        self,
        log_dir: Optional[Any] = None,
        comment: str = "",
        purge_step: Optional[int] = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ) -> None:
        """Create the writer and its event file.

        Args:
            log_dir: directory of the event files; by default
                `runs/<Mon><DD>_<HH>-<MM>-<SS>_<hostname><comment>`.
            comment: suffix of the default `log_dir` (unused when `log_dir` is given).
            purge_step: after a crash at step T+X and a restart at step T, pass T:
                events of step >= T in earlier files of this `log_dir` are hidden
                by TensorBoard.
            max_queue: pending events that force a flush.
            flush_secs: seconds between background flushes.
            filename_suffix: suffix of the event files' names.
        """
        if not log_dir:
            import socket
            from datetime import datetime

            log_dir = os.path.join("runs", datetime.now().strftime("%b%d_%H-%M-%S") + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        # Recreated on demand after close().
        self.file_writer: Optional[FileWriter] = None
        self.all_writers: Optional[Dict[str, FileWriter]] = None
        self._get_file_writer()
        self.default_bins = _default_bins()

    def _get_file_writer(self) -> FileWriter:
        """The writer of `log_dir`'s event file, opening a new one after `close`."""
        if self.all_writers is None or self.file_writer is None:
            fw = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.file_writer = fw
            self.all_writers = {fw.get_logdir(): fw}
            if self.purge_step is not None:
                fw.add_event(Event(step=self.purge_step, file_version="brain.Event:2"))
                fw.add_event(Event(step=self.purge_step, session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> Any:
        """The directory the event files are written to."""
        return self.log_dir

    def add_hparams(
        self,
        hparam_dict: Dict[str, Any],
        metric_dict: Dict[str, Any],
        hparam_domain_discrete: Optional[Dict[str, List[Any]]] = None,
        run_name: Optional[str] = None,
        global_step: Optional[int] = None,
    ) -> None:
        """Record a set of hyperparameters and their metrics for the HPARAMS tab.

        As PyTorch, this writes into the subdirectory `run_name` of `log_dir` (by
        default the current `time.time()`): the hparams plugin's experiment,
        session start and session end summaries, then each metric as a scalar.

        Args:
            hparam_dict: hyperparameter name -> value (bool, str, int, float,
                a one-element tensor, or None to skip it).
            metric_dict: metric tag -> value; use tags not logged by `add_scalar`.
            hparam_domain_discrete: hyperparameter name -> the list of values it can take.
            run_name: the subdirectory.
            global_step: the step of the events.
        """
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        if not run_name:
            run_name = str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w_hp:
            fw = w_hp._get_file_writer()
            fw.add_summary(exp, global_step)
            fw.add_summary(ssi, global_step)
            fw.add_summary(sei, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """Record one number under `tag` at `global_step`.

        `scalar_value` is a Python or NumPy number or a one-element tensor/array
        (anything with more elements raises `AssertionError`). `new_style` stores it
        as a tensor (float32, or float64 with `double_precision`) instead of the
        float32 `simple_value`. `walltime` overrides `time.time()`."""
        self._get_file_writer().add_summary(
            scalar(tag, scalar_value, new_style=new_style, double_precision=double_precision), global_step, walltime
        )

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Dict[str, Any],
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Record several numbers on one chart `main_tag`.

        As PyTorch, each key `tag` gets its own event file in the subdirectory
        `<log_dir>/<main_tag with / replaced by _>_<tag>`, holding the value under
        the tag `main_tag`; all share one wall time."""
        walltime = time.time() if walltime is None else walltime
        fw_logdir = self._get_file_writer().get_logdir()
        writers = self.all_writers
        if writers is None:
            raise AssertionError("self.all_writers is None")
        for tag, value in tag_scalar_dict.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            fw = writers.get(fw_tag)
            if fw is None:
                fw = writers[fw_tag] = FileWriter(fw_tag, self.max_queue, self.flush_secs, self.filename_suffix)
            fw.add_summary(scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag: str, tensor: Any, global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Record a whole tensor (shape, dtype and values) under `tag`."""
        self._get_file_writer().add_summary(tensor_proto(tag, tensor), global_step, walltime)

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: Optional[int] = None,
        bins: Any = "tensorflow",
        walltime: Optional[float] = None,
        max_bins: Optional[int] = None,
    ) -> None:
        """Record the histogram of `values` (a tensor or array of any shape).

        `bins` is "tensorflow" (TensorBoard's exponential default edges) or anything
        `numpy.histogram` takes: a count, the edges, or a rule ("auto", "fd", ...).
        `max_bins` merges neighbouring bins down to at most that many."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._get_file_writer().add_summary(histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_histogram_raw(
        self,
        tag: str,
        min: float,
        max: float,
        num: int,
        sum: float,
        sum_squares: float,
        bucket_limits: Any,
        bucket_counts: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Record a histogram given by its statistics and buckets (`bucket_limits[i]`
        is the right edge of bucket `i`); the two lists must be as long."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        summary = histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        dataformats: str = "CHW",
    ) -> None:
        """Record an image (PNG, needs Pillow).

        `dataformats` names the axes of `img_tensor`: "CHW" (default; C is 1 or 3),
        "HWC", "HW", ... uint8 values are taken as [0, 255], others as [0, 1]."""
        self._get_file_writer().add_summary(image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        dataformats: str = "NCHW",
    ) -> None:
        """Record a batch of images (default layout "NCHW", or "NHWC", ...) tiled
        into one grid image of up to 8 columns."""
        self._get_file_writer().add_summary(image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_image_with_boxes(
        self,
        tag: str,
        img_tensor: Any,
        box_tensor: Any,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
        rescale: float = 1,
        dataformats: str = "CHW",
        labels: Optional[Union[str, Sequence[str]]] = None,
    ) -> None:
        """Record an image with bounding boxes drawn on it: `box_tensor` is `(N, 4)`
        rows `[xmin, ymin, xmax, ymax]`; `labels` (one per box, else ignored) are
        written on them; `rescale` resizes the image."""
        if labels is not None:
            if isinstance(labels, str):
                labels = [labels]
            if len(labels) != box_tensor.shape[0]:
                labels = None
        summary = image_boxes(tag, img_tensor, box_tensor, rescale=rescale, dataformats=dataformats, labels=labels)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_figure(
        self,
        tag: str,
        figure: Any,
        global_step: Optional[int] = None,
        close: bool = True,
        walltime: Optional[float] = None,
    ) -> None:
        """Render a matplotlib figure (or a list of them, tiled) and record it as an
        image; `close` closes the figures. Needs matplotlib."""
        if isinstance(figure, list):
            self.add_image(tag, figure_to_image(figure, close), global_step, walltime, dataformats="NCHW")
        else:
            self.add_image(tag, figure_to_image(figure, close), global_step, walltime, dataformats="CHW")

    def add_video(
        self, tag: str, vid_tensor: Any, global_step: Optional[int] = None, fps: float = 4, walltime: Optional[float] = None
    ) -> None:
        """Record `(N, T, C, H, W)` videos as one GIF (needs moviepy with
        `moviepy.editor`; without it a message is printed and an empty image is
        recorded, as in PyTorch). uint8 values are [0, 255], floats [0, 1]."""
        self._get_file_writer().add_summary(video(tag, vid_tensor, fps), global_step, walltime)

    def add_audio(
        self,
        tag: str,
        snd_tensor: Any,
        global_step: Optional[int] = None,
        sample_rate: int = 44100,
        walltime: Optional[float] = None,
    ) -> None:
        """Record a mono sound (`(1, L)` or `(L,)`, values in [-1, 1]) as 16-bit WAV."""
        self._get_file_writer().add_summary(audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: Optional[int] = None, walltime: Optional[float] = None) -> None:
        """Record a text (markdown in TensorBoard) under `<tag>/text_summary`."""
        self._get_file_writer().add_summary(text(tag, text_string), global_step, walltime)

    def add_onnx_graph(self, prototxt: Any) -> None:
        """Not available in candle_py: raises `NotImplementedError`."""
        raise NotImplementedError(
            "SummaryWriter.add_onnx_graph is not implemented in candle_py.utils.tensorboard (it would need the onnx package's "
            "model loader); add_graph is not available either."
        )

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False, use_strict_trace: bool = True) -> None:
        """Not available in candle_py: raises `NotImplementedError`.

        PyTorch draws the graph by tracing `model(input_to_model)` with its JIT;
        candle_py has no tracer to record the operations."""
        raise NotImplementedError(
            "SummaryWriter.add_graph is not supported by candle_py.utils.tensorboard: "
            "it needs PyTorch's JIT tracer (torch.jit.trace), which candle_py does not have. "
            "The other add_* methods are available."
        )

    @staticmethod
    def _encode(rawstr: str) -> str:
        """`rawstr` with `%`, `/` and `\\` percent-encoded (a safe directory name)."""
        return rawstr.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")

    def add_embedding(
        self,
        mat: Any,
        metadata: Optional[Sequence[Any]] = None,
        label_img: Any = None,
        global_step: Optional[int] = None,
        tag: str = "default",
        metadata_header: Optional[Sequence[Any]] = None,
    ) -> None:
        """Record an embedding for the PROJECTOR tab.

        Writes `<log_dir>/<global_step, 5 digits>/<tag>/`: `tensors.tsv` with the rows
        of the `(N, D)` `mat`, `metadata.tsv` with one label per row (or rows of
        `metadata_header` columns), `sprite.png` with the `(N, C, H, W)` `label_img`
        (needs Pillow), and updates `<log_dir>/projector_config.pbtxt`."""
        from google.protobuf import text_format  # type: ignore[import-untyped, import-not-found, unused-ignore]
        from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig  # type: ignore[import-untyped, import-not-found, unused-ignore]

        arr = make_np(mat)
        if global_step is None:
            global_step = 0
        subdir = f"{str(global_step).zfill(5)}/{self._encode(tag)}"
        save_path = os.path.join(self._get_file_writer().get_logdir(), subdir)
        fs = tf.io.gfile
        if fs.exists(save_path):
            if not fs.isdir(save_path):
                raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        else:
            fs.makedirs(save_path)
        if metadata is not None:
            if arr.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            make_tsv(metadata, save_path, metadata_header=metadata_header)
        if label_img is not None:
            if arr.shape[0] != label_img.shape[0]:
                raise AssertionError("#images should equal with #data points")
            make_sprite(label_img, save_path)
        if arr.ndim != 2:
            raise AssertionError("mat should be 2D, where mat.size(0) is the number of data points")
        make_mat(arr, save_path)
        # The config file is rewritten whole with every embedding added so far.
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend([get_embedding_info(metadata, label_img, subdir, global_step, tag)])
        write_pbtxt(self._get_file_writer().get_logdir(), text_format.MessageToString(self._projector_config))

    def add_pr_curve(
        self,
        tag: str,
        labels: Any,
        predictions: Any,
        global_step: Optional[int] = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Record the precision-recall curve of binary `labels` against `predictions`
        (probabilities in [0, 1]) over `num_thresholds` thresholds (at most 127)."""
        self._get_file_writer().add_summary(
            pr_curve(tag, make_np(labels), make_np(predictions), num_thresholds, weights), global_step, walltime
        )

    def add_pr_curve_raw(
        self,
        tag: str,
        true_positive_counts: Any,
        false_positive_counts: Any,
        true_negative_counts: Any,
        false_negative_counts: Any,
        precision: Any,
        recall: Any,
        global_step: Optional[int] = None,
        num_thresholds: int = 127,
        weights: Any = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Record a precision-recall curve from its per-threshold counts and rates."""
        summary = pr_curve_raw(
            tag,
            true_positive_counts,
            false_positive_counts,
            true_negative_counts,
            false_negative_counts,
            precision,
            recall,
            num_thresholds,
            weights,
        )
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_custom_scalars_multilinechart(self, tags: List[str], category: str = "default", title: str = "untitled") -> None:
        """Lay out one chart `title` in `category` plotting the scalar `tags` together."""
        self._get_file_writer().add_summary(custom_scalars({category: {title: ["Multiline", tags]}}))

    def add_custom_scalars_marginchart(self, tags: List[str], category: str = "default", title: str = "untitled") -> None:
        """Lay out one margin chart: `tags` are the value, lower and upper bound scalars."""
        if len(tags) != 3:
            raise AssertionError(f"Expected 3 tags, got {len(tags)}.")
        self._get_file_writer().add_summary(custom_scalars({category: {title: ["Margin", tags]}}))

    def add_custom_scalars(self, layout: Dict[str, Dict[str, List[Any]]]) -> None:
        """Lay out the CUSTOM SCALARS tab: `{category: {chart title: [kind, tags]}}`
        with kind "Multiline" (any tags) or "Margin" (three tags: value, lower,
        upper). Call it once per writer."""
        self._get_file_writer().add_summary(custom_scalars(layout))

    def add_mesh(
        self,
        tag: str,
        vertices: Any,
        colors: Any = None,
        faces: Any = None,
        config_dict: Optional[Dict[str, Any]] = None,
        global_step: Optional[int] = None,
        walltime: Optional[float] = None,
    ) -> None:
        """Record a mesh or point cloud: `(B, N, 3)` vertices, optional `(B, N, 3)`
        colors and `(B, M, 3)` faces (vertex indices); `config_dict` holds three.js
        camera, light and material settings."""
        self._get_file_writer().add_summary(mesh(tag, vertices, colors, faces, config_dict), global_step, walltime)

    def flush(self) -> None:
        """Write the pending events of every event file to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every event file; a later `add_*` opens a new one. A
        second `close` does nothing."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.close()
