"""`python3 -m evoattn_oracle.selfcheck`: exercises every op of the real oracle on this GPU and
prints one compact table. Cases: a small f16 BHSD case, a large bf16 BSHD top-left causal case
and a bf16 GQA bottom-right case with Sq < Sk, loaded from files; two E4M3 cases drawn by the
oracle (`draw`, one descale per tensor), BSHD and GQA bottom-right; every peer in eager and graph mode, its output
against a float32 reference; the matmul and copy ceilings; `time_kernel` on a CUBIN compiled
here with NVRTC, whose output shows the q, k, v and o pointers were patched in the right places.

Exit status 0 when every op answered and every output that was produced is within tolerance,
1 otherwise. Refusals are listed, not failures: they are what the peers say about the case."""

from __future__ import annotations

import base64
import math
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from . import PEERS, safetensors_io
from .case import CaseSpec
from .server import Server
from .torch_backend import TORCH_DTYPES, TorchBackend, from_raw, to_raw

WARMUP = 5
SAMPLES = 30
FLUSH_L2_MULTIPLE = 2  # as `evoattn bench`: a flush buffer twice the L2
# Max |o - float32 reference| a correct peer stays under (bf16 keeps 8 mantissa bits, f16 11;
# an E4M3 peer rounds P and, on Hopper, O to 3 bits: 2^-4 relative each, O here within ±2).
TOLERANCE = {"f16": 1e-2, "bf16": 6e-2, "e4m3": 0.25}
MATMUL_N = 8192
COPY_BYTES = 1 << 30
CEILING_SAMPLES = 10
# Refusal reasons are cut to this many characters in the table.
NOTE_CHARS = 100
# time_kernel's test kernel: o = q - 2k + 3v on the raw 16-bit patterns, modulo 2^16 (k, v
# indexed modulo their length), which tells q, k and v apart; a parameter struct laid out like
# evoattn's AttnParams (pointers first); 64 KiB of dynamic shared memory, so that the opt-in
# above 48 KiB (cuFuncSetAttribute) is exercised.
MIX_KERNEL = "selfcheck_mix"
MIX_SOURCE = r"""
struct Params {
    const unsigned short* q; const unsigned short* k; const unsigned short* v;
    unsigned short* o; float* lse; int n_q; int n_kv;
};
extern "C" __global__ void selfcheck_mix(Params p) {
    extern __shared__ unsigned char scratch[];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n_q; i += gridDim.x * blockDim.x) {
        int j = i % p.n_kv;
        p.o[i] = (unsigned short)(p.q[i] - 2 * p.k[j] + 3 * p.v[j]);
    }
}
"""
MIX_PARAMS = struct.Struct("<5Q2i")
MIX_OFFSETS = {"q": 0, "k": 8, "v": 16, "o": 24}
MIX_BLOCK = 256
MIX_SMEM = 64 * 1024
U16_MASK = 0xFFFF


def case(b: int, h: int, hkv: int, sq: int, sk: int, d: int, dtype: str, layout: str, causal: str) -> CaseSpec:
    return CaseSpec(b, h, hkv, sq, sk, d, dtype, layout, causal, scale=1.0 / math.sqrt(d))


CASES = {
    "small": case(1, 8, 8, 512, 512, 64, "f16", "bhsd", "none"),
    "large": case(4, 16, 16, 4096, 4096, 128, "bf16", "bshd", "top-left"),
    "gqa": case(2, 16, 4, 1024, 4096, 128, "bf16", "bhsd", "bottom-right"),
}
# Drawn E4M3 cases: std-1 values over one descale per tensor that maps their range (±2√3) onto
# E4M3's ±448, the lab's choice (crates/evoattn-cli/src/lab/inputs.rs).
DRAWN_CASES = {
    "fp8": case(2, 16, 16, 2048, 2048, 128, "e4m3", "bshd", "none"),
    "fp8gqa": case(2, 16, 4, 512, 1536, 128, "e4m3", "bhsd", "bottom-right"),
}
E4M3_DESCALE = 2 * math.sqrt(3) / 448
# The generator's factor from its integer sum to std 1 (crates/evoattn/src/draw.rs).
STD1_SCALE = struct.unpack("<f", struct.pack("<f", 1 / math.sqrt((65536.0 * 65536.0 - 1.0) / 3.0)))[0]
# The case `time_kernel` runs on.
KERNEL_CASE = "small"


class Check:
    """Sends requests to an in-process server and remembers whether anything failed."""

    def __init__(self) -> None:
        self.server = Server(TorchBackend())
        self.failures: list[str] = []

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        response = self.server.handle({"op": op, **fields})
        if not response["ok"]:
            self.fail(f"{op}: {response['error']}")
        return response

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"FAIL {what}")


