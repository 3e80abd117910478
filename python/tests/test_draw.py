"""The oracle's generator is evoattn's, bit for bit: the values below are the ones
crates/evoattn/src/draw.rs asserts (`known_values_pin_the_generator_for_its_twins`)."""

from __future__ import annotations

import math
import struct

import pytest

from evoattn_oracle.draw import hash32, sums


def f32(x: float) -> float:
    """`x` rounded to float32 (a product of two float32 values is exact in a double first)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bf16_bits(x: float) -> int:
    """float32 -> bfloat16, round to nearest even (finite values)."""
    b = f32_bits(x)
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def keys_and_scale(key: int, std: float) -> tuple[tuple[int, int], float]:
    """What evoattn sends in a `draw` request, from a 64-bit key it derived from the seed."""
    return (key & 0xFFFFFFFF, key >> 32), f32(std / math.sqrt((65536.0 * 65536.0 - 1.0) / 3.0))


def test_hash_is_evoattns() -> None:
    assert hash32(0) == 0
    assert hash32(1) == 0x688990C0


def test_values_are_evoattns_in_both_dtypes() -> None:
    # Stream::new(7, 1, 1.0) in evoattn: keys 0x38aae818, 0xdf2bbb95.
    keys, scale = keys_and_scale(0xDF2BBB95_38AAE818, 1.0)
    assert f32_bits(scale) == 0x37DDB3D7
    assert [bf16_bits(f32(sums(i, keys) * scale)) for i in range(4)] == [0x3EC5, 0x3F38, 0x3CF7, 0xBE7B]


def test_sums_are_centred_and_bounded() -> None:
    keys = (0x12345678, 0x9ABCDEF0)
    values = [sums(i, keys) for i in range(4096)]
    assert all(abs(v) <= 2 * 65535 for v in values)
    assert abs(sum(values) / len(values)) < 0.05 * 37837


def test_the_torch_path_draws_the_same_bits() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU: the oracle draws on it")
    from evoattn_oracle.draw import DrawStream, draw

    keys, scale = keys_and_scale(0xDF2BBB95_38AAE818, 1.0)
    stream, device = DrawStream(keys, scale), torch.device("cuda")
    got = draw(torch, device, (1, 1, 1, 4), stream, torch.bfloat16).view(torch.int16).flatten().tolist()
    assert [x & 0xFFFF for x in got] == [0x3EC5, 0x3F38, 0x3CF7, 0xBE7B]
    # E4M3: each value over its group's descale, rounded once (evoattn's pin: 0.01 for every group).
    descales = torch.tensor([0.01], dtype=torch.float32, device=device)
    got = draw(torch, device, (1, 1, 1, 4), stream, torch.float8_e4m3fn, descales, 1).view(torch.uint8)
    assert got.flatten().tolist() == [0x62, 0x69, 0x44, 0xDC]


def test_e4m3_groups_follow_batch_and_kv_head() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU: the oracle draws on it")
    from evoattn_oracle.draw import DrawStream, draw

    # B 2, H 4, Hkv 2: heads 0-1 of batch b are group 2b, heads 2-3 group 2b + 1.
    device, stream = torch.device("cuda"), DrawStream((5, 6), 1e-3)
    shape = (2, 4, 3, 8)
    plain = draw(torch, device, shape, stream, torch.float32)
    descales = torch.tensor([1.0, 2.0, 4.0, 8.0], device=device)
    got = draw(torch, device, shape, stream, torch.float8_e4m3fn, descales, 2).float()
    group = torch.tensor([[0, 0, 1, 1], [2, 2, 3, 3]], device=device)
    want = (plain / descales[group][:, :, None, None]).to(torch.float8_e4m3fn).float()
    assert torch.equal(got, want)
