"""The request vocabulary shared by the server and both backends: typed field access that turns
any malformed request into a RequestError (answered `{"ok": false, "error": ...}`), the peer
outcomes, and the description of a raw kernel launch for `time_kernel`."""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import struct
from dataclasses import dataclass
from typing import Any

MODES = ("eager", "graph")
# Who times a `time_kernel` launch: PyTorch's CUDA events around each call (the oracle's own
# method, as for the peers), Triton's `do_bench`, or PyTorch's profiler (the kernel's duration
# as CUPTI records it): three harnesses outside evoattn's timer, for its cross-check.
TIMERS = ("events", "do_bench", "profiler")
# The tensors whose device pointers `time_kernel` patches into the kernel's parameter bytes.
KERNEL_POINTERS = ("q", "k", "v", "o")
POINTER = struct.Struct("<Q")
# A launch's scratch buffers (int32 counters, float32 words), whose addresses are patched in
# like the tensors'.
SCRATCH = ("counters", "floats")
# A tensor map's fields: cuTensorMapEncodeTiled's arguments apart from the address, as evoattn
# chose them (its enums as the driver's numbers), and the lengths of its arrays (rank 4).
TENSOR_MAP_ARRAYS = {"dims": 4, "strides_bytes": 3, "box_dims": 4, "element_strides": 4}
TENSOR_MAP_ENUMS = ("data_type", "interleave", "swizzle", "l2_promotion", "oob_fill")


class RequestError(Exception):
    """A request the oracle cannot act on: a protocol or usage error, never a peer's refusal."""


