"""The twin of evoattn's counter-based generator (crates/evoattn/src/draw.rs): a case's inputs
drawn here on the GPU, bit for bit the values evoattn draws, so that large cases never cross the
host. Every operation is exact on Python ints and on int64 torch tensors alike (products of two
32-bit values wrap in int64, and only their low 32 bits are kept); the one float32 multiply and
the round to the element type are IEEE round-to-nearest-even everywhere."""

from __future__ import annotations

from typing import Any

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


def draw(torch: Any, shape: tuple[int, int, int, int], keys: tuple[int, int], scale: float, dtype: Any) -> Any:
    """A dense logical [b, h, s, d] tensor of `dtype` on the current GPU."""
    n = shape[0] * shape[1] * shape[2] * shape[3]
    out = torch.empty(n, dtype=dtype, device="cuda")
    factor = torch.tensor(scale, dtype=torch.float32, device="cuda")
    for start in range(0, n, CHUNK):
        index = torch.arange(start, min(start + CHUNK, n), dtype=torch.int64, device="cuda")
        values = sums(index, keys).to(torch.float32) * factor
        out[start : start + index.numel()] = values.to(dtype)
    return out.view(shape)
