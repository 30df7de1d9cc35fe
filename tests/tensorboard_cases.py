"""The fixed sequence of `SummaryWriter` calls that tests/test_tensorboard.py runs on
candle_py and tools/make_fixtures_tensorboard.py runs on PyTorch (into
tests/fixtures/tensorboard/), and the decoding of the event files they write into
comparable Python values.

`write_events(lib, SummaryWriter, root)` takes the library (`torch` or `candle_py`)
only to make its tensors; the data are fixed NumPy arrays. Every call that accepts
a `walltime` gets a small explicit one (< 1e8), so those wall times are
deterministic; the others (an event file's first event, `add_hparams`' and
`add_custom_scalars`' events) carry the clock's time.
"""

from __future__ import annotations

import glob
import io
import os
from typing import Any, Callable, Dict, List

import numpy as np

T0 = 1000.0  # explicit wall times are T0 + something: far below any clock time
CLOCK = 1e8  # wall times above this came from time.time()


def _data() -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    return {
        "normal": rng.standard_normal(300).astype(np.float32),
        "normal64": rng.standard_normal((4, 25)),
        "uniform": rng.random(64).astype(np.float32),
        "labels": (rng.random(64) > 0.5).astype(np.int64),
        "img_chw": rng.random((3, 5, 7)).astype(np.float32),
        "img_hwc_u8": rng.integers(0, 256, (6, 4, 3)).astype(np.uint8),
        "img_hw": np.linspace(-0.25, 1.25, 20, dtype=np.float32).reshape(4, 5),
        "img_nchw": rng.random((3, 1, 4, 4)).astype(np.float32),
        "emb": rng.standard_normal((4, 3)).astype(np.float32),
        "emb_img": rng.random((4, 3, 2, 2)).astype(np.float32),
        "sound": np.sin(np.linspace(0, 8 * np.pi, 64)).astype(np.float32) * 0.5,
    }


