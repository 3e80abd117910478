"""The fake backend (`--fake` or EVOATTN_ORACLE_FAKE=1): answers every op without torch or a GPU,
for the CLI's and the package's tests. Samples are deterministic (seeded by the request) and
lognormal around a per-peer time derived from the case's FLOPs; `output` copies q into o so the
file exists with the right dtype and shape. sdpa-flash refuses bottom-right masks and fa4 is
missing, so both statuses are exercised; every other peer, evoattn-torch included, runs the
cases of its dtype (the real oracle's rule, `case.dtype_refusal`)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from . import PEERS, safetensors_io
from .case import DTYPES, CaseSpec, Descales, dtype_refusal, read_case
from .draw import DrawStream
from .protocol import KernelLaunch, RequestError, Timing, missing, ran, refused

FAKE_GPU = "fake GPU (EVOATTN_ORACLE_FAKE)"
FAKE_COMPUTE_CAPABILITY = "9.0"
# H100 SXM's L2 and SM count, so callers size their flush buffers as they would there.
FAKE_L2_BYTES = 50 * 1024 * 1024
FAKE_SM_COUNT = 132
# Throughput each fake peer "reaches", TFLOP/s, and the fixed cost of one call per mode, µs.
FAKE_PEER_TFLOPS = {"sdpa-cudnn": 450.0, "sdpa-flash": 300.0, "sdpa-efficient": 200.0, "sdpa-math": 15.0}
FAKE_PEER_TFLOPS["sdpa-auto"] = FAKE_PEER_TFLOPS["sdpa-cudnn"]
FAKE_KERNEL_TFLOPS = 400.0
# evoattn-torch runs our kernel (through the Python package): time_kernel's rate.
FAKE_PEER_TFLOPS["evoattn-torch"] = FAKE_KERNEL_TFLOPS
FAKE_PEER_TFLOPS["cudnn-fp8"] = 800.0
FAKE_CALL_US = {"eager": 12.0, "graph": 4.0}
FAKE_MATMUL_TFLOPS = 800.0
FAKE_COPY_GBPS = 3000.0
# Spread of the samples: lognormal sigma (about 3% run-to-run noise).
FAKE_SIGMA = 0.03
FA4_MISSING = "flash_attn.cute is not installed (fake oracle)"
FLASH_REFUSES = "fake: sdpa-flash refuses bottom-right causal masks"


def _samples(key: str, base_us: float, count: int) -> list[float]:
    """`count` lognormal samples around `base_us`, the same for the same key in every run."""
    rng = random.Random(key)  # str seeds hash with SHA-512: stable across processes
    return [base_us * rng.lognormvariate(0.0, FAKE_SIGMA) for _ in range(count)]


class FakeBackend:
    fake = True

    def __init__(self) -> None:
        self.cases: dict[str, tuple[CaseSpec, safetensors_io.RawTensor, Descales | None]] = {}

    def hello(self) -> dict[str, Any]:
        peers = {name: "available" for name in PEERS}
        peers["fa4"] = f"missing: {FA4_MISSING}"
        return {
            "torch": None,
            "cuda": None,
            "cudnn": None,
            "driver": None,
            "fa4": None,
            "evoattn": None,
            "cudnn_frontend": None,
            "gpu": FAKE_GPU,
            "compute_capability": FAKE_COMPUTE_CAPABILITY,
            "l2_bytes": FAKE_L2_BYTES,
            "sm_count": FAKE_SM_COUNT,
            "peers": peers,
        }

    def load(self, case_id: str, path: str, layout: str, causal: str, scale: float) -> CaseSpec:
        spec, tensors = read_case(path, layout, causal, scale)
        self.cases[case_id] = (spec, tensors["q"], None)
        return spec

    def draw(
        self, case_id: str, spec: CaseSpec, streams: dict[str, DrawStream], descales: Descales | None
    ) -> None:
        # No GPU to draw on: the fake's peers write zeros of o's dtype and q's shape.
        shape = spec.dims(spec.h, spec.sq)
        zeros = bytes(2 * shape[0] * shape[1] * shape[2] * shape[3])
        st_dtype = {v: k for k, v in DTYPES.items()}[spec.output_dtype]
        o = safetensors_io.RawTensor(st_dtype, shape, zeros)
        self.cases[case_id] = (spec, o, descales)

    def unload(self, case_id: str) -> None:
        del self.cases[case_id]

    def _status(self, spec: CaseSpec, peer: str, descales: Descales | None) -> dict[str, Any] | None:
        """The refusal or absence of `peer` on this case, or None when it runs."""
        why = dtype_refusal(spec, peer, descales)
        if why is not None:
            return refused(why)
        if peer == "fa4":
            return missing(FA4_MISSING)
        if peer == "sdpa-flash" and spec.causal == "bottom-right":
            return refused(FLASH_REFUSES)
        return None

    def time(self, case_id: str, peer: str, timing: Timing) -> dict[str, Any]:
        spec, _, descales = self.cases[case_id]
        status = self._status(spec, peer, descales)
        if status is not None:
            return status
        base = FAKE_CALL_US[timing.mode] + spec.flops() / (FAKE_PEER_TFLOPS[peer] * 1e6)
        return ran(samples_us=_samples(f"{spec}/{peer}/{timing.mode}", base, timing.samples))

    def output(self, case_id: str, peer: str, path: str) -> dict[str, Any]:
        spec, q, descales = self.cases[case_id]
        status = self._status(spec, peer, descales)
        if status is not None:
            return status
        safetensors_io.write(path, {"o": q})
        return ran(path=path)

    def matmul_samples(self, n: int, dtype: str, samples: int) -> list[float]:
        return _samples(f"matmul/{n}/{dtype}", 2.0 * n**3 / (FAKE_MATMUL_TFLOPS * 1e6), samples)

    def copy_samples(self, nbytes: int, samples: int) -> list[float]:
        return _samples(f"copy/{nbytes}", 2.0 * nbytes / (FAKE_COPY_GBPS * 1e3), samples)

    def time_kernel(
        self, launch: KernelLaunch, case_id: str, timing: Timing, output: str | None, timer: str
    ) -> list[float]:
        spec, q, _ = self.cases[case_id]
        if not Path(launch.cubin_path).is_file():
            raise RequestError(f"cannot read the CUBIN {launch.cubin_path}")
        if output is not None:
            safetensors_io.write(output, {"o": q})
        base = FAKE_CALL_US[timing.mode] + spec.flops() / (FAKE_KERNEL_TFLOPS * 1e6)
        return _samples(f"{spec}/{launch.kernel}/{timing.mode}/{timer}", base, timing.samples)
