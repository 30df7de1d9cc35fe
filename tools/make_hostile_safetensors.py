"""Write the hostile safetensors corpus to tests/fixtures/hostile/.

Each `<case>.safetensors` is a broken or malicious file that `load_file`,
`load` and `load_metadata` must reject with a ValueError whose message
contains the text recorded for it in `manifest.json`, without a large
allocation and without a crash (tests/test_safetensors_hostile.py). The
`valid_*` files are edge cases the spec allows; they must load.

Run from the repository root: python tools/make_hostile_safetensors.py
Pure Python (no candle_py, no torch): the corpus does not depend on the code under test.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hostile"


def header_bytes(header: dict | str | bytes) -> bytes:
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode()
    return header


def file(header: dict | str | bytes, data: bytes = b"", n: int | None = None) -> bytes:
    """A safetensors file: u64 little-endian header length, header, data.
    `n` overrides the recorded header length."""
    h = header_bytes(header)
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def t(dtype: str, shape: list, start: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [start, end]}


F32x6 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
GOOD = file({"a": t("F32", [2, 3], 0, 24)}, F32x6)
BIG = 2**40


def cases() -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, text the error message must contain)."""
    c: dict[str, tuple[bytes, str]] = {}
    # Lengths.
    c["empty_file"] = (b"", "too short")
    c["five_bytes"] = (b"\x01\x02\x03\x04\x05", "too short")
    c["header_len_past_end"] = (file({"a": t("F32", [1], 0, 4)}, b"\0" * 4, n=1000), "runs past the end")
    c["header_len_1e12"] = (file("{}", n=10**12), "over the")
    c["header_len_u64_max"] = (file("{}", n=2**64 - 1), "over the")
    c["header_len_zero"] = (file(b"", n=0), "not a valid JSON")
    c["truncated_header"] = (GOOD[:20], "runs past the end")
    c["truncated_data"] = (GOOD[:-5], "run past the end")
    c["trailing_bytes"] = (GOOD + b"\0" * 8, "cover 24")
    # Header text.
    c["invalid_json"] = (file('{"a": {"dtype": "F32", "shape": [1], '), "not a valid JSON")
    c["invalid_utf8"] = (file(b'{"\xff\xfe": 1}'), "UTF-8")
    c["header_is_list"] = (file("[1, 2, 3]"), "not a valid JSON object")
    c["header_is_number"] = (file("12345678"), "not a valid JSON object")
    c["nan_in_header"] = (file('{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', b"\0" * 4), "not a valid JSON")
    c["deep_nesting"] = (file('{"a":' + "[" * 100_000 + "]" * 100_000 + "}"), "not a valid JSON")
    c["entry_not_object"] = (file({"a": "F32"}), "not a JSON object")
    c["metadata_not_strings"] = (file({"__metadata__": {"k": 1}}), "__metadata__")
    c["metadata_is_list"] = (file({"__metadata__": ["a"]}), "__metadata__")
    # Entries.
    c["missing_dtype"] = (file({"a": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4), "dtype")
    c["unknown_dtype"] = (file({"a": t("X99", [1], 0, 4)}, b"\0" * 4), "unknown dtype")
    c["unsupported_dtype"] = (file({"a": t("F8_E4M3", [4], 0, 4)}, b"\0" * 4), "not supported")
    c["negative_dim"] = (file({"a": t("F32", [-1], 0, 4)}, b"\0" * 4), "non-negative")
    c["float_dim"] = (file({"a": t("F32", [1.5], 0, 4)}, b"\0" * 4), "non-negative")
    c["shape_not_list"] = (file({"a": {"dtype": "F32", "shape": 5, "data_offsets": [0, 20]}}, b"\0" * 20), "shape must be")
    c["missing_offsets"] = (file({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4), "data_offsets")
    c["three_offsets"] = (file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}, b"\0" * 8), "data_offsets")
    c["float_offsets"] = (file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.5]}}, b"\0" * 4), "data_offsets")
    c["negative_offset"] = (file({"a": t("F32", [1], -4, 0)}, b"\0" * 4), "data_offsets")
    # Offsets.
    c["offsets_past_end"] = (file({"a": t("F32", [250_000], 0, 1_000_000)}, b"\0" * 16), "run past the end")
    c["offsets_past_end_1e12"] = (file({"a": t("U8", [10**12], 0, 10**12)}, b"\0" * 16), "run past the end")
    c["offsets_reversed"] = (file({"a": t("F32", [1], 8, 4)}, b"\0" * 8), "end before they start")
    c["offsets_overlap"] = (file({"a": t("F32", [4], 0, 16), "b": t("F32", [4], 8, 24)}, b"\0" * 24), "overlap")
    c["offsets_same_span"] = (file({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 0, 8)}, b"\0" * 8), "overlap")
    c["offsets_gap"] = (file({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 12, 20)}, b"\0" * 20), "no tensor covers")
    c["offsets_not_from_zero"] = (file({"a": t("F32", [1], 4, 8)}, b"\0" * 8), "no tensor covers")
    # dtype/shape versus byte count.
    c["bytes_too_few"] = (file({"a": t("F32", [2, 3], 0, 20)}, b"\0" * 20), "need 24 bytes")
    c["bytes_too_many"] = (file({"a": t("F32", [2, 3], 0, 28)}, b"\0" * 28), "need 24 bytes")
    c["dtype_size_mismatch"] = (file({"a": t("F64", [3], 0, 12)}, b"\0" * 12), "need 24 bytes")
    c["scalar_wrong_bytes"] = (file({"a": t("I64", [], 0, 4)}, b"\0" * 4), "need 8 bytes")
    c["count_overflow"] = (file({"a": t("F32", [2**32, 2**32, 2**32], 0, 0)}), "overflows")
    c["count_overflow_zero_dim"] = (file({"a": t("F32", [0, BIG, BIG], 0, 0)}), "overflows")
    c["count_past_i64"] = (file({"a": t("U8", [2**63], 0, 0)}), "overflows")
    c["bytes_overflow"] = (file({"a": t("F64", [2**62], 0, 0)}), "overflows")
    c["count_u64_max"] = (file({"a": t("U8", [2**64 - 1], 0, 0)}), "overflows")
    c["dim_past_u64"] = (file('{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}}'), "non-negative")
    # Names.
    c["duplicate_names"] = (
        file('{"a":' + json.dumps(t("F32", [1], 0, 4)) + ',"a":' + json.dumps(t("F32", [1], 0, 4)) + "}", b"\0" * 4),
        "more than once",
    )
    c["duplicate_names_escaped"] = (
        file('{"a":' + json.dumps(t("F32", [1], 0, 4)) + ',"\\u0061":' + json.dumps(t("F32", [1], 4, 8)) + "}", b"\0" * 8),
        "more than once",
    )
    c["duplicate_metadata"] = (file('{"__metadata__":{},"__metadata__":{}}'), "more than once")
    return c


