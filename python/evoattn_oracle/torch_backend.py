"""The real backend: PyTorch SDPA under each `SDPBackend`, FlashAttention-4 and our own package
`evoattn` when they import, and raw CUBIN launches, all timed by one function (`_time_calls`)
with the method of DESIGN.md's "Measurement method": warm-up, then per sample an L2 flush, a
start event, one call, an end event; one synchronisation at the end; raw per-sample times in µs."""

from __future__ import annotations

import contextlib
import functools
import ctypes
import importlib.metadata
import re
import statistics
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from . import PEERS, safetensors_io
from .case import CaseSpec, Descales, dtype_refusal, read_case
from .draw import DrawStream, draw
from .protocol import KernelLaunch, RequestError, Timing, missing, ran, refused

# GPU cycles the graph-mode hold lasts per sample: 200k cycles is 100 µs at the H100's 2 GHz
# boost clock (longer at lower clocks), well above the host's ~30 µs to enqueue one sample.
GRAPH_HOLD_CYCLES_PER_SAMPLE = 200_000
# Torch dtypes by evoattn's names: the inputs' for the E4M3 dtypes (e4m3f16 differs in O only).
TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e4m3f16": torch.float8_e4m3fn}
SAFETENSORS_DTYPES = {torch.float16: "F16", torch.bfloat16: "BF16"}
SDPA_BACKENDS = {
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-math": SDPBackend.MATH,
}
# Package names FlashAttention-4 has been published under, newest first.
FA4_DISTRIBUTIONS = ("flash-attn-4", "fa4")
FA4_MIN_MAJOR = 9  # CuTe DSL FlashAttention-4 targets Hopper (sm_90) and newer
FA4_TOP_LEFT = "FlashAttention-4's causal mask is bottom-right aligned; top-left with Sq != Sk cannot be expressed"
# cuDNN's FP8 SDPA (cudnn-fp8): P is scaled by 2^8 into E4M3 (and descaled by 2^-8), the scale
# evoattn's own E4M3 kernel uses (P_LOG2_SCALE), so both round P alike.
CUDNN_FP8_P_SCALE = 256.0
CUDNN_FRONTEND_INSTALL = "pip install nvidia-cudnn-frontend (the wheel in .whl/ on the GPU machine)"
# How to get the evoattn-torch peer when the package does not import.
EVOATTN_INSTALL = "scripts/build-wheel, then pip install target/wheels/evoattn-*.whl"
# Calls on the capture stream before capturing: libraries create per-stream handles lazily,
# which is not allowed during capture.
GRAPH_MIN_WARMUP = 1
CEILING_WARMUP = 3
US_PER_MS = 1e3
# Rounds of Triton's do_bench at most per request: each returns as many repetitions as its `rep`
# budget buys after its own estimate (which includes its 256 MB L2 clear, many times a short
# kernel), so rounds double the budget until a block's samples are in: 8 cover 255 times.
DO_BENCH_ROUNDS = 8
# Profiler sessions per block of samples at most: a session that lost its kernel records (CUPTI
# torn down or re-registered between sessions) is run again; on an H100 two sessions in a row
# lost all 16 records once in 65 blocks (session 35), so twice.
PROFILER_SESSIONS = 3
# Launches each profiler session makes before the timed ones, at least: CUPTI may drop a
# session's first kernel records, more as sessions accumulate (pytorch#192021; on the H200,
# sessions of one launch recorded none), so the samples are the session's last records.
PROFILER_LEAD = 3
PROFILER_MAX_LEAD = 64
# Empty launches at the end of each profiler session, each timed by an event pair and by CUPTI:
# that session's latency of an event pair beyond a kernel's duration. Measured once per process
# on 50 launches instead, it was off by a constant -0.1 to +0.6 µs from one process to the next
# (the seed rows, H100, session 35: every profiler sample of a process shifted alike).
LATENCY_PROBES = 16
# PyTorch's warnings carry a C++ source location; the reason is clearer without it.
SOURCE_NOTE = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


