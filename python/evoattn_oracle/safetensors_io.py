"""Reading and writing safetensors files without the `safetensors` package (it is not a PyTorch
dependency and the fake oracle runs on bare Python): an 8-byte little-endian header length, a
JSON header naming each tensor's dtype, shape and byte range, then the data."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

HEADER_LEN = struct.Struct("<Q")
# The format pads the header with spaces so that the data starts 8-byte aligned.
HEADER_ALIGN = 8
METADATA_KEY = "__metadata__"
ELEMENT_BYTES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


@dataclass(frozen=True)
class RawTensor:
    """One tensor as stored: safetensors dtype name (e.g. "BF16"), shape, row-major bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


def read(path: str | Path) -> dict[str, RawTensor]:
    """Every tensor of a safetensors file. Raises ValueError naming the file if it is malformed."""
    blob = Path(path).read_bytes()
    if len(blob) < HEADER_LEN.size:
        raise ValueError(f"{path} is not a safetensors file (too short)")
    (header_len,) = HEADER_LEN.unpack_from(blob)
    start = HEADER_LEN.size + header_len
    if start > len(blob):
        raise ValueError(f"{path} is not a safetensors file (header length {header_len} past the end)")
    try:
        header = json.loads(blob[HEADER_LEN.size : start])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not a safetensors file (header: {e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file (the header is not a JSON object)")
    tensors = {}
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        dtype, shape, (begin, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        need = math.prod(shape) * ELEMENT_BYTES.get(dtype, 0)
        if dtype in ELEMENT_BYTES and end - begin != need:
            raise ValueError(f"{path}: tensor '{name}' has {end - begin} bytes, {dtype} {list(shape)} needs {need}")
        if start + end > len(blob):
            raise ValueError(f"{path}: tensor '{name}' runs past the end of the file")
        tensors[name] = RawTensor(dtype, shape, blob[start + begin : start + end])
    return tensors


def write(path: str | Path, tensors: dict[str, RawTensor]) -> None:
    """Writes `tensors` in the given order."""
    header: dict[str, object] = {}
    offset = 0
    for name, t in tensors.items():
        header[name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(t.data)]}
        offset += len(t.data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(HEADER_LEN.size + len(text)) % HEADER_ALIGN)
    with open(path, "wb") as f:
        f.write(HEADER_LEN.pack(len(text)))
        f.write(text)
        for t in tensors.values():
            f.write(t.data)
