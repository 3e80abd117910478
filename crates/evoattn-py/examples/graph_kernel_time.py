"""Kernel time of evoattn.attention called from Python, by the Rust lab's graph-mode method:
one call captured into a CUDA graph, the stream held by a sleep kernel while the samples are
enqueued (no host gap enters a sample), an L2 flush before each sample, CUDA events around each
replay. `evoattn bench --mode graph` measures the Rust path so; run both in one session and
compare medians (the kernels are the same CUBINs with the same parameters but the addresses).

    python3 graph_kernel_time.py [--samples 100] [B,H,S,D ...]   (default: the seed shapes, fp16)
"""

from __future__ import annotations

import argparse
import statistics

import torch

import evoattn

SEED = [(1, 8, 512, 64), (2, 8, 512, 64), (4, 8, 512, 64), (4, 16, 512, 64), (8, 16, 512, 64)]
FLUSH_L2_MULTIPLE = 2  # the lab's flush: twice L2, zeroed before each sample
HOLD_CYCLES_PER_SAMPLE = 200_000  # about 100 µs at the H100's clocks, as the lab's hold


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--side-stream", action="store_true",
                        help="capture and replay on a stream of its own instead of PyTorch's legacy default stream")
    parser.add_argument("shapes", nargs="*")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes] or SEED
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(FLUSH_L2_MULTIPLE * l2, dtype=torch.uint8, device="cuda")
    if args.side_stream:
        torch.cuda.set_stream(torch.cuda.Stream())
    where = "a stream of its own" if args.side_stream else "the legacy default stream"
    print(f"graph-mode kernel time through Python on {where}, µs (median of {args.samples}; stream held, L2 flushed)")
    print(f"{'shape':<16} {'causal':<10} {'median':>8} {'p10':>8} {'p90':>8}  kernel")
    for b, h, s, d in shapes:
        for causal in (False, "top-left"):
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                evoattn.attention(q, k, v, causal=causal)  # compile, load, prepare
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                evoattn.attention(q, k, v, causal=causal)
            for _ in range(10):
                graph.replay()
            torch.cuda.synchronize()
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(args.samples)]
            torch.cuda._sleep(HOLD_CYCLES_PER_SAMPLE * args.samples)
            for start, end in events:
                flush.zero_()
                start.record()
                graph.replay()
                end.record()
            torch.cuda.synchronize()
            us = sorted(start.elapsed_time(end) * 1e3 for start, end in events)
            p = lambda f: us[min(len(us) - 1, int(f * len(us)))]  # noqa: E731
            kernel = evoattn.kernel(q, k, v, causal=causal)
            print(f"{f'{b},{h},{s},{d}':<16} {str(causal):<10} {statistics.median(us):8.2f} {p(0.1):8.2f} {p(0.9):8.2f}  "
                  f"{kernel[:60]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
