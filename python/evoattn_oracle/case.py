"""One attention problem as `load` reads it: q, k, v from a safetensors file, checked the way
`evoattn run` checks its input, plus the mask and scale the request gives."""

from __future__ import annotations

from dataclasses import dataclass

from . import safetensors_io
from .protocol import RequestError

# safetensors dtype names -> evoattn's (what `load` reads)
DTYPES = {"F16": "f16", "BF16": "bf16"}
# What `draw` makes: E4M3 cases come with their descales.
DRAW_DTYPES = ("f16", "bf16", "e4m3", "e4m3f16")
# The E4M3 dtypes (the same inputs and descales; O in bf16, or f16 for e4m3f16).
FP8_DTYPES = ("e4m3", "e4m3f16")
# The output's dtype per dtype: E4M3 attention writes bf16 (evoattn's and the peers'), or f16.
OUTPUT_DTYPES = {"f16": "f16", "bf16": "bf16", "e4m3": "bf16", "e4m3f16": "f16"}
LAYOUTS = ("bhsd", "bshd")
CAUSAL = ("none", "top-left", "bottom-right")
# The peers that take E4M3 inputs; every other peer takes f16 and bf16 ones.
FP8_PEERS = ("cudnn-fp8",)


@dataclass(frozen=True)
class CaseSpec:
    b: int
    h: int
    hkv: int
    sq: int
    sk: int
    d: int
    dtype: str
    layout: str
    causal: str
    scale: float

    def dims(self, heads: int, seq: int) -> tuple[int, int, int, int]:
        """Shape of a [B, heads, seq, D] tensor in this case's layout."""
        if self.layout == "bhsd":
            return (self.b, heads, seq, self.d)
        return (self.b, seq, heads, self.d)

    def visible_pairs(self) -> int:
        """(query, key) pairs the mask lets through, per (batch, head): evoattn's FLOP count."""
        if self.causal == "none":
            return self.sq * self.sk
        offset = 0 if self.causal == "top-left" else self.sk - self.sq
        return sum(min(max(i + offset + 1, 0), self.sk) for i in range(self.sq))

    def flops(self) -> float:
        """4·B·H·(visible pairs)·D, the FlashAttention convention (softmax not counted)."""
        return 4.0 * self.b * self.h * self.visible_pairs() * self.d

    @property
    def output_dtype(self) -> str:
        return OUTPUT_DTYPES[self.dtype]

    def describe(self) -> dict[str, object]:
        return {
            "shape": {"b": self.b, "h": self.h, "hkv": self.hkv, "sq": self.sq, "sk": self.sk, "d": self.d},
            "dtype": self.dtype,
            "layout": self.layout,
            "causal": self.causal,
            "scale": self.scale,
        }


def read_case(
    path: str, layout: str, causal: str, scale: float
) -> tuple[CaseSpec, dict[str, safetensors_io.RawTensor]]:
    """The case in `path` and its raw q, k, v. Every problem is a RequestError naming the tensor."""
    try:
        tensors = safetensors_io.read(path)
    except OSError as e:
        raise RequestError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise RequestError(str(e)) from None
    missing = [n for n in ("q", "k", "v") if n not in tensors]
    if missing:
        raise RequestError(f"{path} has no tensor '{missing[0]}' (expected q, k and v)")
    q, k, v = tensors["q"], tensors["k"], tensors["v"]
    if q.dtype not in DTYPES:
        raise RequestError(f"{path}: q is {q.dtype.lower()}, expected f16 or bf16")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise RequestError(f"{path}: {name} is {t.dtype.lower()}, expected {DTYPES[q.dtype]} like q")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) != 4:
            raise RequestError(f"{path}: {name} has rank {len(t.shape)}, expected 4 ({layout})")

    def logical(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """(batch, heads, rows, head dim) of a shape in `layout` order."""
        b, x, y, d = shape
        return (b, x, y, d) if layout == "bhsd" else (b, y, x, d)

    b, h, sq, d = logical(q.shape)
    _, hkv, sk, _ = logical(k.shape)
    spec = CaseSpec(b, h, hkv, sq, sk, d, DTYPES[q.dtype], layout, causal, scale)
    kv_shape = spec.dims(hkv, sk)
    for name, t in (("k", k), ("v", v)):
        if t.shape != kv_shape:
            raise RequestError(f"{path}: {name} has shape {list(t.shape)}, expected {list(kv_shape)}")
    if hkv == 0 or h % hkv != 0:
        raise RequestError(f"{path}: {hkv} KV heads do not divide {h} query heads")
    return spec, {"q": q, "k": k, "v": v}


@dataclass(frozen=True)
class Descales:
    """An E4M3 case's descales, each [B * Hkv] (a dequantized value is its E4M3 value times the
    descale of its batch and KV head)."""

    q: tuple[float, ...]
    k: tuple[float, ...]
    v: tuple[float, ...]

    def per_tensor(self) -> tuple[float, float, float] | None:
        """One descale per tensor when every group of each shares it, else None."""
        if all(len(set(d)) == 1 for d in (self.q, self.k, self.v)):
            return self.q[0], self.k[0], self.v[0]
        return None


PER_TENSOR_ONLY = (
    "cuDNN's FP8 SDPA takes one descale per tensor; this case has one per (batch, KV head) "
    "(evoattn bench draws per-tensor descales when cudnn-fp8 is among the peers)"
)


def dtype_refusal(spec: CaseSpec, peer: str, descales: Descales | None) -> str | None:
    """Why `peer` does not run this case for its dtype or its descales, or None when it does."""
    if spec.dtype in FP8_DTYPES and peer not in FP8_PEERS:
        return f"{peer} takes f16 or bf16 inputs; this case is E4M3 (FP8 peers: {', '.join(FP8_PEERS)})"
    if spec.dtype not in FP8_DTYPES and peer in FP8_PEERS:
        return f"{peer} takes E4M3 inputs; this case is {spec.dtype}"
    if peer == "cudnn-fp8" and descales is not None and descales.per_tensor() is None:
        return PER_TENSOR_ONLY
    return None
