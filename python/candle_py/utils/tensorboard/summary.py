"""The `Summary` protocol buffers of `candle_py.utils.tensorboard`, as
`torch.utils.tensorboard.summary` builds them: scalars, histograms, images, audio,
video, text, hyperparameters, precision-recall curves, custom-scalar layouts,
meshes and whole tensors.

Each builder takes candle_py tensors, NumPy arrays or Python numbers (through
`make_np`) and returns a `tensorboard.compat.proto.summary_pb2.Summary` whose
fields, tags and plugin metadata equal those PyTorch writes for the same input.
The protobuf classes come from the `tensorboard` package.
"""

from __future__ import annotations

import io
import json
import logging
import struct
import wave
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from google.protobuf import struct_pb2  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.compat.proto.summary_pb2 import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
    HistogramProto,
    Summary,
    SummaryMetadata,
)
from tensorboard.compat.proto.tensor_pb2 import TensorProto  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.plugins.custom_scalar import layout_pb2  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData  # type: ignore[import-untyped, import-not-found, unused-ignore]
from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData  # type: ignore[import-untyped, import-not-found, unused-ignore]

from ..._core import Tensor, bfloat16
from ._convert import convert_to_HWC, make_np, prepare_video

__all__ = [
    "half_to_int",
    "int_to_half",
    "hparams",
    "scalar",
    "histogram_raw",
    "histogram",
    "make_histogram",
    "image",
    "image_boxes",
    "draw_boxes",
    "make_image",
    "video",
    "make_video",
    "audio",
    "custom_scalars",
    "text",
    "tensor_proto",
    "pr_curve_raw",
    "pr_curve",
    "compute_curve",
    "mesh",
]

logger = logging.getLogger(__name__)

# Precision-recall curves: TensorBoard's plugin caps the threshold count at 127.
_MAX_PR_THRESHOLDS = 127


def _plugin_metadata(plugin_name: str, content: bytes = b"") -> Any:
    """`SummaryMetadata` naming the TensorBoard plugin that displays a value."""
    return SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin_name, content=content))


def _shape_proto(shape: Sequence[int]) -> Any:
    return TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(d)) for d in shape])


def half_to_int(f: float) -> int:
    """The bits of `f` as a float32, read as an int32: how PyTorch stores the values
    of float16 and bfloat16 tensors in `TensorProto.half_val`. `int_to_half` undoes it."""
    return int(struct.unpack("i", struct.pack("f", f))[0])


def int_to_half(i: int) -> float:
    """The float whose float32 bits are the int32 `i` (the inverse of `half_to_int`)."""
    return float(struct.unpack("f", struct.pack("i", i))[0])


def scalar(name: str, tensor: Any, collections: Any = None, new_style: bool = False, double_precision: bool = False) -> Any:
    """A `Summary` with the one value of `tensor` under tag `name`.

    `tensor` may be a number or any array or tensor of one element (it is squeezed);
    more elements raise `AssertionError`, as in PyTorch. The old style stores the
    value in `simple_value` (float32); `new_style` stores it in a `TensorProto`
    for the "scalars" plugin, as float32 or, with `double_precision`, float64.
    `collections` is accepted for PyTorch's signature and ignored."""
    arr = make_np(tensor).squeeze()
    if arr.ndim != 0:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given size: {arr.size} and {arr.ndim} dimensions.")
    value = float(arr)
    if not new_style:
        return Summary(value=[Summary.Value(tag=name, simple_value=value)])
    if double_precision:
        proto = TensorProto(double_val=[value], dtype="DT_DOUBLE")
    else:
        proto = TensorProto(float_val=[value], dtype="DT_FLOAT")
    return Summary(value=[Summary.Value(tag=name, tensor=proto, metadata=_plugin_metadata("scalars"))])


# NumPy dtype -> (TensorProto dtype, value field), as PyTorch maps its dtypes.
_NP_TENSOR_TYPES: Dict[str, Tuple[str, str]] = {
    "float16": ("DT_HALF", "half_val"),
    "float32": ("DT_FLOAT", "float_val"),
    "float64": ("DT_DOUBLE", "double_val"),
    "int8": ("DT_INT8", "int_val"),
    "uint8": ("DT_UINT8", "uint32_val"),
    "int16": ("DT_INT16", "int_val"),
    "int32": ("DT_INT32", "int_val"),
    "int64": ("DT_INT64", "int64_val"),
    "bool": ("DT_BOOL", "bool_val"),
}


