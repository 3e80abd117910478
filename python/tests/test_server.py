"""Every op of the protocol against the fake backend, in process."""

from __future__ import annotations

import base64
import io
import math
import struct
from pathlib import Path

import pytest
from conftest import qkv_file

from evoattn_oracle import PEERS, PROTOCOL_VERSION, safetensors_io
from evoattn_oracle.server import Server

TIMING = {"warmup": 2, "samples": 7, "flush_bytes": 1 << 20}
KERNEL_PARAMS = struct.pack("<7Q2i", 0, 0, 0, 0, 0, 0, 0, 8, 8)
KERNEL_OFFSETS = {"q": 0, "k": 8, "v": 16, "o": 24}
# Two claim counters, no floats, their addresses after o's.
SCRATCH = {"counters": 2, "floats": 0, "counters_offset": 40, "floats_offset": 48}
# K's map of a bf16 hd128 TMA kernel, 1 batch, 2 heads, 130 keys, BHSD (what evoattn sends).
K_MAP = {
    "tensor": "k",
    "data_type": 9,
    "dims": [128, 130, 2, 1],
    "strides_bytes": [256, 33280, 66560],
    "box_dims": [64, 128, 1, 1],
    "element_strides": [1, 1, 1, 1],
    "interleave": 0,
    "swizzle": 3,
    "l2_promotion": 3,
    "oob_fill": 0,
}


def kernel_request(cubin: Path, **overrides: object) -> dict[str, object]:
    request: dict[str, object] = {
        "op": "time_kernel",
        "cubin_path": str(cubin),
        "kernel": "k",
        "grid": [4, 2, 1],
        "block": [128, 1, 1],
        "smem": 64 * 1024,
        "params_b64": base64.b64encode(KERNEL_PARAMS).decode(),
        "pointer_offsets": KERNEL_OFFSETS,
        "id": "c",
        "mode": "eager",
        "timer": "events",
        **TIMING,
    }
    request.update(overrides)
    return request


def test_hello_lists_every_peer_and_the_machine(server: Server) -> None:
    r = server.handle({"op": "hello"})
    assert r["ok"] and r["fake"] and r["protocol"] == PROTOCOL_VERSION
    assert list(r["peers"]) == list(PEERS)
    assert r["peers"]["sdpa-cudnn"] == "available"
    assert r["peers"]["fa4"].startswith("missing: ")
    # Ours through the Python package runs in fake mode like the SDPA peers, without a version.
    assert r["peers"]["evoattn-torch"] == "available" and r["evoattn"] is None
    assert r["l2_bytes"] > 0 and r["sm_count"] > 0 and r["gpu"]
    assert r["torch"] is None and r["python"]


def test_load_describes_the_case(server: Server, tmp_path: Path) -> None:
    path = qkv_file(tmp_path / "in.safetensors", b=2, h=8, hkv=2, sq=5, sk=9, d=32, dtype="bf16", layout="bshd")
    r = server.handle(
        {"op": "load", "id": "x", "path": str(path), "layout": "bshd", "causal": "top-left", "scale": 0.5}
    )
    assert r["ok"], r
    assert r["shape"] == {"b": 2, "h": 8, "hkv": 2, "sq": 5, "sk": 9, "d": 32}
    assert (r["dtype"], r["layout"], r["causal"], r["scale"]) == ("bf16", "bshd", "top-left", 0.5)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_time_returns_the_requested_samples_deterministically(loaded: Server, mode: str) -> None:
    request = {"op": "time", "id": "c", "peer": "sdpa-cudnn", "mode": mode, **TIMING}
    first, second = loaded.handle(request), loaded.handle(request)
    assert first["ok"] and first["status"] == "ok"
    assert len(first["samples_us"]) == TIMING["samples"]
    assert all(s > 0 for s in first["samples_us"])
    assert first == second


