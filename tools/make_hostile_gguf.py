"""Write the hostile GGUF corpus to tests/fixtures/hostile_gguf/.

Each `<case>.gguf` is a broken or malicious file that `cp.quantized.load_gguf`
must reject with a ValueError whose message contains the text recorded for it
in `manifest.json`, without a large allocation, a hang or a crash
(tests/test_quantized_gguf_hostile.py). The `valid_*` files are edge cases the
format allows; they must load.

Run from the repository root: python tools/make_hostile_gguf.py
Pure Python (no candle_py, no gguf package): the bytes are laid out by hand from
the GGUF spec (github.com/ggml-org/ggml/blob/master/docs/gguf.md), so the corpus
does not depend on the code under test.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Optional

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hostile_gguf"

# Metadata value types and GGML tensor types (ids from the spec).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
T_F32, T_Q4_0, T_Q8_0 = 0, 2, 8


def s(text: str | bytes, n: Optional[int] = None) -> bytes:
    """A GGUF (v2+) string: u64 length (`n` overrides it), bytes."""
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b) if n is None else n) + b


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def u32kv(key: str, v: int) -> bytes:
    return kv(key, U32, struct.pack("<I", v))


def info(name: str, ne: list[int], ttype: int, offset: int, n_dims: Optional[int] = None) -> bytes:
    """A tensor info: name, dim count, dims innermost first (u64), type, offset."""
    nd = len(ne) if n_dims is None else n_dims
    return s(name) + struct.pack("<I", nd) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", ttype, offset)


def gguf(kvs: list[bytes], infos: list[bytes], data: bytes = b"", *, n_kv=None, n_t=None, version=3, align=32, magic=b"GGUF") -> bytes:
    """A whole file: header, metadata, tensor infos, padding to `align`, data."""
    head = magic + struct.pack("<IQQ", version, len(infos) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(infos)
    pad = (-len(body)) % align if data else 0
    return body + b"\0" * pad + data


F32x32 = struct.pack("<32f", *range(32))
GOOD = gguf([u32kv("general.alignment", 32)], [info("w", [32], T_F32, 0)], F32x32)


def cases() -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, text the error message must contain)."""
    c: dict[str, tuple[bytes, str]] = {}
    # The fixed header.
    c["empty_file"] = (b"", "not a GGUF file")
    c["bad_magic"] = (b"GGML" + GOOD[4:], "not a GGUF file")
    c["swapped_magic"] = (b"FUGG" + GOOD[4:], "not a GGUF file")
    c["version_0"] = (gguf([], [], version=0), "unsupported GGUF version 0")
    c["version_99"] = (gguf([], [], version=99), "unsupported GGUF version 99")
    c["big_endian_version"] = (GOOD[:4] + struct.pack(">I", 3) + GOOD[8:], "unsupported GGUF version")
    c["truncated_in_counts"] = (GOOD[:12], "truncated file")
    # Counts the file cannot hold.
    c["tensor_count_u64_max"] = (gguf([], [], n_t=2**64 - 1), "declares")
    c["kv_count_u64_max"] = (gguf([], [], n_kv=2**64 - 1), "declares")
    c["kv_count_2e9"] = (gguf([u32kv("a", 1)], [], n_kv=2_000_000_000), "declares")
    c["tensor_count_off_by_one"] = (gguf([], [info("w", [32], T_F32, 0)], F32x32, n_t=2), "has 0 dimensions")  # padding read as an info
    # Strings.
    c["key_length_u64_max"] = (gguf([s("k", n=2**64 - 1) + b"\0" * 16], []), "string length")
    c["key_length_past_end"] = (gguf([s("k", n=1000) + b"\0" * 16], []), "runs past the end")
    c["value_string_length_huge"] = (gguf([kv("k", STRING, s("v", n=2**62))], []), "string length")
    c["tensor_name_length_huge"] = (gguf([], [s("w", n=2**40) + b"\0" * 32]), "string length")
    # Values.
    c["unknown_value_type"] = (gguf([kv("k", 13, b"\0" * 8)], []), "unknown value type 13")
    c["bool_byte_7"] = (gguf([kv("k", BOOL, b"\x07")], []), "bool byte is 7")
    c["bool_array_byte_2"] = (gguf([kv("k", ARRAY, struct.pack("<IQ", BOOL, 3) + b"\x00\x01\x02")], []), "bool byte is 2")
    c["array_length_u64_max"] = (gguf([kv("k", ARRAY, struct.pack("<IQ", U8, 2**64 - 1) + b"\0" * 8)], []), "array of")
    c["array_of_strings_too_long"] = (gguf([kv("k", ARRAY, struct.pack("<IQ", STRING, 10**9) + s("a"))], []), "array of")
    c["array_unknown_element_type"] = (gguf([kv("k", ARRAY, struct.pack("<IQ", 77, 1) + b"\0" * 8)], []), "unknown array element type")
    nested = struct.pack("<IQ", ARRAY, 1) * 100 + struct.pack("<IQ", U8, 0)
    c["arrays_nested_100_deep"] = (gguf([kv("k", ARRAY, nested)], []), "nested more than")
    c["value_truncated"] = (gguf([kv("k", U64, b"\0" * 3)], []), "truncated file")
    c["duplicate_key"] = (gguf([u32kv("k", 1), u32kv("k", 2)], []), "appears more than once")
    # Alignment (Candle's reader divides by it).
    c["alignment_zero"] = (gguf([u32kv("general.alignment", 0)], [info("w", [32], T_F32, 0)], F32x32), "general.alignment is 0")
    c["alignment_24"] = (gguf([u32kv("general.alignment", 24)], [info("w", [32], T_F32, 0)], F32x32, align=24), "power of two")
    c["alignment_2pow31"] = (gguf([u32kv("general.alignment", 2**31)], [info("w", [32], T_F32, 0)], F32x32), "power of two up to")
    c["alignment_string"] = (gguf([kv("general.alignment", STRING, s("32"))], [info("w", [32], T_F32, 0)], F32x32), "value type 8")
    c["alignment_negative_i32"] = (
        gguf([kv("general.alignment", I32, struct.pack("<i", -32))], [info("w", [32], T_F32, 0)], F32x32),
        "general.alignment is -32",
    )
    # Tensor infos.
    c["zero_dims"] = (gguf([], [info("w", [], T_F32, 0)], F32x32), "has 0 dimensions")
    c["five_dims"] = (gguf([], [info("w", [1, 1, 1, 1, 32], T_F32, 0)], F32x32), "has 5 dimensions")
    c["dims_count_u32_max"] = (gguf([], [info("w", [32], T_F32, 0, n_dims=2**32 - 1)], F32x32), "dimensions, expected 1 to 4")
    c["dims_product_overflows"] = (gguf([], [info("w", [2**32, 2**32, 2], T_F32, 0)], F32x32), "overflows")
    c["dims_product_wraps_to_zero"] = (gguf([], [info("w", [2**32, 2**32], T_F32, 0)], F32x32), "overflows")
    c["dim_u64_max"] = (gguf([], [info("w", [2**64 - 1], T_F32, 0)], F32x32), "overflows")
    c["ggml_type_99"] = (gguf([], [info("w", [32], 99, 0)], F32x32), "GGML type id 99")
    c["ggml_type_removed_q4_2"] = (gguf([], [info("w", [32], 4, 0)], F32x32), "GGML type id 4")
    c["ggml_type_iq2_xxs"] = (gguf([], [info("w", [256], 16, 0)], b"\0" * 1024), "GGML type id 16")
    c["row_not_whole_blocks"] = (gguf([], [info("w", [33], T_Q4_0, 0)], b"\0" * 64), "block size 32")
    c["duplicate_tensor_name"] = (gguf([], [info("w", [32], T_F32, 0), info("w", [32], T_F32, 128)], F32x32 * 2), "appears more than once")
    c["tensor_info_truncated"] = (gguf([], [info("w", [32], T_F32, 0)[:-5]]), "truncated file")
    # Data offsets and sizes.
    c["offset_past_end"] = (gguf([], [info("w", [32], T_F32, 4096)], F32x32), "run past the end")
    c["offset_u64_max"] = (gguf([], [info("w", [32], T_F32, 2**64 - 32)], F32x32), "run past the end")
    c["offset_misaligned"] = (gguf([], [info("w", [32], T_F32, 4)], F32x32 + b"\0" * 4), "not a multiple of the alignment 32")
    c["data_truncated"] = (GOOD[:-8], "run past the end")
    c["huge_tensor_tiny_file"] = (gguf([], [info("w", [2**20, 2**20], T_F32, 0)], F32x32), "run past the end")
    many = [info(f"w{i}", [32], T_F32, 0) for i in range(64)]
    c["tensors_share_bytes"] = (gguf([], many, F32x32), "overlap")
    c["tensors_overlap"] = (gguf([], [info("a", [32], T_F32, 0), info("b", [32], T_F32, 64)], F32x32 * 2), "overlap")
    # Version 1: 32-bit counts and lengths.
    v1 = b"GGUF" + struct.pack("<III", 1, 2**32 - 1, 0)
    c["v1_tensor_count_u32_max"] = (v1, "declares")
    return c