def write_events(lib: Any, SummaryWriter: Any, root: str) -> None:
    """Run the sequence with `SummaryWriter` (torch's or candle_py's) under `root`:
    `root/main` (with the `add_scalars` and `add_hparams` subdirectories and an
    embedding) and `root/purged` (a writer with `purge_step`)."""
    d = _data()
    t = lib.tensor
    with SummaryWriter(os.path.join(root, "main"), flush_secs=10_000) as w:
        for step in range(4):
            w.add_scalar("loss", t(d["normal"][step]), step, walltime=T0 + step)
        w.add_scalar("py/float", 0.1, 7, walltime=T0 + 10)
        w.add_scalar("py/int", 3, 8, walltime=T0 + 11)
        w.add_scalar("np/float64", np.float64(1.0 / 3.0), 9, walltime=T0 + 12)
        w.add_scalar("np/array11", np.array([[2.5]]), 10, walltime=T0 + 13)
        w.add_scalar("tensor/11", t([[1.0 / 3.0]]), 11, walltime=T0 + 14)
        w.add_scalar("tensor/int", t(42), 12, walltime=T0 + 15)
        w.add_scalar("tensor/bf16", t(3.140625, dtype=lib.bfloat16), 13, walltime=T0 + 16)
        w.add_scalar("tensor/bf16_big", t(1.0e5, dtype=lib.bfloat16), 13, walltime=T0 + 16.5)
        w.add_scalar("tensor/f64", t(1.0 / 3.0, dtype=lib.float64), 14, walltime=T0 + 17)
        w.add_scalar("new/float", t(1.0 / 3.0), 15, walltime=T0 + 18, new_style=True)
        w.add_scalar("new/double", 1.0 / 3.0, 16, walltime=T0 + 19, new_style=True, double_precision=True)
        w.add_scalar("no_step", 5.0, walltime=T0 + 20)
        for step in range(3):
            w.add_scalars("run/cmp", {"a": float(step), "b": t(float(-step))}, step, walltime=T0 + 30 + step)

        x = t(d["normal"])
        w.add_histogram("hist/tf", x, 0, walltime=T0 + 40)
        w.add_histogram("hist/ten", x, 1, bins=10, walltime=T0 + 41)
        w.add_histogram("hist/auto", x, 2, bins="auto", walltime=T0 + 42)
        w.add_histogram("hist/fd", d["normal"], 3, bins="fd", walltime=T0 + 43)
        w.add_histogram("hist/edges", x, 4, bins=np.linspace(-2.0, 2.0, 9), walltime=T0 + 44)
        w.add_histogram("hist/max_bins", x, 5, bins=30, max_bins=7, walltime=T0 + 45)
        w.add_histogram("hist/f64_2d", t(d["normal64"]), 6, walltime=T0 + 46)
        w.add_histogram("hist/int", lib.arange(20), 7, bins=5, walltime=T0 + 47)
        w.add_histogram("hist/bf16", t(d["normal"][:50]).to(lib.bfloat16), 8, walltime=T0 + 48)
        w.add_histogram("hist/scalar", 2.5, 9, walltime=T0 + 49)
        w.add_histogram_raw("hist/raw", -1.0, 3.0, 6, 7.5, 20.25, [0.0, 1.0, 3.0], [1, 3, 2], global_step=10, walltime=T0 + 50)

        w.add_text("notes", "hello **tensorboard** ünïcode", 0, walltime=T0 + 60)
        w.add_text("notes", "second", 1, walltime=T0 + 61)

        w.add_image("img/chw", t(d["img_chw"]), 0, walltime=T0 + 70)
        w.add_image("img/hwc_u8", t(d["img_hwc_u8"]), 1, walltime=T0 + 71, dataformats="HWC")
        w.add_image("img/hw_clipped", t(d["img_hw"]), 2, walltime=T0 + 72, dataformats="HW")
        w.add_image("img/np_chw1", d["img_nchw"][0], 3, walltime=T0 + 73)
        w.add_images("img/batch", t(d["img_nchw"]), 4, walltime=T0 + 74)
        w.add_images("img/batch_nhwc", t(d["img_nchw"]).permute(0, 2, 3, 1), 5, walltime=T0 + 75, dataformats="NHWC")
        w.add_image_with_boxes("img/boxes", t(d["img_chw"]), t([[1.0, 1.0, 5.0, 3.0]]), 6, walltime=T0 + 76)

        w.add_pr_curve("pr", t(d["labels"]), t(d["uniform"]), 0, num_thresholds=11, walltime=T0 + 80)
        w.add_pr_curve("pr_default", d["labels"], d["uniform"], 1, walltime=T0 + 81)
        w.add_pr_curve_raw(
            "pr_raw", [3.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 1.0, 2.0], [0.0, 1.0, 3.0],
            [0.6, 2.0 / 3.0, 0.0], [1.0, 2.0 / 3.0, 0.0], 2, num_thresholds=3, walltime=T0 + 82,
        )  # fmt: skip

        w.add_tensor("tensor/f32", t(d["normal64"][:2, :3].astype(np.float32)), 0, walltime=T0 + 90)
        w.add_tensor("tensor/i64", lib.arange(6).reshape(2, 3), 1, walltime=T0 + 91)
        w.add_tensor("tensor/f16", t([0.5, -2.0], dtype=lib.float16), 2, walltime=T0 + 92)
        w.add_tensor("tensor/b", t([True, False]), 3, walltime=T0 + 93)

        w.add_audio("sound", t(d["sound"]).reshape(1, -1), 0, sample_rate=8000, walltime=T0 + 100)
        w.add_mesh(
            "mesh",
            t([[[1.0, 1.0, 1.0], [-1.0, -1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0]]]),
            colors=t([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 0, 255]]]),
            faces=t([[[0, 2, 3], [0, 3, 1], [0, 1, 2], [1, 3, 2]]]),
            config_dict={"camera": {"cls": "PerspectiveCamera", "fov": 75}},
            global_step=0,
            walltime=T0 + 110,
        )
        w.add_custom_scalars({"cat": {"losses": ["Multiline", ["loss", "py/float"]], "band": ["Margin", ["loss", "py/float", "py/int"]]}})
        w.add_hparams(
            {"lr": 0.01, "bsize": 32, "opt": "adam", "flag": True, "skip": None, "t": t([0.5])},
            {"hparam/accuracy": 0.75, "hparam/loss": t(0.25)},
            hparam_domain_discrete={"opt": ["adam", "sgd"], "bsize": [16, 32]},
            run_name="hp",
            global_step=3,
        )
        w.add_embedding(t(d["emb"]), metadata=["a", "b", "c", "d"], label_img=t(d["emb_img"]), global_step=3, tag="emb/x")
        w.add_embedding(d["emb"], metadata=[["a", 1], ["b", 2], ["c", 3], ["d", 4]], metadata_header=["name", "n"], global_step=4)
    with SummaryWriter(os.path.join(root, "purged"), purge_step=3) as w:
        w.add_scalar("loss", 1.5, 3, walltime=T0 + 200)


