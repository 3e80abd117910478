"""The twin of evoattn's counter-based generator (crates/evoattn/src/draw.rs): a case's inputs
drawn here on the GPU, bit for bit the values evoattn draws, so that large cases never cross the
host. Every operation is exact on Python ints and on int64 torch tensors alike (products of two
32-bit values wrap in int64, and only their low 32 bits are kept); the one float32 multiply and
the round to the element type are IEEE round-to-nearest-even everywhere. E4M3 values are the
drawn float32 value divided (in float32) by its (batch, KV head) group's descale, then rounded
to E4M3 once: evoattn's `Draw::host`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .protocol import Request, RequestError

MASK32 = 0xFFFFFFFF
SUM_MEAN = 2 * 65535
# Elements drawn per torch pass: bounds the int64 temporaries to a few GiB.
CHUNK = 1 << 26


def hash32(x: Any) -> Any:
    """Wellons' lowbias32 on values in [0, 2^32), for ints or int64 tensors."""
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & MASK32
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & MASK32
    return x ^ (x >> 16)


def sums(index: Any, keys: tuple[int, int]) -> Any:
    """The centred sum of four 16-bit uniforms of element `index`: an exact integer."""
    h1 = hash32(index ^ keys[0])
    h2 = hash32((h1 + keys[1]) & MASK32)
    return (h1 & 0xFFFF) + (h1 >> 16) + (h2 & 0xFFFF) + (h2 >> 16) - SUM_MEAN


@dataclass(frozen=True)
class DrawStream:
    """One tensor's generator as a `draw` request gives it: two 32-bit keys and the float32
    factor from the integer sum to the requested standard deviation."""

    keys: tuple[int, int]
    scale: float

    @staticmethod
    def parse(name: str, fields: Any) -> DrawStream:
        if not isinstance(fields, dict):
            raise RequestError(f"tensor '{name}' of a draw must be an object with 'keys' and 'scale'")
        keys = fields.get("keys")
        if (
            not isinstance(keys, list)
            or len(keys) != 2
            or any(isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MASK32 for k in keys)
        ):
            raise RequestError(f"'keys' of tensor '{name}' must be two integers in [0, 2^32), got {keys!r}")
        scale = Request(fields).number("scale")
        return DrawStream((keys[0], keys[1]), scale)


def draw(
    torch: Any,
    device: Any,
    shape: tuple[int, int, int, int],
    stream: DrawStream,
    dtype: Any,
    descales: Any = None,
    kv_heads: int = 1,
) -> Any:
    """A dense logical [b, h, s, d] tensor of `dtype` on `device`. With `descales` (a float32
    [b * kv_heads] tensor on `device`, for E4M3), each value is divided by the descale of its
    group: batch b, KV head h // (heads / kv_heads)."""
    b, heads, seq, d = shape
    n = b * heads * seq * d
    keys = stream.keys
    out = torch.empty(n, dtype=dtype, device=device)
    factor = torch.tensor(stream.scale, dtype=torch.float32, device=device)
    for start in range(0, n, CHUNK):
        index = torch.arange(start, min(start + CHUNK, n), dtype=torch.int64, device=device)
        values = sums(index, keys).to(torch.float32) * factor
        if descales is not None:
            head = index // (seq * d)  # b * heads + h
            group = head // heads * kv_heads + head % heads // (heads // kv_heads)
            values = values / descales[group]
        out[start : start + index.numel()] = values.to(dtype)
    return out.view(shape)