def tensor_proto(tag: str, tensor: Any) -> Any:
    """A `Summary` holding all of `tensor` (a candle_py tensor or NumPy array) as a
    `TensorProto` for the "tensor" plugin, with its shape and dtype.

    float16 and bfloat16 values go to `half_val` through `half_to_int`, as PyTorch
    writes them. Raises `ValueError` for dtypes PyTorch has no mapping for (here:
    uint32) and for tensors of 2 GB or more."""
    if isinstance(tensor, Tensor) and tensor.dtype == bfloat16:
        values = np.asarray(tensor.detach().cpu().float().numpy())
        dtype_name, field = "DT_BFLOAT16", "half_val"
    else:
        values = make_np(tensor) if isinstance(tensor, Tensor) else np.asarray(tensor)
        if values.dtype.name not in _NP_TENSOR_TYPES:
            shown = tensor.dtype if isinstance(tensor, Tensor) else values.dtype
            raise ValueError(f"{tag} has unsupported tensor dtype {shown}")
        dtype_name, field = _NP_TENSOR_TYPES[values.dtype.name]
    if values.size * values.itemsize >= (1 << 31):
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    flat = values.reshape(-1).tolist()
    if field == "half_val":
        flat = [half_to_int(v) for v in flat]
    proto = TensorProto(**{"dtype": dtype_name, "tensor_shape": _shape_proto(values.shape), field: flat})
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata("tensor"), tensor=proto)])


def histogram_raw(
    name: str,
    min: float,
    max: float,
    num: float,
    sum: float,
    sum_squares: float,
    bucket_limits: Any,
    bucket_counts: Any,
) -> Any:
    """A `Summary` with a histogram given by its statistics and buckets:
    `bucket_limits[i]` is the right edge of bucket `i`, holding `bucket_counts[i]`
    values. Tensors and arrays are accepted for the bucket lists."""
    limits = make_np(bucket_limits).reshape(-1).tolist() if isinstance(bucket_limits, (Tensor, np.ndarray)) else bucket_limits
    counts = make_np(bucket_counts).reshape(-1).tolist() if isinstance(bucket_counts, (Tensor, np.ndarray)) else bucket_counts
    hist = HistogramProto(
        min=float(min),
        max=float(max),
        num=float(num),
        sum=float(sum),
        sum_squares=float(sum_squares),
        bucket_limit=limits,
        bucket=counts,
    )
    return Summary(value=[Summary.Value(tag=name, histo=hist)])


def histogram(name: str, values: Any, bins: Any, max_bins: Optional[int] = None) -> Any:
    """A `Summary` with the histogram of `values` (any shape, as float64); `bins` is
    what `numpy.histogram` takes (a count, edges, or a rule such as "auto", "fd").
    `max_bins` merges neighbouring bins until at most that many are left."""
    arr = make_np(values)
    return Summary(value=[Summary.Value(tag=name, histo=make_histogram(arr.astype(float), bins, max_bins))])


