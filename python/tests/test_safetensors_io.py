"""The dependency-free safetensors reader and writer."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from evoattn_oracle import safetensors_io
from evoattn_oracle.safetensors_io import RawTensor


def test_round_trip_keeps_order_dtype_shape_and_bytes(tmp_path: Path) -> None:
    tensors = {
        "q": RawTensor("BF16", (1, 2, 3, 8), bytes(range(96))),
        "o": RawTensor("F16", (2, 8), bytes(32)),
        "empty": RawTensor("F16", (0, 8), b""),
    }
    path = tmp_path / "t.safetensors"
    safetensors_io.write(path, tensors)
    assert safetensors_io.read(path) == tensors
    blob = path.read_bytes()
    (header_len,) = struct.unpack_from("<Q", blob)
    assert (8 + header_len) % safetensors_io.HEADER_ALIGN == 0, "data must start 8-byte aligned"
    assert list(json.loads(blob[8 : 8 + header_len])) == ["q", "o", "empty"]


def test_metadata_is_skipped(tmp_path: Path) -> None:
    header = json.dumps({"__metadata__": {"format": "pt"}, "v": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}})
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\x01\x02\x03\x04")
    assert safetensors_io.read(path) == {"v": RawTensor("F16", (2,), b"\x01\x02\x03\x04")}


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\x01", "too short"),
        (struct.pack("<Q", 1000) + b"{}", "past the end"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 57) + b'{"v":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}}   ', "needs 6"),
        (struct.pack("<Q", 57) + b'{"v":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}   ', "past the end"),
    ],
)
def test_malformed_files_are_value_errors(tmp_path: Path, blob: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=message):
        safetensors_io.read(path)
