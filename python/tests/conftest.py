"""Shared fixtures: the package on sys.path (tests run from anywhere) and q/k/v files."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PYTHON_DIR))

from evoattn_oracle import safetensors_io  # noqa: E402
from evoattn_oracle.fake import FakeBackend  # noqa: E402
from evoattn_oracle.server import Server  # noqa: E402

ST_DTYPES = {"f16": "F16", "bf16": "BF16"}
# Keeps the pattern away from the exponent bits that would make inf/NaN.
PATTERN_MASK = 0x3FFF


def qkv_file(
    path: Path,
    b: int = 1,
    h: int = 4,
    hkv: int = 2,
    sq: int = 16,
    sk: int = 32,
    d: int = 64,
    dtype: str = "f16",
    layout: str = "bhsd",
) -> Path:
    """A safetensors file with q, k, v of the given shape; element i of tensor t holds the 16-bit
    pattern (i * 7 + salt(t)) so copies can be checked bit for bit."""

    def tensor(salt: int, heads: int, seq: int) -> safetensors_io.RawTensor:
        shape = (b, heads, seq, d) if layout == "bhsd" else (b, seq, heads, d)
        n = b * heads * seq * d
        data = struct.pack(f"<{n}H", *(((i * 7 + salt) & PATTERN_MASK) for i in range(n)))
        return safetensors_io.RawTensor(ST_DTYPES[dtype], shape, data)

    safetensors_io.write(path, {"q": tensor(1, h, sq), "k": tensor(2, hkv, sk), "v": tensor(3, hkv, sk)})
    return path


@pytest.fixture
def server() -> Server:
    return Server(FakeBackend())


@pytest.fixture
def loaded(server: Server, tmp_path: Path) -> Server:
    """A server with case 'c' (1,4,16,64 with Hkv 2, Sk 32, f16, BHSD) loaded, no mask."""
    path = qkv_file(tmp_path / "in.safetensors")
    response = server.handle(
        {"op": "load", "id": "c", "path": str(path), "layout": "bhsd", "causal": "none", "scale": 0.125}
    )
    assert response["ok"], response
    return server