def test_peers_and_modes_differ(server: Server, tmp_path: Path) -> None:
    path = qkv_file(tmp_path / "big.safetensors", h=8, hkv=8, sq=1024, sk=1024)
    load = {"op": "load", "id": "big", "path": str(path), "layout": "bhsd", "causal": "none", "scale": 0.125}
    assert server.handle(load)["ok"]

    def median(peer: str, mode: str) -> float:
        samples = server.handle({"op": "time", "id": "big", "peer": peer, "mode": mode, **TIMING})["samples_us"]
        return sorted(samples)[len(samples) // 2]

    assert median("sdpa-math", "eager") > median("sdpa-cudnn", "eager")
    assert median("sdpa-cudnn", "graph") < median("sdpa-cudnn", "eager")


@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.parametrize("causal", ["none", "top-left", "bottom-right"])
def test_ours_through_python_is_timed_like_every_peer(server: Server, tmp_path: Path, causal: str, mode: str) -> None:
    path = qkv_file(tmp_path / "in.safetensors")
    load = {"op": "load", "id": "e", "path": str(path), "layout": "bhsd", "causal": causal, "scale": 0.125}
    assert server.handle(load)["ok"]
    request = {"op": "time", "id": "e", "peer": "evoattn-torch", "mode": mode, **TIMING}
    first, second = server.handle(request), server.handle(request)
    assert first["ok"] and first["status"] == "ok", first  # every mask, unlike sdpa-flash
    assert len(first["samples_us"]) == TIMING["samples"] and all(s > 0 for s in first["samples_us"])
    assert first == second
    cudnn = server.handle({**request, "peer": "sdpa-cudnn"})
    assert first["samples_us"] != cudnn["samples_us"]  # its own throughput and seed, not a copy


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_ours_through_python_writes_o_like_every_peer(server: Server, tmp_path: Path, layout: str) -> None:
    path = qkv_file(tmp_path / "in.safetensors", dtype="bf16", layout=layout)
    load = {"op": "load", "id": "e", "path": str(path), "layout": layout, "causal": "bottom-right", "scale": 0.125}
    assert server.handle(load)["ok"]
    out = tmp_path / "o.safetensors"
    r = server.handle({"op": "output", "id": "e", "peer": "evoattn-torch", "path": str(out)})
    assert r == {"ok": True, "status": "ok", "path": str(out)}
    o, q = safetensors_io.read(out)["o"], safetensors_io.read(path)["q"]
    assert (o.dtype, o.shape, o.data) == (q.dtype, q.shape, q.data)


def test_refused_and_missing_come_with_reasons(server: Server, tmp_path: Path) -> None:
    path = qkv_file(tmp_path / "in.safetensors")
    load = {"op": "load", "id": "br", "path": str(path), "layout": "bhsd", "causal": "bottom-right", "scale": 0.125}
    assert server.handle(load)["ok"]
    flash = server.handle({"op": "time", "id": "br", "peer": "sdpa-flash", "mode": "eager", **TIMING})
    assert flash["ok"] and flash["status"] == "refused" and "bottom-right" in flash["reason"]
    assert "samples_us" not in flash
    fa4 = server.handle({"op": "time", "id": "br", "peer": "fa4", "mode": "graph", **TIMING})
    assert fa4["ok"] and fa4["status"] == "missing" and fa4["reason"]
    out = server.handle({"op": "output", "id": "br", "peer": "fa4", "path": str(tmp_path / "o.safetensors")})
    assert out["status"] == "missing" and not (tmp_path / "o.safetensors").exists()


def test_output_writes_o_with_q_dtype_and_shape(loaded: Server, tmp_path: Path) -> None:
    out = tmp_path / "o.safetensors"
    r = loaded.handle({"op": "output", "id": "c", "peer": "sdpa-math", "path": str(out)})
    assert r == {"ok": True, "status": "ok", "path": str(out)}
    o = safetensors_io.read(out)["o"]
    q = safetensors_io.read(tmp_path / "in.safetensors")["q"]
    assert (o.dtype, o.shape, o.data) == (q.dtype, q.shape, q.data)


def test_unload_forgets_the_case(loaded: Server) -> None:
    assert loaded.handle({"op": "unload", "id": "c"}) == {"ok": True}
    r = loaded.handle({"op": "time", "id": "c", "peer": "sdpa-math", "mode": "eager", **TIMING})
    assert not r["ok"] and "no case" in r["error"]


def test_ceilings(server: Server) -> None:
    mm = server.handle({"op": "matmul_peak", "n": 4096, "dtype": "bf16", "samples": 5})
    assert mm["ok"] and len(mm["samples_us"]) == 5 and 100 < mm["tflops"] < 2000
    copy = server.handle({"op": "copy_bandwidth", "bytes": 1 << 30, "samples": 5})
    assert copy["ok"] and len(copy["samples_us"]) == 5 and 1000 < copy["gbps"] < 10000


def test_time_kernel_times_and_writes_output(loaded: Server, tmp_path: Path) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    out = tmp_path / "o.safetensors"
    r = loaded.handle(kernel_request(cubin, mode="graph", output=str(out)))
    assert r["ok"], r
    assert len(r["samples_us"]) == TIMING["samples"]
    assert safetensors_io.read(out)["o"].shape == (1, 4, 16, 64)


@pytest.mark.parametrize("timer", ["events", "do_bench", "profiler"])
def test_time_kernel_takes_every_timer(loaded: Server, tmp_path: Path, timer: str) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    r = loaded.handle(kernel_request(cubin, timer=timer))
    assert r["ok"], r
    assert len(r["samples_us"]) == TIMING["samples"]


def test_time_kernel_takes_the_tensor_maps_of_a_tma_kernel(loaded: Server, tmp_path: Path) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    r = loaded.handle(kernel_request(cubin, tensor_maps=[K_MAP, {**K_MAP, "tensor": "v"}]))
    assert r["ok"], r


def test_time_kernel_takes_the_scratch_a_scheduler_needs(loaded: Server, tmp_path: Path) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    r = loaded.handle(kernel_request(cubin, scratch=SCRATCH))
    assert r["ok"], r


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tensor_maps": K_MAP}, "'tensor_maps' must be a list"),
        ({"scratch": {**SCRATCH, "counters_offset": 24}}, "overlap"),
        ({"scratch": {**SCRATCH, "counters_offset": 64}}, "pointer offset of counters is 64"),
        ({"scratch": {**SCRATCH, "floats": -1}}, "'floats' must be an integer >= 0"),
        ({"scratch": [2, 0]}, "'scratch' must be an object"),
        ({"tensor_maps": [{**K_MAP, "tensor": "lse"}]}, "'tensor' is 'lse'"),
        ({"tensor_maps": [{**K_MAP, "dims": [128, 130, 2]}]}, "'dims' must be 4 positive integers"),
        ({"tensor_maps": [{**K_MAP, "box_dims": [64, 0, 1, 1]}]}, "'box_dims' must be 4"),
        ({"tensor_maps": [{k: v for k, v in K_MAP.items() if k != "swizzle"}]}, "needs the field 'swizzle'"),
        ({"tensor_maps": [{**K_MAP, "swizzle": -1}]}, "'swizzle' must be an integer >= 0"),
        ({"pointer_offsets": {"q": 0, "k": 8, "v": 16}}, "pointer_offsets"),
        ({"pointer_offsets": {"q": 0, "k": 8, "v": 16, "o": 64}}, "within the 64 parameter bytes"),
        ({"pointer_offsets": {"q": 0, "k": 8, "v": 16, "o": 12}}, "aligned"),
        ({"pointer_offsets": {"q": 0, "k": 0, "v": 16, "o": 24}}, "overlap"),
        ({"params_b64": "not base64!"}, "base64"),
        ({"grid": [1, 0, 1]}, "grid"),
        ({"block": [128, 1]}, "block"),
        ({"cubin_path": "/nonexistent.cubin"}, "cannot read the CUBIN"),
        ({"id": "nope"}, "no case"),
        ({"timer": "stopwatch"}, "'timer'"),
    ],
)
def test_time_kernel_rejects_bad_launches(loaded: Server, tmp_path: Path, overrides: dict, message: str) -> None:
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    r = loaded.handle(kernel_request(cubin, **overrides))
    assert not r["ok"] and message in r["error"], r


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ([], "JSON object"),
        ({}, "needs the field 'op'"),
        ({"op": "frobnicate"}, "unknown op 'frobnicate'"),
        ({"op": "time", "id": "c", "peer": "sdpa-nope", "mode": "eager", **TIMING}, "'peer' is 'sdpa-nope'"),
        ({"op": "time", "id": "c", "peer": "sdpa-math", "mode": "lazy", **TIMING}, "'mode'"),
        ({"op": "time", "id": "c", "peer": "sdpa-math", "mode": "eager", "warmup": 1, "samples": 0}, "'samples'"),
        ({"op": "time", "id": "c", "peer": "sdpa-math", "mode": "eager", "warmup": 1}, "needs the field 'samples'"),
        ({"op": "time", "id": "c", "peer": "sdpa-math", "mode": "eager", **TIMING, "warmup": True}, "'warmup'"),
        ({"op": "matmul_peak", "n": 64, "dtype": "f32", "samples": 1}, "'dtype'"),
        ({"op": "load", "id": "c", "path": "/x", "layout": "bhsd", "causal": "none", "scale": 1}, "already loaded"),
    ],
)
def test_bad_requests_are_errors(loaded: Server, request_: object, message: str) -> None:
    r = loaded.handle(request_)
    assert r["ok"] is False and message in r["error"], r