def make_histogram(values: np.ndarray, bins: Any, max_bins: Optional[int] = None) -> Any:
    """The `HistogramProto` of `values`, as TensorBoard's histogram.cc lays it out.

    Bins outside the support (the first to the last nonempty one) are dropped; one
    empty bin is kept on the left so that the leftmost edge is present, since a
    `HistogramProto` stores right edges only. Empty input raises `ValueError`."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    num_bins = len(counts)
    if max_bins is not None and num_bins > max_bins:
        group = num_bins // max_bins
        remainder = num_bins % group
        if remainder != 0:
            counts = np.pad(counts, pad_width=[[0, group - remainder]], mode="constant", constant_values=0)
        counts = counts.reshape(-1, group).sum(axis=-1)
        merged = np.empty((counts.size + 1,), limits.dtype)
        merged[:-1] = limits[:-1:group]
        merged[-1] = limits[-1]
        limits = merged

    nonempty = np.cumsum(np.greater(counts, 0))
    start, end = np.searchsorted(nonempty, [0, nonempty[-1] - 1], side="right")
    start, end = int(start), int(end) + 1
    counts = counts[start - 1 : end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start : end + 1]
    if counts.size == 0 or limits.size == 0:
        raise ValueError("The histogram is empty, please file a bug report.")
    return HistogramProto(
        min=values.min(),
        max=values.max(),
        num=len(values),
        sum=values.sum(),
        sum_squares=values.dot(values),
        bucket_limit=limits.tolist(),
        bucket=counts.tolist(),
    )


def _scale_factor(arr: np.ndarray) -> int:
    """uint8 images are taken as [0, 255], anything else as [0, 1] (scaled by 255)."""
    return 1 if arr.dtype == np.uint8 else 255


def image(tag: str, tensor: Any, rescale: float = 1, dataformats: str = "NCHW") -> Any:
    """A `Summary` with `tensor` as a PNG image.

    `dataformats` names the axes (e.g. "CHW", "HWC", "HW", "NCHW"; batches are tiled
    into a grid). uint8 values are taken as [0, 255], others as [0, 1] and scaled by
    255; both are clipped to [0, 255]. Needs Pillow."""
    arr = convert_to_HWC(make_np(tensor), dataformats)
    factor = _scale_factor(arr)
    pixels = (arr.astype(np.float32) * factor).clip(0, 255).astype(np.uint8)
    return Summary(value=[Summary.Value(tag=tag, image=make_image(pixels, rescale=rescale))])


def image_boxes(
    tag: str,
    tensor_image: Any,
    tensor_boxes: Any,
    rescale: float = 1,
    dataformats: str = "CHW",
    labels: Optional[Sequence[str]] = None,
) -> Any:
    """A `Summary` with an image on which the `(N, 4)` boxes `[xmin, ymin, xmax,
    ymax]` are drawn in red, each with its label if `labels` is given."""
    arr = convert_to_HWC(make_np(tensor_image), dataformats)
    boxes = make_np(tensor_boxes)
    arr = arr.astype(np.float32) * _scale_factor(arr)
    img = make_image(arr.clip(0, 255).astype(np.uint8), rescale=rescale, rois=boxes, labels=labels)
    return Summary(value=[Summary.Value(tag=tag, image=img)])


def _draw_box(
    img: Any,
    xmin: float,
    ymin: float,
    xmax: float,
    ymax: float,
    display_str: Optional[str],
    color: str = "black",
    color_text: str = "black",
    thickness: int = 2,
) -> Any:
    """Draw one box outline on a PIL image, and `display_str` in a filled label
    box above its bottom-left corner."""
    from PIL import ImageDraw, ImageFont

    font = ImageFont.load_default()
    draw = ImageDraw.Draw(img)
    left, right, top, bottom = xmin, xmax, ymin, ymax
    draw.line([(left, top), (left, bottom), (right, bottom), (right, top), (left, top)], width=thickness, fill=color)
    if display_str:
        x0, y0, x1, y1 = font.getbbox(display_str)
        text_width, text_height = x1 - x0, y1 - y0
        margin = np.ceil(0.05 * text_height)
        draw.rectangle([(left, bottom - text_height - 2 * margin), (left + text_width, bottom)], fill=color)
        draw.text((left + margin, bottom - text_height - margin), display_str, fill=color_text, font=font)
    return img


def draw_boxes(disp_image: Any, boxes: np.ndarray, labels: Optional[Sequence[str]] = None) -> Any:
    """Draw the `(N, 4)` xyxy `boxes` (and their `labels`) in red on a PIL image."""
    for i in range(boxes.shape[0]):
        label = None if labels is None else labels[i]
        disp_image = _draw_box(disp_image, boxes[i, 0], boxes[i, 1], boxes[i, 2], boxes[i, 3], display_str=label, color="Red")
    return disp_image


def make_image(tensor: np.ndarray, rescale: float = 1, rois: Optional[np.ndarray] = None, labels: Optional[Sequence[str]] = None) -> Any:
    """A `Summary.Image` with the `(H, W, C)` uint8 array encoded as PNG (resized by
    `rescale` with Lanczos filtering; boxes `rois` drawn first). The stored height,
    width and colorspace are the array's. Needs Pillow (`from PIL import Image`)."""
    from PIL import Image

    height, width, channel = tensor.shape
    img = Image.fromarray(tensor)
    if rois is not None:
        img = draw_boxes(img, rois, labels=labels)
    img = img.resize((int(width * rescale), int(height * rescale)), Image.Resampling.LANCZOS)
    with io.BytesIO() as out:
        img.save(out, format="PNG")
        encoded = out.getvalue()
    return Summary.Image(height=height, width=width, colorspace=channel, encoded_image_string=encoded)