def write_case(spec: CaseSpec, path: Path) -> dict[str, torch.Tensor]:
    """Standard-normal q, k, v in the case's layout, on the GPU and in `path`."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    shapes = {"q": spec.dims(spec.h, spec.sq), "k": spec.dims(spec.hkv, spec.sk), "v": spec.dims(spec.hkv, spec.sk)}
    qkv = {n: torch.randn(s, generator=gen, device="cuda", dtype=TORCH_DTYPES[spec.dtype]) for n, s in shapes.items()}
    safetensors_io.write(path, {n: to_raw(t) for n, t in qkv.items()})
    return qkv


def reference(spec: CaseSpec, qkv: dict[str, torch.Tensor]) -> torch.Tensor:
    """float32 attention in the case's layout, with the mask written out by hand."""
    q, k, v = (qkv[n].float() if spec.layout == "bhsd" else qkv[n].float().transpose(1, 2) for n in "qkv")
    k, v = (t.repeat_interleave(spec.h // spec.hkv, dim=1) for t in (k, v))
    scores = q @ k.transpose(-1, -2) * spec.scale
    if spec.causal != "none":
        offset = 0 if spec.causal == "top-left" else spec.sk - spec.sq
        visible = torch.ones(spec.sq, spec.sk, dtype=torch.bool, device=q.device).tril(diagonal=offset)
        scores = scores.masked_fill(~visible, float("-inf"))
    o = scores.softmax(dim=-1) @ v
    return o if spec.layout == "bhsd" else o.transpose(1, 2)


def draw_fields(spec: CaseSpec) -> dict[str, Any]:
    """A `draw` request's fields for `spec`: std-1 values, one descale per tensor for E4M3."""
    tensors = {n: {"keys": [i + 1, 7 * i + 3], "scale": STD1_SCALE} for i, n in enumerate("qkv")}
    fields: dict[str, Any] = {**spec.describe(), "tensors": tensors}
    if spec.dtype == "e4m3":
        fields["descales"] = {n: [E4M3_DESCALE] * (spec.b * spec.hkv) for n in "qkv"}
    return fields


def read_o(path: str) -> torch.Tensor:
    return from_raw(safetensors_io.read(path)["o"], torch.device("cuda"))


def cell(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def check_peers(check: Check, name: str, spec: CaseSpec, qkv: dict[str, torch.Tensor], tmp: Path, flush: int) -> None:
    """Each peer: eager and graph timings, and its output against the float32 reference."""
    ref = reference(spec, qkv)
    for peer in PEERS:
        started = time.perf_counter()
        medians: dict[str, float] = {}
        notes: list[str] = []
        for mode in ("eager", "graph"):
            r = check.ask("time", id=name, peer=peer, mode=mode, warmup=WARMUP, samples=SAMPLES, flush_bytes=flush)
            if r.get("status") == "ok":
                if len(r["samples_us"]) != SAMPLES or min(r["samples_us"]) <= 0:
                    check.fail(f"{name} {peer} {mode}: bad samples {r['samples_us'][:4]}...")
                medians[mode] = statistics.median(r["samples_us"])
            elif r["ok"]:
                notes.append(f"{mode} {r['status']}: {r['reason'][:NOTE_CHARS]}")
        err = None
        out_path = str(tmp / f"o-{name}-{peer}.safetensors")
        r = check.ask("output", id=name, peer=peer, path=out_path)
        if r.get("status") == "ok":
            err = (read_o(out_path).float() - ref).abs().max().item()
            if not err <= TOLERANCE[spec.dtype]:
                check.fail(f"{name} {peer}: max |o - ref| {err:.3g} > {TOLERANCE[spec.dtype]}")
        elif r["ok"] and not notes:
            notes.append(f"output {r['status']}: {r['reason'][:NOTE_CHARS]}")
        eager = medians.get("eager")
        tflops = spec.flops() / eager / 1e6 if eager else None
        print(
            f"{name:<6} {peer:<15}{cell(eager, 10, 2)}{cell(medians.get('graph'), 10, 2)}{cell(tflops, 9, 1)}"
            f"{f'{err:10.2e}' if err is not None else cell(None, 10, 0)}{time.perf_counter() - started:7.1f}s  "
            + "; ".join(notes)
        )


def compile_mix_kernel(major: int, minor: int) -> bytes:
    """The test kernel's CUBIN for this GPU, from NVRTC through cuda-bindings."""
    from cuda.bindings import nvrtc

    def ok(result: Any, call: str) -> Any:
        err, *values = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"{call} failed: {err.name}")
        return values[0] if values else None

    prog = ok(nvrtc.nvrtcCreateProgram(MIX_SOURCE.encode(), b"selfcheck_mix.cu", 0, [], []), "nvrtcCreateProgram")
    options = [f"--gpu-architecture=sm_{major}{minor}".encode()]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = b" " * ok(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        ok(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        raise RuntimeError(f"NVRTC: {log.decode(errors='replace').strip()}")
    cubin = b" " * ok(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
    ok(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    return cubin


def check_time_kernel(check: Check, name: str, qkv: dict[str, torch.Tensor], tmp: Path, flush: int) -> None:
    """time_kernel in both modes; its output must be q - 2k + 3v, which only the right pointers give."""
    props = torch.cuda.get_device_properties(0)
    try:
        cubin = compile_mix_kernel(props.major, props.minor)
    except Exception as e:  # no NVRTC reachable from cuda-bindings: say so, the rest still counts
        print(f"time_kernel: skipped, cannot compile its test kernel ({type(e).__name__}: {e})")
        return
    cubin_path = tmp / "selfcheck_mix.cubin"
    cubin_path.write_bytes(cubin)
    n_q, n_kv = qkv["q"].numel(), qkv["k"].numel()
    bits = {n: t.reshape(-1).view(torch.int16).int() for n, t in qkv.items()}
    j = torch.arange(n_q, device="cuda") % n_kv
    expected = (bits["q"] - 2 * bits["k"][j] + 3 * bits["v"][j]) & U16_MASK
    launch = {
        "cubin_path": str(cubin_path),
        "kernel": MIX_KERNEL,
        "grid": [math.ceil(n_q / MIX_BLOCK), 1, 1],
        "block": [MIX_BLOCK, 1, 1],
        "smem": MIX_SMEM,
        "params_b64": base64.b64encode(MIX_PARAMS.pack(0, 0, 0, 0, 0, n_q, n_kv)).decode(),
        "pointer_offsets": MIX_OFFSETS,
    }
    # Our timer's cross-checks: events in both modes, Triton's do_bench and PyTorch's profiler.
    for mode, timer in (("eager", "events"), ("graph", "events"), ("eager", "do_bench"), ("eager", "profiler")):
        out_path = str(tmp / f"o-mix-{mode}-{timer}.safetensors")
        timing = {"mode": mode, "warmup": WARMUP, "samples": SAMPLES, "flush_bytes": flush}
        r = check.ask("time_kernel", id=name, output=out_path, timer=timer, **launch, **timing)
        if not r["ok"]:
            continue
        got = read_o(out_path).reshape(-1).view(torch.int16).int() & U16_MASK
        wrong = int((got != expected).sum().item())
        if wrong:
            check.fail(f"time_kernel {mode} {timer}: {wrong} of {n_q} outputs differ from q - 2k + 3v")
        if len(r["samples_us"]) != SAMPLES:
            check.fail(f"time_kernel {mode} {timer}: {len(r['samples_us'])} samples, not {SAMPLES}")
        median = statistics.median(r["samples_us"])
        print(
            f"time_kernel {MIX_KERNEL} {mode:<5} {timer:<8} median {median:8.2f} us, output {'WRONG' if wrong else 'ok'}"
        )


def main() -> int:
    started = time.perf_counter()
    check = Check()
    hello = check.ask("hello")
    print(
        f"oracle on {hello['gpu']} (cc {hello['compute_capability']}, {hello['sm_count']} SMs, "
        f"L2 {hello['l2_bytes']} B): python {hello['python']}, torch {hello['torch']}, CUDA {hello['cuda']}, "
        f"cuDNN {hello['cudnn']}, driver {hello['driver']}, FA4 {hello['fa4']}, evoattn {hello['evoattn']}, "
        f"cuDNN frontend {hello['cudnn_frontend']}"
    )
    for peer, state in hello["peers"].items():
        print(f"  {peer:<15} {state}")
    flush = FLUSH_L2_MULTIPLE * hello["l2_bytes"]

    r = check.ask("matmul_peak", n=MATMUL_N, dtype="bf16", samples=CEILING_SAMPLES)
    if r["ok"]:
        print(f"matmul {MATMUL_N}^3 bf16: {r['tflops']:.0f} TFLOP/s")
    r = check.ask("copy_bandwidth", bytes=COPY_BYTES, samples=CEILING_SAMPLES)
    if r["ok"]:
        print(f"copy {COPY_BYTES >> 20} MiB: {r['gbps']:.0f} GB/s (read + write)")

    print(f"\n{'case':<6} {'peer':<15}{'eager_us':>10}{'graph_us':>10}{'TFLOP/s':>9}{'max_err':>10}{'took':>8}  notes")
    with tempfile.TemporaryDirectory(prefix="evoattn-selfcheck-") as tmp_dir:
        tmp = Path(tmp_dir)
        for name, spec in CASES.items():
            path = tmp / f"{name}.safetensors"
            qkv = write_case(spec, path)
            print(f"-- {name}: {spec}")
            fields = {"path": str(path), "layout": spec.layout, "causal": spec.causal, "scale": spec.scale}
            if not check.ask("load", id=name, **fields)["ok"]:
                continue
            check_peers(check, name, spec, qkv, tmp, flush)
            if name == KERNEL_CASE:
                check_time_kernel(check, name, qkv, tmp, flush)
            check.ask("unload", id=name)
        for name, spec in DRAWN_CASES.items():
            print(f"-- {name}: {spec} (drawn)")
            if not check.ask("draw", id=name, **draw_fields(spec))["ok"]:
                continue
            raw = check.server.backend.cases[name].raw  # type: ignore[attr-defined]
            check_peers(check, name, spec, {n: raw[n].float() * E4M3_DESCALE for n in "qkv"}, tmp, flush)
            check.ask("unload", id=name)
    check.ask("shutdown")
    verdict = f"{len(check.failures)} failures" if check.failures else "every op answered, outputs within tolerance"
    print(f"\nselfcheck: {verdict}; {time.perf_counter() - started:.1f} s")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