@pytest.mark.parametrize(
    ("tensors", "layout", "message"),
    [
        ({"q": ("F16", (1, 2, 4, 8)), "k": ("F16", (1, 2, 4, 8))}, "bhsd", "no tensor 'v'"),
        ({"q": ("F32", (1, 2, 4, 8)), "k": ("F32", (1, 2, 4, 8)), "v": ("F32", (1, 2, 4, 8))}, "bhsd", "q is f32"),
        ({"q": ("F16", (1, 2, 4, 8)), "k": ("BF16", (1, 2, 4, 8)), "v": ("F16", (1, 2, 4, 8))}, "bhsd", "k is bf16"),
        ({"q": ("F16", (2, 4, 8)), "k": ("F16", (1, 2, 4, 8)), "v": ("F16", (1, 2, 4, 8))}, "bhsd", "q has rank 3"),
        ({"q": ("F16", (1, 2, 4, 8)), "k": ("F16", (1, 2, 4, 8)), "v": ("F16", (1, 2, 5, 8))}, "bhsd", "v has shape"),
        ({"q": ("F16", (1, 3, 4, 8)), "k": ("F16", (1, 2, 4, 8)), "v": ("F16", (1, 2, 4, 8))}, "bhsd", "do not divide"),
        ({"q": ("F16", (1, 4, 3, 8)), "k": ("F16", (1, 4, 2, 8)), "v": ("F16", (1, 4, 2, 8))}, "bshd", "do not divide"),
    ],
)
def test_load_rejects_bad_inputs(server: Server, tmp_path: Path, tensors: dict, layout: str, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    width = {"F16": 2, "BF16": 2, "F32": 4}
    raw = {name: safetensors_io.RawTensor(t, s, bytes(math.prod(s) * width[t])) for name, (t, s) in tensors.items()}
    safetensors_io.write(path, raw)
    r = server.handle({"op": "load", "id": "b", "path": str(path), "layout": layout, "causal": "none", "scale": 1.0})
    assert not r["ok"] and message in r["error"], r


def test_load_of_a_missing_or_corrupt_file_is_an_error(server: Server, tmp_path: Path) -> None:
    load = {"op": "load", "id": "b", "layout": "bhsd", "causal": "none", "scale": 1.0}
    r = server.handle({**load, "path": str(tmp_path / "absent.safetensors")})
    assert not r["ok"] and "cannot read" in r["error"]
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    r = server.handle({**load, "path": str(corrupt)})
    assert not r["ok"] and "not a safetensors file" in r["error"]


def test_shutdown_stops_the_loop(server: Server) -> None:
    out = io.StringIO()
    server.serve(['{"op": "hello"}\n', "\n", "not json\n", '{"op": "shutdown"}\n', '{"op": "hello"}\n'], out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert '"ok": false' in lines[1] and lines[2] == '{"ok": true}'


DRAW_TENSORS = {name: {"keys": [1, 2], "scale": 0.5} for name in ("q", "k", "v")}


def draw_request(**overrides: object) -> dict[str, object]:
    request: dict[str, object] = {
        "op": "draw",
        "id": "d",
        "shape": {"b": 2, "h": 4, "hkv": 2, "sq": 16, "sk": 32, "d": 64},
        "dtype": "bf16",
        "layout": "bshd",
        "causal": "bottom-right",
        "scale": 0.125,
        "tensors": DRAW_TENSORS,
    }
    request.update(overrides)
    return request


def test_draw_describes_the_case_like_load(server: Server, tmp_path: Path) -> None:
    reply = server.handle(draw_request())
    assert reply["ok"], reply
    assert reply["shape"] == {"b": 2, "h": 4, "hkv": 2, "sq": 16, "sk": 32, "d": 64}
    assert (reply["dtype"], reply["layout"], reply["causal"]) == ("bf16", "bshd", "bottom-right")
    # The fake's peers write zeros of q's shape for a drawn case.
    out = tmp_path / "o.safetensors"
    assert server.handle({"op": "output", "id": "d", "peer": "sdpa-math", "path": str(out)})["status"] == "ok"
    o = safetensors_io.read(out)["o"]
    assert (o.dtype, o.shape, set(o.data)) == ("BF16", (2, 16, 4, 64), {0})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"shape": {"b": 1, "h": 4, "hkv": 3, "sq": 1, "sk": 1, "d": 64}}, "do not divide"),
        ({"shape": {"b": 1, "h": 4, "hkv": 4, "sq": 1, "sk": 1, "d": 0}}, "'d'"),
        ({"shape": [1, 4, 4, 1, 1, 64]}, "'shape' must be an object"),
        ({"dtype": "f32"}, "'dtype'"),
        ({"tensors": {"q": DRAW_TENSORS["q"], "k": DRAW_TENSORS["k"]}}, "exactly q, k and v"),
        ({"tensors": {**DRAW_TENSORS, "v": {"keys": [1, 1 << 32], "scale": 1.0}}}, "'keys' of tensor 'v'"),
        ({"tensors": {**DRAW_TENSORS, "k": {"keys": [1, 2], "scale": 0}}}, "'scale'"),
        ({"tensors": {**DRAW_TENSORS, "q": [1, 2]}}, "tensor 'q' of a draw"),
    ],
)
def test_draw_rejects_bad_requests(server: Server, overrides: dict, message: str) -> None:
    reply = server.handle(draw_request(**overrides))
    assert not reply["ok"] and message in reply["error"], reply