def video(tag: str, tensor: Any, fps: float = 4) -> Any:
    """A `Summary` with the `(N, T, C, H, W)` videos as one animated GIF (the batch
    tiled in a grid). Needs moviepy with `moviepy.editor`; without it a message is
    printed and the value holds no image, as in PyTorch."""
    frames = prepare_video(make_np(tensor))
    factor = _scale_factor(frames)
    frames = (frames.astype(np.float32) * factor).clip(0, 255).astype(np.uint8)
    return Summary(value=[Summary.Value(tag=tag, image=make_video(frames, fps))])


def make_video(tensor: np.ndarray, fps: float) -> Any:
    """A `Summary.Image` with the `(T, H, W, C)` uint8 frames encoded as a GIF by
    moviepy, or None (after printing why) when moviepy or moviepy.editor is missing."""
    try:
        import moviepy  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: F401
    except ImportError:
        print("add_video needs package moviepy")
        return None
    try:
        from moviepy import editor as mpy  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        print("moviepy is installed, but can't import moviepy.editor.", "Some packages could be missing [imageio, requests]")
        return None
    import tempfile

    _, h, w, c = tensor.shape
    clip = mpy.ImageSequenceClip(list(tensor), fps=fps)
    with tempfile.NamedTemporaryFile(suffix=".gif") as f:
        try:  # the keyword arguments changed across moviepy versions
            clip.write_gif(f.name, verbose=False, logger=None)
        except TypeError:
            try:
                clip.write_gif(f.name, verbose=False, progress_bar=False)
            except TypeError:
                clip.write_gif(f.name, verbose=False)
        f.seek(0)
        encoded = f.read()
    return Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=encoded)


def audio(tag: str, tensor: Any, sample_rate: int = 44100) -> Any:
    """A `Summary` with a mono sound (1-D after squeezing, values in [-1, 1]) as a
    16-bit WAV file; louder input is clipped after a printed warning."""
    arr = make_np(tensor).squeeze()
    if abs(arr).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        arr = arr.clip(-1, 1)
    if arr.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    samples = (arr * np.iinfo(np.int16).max).astype("<i2")
    with io.BytesIO() as buf:
        with wave.open(buf, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            wav.writeframes(samples.data)
        encoded = buf.getvalue()
    snd = Summary.Audio(
        sample_rate=sample_rate,
        num_channels=1,
        length_frames=samples.shape[-1],
        encoded_audio_string=encoded,
        content_type="audio/wav",
    )
    return Summary(value=[Summary.Value(tag=tag, audio=snd)])


def custom_scalars(layout: Mapping[str, Mapping[str, Sequence[Any]]]) -> Any:
    """The `Summary` of a custom-scalars layout: `{category: {chart title: [kind,
    tags]}}`, kind "Multiline" (any number of scalar tags on one chart) or "Margin"
    (exactly three tags: value, lower, upper)."""
    categories = []
    for title, charts_spec in layout.items():
        charts = []
        for chart_name, chart_spec in charts_spec.items():
            tags = chart_spec[1]
            if chart_spec[0] == "Margin":
                if len(tags) != 3:
                    raise AssertionError("len(tags) != 3")
                series = layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1], upper=tags[2])
                chart = layout_pb2.Chart(title=chart_name, margin=layout_pb2.MarginChartContent(series=[series]))
            else:
                chart = layout_pb2.Chart(title=chart_name, multiline=layout_pb2.MultilineChartContent(tag=tags))
            charts.append(chart)
        categories.append(layout_pb2.Category(title=title, chart=charts))
    proto = TensorProto(
        dtype="DT_STRING",
        string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
        tensor_shape=TensorShapeProto(),
    )
    return Summary(value=[Summary.Value(tag="custom_scalars__config__", tensor=proto, metadata=_plugin_metadata("custom_scalars"))])