def valid() -> dict[str, bytes]:
    """Files the spec allows; they must load."""
    v: dict[str, bytes] = {}
    v["valid_good"] = GOOD
    v["valid_empty_header"] = file("{}")
    v["valid_padded_header"] = file(json.dumps({"a": t("F32", [2, 3], 0, 24)}) + " " * 13, F32x6)
    v["valid_zero_size"] = file({"a": t("F32", [0, 3], 0, 0), "b": t("U8", [2], 0, 2)}, b"\x01\x02")
    v["valid_scalar"] = file({"s": t("F64", [], 0, 8)}, struct.pack("<d", 2.5))
    v["valid_metadata"] = file({"__metadata__": {"format": "pt"}, "a": t("I32", [1], 0, 4)}, struct.pack("<i", 7))
    v["valid_nested_key_dupes"] = file({"x": t("U8", [1], 0, 1), "y": t("U8", [1], 1, 2)}, b"\x03\x04")
    return v


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.safetensors"):
        old.unlink()
    manifest = {}
    for name, (data, expect) in cases().items():
        (OUT / f"{name}.safetensors").write_bytes(data)
        manifest[name] = expect
    for name, data in valid().items():
        (OUT / f"{name}.safetensors").write_bytes(data)
    (OUT / "manifest.json").write_text(json.dumps({"reject": manifest, "accept": sorted(valid())}, indent=1) + "\n")
    size = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(manifest)} hostile and {len(valid())} valid files ({size} bytes) to {OUT}")


if __name__ == "__main__":
    main()