def test_draw_under_a_loaded_id_is_an_error(server: Server) -> None:
    assert server.handle(draw_request())["ok"]
    reply = server.handle(draw_request())
    assert not reply["ok"] and "already loaded" in reply["error"]


# b * hkv = 4 groups: one descale per tensor (what cuDNN takes), or one per group.
PER_TENSOR = {"q": [0.01] * 4, "k": [0.02] * 4, "v": [0.03] * 4}
PER_GROUP = {**PER_TENSOR, "k": [0.02, 0.025, 0.03, 0.035]}


@pytest.mark.parametrize(("dtype", "o_dtype"), [("e4m3", "BF16"), ("e4m3f16", "F16")])
def test_e4m3_draws_are_run_by_the_fp8_peers_and_refused_by_the_others(
    server: Server, tmp_path: Path, dtype: str, o_dtype: str
) -> None:
    assert server.handle(draw_request(dtype=dtype, descales=PER_TENSOR))["ok"]
    out = tmp_path / "o.safetensors"
    reply = server.handle({"op": "output", "id": "d", "peer": "cudnn-fp8", "path": str(out)})
    assert reply["status"] == "ok", reply
    # E4M3 attention writes bf16, or f16 when asked (e4m3f16).
    assert safetensors_io.read(out)["o"].dtype == o_dtype
    assert server.handle({"op": "time", "id": "d", "peer": "cudnn-fp8", "mode": "eager", **TIMING})["status"] == "ok"
    for peer in ("sdpa-cudnn", "sdpa-math", "evoattn-torch"):
        reply = server.handle({"op": "time", "id": "d", "peer": peer, "mode": "eager", **TIMING})
        assert reply["status"] == "refused" and "this case is E4M3" in reply["reason"], reply