def text(tag: str, text: str) -> Any:
    """A `Summary` with `text` (UTF-8, markdown in TensorBoard) under `<tag>/text_summary`."""
    proto = TensorProto(dtype="DT_STRING", string_val=[text.encode(encoding="utf_8")], tensor_shape=_shape_proto([1]))
    smd = _plugin_metadata("text", TextPluginData(version=0).SerializeToString())
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=smd, tensor=proto)])


def _pr_summary(tag: str, data: np.ndarray, num_thresholds: int) -> Any:
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    proto = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(), tensor_shape=_shape_proto(data.shape[:2]))
    return Summary(value=[Summary.Value(tag=tag, metadata=_plugin_metadata("pr_curves", content), tensor=proto)])


def pr_curve_raw(
    tag: str,
    tp: Any,
    fp: Any,
    tn: Any,
    fn: Any,
    precision: Any,
    recall: Any,
    num_thresholds: int = 127,
    weights: Any = None,
) -> Any:
    """A `Summary` with a precision-recall curve given by its per-threshold counts
    and rates (each a sequence of `num_thresholds` values; at most 127 thresholds).
    `weights` is accepted for PyTorch's signature and unused."""
    num_thresholds = min(num_thresholds, _MAX_PR_THRESHOLDS)
    rows = [make_np(r) if isinstance(r, Tensor) else r for r in (tp, fp, tn, fn, precision, recall)]
    return _pr_summary(tag, np.stack(rows), num_thresholds)


def pr_curve(tag: str, labels: Any, predictions: Any, num_thresholds: int = 127, weights: Any = None) -> Any:
    """A `Summary` with the precision-recall curve of binary `labels` against
    `predictions` in [0, 1] (optionally weighted), over at most 127 thresholds."""
    num_thresholds = min(num_thresholds, _MAX_PR_THRESHOLDS)
    if isinstance(weights, Tensor):
        weights = make_np(weights)
    data = compute_curve(make_np(labels), make_np(predictions), num_thresholds=num_thresholds, weights=weights)
    return _pr_summary(tag, data, num_thresholds)


