"""Write the hostile torch-checkpoint corpus to tests/fixtures/hostile_torch/.

Each `<case>.pt` is a broken or malicious file in PyTorch's zip format that
`cp.load` must reject with an UnpicklingError (also a ValueError) whose message
contains the text recorded for it in `manifest.json`, without running code from
the file, without a large allocation and without a crash
(tests/test_serialization.py). `valid_*` files are edge cases that must load.

Pure Python (no candle_py, no torch): the pickles are written opcode by opcode
with the names torch uses, so the corpus does not depend on the code under test.
Run from the repository root: python tools/make_hostile_torch.py
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Tuple

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hostile_torch"


class G:
    """A global written by name (`module.name`)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *a: Any) -> None:  # pickle's save_reduce wants a callable
        raise TypeError


class Call:
    """`func(*args)` in the pickle."""

    def __init__(self, func: G, *args: Any) -> None:
        self.func, self.args = func, args


class Pid:
    """A persistent id (the storage reference of torch's format)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _P(pickle._Pickler):  # type: ignore[name-defined,misc]
    def persistent_id(self, obj: Any) -> Any:
        return obj.value if isinstance(obj, Pid) else None

    def save(self, obj: Any, save_persistent_id: bool = True) -> None:
        if isinstance(obj, G):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            return
        super().save(obj, save_persistent_id)

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Call):
            return (obj.func, obj.args)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _P(buf, 2).dump(obj)
    return buf.getvalue()


FLOAT = G("torch", "FloatStorage")
REBUILD = G("torch._utils", "_rebuild_tensor_v2")


def storage(key: str, numel: int, stype: G = FLOAT, location: str = "cpu") -> Pid:
    return Pid(("storage", stype, key, location, numel))


def tensor(st: Any, offset: int, size: Tuple[Any, ...], stride: Tuple[Any, ...]) -> Call:
    return Call(REBUILD, st, offset, size, stride, False, Call(G("collections", "OrderedDict")))


def archive(records: List[Tuple[str, bytes]], prefix: str = "archive") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in records:
            zf.writestr(zipfile.ZipInfo(f"{prefix}/{name}", date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def checkpoint(obj: Any, data: Dict[str, bytes], byteorder: bytes = b"little") -> bytes:
    recs = [("data.pkl", dumps(obj)), ("byteorder", byteorder)]
    recs += [(f"data/{k}", v) for k, v in data.items()]
    recs.append(("version", b"3\n"))
    return archive(recs)


SIX = struct.pack("<6f", 0, 1, 2, 3, 4, 5)


def cases() -> Dict[str, Tuple[bytes, str]]:
    good = checkpoint({"w": tensor(storage("0", 6), 0, (2, 3), (3, 1))}, {"0": SIX})
    c: Dict[str, Tuple[bytes, str]] = {}
    c["valid_minimal"] = (good, "")
    c["valid_view"] = (checkpoint({"w": tensor(storage("0", 6), 1, (2, 2), (1, 2))}, {"0": SIX}), "")
    c["truncated_half"] = (good[: len(good) // 2], "corrupt or truncated zip")
    c["truncated_tail"] = (good[:-10], "corrupt or truncated zip")
    c["not_zip"] = (b"\x00garbage" * 8, "not a zip archive")
    c["empty_zip"] = (archive([]), "empty zip archive")
    c["no_data_pkl"] = (archive([("version", b"3\n")]), "no data.pkl")
    c["numel_lie"] = (checkpoint({"w": tensor(storage("0", 1000), 0, (1000,), (1,))}, {"0": SIX}), "holds 24 bytes, 4000 needed")
    c["view_out_of_bounds"] = (checkpoint({"w": tensor(storage("0", 6), 0, (10,), (1,))}, {"0": SIX}), "reaches element")
    c["offset_out_of_bounds"] = (checkpoint({"w": tensor(storage("0", 6), 6, (1,), (1,))}, {"0": SIX}), "reaches element")
    c["negative_stride"] = (checkpoint({"w": tensor(storage("0", 6), 5, (6,), (-1,))}, {"0": SIX}), "negative stride")
    c["negative_size"] = (checkpoint({"w": tensor(storage("0", 6), 0, (-2,), (1,))}, {"0": SIX}), "negative size")
    c["huge_size"] = (checkpoint({"w": tensor(storage("0", 6), 0, (2**62, 2**62), (1, 1))}, {"0": SIX}), "overflows")
    c["size_not_int"] = (checkpoint({"w": tensor(storage("0", 6), 0, ("x",), (1,))}, {"0": SIX}), "bad tensor layout")
    c["missing_record"] = (checkpoint({"w": tensor(storage("7", 6), 0, (6,), (1,))}, {"0": SIX}), "no record 'data/7'")
    c["evil_global"] = (checkpoint({"w": Call(G("os", "system"), "echo pwned")}, {}), "refuses the global os.system")
    evil = storage("0", 6, G("builtins", "eval"))
    c["evil_storage_type"] = (checkpoint({"w": tensor(evil, 0, (6,), (1,))}, {"0": SIX}), "refuses the global builtins.eval")
    c["bad_persistent_id"] = (checkpoint({"w": Pid(("storage", FLOAT, "0"))}, {"0": SIX}), "unknown persistent id")
    c["bad_storage_id"] = (checkpoint({"w": Pid(("storage", FLOAT, 0, "cpu", 6))}, {"0": SIX}), "malformed storage id")
    c["storage_not_storage"] = (checkpoint({"w": Call(REBUILD, 3, 0, (1,), (1,), False, None)}, {}), "not a storage record")
    int8 = storage("0", 6, G("torch", "CharStorage"))
    c["unsupported_dtype"] = (checkpoint({"w": tensor(int8, 0, (6,), (1,))}, {"0": SIX}), "torch.int8")
    c["big_endian"] = (checkpoint({"w": tensor(storage("0", 6), 0, (6,), (1,))}, {"0": SIX}, b"big"), "byte order")
    pkl = dumps({"w": tensor(storage("0", 6), 0, (6,), (1,))})
    c["pickle_truncated"] = (archive([("data.pkl", pkl[: len(pkl) // 2]), ("data/0", SIX)]), "corrupt data.pkl")
    bad_crc = bytearray(good)
    at = bytes(bad_crc).find(SIX)
    bad_crc[at + 4] ^= 0xFF  # flips a byte of the record: the zip's CRC no longer matches
    c["bad_crc"] = (bytes(bad_crc), "is corrupt")
    c["torchscript"] = (archive([("data.pkl", dumps({})), ("constants.pkl", dumps(())), ("code/__torch__.py", b"")]), "TorchScript archive")
    return c


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, (data, msg) in cases().items():
        (OUT / f"{name}.pt").write_bytes(data)
        manifest[name] = msg
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} cases to {OUT}")


if __name__ == "__main__":
    main()