def test_cudnn_fp8_refuses_16_bit_cases_and_per_group_descales(server: Server) -> None:
    assert server.handle(draw_request())["ok"]
    reply = server.handle({"op": "time", "id": "d", "peer": "cudnn-fp8", "mode": "eager", **TIMING})
    assert reply["status"] == "refused" and "takes E4M3 inputs; this case is bf16" in reply["reason"], reply
    assert server.handle(draw_request(id="g", dtype="e4m3", descales=PER_GROUP))["ok"]
    reply = server.handle({"op": "time", "id": "g", "peer": "cudnn-fp8", "mode": "eager", **TIMING})
    assert reply["status"] == "refused" and "one descale per tensor" in reply["reason"], reply


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"dtype": "e4m3"}, "needs the field 'descales'"),
        ({"descales": PER_TENSOR}, "belong to E4M3 draws, not bf16 ones"),
        ({"dtype": "e4m3", "descales": {"q": [1.0] * 4, "k": [1.0] * 4}}, "exactly q, k and v"),
        ({"dtype": "e4m3", "descales": {**PER_TENSOR, "v": [1.0] * 3}}, "'v' must be 4 positive finite"),
        ({"dtype": "e4m3", "descales": {**PER_TENSOR, "q": [1.0, 1.0, 0.0, 1.0]}}, "'q' must be 4 positive finite"),
        ({"dtype": "e4m3", "descales": {**PER_TENSOR, "k": [1.0, True, 1.0, 1.0]}}, "'k' must be 4 positive finite"),
    ],
)
def test_draw_rejects_bad_descales(server: Server, overrides: dict, message: str) -> None:
    reply = server.handle(draw_request(**overrides))
    assert not reply["ok"] and message in reply["error"], reply