def valid() -> dict[str, bytes]:
    """Edge cases the format allows: they must load."""
    v: dict[str, bytes] = {}
    v["valid_f32"] = GOOD
    # No tensors, no data section.
    v["valid_metadata_only"] = gguf([u32kv("a", 7), kv("s", STRING, s("x\0\0")), kv("f", F64, struct.pack("<d", 0.5))], [])
    # A small alignment puts data at addresses Candle cannot read blocks from directly.
    q8 = b"\x00\x3c" + bytes(range(32))  # one q8_0 block: scale 1.0 (f16), then 32 int8
    v["valid_alignment_2"] = gguf(
        [u32kv("general.alignment", 2)], [info("w", [32], T_F32, 0), info("q", [32], T_Q8_0, 128)], F32x32 + q8, align=2
    )
    # An empty tensor (a zero dim) next to a real one.
    v["valid_empty_tensor"] = gguf([], [info("e", [32, 0], T_F32, 0), info("w", [32], T_F32, 0)], F32x32)
    return v


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.gguf"):
        old.unlink()
    manifest = {}
    for name, (data, expect) in cases().items():
        (OUT / f"{name}.gguf").write_bytes(data)
        manifest[name] = expect
    for name, data in valid().items():
        (OUT / f"{name}.gguf").write_bytes(data)
    (OUT / "manifest.json").write_text(json.dumps({"reject": manifest, "accept": sorted(valid())}, indent=1) + "\n")
    size = sum(p.stat().st_size for p in OUT.glob("*.gguf"))
    print(f"wrote {len(manifest)} hostile and {len(valid())} valid files ({size} bytes) to {OUT}")


if __name__ == "__main__":
    main()