def _driver_memset() -> Callable[[torch.Tensor, torch.cuda.Stream], None]:
    """Zeroes a device tensor on a stream with cuMemsetD8Async, the Rust timer's flush."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise StartupError(f"cannot load the CUDA driver library libcuda.so.1: {e}") from None
    memset = cuda.cuMemsetD8Async
    memset.argtypes = (ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p)

    def zero(buffer: torch.Tensor, stream: torch.cuda.Stream) -> None:
        rc = memset(buffer.data_ptr(), 0, buffer.numel() * buffer.element_size(), stream.cuda_stream)
        if rc != 0:
            raise RuntimeError(f"cuMemsetD8Async of the L2 flush buffer failed: CUresult {rc}")

    return zero


class StartupError(Exception):
    """The oracle cannot serve real requests on this machine (no GPU)."""


class GraphCaptureError(Exception):
    pass


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _import_fa4() -> tuple[Any, str | None, str | None]:
    """(module, version, None) or (None, None, why it is missing)."""
    try:
        import flash_attn.cute as fa4
    except Exception as e:  # ImportError, or the CUTLASS DSL failing to initialise
        return None, None, f"flash_attn.cute does not import ({_first_line(e)})"
    for dist in FA4_DISTRIBUTIONS:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return fa4, importlib.metadata.version(dist), None
    return fa4, str(getattr(fa4, "__version__", "unknown")), None


def _import_evoattn() -> tuple[Any, str | None, str | None]:
    """(module, version, None) or (None, None, why it is missing): our own package, the wheel of
    crates/evoattn-py, installed into this Python or not."""
    try:
        import evoattn
    except Exception as e:  # ImportError, or its native module failing to load
        return None, None, f"evoattn does not import ({_first_line(e)}); install the wheel: {EVOATTN_INSTALL}"
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return evoattn, importlib.metadata.version("evoattn"), None
    return evoattn, str(getattr(evoattn, "__version__", "unknown")), None


def _import_cudnn_frontend() -> tuple[Any, str | None, str | None]:
    """(module, "frontend version, cuDNN version", None) or (None, None, why it is missing). Torch's
    own cuDNN is loaded first, so the frontend's library lookup finds the same libcudnn."""
    torch.backends.cudnn.version()
    try:
        import cudnn
    except Exception as e:  # ImportError, or its native module failing to load
        return None, None, f"the cuDNN frontend does not import ({_first_line(e)}); {CUDNN_FRONTEND_INSTALL}"
    try:
        backend = cudnn.backend_version_string()
    except Exception as e:  # the frontend imports but finds no usable libcudnn
        return None, None, f"the cuDNN frontend finds no cuDNN library ({_first_line(e)})"
    return cudnn, f"{cudnn.__version__} (cuDNN {backend})", None


def _cudnn_version() -> str | None:
    v = torch.backends.cudnn.version()  # e.g. 91900 for 9.19.0
    return None if v is None else f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def from_raw(raw: safetensors_io.RawTensor, device: torch.device) -> torch.Tensor:
    dtype = {v: k for k, v in SAFETENSORS_DTYPES.items()}[raw.dtype]
    if not raw.data:  # torch.frombuffer refuses empty buffers
        return torch.empty(raw.shape, dtype=dtype, device=device)
    return torch.frombuffer(bytearray(raw.data), dtype=dtype).reshape(raw.shape).to(device)


def to_raw(t: torch.Tensor) -> safetensors_io.RawTensor:
    host = t.contiguous().cpu()
    data = ctypes.string_at(host.data_ptr(), host.numel() * host.element_size()) if host.numel() else b""
    return safetensors_io.RawTensor(SAFETENSORS_DTYPES[host.dtype], tuple(host.shape), data)


class Prepared(NamedTuple):
    """A peer ready to run: the context to call it in, one call, the layout of what the call
    returns, and how that becomes the case's output (dtype and units) for `output`."""

    context: AbstractContextManager[Any]
    call: Callable[[], torch.Tensor]
    layout: str
    to_output: Callable[[torch.Tensor], torch.Tensor] = lambda o: o


