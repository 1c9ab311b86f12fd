#!/usr/bin/env python3
"""Writes the safetensors seeds of corpus/safetensors (run from tests/fuzz): small valid files
(F32, F16/BF16, integer dtypes, a scalar and an empty tensor, metadata only) and slightly broken
ones (truncated data, offsets past the data, a header that is not JSON)."""
import json
import struct

f32 = lambda *v: struct.pack("<%df" % len(v), *v)


def safetensors(tensors, meta={"format": "pt"}, raw_header=None):
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # the format pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(h)) + h + data


seeds = {
    "valid_f32": safetensors({"w": ("F32", [2, 2], f32(1, 2, 3, 4)), "b": ("F32", [2], f32(0.5, -1))}),
    "valid_bf16_f16": safetensors({"h": ("F16", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x8001)),
                                   "g": ("BF16", [2], struct.pack("<2H", 0x3F80, 0x7FC0))}),
    "scalar_and_empty": safetensors({"s": ("F32", [], f32(7)), "e": ("F32", [0, 4], b"")}),
    "metadata_only": safetensors({}, meta={"format": "pt", "note": "x"}),
    "int_dtypes": safetensors({"i": ("I64", [1], struct.pack("<q", 5)), "u": ("U8", [2], b"\x01\x02"),
                               "q": ("BOOL", [1], b"\x01")}),
    "truncated": safetensors({"w": ("F32", [4], f32(1, 2, 3, 4))})[:-6],
    "bad_offsets": safetensors({}, raw_header=b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}') + f32(1, 2),
    "bad_json": safetensors({}, raw_header=b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}') + f32(1, 2),
}
for name, data in seeds.items():
    with open("corpus/safetensors/" + name, "wb") as f:
        f.write(data)