# Calls that fail: the tool records the type of PyTorch's exception for each
# (tests/fixtures/tensorboard/errors.json) and the test expects the same type.
BAD_CALLS: Dict[str, Callable[[Any, Any], Any]] = {
    "scalar_two_elements": lambda lib, w: w.add_scalar("x", lib.tensor([1.0, 2.0])),
    "scalar_list": lambda lib, w: w.add_scalar("x", [1.0]),
    "scalar_string": lambda lib, w: w.add_scalar("x", "abc"),
    "histogram_empty": lambda lib, w: w.add_histogram("h", lib.zeros(0)),
    "histogram_list": lambda lib, w: w.add_histogram("h", [1.0, 2.0]),
    "histogram_raw_lengths": lambda lib, w: w.add_histogram_raw("h", 0, 1, 2, 1, 1, [0.5, 1.0], [2]),
    "image_rank": lambda lib, w: w.add_image("i", lib.zeros(3, 4)),
    "image_repeated_axis": lambda lib, w: w.add_image("i", lib.zeros(3, 4, 5), dataformats="CCW"),
    "images_rank": lambda lib, w: w.add_images("i", lib.zeros(3, 4, 5)),
    "image_channels": lambda lib, w: w.add_images("i", lib.zeros(2, 2, 4, 4)),
    "hparams_not_dict": lambda lib, w: w.add_hparams([("lr", 0.1)], {}),
    "hparams_bad_value": lambda lib, w: w.add_hparams({"lr": [0.1]}, {"m": 1.0}, run_name="bad"),
    "hparams_np_float32": lambda lib, w: w.add_hparams({"lr": np.float32(0.1)}, {"m": 1.0}, run_name="bad"),
    "hparams_bad_domain": lambda lib, w: w.add_hparams({"lr": 0.1}, {}, hparam_domain_discrete={"lr": ["a"]}, run_name="bad"),
    "hparams_domain_unknown": lambda lib, w: w.add_hparams({"lr": 0.1}, {}, hparam_domain_discrete={"x": [1.0]}, run_name="bad"),
    "marginchart_tags": lambda lib, w: w.add_custom_scalars_marginchart(["a", "b"]),
    "custom_margin_tags": lambda lib, w: w.add_custom_scalars({"c": {"m": ["Margin", ["a", "b"]]}}),
    "embedding_1d": lambda lib, w: w.add_embedding(lib.zeros(4), global_step=7),
    "embedding_metadata_count": lambda lib, w: w.add_embedding(lib.zeros(4, 2), metadata=["a"], global_step=8),
    "embedding_label_img_count": lambda lib, w: w.add_embedding(lib.zeros(4, 2), label_img=lib.zeros(3, 3, 2, 2), global_step=9),
    "audio_2d": lambda lib, w: w.add_audio("a", lib.zeros(2, 8)),
    "pr_curve_list": lambda lib, w: w.add_pr_curve("p", [1, 0], [0.5, 0.5]),
    "text_not_str": lambda lib, w: w.add_text("t", 5),
    "tensor_uint32": lambda lib, w: w.add_tensor("t", lib.tensor([1, 2], dtype=lib.uint32)),
}


def bad_call_errors(lib: Any, SummaryWriter: Any, root: str) -> Dict[str, str]:
    """Name of each `BAD_CALLS` case -> the name of the exception it raised
    ("no error" if none)."""
    out = {}
    with SummaryWriter(root) as w:
        for name, call in BAD_CALLS.items():
            try:
                call(lib, w)
                out[name] = "no error"
            except Exception as e:
                out[name] = type(e).__name__
    return out


# -- reading --------------------------------------------------------------------