class Request:
    """Typed access to one request's fields."""

    def __init__(self, fields: dict[str, Any]):
        self.fields = fields

    def field(self, name: str) -> Any:
        if name not in self.fields:
            raise RequestError(f"'{self.fields.get('op')}' needs the field '{name}'")
        return self.fields[name]

    def text(self, name: str) -> str:
        value = self.field(name)
        if not isinstance(value, str) or not value:
            raise RequestError(f"'{name}' must be a non-empty string, got {value!r}")
        return value

    def choice(self, name: str, options: tuple[str, ...]) -> str:
        value = self.text(name)
        if value not in options:
            raise RequestError(f"'{name}' is '{value}', expected one of {', '.join(options)}")
        return value

    def integer(self, name: str, minimum: int = 0) -> int:
        value = self.field(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise RequestError(f"'{name}' must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, name: str) -> float:
        value = self.field(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value == 0:
            raise RequestError(f"'{name}' must be a finite non-zero number, got {value!r}")
        return float(value)

    def dim3(self, name: str) -> tuple[int, int, int]:
        value = self.field(name)
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in value)
        ):
            raise RequestError(f"'{name}' must be three positive integers [x, y, z], got {value!r}")
        return (value[0], value[1], value[2])

    def optional_text(self, name: str) -> str | None:
        return self.text(name) if self.fields.get(name) is not None else None


def ran(**fields: Any) -> dict[str, Any]:
    """The peer ran; `fields` carry its result (samples_us, path)."""
    return {"status": "ok", **fields}


def refused(reason: str) -> dict[str, Any]:
    """The peer is installed but does not run this case (or mode)."""
    return {"status": "refused", "reason": reason}


def missing(reason: str) -> dict[str, Any]:
    """The peer is not installed."""
    return {"status": "missing", "reason": reason}


@dataclass(frozen=True)
class Timing:
    """How a `time` or `time_kernel` request asks for its samples: `warmup` untimed calls, then
    `samples` timed ones in `mode`, each after overwriting a buffer of `flush_bytes`."""

    mode: str
    warmup: int
    samples: int
    flush_bytes: int

    @staticmethod
    def parse(req: Request) -> Timing:
        return Timing(
            mode=req.choice("mode", MODES),
            warmup=req.integer("warmup"),
            samples=req.integer("samples", minimum=1),
            flush_bytes=req.integer("flush_bytes"),
        )


@dataclass(frozen=True)
class KernelLaunch:
    """A raw launch of one kernel of a CUBIN with a single by-value struct parameter."""

    cubin_path: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    params: bytes
    # Where each device address goes in `params`: q, k, v, o, and the scratch's (SCRATCH).
    pointer_offsets: dict[str, int]
    # Words of each scratch buffer the launch needs (zeroed once; the kernel leaves its counters
    # at zero again), by SCRATCH name; absent where it needs none.
    scratch_words: dict[str, int]
    # The kernel's tensor-map parameters after the struct, in order (TMA kernels).
    tensor_maps: tuple[TensorMap, ...] = ()

    @staticmethod
    def parse(req: Request) -> KernelLaunch:
        try:
            params = base64.b64decode(req.text("params_b64"), validate=True)
        except binascii.Error as e:
            raise RequestError(f"'params_b64' is not base64: {e}") from None
        offsets = req.field("pointer_offsets")
        if not isinstance(offsets, dict) or set(offsets) != set(KERNEL_POINTERS):
            raise RequestError(f"'pointer_offsets' must map exactly {', '.join(KERNEL_POINTERS)} to byte offsets")
        offsets = dict(offsets)
        scratch = _scratch(req.fields.get("scratch"))
        offsets.update({name: off for name, (_, off) in scratch.items()})
        for name, off in offsets.items():
            if isinstance(off, bool) or not isinstance(off, int) or off < 0 or off + POINTER.size > len(params):
                raise RequestError(
                    f"pointer offset of {name} is {off!r}: the {POINTER.size}-byte pointer must lie within the "
                    f"{len(params)} parameter bytes"
                )
            if off % POINTER.size:
                raise RequestError(f"pointer offset of {name} is {off}, not {POINTER.size}-byte aligned")
        starts = sorted(offsets.values())
        if any(b - a < POINTER.size for a, b in itertools.pairwise(starts)):
            raise RequestError(f"pointer offsets {offsets} overlap")
        return KernelLaunch(
            cubin_path=req.text("cubin_path"),
            kernel=req.text("kernel"),
            grid=req.dim3("grid"),
            block=req.dim3("block"),
            smem=req.integer("smem"),
            params=params,
            pointer_offsets=offsets,
            scratch_words={name: words for name, (words, _) in scratch.items()},
            tensor_maps=tuple(TensorMap.parse(m) for m in _list(req.fields.get("tensor_maps", []), "tensor_maps")),
        )

    def patched(self, pointers: dict[str, int]) -> bytes:
        """The parameter bytes with each tensor's device address written at its offset."""
        buf = bytearray(self.params)
        for name, off in self.pointer_offsets.items():
            POINTER.pack_into(buf, off, pointers[name])
        return bytes(buf)


def _scratch(value: Any) -> dict[str, tuple[int, int]]:
    """`scratch` of a launch: {"counters": words, "floats": words, "counters_offset": byte offset,
    "floats_offset": byte offset} (absent: none), as (words, offset) by name, the unneeded left out."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(f"'scratch' must be an object, got {value!r}")
    req = Request({**value, "op": "scratch"})
    needed = {name: (req.integer(name), req.field(f"{name}_offset")) for name in SCRATCH}
    return {name: need for name, need in needed.items() if need[0] > 0}


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError(f"'{name}' must be a list, got {value!r}")
    return value


@dataclass(frozen=True)
class TensorMap:
    """One TMA tensor map a kernel takes, to encode over one of the case's tensors: the address
    is ours, every other argument of cuTensorMapEncodeTiled evoattn's."""

    tensor: str
    data_type: int
    dims: tuple[int, ...]
    strides_bytes: tuple[int, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int

    @staticmethod
    def parse(fields: Any) -> TensorMap:
        if not isinstance(fields, dict):
            raise RequestError(f"a tensor map must be an object, got {fields!r}")
        req = Request({**fields, "op": "a tensor map"})
        arrays = {}
        for name, length in TENSOR_MAP_ARRAYS.items():
            value = req.field(name)
            if (
                not isinstance(value, list)
                or len(value) != length
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in value)
            ):
                raise RequestError(f"tensor map '{name}' must be {length} positive integers, got {value!r}")
            arrays[name] = tuple(value)
        enums = {name: req.integer(name) for name in TENSOR_MAP_ENUMS}
        return TensorMap(tensor=req.choice("tensor", KERNEL_POINTERS), **arrays, **enums)

