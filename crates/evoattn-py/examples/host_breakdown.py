"""Where the host time of one evoattn.attention call goes: each piece of the eager path timed
alone (µs per call, median of rounds), with the GPU held busy so no piece waits for it.

    python3 host_breakdown.py [B,H,S,D]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import evoattn
from evoattn import _api

CALLS = 200
ROUNDS = 15


def us(fn) -> float:
    samples = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        torch.cuda._sleep(40_000_000)
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter() - start) / CALLS * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def us_each(fn) -> float:
    """Each call timed alone, the GPU running the queue meanwhile (the CLI's host-cost method)."""
    samples = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        for _ in range(CALLS // 4):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def main() -> int:
    b, h, s, d = map(int, (sys.argv[1] if len(sys.argv) > 1 else "4,16,512,64").split(","))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    lib = _api.library(0)
    evoattn.attention(q, k, v)
    stream = torch._C._cuda_getCurrentRawStream(0)
    args = ((q.data_ptr(), q.shape, q.stride()), (k.data_ptr(), k.shape, k.stride()),
            (v.data_ptr(), v.shape, v.stride()), (o.data_ptr(), o.shape, o.stride()))
    dt = ("f16",) * 4
    tiny = torch.zeros(16, device="cuda")
    to_dlpack = torch._C._to_dlpack

    pieces = {
        "empty loop": lambda: None,
        "torch.empty_like(q)": lambda: torch.empty_like(q),
        "_check_tensors x3": lambda: _api._check_tensors(torch, (("q", q), ("k", k), ("v", v))),
        "data_ptr/shape/stride x4": lambda: [(t.data_ptr(), t.shape, t.stride()) for t in (q, k, v, o)],
        "current raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "describe only (_evoattn.check)": lambda: evoattn._evoattn.check("bhsd", args[0][1:], args[1][1:], args[2][1:],
                                                                          args[3][1:], dt, "none", None, False,
                                                                          "auto", None),
        "x.add_(1), tiny tensor": lambda: tiny.add_(1),
        "lib.prepare (no launch)": lambda: lib.prepare("bhsd", args[0][1:], args[1][1:], args[2][1:], args[3][1:], dt,
                                                        "none", None, False, "auto", None),
        "_to_dlpack x4": lambda: [to_dlpack(t) for t in (q, k, v, o)],
        "lib.call (4 exports, describe, launch)": lambda: lib.call(stream, to_dlpack(q), to_dlpack(k), to_dlpack(v),
                                                                   to_dlpack(o), None, "bhsd", "none", None, False,
                                                                   "auto", None),
        "_api.forward": lambda: _api.forward(q, k, v, "bhsd", "none", None, False, "auto", None),
        "evoattn.attention": lambda: evoattn.attention(q, k, v),
        "sdpa (auto)": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
    }
    print(f"host µs per call, {b},{h},{s},{d} f16, median of {ROUNDS} rounds of {CALLS}; GPU held busy")
    print(f"{'':<40} {'default':>8} {'side':>8} {'each':>8}   (default: PyTorch's legacy default stream; side: a "
          "stream of its own; each: calls timed one by one, GPU not held)")
    side = torch.cuda.Stream()
    with torch.no_grad():
        for name, fn in pieces.items():
            on_default = us(fn)
            with torch.cuda.stream(side):
                stream = torch._C._cuda_getCurrentRawStream(0)
                on_side = us(fn)
            stream = torch._C._cuda_getCurrentRawStream(0)
            print(f"{name:<40} {on_default:8.2f} {on_side:8.2f} {us_each(fn):8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
