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
    pointer_offsets: dict[str, int]

    @staticmethod
    def parse(req: Request) -> KernelLaunch:
        try:
            params = base64.b64decode(req.text("params_b64"), validate=True)
        except binascii.Error as e:
            raise RequestError(f"'params_b64' is not base64: {e}") from None
        offsets = req.field("pointer_offsets")
        if not isinstance(offsets, dict) or set(offsets) != set(KERNEL_POINTERS):
            raise RequestError(f"'pointer_offsets' must map exactly {', '.join(KERNEL_POINTERS)} to byte offsets")
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
            pointer_offsets=dict(offsets),
        )

    def patched(self, pointers: dict[str, int]) -> bytes:
        """The parameter bytes with each tensor's device address written at its offset."""
        buf = bytearray(self.params)
        for name, off in self.pointer_offsets.items():
            POINTER.pack_into(buf, off, pointers[name])
        return bytes(buf)
