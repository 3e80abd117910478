"""Which part of the oracle's graph-mode method adds ~0.4 µs to a sample against the Rust lab's?

The same evoattn kernel (same CUBIN, same problem) timed in one process under the factors in
which the two methods differ: how the graph is captured and instantiated (PyTorch's
torch.cuda.CUDAGraph, or the driver's capture with instantiate flags 0, as the Rust lab), which
stream replays it (PyTorch's legacy default stream, or a stream of its own, as the Rust lab),
how L2 is flushed before each sample (`flush.zero_()`, a PyTorch kernel, or cuMemsetD8Async, as
the Rust lab) and where O lives (the graph's pool, or a tensor allocated before capture).
Configurations are interleaved round by round; prints the median µs per configuration.

    python3 graph-method.py [--rounds 6] [--samples 100] [B,H,S,D ...]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics

import torch

import evoattn

HOLD_CYCLES_PER_SAMPLE = 200_000
FLUSH_L2_MULTIPLE = 2
CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1

cuda = ctypes.CDLL("libcuda.so.1")


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed: CUresult {rc}")


class DriverGraph:
    """One call captured on `stream` by the driver and instantiated with flags 0."""

    def __init__(self, call, stream: torch.cuda.Stream):
        self.stream = stream
        graph = ctypes.c_void_p()
        check(cuda.cuStreamBeginCapture_v2(ctypes.c_void_p(stream.cuda_stream), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture")
        with torch.cuda.stream(stream):
            call()
        check(cuda.cuStreamEndCapture(ctypes.c_void_p(stream.cuda_stream), ctypes.byref(graph)), "cuStreamEndCapture")
        self.exec = ctypes.c_void_p()
        check(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), graph, ctypes.c_ulonglong(0)),
              "cuGraphInstantiateWithFlags")

    def replay(self, stream: torch.cuda.Stream) -> None:
        check(cuda.cuGraphLaunch(self.exec, ctypes.c_void_p(stream.cuda_stream)), "cuGraphLaunch")


def torch_graph(call):
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        static = call()
    return graph, static


def measure(replay, stream: torch.cuda.Stream, flush: torch.Tensor, memset: bool, samples: int) -> float:
    with torch.cuda.stream(stream):
        for _ in range(5):
            replay(stream)
        torch.cuda._sleep(HOLD_CYCLES_PER_SAMPLE * samples)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(samples)]
        for start, end in events:
            if memset:
                check(cuda.cuMemsetD8Async(ctypes.c_ulonglong(flush.data_ptr()), ctypes.c_ubyte(0),
                                           ctypes.c_size_t(flush.numel()), ctypes.c_void_p(stream.cuda_stream)),
                      "cuMemsetD8Async")
            else:
                flush.zero_()
            start.record(stream)
            replay(stream)
            end.record(stream)
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("shapes", nargs="*")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes] or [(1, 8, 512, 64), (8, 16, 512, 64)]
    flush = torch.empty(FLUSH_L2_MULTIPLE * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8,
                        device="cuda")
    legacy = torch.cuda.default_stream()
    own = torch.cuda.Stream()
    print(f"graph-mode sample, µs: median of {args.samples} samples per round, median over {args.rounds} rounds")
    for b, h, s, d in shapes:
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
        o = torch.empty_like(q)
        evoattn.attention(q, k, v)  # compile, load, prepare
        torch.cuda.synchronize()
        tg_pool, _static = torch_graph(lambda: evoattn.attention(q, k, v))
        tg_out, _ = torch_graph(lambda: evoattn.attention(q, k, v, out=o))
        dg = DriverGraph(lambda: evoattn.attention(q, k, v, out=o), torch.cuda.Stream())
        configs = {
            # name: (replay(stream), stream, memset flush)
            "torch graph, O in pool, legacy, zero_ (oracle)": (lambda st: tg_pool.replay(), legacy, False),
            "torch graph, O before, legacy, zero_": (lambda st: tg_out.replay(), legacy, False),
            "torch graph, O in pool, legacy, memset": (lambda st: tg_pool.replay(), legacy, True),
            "driver graph f0, legacy, zero_": (dg.replay, legacy, False),
            "driver graph f0, legacy, memset": (dg.replay, legacy, True),
            "driver graph f0, own stream, zero_": (dg.replay, own, False),
            "driver graph f0, own stream, memset (Rust lab)": (dg.replay, own, True),
        }
        medians = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, (replay, stream, memset) in configs.items():
                medians[name].append(measure(replay, stream, flush, memset, args.samples))
        print(f"{b},{h},{s},{d} f16 none: {evoattn.kernel(q, k, v)}")
        for name, values in medians.items():
            print(f"  {name:<50} {statistics.median(values):8.2f}   rounds {' '.join(f'{x:.2f}' for x in values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