def event_files(root: str) -> Dict[str, str]:
    """Directory (relative to `root`, "/"-separated) -> its one event file."""
    out: Dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "events.out.tfevents.*"), recursive=True)):
        rel = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "/")
        assert rel not in out, f"two event files in {rel}"
        out[rel] = path
    return out


def other_files(root: str) -> Dict[str, bytes]:
    """Every file under `root` that is not an event file (the embedding's), by path."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "*"), recursive=True)):
        if os.path.isfile(path) and not os.path.basename(path).startswith("events.out.tfevents."):
            with open(path, "rb") as f:
                out[os.path.relpath(path, root).replace(os.sep, "/")] = f.read()
    return out


def read_records(path: str) -> List[bytes]:
    """The records of a TFRecord file, checking each length and data CRC."""
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        assert length_crc == masked_crc32c(header), f"bad length crc in {path}"
        body = data[pos + 12 : pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        assert body_crc == masked_crc32c(body), f"bad data crc in {path}"
        out.append(body)
        pos += 16 + length
    return out


def _png_pixels(data: bytes) -> Any:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return {"mode": im.mode, "size": list(im.size), "pixels": np.asarray(im).tolist()}


def _plugin_content(name: str, content: bytes) -> Any:
    from google.protobuf.json_format import MessageToDict

    if not content:
        return None
    if name == "hparams":
        from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData as Msg
    elif name == "pr_curves":
        from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData as Msg
    elif name == "text":
        from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData as Msg
    elif name == "mesh":
        from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData as Msg
    else:
        return content
    return MessageToDict(Msg.FromString(content), preserving_proto_field_name=True)


def _value(v: Any) -> Dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    kind = v.WhichOneof("value")
    plugin = v.metadata.plugin_data.plugin_name
    out: Dict[str, Any] = {"tag": v.tag, "kind": kind, "plugin": plugin}
    out["content"] = _plugin_content(plugin, v.metadata.plugin_data.content)
    if kind == "simple_value":
        out["simple_value"] = v.simple_value
    elif kind == "histo":
        h = v.histo
        out["histo"] = {
            "min": h.min,
            "max": h.max,
            "num": h.num,
            "sum": h.sum,
            "sum_squares": h.sum_squares,
            "bucket_limit": list(h.bucket_limit),
            "bucket": list(h.bucket),
        }
    elif kind == "image":
        im = v.image
        out["image"] = {"height": im.height, "width": im.width, "colorspace": im.colorspace}
        out["image"]["png"] = _png_pixels(im.encoded_image_string) if im.encoded_image_string else None
    elif kind == "audio":
        out["audio"] = MessageToDict(v.audio, preserving_proto_field_name=True)
    elif kind == "tensor":
        tp = v.tensor
        tensor: Dict[str, Any] = {"dtype": tp.dtype, "shape": [dim.size for dim in tp.tensor_shape.dim]}
        for field in ("float_val", "double_val", "int_val", "int64_val", "half_val", "bool_val", "uint32_val"):
            tensor[field] = list(getattr(tp, field))
        strings = list(tp.string_val)
        if plugin == "custom_scalars":
            from tensorboard.plugins.custom_scalar import layout_pb2

            tensor["string_val"] = [MessageToDict(layout_pb2.Layout.FromString(s)) for s in strings]
        else:
            tensor["string_val"] = [s.decode("utf-8") for s in strings]
        out["tensor"] = tensor
    return out


def decode_events(path: str) -> List[Dict[str, Any]]:
    """The events of one event file as plain Python values: images decoded to
    pixels, plugin contents and custom-scalar layouts parsed to dicts."""
    from tensorboard.compat.proto import event_pb2

    out = []
    for rec in read_records(path):
        ev = event_pb2.Event.FromString(rec)
        what = ev.WhichOneof("what")
        item: Dict[str, Any] = {"wall_time": ev.wall_time, "step": ev.step, "what": what}
        if what == "summary":
            item["values"] = [_value(v) for v in ev.summary.value]
        elif what == "file_version":
            item["file_version"] = ev.file_version
            item["source_writer"] = ev.source_metadata.writer
        elif what == "session_log":
            item["session_log"] = ev.session_log.status
        out.append(item)
    return out
