"""The request loop: one JSON object per line in, one per line out. The server checks every
request's fields, ids and peer names, so a backend (real or fake) only sees well-formed calls."""

from __future__ import annotations

import json
import math
import platform
import statistics
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TextIO

from . import PEERS, PROTOCOL_VERSION
from .case import CAUSAL, DRAW_DTYPES, FP8_DTYPES, LAYOUTS, CaseSpec, Descales
from .draw import DrawStream
from .protocol import TIMERS, KernelLaunch, Request, RequestError, Timing

MATMUL_DTYPES = ("f16", "bf16")


class Backend(Protocol):
    """What the server needs from the real (torch) or the fake backend."""

    fake: bool

    def hello(self) -> dict[str, Any]: ...

    def load(self, case_id: str, path: str, layout: str, causal: str, scale: float) -> CaseSpec: ...

    def draw(
        self, case_id: str, spec: CaseSpec, streams: dict[str, DrawStream], descales: Descales | None
    ) -> None: ...

    def unload(self, case_id: str) -> None: ...

    def time(self, case_id: str, peer: str, timing: Timing) -> dict[str, Any]: ...

    def output(self, case_id: str, peer: str, path: str) -> dict[str, Any]: ...

    def matmul_samples(self, n: int, dtype: str, samples: int) -> list[float]: ...

    def copy_samples(self, nbytes: int, samples: int) -> list[float]: ...

    def time_kernel(
        self, launch: KernelLaunch, case_id: str, timing: Timing, output: str | None, timer: str
    ) -> list[float]: ...