def _why(caught: list[warnings.WarningMessage]) -> str:
    """What PyTorch's warnings say about why a backend does not apply: without source locations,
    "... not used because:" headings, and the backends our restriction disabled on purpose."""
    notes = (SOURCE_NOTE.sub("", str(w.message)).strip() for w in caught)
    kept = (n for n in notes if n and not n.endswith("because:") and "has been runtime disabled" not in n)
    return "; ".join(dict.fromkeys(kept))


def _probe(call: Callable[[], torch.Tensor]) -> tuple[torch.Tensor | None, str | None]:
    """Runs `call` once: (output, None), or (None, the reason it refused, with PyTorch's
    warnings, which is where SDPA says why a backend does not apply)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return call(), None
        except Exception as e:
            if isinstance(e, torch.OutOfMemoryError):
                torch.cuda.empty_cache()
            why = _why(caught)
            return None, _first_line(e) + (f" ({why})" if why else "")


@dataclass
class TorchCase:
    spec: CaseSpec
    # q, k, v as the file holds them: contiguous, in the file's layout (what our kernels read)
    raw: dict[str, torch.Tensor]
    descales: Descales | None = None
    _bshd: tuple[torch.Tensor, ...] | None = field(default=None, repr=False)
    # Peers whose preparation is expensive (a cuDNN graph build), prepared once per case.
    prepared: dict[str, Prepared] = field(default_factory=dict, repr=False)

    def bhsd(self) -> tuple[torch.Tensor, ...]:
        """q, k, v as [B, H, S, D]: views (transposed when the file is BSHD), never copies."""
        qkv = (self.raw["q"], self.raw["k"], self.raw["v"])
        return qkv if self.spec.layout == "bhsd" else tuple(t.transpose(1, 2) for t in qkv)

    def bshd(self) -> tuple[torch.Tensor, ...]:
        """q, k, v as contiguous [B, S, H, D] (FA4's input): the file's tensors, or copies made
        once, on first use, outside any timed region."""
        if self._bshd is None:
            qkv = (self.raw["q"], self.raw["k"], self.raw["v"])
            self._bshd = qkv if self.spec.layout == "bshd" else tuple(t.transpose(1, 2).contiguous() for t in qkv)
        return self._bshd




class TorchBackend:
    fake = False

    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise StartupError(f"PyTorch {torch.__version__} sees no CUDA GPU (CUDA build: {torch.version.cuda})")
        torch.cuda.init()
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.fa4, self.fa4_version, self.fa4_missing = _import_fa4()
        self.evoattn, self.evoattn_version, self.evoattn_missing = _import_evoattn()
        self.cudnn, self.cudnn_frontend_version, self.cudnn_missing = _import_cudnn_frontend()
        self._cudnn_handle: Any = None
        self.cases: dict[str, TorchCase] = {}
        self._flush: torch.Tensor | None = None
        # Samples run on a stream of their own with a driver memset as the flush: the Rust timer's
        # method. PyTorch's legacy default stream and a `zero_()` kernel made each graph sample of
        # the same kernel 0.1-0.2 µs slower (docs/perf-log.md, session 26).
        self._stream = torch.cuda.Stream(self.device)
        # Launches before the timed ones in each profiler session: CUPTI loses more of a
        # session's first records as sessions accumulate, so it grows with the losses seen.
        self._profiler_lead = PROFILER_LEAD
        self._memset = _driver_memset()

    def hello(self) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(self.device)
        try:
            from .kernel_launch import driver_version

            driver: str | None = driver_version()
        except ImportError:
            driver = None
        peers = {name: "available" for name in PEERS}
        if not torch.backends.cuda.is_flash_attention_available():
            peers["sdpa-flash"] = "missing: this PyTorch build has no flash attention"
        if not torch.backends.cudnn.is_available():
            peers["sdpa-cudnn"] = "missing: this PyTorch build has no cuDNN"
        if self.fa4 is None:
            peers["fa4"] = f"missing: {self.fa4_missing}"
        elif props.major < FA4_MIN_MAJOR:
            peers["fa4"] = f"missing: FlashAttention-4 needs sm_90 or newer, this GPU is sm_{props.major}{props.minor}"
        if self.evoattn is None:
            peers["evoattn-torch"] = f"missing: {self.evoattn_missing}"
        if self.cudnn is None:
            peers["cudnn-fp8"] = f"missing: {self.cudnn_missing}"
        return {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": _cudnn_version(),
            "driver": driver,
            "fa4": self.fa4_version,
            "evoattn": self.evoattn_version,
            "cudnn_frontend": self.cudnn_frontend_version,
            "gpu": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "l2_bytes": props.L2_cache_size,
            "sm_count": props.multi_processor_count,
            "peers": peers,
        }

    def load(self, case_id: str, path: str, layout: str, causal: str, scale: float) -> CaseSpec:
        spec, tensors = read_case(path, layout, causal, scale)
        self.cases[case_id] = TorchCase(spec, {name: from_raw(t, self.device) for name, t in tensors.items()})
        return spec

    def draw(
        self, case_id: str, spec: CaseSpec, streams: dict[str, DrawStream], descales: Descales | None
    ) -> None:
        dtype = TORCH_DTYPES[spec.dtype]
        tensors = {}
        for name, heads, seq in (("q", spec.h, spec.sq), ("k", spec.hkv, spec.sk), ("v", spec.hkv, spec.sk)):
            groups = None
            if descales is not None:
                values = getattr(descales, name)
                groups = torch.tensor(values, dtype=torch.float32, device=self.device)
            shape = (spec.b, heads, seq, spec.d)
            logical = draw(torch, self.device, shape, streams[name], dtype, groups, spec.hkv)
            tensors[name] = logical if spec.layout == "bhsd" else logical.transpose(1, 2).contiguous()
        self.cases[case_id] = TorchCase(spec, tensors, descales)

    def unload(self, case_id: str) -> None:
        del self.cases[case_id]
        torch.cuda.empty_cache()

    def _prepare(self, case: TorchCase, peer: str) -> Prepared | dict[str, Any]:
        """`peer` ready to run on `case`, or its missing/refused status."""
        spec = case.spec
        why = dtype_refusal(spec, peer, case.descales)
        if why is not None:
            return refused(why)
        if peer == "cudnn-fp8":
            if peer not in case.prepared:
                prepared = self._cudnn_fp8(case)
                if isinstance(prepared, dict):
                    return prepared
                case.prepared[peer] = prepared
            return case.prepared[peer]
        if peer == "fa4":
            if self.fa4 is None:
                return missing(str(self.fa4_missing))
            if spec.causal == "top-left" and spec.sq != spec.sk:
                return refused(FA4_TOP_LEFT)
            fa4_func, (q, k, v), causal = self.fa4.flash_attn_func, case.bshd(), spec.causal != "none"

            def fa4_call() -> torch.Tensor:
                out = fa4_func(q, k, v, softmax_scale=spec.scale, causal=causal)
                return out[0] if isinstance(out, tuple) else out  # (out, lse) in current releases

            return Prepared(contextlib.nullcontext(), fa4_call, "bshd")

        if peer == "evoattn-torch":
            if self.evoattn is None:
                return missing(str(self.evoattn_missing))
            # What a PyTorch caller writes: SDPA's BHSD views as they are, the package's own plan,
            # PyTorch's current stream (the capture stream in graph mode). The probe's first call
            # compiles or loads the kernel, so warm-up and capture only launch.
            attention, (q, k, v) = self.evoattn.attention, case.bhsd()
            mask: bool | str = False if spec.causal == "none" else spec.causal

            def evoattn_call() -> torch.Tensor:
                return attention(q, k, v, causal=mask, scale=spec.scale)

            return Prepared(contextlib.nullcontext(), evoattn_call, "bhsd")

        q, k, v = case.bhsd()
        kwargs: dict[str, Any] = {"scale": spec.scale}
        if spec.hkv != spec.h:
            kwargs["enable_gqa"] = True
        if spec.causal == "top-left" or (spec.causal == "bottom-right" and spec.sq == spec.sk):
            kwargs["is_causal"] = True
        elif spec.causal == "bottom-right":
            kwargs["attn_mask"] = causal_lower_right(spec.sq, spec.sk)
        context = sdpa_kernel(SDPA_BACKENDS[peer]) if peer in SDPA_BACKENDS else contextlib.nullcontext()
        return Prepared(context, lambda: F.scaled_dot_product_attention(q, k, v, **kwargs), "bhsd")

    def _cudnn_fp8(self, case: TorchCase) -> Prepared | dict[str, Any]:
        """cuDNN's FP8 SDPA (the frontend's `sdpa_fp8`) on the case's E4M3 tensors as they lie,
        with their per-tensor descales and P scaled by CUDNN_FP8_P_SCALE. O is bf16 where cuDNN
        takes it; where it does not (Hopper, cuDNN 9.19), E4M3 with scale_o = 1/descale_v, which
        maps O's bound (|O| <= max |V| = 448 descale_v) onto E4M3's range: `output` converts it to
        bf16, the timed calls write E4M3."""
        if self.cudnn is None:
            return missing(str(self.cudnn_missing))
        cudnn, spec = self.cudnn, case.spec
        per_tensor = case.descales.per_tensor() if case.descales is not None else None
        assert per_tensor is not None, "dtype_refusal admits per-tensor descales only"
        dq, dk, dv = per_tensor
        if self._cudnn_handle is None:
            self._cudnn_handle = cudnn.create_handle()
        handle = self._cudnn_handle

        def one(x: float) -> torch.Tensor:
            return torch.full((1, 1, 1, 1), x, dtype=torch.float32, device=self.device)

        q, k, v = case.bhsd()
        inputs = {
            "q": q, "k": k, "v": v, "descale_q": one(dq), "descale_k": one(dk), "descale_v": one(dv),
            "descale_s": one(1.0 / CUDNN_FP8_P_SCALE), "scale_s": one(CUDNN_FP8_P_SCALE),
        }  # fmt: skip
        mask: dict[str, Any] = {}
        if spec.causal != "none":
            align = cudnn.diagonal_alignment.TOP_LEFT if spec.causal == "top-left" else cudnn.diagonal_alignment.BOTTOM_RIGHT
            mask = {"diagonal_alignment": align, "right_bound": 0}
        errors = []
        # O as evoattn writes it when cuDNN builds that plan, else in E4M3 (on Hopper cuDNN 9.19
        # builds none for a 16-bit O).
        ours = TORCH_DTYPES[spec.output_dtype]
        for o_dtype, scale_o in ((ours, 1.0), (torch.float8_e4m3fn, 1.0 / dv)):
            stored = torch.empty(spec.dims(spec.h, spec.sq), dtype=o_dtype, device=self.device)
            o = stored if spec.layout == "bhsd" else stored.transpose(1, 2)
            outputs = {"o": o, "amax_s": one(0.0), "amax_o": one(0.0)}
            scaled = {**inputs, "scale_o": one(scale_o)}
            try:
                graph, names = self._cudnn_fp8_graph(scaled, outputs, spec.scale, mask)
                pack = {names[n]: t for n, t in {**scaled, **outputs}.items()}
                workspace = torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8, device=self.device)
            except Exception as e:  # cuDNN rejects the graph: try E4M3 O, then report both
                errors.append(f"O {str(o_dtype).removeprefix('torch.')}: {_first_line(e)}")
                continue

            def call(graph: Any = graph, pack: Any = pack, workspace: torch.Tensor = workspace) -> torch.Tensor:
                cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
                graph.execute(pack, workspace, handle=handle)
                return stored

            if o_dtype == torch.bfloat16:
                return Prepared(contextlib.nullcontext(), call, spec.layout)
            return Prepared(contextlib.nullcontext(), call, spec.layout, lambda o: (o.float() * dv).to(torch.bfloat16))
        return refused("cuDNN builds no FP8 SDPA plan for this case: " + "; ".join(errors))

    def _cudnn_fp8_graph(
        self, inputs: dict[str, torch.Tensor], outputs: dict[str, torch.Tensor], scale: float, mask: dict[str, Any]
    ) -> tuple[Any, dict[str, Any]]:
        """The built graph of one FP8 SDPA and its tensors by name."""
        cudnn = self.cudnn
        data_type = {
            torch.float8_e4m3fn: cudnn.data_type.FP8_E4M3,
            torch.bfloat16: cudnn.data_type.BFLOAT16,
            torch.float32: cudnn.data_type.FLOAT,
        }
        graph = cudnn.pygraph(
            io_data_type=cudnn.data_type.FP8_E4M3,
            intermediate_data_type=cudnn.data_type.FLOAT,
            compute_data_type=cudnn.data_type.FLOAT,
            handle=self._cudnn_handle,
        )
        names = {
            n: graph.tensor(dim=list(t.shape), stride=list(t.stride()), name=n, data_type=data_type[t.dtype])
            for n, t in inputs.items()
        }
        o, _stats, amax_s, amax_o = graph.sdpa_fp8(
            names["q"], names["k"], names["v"], names["descale_q"], names["descale_k"], names["descale_v"],
            names["descale_s"], names["scale_s"], names["scale_o"],
            generate_stats=False, attn_scale=scale, name="sdpa_fp8", **mask,
        )  # fmt: skip
        for name, t in (("o", o), ("amax_s", amax_s), ("amax_o", amax_o)):
            like = outputs[name]
            t.set_output(True).set_dim(list(like.shape)).set_stride(list(like.stride()))
            t.set_data_type(data_type[like.dtype])
            names[name] = t
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        return graph, names

    def time(self, case_id: str, peer: str, timing: Timing) -> dict[str, Any]:
        prepared = self._prepare(self.cases[case_id], peer)
        if isinstance(prepared, dict):
            return prepared
        context, call = prepared.context, prepared.call
        # The backend restriction is entered once, around warm-up, capture and samples, so that
        # no sample pays for it.
        with context:
            _, reason = _probe(call)
            if reason is not None:
                return refused(reason)
            try:
                return ran(samples_us=self._time_calls(call, timing))
            except GraphCaptureError as e:
                return refused(str(e))

    def output(self, case_id: str, peer: str, path: str) -> dict[str, Any]:
        case = self.cases[case_id]
        prepared = self._prepare(case, peer)
        if isinstance(prepared, dict):
            return prepared
        with prepared.context:
            out, reason = _probe(prepared.call)
        if out is None:
            return refused(str(reason))
        out = prepared.to_output(out)
        if prepared.layout != case.spec.layout:
            out = out.transpose(1, 2)
        want, shape = TORCH_DTYPES[case.spec.output_dtype], case.raw["q"].shape
        if out.dtype != want or out.shape != shape:
            raise RuntimeError(f"{peer} returned {out.dtype} {list(out.shape)}, expected {want} {list(shape)}")
        safetensors_io.write(path, {"o": to_raw(out)})
        return ran(path=path)

    def matmul_samples(self, n: int, dtype: str, samples: int) -> list[float]:
        a, b, c = (torch.randn(n, n, device=self.device, dtype=TORCH_DTYPES[dtype]) for _ in range(3))
        return self._time_calls(lambda: torch.mm(a, b, out=c), Timing("eager", CEILING_WARMUP, samples, 0))

    def copy_samples(self, nbytes: int, samples: int) -> list[float]:
        src, dst = (torch.zeros(nbytes, dtype=torch.uint8, device=self.device) for _ in range(2))
        return self._time_calls(lambda: dst.copy_(src), Timing("eager", CEILING_WARMUP, samples, 0))

    def time_kernel(
        self, launch: KernelLaunch, case_id: str, timing: Timing, output: str | None, timer: str
    ) -> list[float]:
        try:
            from .kernel_launch import EncodedMap, Module
        except ImportError as e:
            raise RequestError(f"time_kernel needs cuda-bindings (pip install cuda-bindings): {e}") from None
        try:
            image = Path(launch.cubin_path).read_bytes()
        except OSError as e:
            raise RequestError(f"cannot read the CUBIN {launch.cubin_path}: {e.strerror or e}") from None
        case = self.cases[case_id]
        q, k, v = case.raw["q"], case.raw["k"], case.raw["v"]
        o = torch.full_like(q, float("nan"))  # unwritten elements stay NaN in `output`
        # Scratch lives as long as the module: zeroed once, its counters left at zero by each launch.
        scratch_types = {"counters": torch.int32, "floats": torch.float32}
        scratch = {
            name: torch.zeros(words, dtype=scratch_types[name], device=self.device)
            for name, words in launch.scratch_words.items()
        }
        tensors = {"q": q, "k": k, "v": v, "o": o, **scratch}
        pointers = {name: t.data_ptr() for name, t in tensors.items()}
        params = launch.patched(pointers)
        maps = [EncodedMap(m, pointers[m.tensor]) for m in launch.tensor_maps]
        with Module(image) as module:
            kernel = module.launcher(launch.kernel, launch.grid, launch.block, launch.smem, params, maps)

            def call() -> None:
                kernel(torch.cuda.current_stream().cuda_stream)  # the capture stream in graph mode

            try:
                if timer == "do_bench":
                    result = self._do_bench(call, timing)
                elif timer == "profiler":
                    result = self._profile_calls(call, timing, launch.kernel)
                else:
                    result = self._time_calls(call, timing)
            except GraphCaptureError as e:
                raise RuntimeError(f"{launch.kernel} {e}") from None
        if output is not None:
            safetensors_io.write(output, {"o": to_raw(o)})
        return result

    def _do_bench(self, call: Callable[[], Any], timing: Timing) -> list[float]:
        """Triton's `do_bench` on eager calls, its method throughout (its warm-up, its 256 MB L2
        clear before each repetition, its event pair around each call): rounds of it until a
        block's samples are in, the last `timing.samples` kept."""
        if timing.mode != "eager":
            raise RequestError("the do_bench timer times eager calls (graph mode has no twin in it)")
        try:
            from triton.testing import do_bench
        except ImportError as e:
            raise RequestError(f"the do_bench timer needs Triton: {e}") from None
        estimate = Timing("eager", timing.warmup, CEILING_WARMUP, timing.flush_bytes)
        estimate_ms = max(min(self._time_calls(call, estimate)) / US_PER_MS, 1e-3)
        times: list[float] = []
        with torch.cuda.stream(self._stream):
            for round_ in range(DO_BENCH_ROUNDS):
                # do_bench sizes its repetitions by its own estimate, which includes its L2 clear:
                # each round asks for twice the time of the last.
                rep_ms = estimate_ms * (timing.samples - len(times)) * 2**round_
                times += do_bench(call, warmup=estimate_ms * max(timing.warmup, 1), rep=rep_ms, return_mode="all")
                if len(times) >= timing.samples:
                    return [t * US_PER_MS for t in times[-timing.samples :]]
        raise RuntimeError(f"do_bench gave {len(times)} samples in {DO_BENCH_ROUNDS} rounds, not {timing.samples}")

    def _profile_calls(self, call: Callable[[], Any], timing: Timing, kernel: str) -> list[float]:
        """PyTorch's profiler (CUPTI's activity records): each sample the kernel's own duration on
        the GPU plus the latency an event pair adds around any launch, measured in the same
        session on empty launches, so that it reads as the other timers' samples do while its
        kernel time is CUPTI's."""
        if timing.mode != "eager":
            raise RequestError("the profiler timer times eager calls (graph mode has no twin in it)")
        durations, latency = self._cupti_session(call, timing, lambda name: name == kernel)
        return [d + latency for d in durations]

    def _cupti_session(
        self, call: Callable[[], Any], timing: Timing, matches: Callable[[str], bool]
    ) -> tuple[list[float], float]:
        """`timing.warmup` eager calls, then in a profiler session the lead's and `timing.samples`
        calls and `LATENCY_PROBES` empty launches (`torch.cuda._sleep(0)`) in event pairs, each
        after the flush: the last `timing.samples` CUPTI durations of the records named as
        `matches` says (records lost are a session's first), and the median over the empty
        launches of event interval less CUPTI duration (µs)."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        flush = self._flush_buffer(timing.flush_bytes)
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream())
        launches: list[Any] = []
        probes: list[Any] = []
        for _ in range(PROFILER_SESSIONS):
            calls = self._profiler_lead + timing.samples
            new_event = functools.partial(torch.cuda.Event, enable_timing=True)
            pairs = [(new_event(), new_event()) for _ in range(LATENCY_PROBES)]
            with torch.cuda.stream(stream):
                for _ in range(timing.warmup):
                    call()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(calls):
                        if flush is not None:
                            self._memset(flush, stream)
                        call()
                    for start, end in pairs:
                        if flush is not None:
                            self._memset(flush, stream)
                        start.record(stream)
                        torch.cuda._sleep(0)
                        end.record(stream)
                    torch.cuda.synchronize()
            records = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
            launches = [e for e in records if matches(e.name)]
            probes = [e for e in records if "spin_kernel" in e.name]
            # Lost records are the session's first: lead the next sessions past as many again.
            lost = calls - len(launches)
            self._profiler_lead = min(max(self._profiler_lead, lost + PROFILER_LEAD), PROFILER_MAX_LEAD)
            if len(launches) >= timing.samples and len(probes) >= LATENCY_PROBES:
                durations = [e.time_range.elapsed_us() for e in launches[-timing.samples :]]
                last = probes[-LATENCY_PROBES:]
                gaps = [a.elapsed_time(b) * US_PER_MS - e.time_range.elapsed_us() for (a, b), e in zip(pairs, last)]
                return durations, max(statistics.median(gaps), 0.0)
        raise RuntimeError(
            f"the profiler recorded {len(launches)} of {calls} launches (at least {timing.samples} needed) and "
            f"{len(probes)} of {LATENCY_PROBES} empty ones, in each of {PROFILER_SESSIONS} sessions"
        )

    def _flush_buffer(self, nbytes: int) -> torch.Tensor | None:
        """The buffer overwritten before each sample (kept between requests of the same size)."""
        if nbytes == 0:
            return None
        if self._flush is None or self._flush.numel() != nbytes:
            self._flush = None  # free the old one before allocating the new
            self._flush = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        return self._flush

    def _capture(self, call: Callable[[], Any], warmup: int) -> tuple[torch.cuda.CUDAGraph, Any]:
        """One call captured into a CUDA graph, after warm-up on the capture stream (PyTorch's
        rule), and the graph's static output (kept alive while the graph replays)."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(max(warmup, GRAPH_MIN_WARMUP)):
                call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=stream):
                static_out = call()
        except Exception as e:
            raise GraphCaptureError(f"cannot be captured in a CUDA graph ({_first_line(e)})") from None
        return graph, static_out

    def _time_calls(self, call: Callable[[], Any], timing: Timing) -> list[float]:
        """The measurement: in eager mode `warmup` calls, in graph mode `warmup` calls on the
        capture stream, the capture, `warmup` replays and a GPU-side hold while the host
        enqueues; then per sample a flush, a start event, one call (or replay), an end event;
        one synchronisation; µs per sample."""
        flush = self._flush_buffer(timing.flush_bytes)
        stream = self._stream
        stream.wait_stream(torch.cuda.current_stream())  # the case's uploads and outputs
        with torch.cuda.stream(stream):
            if timing.mode == "graph":
                graph, _static_out = self._capture(call, timing.warmup)
                run: Callable[[], Any] = graph.replay
            else:
                run = call
            for _ in range(timing.warmup):
                run()
            if timing.mode == "graph":
                # Hold the stream on the GPU while the host enqueues every sample, so no host gap
                # between a start event and its replay enters a sample (the Rust timer does the same).
                torch.cuda._sleep(GRAPH_HOLD_CYCLES_PER_SAMPLE * timing.samples)
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(timing.samples)
            ]
            for start, end in events:
                if flush is not None:
                    self._memset(flush, stream)
                start.record(stream)
                run()
                end.record(stream)
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * US_PER_MS for start, end in events]