def compute_curve(labels: np.ndarray, predictions: np.ndarray, num_thresholds: int = 127, weights: Any = None) -> np.ndarray:
    """The `(6, num_thresholds)` rows TensorBoard's pr_curves plugin reads: true
    positives, false positives, true negatives, false negatives, precision and
    recall at thresholds `i / (num_thresholds - 1)`."""
    minimum_count = 1e-7
    if weights is None:
        weights = 1.0
    bucket_indices = np.int32(np.floor(predictions * (num_thresholds - 1)))
    float_labels = labels.astype(np.float64)
    histogram_range = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range, weights=float_labels * weights)
    fp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range, weights=(1.0 - float_labels) * weights)
    # Counts at or above each threshold: reversed cumulative sums.
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(minimum_count, tp + fp)
    recall = tp / np.maximum(minimum_count, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def hparams(
    hparam_dict: Optional[Dict[str, Any]] = None,
    metric_dict: Optional[Dict[str, Any]] = None,
    hparam_domain_discrete: Optional[Dict[str, List[Any]]] = None,
) -> Tuple[Any, Any, Any]:
    """The three `Summary` protos of TensorBoard's hparams plugin: the experiment
    (hyperparameter and metric names), the session start (the hyperparameter
    values) and the session end (status success).

    Values may be int, float, str, bool (stored as a number, as PyTorch does) or a
    tensor (its first element); None values are skipped. `hparam_domain_discrete`
    maps a hyperparameter to the list of values it can take, each of its type."""
    from tensorboard.plugins.hparams.api_pb2 import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
        DataType,
        Experiment,
        HParamInfo,
        MetricInfo,
        MetricName,
        Status,
    )
    from tensorboard.plugins.hparams.metadata import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
        EXPERIMENT_TAG,
        PLUGIN_DATA_VERSION,
        PLUGIN_NAME,
        SESSION_END_INFO_TAG,
        SESSION_START_INFO_TAG,
    )
    from tensorboard.plugins.hparams.plugin_data_pb2 import (  # type: ignore[import-untyped, import-not-found, unused-ignore]
        HParamsPluginData,
        SessionEndInfo,
        SessionStartInfo,
    )

    if not isinstance(hparam_dict, dict):
        logger.warning("parameter: hparam_dict should be a dictionary, nothing logged.")
        raise TypeError("parameter: hparam_dict should be a dictionary, nothing logged.")
    if not isinstance(metric_dict, dict):
        logger.warning("parameter: metric_dict should be a dictionary, nothing logged.")
        raise TypeError("parameter: metric_dict should be a dictionary, nothing logged.")
    domains = hparam_domain_discrete or {}
    if not isinstance(domains, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in domains.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k])) for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same type as hparam_dict[{k}].")

    infos = []
    start = SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, (int, float)):  # bool included, as in PyTorch
            field, dtype = "number_value", "DATA_TYPE_FLOAT64"
        elif isinstance(v, str):
            field, dtype = "string_value", "DATA_TYPE_STRING"
        elif isinstance(v, Tensor):  # its first element, no domain
            start.hparams[k].number_value = float(make_np(v).reshape(-1)[0])
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))
            continue
        else:
            raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
        setattr(start.hparams[k], field, v)
        domain = None
        if k in domains:
            domain = struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in domains[k]])
        infos.append(HParamInfo(name=k, type=DataType.Value(dtype), domain_discrete=domain))

    def wrap(tag: str, data: Any) -> Any:
        smd = _plugin_metadata(PLUGIN_NAME, data.SerializeToString())
        return Summary(value=[Summary.Value(tag=tag, metadata=smd)])

    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k)) for k in metric_dict])
    exp = wrap(EXPERIMENT_TAG, HParamsPluginData(experiment=experiment, version=PLUGIN_DATA_VERSION))
    ssi = wrap(SESSION_START_INFO_TAG, HParamsPluginData(session_start_info=start, version=PLUGIN_DATA_VERSION))
    end = SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))
    sei = wrap(SESSION_END_INFO_TAG, HParamsPluginData(session_end_info=end, version=PLUGIN_DATA_VERSION))
    return exp, ssi, sei


def _mesh_value(
    name: str,
    display_name: Optional[str],
    description: Optional[str],
    tensor: Any,
    content_type: int,
    components: int,
    json_config: str,
) -> Any:
    """One `Summary.Value` of a mesh: a `(B, N, 3)` float tensor with the mesh
    plugin's metadata for its content type (vertices, faces or colors)."""
    from tensorboard.plugins.mesh import metadata  # type: ignore[import-untyped, import-not-found, unused-ignore]

    arr = make_np(tensor) if isinstance(tensor, Tensor) else np.asarray(tensor)
    smd = metadata.create_summary_metadata(
        name, display_name, content_type, components, list(arr.shape), description, json_config=json_config
    )
    proto = TensorProto(dtype="DT_FLOAT", float_val=arr.reshape(-1).tolist(), tensor_shape=_shape_proto(arr.shape[:3]))
    return Summary.Value(tag=metadata.get_instance_name(name, content_type), tensor=proto, metadata=smd)


def mesh(
    tag: str,
    vertices: Any,
    colors: Any,
    faces: Any,
    config_dict: Optional[Dict[str, Any]],
    display_name: Optional[str] = None,
    description: Optional[str] = None,
) -> Any:
    """A `Summary` with a mesh or point cloud for TensorBoard's mesh plugin:
    `(B, N, 3)` vertices, and optionally faces (vertex indices) and colors;
    `config_dict` holds the three.js scene settings (stored as sorted JSON)."""
    from tensorboard.plugins.mesh import metadata  # type: ignore[import-untyped, import-not-found, unused-ignore]
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData  # type: ignore[import-untyped, import-not-found, unused-ignore]

    json_config = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    parts = [
        (t, kind)
        for t, kind in ((vertices, MeshPluginData.VERTEX), (faces, MeshPluginData.FACE), (colors, MeshPluginData.COLOR))
        if t is not None
    ]
    components = metadata.get_components_bitmask([kind for _, kind in parts])
    return Summary(value=[_mesh_value(tag, display_name, description, t, kind, components, json_config) for t, kind in parts])