class Server:
    def __init__(self, backend: Backend):
        self.backend = backend
        self.cases: dict[str, CaseSpec] = {}
        self.stopped = False
        self.ops: dict[str, Callable[[Request], dict[str, Any]]] = {
            "hello": self.hello,
            "load": self.load,
            "draw": self.draw,
            "time": self.time,
            "output": self.output,
            "unload": self.unload,
            "shutdown": self.shutdown,
            "matmul_peak": self.matmul_peak,
            "copy_bandwidth": self.copy_bandwidth,
            "time_kernel": self.time_kernel,
        }

    def serve(self, lines: Iterable[str], out: TextIO) -> None:
        """Answers each non-blank line until `shutdown` or the end of input."""
        for line in lines:
            if not line.strip():
                continue
            try:
                fields = json.loads(line)
            except json.JSONDecodeError as e:
                response: dict[str, Any] = {"ok": False, "error": f"a request must be one JSON object per line: {e}"}
            else:
                response = self.handle(fields)
            try:
                text = json.dumps(response, allow_nan=False)
            except ValueError as e:
                text = json.dumps({"ok": False, "error": f"the response is not valid JSON: {e}"})
            out.write(text + "\n")
            out.flush()
            if self.stopped:
                return

    def handle(self, fields: Any) -> dict[str, Any]:
        op = fields.get("op") if isinstance(fields, dict) else None
        try:
            if not isinstance(fields, dict):
                raise RequestError("a request must be a JSON object")
            req = Request(fields)
            name = req.text("op")
            if name not in self.ops:
                raise RequestError(f"unknown op '{name}': expected one of {', '.join(self.ops)}")
            return {"ok": True, **self.ops[name](req)}
        except RequestError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # a failure inside torch, the driver or a peer: answered, never dropped
            traceback.print_exc(file=sys.stderr)
            return {"ok": False, "error": f"{op}: {type(e).__name__}: {e}"}

    def _case(self, req: Request) -> str:
        case_id = req.text("id")
        if case_id not in self.cases:
            raise RequestError(f"no case is loaded under id '{case_id}'")
        return case_id

    @staticmethod
    def _peer(req: Request) -> str:
        return req.choice("peer", PEERS)

    def hello(self, req: Request) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,
            "fake": self.backend.fake,
            "python": platform.python_version(),
            **self.backend.hello(),
        }

    def load(self, req: Request) -> dict[str, Any]:
        case_id = req.text("id")
        if case_id in self.cases:
            raise RequestError(f"a case is already loaded under id '{case_id}'; unload it first")
        spec = self.backend.load(
            case_id, req.text("path"), req.choice("layout", LAYOUTS), req.choice("causal", CAUSAL), req.number("scale")
        )
        self.cases[case_id] = spec
        return {"id": case_id, **spec.describe()}

    def draw(self, req: Request) -> dict[str, Any]:
        case_id = req.text("id")
        if case_id in self.cases:
            raise RequestError(f"a case is already loaded under id '{case_id}'; unload it first")
        shape = req.field("shape")
        if not isinstance(shape, dict):
            raise RequestError(f"'shape' must be an object {{b, h, hkv, sq, sk, d}}, got {shape!r}")
        dims = Request(shape)
        b, h, hkv, sq, sk = (dims.integer(axis) for axis in ("b", "h", "hkv", "sq", "sk"))
        d = dims.integer("d", minimum=1)
        if hkv == 0 or h % hkv != 0:
            raise RequestError(f"{hkv} KV heads do not divide {h} query heads")
        spec = CaseSpec(
            b,
            h,
            hkv,
            sq,
            sk,
            d,
            req.choice("dtype", DRAW_DTYPES),
            req.choice("layout", LAYOUTS),
            req.choice("causal", CAUSAL),
            req.number("scale"),
        )
        tensors = req.field("tensors")
        if not isinstance(tensors, dict) or set(tensors) != {"q", "k", "v"}:
            raise RequestError("'tensors' must map exactly q, k and v to their generators")
        streams = {name: DrawStream.parse(name, tensors[name]) for name in ("q", "k", "v")}
        self.backend.draw(case_id, spec, streams, self._descales(req, spec))
        self.cases[case_id] = spec
        return {"id": case_id, **spec.describe()}

    @staticmethod
    def _descales(req: Request, spec: CaseSpec) -> Descales | None:
        """An E4M3 draw's descales: q, k and v each B * Hkv positive finite numbers; none for
        16-bit draws."""
        if spec.dtype not in FP8_DTYPES:
            if "descales" in req.fields:
                raise RequestError(f"'descales' belong to E4M3 draws, not {spec.dtype} ones")
            return None
        fields = req.field("descales")
        if not isinstance(fields, dict) or set(fields) != {"q", "k", "v"}:
            raise RequestError("'descales' must map exactly q, k and v to their [B * Hkv] descales")
        groups = spec.b * spec.hkv

        def parse(name: str) -> tuple[float, ...]:
            values = fields[name]
            if (
                not isinstance(values, list)
                or len(values) != groups
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in values)
                or not all(math.isfinite(x) and x > 0 for x in values)
            ):
                raise RequestError(f"'descales' of '{name}' must be {groups} positive finite numbers (B * Hkv)")
            return tuple(float(x) for x in values)

        return Descales(parse("q"), parse("k"), parse("v"))

    def unload(self, req: Request) -> dict[str, Any]:
        case_id = self._case(req)
        self.backend.unload(case_id)
        del self.cases[case_id]
        return {}

    def time(self, req: Request) -> dict[str, Any]:
        return self.backend.time(self._case(req), self._peer(req), Timing.parse(req))

    def output(self, req: Request) -> dict[str, Any]:
        return self.backend.output(self._case(req), self._peer(req), req.text("path"))

    def shutdown(self, req: Request) -> dict[str, Any]:
        self.stopped = True
        return {}

    def matmul_peak(self, req: Request) -> dict[str, Any]:
        n = req.integer("n", minimum=1)
        samples = self.backend.matmul_samples(n, req.choice("dtype", MATMUL_DTYPES), req.integer("samples", minimum=1))
        return {"tflops": 2.0 * n**3 / statistics.median(samples) / 1e6, "samples_us": samples}

    def copy_bandwidth(self, req: Request) -> dict[str, Any]:
        nbytes = req.integer("bytes", minimum=1)
        samples = self.backend.copy_samples(nbytes, req.integer("samples", minimum=1))
        # read + write traffic; bytes per microsecond / 1e3 = GB/s
        return {"gbps": 2.0 * nbytes / statistics.median(samples) / 1e3, "samples_us": samples}

    def time_kernel(self, req: Request) -> dict[str, Any]:
        samples = self.backend.time_kernel(
            KernelLaunch.parse(req),
            self._case(req),
            Timing.parse(req),
            req.optional_text("output"),
            req.choice("timer", TIMERS),
        )
        return {"samples_us": samples}
