#!/usr/bin/python3
"""A tiny safetensors reader (no safetensors package needed).

Format: 8-byte little-endian header length N, N bytes of JSON header
{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the raw
little-endian tensor data; offsets are relative to the end of the header.

Usage: /usr/bin/python3 tools/read_safetensors.py FILE   (lists tensors, shapes, dtypes, metadata)
"""

import json
import struct
import sys

import numpy as np
import torch

# safetensors dtype -> (numpy little-endian dtype of the raw bytes, element size)
_DTYPES = {
    "F64": ("<f8", 8),
    "F32": ("<f4", 4),
    "BF16": ("<i2", 2),  # reinterpreted as torch.bfloat16 after loading
    "I64": ("<i8", 8),
    "I32": ("<i4", 4),
}


def _object_without_repeats(path):
    """json.loads' object_pairs_hook: a key given twice is an error (json keeps the last silently)."""

    def build(pairs):
        result = {}
        for key, value in pairs:
            if key in result:
                raise ValueError(f"{path}: header: duplicate key {json.dumps(key)}")
            result[key] = value
        return result

    return build


def read_safetensors(path):
    """Returns (tensors: dict name -> torch.Tensor in file order, metadata: dict str -> str).

    Checks what the format requires and a writer can get wrong: offsets contiguous in header order, each
    tensor's byte size matching its shape and dtype, no trailing bytes.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} exceeds the file size {len(blob)}")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"),
                        object_pairs_hook=_object_without_repeats(path))
    metadata = header.pop("__metadata__", {})
    data = blob[8 + header_len:]
    tensors = {}
    expected_begin = 0
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        np_dtype, size = _DTYPES[dtype]
        begin, end = info["data_offsets"]
        count = 1
        for dim in info["shape"]:
            count *= dim
        if begin != expected_begin or end - begin != count * size or end > len(data):
            raise ValueError(f"{path}: tensor {name} has bad data_offsets {info['data_offsets']}")
        expected_begin = end
        array = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(info["shape"])
        tensor = torch.from_numpy(array.astype(array.dtype.newbyteorder("=")).copy())
        if dtype == "BF16":
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor
    if expected_begin != len(data):
        raise ValueError(f"{path}: {len(data) - expected_begin} trailing bytes after the last tensor")
    return tensors, metadata


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: read_safetensors.py FILE")
    tensors, metadata = read_safetensors(sys.argv[1])
    for key, value in metadata.items():
        print(f"# {key}: {value}")
    for name, t in tensors.items():
        print(f"{name} {str(t.dtype).replace('torch.', '')} {list(t.shape)}")


if __name__ == "__main__":
    main()
